//! Joins with a table: stream-table (KIP-914 lookups as of the stream
//! record's time on versioned tables, KIP-923 stream-side grace) and
//! table-table (inner, left, outer, with old values and tombstones).

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use kstreams_record::{BytesSerde, Headers, Record, Serde, SerdeError, SharedSerde, Timestamp};
use kstreams_state::{KeyValueStoreHandle, Stores, ValueAndTimestamp};
use kstreams_time::duration_ms;

use crate::materialized::add_store;
use crate::operators::PassThrough;
use crate::options::IntoName;
use crate::stateful::{
    sends_old, Change, GetterFactory, GetterSupplier, OldValuesFlag, StoreLookup, ValueGetter,
};
use crate::table::{KTable, OldValues, TableGetter};
use crate::{KStream, Processor, ProcessorContext, ProcessorError, TopologyError};

/// Options of a stream-table join: Kafka Streams' `Joined`.
pub struct Joined<K, V> {
    name: Option<String>,
    grace: Option<Duration>,
    bootstrap: bool,
    key_serde: Option<SharedSerde<K>>,
    value_serde: Option<SharedSerde<V>>,
}

impl<K, V> Default for Joined<K, V> {
    fn default() -> Self {
        Joined {
            name: None,
            grace: None,
            bootstrap: false,
            key_serde: None,
            value_serde: None,
        }
    }
}

impl<K: 'static, V: 'static> Joined<K, V> {
    /// A join processor named `name`.
    pub fn as_(name: impl Into<String>) -> Self {
        Joined {
            name: Some(name.into()),
            ..Self::default()
        }
    }

    /// Holds stream records back for `grace` of stream time and joins them
    /// in timestamp order, so that table updates with earlier timestamps
    /// that arrive a little later are seen (KIP-923). Needs a versioned
    /// table.
    pub fn with_grace_period(mut self, grace: Duration) -> Self {
        self.grace = Some(grace);
        self
    }

    /// Bootstraps the table side (beyond Kafka Streams): each task reads
    /// the table's partitions to the end offsets seen at assignment before
    /// it joins any stream record. See [`crate::Consumed::with_bootstrap`].
    pub fn with_table_bootstrap(mut self) -> Self {
        self.bootstrap = true;
        self
    }

    /// The stream's key serde (for the grace buffer and a repartition).
    pub fn with_key_serde(mut self, serde: impl Serde<K>) -> Self {
        self.key_serde = Some(Arc::new(serde));
        self
    }

    /// The stream's value serde (for the grace buffer and a repartition).
    pub fn with_value_serde(mut self, serde: impl Serde<V>) -> Self {
        self.value_serde = Some(Arc::new(serde));
        self
    }
}

/// A joiner of a stream value with the table's value (`None` when the
/// table has none, for left joins).
type StreamTableJoiner<K, V, VT, VR> = Arc<dyn Fn(&K, &V, Option<&VT>) -> VR + Send + Sync>;

impl<K: Clone + 'static, V: Clone + 'static> KStream<K, V> {
    /// Joins each record with the table's value for its key; records whose
    /// key the table does not have are dropped. With a versioned table the
    /// value is the one valid at the record's timestamp (KIP-914).
    pub fn join<VT: Clone + 'static, VR: Clone + 'static>(
        &self,
        table: &KTable<K, VT>,
        joiner: impl Fn(&V, &VT) -> VR + Send + Sync + 'static,
    ) -> KStream<K, VR> {
        self.join_with(table, joiner, Joined::default())
    }

    /// [`KStream::join`] with options (name, grace, serdes).
    pub fn join_with<VT: Clone + 'static, VR: Clone + 'static>(
        &self,
        table: &KTable<K, VT>,
        joiner: impl Fn(&V, &VT) -> VR + Send + Sync + 'static,
        joined: Joined<K, V>,
    ) -> KStream<K, VR> {
        let joiner: StreamTableJoiner<K, V, VT, Option<VR>> =
            Arc::new(move |_, v, t| t.map(|t| joiner(v, t)));
        self.stream_table_join(table, joiner, joined, "KSTREAM-JOIN-")
    }

