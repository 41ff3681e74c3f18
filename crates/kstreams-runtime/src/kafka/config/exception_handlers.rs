//! The exception handlers of the application's own, as the application
//! sets them: given in code, or named by `default.deserialization.exception.handler`
//! / `processing.exception.handler` among the handlers it registered.
//! Values only: resolved by `KafkaStreams::start` (after the properties
//! are read and the handlers registered) and when each task's config is
//! made. A built-in handler's class name sets the
//! built-in handling (`DeserializationHandling`, `ProcessingHandling`) and
//! drops any handler of the application's own chosen before.

use std::sync::Arc;

use super::registry::{Chosen, Registry};
use super::ConfigError;
use crate::handlers::{DeserializationExceptionHandler, ProcessingExceptionHandler};

/// Kafka Streams' keys.
pub(super) const DESERIALIZATION_KEY: &str = "default.deserialization.exception.handler";
pub(super) const PROCESSING_KEY: &str = "processing.exception.handler";

/// What the application chose and registered.
#[derive(Clone, Default, Debug)]
pub(crate) struct ExceptionHandlers {
    deserialization: Option<Chosen<dyn DeserializationExceptionHandler>>,
    processing: Option<Chosen<dyn ProcessingExceptionHandler>>,
    registered_deserialization: Registry<dyn DeserializationExceptionHandler>,
    registered_processing: Registry<dyn ProcessingExceptionHandler>,
}

/// The handlers in force, resolved.
pub(crate) struct ResolvedHandlers {
    pub(crate) deserialization: Option<Arc<dyn DeserializationExceptionHandler>>,
    pub(crate) processing: Option<Arc<dyn ProcessingExceptionHandler>>,
}

impl ExceptionHandlers {
    pub(super) fn choose_deserialization(
        &mut self,
        chosen: Option<Chosen<dyn DeserializationExceptionHandler>>,
    ) {
        self.deserialization = chosen;
    }

    pub(super) fn choose_processing(
        &mut self,
        chosen: Option<Chosen<dyn ProcessingExceptionHandler>>,
    ) {
        self.processing = chosen;
    }

    pub(super) fn register_deserialization(
        &mut self,
        name: String,
        handler: Arc<dyn DeserializationExceptionHandler>,
    ) {
        self.registered_deserialization.register(name, handler);
    }

    pub(super) fn register_processing(
        &mut self,
        name: String,
        handler: Arc<dyn ProcessingExceptionHandler>,
    ) {
        self.registered_processing.register(name, handler);
    }

    /// The handlers chosen, names resolved among the registered ones: an
    /// unknown name is an error naming its key.
    pub(crate) fn resolve(&self) -> Result<ResolvedHandlers, ConfigError> {
        let deserialization = self
            .deserialization
            .as_ref()
            .map(|chosen| {
                self.registered_deserialization.resolve(
                    chosen,
                    DESERIALIZATION_KEY,
                    "DeserializationExceptionHandler",
                    "register_deserialization_exception_handler",
                )
            })
            .transpose()?;
        let processing = self
            .processing
            .as_ref()
            .map(|chosen| {
                self.registered_processing.resolve(
                    chosen,
                    PROCESSING_KEY,
                    "ProcessingExceptionHandler",
                    "register_processing_exception_handler",
                )
            })
            .transpose()?;
        Ok(ResolvedHandlers {
            deserialization,
            processing,
        })
    }
}

#[cfg(test)]
mod tests {
    use kstreams_dsl::StreamsError;

    use super::*;
    use crate::handlers::{ErrorHandlerContext, Response};
    use crate::kafka::StreamsConfig;
    use crate::ProcessingHandling;

    struct Resume;

    impl ProcessingExceptionHandler for Resume {
        fn handle_error(&self, _: &ErrorHandlerContext<'_>, _: &StreamsError) -> Response {
            Response::resume()
        }
    }

    impl DeserializationExceptionHandler for Resume {
        fn handle_error(&self, _: &ErrorHandlerContext<'_>, _: &StreamsError) -> Response {
            Response::resume()
        }
    }

    fn ported(key: &str, class: &str) -> StreamsConfig {
        StreamsConfig::from_properties([
            ("application.id", "app"),
            ("bootstrap.servers", "localhost:9092"),
            (key, class),
        ])
        .unwrap()
    }

    #[test]
    fn a_class_name_finds_the_handler_registered_under_its_last_part() {
        let config = ported(PROCESSING_KEY, "com.example.Resume")
            .register_processing_exception_handler("Resume", Arc::new(Resume));
        config.exception_handlers.resolve().unwrap();
        assert!(config.task_config().processing_handler.is_some());
        let config = ported(DESERIALIZATION_KEY, "com.example.Resume")
            .register_deserialization_exception_handler("Resume", Arc::new(Resume));
        config.exception_handlers.resolve().unwrap();
        assert!(config.task_config().deserialization_handler.is_some());
    }

    #[test]
    fn an_unregistered_name_fails_start_naming_the_key_and_the_fix() {
        let error = ported(PROCESSING_KEY, "com.example.DeadLetters")
            .register_processing_exception_handler("Other", Arc::new(Resume))
            .exception_handlers
            .resolve()
            .err()
            .expect("nothing registered as DeadLetters")
            .to_string();
        assert!(error.contains(PROCESSING_KEY), "{error}");
        assert!(
            error.contains("register_processing_exception_handler(\"DeadLetters\""),
            "{error}"
        );
        assert!(error.contains("Other is registered"), "{error}");
    }

    #[test]
    fn the_last_choice_wins_between_a_built_in_class_and_a_handler_of_ones_own() {
        let config = StreamsConfig::new("app", "localhost:9092")
            .processing_exception_handler(Arc::new(Resume))
            .processing_handling(ProcessingHandling::Continue);
        assert!(config.task_config().processing_handler.is_none());
        let mut config = StreamsConfig::new("app", "localhost:9092")
            .processing_exception_handler(Arc::new(Resume));
        config
            .set(
                PROCESSING_KEY,
                "org.apache.kafka.streams.errors.LogAndContinueProcessingExceptionHandler",
            )
            .unwrap();
        let task = config.task_config();
        assert!(task.processing_handler.is_none());
        assert_eq!(task.processing, ProcessingHandling::Continue);
    }
}
