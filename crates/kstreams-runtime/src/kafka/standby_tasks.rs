//! Standby tasks (Kafka Streams' `StandbyTask`, with the changelog reader's
//! standby mode): copies of other instances' task state, kept current from
//! the changelogs, so that when the broker moves a task here its stores
//! restore only what the copy lacks instead of their whole changelogs.
//!
//! A standby task has the task's stores in the task's directory (locked as
//! an active task's), made by the task creator exactly as an active task's
//! are. From where they are, one consumer of the thread's (a restore
//! consumer, `read_committed` under exactly-once) reads every standby
//! changelog partition from where its store is, and each pass of the stream
//! thread's loop applies what it fetched, without blocking. The standby's
//! checkpoint is written when it closes (given up, or promoted: the active
//! task then restores from it) and, as Kafka Streams does, at commits once
//! it has applied 10 000 records since its last one.
//!
//! Standby tasks exist only under `group.protocol=streams`, where the
//! broker assigns them (`streams.num.standby.replicas`); warm-up tasks are
//! run the same way until the broker makes them active.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kstreams_dsl::TaskId;
use kstreams_metrics::Counter;
use kstreams_state::__private::TaskDirectory;
use kstreams_state::TopicPartition;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use super::changelog_batch;
use super::clients;
use super::config::StreamsConfig;
use super::consumer_position::is_fatal_consumer_error;
use super::ffi::cached_watermarks;
use super::ffi::BatchedConsumer;
use super::queries::StoreInstance;
use super::standby_listener::{StandbyUpdateListener, SuspendReason};
use super::task_creator::TaskCreator;
use super::RuntimeError;
use crate::kafka::client_error::ClientResult;
use crate::StreamTask;

/// Changelog records applied per pass of the thread's loop at most, so
/// that standbys catching up do not hold the active tasks back.
const UPDATE_BATCH: usize = 5_000;

/// Records applied to a standby since its last checkpoint that make a
/// commit write it again (Kafka Streams' `OFFSET_DELTA_THRESHOLD_FOR_CHECKPOINT`):
/// each checkpoint flushes the stores, too costly at every commit.
const CHECKPOINT_DELTA: u64 = 10_000;

/// One standby task.
struct Standby {
    task: StreamTask,
    directory: Option<TaskDirectory>,
    /// Per changelog partition, the offset of the last record applied.
    reached: HashMap<TopicPartition, i64>,
    /// Records applied since the last checkpoint.
    since_checkpoint: u64,
}

/// A stream thread's standby tasks and the consumer that updates them.
pub(crate) struct StandbyTasks {
    thread: String,
    config: StreamsConfig,
    tasks: HashMap<TaskId, Standby>,
    /// Changelog partition → its standby task and store.
    partitions: HashMap<TopicPartition, (TaskId, String)>,
    /// Made with the first standby; read in batches.
    consumer: Option<BatchedConsumer>,
    listener: Option<Arc<dyn StandbyUpdateListener>>,
    updates: Counter,
}

impl StandbyTasks {
    pub(super) fn new(
        thread: &str,
        config: &StreamsConfig,
        listener: Option<Arc<dyn StandbyUpdateListener>>,
    ) -> Result<Self, RuntimeError> {
        Ok(Self {
            thread: thread.to_string(),
            config: config.clone(),
            tasks: HashMap::new(),
            partitions: HashMap::new(),
            consumer: None,
            listener,
            updates: config.metrics.standby_updates(thread)?,
        })
    }

    fn consumer(&mut self) -> Result<&BaseConsumer, RuntimeError> {
        if self.consumer.is_none() {
            let name = format!("{}-standby", self.thread);
            self.consumer = Some(clients::batched(
                clients::restore_consumer(&self.config, &name)
                    .create()
                    .client()?,
            )?);
        }
        Ok(self.consumer.as_deref().expect("just made"))
    }

