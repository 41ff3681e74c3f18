//! Kafka Streams' `KStreamSessionWindowAggregate`: a record starts a
//! session or extends (and merges) the sessions within the gap of it.

use std::sync::Arc;

use kstreams_record::{Headers, Record, Timestamp};
use kstreams_state::{SessionStoreHandle, Window, Windowed};
use kstreams_time::{EmitStrategy, SessionWindows};

use crate::change::Change;
use crate::operators::forwarder::{sends_old, CacheForwarder, OldValuesFlag};
use crate::operators::late_records::reject_late;
use crate::operators::late_records::LateRecordSink;
use crate::operators::Fold;
use crate::{Processor, ProcessorContext, ProcessorError};

/// Merges the aggregates of two sessions.
pub(crate) type SessionMerger<K, A> = Arc<dyn Fn(&K, A, A) -> A + Send + Sync>;

/// What a session aggregation is made of.
pub(crate) struct SessionFns<K, V, A> {
    pub(crate) fold: Fold<K, V, A>,
    pub(crate) merge: SessionMerger<K, A>,
    pub(crate) initial: Option<SessionInitializer<A>>,
}

/// The aggregate a session starts from before sessions are merged into it
/// (none for reduce).
pub(crate) type SessionInitializer<A> = Arc<dyn Fn() -> A + Send + Sync>;

pub(crate) struct OpenSessionStore<K, A> {
    store: SessionStoreHandle<K, A>,
    forwarder: Option<CacheForwarder<Windowed<K>, A>>,
}

/// A session change as a record: timestamped with the session's end.
pub(crate) fn session_change<K, A>(
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
    pub(crate) fold: Fold<K, V, A>,
    pub(crate) merge: SessionMerger<K, A>,
    pub(crate) initial: Option<SessionInitializer<A>>,
    pub(crate) windows: SessionWindows,
    pub(crate) emit: EmitStrategy,
    pub(crate) store_name: String,
    pub(crate) send_old: OldValuesFlag,
    pub(crate) late: Option<LateRecordSink<K, V>>,
    pub(crate) observed_stream_time: Timestamp,
    pub(crate) last_emitted_close: Timestamp,
    pub(crate) store: Option<OpenSessionStore<K, A>>,
}

