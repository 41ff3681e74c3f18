//! Sliding-window aggregation (KIP-450): Kafka Streams'
//! `KStreamSlidingWindowAggregate`, walking a key's windows backwards as
//! Kafka Streams does when the store can (ours always can), so that updates
//! come out in the same order.
//!
//! A sliding window `[start, start + difference]` (both ends inclusive)
//! exists for each distinct set of records within `difference` of each
//! other: each record has a left window ending at it and, when a later
//! record is within reach, a right window starting just after it.

use std::collections::HashSet;

use kstreams_record::{Record, Timestamp};
use kstreams_state::{TimestampedWindowStoreHandle, ValueAndTimestamp, Window, Windowed};
use kstreams_time::{expiry, SlidingWindows};

use crate::change::Change;
use crate::operators::forwarder::timestamped_change;
use crate::operators::window_output::{WindowedOutput, WindowedSetup};
use crate::operators::AggregateFold;
use crate::{Processor, ProcessorContext, ProcessorError};

type Ctx<'a, 'b, K, A> = &'a mut ProcessorContext<'b, Windowed<K>, Change<A>>;

pub(crate) struct SlidingAggregate<K, V, A> {
    fns: AggregateFold<K, V, A>,
    windows: SlidingWindows,
    output: WindowedOutput<K, V, A, ValueAndTimestamp<A>>,
    store: Option<TimestampedWindowStoreHandle<K, A>>,
}

/// What the walk over a key's existing windows found.
struct Found<A> {
    starts: HashSet<Timestamp>,
    left_aggregate: Option<ValueAndTimestamp<A>>,
    right_aggregate: Option<ValueAndTimestamp<A>>,
    left_exists: bool,
    right_exists: bool,
    previous_record: Option<Timestamp>,
}

impl<A> Default for Found<A> {
    fn default() -> Self {
        Found {
            starts: HashSet::new(),
            left_aggregate: None,
            right_aggregate: None,
            left_exists: false,
            right_exists: false,
            previous_record: None,
        }
    }
}

