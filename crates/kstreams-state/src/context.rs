//! What a task hands its stores at init: where they live, where their
//! changelog goes, the record being processed and the thread's cache.

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use kstreams_metrics::MetricsRegistry;

use crate::cache::ThreadCache;
use crate::{BoxError, Timestamp};

/// The changelog topic of a store: `<application.id>-<store>-changelog`.
pub fn changelog_topic_name(application_id: &str, store: &str) -> String {
    format!("{application_id}-{store}-changelog")
}

/// A header a store puts on every changelog record it writes: constant per
/// store (Kafka Streams' suppression buffer marks its records `v` = 3).
pub type ChangelogHeader = (&'static str, &'static [u8]);

/// One changelog record, as a store writes it or as restoration reads it.
///
/// Keys and values are the bytes Kafka Streams writes for the same store:
/// window keys are `key ++ window start ++ sequence number`, session keys
/// `key ++ end ++ start` (see [`crate::format`]); timestamped stores log the
/// plain value with the value's timestamp as the record timestamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChangelogRecord<'a> {
    /// The changelog topic.
    pub topic: &'a str,
    /// The partition (the task's partition).
    pub partition: i32,
    /// Key bytes.
    pub key: &'a [u8],
    /// Value bytes; `None` is a tombstone.
    pub value: Option<&'a [u8]>,
    /// The record timestamp.
    pub timestamp: Timestamp,
    /// The store's changelog headers (restoration reads none).
    pub headers: &'a [ChangelogHeader],
}

/// Where changelogging stores send their records. The runtime implements it
/// on its record collector (the task's producer); tests collect records in a
/// `RefCell<Vec<OwnedChangelogRecord>>`.
pub trait ChangelogWriter {
    /// Sends one record. Called synchronously from the store's write.
    fn send(&self, record: &ChangelogRecord<'_>) -> Result<(), BoxError>;
}

/// A changelog record that owns its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnedChangelogRecord {
    /// The changelog topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// Key bytes.
    pub key: Vec<u8>,
    /// Value bytes; `None` is a tombstone.
    pub value: Option<Vec<u8>>,
    /// The record timestamp.
    pub timestamp: Timestamp,
    /// The store's changelog headers.
    pub headers: Vec<ChangelogHeader>,
}

impl OwnedChangelogRecord {
    /// A borrowed view, as restoration takes it.
    pub fn as_record(&self) -> ChangelogRecord<'_> {
        ChangelogRecord {
            topic: &self.topic,
            partition: self.partition,
            key: &self.key,
            value: self.value.as_deref(),
            timestamp: self.timestamp,
            headers: &self.headers,
        }
    }
}

impl From<&ChangelogRecord<'_>> for OwnedChangelogRecord {
    fn from(r: &ChangelogRecord<'_>) -> Self {
        OwnedChangelogRecord {
            topic: r.topic.to_string(),
            partition: r.partition,
            key: r.key.to_vec(),
            value: r.value.map(<[u8]>::to_vec),
            timestamp: r.timestamp,
            headers: r.headers.to_vec(),
        }
    }
}

impl ChangelogWriter for RefCell<Vec<OwnedChangelogRecord>> {
    fn send(&self, record: &ChangelogRecord<'_>) -> Result<(), BoxError> {
        self.borrow_mut().push(record.into());
        Ok(())
    }
}

/// A task's view for its stores: Kafka Streams' `StateStoreContext`.
///
/// Cheap to clone; clones share the record timestamp, so the runtime sets
/// it once per record with [`StoreContext::set_record_timestamp`] and every
/// store of the task sees it.
#[derive(Clone)]
pub struct StoreContext {
    application_id: Rc<str>,
    task_id: Rc<str>,
    partition: i32,
    task_dir: Option<PathBuf>,
    changelog: Option<Rc<dyn ChangelogWriter>>,
    record_timestamp: Rc<Cell<Timestamp>>,
    record_headers: Rc<std::cell::RefCell<kstreams_record::Headers>>,
    cache: Rc<ThreadCache>,
    metrics: Option<MetricsRegistry>,
    #[cfg(feature = "rocksdb")]
    rocksdb: crate::rocks_settings::RocksDbSettings,
    #[cfg(feature = "rocksdb")]
    rocksdb_metrics: Option<MetricsRegistry>,
    transactional: bool,
}

impl std::fmt::Debug for StoreContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreContext")
            .field("application_id", &self.application_id)
            .field("task_id", &self.task_id)
            .field("partition", &self.partition)
            .field("task_dir", &self.task_dir)
            .field("changelog", &self.changelog.is_some())
            .field("record_timestamp", &self.record_timestamp.get())
            .field("metrics", &self.metrics.is_some())
            .finish()
    }
}

impl StoreContext {
    /// A context for task `task_id` (as Kafka prints it, `0_1`) whose
    /// changelog partition is `partition`. No task directory, no changelog
    /// writer, a cache of its own with Kafka's default budget (10 MiB) and
    /// no metrics until the `with_` methods say otherwise.
    pub fn new(application_id: &str, task_id: &str, partition: i32) -> Self {
        StoreContext {
            application_id: Rc::from(application_id),
            task_id: Rc::from(task_id),
            partition,
            task_dir: None,
            changelog: None,
            record_timestamp: Rc::new(Cell::new(0)),
            record_headers: Rc::default(),
            cache: Rc::new(ThreadCache::new(ThreadCache::DEFAULT_MAX_BYTES)),
            metrics: None,
            #[cfg(feature = "rocksdb")]
            rocksdb: crate::rocks_settings::RocksDbSettings::default(),
            #[cfg(feature = "rocksdb")]
            rocksdb_metrics: None,
            transactional: false,
        }
    }

