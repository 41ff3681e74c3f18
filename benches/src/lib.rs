//! Benchmarks live in this package as criterion benches, broker benches
//! and the `bench-node` binary of `cargo xtask bench compare`; this is what
//! they share.

#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use kstreams::embedded::rdkafka::error::{KafkaError, RDKafkaErrorCode};
use kstreams::embedded::rdkafka::producer::{BaseProducer, BaseRecord, Producer};

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

/// Waits until every record sent is acknowledged (what an at-least-once
/// commit needs first), serving delivery reports meanwhile. rust-rdkafka's
/// `flush` serves them with `poll(100 ms)`, which returns only at its
/// deadline: a flush with a record in flight stood still for 100 ms, half
/// of a loop committing every 100 ms. Each step here serves the reports
/// that have arrived and pauses 0.1 ms, as kstreams' own flush does
/// (crates/kstreams-runtime/src/kafka/record_collector.rs).
pub fn flush_promptly(producer: &BaseProducer, timeout: Duration) -> Result<(), KafkaError> {
    let deadline = Instant::now() + timeout;
    loop {
        match producer.flush(Duration::ZERO) {
            Err(KafkaError::Flush(RDKafkaErrorCode::OperationTimedOut))
                if Instant::now() < deadline =>
            {
                producer.poll(Duration::ZERO);
                std::thread::sleep(Duration::from_micros(100));
            }
            other => return other,
        }
    }
}
