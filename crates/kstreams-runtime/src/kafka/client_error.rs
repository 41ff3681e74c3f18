//! A Kafka client's error, as kstreams' API shows it: librdkafka's types
//! stay inside the runtime, so a new rust-rdkafka is not a breaking change
//! for applications (Kafka Streams likewise wraps its clients' exceptions
//! in its own `StreamsException`).

use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::types::RDKafkaErrorCode;

use super::RuntimeError;

/// What a Kafka client (the consumer, producer or admin client) reported.
/// Its message names the operation and Kafka's (or librdkafka's) error.
#[derive(Debug, Clone, thiserror::Error)]
#[error(transparent)]
pub struct ClientError(KafkaError);

impl ClientError {
    pub(crate) fn new(error: KafkaError) -> Self {
        ClientError(error)
    }

    /// The error code's name, as librdkafka spells it in Rust (e.g.
    /// `"ProducerFenced"`, `"TopicAuthorizationFailed"`), when the error
    /// carries one.
    pub fn code_name(&self) -> Option<String> {
        self.0.rdkafka_error_code().map(|code| format!("{code:?}"))
    }

    /// The error librdkafka reported.
    pub(crate) fn kafka(&self) -> &KafkaError {
        &self.0
    }

    /// Its code, when it carries one.
    pub(crate) fn code(&self) -> Option<RDKafkaErrorCode> {
        self.0.rdkafka_error_code()
    }
}

impl RuntimeError {
    /// A client's error, as [`RuntimeError::Kafka`].
    pub(crate) fn client(error: KafkaError) -> Self {
        RuntimeError::Kafka(ClientError(error))
    }
}

/// `?` for a librdkafka call inside the runtime: its error becomes
/// [`RuntimeError::Kafka`].
pub(crate) trait ClientResult<T> {
    fn client(self) -> Result<T, RuntimeError>;
}

impl<T> ClientResult<T> for KafkaResult<T> {
    fn client(self) -> Result<T, RuntimeError> {
        self.map_err(RuntimeError::client)
    }
}
