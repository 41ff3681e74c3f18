//! `KTable`: a changelog stream seen as a table, one value per key, and its
//! operations but the joins (see [`joins`] and [`fk_join`]).

mod fk_join;
mod joins;

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use kstreams_record::{DefaultSerde, Nullable, SharedSerde};
use kstreams_state::Stores;

use crate::change::Change;
use crate::handles::state::SharedState;
use crate::handles::types::{KGroupedTable, KTable, OldValues};
use crate::materialized::{add_store, StoreSpec};
use crate::operators::forwarder::OldValuesFlag;
use crate::operators::getters::lazy_store_getter;
use crate::operators::getters::transformed_getter;
use crate::operators::getters::TableGetter;
use crate::operators::getters::{mapped_getter, store_getter};
use crate::operators::suppress::SuppressProcessor;
use crate::operators::suppress_buffer::{BufferedSerde, BUFFER_CHANGELOG_HEADERS};
use crate::operators::table_rekey::TableRekey;
use crate::operators::table_source::{InputNulls, TableSource};
use crate::operators::table_to_stream::TableToStream;
use crate::operators::table_transform_values::{TableTransformValues, TableValueTransformer};
use crate::operators::LazyStoreName;
use crate::options::IntoName;
use crate::suppressed::WhenFull;
use crate::Suppressed;
use crate::{Grouped, KStream, Materialized, TopologyError};
use crate::{Processor, ValueTransformerWithKey};

impl OldValues {
    /// Old values come from this operator's own store: always possible.
    pub(crate) fn own(flag: OldValuesFlag) -> Self {
        let set = flag;
        OldValues {
            enable: Rc::new(move |_| {
                set.store(true, Ordering::Relaxed);
                true
            }),
        }
    }
}

/// How a table source reads its input's key and value (`None`: a null key,
/// dropped; a null value, a delete).
pub(crate) type TableInput<KI, I, K, V> = (fn(KI) -> Option<K>, fn(I) -> Option<V>);

impl<K: Clone + 'static, V: Clone + 'static> KTable<K, V> {
    /// A table source node (from a topic or a stream) with its lazily added
    /// store: `materialize_now` when the user named it.
    pub(crate) fn source<KI: Clone + 'static, I: Clone + 'static>(
        state: &SharedState,
        parent: &str,
        name: String,
        spec: Result<StoreSpec<K, V>, crate::TopologyError>,
        materialize_now: bool,
        input: TableInput<KI, I, K, V>,
    ) -> Self {
        Self::source_with_nulls(
            state,
            parent,
            name,
            spec,
            materialize_now,
            input,
            InputNulls::none(),
        )
    }

