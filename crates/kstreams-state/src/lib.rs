//! Local state for kstreams: Kafka Streams' `org.apache.kafka.streams.state`.
//!
//! This crate owns the state stores a task keeps next to its processors:
//!
//! - the store traits processors use, each with a read-only view for
//!   queries: [`KeyValueStore`] (and its timestamped form over
//!   [`ValueAndTimestamp`]), [`WindowStore`], [`SessionStore`] and
//!   [`VersionedKeyValueStore`] (KIP-889);
//! - two engines behind each of them, in memory (ordered) and RocksDB (with
//!   the `rocksdb` feature, on by default), where window and session stores
//!   are segmented by time so that expiry drops whole segments;
//! - one stack of layers between a processor and an engine, shared by the
//!   four store types as Kafka Streams' decorators are (metered -> caching
//!   -> change-logging -> engine): the metered layer times every call a
//!   processor makes into latency histograms
//!   (`kstreams_state_<op>_latency_seconds`) when the task's
//!   [`StoreContext`] has a metrics registry ([`StoreContext::with_metrics`]);
//!   a typed cache with a byte budget per stream thread ([`ThreadCache`])
//!   coalesces consecutive updates of a key and hands old and new values to
//!   a flush listener; the change-logging layer turns each write into a
//!   changelog record through a [`ChangelogWriter`] the runtime provides, in
//!   the same bytes as Kafka Streams (window and session keys included, see
//!   [`format`](mod@format));
//! - one set of builder options for every store ([`StoreOptions`]: logging
//!   and its topic configs, caching, metrics), which the DSL's
//!   `Materialized` reuses;
//! - restoration from a changelog ([`StateRestoreListener`]), the state
//!   directory with its per-task locks, `.checkpoint` files and the cleanup
//!   of tasks no longer owned (the runtime's, in a hidden `__private`
//!   module).
//!
//! Stores are built per task from a [`StoreBuilder`], which a topology holds
//! (for example [`Stores::key_value_store_builder`]). A task owns its stores
//! and runs on one thread, so a handle is an `Rc<RefCell<..>>`: no lock on
//! the hot path. Keys and values are typed outside and bytes inside: an
//! engine orders keys by their serialized bytes, as Kafka Streams does.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

/// The offset methods of [`StateStore`] for a store that hands them to the
/// store or backend in its field `$field` (every layer and engine does).
macro_rules! forward_offsets {
    ($field:ident) => {
        fn commit_offsets(&mut self, offsets: &[(&str, i32, i64)]) -> Result<(), Error> {
            self.$field.commit_offsets(offsets)
        }
        fn committed_offset(
            &self,
            topic: &str,
            partition: i32,
        ) -> Result<Option<crate::RecordedOffset>, Error> {
            self.$field.committed_offset(topic, partition)
        }
        fn checkpointed_in_task_file(&self) -> bool {
            self.$field.checkpointed_in_task_file()
        }
        fn start_transactions(&mut self) -> Result<(), Error> {
            self.$field.start_transactions()
        }
        fn uncommitted_bytes(&self) -> usize {
            self.$field.uncommitted_bytes()
        }
    };
}

mod background_flush;
mod cache;
mod changelog;
mod checkpoint;
mod context;
mod engine;
pub mod format;
mod key_value;
mod layered;
mod metered;
mod options;
#[cfg(feature = "rocksdb")]
mod pending_writes;
mod restore;
#[cfg(feature = "rocksdb")]
mod rocks;
#[cfg(feature = "rocksdb")]
mod rocks_metrics;
#[cfg(feature = "rocksdb")]
mod rocks_settings;
mod session;
mod shared;
mod state_dir;
mod stores;
mod typed;
#[cfg(feature = "rocksdb")]
mod uncommitted;
mod versioned;
mod window;
mod windowed_serde;

use std::any::Any;
use std::cell::RefCell;
use std::rc::Rc;