    /// Makes standby task `id`: its stores opened in its directory (as an
    /// active task's), then read on from where they are by the standby
    /// consumer, without blocking the thread.
    pub(super) fn add(
        &mut self,
        id: TaskId,
        creator: &mut TaskCreator,
    ) -> Result<(), RuntimeError> {
        if self.tasks.contains_key(&id) {
            return Ok(());
        }
        let created = creator.create(id)?;
        let mut reached = HashMap::new();
        let mut positions = TopicPartitionList::new();
        for from in &created.restore_from {
            let changelog = &from.changelog;
            let key = TopicPartition::new(changelog.topic.as_str(), id.partition);
            let persistent = created
                .task
                .stores()
                .get(&changelog.store)
                .is_some_and(|s| s.lifecycle.borrow().persistent());
            // A negative offset is "unknown" (a store that never wrote nor
            // restored anything), and an in-memory store starts empty: read
            // from the start.
            let start = match from.after.filter(|o| *o >= 0 && persistent) {
                Some(offset) => {
                    reached.insert(key.clone(), offset);
                    Offset::Offset(offset + 1)
                }
                None => Offset::Beginning,
            };
            positions
                .add_partition_offset(&changelog.topic, id.partition, start)
                .client()?;
            if let Some(listener) = &self.listener {
                let from = reached.get(&key).map_or(-1, |o| *o);
                listener.on_update_start(&key, &changelog.store, from);
            }
            self.partitions.insert(key, (id, changelog.store.clone()));
        }
        if positions.count() > 0 {
            self.consumer()?.incremental_assign(&positions).client()?;
        }
        log::info!("{}: created standby task {id}", self.thread);
        self.tasks.insert(
            id,
            Standby {
                task: created.task,
                directory: created.directory,
                reached,
                since_checkpoint: 0,
            },
        );
        Ok(())
    }

    /// Closes standby task `id` (to be made active here, or given up):
    /// its stores flushed and checkpointed at what they reached, so that
    /// whoever opens them next restores only the rest.
    pub(super) fn remove(
        &mut self,
        id: TaskId,
        why: SuspendReason,
        creator: &TaskCreator,
    ) -> Result<(), RuntimeError> {
        let Some(mut standby) = self.tasks.remove(&id) else {
            return Ok(());
        };
        let mut positions = TopicPartitionList::new();
        let owned: Vec<TopicPartition> = self
            .partitions
            .iter()
            .filter(|(_, (task, _))| *task == id)
            .map(|(key, _)| key.clone())
            .collect();
        for key in &owned {
            let (_, store) = self.partitions.remove(key).expect("listed");
            positions.add_partition(&key.topic, key.partition);
            if let Some(listener) = &self.listener {
                let at = standby.reached.get(key).map_or(-1, |o| *o);
                let end = end_offset(self.consumer.as_deref(), key);
                listener.on_update_suspended(key, &store, at, end, why);
            }
        }
        if let (Some(consumer), true) = (&self.consumer, positions.count() > 0) {
            consumer.incremental_unassign(&positions).client()?;
        }
        let checkpointed = checkpoint(creator, id, &mut standby);
        standby.task.close();
        self.config.metrics.remove_task(&id.to_string());
        log::info!("{}: closed standby task {id} ({why:?})", self.thread);
        checkpointed
    }

    /// Applies what the standby consumer has fetched, without waiting, up
    /// to [`UPDATE_BATCH`] records. Returns how many were applied.
    pub(super) fn update(&mut self) -> Result<usize, RuntimeError> {
        let Some(consumer) = &self.consumer else {
            return Ok(0);
        };
        if self.tasks.is_empty() {
            return Ok(0);
        }
        let thread = &self.thread;
        let batch = changelog_batch::read_batch(
            consumer,
            UPDATE_BATCH,
            Duration::ZERO,
            |e| {
                if is_fatal_consumer_error(&e) {
                    return Err(RuntimeError::client(e));
                }
                log::debug!("{thread}: standby consumer: {e}");
                Ok(())
            },
            |_| Some(i64::MAX),
        )?;
        for (key, records) in &batch.partitions {
            let Some((id, store)) = self.partitions.get(key) else {
                continue; // unassigned since it was fetched
            };
            let Some(standby) = self.tasks.get_mut(id) else {
                continue;
            };
            let Some(built) = standby.task.stores().get(store) else {
                continue;
            };
            built
                .lifecycle
                .borrow_mut()
                .restore_batch(&batch.changelog_records(records, key))?;
            let last = records.last_offset();
            let count = records.count() as u64;
            standby.reached.insert(key.clone(), last);
            standby.since_checkpoint += count;
            self.updates.add(count);
            if let Some(listener) = &self.listener {
                listener.on_batch_loaded(
                    key,
                    store,
                    &id.to_string(),
                    last,
                    count,
                    end_offset(Some(consumer), key),
                );
            }
        }
        Ok(batch.read)
    }

