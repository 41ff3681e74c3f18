//! The kstreams engine.
//!
//! This crate owns how records are run through a topology: a
//! [`StreamTask`] runs one sub-topology over the records of its
//! partitions (event time, stream time, punctuation, error handling), and
//! the [`TopologyTestDriver`] drives those same tasks from a test, with no
//! broker. The Kafka runtime ([`kafka::KafkaStreams`]: stream threads with
//! their rdkafka clients, partition groups, commits, at-least-once and
//! exactly-once) drives the very same tasks, so a test that passes in the
//! driver exercises the production path.

// `unsafe` lives in `kafka::ffi` alone, the one module that allows it.
#![deny(unsafe_code)]

mod async_runtime;
mod changelog;
mod clock;
mod config;
pub mod driver;
pub mod handlers;
pub mod kafka;
mod partition_times;
mod task;
mod topic_names;
pub mod trace_context;

/// The async processors' default bounds (`kstreams.async.*` keys), for an
/// application that sizes its own work by them.
pub use async_runtime::{
    DEFAULT_DRAIN_TIMEOUT, DEFAULT_MAX_IN_FLIGHT_PER_TASK, DEFAULT_MAX_IN_FLIGHT_PER_THREAD,
    DEFAULT_WORKER_THREADS,
};
pub use config::{DeserializationHandling, ProcessingHandling, ProductionHandling, TaskConfig};
pub use driver::{TestInputTopic, TestOutputTopic, TopologyTestDriver};
pub(crate) use task::StreamTask;
pub use trace_context::{TraceParent, TracingConfig};

/// The engine below the public API (one task run directly, without a
/// driver or a stream thread), for kstreams' own benchmarks and tests. Not
/// a stable interface.
#[doc(hidden)]
pub mod __private {
    pub use crate::task::{SinkLatency, StreamTask, TaskMetrics};
}
