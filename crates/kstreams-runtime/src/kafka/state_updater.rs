//! The state updater (Kafka Streams' `DefaultStateUpdater` with its
//! `StoreChangelogReader`): brings the logged stores of a stream thread's
//! new active tasks up to the end of their changelog partitions, with the
//! thread's restore consumer, in slices of the thread's loop.
//!
//! Kafka Streams runs its updater on a thread of its own. A kstreams task
//! and its stores are bound to their stream thread (`Rc`, no `Send`), so
//! here the stream thread itself gives the updater a slice of each pass:
//! between two slices it polls its main consumer (it keeps its group
//! membership however long a restore takes), processes the tasks that are
//! restored and commits them on time. A task processes nothing until every
//! one of its stores is current (its input partitions stay paused, see
//! `TaskManager`), under exactly-once as under at-least-once.
//!
//! A restoration that stops before its end (the task revoked or lost, the
//! thread closing) reports what it reached, and the task manager writes
//! that down as the task's checkpoint: the restore resumes from there, not
//! from the start. Long restores are checkpointed on the way too (under
//! at-least-once, see `TaskManager::restore`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kstreams_dsl::{ChangelogTopic, TaskId};
use kstreams_state::__private::{restore_start, Restoration, RestoreStart};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use super::changelog_batch;
use super::clients;
use super::config::StreamsConfig;
use super::ffi::BatchedConsumer;
use super::restore_progress::{RestoreBoard, RestoreKind};
use super::retention_seek;
use super::RuntimeError;
use crate::kafka::client_error::ClientResult;
use crate::StreamTask;
use kstreams_state::{BackgroundFlush, TopicPartition};

/// Records handed to a store in one restore batch at most.
const RESTORE_BATCH: usize = 10_000;

/// How long a slice waits for the restore consumer's first record: the
/// main poll does not wait while tasks restore, so an idle thread waits
/// here instead.
const FIRST_RECORD_WAIT: Duration = Duration::from_millis(10);

/// Records restored into a task's stores since its last progress
/// checkpoint that make the next one due (Kafka Streams'
/// `OFFSET_DELTA_THRESHOLD_FOR_CHECKPOINT`).
const CHECKPOINT_DELTA: u64 = 10_000;

