//! `KStream`: a typed handle on a node of the topology being built, and all
//! its operations but the joins (see [`joins`]).

mod async_ops;
mod joins;

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use kstreams_record::{DefaultSerde, Serde, SharedSerde};

use crate::fixed_key::{FixedKeyAdapter, FixedKeyProcessor};
use crate::graph::SourceTopics;
use crate::handles::state::SharedState;
use crate::handles::types::{BranchedKStream, KGroupedStream, KStream, KTable, SplitSpec};
use crate::materialized::StoreSpec;
use crate::nodes::SinkPartitioning;
use crate::operators::stateless::{
    DropNullKeys, Filter, FlatMap, FlatMapValues, Map, MapValues, PassThrough, Peek, Print,
    SelectKey, Split,
};
use crate::operators::table_source::{InputNulls, IsNull};
use crate::options::IntoName;
use crate::topology::SinkTopic;
use crate::{
    Grouped, Materialized, Named, Printed, Processor, Produced, Repartitioned, TopicNameExtractor,
    TopologyError,
};

impl<K: Clone + 'static, V: Clone + 'static> KStream<K, V> {
    pub(crate) fn new(state: SharedState, node: String) -> Self {
        Self {
            state,
            node,
            key_serde: None,
            value_serde: None,
            repartition_required: false,
            types: PhantomData,
        }
    }

    /// The same serdes and repartition need as `from` (an operator that
    /// changes neither key nor value).
    pub(crate) fn like(mut self, from: &KStream<K, V>) -> Self {
        self.key_serde = from.key_serde.clone();
        self.value_serde = from.value_serde.clone();
        self.repartition_required = from.repartition_required;
        self
    }

