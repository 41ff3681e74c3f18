//! A produce/consume round trip shared by the mock-cluster and real-broker
//! tests: whatever the cluster, every record must come back to its partition,
//! in order, with its key and value.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kstreams_embedded::rdkafka::config::ClientConfig;
use kstreams_embedded::rdkafka::consumer::{BaseConsumer, Consumer};
use kstreams_embedded::rdkafka::error::{KafkaError, RDKafkaErrorCode};
use kstreams_embedded::rdkafka::producer::{
    BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext,
};
use kstreams_embedded::rdkafka::{ClientContext, Message, Offset, TopicPartitionList};

const TIMEOUT: Duration = Duration::from_secs(60);

/// Records sent per partition: `(key, value)` in send order.
pub(crate) type Sent = BTreeMap<i32, Vec<(String, String)>>;

/// Produces `count` records round-robin over `partitions`, then reads the
/// topic from the beginning and asserts it holds exactly those records.
pub(crate) fn round_trip(bootstrap: &str, topic: &str, partitions: i32, count: usize) {
    let sent = produce(bootstrap, topic, partitions, count);
    let received = consume(bootstrap, topic, partitions, count);
    assert_eq!(received, sent);
}

/// Counts failed deliveries, which BaseProducer reports only to its context.
#[derive(Default)]
struct DeliveryCounter {
    failed: AtomicUsize,
}

impl ClientContext for DeliveryCounter {}

impl ProducerContext for DeliveryCounter {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((error, _)) = result {
            eprintln!("delivery failed: {error}");
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

pub(crate) fn produce(bootstrap: &str, topic: &str, partitions: i32, count: usize) -> Sent {
    let producer: BaseProducer<DeliveryCounter> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .create_with_context(DeliveryCounter::default())
        .expect("producer");
    let mut sent = Sent::new();
    for i in 0..count {
        let partition = i as i32 % partitions;
        let (key, value) = (format!("key-{i}"), format!("value-{i}"));
        send(
            &producer,
            BaseRecord::to(topic)
                .partition(partition)
                .key(&key)
                .payload(&value),
        );
        sent.entry(partition).or_default().push((key, value));
    }
    producer.flush(TIMEOUT).expect("flush");
    assert_eq!(
        producer.context().failed.load(Ordering::Relaxed),
        0,
        "failed deliveries"
    );
    sent
}

/// Sends, waiting for room when the local queue is full.
fn send(producer: &BaseProducer<DeliveryCounter>, mut record: BaseRecord<'_, String, String>) {
    loop {
        match producer.send(record) {
            Ok(()) => return,
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                record = back;
                producer.poll(Duration::from_millis(10));
            }
            Err((error, _)) => panic!("send failed: {error}"),
        }
    }
}

pub(crate) fn consume(bootstrap: &str, topic: &str, partitions: i32, count: usize) -> Sent {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "kstreams-embedded-tests")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    for partition in 0..partitions {
        assignment
            .add_partition_offset(topic, partition, Offset::Beginning)
            .expect("partition offset");
    }
    consumer.assign(&assignment).expect("assign");

    let mut received = Sent::new();
    let mut total = 0;
    let deadline = Instant::now() + TIMEOUT;
    while total < count {
        assert!(
            Instant::now() < deadline,
            "received {total} of {count} records"
        );
        let Some(message) = consumer.poll(Duration::from_millis(100)) else {
            continue;
        };
        let message = message.expect("consume");
        let text = |bytes: Option<&[u8]>| {
            String::from_utf8(bytes.expect("present").to_vec()).expect("UTF-8")
        };
        received
            .entry(message.partition())
            .or_default()
            .push((text(message.key()), text(message.payload())));
        total += 1;
    }
    received
}
