//! The storage engines: byte-level store traits, their suppliers, and the
//! store logic shared by the in-memory and RocksDB backends.

pub(crate) mod backend;
mod kv;
mod segmented;
mod session;
mod versioned;
mod window;

use std::ops::Bound;

pub use backend::BytesIter;
pub(crate) use backend::{Keyspaces, MemoryKeyspaces};
pub(crate) use kv::KvEngine;
pub(crate) use session::SessionEngine;
pub(crate) use versioned::VersionedEngine;
pub use versioned::{PUT_RETURN_CODE_NOT_PUT, PUT_RETURN_CODE_VALID_TO_UNDEFINED};
pub(crate) use window::WindowEngine;

use crate::{Error, StateStore, Timestamp};

/// A key-value store of bytes, ordered by key bytes: the engine under a
/// typed [`crate::KeyValueStore`] (Kafka Streams' `KeyValueStore<Bytes, byte[]>`).
pub trait KeyValueBytesStore: StateStore {
    /// The value of a key.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, Error>;
    /// [`KeyValueBytesStore::get`] appending the value to `out` (a reused
    /// buffer): no allocation per read on engines that can lend their
    /// bytes. Returns whether the key was found.
    fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool, Error> {
        match self.get(key)? {
            Some(value) => {
                out.extend_from_slice(&value);
                Ok(true)
            }
            None => Ok(false),
        }
    }
    /// Sets (`Some`) or deletes (`None`) a key.
    fn put(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<(), Error>;
    /// Writes many keys at once.
    fn put_all(&mut self, entries: &[(&[u8], Option<&[u8]>)]) -> Result<(), Error> {
        for (k, v) in entries {
            self.put(k, *v)?;
        }
        Ok(())
    }
    /// Entries between the bounds in key order (or reversed).
    fn range(
        &self,
        from: Bound<&[u8]>,
        to: Bound<&[u8]>,
        reverse: bool,
    ) -> Result<BytesIter<'_>, Error>;
    /// An estimate of the number of entries.
    fn approximate_num_entries(&self) -> Result<u64, Error>;
}

/// One entry of a window store engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowBytesEntry {
    /// Key bytes.
    pub key: Vec<u8>,
    /// Window start.
    pub start: Timestamp,
    /// Sequence number (0 unless the store retains duplicates).
    pub seqnum: u32,
    /// Value bytes.
    pub value: Vec<u8>,
}

/// A window store of bytes (Kafka Streams' `WindowStore<Bytes, byte[]>`).
///
/// Single-key fetches come in window-start order; fetches over many keys in
/// (window start, key bytes, seqnum) order, on every engine. Windows that
/// started at or before `observed stream time - retention` are gone.
pub trait WindowBytesStore: StateStore {
    /// The window size (a window's end is its start plus this).
    fn window_size(&self) -> Timestamp;
    /// How long windows are kept, measured from the store's stream time.
    fn retention_period(&self) -> Timestamp;
    /// Whether every put adds an entry (for stream-stream joins).
    fn retain_duplicates(&self) -> bool;
    /// Sets or deletes the window of `key` that starts at `window_start`.
    /// Returns the seqnum for the changelog key, or `None` when the put was
    /// dropped as expired. A delete in a store that retains duplicates
    /// removes nothing but still gets a seqnum.
    fn put(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
        window_start: Timestamp,
    ) -> Result<Option<u32>, Error>;
    /// The restore path: writes with the seqnum the changelog carries.
    fn put_with_seqnum(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
        window_start: Timestamp,
        seqnum: u32,
    ) -> Result<(), Error>;
    /// The value of one window.
    fn fetch(&self, key: &[u8], window_start: Timestamp) -> Result<Option<Vec<u8>>, Error>;
    /// Windows of one key that start in `[time_from, time_to]`.
    fn fetch_key(
        &self,
        key: &[u8],
        time_from: Timestamp,
        time_to: Timestamp,
        reverse: bool,
    ) -> Result<Vec<WindowBytesEntry>, Error>;
    /// Windows of keys in `[key_from, key_to]` (open ends as `None`) that
    /// start in `[time_from, time_to]`.
    fn fetch_keys(
        &self,
        key_from: Option<&[u8]>,
        key_to: Option<&[u8]>,
        time_from: Timestamp,
        time_to: Timestamp,
        reverse: bool,
    ) -> Result<Vec<WindowBytesEntry>, Error>;
}