    /// Keys unchanged, values new: the key serde and repartition need stay.
    fn same_keys<V2: Clone + 'static>(&self, out: KStream<K, V2>) -> KStream<K, V2> {
        KStream {
            key_serde: self.key_serde.clone(),
            repartition_required: self.repartition_required,
            ..out
        }
    }

    /// Keys may have changed: a grouping downstream repartitions.
    fn new_keys<K2: Clone + 'static, V2: Clone + 'static>(out: KStream<K2, V2>) -> KStream<K2, V2> {
        KStream {
            repartition_required: true,
            ..out
        }
    }

    /// The name of the node this handle stands on.
    pub fn node_name(&self) -> &str {
        &self.node
    }

    /// Adds a processor under this stream's node.
    fn then<K2, V2, P>(
        &self,
        prefix: &str,
        named: Option<Named>,
        supplier: impl Fn() -> P + Send + Sync + 'static,
    ) -> KStream<K2, V2>
    where
        K2: Clone + 'static,
        V2: Clone + 'static,
        P: Processor<K, V, K2, V2>,
    {
        let mut state = self.state.borrow_mut();
        let name = state.name_or_generate(named.map(|n| n.0), prefix);
        self.add_named::<K2, V2, P>(&mut state, name, supplier, &[self.node.as_str()])
    }

    /// Like `then`, but a user's name draws no index: Kafka Streams'
    /// `process` and `processValues` are the exception to its rule.
    fn then_process<K2, V2, P>(
        &self,
        prefix: &str,
        named: Option<Named>,
        supplier: impl Fn() -> P + Send + Sync + 'static,
    ) -> KStream<K2, V2>
    where
        K2: Clone + 'static,
        V2: Clone + 'static,
        P: Processor<K, V, K2, V2>,
    {
        let mut state = self.state.borrow_mut();
        let name = match named {
            Some(named) => named.0,
            None => state.new_name(prefix),
        };
        self.add_named::<K2, V2, P>(&mut state, name, supplier, &[self.node.as_str()])
    }

    pub(crate) fn add_named<K2, V2, P>(
        &self,
        state: &mut crate::handles::state::BuilderState,
        name: String,
        supplier: impl Fn() -> P + Send + Sync + 'static,
        parents: &[&str],
    ) -> KStream<K2, V2>
    where
        K2: Clone + 'static,
        V2: Clone + 'static,
        P: Processor<K, V, K2, V2>,
    {
        let added = state.topology.add_typed_processor::<K, V, K2, V2, P>(
            name.clone(),
            Arc::new(supplier),
            parents,
        );
        state.record(added);
        KStream::new(self.state.clone(), name)
    }

    /// Keeps the records for which `predicate` holds.
    pub fn filter(
        &self,
        predicate: impl Fn(&K, &V) -> bool + Send + Sync + 'static,
    ) -> KStream<K, V> {
        self.filter_named(predicate, None)
    }

    /// [`KStream::filter`] with a processor name.
    pub fn filter_named(
        &self,
        predicate: impl Fn(&K, &V) -> bool + Send + Sync + 'static,
        named: impl IntoName,
    ) -> KStream<K, V> {
        let predicate = Arc::new(predicate);
        self.then("KSTREAM-FILTER-", named.into_name(), move || Filter {
            predicate: predicate.clone(),
            keep_when: true,
        })
        .like(self)
    }

    /// Drops the records for which `predicate` holds.
    pub fn filter_not(
        &self,
        predicate: impl Fn(&K, &V) -> bool + Send + Sync + 'static,
    ) -> KStream<K, V> {
        self.filter_not_named(predicate, None)
    }

    /// [`KStream::filter_not`] with a processor name.
    pub fn filter_not_named(
        &self,
        predicate: impl Fn(&K, &V) -> bool + Send + Sync + 'static,
        named: impl IntoName,
    ) -> KStream<K, V> {
        let predicate = Arc::new(predicate);
        self.then("KSTREAM-FILTER-", named.into_name(), move || Filter {
            predicate: predicate.clone(),
            keep_when: false,
        })
        .like(self)
    }

    /// A new key and value for each record.
    pub fn map<K2: Clone + 'static, V2: Clone + 'static>(
        &self,
        mapper: impl Fn(K, V) -> (K2, V2) + Send + Sync + 'static,
    ) -> KStream<K2, V2> {
        self.map_named(mapper, None)
    }

    /// [`KStream::map`] with a processor name.
    pub fn map_named<K2: Clone + 'static, V2: Clone + 'static>(
        &self,
        mapper: impl Fn(K, V) -> (K2, V2) + Send + Sync + 'static,
        named: impl IntoName,
    ) -> KStream<K2, V2> {
        let mapper = Arc::new(mapper);
        Self::new_keys(self.then("KSTREAM-MAP-", named.into_name(), move || Map {
            mapper: mapper.clone(),
        }))
    }

    /// A new value for each record; the key stays.
    pub fn map_values<V2: Clone + 'static>(
        &self,
        mapper: impl Fn(V) -> V2 + Send + Sync + 'static,
    ) -> KStream<K, V2> {
        self.map_values_with_key(move |_, v| mapper(v))
    }

    /// A new value computed from key and value; the key stays.
    pub fn map_values_with_key<V2: Clone + 'static>(
        &self,
        mapper: impl Fn(&K, V) -> V2 + Send + Sync + 'static,
    ) -> KStream<K, V2> {
        self.map_values_named(mapper, None)
    }

    /// [`KStream::map_values_with_key`] with a processor name.
    pub fn map_values_named<V2: Clone + 'static>(
        &self,
        mapper: impl Fn(&K, V) -> V2 + Send + Sync + 'static,
        named: impl IntoName,
    ) -> KStream<K, V2> {
        let mapper = Arc::new(mapper);
        self.same_keys(
            self.then("KSTREAM-MAPVALUES-", named.into_name(), move || MapValues {
                mapper: mapper.clone(),
            }),
        )
    }

    /// Zero or more records for each record.
    pub fn flat_map<K2: Clone + 'static, V2: Clone + 'static, I>(
        &self,
        mapper: impl Fn(K, V) -> I + Send + Sync + 'static,
    ) -> KStream<K2, V2>
    where
        I: IntoIterator<Item = (K2, V2)> + 'static,
    {
        self.flat_map_named(mapper, None)
    }

    /// [`KStream::flat_map`] with a processor name.
    pub fn flat_map_named<K2: Clone + 'static, V2: Clone + 'static, I>(
        &self,
        mapper: impl Fn(K, V) -> I + Send + Sync + 'static,
        named: impl IntoName,
    ) -> KStream<K2, V2>
    where
        I: IntoIterator<Item = (K2, V2)> + 'static,
    {
        let mapper = Arc::new(mapper);
        Self::new_keys(
            self.then("KSTREAM-FLATMAP-", named.into_name(), move || FlatMap {
                mapper: mapper.clone(),
            }),
        )
    }

    /// Zero or more values for each record, each under the record's key.
    pub fn flat_map_values<V2: Clone + 'static, I>(
        &self,
        mapper: impl Fn(V) -> I + Send + Sync + 'static,
    ) -> KStream<K, V2>
    where
        I: IntoIterator<Item = V2> + 'static,
    {
        self.flat_map_values_named(move |_, v| mapper(v), None)
    }

    /// [`KStream::flat_map_values`] with the key in view and a processor name.
    pub fn flat_map_values_named<V2: Clone + 'static, I>(
        &self,
        mapper: impl Fn(&K, V) -> I + Send + Sync + 'static,
        named: impl IntoName,
    ) -> KStream<K, V2>
    where
        I: IntoIterator<Item = V2> + 'static,
    {
        let mapper = Arc::new(mapper);
        self.same_keys(
            self.then("KSTREAM-FLATMAPVALUES-", named.into_name(), move || {
                FlatMapValues {
                    mapper: mapper.clone(),
                }
            }),
        )
    }

    /// A new key for each record, computed from key and value.
    pub fn select_key<K2: Clone + 'static>(
        &self,
        selector: impl Fn(&K, &V) -> K2 + Send + Sync + 'static,
    ) -> KStream<K2, V> {
        self.select_key_named(selector, None)
    }

    /// [`KStream::select_key`] with a processor name.
    pub fn select_key_named<K2: Clone + 'static>(
        &self,
        selector: impl Fn(&K, &V) -> K2 + Send + Sync + 'static,
        named: impl IntoName,
    ) -> KStream<K2, V> {
        let selector = Arc::new(selector);
        let out: KStream<K2, V> = self.then("KSTREAM-KEY-SELECT-", named.into_name(), move || {
            SelectKey {
                selector: selector.clone(),
            }
        });
        Self::new_keys(KStream {
            value_serde: self.value_serde.clone(),
            ..out
        })
    }

    /// Runs `action` on each record and passes it on unchanged.
    pub fn peek(&self, action: impl Fn(&K, &V) + Send + Sync + 'static) -> KStream<K, V> {
        self.peek_named(action, None)
    }

    /// [`KStream::peek`] with a processor name.
    pub fn peek_named(
        &self,
        action: impl Fn(&K, &V) + Send + Sync + 'static,
        named: impl IntoName,
    ) -> KStream<K, V> {
        let action = Arc::new(action);
        self.then("KSTREAM-PEEK-", named.into_name(), move || Peek {
            action: action.clone(),
            forward: true,
        })
        .like(self)
    }

    /// Runs `action` on each record; the stream ends here.
    pub fn foreach(&self, action: impl Fn(&K, &V) + Send + Sync + 'static) {
        self.foreach_named(action, None)
    }

    /// [`KStream::foreach`] with a processor name.
    pub fn foreach_named(
        &self,
        action: impl Fn(&K, &V) + Send + Sync + 'static,
        named: impl IntoName,
    ) {
        let action = Arc::new(action);
        let _: KStream<K, V> = self.then("KSTREAM-FOREACH-", named.into_name(), move || Peek {
            action: action.clone(),
            forward: false,
        });
    }

    /// Prints each record as `[label]: key, value`.
    pub fn print(&self, printed: Printed<K, V>) {
        let Printed {
            label,
            name,
            mapper,
            sink,
        } = printed;
        let _: KStream<K, V> = self.then("KSTREAM-PRINTER-", name.map(Named), move || Print {
            label: label.clone(),
            mapper: mapper.clone(),
            sink: sink.clone(),
        });
    }

    /// One stream of the records of both streams.
    pub fn merge(&self, other: &KStream<K, V>) -> KStream<K, V> {
        self.merge_named(other, None)
    }

    /// [`KStream::merge`] with a processor name.
    pub fn merge_named(&self, other: &KStream<K, V>, named: impl IntoName) -> KStream<K, V> {
        let mut state = self.state.borrow_mut();
        let name = state.name_or_generate(named.into_name().map(|n| n.0), "KSTREAM-MERGE-");
        let mut merged = self
            .add_named::<K, V, _>(
                &mut state,
                name,
                || PassThrough,
                &[self.node.as_str(), other.node.as_str()],
            )
            .like(self);
        merged.repartition_required |= other.repartition_required;
        merged.key_serde = merged.key_serde.or_else(|| other.key_serde.clone());
        merged.value_serde = merged.value_serde.or_else(|| other.value_serde.clone());
        merged
    }

    /// Splits the stream by predicates into named branches.
    pub fn split(&self) -> BranchedKStream<K, V> {
        self.split_named(None)
    }

    /// [`KStream::split`]; the name is the split node's and the prefix of
    /// its branches' names.
    pub fn split_named(&self, named: impl IntoName) -> BranchedKStream<K, V> {
        let mut state = self.state.borrow_mut();
        // The split node takes an index even when named, as in Kafka Streams.
        let generated = state.new_name("KSTREAM-BRANCH-");
        let name = named.into_name().map(|n| n.0).unwrap_or(generated);
        let branches: Arc<Mutex<SplitSpec<K, V>>> = Arc::default();
        let spec = branches.clone();
        let split: KStream<K, V> = self
            .add_named::<K, V, _>(
                &mut state,
                name.clone(),
                move || {
                    let spec = spec.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                    Split {
                        branches: spec.branches.clone(),
                        default_child: spec.default_child.clone(),
                    }
                },
                &[self.node.as_str()],
            )
            .like(self);
        BranchedKStream {
            split,
            prefix: name,
            spec: branches,
            next_index: 1,
            result: HashMap::new(),
        }
    }

    /// Writes to `topic` with the serdes the stream carries (from its
    /// source or the store it came from), else the default serdes of `K`
    /// and `V`.
    pub fn to(&self, topic: &str)
    where
        K: DefaultSerde,
        V: DefaultSerde,
    {
        let mut produced = Produced::default();
        if let Some(key_serde) = &self.key_serde {
            produced.key_serde = key_serde.clone();
        }
        if let Some(value_serde) = &self.value_serde {
            produced.value_serde = value_serde.clone();
        }
        self.to_with(topic, produced)
    }

    /// Writes to `topic` as `produced` says.
    pub fn to_with(&self, topic: &str, produced: Produced<K, V>) {
        self.add_sink(SinkTopic::Fixed(topic.to_string()), produced)
    }

    /// Writes each record to the topic `extractor` names for it.
    pub fn to_dynamic(&self, extractor: impl TopicNameExtractor<K, V>, produced: Produced<K, V>) {
        let description = extractor.description();
        self.add_sink(
            SinkTopic::Extractor(Arc::new(extractor), description),
            produced,
        )
    }

    fn add_sink(&self, topic: SinkTopic<K, V>, produced: Produced<K, V>) {
        let mut state = self.state.borrow_mut();
        let name = state.name_or_generate(produced.name, "KSTREAM-SINK-");
        let added = state.topology.add_typed_sink(
            name,
            topic,
            produced.key_serde,
            produced.value_serde,
            match produced.partitioner {
                Some(partitioner) => SinkPartitioning::Custom(partitioner),
                None => SinkPartitioning::BaseKeyOfWindows,
            },
            &[self.node.as_str()],
        );
        state.record(added);
    }

    /// Sends the stream through an internal topic,
    /// `<application.id>-<name>-repartition`, so that records are spread
    /// by their (new) key. Records with a null key are dropped.
    pub fn repartition(&self) -> KStream<K, V>
    where
        K: DefaultSerde,
        V: DefaultSerde,
    {
        self.repartition_with(Repartitioned::default())
    }

    /// [`KStream::repartition`] with serdes, name and partition count.
    pub fn repartition_with(&self, repartitioned: Repartitioned<K, V>) -> KStream<K, V> {
        let mut state = self.state.borrow_mut();
        let prefix = match repartitioned.name {
            Some(name) => name,
            None => state.new_name("KSTREAM-REPARTITION-"),
        };
        let partitioning = match repartitioned.partitioner {
            Some(partitioner) => SinkPartitioning::Custom(partitioner),
            None => SinkPartitioning::WholeKey,
        };
        let out = self.through_partitioned_topic(
            &mut state,
            prefix,
            repartitioned.key_serde,
            repartitioned.value_serde,
            partitioning,
        );
        if let Some(partitions) = repartitioned.partitions {
            // The topic the source just added reads.
            if let Some(topic) = state
                .topology
                .graph
                .upstream_topics(&out.node)
                .into_iter()
                .next()
            {
                state
                    .topology
                    .graph
                    .repartition_partitions
                    .insert(topic, partitions);
            }
        }
        out
    }

    /// Adds the null-key filter, sink and source of a repartition topic
    /// `<prefix>-repartition` under this stream and returns the stream read
    /// back. As in Kafka Streams, the three nodes draw an index each even
    /// when named; they are named after the topic unless the prefix is a
    /// generated name (`KSTREAM...-0123456789`).
    pub(crate) fn through_repartition_topic(
        &self,
        state: &mut crate::handles::state::BuilderState,
        prefix: String,
        key_serde: SharedSerde<K>,
        value_serde: SharedSerde<V>,
    ) -> KStream<K, V> {
        self.through_partitioned_topic(
            state,
            prefix,
            key_serde,
            value_serde,
            SinkPartitioning::WholeKey,
        )
    }

    /// [`KStream::through_repartition_topic`] with the sink's partitioning.
    fn through_partitioned_topic(
        &self,
        state: &mut crate::handles::state::BuilderState,
        prefix: String,
        key_serde: SharedSerde<K>,
        value_serde: SharedSerde<V>,
        partitioning: SinkPartitioning<K, V>,
    ) -> KStream<K, V> {
        let topic = if prefix.ends_with("-repartition") {
            prefix.clone()
        } else {
            format!("{prefix}-repartition")
        };
        let sink_generated = state.new_name("KSTREAM-SINK-");
        let filter_generated = state.new_name("KSTREAM-FILTER-");
        let source_generated = state.new_name("KSTREAM-SOURCE-");
        let (sink, filter, source) = if is_generated_name(&prefix) {
            (sink_generated, filter_generated, source_generated)
        } else {
            (
                format!("{topic}-sink"),
                format!("{topic}-filter"),
                format!("{topic}-source"),
            )
        };
        let null_check = key_serde.clone();
        let is_null: Arc<dyn Fn(&K) -> bool + Send + Sync> =
            Arc::new(move |k: &K| null_check.is_null(k));
        let dropped: KStream<K, V> = self.add_named::<K, V, _>(
            state,
            filter.clone(),
            move || DropNullKeys {
                is_null: is_null.clone(),
            },
            &[self.node.as_str()],
        );
        let added = state.topology.add_typed_sink(
            sink,
            SinkTopic::Fixed(topic.clone()),
            key_serde.clone(),
            value_serde.clone(),
            partitioning,
            &[dropped.node.as_str()],
        );
        state.record(added);
        state.topology.mark_internal_topic(&topic);
        let added = state.topology.add_typed_source(
            source.clone(),
            SourceTopics::Names(vec![topic]),
            key_serde.clone(),
            value_serde.clone(),
            None,
        );
        state.record(added);
        let mut out = KStream::new(self.state.clone(), source);
        out.key_serde = Some(key_serde);
        out.value_serde = Some(value_serde);
        out
    }

    /// Runs a user [`Processor`] on each record; `stores` are the state
    /// stores (added to the builder) it may use.
    ///
    /// # Example
    ///
    /// ```
    /// use kstreams_dsl::{Processor, ProcessorContext, ProcessorError, StreamsBuilder};
    /// use kstreams_record::{I64Serde, Record, StringSerde};
    /// use kstreams_runtime::TopologyTestDriver;
    ///
    /// /// Forwards a reading only when it beats every one before it.
    /// struct NewHighs {
    ///     high: Option<i64>,
    /// }
    ///
    /// impl Processor<String, i64, String, i64> for NewHighs {
    ///     fn process(
    ///         &mut self,
    ///         ctx: &mut ProcessorContext<'_, String, i64>,
    ///         record: Record<String, i64>,
    ///     ) -> Result<(), ProcessorError> {
    ///         if self.high.is_none_or(|high| record.value > high) {
    ///             self.high = Some(record.value);
    ///             ctx.forward(record)?;
    ///         }
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let builder = StreamsBuilder::new();
    /// builder
    ///     .stream::<String, i64>("temperatures")
    ///     .process(|| NewHighs { high: None }, &[])
    ///     .to("new-highs");
    /// let driver = TopologyTestDriver::new(builder.build()?)?;
    /// let readings = driver.create_input_topic("temperatures", StringSerde, I64Serde);
    /// let highs = driver.create_output_topic("new-highs", StringSerde, I64Serde);
    /// for reading in [3, 1, 5, 4] {
    ///     readings.pipe_input("roof".to_string(), reading);
    /// }
    /// assert_eq!(highs.read_values_to_list(), vec![3, 5]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn process<K2: Clone + 'static, V2: Clone + 'static, P: Processor<K, V, K2, V2>>(
        &self,
        supplier: impl Fn() -> P + Send + Sync + 'static,
        stores: &[&str],
    ) -> KStream<K2, V2> {
        self.process_named(supplier, stores, None)
    }

    /// [`KStream::process`] with a processor name.
    pub fn process_named<K2: Clone + 'static, V2: Clone + 'static, P: Processor<K, V, K2, V2>>(
        &self,
        supplier: impl Fn() -> P + Send + Sync + 'static,
        stores: &[&str],
        named: impl IntoName,
    ) -> KStream<K2, V2> {
        let out = self.then_process("KSTREAM-PROCESSOR-", named.into_name(), supplier);
        self.connect_stores(&out.node, stores);
        Self::new_keys(out)
    }

    /// Runs a user [`FixedKeyProcessor`] on each record: values may change,
    /// keys may not.
    pub fn process_values<V2: Clone + 'static, P: FixedKeyProcessor<K, V, V2>>(
        &self,
        supplier: impl Fn() -> P + Send + Sync + 'static,
        stores: &[&str],
    ) -> KStream<K, V2> {
        self.process_values_named(supplier, stores, None)
    }

    /// [`KStream::process_values`] with a processor name.
    pub fn process_values_named<V2: Clone + 'static, P: FixedKeyProcessor<K, V, V2>>(
        &self,
        supplier: impl Fn() -> P + Send + Sync + 'static,
        stores: &[&str],
        named: impl IntoName,
    ) -> KStream<K, V2> {
        let out = self.then_process("KSTREAM-PROCESSVALUES-", named.into_name(), move || {
            FixedKeyAdapter(supplier())
        });
        self.connect_stores(&out.node, stores);
        self.same_keys(out)
    }

    fn connect_stores(&self, processor: &str, stores: &[&str]) {
        if stores.is_empty() {
            return;
        }
        let mut state = self.state.borrow_mut();
        let connected = state
            .topology
            .connect_processor_and_state_stores(processor, stores)
            .map(|_| ());
        state.record(connected);
    }
}

