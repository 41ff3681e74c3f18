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
use crate::operators::fk_join::Addressing;
use crate::operators::fk_join::Answer;
use crate::operators::fk_join::AnswerSerde;
use crate::operators::fk_join::FkJoiner;
use crate::operators::fk_join::ForeignChangeProcessor;
use crate::operators::fk_join::ResponsePartitioner;
use crate::operators::fk_join::SubscriptionJoinForeign;
use crate::operators::fk_join::SubscriptionPartitioner;
use crate::operators::fk_join::SubscriptionResolver;
use crate::operators::fk_join::SubscriptionSender;
use crate::operators::fk_join::SubscriptionStoreReceiver;
use crate::topology::SinkTopic;
use crate::{ForeignKeyExtractor, TableJoined, TopologyError};

impl<K: Clone + 'static, V: Clone + 'static> KTable<K, V> {
    /// Joins each row with the row of `other` whose key `foreign_key`
    /// takes from the row's value; rows without one are absent from the
    /// result. Kafka Streams' foreign-key `KTable#join` (KIP-213).
    ///
    /// [`KTable::join_fk_with`] takes a name, partitioners, a store for the
    /// result and a foreign key that may be absent or read from the key.
    pub fn join_fk<KO: Clone + PartialEq + 'static, VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KTable<KO, VO>,
        foreign_key: impl Fn(&V) -> KO + Send + Sync + 'static,
        joiner: impl Fn(&V, &VO) -> VR + Send + Sync + 'static,
    ) -> KTable<K, VR> {
        self.join_fk_with(
            other,
            ForeignKeyExtractor::from_value(move |v| Some(foreign_key(v))),
            joiner,
            TableJoined::default(),
            Materialized::new(),
        )
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
        self.left_join_fk_with(
            other,
            ForeignKeyExtractor::from_value(move |v| Some(foreign_key(v))),
            joiner,
            TableJoined::default(),
            Materialized::new(),
        )
    }

    /// [`KTable::join_fk`] with all of Kafka Streams' options (its
    /// `KTable#join(other, extractor, joiner, TableJoined, Materialized)`):
    ///
    /// - `foreign_key` reads the foreign key from the value or from the key
    ///   and value (KIP-1104). A row whose foreign key is `None` has no
    ///   result: it is dropped (counted as dropped, with a warning), and
    ///   the result it had before, if any, is deleted (KIP-962);
    /// - `table_joined` names the join's processors, internal topics and
    ///   subscription store, and partitions the internal topics for tables
    ///   not partitioned by Kafka's default partitioner (see
    ///   [`TableJoined`]);
    /// - `materialized` keeps the result in a store: named, it is made at
    ///   once and is queryable; unnamed (`Materialized::new()`), the store
    ///   is made only if a downstream operator needs it.
    ///
    /// ```
    /// use kstreams_dsl::{ForeignKeyExtractor, Materialized, StreamsBuilder, TableJoined};
    ///
    /// let builder = StreamsBuilder::new();
    /// let customers = builder.table::<String, String>("customers");
    /// // An order's value names its customer, or "none".
    /// let orders = builder.table::<String, String>("orders");
    /// let named = orders.join_fk_with(
    ///     &customers,
    ///     ForeignKeyExtractor::from_value(|customer: &String| {
    ///         (customer != "none").then(|| customer.clone())
    ///     }),
    ///     |customer, name| format!("{customer}: {name}"),
    ///     TableJoined::as_("orders-with-customers"),
    ///     Materialized::as_("orders-with-customers-store"),
    /// );
    /// assert_eq!(
    ///     named.queryable_store_name().as_deref(),
    ///     Some("orders-with-customers-store")
    /// );
    /// ```
    pub fn join_fk_with<
        KO: Clone + PartialEq + 'static,
        VO: Clone + 'static,
        VR: Clone + 'static,
    >(
        &self,
        other: &KTable<KO, VO>,
        foreign_key: ForeignKeyExtractor<K, V, KO>,
        joiner: impl Fn(&V, &VO) -> VR + Send + Sync + 'static,
        table_joined: TableJoined<K, KO>,
        materialized: Materialized<K, VR>,
    ) -> KTable<K, VR> {
        let joiner: FkJoiner<V, VO, VR> = Arc::new(move |v, o| match o {
            Some(o) => joiner(v, o),
            None => unreachable!("an inner join calls its joiner with both values"),
        });
        self.fk_join(
            other,
            foreign_key,
            joiner,
            false,
            table_joined,
            materialized,
        )
    }

    /// [`KTable::left_join_fk`] with all of Kafka Streams' options, as
    /// [`KTable::join_fk_with`]. A row whose foreign key is `None` is in
    /// the result, joined with `None` (KIP-962).
    pub fn left_join_fk_with<
        KO: Clone + PartialEq + 'static,
        VO: Clone + 'static,
        VR: Clone + 'static,
    >(
        &self,
        other: &KTable<KO, VO>,
        foreign_key: ForeignKeyExtractor<K, V, KO>,
        joiner: impl Fn(&V, Option<&VO>) -> VR + Send + Sync + 'static,
        table_joined: TableJoined<K, KO>,
        materialized: Materialized<K, VR>,
    ) -> KTable<K, VR> {
        self.fk_join(
            other,
            foreign_key,
            Arc::new(joiner),
            true,
            table_joined,
            materialized,
        )
    }

    fn fk_join<KO: Clone + PartialEq + 'static, VO: Clone + 'static, VR: Clone + 'static>(
        &self,
        other: &KTable<KO, VO>,
        foreign_key: ForeignKeyExtractor<K, V, KO>,
        joiner: FkJoiner<V, VO, VR>,
        left_join: bool,
        table_joined: TableJoined<K, KO>,
        materialized: Materialized<K, VR>,
    ) -> KTable<K, VR> {
        let TableJoined {
            name,
            partitioner,
            other_partitioner,
        } = table_joined;
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
            FkJoinNames::draw(&mut s, name.as_deref(), materialized.name.as_deref())
        };
        let key_serde = self
            .key_serde
            .clone()
            .or_else(kstreams_record::builtin_serde::<K>);
        // The result table's values are read with the store's serde, if
        // given (Kafka Streams' result takes the Materialized's).
        let result_serde = materialized
            .value_serde
            .clone()
            .or_else(kstreams_record::builtin_serde::<VR>);
        // The output is a table source: its store (named by `materialized`,
        // else Kafka Streams' KTABLE-FK-JOIN-OUTPUT-STATE-STORE-<n>, drawn
        // whether or not it is made) is added at once when named
        // (queryable), otherwise only when a downstream join or old values
        // need it.
        let materialize_now = materialized.name.is_some();
        let result_store = names.result_store.clone();
        let spec = StoreSpec::settle(
            materialized,
            || result_store,
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
                materialize_now,
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
        // A left join's subscription for a deleted row, or a row without a
        // foreign key, has none: Kafka Streams writes it with a null key.
        let foreign_key_bytes: SharedSerde<Option<Vec<u8>>> = Arc::new(Nullable(BytesSerde));
        let foreign_key_serde: SharedSerde<Option<KO>> = Arc::new(Nullable(fk_serde.clone()));
        // Where the subscriptions go: the foreign key's partition by the
        // application's partitioner of the foreign table if there is one,
        // else by Kafka's default partitioner of the serialized key.
        let subscription_partitioning = match other_partitioner {
            Some(partitioner) => {
                SinkPartitioning::Single(Arc::new(SubscriptionPartitioner(partitioner)))
            }
            None => SinkPartitioning::WholeKey,
        };
        // Where the answers go: the left row's partition by the
        // application's partitioner of the left table (which needs the
        // primary key read back), else the partition the subscription
        // carries (Kafka Streams 4.4's DefaultForeignResponseSinkPartitioner).
        let addressing = Addressing {
            key_serde: partitioner.as_ref().map(|_| key_serde.clone()),
        };
        let response_partitioning: SinkPartitioning<Vec<u8>, Answer<K>> =
            SinkPartitioning::Single(Arc::new(ResponsePartitioner(partitioner)));
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
            let (key_serde, value_serde) = (key_serde.clone(), value_serde.clone());
            let topic = subscription_topic.clone();
            let added = s
                .topology
                .add_typed_processor::<K, Change<V>, Option<KO>, Vec<u8>, _>(
                    sender.clone(),
                    Arc::new(move || SubscriptionSender {
                        foreign_key: foreign_key.clone(),
                        key_serde: key_serde.clone(),
                        value_serde: value_serde.clone(),
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
            foreign_key_serde,
            bytes.clone(),
            subscription_partitioning,
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
            let addressing = addressing.clone();
            let added = s
                .topology
                .add_typed_processor::<Option<Vec<u8>>, Vec<u8>, Vec<u8>, Answer<K>, _>(
                    join_foreign.clone(),
                    Arc::new(move || SubscriptionJoinForeign::<K, KO, VO> {
                        make: make.clone(),
                        getter: None,
                        fk_serde: fk_serde.clone(),
                        right_serde: right_serde.clone(),
                        addressing: addressing.clone(),
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
                .add_typed_processor::<KO, Change<VO>, Vec<u8>, Answer<K>, _>(
                    foreign_processor.clone(),
                    Arc::new(move || ForeignChangeProcessor::<K, KO, VO> {
                        store_name: store_name.clone(),
                        store: None,
                        fk_serde: fk_serde.clone(),
                        right_serde: right_serde.clone(),
                        addressing: addressing.clone(),
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
            Arc::new(AnswerSerde),
            response_partitioning,
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

/// The names a foreign-key join draws, in Kafka Streams' order
/// (`KTableImpl#doJoinOnForeignKey`).
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
    /// Generated names, or with the join's `name` (`TableJoined#withName`)
    /// `<name><suffix>` for each, an index drawn all the same (Kafka
    /// Streams' `NamedInternal#suffixWithOrElseGet`, so that naming the join
    /// does not shift the generated names of other operators). The result
    /// store is `materialized`'s name if it has one, else a generated name
    /// (whether or not the join is named), as Kafka Streams'
    /// `MaterializedInternal`.
    fn draw(
        s: &mut crate::handles::state::BuilderState,
        name: Option<&str>,
        materialized: Option<&str>,
    ) -> Self {
        const PROCESSOR: &str = "KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-";
        const REGISTRATION: &str = "KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-";
        const RESPONSE: &str = "KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-";
        let mut named = |suffix: &str, prefix: &str| {
            let generated = s.new_name(prefix);
            match name {
                Some(name) => format!("{name}{suffix}"),
                None => generated,
            }
        };
        let subscription_topic = format!(
            "{}-topic",
            named("-subscription-registration", REGISTRATION)
        );
        let sender = named("-subscription-registration-processor", REGISTRATION);
        let subscription_sink = named("-subscription-registration-sink", "KTABLE-SINK-");
        let subscription_source = named("-subscription-registration-source", "KTABLE-SOURCE-");
        let store = named(
            "-subscription-store",
            "KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-",
        );
        let receiver = named("-subscription-receive", PROCESSOR);
        let join_foreign = named("-subscription-join-foreign", PROCESSOR);
        let foreign_processor = named("-foreign-join-subscription", PROCESSOR);
        let response_topic = format!("{}-topic", named("-subscription-response", RESPONSE));
        let response_sink = named("-subscription-response-sink", "KTABLE-SINK-");
        let response_source = named("-subscription-response-source", "KTABLE-SOURCE-");
        let resolver = named(
            "-subscription-response-resolver",
            "KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-",
        );
        let result = named("-result", "KTABLE-FK-JOIN-OUTPUT-");
        let result_store = match materialized {
            Some(store) => store.to_string(),
            None => s.new_name("KTABLE-FK-JOIN-OUTPUT-STATE-STORE-"),
        };
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
