//! Foreign-key table-table joins (KIP-213): each row of the left table
//! joins the right table's row whose key it names, although the two tables
//! are partitioned by different keys.
//!
//! As in Kafka Streams, it takes two trips through internal topics. The
//! left side sends a subscription (its primary key, a hash of its value,
//! what to do) to the foreign key's partition on
//! `<app>-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-<n>-topic`; the right
//! side keeps the subscriptions by foreign key and answers each, and again
//! whenever the right row changes, on
//! `<app>-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-<n>-topic` keyed by the
//! primary key. The left side joins an answer only if the hash still
//! matches its current value, so answers to outdated rows are dropped.
//! The byte layouts of the two topics are our own.

use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

use kstreams_record::{BytesSerde, Headers, Record, SharedSerde, Timestamp};
use kstreams_state::{KeyValueStoreHandle, Stores};

use crate::internals::graph::SourceTopics;
use crate::internals::nodes::SinkPartitioning;
use crate::materialized::add_store;
use crate::stateful::{Change, GetterFactory, ValueGetter};
use crate::table::{KTable, OldValues};
use crate::topology::SinkTopic;
use crate::{Processor, ProcessorContext, ProcessorError, TopologyError};

/// What a subscription asks of the right side.
const UNSUBSCRIBE: u8 = 0;
/// Subscribe; answer even without a right row (left join).
const SUBSCRIBE_ANSWER_ALWAYS: u8 = 1;
/// Subscribe; answer only with a right row (inner join).
const SUBSCRIBE_ANSWER_IF_FOUND: u8 = 2;
/// The left row is gone: unsubscribe and answer so a tombstone follows.
const UNSUBSCRIBE_AND_ANSWER: u8 = 3;

/// A stable 64-bit hash of a left value's bytes (FNV-1a): how the left side
/// recognizes answers to its current value.
fn value_hash(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

fn serialize<T: 'static>(
    serde: &SharedSerde<T>,
    topic: &str,
    value: &T,
) -> Result<Vec<u8>, ProcessorError> {
    Ok(serde
        .serialize(topic, &mut Headers::new(), value)?
        .ok_or("a foreign-key join key or value serialized to null")?)
}

/// Subscription bytes: instruction, hash flag and hash, primary key.
fn subscription(instruction: u8, hash: Option<u64>, pk: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(10 + pk.len());
    out.push(instruction);
    out.push(u8::from(hash.is_some()));
    out.extend_from_slice(&hash.unwrap_or(0).to_be_bytes());
    out.extend_from_slice(pk);
    out
}

fn parse_subscription(bytes: &[u8]) -> Option<(u8, Option<u64>, &[u8])> {
    let instruction = *bytes.first()?;
    let has_hash = *bytes.get(1)? == 1;
    let hash = u64::from_be_bytes(bytes.get(2..10)?.try_into().ok()?);
    Some((instruction, has_hash.then_some(hash), &bytes[10..]))
}

/// Response bytes: hash flag and hash, right value flag and bytes.
fn response(hash: Option<u64>, right: Option<&[u8]>) -> Vec<u8> {
    let mut out = Vec::with_capacity(10 + right.map_or(0, <[u8]>::len));
    out.push(u8::from(hash.is_some()));
    out.extend_from_slice(&hash.unwrap_or(0).to_be_bytes());
    out.push(u8::from(right.is_some()));
    out.extend_from_slice(right.unwrap_or_default());
    out
}

fn parse_response(bytes: &[u8]) -> Option<(Option<u64>, Option<&[u8]>)> {
    let has_hash = *bytes.first()? == 1;
    let hash = u64::from_be_bytes(bytes.get(1..9)?.try_into().ok()?);
    let has_right = *bytes.get(9)? == 1;
    Some((has_hash.then_some(hash), has_right.then(|| &bytes[10..])))
}

/// The subscription store's key: foreign key length and bytes, then the
/// primary key, so one foreign key's subscriptions share a prefix.
fn subscription_key(fk: &[u8], pk: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + fk.len() + pk.len());
    out.extend_from_slice(&(fk.len() as u32).to_be_bytes());
    out.extend_from_slice(fk);
    out.extend_from_slice(pk);
    out
}