impl<K: Clone + 'static, V: Clone + 'static, A: Clone + 'static> SlidingAggregate<K, V, A> {
    pub(crate) fn new(
        fns: AggregateFold<K, V, A>,
        windows: SlidingWindows,
        setup: WindowedSetup<K, V>,
    ) -> Self {
        SlidingAggregate {
            fns,
            windows,
            output: WindowedOutput::new(setup, timestamped_change),
            store: None,
        }
    }

    fn store(&self) -> Result<TimestampedWindowStoreHandle<K, A>, ProcessorError> {
        Ok(self.store.clone().ok_or("window store not open")?)
    }

    fn difference(&self) -> i64 {
        self.windows.time_difference_ms()
    }

    /// Writes a window's aggregate and forwards it (or lets the cache do so).
    fn put_and_forward(
        &self,
        ctx: Ctx<'_, '_, K, A>,
        key: &K,
        window: Window,
        value: ValueAndTimestamp<A>,
        old: Option<A>,
        headers: &kstreams_record::Headers,
    ) -> Result<(), ProcessorError> {
        let store = self.store()?;
        store
            .borrow_mut()
            .put(key.clone(), Some(value.clone()), window.start)?;
        self.output.update(
            ctx,
            self.output
                .forwards_each_update()
                .then(|| Windowed::new(key.clone(), window)),
            Some(value.value),
            old,
            value.timestamp,
            headers,
        )
    }

    /// Adds the record to a window whose aggregate so far is `current`
    /// (`None`: a new window), unless the window has closed.
    fn update(
        &self,
        ctx: Ctx<'_, '_, K, A>,
        record: &Record<K, V>,
        window: Window,
        current: Option<ValueAndTimestamp<A>>,
        close_time: Timestamp,
    ) -> Result<(), ProcessorError> {
        if expiry::sliding_window_closed(window.end, close_time) {
            return self
                .output
                .reject_late(ctx, record, window, self.windows.grace_ms());
        }
        let timestamp = record.timestamp;
        let (current, new_timestamp) = match current {
            Some(c) => (Some(c.value), timestamp.max(c.timestamp)),
            None => (None, timestamp),
        };
        // A new window starts at the initial aggregate and forwards it as
        // the old value, as Kafka Streams makes new windows.
        let old = self.fns.start(current);
        let new = (self.fns.fold)(&record.key, record.value.clone(), old.clone());
        self.put_and_forward(
            ctx,
            &record.key,
            window,
            ValueAndTimestamp::make(new, new_timestamp),
            old,
            &record.headers,
        )
    }

    /// Forwards each window that closed since the last emission: a sliding
    /// window is final once its end is before the close time (stream time
    /// minus grace), as its late check says.
    fn emit_closed(
        &self,
        ctx: Ctx<'_, '_, K, A>,
        last_close: Timestamp,
        close_time: Timestamp,
        headers: &kstreams_record::Headers,
    ) -> Result<(), ProcessorError> {
        let difference = self.difference();
        // Ends in [last close, close time): starts shifted by the difference.
        let from = (last_close - difference).max(0);
        let to = close_time - 1 - difference;
        if to < from {
            return Ok(());
        }
        let mut closed = self
            .store()?
            .borrow()
            .fetch_all(from, to)?
            .collect::<Result<Vec<_>, _>>()?;
        closed.sort_by_key(|(windowed, _)| windowed.window.start);
        let closed = closed
            .into_iter()
            .map(|(windowed, value)| (windowed, value.value, value.timestamp));
        self.output.emit_final(ctx, closed, headers)
    }

    fn window_at(&self, start: Timestamp) -> Window {
        Window::new(start, start + self.difference())
    }

    /// The record's right window holds what came after it: a copy of the
    /// aggregate of the window it was found in, not a late check.
    fn create_right_window(
        &self,
        ctx: Ctx<'_, '_, K, A>,
        record: &Record<K, V>,
        aggregate: ValueAndTimestamp<A>,
    ) -> Result<(), ProcessorError> {
        let window = self.window_at(record.timestamp + 1);
        self.put_and_forward(ctx, &record.key, window, aggregate, None, &record.headers)
    }

    fn create_windows(
        &self,
        ctx: Ctx<'_, '_, K, A>,
        record: &Record<K, V>,
        close_time: Timestamp,
        found: Found<A>,
    ) -> Result<(), ProcessorError> {
        let timestamp = record.timestamp;
        let difference = self.difference();
        if let Some(previous) = found.previous_record {
            let start = previous + 1;
            if !found.starts.contains(&start) && start + difference >= timestamp {
                self.update(ctx, record, self.window_at(start), None, close_time)?;
            }
        }
        if !found.left_exists {
            let left_not_empty = found
                .previous_record
                .is_some_and(|p| timestamp - difference <= p);
            let current = match (left_not_empty, found.left_aggregate) {
                (true, Some(left)) => Some(ValueAndTimestamp::make(left.value, timestamp)),
                _ => None,
            };
            let window = Window::new(timestamp - difference, timestamp);
            self.update(ctx, record, window, current, close_time)?;
        }
        if let Some(right) = found.right_aggregate {
            if !found.right_exists && right.timestamp > timestamp {
                self.create_right_window(ctx, record, right)?;
            }
        }
        Ok(())
    }

    fn process_reverse(
        &self,
        ctx: Ctx<'_, '_, K, A>,
        record: &Record<K, V>,
        close_time: Timestamp,
    ) -> Result<(), ProcessorError> {
        let timestamp = record.timestamp;
        let difference = self.difference();
        let existing = self
            .store()?
            .borrow()
            .backward_fetch_key_range(
                Some(&record.key),
                Some(&record.key),
                (timestamp - 2 * difference).max(0),
                timestamp + 1,
            )?
            .collect::<Result<Vec<_>, _>>()?;
        let mut found = Found::default();
        for (windowed, aggregate) in existing {
            let start = windowed.window.start;
            let end = start + difference;
            found.starts.insert(start);
            let window = self.window_at(start);
            if start == timestamp + 1 {
                found.right_exists = true;
            } else if end > timestamp {
                if found.right_aggregate.is_none() {
                    found.right_aggregate = Some(aggregate.clone());
                }
                self.update(ctx, record, window, Some(aggregate), close_time)?;
            } else if end == timestamp {
                found.left_exists = true;
                let max_timestamp = aggregate.timestamp;
                self.update(ctx, record, window, Some(aggregate), close_time)?;
                if max_timestamp < timestamp {
                    found.previous_record = Some(max_timestamp);
                } else {
                    // The windows to create exist already.
                    return Ok(());
                }
            } else {
                found.previous_record = Some(aggregate.timestamp);
                found.left_aggregate = Some(aggregate);
                break;
            }
        }
        self.create_windows(ctx, record, close_time, found)
    }

    /// Records before the time difference would have windows starting
    /// before 0; as Kafka Streams, they share the window `[0, difference]`.
    fn process_early(
        &self,
        ctx: Ctx<'_, '_, K, A>,
        record: &Record<K, V>,
        close_time: Timestamp,
    ) -> Result<(), ProcessorError> {
        let timestamp = record.timestamp;
        let existing = self
            .store()?
            .borrow()
            .fetch_key_range(Some(&record.key), Some(&record.key), 0, timestamp + 1)?
            .collect::<Result<Vec<_>, _>>()?;
        let mut combined: Option<(Window, ValueAndTimestamp<A>)> = None;
        let mut right_aggregate = None;
        let mut right_exists = false;
        let mut starts = HashSet::new();
        let mut previous_record = None;
        for (windowed, aggregate) in existing {
            let start = windowed.window.start;
            starts.insert(start);
            if start == 0 {
                if aggregate.timestamp < timestamp {
                    previous_record = Some(aggregate.timestamp);
                }
                combined = Some((self.window_at(0), aggregate));
            } else if start <= timestamp {
                right_aggregate = Some(aggregate.clone());
                self.update(
                    ctx,
                    record,
                    self.window_at(start),
                    Some(aggregate),
                    close_time,
                )?;
            } else if start == timestamp + 1 {
                right_exists = true;
            }
        }
        if right_aggregate.is_none() {
            if let Some((_, aggregate)) = &combined {
                if aggregate.timestamp > timestamp {
                    right_aggregate = Some(aggregate.clone());
                }
            }
        }
        if let Some(right) = right_aggregate {
            if !right_exists && right.timestamp > timestamp {
                self.create_right_window(ctx, record, right)?;
            }
        }
        if let Some(previous) = previous_record {
            if !starts.contains(&(previous + 1)) {
                self.update(ctx, record, self.window_at(previous + 1), None, close_time)?;
            }
        }
        match combined {
            None => self.update(ctx, record, self.window_at(0), None, close_time),
            Some((window, aggregate)) => {
                self.update(ctx, record, window, Some(aggregate), close_time)
            }
        }
    }
}

