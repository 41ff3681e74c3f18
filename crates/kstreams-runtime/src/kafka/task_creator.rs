//! Creates a stream thread's active tasks (Kafka Streams'
//! `ActiveTaskCreator` with its `ProcessorStateManager`): the task's locked
//! directory, its stores wired to the thread's cache and changelog
//! collector, where each logged store restores from (the state updater
//! restores it), and the task's `.checkpoint`.

use std::cell::OnceCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::Arc;

use kstreams_dsl::{ChangelogTopic, TaskId, Topology};
use kstreams_metrics::RecordingLevel;
use kstreams_state::__private::{Offsets, StateDirectory, TaskDirectory};
use kstreams_state::{ChangelogWriter, StoreContext};
use rdkafka::consumer::BaseConsumer;

use super::clients;
use super::config::{ProcessingGuarantee, StreamsConfig};
use super::state_updater::{changelog_watermarks, checkpoint_beyond_end, RestoreFrom};
use super::RuntimeError;
use crate::changelog::ChangelogCollector;
use crate::clock::now_ms;
use crate::kafka::client_error::ClientResult;
use crate::StreamTask;
use kstreams_state::TopicPartition;

/// Whether a checkpoint could not be read for what it holds (not in
/// Kafka Streams' format, or not even text), rather than for the disk.
fn is_unreadable_checkpoint(error: &kstreams_state::Error) -> bool {
    match error {
        kstreams_state::Error::CorruptCheckpoint { .. } => true,
        kstreams_state::Error::Io { source, .. } => {
            source.kind() == std::io::ErrorKind::InvalidData
        }
        _ => false,
    }
}

/// A task just created, and the lock on its state directory (stateful
/// tasks only, as in Kafka Streams), held while the task lives.
pub(crate) struct CreatedTask {
    pub task: StreamTask,
    pub directory: Option<TaskDirectory>,
    /// Where each of its logged stores restores from.
    pub restore_from: Vec<RestoreFrom>,
}

/// Creates the tasks of one stream thread.
pub(crate) struct TaskCreator {
    thread: String,
    config: StreamsConfig,
    topology: Arc<Topology>,
    changelogs: Vec<ChangelogTopic>,
    state_dir: StateDirectory,
    /// Where every store of the thread's tasks writes its changelog
    /// records, for the record collector to send.
    changelog_collector: Rc<ChangelogCollector>,
    /// The thread's cache, shared by the caching stores of all its tasks.
    thread_cache: Rc<kstreams_state::ThreadCache>,
    /// What the instance's RocksDB stores open with (its config setter,
    /// the block cache and write buffer manager they share when bounded).
    #[cfg(feature = "rocksdb")]
    rocksdb: Option<kstreams_state::RocksDbSettings>,
    /// Per changelog partition of the thread's tasks, the offset its store
    /// reached when restored: what a checkpoint records for a store that
    /// has not written since.
    restored: HashMap<TopicPartition, i64>,
    /// The thread's partition counts, for sinks with a partitioner.
    partition_counts: Rc<dyn kstreams_dsl::PartitionCounts>,
    /// Asks for the end offsets of changelogs that stores were checkpointed
    /// in (see [`TaskCreator::create`]); made with the first such store.
    end_offsets: OnceCell<BaseConsumer>,
}

impl TaskCreator {
    /// The creator of stream thread `thread`'s tasks of `topology`.
    pub(super) fn new(
        thread: &str,
        config: &StreamsConfig,
        topology: Arc<Topology>,
        instance: &super::instance::Instance,
        partition_counts: Rc<dyn kstreams_dsl::PartitionCounts>,
    ) -> Result<Self, RuntimeError> {
        #[cfg(not(feature = "rocksdb"))]
        let _ = instance;
        let state_dir = StateDirectory::new(&config.state_dir, &config.application_id)?;
        Ok(Self {
            thread: thread.to_string(),
            config: config.clone(),
            changelogs: topology.changelog_topics(&config.application_id),
            topology,
            state_dir,
            changelog_collector: Rc::default(),
            thread_cache: Rc::new(kstreams_state::ThreadCache::new(
                config.task_config().cache_max_bytes,
            )),
            restored: HashMap::new(),
            partition_counts,
            end_offsets: OnceCell::new(),
            #[cfg(feature = "rocksdb")]
            rocksdb: instance.rocksdb.clone(),
        })
    }