    /// Joins each record with the table's value for its key, `None` if the
    /// table has none.
    pub fn left_join<VT: Clone + 'static, VR: Clone + 'static>(
        &self,
        table: &KTable<K, VT>,
        joiner: impl Fn(&V, Option<&VT>) -> VR + Send + Sync + 'static,
    ) -> KStream<K, VR> {
        self.left_join_with(table, joiner, Joined::default())
    }

    /// [`KStream::left_join`] with options (name, grace, serdes).
    pub fn left_join_with<VT: Clone + 'static, VR: Clone + 'static>(
        &self,
        table: &KTable<K, VT>,
        joiner: impl Fn(&V, Option<&VT>) -> VR + Send + Sync + 'static,
        joined: Joined<K, V>,
    ) -> KStream<K, VR> {
        let joiner: StreamTableJoiner<K, V, VT, Option<VR>> =
            Arc::new(move |_, v, t| Some(joiner(v, t)));
        self.stream_table_join(table, joiner, joined, "KSTREAM-LEFTJOIN-")
    }

    fn stream_table_join<VT: Clone + 'static, VR: Clone + 'static>(
        &self,
        table: &KTable<K, VT>,
        joiner: StreamTableJoiner<K, V, VT, Option<VR>>,
        joined: Joined<K, V>,
        prefix: &str,
    ) -> KStream<K, VR> {
        let getter = (table.getter)();
        let mut s = self.state.borrow_mut();
        if joined.bootstrap {
            s.topology.graph.mark_bootstrap_upstream(&table.node);
        }
        let key_serde = joined
            .key_serde
            .clone()
            .or_else(|| self.key_serde.clone())
            .or_else(kstreams_record::builtin_serde::<K>);
        let value_serde = joined
            .value_serde
            .clone()
            .or_else(|| self.value_serde.clone())
            .or_else(kstreams_record::builtin_serde::<V>);
        let serdes = |store: &str| {
            Ok::<_, TopologyError>((
                key_serde
                    .clone()
                    .ok_or_else(|| TopologyError::MissingSerde {
                        store: store.to_string(),
                        part: "key",
                        type_name: std::any::type_name::<K>(),
                    })?,
                value_serde
                    .clone()
                    .ok_or_else(|| TopologyError::MissingSerde {
                        store: store.to_string(),
                        part: "value",
                        type_name: std::any::type_name::<V>(),
                    })?,
            ))
        };
        // After a key change the stream goes through a repartition topic
        // so its records meet the table's partition. As in Kafka Streams,
        // the topic is named after the join's name or else the stream's
        // node, and drawn before the join's own name.
        let mut parent = self.node.clone();
        if self.repartition_required {
            let topic = joined.name.clone().unwrap_or_else(|| self.node.clone());
            if let Some((k, v)) = s.record(serdes(&format!("{topic}-repartition"))) {
                parent = self.through_repartition_topic(&mut s, topic, k, v).node;
            }
        }
        let name = s.name_or_generate(joined.name.clone(), prefix);
        let out = KStream::new(self.state.clone(), name.clone());
        let invalid = |message: String| TopologyError::InvalidOperator {
            operator: format!("join {name}"),
            message,
        };
        let Some(getter) = s.record(getter.ok_or_else(|| {
            invalid(
                "the table cannot be read by a join (a windowed or suppressed table, or a \
                 table whose store has no serdes)"
                    .to_string(),
            )
        })) else {
            return out;
        };
        let mut buffer = None;
        if let Some(grace) = joined.grace {
            if !getter.versioned {
                s.record::<()>(Err(invalid(
                    "a grace period needs a versioned table: materialize the table with \
                     Materialized::with_versioned_history"
                        .to_string(),
                )));
                return out;
            }
            let store = format!("{name}-Buffer");
            let Some((k, v)) = s.record(serdes(&store)) else {
                return out;
            };
            let builder = Stores::key_value_store_builder(
                Stores::in_memory_key_value_store(&store),
                BytesSerde,
                BufferedRecordSerde { key: k, value: v },
            );
            buffer = Some((store, duration_ms(grace), builder));
        }
        let make = getter.make.clone();
        let versioned = getter.versioned;
        let buffer_spec = buffer
            .as_ref()
            .map(|(store, grace, _)| (store.clone(), *grace));
        let added = s.topology.add_typed_processor::<K, V, K, VR, _>(
            name.clone(),
            Arc::new(move || StreamTableJoin {
                joiner: joiner.clone(),
                make: make.clone(),
                versioned,
                getter: None,
                buffer_spec: buffer_spec.clone(),
                buffer: None,
            }),
            &[parent.as_str()],
        );
        s.record(added);
        s.topology
            .graph
            .copartition(&[name.as_str(), table.node.as_str()]);
        let stores: Vec<&str> = getter.stores.iter().map(String::as_str).collect();
        let connected = s
            .topology
            .connect_processor_and_state_stores(&name, &stores)
            .map(|_| ());
        s.record(connected);
        if let Some((_, _, builder)) = buffer {
            let added = add_store(&mut s.topology, builder, &name);
            s.record(added);
        }
        let mut out = out;
        out.key_serde = self.key_serde.clone();
        out
    }
}

