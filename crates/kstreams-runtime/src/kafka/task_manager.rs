//! The task manager (Kafka Streams' `TaskManager`): a stream thread's
//! tasks by id, created when their partitions are assigned, restored by
//! the state updater while the restored ones run, closed when they are
//! revoked, rebuilt when an exactly-once transaction is rewound, and the
//! per-partition bookkeeping of what is processed and what to commit.
//!
//! An active task is either restoring (in `restoring`, its stores with the
//! state updater, its input partitions held: paused in the consumer) or
//! running (in `tasks`; everything that processes, punctuates, flushes,
//! commits or checkpoints loops over these only). Records of a restoring
//! task's partitions fetched before the hold are buffered in it, not lost.
//!
//! It owns no Kafka client: what it needs from the consumer (committed
//! offsets, positions, end offsets) is handed in by the stream thread, so
//! everything here runs in unit tests without a broker.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kstreams_dsl::__private::ConsumedRecord;
use kstreams_dsl::{TaskId, Topology};
use kstreams_metrics::{Counter, ThreadSensors};
use kstreams_state::__private::TaskDirectory;
use rustc_hash::FxHashMap;

use super::config::StreamsConfig;
use super::instance::Instance;
use super::local_metadata::{TaskMetadata, TaskPartition};
use super::offsets::{Committed, Positions, ToCommit};
use super::outbox::Outbox;
use super::partition_group::PartitionGroup;
use super::progress_checkpoints::ProgressCheckpoints;
use super::queries::{LocalStores, StoreInstance};
use super::restore_progress::RestoreBoard;
use super::slice_clock::SliceClock;
use super::standby_listener::SuspendReason;
use super::standby_tasks::StandbyTasks;
use super::state_updater::{known_offsets, StateUpdater};
use super::task_creator::{CreatedTask, TaskCreator};
use super::topics::SourceTopicIndex;
use super::RuntimeError;
use crate::StreamTask;
use kstreams_state::TopicPartition;
use kstreams_time::PartitionMetadata;

/// How far past its budget a restore slice may run before a warning says
/// where its time went: the thread polls only between slices, so a slow
/// one eats into `max.poll.interval.ms`.
const SLOW_RESTORE_SLICE: Duration = Duration::from_secs(1);

/// Whether a partition is known to be behind its end (KIP-695), given the
/// offset its reading started at (the committed one), if known.
pub(crate) type IsLagging<'a> = &'a dyn Fn(&str, i32, Option<i64>) -> bool;

/// A partition's start offset in `start_offsets`: a function of the map
/// alone, so that `process` can read it while it borrows the tasks.
fn start_offset_in(
    start_offsets: &HashMap<TopicPartition, i64>,
    topic: &str,
    partition: i32,
) -> Option<i64> {
    start_offsets
        .get(&TopicPartition::new(topic, partition))
        .copied()
}

/// An active task with its input buffers.
struct TaskEntry {
    task: StreamTask,
    group: PartitionGroup,
    /// Held while the task lives: the lock on its state directory
    /// (stateful tasks only).
    directory: Option<TaskDirectory>,
    /// When the task began reading its bootstrap partitions (the
    /// progress itself is logged by `bootstrap_progress`'s reporter).
    bootstrap: Option<Instant>,
    /// The bootstrap as restorations (listener, metrics, /state).
    bootstrap_progress: Option<super::bootstrap_progress::BootstrapProgress>,
    /// Source partitions of the task this thread was not given (yet): the
    /// task processes nothing until it has them all, so that under an
    /// incremental protocol two members never run halves of one task.
    missing: Vec<TopicPartition>,
}

impl TaskEntry {
    fn new(created: CreatedTask, group: PartitionGroup) -> Self {
        let bootstrap = group.bootstrapping().then(Instant::now);
        Self {
            task: created.task,
            group,
            directory: created.directory,
            bootstrap,
            bootstrap_progress: None,
            missing: Vec::new(),
        }
    }
}

/// Input partitions whose fetching changes with their task's restoration,
/// not yet told to the consumer.
#[derive(Default)]
struct PartitionHolds {
    hold: Vec<TopicPartition>,
    release: Vec<TopicPartition>,
}

impl PartitionHolds {
    fn hold(&mut self, partition: TopicPartition) {
        self.release.retain(|p| *p != partition);
        if !self.hold.contains(&partition) {
            self.hold.push(partition);
        }
    }

    fn release(&mut self, partition: TopicPartition) {
        self.hold.retain(|p| *p != partition);
        if !self.release.contains(&partition) {
            self.release.push(partition);
        }
    }

    /// The partition was revoked: nothing to tell.
    fn forget(&mut self, partition: &TopicPartition) {
        self.hold.retain(|p| p != partition);
        self.release.retain(|p| p != partition);
    }
}

/// A thread's tasks, as an interactive query reads their stores.
pub(crate) struct TaskStores<'a> {
    tasks: &'a FxHashMap<TaskId, TaskEntry>,
    restoring: &'a FxHashMap<TaskId, TaskEntry>,
    standbys: &'a StandbyTasks,
}

impl LocalStores for TaskStores<'_> {
    fn instances(&self, store: &str) -> Vec<StoreInstance<'_>> {
        let running = self.tasks.iter().map(|(id, e)| (id, e, true));
        let restoring = self.restoring.iter().map(|(id, e)| (id, e, false));
        let mut found: Vec<StoreInstance<'_>> = running
            .chain(restoring)
            .filter_map(|(id, entry, restored)| {
                entry.task.stores().get(store).map(|built| StoreInstance {
                    task: *id,
                    store: built,
                    current: restored && !entry.group.bootstrapping() && entry.missing.is_empty(),
                })
            })
            .collect();
        self.standbys.instances(store, &mut found);
        found
    }
}

/// Offset sums by task: where the local state is, and how far its
/// changelogs reach.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct TaskOffsetSums {
    pub offsets: Vec<(TaskId, i64)>,
    pub ends: Vec<(TaskId, i64)>,
}

/// A stream thread's tasks.
pub(crate) struct TaskManager {
    thread: String,
    config: StreamsConfig,
    /// Where the bootstraps of tables report their progress.
    restore_board: RestoreBoard,
    sources: Arc<SourceTopicIndex>,
    /// The source topic buffered last (its shared name) and its
    /// subtopology: records come in runs of one topic, so most need no
    /// lookup of their topic's subtopology.
    last_source: Option<(Arc<str>, u32)>,
    /// The running tasks. Fx-hashed: looked up per consumed record.
    tasks: FxHashMap<TaskId, TaskEntry>,
    /// Active tasks whose stores the state updater restores.
    restoring: FxHashMap<TaskId, TaskEntry>,
    creator: TaskCreator,
    updater: StateUpdater,
    /// Input partitions to hold (their task restores) and to release (it
    /// is restored), for the consumer: see [`TaskManager::take_holds`].
    holds: PartitionHolds,
    /// When restoring tasks were last checked for a progress checkpoint.
    restore_checkpoint_checked: Instant,
    /// Progress checkpoints waiting for their task's stores to be flushed.
    progress_checkpoints: ProgressCheckpoints,
    /// Topics a task reads to their end before its other partitions.
    bootstrap_topics: HashSet<String>,
    /// The store each bootstrap topic fills.
    bootstrap_stores: HashMap<String, String>,
    /// Next offset to commit per partition: last processed + 1.
    processed: HashMap<TopicPartition, i64>,
    /// The next offsets of the last processing step, whose outputs are in
    /// the outbox: they count as processed once the outbox is sent
    /// ([`TaskManager::outputs_sent`]).
    unsent: Vec<(TopicPartition, i64)>,
    /// Whether anything since the last commit needs one (Kafka Streams'
    /// `commitNeeded`): a record processed, a wall-clock punctuation fired
    /// (its outputs and store writes), a consumer position moved past
    /// transaction markers. An idle thread commits nothing: under
    /// exactly-once each commit is a transaction's round trips.
    commit_needed: bool,
    /// Committed offsets of the assigned partitions, read at assignment:
    /// where reading starts before a record is consumed (for KIP-695 and
    /// the lag).
    start_offsets: HashMap<TopicPartition, i64>,
    /// What was committed with those offsets (partition time, operators'
    /// metadata), for the tasks to resume from.
    start_metadata: HashMap<TopicPartition, PartitionMetadata>,
    task_created: Counter,
    task_closed: Counter,
    /// The thread's side of async processors: their runtime, the
    /// thread's in-flight count, the signal of finished calls.
    async_side: crate::async_runtime::ThreadAsync,
    /// Standby (and warm-up) tasks the streams group gave the thread.
    standbys: StandbyTasks,
}