fn subscription_prefix(fk: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + fk.len());
    out.extend_from_slice(&(fk.len() as u32).to_be_bytes());
    out.extend_from_slice(fk);
    out
}

type ForeignKey<V, KO> = Arc<dyn Fn(&V) -> KO + Send + Sync>;
type FkJoiner<V, VO, VR> = Arc<dyn Fn(&V, Option<&VO>) -> VR + Send + Sync>;

impl<K: Clone + 'static, V: Clone + 'static> KTable<K, V> {
    /// Joins each row with the row of `other` whose key `foreign_key`
    /// takes from the row's value; rows without one are absent from the
    /// result. Kafka Streams' foreign-key `KTable#join` (KIP-213).
    pub fn join_fk<KO: Clone + PartialEq + 'static, VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KTable<KO, VO>,
        foreign_key: impl Fn(&V) -> KO + Send + Sync + 'static,
        joiner: impl Fn(&V, &VO) -> VR + Send + Sync + 'static,
    ) -> KTable<K, VR> {
        let joiner: FkJoiner<V, VO, VR> = Arc::new(move |v, o| match o {
            Some(o) => joiner(v, o),
            None => unreachable!("an inner join calls its joiner with both values"),
        });
        self.fk_join(other, Arc::new(foreign_key), joiner, false)
    }

    /// Like [`KTable::join_fk`], keeping rows whose foreign row is missing
    /// (joined with `None`).
    pub fn left_join_fk<
        KO: Clone + PartialEq + 'static,
        VO: Clone + 'static,
        VR: Clone + 'static,
    >(
        &self,
        other: &KTable<KO, VO>,
        foreign_key: impl Fn(&V) -> KO + Send + Sync + 'static,
        joiner: impl Fn(&V, Option<&VO>) -> VR + Send + Sync + 'static,
    ) -> KTable<K, VR> {
        self.fk_join(other, Arc::new(foreign_key), Arc::new(joiner), true)
    }

    fn fk_join<KO: Clone + PartialEq + 'static, VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KTable<KO, VO>,
        foreign_key: ForeignKey<V, KO>,
        joiner: FkJoiner<V, VO, VR>,
        left_join: bool,
    ) -> KTable<K, VR> {
        // The left side must know which foreign key a row had before.
        self.enable_old_values(true);
        let left_getter = (self.getter)();
        let right_getter = (other.getter)();
        let mut s = self.state.borrow_mut();
        let sender = s.new_name("KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-");
        let subscription_topic = format!("{sender}-topic");
        let subscription_sink = s.new_name("KTABLE-SINK-");
        let subscription_source = s.new_name("KTABLE-SOURCE-");
        let store = s.new_name("KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-");
        let subscription_processor = s.new_name("KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-");
        let foreign_processor = s.new_name("KTABLE-FK-JOIN-FOREIGN-PROCESSOR-");
        let response_name = s.new_name("KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-");
        let response_topic = format!("{response_name}-topic");
        let response_sink = s.new_name("KTABLE-SINK-");
        let response_sink_2 = s.new_name("KTABLE-SINK-");
        let response_source = s.new_name("KTABLE-SOURCE-");
        let result = s.new_name("KTABLE-FK-JOIN-OUTPUT-");
        let flag: crate::stateful::OldValuesFlag = Arc::default();
        let store_cell = Arc::new(OnceLock::new());
        // With a serde for the results they are kept in a store, which
        // gives the result table old values and lookups (Kafka Streams
        // materializes it too); without one it has neither.
        let result_serde = kstreams_record::builtin_serde::<VR>();
        let (old_values, getter) = if result_serde.is_some() {
            (
                OldValues::own(flag.clone()),
                crate::table::lazy_store_getter(&store_cell),
            )
        } else {
            let no: OldValues = OldValues {
                enable: std::rc::Rc::new(|_| false),
            };
            (no, crate::table::no_getter())
        };
        let table = KTable {
            state: self.state.clone(),
            node: result.clone(),
            store: store_cell.clone(),
            key_serde: self.key_serde.clone(),
            value_serde: result_serde.clone(),
            old_values,
            getter,
            window: None,
            types: PhantomData,
        };
        let invalid = |message: &str| TopologyError::InvalidOperator {
            operator: format!("foreign-key join {result}"),
            message: message.to_string(),
        };
        let (Some(left_getter), Some(right_getter)) = (left_getter, right_getter) else {
            s.record::<()>(Err(invalid(
                "both tables must be readable by a join (not windowed or suppressed, with \
                 serdes for their stores)",
            )));
            return table;
        };
        let key_serde = self
            .key_serde
            .clone()
            .or_else(kstreams_record::builtin_serde::<K>);
        let value_serde = self
            .value_serde
            .clone()
            .or_else(kstreams_record::builtin_serde::<V>);
        let fk_serde = other
            .key_serde
            .clone()
            .or_else(kstreams_record::builtin_serde::<KO>);
        let right_serde = other
            .value_serde
            .clone()
            .or_else(kstreams_record::builtin_serde::<VO>);
        let (Some(key_serde), Some(value_serde), Some(fk_serde), Some(right_serde)) =
            (key_serde, value_serde, fk_serde, right_serde)
        else {
            s.record::<()>(Err(invalid(
                "the keys and values of both tables need serdes: read them with serdes \
                 or materialize them with Materialized::with_key_serde/with_value_serde",
            )));
            return table;
        };
        let bytes: SharedSerde<Vec<u8>> = Arc::new(BytesSerde);
        let key_serde_for_store = key_serde.clone();

        // Left: changes of the left table become subscriptions.
        {
            let (foreign_key, key_serde, value_serde, fk_serde) = (
                foreign_key.clone(),
                key_serde.clone(),
                value_serde.clone(),
                fk_serde.clone(),
            );
            let topic = subscription_topic.clone();
            let added = s
                .topology
                .add_typed_processor::<K, Change<V>, Vec<u8>, Vec<u8>, _>(
                    sender.clone(),
                    Arc::new(move || SubscriptionSender {
                        foreign_key: foreign_key.clone(),
                        key_serde: key_serde.clone(),
                        value_serde: value_serde.clone(),
                        fk_serde: fk_serde.clone(),
                        topic: topic.clone(),
                        left_join,
                    }),
                    &[self.node.as_str()],
                );
            s.record(added);
        }
        let added = s.topology.add_typed_sink(
            subscription_sink,
            SinkTopic::Fixed(subscription_topic.clone()),
            bytes.clone(),
            bytes.clone(),
            SinkPartitioning::WholeKey,
            &[sender.as_str()],
        );
        s.record(added);
        s.topology.mark_internal_topic(&subscription_topic);
        let added = s.topology.add_typed_source(
            subscription_source.clone(),
            SourceTopics::Names(vec![subscription_topic.clone()]),
            bytes.clone(),
            bytes.clone(),
            None,
        );
        s.record(added);

        // Right: subscriptions are kept by foreign key and answered.
        {
            let make = right_getter.make.clone();
            let (store_name, right_serde, fk_serde) =
                (store.clone(), right_serde.clone(), fk_serde.clone());
            let added = s
                .topology
                .add_typed_processor::<Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>, _>(
                    subscription_processor.clone(),
                    Arc::new(move || SubscriptionReceiver::<KO, VO> {
                        store_name: store_name.clone(),
                        store: None,
                        make: make.clone(),
                        getter: None,
                        fk_serde: fk_serde.clone(),
                        right_serde: right_serde.clone(),
                    }),
                    &[subscription_source.as_str()],
                );
            s.record(added);
        }
        let subscriptions = Stores::key_value_store_builder(
            Stores::in_memory_key_value_store(&store),
            BytesSerde,
            BytesSerde,
        );
        let added = add_store(&mut s.topology, subscriptions, &subscription_processor);
        s.record(added);
        let stores: Vec<&str> = right_getter.stores.iter().map(String::as_str).collect();
        let connected = s
            .topology
            .connect_processor_and_state_stores(&subscription_processor, &stores)
            .map(|_| ());
        s.record(connected);
        // ... and answered again whenever the right row changes.
        {
            let (store_name, fk_serde, right_serde) =
                (store.clone(), fk_serde.clone(), right_serde.clone());
            let added = s
                .topology
                .add_typed_processor::<KO, Change<VO>, Vec<u8>, Vec<u8>, _>(
                    foreign_processor.clone(),
                    Arc::new(move || ForeignChangeProcessor::<KO, VO> {
                        store_name: store_name.clone(),
                        store: None,
                        fk_serde: fk_serde.clone(),
                        right_serde: right_serde.clone(),
                    }),
                    &[other.node.as_str()],
                );
            s.record(added);
        }
        let connected = s
            .topology
            .connect_processor_and_state_stores(&foreign_processor, &[store.as_str()])
            .map(|_| ());
        s.record(connected);
        for (sink, parent) in [
            (response_sink, &subscription_processor),
            (response_sink_2, &foreign_processor),
        ] {
            let added = s.topology.add_typed_sink(
                sink,
                SinkTopic::Fixed(response_topic.clone()),
                bytes.clone(),
                bytes.clone(),
                SinkPartitioning::WholeKey,
                &[parent.as_str()],
            );
            s.record(added);
        }
        s.topology.mark_internal_topic(&response_topic);
        let added = s.topology.add_typed_source(
            response_source.clone(),
            SourceTopics::Names(vec![response_topic.clone()]),
            bytes.clone(),
            bytes,
            None,
        );
        s.record(added);

        // Left again: answers to the current value are joined.
        {
            let make = left_getter.make.clone();
            let store_name = result_serde
                .as_ref()
                .map(|_| format!("{result}-STATE-STORE"));
            let flag = flag.clone();
            let added = s
                .topology
                .add_typed_processor::<Vec<u8>, Vec<u8>, K, Change<VR>, _>(
                    result.clone(),
                    Arc::new(move || ResponseJoiner::<K, V, VO, VR> {
                        store_name: store_name.clone(),
                        send_old: flag.clone(),
                        results: None,
                        make: make.clone(),
                        getter: None,
                        key_serde: key_serde.clone(),
                        value_serde: value_serde.clone(),
                        right_serde: right_serde.clone(),
                        joiner: joiner.clone(),
                        left_join,
                    }),
                    &[response_source.as_str()],
                );
            s.record(added);
        }
        let stores: Vec<&str> = left_getter.stores.iter().map(String::as_str).collect();
        let connected = s
            .topology
            .connect_processor_and_state_stores(&result, &stores)
            .map(|_| ());
        s.record(connected);
        if let Some(result_serde) = result_serde {
            let name = format!("{result}-STATE-STORE");
            let results = Stores::timestamped_key_value_store_builder(
                Stores::in_memory_key_value_store(&name),
                key_serde_for_store,
                result_serde,
            )
            .with_caching_disabled();
            let added = add_store(&mut s.topology, results, &result);
            s.record(added);
            let _ = store_cell.set(name);
        }
        // The subscriptions go to the right table's partitions, the answers
        // to the left table's.
        s.topology
            .graph
            .copartition(&[subscription_source.as_str(), other.node.as_str()]);
        s.topology
            .graph
            .copartition(&[response_source.as_str(), self.node.as_str()]);
        table
    }
}