/// Kafka Streams' `KStreamKTableJoinProcessor`, with KIP-923's buffer.
struct StreamTableJoin<K, V, VT, VR> {
    joiner: StreamTableJoiner<K, V, VT, Option<VR>>,
    make: GetterFactory<K, VT>,
    versioned: bool,
    getter: Option<Box<dyn ValueGetter<K, VT>>>,
    buffer_spec: Option<(String, i64)>,
    buffer: Option<GraceBuffer<K, V>>,
}

impl<K: Clone + 'static, V: Clone + 'static, VT: 'static, VR: Clone + 'static>
    StreamTableJoin<K, V, VT, VR>
{
    fn join(
        &self,
        ctx: &mut ProcessorContext<'_, K, VR>,
        record: Record<K, V>,
    ) -> Result<(), ProcessorError> {
        let getter = self.getter.as_ref().ok_or("join not initialized")?;
        let found = if self.versioned {
            getter.get_as_of(&record.key, record.timestamp)?
        } else {
            getter.get(&record.key)?
        };
        let table_value = found.map(|f| f.value);
        if let Some(joined) = (self.joiner)(&record.key, &record.value, table_value.as_ref()) {
            ctx.forward(record.with_value(joined))?;
        }
        Ok(())
    }
}

impl<K: Clone + 'static, V: Clone + 'static, VT: 'static, VR: Clone + 'static>
    Processor<K, V, K, VR> for StreamTableJoin<K, V, VT, VR>
{
    fn init(&mut self, ctx: &mut ProcessorContext<'_, K, VR>) -> Result<(), ProcessorError> {
        self.getter = Some((self.make)(&ctx.store_lookup())?);
        if let Some((store, grace)) = &self.buffer_spec {
            self.buffer = Some(GraceBuffer::open(ctx.get_state_store(store)?, *grace)?);
        }
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, VR>,
        record: Record<K, V>,
    ) -> Result<(), ProcessorError> {
        let Some(buffer) = &mut self.buffer else {
            return self.join(ctx, record);
        };
        let due = buffer.add(record)?;
        for record in due {
            self.join(ctx, record)?;
        }
        Ok(())
    }
}

