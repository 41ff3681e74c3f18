//! The Kafka runtime: `KafkaStreams` runs a topology against a Kafka
//! cluster with stream threads, each owning one consumer, one producer and
//! the tasks of the partitions the consumer group gave it.
//!
//! Scale-out is Kafka's consumer group: start more instances (or threads)
//! with the same `application.id` and the partitions spread over them.
//! With `group.protocol=streams` (KIP-1071, brokers 4.2+) it is a streams
//! group instead: every stream thread is a member, the broker assigns it
//! tasks, and its consumer reads the partitions of its active tasks.

mod app;
mod application_shutdown;
mod bootstrap_progress;
mod changelog_batch;
mod client_error;
mod clients;
mod config;
mod consumer_position;
// The crate's only `unsafe` (lib.rs denies it everywhere else).
#[allow(unsafe_code)]
mod ffi;
mod global;
mod instance;
mod local_metadata;
mod offsets;
mod outbox;
mod partition_counts;
mod partition_group;
mod progress_checkpoints;
mod queries;
mod rebalance_listener;
mod record_collector;
mod refusals;
mod repartition_purge;
mod restore_progress;
mod retention_seek;
mod slice_clock;
mod spare_buffers;
mod standby_listener;
mod standby_tasks;
mod state;
mod state_updater;
mod store_lags;
mod streams_group;
mod task_creator;
mod task_manager;
mod thread;
mod topics;
mod uncommitted_start;

pub use app::{
    AsyncKafkaStreams, CloseOptions, GroupMembershipOperation, KafkaStreams, StateTransitions,
    StreamThreadExceptionResponse, UncaughtException, UncaughtExceptions,
};
pub use client_error::ClientError;
pub use clients::STREAM_CLIENT_DEFAULTS;
pub use config::{ConfigError, ProcessingGuarantee, StreamsConfig};
pub use kstreams_state::{StateRestoreListener, TopicPartition};
pub use local_metadata::{LocalMetadata, TaskMetadata, TaskPartition, ThreadMetadata};
pub use queries::{
    HostInfo, IsolationLevel, KeyQueryMetadata, KeyValueStoreType, QueryError, QueryableStoreType,
    QueryableStoreTypes, ReadOnlyKeyValueView, ReadOnlySessionView, ReadOnlyVersionedView,
    ReadOnlyWindowView, SessionStoreType, StoreQueryParameters, StreamsMetadata,
    TimestampedKeyValueStoreType, TimestampedWindowStoreType, VersionedKeyValueStoreType,
    WindowStoreType,
};
pub use restore_progress::{RestoreKind, RestoreProgress};
pub use standby_listener::{StandbyUpdateListener, SuspendReason};
pub use state::State;
pub use store_lags::LagInfo;
pub use thread::ThreadState;

use kstreams_dsl::StreamsError;

