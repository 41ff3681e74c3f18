//! Writing the input: all of it before a throughput run, or at a fixed
//! rate during a latency run; and the latency of what came out.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kstreams::embedded::rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use kstreams::embedded::rdkafka::ClientConfig;
use kstreams_benches::send_waiting;

use crate::verify::read_topic;
use crate::workload::{self, InputRecord};
use crate::Error;

fn producer(bootstrap: &str, linger_ms: &str) -> Result<BaseProducer, Error> {
    Ok(ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        // Java's partitioner, so that every implementation reads each key
        // from the partition Kafka Streams would put it in.
        .set("partitioner", "murmur2_random")
        .set("linger.ms", linger_ms)
        .set("queue.buffering.max.messages", "1000000")
        .create()?)
}

fn input_record<'a>(topic: &'a str, record: &'a InputRecord) -> BaseRecord<'a, [u8], [u8]> {
    BaseRecord::to(topic)
        .key(record.key.as_bytes())
        .payload(&record.value[..])
        .timestamp(record.timestamp)
}

/// Produces the whole input of a throughput run.
pub fn produce_all(
    bootstrap: &str,
    topic: &str,
    records: impl Iterator<Item = InputRecord>,
) -> Result<u64, Error> {
    let producer = producer(bootstrap, "20")?;
    let mut sent = 0;
    for record in records {
        send_waiting(&producer, input_record(topic, &record))?;
        sent += 1;
        if sent % 10_000 == 0 {
            producer.poll(Duration::ZERO);
        }
    }
    producer.flush(Duration::from_secs(120))?;
    Ok(sent)
}

fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros() as i64
}

/// Produces `rate` records a second for `seconds`, each value starting
/// with its send time in microseconds (20 digits; a pass-through keeps
/// digits as they are), timestamped now.
pub fn produce_at_rate(
    bootstrap: &str,
    topic: &str,
    seed: u64,
    rate: u64,
    seconds: u64,
) -> Result<u64, Error> {
    // linger.ms 0 held records back for about half a second here (input
    // append time minus send time: p50 451 ms at 10 000 records/s, 2.5 ms
    // at 5 ms): librdkafka batches better with a short linger, even for
    // latency.
    let producer = producer(bootstrap, "5")?;
    let total = rate * seconds;
    let began = Instant::now();
    let mut sent = 0;
    for mut record in workload::stream_input(seed, total, workload::DEFAULT_KEYS) {
        let due = began + Duration::from_secs_f64(sent as f64 / rate as f64);
        let now = Instant::now();
        if due > now {
            producer.poll(Duration::ZERO);
            std::thread::sleep(due - now);
        }
        let micros = now_micros();
        record.value[..20].copy_from_slice(format!("{micros:020}").as_bytes());
        record.timestamp = micros / 1000;
        send_waiting(&producer, input_record(topic, &record))?;
        sent += 1;
        if sent % 100 == 0 {
            producer.poll(Duration::ZERO);
        }
    }
    producer.flush(Duration::from_secs(120))?;
    Ok(sent)
}

/// End-to-end latency percentiles (ms) of `output`, whose topic stamps
/// records with their append time: append time minus the send time in the
/// value, leaving out the first `skip` share of records (start-up); and
/// the number of records read and measured.
pub fn latency(
    bootstrap: &str,
    output: &str,
    skip: f64,
) -> Result<(usize, usize, [f64; 3]), Error> {
    let mut samples = Vec::new();
    read_topic(bootstrap, output, |_, value, appended_ms| {
        let sent: i64 = std::str::from_utf8(value.get(..20).ok_or("short value")?)?.parse()?;
        samples.push((sent, appended_ms * 1000 - sent));
        Ok(())
    })?;
    samples.sort_unstable();
    let kept: Vec<i64> = {
        let from = (samples.len() as f64 * skip) as usize;
        let mut kept: Vec<i64> = samples[from..].iter().map(|(_, l)| *l).collect();
        kept.sort_unstable();
        kept
    };
    if kept.is_empty() {
        return Err(format!("{output}: no records to measure").into());
    }
    let at = |q: f64| kept[((kept.len() - 1) as f64 * q).round() as usize] as f64 / 1000.0;
    Ok((samples.len(), kept.len(), [at(0.50), at(0.99), at(0.999)]))
}
