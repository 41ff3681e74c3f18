//! Stream-stream joins in a time window (inner, left, outer), as Kafka
//! Streams runs them since KIP-633: each side's records wait in a window
//! store; a record joins the other side's records of its window; a left or
//! outer record without a match waits in a shared store and is emitted with
//! a missing other side only once its window and grace have passed, so no
//! spurious `(v, null)` precedes a later match.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use kstreams_record::{BytesSerde, Headers, Record, Serde, SharedSerde, Timestamp};
use kstreams_state::{KeyValueStoreHandle, Stores, WindowStoreHandle};
use kstreams_time::JoinWindows;

use crate::materialized::add_store;
use crate::operators::PassThrough;
use crate::{KStream, Processor, ProcessorContext, ProcessorError, TopologyError};

/// Names and serdes of a stream-stream join: Kafka Streams' `StreamJoined`.
pub struct StreamJoined<K, V1, V2> {
    name: Option<String>,
    store_name: Option<String>,
    key_serde: Option<SharedSerde<K>>,
    value_serde: Option<SharedSerde<V1>>,
    other_value_serde: Option<SharedSerde<V2>>,
}

impl<K, V1, V2> Default for StreamJoined<K, V1, V2> {
    fn default() -> Self {
        StreamJoined {
            name: None,
            store_name: None,
            key_serde: None,
            value_serde: None,
            other_value_serde: None,
        }
    }
}

impl<K: 'static, V1: 'static, V2: 'static> StreamJoined<K, V1, V2> {
    /// Serdes of the key and both values (for the join's stores).
    pub fn with(
        key_serde: impl Serde<K>,
        value_serde: impl Serde<V1>,
        other_value_serde: impl Serde<V2>,
    ) -> Self {
        StreamJoined {
            key_serde: Some(Arc::new(key_serde)),
            value_serde: Some(Arc::new(value_serde)),
            other_value_serde: Some(Arc::new(other_value_serde)),
            ..Self::default()
        }
    }

    /// Names the join's processors (`<name>-this-windowed`,
    /// `<name>-this-join` or `<name>-outer-this-join`, `<name>-merge`, ...)
    /// and its repartition topics (`<name>-left-repartition`, ...).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Names the join's stores (`<name>-this-join-store`,
    /// `<name>-outer-other-join-store`, `<name>-left-shared-join-store`, ...),
    /// and so their changelog topics.
    pub fn with_store_name(mut self, name: impl Into<String>) -> Self {
        self.store_name = Some(name.into());
        self
    }
}

/// Which records of a stream-stream join produce results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JoinKind {
    Inner,
    Left,
    Outer,
}

/// A stream-stream joiner over what each side has (`None`: no match).
type PairJoiner<K, V1, V2, VR> = Arc<dyn Fn(&K, Option<&V1>, Option<&V2>) -> VR + Send + Sync>;