/// One session of a session store engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionBytesEntry {
    /// Key bytes.
    pub key: Vec<u8>,
    /// Session start.
    pub start: Timestamp,
    /// Session end (inclusive).
    pub end: Timestamp,
    /// Value bytes.
    pub value: Vec<u8>,
}

/// A session store of bytes (Kafka Streams' `SessionStore<Bytes, byte[]>`).
///
/// Results come in (end, key bytes, start) order on every engine. Sessions
/// that ended before `observed stream time - retention` are gone; one that
/// ended exactly then is kept but no longer found by key.
pub trait SessionBytesStore: StateStore {
    /// How long sessions are kept, measured from the store's stream time.
    fn retention_period(&self) -> Timestamp;
    /// Sets or (with `None`) removes a session. Returns false when dropped
    /// as expired.
    fn put(
        &mut self,
        key: &[u8],
        start: Timestamp,
        end: Timestamp,
        value: Option<&[u8]>,
    ) -> Result<bool, Error>;
    /// The value of one session.
    fn fetch_session(
        &self,
        key: &[u8],
        start: Timestamp,
        end: Timestamp,
    ) -> Result<Option<Vec<u8>>, Error>;
    /// Sessions of every key that end in `[earliest_end, latest_end]`,
    /// for emitting closed sessions (KIP-825): Kafka Streams'
    /// `fetchSessions` by end time, which sees every session still kept,
    /// including one ending exactly at `observed stream time - retention`
    /// that [`SessionBytesStore::find_sessions`] no longer shows.
    fn sessions_ending_in(
        &self,
        earliest_end: Timestamp,
        latest_end: Timestamp,
    ) -> Result<Vec<SessionBytesEntry>, Error>;
    /// Sessions of keys in `[key_from, key_to]` that end at or after
    /// `earliest_end` and start at or before `latest_start`. Like Kafka
    /// Streams' session stores (`getActualFrom`), only sessions ending
    /// after `observed stream time - retention` are found.
    fn find_sessions(
        &self,
        key_from: Option<&[u8]>,
        key_to: Option<&[u8]>,
        earliest_end: Timestamp,
        latest_start: Timestamp,
        reverse: bool,
    ) -> Result<Vec<SessionBytesEntry>, Error>;
}

/// A record version of a versioned store, in bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionedBytes {
    /// Value bytes.
    pub value: Vec<u8>,
    /// The version's timestamp (valid from, inclusive).
    pub timestamp: Timestamp,
    /// When the next version starts (exclusive); `None` for the latest.
    pub valid_to: Option<Timestamp>,
}

/// A versioned key-value store of bytes (KIP-889's
/// `VersionedKeyValueStore<Bytes, byte[]>`), with Kafka Streams' semantics:
/// history retention doubles as the grace period, the latest version of a
/// key never expires, and reads older than the history retention see only
/// the latest version.
pub trait VersionedBytesStore: StateStore {
    /// How far back in stream time the history is kept.
    fn history_retention(&self) -> Timestamp;
    /// Adds a version (`None` is a tombstone). Returns the new version's
    /// valid-to timestamp, [`crate::PUT_RETURN_CODE_VALID_TO_UNDEFINED`] if
    /// it is the latest, or [`crate::PUT_RETURN_CODE_NOT_PUT`] when it is
    /// older than the history retention.
    fn put(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
        timestamp: Timestamp,
    ) -> Result<Timestamp, Error>;
    /// Puts a tombstone at `timestamp`; returns the version that was valid
    /// then.
    fn delete(&mut self, key: &[u8], timestamp: Timestamp)
        -> Result<Option<VersionedBytes>, Error>;
    /// The latest version, unless it is a tombstone.
    fn get(&self, key: &[u8]) -> Result<Option<VersionedBytes>, Error>;
    /// The version valid at `as_of`.
    fn get_as_of(&self, key: &[u8], as_of: Timestamp) -> Result<Option<VersionedBytes>, Error>;
}

/// Creates key-value engines: Kafka Streams' `KeyValueBytesStoreSupplier`.
pub trait KeyValueBytesStoreSupplier: Send + Sync + 'static {
    /// The store name.
    fn name(&self) -> &str;
    /// A new engine instance (one per task).
    fn get(&self) -> Box<dyn KeyValueBytesStore>;
    /// The metrics scope, Kafka Streams' `metricsScope()` (`in-memory`,
    /// `rocksdb`): the `store_type` label of the store's metrics.
    fn metrics_scope(&self) -> &str;
}