/// Stream records held back for a grace period, in a logged store keyed by
/// timestamp and arrival (so the store's order is the release order and
/// the buffer survives restarts).
struct GraceBuffer<K, V> {
    store: KeyValueStoreHandle<Vec<u8>, Record<K, V>>,
    grace_ms: i64,
    observed: Timestamp,
    next_seq: u64,
    /// Buffered timestamps, to know without a scan whether any is due.
    times: BTreeMap<(Timestamp, u64), ()>,
}

fn buffer_key(timestamp: Timestamp, seq: u64) -> Vec<u8> {
    let mut key = Vec::with_capacity(16);
    // Timestamps are not negative here (the task drops those), so their
    // big-endian bytes sort in time order.
    key.extend_from_slice(&timestamp.to_be_bytes());
    key.extend_from_slice(&seq.to_be_bytes());
    key
}

impl<K: Clone + 'static, V: Clone + 'static> GraceBuffer<K, V> {
    fn open(
        store: KeyValueStoreHandle<Vec<u8>, Record<K, V>>,
        grace_ms: i64,
    ) -> Result<Self, ProcessorError> {
        let mut buffer = GraceBuffer {
            store,
            grace_ms,
            observed: -1,
            next_seq: 0,
            times: BTreeMap::new(),
        };
        let entries = buffer
            .store
            .borrow()
            .all()?
            .collect::<Result<Vec<_>, _>>()?;
        for (key, record) in entries {
            let timestamp = i64::from_be_bytes(key[..8].try_into()?);
            let seq = u64::from_be_bytes(key[8..16].try_into()?);
            buffer.times.insert((timestamp, seq), ());
            buffer.next_seq = buffer.next_seq.max(seq + 1);
            buffer.observed = buffer.observed.max(record.timestamp);
        }
        Ok(buffer)
    }

    /// Buffers `record` and returns the records now due (timestamp at or
    /// before stream time minus grace), oldest first.
    fn add(&mut self, record: Record<K, V>) -> Result<Vec<Record<K, V>>, ProcessorError> {
        self.observed = self.observed.max(record.timestamp);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.times.insert((record.timestamp, seq), ());
        self.store
            .borrow_mut()
            .put(buffer_key(record.timestamp, seq), record)?;
        let release = self.observed - self.grace_ms;
        let mut due = Vec::new();
        while let Some(((timestamp, seq), _)) = self.times.first_key_value() {
            if *timestamp > release {
                break;
            }
            let key = buffer_key(*timestamp, *seq);
            self.times.pop_first();
            if let Some(record) = self.store.borrow_mut().delete(&key)? {
                due.push(record);
            }
        }
        Ok(due)
    }
}

/// The grace buffer's values: a whole record (timestamp, key, value,
/// headers) in our own layout.
struct BufferedRecordSerde<K, V> {
    key: SharedSerde<K>,
    value: SharedSerde<V>,
}

fn put_bytes(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        Some(b) => {
            out.extend_from_slice(&(b.len() as i32).to_be_bytes());
            out.extend_from_slice(b);
        }
        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
    }
}

fn take_bytes<'a>(
    rest: &mut &'a [u8],
    malformed: &dyn Fn() -> SerdeError,
) -> Result<Option<&'a [u8]>, SerdeError> {
    let len = rest.get(..4).ok_or_else(malformed)?;
    let len = i32::from_be_bytes(len.try_into().map_err(|_| malformed())?);
    *rest = &rest[4..];
    if len < 0 {
        return Ok(None);
    }
    let bytes = rest.get(..len as usize).ok_or_else(malformed)?;
    *rest = &rest[len as usize..];
    Ok(Some(bytes))
}

