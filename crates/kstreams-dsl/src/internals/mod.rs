//! The machinery under the public API: the graph, node instances and the
//! per-task context. The runtime uses these; applications need not.

pub(crate) mod graph;
pub(crate) mod instance;
pub(crate) mod nodes;
pub(crate) mod task_context;

pub use graph::{SourceTopics, TopicPattern};
pub use instance::TaskTopology;
pub(crate) use nodes::{NodeInfo, Outputs};
pub use nodes::{RecordContext, TopicNameExtractor};
pub(crate) use task_context::ScheduledPunctuation;
pub use task_context::{ConsumedRecord, ProducedRecord, TaskContext, TaskId};