/// Left side: a left row's change becomes subscriptions, keyed by the
/// foreign key (so they reach its partition), carrying the primary key.
struct SubscriptionSender<K, V, KO> {
    foreign_key: ForeignKey<V, KO>,
    key_serde: SharedSerde<K>,
    value_serde: SharedSerde<V>,
    fk_serde: SharedSerde<KO>,
    topic: String,
    left_join: bool,
}

impl<K: 'static, V: 'static, KO: PartialEq + 'static> Processor<K, Change<V>, Vec<u8>, Vec<u8>>
    for SubscriptionSender<K, V, KO>
{
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, Vec<u8>, Vec<u8>>,
        record: Record<K, Change<V>>,
    ) -> Result<(), ProcessorError> {
        let topic = self.topic.as_str();
        let pk = serialize(&self.key_serde, topic, &record.key)?;
        let change = &record.value;
        let old_fk = change.old_value.as_ref().map(|v| (self.foreign_key)(v));
        let new_fk = change.new_value.as_ref().map(|v| (self.foreign_key)(v));
        let mut send = |fk: &KO, value: Vec<u8>| -> Result<(), ProcessorError> {
            ctx.forward(Record {
                key: serialize(&self.fk_serde, topic, fk)?,
                value,
                timestamp: record.timestamp,
                headers: record.headers.clone(),
            })?;
            Ok(())
        };
        match (&new_fk, &change.new_value) {
            (Some(new_fk), Some(new_value)) => {
                let moved = old_fk.as_ref().is_some_and(|old| old != new_fk);
                if let Some(old_fk) = old_fk.as_ref().filter(|old| *old != new_fk) {
                    send(old_fk, subscription(UNSUBSCRIBE, None, &pk))?;
                }
                let hash = value_hash(&serialize(&self.value_serde, topic, new_value)?);
                // A row that moved to another foreign key must hear back even
                // if that key has no row: its old result is retracted then.
                let instruction = if self.left_join || moved {
                    SUBSCRIBE_ANSWER_ALWAYS
                } else {
                    SUBSCRIBE_ANSWER_IF_FOUND
                };
                send(new_fk, subscription(instruction, Some(hash), &pk))?;
            }
            _ => {
                if let Some(old_fk) = &old_fk {
                    send(old_fk, subscription(UNSUBSCRIBE_AND_ANSWER, None, &pk))?;
                }
            }
        }
        Ok(())
    }
}

