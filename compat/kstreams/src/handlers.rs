//! processing-handler-by-type: a processing exception handler of the
//! application's own, named in the properties by the Java class name and
//! registered under its last part, as a port of a Kafka Streams
//! application does (Java's `DeadLettersByType` and
//! `DoubleOrRejectByType`).

use std::fmt;
use std::sync::Arc;

use kstreams::prelude::*;
use kstreams::runtime::handlers::{
    DeadLetterRecord, ErrorHandlerContext, ProcessingExceptionHandler, Response,
};
use kstreams::runtime::kafka::ConfigError;

/// processing-handler-by-type: numbers as decimal text doubled by
/// [`DoubleOrRejectByType`].
pub(crate) fn processing_handler_by_type(builder: &StreamsBuilder, input: &str, output: &str) {
    builder
        .stream_with(input, Consumed::with(StringSerde, StringSerde))
        .process(|| DoubleOrRejectByType, &[])
        .to_with(output, Produced::with(StringSerde, StringSerde));
}

/// Sets the handler for `run`: named by the property, as the Java side's
/// properties name `dev.kstreams.compat.DeadLettersByType`, and registered
/// under its last part.
pub(crate) fn with_handler(
    mut config: StreamsConfig,
    dead_letters: &str,
) -> Result<StreamsConfig, ConfigError> {
    config.set(
        "processing.exception.handler",
        "dev.kstreams.compat.DeadLettersByType",
    )?;
    Ok(config.register_processing_exception_handler(
        "DeadLettersByType",
        Arc::new(DeadLettersByType {
            dead_letters: dead_letters.to_string(),
        }),
    ))
}

/// How [`DoubleOrRejectByType`] fails: Java's `IllegalArgumentException`
/// and `IllegalStateException`.
#[derive(Debug)]
enum Rejected {
    MultipleOfSeven(String),
    MultipleOfEleven(String),
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejected::MultipleOfSeven(n) => write!(f, "cannot process {n}: a multiple of seven"),
            Rejected::MultipleOfEleven(n) => write!(f, "cannot process {n}: a multiple of eleven"),
        }
    }
}

impl std::error::Error for Rejected {}

/// Doubles a number; fails on a multiple of seven, and on another
/// multiple of eleven, each with its kind of error.
struct DoubleOrRejectByType;

impl Processor<String, String, String, String> for DoubleOrRejectByType {
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, String>,
        record: Record<String, String>,
    ) -> Result<(), ProcessorError> {
        let n: i64 = record.value.parse()?;
        if n % 7 == 0 {
            return Err(Rejected::MultipleOfSeven(record.value).into());
        }
        if n % 11 == 0 {
            return Err(Rejected::MultipleOfEleven(record.value).into());
        }
        ctx.forward(record.with_value((2 * n).to_string()))?;
        Ok(())
    }
}

/// Dead-letters a multiple of seven (with the headers Kafka Streams' own
/// handlers write, the exception named as the Java side's), drops a
/// multiple of eleven, fails on anything else.
struct DeadLettersByType {
    dead_letters: String,
}

impl ProcessingExceptionHandler for DeadLettersByType {
    fn handle_error(&self, context: &ErrorHandlerContext<'_>, error: &StreamsError) -> Response {
        let StreamsError::Processing { source, .. } = error else {
            return Response::fail();
        };
        match source.downcast_ref::<Rejected>() {
            Some(rejected @ Rejected::MultipleOfSeven(_)) => {
                const CLASS: &str = "java.lang.IllegalArgumentException";
                let message = rejected.to_string();
                let mut headers = context.headers.clone();
                headers.add("__streams.errors.exception", Some(CLASS));
                headers.add("__streams.errors.message", Some(message.as_str()));
                headers.add(
                    "__streams.errors.stacktrace",
                    Some(format!("{CLASS}: {message}\n")),
                );
                headers.add("__streams.errors.topic", context.topic);
                headers.add(
                    "__streams.errors.partition",
                    Some(context.partition.to_string()),
                );
                headers.add("__streams.errors.offset", Some(context.offset.to_string()));
                Response::resume_with(vec![DeadLetterRecord {
                    topic: self.dead_letters.clone(),
                    partition: None,
                    key: context.source_raw_key.map(<[u8]>::to_vec),
                    value: context.source_raw_value.map(<[u8]>::to_vec),
                    timestamp: context.timestamp,
                    headers,
                }])
            }
            Some(Rejected::MultipleOfEleven(_)) => Response::resume(),
            None => Response::fail(),
        }
    }
}