impl TaskManager {
    /// The task manager of stream thread `thread`.
    pub(super) fn new(
        thread: &str,
        config: &StreamsConfig,
        instance: &Instance,
        topology: Arc<Topology>,
        sources: Arc<SourceTopicIndex>,
        sensors: &ThreadSensors,
        partition_counts: Rc<dyn kstreams_dsl::PartitionCounts>,
    ) -> Result<Self, RuntimeError> {
        Ok(Self {
            thread: thread.to_string(),
            config: config.clone(),
            restore_board: instance.restore_board.clone(),
            bootstrap_topics: topology
                .bootstrap_topics(&config.application_id)
                .into_iter()
                .collect(),
            bootstrap_stores: super::bootstrap_progress::bootstrap_stores(
                &topology,
                &config.application_id,
            ),
            creator: TaskCreator::new(thread, config, topology, instance, partition_counts)?,
            updater: StateUpdater::new(thread, config, instance.restore_board.clone()),
            restoring: FxHashMap::default(),
            holds: PartitionHolds::default(),
            restore_checkpoint_checked: Instant::now(),
            progress_checkpoints: ProgressCheckpoints::default(),
            standbys: StandbyTasks::new(thread, config, instance.standby_listener.clone())?,
            sources,
            last_source: None,
            tasks: FxHashMap::default(),
            processed: HashMap::new(),
            unsent: Vec::new(),
            commit_needed: false,
            start_offsets: HashMap::new(),
            start_metadata: HashMap::new(),
            task_created: sensors.task_created.clone(),
            task_closed: sensors.task_closed.clone(),
            async_side: crate::async_runtime::ThreadAsync::new(
                instance.async_executor.clone(),
                config.async_limits,
            )
            .with_metrics(&config.metrics, thread)?,
        })
    }

