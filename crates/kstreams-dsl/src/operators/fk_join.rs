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
//! The topics' and the subscription store's bytes are Kafka Streams' (see
//! `fk_format`).

use std::sync::Arc;

use kstreams_record::{Headers, Record, SharedSerde};
use kstreams_state::{KeyValueStoreHandle, ValueAndTimestamp};

use crate::change::Change;
use crate::operators::fk_format::{
    murmur3_hash128, parse_response, parse_subscription, response, subscription, subscription_key,
    subscription_prefix, DELETE_KEY_AND_PROPAGATE, DELETE_KEY_NO_PROPAGATE,
    PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE,
};
use crate::operators::getters::{GetterFactory, ValueGetter};
use crate::{Processor, ProcessorContext, ProcessorError};

pub(crate) fn serialize<T: 'static>(
    serde: &SharedSerde<T>,
    topic: &str,
    value: &T,
) -> Result<Vec<u8>, ProcessorError> {
    Ok(serde
        .serialize(topic, &mut Headers::new(), value)?
        .ok_or("a foreign-key join key or value serialized to null")?)
}

/// The subscription store: by `CombinedKey` bytes, each subscription's
/// bytes as they came with their record's timestamp (Kafka Streams'
/// timestamped store of `SubscriptionWrapper`s).
pub(crate) type SubscriptionStore = KeyValueStoreHandle<Vec<u8>, ValueAndTimestamp<Vec<u8>>>;

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

impl<K: 'static, V: 'static, KO: PartialEq + 'static>
    Processor<K, Change<V>, Option<Vec<u8>>, Vec<u8>> for SubscriptionSender<K, V, KO>
{
    /// Kafka Streams' `SubscriptionSendProcessorSupplier`, instruction for
    /// instruction: the subscription topic's records are the same.
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, Option<Vec<u8>>, Vec<u8>>,
        record: Record<K, Change<V>>,
    ) -> Result<(), ProcessorError> {
        let topic = self.topic.as_str();
        let pk = serialize(&self.key_serde, topic, &record.key)?;
        // Kafka Streams sends the left record's partition along, for the
        // response to find its way back.
        let partition = ctx
            .record_metadata()
            .map_or(ctx.task_id().partition, |m| m.partition);
        let change = &record.value;
        let old_fk = change.old_value.as_ref().map(|v| (self.foreign_key)(v));
        let new_fk = change.new_value.as_ref().map(|v| (self.foreign_key)(v));
        // Every subscription of a change carries the new value's hash (none
        // for a delete), the one to the old foreign key too.
        let hash = match &change.new_value {
            Some(v) => Some(murmur3_hash128(&serialize(&self.value_serde, topic, v)?)),
            None => None,
        };
        let mut send = |fk: Option<&KO>, instruction: u8| -> Result<(), ProcessorError> {
            let key = fk
                .map(|fk| serialize(&self.fk_serde, topic, fk))
                .transpose()?;
            ctx.forward(Record {
                key,
                value: subscription(instruction, hash.as_ref(), &pk, partition),
                timestamp: record.timestamp,
                headers: record.headers.clone(),
            })?;
            Ok(())
        };
        let moved = old_fk.is_some() && old_fk != new_fk;
        if self.left_join {
            if change.old_value.is_none() && change.new_value.is_none() {
                return Ok(()); // deleting what was never there
            }
            if moved {
                send(old_fk.as_ref(), DELETE_KEY_NO_PROPAGATE)?;
            }
            // Always, a delete included: a left row must hear back to emit
            // its result. A delete's subscription has no foreign key (a
            // null key); the right side answers it without a lookup.
            return send(new_fk.as_ref(), PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE);
        }
        match &new_fk {
            Some(new_fk) => {
                // A row that moved to another foreign key must hear back
                // even if that key has no row: its old result is retracted.
                if moved {
                    send(old_fk.as_ref(), DELETE_KEY_NO_PROPAGATE)?;
                    send(Some(new_fk), PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE)
                } else {
                    send(Some(new_fk), PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE)
                }
            }
            None if old_fk.is_some() => send(old_fk.as_ref(), DELETE_KEY_AND_PROPAGATE),
            None => Ok(()),
        }
    }
}

/// Right side: keeps subscriptions by foreign key (Kafka Streams'
/// `SubscriptionReceiveProcessorSupplier`) and passes each on to be
/// answered.
pub(crate) struct SubscriptionStoreReceiver {
    pub(crate) store_name: String,
    pub(crate) store: Option<SubscriptionStore>,
}

impl Processor<Option<Vec<u8>>, Vec<u8>, Option<Vec<u8>>, Vec<u8>> for SubscriptionStoreReceiver {
    fn init(
        &mut self,
        ctx: &mut ProcessorContext<'_, Option<Vec<u8>>, Vec<u8>>,
    ) -> Result<(), ProcessorError> {
        self.store = Some(ctx.get_state_store(&self.store_name)?);
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, Option<Vec<u8>>, Vec<u8>>,
        record: Record<Option<Vec<u8>>, Vec<u8>>,
    ) -> Result<(), ProcessorError> {
        let store = self
            .store
            .as_ref()
            .ok_or("foreign-key join not initialized")?;
        let sub = parse_subscription(&record.value).ok_or("malformed foreign-key subscription")?;
        let Some(foreign_key) = &record.key else {
            // A left join's deleted row: nothing to keep, only an answer
            // to give. Any other instruction without a key is dropped.
            if sub.instruction == PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE {
                ctx.forward(record)?;
            }
            return Ok(());
        };
        let key = subscription_key(foreign_key, sub.primary_key);
        if sub.instruction == DELETE_KEY_NO_PROPAGATE || sub.instruction == DELETE_KEY_AND_PROPAGATE
        {
            store.borrow_mut().delete(&key)?;
        } else {
            store.borrow_mut().put(
                key,
                ValueAndTimestamp::make(record.value.clone(), record.timestamp),
            )?;
        }
        ctx.forward(record)?;
        Ok(())
    }
}