/// Whether `name` is one the builder generated (`KSTREAM...-` and ten
/// digits), as Kafka Streams tests repartition prefixes.
pub(crate) fn is_generated_name(name: &str) -> bool {
    let Some((head, digits)) = name.rsplit_once('-') else {
        return false;
    };
    name.starts_with("KSTREAM")
        && head.len() >= 7
        && digits.len() == 10
        && digits.bytes().all(|b| b.is_ascii_digit())
}

impl<K: Clone + 'static, V: Clone + 'static> KStream<K, V> {
    /// Groups the records by their key for an aggregation. If an operator
    /// upstream may have changed the keys, the aggregation first sends the
    /// records through a repartition topic.
    ///
    /// # Example
    ///
    /// ```
    /// use std::collections::HashMap;
    ///
    /// use kstreams_dsl::{Produced, StreamsBuilder};
    /// use kstreams_record::{I64Serde, Nullable, StringSerde};
    /// use kstreams_runtime::TopologyTestDriver;
    ///
    /// let builder = StreamsBuilder::new();
    /// builder
    ///     .stream::<String, i64>("payments")
    ///     .group_by_key()
    ///     .reduce(|total, amount| total + amount)
    ///     .to_stream()
    ///     .to_with("totals", Produced::with(StringSerde, Nullable(I64Serde)));
    /// let driver = TopologyTestDriver::new(builder.build()?)?;
    /// let payments = driver.create_input_topic("payments", StringSerde, I64Serde);
    /// let totals = driver.create_output_topic("totals", StringSerde, Nullable(I64Serde));
    /// payments.pipe_input("alice".to_string(), 5);
    /// payments.pipe_input("bob".to_string(), 2);
    /// payments.pipe_input("alice".to_string(), 10);
    /// assert_eq!(
    ///     totals.read_key_values_to_map(),
    ///     HashMap::from([("alice".to_string(), Some(15)), ("bob".to_string(), Some(2))])
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn group_by_key(&self) -> KGroupedStream<K, V> {
        self.group_by_key_with(Grouped::default())
    }