    /// Persistent stores live under this task directory
    /// (`<state.dir>/<application.id>/<task id>`).
    pub fn with_task_directory(mut self, dir: impl Into<PathBuf>) -> Self {
        self.task_dir = Some(dir.into());
        self
    }

    /// Stores with logging on send their changelog records here.
    pub fn with_changelog_writer(mut self, writer: Rc<dyn ChangelogWriter>) -> Self {
        self.changelog = Some(writer);
        self
    }

    /// The stream thread's cache, shared by all caching stores of the
    /// thread's tasks.
    pub fn with_thread_cache(mut self, cache: Rc<ThreadCache>) -> Self {
        self.cache = cache;
        self
    }

    /// Stores record their latencies in `registry` (Kafka Streams' metered
    /// layer), labelled with their type, name and this task's id, unless
    /// their builder turned metrics off. Without a registry nothing is
    /// measured.
    pub fn with_metrics(mut self, registry: MetricsRegistry) -> Self {
        self.metrics = Some(registry);
        self
    }

    /// RocksDB options for the task's persistent stores: the application's
    /// config setter and the instance's shared memory bounds.
    #[cfg(feature = "rocksdb")]
    pub fn with_rocksdb(mut self, settings: crate::rocks_settings::RocksDbSettings) -> Self {
        self.rocksdb = settings;
        self
    }

    /// The task's RocksDB stores expose Kafka Streams' RocksDB property
    /// metrics (KIP-607: memtables, block cache, SST files, compactions,
    /// estimated keys) in `registry`, labelled with their metrics scope,
    /// name and this task's id. They are INFO metrics in Kafka Streams, so
    /// apart from [`StoreContext::with_metrics`] (DEBUG latencies).
    #[cfg(feature = "rocksdb")]
    pub fn with_rocksdb_metrics(mut self, registry: MetricsRegistry) -> Self {
        self.rocksdb_metrics = Some(registry);
        self
    }

    /// The task's persistent stores are transactional (KIP-892, Kafka
    /// Streams' `enable.transactional.statestores` under exactly-once): once
    /// [`crate::StateStore::start_transactions`] is called, their writes
    /// are held until [`crate::StateStore::commit_offsets`] writes them to
    /// disk together with the changelog offsets they reach, so that their
    /// files only ever hold committed states and a crash costs the
    /// changelog's tail, not a whole restore.
    pub fn with_transactional_stores(mut self, transactional: bool) -> Self {
        self.transactional = transactional;
        self
    }

    /// Whether the task's persistent stores are transactional
    /// ([`StoreContext::with_transactional_stores`]).
    pub fn transactional_stores(&self) -> bool {
        self.transactional
    }

    /// The application id.
    pub fn application_id(&self) -> &str {
        &self.application_id
    }

    /// The task id, as Kafka prints it.
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// The changelog partition of the task's stores.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// The task directory, if the task has one.
    pub fn task_directory(&self) -> Option<&Path> {
        self.task_dir.as_deref()
    }

    /// The changelog writer, if any.
    pub fn changelog_writer(&self) -> Option<&Rc<dyn ChangelogWriter>> {
        self.changelog.as_ref()
    }

    /// The thread cache.
    pub fn thread_cache(&self) -> &Rc<ThreadCache> {
        &self.cache
    }

    /// The metrics registry, if the task has one.
    pub fn metrics(&self) -> Option<&MetricsRegistry> {
        self.metrics.as_ref()
    }

    /// The timestamp of the record (or punctuation) being processed; the
    /// timestamp of the changelog records its writes produce.
    pub fn record_timestamp(&self) -> Timestamp {
        self.record_timestamp.get()
    }

    /// Sets the timestamp of the record about to be processed.
    pub fn set_record_timestamp(&self, timestamp: Timestamp) {
        self.record_timestamp.set(timestamp);
    }

    pub(crate) fn timestamp_cell(&self) -> &Rc<Cell<Timestamp>> {
        &self.record_timestamp
    }

    /// Sets the headers of the record about to be processed: caching
    /// stores keep them with a write and forward them when it is flushed,
    /// as Kafka Streams' cache keeps the record context.
    pub fn set_record_headers(&self, headers: &kstreams_record::Headers) {
        let mut current = self.record_headers.borrow_mut();
        if !(current.is_empty() && headers.is_empty()) {
            current.clone_from(headers);
        }
    }

    /// The cell holding the headers of the record being processed, shared
    /// with the task so that each processor node sets it to the headers of
    /// the record it runs (Kafka Streams' record context on `forward`).
    pub fn headers_cell(&self) -> &Rc<std::cell::RefCell<kstreams_record::Headers>> {
        &self.record_headers
    }

    #[cfg(feature = "rocksdb")]
    pub(crate) fn rocksdb(&self) -> &crate::rocks_settings::RocksDbSettings {
        &self.rocksdb
    }

    #[cfg(feature = "rocksdb")]
    pub(crate) fn rocksdb_metrics(&self) -> Option<&MetricsRegistry> {
        self.rocksdb_metrics.as_ref()
    }
}
