//! Benchmarks live in this package as criterion benches, broker benches
//! and the `bench-node` binary of `cargo xtask bench compare`; this is what
//! they share.

use std::time::Duration;

use kstreams::embedded::rdkafka::error::{KafkaError, RDKafkaErrorCode};
use kstreams::embedded::rdkafka::producer::{BaseProducer, BaseRecord};

/// Sends `record`, waiting while librdkafka's queue is full (serving
/// delivery reports frees it) instead of failing: a benchmark's producer
/// runs ahead of the broker on purpose.
pub fn send_waiting(
    producer: &BaseProducer,
    mut record: BaseRecord<'_, [u8], [u8]>,
) -> Result<(), KafkaError> {
    loop {
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                producer.poll(Duration::from_millis(1));
                record = back;
            }
            Err((e, _)) => return Err(e),
        }
    }
}