    /// [`KStream::group_by_key`] with serdes and a name for the repartition
    /// topic.
    pub fn group_by_key_with(&self, grouped: Grouped<K, V>) -> KGroupedStream<K, V> {
        KGroupedStream {
            key_serde: grouped.key_serde.or_else(|| self.key_serde.clone()),
            value_serde: grouped.value_serde.or_else(|| self.value_serde.clone()),
            repartition_name: grouped.name,
            repartition_required: self.repartition_required,
            stream: self.clone(),
        }
    }

    /// Groups the records by a new key (always through a repartition
    /// topic); `K2` needs a default serde.
    ///
    /// # Example
    ///
    /// ```
    /// use kstreams_dsl::{Produced, StreamsBuilder};
    /// use kstreams_record::{I64Serde, Nullable, StringSerde};
    /// use kstreams_runtime::TopologyTestDriver;
    ///
    /// let builder = StreamsBuilder::new();
    /// builder
    ///     .stream::<String, String>("lines")
    ///     .flat_map_values(|line| line.split_whitespace().map(str::to_string).collect::<Vec<_>>())
    ///     .group_by(|_, word| word.clone())
    ///     .count()
    ///     .to_stream()
    ///     .to_with("word-counts", Produced::with(StringSerde, Nullable(I64Serde)));
    /// let driver = TopologyTestDriver::new(builder.build()?)?;
    /// let lines = driver.create_input_topic("lines", StringSerde, StringSerde);
    /// let counts = driver.create_output_topic("word-counts", StringSerde, Nullable(I64Serde));
    /// lines.pipe_input("line-1".to_string(), "to be or not to be".to_string());
    /// let counts = counts.read_key_values_to_map();
    /// assert_eq!(counts["to"], Some(2));
    /// assert_eq!(counts["be"], Some(2));
    /// assert_eq!(counts["not"], Some(1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn group_by<K2: DefaultSerde + Clone>(
        &self,
        selector: impl Fn(&K, &V) -> K2 + Send + Sync + 'static,
    ) -> KGroupedStream<K2, V> {
        self.group_by_with(
            selector,
            Grouped::default().with_key_serde(K2::default_serde()),
        )
    }

    /// [`KStream::group_by`] with serdes and a name for the repartition
    /// topic.
    pub fn group_by_with<K2: Clone + 'static>(
        &self,
        selector: impl Fn(&K, &V) -> K2 + Send + Sync + 'static,
        grouped: Grouped<K2, V>,
    ) -> KGroupedStream<K2, V> {
        // Kafka Streams names the key selection after the grouping.
        let selected = self.select_key_named(selector, grouped.name.clone().map(crate::Named));
        KGroupedStream {
            key_serde: grouped.key_serde,
            value_serde: grouped.value_serde.or_else(|| self.value_serde.clone()),
            repartition_name: grouped.name,
            repartition_required: true,
            stream: selected,
        }
    }
}

