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

use std::sync::Arc;

use kstreams_record::{Headers, Record, SharedSerde, Timestamp};
use kstreams_state::KeyValueStoreHandle;

use crate::change::Change;
use crate::operators::getters::{GetterFactory, ValueGetter};
use crate::{Processor, ProcessorContext, ProcessorError};

/// What a subscription asks of the right side.
pub(crate) const UNSUBSCRIBE: u8 = 0;
/// Subscribe; answer even without a right row (left join).
pub(crate) const SUBSCRIBE_ANSWER_ALWAYS: u8 = 1;
/// Subscribe; answer only with a right row (inner join).
pub(crate) const SUBSCRIBE_ANSWER_IF_FOUND: u8 = 2;
/// The left row is gone: unsubscribe and answer so a tombstone follows.
pub(crate) const UNSUBSCRIBE_AND_ANSWER: u8 = 3;

/// A stable 64-bit hash of a left value's bytes (FNV-1a): how the left side
/// recognizes answers to its current value.
pub(crate) fn value_hash(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

pub(crate) fn serialize<T: 'static>(
    serde: &SharedSerde<T>,
    topic: &str,
    value: &T,
) -> Result<Vec<u8>, ProcessorError> {
    Ok(serde
        .serialize(topic, &mut Headers::new(), value)?
        .ok_or("a foreign-key join key or value serialized to null")?)
}

/// Subscription bytes: instruction, hash flag and hash, primary key.
pub(crate) fn subscription(instruction: u8, hash: Option<u64>, pk: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(10 + pk.len());
    out.push(instruction);
    out.push(u8::from(hash.is_some()));
    out.extend_from_slice(&hash.unwrap_or(0).to_be_bytes());
    out.extend_from_slice(pk);
    out
}

pub(crate) fn parse_subscription(bytes: &[u8]) -> Option<(u8, Option<u64>, &[u8])> {
    let instruction = *bytes.first()?;
    let has_hash = *bytes.get(1)? == 1;
    let hash = u64::from_be_bytes(bytes.get(2..10)?.try_into().ok()?);
    Some((instruction, has_hash.then_some(hash), &bytes[10..]))
}

/// Response bytes: hash flag and hash, right value flag and bytes.
pub(crate) fn response(hash: Option<u64>, right: Option<&[u8]>) -> Vec<u8> {
    let mut out = Vec::with_capacity(10 + right.map_or(0, <[u8]>::len));
    out.push(u8::from(hash.is_some()));
    out.extend_from_slice(&hash.unwrap_or(0).to_be_bytes());
    out.push(u8::from(right.is_some()));
    out.extend_from_slice(right.unwrap_or_default());
    out
}

pub(crate) fn parse_response(bytes: &[u8]) -> Option<(Option<u64>, Option<&[u8]>)> {
    let has_hash = *bytes.first()? == 1;
    let hash = u64::from_be_bytes(bytes.get(1..9)?.try_into().ok()?);
    let has_right = *bytes.get(9)? == 1;
    Some((has_hash.then_some(hash), has_right.then(|| &bytes[10..])))
}

/// The subscription store's key: foreign key length and bytes, then the
/// primary key, so one foreign key's subscriptions share a prefix.
pub(crate) fn subscription_key(fk: &[u8], pk: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + fk.len() + pk.len());
    out.extend_from_slice(&(fk.len() as u32).to_be_bytes());
    out.extend_from_slice(fk);
    out.extend_from_slice(pk);
    out
}

pub(crate) fn subscription_prefix(fk: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + fk.len());
    out.extend_from_slice(&(fk.len() as u32).to_be_bytes());
    out.extend_from_slice(fk);
    out
}

pub(crate) type ForeignKey<V, KO> = Arc<dyn Fn(&V) -> KO + Send + Sync>;
pub(crate) type FkJoiner<V, VO, VR> = Arc<dyn Fn(&V, Option<&VO>) -> VR + Send + Sync>;

/// Left side: a left row's change becomes subscriptions, keyed by the
/// foreign key (so they reach its partition), carrying the primary key.
pub(crate) struct SubscriptionSender<K, V, KO> {
    pub(crate) foreign_key: ForeignKey<V, KO>,
    pub(crate) key_serde: SharedSerde<K>,
    pub(crate) value_serde: SharedSerde<V>,
    pub(crate) fk_serde: SharedSerde<KO>,
    pub(crate) topic: String,
    pub(crate) left_join: bool,
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
pub(crate) struct SubscriptionReceiver<KO, VO> {
    pub(crate) store_name: String,
    pub(crate) store: Option<KeyValueStoreHandle<Vec<u8>, Vec<u8>>>,
    pub(crate) make: GetterFactory<KO, VO>,
    pub(crate) getter: Option<Box<dyn ValueGetter<KO, VO>>>,
    pub(crate) fk_serde: SharedSerde<KO>,
    pub(crate) right_serde: SharedSerde<VO>,
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
pub(crate) struct ForeignChangeProcessor<KO, VO> {
    pub(crate) store_name: String,
    pub(crate) store: Option<KeyValueStoreHandle<Vec<u8>, Vec<u8>>>,
    pub(crate) fk_serde: SharedSerde<KO>,
    pub(crate) right_serde: SharedSerde<VO>,
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
pub(crate) struct ResponseJoiner<K, V, VO, VR> {
    /// The result table's store, when results have a serde.
    pub(crate) store_name: Option<String>,
    pub(crate) send_old: crate::operators::forwarder::OldValuesFlag,
    pub(crate) results: Option<crate::operators::table_source::TableStore<K, VR>>,
    pub(crate) make: GetterFactory<K, V>,
    pub(crate) getter: Option<Box<dyn ValueGetter<K, V>>>,
    pub(crate) key_serde: SharedSerde<K>,
    pub(crate) value_serde: SharedSerde<V>,
    pub(crate) right_serde: SharedSerde<VO>,
    pub(crate) joiner: FkJoiner<V, VO, VR>,
    pub(crate) left_join: bool,
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
            self.results = Some(crate::operators::table_source::TableStore::open(
                ctx,
                name,
                crate::operators::forwarder::sends_old(&self.send_old),
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
                old.filter(|_| crate::operators::forwarder::sends_old(&self.send_old))
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
