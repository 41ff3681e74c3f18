//! The topology graph: an untyped description (names, topics, stores,
//! edges) beside the typed factories that build each task's nodes.

use std::any::{Any, TypeId};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;
use std::sync::Arc;

use kstreams_state::StoreBuilder;

use crate::forwarding::NodeInfo;
use crate::nodes::{NodeHandle, SourceHandle};
use crate::{StreamsError, TopologyError};

/// The Rust type of the records crossing an edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EdgeType {
    id: TypeId,
    name: &'static str,
}

impl EdgeType {
    pub(crate) fn of<K: 'static, V: 'static>() -> Self {
        Self {
            id: TypeId::of::<(K, V)>(),
            name: std::any::type_name::<(K, V)>(),
        }
    }
}

/// The topics a source reads.
#[derive(Debug, Clone)]
pub(crate) enum SourceTopics {
    /// A fixed list of topics.
    Names(Vec<String>),
    /// Every topic whose whole name matches the pattern.
    Pattern(TopicPattern),
}

/// A source's topic pattern: the text as given and the regex that must
/// match a whole topic name.
#[derive(Debug, Clone)]
pub struct TopicPattern {
    /// The pattern as the user wrote it.
    pub text: String,
    /// The anchored regex.
    pub regex: regex::Regex,
}

/// Where a sink writes, as described.
#[derive(Debug, Clone)]
pub(crate) enum SinkTopicDescription {
    Topic(String),
    Extractor(String),
}

pub(crate) type ChildInputs<'a> = [(Rc<str>, &'a dyn Any)];

