//! `KGroupedTable`: what `KTable::group_by` returns: count, reduce and
//! aggregate per key, with subtractors for the old values.

use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

use kstreams_record::{DefaultSerde, I64Serde, SharedSerde};

use crate::change::{Change, ChangeSerde};
use crate::graph::SourceTopics;
use crate::handles::state::SharedState;
use crate::handles::types::{KGroupedTable, KTable, OldValues};
use crate::materialized::{add_store, StoreSpec};
use crate::nodes::SinkPartitioning;
use crate::operators::forwarder::OldValuesFlag;
use crate::operators::table_aggregate::TableAggregate;
use crate::operators::{aggregate_fold, count_fold, reduce_fold};
use crate::operators::{Fold, Unfold};
use crate::options::IntoName;
use crate::{Grouped, Materialized, TopologyError};

impl<K: Clone + 'static, V: Clone + 'static> KGroupedTable<K, V> {
    pub(crate) fn new(state: SharedState, node: String, grouped: Grouped<K, V>) -> Self {
        KGroupedTable {
            state,
            node,
            grouped,
        }
    }

    /// The number of entries per new key: an entry moving to another key
    /// counts down under the old one and up under the new.
    pub fn count(&self) -> KTable<K, i64> {
        self.count_with(None, Materialized::new())
    }

    /// [`KGroupedTable::count`] with a processor name and a store.
    pub fn count_with(
        &self,
        named: impl IntoName,
        materialized: Materialized<K, i64>,
    ) -> KTable<K, i64> {
        let add: Fold<K, V, i64> = count_fold();
        let subtract: Unfold<K, V, i64> = Arc::new(|_, _, count| count - 1);
        self.aggregate_into(
            "KTABLE-AGGREGATE-",
            add,
            subtract,
            named,
            materialized,
            Some(Arc::new(I64Serde)),
        )
    }

    /// Combines values with `adder` and takes replaced values back out with
    /// `subtractor`.
    pub fn reduce(
        &self,
        adder: impl Fn(V, V) -> V + Send + Sync + 'static,
        subtractor: impl Fn(V, V) -> V + Send + Sync + 'static,
    ) -> KTable<K, V> {
        self.reduce_with(adder, subtractor, None, Materialized::new())
    }

    /// [`KGroupedTable::reduce`] with a processor name and a store.
    pub fn reduce_with(
        &self,
        adder: impl Fn(V, V) -> V + Send + Sync + 'static,
        subtractor: impl Fn(V, V) -> V + Send + Sync + 'static,
        named: impl IntoName,
        materialized: Materialized<K, V>,
    ) -> KTable<K, V> {
        let add: Fold<K, V, V> = reduce_fold(Arc::new(adder));
        let subtract: Unfold<K, V, V> = Arc::new(move |_, value, agg| subtractor(agg, value));
        let value_serde = self.grouped.value_serde.clone();
        self.aggregate_into(
            "KTABLE-REDUCE-",
            add,
            subtract,
            named,
            materialized,
            value_serde,
        )
    }

    /// Folds values into an aggregate starting at `initializer()` with
    /// `adder`, and takes replaced values out with `subtractor`.
    pub fn aggregate<A: DefaultSerde + Clone>(
        &self,
        initializer: impl Fn() -> A + Send + Sync + 'static,
        adder: impl Fn(&K, V, A) -> A + Send + Sync + 'static,
        subtractor: impl Fn(&K, V, A) -> A + Send + Sync + 'static,
    ) -> KTable<K, A> {
        self.aggregate_with(
            initializer,
            adder,
            subtractor,
            None,
            Materialized::new().with_value_serde(A::default_serde()),
        )
    }

