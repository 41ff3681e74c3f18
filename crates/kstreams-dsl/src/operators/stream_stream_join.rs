//! Stream-stream joins in a time window (inner, left, outer), as Kafka
//! Streams runs them since KIP-633: each side's records wait in a window
//! store; a record joins the other side's records of its window; a left or
//! outer record without a match waits in a shared store and is emitted with
//! a missing other side only once its window and grace have passed, so no
//! spurious `(v, null)` precedes a later match.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use kstreams_record::{Headers, Record, Serde, SharedSerde, Timestamp};
use kstreams_state::{KeyValueStoreHandle, WindowStoreHandle};
use kstreams_time::{expiry, JoinWindows};

use crate::operators::outer_join_format::{
    append_entry, legacy_entry, outer_key, parse_list, parse_outer_key, parse_side_value,
    side_value,
};
use crate::{Processor, ProcessorContext, ProcessorError, TaskId};

/// A stream-stream joiner over what each side has (`None`: no match).
pub(crate) type PairJoiner<K, V1, V2, VR> =
    Arc<dyn Fn(&K, Option<&V1>, Option<&V2>) -> VR + Send + Sync>;

/// Kafka Streams' `KStreamJoinWindow`: keeps each record in the side's
/// window store (duplicates kept) and passes it on to the join.
pub(crate) struct RememberInWindow<K, V> {
    pub(crate) store_name: String,
    pub(crate) store: Option<WindowStoreHandle<K, V>>,
}

impl<K: Clone + 'static, V: Clone + 'static> Processor<K, V, K, V> for RememberInWindow<K, V> {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, K, V>) -> Result<(), ProcessorError> {
        self.store = Some(ctx.get_state_store(&self.store_name)?);
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, V>,
        record: Record<K, V>,
    ) -> Result<(), ProcessorError> {
        let store = self.store.as_ref().ok_or("join window store not open")?;
        store.borrow_mut().put(
            record.key.clone(),
            Some(record.value.clone()),
            record.timestamp,
        )?;
        ctx.forward(record)?;
        Ok(())
    }
}

/// What both join processors share: the joiner in left/right order, the
/// stores' names and the serdes of the outer store's entries.
pub(crate) struct JoinCore<K, V1, V2, VR> {
    pub(crate) joiner: PairJoiner<K, V1, V2, VR>,
    pub(crate) windows: JoinWindows,
    pub(crate) left_store: String,
    pub(crate) right_store: String,
    pub(crate) outer_store: Option<String>,
    pub(crate) key_serde: SharedSerde<K>,
    pub(crate) left_serde: SharedSerde<V1>,
    pub(crate) right_serde: SharedSerde<V2>,
    pub(crate) min_times: SharedMinTimes,
    pub(crate) types: PhantomData<fn() -> VR>,
}

/// Kafka Streams' `TimeTracker.minTime` of each task, which both join
/// processors of a task share: a lower bound of the outer store's earliest
/// timestamp, so a record looks at the store only when something in it may
/// have closed. It is not stored anywhere: a new task starts unbounded.
pub(crate) type SharedMinTimes = Arc<Mutex<HashMap<TaskId, Arc<AtomicI64>>>>;

/// The task's shared minimum time, created by whichever processor of the
/// task opens first. An entry only the map still holds belonged to an
/// earlier instance of the task, whose processors are gone.
fn task_min_time(min_times: &SharedMinTimes, task: TaskId) -> Arc<AtomicI64> {
    let mut map = min_times.lock().unwrap_or_else(|e| e.into_inner());
    let entry = map
        .entry(task)
        .or_insert_with(|| Arc::new(AtomicI64::new(i64::MAX)));
    if Arc::strong_count(entry) != 2 {
        *entry = Arc::new(AtomicI64::new(i64::MAX));
    }
    entry.clone()
}

impl<K, V1, V2, VR> Clone for JoinCore<K, V1, V2, VR> {
    fn clone(&self) -> Self {
        JoinCore {
            joiner: self.joiner.clone(),
            windows: self.windows,
            left_store: self.left_store.clone(),
            right_store: self.right_store.clone(),
            outer_store: self.outer_store.clone(),
            key_serde: self.key_serde.clone(),
            left_serde: self.left_serde.clone(),
            right_serde: self.right_serde.clone(),
            min_times: self.min_times.clone(),
            types: PhantomData,
        }
    }
}