    /// The offset sums of the task directories on disk, by task (Kafka
    /// Streams' task offset sums); directories not named like a task are
    /// left out.
    pub(super) fn offset_sums_on_disk(&self) -> Result<Vec<(TaskId, i64)>, RuntimeError> {
        offset_sums_on_disk(&self.state_dir)
    }

    /// The consumer that asks for changelogs' watermarks (a restore
    /// consumer's settings, never assigned anything).
    fn end_offsets(&self) -> Result<&BaseConsumer, RuntimeError> {
        if let Some(consumer) = self.end_offsets.get() {
            return Ok(consumer);
        }
        let name = format!("{}-checkpoints", self.thread);
        let consumer = clients::restore_consumer(&self.config, &name)
            .create()
            .client()?;
        Ok(self.end_offsets.get_or_init(|| consumer))
    }

    /// The changelog records the stores wrote since the last drain.
    pub(super) fn changelog(&self) -> &ChangelogCollector {
        &self.changelog_collector
    }

    /// Notes what the stores of a task reached when restored (per
    /// changelog partition; `None`: nothing to record).
    pub(super) fn set_restored(&mut self, reached: &HashMap<TopicPartition, Option<i64>>) {
        for (key, offset) in reached {
            match offset {
                Some(offset) => self.restored.insert(key.clone(), *offset),
                None => self.restored.remove(key),
            };
        }
    }

    /// The changelog topics of the tasks of sub-topology `subtopology`.
    pub(super) fn changelogs_of(&self, subtopology: u32) -> impl Iterator<Item = &ChangelogTopic> {
        self.changelogs
            .iter()
            .filter(move |c| c.subtopology == subtopology)
    }

    /// The task's store context: its changelog writer, the thread's
    /// cache, metrics, and its directory when it has one.
    fn store_context(&self, id: TaskId, directory: Option<&TaskDirectory>) -> StoreContext {
        let writer: Rc<dyn ChangelogWriter> = self.changelog_collector.clone();
        let mut stores =
            StoreContext::new(&self.config.application_id, &id.to_string(), id.partition)
                .with_changelog_writer(writer)
                .with_thread_cache(self.thread_cache.clone())
                .with_transactional_stores(self.config.transactional_stores_in_force());
        // State store metrics are DEBUG in Kafka Streams: each operation
        // reads the clock twice.
        if self.config.metrics_recording_level >= RecordingLevel::Debug {
            stores = stores.with_metrics(self.config.metrics.clone());
        }
        // The instance's RocksDB settings (config setter, shared bounded
        // cache); its property metrics are INFO in Kafka Streams (KIP-607).
        #[cfg(feature = "rocksdb")]
        {
            let rocksdb = self.rocksdb.clone().unwrap_or_default();
            stores = stores
                .with_rocksdb(rocksdb)
                .with_rocksdb_metrics(self.config.metrics.clone());
        }
        if let Some(directory) = directory {
            stores = stores.with_task_directory(directory.path());
        }
        stores
    }

    /// The task's checkpointed changelog offsets. A checkpoint that does
    /// not parse (truncated by a crash mid-write, overwritten) says nothing
    /// about what the local stores hold: it is logged and deleted, and the
    /// task's local state rebuilt from the changelogs. Kafka Streams fails
    /// the thread here; a task whose whole state is in its changelogs has
    /// no need to.
    fn read_checkpoint(&self, id: TaskId, locked: &TaskDirectory) -> Result<Offsets, RuntimeError> {
        let checkpoint = locked.checkpoint();
        match checkpoint.read() {
            Ok(offsets) => Ok(offsets),
            Err(error) if is_unreadable_checkpoint(&error) => {
                log::warn!(
                    "{}: task {id}: {error}; deleting it and rebuilding the task's state from \
                     its changelogs",
                    self.thread
                );
                checkpoint.delete()?;
                locked.wipe_state()?;
                Ok(Offsets::new())
            }
            Err(error) => Err(error.into()),
        }
    }

