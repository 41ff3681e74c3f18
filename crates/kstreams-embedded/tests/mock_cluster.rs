//! Round trips and fault injection on the in-process mock cluster.

mod common;

use std::time::Duration;

use kstreams_embedded::rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
use kstreams_embedded::EmbeddedKafka;

#[test]
fn records_come_back_to_their_partitions_in_order() {
    let kafka = EmbeddedKafka::start(3).unwrap();
    kafka.create_topic("round-trip", 3, 3).unwrap();
    common::round_trip(&kafka.bootstrap_servers(), "round-trip", 3, 5_000);
}

#[test]
fn retriable_produce_errors_are_retried() {
    let kafka = EmbeddedKafka::start(1).unwrap();
    kafka.create_topic("flaky", 1, 1).unwrap();
    // The idempotent producer retries these; nothing may be lost or reordered.
    kafka.fail_requests(
        RDKafkaApiKey::Produce,
        &[
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT,
        ],
    );
    common::round_trip(&kafka.bootstrap_servers(), "flaky", 1, 100);
}

#[test]
fn records_sent_while_the_broker_is_down_arrive_when_it_is_back() {
    let kafka = EmbeddedKafka::start(1).unwrap();
    kafka.create_topic("outage", 1, 1).unwrap();
    let bootstrap = kafka.bootstrap_servers();
    kafka.broker_down(1).unwrap();
    let producer = {
        let bootstrap = bootstrap.clone();
        std::thread::spawn(move || common::produce(&bootstrap, "outage", 1, 100))
    };
    std::thread::sleep(Duration::from_millis(500));
    kafka.broker_up(1).unwrap();
    let sent = producer.join().unwrap();
    assert_eq!(common::consume(&bootstrap, "outage", 1, 100), sent);
}
