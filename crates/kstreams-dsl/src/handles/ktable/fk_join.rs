//! Foreign-key table-table joins (KIP-213): the handle side, which lays out
//! the two trips through internal topics (see
//! [`crate::operators::fk_join`] for the processors and the byte layouts).

use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

use kstreams_record::{BytesSerde, SharedSerde};
use kstreams_state::Stores;

use crate::change::Change;
use crate::graph::SourceTopics;
use crate::handles::types::{KTable, OldValues};
use crate::materialized::add_store;
use crate::nodes::SinkPartitioning;
use crate::operators::fk_join::FkJoiner;
use crate::operators::fk_join::ForeignChangeProcessor;
use crate::operators::fk_join::ForeignKey;
use crate::operators::fk_join::ResponseJoiner;
use crate::operators::fk_join::SubscriptionReceiver;
use crate::operators::fk_join::SubscriptionSender;
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
        let flag: crate::operators::forwarder::OldValuesFlag = Arc::default();
        let store_cell = Arc::new(OnceLock::new());
        // With a serde for the results they are kept in a store, which
        // gives the result table old values and lookups (Kafka Streams
        // materializes it too); without one it has neither.
        let result_serde = kstreams_record::builtin_serde::<VR>();
        let (old_values, getter) = if result_serde.is_some() {
            (
                OldValues::own(flag.clone()),
                crate::operators::getters::lazy_store_getter(&store_cell),
            )
        } else {
            let no: OldValues = OldValues {
                enable: std::rc::Rc::new(|_| false),
            };
            (no, crate::operators::getters::no_getter())
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
        // Timestamped, as Kafka Streams': the changelog carries each
        // subscription's bytes with its record's timestamp.
        let subscriptions = Stores::timestamped_key_value_store_builder(
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