    /// Locks the task's directory, builds the task with its stores, and
    /// says where every logged store restores from in its changelog
    /// partition (the state updater restores them). Without checkpoints
    /// yet, a store restores its whole changelog; under exactly-once the
    /// local state is wiped first, as it may hold writes of an aborted
    /// transaction. Damaged local state (a checkpoint that
    /// does not parse, a store directory gone, a store that does not open)
    /// is logged and rebuilt from the changelogs, and so is stale local
    /// state: a store checkpointed at or past the end of its changelog
    /// partition, which was deleted and re-created, emptied or truncated
    /// since (`kafka-streams-application-reset` deletes the changelogs; see
    /// `KafkaStreams::clean_up`), under either guarantee. Kafka Streams
    /// keeps such a store, and the reprocessed input adds to its old state.
    pub(super) fn create(&mut self, id: TaskId) -> Result<CreatedTask, RuntimeError> {
        // What an earlier task of that id restored says nothing of this one.
        for changelog in self
            .changelogs
            .iter()
            .filter(|c| c.subtopology == id.subtopology)
        {
            self.restored
                .remove(&TopicPartition::new(changelog.topic.as_str(), id.partition));
        }
        let mut directory = None;
        let mut checkpointed = Offsets::new();
        // Stores that had a directory before they were opened: a store
        // opened without one is new and empty, whatever a checkpoint says.
        // Stores whose files exist, where each layout keeps them (which one
        // a store has is known once it is built).
        let (mut kv_on_disk, mut own_on_disk, mut moved_earlier) =
            (HashSet::new(), HashSet::new(), HashSet::new());
        if self.topology.subtopology_has_stores(id.subtopology) {
            let locked = self.state_dir.lock_task(&id.to_string())?;
            checkpointed = self.read_checkpoint(id, &locked)?;
            if self.config.processing_guarantee == ProcessingGuarantee::ExactlyOnceV2 {
                // Under exactly-once a checkpoint is valid only as written at
                // a clean close: it goes now, so a crash while running finds
                // none; without one, local state may hold aborted writes
                // (unless every store recorded its offset and was closed
                // cleanly: checked once the stores are open).
                locked.checkpoint().delete()?;
            }
            for changelog in self.changelogs_of(id.subtopology) {
                let store = &changelog.store;
                let path = locked.path();
                // Where kstreams keeps a store: `rocksdb/` (key-value, as
                // Kafka Streams) or `kstreams/` (its own layouts; before
                // they moved there, window and session stores were a
                // RocksDB at `<store>/`, where Kafka Streams keeps its
                // segments).
                let own = path.join("kstreams").join(store).exists();
                let earlier = path.join(store).join("CURRENT").is_file();
                if path.join("rocksdb").join(store).exists() {
                    kv_on_disk.insert(store.clone());
                }
                if own || earlier {
                    own_on_disk.insert(store.clone());
                }
                if earlier && !own {
                    moved_earlier.insert(store.clone());
                }
            }
            directory = Some(locked);
        }
        let built = StreamTask::with_store_context(
            &self.topology,
            id,
            self.config.task_config(),
            now_ms(),
            self.store_context(id, directory.as_ref()),
        );
        let rebuild = |locked: &TaskDirectory,
                       reason: String,
                       checkpointed: &mut Offsets|
         -> Result<StreamTask, RuntimeError> {
            log::warn!(
                "{}: task {id}: {reason}; deleting the task's local state and rebuilding it \
                 from its changelogs",
                self.thread
            );
            locked.wipe_state()?;
            checkpointed.clear();
            Ok(StreamTask::with_store_context(
                &self.topology,
                id,
                self.config.task_config(),
                now_ms(),
                self.store_context(id, Some(locked)),
            )?)
        };
        let mut task = match (built, &directory) {
            (Ok(task), _) => task,
            // A store that does not open (files corrupted or half deleted,
            // or another layout) is rebuilt from its changelog, once.
            (Err(kstreams_dsl::StreamsError::Store(error)), Some(locked)) => {
                (kv_on_disk, own_on_disk) = (HashSet::new(), HashSet::new());
                rebuild(
                    locked,
                    format!("a state store did not open ({error})"),
                    &mut checkpointed,
                )?
            }
            (Err(error), _) => return Err(error.into()),
        };
        let mut stores_on_disk = HashSet::new();
        for changelog in self.changelogs_of(id.subtopology) {
            let Some(store) = task.stores().get(&changelog.store) else {
                continue;
            };
            let name = &changelog.store;
            if store.lifecycle.borrow().checkpointed_in_task_file() {
                if kv_on_disk.contains(name) {
                    stores_on_disk.insert(name.clone());
                }
                continue;
            }
            if own_on_disk.contains(name) {
                stores_on_disk.insert(name.clone());
            }
            if !moved_earlier.contains(name) {
                // Not this store's offset: its own files hold that. An entry
                // here is Kafka Streams' (its downgrade checkpoint lists its
                // own window stores) or an earlier kstreams' for files that
                // are gone (its versioned stores at `rocksdb/`).
                checkpointed.remove(&TopicPartition::new(changelog.topic.as_str(), id.partition));
            }
        }
        // Offsets a checkpoint lacks, from the stores that record their own
        // (Kafka Streams 4.4 writes no `.checkpoint` for its RocksDB stores).
        let mut from_stores = Offsets::new();
        let mut unrecorded = None;
        for changelog in self.changelogs_of(id.subtopology) {
            let key = TopicPartition::new(changelog.topic.as_str(), id.partition);
            let Some(store) = task.stores().get(&changelog.store) else {
                continue;
            };
            let store = store.lifecycle.borrow();
            if checkpointed.contains_key(&key)
                || !store.persistent()
                || !stores_on_disk.contains(&changelog.store)
            {
                continue;
            }
            let exactly_once =
                self.config.processing_guarantee == ProcessingGuarantee::ExactlyOnceV2;
            match store.committed_offset(&changelog.topic, id.partition)? {
                // As Kafka Streams: at-least-once restores from a recorded
                // offset even after a crash (what is past it is written
                // again); exactly-once only after a clean close, or (KIP-892)
                // from a store written transactionally, whose files hold
                // only committed states.
                Some(recorded) if recorded.describes_the_data() || !exactly_once => {
                    let offset = recorded.offset;
                    log::info!(
                        "{}: task {id}: state store {} resumes at changelog offset {offset} \
                         recorded in its files",
                        self.thread,
                        changelog.store
                    );
                    from_stores.insert(key, offset);
                }
                _ => unrecorded = Some(changelog.store.clone()),
            }
        }
        if let (Some(store), ProcessingGuarantee::ExactlyOnceV2, Some(locked)) = (
            unrecorded,
            self.config.processing_guarantee,
            directory.as_ref(),
        ) {
            // As Kafka Streams: local data without the offset it reaches
            // may hold writes of an aborted transaction. The task is
            // thrown away with its local state: closed dirty, nothing
            // written down or logged.
            task.close_dirty();
            task = rebuild(
                locked,
                format!("under exactly-once, state store {store} has local data but no offset"),
                &mut checkpointed,
            )?;
        } else {
            checkpointed.extend(from_stores);
        }
        // A store checkpointed at or past its changelog's end holds what the
        // changelog no longer has: the task is rebuilt from its changelogs
        // (thrown away dirty first, as above). The watermarks go on to the
        // state updater.
        let mut watermarks = HashMap::new();
        if let Some(locked) = directory.as_ref() {
            let mut stale = None;
            for changelog in self.changelogs_of(id.subtopology) {
                let key = TopicPartition::new(changelog.topic.as_str(), id.partition);
                let Some(&after) = checkpointed.get(&key) else {
                    continue;
                };
                let persistent = task
                    .stores()
                    .get(&changelog.store)
                    .is_some_and(|s| s.lifecycle.borrow().persistent());
                // In-memory stores and stores without files restore their
                // whole changelog anyway.
                if after < 0 || !persistent || !stores_on_disk.contains(&changelog.store) {
                    continue;
                }
                let (low, high) =
                    changelog_watermarks(self.end_offsets()?, &changelog.topic, id.partition)?;
                watermarks.insert(key, (low, high));
                if stale.is_none() && checkpoint_beyond_end(after, high) {
                    stale = Some(format!(
                        "state store {} has changelog offset {after} checkpointed, but its \
                         changelog {}-{} ends at offset {high}: the changelog was deleted and \
                         re-created, emptied or truncated since (kafka-streams-application-reset \
                         deletes it; KafkaStreams::clean_up after a reset deletes the local \
                         state too), so the local state is stale",
                        changelog.store, changelog.topic, id.partition
                    ));
                }
            }
            if let Some(reason) = stale {
                task.close_dirty();
                task = rebuild(locked, reason, &mut checkpointed)?;
            }
        }
        // On the task as finally built.
        task.context()
            .set_partition_counts(Rc::clone(&self.partition_counts));
        task.register_metrics(
            &self.config.metrics,
            self.config.metrics_recording_level,
            &self.thread,
        )?;
        let mut restore_from = Vec::new();
        for changelog in self.changelogs_of(id.subtopology) {
            let key = TopicPartition::new(changelog.topic.as_str(), id.partition);
            let mut after = checkpointed.get(&key).copied();
            let persistent = task
                .context()
                .stores()
                .get(&changelog.store)
                .is_some_and(|s| s.lifecycle.borrow().persistent());
            if after.is_some() && persistent && !stores_on_disk.contains(&changelog.store) {
                // Restoring after the checkpoint into an empty store would
                // lose everything before it.
                log::warn!(
                    "{}: task {id}: state store {} has a checkpoint but no local files (deleted?); \
                     rebuilding it from its whole changelog {}",
                    self.thread,
                    changelog.store,
                    changelog.topic
                );
                after = None;
            }
            restore_from.push(RestoreFrom {
                changelog: changelog.clone(),
                after,
                watermarks: watermarks.get(&key).copied(),
            });
        }
        Ok(CreatedTask {
            task,
            directory,
            restore_from,
        })
    }

