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
//! primary key, to the partition the left record came from (which the
//! subscription carries) or the one the application's partitioner of the
//! left table chooses. The left side joins an answer only if the hash still
//! matches its current value, so answers to outdated rows are dropped.
//! A named join (`TableJoined`) puts `<name>-subscription-registration`
//! and `<name>-subscription-response` in place of the generated names.
//! The topics' and the subscription store's bytes are Kafka Streams' (see
//! `fk_format`).

use std::sync::Arc;

use kstreams_record::{Headers, Record, Serde, SerdeError, SharedSerde};
use kstreams_state::{KeyValueStoreHandle, ValueAndTimestamp};

use crate::change::Change;
use crate::operators::fk_format::{
    murmur3_hash128, parse_response, parse_subscription, response, subscription, subscription_key,
    subscription_prefix, Subscription, DELETE_KEY_AND_PROPAGATE, DELETE_KEY_NO_PROPAGATE,
    PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE,
};
use crate::operators::getters::{GetterFactory, ValueGetter};
use crate::partitioner::{SharedPartitioner, StreamPartitioner};
use crate::table_joined::ForeignKeyExtractor;
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

pub(crate) type FkJoiner<V, VO, VR> = Arc<dyn Fn(&V, Option<&VO>) -> VR + Send + Sync>;

/// Left side: a left row's change becomes subscriptions, keyed by the
/// foreign key (so they reach its partition: the subscription sink
/// serializes it), carrying the primary key.
pub(crate) struct SubscriptionSender<K, V, KO> {
    pub(crate) foreign_key: ForeignKeyExtractor<K, V, KO>,
    pub(crate) key_serde: SharedSerde<K>,
    pub(crate) value_serde: SharedSerde<V>,
    pub(crate) topic: String,
    pub(crate) left_join: bool,
}

