//! The changelog reader (Kafka Streams' `StoreChangelogReader`): brings a
//! task's logged stores up to the end of their changelog partitions with
//! the thread's restore consumer, before the task processes anything.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kstreams_dsl::ChangelogTopic;
use kstreams_state::__private::{restore_start, Restoration, RestoreStart};
use kstreams_state::ChangelogRecord;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Message, Offset, TopicPartitionList};

use super::clients;
use super::config::StreamsConfig;
use super::restore_progress::{RestoreBoard, RestoreKind};
use super::RuntimeError;
use crate::kafka::client_error::ClientResult;
use crate::StreamTask;

/// How long one store may take to restore before the thread gives up.
const RESTORE_TIMEOUT: Duration = Duration::from_secs(300);

/// Records handed to a store in one restore batch at most.
const RESTORE_BATCH: usize = 10_000;

/// Restores the stores of one stream thread's tasks.
pub(crate) struct ChangelogReader {
    thread: String,
    config: StreamsConfig,
    /// Where restorations report their progress.
    restore_board: RestoreBoard,
    /// Made at the first restoration: most threads of a stateless
    /// application never need one.
    restore_consumer: Option<BaseConsumer>,
}

/// The offsets to restore of a changelog partition whose log spans
/// `low..high`: `None` when the store is current already. A checkpointed
/// persistent store has everything up to the checkpoint; an in-memory
/// store starts empty and reads it all.
pub(crate) fn restore_range(
    checkpointed: Option<i64>,
    persistent: bool,
    low: i64,
    high: i64,
) -> Option<(i64, i64)> {
    let start = match restore_start(checkpointed, persistent, false) {
        RestoreStart::After(offset) => (offset + 1).max(low),
        RestoreStart::Beginning | RestoreStart::WipeThenBeginning => low,
    };
    (start < high).then_some((start, high))
}

impl ChangelogReader {
    /// The reader of stream thread `thread`.
    pub(super) fn new(thread: &str, config: &StreamsConfig, restore_board: RestoreBoard) -> Self {
        Self {
            thread: thread.to_string(),
            config: config.clone(),
            restore_board,
            restore_consumer: None,
        }
    }

    fn restore_consumer(&mut self) -> Result<&BaseConsumer, RuntimeError> {
        if self.restore_consumer.is_none() {
            let client = clients::restore_consumer(&self.config, &self.thread);
            self.restore_consumer = Some(client.create().client()?);
        }
        Ok(self.restore_consumer.as_ref().expect("just made"))
    }

    /// Restores `task`'s store of `changelog` from its partition
    /// `partition`, after the `checkpointed` offset if there is one, up to
    /// the end offset seen now. Returns the offset of the last changelog
    /// record the store then reaches (`None` for an empty changelog), what
    /// its checkpoint says until it writes again.
    pub(super) fn restore(
        &mut self,
        task: &mut StreamTask,
        changelog: &ChangelogTopic,
        partition: i32,
        checkpointed: Option<i64>,
    ) -> Result<Option<i64>, RuntimeError> {
        let Some(store) = task
            .context()
            .stores()
            .get(&changelog.store)
            .map(|b| b.lifecycle.clone())
        else {
            return Ok(None);
        };
        let task_id = task.id().to_string();
        let _span = tracing::debug_span!(
            "kstreams.restore",
            thread = self.thread.as_str(),
            task_id = task_id.as_str(),
            store = changelog.store.as_str(),
            changelog = changelog.topic.as_str(),
            partition
        )
        .entered();
        let sensors = self
            .config
            .metrics
            .task_restore_sensors(&self.thread, &task_id)?;
        let listener = Arc::new(self.restore_board.reporter(
            RestoreKind::Changelog,
            &self.thread,
            Some(task_id),
            sensors,
        ));
        let consumer = self.restore_consumer()?;
        let (low, high) = changelog_watermarks(consumer, &changelog.topic, partition)?;
        let persistent = store.borrow().persistent();
        let reached = (high > 0).then_some(high - 1);
        let Some((low, high)) = restore_range(checkpointed, persistent, low, high) else {
            return Ok(checkpointed.or(reached).filter(|_| persistent));
        };
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&changelog.topic, partition, Offset::Offset(low))
            .client()?;
        consumer.assign(&tpl).client()?;
        let mut restoration =
            Restoration::start(store, &changelog.topic, partition, low, high, listener);
        // A restoration that fails part-way is suspended (KIP-869): the
        // listener hears that it stopped, with what it restored.
        if let Err(e) = read_changelog(consumer, changelog, partition, high, &mut restoration) {
            restoration.suspend();
            return Err(e);
        }
        restoration.finish()?;
        consumer.unassign().client()?;
        Ok(reached)
    }
}