/// Creates window engines: Kafka Streams' `WindowBytesStoreSupplier`.
pub trait WindowBytesStoreSupplier: Send + Sync + 'static {
    /// The store name.
    fn name(&self) -> &str;
    /// A new engine instance.
    fn get(&self) -> Box<dyn WindowBytesStore>;
    /// The metrics scope.
    fn metrics_scope(&self) -> &str;
    /// The window size.
    fn window_size(&self) -> Timestamp;
    /// The retention period.
    fn retention_period(&self) -> Timestamp;
    /// Whether duplicates are retained.
    fn retain_duplicates(&self) -> bool;
}

/// Creates session engines: Kafka Streams' `SessionBytesStoreSupplier`.
pub trait SessionBytesStoreSupplier: Send + Sync + 'static {
    /// The store name.
    fn name(&self) -> &str;
    /// A new engine instance.
    fn get(&self) -> Box<dyn SessionBytesStore>;
    /// The metrics scope.
    fn metrics_scope(&self) -> &str;
    /// The retention period.
    fn retention_period(&self) -> Timestamp;
}

/// Creates versioned engines: Kafka Streams' `VersionedBytesStoreSupplier`.
pub trait VersionedBytesStoreSupplier: Send + Sync + 'static {
    /// The store name.
    fn name(&self) -> &str;
    /// A new engine instance.
    fn get(&self) -> Box<dyn VersionedBytesStore>;
    /// The metrics scope.
    fn metrics_scope(&self) -> &str;
    /// The history retention.
    fn history_retention(&self) -> Timestamp;
}

/// Kafka Streams' segment interval for window and session stores:
/// half the retention, at least a minute.
pub(crate) fn default_segment_interval(retention: Timestamp) -> Timestamp {
    (retention / 2).max(60_000)
}

/// Keyspace 0 holds an engine's metadata (observed stream time); time
/// segments live in keyspaces numbered away from it.
pub(crate) const META_KEYSPACE: i64 = 0;
const OBSERVED_KEY: &[u8] = b"observed-stream-time";

pub(crate) fn segment_keyspace(segment: i64) -> i64 {
    if segment >= 0 {
        segment + 1
    } else {
        segment
    }
}

pub(crate) fn keyspace_segment(ks: i64) -> i64 {
    if ks > 0 {
        ks - 1
    } else {
        ks
    }
}

/// Opens `backend` for store `name`; returns the stream time it saved at
/// its last flush, if any.
pub(crate) fn open_with_observed<B: Keyspaces>(
    backend: &mut B,
    name: &str,
    context: &crate::StoreContext,
) -> Result<Option<Timestamp>, Error> {
    backend.open(name, context)?;
    Ok(backend
        .get(META_KEYSPACE, OBSERVED_KEY)?
        .and_then(|b| b.try_into().ok().map(i64::from_be_bytes)))
}

/// Saves the stream time `observed` (on a persistent, open backend) and
/// flushes `backend`.
pub(crate) fn flush_with_observed<B: Keyspaces>(
    backend: &mut B,
    observed: Timestamp,
) -> Result<(), Error> {
    put_observed(backend, observed)?;
    backend.flush()
}

/// Writes the stream time a persistent backend observed beside its data.
fn put_observed<B: Keyspaces>(backend: &mut B, observed: Timestamp) -> Result<(), Error> {
    if backend.persistent() && backend.is_open() && observed != i64::MIN {
        backend.put(META_KEYSPACE, OBSERVED_KEY, &observed.to_be_bytes())?;
    }
    Ok(())
}

/// [`flush_with_observed`] without waiting for the backend's flush.
pub(crate) fn flush_in_background_with_observed<B: Keyspaces>(
    store: &str,
    backend: &mut B,
    observed: Timestamp,
) -> Result<crate::BackgroundFlush, Error> {
    put_observed(backend, observed)?;
    Ok(backend
        .flush_in_background()?
        .unwrap_or_else(|| crate::BackgroundFlush::done(store)))
}

pub(crate) fn corrupt(store: &str, index: usize, message: impl Into<String>) -> Error {
    Error::CorruptChangelogRecord {
        store: store.to_string(),
        index,
        message: message.into(),
    }
}
