//! What the runtime drives a topology with: the records a task consumes
//! and produces, a task's context and its instantiated topology, and topic
//! patterns. Applications need none of it; it is hidden from the docs and
//! may change without notice.

pub use crate::async_processing::{AsyncRuntime, AsyncSensors, AsyncWork, CompletionSignal};
pub use crate::graph::TopicPattern;
pub use crate::instance::TaskTopology;
pub use crate::partitioner::checked_partitions;
pub use crate::task_context::{ConsumedRecord, ProducedRecord, TaskContext};