impl<K: Clone + 'static, V: Clone + 'static> KStream<K, V> {
    /// Joins records of both streams with the same key at most the window
    /// apart: Kafka Streams' `KStream#join(KStream, ValueJoiner,
    /// JoinWindows)`. Results carry the larger of the two timestamps.
    pub fn join_windowed<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KStream<K, VO>,
        joiner: impl Fn(&V, &VO) -> VR + Send + Sync + 'static,
        windows: JoinWindows,
    ) -> KStream<K, VR> {
        self.join_windowed_with(other, joiner, windows, StreamJoined::default())
    }

    /// [`KStream::join_windowed`] with names and serdes.
    pub fn join_windowed_with<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KStream<K, VO>,
        joiner: impl Fn(&V, &VO) -> VR + Send + Sync + 'static,
        windows: JoinWindows,
        joined: StreamJoined<K, V, VO>,
    ) -> KStream<K, VR> {
        let joiner: PairJoiner<K, V, VO, VR> = Arc::new(move |_, a, b| match (a, b) {
            (Some(a), Some(b)) => joiner(a, b),
            _ => unreachable!("an inner join calls its joiner with both values"),
        });
        self.stream_join(other, joiner, windows, joined, JoinKind::Inner)
    }

    /// Like [`KStream::join_windowed`], and each record of this stream that
    /// found no match is joined with `None` once its window has closed.
    pub fn left_join_windowed<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KStream<K, VO>,
        joiner: impl Fn(&V, Option<&VO>) -> VR + Send + Sync + 'static,
        windows: JoinWindows,
    ) -> KStream<K, VR> {
        self.left_join_windowed_with(other, joiner, windows, StreamJoined::default())
    }

    /// [`KStream::left_join_windowed`] with names and serdes.
    pub fn left_join_windowed_with<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KStream<K, VO>,
        joiner: impl Fn(&V, Option<&VO>) -> VR + Send + Sync + 'static,
        windows: JoinWindows,
        joined: StreamJoined<K, V, VO>,
    ) -> KStream<K, VR> {
        let joiner: PairJoiner<K, V, VO, VR> = Arc::new(move |_, a, b| match a {
            Some(a) => joiner(a, b),
            None => unreachable!("a left join calls its joiner with a left value"),
        });
        self.stream_join(other, joiner, windows, joined, JoinKind::Left)
    }

    /// Like [`KStream::join_windowed`], and records of either stream that
    /// found no match are joined with `None` once their window has closed.
    pub fn outer_join_windowed<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KStream<K, VO>,
        joiner: impl Fn(Option<&V>, Option<&VO>) -> VR + Send + Sync + 'static,
        windows: JoinWindows,
    ) -> KStream<K, VR> {
        self.outer_join_windowed_with(other, joiner, windows, StreamJoined::default())
    }

    /// [`KStream::outer_join_windowed`] with names and serdes.
    pub fn outer_join_windowed_with<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KStream<K, VO>,
        joiner: impl Fn(Option<&V>, Option<&VO>) -> VR + Send + Sync + 'static,
        windows: JoinWindows,
        joined: StreamJoined<K, V, VO>,
    ) -> KStream<K, VR> {
        self.stream_join(
            other,
            Arc::new(move |_, a, b| joiner(a, b)),
            windows,
            joined,
            JoinKind::Outer,
        )
    }

    fn stream_join<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KStream<K, VO>,
        joiner: PairJoiner<K, V, VO, VR>,
        windows: JoinWindows,
        joined: StreamJoined<K, V, VO>,
        kind: JoinKind,
    ) -> KStream<K, VR> {
        let mut s = self.state.borrow_mut();
        let named = joined.name.clone();
        let suffixed = |suffix: &str| named.as_ref().map(|n| format!("{n}{suffix}"));
        let key_serde = joined
            .key_serde
            .or_else(|| self.key_serde.clone())
            .or_else(|| other.key_serde.clone())
            .or_else(kstreams_record::builtin_serde::<K>);
        let value_serde = joined
            .value_serde
            .or_else(|| self.value_serde.clone())
            .or_else(kstreams_record::builtin_serde::<V>);
        let other_serde = joined
            .other_value_serde
            .or_else(|| other.value_serde.clone())
            .or_else(kstreams_record::builtin_serde::<VO>);
        // After a key change, each side meets its partition of the other
        // through a repartition topic: `<name>-left` / `<name>-right`, or
        // named after the stream's node when the join is not named. As in
        // Kafka Streams, these come before the join's own names.
        let mut this_parent = self.node.clone();
        if self.repartition_required {
            let prefix = suffixed("-left").unwrap_or_else(|| self.node.clone());
            if let Some((k, v)) = s.record(repartition_serdes(&prefix, &key_serde, &value_serde)) {
                this_parent = self.through_repartition_topic(&mut s, prefix, k, v).node;
            }
        }
        let mut other_parent = other.node.clone();
        if other.repartition_required {
            let prefix = suffixed("-right").unwrap_or_else(|| other.node.clone());
            if let Some((k, v)) = s.record(repartition_serdes(&prefix, &key_serde, &other_serde)) {
                other_parent = other.through_repartition_topic(&mut s, prefix, k, v).node;
            }
        }
        let this_windowed = s.name_or_generate(suffixed("-this-windowed"), "KSTREAM-WINDOWED-");
        let other_windowed = s.name_or_generate(suffixed("-other-windowed"), "KSTREAM-WINDOWED-");
        let left_outer = kind != JoinKind::Inner;
        let right_outer = kind == JoinKind::Outer;
        let (this_prefix, this_suffix) = if right_outer {
            ("KSTREAM-OUTERTHIS-", "-outer-this-join")
        } else {
            ("KSTREAM-JOINTHIS-", "-this-join")
        };
        let (other_prefix, other_suffix) = if left_outer {
            ("KSTREAM-OUTEROTHER-", "-outer-other-join")
        } else {
            ("KSTREAM-JOINOTHER-", "-other-join")
        };
        let this_generated = s.new_name(this_prefix);
        let other_generated = s.new_name(other_prefix);
        let this_join = suffixed(this_suffix).unwrap_or_else(|| this_generated.clone());
        let other_join = suffixed(other_suffix).unwrap_or_else(|| other_generated.clone());
        let merge = s.name_or_generate(suffixed("-merge"), "KSTREAM-MERGE-");
        let out = KStream::new(self.state.clone(), merge.clone());

        let invalid = |message: String| TopologyError::InvalidOperator {
            operator: format!("join {merge}"),
            message,
        };
        if let Err(e) = windows.validate() {
            s.record::<()>(Err(invalid(e.to_string())));
            return out;
        }
        let missing = |part, type_name| TopologyError::MissingSerde {
            store: this_join.clone(),
            part,
            type_name,
        };
        let key_serde = key_serde.ok_or_else(|| missing("key", std::any::type_name::<K>()));
        let value_serde = value_serde.ok_or_else(|| missing("value", std::any::type_name::<V>()));
        let other_serde = other_serde.ok_or_else(|| missing("value", std::any::type_name::<VO>()));
        let (Some(key_serde), Some(value_serde), Some(other_serde)) = (
            s.record(key_serde),
            s.record(value_serde),
            s.record(other_serde),
        ) else {
            return out;
        };
        // Kafka Streams' store names: `<store name><side suffix>-store`, or
        // after the generated side names; the shared store of unmatched
        // records takes the index of this side's name.
        let shared_suffix = if right_outer {
            "-outer-shared-join"
        } else {
            "-left-shared-join"
        };
        let (this_store, other_store, outer_store) = match &joined.store_name {
            Some(base) => (
                format!("{base}{this_suffix}-store"),
                format!("{base}{other_suffix}-store"),
                format!("{base}{shared_suffix}-store"),
            ),
            None => (
                format!("{this_generated}-store"),
                format!("{other_generated}-store"),
                format!(
                    "KSTREAM-OUTERSHARED-{}-store",
                    &this_generated[this_prefix.len()..]
                ),
            ),
        };
        let retention =
            Duration::from_millis((windows.size_ms() + windows.grace_ms()).max(0) as u64);
        let size = Duration::from_millis(windows.size_ms().max(0) as u64);
        let window_store = |name: &str| {
            Stores::in_memory_window_store(name, retention, size, true).map_err(|e| {
                TopologyError::InvalidOperator {
                    operator: format!("join {merge}"),
                    message: e.to_string(),
                }
            })
        };
        let (Some(this_supplier), Some(other_supplier)) = (
            s.record(window_store(&this_store)),
            s.record(window_store(&other_store)),
        ) else {
            return out;
        };

        // Each side's records go into its window store first.
        for (name, parent, store, windowed) in [
            (&this_windowed, &this_parent, &this_store, true),
            (&other_windowed, &other_parent, &other_store, false),
        ] {
            let store = store.clone();
            let added = if windowed {
                s.topology.add_typed_processor::<K, V, K, V, _>(
                    name.clone(),
                    Arc::new(move || RememberInWindow::<K, V> {
                        store_name: store.clone(),
                        store: None,
                    }),
                    &[parent.as_str()],
                )
            } else {
                s.topology.add_typed_processor::<K, VO, K, VO, _>(
                    name.clone(),
                    Arc::new(move || RememberInWindow::<K, VO> {
                        store_name: store.clone(),
                        store: None,
                    }),
                    &[parent.as_str()],
                )
            };
            s.record(added);
        }
        let added = add_store(
            &mut s.topology,
            Stores::window_store_builder(this_supplier, key_serde.clone(), value_serde.clone()),
            &this_windowed,
        );
        s.record(added);
        let added = add_store(
            &mut s.topology,
            Stores::window_store_builder(other_supplier, key_serde.clone(), other_serde.clone()),
            &other_windowed,
        );
        s.record(added);

        let core = JoinCore {
            joiner,
            windows,
            left_store: this_store.clone(),
            right_store: other_store.clone(),
            outer_store: left_outer.then(|| outer_store.clone()),
            key_serde: key_serde.clone(),
            left_serde: value_serde.clone(),
            right_serde: other_serde.clone(),
            types: PhantomData,
        };
        let this_core = core.clone();
        let added = s.topology.add_typed_processor::<K, V, K, VR, _>(
            this_join.clone(),
            Arc::new(move || LeftSide(this_core.open_later(left_outer))),
            &[this_windowed.as_str()],
        );
        s.record(added);
        let other_core = core;
        let added = s.topology.add_typed_processor::<K, VO, K, VR, _>(
            other_join.clone(),
            Arc::new(move || RightSide(other_core.open_later(right_outer))),
            &[other_windowed.as_str()],
        );
        s.record(added);
        // Each join processor reads the other side's window store.
        let connected = s
            .topology
            .connect_processor_and_state_stores(&this_join, &[other_store.as_str()])
            .map(|_| ());
        s.record(connected);
        let connected = s
            .topology
            .connect_processor_and_state_stores(&other_join, &[this_store.as_str()])
            .map(|_| ());
        s.record(connected);
        if left_outer {
            let builder = Stores::key_value_store_builder(
                Stores::in_memory_key_value_store(&outer_store),
                BytesSerde,
                BytesSerde,
            );
            let added = s
                .topology
                .add_state_store(builder, &[this_join.as_str(), other_join.as_str()])
                .map(|_| ());
            s.record(added);
        }
        s.topology
            .graph
            .copartition(&[this_join.as_str(), other_join.as_str()]);
        let added = s.topology.add_typed_processor::<K, VR, K, VR, _>(
            merge.clone(),
            Arc::new(|| PassThrough),
            &[this_join.as_str(), other_join.as_str()],
        );
        s.record(added);
        let mut out = out;
        out.key_serde = Some(key_serde);
        out
    }
}

