//! Kafka Streams' `KStreamWindowAggregate`: each record updates every time
//! window it falls into that has not closed.

use kstreams_record::{Headers, Record, Timestamp};
use kstreams_state::{TimestampedWindowStoreHandle, ValueAndTimestamp, Window, Windowed};
use kstreams_time::{expiry, FixedSizeWindows};

use crate::change::Change;
use crate::operators::forwarder::timestamped_change;
use crate::operators::window_output::{WindowedOutput, WindowedSetup};
use crate::operators::AggregateFold;
use crate::{Processor, ProcessorContext, ProcessorError};

/// Kafka Streams' `KStreamWindowAggregate`: each record updates every
/// window it falls into that has not closed (window end + grace after
/// stream time); records for closed windows are late.
pub(crate) struct WindowAggregate<K, V, A> {
    fns: AggregateFold<K, V, A>,
    windows: FixedSizeWindows,
    output: WindowedOutput<K, V, A, ValueAndTimestamp<A>>,
    store: Option<TimestampedWindowStoreHandle<K, A>>,
}

impl<K: Clone + 'static, V: Clone + 'static, A: Clone + 'static> WindowAggregate<K, V, A> {
    pub(crate) fn new(
        fns: AggregateFold<K, V, A>,
        windows: FixedSizeWindows,
        setup: WindowedSetup<K, V>,
    ) -> Self {
        WindowAggregate {
            fns,
            windows,
            output: WindowedOutput::new(setup, timestamped_change),
            store: None,
        }
    }

    /// Forwards each window that closed since the last emission (its end in
    /// `(last_close, close_time]`), by window start.
    fn emit_closed(
        &self,
        ctx: &mut ProcessorContext<'_, Windowed<K>, Change<A>>,
        last_close: Timestamp,
        close_time: Timestamp,
        headers: &Headers,
    ) -> Result<(), ProcessorError> {
        let size = self.windows.size_ms();
        let from = last_close.saturating_sub(size).saturating_add(1).max(0);
        let to = close_time.saturating_sub(size);
        if to < from {
            return Ok(());
        }
        let store = self.store.as_ref().ok_or("window store not open")?;
        let mut closed = store
            .borrow()
            .fetch_all(from, to)?
            .collect::<Result<Vec<_>, _>>()?;
        closed.sort_by_key(|(windowed, _)| windowed.window.start);
        let closed = closed
            .into_iter()
            .map(|(windowed, value)| (windowed, value.value, value.timestamp));
        self.output.emit_final(ctx, closed, headers)
    }
}

impl<K: Clone + 'static, V: Clone + 'static, A: Clone + 'static> WindowAggregate<K, V, A> {
    /// Folds one record into one of its windows, and forwards or caches
    /// the window's new aggregate.
    #[allow(clippy::too_many_arguments)]
    fn update_window(
        &self,
        ctx: &mut ProcessorContext<'_, Windowed<K>, Change<A>>,
        store: &TimestampedWindowStoreHandle<K, A>,
        window: Window,
        key: K,
        value: V,
        timestamp: Timestamp,
        headers: &Headers,
    ) -> Result<(), ProcessorError> {
        let old = store.borrow().fetch(&key, window.start)?;
        let (current, new_ts) = match old {
            Some(o) => (Some(o.value), timestamp.max(o.timestamp)),
            None => (None, timestamp),
        };
        // A new window's old value is its initial aggregate, as Kafka
        // Streams forwards it.
        let old_agg = self.fns.start(current);
        let new_agg = (self.fns.fold)(&key, value, old_agg.clone());
        let windowed = self
            .output
            .forwards_each_update()
            .then(|| Windowed::new(key.clone(), window));
        store.borrow_mut().put(
            key,
            Some(ValueAndTimestamp::make(new_agg.clone(), new_ts)),
            window.start,
        )?;
        self.output
            .update(ctx, windowed, Some(new_agg), old_agg, new_ts, headers)
    }
}

impl<K: Clone + 'static, V: Clone + 'static, A: Clone + 'static>
    Processor<K, V, Windowed<K>, Change<A>> for WindowAggregate<K, V, A>
{
    fn init(
        &mut self,
        ctx: &mut ProcessorContext<'_, Windowed<K>, Change<A>>,
    ) -> Result<(), ProcessorError> {
        let store: TimestampedWindowStoreHandle<K, A> =
            ctx.get_state_store(self.output.store_name())?;
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
        let grace = self.windows.grace_ms();
        let close_time = expiry::window_close_time(self.output.observe(timestamp), grace);
        // Before this record's writes: a write can advance the store's
        // retention past windows that close with this very record, and
        // their final results would be lost. Kafka Streams 4.4 writes first
        // (`KStreamWindowAggregate`) and does lose them when stream time
        // jumps past several windows at once; emit-on-window-close promises
        // every window's final result, so kstreams follows the promise
        // (test: emit_on_window_close_keeps_every_window_a_jump_in_stream_time_closes).
        if let Some(last_close) = self.output.closing(ctx, close_time) {
            self.emit_closed(ctx, last_close, close_time, &record.headers)?;
        }
        let store = self.store.as_ref().ok_or("window store not open")?;
        let mut windows = self.windows.windows_containing(timestamp).peekable();
        while let Some((start, end)) = windows.next() {
            let window = Window::new(start, end);
            if expiry::time_window_closed(end, close_time) {
                self.output.reject_late(ctx, &record, window, grace)?;
                continue;
            }
            if windows.peek().is_none() {
                // The record's last window: its key and value move in
                // (a tumbling window is every record's only one).
                let Record {
                    key,
                    value,
                    headers,
                    ..
                } = record;
                return self.update_window(ctx, store, window, key, value, timestamp, &headers);
            }
            let (key, value) = (record.key.clone(), record.value.clone());
            self.update_window(ctx, store, window, key, value, timestamp, &record.headers)?;
        }
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