impl<K: 'static, V: 'static> Serde<Record<K, V>> for BufferedRecordSerde<K, V> {
    fn serialize(
        &self,
        topic: &str,
        _: &mut Headers,
        record: &Record<K, V>,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        let mut headers = record.headers.clone();
        let mut out = record.timestamp.to_be_bytes().to_vec();
        put_bytes(
            &mut out,
            self.key
                .serialize(topic, &mut headers, &record.key)?
                .as_deref(),
        );
        put_bytes(
            &mut out,
            self.value
                .serialize(topic, &mut headers, &record.value)?
                .as_deref(),
        );
        out.extend_from_slice(&(headers.iter().count() as i32).to_be_bytes());
        for header in headers.iter() {
            put_bytes(&mut out, Some(header.key.as_bytes()));
            put_bytes(&mut out, header.value.as_deref());
        }
        Ok(Some(out))
    }

    fn deserialize(
        &self,
        topic: &str,
        _: &Headers,
        bytes: Option<&[u8]>,
    ) -> Result<Record<K, V>, SerdeError> {
        let malformed = || SerdeError::Custom {
            topic: topic.to_string(),
            message: "malformed join grace buffer entry".to_string(),
        };
        let bytes = bytes.ok_or_else(malformed)?;
        let timestamp = i64::from_be_bytes(
            bytes
                .get(..8)
                .ok_or_else(malformed)?
                .try_into()
                .map_err(|_| malformed())?,
        );
        let mut rest = &bytes[8..];
        let key_bytes = take_bytes(&mut rest, &malformed)?;
        let value_bytes = take_bytes(&mut rest, &malformed)?;
        let count = i32::from_be_bytes(
            rest.get(..4)
                .ok_or_else(malformed)?
                .try_into()
                .map_err(|_| malformed())?,
        );
        rest = &rest[4..];
        let mut headers = Headers::new();
        for _ in 0..count.max(0) {
            let name = take_bytes(&mut rest, &malformed)?.ok_or_else(malformed)?;
            let value = take_bytes(&mut rest, &malformed)?;
            headers.add(
                String::from_utf8_lossy(name).into_owned(),
                value.map(|v| v.to_vec()),
            );
        }
        let key = self.key.deserialize(topic, &headers, key_bytes)?;
        let value = self.value.deserialize(topic, &headers, value_bytes)?;
        Ok(Record {
            key,
            value,
            timestamp,
            headers,
        })
    }
}

/// Which records of a table-table join produce results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TableJoinKind {
    Inner,
    Left,
    Outer,
}

/// A table-table joiner over the values present (`None`: absent).
type TableJoiner<V1, V2, VR> = Arc<dyn Fn(Option<&V1>, Option<&V2>) -> VR + Send + Sync>;