impl<K: 'static, V: 'static, KO: Clone + PartialEq + 'static>
    Processor<K, Change<V>, Option<KO>, Vec<u8>> for SubscriptionSender<K, V, KO>
{
    /// Kafka Streams' `SubscriptionSendProcessorSupplier`, instruction for
    /// instruction: the subscription topic's records are the same. A row
    /// whose foreign key is `None` (KIP-962) subscribes to nothing: a left
    /// join sends it without a key, to be answered with no foreign value;
    /// an inner join drops it (counted as dropped), unsubscribing what the
    /// row had subscribed to before.
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, Option<KO>, Vec<u8>>,
        record: Record<K, Change<V>>,
    ) -> Result<(), ProcessorError> {
        let topic = self.topic.as_str();
        let change = &record.value;
        if change.old_value.is_none() && change.new_value.is_none() {
            return Ok(()); // deleting what was never there
        }
        let pk = serialize(&self.key_serde, topic, &record.key)?;
        // Kafka Streams sends the left record's partition along, for the
        // response to find its way back.
        let partition = ctx
            .record_metadata()
            .map_or(ctx.task_id().partition, |m| m.partition);
        let extract = |value: &Option<V>| {
            value
                .as_ref()
                .and_then(|v| self.foreign_key.extract(&record.key, v))
        };
        let old_fk = extract(&change.old_value);
        let new_fk = extract(&change.new_value);
        // Every subscription of a change carries the new value's hash (none
        // for a delete), the one to the old foreign key too.
        let hash = match &change.new_value {
            Some(v) => Some(murmur3_hash128(&serialize(&self.value_serde, topic, v)?)),
            None => None,
        };
        let send = |ctx: &mut ProcessorContext<'_, Option<KO>, Vec<u8>>,
                    fk: Option<&KO>,
                    instruction: u8|
         -> Result<(), ProcessorError> {
            ctx.forward(Record {
                key: fk.cloned(),
                value: subscription(instruction, hash.as_ref(), &pk, partition),
                timestamp: record.timestamp,
                headers: record.headers.clone(),
            })?;
            Ok(())
        };
        let moved = old_fk.is_some() && old_fk != new_fk;
        if self.left_join {
            if moved {
                send(ctx, old_fk.as_ref(), DELETE_KEY_NO_PROPAGATE)?;
            }
            // Always, a delete included: a left row must hear back to emit
            // its result. A delete's subscription, or a row's without a
            // foreign key, has a null key; the right side answers it
            // without a lookup.
            return send(ctx, new_fk.as_ref(), PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE);
        }
        match &new_fk {
            Some(new_fk) => {
                // A row that moved to another foreign key must hear back
                // even if that key has no row: its old result is retracted.
                if moved {
                    send(ctx, old_fk.as_ref(), DELETE_KEY_NO_PROPAGATE)?;
                    send(ctx, Some(new_fk), PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE)
                } else {
                    send(ctx, Some(new_fk), PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE)
                }
            }
            None => {
                if change.new_value.is_some() {
                    // A row without a foreign key has no inner join result.
                    log::warn!(
                        "{}: skipping a record with a null foreign key (at {:?})",
                        ctx.node_name(),
                        ctx.record_metadata()
                    );
                    ctx.record_dropped();
                }
                // Its old result, if any, is retracted.
                match &old_fk {
                    Some(old_fk) => send(ctx, Some(old_fk), DELETE_KEY_AND_PROPAGATE),
                    None => Ok(()),
                }
            }
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
            // A left join's deleted row, or one without a foreign key:
            // nothing to keep, only an answer to give. Any other
            // instruction without a key is dropped.
            if sub.instruction == PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE {
                ctx.forward(record)?;
            } else {
                log::warn!(
                    "{}: skipping a subscription with a null foreign key (at {:?})",
                    ctx.node_name(),
                    ctx.record_metadata()
                );
                ctx.record_dropped();
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
pub(crate) struct SubscriptionJoinForeign<K, KO, VO> {
    pub(crate) make: GetterFactory<KO, VO>,
    pub(crate) getter: Option<Box<dyn ValueGetter<KO, VO>>>,
    pub(crate) fk_serde: SharedSerde<KO>,
    pub(crate) right_serde: SharedSerde<VO>,
    pub(crate) addressing: Addressing<K>,
}

impl<K: Clone + 'static, KO: 'static, VO: 'static>
    Processor<Option<Vec<u8>>, Vec<u8>, Vec<u8>, Answer<K>> for SubscriptionJoinForeign<K, KO, VO>
{
    fn init(
        &mut self,
        ctx: &mut ProcessorContext<'_, Vec<u8>, Answer<K>>,
    ) -> Result<(), ProcessorError> {
        self.getter = Some((self.make)(&ctx.store_lookup())?);
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, Vec<u8>, Answer<K>>,
        record: Record<Option<Vec<u8>>, Vec<u8>>,
    ) -> Result<(), ProcessorError> {
        let getter = self
            .getter
            .as_ref()
            .ok_or("foreign-key join not initialized")?;
        let sub = parse_subscription(&record.value).ok_or("malformed foreign-key subscription")?;
        let instruction = sub.instruction;
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
        let answer = self.addressing.answer(&sub, right_bytes.as_deref())?;
        ctx.forward(Record {
            key: sub.primary_key.to_vec(),
            value: answer,
            timestamp,
            headers: record.headers,
        })?;
        Ok(())
    }
}

/// Right side: a right row's change answers every subscription to it
/// (Kafka Streams' `ForeignTableJoinProcessorSupplier`).
pub(crate) struct ForeignChangeProcessor<K, KO, VO> {
    pub(crate) store_name: String,
    pub(crate) store: Option<SubscriptionStore>,
    pub(crate) fk_serde: SharedSerde<KO>,
    pub(crate) right_serde: SharedSerde<VO>,
    pub(crate) addressing: Addressing<K>,
}

impl<K: Clone + 'static, KO: 'static, VO: 'static> Processor<KO, Change<VO>, Vec<u8>, Answer<K>>
    for ForeignChangeProcessor<K, KO, VO>
{
    fn init(
        &mut self,
        ctx: &mut ProcessorContext<'_, Vec<u8>, Answer<K>>,
    ) -> Result<(), ProcessorError> {
        self.store = Some(ctx.get_state_store(&self.store_name)?);
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, Vec<u8>, Answer<K>>,
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
            let answer = self.addressing.answer(&sub, right.as_deref())?;
            ctx.forward(Record {
                key: sub.primary_key.to_vec(),
                value: answer,
                timestamp: record.timestamp,
                headers: record.headers.clone(),
            })?;
        }
        Ok(())
    }
}

/// An answer on its way to the response topic: its bytes (Kafka Streams'
/// `SubscriptionResponseWrapper`, see `fk_format`), and what the response
/// sink's partitioner needs: the partition of the left record the
/// subscription came from (none in a version 0 subscription), and the
/// primary key, read back, when the application partitions the left table
/// itself.
#[derive(Clone)]
pub(crate) struct Answer<K> {
    pub(crate) bytes: Vec<u8>,
    pub(crate) primary_partition: Option<i32>,
    pub(crate) primary_key: Option<K>,
}

/// How the right side addresses its answers: it reads the primary key back
/// only for a partitioner of the application's own (`key_serde` is then
/// set); otherwise the answer goes by the partition the subscription
/// carries, and the key's bytes travel as they came.
pub(crate) struct Addressing<K> {
    pub(crate) key_serde: Option<SharedSerde<K>>,
}

impl<K> Clone for Addressing<K> {
    fn clone(&self) -> Self {
        Addressing {
            key_serde: self.key_serde.clone(),
        }
    }
}

impl<K: 'static> Addressing<K> {
    fn answer(
        &self,
        sub: &Subscription<'_>,
        right: Option<&[u8]>,
    ) -> Result<Answer<K>, ProcessorError> {
        let primary_key = match &self.key_serde {
            Some(serde) => Some(serde.deserialize("", &Headers::new(), Some(sub.primary_key))?),
            None => None,
        };
        Ok(Answer {
            bytes: response(sub.hash.as_ref(), right),
            primary_partition: sub.primary_partition,
            primary_key,
        })
    }
}

/// Writes an [`Answer`]'s bytes. The response topic is read back as bytes,
/// so it never deserializes.
pub(crate) struct AnswerSerde;

impl<K: 'static> Serde<Answer<K>> for AnswerSerde {
    fn serialize(
        &self,
        _: &str,
        _: &mut Headers,
        answer: &Answer<K>,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        Ok(Some(answer.bytes.clone()))
    }

    fn serialize_owned(
        &self,
        _: &str,
        _: &mut Headers,
        answer: Answer<K>,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        Ok(Some(answer.bytes))
    }

    fn deserialize(
        &self,
        topic: &str,
        _: &Headers,
        _: Option<&[u8]>,
    ) -> Result<Answer<K>, SerdeError> {
        Err(SerdeError::Custom {
            topic: topic.to_string(),
            message: "a foreign-key join's answers are read as bytes".to_string(),
        })
    }
}

