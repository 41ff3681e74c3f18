//! `TopologyDescription`: the topology as text, exactly as Kafka Streams
//! prints it, so that tooling and eyes trained on Kafka Streams read ours.

use std::collections::HashMap;
use std::fmt;

use crate::java_order::{
    grown_capacity, hash_order, hash_set_order, java_string_compare, JavaTreeSet,
};

use crate::graph::{GlobalStoreNodes, NodeKind, SinkTopicDescription, SourceTopics, TopologyGraph};

/// What kind of node, with what Kafka Streams prints after its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeDescriptionKind {
    /// A source and the topics (or the pattern) it reads.
    Source {
        /// `[a, b]` for named topics, the pattern text for a pattern.
        topics: String,
    },
    /// A processor and its stores.
    Processor {
        /// Connected store names, in Kafka Streams' print order.
        stores: Vec<String>,
    },
    /// A sink and its topic (or extractor).
    Sink {
        /// `topic: name` or `extractor class: ...`.
        target: String,
    },
}

/// One node of a sub-topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeDescription {
    /// Node name.
    pub name: String,
    /// Kind and details.
    pub kind: NodeDescriptionKind,
    /// Children, in Kafka Streams' order.
    pub successors: Vec<String>,
    /// Parents, in Kafka Streams' order.
    pub predecessors: Vec<String>,
}

/// One sub-topology: its id and its nodes in Kafka Streams' print order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubtopologyDescription {
    /// Sub-topology id.
    pub id: usize,
    /// Nodes, ordered as Kafka Streams prints them.
    pub nodes: Vec<NodeDescription>,
}

/// A global table's store: the source reading its topic and the processor
/// writing the store. It takes a sub-topology id but generates no tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobalStoreDescription {
    /// Sub-topology id.
    pub id: usize,
    /// The source of the global topic.
    pub source: NodeDescription,
    /// The processor that writes the store.
    pub processor: NodeDescription,
}

/// The description of a whole topology; `Display` prints Kafka Streams'
/// `TopologyDescription` text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyDescription {
    /// Sub-topologies in id order.
    pub subtopologies: Vec<SubtopologyDescription>,
    /// Global stores in id order.
    pub global_stores: Vec<GlobalStoreDescription>,
}

impl TopologyDescription {
    /// Numbers sub-topologies and global stores together, as Kafka Streams'
    /// `makeNodeGroups` does: in the order of their first node, a global
    /// store's nodes being added where its global table was declared.
    pub(crate) fn of(graph: &TopologyGraph) -> Self {
        let mut subtopologies = Vec::new();
        let mut global_stores = Vec::new();
        let mut globals = graph.global_stores.iter().peekable();
        let mut id = 0;
        for members in graph.subtopologies() {
            while let Some(global) = globals.next_if(|g| g.position <= members[0]) {
                global_stores.push(describe_global_store(global, id));
                id += 1;
            }
            subtopologies.push(describe_subtopology(graph, id, &members));
            id += 1;
        }
        for global in globals {
            global_stores.push(describe_global_store(global, id));
            id += 1;
        }
        Self {
            subtopologies,
            global_stores,
        }
    }
}

fn describe_global_store(global: &GlobalStoreNodes, id: usize) -> GlobalStoreDescription {
    GlobalStoreDescription {
        id,
        source: NodeDescription {
            name: global.source.clone(),
            kind: NodeDescriptionKind::Source {
                topics: format!("[{}]", global.topic),
            },
            successors: vec![global.processor.clone()],
            predecessors: Vec::new(),
        },
        processor: NodeDescription {
            name: global.processor.clone(),
            kind: NodeDescriptionKind::Processor {
                stores: vec![global.store.clone()],
            },
            successors: Vec::new(),
            predecessors: vec![global.source.clone()],
        },
    }
}