/// Why an application could not start or a stream thread stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// A bad configuration.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Processing failed and the handler said to fail.
    #[error(transparent)]
    Streams(#[from] StreamsError),
    /// The Kafka clients failed.
    #[error("kafka: {0}")]
    Kafka(#[from] ClientError),
    /// Local state failed: the state directory, a checkpoint, a store.
    #[error(transparent)]
    State(#[from] kstreams_state::Error),
    /// Metrics could not be registered.
    #[error("metrics: {0}")]
    Metrics(#[from] kstreams_metrics::Error),
    /// The stream thread's streams group member (`group.protocol=streams`)
    /// could not join, commit or stay in its group.
    #[error("streams group: {0}")]
    StreamsGroup(#[from] kstreams_group::Error),
    /// A thread of the instance could not be started.
    #[error("cannot start thread {name}: {source}")]
    Spawn {
        /// The thread.
        name: String,
        /// Why.
        source: std::io::Error,
    },
    /// A store's changelog partition was not read to its end in time.
    #[error(
        "restoring {store} from {topic}-{partition} did not reach offset {end} within {timeout:?}"
    )]
    RestoreTimeout {
        /// The store.
        store: String,
        /// Its changelog topic.
        topic: String,
        /// The changelog partition.
        partition: i32,
        /// The end offset it was to reach.
        end: i64,
        /// How long it may take.
        timeout: std::time::Duration,
    },
    /// The global tables were not loaded to their end offsets in time.
    #[error(
        "loading the global tables did not reach the end offsets within {timeout:?}; left: {left:?}"
    )]
    GlobalLoadTimeout {
        /// How long it may take.
        timeout: std::time::Duration,
        /// The partitions not read to their end, with those ends.
        left: Vec<(String, i32, i64)>,
    },
    /// The broker (or librdkafka, after its retries) refused a record and
    /// the production handler said to fail.
    #[error("a record to {topic}-{partition} could not be produced: {source}")]
    Production {
        /// The record's topic.
        topic: String,
        /// Its partition.
        partition: i32,
        /// Why.
        source: ClientError,
    },
    /// The producer could not write an output record and the production
    /// exception handler answered FAIL (or could not resume, or panicked).
    #[error(
        "a record to {topic}-{partition} could not be produced: {source} (the production \
         exception handler failed)"
    )]
    ProductionFailed {
        /// The record's topic.
        topic: String,
        /// Its partition (-1 if none was chosen).
        partition: i32,
        /// Why it could not be produced.
        source: ClientError,
    },
    /// Source topics that do not exist.
    #[error("source topics do not exist: {}; create them before starting the application", .0.join(", "))]
    MissingSourceTopics(Vec<String>),
    /// Topics joined in one task have different partition counts.
    #[error(
        "topics joined in one task must have the same number of partitions, but {}; \
         repartition the side with fewer partitions (KStream::repartition_with with \
         Repartitioned::with_partitions) or recreate the topics with equal counts",
        .0.iter().map(|(t, n)| format!("{t} has {n}")).collect::<Vec<_>>().join(", ")
    )]
    CoPartitioning(Vec<(String, usize)>),
    /// An internal topic could not be created.
    #[error("could not create internal topic {topic}: {source}")]
    CreateTopic {
        /// The topic.
        topic: String,
        /// Why.
        source: ClientError,
    },
    /// A sink's topic has no partitions to pick one from for a record
    /// (the broker reports it without partitions; a topic that does not
    /// exist is [`RuntimeError::MissingSinkTopic`]).
    #[error("could not get partition information for topic {0}; does it exist?")]
    NoPartitionInfo(String),
    /// A sink topic (an output, or the dead-letter queue) does not exist.
    /// Under the default production handler the thread retries from its
    /// last commit until the topic is there, as Kafka Streams'
    /// `DefaultProductionExceptionHandler` answers RETRY (KIP-1065); this
    /// error is what it logs.
    #[error(
        "sink topic {topic} does not exist; create it (kafka-topics.sh --create --topic {topic}), \
         the stream thread retries from its last commit until it exists, or set \
         production.exception.handler to LogAndContinueProductionExceptionHandler to drop \
         its records"
    )]
    MissingSinkTopic {
        /// The topic.
        topic: String,
    },
    /// `auto.offset.reset=none` and partitions of the application's group
    /// without a committed offset: Kafka Streams' `NoOffsetForPartitionException`.
    #[error(
        "no committed offset for {} and auto.offset.reset=none (or its source's \
         AutoOffsetReset::None); commit offsets for the group first (kafka-consumer-groups.sh \
         --reset-offsets --group <application.id>) or set auto.offset.reset (or the source's \
         policy) to earliest or latest",
        if partitions.is_empty() {
            "a partition".to_string()
        } else {
            partitions.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
        }
    )]
    NoCommittedOffset {
        /// The partitions without one, as far as the consumer could tell.
        partitions: Vec<TopicPartition>,
    },
    /// A stream thread panicked outside the processors (a processor's
    /// panic is a processing error, for the processing handler).
    #[error("stream thread {thread} panicked: {message}")]
    ThreadPanicked {
        /// The thread.
        thread: String,
        /// The panic's message.
        message: String,
    },
    /// librdkafka did not answer a transaction call within its timeout
    /// (it can wait forever when the coordinators move mid-call): the
    /// producer is given up and the thread rejoins with a new one, whose
    /// init fences the old and aborts its transaction.
    #[error("the transactional producer did not answer {operation} within {waited:?}")]
    TransactionStalled {
        /// The call that hung.
        operation: &'static str,
        /// How long the thread waited for it.
        waited: std::time::Duration,
    },
    /// `start` on an application that is not in state CREATED.
    #[error("the application can only be started once, from state CREATED; it is {0:?}")]
    IllegalState(State),
    /// `KafkaStreams::clean_up` while the application runs (Kafka Streams'
    /// `IllegalStateException("Cannot clean up while running.")`).
    #[error(
        "cannot clean up while running: the application is {0:?}; clean_up() deletes the local \
         state only before start() or after close() (states Created, NotRunning and Error)"
    )]
    CleanUpWhileRunning(State),
    /// `KafkaStreams::remove_stream_thread` asked a thread to stop and it
    /// did not within the timeout (Kafka Streams' `TimeoutException`). The
    /// thread is no longer counted and finishes stopping on its own;
    /// `close` waits for it.
    #[error(
        "stream thread {thread} did not stop within {timeout:?}; it goes on shutting down \
         (committing and closing its tasks) and close() waits for it: give \
         remove_stream_thread a longer timeout to wait for the shutdown"
    )]
    ThreadRemovalTimedOut {
        /// The thread being removed.
        thread: String,
        /// How long `remove_stream_thread` waited.
        timeout: std::time::Duration,
    },
}

