//! Cogroup (KIP-150): several grouped streams, each with its own
//! aggregator, folded into one aggregate per key in one store, windowed or
//! not.
//!
//! As in Kafka Streams, each grouped stream gets its own aggregation
//! processor (`COGROUPKSTREAM-AGGREGATE-...`) writing to the shared store,
//! and a pass-through merge node (`COGROUPKSTREAM-MERGE-...`) under all of
//! them is the resulting table.

use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

use kstreams_state::Windowed;
use kstreams_time::{EmitStrategy, FixedSizeWindows, SessionWindows, SlidingWindows};

use crate::change::Change;
use crate::handles::state::BuilderState;
use crate::handles::types::{
    CogroupInput, CogroupKind, CogroupedKStream, KGroupedStream, KTable, OldValues,
    SessionWindowedCogroupedKStream, TimeWindowedCogroupedKStream, TimeWindowing,
};
use crate::handles::windowed::WindowKind;
use crate::materialized::StoreSpec;
use crate::operators::forwarder::OldValuesFlag;
use crate::operators::session_aggregate::{SessionFns, SessionInitializer};
use crate::operators::stateless::PassThrough;
use crate::operators::stream_aggregate::StreamAggregate;
use crate::operators::window_output::WindowedSetup;
use crate::operators::AggregateFold;
use crate::options::IntoName;
use crate::{Materialized, Named, TopologyError};

/// A windowed cogroup emits every update and keeps no late records.
fn cogroup_setup<K, V>(store_name: String, send_old: OldValuesFlag) -> WindowedSetup<K, V> {
    WindowedSetup {
        emit: EmitStrategy::OnWindowUpdate,
        store_name,
        send_old,
        late: None,
    }
}

pub(crate) type Aggregator<K, V, A> = Arc<dyn Fn(&K, V, A) -> A + Send + Sync>;

pub(crate) struct Input<K, V, A> {
    pub(crate) grouped: KGroupedStream<K, V>,
    pub(crate) aggregator: Aggregator<K, V, A>,
}

impl<K: Clone + 'static, V: Clone + 'static, A: Clone + 'static> CogroupInput<K, A>
    for Input<K, V, A>
{
    fn input_node(&self, s: &mut BuilderState, store: &str) -> Result<String, TopologyError> {
        Ok(self.grouped.input(s, store)?.node)
    }

    fn add_aggregation(
        &self,
        s: &mut BuilderState,
        name: String,
        parent: &str,
        store: &str,
        initializer: SessionInitializer<A>,
        kind: &CogroupKind<K, A>,
        flag: OldValuesFlag,
    ) {
        let aggregator = self.aggregator.clone();
        let init = initializer.clone();
        // By key or in time windows, a first update's old value is the
        // initializer's (Kafka Streams' KStreamAggregate and
        // KStreamWindowAggregate); sessions take the fold alone.
        let fns = AggregateFold::aggregate(
            move || init(),
            move |key, value, agg| aggregator(key, value, agg),
        );
        let fold = fns.fold.clone();
        let store_name = store.to_string();
        let added = match kind.clone() {
            CogroupKind::Plain => {
                let null_key = self.grouped.key_serde.clone();
                let null_value = self.grouped.value_serde.clone();
                s.topology.add_typed_processor::<K, V, K, Change<A>, _>(
                    name,
                    Arc::new(move || StreamAggregate {
                        fns: fns.clone(),
                        store_name: store_name.clone(),
                        send_old: flag.clone(),
                        is_null_key: {
                            let serde = null_key.clone();
                            Arc::new(move |k: &K| serde.as_ref().is_some_and(|s| s.is_null(k)))
                        },
                        is_null_value: {
                            let serde = null_value.clone();
                            Arc::new(move |v: &V| serde.as_ref().is_some_and(|s| s.is_null(v)))
                        },
                        store: None,
                    }),
                    &[parent],
                )
            }
            CogroupKind::Windowed(windows) => windows.add_processor(
                &mut s.topology,
                name,
                parent,
                fns,
                cogroup_setup(store_name, flag),
            ),
            CogroupKind::Session(windows, merge) => windows.add_processor(
                &mut s.topology,
                name,
                parent,
                SessionFns {
                    fold,
                    merge,
                    initial: Some(initializer),
                },
                cogroup_setup(store_name, flag),
            ),
        };
        s.record(added);
    }
}