    /// A restored task starts processing. Under exactly-once, what its
    /// stores recorded (their offsets, the task's `.checkpoint`) is valid
    /// only as written at a clean close: it is forgotten now, before the
    /// first uncommitted write, so that a task closed after an abort (a
    /// rewind, lost tasks) finds none and is rebuilt, instead of restoring
    /// from an old offset onto writes of the aborted transaction. While it
    /// restored, its stores held committed changelog records only, so a
    /// restore interrupted by a rebalance resumes from what it recorded.
    /// Transactional stores (KIP-892) keep their offsets: from now on they
    /// hold each write until its transaction commits
    /// ([`TaskCreator::commit_store_offsets`]), so what they recorded stays
    /// true of their files.
    pub(super) fn begin_processing(
        &self,
        task: &StreamTask,
        directory: Option<&TaskDirectory>,
    ) -> Result<(), RuntimeError> {
        if self.config.processing_guarantee != ProcessingGuarantee::ExactlyOnceV2 {
            return Ok(());
        }
        if let Some(directory) = directory {
            directory.checkpoint().delete()?;
        }
        let transactional = self.config.transactional_stores_in_force();
        for store in task.stores().values() {
            let mut store = store.lifecycle.borrow_mut();
            if !store.persistent() {
                continue;
            }
            // A store without a changelog has no offsets to commit its
            // writes with: it writes through, as without transactions.
            if transactional && store.logging_enabled() {
                store.start_transactions()?;
            } else {
                store.commit_offsets(&[])?;
            }
        }
        Ok(())
    }