    /// The thread's tasks as interactive queries read them.
    pub(super) fn local_stores(&self) -> TaskStores<'_> {
        TaskStores {
            tasks: &self.tasks,
            restoring: &self.restoring,
            standbys: &self.standbys,
        }
    }

    /// Makes standby tasks `ids` (those not active here already): their
    /// stores caught up with the changelogs, then kept current.
    pub(super) fn add_standbys(&mut self, ids: &[TaskId]) -> Result<(), RuntimeError> {
        for id in ids {
            if !self.tasks.contains_key(id) && !self.restoring.contains_key(id) {
                self.standbys.add(*id, &mut self.creator)?;
            }
        }
        Ok(())
    }

    /// Closes standby tasks `ids`, checkpointed: `promoted` when they are
    /// to be active tasks of this thread next.
    pub(super) fn remove_standbys(
        &mut self,
        ids: &[TaskId],
        promoted: bool,
    ) -> Result<(), RuntimeError> {
        let why = if promoted {
            SuspendReason::Promoted
        } else {
            SuspendReason::Migrated
        };
        for id in ids {
            self.standbys.remove(*id, why, &self.creator)?;
        }
        Ok(())
    }

    /// Applies the standby tasks' changelog records fetched so far.
    pub(super) fn update_standbys(&mut self) -> Result<usize, RuntimeError> {
        self.standbys.update()
    }

    /// At a commit: checkpoints the standbys that moved on enough.
    pub(super) fn checkpoint_standbys(&mut self) -> Result<(), RuntimeError> {
        self.standbys.maybe_checkpoint(&self.creator)
    }

    /// What the thread tells its streams group about the state it has at
    /// hand, for the broker's assignment (Kafka Streams' `TaskManager#
    /// maybeUpdateTaskOffsetSumSnapshot`): the offset sums of the tasks on
    /// disk, the thread's running active tasks left out and its standbys at
    /// their live positions; and the standbys' changelog end sums.
    pub(super) fn task_offset_sums(&self) -> Result<TaskOffsetSums, RuntimeError> {
        let mut offsets: BTreeMap<TaskId, i64> = self
            .creator
            .offset_sums_on_disk()?
            .into_iter()
            .filter(|(id, _)| !self.tasks.contains_key(id))
            .collect();
        let mut ends = Vec::new();
        for (id, offset, end) in self.standbys.offset_sums() {
            offsets.insert(id, offset);
            if let Some(end) = end {
                ends.push((id, end));
            }
        }
        Ok(TaskOffsetSums {
            offsets: offsets.into_iter().collect(),
            ends,
        })
    }

    /// Gives a new task with async processors the thread's async side.
    fn install_async(
        async_side: &mut crate::async_runtime::ThreadAsync,
        task: &mut StreamTask,
    ) -> Result<(), RuntimeError> {
        if task.has_async_nodes() {
            task.install_async_runtime(async_side.for_task()?);
        }
        Ok(())
    }

    /// Records in the tasks' async processors, called or waiting.
    pub(super) fn async_in_flight(&self) -> usize {
        self.async_side.in_flight()
    }

    /// Whether an async call finished since completions were last applied.
    pub(super) fn async_completion_ready(&self) -> bool {
        self.async_side.completion_ready()
    }

    /// Waits up to `timeout` for an async call to finish.
    pub(super) fn wait_for_async(&self, timeout: Duration) -> bool {
        self.async_side.wait(timeout)
    }

    /// Applies the async calls that finished, in every task; what their
    /// results wrote goes into `outbox` (the changelogs' records last).
    pub(super) fn apply_async_completions(
        &mut self,
        outbox: &mut Outbox,
    ) -> Result<(), RuntimeError> {
        self.async_side.take_ready();
        for entry in self.tasks.values_mut() {
            if entry.task.apply_async_completions()? > 0 {
                entry
                    .task
                    .drain_output_into(outbox.task_records(entry.task.id()));
            }
        }
        outbox.extend(self.creator.changelog().drain());
        Ok(())
    }

    /// The task reading partition `partition` of `topic`.
    fn task_id(&self, topic: &str, partition: i32) -> Option<TaskId> {
        Some(TaskId {
            subtopology: self.sources.subtopology_of(topic)?,
            partition,
        })
    }

    /// Counts a record of task `id` dropped after it left the task (the
    /// production handler resumed after its refusal); nothing if the task
    /// is gone meanwhile.
    pub(super) fn count_dropped(&self, id: TaskId) {
        if let Some(entry) = self.tasks.get(&id) {
            entry.task.metrics().dropped.inc();
        }
    }

    /// The ids of the tasks, in no particular order.
    #[cfg(test)]
    pub(super) fn task_ids(&self) -> impl Iterator<Item = TaskId> + '_ {
        self.tasks.keys().copied()
    }

    /// Buffers a consumed record in its task's partition group, with the
    /// event time extracted now (the group orders by it, as Kafka Streams'
    /// `RecordQueue`). Returns how many records that partition now
    /// buffers, or `None` when the record was not buffered (no task owns
    /// its partition, or the extractor skipped it).
    pub(super) fn buffer(&mut self, record: ConsumedRecord) -> Result<Option<usize>, RuntimeError> {
        let subtopology = match &self.last_source {
            Some((topic, subtopology)) if Arc::ptr_eq(topic, &record.topic) => *subtopology,
            _ => {
                let Some(subtopology) = self.sources.subtopology_of(&record.topic) else {
                    return Ok(None);
                };
                self.last_source = Some((Arc::clone(&record.topic), subtopology));
                subtopology
            }
        };
        let id = TaskId {
            subtopology,
            partition: record.partition,
        };
        let Some(entry) = self.tasks.get_mut(&id) else {
            // Fetched before its partition was held, or a record of a
            // partition revoked in this poll.
            return self.buffer_restoring(id, record);
        };
        let Some(timestamp) = entry.task.extract_timestamp(&record)? else {
            return Ok(None);
        };
        Ok(Some(entry.group.push(record, timestamp)))
    }

    /// Buffers a record of a restoring task (see [`TaskManager::buffer`]).
    #[cold]
    fn buffer_restoring(
        &mut self,
        id: TaskId,
        record: ConsumedRecord,
    ) -> Result<Option<usize>, RuntimeError> {
        let Some(entry) = self.restoring.get_mut(&id) else {
            return Ok(None);
        };
        let Some(timestamp) = entry.task.extract_timestamp(&record)? else {
            return Ok(None);
        };
        Ok(Some(entry.group.push(record, timestamp)))
    }

    /// How many records of a partition its task buffers.
    pub(super) fn buffered(&self, topic: &str, partition: i32) -> usize {
        self.task_id(topic, partition)
            .and_then(|id| self.entry(id))
            .map_or(0, |e| e.group.buffered(topic, partition))
    }

    /// Active task `id`, running or restoring.
    fn entry(&self, id: TaskId) -> Option<&TaskEntry> {
        self.tasks.get(&id).or_else(|| self.restoring.get(&id))
    }

    /// Active task `id`, running or restoring.
    fn entry_mut(&mut self, id: TaskId) -> Option<&mut TaskEntry> {
        match self.tasks.get_mut(&id) {
            Some(entry) => Some(entry),
            None => self.restoring.get_mut(&id),
        }
    }

    /// Where reading of an assigned partition started: its committed offset.
    pub(super) fn start_offset(&self, topic: &str, partition: i32) -> Option<i64> {
        start_offset_in(&self.start_offsets, topic, partition)
    }

    /// Takes partitions over: creates the tasks that read them (handed to
    /// the state updater, their partitions held until their stores are
    /// restored), resumes each partition from what was committed with
    /// its offset (`committed`, when the consumer could say), and reads a
    /// bootstrap partition from and up to `bootstrap_end`'s offsets before
    /// the task's others.
    pub(super) fn assign(
        &mut self,
        assigned: &[TopicPartition],
        committed: &[Committed],
        mut bootstrap_end: impl FnMut(&str, i32) -> Option<(i64, i64)>,
    ) -> Result<(), RuntimeError> {
        for c in committed {
            if let Some(offset) = c.offset {
                self.start_offsets.insert(c.partition.clone(), offset);
            }
            if let Some(metadata) = &c.metadata {
                self.start_metadata
                    .insert(c.partition.clone(), metadata.clone());
            }
        }
        for tp in assigned {
            let (topic, partition) = (&tp.topic, &tp.partition);
            let Some(id) = self.task_id(topic, *partition) else {
                continue;
            };
            if self.entry(id).is_none() {
                self.open(id, PartitionGroup::default())?;
                self.task_created.inc();
                log::info!("{}: created task {id}", self.thread);
            }
            if self.restoring.contains_key(&id) {
                self.holds.hold(tp.clone());
            }
            let end = if self.bootstrap_topics.contains(topic) {
                bootstrap_end(topic, *partition)
            } else {
                None
            };
            let entry = match self.tasks.get_mut(&id) {
                Some(entry) => entry,
                None => self.restoring.get_mut(&id).expect("present"),
            };
            if let Some(committed) = self.start_metadata.remove(tp) {
                entry.task.resume_partition(
                    topic,
                    *partition,
                    committed.partition_time,
                    committed.processor,
                );
            }
            match end {
                Some((start, end)) => {
                    let store = self.bootstrap_stores.get(topic).unwrap_or(topic);
                    super::bootstrap_progress::BootstrapProgress::start_in(
                        &mut entry.bootstrap_progress,
                        (
                            &self.config,
                            &self.restore_board,
                            &self.thread,
                            &id.to_string(),
                        ),
                        (topic, *partition, store),
                        (start, end),
                    )?;
                    entry.group.add_bootstrap(topic, *partition, end);
                    entry.bootstrap.get_or_insert_with(Instant::now);
                }
                None => entry.group.add_partition(topic, *partition),
            }
        }
        Ok(())
    }

    /// Creates task `id` with its input partitions' group and hands it to
    /// the state updater: restoring until its stores are current. A task
    /// with nothing to restore (stateless, or current already) runs at once.
    fn open(&mut self, id: TaskId, group: PartitionGroup) -> Result<(), RuntimeError> {
        let mut created = self.creator.create(id)?;
        Self::install_async(&mut self.async_side, &mut created.task)?;
        let restore_from = std::mem::take(&mut created.restore_from);
        self.updater.add(&created.task, restore_from)?;
        let entry = TaskEntry::new(created, group);
        match self.updater.take_restored_task(id) {
            Some(reached) => {
                self.creator.set_restored(&reached);
                self.creator
                    .begin_processing(&entry.task, entry.directory.as_ref())?;
                self.tasks.insert(id, entry);
            }
            None => {
                self.restoring.insert(id, entry);
            }
        }
        Ok(())
    }

    /// Whether an active task restores: the thread is not RUNNING yet
    /// (Kafka Streams' `StreamThread.checkStateUpdater`).
    pub(super) fn restores_active(&self) -> bool {
        !self.restoring.is_empty()
    }

    /// Whether a running task has records buffered.
    pub(super) fn running_have_records(&self) -> bool {
        self.tasks.values().any(|e| !e.group.is_empty())
    }

    /// Gives the state updater about `budget` to restore, then moves the
    /// tasks it restored to the running ones (their partitions released,
    /// see [`TaskManager::take_holds`]). Under at-least-once, tasks that
    /// restored enough since their last progress checkpoint start one every
    /// commit interval, written once their stores are flushed in the
    /// background (see [`ProgressCheckpoints`]), so that a restore
    /// interrupted by a rebalance or a crash resumes from there. Returns
    /// whether a task became running.
    pub(super) fn restore(&mut self, budget: Duration) -> Result<bool, RuntimeError> {
        if self.restoring.is_empty() {
            return Ok(false);
        }
        let began = Instant::now();
        self.updater.step(budget)?;
        let stepped = began.elapsed();
        let restored = self.updater.take_restored();
        let changed = !restored.is_empty();
        for task in restored {
            self.progress_checkpoints.forget(task.id);
            let Some(entry) = self.restoring.remove(&task.id) else {
                continue;
            };
            self.creator.set_restored(&task.reached);
            if self.config.processing_guarantee != super::config::ProcessingGuarantee::ExactlyOnceV2
            {
                // Its stores are flushed (the state updater waited for it):
                // a crash before its first commit resumes from the end of
                // the restore, as Kafka Streams' checkpoint at a restore's
                // end does. Under exactly-once the first transaction decides.
                self.checkpoint(task.id, &entry, &known_offsets(&task.reached))?;
            }
            self.creator
                .begin_processing(&entry.task, entry.directory.as_ref())?;
            for (topic, partition) in entry.group.partitions() {
                self.holds.release(TopicPartition::new(topic, partition));
            }
            log::info!("{}: task {} is running", self.thread, task.id);
            self.tasks.insert(task.id, entry);
        }
        let interval = self.config.effective_commit_interval();
        if self.config.processing_guarantee != super::config::ProcessingGuarantee::ExactlyOnceV2
            && self.restore_checkpoint_checked.elapsed() >= interval
        {
            self.restore_checkpoint_checked = Instant::now();
            let flushing = &self.progress_checkpoints;
            for (id, reached) in self.updater.checkpoints_due(|id| flushing.is_flushing(id)) {
                if let Some(entry) = self.restoring.get(&id) {
                    self.progress_checkpoints.start(id, &entry.task, reached)?;
                }
            }
        }
        for (id, reached) in self.progress_checkpoints.take_flushed()? {
            if let Some(entry) = self.restoring.get(&id) {
                self.checkpoint(id, entry, &reached)?;
            }
        }
        let took = began.elapsed();
        if took > budget + SLOW_RESTORE_SLICE {
            log::warn!(
                "{}: a restore slice took {:.2} s (budget {:.2} s): restoring {:.2} s, \
                 starting restored tasks and checkpoints {:.2} s",
                self.thread,
                took.as_secs_f64(),
                budget.as_secs_f64(),
                stepped.as_secs_f64(),
                (took - stepped).as_secs_f64()
            );
        }
        Ok(changed)
    }

    /// Closes restoring task `id` cleanly, whether its partitions were
    /// revoked or lost (it holds committed changelog records only, as Kafka
    /// Streams' tasks in its state updater): its restorations suspended,
    /// its stores flushed and checkpointed at what they reached.
    fn close_restoring(&mut self, id: TaskId, mut entry: TaskEntry) -> Result<(), RuntimeError> {
        self.progress_checkpoints.forget(id);
        let reached = known_offsets(&self.updater.remove(id)?.unwrap_or_default());
        for (topic, partition) in entry.group.partitions() {
            self.holds.forget(&TopicPartition::new(topic, partition));
        }
        Self::flush_stores(&entry.task)?;
        self.checkpoint(id, &entry, &reached)?;
        entry.task.close();
        self.task_closed.inc();
        self.config.metrics.remove_task(&id.to_string());
        log::info!("{}: closed restoring task {id}", self.thread);
        Ok(())
    }

    /// Flushes a task's stores (before a checkpoint says what they hold).
    fn flush_stores(task: &StreamTask) -> Result<(), RuntimeError> {
        for built in task.stores().values() {
            built.lifecycle.borrow_mut().flush()?;
        }
        Ok(())
    }

    /// The input partitions to pause (their task restores) and to resume
    /// (it is restored) since the last call.
    pub(super) fn take_holds(&mut self) -> (Vec<TopicPartition>, Vec<TopicPartition>) {
        (
            std::mem::take(&mut self.holds.hold),
            std::mem::take(&mut self.holds.release),
        )
    }

    /// Gives partitions up: forgets what was noted for them and closes each
    /// task left without partitions. `clean` says the tasks were just
    /// committed, so their stores hold exactly what their changelogs do up
    /// to `delivered` (acknowledged offsets): their checkpoints are written
    /// and whoever opens them next restores from there. Otherwise (lost
    /// partitions, an aborted commit) their work since the last commit is
    /// thrown away: they close dirty.
    pub(super) fn revoke(
        &mut self,
        revoked: &[TopicPartition],
        clean: bool,
        delivered: &HashMap<TopicPartition, i64>,
    ) -> Result<(), RuntimeError> {
        for key in revoked {
            self.start_offsets.remove(key);
            self.start_metadata.remove(key);
            self.processed.remove(key);
            let (topic, partition) = (key.topic.as_str(), key.partition);
            let Some(id) = self.task_id(topic, partition) else {
                continue;
            };
            self.holds.forget(key);
            let Some(entry) = self.entry_mut(id) else {
                continue;
            };
            if !entry.group.remove_partition(topic, partition) {
                continue; // the task keeps other partitions
            }
            if let Some(entry) = self.restoring.remove(&id) {
                self.close_restoring(id, entry)?;
                continue;
            }
            let mut entry = self.tasks.remove(&id).expect("present");
            if clean {
                self.checkpoint(id, &entry, delivered)?;
                entry.task.close();
            } else {
                self.close_dirty(id, &mut entry.task);
            }
            self.task_closed.inc();
            self.config.metrics.remove_task(&id.to_string());
            log::info!("{}: closed task {id}", self.thread);
        }
        Ok(())
    }

    /// The source topics a task must have partitions of, with the
    /// sub-topology reading each.
    pub(super) fn source_topics(&self) -> Vec<(String, u32)> {
        self.sources
            .topics()
            .filter_map(|t| Some((t.to_string(), self.sources.subtopology_of(t)?)))
            .collect()
    }

    /// For each task, notes the partitions of its source topics this thread
    /// does not have, given each topic's partition count (`counts`; pattern
    /// sources are not known in advance and not checked). The range
    /// assignors give them together; a split (KIP-848 moving co-partitioned
    /// partitions in different steps, or a non-range assignor) holds the
    /// task back instead of running half of it here and half on another
    /// member.
    pub(super) fn update_missing_partitions(&mut self, counts: &HashMap<String, i32>) {
        let topics = self.source_topics();
        for (id, entry) in self.tasks.iter_mut().chain(self.restoring.iter_mut()) {
            let missing =
                missing_partitions(*id, &topics, counts, |t, p| entry.group.has_partition(t, p));
            if !missing.is_empty() && missing != entry.missing {
                log::info!(
                    "{}: task {id} waits for {missing:?}, assigned elsewhere for now, before \
                     processing its other partitions",
                    self.thread
                );
            }
            entry.missing = missing;
        }
    }

    /// The tasks as [`TaskMetadata`], ordered by id, with the partitions'
    /// lags where `lags` knows them.
    pub(super) fn metadata(&self, lags: &HashMap<TopicPartition, i64>) -> Vec<TaskMetadata> {
        let running = self.tasks.iter().map(|(id, e)| (id, e, false));
        let restoring = self.restoring.iter().map(|(id, e)| (id, e, true));
        let mut tasks: Vec<TaskMetadata> = running
            .chain(restoring)
            .map(|(id, entry, restoring)| TaskMetadata {
                subtopology: id.subtopology,
                partition: id.partition,
                topic_partitions: entry
                    .group
                    .partitions()
                    .map(|(topic, partition)| TaskPartition {
                        topic: topic.to_string(),
                        partition,
                        lag: lags.get(&TopicPartition::new(topic, partition)).copied(),
                    })
                    .collect(),
                bootstrapping: entry.group.bootstrapping(),
                restoring,
            })
            .collect();
        tasks.sort_by_key(|t| (t.subtopology, t.partition));
        tasks
    }

    /// The standby tasks, by id, each with its input partitions.
    pub(super) fn standby_metadata(&self) -> Vec<TaskMetadata> {
        let topics = self.source_topics();
        let mut tasks: Vec<TaskMetadata> = self
            .standbys
            .task_ids()
            .map(|id| TaskMetadata {
                subtopology: id.subtopology,
                partition: id.partition,
                topic_partitions: topics
                    .iter()
                    .filter(|(_, subtopology)| *subtopology == id.subtopology)
                    .map(|(topic, _)| TaskPartition {
                        topic: topic.clone(),
                        partition: id.partition,
                        lag: None,
                    })
                    .collect(),
                bootstrapping: false,
                restoring: false,
            })
            .collect();
        tasks.sort_by_key(|t| (t.subtopology, t.partition));
        tasks
    }

    /// Whether a task still reads its bootstrap partitions.
    pub(super) fn bootstrapping(&self) -> bool {
        self.tasks.values().any(|e| e.group.bootstrapping())
    }

    /// Ends the bootstrap of partitions the consumer has read past their
    /// end (`positions`: transaction markers are never handed out as
    /// records); the bootstrap progress reports progress as a restore
    /// does, and the task's end of bootstrap is logged here.
    pub(super) fn track_bootstrap(&mut self, positions: &Positions) {
        let position = |topic: &str, partition: i32| {
            positions
                .get(&TopicPartition::new(topic, partition))
                .copied()
        };
        for (id, entry) in &mut self.tasks {
            let Some(began) = entry.bootstrap else {
                continue;
            };
            let pending: Vec<(String, i32, i64)> = entry.group.bootstrap_partitions().to_vec();
            for (topic, partition, _) in &pending {
                if let Some(at) = position(topic, *partition) {
                    if let Some(progress) = &mut entry.bootstrap_progress {
                        progress.position(topic, *partition, at);
                    }
                    entry.group.bootstrap_position(topic, *partition, at);
                }
            }
            if !entry.group.bootstrapping() {
                log::info!(
                    "{}: task {id} bootstrapped its tables in {:.1} s; processing its other partitions",
                    self.thread,
                    began.elapsed().as_secs_f64()
                );
                entry.bootstrap = None;
            }
        }
    }

    /// Runs every task that has all its partitions over what its partition
    /// group allows now (`lagging` says whether a partition is known to be
    /// behind its end, given the offset its reading started at), each for
    /// at most `slice` (and at least one record), writing into `outbox`
    /// (every task's outputs, then the stores' changelog records). Returns
    /// whether a task stopped at the end of its slice with records it could
    /// still process: the caller sends the outbox and calls again, so a slow
    /// processor's outputs go out as it makes them, not after the whole
    /// polled batch. The offsets processed count only once the outbox is
    /// sent ([`TaskManager::outputs_sent`]).
    ///
    /// `lagging` is asked only when a task of several partitions finds one
    /// empty, at most once per partition and call: it was asked for every
    /// partition on every pass, through rust-rdkafka's `position()`, which
    /// waits on librdkafka's main thread (half of a pass-through's
    /// stream-thread context switches).
    pub(super) fn process(
        &mut self,
        lagging: IsLagging<'_>,
        slice: Duration,
        outbox: &mut Outbox,
    ) -> Result<bool, RuntimeError> {
        let max_idle = self.config.max_task_idle;
        let start_offsets = &self.start_offsets;
        let asked = std::cell::RefCell::new(Vec::<(String, i32, bool)>::new());
        let is_lagging = |topic: &str, partition: i32| {
            let known = asked
                .borrow()
                .iter()
                .find(|(t, p, _)| *p == partition && t == topic)
                .map(|&(_, _, lagging)| lagging);
            known.unwrap_or_else(|| {
                let start = start_offset_in(start_offsets, topic, partition);
                let lags = lagging(topic, partition, start);
                asked
                    .borrow_mut()
                    .push((topic.to_string(), partition, lags));
                lags
            })
        };
        let mut more = false;
        if self.async_side.in_flight() > 0 {
            self.async_side.take_ready();
        }
        for entry in self.tasks.values_mut().filter(|e| e.missing.is_empty()) {
            let now = Instant::now();
            let mut clock = SliceClock::start(slice);
            // Finished async calls first: they free room under the bounds.
            entry.task.apply_async_completions()?;
            // A task at its async bound takes nothing: its records stay
            // buffered (and its partitions pause by the buffered bound).
            while entry.task.admits_records() {
                let Some((record, timestamp)) = entry.group.next(
                    max_idle,
                    now,
                    &entry.task.metrics().enforced_processing,
                    &is_lagging,
                ) else {
                    break;
                };
                entry.task.process_at(record, timestamp, clock.wall_ms())?;
                if clock.record_done() {
                    // Records left over wait for the next call, whether or
                    // not the group would give one now.
                    more |= !entry.group.is_empty();
                    break;
                }
            }
            self.unsent.extend(
                entry
                    .group
                    .take_progress()
                    .map(|(topic, partition, next)| (TopicPartition::new(topic, partition), next)),
            );
            entry
                .task
                .drain_output_into(outbox.task_records(entry.task.id()));
        }
        outbox.extend(self.creator.changelog().drain());
        Ok(more)
    }

    /// The outbox was sent (its records are with the producer): the offsets
    /// processed for it count as processed.
    pub(super) fn outputs_sent(&mut self) {
        if !self.unsent.is_empty() {
            self.commit_needed = true;
            self.processed.extend(self.unsent.drain(..));
        }
    }

    /// Whether a commit has anything to make durable.
    pub(super) fn commit_needed(&self) -> bool {
        self.commit_needed
    }

    /// A commit went through: what was processed is durable.
    pub(super) fn committed(&mut self) {
        self.commit_needed = false;
    }

    /// Runs the tasks' wall-clock punctuators due at `now`, writing into
    /// `outbox`. One that fires needs a commit even without input, as in
    /// Kafka Streams (`maybePunctuateSystemTime`): under exactly-once its
    /// outputs are visible only once their transaction commits.
    pub(super) fn punctuate(&mut self, now: i64, outbox: &mut Outbox) -> Result<(), RuntimeError> {
        for entry in self.tasks.values_mut() {
            self.commit_needed |= entry.task.advance_wall_clock(now)?;
            entry
                .task
                .drain_output_into(outbox.task_records(entry.task.id()));
        }
        outbox.extend(self.creator.changelog().drain());
        Ok(())
    }

    /// Whether a task asked for a commit (`ProcessorContext::commit`).
    pub(super) fn commit_requested(&mut self) -> bool {
        // Every task's request is taken, not just the first one's.
        let mut requested = false;
        for entry in self.tasks.values_mut() {
            requested |= entry.task.context().take_commit_request();
        }
        requested
    }

    /// Flushes every task's stores (their caches write downstream and to
    /// the changelogs) into `outbox`: what that produced must go out before
    /// the offsets are committed.
    pub(super) fn flush(&mut self, outbox: &mut Outbox) -> Result<(), RuntimeError> {
        for entry in self.tasks.values_mut() {
            entry.task.flush()?;
            entry
                .task
                .drain_output_into(outbox.task_records(entry.task.id()));
        }
        outbox.extend(self.creator.changelog().drain());
        Ok(())
    }

    /// The offsets to commit, each with Kafka Streams'
    /// `TopicPartitionMetadata`: its task's processed partition time and
    /// operators' metadata, so a restarted task resumes from them.
    pub(super) fn offsets_to_commit(&self) -> Vec<ToCommit> {
        let mut offsets = Vec::with_capacity(self.processed.len());
        for (tp, offset) in &self.processed {
            let (topic, partition) = (&tp.topic, &tp.partition);
            let entry = self
                .task_id(topic, *partition)
                .and_then(|id| self.tasks.get(&id));
            // Never past a record still in an async processor: after a
            // crash it is read again from there.
            let unfinished = entry.and_then(|e| e.task.lowest_unfinished_offset(topic, *partition));
            let offset = unfinished.map_or(*offset, |lowest| lowest.min(*offset));
            let metadata = entry.map(|entry| {
                PartitionMetadata {
                    partition_time: entry.task.processed_partition_time(topic, *partition),
                    processor: entry.task.processor_metadata().clone(),
                }
                .encode()
            });
            offsets.push(ToCommit {
                partition: tp.clone(),
                offset,
                metadata,
            });
        }
        offsets
    }

    /// Moves the offsets to commit up to the consumer's `positions` where a
    /// task has nothing of its partition left to process: what lies
    /// between is not records but control records (transaction markers),
    /// which the consumer skips. Kafka Streams commits the consumer's
    /// position there too (`StreamTask#committableOffsetsAndMetadata`);
    /// otherwise a group reading transactional input (a repartition topic
    /// under exactly-once) keeps a lag of 1 after the last marker, and an
    /// application taking over would count it as unread.
    ///
    /// Only partitions with a record processed since the tasks were last
    /// (re)built move: after a rewind the consumer's position is trusted
    /// once a record read from the rewound position went through.
    /// A partition that moves needs a commit (Kafka Streams'
    /// `StreamTask#commitNeeded` asks the consumer too): the marker after
    /// a transaction's last record is often passed only after the commit of
    /// that record.
    pub(super) fn advance_to_positions(&mut self, positions: &Positions) {
        for (key, &position) in positions {
            let Some(&done) = self.processed.get(key) else {
                continue;
            };
            if position > done && self.active_and_drained(&key.topic, key.partition) {
                self.processed.insert(key.clone(), position);
                self.commit_needed = true;
            }
        }
    }

    /// Whether an active task reads the partition and holds none of its
    /// records, buffered or in an async processor.
    fn active_and_drained(&self, topic: &str, partition: i32) -> bool {
        self.task_id(topic, partition)
            .and_then(|id| self.tasks.get(&id))
            .is_some_and(|e| {
                e.group.has_partition(topic, partition)
                    && e.group.buffered(topic, partition) == 0
                    && e.task.lowest_unfinished_offset(topic, partition).is_none()
            })
    }

    /// Forgets what was processed since the last commit: those offsets must
    /// never be committed (their outputs may not have gone out).
    pub(super) fn forget_processed(&mut self) {
        self.processed.clear();
        self.unsent.clear();
        self.commit_needed = false;
    }

    fn checkpoint(
        &self,
        id: TaskId,
        entry: &TaskEntry,
        delivered: &HashMap<TopicPartition, i64>,
    ) -> Result<(), RuntimeError> {
        match &entry.directory {
            Some(directory) => self
                .creator
                .write_checkpoint(id, directory, &entry.task, delivered),
            None => Ok(()),
        }
    }

    /// Under exactly-once with transactional stores, after the
    /// transaction committed: every task's stores write what they held,
    /// with the changelog offsets it reaches.
    pub(super) fn commit_transactional_stores(
        &self,
        delivered: &HashMap<TopicPartition, i64>,
    ) -> Result<(), RuntimeError> {
        for (id, entry) in &self.tasks {
            if entry.directory.is_some() {
                self.creator
                    .commit_store_offsets(*id, &entry.task, delivered)?;
            }
        }
        Ok(())
    }

    /// The memory the tasks' transactional stores hold in writes not yet
    /// committed.
    pub(super) fn uncommitted_store_bytes(&self) -> usize {
        self.tasks
            .values()
            .flat_map(|entry| entry.task.stores().values())
            .map(|store| store.lifecycle.borrow().uncommitted_bytes())
            .sum()
    }

    /// Writes every stateful task's checkpoint from the acknowledged
    /// changelog offsets.
    pub(super) fn write_checkpoints(
        &self,
        delivered: &HashMap<TopicPartition, i64>,
    ) -> Result<(), RuntimeError> {
        for (id, entry) in &self.tasks {
            self.checkpoint(*id, entry, delivered)?;
        }
        Ok(())
    }

    /// Goes back to the last commit (`committed`: the offsets and their
    /// metadata, where the consumer was sought to): buffered records are
    /// dropped and every running task is rebuilt from its changelogs (it
    /// restores again, with the state updater), so what an aborted
    /// transaction saw is processed again from scratch, from the committed
    /// partition times and operators' metadata. Restoring tasks hold
    /// committed changelog records only: they restore on.
    pub(super) fn rewind(&mut self, committed: &[Committed]) -> Result<(), RuntimeError> {
        self.forget_processed();
        for entry in self.restoring.values_mut() {
            entry.group.clear();
        }
        let ids: Vec<TaskId> = self.tasks.keys().copied().collect();
        let mut groups = Vec::with_capacity(ids.len());
        for id in ids {
            let mut entry = self.tasks.remove(&id).expect("present");
            self.close_dirty(id, &mut entry.task);
            let mut group = std::mem::take(&mut entry.group);
            group.clear();
            groups.push((id, group));
            // `entry` drops here with the old task's directory lock, before
            // a new task takes it.
        }
        // The transaction was aborted before the tasks closed, so every
        // changelog record still waiting is of the aborted work (the dirty
        // closes above write none; this catches whatever else did, such as
        // a processor's close writing to an uncached store): sent now, it
        // would go into the next transaction and be committed.
        let dropped = self.creator.changelog().discard_from(0);
        if dropped > 0 {
            log::debug!(
                "{}: rewind dropped {dropped} changelog records of the aborted transaction",
                self.thread
            );
        }
        for (id, group) in groups {
            self.open(id, group)?;
            if let Some(entry) = self.restoring.get(&id) {
                for (topic, partition) in entry.group.partitions() {
                    self.holds.hold(TopicPartition::new(topic, partition));
                }
            }
        }
        for c in committed {
            let Some(metadata) = &c.metadata else {
                continue;
            };
            let (topic, partition) = (&c.partition.topic, c.partition.partition);
            let Some(id) = self.task_id(topic, partition) else {
                continue;
            };
            if let Some(entry) = self.entry_mut(id) {
                entry.task.resume_partition(
                    topic,
                    partition,
                    metadata.partition_time,
                    metadata.processor.clone(),
                );
            }
        }
        Ok(())
    }

    /// Closes a task whose work since the last commit is thrown away (Kafka
    /// Streams' `closeTaskDirty`): nothing it holds is written down, and
    /// the changelog records its close wrote anyway (a processor's close
    /// writing to an uncached store) are dropped, so that none reaches a
    /// changelog partition that may be another member's by now.
    fn close_dirty(&self, id: TaskId, task: &mut StreamTask) {
        let changelog = self.creator.changelog();
        let mark = changelog.mark();
        task.close_dirty();
        let dropped = changelog.discard_from(mark);
        if dropped > 0 {
            log::debug!(
                "{}: task {id} closed dirty; dropped {dropped} changelog records its close wrote",
                self.thread
            );
        }
    }

    /// Closes every task (the thread ends).
    pub(super) fn close_all(&mut self) {
        self.standbys.close_all(&self.creator);
        let restoring: Vec<(TaskId, TaskEntry)> = self.restoring.drain().collect();
        for (id, entry) in restoring {
            if let Err(e) = self.close_restoring(id, entry) {
                log::warn!("{}: closing restoring task {id}: {e}", self.thread);
            }
        }
        for (id, mut entry) in self.tasks.drain() {
            entry.task.close();
            self.config.metrics.remove_task(&id.to_string());
        }
    }
}

