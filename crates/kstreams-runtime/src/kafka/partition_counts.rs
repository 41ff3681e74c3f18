//! The partition counts of the topics a stream thread writes (and reads),
//! from its producer's metadata on first use, as Kafka Streams' record
//! collector asks `partitionsFor`. One per thread, shared by the record
//! collector (windowed keys, missing partitions) and the sinks whose
//! partitioner needs the count before it chooses.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::producer::{BaseProducer, Producer, ProducerContext};
use rustc_hash::FxHashMap;

use super::client_error::ClientResult;
use super::RuntimeError;

/// How long one metadata request for a topic may take.
const METADATA_TIMEOUT: Duration = Duration::from_secs(30);

/// Partition counts by topic name, asked of the producer once per topic.
/// Generic over the producer's context, which the record collector owns.
pub(crate) struct PartitionCounts<C: ProducerContext> {
    producer: Arc<BaseProducer<C>>,
    known: RefCell<FxHashMap<String, i32>>,
}

impl<C: ProducerContext> PartitionCounts<C> {
    pub(crate) fn new(producer: Arc<BaseProducer<C>>) -> Self {
        Self {
            producer,
            known: RefCell::default(),
        }
    }

    /// The partition count of `topic`: [`RuntimeError::MissingSinkTopic`]
    /// if the topic does not exist.
    pub(crate) fn get(&self, topic: &str) -> Result<i32, RuntimeError> {
        if let Some(&count) = self.known.borrow().get(topic) {
            return Ok(count);
        }
        let metadata = self
            .producer
            .client()
            .fetch_metadata(Some(topic), METADATA_TIMEOUT)
            .client()?;
        let found = metadata.topics().iter().find(|t| t.name() == topic);
        let count = match found {
            None => 0,
            Some(t) => match t.error() {
                Some(rdkafka::types::RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) => 0,
                Some(_) => return Err(RuntimeError::NoPartitionInfo(topic.to_string())),
                None => t.partitions().len() as i32,
            },
        };
        if count == 0 {
            return Err(RuntimeError::MissingSinkTopic {
                topic: topic.to_string(),
            });
        }
        self.known.borrow_mut().insert(topic.to_string(), count);
        Ok(count)
    }

    /// Takes `count` as `topic`'s without asking (tests).
    #[cfg(test)]
    pub(crate) fn insert(&self, topic: &str, count: i32) {
        self.known.borrow_mut().insert(topic.to_string(), count);
    }
}

impl<C: ProducerContext> kstreams_dsl::PartitionCounts for PartitionCounts<C> {
    fn partition_count(&self, topic: &str) -> Result<i32, String> {
        self.get(topic).map_err(|e| e.to_string())
    }
}