    /// [`KTable::source`] whose input also has the nulls `nulls` tells
    /// (a null key dropped, a null value a delete).
    pub(crate) fn source_with_nulls<KI: Clone + 'static, I: Clone + 'static>(
        state: &SharedState,
        parent: &str,
        name: String,
        spec: Result<StoreSpec<K, V>, crate::TopologyError>,
        materialize_now: bool,
        (to_key, to_value): TableInput<KI, I, K, V>,
        nulls: InputNulls<KI, I>,
    ) -> Self {
        let store: LazyStoreName = Arc::new(OnceLock::new());
        let flag: OldValuesFlag = Arc::default();
        let versioned = matches!(&spec, Ok(spec) if spec.versioned_history.is_some());
        {
            let supplier_store = store.clone();
            let supplier_flag = flag.clone();
            let mut s = state.borrow_mut();
            let added = s.topology.add_typed_processor::<KI, I, K, Change<V>, _>(
                name.clone(),
                Arc::new(move || TableSource::<K, V, KI, I> {
                    store_name: supplier_store.clone(),
                    send_old: supplier_flag.clone(),
                    to_key,
                    to_value,
                    nulls: nulls.clone(),
                    versioned,
                    store: None,
                    versioned_store: None,
                }),
                &[parent],
            );
            s.record(added);
        }
        let (key_serde, value_serde) = match &spec {
            Ok(spec) => (Some(spec.key_serde.clone()), Some(spec.value_serde.clone())),
            Err(_) => (None, None),
        };
        // A store that cannot be made (no serde) is an error only once
        // something needs the store.
        let spec = Rc::new(std::cell::RefCell::new(Some(spec)));
        let spec = Rc::new(spec);
        let materialize: Rc<dyn Fn() -> bool> = {
            let state = state.clone();
            let store = store.clone();
            let node = name.clone();
            let spec = spec.clone();
            Rc::new(move || {
                if store.get().is_some() {
                    return true;
                }
                let mut s = state.borrow_mut();
                let spec = spec.borrow_mut().take();
                let Some(spec) = spec.and_then(|spec| s.record(spec)) else {
                    return false;
                };
                let added = if spec.versioned_history.is_some() {
                    add_store(&mut s.topology, spec.versioned_store(), &node)
                } else {
                    add_store(&mut s.topology, spec.key_value_store(), &node)
                };
                s.record(added);
                let _ = store.set(spec.name.clone());
                true
            })
        };
        if materialize_now {
            materialize();
        }
        let enable_flag = flag.clone();
        let enable_store = store.clone();
        let enable_materialize = materialize.clone();
        let old_values = OldValues {
            enable: Rc::new(move |force| {
                if enable_store.get().is_none() && !(force && enable_materialize()) {
                    return false;
                }
                enable_flag.store(true, Ordering::Relaxed);
                true
            }),
        };
        // A join reads the table: that materializes it.
        let getter_store = store.clone();
        let getter: TableGetter<K, V> = Rc::new(move || {
            if !materialize() {
                return None;
            }
            let name = getter_store.get()?.clone();
            Some(store_getter(name, versioned))
        });
        KTable {
            state: state.clone(),
            node: name,
            store,
            key_serde,
            value_serde,
            old_values,
            getter,
            window: None,
            types: PhantomData,
        }
    }
}

impl<K: Clone + 'static, V: Clone + 'static> KTable<K, V> {
    /// The name of the node this handle stands on.
    pub fn node_name(&self) -> &str {
        &self.node
    }

    /// Bootstraps the topics this table is read from (beyond Kafka
    /// Streams; see [`crate::Consumed::with_bootstrap`]): a task reads them
    /// to the end offsets seen at assignment before its other partitions,
    /// so a join never sees the table half-loaded.
    pub fn with_bootstrap(self) -> Self {
        self.state
            .borrow_mut()
            .topology
            .graph
            .mark_bootstrap_upstream(&self.node);
        self
    }

    /// The name of the store holding this table, if it is materialized.
    pub fn queryable_store_name(&self) -> Option<String> {
        self.store.get().cloned()
    }

    /// Asks this table (and upstream, as needed) to send old values;
    /// `force` materializes a source table to have them.
    pub(crate) fn enable_old_values(&self, force: bool) -> bool {
        (self.old_values.enable)(force)
    }

    /// Keeps the entries for which `predicate` holds; an update that fails
    /// it deletes the key downstream.
    pub fn filter(
        &self,
        predicate: impl Fn(&K, &V) -> bool + Send + Sync + 'static,
    ) -> KTable<K, V> {
        self.filter_with(predicate, None, None)
    }

    /// Drops the entries for which `predicate` holds.
    pub fn filter_not(
        &self,
        predicate: impl Fn(&K, &V) -> bool + Send + Sync + 'static,
    ) -> KTable<K, V> {
        self.filter_with(move |k, v| !predicate(k, v), None, None)
    }

    /// [`KTable::filter_not`] with a processor name and, to materialize
    /// the result, a store: Kafka Streams' `filterNot(predicate, Named,
    /// Materialized)` (`None` for either: `filterNot(predicate,
    /// Materialized)` and `filterNot(predicate, Named)`). As in Kafka
    /// Streams, a `Materialized` without a store name draws a store index
    /// but keeps no store.
    pub fn filter_not_with(
        &self,
        predicate: impl Fn(&K, &V) -> bool + Send + Sync + 'static,
        named: impl IntoName,
        materialized: Option<Materialized<K, V>>,
    ) -> KTable<K, V> {
        self.filter_with(move |k, v| !predicate(k, v), named, materialized)
    }

