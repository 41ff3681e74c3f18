//! Exception handlers of the application's own (Kafka Streams'
//! `DeserializationExceptionHandler`, `ProcessingExceptionHandler` and
//! `ProductionExceptionHandler`, KIP-1033 and KIP-1034): what happens to a
//! record that does not deserialize, that a processor fails on, or that
//! cannot be written ([`ProductionExceptionHandler`]), decided by code that sees
//! where it failed ([`ErrorHandlerContext`]) and what failed, and answers
//! resume or fail, with dead-letter records of its own making.
//!
//! Set in code ([`StreamsConfig::deserialization_exception_handler`],
//! [`StreamsConfig::processing_exception_handler`],
//! [`StreamsConfig::production_exception_handler`]) or by name from
//! properties (`default.deserialization.exception.handler`,
//! `processing.exception.handler`, `production.exception.handler` naming a
//! handler registered with
//! [`StreamsConfig::register_deserialization_exception_handler`] /
//! [`StreamsConfig::register_processing_exception_handler`] /
//! [`StreamsConfig::register_production_exception_handler`]; a Java class
//! name finds the handler registered under its last part). The built-in
//! handlers are the ones below; they write Kafka Streams' dead-letter
//! record when `errors.dead.letter.queue.topic.name` is set.
//!
//! [`StreamsConfig::deserialization_exception_handler`]: crate::kafka::StreamsConfig::deserialization_exception_handler
//! [`StreamsConfig::processing_exception_handler`]: crate::kafka::StreamsConfig::processing_exception_handler
//! [`StreamsConfig::register_deserialization_exception_handler`]: crate::kafka::StreamsConfig::register_deserialization_exception_handler
//! [`StreamsConfig::register_processing_exception_handler`]: crate::kafka::StreamsConfig::register_processing_exception_handler
//! [`StreamsConfig::production_exception_handler`]: crate::kafka::StreamsConfig::production_exception_handler
//! [`StreamsConfig::register_production_exception_handler`]: crate::kafka::StreamsConfig::register_production_exception_handler
//!
//! ```
//! use kstreams_dsl::StreamsError;
//! use kstreams_runtime::handlers::{
//!     DeadLetterRecord, ErrorHandlerContext, ProcessingExceptionHandler, Response,
//! };
//!
//! /// Records a processor panics on go to a topic of their own and
//! /// processing goes on; any other failure stops the application.
//! struct PanicsAside;
//!
//! impl ProcessingExceptionHandler for PanicsAside {
//!     fn handle_error(&self, context: &ErrorHandlerContext<'_>, error: &StreamsError) -> Response {
//!         match error {
//!             StreamsError::Panic { .. } => {
//!                 Response::resume_with(vec![DeadLetterRecord::for_error("panics", context, error)])
//!             }
//!             _ => Response::fail(),
//!         }
//!     }
//! }
//! ```

use kstreams_dsl::{StreamsError, TaskId};
use kstreams_record::{Headers, Timestamp};

mod production;

pub use production::{
    DefaultProductionExceptionHandler, LogAndContinueProductionExceptionHandler, ProductionError,
    ProductionExceptionHandler, ProductionResponse, ProductionResult, RefusedRecord,
    SerializationExceptionOrigin,
};

/// Where a record failed, as a handler sees it: Kafka Streams'
/// `ErrorHandlerContext`. For a failure outside a record (a punctuation)
/// the topic is `None`, partition and offset -1 and the raw key and value
/// `None`, as Kafka Streams gives null and -1.
#[derive(Debug, Clone, Copy)]
pub struct ErrorHandlerContext<'a> {
    /// The topic of the record being processed.
    pub topic: Option<&'a str>,
    /// Its partition.
    pub partition: i32,
    /// Its offset.
    pub offset: i64,
    /// Its headers, as consumed.
    pub headers: &'a Headers,
    /// The processor node that failed (the source node for a record that
    /// does not deserialize).
    pub processor_node_id: &'a str,
    /// The task.
    pub task_id: TaskId,
    /// The record's timestamp.
    pub timestamp: Timestamp,
    /// The key bytes of the source record, as consumed.
    pub source_raw_key: Option<&'a [u8]>,
    /// The value bytes of the source record, as consumed.
    pub source_raw_value: Option<&'a [u8]>,
}

/// A handler's decision: Kafka Streams' `Result` of its handlers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandlerResult {
    /// Drop the record (counted as dropped) and go on with the next.
    Resume,
    /// Stop the task with the error: the stream thread fails (its
    /// uncaught-exception handler decides what follows).
    Fail,
}

