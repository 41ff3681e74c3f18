//! `Topology`: the Processor API's graph builder and what the runtime runs.

use std::any::Any;
use std::future::Future;
use std::hash::Hash;
use std::rc::Rc;
use std::sync::Arc;

use kstreams_record::{Serde, SharedSerde};
use kstreams_state::StoreBuilder;
use kstreams_time::TimestampExtractor;

use crate::async_processing::AsyncOptions;
use crate::describe::TopologyDescription;
use crate::forwarding::{Input, Outputs};
use crate::graph::{
    EdgeType, NodeKind, ProcessorFactory, SinkFactory, SinkTopicDescription, SourceFactory,
    SourceTopics, TopicPattern, TopologyGraph,
};
use crate::java_order;
use crate::nodes::SharedExtractor;
use crate::nodes::TopicNameExtractor;
use crate::nodes::{NodeHandle, ProcessorNode, SinkNode, SinkPartitioning, SinkTarget, SourceNode};
use crate::operators::async_call::{async_node_factory, records_call};
use crate::partitioner::StreamPartitioner;
use crate::{Processor, ProcessorError, TopologyError};

/// A graph of sources, processors, sinks and stores: Kafka Streams'
/// `Topology`. Build one with the Processor API methods here, or with
/// [`crate::StreamsBuilder`], and hand it to the runtime or to the
/// `TopologyTestDriver`.
///
/// Edges are typed: a processor declares the key and value types it takes,
/// and adding it under a parent that forwards other types fails here, at
/// build time, naming both.
#[derive(Default)]
pub struct Topology {
    pub(crate) graph: TopologyGraph,
    /// Global tables' stores, fed by the global thread, read by every task.
    pub(crate) global_stores: Vec<Arc<crate::GlobalStore>>,
}

impl std::fmt::Debug for Topology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.describe())
    }
}

impl Topology {
    /// An empty topology.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a source reading `topics`, deserializing with the given serdes.
    pub fn add_source<K: Clone + 'static, V: Clone + 'static>(
        &mut self,
        name: &str,
        topics: &[&str],
        key_serde: impl Serde<K>,
        value_serde: impl Serde<V>,
    ) -> Result<&mut Self, TopologyError> {
        let topics = SourceTopics::Names(topics.iter().map(|t| t.to_string()).collect());
        self.add_typed_source(
            name.to_string(),
            topics,
            Arc::new(key_serde),
            Arc::new(value_serde),
            None,
        )?;
        Ok(self)
    }

    /// [`Topology::add_source`] starting partitions without a committed
    /// offset by `policy` instead of the application's `auto.offset.reset`
    /// (Kafka Streams' `addSource(AutoOffsetReset, ...)`).
    pub fn add_source_with_offset_reset<K: Clone + 'static, V: Clone + 'static>(
        &mut self,
        policy: crate::AutoOffsetReset,
        name: &str,
        topics: &[&str],
        key_serde: impl Serde<K>,
        value_serde: impl Serde<V>,
    ) -> Result<&mut Self, TopologyError> {
        self.add_source(name, topics, key_serde, value_serde)?;
        self.graph.offset_resets.insert(name.to_string(), policy);
        Ok(self)
    }

    /// Adds a source reading every topic whose whole name matches `pattern`.
    pub fn add_pattern_source<K: Clone + 'static, V: Clone + 'static>(
        &mut self,
        name: &str,
        pattern: &str,
        key_serde: impl Serde<K>,
        value_serde: impl Serde<V>,
    ) -> Result<&mut Self, TopologyError> {
        let topics = SourceTopics::Pattern(compile_pattern(pattern)?);
        self.add_typed_source(
            name.to_string(),
            topics,
            Arc::new(key_serde),
            Arc::new(value_serde),
            None,
        )?;
        Ok(self)
    }