/// The serdes a side's repartition topic needs.
fn repartition_serdes<K: 'static, V: 'static>(
    prefix: &str,
    key: &Option<SharedSerde<K>>,
    value: &Option<SharedSerde<V>>,
) -> Result<(SharedSerde<K>, SharedSerde<V>), TopologyError> {
    let missing = |part, type_name| TopologyError::MissingSerde {
        store: format!("{prefix}-repartition"),
        part,
        type_name,
    };
    Ok((
        key.clone()
            .ok_or_else(|| missing("key", std::any::type_name::<K>()))?,
        value
            .clone()
            .ok_or_else(|| missing("value", std::any::type_name::<V>()))?,
    ))
}

/// Kafka Streams' `KStreamJoinWindow`: keeps each record in the side's
/// window store (duplicates kept) and passes it on to the join.
struct RememberInWindow<K, V> {
    store_name: String,
    store: Option<WindowStoreHandle<K, V>>,
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
struct JoinCore<K, V1, V2, VR> {
    joiner: PairJoiner<K, V1, V2, VR>,
    windows: JoinWindows,
    left_store: String,
    right_store: String,
    outer_store: Option<String>,
    key_serde: SharedSerde<K>,
    left_serde: SharedSerde<V1>,
    right_serde: SharedSerde<V2>,
    types: PhantomData<fn() -> VR>,
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
            types: PhantomData,
        }
    }
}

