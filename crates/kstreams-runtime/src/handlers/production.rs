//! The production exception handler: Kafka Streams'
//! `ProductionExceptionHandler` (KIP-210, KIP-399 for serialization,
//! KIP-1065 for RETRY, KIP-1034 for dead-letter records). It decides what
//! happens to an output record that a sink could not serialize, or that
//! the producer could not write (the broker refused it, or librdkafka gave
//! up after its own retries).
//!
//! Only the application's outputs come here: a changelog record that is
//! not written loses state, so its refusal always fails, as do the
//! failures Kafka Streams treats as fatal (authentication and
//! authorization, an invalid topic, a producer fenced by another
//! instance).
//!
//! ```
//! use kstreams_dsl::StreamsError;
//! use kstreams_runtime::handlers::{
//!     DeadLetterRecord, ErrorHandlerContext, ProductionError, ProductionExceptionHandler,
//!     ProductionResponse, RefusedRecord, SerializationExceptionOrigin,
//! };
//!
//! /// Records too large for the broker go to a topic of their own, whole;
//! /// a broker in trouble is waited out; anything else stops the task.
//! struct OversizedAside;
//!
//! impl ProductionExceptionHandler for OversizedAside {
//!     fn handle_error(
//!         &self,
//!         _context: &ErrorHandlerContext<'_>,
//!         record: &RefusedRecord<'_>,
//!         error: &ProductionError,
//!     ) -> ProductionResponse {
//!         if error.code() == "MSG_SIZE_TOO_LARGE" {
//!             let aside = DeadLetterRecord {
//!                 topic: "oversized".to_string(),
//!                 partition: None,
//!                 key: record.key.map(<[u8]>::to_vec),
//!                 value: Some(format!("{} bytes", record.value.map_or(0, <[u8]>::len)).into_bytes()),
//!                 timestamp: record.timestamp,
//!                 headers: record.headers.clone(),
//!             };
//!             ProductionResponse::resume_with(vec![aside])
//!         } else if error.is_retriable() {
//!             ProductionResponse::retry()
//!         } else {
//!             ProductionResponse::fail()
//!         }
//!     }
//!
//!     fn handle_serialization_error(
//!         &self,
//!         _context: &ErrorHandlerContext<'_>,
//!         _error: &StreamsError,
//!         origin: SerializationExceptionOrigin,
//!     ) -> ProductionResponse {
//!         // A value that does not serialize is skipped; a key never is.
//!         match origin {
//!             SerializationExceptionOrigin::Value => ProductionResponse::resume(),
//!             SerializationExceptionOrigin::Key => ProductionResponse::fail(),
//!         }
//!     }
//! }
//! ```

use kstreams_dsl::StreamsError;
use kstreams_record::{Headers, Timestamp};

use super::{built_in_dead_letters, DeadLetterRecord, ErrorHandlerContext};

/// Which part of a record did not serialize: Kafka Streams'
/// `ProductionExceptionHandler.SerializationExceptionOrigin`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SerializationExceptionOrigin {
    /// The key.
    Key,
    /// The value.
    Value,
}

/// A production handler's decision: Kafka Streams'
/// `ProductionExceptionHandler.Result`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProductionResult {
    /// Drop the record (counted as dropped) and go on. Under exactly-once a
    /// transaction with a refused record cannot commit, so a refusal fails
    /// there whatever the answer; a serialization failure, which sent
    /// nothing, is dropped.
    Resume,
    /// Stop: the stream thread fails with the error.
    Fail,
    /// For a retriable refusal ([`ProductionError::is_retriable`]): the
    /// thread goes back to its last commit and processes from there again
    /// (Kafka Streams' task-corrupted path; under exactly-once the open
    /// transaction is aborted first). For anything else it is
    /// [`ProductionResult::Fail`], as in Kafka Streams.
    Retry,
}

/// A production handler's answer: the decision and the dead-letter records
/// to write (Kafka Streams' `ProductionExceptionHandler.Response`).
#[derive(Debug, Clone, PartialEq)]
pub struct ProductionResponse {
    /// Resume, fail or retry.
    pub result: ProductionResult,
    /// Records to write, whatever the decision. Under exactly-once the
    /// records answering a refusal are not written: they would go into the
    /// transaction the refusal aborts.
    pub dead_letter_records: Vec<DeadLetterRecord>,
}

impl ProductionResponse {
    /// Drop the record and go on.
    pub fn resume() -> Self {
        Self::resume_with(Vec::new())
    }

    /// Drop the record, write `records`, and go on.
    pub fn resume_with(records: Vec<DeadLetterRecord>) -> Self {
        Self {
            result: ProductionResult::Resume,
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
            result: ProductionResult::Fail,
            dead_letter_records: records,
        }
    }

    /// Go back to the last commit and process again.
    pub fn retry() -> Self {
        Self {
            result: ProductionResult::Retry,
            dead_letter_records: Vec::new(),
        }
    }
}

/// An output record the producer could not write, as it was sent: Kafka's
/// `ProducerRecord<byte[], byte[]>`.
#[derive(Debug, Clone, Copy)]
pub struct RefusedRecord<'a> {
    /// Its topic.
    pub topic: &'a str,
    /// Its partition, when one was chosen (`None`: the topic does not
    /// exist, so none could be).
    pub partition: Option<i32>,
    /// Key bytes.
    pub key: Option<&'a [u8]>,
    /// Value bytes.
    pub value: Option<&'a [u8]>,
    /// Timestamp.
    pub timestamp: Timestamp,
    /// Headers.
    pub headers: &'a Headers,
}