/// A handler's answer: the decision and the dead-letter records to write
/// (Kafka Streams' `Response`, KIP-1034). The records are written to the
/// topics they name, with the task's other outputs (in its transaction
/// under exactly-once), whether the answer resumes or fails.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// Resume or fail.
    pub result: HandlerResult,
    /// Records to write.
    pub dead_letter_records: Vec<DeadLetterRecord>,
}

impl Response {
    /// Drop the record and go on.
    pub fn resume() -> Self {
        Self::resume_with(Vec::new())
    }

    /// Drop the record, write `records`, and go on.
    pub fn resume_with(records: Vec<DeadLetterRecord>) -> Self {
        Self {
            result: HandlerResult::Resume,
            dead_letter_records: records,
        }
    }

    /// Fail.
    pub fn fail() -> Self {
        Self::fail_with(Vec::new())
    }

    /// Write `records`, then fail.
    pub fn fail_with(records: Vec<DeadLetterRecord>) -> Self {
        Self {
            result: HandlerResult::Fail,
            dead_letter_records: records,
        }
    }
}

/// A record a handler writes: Kafka's `ProducerRecord<byte[], byte[]>`.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetterRecord {
    /// The topic (it must exist).
    pub topic: String,
    /// The partition, or `None` for the producer's choice by key.
    pub partition: Option<i32>,
    /// Key bytes.
    pub key: Option<Vec<u8>>,
    /// Value bytes.
    pub value: Option<Vec<u8>>,
    /// Timestamp.
    pub timestamp: Timestamp,
    /// Headers.
    pub headers: Headers,
}

impl DeadLetterRecord {
    /// The dead-letter record Kafka Streams 4.4's built-in handlers write
    /// (`ExceptionHandlerUtils.buildDeadLetterQueueRecord`): the source
    /// record's key and value as consumed, its timestamp, its headers
    /// followed by `__streams.errors.exception` (the Java class of the
    /// failure), `.message`, `.stacktrace`, `.topic`, `.partition` and
    /// `.offset`.
    ///
    /// Rust errors have no Java class, so each kind takes the class Kafka
    /// Streams' handler sees for it: a deserializer's or serializer's
    /// failure is Kafka's `SerializationException`; a processor's error or
    /// panic, user code failing, is an unchecked `RuntimeException`. The
    /// message is the failure's own (as `getMessage()` of the exception a
    /// handler receives, Kafka's own text for its serdes' failures), not
    /// kstreams' text around it; the stack trace has Java's first line and
    /// a `Caused by: ` line per cause, without frames, which Rust does not
    /// keep.
    pub fn for_error(
        topic: impl Into<String>,
        context: &ErrorHandlerContext<'_>,
        error: &StreamsError,
    ) -> Self {
        const SERIALIZATION_EXCEPTION: &str =
            "org.apache.kafka.common.errors.SerializationException";
        const RUNTIME_EXCEPTION: &str = "java.lang.RuntimeException";
        let (class, message, cause): (&str, String, Option<&dyn std::error::Error>) = match error {
            StreamsError::Deserialization { source, .. }
            | StreamsError::Serialization { source, .. } => (
                SERIALIZATION_EXCEPTION,
                source.kafka_message(),
                std::error::Error::source(&**source),
            ),
            StreamsError::Processing { source, .. } => (
                RUNTIME_EXCEPTION,
                source.to_string(),
                std::error::Error::source(&**source),
            ),
            StreamsError::Panic { message, .. } => (RUNTIME_EXCEPTION, message.clone(), None),
            other => (
                RUNTIME_EXCEPTION,
                other.to_string(),
                std::error::Error::source(other),
            ),
        };
        // `Throwable.toString()` and `printStackTrace`'s line per cause;
        // Java ends each line with the platform's separator, "\n" here.
        let mut stacktrace = format!("{class}: {message}\n");
        let mut cause = cause;
        while let Some(e) = cause {
            stacktrace.push_str(&format!("Caused by: {RUNTIME_EXCEPTION}: {e}\n"));
            cause = e.source();
        }
        let mut headers = context.headers.clone();
        headers.add("__streams.errors.exception", Some(class.as_bytes()));
        headers.add("__streams.errors.message", Some(message.into_bytes()));
        headers.add("__streams.errors.stacktrace", Some(stacktrace.into_bytes()));
        // Kafka Streams writes a null topic header for a failure outside a
        // record (its context's topic is null).
        headers.add(
            "__streams.errors.topic",
            context.topic.map(|t| t.as_bytes().to_vec()),
        );
        headers.add(
            "__streams.errors.partition",
            Some(context.partition.to_string().into_bytes()),
        );
        headers.add(
            "__streams.errors.offset",
            Some(context.offset.to_string().into_bytes()),
        );
        Self {
            topic: topic.into(),
            partition: None,
            key: context.source_raw_key.map(<[u8]>::to_vec),
            value: context.source_raw_value.map(<[u8]>::to_vec),
            timestamp: context.timestamp,
            headers,
        }
    }
}