impl<K: Clone + 'static, V: Clone + 'static, A: Clone + 'static>
    Processor<K, V, Windowed<K>, Change<A>> for SlidingAggregate<K, V, A>
{
    fn init(&mut self, ctx: Ctx<'_, '_, K, A>) -> Result<(), ProcessorError> {
        let store: TimestampedWindowStoreHandle<K, A> =
            ctx.get_state_store(self.output.store_name())?;
        self.output
            .attach(|listener, send_old| store.borrow_mut().set_flush_listener(listener, send_old));
        self.store = Some(store);
        Ok(())
    }

    fn process(
        &mut self,
        ctx: Ctx<'_, '_, K, A>,
        record: Record<K, V>,
    ) -> Result<(), ProcessorError> {
        let timestamp = record.timestamp;
        let close_time =
            expiry::window_close_time(self.output.observe(timestamp), self.windows.grace_ms());
        let difference = self.difference();
        if expiry::sliding_window_closed(timestamp + difference, close_time) {
            let window = Window::new(timestamp - difference, timestamp);
            return self
                .output
                .reject_late(ctx, &record, window, self.windows.grace_ms());
        }
        // Before this record's writes, which may expire closed windows.
        if let Some(last_close) = self.output.closing(ctx, close_time) {
            self.emit_closed(ctx, last_close, close_time, &record.headers)?;
        }
        if timestamp < difference {
            self.process_early(ctx, &record, close_time)
        } else {
            self.process_reverse(ctx, &record, close_time)
        }
    }

    fn flush(&mut self, ctx: Ctx<'_, '_, K, A>) -> Result<(), ProcessorError> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        self.output.flush(ctx, || store.borrow_mut().flush_cache())
    }
}