/// Right side: answers a subscription with the right row (keyed by the
/// primary key, back to the left partition); Kafka Streams'
/// `SubscriptionJoinProcessorSupplier`.
pub(crate) struct SubscriptionJoinForeign<KO, VO> {
    pub(crate) make: GetterFactory<KO, VO>,
    pub(crate) getter: Option<Box<dyn ValueGetter<KO, VO>>>,
    pub(crate) fk_serde: SharedSerde<KO>,
    pub(crate) right_serde: SharedSerde<VO>,
}

impl<KO: 'static, VO: 'static> Processor<Option<Vec<u8>>, Vec<u8>, Vec<u8>, Vec<u8>>
    for SubscriptionJoinForeign<KO, VO>
{
    fn init(
        &mut self,
        ctx: &mut ProcessorContext<'_, Vec<u8>, Vec<u8>>,
    ) -> Result<(), ProcessorError> {
        self.getter = Some((self.make)(&ctx.store_lookup())?);
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, Vec<u8>, Vec<u8>>,
        record: Record<Option<Vec<u8>>, Vec<u8>>,
    ) -> Result<(), ProcessorError> {
        let getter = self
            .getter
            .as_ref()
            .ok_or("foreign-key join not initialized")?;
        let sub = parse_subscription(&record.value).ok_or("malformed foreign-key subscription")?;
        let (instruction, pk) = (sub.instruction, sub.primary_key);
        if instruction == DELETE_KEY_NO_PROPAGATE {
            return Ok(());
        }
        // No foreign key (a left join's deleted row): no right row.
        let right = match &record.key {
            Some(key) => {
                let fk: KO = self.fk_serde.deserialize("", &Headers::new(), Some(key))?;
                getter.get(&fk)?
            }
            None => None,
        };
        if right.is_none() && instruction == PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE {
            return Ok(());
        }
        let timestamp = right
            .as_ref()
            .map_or(record.timestamp, |r| record.timestamp.max(r.timestamp));
        // A deleted left row hears back with no value (its result is a
        // tombstone), although its timestamp counts the right row's.
        let right_bytes = match &right {
            Some(r) if instruction != DELETE_KEY_AND_PROPAGATE => {
                Some(serialize(&self.right_serde, "", &r.value)?)
            }
            _ => None,
        };
        ctx.forward(Record {
            key: pk.to_vec(),
            value: response(sub.hash.as_ref(), right_bytes.as_deref()),
            timestamp,
            headers: record.headers,
        })?;
        Ok(())
    }
}

/// Right side: a right row's change answers every subscription to it.
pub(crate) struct ForeignChangeProcessor<KO, VO> {
    pub(crate) store_name: String,
    pub(crate) store: Option<SubscriptionStore>,
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
            let sub =
                parse_subscription(&stored.value).ok_or("malformed foreign-key subscription")?;
            // Every subscriber hears of the change, a delete included: a
            // joined row is retracted then. Kafka Streams stamps the answer
            // with the right row's timestamp alone.
            ctx.forward(Record {
                key: sub.primary_key.to_vec(),
                value: response(sub.hash.as_ref(), right.as_deref()),
                timestamp: record.timestamp,
                headers: record.headers.clone(),
            })?;
        }
        Ok(())
    }
}

/// Left side: joins an answer with the left row if the answer is about the
/// row's current value; a stale answer is dropped (Kafka Streams'
/// `SubscriptionResolverJoinProcessorSupplier`). The result (`None`: a
/// delete) goes to the join's output node, a table source that keeps it
/// in a store only when something needs one.
pub(crate) struct SubscriptionResolver<K, V, VO, VR> {
    pub(crate) make: GetterFactory<K, V>,
    pub(crate) getter: Option<Box<dyn ValueGetter<K, V>>>,
    pub(crate) key_serde: SharedSerde<K>,
    pub(crate) value_serde: SharedSerde<V>,
    pub(crate) right_serde: SharedSerde<VO>,
    pub(crate) joiner: FkJoiner<V, VO, VR>,
    pub(crate) left_join: bool,
}

impl<K: Clone + 'static, V: 'static, VO: 'static, VR: Clone + 'static>
    Processor<Vec<u8>, Vec<u8>, K, Option<VR>> for SubscriptionResolver<K, V, VO, VR>
{
    fn init(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Option<VR>>,
    ) -> Result<(), ProcessorError> {
        self.getter = Some((self.make)(&ctx.store_lookup())?);
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Option<VR>>,
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
            Some(c) => Some(murmur3_hash128(&serialize(
                &self.value_serde,
                "",
                &c.value,
            )?)),
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
        ctx.forward(Record {
            key,
            value: result,
            timestamp: record.timestamp,
            headers: record.headers,
        })?;
        Ok(())
    }
}