impl<K: Clone + 'static, V: Clone + 'static> KTable<K, V> {
    /// A table of the keys both tables have, with `joiner` of their values;
    /// updates on either side update the result (a key leaving either side
    /// is deleted).
    pub fn join<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KTable<K, VO>,
        joiner: impl Fn(&V, &VO) -> VR + Send + Sync + 'static,
    ) -> KTable<K, VR> {
        let joiner: TableJoiner<V, VO, VR> = Arc::new(move |a, b| match (a, b) {
            (Some(a), Some(b)) => joiner(a, b),
            _ => unreachable!("an inner join calls its joiner with both values"),
        });
        self.table_join(other, joiner, TableJoinKind::Inner, None)
    }

    /// A table of this table's keys, joined with the other's value when it
    /// has one.
    pub fn left_join<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KTable<K, VO>,
        joiner: impl Fn(&V, Option<&VO>) -> VR + Send + Sync + 'static,
    ) -> KTable<K, VR> {
        let joiner: TableJoiner<V, VO, VR> = Arc::new(move |a, b| match a {
            Some(a) => joiner(a, b),
            None => unreachable!("a left join calls its joiner with a left value"),
        });
        self.table_join(other, joiner, TableJoinKind::Left, None)
    }

    /// A table of the keys either table has.
    pub fn outer_join<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KTable<K, VO>,
        joiner: impl Fn(Option<&V>, Option<&VO>) -> VR + Send + Sync + 'static,
    ) -> KTable<K, VR> {
        self.table_join(other, Arc::new(joiner), TableJoinKind::Outer, None)
    }

    /// [`KTable::join`] with a name (`<name>` for the merge node,
    /// `<name>-join-this` and `<name>-join-other` for the two sides).
    pub fn join_named<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KTable<K, VO>,
        joiner: impl Fn(&V, &VO) -> VR + Send + Sync + 'static,
        named: impl IntoName,
    ) -> KTable<K, VR> {
        let joiner: TableJoiner<V, VO, VR> = Arc::new(move |a, b| match (a, b) {
            (Some(a), Some(b)) => joiner(a, b),
            _ => unreachable!("an inner join calls its joiner with both values"),
        });
        self.table_join(
            other,
            joiner,
            TableJoinKind::Inner,
            named.into_name().map(|n| n.0),
        )
    }

    /// [`KTable::left_join`] with a name, as [`KTable::join_named`].
    pub fn left_join_named<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KTable<K, VO>,
        joiner: impl Fn(&V, Option<&VO>) -> VR + Send + Sync + 'static,
        named: impl IntoName,
    ) -> KTable<K, VR> {
        let joiner: TableJoiner<V, VO, VR> = Arc::new(move |a, b| match a {
            Some(a) => joiner(a, b),
            None => unreachable!("a left join calls its joiner with a left value"),
        });
        self.table_join(
            other,
            joiner,
            TableJoinKind::Left,
            named.into_name().map(|n| n.0),
        )
    }

    /// [`KTable::outer_join`] with a name, as [`KTable::join_named`].
    pub fn outer_join_named<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KTable<K, VO>,
        joiner: impl Fn(Option<&V>, Option<&VO>) -> VR + Send + Sync + 'static,
        named: impl IntoName,
    ) -> KTable<K, VR> {
        self.table_join(
            other,
            Arc::new(joiner),
            TableJoinKind::Outer,
            named.into_name().map(|n| n.0),
        )
    }

    fn table_join<VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KTable<K, VO>,
        joiner: TableJoiner<V, VO, VR>,
        kind: TableJoinKind,
        named: Option<String>,
    ) -> KTable<K, VR> {
        // Each side needs the value its updates replace, to retract join
        // results (Kafka Streams materializes and asks both sources).
        self.enable_old_values(true);
        other.enable_old_values(true);
        let this_getter = (self.getter)();
        let other_getter = (other.getter)();
        let mut s = self.state.borrow_mut();
        // Kafka Streams names both sides JOINTHIS/JOINOTHER whatever the
        // join kind.
        let merge = s.name_or_generate(named.clone(), "KTABLE-MERGE-");
        let this_name = s.name_or_generate(
            named.as_ref().map(|n| format!("{n}-join-this")),
            "KTABLE-JOINTHIS-",
        );
        let other_name = s.name_or_generate(
            named.as_ref().map(|n| format!("{n}-join-other")),
            "KTABLE-JOINOTHER-",
        );
        let this_flag: OldValuesFlag = Arc::default();
        let other_flag: OldValuesFlag = Arc::default();
        let result_getter: TableGetter<K, VR>;
        {
            let (Some(this_getter), Some(other_getter)) = (this_getter, other_getter) else {
                s.record::<()>(Err(TopologyError::InvalidOperator {
                    operator: format!("join {merge}"),
                    message: "both tables must be readable by a join (not windowed or \
                              suppressed, and with serdes for their stores)"
                        .to_string(),
                }));
                drop(s);
                return joined_table(
                    self,
                    merge,
                    crate::table::no_getter(),
                    OldValues::own(this_flag),
                );
            };
            // This side's changes look up the other side, and the other way.
            let joiner_this = joiner.clone();
            let make_other = other_getter.make.clone();
            let flag = this_flag.clone();
            let added = s
                .topology
                .add_typed_processor::<K, Change<V>, K, Change<VR>, _>(
                    this_name.clone(),
                    Arc::new(move || TableJoinSide::<K, V, VO, VR> {
                        joiner: {
                            let j = joiner_this.clone();
                            Arc::new(move |mine: Option<&V>, theirs: Option<&VO>| j(mine, theirs))
                        },
                        make: make_other.clone(),
                        getter: None,
                        mine_required: kind != TableJoinKind::Outer,
                        theirs_required: kind == TableJoinKind::Inner,
                        send_old: flag.clone(),
                    }),
                    &[self.node.as_str()],
                );
            s.record(added);
            let joiner_other = joiner.clone();
            let make_this = this_getter.make.clone();
            let flag = other_flag.clone();
            let added = s
                .topology
                .add_typed_processor::<K, Change<VO>, K, Change<VR>, _>(
                    other_name.clone(),
                    Arc::new(move || TableJoinSide::<K, VO, V, VR> {
                        joiner: {
                            let j = joiner_other.clone();
                            Arc::new(move |mine: Option<&VO>, theirs: Option<&V>| j(theirs, mine))
                        },
                        make: make_this.clone(),
                        getter: None,
                        mine_required: kind == TableJoinKind::Inner,
                        theirs_required: kind != TableJoinKind::Outer,
                        send_old: flag.clone(),
                    }),
                    &[other.node.as_str()],
                );
            s.record(added);
            let added = s
                .topology
                .add_typed_processor::<K, Change<VR>, K, Change<VR>, _>(
                    merge.clone(),
                    Arc::new(|| PassThrough),
                    &[this_name.as_str(), other_name.as_str()],
                );
            s.record(added);
            for (node, stores) in [
                (&this_name, &other_getter.stores),
                (&other_name, &this_getter.stores),
            ] {
                let stores: Vec<&str> = stores.iter().map(String::as_str).collect();
                let connected = s
                    .topology
                    .connect_processor_and_state_stores(node, &stores)
                    .map(|_| ());
                s.record(connected);
            }
            s.topology
                .graph
                .copartition(&[self.node.as_str(), other.node.as_str()]);
            let getter = joined_getter(this_getter, other_getter, joiner, kind);
            result_getter = Rc::new(move || Some(getter.clone()));
        }
        drop(s);
        // Old values of the result need old values from both sides.
        let this_parent = self.old_values.clone();
        let other_parent = other.old_values.clone();
        let old_values = OldValues {
            enable: Rc::new(move |force| {
                let this_ok = (this_parent.enable)(force);
                let other_ok = (other_parent.enable)(force);
                if this_ok && other_ok {
                    this_flag.store(true, Ordering::Relaxed);
                    other_flag.store(true, Ordering::Relaxed);
                    true
                } else {
                    false
                }
            }),
        };
        joined_table(self, merge, result_getter, old_values)
    }
}

