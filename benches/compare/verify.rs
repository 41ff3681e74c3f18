//! Reads an output topic to its end (read_committed) and checks it against
//! the workload's expected output.

use std::collections::HashMap;
use std::time::Duration;

use kstreams::embedded::rdkafka::consumer::{BaseConsumer, Consumer};
use kstreams::embedded::rdkafka::message::Timestamp;
use kstreams::embedded::rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};

use crate::workload::{Digest, Expected, Workload};
use crate::Error;

/// Every partition of `topic` with its low and high watermarks.
pub fn watermarks(consumer: &BaseConsumer, topic: &str) -> Result<Vec<(i32, i64, i64)>, Error> {
    let timeout = Duration::from_secs(10);
    let metadata = consumer.fetch_metadata(Some(topic), timeout)?;
    let mut partitions = Vec::new();
    for partition in metadata.topics()[0].partitions() {
        let (low, high) = consumer.fetch_watermarks(topic, partition.id(), timeout)?;
        partitions.push((partition.id(), low, high));
    }
    Ok(partitions)
}

/// Calls `each(key, value, timestamp)` for every record of `topic`, up to
/// the end offsets it had when called.
pub fn read_topic(
    bootstrap: &str,
    topic: &str,
    mut each: impl FnMut(&[u8], &[u8], i64) -> Result<(), Error>,
) -> Result<u64, Error> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", format!("bench-verify-{topic}"))
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .create()?;
    let mut assignment = TopicPartitionList::new();
    let mut remaining = HashMap::new();
    for (partition, low, high) in watermarks(&consumer, topic)? {
        if high > low {
            assignment.add_partition_offset(topic, partition, Offset::Beginning)?;
            remaining.insert(partition, high);
        }
    }
    consumer.assign(&assignment)?;
    let mut read = 0;
    let mut idle = 0;
    while !remaining.is_empty() {
        match consumer.poll(Duration::from_millis(500)) {
            Some(message) => {
                idle = 0;
                let message = message?;
                let end = remaining.get(&message.partition()).copied();
                if end.is_some_and(|end| message.offset() < end) {
                    let timestamp = match message.timestamp() {
                        Timestamp::CreateTime(t) | Timestamp::LogAppendTime(t) => t,
                        Timestamp::NotAvailable => -1,
                    };
                    each(
                        message.key().unwrap_or_default(),
                        message.payload().unwrap_or_default(),
                        timestamp,
                    )?;
                    read += 1;
                }
                if end.is_some_and(|end| message.offset() + 1 >= end) {
                    remaining.remove(&message.partition());
                }
            }
            None => {
                // Transaction markers end a partition without a record at
                // the end offset: its position tells.
                idle += 1;
                let positions = consumer.position()?;
                for element in positions.elements() {
                    if let Offset::Offset(position) = element.offset() {
                        if remaining
                            .get(&element.partition())
                            .is_some_and(|end| position >= *end)
                        {
                            remaining.remove(&element.partition());
                        }
                    }
                }
                if idle > 60 {
                    return Err(format!("{topic}: no progress reading to the end").into());
                }
            }
        }
    }
    Ok(read)
}

/// The topics whose names start with `prefix`.
pub fn topics_named(bootstrap: &str, prefix: &str) -> Result<Vec<String>, Error> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()?;
    let metadata = consumer.fetch_metadata(None, Duration::from_secs(10))?;
    Ok(metadata
        .topics()
        .iter()
        .map(|t| t.name().to_owned())
        .filter(|name| name.starts_with(prefix))
        .collect())
}

/// The changelog topics of `app_id` (its internal topics named
/// `…-changelog`): how many partitions hold records, and how many records
/// they hold (high minus low watermark), what a restore from scratch reads.
pub fn changelog(bootstrap: &str, app_id: &str) -> Result<(usize, i64), Error> {
    let topics: Vec<String> = topics_named(bootstrap, &format!("{app_id}-"))?
        .into_iter()
        .filter(|t| t.ends_with("-changelog"))
        .collect();
    if topics.is_empty() {
        return Err(format!("{app_id} has no changelog topic").into());
    }
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()?;
    let (mut partitions, mut records) = (0, 0);
    for topic in &topics {
        for (_, low, high) in watermarks(&consumer, topic)? {
            if high > low {
                partitions += 1;
                records += high - low;
            }
        }
    }
    Ok((partitions, records))
}