/// A join processor's state in its task.
struct OpenJoin<K, V1, V2, VR> {
    core: JoinCore<K, V1, V2, VR>,
    /// Whether this side's unmatched records produce results.
    outer: bool,
    left: Option<WindowStoreHandle<K, V1>>,
    right: Option<WindowStoreHandle<K, V2>>,
    pending: Option<KeyValueStoreHandle<Vec<u8>, Vec<u8>>>,
    /// Next sequence number for the outer store's keys.
    next_seq: std::cell::Cell<u64>,
}

impl<K, V1, V2, VR> JoinCore<K, V1, V2, VR> {
    fn open_later(&self, outer: bool) -> OpenJoin<K, V1, V2, VR> {
        OpenJoin {
            core: self.clone(),
            outer,
            left: None,
            right: None,
            pending: None,
            next_seq: std::cell::Cell::new(0),
        }
    }
}

/// A value of either side, as the outer store keeps unmatched records.
enum Either<V1, V2> {
    Left(V1),
    Right(V2),
}

/// The outer store's key prefix for one record's (timestamp, side, key):
/// timestamp first, so the store's order is time order, as Kafka Streams'
/// `TimestampedKeyAndJoinSide`; the key's length keeps prefixes apart.
fn pending_prefix(timestamp: Timestamp, left: bool, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(21 + key.len());
    out.extend_from_slice(&timestamp.to_be_bytes());
    out.push(u8::from(left));
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(key);
    out
}