impl<K: Clone + 'static, V: Clone + 'static, A: Clone + 'static> SessionAggregate<K, V, A> {
    fn forward_update(
        &self,
        ctx: &mut ProcessorContext<'_, Windowed<K>, Change<A>>,
        key: Windowed<K>,
        old: Option<A>,
        new: Option<A>,
    ) -> Result<(), ProcessorError> {
        let Some(open) = &self.store else {
            return Ok(());
        };
        match &open.forwarder {
            Some(f) if f.caching() => Ok(f.drain(ctx, session_change)?),
            Some(_) => {
                let old = if sends_old(&self.send_old) { old } else { None };
                let timestamp = key.window.end;
                ctx.forward(Record {
                    key,
                    value: Change::new(new, old),
                    timestamp,
                    headers: Headers::new(),
                })?;
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn emit_closed(
        &mut self,
        ctx: &mut ProcessorContext<'_, Windowed<K>, Change<A>>,
        close_time: Timestamp,
        headers: &Headers,
    ) -> Result<(), ProcessorError> {
        if let Some(committed) = ctx.last_emitted_close(&self.store_name) {
            self.last_emitted_close = self.last_emitted_close.max(committed);
        }
        if close_time <= self.last_emitted_close {
            return Ok(());
        }
        let from = self.last_emitted_close;
        self.last_emitted_close = close_time;
        ctx.set_last_emitted_close(&self.store_name, close_time);
        let open = self.store.as_ref().ok_or("session store not open")?;
        // Sessions that ended in [last close, close time): closed now.
        let mut closed = open
            .store
            .borrow()
            .find_sessions_key_range(None, None, from.max(0), close_time)?
            .collect::<Result<Vec<_>, _>>()?;
        closed.retain(|(w, _)| w.window.end >= from && w.window.end < close_time);
        closed.sort_by_key(|(w, _)| w.window.end);
        for (windowed, value) in closed {
            let timestamp = windowed.window.end;
            ctx.forward(Record {
                key: windowed,
                value: Change::new(Some(value), None),
                timestamp,
                headers: headers.clone(),
            })?;
        }
        Ok(())
    }
}

impl<K: Clone + 'static, V: Clone + 'static, A: Clone + 'static>
    Processor<K, V, Windowed<K>, Change<A>> for SessionAggregate<K, V, A>
{
    fn init(
        &mut self,
        ctx: &mut ProcessorContext<'_, Windowed<K>, Change<A>>,
    ) -> Result<(), ProcessorError> {
        let store: SessionStoreHandle<K, A> = ctx.get_state_store(&self.store_name)?;
        let forwarder = match self.emit {
            EmitStrategy::OnWindowUpdate => {
                let send_old = sends_old(&self.send_old);
                Some(CacheForwarder::attach(|l| {
                    store.borrow_mut().set_flush_listener(l, send_old)
                }))
            }
            EmitStrategy::OnWindowClose => None,
        };
        self.store = Some(OpenSessionStore { store, forwarder });
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, Windowed<K>, Change<A>>,
        record: Record<K, V>,
    ) -> Result<(), ProcessorError> {
        let timestamp = record.timestamp;
        self.observed_stream_time = self.observed_stream_time.max(timestamp);
        let grace = self.windows.grace_ms();
        let gap = self.windows.inactivity_gap_ms();
        // A session is closed once no accepted record can reach it any
        // more: a record within the gap after its end would still merge
        // into it (Kafka Streams since KAFKA-12718).
        let close_time = self.observed_stream_time - grace - gap;
        if self.emit == EmitStrategy::OnWindowClose {
            // Before this record's writes, which may expire closed sessions.
            self.emit_closed(ctx, close_time, &record.headers)?;
        }
        let store = self
            .store
            .as_ref()
            .ok_or("session store not open")?
            .store
            .clone();
        let overlapping = store
            .borrow()
            .find_sessions(
                &record.key,
                timestamp.saturating_sub(gap),
                timestamp.saturating_add(gap),
            )?
            .collect::<Result<Vec<_>, _>>()?;
        let mut merged_window = Window::new(timestamp, timestamp);
        let mut agg: Option<A> = self.initial.as_ref().map(|init| init());
        for (session, value) in &overlapping {
            agg = Some(match agg {
                None => value.clone(),
                Some(a) => (self.merge)(&record.key, a, value.clone()),
            });
            merged_window = Window::new(
                merged_window.start.min(session.window.start),
                merged_window.end.max(session.window.end),
            );
        }
        if merged_window.end < close_time {
            return reject_late(
                ctx,
                self.late.as_ref(),
                &record,
                merged_window,
                self.observed_stream_time,
                grace,
            );
        }
        if merged_window != Window::new(timestamp, timestamp) {
            for (session, value) in overlapping {
                store.borrow_mut().remove(&session)?;
                self.forward_update(ctx, session, Some(value), None)?;
            }
        }
        let new_agg = (self.fold)(&record.key, record.value, agg);
        let key = Windowed::new(record.key, merged_window);
        store.borrow_mut().put(key.clone(), Some(new_agg.clone()))?;
        self.forward_update(ctx, key, None, Some(new_agg))?;
        Ok(())
    }

    fn flush(
        &mut self,
        ctx: &mut ProcessorContext<'_, Windowed<K>, Change<A>>,
    ) -> Result<(), ProcessorError> {
        if let Some(OpenSessionStore {
            store,
            forwarder: Some(f),
        }) = &self.store
        {
            if f.caching() {
                store.borrow_mut().flush_cache()?;
                f.drain(ctx, session_change)?;
            }
        }
        Ok(())
    }
}