    /// [`KTable::filter`] with a processor name and, to materialize the
    /// result, a store: Kafka Streams' `filter(predicate, Named,
    /// Materialized)`.
    pub fn filter_with(
        &self,
        predicate: impl Fn(&K, &V) -> bool + Send + Sync + 'static,
        named: impl IntoName,
        materialized: Option<Materialized<K, V>>,
    ) -> KTable<K, V> {
        let compute = Arc::new(move |k: &K, v: V| if predicate(k, &v) { Some(v) } else { None });
        // A filter asks upstream for old values if they come for free (an
        // aggregation, a materialized table), so that it can leave out the
        // deletes of keys it never let through (Kafka Streams' KAFKA-10077).
        let parent_sends_old = self.enable_old_values(false);
        let mut table = self.transform_values_fn::<V>(
            compute,
            "KTABLE-FILTER-",
            named,
            materialized,
            self.value_serde.clone(),
            true,
        );
        if parent_sends_old {
            table.enable_old_values(false);
        }
        table.window = self.window;
        table
    }

    /// A new value for each entry; the keys stay.
    pub fn map_values<V2: Clone + 'static>(
        &self,
        mapper: impl Fn(&K, V) -> V2 + Send + Sync + 'static,
    ) -> KTable<K, V2> {
        self.map_values_with(mapper, None, None)
    }

    /// [`KTable::map_values`] with a processor name and, to materialize the
    /// result, a store.
    pub fn map_values_with<V2: Clone + 'static>(
        &self,
        mapper: impl Fn(&K, V) -> V2 + Send + Sync + 'static,
        named: impl IntoName,
        materialized: Option<Materialized<K, V2>>,
    ) -> KTable<K, V2> {
        let compute = Arc::new(move |k: &K, v: V| Some(mapper(k, v)));
        let mut table = self.transform_values_fn::<V2>(
            compute,
            "KTABLE-MAPVALUES-",
            named,
            materialized,
            None,
            false,
        );
        table.window = self.window;
        table
    }

    fn transform_values_fn<V2: Clone + 'static>(
        &self,
        compute: crate::operators::table_transform_values::ValueFn<K, V, V2>,
        prefix: &str,
        named: impl IntoName,
        materialized: Option<Materialized<K, V2>>,
        value_serde: Option<SharedSerde<V2>>,
        skip_double_absent: bool,
    ) -> KTable<K, V2> {
        let getter_compute = compute.clone();
        self.values_node(
            prefix,
            named,
            materialized,
            value_serde,
            true,
            move |store_name, send_old| TableTransformValues {
                compute: compute.clone(),
                store_name,
                send_old,
                skip_double_absent,
                store: None,
            },
            move |parent, _| {
                Rc::new(move || Some(mapped_getter(parent()?, getter_compute.clone())))
            },
        )
    }

    /// A table operator computing values under the same keys (filter,
    /// map_values, transform_values): its node named `named` (else
    /// `prefix` and an index), materialized when `materialized` names a
    /// store (an unnamed one draws a store index if `draw_unnamed_store`,
    /// as Kafka Streams' filter and mapValues do, not its transformValues);
    /// `getter` reads an unmaterialized result through the parent's.
    #[allow(clippy::too_many_arguments)]
    fn values_node<V2: Clone + 'static, P: Processor<K, Change<V>, K, Change<V2>>>(
        &self,
        prefix: &str,
        named: impl IntoName,
        materialized: Option<Materialized<K, V2>>,
        value_serde: Option<SharedSerde<V2>>,
        draw_unnamed_store: bool,
        processor: impl Fn(Option<String>, OldValuesFlag) -> P + Send + Sync + 'static,
        getter: impl FnOnce(TableGetter<K, V>, &str) -> TableGetter<K, V2>,
    ) -> KTable<K, V2> {
        let mut s = self.state.borrow_mut();
        // Only a named store materializes the result; an unnamed one just
        // draws its index, as in Kafka Streams.
        let spec = materialized.and_then(|m| {
            let store_prefix = format!("{prefix}STATE-STORE-");
            if m.name.is_none() {
                if draw_unnamed_store {
                    s.new_name(&store_prefix);
                }
                return None;
            }
            let spec = StoreSpec::settle(
                m,
                || s.new_name(&store_prefix),
                self.key_serde.clone(),
                value_serde.clone(),
            );
            s.record(spec)
        });
        let name = s.name_or_generate(named.into_name().map(|n| n.0), prefix);
        let flag: OldValuesFlag = Arc::default();
        let store_name = spec.as_ref().map(|spec| spec.name.clone());
        let supplier_flag = flag.clone();
        let supplier_store = store_name.clone();
        let added = s
            .topology
            .add_typed_processor::<K, Change<V>, K, Change<V2>, _>(
                name.clone(),
                Arc::new(move || processor(supplier_store.clone(), supplier_flag.clone())),
                &[self.node.as_str()],
            );
        s.record(added);
        let store: LazyStoreName = Arc::new(OnceLock::new());
        let old_values = match &spec {
            Some(spec) => {
                let added = add_store(&mut s.topology, spec.key_value_store(), &name);
                s.record(added);
                let _ = store.set(spec.name.clone());
                OldValues::own(flag)
            }
            None => {
                let parent = self.old_values.clone();
                let set = flag.clone();
                OldValues {
                    enable: Rc::new(move |force| {
                        if (parent.enable)(force) {
                            set.store(true, Ordering::Relaxed);
                            true
                        } else {
                            false
                        }
                    }),
                }
            }
        };
        let value_serde = spec.as_ref().map(|s| s.value_serde.clone()).or(value_serde);
        let getter: TableGetter<K, V2> = match &spec {
            Some(_) => lazy_store_getter(&store),
            None => getter(self.getter.clone(), &name),
        };
        KTable {
            state: self.state.clone(),
            node: name,
            store,
            key_serde: self.key_serde.clone(),
            value_serde,
            old_values,
            getter,
            window: None,
            types: PhantomData,
        }
    }

    /// A new value for each key computed by a transformer with state
    /// stores: Kafka Streams' `KTable#transformValues(supplier,
    /// stateStoreNames...)`. `supplier` makes one transformer per task
    /// (and one per reader of the result's values, see below); `stores`
    /// are stores added with [`crate::StreamsBuilder::add_state_store`]
    /// that it may use.
    ///
    /// The transformer is called for deletes too (with `None`). When a
    /// downstream operator needs old values (a `group_by`, a table join),
    /// it is called twice per update, with the new value and then the old
    /// one; a join that looks the result up runs a transformer of its own
    /// on the parent's value. Materialize the result
    /// ([`KTable::transform_values_with`]) to have old values and lookups
    /// come from the store instead. See [`crate::ValueTransformerWithKey`]
    /// for an example.
    pub fn transform_values<V2: Clone + 'static, T: ValueTransformerWithKey<K, V, V2>>(
        &self,
        supplier: impl Fn() -> T + Send + Sync + 'static,
        stores: &[&str],
    ) -> KTable<K, V2> {
        self.transform_values_with(supplier, stores, None, None)
    }

    /// [`KTable::transform_values`] with a processor name and, to
    /// materialize the result, a store: Kafka Streams'
    /// `transformValues(supplier, Materialized, Named, stateStoreNames...)`.
    /// As in Kafka Streams, only a `Materialized` with a store name
    /// materializes (one without draws no store index), and the result's
    /// value serde is the `Materialized`'s (else a built-in one), never the
    /// parent's.
    pub fn transform_values_with<V2: Clone + 'static, T: ValueTransformerWithKey<K, V, V2>>(
        &self,
        supplier: impl Fn() -> T + Send + Sync + 'static,
        stores: &[&str],
        named: impl IntoName,
        materialized: Option<Materialized<K, V2>>,
    ) -> KTable<K, V2> {
        let supplier: Arc<dyn Fn() -> T + Send + Sync> = Arc::new(supplier);
        let processor_supplier = supplier.clone();
        let user_stores: Vec<String> = stores.iter().map(|s| s.to_string()).collect();
        let getter_stores = user_stores.clone();
        let mut table = self.values_node(
            "KTABLE-TRANSFORMVALUES-",
            named,
            materialized,
            None,
            false,
            move |store_name, send_old| TableValueTransformer {
                transformer: processor_supplier(),
                store_name,
                send_old,
                store: None,
                types: PhantomData,
            },
            move |parent, node| {
                let node = node.to_string();
                Rc::new(move || {
                    Some(transformed_getter(
                        parent()?,
                        supplier.clone(),
                        node.clone(),
                        getter_stores.clone(),
                    ))
                })
            },
        );
        if !user_stores.is_empty() {
            let mut s = self.state.borrow_mut();
            let connected = s
                .topology
                .connect_processor_and_state_stores(&table.node, stores)
                .map(|_| ());
            s.record(connected);
        }
        table.window = self.window;
        table
    }

    /// The table's updates as a stream: each update's new value, `None`
    /// for a deleted key.
    pub fn to_stream(&self) -> KStream<K, Option<V>> {
        self.to_stream_named(None)
    }

    /// [`KTable::to_stream`] with a processor name.
    pub fn to_stream_named(&self, named: impl IntoName) -> KStream<K, Option<V>> {
        let mut s = self.state.borrow_mut();
        let name = s.name_or_generate(named.into_name().map(|n| n.0), "KTABLE-TOSTREAM-");
        let added = s
            .topology
            .add_typed_processor::<K, Change<V>, K, Option<V>, _>(
                name.clone(),
                Arc::new(|| TableToStream),
                &[self.node.as_str()],
            );
        s.record(added);
        drop(s);
        let mut stream = KStream::new(self.state.clone(), name);
        stream.key_serde = self.key_serde.clone();
        stream.value_serde = self
            .value_serde
            .clone()
            .map(|v| Arc::new(Nullable(v)) as SharedSerde<Option<V>>);
        stream
    }

    /// Groups the table's entries by a new key (and value) for a table
    /// aggregation; the key `K2` needs a default serde.
    pub fn group_by<K2, V2>(
        &self,
        selector: impl Fn(&K, V) -> (K2, V2) + Send + Sync + 'static,
    ) -> KGroupedTable<K2, V2>
    where
        K2: DefaultSerde + Clone + PartialEq,
        V2: DefaultSerde + Clone,
    {
        self.group_by_with(
            selector,
            Grouped::with(K2::default_serde(), V2::default_serde()),
        )
    }

    /// [`KTable::group_by`] with serdes and a name for the repartition topic.
    pub fn group_by_with<K2: Clone + PartialEq + 'static, V2: Clone + 'static>(
        &self,
        selector: impl Fn(&K, V) -> (K2, V2) + Send + Sync + 'static,
        grouped: Grouped<K2, V2>,
    ) -> KGroupedTable<K2, V2> {
        // The subtractor needs each update's old value, so the source is
        // materialized if it was not.
        self.enable_old_values(true);
        let mut s = self.state.borrow_mut();
        let name = s.name_or_generate(grouped.name.clone(), "KTABLE-SELECT-");
        let selector = Arc::new(selector);
        let added = s
            .topology
            .add_typed_processor::<K, Change<V>, K2, Change<V2>, _>(
                name.clone(),
                Arc::new(move || TableRekey {
                    selector: selector.clone(),
                }),
                &[self.node.as_str()],
            );
        s.record(added);
        KGroupedTable::new(self.state.clone(), name, grouped)
    }
}