impl RuntimeError {
    /// Whether the thread's transactional producer was fenced: another
    /// producer with its transactional id took over, or its epoch is
    /// stale. The thread rejoins with a new producer instead of failing.
    pub fn is_producer_fenced(&self) -> bool {
        use rdkafka::types::RDKafkaErrorCode;
        let code = match self {
            RuntimeError::Kafka(e) | RuntimeError::Production { source: e, .. } => e.code(),
            _ => None,
        };
        // librdkafka reports fencing as its own `Fenced` code; the broker's
        // codes may still surface from older paths.
        matches!(
            code,
            Some(
                RDKafkaErrorCode::Fenced
                    | RDKafkaErrorCode::ProducerFenced
                    | RDKafkaErrorCode::InvalidProducerEpoch
            )
        )
    }
}

impl RuntimeError {
    /// Whether a record could not be produced for a reason that passes
    /// (librdkafka's message timeout after the leader or the replicas went
    /// away, a request timeout, too few in-sync replicas): Kafka Streams'
    /// default production handler answers RETRY to these (KIP-1065, the
    /// producer's `RetriableException`s), and the task is revived from its
    /// last commit (`TaskCorruptedException`) instead of the thread failing.
    pub fn is_retriable_production(&self) -> bool {
        let RuntimeError::Production { source, .. } = self else {
            return false;
        };
        source.code().is_some_and(refusals::retriable)
    }
}

#[cfg(test)]
mod tests {
    use super::{ClientError, RuntimeError};
    use rdkafka::error::KafkaError;
    use rdkafka::types::RDKafkaErrorCode;

    #[test]
    fn fencing_is_told_apart_from_other_failures() {
        let fenced = RuntimeError::Kafka(ClientError::new(KafkaError::MessageProduction(
            RDKafkaErrorCode::ProducerFenced,
        )));
        assert!(fenced.is_producer_fenced());
        let stale = RuntimeError::Kafka(ClientError::new(KafkaError::MessageProduction(
            RDKafkaErrorCode::InvalidProducerEpoch,
        )));
        assert!(stale.is_producer_fenced());
        let other = RuntimeError::Kafka(ClientError::new(KafkaError::MessageProduction(
            RDKafkaErrorCode::MessageSizeTooLarge,
        )));
        assert!(!other.is_producer_fenced());
    }

    #[test]
    fn a_timed_out_record_is_retried_and_a_refused_one_is_not() {
        let production = |code| RuntimeError::Production {
            topic: "out".to_string(),
            partition: 1,
            source: ClientError::new(KafkaError::MessageProduction(code)),
        };
        assert!(production(RDKafkaErrorCode::MessageTimedOut).is_retriable_production());
        assert!(production(RDKafkaErrorCode::NotEnoughReplicas).is_retriable_production());
        assert!(!production(RDKafkaErrorCode::MessageSizeTooLarge).is_retriable_production());
        assert!(!production(RDKafkaErrorCode::TopicAuthorizationFailed).is_retriable_production());
        // The same code outside a delivery is not a production failure.
        let elsewhere = RuntimeError::Kafka(ClientError::new(KafkaError::MessageProduction(
            RDKafkaErrorCode::MessageTimedOut,
        )));
        assert!(!elsewhere.is_retriable_production());
    }
}