impl<K: Clone + 'static, V: Clone + 'static> KStream<K, V> {
    /// This stream as a table: each record is an update of its key, as
    /// Kafka Streams' `toTable()`. A record whose value is a null (a value
    /// the stream's value serde writes as null: `None` of a
    /// [`kstreams_record::Nullable`] serde) deletes its key; one whose key
    /// is a null is dropped (and counted in the dropped records).
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
        // Kafka's nulls, as the stream's serdes (else the store's, else
        // the built-in ones) write them: a null key is dropped and
        // counted, a null value deletes its key, as Kafka Streams'
        // KTableSource does.
        let (spec_key_serde, spec_value_serde) = match &spec {
            Ok(spec) => (Some(spec.key_serde.clone()), Some(spec.value_serde.clone())),
            Err(_) => (None, None),
        };
        let key_serde = self
            .key_serde
            .clone()
            .or(spec_key_serde)
            .or_else(kstreams_record::builtin_serde::<K>);
        let value_serde = self
            .value_serde
            .clone()
            .or(spec_value_serde)
            .or_else(kstreams_record::builtin_serde::<V>);
        let nulls = InputNulls {
            key: key_serde.map(|serde| Arc::new(move |k: &K| serde.is_null(k)) as IsNull<K>),
            value: value_serde.map(|serde| Arc::new(move |v: &V| serde.is_null(v)) as IsNull<V>),
        };
        let mut table = KTable::<K, V>::source_with_nulls::<K, V>(
            &self.state,
            &parent,
            name,
            spec,
            named_store,
            (Some, Some),
            nulls,
        );
        if table.key_serde.is_none() {
            table.key_serde = self.key_serde.clone();
        }
        if table.value_serde.is_none() {
            table.value_serde = self.value_serde.clone();
        }
        table
    }
}
