//! Kafka Streams' `KStreamWindowAggregate`: each record updates every time
//! window it falls into that has not closed.

use kstreams_record::{Headers, Record, Timestamp};
use kstreams_state::{TimestampedWindowStoreHandle, ValueAndTimestamp, Window, Windowed};
use kstreams_time::{EmitStrategy, FixedSizeWindows};

use crate::change::Change;
use crate::operators::forwarder::{sends_old, timestamped_change, CacheForwarder, OldValuesFlag};
use crate::operators::late_records::reject_late;
use crate::operators::late_records::LateRecordSink;
use crate::operators::Fold;
use crate::{Processor, ProcessorContext, ProcessorError};

pub(crate) struct OpenWindowStore<K, A> {
    store: TimestampedWindowStoreHandle<K, A>,
    forwarder: Option<CacheForwarder<Windowed<K>, ValueAndTimestamp<A>>>,
}

/// Kafka Streams' `KStreamWindowAggregate`: each record updates every
/// window it falls into that has not closed (window end + grace after
/// stream time); records for closed windows are late.
pub(crate) struct WindowAggregate<K, V, A> {
    pub(crate) fold: Fold<K, V, A>,
    pub(crate) windows: FixedSizeWindows,
    pub(crate) emit: EmitStrategy,
    pub(crate) store_name: String,
    pub(crate) send_old: OldValuesFlag,
    pub(crate) late: Option<LateRecordSink<K, V>>,
    pub(crate) observed_stream_time: Timestamp,
    pub(crate) last_emitted_close: Timestamp,
    pub(crate) store: Option<OpenWindowStore<K, A>>,
}

impl<K: Clone + 'static, V: Clone + 'static, A: Clone + 'static>
    Processor<K, V, Windowed<K>, Change<A>> for WindowAggregate<K, V, A>
{
    fn init(
        &mut self,
        ctx: &mut ProcessorContext<'_, Windowed<K>, Change<A>>,
    ) -> Result<(), ProcessorError> {
        let store: TimestampedWindowStoreHandle<K, A> = ctx.get_state_store(&self.store_name)?;
        // Final results are read back from the store when windows close;
        // nothing is forwarded on flush.
        let forwarder = match self.emit {
            EmitStrategy::OnWindowUpdate => {
                let send_old = sends_old(&self.send_old);
                let forwarder =
                    CacheForwarder::attach(|l| store.borrow_mut().set_flush_listener(l, send_old));
                Some(forwarder)
            }
            EmitStrategy::OnWindowClose => None,
        };
        self.store = Some(OpenWindowStore { store, forwarder });
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
        let close_time = self.observed_stream_time - grace;
        if self.emit == EmitStrategy::OnWindowClose {
            // Before this record's writes: a write can advance the store's
            // retention past windows that close with this very record. The
            // windows written below are open, so the output is the same.
            self.emit_closed(ctx, close_time, &record.headers)?;
        }
        let open = self.store.as_ref().ok_or("window store not open")?;
        for (start, end) in self.windows.windows_for(timestamp) {
            let window = Window::new(start, end);
            if end <= close_time {
                reject_late(
                    ctx,
                    self.late.as_ref(),
                    &record,
                    window,
                    self.observed_stream_time,
                    grace,
                )?;
                continue;
            }
            let old = open.store.borrow().fetch(&record.key, start)?;
            let (old_agg, new_ts) = match old {
                Some(o) => (Some(o.value), timestamp.max(o.timestamp)),
                None => (None, timestamp),
            };
            let new_agg = (self.fold)(&record.key, record.value.clone(), old_agg.clone());
            open.store.borrow_mut().put(
                record.key.clone(),
                Some(ValueAndTimestamp::make(new_agg.clone(), new_ts)),
                start,
            )?;
            match &open.forwarder {
                Some(f) if f.caching() => f.drain(ctx, timestamped_change)?,
                Some(_) => {
                    let old_agg = if sends_old(&self.send_old) {
                        old_agg
                    } else {
                        None
                    };
                    ctx.forward(Record {
                        key: Windowed::new(record.key.clone(), window),
                        value: Change::new(Some(new_agg), old_agg),
                        timestamp: new_ts,
                        headers: record.headers.clone(),
                    })?;
                }
                None => {}
            }
        }
        Ok(())
    }

    fn flush(
        &mut self,
        ctx: &mut ProcessorContext<'_, Windowed<K>, Change<A>>,
    ) -> Result<(), ProcessorError> {
        if let Some(OpenWindowStore {
            store,
            forwarder: Some(f),
        }) = &self.store
        {
            if f.caching() {
                store.borrow_mut().flush_cache()?;
                f.drain(ctx, timestamped_change)?;
            }
        }
        Ok(())
    }
}

impl<K: Clone + 'static, V: Clone + 'static, A: Clone + 'static> WindowAggregate<K, V, A> {
    /// Forwards each window that closed since the last call (its end in
    /// `(last close, close_time]`), by window start.
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
        let size = self.windows.size_ms();
        let from = self
            .last_emitted_close
            .saturating_sub(size)
            .saturating_add(1)
            .max(0);
        let to = close_time.saturating_sub(size);
        self.last_emitted_close = close_time;
        ctx.set_last_emitted_close(&self.store_name, close_time);
        if to < from {
            return Ok(());
        }
        let open = self.store.as_ref().ok_or("window store not open")?;
        let mut closed = open
            .store
            .borrow()
            .fetch_all(from, to)?
            .collect::<Result<Vec<_>, _>>()?;
        closed.sort_by_key(|(windowed, _)| windowed.window.start);
        for (windowed, value) in closed {
            ctx.forward(Record {
                key: windowed,
                value: Change::new(Some(value.value), None),
                timestamp: value.timestamp,
                headers: headers.clone(),
            })?;
        }
        Ok(())
    }
}
