//! The state all handles of one builder share (the topology being built,
//! generated names, the first error), below every handle so that each can
//! reach it without reaching the builder.

use std::cell::RefCell;
use std::rc::Rc;

use crate::{Topology, TopologyError};

/// The state all streams of one builder share: the topology being built,
/// the counter behind generated names, and the first error.
pub(crate) struct BuilderState {
    pub topology: Topology,
    /// Repartition topics a user named, by topic, with the source node that
    /// reads each: a second aggregation of the same grouping reuses it.
    pub named_repartitions: std::collections::HashMap<String, String>,
    next_index: u32,
    error: Option<TopologyError>,
}

impl BuilderState {
    pub(crate) fn new() -> Self {
        BuilderState {
            topology: Topology::new(),
            named_repartitions: std::collections::HashMap::new(),
            next_index: 0,
            error: None,
        }
    }

    /// The first error an operator made, if any.
    pub(crate) fn take_error(&mut self) -> Option<TopologyError> {
        self.error.take()
    }

    /// A generated name: `prefix` and the next index on ten digits, as
    /// Kafka Streams' `newProcessorName`.
    pub(crate) fn new_name(&mut self, prefix: &str) -> String {
        let name = format!("{prefix}{:010}", self.next_index);
        self.next_index += 1;
        name
    }

    /// The user's name if given, else a generated one. Either way an index
    /// is drawn, as Kafka Streams does, so that naming one operator does not
    /// shift the generated names of the others.
    pub(crate) fn name_or_generate(&mut self, name: Option<String>, prefix: &str) -> String {
        let generated = self.new_name(prefix);
        name.unwrap_or(generated)
    }

    /// Keeps the first error; `build` reports it.
    pub(crate) fn record<T>(&mut self, result: Result<T, TopologyError>) -> Option<T> {
        match result {
            Ok(v) => Some(v),
            Err(e) => {
                self.error.get_or_insert(e);
                None
            }
        }
    }
}

pub(crate) type SharedState = Rc<RefCell<BuilderState>>;