    /// Adds a processor under `parents`; `supplier` makes one instance per
    /// task.
    pub fn add_processor<KIn, VIn, KOut, VOut, P>(
        &mut self,
        name: &str,
        supplier: impl Fn() -> P + Send + Sync + 'static,
        parents: &[&str],
    ) -> Result<&mut Self, TopologyError>
    where
        KIn: 'static,
        VIn: 'static,
        KOut: Clone + 'static,
        VOut: Clone + 'static,
        P: Processor<KIn, VIn, KOut, VOut>,
    {
        self.add_typed_processor::<KIn, VIn, KOut, VOut, P>(
            name.to_string(),
            Arc::new(supplier),
            parents,
        )?;
        Ok(self)
    }

    /// Adds an async processor under `parents`: each record's `call` runs on
    /// the application's tokio runtime while the stream thread goes on, and
    /// the records it returns are forwarded to this node's children when it
    /// finishes (with the input's timestamp and headers). The Processor-API
    /// form of `KStream::process_async`: records of one key are called in
    /// input order, different keys at the same time up to the in-flight
    /// bounds; failures after `options`' retries go to the processing
    /// exception handler; offsets are committed only past finished records.
    ///
    /// ```
    /// use kstreams_dsl::{AsyncOptions, Topology};
    /// use kstreams_record::StringSerde;
    ///
    /// let mut topology = Topology::new();
    /// topology
    ///     .add_source("orders", &["orders"], StringSerde, StringSerde)?
    ///     .add_async_processor(
    ///         "enrich",
    ///         |key: String, order: String| async move {
    ///             Ok::<_, std::io::Error>(vec![(key, order.to_uppercase())])
    ///         },
    ///         AsyncOptions::new(),
    ///         &["orders"],
    ///     )?
    ///     .add_sink("enriched", "enriched", StringSerde, StringSerde, &["enrich"])?;
    /// # Ok::<(), kstreams_dsl::TopologyError>(())
    /// ```
    pub fn add_async_processor<KIn, VIn, KOut, VOut, F, Fut, E>(
        &mut self,
        name: &str,
        call: F,
        options: AsyncOptions,
        parents: &[&str],
    ) -> Result<&mut Self, TopologyError>
    where
        KIn: Clone + Hash + Eq + Send + 'static,
        VIn: Clone + Send + 'static,
        KOut: Clone + Send + 'static,
        VOut: Clone + Send + 'static,
        F: Fn(KIn, VIn) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<(KOut, VOut)>, E>> + Send + 'static,
        E: Into<ProcessorError> + 'static,
    {
        let factory = async_node_factory(records_call(call), options);
        self.graph.add_node(
            name.to_string(),
            NodeKind::Processor { factory },
            parents,
            Some(EdgeType::of::<KIn, VIn>()),
            Some(EdgeType::of::<KOut, VOut>()),
        )?;
        Ok(self)
    }

    /// Adds a sink writing to `topic` under `parents`.
    pub fn add_sink<K: 'static, V: 'static>(
        &mut self,
        name: &str,
        topic: &str,
        key_serde: impl Serde<K>,
        value_serde: impl Serde<V>,
        parents: &[&str],
    ) -> Result<&mut Self, TopologyError> {
        self.add_typed_sink(
            name.to_string(),
            SinkTopic::Fixed(topic.to_string()),
            Arc::new(key_serde),
            Arc::new(value_serde),
            SinkPartitioning::WholeKey,
            parents,
        )?;
        Ok(self)
    }

    /// [`Topology::add_sink`] with the application's partitioner choosing
    /// each record's partitions (Kafka Streams' `addSink` with a
    /// `StreamPartitioner`).
    pub fn add_sink_with_partitioner<K: 'static, V: 'static>(
        &mut self,
        name: &str,
        topic: &str,
        key_serde: impl Serde<K>,
        value_serde: impl Serde<V>,
        partitioner: impl StreamPartitioner<K, V>,
        parents: &[&str],
    ) -> Result<&mut Self, TopologyError> {
        self.add_typed_sink(
            name.to_string(),
            SinkTopic::Fixed(topic.to_string()),
            Arc::new(key_serde),
            Arc::new(value_serde),
            SinkPartitioning::Custom(Arc::new(partitioner)),
            parents,
        )?;
        Ok(self)
    }

