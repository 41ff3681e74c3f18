//! The topology as an SVG picture: the DOT text laid out and drawn by
//! layout-rs, so nothing of the picture is placed by hand here.

use layout::backends::svg::SVGWriter;
use layout::gv::{DotParser, GraphBuilder};

use crate::Error;

/// Lays out and draws a DOT digraph (as [`topology_dot`](crate::topology_dot)
/// writes it) as SVG.
///
/// layout-rs flattens subgraphs: the sub-topology clusters of the DOT text
/// are not drawn as boxes; their nodes share a fill colour instead.
pub fn dot_to_svg(dot: &str) -> Result<String, Error> {
    let graph = DotParser::new(dot).process().map_err(Error::Layout)?;
    // The picture is an aid: should the layout engine panic on some graph,
    // the application must still start (it only loses its picture).
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut builder = GraphBuilder::new();
        builder.visit_graph(&graph);
        let mut visual = builder.get();
        let mut svg = SVGWriter::new();
        visual.do_it(false, false, false, &mut svg);
        svg.finalize()
    }))
    .map_err(|_| Error::Layout("the layout engine failed on this topology".to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_every_node() {
        let svg = dot_to_svg(
            "digraph t { subgraph cluster_0 { graph [label=\"Sub-topology: 0\"]; \
             \"src\" [shape=box]; \"store:s\" [shape=Mrecord, label=\"s\"]; } \
             \"topic:in\" [shape=box, label=\"in\"]; \"topic:in\" -> \"src\"; \
             \"src\" -> \"store:s\" [style=dashed]; }",
        )
        .unwrap();
        let document = roxmltree::Document::parse(&svg).unwrap();
        assert_eq!(document.root_element().tag_name().name(), "svg");
        let texts: Vec<&str> = document
            .descendants()
            .filter_map(|n| n.text())
            .map(str::trim)
            .collect();
        for name in ["src", "s", "in"] {
            assert!(texts.contains(&name), "{name} not drawn: {texts:?}");
        }
    }

    #[test]
    fn draws_a_topology_with_joins_a_repartition_and_a_global_store() {
        use kstreams_dsl::{NodeDescriptionKind, StreamsBuilder};

        let builder = StreamsBuilder::new();
        let users = builder.table::<String, String>("users");
        let regions = builder.global_table::<String, String>("regions");
        builder
            .stream::<String, String>("clicks")
            .join(&users, |click, user| format!("{click}:{user}"))
            .join_global(&regions, |k, _| k.clone(), |v, r| format!("{v}@{r}"))
            .select_key(|_, v| v.clone())
            .group_by_key()
            .count()
            .to_stream()
            .to("per-region");
        let description = builder.build().unwrap().describe();
        let svg = dot_to_svg(&crate::topology_dot(&description)).unwrap();
        let document = roxmltree::Document::parse(&svg).unwrap();
        let texts: Vec<&str> = document
            .descendants()
            .filter_map(|n| n.text())
            .map(str::trim)
            .collect();
        let nodes = description
            .subtopologies
            .iter()
            .flat_map(|s| s.nodes.iter())
            .chain(
                description
                    .global_stores
                    .iter()
                    .flat_map(|g| [&g.source, &g.processor]),
            );
        let mut drawn = 0;
        for node in nodes {
            assert!(
                texts.contains(&node.name.as_str()),
                "{} not drawn",
                node.name
            );
            if let NodeDescriptionKind::Processor { stores } = &node.kind {
                for store in stores {
                    assert!(texts.contains(&store.as_str()), "{store} not drawn");
                }
            }
            drawn += 1;
        }
        assert!(drawn > 8, "{description}");
    }

    #[test]
    fn bad_dot_is_an_error() {
        assert!(matches!(dot_to_svg("digraph {"), Err(Error::Layout(_))));
    }
}