/// The subscription sink's partitioner when the application partitions
/// the foreign table itself (`TableJoined::with_other_partitioner`): the
/// foreign key's partition. A subscription without a foreign key goes by
/// the default partitioner (it is answered without a lookup wherever it
/// lands); Kafka Streams asks the partitioner with a `null` key.
pub(crate) struct SubscriptionPartitioner<KO>(pub(crate) SharedPartitioner<KO, ()>);

impl<KO: 'static> StreamPartitioner<Option<KO>, Vec<u8>> for SubscriptionPartitioner<KO> {
    fn partitions(
        &self,
        topic: &str,
        foreign_key: &Option<KO>,
        _: &Vec<u8>,
        headers: &Headers,
        partitions: i32,
    ) -> Option<Vec<i32>> {
        let foreign_key = foreign_key.as_ref()?;
        self.0
            .partitions(topic, foreign_key, &(), headers, partitions)
    }
}

/// The response sink's partitioner, always set (Kafka Streams'
/// `DefaultForeignResponseSinkPartitioner` and
/// `ForeignResponseSinkPartitioner`): the application's partitioner of the
/// left table's keys (`TableJoined::with_partitioner`) if any, else the
/// partition of the left record the subscription came from, else (a
/// version 0 subscription) the default partitioner.
pub(crate) struct ResponsePartitioner<K>(pub(crate) Option<SharedPartitioner<K, ()>>);

impl<K: 'static> StreamPartitioner<Vec<u8>, Answer<K>> for ResponsePartitioner<K> {
    fn partitions(
        &self,
        topic: &str,
        _: &Vec<u8>,
        answer: &Answer<K>,
        headers: &Headers,
        partitions: i32,
    ) -> Option<Vec<i32>> {
        match (&self.0, &answer.primary_key) {
            (Some(partitioner), Some(key)) => {
                partitioner.partitions(topic, key, &(), headers, partitions)
            }
            _ => answer.primary_partition.map(|partition| vec![partition]),
        }
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
            // An answer about a value the row no longer has: dropped, and
            // counted so, as Kafka Streams does.
            ctx.record_dropped();
            return Ok(());
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

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(primary_partition: Option<i32>, primary_key: Option<&str>) -> Answer<String> {
        Answer {
            bytes: Vec::new(),
            primary_partition,
            primary_key: primary_key.map(str::to_string),
        }
    }

    fn by_length() -> SharedPartitioner<String, ()> {
        Arc::new(
            |_: &str, key: &String, _: &(), _: &Headers, partitions: i32| {
                Some(vec![key.len() as i32 % partitions])
            },
        )
    }

    /// Without a partitioner of the application's own, an answer goes back
    /// to the partition its subscription came from (Kafka Streams 4.4's
    /// `DefaultForeignResponseSinkPartitioner`), or by the default
    /// partitioner for a version 0 subscription, which carries none.
    #[test]
    fn answers_go_back_to_the_partition_the_subscription_came_from() {
        let primary = ResponsePartitioner::<String>(None);
        let headers = Headers::new();
        assert_eq!(
            primary.partitions("t", &b"k".to_vec(), &answer(Some(5), None), &headers, 8),
            Some(vec![5])
        );
        assert_eq!(
            primary.partitions("t", &b"k".to_vec(), &answer(None, None), &headers, 8),
            None
        );
        let own = ResponsePartitioner(Some(by_length()));
        assert_eq!(
            own.partitions(
                "t",
                &b"k".to_vec(),
                &answer(Some(5), Some("abc")),
                &headers,
                8
            ),
            Some(vec![3])
        );
    }

    #[test]
    fn subscriptions_without_a_foreign_key_go_by_the_default_partitioner() {
        let partitioner = SubscriptionPartitioner(by_length());
        let headers = Headers::new();
        assert_eq!(
            partitioner.partitions("t", &Some("ab".to_string()), &Vec::new(), &headers, 8),
            Some(vec![2])
        );
        assert_eq!(
            partitioner.partitions("t", &None, &Vec::new(), &headers, 8),
            None
        );
    }
}