    /// Adds a sink whose topic `extractor` chooses per record.
    pub fn add_sink_with_extractor<K: 'static, V: 'static>(
        &mut self,
        name: &str,
        extractor: impl TopicNameExtractor<K, V>,
        key_serde: impl Serde<K>,
        value_serde: impl Serde<V>,
        parents: &[&str],
    ) -> Result<&mut Self, TopologyError> {
        let description = extractor.description();
        self.add_typed_sink(
            name.to_string(),
            SinkTopic::Extractor(Arc::new(extractor), description),
            Arc::new(key_serde),
            Arc::new(value_serde),
            SinkPartitioning::WholeKey,
            parents,
        )?;
        Ok(self)
    }

    /// Adds a state store, connected to `processors` (possibly none yet).
    pub fn add_state_store(
        &mut self,
        builder: impl StoreBuilder,
        processors: &[&str],
    ) -> Result<&mut Self, TopologyError> {
        self.graph.add_store(Arc::new(builder), processors)?;
        Ok(self)
    }

    /// Gives `processor` access to stores added before.
    pub fn connect_processor_and_state_stores(
        &mut self,
        processor: &str,
        stores: &[&str],
    ) -> Result<&mut Self, TopologyError> {
        self.graph.connect(&[processor], stores)?;
        Ok(self)
    }

    /// The topology as Kafka Streams describes it.
    pub fn describe(&self) -> TopologyDescription {
        TopologyDescription::of(&self.graph)
    }

    /// How many sub-topologies (and so tasks per partition) there are.
    pub fn subtopology_count(&self) -> usize {
        self.graph.subtopologies().len()
    }

    /// The stream sub-topologies' numbers as Kafka Streams gives them (and
    /// describe() prints them): global stores are numbered among them, so
    /// the numbers may skip. Task ids are `<number>_<partition>`.
    pub fn subtopology_ids(&self) -> Vec<u32> {
        self.graph.subtopology_ids()
    }

    /// The position in [`TopologyGraph::subtopologies`] of sub-topology
    /// number `id`.
    pub(crate) fn subtopology_index(&self, id: u32) -> Option<usize> {
        self.graph.subtopology_ids().iter().position(|&i| i == id)
    }

    /// The topics each sub-topology reads, with internal topics prefixed by
    /// the application id; pattern sources are listed apart.
    pub fn source_topics(&self, application_id: &str) -> Vec<SubtopologySources> {
        let ids = self.graph.subtopology_ids();
        self.graph
            .subtopologies()
            .iter()
            .zip(ids)
            .map(|(members, id)| {
                let mut sources = SubtopologySources {
                    id,
                    ..SubtopologySources::default()
                };
                for &id in members {
                    if let NodeKind::Source { topics, .. } = &self.graph.nodes[id].kind {
                        match topics {
                            SourceTopics::Names(names) => {
                                sources.topics.extend(names.iter().map(|t| {
                                    crate::graph::resolve_topic(&self.graph, application_id, t)
                                }))
                            }
                            SourceTopics::Pattern(p) => sources.patterns.push(p.clone()),
                        }
                    }
                }
                sources
            })
            .collect()
    }

    /// Whether the tasks of sub-topology `id` have state stores (and so a
    /// state directory).
    pub fn subtopology_has_stores(&self, id: u32) -> bool {
        let Some(index) = self.subtopology_index(id) else {
            return false;
        };
        self.graph
            .subtopologies()
            .get(index)
            .is_some_and(|members| {
                members
                    .iter()
                    .any(|&n| !self.graph.nodes[n].stores.is_empty())
            })
    }

    /// The sub-topology whose tasks hold state store `store` (one instance
    /// per task), or `None` when no stream processor uses a store of that
    /// name (a global store included): where interactive queries look for
    /// it.
    pub fn store_subtopology(&self, store: &str) -> Option<u32> {
        self.store_subtopologies().remove(store)
    }

