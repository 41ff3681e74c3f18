//! Foreign-key table-table joins (KIP-213): the handle side, which lays out
//! the two trips through internal topics (see
//! [`crate::operators::fk_join`] for the processors and the byte layouts).

use std::sync::Arc;

use kstreams_record::{BytesSerde, Nullable, SharedSerde};
use kstreams_state::Stores;

use crate::change::Change;
use crate::graph::SourceTopics;
use crate::handles::types::KTable;
use crate::materialized::{add_store, Materialized, StoreSpec};
use crate::nodes::SinkPartitioning;
use crate::operators::fk_join::FkJoiner;
use crate::operators::fk_join::ForeignChangeProcessor;
use crate::operators::fk_join::ForeignKey;
use crate::operators::fk_join::SubscriptionJoinForeign;
use crate::operators::fk_join::SubscriptionResolver;
use crate::operators::fk_join::SubscriptionSender;
use crate::operators::fk_join::SubscriptionStoreReceiver;
use crate::topology::SinkTopic;
use crate::TopologyError;

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
        // Kafka Streams 4.4's names, drawn in its order (KTableImpl's
        // doJoinOnForeignKey): they name the internal topics and the
        // subscription store's changelog, so an application can move
        // between the two.
        let names = {
            let mut s = self.state.borrow_mut();
            FkJoinNames::draw(&mut s)
        };
        let key_serde = self
            .key_serde
            .clone()
            .or_else(kstreams_record::builtin_serde::<K>);
        let result_serde = kstreams_record::builtin_serde::<VR>();
        // The output is a table source: its store (Kafka Streams'
        // KTABLE-FK-JOIN-OUTPUT-STATE-STORE-<n>, named whether or not it is
        // made) is added only when a downstream join or old values need it.
        let spec = StoreSpec::settle(
            Materialized::new(),
            || names.result_store.clone(),
            key_serde.clone(),
            result_serde.clone(),
        );
        let (state, result, resolver) = (
            self.state.clone(),
            names.result.clone(),
            names.resolver.clone(),
        );
        let output_key_serde = key_serde.clone();
        // Added last, under the resolver (or alone when the join is
        // invalid, which the recorded error reports at build).
        let output = move || {
            let mut table = KTable::<K, VR>::source::<K, Option<VR>>(
                &state,
                &resolver,
                result,
                spec,
                false,
                (Some, |v| v),
            );
            table.key_serde = output_key_serde;
            table.value_serde = result_serde;
            table
        };
        let mut s = self.state.borrow_mut();
        let invalid = |message: &str| TopologyError::InvalidOperator {
            operator: format!("foreign-key join {}", names.result),
            message: message.to_string(),
        };
        let (Some(left_getter), Some(right_getter)) = (left_getter, right_getter) else {
            s.record::<()>(Err(invalid(
                "both tables must be readable by a join (not windowed or suppressed, with \
                 serdes for their stores)",
            )));
            drop(s);
            return output();
        };
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
            drop(s);
            return output();
        };
        let bytes: SharedSerde<Vec<u8>> = Arc::new(BytesSerde);
        // A left join's subscription for a deleted row has no foreign key:
        // Kafka Streams writes it with a null key.
        let foreign_key_bytes: SharedSerde<Option<Vec<u8>>> = Arc::new(Nullable(BytesSerde));
        let FkJoinNames {
            subscription_topic,
            sender,
            subscription_sink,
            subscription_source,
            store,
            receiver,
            join_foreign,
            foreign_processor,
            response_topic,
            response_sink,
            response_source,
            resolver,
            ..
        } = names;

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
                .add_typed_processor::<K, Change<V>, Option<Vec<u8>>, Vec<u8>, _>(
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
            foreign_key_bytes.clone(),
            bytes.clone(),
            SinkPartitioning::WholeKey,
            &[sender.as_str()],
        );
        s.record(added);
        s.topology.mark_internal_topic(&subscription_topic);
        let added = s.topology.add_typed_source(
            subscription_source.clone(),
            SourceTopics::Names(vec![subscription_topic.clone()]),
            foreign_key_bytes,
            bytes.clone(),
            None,
        );
        s.record(added);

        // Right: subscriptions are kept by foreign key ...
        {
            let store_name = store.clone();
            let added = s
                .topology
                .add_typed_processor::<Option<Vec<u8>>, Vec<u8>, Option<Vec<u8>>, Vec<u8>, _>(
                    receiver.clone(),
                    Arc::new(move || SubscriptionStoreReceiver {
                        store_name: store_name.clone(),
                        store: None,
                    }),
                    &[subscription_source.as_str()],
                );
            s.record(added);
        }
        // Timestamped, as Kafka Streams': the changelog carries each
        // subscription's bytes with its record's timestamp.
        let subscriptions = Stores::timestamped_key_value_store_builder(
            Stores::in_memory_key_value_store(&store),
            BytesSerde,
            BytesSerde,
        );
        let added = add_store(&mut s.topology, subscriptions, &receiver);
        s.record(added);
        // ... answered with the right row ...
        {
            let make = right_getter.make.clone();
            let (right_serde, fk_serde) = (right_serde.clone(), fk_serde.clone());
            let added = s
                .topology
                .add_typed_processor::<Option<Vec<u8>>, Vec<u8>, Vec<u8>, Vec<u8>, _>(
                    join_foreign.clone(),
                    Arc::new(move || SubscriptionJoinForeign::<KO, VO> {
                        make: make.clone(),
                        getter: None,
                        fk_serde: fk_serde.clone(),
                        right_serde: right_serde.clone(),
                    }),
                    &[receiver.as_str()],
                );
            s.record(added);
        }
        let stores: Vec<&str> = right_getter.stores.iter().map(String::as_str).collect();
        let connected = s
            .topology
            .connect_processor_and_state_stores(&join_foreign, &stores)
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
        // One sink for both kinds of answers, as Kafka Streams'.
        let added = s.topology.add_typed_sink(
            response_sink,
            SinkTopic::Fixed(response_topic.clone()),
            bytes.clone(),
            bytes.clone(),
            SinkPartitioning::WholeKey,
            &[join_foreign.as_str(), foreign_processor.as_str()],
        );
        s.record(added);
        s.topology.mark_internal_topic(&response_topic);
        let added = s.topology.add_typed_source(
            response_source.clone(),
            SourceTopics::Names(vec![response_topic.clone()]),
            bytes.clone(),
            bytes,
            None,
        );
        s.record(added);

        // Left again: answers to the current value are joined, and the
        // results go to the output node (added above, under the resolver).
        {
            let make = left_getter.make.clone();
            let added = s
                .topology
                .add_typed_processor::<Vec<u8>, Vec<u8>, K, Option<VR>, _>(
                    resolver.clone(),
                    Arc::new(move || SubscriptionResolver::<K, V, VO, VR> {
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
            .connect_processor_and_state_stores(&resolver, &stores)
            .map(|_| ());
        s.record(connected);
        // The subscriptions go to the right table's partitions, the answers
        // to the left table's.
        s.topology
            .graph
            .copartition(&[subscription_source.as_str(), other.node.as_str()]);
        s.topology
            .graph
            .copartition(&[response_source.as_str(), self.node.as_str()]);
        drop(s);
        output()
    }
}

/// The names a foreign-key join draws, in Kafka Streams' order.
struct FkJoinNames {
    subscription_topic: String,
    sender: String,
    subscription_sink: String,
    subscription_source: String,
    store: String,
    receiver: String,
    join_foreign: String,
    foreign_processor: String,
    response_topic: String,
    response_sink: String,
    response_source: String,
    resolver: String,
    result: String,
    result_store: String,
}

impl FkJoinNames {
    fn draw(s: &mut crate::handles::state::BuilderState) -> Self {
        const PROCESSOR: &str = "KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-";
        const REGISTRATION: &str = "KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-";
        let subscription_topic = format!("{}-topic", s.new_name(REGISTRATION));
        let sender = s.new_name(REGISTRATION);
        let subscription_sink = s.new_name("KTABLE-SINK-");
        let subscription_source = s.new_name("KTABLE-SOURCE-");
        let store = s.new_name("KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-");
        let receiver = s.new_name(PROCESSOR);
        let join_foreign = s.new_name(PROCESSOR);
        let foreign_processor = s.new_name(PROCESSOR);
        let response_topic = format!(
            "{}-topic",
            s.new_name("KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-")
        );
        let response_sink = s.new_name("KTABLE-SINK-");
        let response_source = s.new_name("KTABLE-SOURCE-");
        let resolver = s.new_name("KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-");
        let result = s.new_name("KTABLE-FK-JOIN-OUTPUT-");
        let result_store = s.new_name("KTABLE-FK-JOIN-OUTPUT-STATE-STORE-");
        FkJoinNames {
            subscription_topic,
            sender,
            subscription_sink,
            subscription_source,
            store,
            receiver,
            join_foreign,
            foreign_processor,
            response_topic,
            response_sink,
            response_source,
            resolver,
            result,
            result_store,
        }
    }
}
