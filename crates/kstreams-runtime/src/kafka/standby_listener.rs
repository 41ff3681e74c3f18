//! What an application hears of its standby tasks: Kafka Streams'
//! `StandbyUpdateListener` (KIP-988).

use kstreams_state::TopicPartition;

/// Why a standby store stopped being updated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SuspendReason {
    /// The broker gave the task to another instance (or this one closed).
    Migrated,
    /// The task became active here: its stores carry on as the active
    /// task's, restoring only what the standby had not applied.
    Promoted,
}

/// Callbacks on standby tasks' stores, from the stream thread that keeps
/// them (keep them short: the thread processes nothing meanwhile). Set with
/// [`KafkaStreams::set_standby_update_listener`](super::KafkaStreams::set_standby_update_listener).
pub trait StandbyUpdateListener: Send + Sync {
    /// A standby store starts following changelog partition `partition`
    /// after `starting_offset` (the offset of the last record it holds; -1
    /// when it holds none).
    fn on_update_start(&self, partition: &TopicPartition, store: &str, starting_offset: i64);

    /// `batch_size` changelog records up to `batch_end_offset` were applied
    /// to standby store `store` of task `task_id`; the partition's end
    /// offset was last seen at `current_end_offset` (-1 if not yet known).
    fn on_batch_loaded(
        &self,
        partition: &TopicPartition,
        store: &str,
        task_id: &str,
        batch_end_offset: i64,
        batch_size: u64,
        current_end_offset: i64,
    );

    /// The standby store stopped following the changelog at `store_offset`
    /// (the end offset last seen: `current_end_offset`).
    fn on_update_suspended(
        &self,
        partition: &TopicPartition,
        store: &str,
        store_offset: i64,
        current_end_offset: i64,
        reason: SuspendReason,
    );
}