/// A join processor's state in its task.
pub(crate) struct OpenJoin<K, V1, V2, VR> {
    pub(crate) core: JoinCore<K, V1, V2, VR>,
    /// Whether this side's unmatched records produce results.
    pub(crate) outer: bool,
    pub(crate) left: Option<WindowStoreHandle<K, V1>>,
    pub(crate) right: Option<WindowStoreHandle<K, V2>>,
    pub(crate) pending: Option<KeyValueStoreHandle<Vec<u8>, Vec<u8>>>,
    /// This task's share of [`JoinCore::min_times`].
    pub(crate) min_time: Option<Arc<AtomicI64>>,
}

impl<K, V1, V2, VR> JoinCore<K, V1, V2, VR> {
    pub(crate) fn open_later(&self, outer: bool) -> OpenJoin<K, V1, V2, VR> {
        OpenJoin {
            core: self.clone(),
            outer,
            left: None,
            right: None,
            pending: None,
            min_time: None,
        }
    }
}

/// A value of either side, as the outer store keeps unmatched records.
pub(crate) enum Either<V1, V2> {
    Left(V1),
    Right(V2),
}

impl<K: Clone + 'static, V1: Clone + 'static, V2: Clone + 'static, VR: Clone + 'static>
    OpenJoin<K, V1, V2, VR>
{
    fn init<VI>(
        &mut self,
        ctx: &ProcessorContext<'_, K, VR>,
        _: PhantomData<VI>,
    ) -> Result<(), ProcessorError> {
        let lookup = ctx.store_lookup();
        self.left = Some(lookup.handle(&self.core.left_store)?);
        self.right = Some(lookup.handle(&self.core.right_store)?);
        if let Some(name) = &self.core.outer_store {
            let pending: KeyValueStoreHandle<Vec<u8>, Vec<u8>> = lookup.handle(name)?;
            rewrite_legacy_entries(&pending)?;
            self.pending = Some(pending);
            self.min_time = Some(task_min_time(&self.core.min_times, ctx.task_id()));
        }
        Ok(())
    }

    fn key_bytes(&self, key: &K) -> Result<Vec<u8>, ProcessorError> {
        let topic = self.core.outer_store.as_deref().unwrap_or_default();
        Ok(self
            .core
            .key_serde
            .serialize(topic, &mut Headers::new(), key)?
            .ok_or("a join key serialized to null")?)
    }

    /// Emits unmatched records whose window and grace have passed, oldest
    /// first, with the missing side as `None`.
    fn emit_closed(
        &self,
        ctx: &mut ProcessorContext<'_, K, VR>,
        stream_time: Timestamp,
        headers: &Headers,
        look_ahead: Timestamp,
    ) -> Result<(), ProcessorError> {
        let (Some(pending), Some(min_time)) = (&self.pending, &self.min_time) else {
            return Ok(());
        };
        let topic = self.core.outer_store.as_deref().unwrap_or_default();
        let grace = self.core.windows.grace_ms();
        let windows = self.core.windows;
        // Kafka Streams' `emitNonJoinedOuterRecords` looks at the store only
        // when the tracked minimum is past this side's look-ahead and grace;
        // its sum wraps as Java's does, so an unbounded minimum (a new task,
        // or an empty store) always looks.
        let tracked = min_time.load(Ordering::Relaxed);
        if tracked.wrapping_add(look_ahead).wrapping_add(grace) >= stream_time {
            return Ok(());
        }
        let mut new_min = i64::MAX;
        let mut closed = Vec::new();
        let (mut left_open, mut right_open) = (false, false);
        for entry in pending.borrow().all()? {
            let (key, value) = entry?;
            let (timestamp, left, _) =
                parse_outer_key(&key).ok_or("malformed outer join store key")?;
            // The minimum ends as the timestamp of the last entry looked at.
            new_min = timestamp;
            // Both sides have an entry still open: later entries are later
            // still, so none is closed.
            if left_open && right_open {
                break;
            }
            // A left record waits for right records up to `after` later;
            // a right record for left ones up to `before` later. An open
            // entry of one side does not hold back the other side's.
            let look_ahead = if left {
                windows.after_ms()
            } else {
                windows.before_ms()
            };
            if !expiry::join_window_closed(timestamp, look_ahead, grace, stream_time) {
                if left {
                    left_open = true;
                } else {
                    right_open = true;
                }
                continue;
            }
            closed.push((key, value, timestamp));
        }
        min_time.store(new_min, Ordering::Relaxed);
        for (store_key, list, timestamp) in closed {
            // Kafka Streams drops a key's whole list once it has emitted it.
            pending.borrow_mut().delete(&store_key)?;
            // An entry of the old layout restored after `init` rewrote the
            // others is read as it is.
            let legacy = legacy_entry(&store_key, &list);
            let (raw_key, entries) = match &legacy {
                Some((new_key, entry)) => (new_key.get(9..), Some(vec![entry.as_slice()])),
                None => (store_key.get(9..), parse_list(&list)),
            };
            let key = self.core.key_serde.deserialize(
                topic,
                headers,
                Some(raw_key.ok_or("malformed outer join store key")?),
            )?;
            for entry in entries.ok_or("malformed outer join store value")? {
                let (left, value) =
                    parse_side_value(entry).ok_or("malformed outer join store entry")?;
                let result = if left {
                    let v = self
                        .core
                        .left_serde
                        .deserialize(topic, headers, Some(value))?;
                    (self.core.joiner)(&key, Some(&v), None)
                } else {
                    let v = self
                        .core
                        .right_serde
                        .deserialize(topic, headers, Some(value))?;
                    (self.core.joiner)(&key, None, Some(&v))
                };
                ctx.forward(Record {
                    key: key.clone(),
                    value: result,
                    timestamp,
                    headers: headers.clone(),
                })?;
            }
        }
        Ok(())
    }

    /// Kafka Streams' `KStreamKStreamJoin#process` for a record of one side.
    fn process(
        &self,
        ctx: &mut ProcessorContext<'_, K, VR>,
        record: Record<K, Either<V1, V2>>,
    ) -> Result<(), ProcessorError> {
        let Record {
            key,
            value,
            timestamp,
            headers,
        } = record;
        let left = matches!(value, Either::Left(_));
        let windows = self.core.windows;
        // A left record looks at right records from `before` earlier to
        // `after` later; a right record the other way round.
        let (before, after) = if left {
            (windows.before_ms(), windows.after_ms())
        } else {
            (windows.after_ms(), windows.before_ms())
        };
        let from = (timestamp - before).max(0);
        let to = (timestamp + after).max(0);
        // Both sides are fed by the task's partitions: the task's stream
        // time stands for the time both join processors have seen.
        let stream_time = ctx.current_stream_time();
        if timestamp == stream_time {
            self.emit_closed(ctx, stream_time, &headers, after)?;
        }
        let key_bytes = match &self.pending {
            Some(_) => Some(self.key_bytes(&key)?),
            None => None,
        };
        let mut matched = false;
        match &value {
            Either::Left(v) => {
                let store = self.right.as_ref().ok_or("join not initialized")?;
                let others = store
                    .borrow()
                    .fetch_time_range(&key, from, to)?
                    .collect::<Result<Vec<_>, _>>()?;
                for (other_ts, other) in others {
                    matched = true;
                    self.unpend(key_bytes.as_deref(), other_ts, false)?;
                    ctx.forward(Record {
                        key: key.clone(),
                        value: (self.core.joiner)(&key, Some(v), Some(&other)),
                        timestamp: timestamp.max(other_ts),
                        headers: headers.clone(),
                    })?;
                }
            }
            Either::Right(v) => {
                let store = self.left.as_ref().ok_or("join not initialized")?;
                let others = store
                    .borrow()
                    .fetch_time_range(&key, from, to)?
                    .collect::<Result<Vec<_>, _>>()?;
                for (other_ts, other) in others {
                    matched = true;
                    self.unpend(key_bytes.as_deref(), other_ts, true)?;
                    ctx.forward(Record {
                        key: key.clone(),
                        value: (self.core.joiner)(&key, Some(&other), Some(v)),
                        timestamp: timestamp.max(other_ts),
                        headers: headers.clone(),
                    })?;
                }
            }
        }
        if matched || !self.outer {
            return Ok(());
        }
        let Some(pending) = &self.pending else {
            return Ok(());
        };
        if expiry::join_window_over(to, stream_time) {
            // Its window is already over: nothing can match it any more.
            let result = match &value {
                Either::Left(v) => (self.core.joiner)(&key, Some(v), None),
                Either::Right(v) => (self.core.joiner)(&key, None, Some(v)),
            };
            ctx.forward(Record {
                key,
                value: result,
                timestamp,
                headers,
            })?;
            return Ok(());
        }
        let topic = self.core.outer_store.as_deref().unwrap_or_default();
        let bytes = match &value {
            Either::Left(v) => self
                .core
                .left_serde
                .serialize(topic, &mut Headers::new(), v)?,
            Either::Right(v) => self
                .core
                .right_serde
                .serialize(topic, &mut Headers::new(), v)?,
        }
        .ok_or("a joined value serialized to null")?;
        if let Some(min_time) = &self.min_time {
            min_time.fetch_min(timestamp, Ordering::Relaxed);
        }
        let store_key = outer_key(timestamp, left, key_bytes.as_deref().unwrap_or_default());
        // Kafka Streams' `ListValueStore`: records of one key, side and
        // timestamp are all kept, in arrival order, in one list.
        let existing = pending.borrow().get(&store_key)?;
        let list = append_entry(existing.as_deref(), &side_value(left, &bytes))
            .ok_or("malformed outer join store value")?;
        pending.borrow_mut().put(store_key, list)?;
        Ok(())
    }

    /// A record of the other side found a match: it is no longer pending.
    fn unpend(
        &self,
        key: Option<&[u8]>,
        timestamp: Timestamp,
        left: bool,
    ) -> Result<(), ProcessorError> {
        if let (Some(pending), Some(key)) = (&self.pending, key) {
            let store_key = outer_key(timestamp, left, key);
            // Kafka Streams' `putIfAbsent(key, null)`: a tombstone only for
            // a key the store has.
            if pending.borrow().get(&store_key)?.is_some() {
                pending.borrow_mut().delete(&store_key)?;
            }
        }
        Ok(())
    }
}

