//! How fast plain rdkafka clients move small records through a broker: a
//! smoke figure for the test setup, not a benchmark of kstreams.
//!
//! ```text
//! eval "$(cargo xtask kafka start)"
//! cargo run --release -p kstreams-embedded --example broker_throughput -- [RECORDS] [VALUE_BYTES]
//! ```
//!
//! Uses the broker in KSTREAMS_BOOTSTRAP, or an in-process mock cluster when
//! it is not set. Defaults: 100000 records of 100 bytes, 3 partitions.

use std::time::{Duration, Instant};

use kstreams_embedded::rdkafka::config::ClientConfig;
use kstreams_embedded::rdkafka::consumer::{BaseConsumer, Consumer};
use kstreams_embedded::rdkafka::error::{KafkaError, RDKafkaErrorCode};
use kstreams_embedded::rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use kstreams_embedded::rdkafka::{Offset, TopicPartitionList};
use kstreams_embedded::{create_topic, unique_name, EmbeddedKafka, BOOTSTRAP_ENV};

const PARTITIONS: i32 = 3;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let records: usize = args.next().map_or(Ok(100_000), |a| a.parse())?;
    let value_bytes: usize = args.next().map_or(Ok(100), |a| a.parse())?;

    let topic = unique_name("throughput");
    // Kept alive until the end when used: dropping it stops the mock cluster.
    let mut _mock = None;
    let bootstrap = match std::env::var(BOOTSTRAP_ENV) {
        Ok(bootstrap) => {
            create_topic(&bootstrap, &topic, PARTITIONS, 1)?;
            println!("broker: {bootstrap}");
            bootstrap
        }
        Err(_) => {
            let mock = EmbeddedKafka::start(1)?;
            mock.create_topic(&topic, PARTITIONS, 1)?;
            let bootstrap = mock.bootstrap_servers();
            println!("broker: in-process mock cluster ({BOOTSTRAP_ENV} not set)");
            _mock = Some(mock);
            bootstrap
        }
    };

    let elapsed = produce(&bootstrap, &topic, records, value_bytes)?;
    report(
        "produce (acks=all, until flushed)",
        records,
        value_bytes,
        elapsed,
    );
    let elapsed = consume(&bootstrap, &topic, records)?;
    report(
        "consume (from the beginning)",
        records,
        value_bytes,
        elapsed,
    );
    Ok(())
}

fn produce(
    bootstrap: &str,
    topic: &str,
    records: usize,
    value_bytes: usize,
) -> Result<Duration, KafkaError> {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("linger.ms", "5")
        .create()?;
    let value = vec![b'x'; value_bytes];
    let began = Instant::now();
    for i in 0..records {
        let key = i.to_string();
        let mut record = BaseRecord::to(topic).key(&key).payload(&value);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    producer.poll(Duration::from_millis(1));
                }
                Err((error, _)) => return Err(error),
            }
        }
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(60))?;
    Ok(began.elapsed())
}

fn consume(bootstrap: &str, topic: &str, records: usize) -> Result<Duration, KafkaError> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "throughput")
        .set("enable.auto.commit", "false")
        .create()?;
    let mut assignment = TopicPartitionList::new();
    for partition in 0..PARTITIONS {
        assignment.add_partition_offset(topic, partition, Offset::Beginning)?;
    }
    consumer.assign(&assignment)?;
    let began = Instant::now();
    let mut received = 0;
    while received < records {
        if let Some(message) = consumer.poll(Duration::from_millis(100)) {
            message?;
            received += 1;
        }
        if began.elapsed() > Duration::from_secs(120) {
            eprintln!("gave up after {received} of {records} records");
            break;
        }
    }
    Ok(began.elapsed())
}

fn report(what: &str, records: usize, value_bytes: usize, elapsed: Duration) {
    let seconds = elapsed.as_secs_f64();
    println!(
        "{what}: {records} records of {value_bytes} B in {seconds:.2} s = {:.0} records/s, {:.1} MB/s",
        records as f64 / seconds,
        (records * value_bytes) as f64 / seconds / 1e6
    );
}