pub use background_flush::BackgroundFlush;
pub use cache::{CachedChange, FlushListener, ThreadCache};
pub use context::{
    changelog_topic_name, ChangelogHeader, ChangelogRecord, ChangelogWriter, OwnedChangelogRecord,
    StoreContext,
};
pub use engine::{
    BytesIter, KeyValueBytesStore, KeyValueBytesStoreSupplier, SessionBytesEntry,
    SessionBytesStore, SessionBytesStoreSupplier, VersionedBytes, VersionedBytesStore,
    VersionedBytesStoreSupplier, WindowBytesEntry, WindowBytesStore, WindowBytesStoreSupplier,
};
pub use key_value::{
    KeyValueIter, KeyValueStore, KeyValueStoreBuilder, KeyValueStoreHandle, ReadOnlyKeyValueStore,
    TimestampedKeyValueStore, TimestampedKeyValueStoreHandle,
};
pub use options::StoreOptions;
pub use restore::{NoopRestoreListener, StateRestoreListener, TopicPartition};
#[cfg(feature = "rocksdb")]
pub use rocks_settings::{RocksDbConfigSetter, RocksDbMemoryBounds, RocksDbSettings};
pub use session::{ReadOnlySessionStore, SessionStore, SessionStoreBuilder, SessionStoreHandle};
#[cfg(feature = "rocksdb")]
pub use shared::SharedRocksDbStore;
pub use shared::{SharedBytesStore, SharedMemoryStore};
pub use stores::Stores;
pub use typed::{ValueAndTimestamp, ValueAndTimestampSerde};
pub use versioned::{
    VersionedKeyValueStore, VersionedKeyValueStoreBuilder, VersionedKeyValueStoreHandle,
    VersionedRecord, PUT_RETURN_CODE_NOT_PUT, PUT_RETURN_CODE_VALID_TO_UNDEFINED,
};
pub use window::{
    ReadOnlyWindowStore, TimestampedWindowStore, TimestampedWindowStoreHandle, WindowStore,
    WindowStoreBuilder, WindowStoreHandle, WindowStoreIter,
};
pub use windowed_serde::{SessionWindowedSerde, TimeWindowedSerde};
// Windows and windowed keys live with the window definitions in
// kstreams-time; these paths stay for the state crate's users.
pub use kstreams_time::{Window, Windowed};

/// What the runtime drives and applications do not use: the state
/// directory with its task locks, `.checkpoint` files and restoration.
/// Public for `kstreams-runtime` only; not part of the API (its name says
/// so, as serde's does).
#[doc(hidden)]
pub mod __private {
    pub use crate::checkpoint::{OffsetCheckpoint, Offsets};
    pub use crate::restore::{restore_start, Restoration, RestoreStart};
    pub use crate::state_dir::{
        ApplicationDirectoryLock, StateDirectory, TaskDirectory, CHECKPOINT_FILE_NAME,
        PROCESS_FILE_NAME,
    };
}

/// The `rocksdb` crate, for [`RocksDbConfigSetter`] implementations.
#[cfg(feature = "rocksdb")]
pub use rocksdb;

/// A timestamp in milliseconds since the Unix epoch, as Kafka stores it.
pub type Timestamp = i64;