pub(crate) type SourceFactory = Arc<
    dyn Fn(NodeInfo, &ChildInputs<'_>) -> Result<Rc<dyn SourceHandle>, StreamsError> + Send + Sync,
>;
pub(crate) type ProcessorFactory = Arc<
    dyn Fn(NodeInfo, &ChildInputs<'_>) -> Result<(Box<dyn Any>, Rc<dyn NodeHandle>), StreamsError>
        + Send
        + Sync,
>;
/// Builds a sink's typed input; the closure resolves internal topic names
/// against the application id.
pub(crate) type SinkFactory =
    Arc<dyn Fn(NodeInfo, &dyn Fn(&str) -> String) -> Box<dyn Any> + Send + Sync>;

pub(crate) enum NodeKind {
    Source {
        topics: SourceTopics,
        factory: SourceFactory,
    },
    Processor {
        factory: ProcessorFactory,
    },
    Sink {
        topic: SinkTopicDescription,
        factory: SinkFactory,
    },
}

pub(crate) struct NodeDef {
    pub name: String,
    pub kind: NodeKind,
    pub parents: Vec<usize>,
    pub children: Vec<usize>,
    pub stores: Vec<String>,
    pub output: Option<EdgeType>,
}

pub(crate) struct StoreDef {
    pub builder: Arc<dyn StoreBuilder>,
}

/// The whole graph of a topology.
#[derive(Default)]
pub(crate) struct TopologyGraph {
    pub nodes: Vec<NodeDef>,
    pub by_name: HashMap<String, usize>,
    pub stores: BTreeMap<String, StoreDef>,
    /// Topic names that get the application id as prefix at run time.
    pub internal_topics: BTreeSet<String>,
    pub topic_to_source: HashMap<String, usize>,
    /// Topics a task reads to their end before its other partitions.
    pub bootstrap_topics: BTreeSet<String>,
    /// Sources (by node name) with an offset reset policy of their own.
    pub offset_resets: HashMap<String, crate::AutoOffsetReset>,
    /// Topics whose partitions must meet in one task (the two sides of a
    /// join, the inputs of a cogroup): they need equal partition counts.
    pub copartition_groups: Vec<BTreeSet<String>>,
    /// Repartition topics whose partition count the user set.
    pub repartition_partitions: BTreeMap<String, i32>,
    /// The global tables' nodes, as described (the global thread, not a
    /// task, runs them).
    pub global_stores: Vec<GlobalStoreNodes>,
}

/// The source and processor Kafka Streams adds for a global table's store.
/// They form a sub-topology of their own, numbered among the others by
/// where the global table was declared.
pub(crate) struct GlobalStoreNodes {
    pub source: String,
    pub processor: String,
    pub store: String,
    pub topic: String,
    /// How many nodes the graph had when the global table was declared.
    pub position: usize,
}

impl TopologyGraph {
    /// The topics of the sources upstream of `node`.
    pub(crate) fn upstream_topics(&self, node: &str) -> BTreeSet<String> {
        let mut topics = BTreeSet::new();
        let Some(&start) = self.by_name.get(node) else {
            return topics;
        };
        let mut todo = vec![start];
        let mut seen = std::collections::HashSet::new();
        while let Some(id) = todo.pop() {
            if !seen.insert(id) {
                continue;
            }
            let def = &self.nodes[id];
            if let NodeKind::Source {
                topics: SourceTopics::Names(names),
                ..
            } = &def.kind
            {
                topics.extend(names.iter().cloned());
            }
            todo.extend(def.parents.iter().copied());
        }
        topics
    }

    /// Records that the topics upstream of `nodes` must be co-partitioned.
    pub(crate) fn copartition(&mut self, nodes: &[&str]) {
        let mut group = BTreeSet::new();
        for node in nodes {
            group.extend(self.upstream_topics(node));
        }
        if group.len() > 1 {
            self.copartition_groups.push(group);
        }
    }

    /// Records what a `Consumed` asks of the DSL source `source`: its
    /// topics are read to their end before joins (bootstrap), and where it
    /// starts without a committed offset.
    pub(crate) fn note_source_options(
        &mut self,
        source: &str,
        bootstrap: bool,
        offset_reset: Option<crate::AutoOffsetReset>,
    ) {
        if bootstrap {
            self.mark_bootstrap_upstream(source);
        }
        if let Some(policy) = offset_reset {
            self.offset_resets.insert(source.to_owned(), policy);
        }
    }

    /// Marks the topics of the sources upstream of `node` as bootstrap.
    pub(crate) fn mark_bootstrap_upstream(&mut self, node: &str) {
        let Some(&start) = self.by_name.get(node) else {
            return;
        };
        let mut todo = vec![start];
        let mut seen = std::collections::HashSet::new();
        while let Some(id) = todo.pop() {
            if !seen.insert(id) {
                continue;
            }
            let def = &self.nodes[id];
            if let NodeKind::Source {
                topics: SourceTopics::Names(names),
                ..
            } = &def.kind
            {
                self.bootstrap_topics.extend(names.iter().cloned());
            }
            todo.extend(def.parents.iter().copied());
        }
    }

    pub(crate) fn add_node(
        &mut self,
        name: String,
        kind: NodeKind,
        parents: &[&str],
        input: Option<EdgeType>,
        output: Option<EdgeType>,
    ) -> Result<usize, TopologyError> {
        if self.by_name.contains_key(&name) {
            return Err(TopologyError::DuplicateName(name));
        }
        let is_source = matches!(kind, NodeKind::Source { .. });
        if !is_source && parents.is_empty() {
            return Err(TopologyError::NoParent(name));
        }
        let mut parent_ids = Vec::with_capacity(parents.len());
        for parent in parents {
            let &id = self
                .by_name
                .get(*parent)
                .ok_or_else(|| TopologyError::UnknownParent {
                    node: name.clone(),
                    parent: parent.to_string(),
                })?;
            let parent_def = &self.nodes[id];
            if matches!(parent_def.kind, NodeKind::Sink { .. }) {
                return Err(TopologyError::SinkAsParent {
                    node: name.clone(),
                    parent: parent.to_string(),
                });
            }
            if let (Some(expected), Some(actual)) = (input, parent_def.output) {
                if expected != actual {
                    return Err(TopologyError::TypeMismatch {
                        node: name.clone(),
                        parent: parent.to_string(),
                        expected: expected.name,
                        actual: actual.name,
                    });
                }
            }
            parent_ids.push(id);
        }
        if let NodeKind::Source {
            topics: SourceTopics::Names(topics),
            ..
        } = &kind
        {
            if topics.is_empty() {
                return Err(TopologyError::NoTopics(name));
            }
            for topic in topics {
                if let Some(&other) = self.topic_to_source.get(topic) {
                    return Err(TopologyError::TopicAlreadyRead {
                        topic: topic.clone(),
                        source_node: self.nodes[other].name.clone(),
                    });
                }
            }
        }
        let id = self.nodes.len();
        if let NodeKind::Source {
            topics: SourceTopics::Names(topics),
            ..
        } = &kind
        {
            for topic in topics {
                self.topic_to_source.insert(topic.clone(), id);
            }
        }
        for &p in &parent_ids {
            self.nodes[p].children.push(id);
        }
        self.by_name.insert(name.clone(), id);
        self.nodes.push(NodeDef {
            name,
            kind,
            parents: parent_ids,
            children: Vec::new(),
            stores: Vec::new(),
            output,
        });
        Ok(id)
    }

    pub(crate) fn add_store(
        &mut self,
        builder: Arc<dyn StoreBuilder>,
        processors: &[&str],
    ) -> Result<(), TopologyError> {
        let name = builder.name().to_string();
        if self.stores.contains_key(&name) {
            return Err(TopologyError::DuplicateStore(name));
        }
        for p in processors {
            if !self.by_name.contains_key(*p) {
                return Err(TopologyError::UnknownProcessor {
                    processor: p.to_string(),
                    store: name,
                });
            }
        }
        self.stores.insert(name.clone(), StoreDef { builder });
        self.connect(processors, &[name.as_str()])
    }

    pub(crate) fn connect(
        &mut self,
        processors: &[&str],
        stores: &[&str],
    ) -> Result<(), TopologyError> {
        for p in processors {
            let &id = self
                .by_name
                .get(*p)
                .ok_or_else(|| TopologyError::UnknownProcessor {
                    processor: p.to_string(),
                    store: stores.join(", "),
                })?;
            for s in stores {
                if !self.stores.contains_key(*s) {
                    return Err(TopologyError::UnknownStore {
                        processor: p.to_string(),
                        store: s.to_string(),
                    });
                }
                let node = &mut self.nodes[id];
                if !node.stores.iter().any(|x| x == s) {
                    node.stores.push(s.to_string());
                }
            }
        }
        Ok(())
    }

    /// Kafka Streams' number of each stream sub-topology (in the order of
    /// [`TopologyGraph::subtopologies`]): global stores are numbered with
    /// them, where their global table was declared (`makeNodeGroups`), so
    /// with a global table first the stream sub-topologies start at 1.
    /// Task ids, task directories and describe() all use these numbers.
    pub(crate) fn subtopology_ids(&self) -> Vec<u32> {
        let mut globals = self.global_stores.iter().peekable();
        let mut id = 0u32;
        let mut out = Vec::new();
        for members in self.subtopologies() {
            while globals.next_if(|g| g.position <= members[0]).is_some() {
                id += 1;
            }
            out.push(id);
            id += 1;
        }
        out
    }

    /// Sub-topologies as Kafka Streams numbers them: nodes joined by edges
    /// or by a shared store form a group; groups are numbered in the order
    /// their first node was added. Members are in the order added.
    pub(crate) fn subtopologies(&self) -> Vec<Vec<usize>> {
        let mut uf = UnionFind::new(self.nodes.len());
        let mut store_owner: HashMap<&str, usize> = HashMap::new();
        for (id, node) in self.nodes.iter().enumerate() {
            for &p in &node.parents {
                uf.union(id, p);
            }
            for s in &node.stores {
                match store_owner.get(s.as_str()) {
                    Some(&other) => uf.union(id, other),
                    None => {
                        store_owner.insert(s, id);
                    }
                }
            }
        }
        let mut group_of_root: HashMap<usize, usize> = HashMap::new();
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for id in 0..self.nodes.len() {
            let root = uf.find(id);
            let g = *group_of_root.entry(root).or_insert_with(|| {
                groups.push(Vec::new());
                groups.len() - 1
            });
            groups[g].push(id);
        }
        groups
    }
}

struct UnionFind(Vec<usize>);

impl UnionFind {
    fn new(n: usize) -> Self {
        Self((0..n).collect())
    }
    fn find(&mut self, mut x: usize) -> usize {
        while self.0[x] != x {
            self.0[x] = self.0[self.0[x]];
            x = self.0[x];
        }
        x
    }
    fn union(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra != rb {
            self.0[ra.max(rb)] = ra.min(rb);
        }
    }
}

/// The full name of a topic: internal topics get the application id prefix.
pub(crate) fn resolve_topic(graph: &TopologyGraph, application_id: &str, topic: &str) -> String {
    if graph.internal_topics.contains(topic) {
        format!("{application_id}-{topic}")
    } else {
        topic.to_string()
    }
}