/// Decides what happens to a record whose key or value does not
/// deserialize: Kafka Streams' `DeserializationExceptionHandler`.
/// `error` is a [`StreamsError::Deserialization`].
pub trait DeserializationExceptionHandler: Send + Sync + 'static {
    /// The decision for this record.
    fn handle_error(&self, context: &ErrorHandlerContext<'_>, error: &StreamsError) -> Response;
}

/// Decides what happens when a processor fails on a record (an error it
/// returned, or a panic) or in a punctuation: Kafka Streams'
/// `ProcessingExceptionHandler` (KIP-1033). `error` is a
/// [`StreamsError::Processing`] or [`StreamsError::Panic`].
pub trait ProcessingExceptionHandler: Send + Sync + 'static {
    /// The decision for this record.
    fn handle_error(&self, context: &ErrorHandlerContext<'_>, error: &StreamsError) -> Response;
}

/// The built-in handlers' answer: `result`, with Kafka Streams'
/// dead-letter record when a dead-letter topic is set and there is a
/// source record to write.
fn built_in(
    result: HandlerResult,
    dead_letter_queue: &Option<String>,
    context: &ErrorHandlerContext<'_>,
    error: &StreamsError,
) -> Response {
    Response {
        result,
        dead_letter_records: built_in_dead_letters(dead_letter_queue, context, error),
    }
}

/// Kafka Streams' dead-letter record for a built-in handler: one when a
/// dead-letter topic is set and there is a source record to write (none
/// for a punctuation or a refusal reported after its record was
/// processed).
fn built_in_dead_letters(
    dead_letter_queue: &Option<String>,
    context: &ErrorHandlerContext<'_>,
    error: &StreamsError,
) -> Vec<DeadLetterRecord> {
    match (dead_letter_queue, context.topic) {
        (Some(topic), Some(_)) => vec![DeadLetterRecord::for_error(topic, context, error)],
        _ => Vec::new(),
    }
}

/// Kafka Streams' `LogAndFailExceptionHandler` (the default): the task
/// stops with the error.
#[derive(Debug, Clone, Default)]
pub struct LogAndFailExceptionHandler {
    /// Where the failed record goes first (KIP-1034), if anywhere.
    pub dead_letter_queue: Option<String>,
}

impl DeserializationExceptionHandler for LogAndFailExceptionHandler {
    fn handle_error(&self, context: &ErrorHandlerContext<'_>, error: &StreamsError) -> Response {
        built_in(HandlerResult::Fail, &self.dead_letter_queue, context, error)
    }
}

/// Kafka Streams' `LogAndContinueExceptionHandler`: the record is logged,
/// counted as dropped and skipped.
#[derive(Debug, Clone, Default)]
pub struct LogAndContinueExceptionHandler {
    /// Where the skipped record goes (KIP-1034), if anywhere.
    pub dead_letter_queue: Option<String>,
}

impl DeserializationExceptionHandler for LogAndContinueExceptionHandler {
    fn handle_error(&self, context: &ErrorHandlerContext<'_>, error: &StreamsError) -> Response {
        built_in(
            HandlerResult::Resume,
            &self.dead_letter_queue,
            context,
            error,
        )
    }
}

/// Kafka Streams' `LogAndFailProcessingExceptionHandler` (the default).
#[derive(Debug, Clone, Default)]
pub struct LogAndFailProcessingExceptionHandler {
    /// Where the failed record goes first (KIP-1034), if anywhere.
    pub dead_letter_queue: Option<String>,
}

impl ProcessingExceptionHandler for LogAndFailProcessingExceptionHandler {
    fn handle_error(&self, context: &ErrorHandlerContext<'_>, error: &StreamsError) -> Response {
        built_in(HandlerResult::Fail, &self.dead_letter_queue, context, error)
    }
}

/// Kafka Streams' `LogAndContinueProcessingExceptionHandler`.
#[derive(Debug, Clone, Default)]
pub struct LogAndContinueProcessingExceptionHandler {
    /// Where the skipped record goes (KIP-1034), if anywhere.
    pub dead_letter_queue: Option<String>,
}

impl ProcessingExceptionHandler for LogAndContinueProcessingExceptionHandler {
    fn handle_error(&self, context: &ErrorHandlerContext<'_>, error: &StreamsError) -> Response {
        built_in(
            HandlerResult::Resume,
            &self.dead_letter_queue,
            context,
            error,
        )
    }
}
