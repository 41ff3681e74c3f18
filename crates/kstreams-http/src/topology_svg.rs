//! The topology as an SVG picture: the DOT text laid out and drawn by
//! layout-rs, so nothing of the picture is placed by hand here.

use layout::backends::svg::SVGWriter;
use layout::gv::{DotParser, GraphBuilder};

use crate::Error;

/// Lays out and draws a DOT digraph (as [`topology_dot`](crate::topology_dot)
/// writes it) as SVG.
///
/// layout-rs flattens subgraphs: the sub-topology clusters of the DOT text
/// are not drawn as boxes, their nodes are.
pub fn dot_to_svg(dot: &str) -> Result<String, Error> {
    let graph = DotParser::new(dot).process().map_err(Error::Layout)?;
    let mut builder = GraphBuilder::new();
    builder.visit_graph(&graph);
    let mut visual = builder.get();
    let mut svg = SVGWriter::new();
    visual.do_it(false, false, false, &mut svg);
    Ok(svg.finalize())
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
    fn bad_dot_is_an_error() {
        assert!(matches!(dot_to_svg("digraph {"), Err(Error::Layout(_))));
    }
}
