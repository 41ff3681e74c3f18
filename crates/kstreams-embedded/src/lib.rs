//! Kafka for kstreams' tests and examples.
//!
//! This crate owns the two brokers kstreams is tested against:
//!
//! - [`EmbeddedKafka`]: librdkafka's mock cluster, in process, started in
//!   milliseconds. It speaks enough of the protocol for producers, consumers,
//!   consumer groups and transactions, and lets a test inject faults (failed
//!   requests, brokers going down). It does not filter aborted transactions,
//!   so exactly-once behaviour is tested on the real broker only.
//! - The real Apache Kafka broker that `cargo xtask kafka start` (or
//!   `cargo xtask ci`) runs: tests find it through [`test_broker`], which
//!   reads `KSTREAMS_BOOTSTRAP`, and create topics on it with [`create_topic`].
//!
//! ```
//! use kstreams_embedded::EmbeddedKafka;
//!
//! let kafka = EmbeddedKafka::start(3)?;
//! kafka.create_topic("words", 3, 3)?;
//! let bootstrap = kafka.bootstrap_servers(); // hand this to producers and consumers
//! # assert!(!bootstrap.is_empty());
//! # Ok::<(), kstreams_embedded::Error>(())
//! ```

#![forbid(unsafe_code)]

mod broker;
mod mock;

pub use broker::{
    create_topic, create_topic_with_config, delete_topics, test_broker, unique_name, BOOTSTRAP_ENV,
};
pub use mock::EmbeddedKafka;

/// The rdkafka this crate is built on, so tests use the very same version.
pub use rdkafka;

use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;

/// What can go wrong starting a cluster or creating a topic.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A cluster needs at least one broker.
    #[error("a cluster needs at least one broker, not {0}")]
    NoBrokers(i32),
    /// librdkafka refused an operation.
    #[error(transparent)]
    Kafka(#[from] KafkaError),
    /// The broker refused to create a topic.
    #[error("creating topic {topic} failed: {code}")]
    CreateTopic {
        /// The topic that was not created.
        topic: String,
        /// Why, as the broker said.
        code: RDKafkaErrorCode,
    },
    /// The broker refused to delete a topic.
    #[error("deleting topic {topic} failed: {code}")]
    DeleteTopic {
        /// The topic that was not deleted.
        topic: String,
        /// Why, as the broker said.
        code: RDKafkaErrorCode,
    },
}