/// Waits until consumer group `group` has no member left (the previous run
/// of the app left it, or its session expired), so that the next run's
/// join does not wait for it.
pub fn await_group_empty(bootstrap: &str, group: &str, timeout: Duration) -> Result<(), Error> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()?;
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let list = consumer.fetch_group_list(Some(group), Duration::from_secs(10))?;
        let members = list
            .groups()
            .iter()
            .filter(|g| g.name() == group)
            .map(|g| g.members().len())
            .sum::<usize>();
        if members == 0 {
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            return Err(format!(
                "group {group} still has {members} member(s) after {} s",
                timeout.as_secs()
            )
            .into());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The earliest and the latest timestamp of a topic's records: on a
/// `LogAppendTime` topic, when its first record was appended and when it was
/// complete. `(i64::MAX, -1)` for an empty topic.
#[derive(Debug, Clone, Copy)]
pub struct TimeSpan {
    pub first: i64,
    pub last: i64,
}

impl TimeSpan {
    fn add(&mut self, timestamp: i64) {
        self.first = self.first.min(timestamp);
        self.last = self.last.max(timestamp);
    }
}

/// What an output topic held, in the form its workload is checked in, and
/// the span of its records' timestamps.
pub fn observed(
    bootstrap: &str,
    topic: &str,
    workload: Workload,
) -> Result<(Expected, TimeSpan), Error> {
    let mut span = TimeSpan {
        first: i64::MAX,
        last: -1,
    };
    let output = match workload {
        Workload::PassThrough | Workload::PassThroughEos | Workload::Join => {
            let mut digest = Digest::default();
            read_topic(bootstrap, topic, |key, value, timestamp| {
                digest.add(key, value);
                span.add(timestamp);
                Ok(())
            })?;
            Expected::Records(digest)
        }
        Workload::Count | Workload::CountEos | Workload::WindowCount | Workload::Restore => {
            let mut finals = HashMap::new();
            read_topic(bootstrap, topic, |key, value, timestamp| {
                span.add(timestamp);
                let (key, window) = if workload == Workload::WindowCount {
                    let split = key
                        .len()
                        .checked_sub(8)
                        .ok_or("windowed key under 8 bytes")?;
                    let start = i64::from_be_bytes(key[split..].try_into()?);
                    (&key[..split], start)
                } else {
                    (key, 0)
                };
                let count = i64::from_be_bytes(value.try_into().map_err(|_| "count not 8 bytes")?);
                finals.insert((String::from_utf8(key.to_vec())?, window), count);
                Ok(())
            })?;
            Expected::Finals(finals)
        }
    };
    Ok((output, span))
}

/// `None` when they agree, else what differs, briefly.
pub fn difference(expected: &Expected, observed: &Expected) -> Option<String> {
    match (expected, observed) {
        (Expected::Records(e), Expected::Records(o)) if e != o => Some(format!(
            "expected {} records (digest {:x}), found {} (digest {:x})",
            e.records, e.sum, o.records, o.sum
        )),
        (Expected::Finals(e), Expected::Finals(o)) if e != o => {
            let wrong = e.iter().filter(|(k, v)| o.get(*k) != Some(v)).count();
            let extra = o.keys().filter(|k| !e.contains_key(*k)).count();
            let example = e
                .iter()
                .find(|(k, v)| o.get(*k) != Some(v))
                .map(|(k, v)| format!("; e.g. {k:?}: expected {v}, found {:?}", o.get(k)));
            Some(format!(
                "{wrong} of {} keys differ, {extra} unexpected{}",
                e.len(),
                example.unwrap_or_default()
            ))
        }
        (Expected::Records(_), Expected::Finals(_))
        | (Expected::Finals(_), Expected::Records(_)) => Some("output of the wrong kind".into()),
        _ => None,
    }
}

/// A short fingerprint of an output, equal for equal outputs, so xtask can
/// compare implementations without reading the topics twice.
pub fn fingerprint(output: &Expected) -> String {
    match output {
        Expected::Records(d) => format!("records={} digest={:016x}", d.records, d.sum),
        Expected::Finals(finals) => {
            let mut digest = Digest::default();
            for ((key, window), count) in finals {
                digest.add(format!("{key}@{window}").as_bytes(), &count.to_be_bytes());
            }
            format!("keys={} digest={:016x}", digest.records, digest.sum)
        }
    }
}