/// Right side: keeps subscriptions by foreign key and answers them with
/// the right row (keyed by the primary key, back to the left partition).
struct SubscriptionReceiver<KO, VO> {
    store_name: String,
    store: Option<KeyValueStoreHandle<Vec<u8>, Vec<u8>>>,
    make: GetterFactory<KO, VO>,
    getter: Option<Box<dyn ValueGetter<KO, VO>>>,
    fk_serde: SharedSerde<KO>,
    right_serde: SharedSerde<VO>,
}

impl<KO: 'static, VO: 'static> Processor<Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>>
    for SubscriptionReceiver<KO, VO>
{
    fn init(
        &mut self,
        ctx: &mut ProcessorContext<'_, Vec<u8>, Vec<u8>>,
    ) -> Result<(), ProcessorError> {
        self.store = Some(ctx.get_state_store(&self.store_name)?);
        self.getter = Some((self.make)(&ctx.store_lookup())?);
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, Vec<u8>, Vec<u8>>,
        record: Record<Vec<u8>, Vec<u8>>,
    ) -> Result<(), ProcessorError> {
        let store = self
            .store
            .as_ref()
            .ok_or("foreign-key join not initialized")?;
        let getter = self
            .getter
            .as_ref()
            .ok_or("foreign-key join not initialized")?;
        let (instruction, hash, pk) =
            parse_subscription(&record.value).ok_or("malformed foreign-key subscription")?;
        let key = subscription_key(&record.key, pk);
        if instruction == UNSUBSCRIBE || instruction == UNSUBSCRIBE_AND_ANSWER {
            store.borrow_mut().delete(&key)?;
        } else {
            let mut stored = record.value.clone();
            stored.extend_from_slice(&record.timestamp.to_be_bytes());
            store.borrow_mut().put(key, stored)?;
        }
        if instruction == UNSUBSCRIBE {
            return Ok(());
        }
        let fk: KO = self
            .fk_serde
            .deserialize("", &Headers::new(), Some(&record.key))?;
        let right = getter.get(&fk)?;
        if right.is_none() && instruction == SUBSCRIBE_ANSWER_IF_FOUND {
            return Ok(());
        }
        let timestamp = right
            .as_ref()
            .map_or(record.timestamp, |r| record.timestamp.max(r.timestamp));
        let right_bytes = match &right {
            Some(r) => Some(serialize(&self.right_serde, "", &r.value)?),
            None => None,
        };
        ctx.forward(Record {
            key: pk.to_vec(),
            value: response(hash, right_bytes.as_deref()),
            timestamp,
            headers: record.headers,
        })?;
        Ok(())
    }
}

