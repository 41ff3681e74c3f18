//! `StreamsBuilder`: the DSL's entry point (streams, tables, global tables).

use std::cell::RefCell;
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::Arc;

use kstreams_record::{DefaultSerde, Nullable, SharedSerde};

use crate::graph::{GlobalStoreNodes, SourceTopics};
use crate::handles::state::{BuilderState, SharedState};
use crate::materialized::StoreSpec;
use crate::topology::compile_pattern;
use crate::GlobalKTable;
use crate::GlobalStore;
use crate::KTable;
use crate::StoreType;
use crate::{Consumed, KStream, Materialized, Topology, TopologyError};

/// Builds a topology with the DSL: Kafka Streams' `StreamsBuilder`.
///
/// Operators never fail on the spot; the first mistake (a duplicate name,
/// say) is returned by [`StreamsBuilder::build`].
///
/// ```
/// use kstreams_dsl::StreamsBuilder;
///
/// let builder = StreamsBuilder::new();
/// builder
///     .stream::<String, String>("sentences")
///     .flat_map_values(|sentence| sentence.split(' ').map(str::to_owned).collect::<Vec<String>>())
///     .filter(|_, word| !word.is_empty())
///     .to("words");
/// let topology = builder.build().unwrap();
/// assert_eq!(topology.subtopology_count(), 1);
/// ```
pub struct StreamsBuilder {
    state: SharedState,
}

impl Default for StreamsBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl StreamsBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self {
            state: Rc::new(RefCell::new(BuilderState::new())),
        }
    }

    pub(crate) fn state(&self) -> SharedState {
        self.state.clone()
    }

    /// A stream of one topic, with the default serdes of `K` and `V`.
    ///
    /// # Example
    ///
    /// ```
    /// use kstreams_dsl::StreamsBuilder;
    /// use kstreams_record::StringSerde;
    /// use kstreams_runtime::TopologyTestDriver;
    ///
    /// let builder = StreamsBuilder::new();
    /// builder
    ///     .stream::<String, String>("words")
    ///     .map_values(|word| word.to_uppercase())
    ///     .to("shouted");
    /// let driver = TopologyTestDriver::new(builder.build()?)?;
    /// let words = driver.create_input_topic("words", StringSerde, StringSerde);
    /// let shouted = driver.create_output_topic("shouted", StringSerde, StringSerde);
    /// words.pipe_input("k".to_string(), "hello".to_string());
    /// assert_eq!(shouted.read_key_value(), ("k".to_string(), "HELLO".to_string()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stream<K, V>(&self, topic: &str) -> KStream<K, V>
    where
        K: DefaultSerde + Clone,
        V: DefaultSerde + Clone,
    {
        self.stream_with(topic, Consumed::default())
    }

    /// A stream of one topic, read as `consumed` says.
    pub fn stream_with<K: Clone + 'static, V: Clone + 'static>(
        &self,
        topic: &str,
        consumed: Consumed<K, V>,
    ) -> KStream<K, V> {
        self.stream_topics(&[topic], consumed)
    }

    /// One stream of several topics.
    pub fn stream_topics<K: Clone + 'static, V: Clone + 'static>(
        &self,
        topics: &[&str],
        consumed: Consumed<K, V>,
    ) -> KStream<K, V> {
        let topics = SourceTopics::Names(topics.iter().map(|t| t.to_string()).collect());
        self.add_source(Ok(topics), consumed)
    }

    /// One stream of every topic whose whole name matches `pattern`.
    pub fn stream_pattern<K: Clone + 'static, V: Clone + 'static>(
        &self,
        pattern: &str,
        consumed: Consumed<K, V>,
    ) -> KStream<K, V> {
        self.add_source(
            compile_pattern(pattern).map(SourceTopics::Pattern),
            consumed,
        )
    }

    fn add_source<K: Clone + 'static, V: Clone + 'static>(
        &self,
        topics: Result<SourceTopics, TopologyError>,
        consumed: Consumed<K, V>,
    ) -> KStream<K, V> {
        let mut state = self.state.borrow_mut();
        let name = state.name_or_generate(consumed.name, "KSTREAM-SOURCE-");
        if let Some(topics) = state.record(topics) {
            let added = state.topology.add_typed_source(
                name.clone(),
                topics,
                consumed.key_serde.clone(),
                consumed.value_serde.clone(),
                consumed.extractor,
            );
            state.record(added);
        }
        state
            .topology
            .graph
            .note_source_options(&name, consumed.bootstrap, consumed.offset_reset);
        drop(state);
        let mut stream = KStream::new(self.state.clone(), name);
        stream.key_serde = Some(consumed.key_serde);
        stream.value_serde = Some(consumed.value_serde);
        stream
    }

    /// Adds a state store that `process` operators can name.
    pub fn add_state_store(&self, builder: impl kstreams_state::StoreBuilder) -> &Self {
        let mut state = self.state.borrow_mut();
        let added = state.topology.add_state_store(builder, &[]).map(|_| ());
        state.record(added);
        self
    }

    /// The topology built so far, or the first error an operator made.
    pub fn build(self) -> Result<Topology, TopologyError> {
        let mut state = self.state.borrow_mut();
        if let Some(error) = state.take_error() {
            return Err(error);
        }
        Ok(std::mem::take(&mut state.topology))
    }
}

