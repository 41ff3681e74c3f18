//! The exception handlers of the application's own, as the application
//! sets them: given in code, or named by `default.deserialization.exception.handler`
//! / `processing.exception.handler` / `production.exception.handler` among
//! the handlers it registered.
//! Values only: resolved by `KafkaStreams::start` (after the properties
//! are read and the handlers registered) and when each task's config is
//! made. A built-in handler's class name sets the
//! built-in handling (`DeserializationHandling`, `ProcessingHandling`,
//! `ProductionHandling`) and
//! drops any handler of the application's own chosen before.

use std::sync::Arc;

use super::registry::{Chosen, Registry};
use super::ConfigError;
use crate::handlers::{
    DeserializationExceptionHandler, ProcessingExceptionHandler, ProductionExceptionHandler,
};

/// Kafka Streams' keys.
pub(super) const DESERIALIZATION_KEY: &str = "default.deserialization.exception.handler";
pub(super) const PROCESSING_KEY: &str = "processing.exception.handler";
pub(super) const PRODUCTION_KEY: &str = "production.exception.handler";

/// What the application chose and registered.
#[derive(Clone, Default, Debug)]
pub(crate) struct ExceptionHandlers {
    deserialization: Option<Chosen<dyn DeserializationExceptionHandler>>,
    processing: Option<Chosen<dyn ProcessingExceptionHandler>>,
    production: Option<Chosen<dyn ProductionExceptionHandler>>,
    registered_deserialization: Registry<dyn DeserializationExceptionHandler>,
    registered_processing: Registry<dyn ProcessingExceptionHandler>,
    registered_production: Registry<dyn ProductionExceptionHandler>,
}

/// The handlers in force, resolved.
pub(crate) struct ResolvedHandlers {
    pub(crate) deserialization: Option<Arc<dyn DeserializationExceptionHandler>>,
    pub(crate) processing: Option<Arc<dyn ProcessingExceptionHandler>>,
    pub(crate) production: Option<Arc<dyn ProductionExceptionHandler>>,
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

    pub(super) fn choose_production(
        &mut self,
        chosen: Option<Chosen<dyn ProductionExceptionHandler>>,
    ) {
        self.production = chosen;
    }

    pub(super) fn register_production(
        &mut self,
        name: String,
        handler: Arc<dyn ProductionExceptionHandler>,
    ) {
        self.registered_production.register(name, handler);
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
        let production = self
            .production
            .as_ref()
            .map(|chosen| {
                self.registered_production.resolve(
                    chosen,
                    PRODUCTION_KEY,
                    "ProductionExceptionHandler",
                    "register_production_exception_handler",
                )
            })
            .transpose()?;
        Ok(ResolvedHandlers {
            deserialization,
            processing,
            production,
        })
    }
}

#[cfg(test)]
mod tests {
    use kstreams_dsl::StreamsError;

    use super::*;
    use crate::handlers::{
        ErrorHandlerContext, ProductionError, ProductionResponse, RefusedRecord, Response,
    };
    use crate::kafka::StreamsConfig;
    use crate::{ProcessingHandling, ProductionHandling};

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

    impl ProductionExceptionHandler for Resume {
        fn handle_error(
            &self,
            _: &ErrorHandlerContext<'_>,
            _: &RefusedRecord<'_>,
            _: &ProductionError,
        ) -> ProductionResponse {
            ProductionResponse::resume()
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
        // Kafka Streams 4.4 spells it without `default.`; the old name too.
        for key in [PRODUCTION_KEY, "default.production.exception.handler"] {
            let config = ported(key, "com.example.Resume")
                .register_production_exception_handler("Resume", Arc::new(Resume));
            config.exception_handlers.resolve().unwrap();
            assert!(config.task_config().production_handler.is_some(), "{key}");
        }
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

        let mut config = StreamsConfig::new("app", "localhost:9092")
            .production_exception_handler(Arc::new(Resume));
        config
            .set(
                PRODUCTION_KEY,
                "org.apache.kafka.streams.errors.DefaultProductionExceptionHandler",
            )
            .unwrap();
        let task = config.task_config();
        assert!(task.production_handler.is_none());
        assert_eq!(task.production, ProductionHandling::Fail);
        let config = StreamsConfig::new("app", "localhost:9092")
            .production_handling(ProductionHandling::Continue)
            .production_exception_handler(Arc::new(Resume));
        assert!(config.task_config().production_handler.is_some());
    }
}
