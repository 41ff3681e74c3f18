//! Kafka Streams' `KStreamSessionWindowAggregate`: a record starts a
//! session or extends (and merges) the sessions within the gap of it.

use std::sync::Arc;

use kstreams_record::{Headers, Record, Timestamp};
use kstreams_state::{SessionStoreHandle, Window, Windowed};
use kstreams_time::{expiry, SessionWindows};

use crate::change::Change;
use crate::operators::window_output::{WindowedOutput, WindowedSetup};
use crate::operators::Fold;
use crate::{Processor, ProcessorContext, ProcessorError};

/// Merges the aggregates of two sessions.
pub(crate) type SessionMerger<K, A> = Arc<dyn Fn(&K, A, A) -> A + Send + Sync>;

/// The aggregate a session starts from before sessions are merged into it
/// (none for reduce).
pub(crate) type SessionInitializer<A> = Arc<dyn Fn() -> A + Send + Sync>;

/// What a session aggregation is made of.
pub(crate) struct SessionFns<K, V, A> {
    pub(crate) fold: Fold<K, V, A>,
    pub(crate) merge: SessionMerger<K, A>,
    pub(crate) initial: Option<SessionInitializer<A>>,
}

impl<K, V, A> Clone for SessionFns<K, V, A> {
    fn clone(&self) -> Self {
        SessionFns {
            fold: self.fold.clone(),
            merge: self.merge.clone(),
            initial: self.initial.clone(),
        }
    }
}

/// A session change as a record: timestamped with the session's end.
fn session_change<K, A>(
    change: kstreams_state::CachedChange<Windowed<K>, A>,
) -> Record<Windowed<K>, Change<A>> {
    let timestamp = change.key.window.end;
    Record {
        key: change.key,
        value: Change::new(change.new_value, change.old_value),
        timestamp,
        headers: change.headers,
    }
}

/// Kafka Streams' `KStreamSessionWindowAggregate`: a record starts a
/// session or extends (and merges) the sessions within the gap of it.
pub(crate) struct SessionAggregate<K, V, A> {
    fns: SessionFns<K, V, A>,
    windows: SessionWindows,
    output: WindowedOutput<K, V, A, A>,
    store: Option<SessionStoreHandle<K, A>>,
}

impl<K: Clone + 'static, V: Clone + 'static, A: Clone + 'static> SessionAggregate<K, V, A> {
    pub(crate) fn new(
        fns: SessionFns<K, V, A>,
        windows: SessionWindows,
        setup: WindowedSetup<K, V>,
    ) -> Self {
        SessionAggregate {
            fns,
            windows,
            output: WindowedOutput::new(setup, session_change),
            store: None,
        }
    }

    /// Forwards the sessions that ended in `[last_close, close_time)`: closed
    /// now, by session end.
    fn emit_closed(
        &self,
        ctx: &mut ProcessorContext<'_, Windowed<K>, Change<A>>,
        last_close: Timestamp,
        close_time: Timestamp,
        headers: &Headers,
    ) -> Result<(), ProcessorError> {
        let store = self.store.as_ref().ok_or("session store not open")?;
        let mut closed = store
            .borrow()
            // By end time, as Kafka Streams' `fetchSessions`: a session
            // ending exactly at the store's retention horizon is still
            // emitted, though a lookup by key would no longer find it.
            .find_sessions_ending_in(last_close.max(0), close_time.saturating_sub(1))?
            .collect::<Result<Vec<_>, _>>()?;
        closed.retain(|(w, _)| {
            w.window.end >= last_close && expiry::session_closed(w.window.end, close_time)
        });
        closed.sort_by_key(|(w, _)| w.window.end);
        let closed = closed.into_iter().map(|(windowed, value)| {
            let timestamp = windowed.window.end;
            (windowed, value, timestamp)
        });
        self.output.emit_final(ctx, closed, headers)
    }
}

impl<K: Clone + 'static, V: Clone + 'static, A: Clone + 'static>
    Processor<K, V, Windowed<K>, Change<A>> for SessionAggregate<K, V, A>
{
    fn init(
        &mut self,
        ctx: &mut ProcessorContext<'_, Windowed<K>, Change<A>>,
    ) -> Result<(), ProcessorError> {
        let store: SessionStoreHandle<K, A> = ctx.get_state_store(self.output.store_name())?;
        self.output
            .attach(|listener, send_old| store.borrow_mut().set_flush_listener(listener, send_old));
        self.store = Some(store);
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, Windowed<K>, Change<A>>,
        record: Record<K, V>,
    ) -> Result<(), ProcessorError> {
        let timestamp = record.timestamp;
        let observed_stream_time = self.output.observe(timestamp);
        let grace = self.windows.grace_ms();
        let gap = self.windows.inactivity_gap_ms();
        // A session is closed once no accepted record can reach it any
        // more: a record within the gap after its end would still merge
        // into it (Kafka Streams since KAFKA-12718).
        let close_time = expiry::session_close_time(observed_stream_time, grace, gap);
        // Before this record's writes, which may expire closed sessions.
        if let Some(last_close) = self.output.closing(ctx, close_time) {
            self.emit_closed(ctx, last_close, close_time, &record.headers)?;
        }
        let store = self.store.as_ref().ok_or("session store not open")?;
        let overlapping = store
            .borrow()
            .find_sessions(
                &record.key,
                timestamp.saturating_sub(gap),
                timestamp.saturating_add(gap),
            )?
            .collect::<Result<Vec<_>, _>>()?;
        let mut merged_window = Window::new(timestamp, timestamp);
        let mut agg: Option<A> = self.fns.initial.as_ref().map(|init| init());
        for (session, value) in &overlapping {
            agg = Some(match agg {
                None => value.clone(),
                Some(a) => (self.fns.merge)(&record.key, a, value.clone()),
            });
            merged_window = Window::new(
                merged_window.start.min(session.window.start),
                merged_window.end.max(session.window.end),
            );
        }
        if expiry::session_closed(merged_window.end, close_time) {
            return self.output.reject_late(ctx, &record, merged_window, grace);
        }
        let no_headers = Headers::new();
        if merged_window != Window::new(timestamp, timestamp) {
            for (session, value) in overlapping {
                store.borrow_mut().remove(&session)?;
                let end = session.window.end;
                self.output
                    .update(ctx, Some(session), None, Some(value), end, &no_headers)?;
            }
        }
        let new_agg = (self.fns.fold)(&record.key, record.value, agg);
        let key = Windowed::new(record.key, merged_window);
        store.borrow_mut().put(key.clone(), Some(new_agg.clone()))?;
        let end = key.window.end;
        self.output
            .update(ctx, Some(key), Some(new_agg), None, end, &no_headers)?;
        Ok(())
    }

    fn flush(
        &mut self,
        ctx: &mut ProcessorContext<'_, Windowed<K>, Change<A>>,
    ) -> Result<(), ProcessorError> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        self.output.flush(ctx, || store.borrow_mut().flush_cache())
    }
}