impl StreamsBuilder {
    /// A table of a topic, with the default serdes of `K` and `V`: each
    /// record is the key's new value, a null value deletes the key.
    ///
    /// # Example
    ///
    /// ```
    /// use kstreams_dsl::{Produced, StreamsBuilder};
    /// use kstreams_record::{I64Serde, Nullable, StringSerde};
    /// use kstreams_runtime::TopologyTestDriver;
    ///
    /// let builder = StreamsBuilder::new();
    /// // The latest price per product; its changes, deletions (tombstones)
    /// // included, go on as a stream.
    /// builder
    ///     .table::<String, i64>("prices")
    ///     .to_stream()
    ///     .to_with("price-changes", Produced::with(StringSerde, Nullable(I64Serde)));
    /// let driver = TopologyTestDriver::new(builder.build()?)?;
    /// let prices = driver.create_input_topic("prices", StringSerde, Nullable(I64Serde));
    /// let changes = driver.create_output_topic("price-changes", StringSerde, Nullable(I64Serde));
    /// prices.pipe_input("apple".to_string(), Some(3));
    /// prices.pipe_input("apple".to_string(), Some(4));
    /// prices.pipe_input("apple".to_string(), None);
    /// assert_eq!(changes.read_values_to_list(), vec![Some(3), Some(4), None]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
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
            s.topology.graph.note_source_options(
                &source,
                consumed.bootstrap,
                consumed.offset_reset,
            );
            (source, table_node)
        };
        let mut table = KTable::<K, V>::source::<Option<K>, Option<V>>(
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

impl StreamsBuilder {
    /// A global table of a topic with the default serdes of `K` and `V`.
    pub fn global_table<K, V>(&self, topic: &str) -> GlobalKTable<K, V>
    where
        K: DefaultSerde + Clone,
        V: DefaultSerde + Clone,
    {
        self.global_table_with(topic, Consumed::default(), Materialized::new())
    }

    /// A global table of a topic, read with `consumed`; `materialized` may
    /// name the store.
    pub fn global_table_with<K: Clone + 'static, V: Clone + 'static>(
        &self,
        topic: &str,
        consumed: Consumed<K, V>,
        materialized: Materialized<K, V>,
    ) -> GlobalKTable<K, V> {
        let state: SharedState = self.state();
        let mut s = state.borrow_mut();
        let name = match materialized.name {
            Some(name) => name,
            None => s.new_name(&format!("{topic}-STATE-STORE-")),
        };
        s.record(materialized.store_type.check_available(&name));
        // The source and table nodes of Kafka Streams' global topology:
        // `<name>-source` and `<name>` when `consumed` names them.
        let source = s.name_or_generate(
            consumed.name.as_ref().map(|n| format!("{n}-source")),
            "KSTREAM-SOURCE-",
        );
        let processor = s.name_or_generate(consumed.name.clone(), "KTABLE-SOURCE-");
        let position = s.topology.graph.nodes.len();
        s.topology.graph.global_stores.push(GlobalStoreNodes {
            source,
            processor,
            store: name.clone(),
            topic: topic.to_string(),
            position,
        });
        let store = Arc::new(GlobalStore::new(
            name,
            topic.to_string(),
            materialized.store_type == StoreType::RocksDb,
        ));
        s.topology.global_stores.push(store.clone());
        GlobalKTable {
            store,
            key_serde: consumed.key_serde,
            value_serde: consumed.value_serde,
            types: PhantomData,
        }
    }
}