    /// Every state store of the stream sub-topologies (global stores
    /// aside), with the sub-topology whose tasks hold it.
    pub fn store_subtopologies(&self) -> std::collections::BTreeMap<String, u32> {
        let ids = self.graph.subtopology_ids();
        let mut stores = std::collections::BTreeMap::new();
        for (members, id) in self.graph.subtopologies().iter().zip(ids) {
            for &n in members {
                for store in &self.graph.nodes[n].stores {
                    stores.entry(store.clone()).or_insert(id);
                }
            }
        }
        stores
    }

    /// The changelog topics of the logged stores: for each, the
    /// sub-topology that owns the store, the store name, the topic name
    /// `<application.id>-<store>-changelog` and its topic configs.
    pub fn changelog_topics(&self, application_id: &str) -> Vec<ChangelogTopic> {
        let mut out = Vec::new();
        let ids = self.graph.subtopology_ids();
        for (members, subtopology) in self.graph.subtopologies().iter().zip(ids) {
            let mut seen = std::collections::BTreeSet::new();
            for &id in members {
                for store in &self.graph.nodes[id].stores {
                    let builder = &self.graph.stores[store].builder;
                    if builder.logging_enabled() && seen.insert(store.clone()) {
                        out.push(ChangelogTopic {
                            subtopology,
                            store: store.clone(),
                            topic: kstreams_state::changelog_topic_name(application_id, store),
                            config: builder.log_config(),
                            windowed_retention: builder.windowed_changelog_retention(),
                            restore_within_retention: builder.restore_within_retention(),
                        });
                    }
                }
            }
        }
        out
    }

    /// The offset reset policy of the source reading `topic`, if it has one
    /// of its own (else the application's `auto.offset.reset` applies).
    pub fn offset_reset_policy(
        &self,
        application_id: &str,
        topic: &str,
    ) -> Option<crate::AutoOffsetReset> {
        self.graph
            .offset_resets
            .iter()
            .find_map(|(source, policy)| {
                let id = *self.graph.by_name.get(source)?;
                let NodeKind::Source { topics, .. } = &self.graph.nodes[id].kind else {
                    return None;
                };
                let reads = match topics {
                    SourceTopics::Names(names) => names.iter().any(|t| {
                        crate::graph::resolve_topic(&self.graph, application_id, t) == topic
                    }),
                    SourceTopics::Pattern(pattern) => pattern.regex.is_match(topic),
                };
                reads.then_some(*policy)
            })
    }

    /// Topics whose partitions a task reads to the end offset seen at
    /// assignment before processing its other partitions (internal ones
    /// with the application id prefix).
    pub fn bootstrap_topics(&self, application_id: &str) -> Vec<String> {
        self.graph
            .bootstrap_topics
            .iter()
            .map(|t| crate::graph::resolve_topic(&self.graph, application_id, t))
            .collect()
    }

    /// Groups of topics (internal ones with the application id prefix)
    /// whose partitions meet in one task: the sides of a join, the inputs
    /// of a cogroup. Each group needs one partition count.
    pub fn copartition_groups(&self, application_id: &str) -> Vec<Vec<String>> {
        self.graph
            .copartition_groups
            .iter()
            .map(|group| {
                group
                    .iter()
                    .map(|t| crate::graph::resolve_topic(&self.graph, application_id, t))
                    .collect()
            })
            .collect()
    }

