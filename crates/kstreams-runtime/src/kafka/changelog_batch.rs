//! One batch of changelog records read from a restore consumer, grouped by
//! changelog partition, as the state updater (restoring active tasks) and
//! the standby tasks read theirs before applying each partition's records
//! to its store.
//!
//! The consumer is read a batch at a time from its own queue
//! ([`BatchedConsumer`]), and the records stay where librdkafka put them:
//! a store reads each key and value in place.

use std::time::Duration;

use kstreams_state::ChangelogRecord;
use kstreams_state::TopicPartition;
use rdkafka::error::KafkaError;

use super::ffi::{Batch, BatchedConsumer, MessageView};
use super::RuntimeError;

/// The records of one changelog partition kept from a batch, in offset
/// order: their places in the batch.
pub(super) struct PartitionRecords {
    indices: Vec<u32>,
    last_offset: i64,
}

impl PartitionRecords {
    /// How many records there are.
    pub(super) fn count(&self) -> usize {
        self.indices.len()
    }

    /// The offset of the last record (-1 without any).
    pub(super) fn last_offset(&self) -> i64 {
        self.last_offset
    }
}

/// What [`read_batch`] read.
pub(super) struct ChangelogBatch<'c> {
    /// The records read, kept ones or not (errors passed over not counted).
    pub(super) read: usize,
    /// The records kept, per changelog partition (each with at least one).
    pub(super) partitions: Vec<(TopicPartition, PartitionRecords)>,
    messages: Batch<'c>,
}

impl ChangelogBatch<'_> {
    /// `records` (of this batch) as a store restores them, of changelog
    /// partition `changelog`, without headers.
    pub(super) fn changelog_records<'a>(
        &'a self,
        records: &PartitionRecords,
        changelog: &'a TopicPartition,
    ) -> Vec<ChangelogRecord<'a>> {
        records
            .indices
            .iter()
            .map(|&i| {
                let message = self.messages[i as usize].view();
                ChangelogRecord {
                    topic: &changelog.topic,
                    partition: changelog.partition,
                    key: message.key().unwrap_or_default(),
                    value: message.payload(),
                    timestamp: message.timestamp(),
                    headers: &[],
                }
            })
            .collect()
    }
}

/// One partition met in a batch: the offset its records are kept below
/// (`None`: none of them), and those kept.
struct Met {
    partition: TopicPartition,
    keep_below: Option<i64>,
    records: PartitionRecords,
}

impl Met {
    fn is(&self, message: MessageView<'_>) -> bool {
        self.partition.partition == message.partition()
            && self.partition.topic.as_bytes() == message.topic_name().to_bytes()
    }
}

/// Reads up to `most` records from `consumer`, waiting up to `first_wait`
/// for the first and taking the rest that are there. A partition's records
/// are kept below the offset `keep_below` gives for it, asked once per
/// partition and batch (`None`: none kept). A consumer error is handed to
/// `on_error`: its error ends the read, `Ok` passes the error over
/// (uncounted).
pub(super) fn read_batch<'c>(
    consumer: &'c BatchedConsumer,
    most: usize,
    first_wait: Duration,
    mut on_error: impl FnMut(KafkaError) -> Result<(), RuntimeError>,
    mut keep_below: impl FnMut(&TopicPartition) -> Option<i64>,
) -> Result<ChangelogBatch<'c>, RuntimeError> {
    let messages = consumer.read(first_wait, most);
    // A batch meets few partitions, and mostly the same one many times in
    // a row: a short list, searched from the last one met, beats hashing
    // a topic name per record.
    let mut met: Vec<Met> = Vec::new();
    let mut last = 0;
    let mut read = 0;
    for (index, message) in messages.iter().enumerate() {
        let message = message.view();
        if let Some(e) = message.error() {
            on_error(e)?;
            continue;
        }
        read += 1;
        if !met.get(last).is_some_and(|m| m.is(message)) {
            last = match met.iter().position(|m| m.is(message)) {
                Some(index) => index,
                None => {
                    let partition = TopicPartition::new(
                        message.topic_name().to_string_lossy().into_owned(),
                        message.partition(),
                    );
                    met.push(Met {
                        keep_below: keep_below(&partition),
                        partition,
                        records: PartitionRecords {
                            indices: Vec::new(),
                            last_offset: -1,
                        },
                    });
                    met.len() - 1
                }
            };
        }
        let entry = &mut met[last];
        let offset = message.offset();
        if entry.keep_below.is_some_and(|end| offset < end) {
            // A batch holds at most `most` records: far below u32::MAX.
            entry.records.indices.push(index as u32);
            entry.records.last_offset = offset;
        }
    }
    let partitions = met
        .into_iter()
        .filter(|m| m.records.count() > 0)
        .map(|m| (m.partition, m.records))
        .collect();
    Ok(ChangelogBatch {
        read,
        partitions,
        messages,
    })
}