/// A boxed error from below this crate (an engine, a changelog writer).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Errors of the state layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A processor asked for a store under a type it does not have.
    #[error("state store {name} is a {actual}, not the {requested} that was asked for")]
    WrongStoreType {
        /// Store name.
        name: String,
        /// What the store is.
        actual: &'static str,
        /// What was asked.
        requested: &'static str,
    },
    /// A key or value could not be serialized or deserialized.
    #[error("state store {store}: {source}")]
    Serde {
        /// Store name.
        store: String,
        /// The serde's error.
        source: kstreams_record::SerdeError,
    },
    /// A key serialized to null; stores have no null keys.
    #[error("state store {store}: a key serialized to null; store keys cannot be null")]
    NullKey {
        /// Store name.
        store: String,
    },
    /// The storage engine failed.
    #[error("state store {store}: {source}")]
    Engine {
        /// Store name.
        store: String,
        /// The engine's error.
        source: BoxError,
    },
    /// The store is used before `init` or after `close`.
    #[error("state store {store} is not open (used before init or after close)")]
    NotOpen {
        /// Store name.
        store: String,
    },
    /// A persistent store was initialized without a task directory.
    #[error(
        "persistent state store {store} needs a task directory: initialize it with a \
         StoreContext that has one (StoreContext::with_task_directory)"
    )]
    NoStateDirectory {
        /// Store name.
        store: String,
    },
    /// The changelog writer refused a record.
    #[error("state store {store}: writing to changelog {topic} failed: {source}")]
    Changelog {
        /// Store name.
        store: String,
        /// Changelog topic.
        topic: String,
        /// The writer's error.
        source: BoxError,
    },
    /// A changelog record could not be applied during restore.
    #[error("state store {store}: changelog record at position {index} of the batch: {message}")]
    CorruptChangelogRecord {
        /// Store name.
        store: String,
        /// Position in the restore batch.
        index: usize,
        /// What is wrong with it.
        message: String,
    },
    /// A file system operation on the state directory failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path involved.
        path: std::path::PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Another stream thread or process holds the task directory's lock.
    #[error(
        "task directory {path} is locked by another stream thread or process; is a second \
         instance running with the same state.dir and application.id? Give each instance \
         its own state.dir"
    )]
    TaskDirectoryLocked {
        /// The task directory.
        path: std::path::PathBuf,
    },
    /// Another instance holds the application directory's lock.
    #[error(
        "state directory {path} is locked by another instance of this application; \
         can multiple instances be running with the same state.dir and application.id? \
         Give each instance its own state.dir"
    )]
    StateDirectoryLocked {
        /// The application directory.
        path: std::path::PathBuf,
    },
    /// A `.checkpoint` file is not in Kafka Streams' format.
    #[error("checkpoint file {path}: {message}")]
    CorruptCheckpoint {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The store's metrics could not be registered.
    #[error("state store {store}: {source}")]
    Metrics {
        /// Store name.
        store: String,
        /// The registry's error.
        source: kstreams_metrics::Error,
    },
    /// A store was configured with values that cannot work.
    #[error("state store {store}: {message}")]
    InvalidConfig {
        /// Store name.
        store: String,
        /// What is wrong.
        message: String,
    },
}

