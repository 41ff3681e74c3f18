//! The store of a global table, shared by every stream thread.
//!
//! Each instance's global thread reads every partition of the table's topic
//! (from the beginning, to the end offsets seen at start, before the
//! instance runs; then as it goes), and all stream threads read the one
//! copy. So that many threads can read while one writes, the global store
//! is a thread-safe byte store, deserialized at lookup: RocksDB on disk by
//! default, going on from a checkpoint at restart, or an ordered map in
//! memory rebuilt from the topic at each start (the topic is its
//! changelog, as in Kafka Streams).

use std::sync::{Arc, RwLock};

use kstreams_record::Timestamp;
use kstreams_state::{SharedBytesStore, SharedMemoryStore};

/// The store of a global table: its topic's latest value per key, as bytes
/// (Kafka Streams' timestamped layout: the 8-byte timestamp, then the
/// value). In memory until the runtime opens it on disk
/// ([`GlobalStore::open_persistent`]) when its `Materialized` store type is
/// RocksDB (the default, as in Kafka Streams).
pub struct GlobalStore {
    name: String,
    topic: String,
    /// Its `Materialized` store type is RocksDB.
    persistent: bool,
    engine: RwLock<Arc<dyn SharedBytesStore>>,
}

impl std::fmt::Debug for GlobalStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GlobalStore")
            .field("name", &self.name)
            .field("topic", &self.topic)
            // As `StoreType` prints (which lives above this module).
            .field(
                "store_type",
                &format_args!(
                    "{}",
                    if self.persistent {
                        "RocksDb"
                    } else {
                        "InMemory"
                    }
                ),
            )
            .finish_non_exhaustive()
    }
}

impl GlobalStore {
    pub(crate) fn new(name: String, topic: String, persistent: bool) -> Self {
        GlobalStore {
            name,
            topic,
            persistent,
            engine: RwLock::new(Arc::new(SharedMemoryStore::new())),
        }
    }

    /// The store name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The topic the store is read from.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Whether the store is kept on disk (its `Materialized` store type is
    /// RocksDB), so that a restart goes on from a checkpoint.
    pub fn wants_persistence(&self) -> bool {
        self.persistent
    }

    /// Opens the store on disk in `dir` (with the application's RocksDB
    /// settings), replacing the in-memory engine; a store that asked for
    /// memory stays there.
    #[cfg(feature = "rocksdb")]
    pub fn open_persistent(
        &self,
        dir: &std::path::Path,
        settings: &kstreams_state::RocksDbSettings,
    ) -> Result<(), kstreams_state::Error> {
        if !self.wants_persistence() {
            return Ok(());
        }
        let engine = kstreams_state::SharedRocksDbStore::open(&self.name, dir, settings)?;
        *self.engine.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(engine);
        Ok(())
    }

    /// Closes the store (the global thread ended): its files are released,
    /// and reads fail with [`kstreams_state::Error::NotOpen`] as queries
    /// of a closed Kafka Streams store do.
    pub fn close(&self) {
        *self.engine.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(ClosedStore {
            name: self.name.clone(),
        });
    }

    /// Whether the open engine outlives the process.
    pub fn is_persistent(&self) -> bool {
        self.engine().persistent()
    }

    fn engine(&self) -> Arc<dyn SharedBytesStore> {
        self.engine
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Applies a record of the topic: a value sets the key, a null deletes
    /// it; records without a key are skipped.
    pub fn apply(
        &self,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        timestamp: Timestamp,
    ) -> Result<(), kstreams_state::Error> {
        let Some(key) = key else {
            return Ok(());
        };
        let engine = self.engine();
        match value {
            Some(v) => {
                let mut bytes = Vec::with_capacity(8 + v.len());
                bytes.extend_from_slice(&timestamp.to_be_bytes());
                bytes.extend_from_slice(v);
                engine.put(key, &bytes)
            }
            None => engine.delete(key),
        }
    }

    /// The value bytes and timestamp of a key.
    pub fn get(&self, key: &[u8]) -> Result<Option<(Vec<u8>, Timestamp)>, kstreams_state::Error> {
        let Some(mut bytes) = self.engine().get(key)? else {
            return Ok(None);
        };
        if bytes.len() < 8 {
            return Err(kstreams_state::Error::Engine {
                store: self.name.clone(),
                source: format!("a value of {} bytes has no timestamp", bytes.len()).into(),
            });
        }
        let timestamp = Timestamp::from_be_bytes(bytes[..8].try_into().expect("8 bytes"));
        bytes.drain(..8);
        Ok(Some((bytes, timestamp)))
    }

    /// Makes the writes so far durable, before a checkpoint records them.
    pub fn flush(&self) -> Result<(), kstreams_state::Error> {
        self.engine().flush()
    }

    /// How many keys the store holds (a scan of the store on disk).
    pub fn len(&self) -> usize {
        self.engine().count().unwrap_or_else(|e| {
            log::warn!(target: "kstreams_dsl::global", "global store {}: cannot count keys: {e}", self.name);
            0
        }) as usize
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The engine of a closed global store.
pub(crate) struct ClosedStore {
    pub(crate) name: String,
}

impl ClosedStore {
    fn closed<T>(&self) -> Result<T, kstreams_state::Error> {
        Err(kstreams_state::Error::NotOpen {
            store: self.name.clone(),
        })
    }
}

impl SharedBytesStore for ClosedStore {
    fn get(&self, _: &[u8]) -> Result<Option<Vec<u8>>, kstreams_state::Error> {
        self.closed()
    }
    fn put(&self, _: &[u8], _: &[u8]) -> Result<(), kstreams_state::Error> {
        self.closed()
    }
    fn delete(&self, _: &[u8]) -> Result<(), kstreams_state::Error> {
        self.closed()
    }
    fn count(&self) -> Result<u64, kstreams_state::Error> {
        self.closed()
    }
    fn flush(&self) -> Result<(), kstreams_state::Error> {
        Ok(())
    }
    fn persistent(&self) -> bool {
        false
    }
}