fn joined_table<K: Clone + 'static, V: Clone + 'static, VR>(
    this: &KTable<K, V>,
    node: String,
    getter: TableGetter<K, VR>,
    old_values: OldValues,
) -> KTable<K, VR> {
    KTable {
        state: this.state.clone(),
        node,
        store: Arc::new(OnceLock::new()),
        key_serde: this.key_serde.clone(),
        value_serde: None,
        old_values,
        getter,
        window: None,
        types: PhantomData,
    }
}

/// One side of a table-table join: Kafka Streams' `KTableKTableJoin*`
/// processors. Looks the other side up for each change of its own.
struct TableJoinSide<K, VM, VT, VR> {
    /// (my value, their value) -> result.
    joiner: TableJoiner<VM, VT, VR>,
    make: GetterFactory<K, VT>,
    getter: Option<Box<dyn ValueGetter<K, VT>>>,
    /// A result needs my value (inner, and the left side of a left join).
    mine_required: bool,
    /// A result needs their value (inner, and the right side of a left join).
    theirs_required: bool,
    send_old: OldValuesFlag,
}

impl<K: Clone + 'static, VM: Clone + 'static, VT: 'static, VR: Clone + 'static>
    Processor<K, Change<VM>, K, Change<VR>> for TableJoinSide<K, VM, VT, VR>
{
    fn init(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Change<VR>>,
    ) -> Result<(), ProcessorError> {
        self.getter = Some((self.make)(&ctx.store_lookup())?);
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Change<VR>>,
        record: Record<K, Change<VM>>,
    ) -> Result<(), ProcessorError> {
        let getter = self.getter.as_ref().ok_or("join not initialized")?;
        let theirs = getter.get(&record.key)?;
        if self.theirs_required && theirs.is_none() {
            return Ok(());
        }
        let change = &record.value;
        if theirs.is_none() && change.new_value.is_none() && change.old_value.is_none() {
            return Ok(());
        }
        let timestamp = theirs
            .as_ref()
            .map_or(record.timestamp, |t| record.timestamp.max(t.timestamp));
        let theirs = theirs.map(|t| t.value);
        let result = |mine: Option<&VM>| -> Option<VR> {
            let has_result = if self.mine_required {
                mine.is_some()
            } else {
                mine.is_some() || theirs.is_some()
            };
            has_result.then(|| (self.joiner)(mine, theirs.as_ref()))
        };
        let new_value = result(change.new_value.as_ref());
        let old_value = if sends_old(&self.send_old) {
            result(change.old_value.as_ref())
        } else {
            None
        };
        ctx.forward(Record {
            key: record.key,
            value: Change::new(new_value, old_value),
            timestamp,
            headers: record.headers,
        })?;
        Ok(())
    }
}