impl<K: Clone + 'static, A: Clone + 'static> CogroupedKStream<K, A> {
    /// Adds a grouped stream with its own aggregator.
    pub fn cogroup<V: Clone + 'static>(
        mut self,
        grouped: &KGroupedStream<K, V>,
        aggregator: impl Fn(&K, V, A) -> A + Send + Sync + 'static,
    ) -> Self {
        if self.key_serde.is_none() {
            self.key_serde = grouped.key_serde.clone();
        }
        self.inputs.push(Arc::new(Input {
            grouped: grouped.clone_grouped(),
            aggregator: Arc::new(aggregator),
        }));
        self
    }

    /// The aggregate per key, starting at `initializer()`; its serde is the
    /// built-in one of `A` (use [`CogroupedKStream::aggregate_with`] for
    /// others).
    pub fn aggregate(&self, initializer: impl Fn() -> A + Send + Sync + 'static) -> KTable<K, A> {
        self.aggregate_with(initializer, None, Materialized::new())
    }

    /// [`CogroupedKStream::aggregate`] with a name and a store.
    pub fn aggregate_with(
        &self,
        initializer: impl Fn() -> A + Send + Sync + 'static,
        named: impl IntoName,
        materialized: Materialized<K, A>,
    ) -> KTable<K, A> {
        let flag: OldValuesFlag = Arc::default();
        let store = Arc::new(OnceLock::new());
        let mut table = KTable {
            state: self.state.clone(),
            node: String::new(),
            store: store.clone(),
            key_serde: None,
            value_serde: None,
            old_values: OldValues::own(flag.clone()),
            getter: crate::operators::getters::lazy_store_getter(&store),
            window: None,
            types: PhantomData,
        };
        let built = self.build(
            Arc::new(initializer),
            named.into_name(),
            materialized,
            CogroupKind::Plain,
            flag,
            |spec| Ok(spec.key_value_store()),
        );
        if let Some((node, spec)) = built {
            table.node = node;
            let _ = table.store.set(spec.name.clone());
            table.key_serde = Some(spec.key_serde.clone());
            table.value_serde = Some(spec.value_serde.clone());
        }
        table
    }

    /// Aggregates per time window: time windows (tumbling, hopping), the
    /// unlimited window or windows of the application's own.
    pub fn windowed_by(
        &self,
        windows: impl Into<FixedSizeWindows>,
    ) -> TimeWindowedCogroupedKStream<K, A> {
        TimeWindowedCogroupedKStream {
            cogrouped: self.clone_cogrouped(),
            windows: TimeWindowing::Fixed(windows.into()),
        }
    }

    /// Aggregates per sliding window (KIP-450), each input with its own
    /// aggregator over one store: Kafka Streams' `CogroupedKStream#
    /// windowedBy(SlidingWindows)`.
    pub fn windowed_by_sliding(
        &self,
        windows: SlidingWindows,
    ) -> TimeWindowedCogroupedKStream<K, A> {
        TimeWindowedCogroupedKStream {
            cogrouped: self.clone_cogrouped(),
            windows: TimeWindowing::Sliding(windows),
        }
    }

    /// Aggregates per session.
    pub fn windowed_by_session(
        &self,
        windows: SessionWindows,
    ) -> SessionWindowedCogroupedKStream<K, A> {
        SessionWindowedCogroupedKStream {
            cogrouped: self.clone_cogrouped(),
            windows,
        }
    }

    fn clone_cogrouped(&self) -> Self {
        CogroupedKStream {
            state: self.state.clone(),
            key_serde: self.key_serde.clone(),
            inputs: self.inputs.clone(),
        }
    }

    /// Adds the store, the repartitions, one aggregation per input and the
    /// merge node; returns the merge node and the store spec.
    pub(crate) fn build<B: kstreams_state::StoreBuilder>(
        &self,
        initializer: SessionInitializer<A>,
        named: Option<Named>,
        materialized: Materialized<K, A>,
        kind: CogroupKind<K, A>,
        flag: OldValuesFlag,
        store_builder: impl FnOnce(&StoreSpec<K, A>) -> Result<B, TopologyError>,
    ) -> Option<(String, StoreSpec<K, A>)> {
        let mut s = self.state.borrow_mut();
        let spec = StoreSpec::settle(
            materialized,
            || s.new_name("COGROUPKSTREAM-AGGREGATE-STATE-STORE-"),
            self.key_serde.clone(),
            None,
        );
        let spec = s.record(spec)?;
        let mut parents = Vec::new();
        for input in &self.inputs {
            let parent = input.input_node(&mut s, &spec.name);
            parents.push(s.record(parent)?);
        }
        let mut aggregations = Vec::new();
        for (i, (input, parent)) in self.inputs.iter().zip(&parents).enumerate() {
            // A named cogroup still draws each index, as Kafka Streams does.
            let name = s.name_or_generate(
                named
                    .as_ref()
                    .map(|Named(n)| format!("{n}-cogroup-agg-{i}")),
                "COGROUPKSTREAM-AGGREGATE-",
            );
            input.add_aggregation(
                &mut s,
                name.clone(),
                parent,
                &spec.name,
                initializer.clone(),
                &kind,
                flag.clone(),
            );
            aggregations.push(name);
        }
        let merge = s.name_or_generate(
            named.as_ref().map(|Named(n)| format!("{n}-cogroup-merge")),
            "COGROUPKSTREAM-MERGE-",
        );
        let parents: Vec<&str> = aggregations.iter().map(String::as_str).collect();
        let added = match kind {
            CogroupKind::Plain => s
                .topology
                .add_typed_processor::<K, Change<A>, K, Change<A>, _>(
                    merge.clone(),
                    Arc::new(|| PassThrough),
                    &parents,
                ),
            _ => s
                .topology
                .add_typed_processor::<Windowed<K>, Change<A>, Windowed<K>, Change<A>, _>(
                    merge.clone(),
                    Arc::new(|| PassThrough),
                    &parents,
                ),
        };
        s.record(added)?;
        s.topology.graph.copartition(&parents);
        let builder = store_builder(&spec);
        let builder = s.record(builder)?;
        let added = s.topology.add_state_store(builder, &parents).map(|_| ());
        s.record(added)?;
        Some((merge, spec))
    }
}
