//! Restoration: a changelog replayed into a store, with progress reported
//! to a listener (Kafka Streams' `StateRestoreListener`).
//!
//! The runtime reads the changelog partition from where the checkpoint
//! says ([`restore_start`]) to the end offset it saw at start, and feeds
//! each batch to a [`Restoration`]; the store applies it straight into its
//! engine, skipping cache and changelog.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

pub use kstreams_record::TopicPartition;

use crate::{BackgroundFlush, ChangelogRecord, Error, StateStore};

/// Hears about restorations: Kafka Streams' `StateRestoreListener`, with
/// its callbacks and their arguments in Kafka's order.
///
/// Offsets are offsets of `partition`; `ending_offset` is the end
/// (exclusive: the log end offset seen when the restoration began) it runs
/// to, so `ending_offset - starting_offset` bounds the records to restore
/// (compaction and transaction markers leave fewer). Callbacks run on the
/// thread that restores: keep them short.
pub trait StateRestoreListener: Send + Sync {
    /// `store` starts restoring `partition` from `starting_offset`.
    fn on_restore_start(
        &self,
        partition: &TopicPartition,
        store: &str,
        starting_offset: i64,
        ending_offset: i64,
    ) {
        let _ = (partition, store, starting_offset, ending_offset);
    }
    /// A batch was applied; `batch_end_offset` is its last record's offset,
    /// `num_restored` the records in it.
    fn on_batch_restored(
        &self,
        partition: &TopicPartition,
        store: &str,
        batch_end_offset: i64,
        num_restored: u64,
    ) {
        let _ = (partition, store, batch_end_offset, num_restored);
    }
    /// `store` is restored from `partition`: `total_restored` records in all.
    fn on_restore_end(&self, partition: &TopicPartition, store: &str, total_restored: u64) {
        let _ = (partition, store, total_restored);
    }
    /// The restoration stopped before its end (KIP-869: the task was
    /// closed or moved away, or the restoration failed), after
    /// `total_restored` records.
    fn on_restore_suspended(&self, partition: &TopicPartition, store: &str, total_restored: u64) {
        let _ = (partition, store, total_restored);
    }
}

/// A listener that ignores everything.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoopRestoreListener;

impl StateRestoreListener for NoopRestoreListener {}

/// Where to start reading a store's changelog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestoreStart {
    /// Right after this offset, the last one the store already has.
    After(i64),
    /// From the beginning of the changelog, over what the store has.
    Beginning,
    /// Wipe the local state first, then from the beginning: under
    /// exactly-once a persistent store without a checkpoint may hold writes
    /// of an aborted transaction.
    WipeThenBeginning,
}

/// Decides where a store's restoration starts, as Kafka Streams does.
/// `checkpointed` is the offset in the task's `.checkpoint` file for the
/// store's changelog partition (the offset of the last record the store
/// has), if any.
pub fn restore_start(
    checkpointed: Option<i64>,
    persistent: bool,
    exactly_once: bool,
) -> RestoreStart {
    match checkpointed.filter(|o| *o >= 0) {
        Some(offset) if persistent => RestoreStart::After(offset),
        _ if persistent && exactly_once => RestoreStart::WipeThenBeginning,
        _ => RestoreStart::Beginning,
    }
}

/// One store's restoration from one changelog partition.
pub struct Restoration {
    store: Rc<RefCell<dyn StateStore>>,
    store_name: String,
    partition: TopicPartition,
    start_offset: i64,
    end_offset: i64,
    restored: u64,
    last_offset: Option<i64>,
    listener: Arc<dyn StateRestoreListener>,
}

impl Restoration {
    /// Starts restoring `store` from `topic`/`partition`, offsets
    /// `[start_offset, end_offset)`; tells the listener.
    pub fn start(
        store: Rc<RefCell<dyn StateStore>>,
        topic: &str,
        partition: i32,
        start_offset: i64,
        end_offset: i64,
        listener: Arc<dyn StateRestoreListener>,
    ) -> Self {
        let store_name = store.borrow().name().to_string();
        let partition = TopicPartition::new(topic, partition);
        listener.on_restore_start(&partition, &store_name, start_offset, end_offset);
        Restoration {
            store,
            store_name,
            partition,
            start_offset,
            end_offset,
            restored: 0,
            last_offset: None,
            listener,
        }
    }

    /// Applies a batch read from the changelog; `batch_end_offset` is the
    /// offset of its last record.
    pub fn restore_batch(
        &mut self,
        records: &[ChangelogRecord<'_>],
        batch_end_offset: i64,
    ) -> Result<(), Error> {
        self.store.borrow_mut().restore_batch(records)?;
        self.restored += records.len() as u64;
        self.last_offset = Some(batch_end_offset);
        // An empty batch only moves past transaction markers: Kafka Streams
        // reports batches of records.
        if records.is_empty() {
            return Ok(());
        }
        self.listener.on_batch_restored(
            &self.partition,
            &self.store_name,
            batch_end_offset,
            records.len() as u64,
        );
        Ok(())
    }

    /// Records applied so far.
    pub fn restored(&self) -> u64 {
        self.restored
    }

    /// An upper bound of the records to restore.
    pub fn total(&self) -> u64 {
        (self.end_offset - self.start_offset).max(0) as u64
    }

    /// The offset of the last record applied, for the checkpoint.
    pub fn last_offset(&self) -> Option<i64> {
        self.last_offset
    }

    /// Whether the end offset was reached.
    pub fn is_complete(&self) -> bool {
        let next = self.last_offset.map_or(self.start_offset, |o| o + 1);
        next >= self.end_offset
    }

    /// Ends the restoration: tells the listener, and starts writing the
    /// store down without waiting for it (a checkpoint of its task may say
    /// it holds the changelog's end once the returned flush is done).
    pub fn finish(self) -> Result<BackgroundFlush, Error> {
        let flush = self.store.borrow_mut().flush_in_background()?;
        self.listener
            .on_restore_end(&self.partition, &self.store_name, self.restored);
        Ok(flush)
    }

    /// Stops before the end; tells the listener.
    pub fn suspend(self) -> u64 {
        self.listener
            .on_restore_suspended(&self.partition, &self.store_name, self.restored);
        self.restored
    }
}
