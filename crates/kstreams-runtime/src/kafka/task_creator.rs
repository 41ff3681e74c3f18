//! Creates a stream thread's active tasks (Kafka Streams'
//! `ActiveTaskCreator` with its `ProcessorStateManager`): the task's locked
//! directory, its stores wired to the thread's cache and changelog
//! collector, restoration through the changelog reader, and the task's
//! `.checkpoint`.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use kstreams_dsl::{ChangelogTopic, TaskId, Topology};
use kstreams_metrics::RecordingLevel;
use kstreams_state::{ChangelogWriter, Offsets, StateDirectory, StoreContext, TaskDirectory};

use super::changelog_reader::ChangelogReader;
use super::config::{ProcessingGuarantee, StreamsConfig};
use super::RuntimeError;
use crate::changelog::ChangelogCollector;
use crate::clock::now_ms;
use crate::StreamTask;

/// A task just created, and the lock on its state directory (stateful
/// tasks only, as in Kafka Streams), held while the task lives.
pub(crate) struct CreatedTask {
    pub task: StreamTask,
    pub directory: Option<TaskDirectory>,
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
    reader: ChangelogReader,
}

impl TaskCreator {
    /// The creator of stream thread `thread`'s tasks of `topology`.
    pub fn new(
        thread: &str,
        config: &StreamsConfig,
        topology: Arc<Topology>,
    ) -> Result<Self, RuntimeError> {
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
            reader: ChangelogReader::new(thread, config),
        })
    }

    /// The changelog records the stores wrote since the last drain.
    pub fn changelog(&self) -> &ChangelogCollector {
        &self.changelog_collector
    }

    /// The changelog topics of the tasks of sub-topology `subtopology`.
    fn changelogs_of(&self, subtopology: u32) -> impl Iterator<Item = &ChangelogTopic> {
        self.changelogs
            .iter()
            .filter(move |c| c.subtopology == subtopology)
    }

    /// Locks the task's directory, builds the task with its stores, and
    /// restores every logged store from its changelog partition. Without
    /// checkpoints yet, a store restores its whole changelog; under
    /// exactly-once the local state is wiped first, as it may hold writes
    /// of an aborted transaction.
    pub fn create(&mut self, id: TaskId) -> Result<CreatedTask, RuntimeError> {
        let writer: Rc<dyn ChangelogWriter> = self.changelog_collector.clone();
        let mut stores =
            StoreContext::new(&self.config.application_id, &id.to_string(), id.partition)
                .with_changelog_writer(writer)
                .with_thread_cache(self.thread_cache.clone());
        // State store metrics are DEBUG in Kafka Streams: each operation
        // reads the clock twice.
        if self.config.metrics_recording_level >= RecordingLevel::Debug {
            stores = stores.with_metrics(self.config.metrics.clone());
        }
        let mut directory = None;
        let mut checkpointed = Offsets::new();
        if self.topology.subtopology_has_stores(id.subtopology) {
            let locked = self.state_dir.lock_task(&id.to_string())?;
            let checkpoint = locked.checkpoint();
            checkpointed = checkpoint.read()?;
            if self.config.processing_guarantee == ProcessingGuarantee::ExactlyOnceV2 {
                // Under exactly-once a checkpoint is valid only as written at
                // a clean close: it goes now, so a crash while running finds
                // none; without one, local state may hold aborted writes.
                checkpoint.delete()?;
                if checkpointed.is_empty() {
                    locked.wipe_state()?;
                }
            }
            stores = stores.with_task_directory(locked.path());
            directory = Some(locked);
        }
        let mut task = StreamTask::with_store_context(
            &self.topology,
            id,
            self.config.task_config(),
            now_ms(),
            stores,
        )?;
        task.register_metrics(
            &self.config.metrics,
            self.config.metrics_recording_level,
            &self.thread,
        )?;
        let changelogs: Vec<ChangelogTopic> = self.changelogs_of(id.subtopology).cloned().collect();
        for changelog in changelogs {
            let after = checkpointed
                .get(&(changelog.topic.clone(), id.partition))
                .copied();
            self.reader
                .restore(&mut task, &changelog, id.partition, after)?;
        }
        Ok(CreatedTask { task, directory })
    }

    /// Writes the task's checkpoint: for each of its changelog partitions,
    /// the offset of the last record the broker acknowledged (`delivered`).
    pub fn write_checkpoint(
        &self,
        id: TaskId,
        directory: &TaskDirectory,
        delivered: &HashMap<(String, i32), i64>,
    ) -> Result<(), RuntimeError> {
        let checkpoint = directory.checkpoint();
        let mut offsets = checkpoint.read()?;
        for changelog in self.changelogs_of(id.subtopology) {
            let key = (changelog.topic.clone(), id.partition);
            if let Some(&offset) = delivered.get(&key) {
                offsets.insert(key, offset);
            }
        }
        if !offsets.is_empty() {
            checkpoint.write(&offsets)?;
        }
        Ok(())
    }
}
