//! `TopologyDescription`: the topology as text, exactly as Kafka Streams
//! prints it, so that tooling and eyes trained on Kafka Streams read ours.

use std::fmt;

use crate::internals::graph::{NodeKind, SinkTopicDescription, SourceTopics, TopologyGraph};

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
        /// Connected store names, sorted.
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

/// The description of a whole topology; `Display` prints Kafka Streams'
/// `TopologyDescription` text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyDescription {
    /// Sub-topologies in id order.
    pub subtopologies: Vec<SubtopologyDescription>,
}

impl TopologyDescription {
    pub(crate) fn of(graph: &TopologyGraph) -> Self {
        // Kafka Streams orders nodes by the size of the sub-tree below them
        // (counted along every path), largest first, then by name.
        let mut sizes = vec![0usize; graph.nodes.len()];
        for id in (0..graph.nodes.len()).rev() {
            sizes[id] = 1 + graph.nodes[id].children.iter().map(|&c| sizes[c]).sum::<usize>();
        }
        let order = |ids: &mut Vec<usize>| {
            ids.sort_by(|&a, &b| sizes[b].cmp(&sizes[a]).then_with(|| graph.nodes[a].name.cmp(&graph.nodes[b].name)))
        };
        let names = |ids: &[usize]| {
            let mut ids = ids.to_vec();
            order(&mut ids);
            ids.into_iter().map(|i| graph.nodes[i].name.clone()).collect::<Vec<_>>()
        };
        let subtopologies = graph
            .subtopologies()
            .into_iter()
            .enumerate()
            .map(|(id, mut members)| {
                order(&mut members);
                let nodes = members
                    .into_iter()
                    .map(|n| {
                        let def = &graph.nodes[n];
                        let kind = match &def.kind {
                            NodeKind::Source { topics, .. } => NodeDescriptionKind::Source {
                                topics: match topics {
                                    SourceTopics::Names(t) => format!("[{}]", t.join(", ")),
                                    SourceTopics::Pattern(p) => p.text.clone(),
                                },
                            },
                            NodeKind::Processor { .. } => {
                                let mut stores = def.stores.clone();
                                stores.sort();
                                NodeDescriptionKind::Processor { stores }
                            }
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
                            successors: names(&def.children),
                            predecessors: names(&def.parents),
                        }
                    })
                    .collect();
                SubtopologyDescription { id, nodes }
            })
            .collect();
        Self { subtopologies }
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
                writeln!(f, "    Processor: {} (stores: [{}])", self.name, stores.join(", "))?;
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

impl fmt::Display for TopologyDescription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Kafka Streams indents the first sub-topology by three spaces and
        // the others by two, and ends each with a blank line.
        write!(f, "Topologies:\n   ")?;
        for (i, s) in self.subtopologies.iter().enumerate() {
            if i > 0 {
                write!(f, "  ")?;
            }
            writeln!(f, "{s}")?;
        }
        Ok(())
    }
}