    /// Under exactly-once with transactional stores, once the transaction
    /// committed: each store of the task writes its held writes to disk in
    /// one batch with the changelog offset they reach (the last record the
    /// broker acknowledged, `delivered`). No `.checkpoint` is written: the
    /// stores' own offsets are read back after a crash, and a file would
    /// be on disk before the data RocksDB still holds in memory.
    pub(super) fn commit_store_offsets(
        &self,
        id: TaskId,
        task: &StreamTask,
        delivered: &HashMap<TopicPartition, i64>,
    ) -> Result<(), RuntimeError> {
        for changelog in self.changelogs_of(id.subtopology) {
            let key = TopicPartition::new(changelog.topic.as_str(), id.partition);
            let Some(store) = task.stores().get(&changelog.store) else {
                continue;
            };
            let mut store = store.lifecycle.borrow_mut();
            if store.persistent() {
                let offset = self.changelog_offset(&key, delivered);
                store.commit_offsets(&[(&changelog.topic, id.partition, offset)])?;
            }
        }
        Ok(())
    }

    /// The offset a store of changelog partition `key` reaches: the last
    /// record of it the broker acknowledged, else where its restore ended.
    /// A store that neither wrote nor restored anything (an empty
    /// changelog) records "unknown", as Kafka Streams: it restores from the
    /// start next time, and under exactly-once its task is not rebuilt for
    /// want of an offset.
    fn changelog_offset(
        &self,
        key: &TopicPartition,
        delivered: &HashMap<TopicPartition, i64>,
    ) -> i64 {
        delivered
            .get(key)
            .or_else(|| self.restored.get(key))
            .copied()
            .unwrap_or(kstreams_state::__private::OffsetCheckpoint::OFFSET_UNKNOWN)
    }

