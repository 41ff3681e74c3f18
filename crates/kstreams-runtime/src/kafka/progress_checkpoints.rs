//! The progress checkpoints of restoring tasks (at-least-once): a task
//! that restored enough since its last one flushes its stores in the
//! background, and its checkpoint is written once that flush is done, with
//! the changelog offsets its stores had reached when the flush began.
//!
//! The stream thread never waits for RocksDB here: a flush under a bulk
//! restore can wait seconds for compaction, which the thread's loop (and
//! `max.poll.interval.ms`) cannot spare. Writes restored while the flush
//! runs are not claimed by the checkpoint; a restore that resumes from it
//! replays them.

use std::collections::HashMap;

use kstreams_dsl::TaskId;
use kstreams_state::{BackgroundFlush, TopicPartition};

use super::RuntimeError;
use crate::StreamTask;

/// The changelog offsets a task's checkpoint says its stores reach.
pub(super) type Reached = HashMap<TopicPartition, i64>;

/// A task's stores being flushed for a checkpoint at `reached`.
struct Flushing {
    flushes: Vec<BackgroundFlush>,
    reached: Reached,
}

/// The restoring tasks whose progress checkpoint waits for their stores'
/// flush.
#[derive(Default)]
pub(super) struct ProgressCheckpoints {
    flushing: HashMap<TaskId, Flushing>,
}

impl ProgressCheckpoints {
    /// Whether task `id`'s stores are being flushed for a checkpoint.
    pub(super) fn is_flushing(&self, id: TaskId) -> bool {
        self.flushing.contains_key(&id)
    }

    /// Starts flushing task `id`'s stores for a checkpoint at `reached`.
    pub(super) fn start(
        &mut self,
        id: TaskId,
        task: &StreamTask,
        reached: Reached,
    ) -> Result<(), RuntimeError> {
        let flushes = task
            .stores()
            .values()
            .map(|built| built.lifecycle.borrow_mut().flush_in_background())
            .collect::<Result<_, _>>()?;
        self.flushing.insert(id, Flushing { flushes, reached });
        Ok(())
    }

    /// The tasks whose stores are flushed, with the offsets their
    /// checkpoint may say; a failed flush is the thread's error.
    pub(super) fn take_flushed(&mut self) -> Result<Vec<(TaskId, Reached)>, RuntimeError> {
        let mut flushed = Vec::new();
        for (id, flushing) in &self.flushing {
            if BackgroundFlush::all_done(&flushing.flushes)? {
                flushed.push(*id);
            }
        }
        Ok(flushed
            .into_iter()
            .map(|id| {
                let flushing = self.flushing.remove(&id).expect("listed");
                (id, flushing.reached)
            })
            .collect())
    }

    /// Forgets task `id`'s checkpoint in progress: the task stopped
    /// restoring (restored, or closed with a checkpoint of its own).
    pub(super) fn forget(&mut self, id: TaskId) {
        self.flushing.remove(&id);
    }
}