/// The source partitions task `id` needs and does not have: partition
/// `id.partition` of each topic its sub-topology reads (`topics`: topic and
/// reading sub-topology) that has that many partitions (`counts`; topics of
/// unknown count are not waited for).
fn missing_partitions(
    id: TaskId,
    topics: &[(String, u32)],
    counts: &HashMap<String, i32>,
    has: impl Fn(&str, i32) -> bool,
) -> Vec<TopicPartition> {
    topics
        .iter()
        .filter(|(t, s)| {
            *s == id.subtopology
                && counts.get(t).is_some_and(|n| id.partition < *n)
                && !has(t, id.partition)
        })
        .map(|(t, _)| TopicPartition::new(t.as_str(), id.partition))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kstreams_dsl::__private::ProducedRecord;
    use kstreams_dsl::StreamsBuilder;
    use kstreams_record::Headers;

    #[test]
    fn a_task_misses_the_co_partitioned_partitions_it_was_not_given() {
        let topics = vec![
            ("orders".to_string(), 0),
            ("customers".to_string(), 0),
            ("wide".to_string(), 0),
            ("other".to_string(), 1),
        ];
        let counts: HashMap<String, i32> =
            [("orders", 4), ("customers", 4), ("wide", 8), ("other", 4)]
                .into_iter()
                .map(|(t, n)| (t.to_string(), n))
                .collect();
        let task = |partition| TaskId {
            subtopology: 0,
            partition,
        };
        // KIP-848 moved orders-1 here, customers-1 not yet.
        let has = |t: &str, p: i32| p == 1 && (t == "orders" || t == "wide");
        assert_eq!(
            missing_partitions(task(1), &topics, &counts, has),
            vec![TopicPartition::new("customers", 1)]
        );
        // Partition 6 exists only in "wide": nothing else to wait for.
        let has_wide = |t: &str, p: i32| t == "wide" && p == 6;
        assert!(missing_partitions(task(6), &topics, &counts, has_wide).is_empty());
        // A topic of unknown partition count is not waited for.
        let mut unknown = counts.clone();
        unknown.remove("customers");
        assert!(missing_partitions(task(1), &topics, &unknown, has).is_empty());
    }

    /// A stateless two-topic merge: one task per partition number reads
    /// both topics.
    /// What one processing step wrote, as the thread would send it.
    struct Step {
        outputs: Vec<ProducedRecord>,
        /// The offsets it processed up to (not yet counted: see
        /// [`TaskManager::outputs_sent`]).
        progress: Vec<(TopicPartition, i64)>,
        more: bool,
    }

    fn step(tasks: &mut TaskManager, lagging: IsLagging<'_>, slice: Duration) -> Step {
        let mut outbox = Outbox::default();
        let more = tasks.process(lagging, slice, &mut outbox).unwrap();
        Step {
            outputs: outbox.take(),
            progress: tasks.unsent.clone(),
            more,
        }
    }

    fn manager(state_dir: &std::path::Path) -> TaskManager {
        let builder = StreamsBuilder::new();
        let left = builder.stream::<String, String>("left");
        let right = builder.stream::<String, String>("right");
        left.merge(&right)
            .map_values(|v| v.to_uppercase())
            .to("out");
        let topology = Arc::new(builder.build().unwrap());
        let config = StreamsConfig::new("app", "127.0.0.1:1").state_dir(state_dir);
        manager_of(topology, &config)
    }

    /// Thread "t"'s task manager of `topology`, in an instance of its own.
    fn manager_of(topology: Arc<Topology>, config: &StreamsConfig) -> TaskManager {
        let sources = Arc::new(SourceTopicIndex::new(&topology, "app"));
        let sensors = config.metrics.thread_sensors("t").unwrap();
        TaskManager::new(
            "t",
            config,
            &Instance::default(),
            topology,
            sources,
            &sensors,
            Rc::new(|_: &str| Ok(1)),
        )
        .unwrap()
    }

    /// The offset to commit of a partition, if any.
    fn to_commit<'a>(offsets: &'a [ToCommit], topic: &str, partition: i32) -> Option<&'a ToCommit> {
        offsets.iter().find(|o| o.partition == p(topic, partition))
    }

    fn p(topic: &str, partition: i32) -> TopicPartition {
        TopicPartition::new(topic, partition)
    }

    fn record(topic: &str, partition: i32, offset: i64, value: &str) -> ConsumedRecord {
        ConsumedRecord {
            topic: topic.into(),
            partition,
            offset,
            timestamp: 1_000 + offset,
            key: Some(b"k".to_vec()),
            value: Some(value.as_bytes().to_vec()),
            headers: Headers::new(),
        }
    }

    #[test]
    fn assigned_partitions_make_tasks_that_process_and_commit_past_their_records() {
        let dir = tempfile::tempdir().unwrap();
        let mut tasks = manager(dir.path());
        tasks
            .assign(&[p("left", 0), p("right", 0), p("left", 1)], &[], |_, _| {
                None
            })
            .unwrap();
        let mut ids: Vec<TaskId> = tasks.task_ids().collect();
        ids.sort_by_key(|id| id.partition);
        assert_eq!(ids.len(), 2, "{ids:?}");
        tasks.update_missing_partitions(&HashMap::from([
            ("left".to_string(), 2),
            ("right".to_string(), 2),
        ]));
        // Task 0_1 lacks right-1: it buffers but does not process.
        assert_eq!(tasks.buffer(record("left", 0, 0, "a")).unwrap(), Some(1));
        assert_eq!(tasks.buffer(record("right", 0, 4, "b")).unwrap(), Some(1));
        assert_eq!(tasks.buffer(record("left", 1, 7, "c")).unwrap(), Some(1));
        assert_eq!(tasks.buffer(record("other", 0, 0, "x")).unwrap(), None);

        let batch = step(&mut tasks, &|_, _, _| false, Duration::MAX);
        let mut values: Vec<Vec<u8>> = batch
            .outputs
            .iter()
            .map(|r| r.value.clone().unwrap())
            .collect();
        values.sort();
        assert_eq!(values, vec![b"A".to_vec(), b"B".to_vec()]);
        let mut progress = batch.progress.clone();
        progress.sort();
        assert_eq!(progress, vec![(p("left", 0), 1), (p("right", 0), 5)]);
        assert_eq!(
            tasks.buffered("left", 1),
            1,
            "held back: right-1 is missing"
        );

        tasks.outputs_sent();
        assert!(tasks.commit_needed());
        let offsets = tasks.offsets_to_commit();
        let left0 = to_commit(&offsets, "left", 0).unwrap();
        assert_eq!(left0.offset, 1);
        let metadata = PartitionMetadata::decode(left0.metadata.as_deref().unwrap()).unwrap();
        assert_eq!(metadata.partition_time, 1_000);
        assert!(to_commit(&offsets, "left", 1).is_none());
    }

    /// A transaction marker after the last record: the consumer's position
    /// passes it, and so does the commit of a partition with nothing left
    /// to process; a partition still holding a record, or one no task
    /// reads, keeps its processed offset.
    #[test]
    fn commits_follow_the_consumer_past_transaction_markers_once_drained() {
        let dir = tempfile::tempdir().unwrap();
        let mut tasks = manager(dir.path());
        tasks
            .assign(&[p("left", 0), p("right", 0)], &[], |_, _| None)
            .unwrap();
        tasks.update_missing_partitions(&HashMap::from([
            ("left".to_string(), 1),
            ("right".to_string(), 1),
        ]));
        tasks.buffer(record("left", 0, 3, "a")).unwrap();
        tasks.buffer(record("right", 0, 3, "b")).unwrap();
        step(&mut tasks, &|_, _, _| false, Duration::MAX);
        tasks.outputs_sent();
        assert!(tasks.commit_needed());
        // left-0: its marker at 4 was read past; right-0 has a record
        // buffered at 6 (a marker at 4, an aborted one at 5).
        tasks.buffer(record("right", 0, 6, "c")).unwrap();
        let positions =
            Positions::from([(p("left", 0), 5), (p("right", 0), 7), (p("other", 0), 9)]);
        tasks.advance_to_positions(&positions);
        let offsets = tasks.offsets_to_commit();
        let offset = |topic: &str| to_commit(&offsets, topic, 0).map(|e| e.offset);
        assert_eq!(offset("left"), Some(5));
        assert_eq!(offset("right"), Some(4));
        assert_eq!(offset("other"), None);
        // A position behind what was processed never moves a commit back.
        tasks.advance_to_positions(&Positions::from([(p("left", 0), 2)]));
        let offsets = tasks.offsets_to_commit();
        assert_eq!(to_commit(&offsets, "left", 0).map(|e| e.offset), Some(5));
        // After a rewind nothing moves until a record went through again:
        // the position may still be the one before the seek.
        tasks.forget_processed();
        tasks.advance_to_positions(&positions);
        assert!(tasks.offsets_to_commit().is_empty());
    }

    #[test]
    fn a_task_at_its_async_bound_takes_nothing_and_commits_only_past_finished_records() {
        use std::sync::atomic::{AtomicBool, Ordering};
        static ANSWER: AtomicBool = AtomicBool::new(false);
        let dir = tempfile::tempdir().unwrap();
        let builder = StreamsBuilder::new();
        builder
            .stream::<String, String>("in")
            .map_values_async(
                |_key: String, value: String| async move {
                    while !ANSWER.load(Ordering::Acquire) {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                    Ok::<_, std::io::Error>(value.to_uppercase())
                },
                kstreams_dsl::AsyncOptions::new(),
            )
            .to("out");
        let topology = Arc::new(builder.build().unwrap());
        let config = StreamsConfig::new("app", "127.0.0.1:1")
            .state_dir(dir.path())
            .async_max_in_flight_per_task(2);
        let mut tasks = manager_of(topology, &config);
        tasks.assign(&[p("in", 0)], &[], |_, _| None).unwrap();
        for offset in 0..5 {
            let mut r = record("in", 0, offset, "a");
            r.key = Some(format!("k{offset}").into_bytes());
            tasks.buffer(r).unwrap();
        }

        // Two calls out: the other records stay buffered.
        let batch = step(&mut tasks, &|_, _, _| false, Duration::MAX);
        assert!(batch.outputs.is_empty());
        assert_eq!(tasks.buffered("in", 0), 3);
        assert_eq!(tasks.async_in_flight(), 2);
        tasks.outputs_sent();
        assert!(tasks.commit_needed());
        let committed = |tasks: &TaskManager| {
            let offsets = tasks.offsets_to_commit();
            to_commit(&offsets, "in", 0).unwrap().offset
        };
        assert_eq!(committed(&tasks), 0, "offsets 0 and 1 are in flight");

        ANSWER.store(true, Ordering::Release);
        let mut outputs = 0;
        let deadline = Instant::now() + Duration::from_secs(30);
        while outputs < 5 {
            assert!(Instant::now() < deadline, "{outputs} of 5 results");
            tasks.wait_for_async(Duration::from_millis(100));
            let batch = step(&mut tasks, &|_, _, _| false, Duration::MAX);
            outputs += batch.outputs.len();
            tasks.outputs_sent();
        }
        assert_eq!(tasks.async_in_flight(), 0);
        assert_eq!(committed(&tasks), 5);
    }

    #[test]
    fn a_task_stops_at_the_end_of_its_slice_and_says_there_is_more() {
        let dir = tempfile::tempdir().unwrap();
        let mut tasks = manager(dir.path());
        tasks
            .assign(&[p("left", 0), p("right", 0)], &[], |_, _| None)
            .unwrap();
        for offset in 0..3 {
            tasks.buffer(record("left", 0, offset, "a")).unwrap();
        }
        // A zero slice: one record per call, its output out at once.
        let mut outputs = Vec::new();
        let mut calls = 0;
        loop {
            let batch = step(&mut tasks, &|_, _, _| false, Duration::ZERO);
            calls += 1;
            assert_eq!(batch.outputs.len(), 1, "call {calls}");
            assert_eq!(batch.progress, vec![(p("left", 0), calls)]);
            tasks.outputs_sent();
            outputs.extend(batch.outputs);
            if !batch.more {
                break;
            }
        }
        assert_eq!(calls, 3);
        assert_eq!(outputs.len(), 3);
        assert_eq!(tasks.buffered("left", 0), 0);
    }

    #[test]
    fn a_task_closes_when_its_last_partition_is_revoked_and_its_offsets_are_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let mut tasks = manager(dir.path());
        tasks
            .assign(&[p("left", 0), p("right", 0)], &[], |_, _| None)
            .unwrap();
        tasks.buffer(record("left", 0, 0, "a")).unwrap();
        step(&mut tasks, &|_, _, _| false, Duration::MAX);
        tasks.outputs_sent();

        tasks
            .revoke(&[p("left", 0)], true, &HashMap::new())
            .unwrap();
        assert_eq!(tasks.task_ids().count(), 1, "right-0 keeps the task");
        assert!(tasks.offsets_to_commit().is_empty());
        tasks
            .revoke(&[p("right", 0)], true, &HashMap::new())
            .unwrap();
        assert_eq!(tasks.task_ids().count(), 0);
        tasks.outputs_sent();
        assert!(tasks.offsets_to_commit().is_empty());
    }

    #[test]
    fn an_empty_partition_is_asked_about_once_per_call_with_its_start_offset() {
        let dir = tempfile::tempdir().unwrap();
        let mut tasks = manager(dir.path());
        let committed = [Committed {
            partition: p("right", 0),
            offset: Some(10),
            metadata: None,
        }];
        tasks
            .assign(&[p("left", 0), p("right", 0)], &committed, |_, _| None)
            .unwrap();
        tasks.update_missing_partitions(&HashMap::from([
            ("left".to_string(), 1),
            ("right".to_string(), 1),
        ]));
        for offset in 0..3 {
            tasks.buffer(record("left", 0, offset, "a")).unwrap();
        }
        let asked = std::cell::RefCell::new(Vec::new());
        let behind = std::cell::Cell::new(true);
        let lagging = |topic: &str, partition: i32, start: Option<i64>| {
            asked
                .borrow_mut()
                .push((topic.to_string(), partition, start));
            behind.get()
        };

        // right-0 is behind its end: the task waits for it.
        let batch = step(&mut tasks, &lagging, Duration::MAX);
        assert!(batch.outputs.is_empty());
        assert_eq!(*asked.borrow(), vec![("right".to_string(), 0, Some(10))]);

        // Caught up: the three records go, right-0 asked about once more.
        behind.set(false);
        let batch = step(&mut tasks, &lagging, Duration::MAX);
        assert_eq!(batch.outputs.len(), 3);
        assert_eq!(asked.borrow().len(), 2);
    }

    #[test]
    fn committed_metadata_is_resumed_at_assignment_and_after_a_rewind() {
        let dir = tempfile::tempdir().unwrap();
        let mut tasks = manager(dir.path());
        let committed = [Committed {
            partition: p("left", 0),
            offset: Some(10),
            metadata: Some(PartitionMetadata {
                partition_time: 5_000,
                processor: Default::default(),
            }),
        }];
        tasks
            .assign(&[p("left", 0), p("right", 0)], &committed, |_, _| None)
            .unwrap();
        assert_eq!(tasks.start_offset("left", 0), Some(10));
        assert_eq!(tasks.start_offset("right", 0), None);
        let id = tasks.task_ids().next().unwrap();
        assert_eq!(
            tasks.tasks[&id].task.processed_partition_time("left", 0),
            5_000
        );

        // A rewind drops what is buffered and rebuilds the task from there.
        tasks.buffer(record("left", 0, 10, "a")).unwrap();
        tasks.unsent.push((p("left", 0), 11));
        tasks.outputs_sent();
        tasks.rewind(&committed).unwrap();
        assert_eq!(tasks.buffered("left", 0), 0);
        assert!(tasks.offsets_to_commit().is_empty());
        assert_eq!(
            tasks.tasks[&id].task.processed_partition_time("left", 0),
            5_000
        );
    }

    /// A count per key in a cached, logged store (its changelog on a mock
    /// cluster, which a task is restored from when it is created), under
    /// exactly-once, that has counted three records of key "k": the counts
    /// wait in the cache. The cluster and the state directory live as long
    /// as the manager (declared before it, they drop after it).
    fn three_counted() -> (
        kstreams_embedded::EmbeddedKafka,
        tempfile::TempDir,
        TaskManager,
    ) {
        let cluster = kstreams_embedded::EmbeddedKafka::start(1).unwrap();
        cluster.create_topic("app-counts-changelog", 1, 1).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let builder = StreamsBuilder::new();
        let _counts = builder
            .stream::<String, String>("in")
            .group_by_key()
            .count_with(None, kstreams_dsl::Materialized::as_("counts"));
        let topology = Arc::new(builder.build().unwrap());
        let config = StreamsConfig::new("app", cluster.bootstrap_servers())
            .state_dir(dir.path())
            .processing_guarantee(super::super::config::ProcessingGuarantee::ExactlyOnceV2);
        let mut tasks = manager_of(topology, &config);
        tasks.assign(&[p("in", 0)], &[], |_, _| None).unwrap();
        for offset in 0..3 {
            tasks.buffer(record("in", 0, offset, "a")).unwrap();
        }
        let batch = step(&mut tasks, &|_, _, _| false, Duration::MAX);
        assert!(batch.outputs.is_empty(), "cached, nothing logged yet");
        tasks.outputs_sent();
        (cluster, dir, tasks)
    }

    /// The changelog values of `outputs`, as counts.
    fn logged_counts(outputs: &[ProducedRecord]) -> Vec<i64> {
        outputs
            .iter()
            .filter(|r| &*r.topic == "app-counts-changelog")
            .map(|r| i64::from_be_bytes(r.value.as_deref().unwrap().try_into().unwrap()))
            .collect()
    }

    /// Kafka Streams' dirty close: a rewind follows an aborted transaction,
    /// and what the caches held of that work must not be logged, or the
    /// next transaction would commit it to the changelog.
    #[test]
    fn a_rewind_logs_nothing_of_the_aborted_work() {
        let (_cluster, _dir, mut tasks) = three_counted();

        tasks.rewind(&[]).unwrap();
        assert_eq!(tasks.creator.changelog().mark(), 0);
        let batch = step(&mut tasks, &|_, _, _| false, Duration::MAX);
        assert_eq!(logged_counts(&batch.outputs), Vec::<i64>::new());

        // The record is processed again from the committed (empty) state:
        // the commit logs a count of one, and nothing before it.
        tasks.buffer(record("in", 0, 0, "a")).unwrap();
        let batch = step(&mut tasks, &|_, _, _| false, Duration::MAX);
        let mut outputs = batch.outputs;
        let mut outbox = Outbox::default();
        tasks.flush(&mut outbox).unwrap();
        outputs.extend(outbox.take());
        assert_eq!(logged_counts(&outputs), vec![1]);
    }

    /// Lost tasks close dirty too: their changelog partitions may be
    /// another member's by now.
    #[test]
    fn lost_tasks_log_nothing_as_they_close() {
        let (_cluster, _dir, mut tasks) = three_counted();

        tasks.revoke(&[p("in", 0)], false, &HashMap::new()).unwrap();
        assert_eq!(tasks.task_ids().count(), 0);
        assert_eq!(tasks.creator.changelog().mark(), 0);
    }

    #[test]
    fn a_bootstrap_partition_holds_its_task_until_read_to_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let mut tasks = manager(dir.path());
        tasks.bootstrap_topics.insert("right".to_string());
        tasks
            .assign(&[p("left", 0), p("right", 0)], &[], |t, _| {
                (t == "right").then_some((0, 3))
            })
            .unwrap();
        assert!(tasks.bootstrapping());
        tasks.track_bootstrap(&Positions::from([(p("right", 0), 2)]));
        assert!(tasks.bootstrapping());
        tasks.track_bootstrap(&Positions::from([(p("right", 0), 3)]));
        assert!(!tasks.bootstrapping());
    }
}