/// The outer store's key: the prefix and a sequence number, so that
/// records with the same key and timestamp are all kept (Kafka Streams
/// keeps a list per key).
fn pending_key(timestamp: Timestamp, left: bool, key: &[u8], seq: u64) -> Vec<u8> {
    let mut out = pending_prefix(timestamp, left, key);
    out.extend_from_slice(&seq.to_be_bytes());
    out
}

/// The record key bytes inside an outer store key.
fn pending_record_key(store_key: &[u8]) -> Option<&[u8]> {
    let len = u32::from_be_bytes(store_key.get(9..13)?.try_into().ok()?) as usize;
    store_key.get(13..13 + len)
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
            // After a restart the store has entries: go on past their numbers.
            let mut next = 0;
            for entry in pending.borrow().all()? {
                let (key, _) = entry?;
                if let Some(seq) = key.len().checked_sub(8).and_then(|at| key.get(at..)) {
                    next = next.max(u64::from_be_bytes(seq.try_into()?) + 1);
                }
            }
            self.next_seq.set(next);
            self.pending = Some(pending);
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
    ) -> Result<(), ProcessorError> {
        let Some(pending) = &self.pending else {
            return Ok(());
        };
        let topic = self.core.outer_store.as_deref().unwrap_or_default();
        let grace = self.core.windows.grace_ms();
        let mut closed = Vec::new();
        let longest = self
            .core
            .windows
            .after_ms()
            .max(self.core.windows.before_ms());
        for entry in pending.borrow().all()? {
            let (key, value) = entry?;
            let timestamp = i64::from_be_bytes(key[..8].try_into()?);
            if timestamp + longest + grace >= stream_time {
                break; // later entries are later still: none closed
            }
            let left = key[8] == 1;
            // A left record waits for right records up to `after` later;
            // a right record for left ones up to `before` later.
            let look_ahead = if left {
                self.core.windows.after_ms()
            } else {
                self.core.windows.before_ms()
            };
            if timestamp + look_ahead + grace >= stream_time {
                continue;
            }
            closed.push((key, value, timestamp, left));
        }
        for (store_key, value, timestamp, left) in closed {
            pending.borrow_mut().delete(&store_key)?;
            let key = self.core.key_serde.deserialize(
                topic,
                headers,
                Some(pending_record_key(&store_key).ok_or("malformed outer join entry")?),
            )?;
            let result = if left {
                let v = self
                    .core
                    .left_serde
                    .deserialize(topic, headers, Some(&value))?;
                (self.core.joiner)(&key, Some(&v), None)
            } else {
                let v = self
                    .core
                    .right_serde
                    .deserialize(topic, headers, Some(&value))?;
                (self.core.joiner)(&key, None, Some(&v))
            };
            ctx.forward(Record {
                key,
                value: result,
                timestamp,
                headers: headers.clone(),
            })?;
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
            self.emit_closed(ctx, stream_time, &headers)?;
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
        if to < stream_time {
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
        let seq = self.next_seq.get();
        self.next_seq.set(seq + 1);
        let store_key = pending_key(
            timestamp,
            left,
            key_bytes.as_deref().unwrap_or_default(),
            seq,
        );
        pending.borrow_mut().put(store_key, bytes)?;
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
            let matched: Vec<Vec<u8>> = pending
                .borrow()
                .prefix_scan(&pending_prefix(timestamp, left, key))?
                .map(|entry| entry.map(|(k, _)| k))
                .collect::<Result<_, _>>()?;
            for store_key in matched {
                pending.borrow_mut().delete(&store_key)?;
            }
        }
        Ok(())
    }
}

struct LeftSide<K, V1, V2, VR>(OpenJoin<K, V1, V2, VR>);
struct RightSide<K, V1, V2, VR>(OpenJoin<K, V1, V2, VR>);

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