/// Reads `changelog`'s partition `partition` into `restoration` up to
/// `high` (exclusive), in batches.
fn read_changelog(
    consumer: &BaseConsumer,
    changelog: &ChangelogTopic,
    partition: i32,
    high: i64,
    restoration: &mut Restoration,
) -> Result<(), RuntimeError> {
    let deadline = Instant::now() + RESTORE_TIMEOUT;
    // Transaction markers (exactly-once changelogs end with one) are
    // never handed out as records: the consumer's position says when
    // the partition is read through.
    let read_through = |consumer: &BaseConsumer| -> Result<bool, RuntimeError> {
        Ok(matches!(
            consumer
                .position().client()?
                .find_partition(&changelog.topic, partition)
                .map(|e| e.offset()),
            Some(Offset::Offset(p)) if p >= high
        ))
    };
    while !restoration.is_complete() {
        if Instant::now() > deadline {
            return Err(RuntimeError::RestoreTimeout {
                store: changelog.store.clone(),
                topic: changelog.topic.clone(),
                partition,
                end: high,
                timeout: RESTORE_TIMEOUT,
            });
        }
        let mut batch: Vec<(Vec<u8>, Option<Vec<u8>>, i64)> = Vec::new();
        let mut last_offset = None;
        let mut wait = Duration::from_millis(500);
        while batch.len() < RESTORE_BATCH {
            let Some(message) = consumer.poll(wait) else {
                break;
            };
            wait = Duration::ZERO;
            let message = message.client()?;
            if message.offset() >= high {
                continue; // written after the restore began: processing will see it
            }
            batch.push((
                message.key().unwrap_or_default().to_vec(),
                message.payload().map(<[u8]>::to_vec),
                message.timestamp().to_millis().unwrap_or(-1),
            ));
            last_offset = Some(message.offset());
            if message.offset() + 1 >= high {
                break;
            }
        }
        let Some(last_offset) = last_offset else {
            if read_through(consumer)? {
                restoration.restore_batch(&[], high - 1)?;
            }
            continue;
        };
        let records: Vec<ChangelogRecord<'_>> = batch
            .iter()
            .map(|(key, value, timestamp)| ChangelogRecord {
                topic: &changelog.topic,
                partition,
                key,
                value: value.as_deref(),
                timestamp: *timestamp,
                headers: &[],
            })
            .collect();
        restoration.restore_batch(&records, last_offset)?;
        if !restoration.is_complete() && read_through(consumer)? {
            restoration.restore_batch(&[], high - 1)?;
        }
    }
    Ok(())
}

/// A changelog partition's watermarks. A changelog created just before
/// the application started may have no leader yet; as Kafka Streams, ask
/// again until it has (or until the timeout).
fn changelog_watermarks(
    consumer: &BaseConsumer,
    topic: &str,
    partition: i32,
) -> Result<(i64, i64), RuntimeError> {
    use rdkafka::error::KafkaError;
    use rdkafka::types::RDKafkaErrorCode::{
        LeaderNotAvailable, NotLeaderForPartition, UnknownTopicOrPartition,
    };
    let timeout = Duration::from_secs(30);
    let deadline = Instant::now() + timeout;
    loop {
        match consumer.fetch_watermarks(topic, partition, timeout) {
            Err(KafkaError::MetadataFetch(
                code @ (LeaderNotAvailable | NotLeaderForPartition | UnknownTopicOrPartition),
            )) if Instant::now() < deadline => {
                log::debug!("{topic}-{partition}: no leader yet ({code}); asking again");
                std::thread::sleep(Duration::from_millis(100));
            }
            result => return result.client(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_restores_what_its_checkpoint_does_not_cover() {
        // Nothing checkpointed: the whole log, persistent or not.
        assert_eq!(restore_range(None, true, 3, 10), Some((3, 10)));
        assert_eq!(restore_range(None, false, 0, 10), Some((0, 10)));
        // A persistent store checkpointed at 6 has 0..=6 already.
        assert_eq!(restore_range(Some(6), true, 0, 10), Some((7, 10)));
        // An in-memory store lost everything with its process.
        assert_eq!(restore_range(Some(6), false, 0, 10), Some((0, 10)));
        // A checkpoint before the log start: from the log start.
        assert_eq!(restore_range(Some(1), true, 4, 10), Some((4, 10)));
        // Current already, or an empty changelog.
        assert_eq!(restore_range(Some(9), true, 0, 10), None);
        assert_eq!(restore_range(None, true, 0, 0), None);
    }
}