impl<K: Clone + 'static, V: Clone + 'static> KTable<K, V> {
    /// Holds updates back as `suppressed` says: Kafka Streams'
    /// `KTable#suppress`.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use kstreams_dsl::{BufferConfig, Produced, StreamsBuilder, Suppressed};
    /// use kstreams_record::{I64Serde, Nullable, StringSerde};
    /// use kstreams_runtime::TopologyTestDriver;
    /// use kstreams_state::{TimeWindowedSerde, Window, Windowed};
    /// use kstreams_time::TimeWindows;
    ///
    /// let builder = StreamsBuilder::new();
    /// builder
    ///     .stream::<String, String>("events")
    ///     .group_by_key()
    ///     .windowed_by(TimeWindows::of_size_with_no_grace(Duration::from_millis(10)))
    ///     .count()
    ///     .suppress(Suppressed::until_window_closes(BufferConfig::unbounded()))
    ///     .to_stream()
    ///     .to_with(
    ///         "final-counts",
    ///         Produced::with(TimeWindowedSerde::new(StringSerde, 10), Nullable(I64Serde)),
    ///     );
    /// let driver = TopologyTestDriver::new(builder.build()?)?;
    /// let events = driver.create_input_topic("events", StringSerde, StringSerde);
    /// let finals = driver.create_output_topic(
    ///     "final-counts",
    ///     TimeWindowedSerde::new(StringSerde, 10),
    ///     Nullable(I64Serde),
    /// );
    /// events.pipe_input_at("a".to_string(), "x".to_string(), 1);
    /// events.pipe_input_at("a".to_string(), "x".to_string(), 3);
    /// assert!(finals.is_empty(), "the window [0, 10) is still open");
    /// // Stream time reaches the window's end: its count is final.
    /// events.pipe_input_at("a".to_string(), "x".to_string(), 10);
    /// assert_eq!(
    ///     finals.read_key_values_to_list(),
    ///     vec![(Windowed::new("a".to_string(), Window::new(0, 10)), Some(2))]
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn suppress(&self, suppressed: Suppressed<K>) -> KTable<K, V> {
        // The buffer keeps the value before a key's first held-back update
        // and emits each update's old value, so it needs old values from
        // upstream: as in Kafka Streams, a source table is materialized to
        // have them.
        self.enable_old_values(true);
        let mut s = self.state.borrow_mut();
        let (name, store_name) = match &suppressed.name {
            Some(name) => (name.clone(), format!("{name}-store")),
            None => {
                let name = s.new_name("KTABLE-SUPPRESS-");
                (name, s.new_name("KTABLE-SUPPRESS-STATE-STORE-"))
            }
        };
        let table = KTable {
            state: self.state.clone(),
            node: name.clone(),
            store: Arc::new(OnceLock::new()),
            key_serde: self.key_serde.clone(),
            value_serde: self.value_serde.clone(),
            // Suppression passes old values through: what its parent sends.
            old_values: self.old_values.clone(),
            getter: crate::operators::getters::no_getter(),
            window: self.window,
            types: PhantomData,
        };
        let invalid = |message: &str| TopologyError::InvalidOperator {
            operator: format!("suppress {name}"),
            message: message.to_string(),
        };
        let delay_ms = match (suppressed.limit_ms, self.window) {
            (Some(limit), _) => Ok(limit),
            (None, Some(window))
                if !(suppressed.buffer.bounded()
                    && suppressed.buffer.when_full == WhenFull::EmitEarly) =>
            {
                Ok(window.close_delay_ms)
            }
            (None, Some(_)) => Err(invalid(
                "until_window_closes never emits early: bound the buffer with \
                 shut_down_when_full(), or leave it unbounded",
            )),
            (None, None) => Err(invalid(
                "until_window_closes needs the table of a windowed aggregation \
                 (windowed_by(..).count() and the like) to know when windows close",
            )),
        };
        let Some(delay_ms) = s.record(delay_ms) else {
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
        let (Some(key_serde), Some(value_serde)) = (key_serde, value_serde) else {
            s.record::<()>(Err(TopologyError::MissingSerde {
                store: store_name,
                part: if self.key_serde.is_none() {
                    "key"
                } else {
                    "value"
                },
                type_name: std::any::type_name::<(K, V)>(),
            }));
            return table;
        };
        let store = Stores::key_value_store_builder(
            Stores::in_memory_key_value_store(&store_name),
            key_serde.clone(),
            BufferedSerde(value_serde.clone()),
        );
        let options = store
            .options()
            .clone()
            .with_changelog_headers(BUFFER_CHANGELOG_HEADERS);
        // Kafka Streams' BufferConfig#withLoggingDisabled/withLoggingEnabled.
        let options = match &suppressed.buffer.logging {
            Some(config) => options.with_logging_enabled(config.clone()),
            None => options.with_logging_disabled(),
        };
        let store = store.with_options(options);
        let supplier_store = store_name.clone();
        let time = suppressed.time.clone();
        let buffer = suppressed.buffer;
        let final_results = suppressed.final_results;
        let added = s
            .topology
            .add_typed_processor::<K, Change<V>, K, Change<V>, _>(
                name.clone(),
                Arc::new(move || SuppressProcessor {
                    store_name: supplier_store.clone(),
                    time: time.clone(),
                    delay_ms,
                    buffer: buffer.clone(),
                    final_results,
                    key_serde: key_serde.clone(),
                    value_serde: value_serde.clone(),
                    store: None,
                    index: BTreeMap::new(),
                    bytes: 0,
                    observed_stream_time: -1,
                    indexed: false,
                }),
                &[self.node.as_str()],
            );
        s.record(added);
        let added = add_store(&mut s.topology, store, &name);
        s.record(added);
        table
    }
}
