//! Records per second through a real broker: kstreams pass-through and
//! count-by-key beside raw rdkafka consume-and-produce (the ceiling), same
//! broker, same input.
//!
//! ```text
//! eval "$(cargo xtask kafka start)"
//! cargo bench -p kstreams-benches --bench broker_passthrough -- [RECORDS]
//! ```
//!
//! Needs KSTREAMS_BOOTSTRAP; without it, it says so and exits. Each side
//! reads the same 3-partition input (default 200000 records of 100 bytes)
//! and writes its own 3-partition output; the count-by-key
//! (`group_by_key().count()` on 1000 keys, RocksDB store with its changelog,
//! cache off so that every input record yields one output record) writes
//! one update per record. Time runs from the moment the
//! side has joined its consumer group (raw: first record polled; kstreams:
//! state RUNNING) until the output holds every record (raw: producer
//! flushed; kstreams: end offsets of the output), so group joins, which on a
//! fresh broker include creating the offsets topic, are left out of both.

use std::time::{Duration, Instant};

use kstreams::embedded::rdkafka::consumer::{BaseConsumer, Consumer};
use kstreams::embedded::rdkafka::error::KafkaError;
use kstreams::embedded::rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use kstreams::embedded::rdkafka::{ClientConfig, Message};
use kstreams::embedded::{create_topic, unique_name, BOOTSTRAP_ENV};
use kstreams::prelude::*;
use kstreams_benches::send_waiting;

const PARTITIONS: i32 = 3;

type Error = Box<dyn std::error::Error>;

fn main() -> Result<(), Error> {
    let records: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map_or(Ok(200_000), |a| a.parse())?;
    let Ok(bootstrap) = std::env::var(BOOTSTRAP_ENV) else {
        println!("broker_passthrough: {BOOTSTRAP_ENV} not set; start a broker with cargo xtask kafka start");
        return Ok(());
    };
    let input = unique_name("bench-in");
    create_topic(&bootstrap, &input, PARTITIONS, 1)?;
    produce(&bootstrap, &input, records)?;

    let raw_out = unique_name("bench-raw-out");
    create_topic(&bootstrap, &raw_out, PARTITIONS, 1)?;
    let raw = raw_copy(&bootstrap, &input, &raw_out, records)?;

    let ks_out = unique_name("bench-ks-out");
    create_topic(&bootstrap, &ks_out, PARTITIONS, 1)?;
    let ks = kstreams_copy(&bootstrap, &input, &ks_out, records)?;

    let count_out = unique_name("bench-ks-count-out");
    create_topic(&bootstrap, &count_out, PARTITIONS, 1)?;
    let count = kstreams_count(&bootstrap, &input, &count_out, records)?;

    let rate = |d: Duration| records as f64 / d.as_secs_f64();
    println!("records: {records} x 100 B, {PARTITIONS} partitions, broker {bootstrap}");
    println!(
        "raw rdkafka consume+produce: {:>10.0} records/s ({:.2} s)",
        rate(raw),
        raw.as_secs_f64()
    );
    println!(
        "kstreams pass-through:       {:>10.0} records/s ({:.2} s)",
        rate(ks),
        ks.as_secs_f64()
    );
    println!(
        "kstreams / raw:              {:>10.2}",
        rate(ks) / rate(raw)
    );
    println!(
        "kstreams count-by-key:       {:>10.0} records/s ({:.2} s)",
        rate(count),
        count.as_secs_f64()
    );
    println!(
        "count-by-key / raw:          {:>10.2}",
        rate(count) / rate(raw)
    );
    Ok(())
}

fn producer(bootstrap: &str) -> Result<BaseProducer, KafkaError> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "5")
        .set("partitioner", "murmur2_random")
        .create()
}

fn produce(bootstrap: &str, topic: &str, records: usize) -> Result<(), Error> {
    let producer = producer(bootstrap)?;
    let value = [b'x'; 100];
    for i in 0..records {
        let key = format!("key-{}", i % 1000);
        send_waiting(
            &producer,
            BaseRecord::to(topic)
                .key(key.as_bytes())
                .payload(&value[..]),
        )?;
        if i % 1000 == 0 {
            producer.poll(Duration::ZERO);
        }
    }
    producer.flush(Duration::from_secs(60))?;
    Ok(())
}

fn raw_copy(bootstrap: &str, input: &str, output: &str, records: usize) -> Result<Duration, Error> {
    let mut began = None;
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", unique_name("bench-raw"))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()?;
    consumer.subscribe(&[input])?;
    let producer = producer(bootstrap)?;
    let mut copied = 0;
    while copied < records {
        if let Some(message) = consumer.poll(Duration::from_millis(100)) {
            let message = message?;
            began.get_or_insert_with(Instant::now);
            send_waiting(
                &producer,
                BaseRecord::to(output)
                    .key(message.key().unwrap_or_default())
                    .payload(message.payload().unwrap_or_default()),
            )?;
            copied += 1;
            producer.poll(Duration::ZERO);
        }
    }
    producer.flush(Duration::from_secs(60))?;
    Ok(began.map_or(Duration::ZERO, |b| b.elapsed()))
}

fn kstreams_copy(
    bootstrap: &str,
    input: &str,
    output: &str,
    records: usize,
) -> Result<Duration, Error> {
    let builder = StreamsBuilder::new();
    builder
        .stream_with(input, Consumed::with(BytesSerde, BytesSerde))
        .to_with(output, Produced::with(BytesSerde, BytesSerde));
    let config = StreamsConfig::new(unique_name("bench-ks"), bootstrap);
    run_until_output(bootstrap, builder.build()?, config, output, records)
}

fn kstreams_count(
    bootstrap: &str,
    input: &str,
    output: &str,
    records: usize,
) -> Result<Duration, Error> {
    let builder = StreamsBuilder::new();
    builder
        .stream_with(input, Consumed::with(StringSerde, BytesSerde))
        .group_by_key()
        .count_with(None, Materialized::as_("counts"))
        .to_stream()
        .to_with(output, Produced::with(StringSerde, Nullable(I64Serde)));
    let state_dir = tempfile::tempdir()?;
    let mut config = StreamsConfig::new(unique_name("bench-ks-count"), bootstrap);
    config.set("statestore.cache.max.bytes", "0")?;
    config.set("state.dir", &state_dir.path().display().to_string())?;
    run_until_output(bootstrap, builder.build()?, config, output, records)
}

/// Runs `topology` until `output` holds `records` records; the time from
/// RUNNING to then.
fn run_until_output(
    bootstrap: &str,
    topology: Topology,
    config: StreamsConfig,
    output: &str,
    records: usize,
) -> Result<Duration, Error> {
    let mut app = KafkaStreams::new(topology, config);
    let running = std::sync::Arc::new(std::sync::Mutex::new(None));
    let running_at = running.clone();
    app.set_state_listener(move |new, _| {
        if new == State::Running {
            running_at.lock().unwrap().get_or_insert_with(Instant::now);
        }
    });
    app.start()?;
    let watcher: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()?;
    loop {
        let mut total = 0;
        for partition in 0..PARTITIONS {
            let (low, high) =
                watcher.fetch_watermarks(output, partition, Duration::from_secs(5))?;
            total += (high - low) as usize;
        }
        if total >= records {
            break;
        }
        if app.state() == State::Error {
            return Err(format!("kstreams failed: {:?}", app.errors()).into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let began = running
        .lock()
        .unwrap()
        .ok_or("kstreams never reached RUNNING")?;
    let elapsed = began.elapsed();
    app.close(Duration::from_secs(30));
    Ok(elapsed)
}