impl Error {
    #[cfg_attr(not(feature = "rocksdb"), allow(dead_code))]
    pub(crate) fn engine(store: &str, source: impl Into<BoxError>) -> Self {
        Error::Engine {
            store: store.to_string(),
            source: source.into(),
        }
    }
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<std::path::PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Error::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// What every store has, whatever it holds: Kafka Streams' `StateStore`.
///
/// The engine calls these; processors use the typed traits
/// ([`KeyValueStore`], [`WindowStore`], ...).
pub trait StateStore: 'static {
    /// The store name, unique in a topology.
    fn name(&self) -> &str;
    /// Whether the store keeps its data on disk.
    fn persistent(&self) -> bool;
    /// Attaches the store to its task: opens persistent engines in the
    /// task directory, connects the changelog writer and the thread's cache.
    /// In-memory stores work without it (nothing is logged then).
    fn init(&mut self, context: &StoreContext) -> Result<(), Error> {
        let _ = context;
        Ok(())
    }
    /// Writes cached and buffered data down (called at commit, before the
    /// changelog is flushed and offsets are committed).
    fn flush(&mut self) -> Result<(), Error>;
    /// [`StateStore::flush`] without waiting for the engine: what the
    /// store buffers or caches is handed to its engine before this returns,
    /// and the engine writes it down meanwhile; the returned flush says
    /// when that is done. The stream thread checkpoints a long restore's
    /// progress so, without stopping for RocksDB (see [`BackgroundFlush`]).
    /// The default flushes in place.
    fn flush_in_background(&mut self) -> Result<BackgroundFlush, Error> {
        self.flush()?;
        Ok(BackgroundFlush::done(self.name()))
    }
    /// Writes only the cache's dirty entries down (engine, changelog, flush
    /// listener), without flushing the engine. The DSL's operators call it
    /// at commit, in topology order, so that what a cache forwards reaches
    /// downstream caches before those are flushed in turn.
    fn flush_cache(&mut self) -> Result<(), Error> {
        Ok(())
    }
    /// Releases the store's resources (called when its task closes).
    fn close(&mut self) -> Result<(), Error>;
    /// Closes the store without writing anything down: Kafka Streams'
    /// dirty close, for a task whose work since its last commit is thrown
    /// away (its transaction aborted, or its partitions lost to another
    /// member). What the cache holds is dropped, neither written to the
    /// engine nor logged to the changelog nor handed to a flush listener;
    /// the engine closes as [`StateStore::close`] closes it (whatever it
    /// holds is in the store's own files, which a later task restores over
    /// or, under exactly-once, rebuilds).
    ///
    /// The default is [`StateStore::close`]: right for an engine and for
    /// any store that holds nothing above its engine. A layer that keeps
    /// writes back (a cache) overrides it.
    fn close_dirty(&mut self) -> Result<(), Error> {
        self.close()
    }
    /// Applies a batch of changelog records straight into the engine (no
    /// cache, no changelog), in changelog order.
    fn restore_batch(&mut self, records: &[ChangelogRecord<'_>]) -> Result<(), Error>;
    /// Whether a changelog backs the store (its builder had logging on).
    fn logging_enabled(&self) -> bool {
        false
    }
    /// Records, beside the data, the changelog offsets (`topic`,
    /// `partition`, offset of the last record) that the flushed data
    /// reaches. Called after a flush with what the task's `.checkpoint`
    /// gets. Kafka Streams 4.4's RocksDB key-value stores keep them in their
    /// `offsets` column family (KIP-1035), and kstreams' do too, so that
    /// either side resumes the other's files; other stores ignore it. An
    /// empty list forgets every offset recorded (Kafka Streams' commit of an
    /// empty map).
    fn commit_offsets(&mut self, offsets: &[(&str, i32, i64)]) -> Result<(), Error> {
        let _ = offsets;
        Ok(())
    }
    /// The changelog offset [`StateStore::commit_offsets`] recorded for a
    /// partition, if the store keeps offsets.
    fn committed_offset(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<Option<RecordedOffset>, Error> {
        let _ = (topic, partition);
        Ok(None)
    }
    /// Whether the task's `.checkpoint` file holds the store's offset.
    /// Persistent stores in Kafka Streams' layout: yes (Kafka Streams reads
    /// the file into its own stores). Stores in kstreams' own layouts keep
    /// it only in their files: Kafka Streams, finding none, restores its
    /// own store from the changelog instead of taking our offset for it.
    fn checkpointed_in_task_file(&self) -> bool {
        self.persistent()
    }
    /// Starts holding writes uncommitted, for a store opened with
    /// [`StoreContext::with_transactional_stores`] (others ignore it): from
    /// now on each write waits for the next
    /// [`StateStore::commit_offsets`], which writes it to disk in one batch
    /// with the offsets, and a close without one (a dirty close, an aborted
    /// transaction) forgets it. Called once the store's restore is done:
    /// what a restore writes is committed already.
    fn start_transactions(&mut self) -> Result<(), Error> {
        Ok(())
    }
    /// The memory held by writes not yet committed (a transactional store
    /// after [`StateStore::start_transactions`]; 0 for any other).
    fn uncommitted_bytes(&self) -> usize {
        0
    }
}

/// A changelog offset a store recorded beside its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordedOffset {
    /// The offset of the last changelog record the data reaches.
    pub offset: i64,
    /// Whether the store was closed cleanly since: if not, data past the
    /// offset may be on disk (harmless under at-least-once: restoring from
    /// the offset writes it again) or, under exactly-once, writes of an
    /// aborted transaction.
    pub closed_cleanly: bool,
    /// Whether the store's last run wrote it transactionally (KIP-892):
    /// then the data on disk is a committed state and the offset the one
    /// it reaches, clean close or not.
    pub written_transactionally: bool,
}

impl RecordedOffset {
    /// Whether the data on disk is the committed state the offset
    /// describes, nothing past it: the store closed cleanly, or it was
    /// written transactionally. Otherwise it may hold writes past the
    /// offset, of transactions that were then aborted.
    pub fn describes_the_data(&self) -> bool {
        self.closed_cleanly || self.written_transactionally
    }
}

/// One store created for one task: a lifecycle view for the engine and a
/// typed handle (as `Any`) that processors ask for by type.
pub struct BuiltStore {
    /// Init, flush, close and restore go through here.
    pub lifecycle: Rc<RefCell<dyn StateStore>>,
    /// The typed handle, for example a [`KeyValueStoreHandle`].
    pub handle: Box<dyn Any>,
    /// A readable name of the handle's type, for errors.
    pub handle_type: &'static str,
}

impl BuiltStore {
    /// The typed handle, or a clear error naming both types.
    pub fn handle<H: Clone + 'static>(&self) -> Result<H, Error> {
        self.handle
            .downcast_ref::<H>()
            .cloned()
            .ok_or_else(|| Error::WrongStoreType {
                name: self.lifecycle.borrow().name().to_string(),
                actual: self.handle_type,
                requested: std::any::type_name::<H>(),
            })
    }

    /// Attaches the store to its task (see [`StateStore::init`]).
    pub fn init(&self, context: &StoreContext) -> Result<(), Error> {
        self.lifecycle.borrow_mut().init(context)
    }

    pub(crate) fn new<H: Clone + 'static>(
        lifecycle: Rc<RefCell<dyn StateStore>>,
        handle: H,
    ) -> Self {
        BuiltStore {
            lifecycle,
            handle: Box::new(handle),
            handle_type: std::any::type_name::<H>(),
        }
    }
}

