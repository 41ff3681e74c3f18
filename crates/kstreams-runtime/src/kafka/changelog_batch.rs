//! One batch of changelog records read from a restore consumer, grouped by
//! changelog partition, as the state updater (restoring active tasks) and
//! the standby tasks read theirs before applying each partition's records
//! to its store.
//!
//! The consumer is read a record per `poll`, from its own queue: forwarding
//! its partitions to a fetch queue read in batches lost the first records
//! of a partition whose fetch started before the forwarding (see
//! `StateUpdater`'s consumer).

use std::collections::HashMap;
use std::time::Duration;

use kstreams_state::ChangelogRecord;
use rdkafka::consumer::BaseConsumer;
use rdkafka::error::KafkaError;
use rdkafka::Message;

use super::RuntimeError;
use kstreams_state::TopicPartition;

/// A changelog record as read: key, value, timestamp in milliseconds (-1
/// without one), offset.
type Fetched = (Vec<u8>, Option<Vec<u8>>, i64, i64);

/// The records of one changelog partition read in a batch, in offset order.
pub(super) struct PartitionRecords(Vec<Fetched>);

impl PartitionRecords {
    /// How many records there are (at least one).
    pub(super) fn count(&self) -> usize {
        self.0.len()
    }

    /// The offset of the last record (-1 without any).
    pub(super) fn last_offset(&self) -> i64 {
        self.0.last().map_or(-1, |r| r.3)
    }

    /// The records as a store restores them, of changelog partition
    /// `changelog`, without headers.
    pub(super) fn changelog_records<'a>(
        &'a self,
        changelog: &'a TopicPartition,
    ) -> Vec<ChangelogRecord<'a>> {
        self.0
            .iter()
            .map(|(key, value, timestamp, _)| ChangelogRecord {
                topic: &changelog.topic,
                partition: changelog.partition,
                key,
                value: value.as_deref(),
                timestamp: *timestamp,
                headers: &[],
            })
            .collect()
    }
}

/// What [`read_batch`] read.
pub(super) struct ChangelogBatch {
    /// The records read, kept ones or not (errors passed over not counted).
    pub(super) read: usize,
    /// The records kept, per changelog partition.
    pub(super) partitions: HashMap<TopicPartition, PartitionRecords>,
}

/// Reads up to `most` records from `consumer`, a record per poll: the first
/// poll waits up to `first_wait`, the others not at all; it stops at the
/// first poll that has nothing. A record is kept when `keep` says so of its
/// partition and offset. A consumer error is handed to `on_error`: its
/// error ends the read, `Ok` passes the error over (uncounted).
pub(super) fn read_batch(
    consumer: &BaseConsumer,
    most: usize,
    first_wait: Duration,
    mut on_error: impl FnMut(KafkaError) -> Result<(), RuntimeError>,
    mut keep: impl FnMut(&TopicPartition, i64) -> bool,
) -> Result<ChangelogBatch, RuntimeError> {
    let mut partitions: HashMap<TopicPartition, PartitionRecords> = HashMap::new();
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
        let key = TopicPartition::new(message.topic(), message.partition());
        if !keep(&key, message.offset()) {
            continue;
        }
        partitions
            .entry(key)
            .or_insert_with(|| PartitionRecords(Vec::new()))
            .0
            .push((
                message.key().unwrap_or_default().to_vec(),
                message.payload().map(<[u8]>::to_vec),
                message.timestamp().to_millis().unwrap_or(-1),
                message.offset(),
            ));
    }
    Ok(ChangelogBatch { read, partitions })
}