    /// [`KGroupedTable::aggregate`] with a processor name and a store.
    pub fn aggregate_with<A: Clone + 'static>(
        &self,
        initializer: impl Fn() -> A + Send + Sync + 'static,
        adder: impl Fn(&K, V, A) -> A + Send + Sync + 'static,
        subtractor: impl Fn(&K, V, A) -> A + Send + Sync + 'static,
        named: impl IntoName,
        materialized: Materialized<K, A>,
    ) -> KTable<K, A> {
        let add: Fold<K, V, A> = aggregate_fold(initializer, adder);
        let subtract: Unfold<K, V, A> = Arc::new(subtractor);
        self.aggregate_into(
            "KTABLE-AGGREGATE-",
            add,
            subtract,
            named,
            materialized,
            None,
        )
    }

    /// The sink and source of a table grouping's repartition topic; the
    /// values are changes (old and new), so the aggregation can subtract.
    fn add_repartition<A>(
        &self,
        s: &mut crate::handles::state::BuilderState,
        sink: String,
        source: &str,
        topic: String,
        spec: &StoreSpec<K, A>,
        change_serde: SharedSerde<Change<V>>,
    ) {
        let added = s.topology.add_typed_sink(
            sink,
            crate::topology::SinkTopic::Fixed(topic.clone()),
            spec.key_serde.clone(),
            change_serde.clone(),
            SinkPartitioning::WholeKey,
            &[self.node.as_str()],
        );
        s.record(added);
        s.topology.mark_internal_topic(&topic);
        let added = s.topology.add_typed_source(
            source.to_string(),
            SourceTopics::Names(vec![topic]),
            spec.key_serde.clone(),
            change_serde,
            None,
        );
        s.record(added);
    }

    fn aggregate_into<A: Clone + 'static>(
        &self,
        prefix: &str,
        add: Fold<K, V, A>,
        subtract: Unfold<K, V, A>,
        named: impl IntoName,
        materialized: Materialized<K, A>,
        default_value_serde: Option<SharedSerde<A>>,
    ) -> KTable<K, A> {
        let state = self.state.clone();
        let mut s = state.borrow_mut();
        // Kafka Streams names a table reduce's store as an aggregate's.
        let spec = StoreSpec::settle(
            materialized,
            || s.new_name("KTABLE-AGGREGATE-STATE-STORE-"),
            self.grouped.key_serde.clone(),
            default_value_serde,
        );
        // A named aggregation names its repartition sink and source too.
        let named = named.into_name().map(|n| n.0);
        let sink = s.name_or_generate(named.as_ref().map(|n| format!("{n}-sink")), "KSTREAM-SINK-");
        let mut source = s.name_or_generate(
            named.as_ref().map(|n| format!("{n}-source")),
            "KSTREAM-SOURCE-",
        );
        let name = s.name_or_generate(named, prefix);
        let flag: OldValuesFlag = Arc::default();
        let store = Arc::new(OnceLock::new());
        let mut table = KTable {
            state: state.clone(),
            node: name.clone(),
            store: store.clone(),
            key_serde: None,
            value_serde: None,
            old_values: OldValues::own(flag.clone()),
            getter: crate::operators::getters::lazy_store_getter(&store),
            window: None,
            types: PhantomData,
        };
        let Some(spec) = s.record(spec) else {
            return table;
        };
        let topic = format!(
            "{}-repartition",
            self.grouped
                .name
                .clone()
                .unwrap_or_else(|| spec.name.clone())
        );
        let value_serde = self
            .grouped
            .value_serde
            .clone()
            .or_else(kstreams_record::builtin_serde::<V>);
        let Some(value_serde) = s.record(value_serde.ok_or_else(|| TopologyError::MissingSerde {
            store: topic.clone(),
            part: "value",
            type_name: std::any::type_name::<V>(),
        })) else {
            return table;
        };
        let change_serde: SharedSerde<Change<V>> = Arc::new(ChangeSerde(value_serde));
        let reused = match &self.grouped.name {
            Some(_) => s.named_repartitions.get(&topic).cloned(),
            None => None,
        };
        if let Some(existing) = reused {
            // A second aggregation of a named grouping reads the same topic.
            source = existing;
        } else {
            if self.grouped.name.is_some() {
                s.named_repartitions.insert(topic.clone(), source.clone());
            }
            self.add_repartition(&mut s, sink, &source, topic, &spec, change_serde);
        }
        let store_name = spec.name.clone();
        let added = s
            .topology
            .add_typed_processor::<K, Change<V>, K, Change<A>, _>(
                name.clone(),
                Arc::new(move || TableAggregate {
                    add: add.clone(),
                    subtract: subtract.clone(),
                    store_name: store_name.clone(),
                    send_old: flag.clone(),
                    store: None,
                }),
                &[source.as_str()],
            );
        s.record(added);
        let added = add_store(&mut s.topology, spec.key_value_store(), &name);
        s.record(added);
        let _ = store.set(spec.name.clone());
        table.key_serde = Some(spec.key_serde.clone());
        table.value_serde = Some(spec.value_serde.clone());
        table
    }
}