/// Why the producer could not write a record: librdkafka's error, with
/// Kafka's name for it and whether Kafka calls it retriable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProductionError {
    code: String,
    message: String,
    retriable: bool,
}

impl ProductionError {
    /// An error named `code` (Kafka's error name, as
    /// `MSG_SIZE_TOO_LARGE`; librdkafka's own errors start with `_`, as
    /// `_MSG_TIMED_OUT`).
    pub fn new(code: impl Into<String>, message: impl Into<String>, retriable: bool) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            retriable,
        }
    }

    /// The error's name: Kafka's protocol name (`NOT_ENOUGH_REPLICAS`,
    /// `MSG_SIZE_TOO_LARGE`, `UNKNOWN_TOPIC_OR_PART`, ...) or librdkafka's
    /// for its local ones (`_MSG_TIMED_OUT`: the record waited
    /// `delivery.timeout.ms`; `_UNKNOWN_TOPIC`).
    pub fn code(&self) -> &str {
        &self.code
    }

    /// Whether Kafka calls it retriable (a `RetriableException`: the same
    /// record may go through later, e.g. once a leader is elected).
    pub fn is_retriable(&self) -> bool {
        self.retriable
    }
}

impl std::fmt::Display for ProductionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for ProductionError {}

/// Decides what happens to an output record that could not be written:
/// Kafka Streams' `ProductionExceptionHandler`. Called on the stream
/// thread; a panic in it fails the thread, as an exception thrown by Kafka
/// Streams' handler does.
pub trait ProductionExceptionHandler: Send + Sync + 'static {
    /// The producer could not write `record`. `context` names the task and
    /// the sink that wrote it; the record it came from has long been
    /// processed by then (Kafka Streams hands the record being processed
    /// when the report arrives, an unrelated one), so its topic is `None`,
    /// partition and offset -1 and its raw key and value `None`.
    fn handle_error(
        &self,
        context: &ErrorHandlerContext<'_>,
        record: &RefusedRecord<'_>,
        error: &ProductionError,
    ) -> ProductionResponse;

    /// A sink could not serialize the key or the value of a record
    /// (`error` is a [`StreamsError::Serialization`]); `context` is the
    /// record being processed, raw bytes included. Fails unless
    /// overridden, as Kafka Streams' default method does.
    fn handle_serialization_error(
        &self,
        context: &ErrorHandlerContext<'_>,
        error: &StreamsError,
        origin: SerializationExceptionOrigin,
    ) -> ProductionResponse {
        let _ = (context, error, origin);
        ProductionResponse::fail()
    }
}

/// Kafka Streams' `DefaultProductionExceptionHandler` (the default): fail,
/// except that a retriable refusal is retried from the last commit.
///
/// The dead-letter queue takes records that did not serialize (with the
/// source record, as Kafka Streams writes them). A refusal has no source
/// record by the time it is reported, so the built-in handlers write no
/// dead letter for it (Kafka Streams writes the record it happens to be
/// processing then).
#[derive(Debug, Clone, Default)]
pub struct DefaultProductionExceptionHandler {
    /// Where a failed record goes first (KIP-1034), if anywhere.
    pub dead_letter_queue: Option<String>,
}

impl ProductionExceptionHandler for DefaultProductionExceptionHandler {
    fn handle_error(
        &self,
        _context: &ErrorHandlerContext<'_>,
        _record: &RefusedRecord<'_>,
        error: &ProductionError,
    ) -> ProductionResponse {
        if error.is_retriable() {
            ProductionResponse::retry()
        } else {
            ProductionResponse::fail()
        }
    }

    fn handle_serialization_error(
        &self,
        context: &ErrorHandlerContext<'_>,
        error: &StreamsError,
        _origin: SerializationExceptionOrigin,
    ) -> ProductionResponse {
        ProductionResponse::fail_with(built_in_dead_letters(
            &self.dead_letter_queue,
            context,
            error,
        ))
    }
}

/// Logs a record that cannot be written, counts it as dropped and goes on
/// (kstreams' `production.exception.handler` "continue", Kafka Streams'
/// `AlwaysContinueProductionExceptionHandler` of old).
#[derive(Debug, Clone, Default)]
pub struct LogAndContinueProductionExceptionHandler {
    /// Where the dropped record goes (KIP-1034), if anywhere.
    pub dead_letter_queue: Option<String>,
}

impl ProductionExceptionHandler for LogAndContinueProductionExceptionHandler {
    fn handle_error(
        &self,
        _context: &ErrorHandlerContext<'_>,
        _record: &RefusedRecord<'_>,
        _error: &ProductionError,
    ) -> ProductionResponse {
        ProductionResponse::resume()
    }

    fn handle_serialization_error(
        &self,
        context: &ErrorHandlerContext<'_>,
        error: &StreamsError,
        _origin: SerializationExceptionOrigin,
    ) -> ProductionResponse {
        ProductionResponse::resume_with(built_in_dead_letters(
            &self.dead_letter_queue,
            context,
            error,
        ))
    }
}