    /// [`Topology::copartition_groups`] in the order Kafka Streams hands
    /// them to the streams group protocol (`InternalTopologyBuilder#
    /// copartitionGroups`): a `HashSet` of `HashSet`s of topics, each
    /// group's topics added in the `HashSet` order of the source nodes that
    /// read them. The heartbeat carries them as lists, and the broker
    /// refuses a member whose topology differs from the first member's, in
    /// order too.
    pub fn copartition_groups_as_registered(&self, application_id: &str) -> Vec<Vec<String>> {
        let node_of = |topic: &str| {
            self.graph.nodes.iter().find_map(|def| match &def.kind {
                NodeKind::Source {
                    topics: crate::graph::SourceTopics::Names(names),
                    ..
                } if names.iter().any(|n| n == topic) => Some(def.name.clone()),
                _ => None,
            })
        };
        let mut topic_count = 0;
        let groups: Vec<Vec<String>> = self
            .graph
            .copartition_groups
            .iter()
            .map(|group| {
                let mut nodes: Vec<String> = Vec::new();
                for topic in group {
                    let node = node_of(topic).unwrap_or_default();
                    if !nodes.contains(&node) {
                        nodes.push(node);
                    }
                }
                let added: Vec<String> = java_order::hash_set_order(&nodes)
                    .iter()
                    .flat_map(|node| {
                        group
                            .iter()
                            .filter(move |t| node_of(t).unwrap_or_default() == *node)
                    })
                    .map(|t| crate::graph::resolve_topic(&self.graph, application_id, t))
                    .collect();
                topic_count += added.len();
                java_order::hash_order(&added, java_order::grown_capacity(added.len()))
            })
            .collect();
        java_order::hash_set_of_sets_order(groups, topic_count)
    }

    /// Repartition topics (with the application id prefix) whose partition
    /// count the user set with `Repartitioned::with_partitions`.
    pub fn repartition_partitions(&self, application_id: &str) -> Vec<(String, i32)> {
        self.graph
            .repartition_partitions
            .iter()
            .map(|(t, n)| (format!("{application_id}-{t}"), *n))
            .collect()
    }

    /// The internal topics (with the application id prefix) and the
    /// sub-topology that writes each.
    pub fn internal_topic_writers(&self, application_id: &str) -> Vec<(String, u32)> {
        let mut out = Vec::new();
        let ids = self.graph.subtopology_ids();
        for (members, subtopology) in self.graph.subtopologies().iter().zip(ids) {
            for &id in members {
                if let NodeKind::Sink {
                    topic: SinkTopicDescription::Topic(topic),
                    ..
                } = &self.graph.nodes[id].kind
                {
                    if self.graph.internal_topics.contains(topic) {
                        out.push((format!("{application_id}-{topic}"), subtopology));
                    }
                }
            }
        }
        out
    }

    /// The stores of the global tables, each with the topic it is read from.
    pub fn global_stores(&self) -> &[Arc<crate::GlobalStore>] {
        &self.global_stores
    }

    /// Internal (repartition) topic names, without the application id.
    pub fn internal_topics(&self) -> impl Iterator<Item = &str> {
        self.graph.internal_topics.iter().map(String::as_str)
    }

    pub(crate) fn add_typed_source<K: Clone + 'static, V: Clone + 'static>(
        &mut self,
        name: String,
        topics: SourceTopics,
        key_serde: SharedSerde<K>,
        value_serde: SharedSerde<V>,
        extractor: Option<Arc<dyn TimestampExtractor>>,
    ) -> Result<usize, TopologyError> {
        let factory: SourceFactory = Arc::new(move |info, children| {
            Ok(Rc::new(SourceNode {
                info,
                key_serde: key_serde.clone(),
                value_serde: value_serde.clone(),
                extractor: extractor.clone(),
                outputs: Outputs::<K, V>::from_children(children)?,
            }))
        });
        self.graph.add_node(
            name,
            NodeKind::Source { topics, factory },
            &[],
            None,
            Some(EdgeType::of::<K, V>()),
        )
    }

    pub(crate) fn add_typed_processor<KIn, VIn, KOut, VOut, P>(
        &mut self,
        name: String,
        supplier: Arc<dyn Fn() -> P + Send + Sync>,
        parents: &[&str],
    ) -> Result<usize, TopologyError>
    where
        KIn: 'static,
        VIn: 'static,
        KOut: Clone + 'static,
        VOut: Clone + 'static,
        P: Processor<KIn, VIn, KOut, VOut>,
    {
        let factory: ProcessorFactory = Arc::new(move |info, children| {
            let outputs = Outputs::<KOut, VOut>::from_children(children)?;
            let node = Rc::new(ProcessorNode::<P, KIn, VIn, KOut, VOut>::new(
                info,
                supplier(),
                outputs,
            ));
            let input: Rc<dyn Input<KIn, VIn>> = node.clone();
            let handle: Rc<dyn NodeHandle> = node;
            Ok((Box::new(input) as Box<dyn Any>, handle))
        });
        self.graph.add_node(
            name,
            NodeKind::Processor { factory },
            parents,
            Some(EdgeType::of::<KIn, VIn>()),
            Some(EdgeType::of::<KOut, VOut>()),
        )
    }