/// Orders a sub-topology as Kafka Streams' `describeSubtopology` does:
/// edges are visited in `HashMap` order of the node names; each edge adds
/// the child's size to the parent and its ancestors, and lands in `TreeSet`s
/// ordered by (size, name) as sizes are at that moment. Nodes print by final
/// size, largest first, then by name.
fn describe_subtopology(
    graph: &TopologyGraph,
    id: usize,
    members: &[usize],
) -> SubtopologyDescription {
    let names: Vec<&str> = members
        .iter()
        .map(|&m| graph.nodes[m].name.as_str())
        .collect();
    let local: HashMap<usize, usize> = members.iter().enumerate().map(|(i, &m)| (m, i)).collect();
    let visit_order = hash_order(&names, grown_capacity(names.len()));
    let mut sizes = vec![1u64; members.len()];
    let mut predecessors: Vec<JavaTreeSet> =
        members.iter().map(|_| JavaTreeSet::default()).collect();
    let mut successors: Vec<JavaTreeSet> = members.iter().map(|_| JavaTreeSet::default()).collect();
    let by_name: HashMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    for name in visit_order {
        let node = by_name[name];
        for parent in &graph.nodes[members[node]].parents {
            let parent = local[parent];
            let cmp = |a: usize, b: usize| {
                sizes[b]
                    .cmp(&sizes[a])
                    .then_with(|| java_string_compare(names[a], names[b]))
            };
            predecessors[node].add(parent, cmp);
            successors[parent].add(node, cmp);
            add_size(parent, sizes[node], &mut sizes, &predecessors);
        }
    }
    let mut order: Vec<usize> = (0..members.len()).collect();
    order.sort_by(|&a, &b| {
        sizes[b]
            .cmp(&sizes[a])
            .then_with(|| java_string_compare(names[a], names[b]))
    });
    let list = |set: &JavaTreeSet| {
        set.keys()
            .into_iter()
            .map(|i| names[i].to_string())
            .collect::<Vec<_>>()
    };
    let nodes = order
        .into_iter()
        .map(|i| {
            let def = &graph.nodes[members[i]];
            let kind = match &def.kind {
                NodeKind::Source { topics, .. } => NodeDescriptionKind::Source {
                    topics: match topics {
                        SourceTopics::Names(t) => format!("[{}]", hash_set_order(t).join(", ")),
                        SourceTopics::Pattern(p) => p.text.clone(),
                    },
                },
                NodeKind::Processor { .. } => NodeDescriptionKind::Processor {
                    // The processor keeps its stores in a HashSet, and
                    // describe() copies it into another.
                    stores: hash_set_order(&hash_order(
                        &def.stores,
                        grown_capacity(def.stores.len()),
                    )),
                },
                NodeKind::Sink { topic, .. } => NodeDescriptionKind::Sink {
                    target: match topic {
                        SinkTopicDescription::Topic(t) => format!("topic: {t}"),
                        SinkTopicDescription::Extractor(e) => format!("extractor class: {e}"),
                    },
                },
            };
            NodeDescription {
                name: def.name.clone(),
                kind,
                successors: list(&successors[i]),
                predecessors: list(&predecessors[i]),
            }
        })
        .collect();
    SubtopologyDescription { id, nodes }
}

/// Adds `delta` to a node and, along every path, to its ancestors known so far.
fn add_size(node: usize, delta: u64, sizes: &mut [u64], predecessors: &[JavaTreeSet]) {
    sizes[node] += delta;
    for p in predecessors[node].keys() {
        add_size(p, delta, sizes, predecessors);
    }
}

fn arrow_list(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

impl fmt::Display for NodeDescription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            NodeDescriptionKind::Source { topics } => {
                writeln!(f, "    Source: {} (topics: {})", self.name, topics)?;
                writeln!(f, "      --> {}", arrow_list(&self.successors))
            }
            NodeDescriptionKind::Processor { stores } => {
                writeln!(
                    f,
                    "    Processor: {} (stores: [{}])",
                    self.name,
                    stores.join(", ")
                )?;
                writeln!(f, "      --> {}", arrow_list(&self.successors))?;
                writeln!(f, "      <-- {}", arrow_list(&self.predecessors))
            }
            NodeDescriptionKind::Sink { target } => {
                writeln!(f, "    Sink: {} ({})", self.name, target)?;
                writeln!(f, "      <-- {}", arrow_list(&self.predecessors))
            }
        }
    }
}

impl fmt::Display for SubtopologyDescription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Sub-topology: {}", self.id)?;
        for node in &self.nodes {
            write!(f, "{node}")?;
        }
        Ok(())
    }
}

impl fmt::Display for GlobalStoreDescription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "Sub-topology: {} for global store (will not generate tasks)",
            self.id
        )?;
        write!(f, "{}{}", self.source, self.processor)
    }
}

impl fmt::Display for TopologyDescription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Kafka Streams writes "Topologies:\n " and then each sub-topology
        // as "  Sub-topology: N\n...\n": three spaces before the first
        // header, two before the others. A global store's block has no
        // blank line after it. While both kinds remain, the sub-topology
        // goes first if it has the expected id, else the global store.
        write!(f, "Topologies:\n ")?;
        let mut subtopologies = self.subtopologies.iter().peekable();
        let mut global_stores = self.global_stores.iter().peekable();
        let mut expected = 0;
        while let (Some(s), Some(g)) = (subtopologies.peek(), global_stores.peek()) {
            if s.id == expected {
                writeln!(f, "  {s}")?;
                subtopologies.next();
            } else {
                write!(f, "  {g}")?;
                global_stores.next();
            }
            expected += 1;
        }
        for s in subtopologies {
            writeln!(f, "  {s}")?;
        }
        for g in global_stores {
            write!(f, "  {g}")?;
        }
        Ok(())
    }
}
