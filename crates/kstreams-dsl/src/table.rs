//! `KTable`: a changelog stream seen as a table, one value per key.

use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use kstreams_record::{DefaultSerde, Headers, Nullable, Serde, SerdeError, SharedSerde};

use crate::builder::SharedState;
use crate::grouped::KGroupedTable;
use crate::internals::graph::SourceTopics;
use crate::materialized::{add_store, StoreSpec};
use crate::options::IntoName;
use crate::stateful::{
    mapped_getter, store_getter, Change, GetterSupplier, LazyStoreName, OldValuesFlag, TableRekey,
    TableSource, TableToStream, TableTransformValues,
};
use crate::{Consumed, Grouped, KStream, Materialized, TopologyError};

/// What a windowed table knows of its windows, for `suppress`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WindowInfo {
    /// Grace period: a window is final once stream time passes end + grace.
    pub grace_ms: i64,
}

/// How a table turns on old values: for a source table it materializes
/// the store (when forced), for a derived table it asks upstream.
#[derive(Clone)]
pub(crate) struct OldValues {
    pub enable: Rc<dyn Fn(bool) -> bool>,
}

impl OldValues {
    /// Old values come from this operator's own store: always possible.
    pub fn own(flag: OldValuesFlag) -> Self {
        let set = flag;
        OldValues {
            enable: Rc::new(move |_| {
                set.store(true, Ordering::Relaxed);
                true
            }),
        }
    }
}

/// A table: the latest value of each key, updated by a changelog stream.
/// Kafka Streams' `KTable`. Operators on a table see each update with the
/// value it replaced (when needed), so that aggregations and joins can take
/// the old value back out.
pub struct KTable<K, V> {
    pub(crate) state: SharedState,
    pub(crate) node: String,
    /// The store holding this table's values, once materialized.
    pub(crate) store: LazyStoreName,
    pub(crate) key_serde: Option<SharedSerde<K>>,
    pub(crate) value_serde: Option<SharedSerde<V>>,
    pub(crate) old_values: OldValues,
    /// How to read this table from another operator (joins).
    pub(crate) getter: TableGetter<K, V>,
    pub(crate) window: Option<WindowInfo>,
    pub(crate) types: PhantomData<fn() -> (K, V)>,
}

impl<K, V> Clone for KTable<K, V> {
    fn clone(&self) -> Self {
        KTable {
            state: self.state.clone(),
            node: self.node.clone(),
            store: self.store.clone(),
            key_serde: self.key_serde.clone(),
            value_serde: self.value_serde.clone(),
            old_values: self.old_values.clone(),
            getter: self.getter.clone(),
            window: self.window,
            types: PhantomData,
        }
    }
}

/// How a table source reads its input's key and value (`None`: a null key,
/// dropped; a null value, a delete).
pub(crate) type TableInput<KI, I, K, V> = (fn(KI) -> Option<K>, fn(I) -> Option<V>);

/// A table source node (from a topic or a stream) with its lazily added
/// store: `materialize_now` when the user named it.
pub(crate) fn table_source<
    K: Clone + 'static,
    V: Clone + 'static,
    KI: Clone + 'static,
    I: Clone + 'static,