    pub(crate) fn add_typed_sink<K: 'static, V: 'static>(
        &mut self,
        name: String,
        topic: SinkTopic<K, V>,
        key_serde: SharedSerde<K>,
        value_serde: SharedSerde<V>,
        partitioning: SinkPartitioning<K, V>,
        parents: &[&str],
    ) -> Result<usize, TopologyError> {
        let description = match &topic {
            SinkTopic::Fixed(t) => SinkTopicDescription::Topic(t.clone()),
            SinkTopic::Extractor(_, d) => SinkTopicDescription::Extractor(d.clone()),
        };
        let factory: SinkFactory = Arc::new(move |info, resolve| {
            let target = match &topic {
                SinkTopic::Fixed(t) => SinkTarget::Topic(resolve(t).into()),
                SinkTopic::Extractor(e, _) => SinkTarget::Extractor(e.clone()),
            };
            let input: Rc<dyn Input<K, V>> = Rc::new(SinkNode {
                info,
                target,
                key_serde: key_serde.clone(),
                value_serde: value_serde.clone(),
                partitioning: partitioning.clone(),
            });
            Box::new(input) as Box<dyn Any>
        });
        self.graph.add_node(
            name,
            NodeKind::Sink {
                topic: description,
                factory,
            },
            parents,
            Some(EdgeType::of::<K, V>()),
            None,
        )
    }

    pub(crate) fn mark_internal_topic(&mut self, topic: &str) {
        self.graph.internal_topics.insert(topic.to_string());
    }
}

/// What a sink writes to, before it is built.
pub(crate) enum SinkTopic<K, V> {
    Fixed(String),
    Extractor(SharedExtractor<K, V>, String),
}

/// A store's changelog topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangelogTopic {
    /// The sub-topology whose tasks own the store.
    pub subtopology: u32,
    /// The store.
    pub store: String,
    /// `<application.id>-<store>-changelog`.
    pub topic: String,
    /// Topic configs (compacted; windowed stores also delete by retention).
    pub config: std::collections::BTreeMap<String, String>,
    /// A window or session store's retention period, when the changelog's
    /// `retention.ms` is that plus `windowstore.changelog.additional.retention.ms`
    /// ([`StoreBuilder::windowed_changelog_retention`](kstreams_state::StoreBuilder::windowed_changelog_retention)).
    pub windowed_retention: Option<i64>,
    /// A window store's retention when a restore without local state may
    /// skip the records stamped before the newest window's retention
    /// ([`StoreBuilder::restore_within_retention`](kstreams_state::StoreBuilder::restore_within_retention)).
    pub restore_within_retention: Option<i64>,
}

/// The topics one sub-topology reads.
#[derive(Debug, Clone, Default)]
pub struct SubtopologySources {
    /// The sub-topology's number (see [`Topology::subtopology_ids`]).
    pub id: u32,
    /// Named topics (internal ones with the application id prefix).
    pub topics: Vec<String>,
    /// Patterns of pattern sources.
    pub patterns: Vec<TopicPattern>,
}

pub(crate) fn compile_pattern(pattern: &str) -> Result<TopicPattern, TopologyError> {
    // Kafka Streams matches a pattern against the whole topic name.
    let regex = regex::Regex::new(&format!("^(?:{pattern})$")).map_err(|source| {
        TopologyError::BadPattern {
            pattern: pattern.to_string(),
            source,
        }
    })?;
    Ok(TopicPattern {
        text: pattern.to_string(),
        regex,
    })
}