/// The value getter of a table-table join's result: both sides' getters
/// and the joiner.
fn joined_getter<K: 'static, V: 'static, VO: 'static, VR: 'static>(
    this: GetterSupplier<K, V>,
    other: GetterSupplier<K, VO>,
    joiner: TableJoiner<V, VO, VR>,
    kind: TableJoinKind,
) -> GetterSupplier<K, VR> {
    let make_this = this.make.clone();
    let make_other = other.make.clone();
    let make: GetterFactory<K, VR> = Arc::new(move |lookup: &StoreLookup<'_>| {
        let getter: Box<dyn ValueGetter<K, VR>> = Box::new(JoinedGetter {
            this: make_this(lookup)?,
            other: make_other(lookup)?,
            joiner: joiner.clone(),
            kind,
        });
        Ok(getter)
    });
    let mut stores = this.stores;
    stores.extend(other.stores);
    GetterSupplier {
        stores,
        make,
        versioned: false,
    }
}

struct JoinedGetter<K, V, VO, VR> {
    this: Box<dyn ValueGetter<K, V>>,
    other: Box<dyn ValueGetter<K, VO>>,
    joiner: TableJoiner<V, VO, VR>,
    kind: TableJoinKind,
}

impl<K, V, VO, VR> ValueGetter<K, VR> for JoinedGetter<K, V, VO, VR> {
    fn get(&self, key: &K) -> Result<Option<ValueAndTimestamp<VR>>, ProcessorError> {
        let this = self.this.get(key)?;
        let other = self.other.get(key)?;
        let present = match self.kind {
            TableJoinKind::Inner => this.is_some() && other.is_some(),
            TableJoinKind::Left => this.is_some(),
            TableJoinKind::Outer => this.is_some() || other.is_some(),
        };
        if !present {
            return Ok(None);
        }
        let timestamp = this
            .as_ref()
            .map(|t| t.timestamp)
            .max(other.as_ref().map(|o| o.timestamp))
            .unwrap_or(-1);
        let value = (self.joiner)(
            this.as_ref().map(|t| &t.value),
            other.as_ref().map(|o| &o.value),
        );
        Ok(Some(ValueAndTimestamp::make(value, timestamp)))
    }
}