/// Right side: a right row's change answers every subscription to it.
struct ForeignChangeProcessor<KO, VO> {
    store_name: String,
    store: Option<KeyValueStoreHandle<Vec<u8>, Vec<u8>>>,
    fk_serde: SharedSerde<KO>,
    right_serde: SharedSerde<VO>,
}

impl<KO: 'static, VO: 'static> Processor<KO, Change<VO>, Vec<u8>, Vec<u8>>
    for ForeignChangeProcessor<KO, VO>
{
    fn init(
        &mut self,
        ctx: &mut ProcessorContext<'_, Vec<u8>, Vec<u8>>,
    ) -> Result<(), ProcessorError> {
        self.store = Some(ctx.get_state_store(&self.store_name)?);
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, Vec<u8>, Vec<u8>>,
        record: Record<KO, Change<VO>>,
    ) -> Result<(), ProcessorError> {
        let store = self
            .store
            .as_ref()
            .ok_or("foreign-key join not initialized")?;
        let fk = serialize(&self.fk_serde, "", &record.key)?;
        let right = match &record.value.new_value {
            Some(v) => Some(serialize(&self.right_serde, "", v)?),
            None => None,
        };
        let subscribers = store
            .borrow()
            .prefix_scan(&subscription_prefix(&fk))?
            .collect::<Result<Vec<_>, _>>()?;
        for (_, stored) in subscribers {
            let (_, hash, pk_and_ts) =
                parse_subscription(&stored).ok_or("malformed foreign-key subscription")?;
            let Some(split) = pk_and_ts.len().checked_sub(8) else {
                continue;
            };
            let (pk, ts) = pk_and_ts.split_at(split);
            let subscribed_at = Timestamp::from_be_bytes(ts.try_into()?);
            // Every subscriber hears of the change, a delete included: a
            // joined row is retracted then.
            ctx.forward(Record {
                key: pk.to_vec(),
                value: response(hash, right.as_deref()),
                timestamp: record.timestamp.max(subscribed_at),
                headers: record.headers.clone(),
            })?;
        }
        Ok(())
    }
}

