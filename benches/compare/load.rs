//! Writing the input: all of it before a throughput run, or at a fixed
//! rate during a latency run; and the latency of what came out.

use std::collections::HashMap;
use std::io::Write as _;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kstreams::embedded::rdkafka::consumer::{BaseConsumer, Consumer};
use kstreams::embedded::rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use kstreams::embedded::rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use kstreams_benches::send_waiting;

use crate::progress::Progress;
use crate::verify::{read_topic, watermarks};
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

/// Produces `rate` records a second for `seconds` over `keys` keys, each
/// value starting with its send time in microseconds (20 digits; a
/// pass-through keeps digits as they are), timestamped with it in
/// milliseconds (what a count's output carries).
pub fn produce_at_rate(
    bootstrap: &str,
    topic: &str,
    seed: u64,
    rate: u64,
    seconds: u64,
    keys: u64,
) -> Result<u64, Error> {
    // linger.ms 0 held records back for about half a second here (input
    // append time minus send time: p50 451 ms at 10 000 records/s, 2.5 ms
    // at 5 ms): librdkafka batches better with a short linger, even for
    // latency.
    let producer = producer(bootstrap, "5")?;
    let total = rate * seconds;
    let began = Instant::now();
    let mut sent = 0;
    for mut record in workload::stream_input(seed, total, keys) {
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

/// The 50th, 99th and 99.9th percentiles (ms) of latencies in
/// microseconds, each with the time it was sent at, leaving out the first
/// `skip` share by send time (start-up); and how many were kept.
fn percentiles(mut samples: Vec<(i64, i64)>, skip: f64) -> Option<(usize, [f64; 3])> {
    samples.sort_unstable();
    let from = (samples.len() as f64 * skip) as usize;
    let mut kept: Vec<i64> = samples[from..].iter().map(|(_, l)| *l).collect();
    kept.sort_unstable();
    if kept.is_empty() {
        return None;
    }
    let at = |q: f64| kept[((kept.len() - 1) as f64 * q).round() as usize] as f64 / 1000.0;
    Some((kept.len(), [at(0.50), at(0.99), at(0.999)]))
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
    let total = samples.len();
    let (kept, figures) =
        percentiles(samples, skip).ok_or_else(|| format!("{output}: no records to measure"))?;
    Ok((total, kept, figures))
}

/// An offset per partition of one topic.
type Offsets = HashMap<i32, i64>;

/// End-to-end latency percentiles (ms) of a count's `output`, read live
/// from its end as the app writes it, until `group` has committed `target`
/// records of `input` and the output is read to its end then; and the
/// number of output records measured and kept.
///
/// A count's output record carries the timestamp of the input record it
/// counted last (both libraries keep it through their record cache), which
/// [`produce_at_rate`] set to the send time. A topic keeps either that or
/// the broker's append time, not both, so the end is this reader's receipt
/// instead of the append: a fetch more than the pass-through's figure, the
/// same for every implementation (the fetch returns as soon as a record is
/// appended). The timestamp is in milliseconds, the send time truncated:
/// up to 1 ms is added to every figure. Output records stamped before this
/// reader started (a preload's) are not measured. Prints `FOLLOWING` once
/// it reads from the end, before which the rate producer must not start.
pub fn follow_latency(
    bootstrap: &str,
    output: &str,
    group: &str,
    input: &str,
    target: i64,
    skip: f64,
) -> Result<(usize, usize, [f64; 3]), Error> {
    let started_ms = now_micros() / 1000;
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", format!("bench-latency-{output}"))
        .set("enable.auto.commit", "false")
        // An empty fetch returns after this, not librdkafka's 500 ms, so
        // that a partition idle at one moment is asked again soon.
        .set("fetch.wait.max.ms", "10")
        .create()?;
    let mut assignment = TopicPartitionList::new();
    // Where each partition is read up to (the next offset), as librdkafka
    // knows only once a record of it has been consumed.
    let mut positions = Offsets::new();
    for (partition, _, high) in watermarks(&consumer, output)? {
        assignment.add_partition_offset(output, partition, Offset::Offset(high))?;
        positions.insert(partition, high);
    }
    consumer.assign(&assignment)?;
    println!("FOLLOWING");
    std::io::stdout().flush()?;
    let ends = watch_for_end(bootstrap, output, group, input, target)?;
    let mut samples = Vec::new();
    let mut end: Option<Offsets> = None;
    loop {
        if let Some(message) = consumer.poll(Duration::from_millis(20)) {
            let received = now_micros();
            let message = message?;
            positions.insert(message.partition(), message.offset() + 1);
            let stamped = message
                .timestamp()
                .to_millis()
                .ok_or("an output record without a timestamp")?;
            if stamped >= started_ms {
                let latency = received - stamped * 1000;
                if latency < 0 {
                    return Err(format!(
                        "{output}: a record stamped {stamped} ms, read at {received} µs, before it was sent"
                    )
                    .into());
                }
                samples.push((stamped, latency));
            }
        }
        if end.is_none() {
            end = match ends.try_recv() {
                Ok(result) => Some(result?),
                Err(mpsc::TryRecvError::Empty) => None,
                Err(mpsc::TryRecvError::Disconnected) => {
                    return Err("the progress watcher stopped".into())
                }
            };
        }
        if end.as_ref().is_some_and(|end| {
            end.iter()
                .all(|(partition, high)| positions.get(partition) >= Some(high))
        }) {
            break;
        }
    }
    let total = samples.len();
    let (kept, figures) =
        percentiles(samples, skip).ok_or_else(|| format!("{output}: no records to measure"))?;
    Ok((total, kept, figures))
}

/// Watches, on a thread of its own so that the reader's receipt times do
/// not wait for it, until `group` has committed `target` records of
/// `input`; then sends the output's end offsets.
fn watch_for_end(
    bootstrap: &str,
    output: &str,
    group: &str,
    input: &str,
    target: i64,
) -> Result<mpsc::Receiver<Result<Offsets, String>>, Error> {
    let progress = Progress::new(bootstrap, group, &[input], Some(target))?;
    let (send, receive) = mpsc::channel();
    let (bootstrap, output) = (bootstrap.to_owned(), output.to_owned());
    std::thread::spawn(move || {
        let ends = (|| -> Result<Offsets, Error> {
            while !progress.reached()? {
                std::thread::sleep(Duration::from_millis(100));
            }
            let consumer: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", &bootstrap)
                .create()?;
            Ok(watermarks(&consumer, &output)?
                .into_iter()
                .map(|(partition, _, high)| (partition, high))
                .collect())
        })();
        let _ = send.send(ends.map_err(|e| e.to_string()));
    });
    Ok(receive)
}