/// The changelog partitions whose store's reached offset is known, with
/// it: what a checkpoint of a task's stores can say.
pub(crate) fn known_offsets(
    reached: &HashMap<TopicPartition, Option<i64>>,
) -> HashMap<TopicPartition, i64> {
    reached
        .iter()
        .filter_map(|(key, offset)| Some((key.clone(), (*offset)?)))
        .collect()
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

/// Whether a store whose last changelog record is at `checkpointed` is
/// ahead of its changelog partition, which ends (exclusive) at `high`: its
/// local state was not written from this changelog (it was deleted and
/// re-created, emptied or truncated, as `kafka-streams-application-reset`
/// does), so restoring after it would keep what the changelog no longer
/// has. A checkpoint is the offset of a record the changelog had, below its
/// end for as long as the changelog lives (transaction markers only add to
/// the end); a negative one is no position (Kafka's `OFFSET_UNKNOWN`).
///
/// Kafka Streams 4.4 keeps such a store: an empty changelog (end 0) counts
/// as restored, and a position at or past the end as read through
/// (`StoreChangelogReader#hasRestoredToEnd`); only a fetch answered
/// `OFFSET_OUT_OF_RANGE` before that, if one is made, makes the task
/// corrupted (`TaskCorruptedException`).
pub(crate) fn checkpoint_beyond_end(checkpointed: i64, high: i64) -> bool {
    checkpointed >= 0 && checkpointed >= high
}

/// Where a store of a new task starts restoring: its changelog, and the
/// offset of the last changelog record the store holds (`None`: none, or
/// not known).
pub(crate) struct RestoreFrom {
    pub changelog: ChangelogTopic,
    pub after: Option<i64>,
    /// The changelog partition's watermarks (log start, end), when the task
    /// creator asked for them already (checking `after` against the end,
    /// [`checkpoint_beyond_end`]); else the state updater asks.
    pub watermarks: Option<(i64, i64)>,
}

/// One changelog partition being restored.
struct Changelog {
    task: TaskId,
    restoration: Restoration,
    /// The offset restoration stops before: the end seen when it began.
    end: i64,
    /// What the store held before the restoration began (the checkpointed
    /// offset), until it applies a record.
    before: Option<i64>,
}

impl Changelog {
    /// The offset of the last changelog record the store holds.
    fn reached(&self) -> Option<i64> {
        self.restoration.last_offset().or(self.before)
    }
}

/// A task whose stores restore.
struct RestoringTask {
    began: Instant,
    /// Per changelog partition of the task, the offset of the last record
    /// its store holds, as far as known (complete ones included).
    reached: HashMap<TopicPartition, Option<i64>>,
    /// Its changelog partitions not restored yet.
    pending: usize,
    /// Records restored since its last progress checkpoint.
    since_checkpoint: u64,
    /// The flushes its finished restorations started: the task is restored
    /// once they are done (see [`BackgroundFlush`]).
    flushes: Vec<BackgroundFlush>,
}

/// A task whose stores are all current.
pub(crate) struct RestoredTask {
    pub id: TaskId,
    /// Per changelog partition, the offset of the last record its store
    /// holds (`None`: not known, as for an empty changelog; the task
    /// creator records it for persistent stores only).
    pub reached: HashMap<TopicPartition, Option<i64>>,
}

/// The state updater of one stream thread.
pub(crate) struct StateUpdater {
    thread: String,
    config: StreamsConfig,
    /// Where restorations report their progress.
    restore_board: RestoreBoard,
    /// Made at the first restoration: most threads of a stateless
    /// application never need one. Read in batches from its own queue
    /// (see [`BatchedConsumer`]).
    consumer: Option<BatchedConsumer>,
    changelogs: HashMap<TopicPartition, Changelog>,
    /// Changelog partitions added since the last step, with their start
    /// offsets: assigned together at the next step. One by one, each new
    /// partition waited for the fetch request in flight to the same broker,
    /// held there up to `fetch.wait.max.ms` (500 ms) once the partitions
    /// before it had nothing more.
    to_assign: Vec<(TopicPartition, i64)>,
    tasks: HashMap<TaskId, RestoringTask>,
    /// Tasks whose changelogs are all read, waiting for their stores'
    /// flushes.
    flushing: HashMap<TaskId, RestoringTask>,
    /// Tasks restored since the last [`StateUpdater::take_restored`].
    restored: Vec<RestoredTask>,
}

impl StateUpdater {
    /// The updater of stream thread `thread`.
    pub(super) fn new(thread: &str, config: &StreamsConfig, restore_board: RestoreBoard) -> Self {
        Self {
            thread: thread.to_string(),
            config: config.clone(),
            restore_board,
            consumer: None,
            changelogs: HashMap::new(),
            to_assign: Vec::new(),
            tasks: HashMap::new(),
            flushing: HashMap::new(),
            restored: Vec::new(),
        }
    }

    fn consumer(&mut self) -> Result<&BaseConsumer, RuntimeError> {
        if self.consumer.is_none() {
            let client = clients::restore_consumer(&self.config, &self.thread);
            self.consumer = Some(clients::batched(client.create().client()?)?);
        }
        Ok(self.consumer.as_deref().expect("just made"))
    }

    /// A consumer to read a changelog's tail with, apart from the
    /// restore consumer's assignment and queue.
    fn probe_consumer(&self) -> Result<BaseConsumer, RuntimeError> {
        let mut client = clients::restore_consumer(&self.config, &self.thread);
        client.set("client.id", clients::restore_probe_client_id(&self.thread));
        client.create().client()
    }

    /// Where window store `changelog.store` restores from within its
    /// `retention` ([`retention_seek::retention_start`]); the changelog's
    /// start `low` if that cannot be found out.
    fn start_within_retention(
        &self,
        probe: &BaseConsumer,
        changelog: &ChangelogTopic,
        partition: i32,
        retention: i64,
        (low, high): (i64, i64),
    ) -> i64 {
        match retention_seek::retention_start(
            probe,
            &changelog.topic,
            partition,
            retention,
            (low, high),
        ) {
            Ok(start) => {
                log::info!(
                    "{}: state store {} restores {}-{partition} from offset {start} (its log \
                     starts at {low}): what lies before was written before its retention",
                    self.thread,
                    changelog.store,
                    changelog.topic,
                );
                start
            }
            Err(e) => {
                log::warn!(
                    "{}: state store {} restores {}-{partition} from its start: its newest \
                     window could not be read ({e})",
                    self.thread,
                    changelog.store,
                    changelog.topic,
                );
                low
            }
        }
    }

    /// Assigns the changelog partitions added since the last step, each
    /// from where its restoration starts.
    fn assign_added(&mut self) -> Result<(), RuntimeError> {
        if self.to_assign.is_empty() {
            return Ok(());
        }
        let mut assign = TopicPartitionList::new();
        for (changelog, start) in self.to_assign.drain(..) {
            assign
                .add_partition_offset(&changelog.topic, changelog.partition, Offset::Offset(start))
                .client()?;
        }
        let consumer = self
            .consumer
            .as_ref()
            .expect("made with the first changelog");
        consumer.incremental_assign(&assign).client()
    }

    /// Takes new task `task` over: each of its logged stores restores from
    /// `from` (the store's checkpointed offset) to the end its changelog
    /// partition has now. A task whose stores are current already is
    /// restored at once (see [`StateUpdater::take_restored`]).
    pub(super) fn add(
        &mut self,
        task: &StreamTask,
        from: Vec<RestoreFrom>,
    ) -> Result<(), RuntimeError> {
        let id = task.id();
        let task_id = id.to_string();
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
        // Made for the first window store that restores within its
        // retention, dropped when the task is added.
        let mut probe = None;
        let mut restoring = RestoringTask {
            began: Instant::now(),
            reached: HashMap::new(),
            pending: 0,
            since_checkpoint: 0,
            flushes: Vec::new(),
        };
        for RestoreFrom {
            changelog,
            after,
            watermarks,
        } in from
        {
            let Some(store) = task
                .stores()
                .get(&changelog.store)
                .map(|b| b.lifecycle.clone())
            else {
                continue;
            };
            let key = TopicPartition::new(changelog.topic.as_str(), id.partition);
            let (low, high) = match watermarks {
                Some(watermarks) => watermarks,
                None => changelog_watermarks(self.consumer()?, &changelog.topic, id.partition)?,
            };
            let persistent = store.borrow().persistent();
            if after.is_some_and(|after| persistent && checkpoint_beyond_end(after, high)) {
                // The task creator rebuilds such a store before it gets here
                // (with these watermarks); only a changelog truncated in
                // between gets here.
                log::warn!(
                    "{}: task {id}: state store {} has changelog offset {} checkpointed, past \
                     the end {high} of {}-{}: its local state may hold what the changelog no \
                     longer has (KafkaStreams::clean_up before the next start rebuilds it)",
                    self.thread,
                    changelog.store,
                    after.unwrap_or_default(),
                    changelog.topic,
                    id.partition
                );
            }
            let resumes = matches!(
                restore_start(after, persistent, false),
                RestoreStart::After(_)
            );
            let Some((low, high)) = restore_range(after, persistent, low, high) else {
                let reached = (high > 0).then_some(high - 1);
                restoring
                    .reached
                    .insert(key, after.or(reached).filter(|_| persistent));
                continue;
            };
            let low = match changelog.restore_within_retention {
                Some(retention) if !resumes => {
                    let probe = match &probe {
                        Some(probe) => probe,
                        None => probe.insert(self.probe_consumer()?),
                    };
                    self.start_within_retention(
                        probe,
                        &changelog,
                        id.partition,
                        retention,
                        (low, high),
                    )
                }
                _ => low,
            };
            log::debug!(
                "{}: task {id}: state store {} restores {}-{} offsets {low}..{high}",
                self.thread,
                changelog.store,
                changelog.topic,
                id.partition
            );
            // The restoration reads with it (the watermarks may have come
            // without it).
            self.consumer()?;
            self.to_assign.push((key.clone(), low));
            let before = after.filter(|_| persistent && low > 0).map(|_| low - 1);
            restoring.reached.insert(key.clone(), before);
            restoring.pending += 1;
            let restoration = Restoration::start(
                store,
                &changelog.topic,
                id.partition,
                low,
                high,
                listener.clone(),
            );
            self.changelogs.insert(
                key,
                Changelog {
                    task: id,
                    restoration,
                    end: high,
                    before,
                },
            );
        }
        if restoring.pending == 0 {
            self.restored.push(RestoredTask {
                id,
                reached: restoring.reached,
            });
        } else {
            self.tasks.insert(id, restoring);
        }
        Ok(())
    }

    /// Restores for about `budget`: batches of changelog records applied
    /// to their stores until the budget is spent or the consumer has
    /// nothing more for now. Returns how many records it applied.
    pub(super) fn step(&mut self, budget: Duration) -> Result<usize, RuntimeError> {
        self.complete_flushed()?;
        if self.changelogs.is_empty() {
            if !self.flushing.is_empty() {
                // Nothing to read: the thread waits for the flushes here,
                // as it waits for a first record, instead of spinning.
                std::thread::sleep(FIRST_RECORD_WAIT.min(budget));
                self.complete_flushed()?;
            }
            return Ok(0);
        }
        let _span =
            tracing::debug_span!("kstreams.restore", thread = self.thread.as_str()).entered();
        let deadline = Instant::now() + budget;
        self.assign_added()?;
        let mut applied = 0;
        let mut wait = FIRST_RECORD_WAIT.min(budget);
        loop {
            let read = self.read_batch(wait)?;
            wait = Duration::ZERO;
            applied += read;
            let last = read == 0 || Instant::now() >= deadline;
            if last {
                // Transaction markers (exactly-once changelogs end with one)
                // are never handed out as records: the consumer's position
                // says when a partition is read through. Asked at the end
                // of every step, not only when the queue ran dry: other
                // partitions' records can keep it from running dry.
                self.mark_read_through()?;
            }
            self.complete_finished()?;
            if last || self.changelogs.is_empty() {
                return Ok(applied);
            }
        }
    }

    /// Reads one batch from the restore consumer and applies it, per
    /// changelog partition, to its store. Returns how many
    /// records it read.
    fn read_batch(&mut self, wait: Duration) -> Result<usize, RuntimeError> {
        let consumer = self
            .consumer
            .as_ref()
            .expect("made with the first changelog");
        let changelogs = &self.changelogs;
        let batch = changelog_batch::read_batch(
            consumer,
            RESTORE_BATCH,
            wait,
            |e| Err(RuntimeError::client(e)),
            // Not of a restoration removed since it was fetched, nor written
            // after the restore began (processing will see it).
            |key| changelogs.get(key).map(|c| c.end),
        )?;
        for (key, records) in &batch.partitions {
            let changelog = self.changelogs.get_mut(key).expect("fetched for it");
            let last = records.last_offset();
            changelog
                .restoration
                .restore_batch(&batch.changelog_records(records, key), last)?;
            if let Some(task) = self.tasks.get_mut(&changelog.task) {
                task.since_checkpoint += records.count() as u64;
                task.reached.insert(key.clone(), Some(last));
            }
        }
        Ok(batch.read)
    }

    /// Completes the restorations whose consumer position is past their
    /// end (what lies between is transaction markers).
    fn mark_read_through(&mut self) -> Result<(), RuntimeError> {
        let Some(consumer) = &self.consumer else {
            return Ok(());
        };
        let positions = consumer.position().client()?;
        for (key, changelog) in &mut self.changelogs {
            if changelog.restoration.is_complete() {
                continue;
            }
            let position = positions
                .find_partition(&key.topic, key.partition)
                .map(|e| e.offset());
            if matches!(position, Some(Offset::Offset(p)) if p >= changelog.end) {
                changelog
                    .restoration
                    .restore_batch(&[], changelog.end - 1)?;
                if let Some(task) = self.tasks.get_mut(&changelog.task) {
                    task.reached.insert(key.clone(), Some(changelog.end - 1));
                }
            }
        }
        Ok(())
    }

    /// Ends the complete restorations; a task whose last one that was is
    /// restored.
    fn complete_finished(&mut self) -> Result<(), RuntimeError> {
        let complete: Vec<TopicPartition> = self
            .changelogs
            .iter()
            .filter(|(_, c)| c.restoration.is_complete())
            .map(|(key, _)| key.clone())
            .collect();
        if complete.is_empty() {
            return Ok(());
        }
        let mut unassign = TopicPartitionList::new();
        for key in complete {
            let changelog = self.changelogs.remove(&key).expect("listed");
            unassign.add_partition(&key.topic, key.partition);
            let reached = changelog.reached();
            let flush = changelog.restoration.finish()?;
            let Some(task) = self.tasks.get_mut(&changelog.task) else {
                continue;
            };
            task.reached.insert(key, reached);
            task.flushes.push(flush);
            task.pending -= 1;
            if task.pending == 0 {
                let task = self.tasks.remove(&changelog.task).expect("present");
                self.flushing.insert(changelog.task, task);
            }
        }
        if let Some(consumer) = &self.consumer {
            consumer.incremental_unassign(&unassign).client()?;
        }
        Ok(())
    }

    /// Moves the tasks whose stores' flushes are done to the restored ones;
    /// a failed flush is the thread's error.
    fn complete_flushed(&mut self) -> Result<(), RuntimeError> {
        let mut flushed = Vec::new();
        for (id, task) in &self.flushing {
            if BackgroundFlush::all_done(&task.flushes)? {
                flushed.push(*id);
            }
        }
        for id in flushed {
            let task = self.flushing.remove(&id).expect("listed");
            log::info!(
                "{}: task {id} restored its stores in {:.1} s",
                self.thread,
                task.began.elapsed().as_secs_f64()
            );
            self.restored.push(RestoredTask {
                id,
                reached: task.reached,
            });
        }
        Ok(())
    }

    /// Task `id`'s reached offsets if it is restored (and not taken yet).
    pub(super) fn take_restored_task(
        &mut self,
        id: TaskId,
    ) -> Option<HashMap<TopicPartition, Option<i64>>> {
        let at = self.restored.iter().position(|t| t.id == id)?;
        Some(self.restored.remove(at).reached)
    }

    /// The tasks restored since the last call.
    pub(super) fn take_restored(&mut self) -> Vec<RestoredTask> {
        std::mem::take(&mut self.restored)
    }

    /// Stops restoring task `id` (revoked, lost, the thread ends): each of
    /// its restorations is suspended (KIP-869). Returns, per changelog
    /// partition, the offset its store reached, for the task's checkpoint;
    /// `None` when the updater did not have the task.
    pub(super) fn remove(
        &mut self,
        id: TaskId,
    ) -> Result<Option<HashMap<TopicPartition, Option<i64>>>, RuntimeError> {
        if let Some(reached) = self.take_restored_task(id) {
            return Ok(Some(reached));
        }
        if let Some(task) = self.flushing.remove(&id) {
            // Its stores' flushes go on; closing them waits for them.
            return Ok(Some(task.reached));
        }
        let Some(mut task) = self.tasks.remove(&id) else {
            return Ok(None);
        };
        let mine: Vec<TopicPartition> = self
            .changelogs
            .iter()
            .filter(|(_, c)| c.task == id)
            .map(|(key, _)| key.clone())
            .collect();
        // Those not assigned yet are only dropped from the list.
        let unassigned: Vec<TopicPartition> = self
            .to_assign
            .iter()
            .filter(|(key, _)| mine.contains(key))
            .map(|(key, _)| key.clone())
            .collect();
        self.to_assign.retain(|(key, _)| !mine.contains(key));
        let mut unassign = TopicPartitionList::new();
        for key in mine {
            let changelog = self.changelogs.remove(&key).expect("listed");
            task.reached.insert(key.clone(), changelog.reached());
            let restored = changelog.restoration.suspend();
            log::info!(
                "{}: task {id}: restoration of {key} suspended after {restored} records",
                self.thread,
            );
            if !unassigned.contains(&key) {
                unassign.add_partition(&key.topic, key.partition);
            }
        }
        if let (Some(consumer), true) = (&self.consumer, unassign.count() > 0) {
            consumer.incremental_unassign(&unassign).client()?;
        }
        Ok(Some(task.reached))
    }

    /// The restoring tasks that restored enough since their last progress
    /// checkpoint for another, with what their stores reached; their
    /// counts start again. Tasks for which `busy` holds (their last one is
    /// still being written) wait, their counts kept.
    pub(super) fn checkpoints_due(
        &mut self,
        busy: impl Fn(TaskId) -> bool,
    ) -> Vec<(TaskId, HashMap<TopicPartition, i64>)> {
        self.tasks
            .iter_mut()
            .filter(|(id, t)| t.since_checkpoint >= CHECKPOINT_DELTA && !busy(**id))
            .map(|(id, task)| {
                task.since_checkpoint = 0;
                (*id, known_offsets(&task.reached))
            })
            .collect()
    }
}

/// A changelog partition's watermarks. A changelog created just before
/// the application started may have no leader yet; as Kafka Streams, ask
/// again until it has (or until the timeout).
pub(crate) fn changelog_watermarks(
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

    #[test]
    fn a_checkpoint_at_or_past_the_changelogs_end_is_stale() {
        // The last record at 9 of a changelog ending at 10: current.
        assert!(!checkpoint_beyond_end(9, 10));
        assert!(!checkpoint_beyond_end(0, 1));
        // Re-created and empty, or shorter than what the store has.
        assert!(checkpoint_beyond_end(41, 0));
        assert!(checkpoint_beyond_end(0, 0));
        assert!(checkpoint_beyond_end(10, 10));
        assert!(checkpoint_beyond_end(99, 10));
        // OFFSET_UNKNOWN (-2) is no position.
        assert!(!checkpoint_beyond_end(-2, 0));
        assert!(!checkpoint_beyond_end(-1, 0));
    }
}