/// Left side: joins an answer with the left row if the answer is about the
/// row's current value; a stale answer is dropped.
struct ResponseJoiner<K, V, VO, VR> {
    /// The result table's store, when results have a serde.
    store_name: Option<String>,
    send_old: crate::stateful::OldValuesFlag,
    results: Option<crate::stateful::TableStore<K, VR>>,
    make: GetterFactory<K, V>,
    getter: Option<Box<dyn ValueGetter<K, V>>>,
    key_serde: SharedSerde<K>,
    value_serde: SharedSerde<V>,
    right_serde: SharedSerde<VO>,
    joiner: FkJoiner<V, VO, VR>,
    left_join: bool,
}

impl<K: Clone + 'static, V: 'static, VO: 'static, VR: Clone + 'static>
    Processor<Vec<u8>, Vec<u8>, K, Change<VR>> for ResponseJoiner<K, V, VO, VR>
{
    fn init(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Change<VR>>,
    ) -> Result<(), ProcessorError> {
        self.getter = Some((self.make)(&ctx.store_lookup())?);
        if let Some(name) = &self.store_name {
            self.results = Some(crate::stateful::TableStore::open(
                ctx,
                name,
                crate::stateful::sends_old(&self.send_old),
            )?);
        }
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Change<VR>>,
        record: Record<Vec<u8>, Vec<u8>>,
    ) -> Result<(), ProcessorError> {
        let getter = self
            .getter
            .as_ref()
            .ok_or("foreign-key join not initialized")?;
        let (hash, right) =
            parse_response(&record.value).ok_or("malformed foreign-key response")?;
        let key = self
            .key_serde
            .deserialize("", &Headers::new(), Some(&record.key))?;
        let current = getter.get(&key)?;
        let current_hash = match &current {
            Some(c) => Some(value_hash(&serialize(&self.value_serde, "", &c.value)?)),
            None => None,
        };
        if current_hash != hash {
            return Ok(()); // an answer about a value the row no longer has
        }
        let right = match right {
            Some(bytes) => Some(
                self.right_serde
                    .deserialize("", &Headers::new(), Some(bytes))?,
            ),
            None => None,
        };
        let result = match (&current, &right) {
            (Some(left), right) if right.is_some() || self.left_join => {
                Some((self.joiner)(&left.value, right.as_ref()))
            }
            _ => None,
        };
        let old = match &self.results {
            Some(results) => {
                let old = results.get(&key)?.map(|o| o.value);
                results.put(ctx, key.clone(), result.clone(), record.timestamp)?;
                old.filter(|_| crate::stateful::sends_old(&self.send_old))
            }
            None => None,
        };
        ctx.forward(Record {
            key,
            value: Change::new(result, old),
            timestamp: record.timestamp,
            headers: record.headers,
        })?;
        Ok(())
    }
}