    /// The standby tasks' ids, in no particular order.
    pub(super) fn task_ids(&self) -> impl Iterator<Item = TaskId> + '_ {
        self.tasks.keys().copied()
    }

    /// Each standby's changelog position and end, summed over its changelog
    /// partitions (Kafka Streams' task offset sums): the offsets of the last
    /// records applied, and the high watermarks librdkafka last saw (`None`
    /// until one is known for every partition).
    pub(super) fn offset_sums(&self) -> Vec<(TaskId, i64, Option<i64>)> {
        let consumer = self.consumer.as_deref();
        let mut sums: HashMap<TaskId, (i64, Option<i64>)> = HashMap::new();
        for (key, (id, _)) in &self.partitions {
            let Some(standby) = self.tasks.get(id) else {
                continue;
            };
            let (offset, end) = sums.entry(*id).or_insert((0, Some(0)));
            if let Some(reached) = standby.reached.get(key).filter(|o| **o >= 0) {
                *offset = offset.saturating_add(*reached);
            }
            let high = end_offset(consumer, key);
            *end = end.and_then(|sum| (high >= 0).then(|| sum.saturating_add(high)));
        }
        let mut sums: Vec<_> = sums
            .into_iter()
            .map(|(id, (offset, end))| (id, offset, end))
            .collect();
        sums.sort_by_key(|(id, _, _)| *id);
        sums
    }

    /// At a commit: checkpoints the standbys that applied enough since
    /// their last checkpoint.
    pub(super) fn maybe_checkpoint(&mut self, creator: &TaskCreator) -> Result<(), RuntimeError> {
        for (id, standby) in &mut self.tasks {
            if standby.since_checkpoint >= CHECKPOINT_DELTA {
                checkpoint(creator, *id, standby)?;
            }
        }
        Ok(())
    }

    /// Closes every standby (the thread ends), checkpointed.
    pub(super) fn close_all(&mut self, creator: &TaskCreator) {
        let ids: Vec<TaskId> = self.tasks.keys().copied().collect();
        for id in ids {
            if let Err(e) = self.remove(id, SuspendReason::Migrated, creator) {
                log::warn!("{}: closing standby task {id}: {e}", self.thread);
            }
        }
    }

    /// The standbys' instances of `store`, for interactive queries with
    /// stale stores enabled.
    pub(super) fn instances<'a>(&'a self, store: &str, out: &mut Vec<StoreInstance<'a>>) {
        for (id, standby) in &self.tasks {
            if let Some(built) = standby.task.stores().get(store) {
                out.push(StoreInstance {
                    task: *id,
                    store: built,
                    current: false,
                });
            }
        }
    }
}

/// Flushes a standby's stores and writes its checkpoint.
fn checkpoint(
    creator: &TaskCreator,
    id: TaskId,
    standby: &mut Standby,
) -> Result<(), RuntimeError> {
    let Some(directory) = &standby.directory else {
        return Ok(());
    };
    for built in standby.task.stores().values() {
        built.lifecycle.borrow_mut().flush()?;
    }
    creator.write_checkpoint(id, directory, &standby.task, &standby.reached)?;
    standby.since_checkpoint = 0;
    Ok(())
}

/// The end offset the consumer last saw for a partition, from the fetch
/// responses librdkafka keeps (no request); -1 when librdkafka has no such
/// partition, and librdkafka's -1001 (`RD_KAFKA_OFFSET_INVALID`) while no
/// fetch response came yet. rust-rdkafka offers only `fetch_watermarks`, a
/// request to the broker per call, too slow for every batch.
fn end_offset(consumer: Option<&BaseConsumer>, changelog: &TopicPartition) -> i64 {
    consumer
        .and_then(|consumer| cached_watermarks(consumer, &changelog.topic, changelog.partition))
        .map_or(-1, |(_, high)| high)
}
