//! One batch of changelog records read from a restore consumer, grouped by
//! changelog partition, as the state updater (restoring active tasks) and
//! the standby tasks read theirs before applying each partition's records
//! to its store.
//!
//! The consumer is read a record per `poll`, from its own queue: forwarding
//! its partitions to a fetch queue read in batches lost the first records
//! of a partition whose fetch started before the forwarding (see
//! `StateUpdater`'s consumer).

use std::time::Duration;

use kstreams_state::ChangelogRecord;
use rdkafka::consumer::BaseConsumer;
use rdkafka::error::KafkaError;
use rdkafka::Message;

use super::RuntimeError;
use kstreams_state::TopicPartition;

/// Where one record lies in its partition's bytes, and what else it has.
struct Slot {
    /// The key's first byte; the value (if any) follows the key.
    start: usize,
    key_len: usize,
    /// `None`: a tombstone.
    value_len: Option<usize>,
    /// Milliseconds, -1 without one.
    timestamp: i64,
    offset: i64,
}

/// The records of one changelog partition read in a batch, in offset
/// order. Their keys and values are copied into one growing buffer, not
/// into two allocations per record: a restore of millions of records
/// spends its time in RocksDB then, not in the allocator.
pub(super) struct PartitionRecords {
    bytes: Vec<u8>,
    slots: Vec<Slot>,
}

impl PartitionRecords {
    fn new() -> Self {
        PartitionRecords {
            bytes: Vec::new(),
            slots: Vec::new(),
        }
    }

    fn push(&mut self, key: &[u8], value: Option<&[u8]>, timestamp: i64, offset: i64) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(key);
        if let Some(value) = value {
            self.bytes.extend_from_slice(value);
        }
        self.slots.push(Slot {
            start,
            key_len: key.len(),
            value_len: value.map(<[u8]>::len),
            timestamp,
            offset,
        });
    }

    /// How many records there are.
    pub(super) fn count(&self) -> usize {
        self.slots.len()
    }

    /// The offset of the last record (-1 without any).
    pub(super) fn last_offset(&self) -> i64 {
        self.slots.last().map_or(-1, |slot| slot.offset)
    }

    /// The records as a store restores them, of changelog partition
    /// `changelog`, without headers.
    pub(super) fn changelog_records<'a>(
        &'a self,
        changelog: &'a TopicPartition,
    ) -> Vec<ChangelogRecord<'a>> {
        self.slots
            .iter()
            .map(|slot| {
                let key_end = slot.start + slot.key_len;
                ChangelogRecord {
                    topic: &changelog.topic,
                    partition: changelog.partition,
                    key: &self.bytes[slot.start..key_end],
                    value: slot
                        .value_len
                        .map(|len| &self.bytes[key_end..key_end + len]),
                    timestamp: slot.timestamp,
                    headers: &[],
                }
            })
            .collect()
    }
}

/// What [`read_batch`] read.
pub(super) struct ChangelogBatch {
    /// The records read, kept ones or not (errors passed over not counted).
    pub(super) read: usize,
    /// The records kept, per changelog partition (each with at least one).
    pub(super) partitions: Vec<(TopicPartition, PartitionRecords)>,
}

/// One partition met in a batch: the offset its records are kept below
/// (`None`: none of them), and those kept.
struct Met {
    partition: TopicPartition,
    keep_below: Option<i64>,
    records: PartitionRecords,
}

/// Reads up to `most` records from `consumer`, a record per poll: the first
/// poll waits up to `first_wait`, the others not at all; it stops at the
/// first poll that has nothing. A partition's records are kept below the
/// offset `keep_below` gives for it, asked once per partition and batch
/// (`None`: none kept). A consumer error is handed to `on_error`: its
/// error ends the read, `Ok` passes the error over (uncounted).
pub(super) fn read_batch(
    consumer: &BaseConsumer,
    most: usize,
    first_wait: Duration,
    mut on_error: impl FnMut(KafkaError) -> Result<(), RuntimeError>,
    mut keep_below: impl FnMut(&TopicPartition) -> Option<i64>,
) -> Result<ChangelogBatch, RuntimeError> {
    // A batch meets few partitions, and mostly the same one many times in
    // a row: a short list, searched from the last one met, beats hashing
    // a topic name per record.
    let mut met: Vec<Met> = Vec::new();
    let mut last = 0;
    let mut read = 0;
    let mut wait = first_wait;
    while read < most {
        let Some(polled) = consumer.poll(wait) else {
            break;
        };
        wait = Duration::ZERO;
        let message = match polled {
            Ok(message) => message,
            Err(e) => {
                on_error(e)?;
                continue;
            }
        };
        read += 1;
        let (topic, partition) = (message.topic(), message.partition());
        let is = |m: &Met| m.partition.partition == partition && m.partition.topic == topic;
        if !met.get(last).is_some_and(is) {
            last = match met.iter().position(is) {
                Some(index) => index,
                None => {
                    let partition = TopicPartition::new(topic, partition);
                    met.push(Met {
                        keep_below: keep_below(&partition),
                        partition,
                        records: PartitionRecords::new(),
                    });
                    met.len() - 1
                }
            };
        }
        let entry = &mut met[last];
        let offset = message.offset();
        if entry.keep_below.is_some_and(|end| offset < end) {
            entry.records.push(
                message.key().unwrap_or_default(),
                message.payload(),
                message.timestamp().to_millis().unwrap_or(-1),
                offset,
            );
        }
    }
    let partitions = met
        .into_iter()
        .filter(|m| m.records.count() > 0)
        .map(|m| (m.partition, m.records))
        .collect();
    Ok(ChangelogBatch { read, partitions })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_as_written() {
        let mut records = PartitionRecords::new();
        records.push(b"k1", Some(b"value-1"), 10, 5);
        records.push(b"", None, -1, 6);
        records.push(b"k3", Some(b""), 12, 9);
        let changelog = TopicPartition::new("app-store-changelog", 3);
        let read = records.changelog_records(&changelog);
        let seen: Vec<_> = read
            .iter()
            .map(|r| (r.key, r.value, r.timestamp, r.topic, r.partition))
            .collect();
        assert_eq!(
            seen,
            [
                (
                    &b"k1"[..],
                    Some(&b"value-1"[..]),
                    10,
                    "app-store-changelog",
                    3
                ),
                (&b""[..], None, -1, "app-store-changelog", 3),
                (&b"k3"[..], Some(&b""[..]), 12, "app-store-changelog", 3),
            ]
        );
        assert_eq!(records.count(), 3);
        assert_eq!(records.last_offset(), 9);
        assert_eq!(PartitionRecords::new().last_offset(), -1);
    }
}