>(
    state: &SharedState,
    parent: &str,
    name: String,
    spec: Result<StoreSpec<K, V>, crate::TopologyError>,
    materialize_now: bool,
    (to_key, to_value): TableInput<KI, I, K, V>,
) -> KTable<K, V> {
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

/// How a join gets a table's value getter (materializing a source table
/// if needed); `None` when the table cannot be read (a windowed or
/// suppressed table, or one without serdes for its store).
pub(crate) type TableGetter<K, V> = Rc<dyn Fn() -> Option<GetterSupplier<K, V>>>;

/// The getter of a table kept in a store set at build time.
pub(crate) fn lazy_store_getter<K: 'static, V: Clone + 'static>(
    store: &LazyStoreName,
) -> TableGetter<K, V> {
    let store = store.clone();
    Rc::new(move || Some(store_getter(store.get()?.clone(), false)))
}

/// No getter (windowed and suppressed tables).
pub(crate) fn no_getter<K, V>() -> TableGetter<K, V> {
    Rc::new(|| None)
}

impl crate::StreamsBuilder {
    /// A table of a topic, with the default serdes of `K` and `V`: each
    /// record is the key's new value, a null value deletes the key.
    pub fn table<K, V>(&self, topic: &str) -> KTable<K, V>
    where
        K: DefaultSerde + Clone,
        V: DefaultSerde + Clone,
    {
        self.table_with(topic, Consumed::default(), Materialized::new())
    }

    /// A table of a topic, read as `consumed` says and kept as
    /// `materialized` says. A table with a store name is materialized (and
    /// queryable); one without gets a store only if an operator needs one.
    pub fn table_with<K: Clone + 'static, V: Clone + 'static>(
        &self,
        topic: &str,
        consumed: Consumed<K, V>,
        materialized: Materialized<K, V>,
    ) -> KTable<K, V> {
        let state = self.state();
        let named_store = materialized.name.is_some();
        let spec = {
            let mut s = state.borrow_mut();
            StoreSpec::settle(
                materialized,
                || s.new_name(&format!("{topic}-STATE-STORE-")),
                Some(consumed.key_serde.clone()),
                Some(consumed.value_serde.clone()),
            )
        };
        let (source, table_node) = {
            let mut s = state.borrow_mut();
            // A named table is its table-source node; the topic's source
            // node is `<name>-source` (Kafka Streams' TABLE_SOURCE_SUFFIX).
            let source = s.name_or_generate(
                consumed.name.as_ref().map(|name| format!("{name}-source")),
                "KSTREAM-SOURCE-",
            );
            let table_node = s.name_or_generate(consumed.name.clone(), "KTABLE-SOURCE-");
            // Null keys are read as such and dropped (and counted) by the
            // table source, as Kafka Streams' KTableSource does.
            let nullable_keys: SharedSerde<Option<K>> =
                Arc::new(Nullable(consumed.key_serde.clone()));
            let nullable: SharedSerde<Option<V>> = Arc::new(Nullable(consumed.value_serde.clone()));
            let added = s.topology.add_typed_source(
                source.clone(),
                SourceTopics::Names(vec![topic.to_string()]),
                nullable_keys,
                nullable,
                consumed.extractor.clone(),
            );
            s.record(added);
            if consumed.bootstrap {
                s.topology.graph.mark_bootstrap_upstream(&source);
            }
            (source, table_node)
        };
        let mut table = table_source::<K, V, Option<K>, Option<V>>(
            &state,
            &source,
            table_node,
            spec,
            named_store,
            (|k| k, |v| v),
        );
        table.key_serde = Some(consumed.key_serde);
        table.value_serde = Some(consumed.value_serde);
        table
    }
}

impl<K: Clone + 'static, V: Clone + 'static> KStream<K, V> {
    /// This stream as a table: each record is an update of its key.
    pub fn to_table(&self) -> KTable<K, V> {
        self.to_table_with(None, Materialized::new())
    }

    /// [`KStream::to_table`] with a processor name and a store.
    pub fn to_table_with(
        &self,
        named: impl IntoName,
        materialized: Materialized<K, V>,
    ) -> KTable<K, V> {
        let named_store = materialized.name.is_some();
        let (name, spec, parent) = {
            let mut s = self.state.borrow_mut();
            let name = s.name_or_generate(named.into_name().map(|n| n.0), "KSTREAM-TOTABLE-");
            let spec = StoreSpec::settle(
                materialized,
                || s.new_name("KSTREAM-TOTABLE-STATE-STORE-"),
                self.key_serde.clone(),
                self.value_serde.clone(),
            );
            // After a key change, the updates of a key must meet in one
            // task: through `<name>-repartition`, as Kafka Streams does.
            let mut parent = self.node.clone();
            if self.repartition_required {
                let serdes = match &spec {
                    Ok(spec) => Ok((spec.key_serde.clone(), spec.value_serde.clone())),
                    Err(e) => Err(TopologyError::InvalidOperator {
                        operator: format!("to_table {name}"),
                        message: format!("its repartition topic needs serdes: {e}"),
                    }),
                };
                if let Some((key_serde, value_serde)) = s.record(serdes) {
                    parent = self
                        .through_repartition_topic(&mut s, name.clone(), key_serde, value_serde)
                        .node;
                }
            }
            (name, spec, parent)
        };
        let mut table =
            table_source::<K, V, K, V>(&self.state, &parent, name, spec, named_store, (Some, Some));
        if table.key_serde.is_none() {
            table.key_serde = self.key_serde.clone();
        }
        if table.value_serde.is_none() {
            table.value_serde = self.value_serde.clone();
        }
        table
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

    /// [`KTable::filter`] with a processor name and, to materialize the
    /// result, a store.
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
        let mut table = self.transform_values::<V>(
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
        let mut table = self.transform_values::<V2>(
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

    fn transform_values<V2: Clone + 'static>(
        &self,
        compute: crate::stateful::ValueFn<K, V, V2>,
        prefix: &str,
        named: impl IntoName,
        materialized: Option<Materialized<K, V2>>,
        value_serde: Option<SharedSerde<V2>>,
        skip_double_absent: bool,
    ) -> KTable<K, V2> {
        let mut s = self.state.borrow_mut();
        // Only a named store materializes the result; an unnamed one just
        // draws its index, as in Kafka Streams.
        let spec = materialized.and_then(|m| {
            let store_prefix = format!("{prefix}STATE-STORE-");
            if m.name.is_none() {
                s.new_name(&store_prefix);
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
        let supplier_compute = compute.clone();
        let added = s
            .topology
            .add_typed_processor::<K, Change<V>, K, Change<V2>, _>(
                name.clone(),
                Arc::new(move || TableTransformValues {
                    compute: supplier_compute.clone(),
                    store_name: supplier_store.clone(),
                    send_old: supplier_flag.clone(),
                    skip_double_absent,
                    store: None,
                }),
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
            None => {
                let parent = self.getter.clone();
                Rc::new(move || Some(mapped_getter(parent()?, compute.clone())))
            }
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

/// A serde for table changes on a repartition topic: both values, each as
/// a 4-byte big-endian length (-1 for absent) and its bytes, new first.
/// Only kstreams reads these topics, so the layout is our own.
pub(crate) struct ChangeSerde<V>(pub SharedSerde<V>);

impl<V: 'static> Serde<Change<V>> for ChangeSerde<V> {
    fn serialize(
        &self,
        topic: &str,
        headers: &mut Headers,
        value: &Change<V>,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        let mut out = Vec::new();
        for part in [&value.new_value, &value.old_value] {
            let bytes = match part {
                Some(v) => self.0.serialize(topic, headers, v)?,
                None => None,
            };
            match bytes {
                Some(b) => {
                    let len = i32::try_from(b.len()).map_err(|_| SerdeError::Custom {
                        topic: topic.to_string(),
                        message: "a table value over 2 GiB".to_string(),
                    })?;
                    out.extend_from_slice(&len.to_be_bytes());
                    out.extend_from_slice(&b);
                }
                None => out.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
        Ok(Some(out))
    }

    fn deserialize(
        &self,
        topic: &str,
        headers: &Headers,
        bytes: Option<&[u8]>,
    ) -> Result<Change<V>, SerdeError> {
        let malformed = || SerdeError::Custom {
            topic: topic.to_string(),
            message: "malformed table change on a repartition topic".to_string(),
        };
        let mut rest = bytes.ok_or_else(malformed)?;
        let mut parts = [None, None];
        for part in &mut parts {
            if rest.len() < 4 {
                return Err(malformed());
            }
            let (len, tail) = rest.split_at(4);
            let len = i32::from_be_bytes(len.try_into().map_err(|_| malformed())?);
            rest = tail;
            if len >= 0 {
                let len = len as usize;
                if rest.len() < len {
                    return Err(malformed());
                }
                let (value, tail) = rest.split_at(len);
                *part = Some(self.0.deserialize(topic, headers, Some(value))?);
                rest = tail;
            }
        }
        let [new_value, old_value] = parts;
        Ok(Change::new(new_value, old_value))
    }
}