/// Creates a store for each task: Kafka Streams' `StoreBuilder`.
pub trait StoreBuilder: Send + Sync + 'static {
    /// The store name.
    fn name(&self) -> &str;
    /// Whether a changelog topic backs the store.
    fn logging_enabled(&self) -> bool;
    /// Topic configs for the changelog (`cleanup.policy`, `retention.ms`, ...).
    fn log_config(&self) -> std::collections::BTreeMap<String, String> {
        std::collections::BTreeMap::new()
    }
    /// For a window or session store whose logging config does not set
    /// `retention.ms` itself: the store's retention period, to which the
    /// application's `windowstore.changelog.additional.retention.ms` (a day
    /// by default, as [`log_config`](Self::log_config) assumes) is added for
    /// the changelog's `retention.ms`, as Kafka Streams'
    /// `WindowedChangelogTopicConfig` does. `None` for other stores.
    fn windowed_changelog_retention(&self) -> Option<Timestamp> {
        None
    }
    /// For a window store whose changelog records are each stamped at or
    /// after the start of their window (see
    /// [`WindowStoreBuilder::with_changelog_stamped_in_window`]): its
    /// retention period. A restore without local state may then skip the
    /// changelog's records stamped before the first window still retained
    /// (the last window start minus this retention), as Kafka Streams 4.4
    /// seeks a windowed changelog by time. `None`: restore it all.
    fn restore_within_retention(&self) -> Option<Timestamp> {
        None
    }
    /// A fresh store for one task. It still needs [`BuiltStore::init`].
    fn build(&self) -> BuiltStore;
}

/// An iterator over typed results; each item may fail to deserialize.
pub type StoreIter<'a, T> = Box<dyn Iterator<Item = Result<T, Error>> + 'a>;