/// Rewrites entries of the layout kstreams 0.1 wrote (restored from an old
/// changelog) into Kafka Streams' layout, merging records of one key, side
/// and timestamp into one list in their old order.
fn rewrite_legacy_entries(
    pending: &KeyValueStoreHandle<Vec<u8>, Vec<u8>>,
) -> Result<(), ProcessorError> {
    let mut legacy = Vec::new();
    for entry in pending.borrow().all()? {
        let (key, value) = entry?;
        if let Some(rewritten) = legacy_entry(&key, &value) {
            legacy.push((key, rewritten));
        }
    }
    for (old_key, (new_key, entry)) in legacy {
        let mut store = pending.borrow_mut();
        store.delete(&old_key)?;
        let existing = store.get(&new_key)?;
        let list =
            append_entry(existing.as_deref(), &entry).ok_or("malformed outer join store value")?;
        store.put(new_key, list)?;
    }
    Ok(())
}

pub(crate) struct LeftSide<K, V1, V2, VR>(pub(crate) OpenJoin<K, V1, V2, VR>);
pub(crate) struct RightSide<K, V1, V2, VR>(pub(crate) OpenJoin<K, V1, V2, VR>);

impl<K: Clone + 'static, V1: Clone + 'static, V2: Clone + 'static, VR: Clone + 'static>
    Processor<K, V1, K, VR> for LeftSide<K, V1, V2, VR>
{
    fn init(&mut self, ctx: &mut ProcessorContext<'_, K, VR>) -> Result<(), ProcessorError> {
        self.0.init(ctx, PhantomData::<V1>)
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, VR>,
        record: Record<K, V1>,
    ) -> Result<(), ProcessorError> {
        let value = Either::Left(record.value.clone());
        self.0.process(ctx, record.with_value(value))
    }
}

impl<K: Clone + 'static, V1: Clone + 'static, V2: Clone + 'static, VR: Clone + 'static>
    Processor<K, V2, K, VR> for RightSide<K, V1, V2, VR>
{
    fn init(&mut self, ctx: &mut ProcessorContext<'_, K, VR>) -> Result<(), ProcessorError> {
        self.0.init(ctx, PhantomData::<V2>)
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, VR>,
        record: Record<K, V2>,
    ) -> Result<(), ProcessorError> {
        let value = Either::Right(record.value.clone());
        self.0.process(ctx, record.with_value(value))
    }
}
