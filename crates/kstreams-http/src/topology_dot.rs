//! The topology in Graphviz DOT: each sub-topology a cluster, topics and
//! stores nodes of their own beside the processors that read, write or
//! hold them.

use std::collections::BTreeSet;
use std::fmt::Write;

use kstreams_dsl::{NodeDescription, NodeDescriptionKind, TopologyDescription};

/// Writes `description` as a DOT digraph, left to right as data flows.
///
/// Topics are shared between sub-topologies (a repartition topic is the
/// sink of one and the source of the next), so they are drawn once,
/// outside the clusters; stores are drawn inside the cluster of the
/// processor they belong to, joined to it by a dashed line.
pub fn topology_dot(description: &TopologyDescription) -> String {
    let mut dot = String::from("digraph topology {\n  rankdir=LR;\n");
    let mut topics = BTreeSet::new();
    let mut edges = String::new();
    for subtopology in &description.subtopologies {
        let cluster = Cluster {
            name: format!("cluster_{}", subtopology.id),
            label: format!("Sub-topology: {}", subtopology.id),
            fill: SUBTOPOLOGY_FILLS[subtopology.id % SUBTOPOLOGY_FILLS.len()],
        };
        write_cluster(
            &mut dot,
            &mut edges,
            &mut topics,
            &cluster,
            &subtopology.nodes,
        );
    }
    for global in &description.global_stores {
        let cluster = Cluster {
            name: format!("cluster_global_{}", global.id),
            label: format!("Global store: {}", global.id),
            fill: SUBTOPOLOGY_FILLS[global.id % SUBTOPOLOGY_FILLS.len()],
        };
        let nodes = [global.source.clone(), global.processor.clone()];
        write_cluster(&mut dot, &mut edges, &mut topics, &cluster, &nodes);
    }
    for topic in &topics {
        let _ = writeln!(
            dot,
            "  {} [shape=box, style=filled, fillcolor=lightyellow, label={}];",
            quoted(&topic_id(topic)),
            quoted(topic)
        );
    }
    dot.push_str(&edges);
    dot.push_str("}\n");
    dot
}

/// Node fills, one per sub-topology in turn: renderers that draw no
/// cluster boxes (layout-rs) still show which nodes run together. Topics
/// and stores have colours of their own, not among these.
const SUBTOPOLOGY_FILLS: &[&str] = &[
    "honeydew",
    "lavender",
    "mistyrose",
    "lemonchiffon",
    "aliceblue",
    "seashell",
    "thistle",
    "mintcream",
];

/// A sub-topology's (or global store's) cluster.
struct Cluster {
    name: String,
    label: String,
    fill: &'static str,
}

fn write_cluster(
    dot: &mut String,
    edges: &mut String,
    topics: &mut BTreeSet<String>,
    cluster: &Cluster,
    nodes: &[NodeDescription],
) {
    let _ = writeln!(dot, "  subgraph {} {{", cluster.name);
    let _ = writeln!(dot, "    graph [label={}];", quoted(&cluster.label));
    for node in nodes {
        let _ = writeln!(
            dot,
            "    {} [shape=box, style=filled, fillcolor={}, label={}];",
            quoted(&node.name),
            cluster.fill,
            quoted(&node.name)
        );
        match &node.kind {
            NodeDescriptionKind::Source { topics: read } => {
                for topic in source_topics(read) {
                    let _ = writeln!(
                        edges,
                        "  {} -> {};",
                        quoted(&topic_id(&topic)),
                        quoted(&node.name)
                    );
                    topics.insert(topic);
                }
            }
            NodeDescriptionKind::Processor { stores } => {
                for store in stores {
                    let _ = writeln!(
                        dot,
                        "    {} [shape=Mrecord, style=filled, fillcolor=lightblue, label={}];",
                        quoted(&store_id(store)),
                        quoted(store)
                    );
                    let _ = writeln!(
                        edges,
                        "  {} -> {} [style=dashed];",
                        quoted(&node.name),
                        quoted(&store_id(store))
                    );
                }
            }
            NodeDescriptionKind::Sink { target } => {
                if let Some(topic) = target.strip_prefix("topic: ") {
                    let _ = writeln!(
                        edges,
                        "  {} -> {};",
                        quoted(&node.name),
                        quoted(&topic_id(topic))
                    );
                    topics.insert(topic.to_string());
                }
            }
        }
        for successor in &node.successors {
            let _ = writeln!(edges, "  {} -> {};", quoted(&node.name), quoted(successor));
        }
    }
    dot.push_str("  }\n");
}

/// The topics of a source as `describe()` prints them: `[a, b]` for named
/// topics; a pattern is drawn as one node with the pattern as its name.
fn source_topics(printed: &str) -> Vec<String> {
    match printed
        .strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
    {
        Some(list) => list
            .split(", ")
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect(),
        None => vec![printed.to_string()],
    }
}

/// Node ids apart from the processors' names: a topic may be named as a
/// node is.
fn topic_id(topic: &str) -> String {
    format!("topic:{topic}")
}

fn store_id(store: &str) -> String {
    format!("store:{store}")
}

/// A DOT string literal.
fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kstreams_dsl::StreamsBuilder;

    #[test]
    fn clusters_topics_and_stores() {
        let builder = StreamsBuilder::new();
        builder
            .stream::<String, String>("words")
            .group_by_key()
            .count_with(None, kstreams_dsl::Materialized::as_("word-counts"))
            .to_stream()
            .to("counted");
        let description = builder.build().unwrap().describe();
        let dot = topology_dot(&description);
        assert!(dot.starts_with("digraph topology {"), "{dot}");
        assert!(dot.contains("subgraph cluster_0 {"), "{dot}");
        assert!(dot.contains(r#"graph [label="Sub-topology: 0"];"#), "{dot}");
        assert!(
            dot.contains(
                r#""KSTREAM-SOURCE-0000000000" [shape=box, style=filled, fillcolor=honeydew"#
            ),
            "{dot}"
        );
        assert!(
            dot.contains(r#""topic:words" -> "KSTREAM-SOURCE-0000000000";"#),
            "{dot}"
        );
        assert!(
            dot.contains(r#""store:word-counts" [shape=Mrecord"#),
            "{dot}"
        );
        assert!(dot.contains(r#"-> "topic:counted";"#), "{dot}");
        for node in &description.subtopologies[0].nodes {
            assert!(
                dot.contains(&quoted(&node.name)),
                "{} missing: {dot}",
                node.name
            );
        }
    }

    #[test]
    fn names_are_quoted_and_patterns_kept_whole() {
        assert_eq!(quoted(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(source_topics("[a, b]"), vec!["a", "b"]);
        assert_eq!(source_topics("in-.*"), vec!["in-.*"]);
    }
}
