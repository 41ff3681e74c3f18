//! The application's states (Kafka Streams' `KafkaStreams.State`): what
//! `KafkaStreams`, its threads' metadata and the interactive queries share.

/// The states of an application, as Kafka Streams names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Built, not started.
    Created,
    /// Threads are joining the group or moving partitions.
    Rebalancing,
    /// Every thread has its partitions and processes.
    Running,
    /// `close` was called; threads are finishing.
    PendingShutdown,
    /// Stopped cleanly.
    NotRunning,
    /// A thread failed and the handler shut the client down; threads are
    /// finishing.
    PendingError,
    /// Stopped after a failure.
    Error,
}
