//! The in-process mock cluster.

use std::fmt;

use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};

use crate::Error;

/// An in-process Kafka cluster: librdkafka's mock brokers, listening on
/// 127.0.0.1, alive until this value drops.
///
/// Brokers have ids `1..=brokers`. Create topics with
/// [`create_topic`](Self::create_topic) before clients use them. The value is not `Send`
/// (rdkafka's handle is a raw pointer): keep it on the test's thread and hand
/// [`bootstrap_servers`](Self::bootstrap_servers) to clients on any thread.
pub struct EmbeddedKafka {
    // Owns its own librdkafka client (MockCluster::new), hence 'static.
    mock: MockCluster<'static, DefaultProducerContext>,
    brokers: i32,
}

impl EmbeddedKafka {
    /// Starts a mock cluster of `brokers` brokers.
    pub fn start(brokers: i32) -> Result<Self, Error> {
        if brokers < 1 {
            return Err(Error::NoBrokers(brokers));
        }
        Ok(EmbeddedKafka {
            mock: MockCluster::new(brokers)?,
            brokers,
        })
    }

    /// The `bootstrap.servers` list for clients.
    pub fn bootstrap_servers(&self) -> String {
        self.mock.bootstrap_servers()
    }

    /// How many brokers the cluster has.
    pub fn brokers(&self) -> i32 {
        self.brokers
    }

    /// Creates a topic (the mock brokers do not implement the CreateTopics API,
    /// so admin clients cannot).
    pub fn create_topic(&self, name: &str, partitions: i32, replication: i32) -> Result<(), Error> {
        Ok(self.mock.create_topic(name, partitions, replication)?)
    }

    /// Disconnects broker `broker_id` (or all, with -1) and refuses new
    /// connections. Partition leadership does not move.
    pub fn broker_down(&self, broker_id: i32) -> Result<(), Error> {
        Ok(self.mock.broker_down(broker_id)?)
    }

    /// Lets broker `broker_id` (or all, with -1) accept connections again.
    pub fn broker_up(&self, broker_id: i32) -> Result<(), Error> {
        Ok(self.mock.broker_up(broker_id)?)
    }

    /// Makes the next requests of kind `api` fail, one error per request in
    /// order. `RD_KAFKA_RESP_ERR__TRANSPORT` disconnects the client instead.
    pub fn fail_requests(&self, api: RDKafkaApiKey, errors: &[RDKafkaRespErr]) {
        self.mock.request_errors(api, errors);
    }

    /// Drops the errors still queued for requests of kind `api`.
    pub fn clear_request_errors(&self, api: RDKafkaApiKey) {
        self.mock.clear_request_errors(api);
    }

    /// The underlying mock cluster, for faults this type does not wrap
    /// (partition leaders, round-trip times, coordinators, ...).
    pub fn mock(&self) -> &MockCluster<'static, DefaultProducerContext> {
        &self.mock
    }
}

impl fmt::Debug for EmbeddedKafka {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddedKafka")
            .field("brokers", &self.brokers)
            .field("bootstrap_servers", &self.bootstrap_servers())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needs_a_broker() {
        assert!(matches!(EmbeddedKafka::start(0), Err(Error::NoBrokers(0))));
    }

    #[test]
    fn lists_one_address_per_broker() {
        let kafka = EmbeddedKafka::start(3).unwrap();
        assert_eq!(kafka.bootstrap_servers().split(',').count(), 3);
        assert_eq!(kafka.brokers(), 3);
    }
}
