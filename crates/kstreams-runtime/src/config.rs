use std::sync::Arc;

use kstreams_time::{FailOnInvalidTimestamp, TimestampExtractor};

use crate::handlers::{
    DefaultProductionExceptionHandler, DeserializationExceptionHandler,
    LogAndContinueExceptionHandler, LogAndContinueProcessingExceptionHandler,
    LogAndContinueProductionExceptionHandler, LogAndFailExceptionHandler,
    LogAndFailProcessingExceptionHandler, ProcessingExceptionHandler, ProductionExceptionHandler,
};

/// What to do with a record whose key or value cannot be deserialized:
/// Kafka Streams' `default.deserialization.exception.handler`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeserializationHandling {
    /// Log it and stop the task with the error (Kafka Streams' default).
    #[default]
    LogAndFail,
    /// Log it, count it as dropped and go on with the next record.
    LogAndContinue,
}

/// What to do when a processor fails on a record: Kafka Streams'
/// `processing.exception.handler` (KIP-1033).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProcessingHandling {
    /// Stop the task with the error (Kafka Streams' default).
    #[default]
    Fail,
    /// Log it, count it as dropped and go on with the next record.
    Continue,
}

/// What to do when a record cannot be written: it does not serialize, or
/// the broker refuses it. Kafka Streams' `production.exception.handler`
/// set to one of the built-in handlers; a handler of the application's own
/// is a [`ProductionExceptionHandler`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProductionHandling {
    /// Stop with the error (Kafka Streams' default,
    /// [`DefaultProductionExceptionHandler`]). A retriable refusal (a sink
    /// topic that does not exist, a broker without enough replicas, a
    /// record that waited out `delivery.timeout.ms`) is retried from the
    /// last commit instead, as Kafka Streams' default handler answers
    /// RETRY (KIP-1065).
    #[default]
    Fail,
    /// Log it, count it as dropped and go on (records for a sink topic
    /// that does not exist too): [`LogAndContinueProductionExceptionHandler`].
    Continue,
}

/// How a task treats its records.
#[derive(Clone)]
pub struct TaskConfig {
    /// The application id: consumer group, prefix of internal topics.
    pub application_id: String,
    /// The extractor for sources that were given none.
    pub default_timestamp_extractor: Arc<dyn TimestampExtractor>,
    /// Undeserializable records.
    pub deserialization: DeserializationHandling,
    /// Processor failures.
    pub processing: ProcessingHandling,
    /// Records that cannot be written.
    pub production: ProductionHandling,
    /// KIP-1034: records a handler drops (bad bytes, a failing processor)
    /// also go to this topic, with their original key, value, timestamp
    /// and headers, and headers saying what failed and where.
    pub dead_letter_queue: Option<String>,
    /// The stream thread's cache budget for caching stores
    /// (`statestore.cache.max.bytes`; 0 forwards every update).
    pub cache_max_bytes: usize,
    /// Record tracing with W3C `traceparent` headers (off by default).
    pub tracing: crate::TracingConfig,
    /// A deserialization handler of the application's own, in place of
    /// the built-in one `deserialization` names.
    pub deserialization_handler: Option<Arc<dyn DeserializationExceptionHandler>>,
    /// A processing handler of the application's own, in place of the
    /// built-in one `processing` names.
    pub processing_handler: Option<Arc<dyn ProcessingExceptionHandler>>,
    /// A production handler of the application's own, in place of the
    /// built-in one `production` names.
    pub production_handler: Option<Arc<dyn ProductionExceptionHandler>>,
}

impl TaskConfig {
    /// Defaults as Kafka Streams': record timestamps (failing on invalid
    /// ones), fail on bad records and on processor errors.
    pub fn new(application_id: impl Into<String>) -> Self {
        Self {
            application_id: application_id.into(),
            default_timestamp_extractor: Arc::new(FailOnInvalidTimestamp),
            deserialization: DeserializationHandling::default(),
            processing: ProcessingHandling::default(),
            production: ProductionHandling::default(),
            dead_letter_queue: None,
            cache_max_bytes: kstreams_state::ThreadCache::DEFAULT_MAX_BYTES,
            tracing: crate::TracingConfig::default(),
            deserialization_handler: None,
            processing_handler: None,
            production_handler: None,
        }
    }

    /// The deserialization handler in force: the application's own, else
    /// the built-in one `deserialization` names.
    pub(crate) fn deserialization_handler(&self) -> Arc<dyn DeserializationExceptionHandler> {
        if let Some(handler) = &self.deserialization_handler {
            return Arc::clone(handler);
        }
        let dead_letter_queue = self.dead_letter_queue.clone();
        match self.deserialization {
            DeserializationHandling::LogAndFail => {
                Arc::new(LogAndFailExceptionHandler { dead_letter_queue })
            }
            DeserializationHandling::LogAndContinue => {
                Arc::new(LogAndContinueExceptionHandler { dead_letter_queue })
            }
        }
    }

    /// The processing handler in force: the application's own, else the
    /// built-in one `processing` names.
    pub(crate) fn processing_handler(&self) -> Arc<dyn ProcessingExceptionHandler> {
        if let Some(handler) = &self.processing_handler {
            return Arc::clone(handler);
        }
        let dead_letter_queue = self.dead_letter_queue.clone();
        match self.processing {
            ProcessingHandling::Fail => {
                Arc::new(LogAndFailProcessingExceptionHandler { dead_letter_queue })
            }
            ProcessingHandling::Continue => {
                Arc::new(LogAndContinueProcessingExceptionHandler { dead_letter_queue })
            }
        }
    }
}

impl TaskConfig {
    /// The production handler in force: the application's own, else the
    /// built-in one `production` names.
    pub(crate) fn production_handler(&self) -> Arc<dyn ProductionExceptionHandler> {
        if let Some(handler) = &self.production_handler {
            return Arc::clone(handler);
        }
        let dead_letter_queue = self.dead_letter_queue.clone();
        match self.production {
            ProductionHandling::Fail => {
                Arc::new(DefaultProductionExceptionHandler { dead_letter_queue })
            }
            ProductionHandling::Continue => {
                Arc::new(LogAndContinueProductionExceptionHandler { dead_letter_queue })
            }
        }
    }
}

impl std::fmt::Debug for TaskConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskConfig")
            .field("application_id", &self.application_id)
            .field("deserialization", &self.deserialization)
            .field("processing", &self.processing)
            .field("production", &self.production)
            .field("dead_letter_queue", &self.dead_letter_queue)
            .field(
                "own_handlers",
                &(
                    self.deserialization_handler.is_some(),
                    self.processing_handler.is_some(),
                    self.production_handler.is_some(),
                ),
            )
            .field("cache_max_bytes", &self.cache_max_bytes)
            .finish_non_exhaustive()
    }
}