    /// Writes the task's checkpoint: for each of its changelog partitions,
    /// the offset of the last record the broker acknowledged (`delivered`).
    /// Each store gets its own offset too (stores that keep them beside
    /// their data, as Kafka Streams 4.4's RocksDB stores do, so that Kafka
    /// Streams resumes them as it resumes its own). Only persistent stores
    /// are checkpointed, as in Kafka Streams: an in-memory store restores
    /// its whole changelog, and Kafka Streams, which may back the same store
    /// with RocksDB, would take an in-memory store's offset for its own and
    /// restore nothing before it.
    pub(super) fn write_checkpoint(
        &self,
        id: TaskId,
        directory: &TaskDirectory,
        task: &StreamTask,
        delivered: &HashMap<TopicPartition, i64>,
    ) -> Result<(), RuntimeError> {
        let checkpoint = directory.checkpoint();
        let mut offsets = checkpoint.read()?;
        for changelog in self.changelogs_of(id.subtopology) {
            let key = TopicPartition::new(changelog.topic.as_str(), id.partition);
            let Some(store) = task.stores().get(&changelog.store) else {
                continue;
            };
            let mut store = store.lifecycle.borrow_mut();
            let offset = self.changelog_offset(&key, delivered);
            if store.persistent() {
                store.commit_offsets(&[(&changelog.topic, id.partition, offset)])?;
                if store.checkpointed_in_task_file() {
                    offsets.insert(key, offset);
                    continue;
                }
            }
            if !store.checkpointed_in_task_file() {
                // In-memory stores, and stores whose offsets live in their
                // own files only (earlier kstreams versions listed both).
                offsets.remove(&key);
            }
        }
        if offsets.is_empty() {
            checkpoint.delete()?;
        } else {
            checkpoint.write(&offsets)?;
        }
        Ok(())
    }
}

/// The offset sums of the task directories in `state_dir`, by task (Kafka
/// Streams' task offset sums); directories not named like a task are left
/// out.
pub(crate) fn offset_sums_on_disk(
    state_dir: &StateDirectory,
) -> Result<Vec<(TaskId, i64)>, RuntimeError> {
    Ok(state_dir
        .task_offset_sums()?
        .into_iter()
        .filter_map(|(id, sum)| Some((TaskId::parse(&id)?, sum)))
        .collect())
}
