//! Byte stores shared between threads: a global table's store, which its
//! global thread writes while every stream thread reads it.
//!
//! Task stores live on one thread (`Rc`, `RefCell`); a global store cannot,
//! so it has an engine of its own: a `RwLock`ed map in memory, or a
//! RocksDB instance (thread-safe by itself) on disk, so that a large global
//! table neither lives on the heap nor is read whole again at each start.

use std::collections::BTreeMap;
#[cfg(feature = "rocksdb")]
use std::path::Path;
use std::sync::RwLock;

use crate::Error;

/// A key-value store of bytes that many threads may use at once.
pub trait SharedBytesStore: Send + Sync {
    /// The value of a key.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, Error>;
    /// Sets a key.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), Error>;
    /// Removes a key.
    fn delete(&self, key: &[u8]) -> Result<(), Error>;
    /// How many keys there are (a full count: a scan on disk).
    fn count(&self) -> Result<u64, Error>;
    /// Makes every write so far durable (before a checkpoint says so).
    fn flush(&self) -> Result<(), Error>;
    /// Whether the store outlives the process (and so can go on from a
    /// checkpoint instead of being loaded again).
    fn persistent(&self) -> bool;
}

/// A shared store in memory.
#[derive(Debug, Default)]
pub struct SharedMemoryStore {
    data: RwLock<BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl SharedMemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

impl SharedBytesStore for SharedMemoryStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        Ok(self
            .data
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned())
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), Error> {
        self.data
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.to_vec(), value.to_vec());
        Ok(())
    }
    fn delete(&self, key: &[u8]) -> Result<(), Error> {
        self.data
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
        Ok(())
    }
    fn count(&self) -> Result<u64, Error> {
        Ok(self.data.read().unwrap_or_else(|p| p.into_inner()).len() as u64)
    }
    fn flush(&self) -> Result<(), Error> {
        Ok(())
    }
    fn persistent(&self) -> bool {
        false
    }
}

/// A shared store on RocksDB, opened with the RocksDB settings it is
/// given (options hook, bounded memory).
#[cfg(feature = "rocksdb")]
pub struct SharedRocksDbStore {
    name: String,
    db: rocksdb::DB,
    write: rocksdb::WriteOptions,
}

#[cfg(feature = "rocksdb")]
impl std::fmt::Debug for SharedRocksDbStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedRocksDbStore")
            .field("name", &self.name)
            .field("path", &self.db.path())
            .finish()
    }
}

#[cfg(feature = "rocksdb")]
impl SharedRocksDbStore {
    /// Opens (or creates) store `name` in directory `path`.
    pub fn open(name: &str, path: &Path, settings: &crate::RocksDbSettings) -> Result<Self, Error> {
        std::fs::create_dir_all(path).map_err(|e| Error::io("create", path, e))?;
        let options = settings.options(name);
        let db = rocksdb::DB::open(&options, path).map_err(|e| Error::engine(name, e))?;
        // As the task stores: no write-ahead log; what a crash loses after
        // the last flush is read again from the topic, from the checkpoint.
        let mut write = rocksdb::WriteOptions::default();
        write.disable_wal(true);
        Ok(Self {
            name: name.to_string(),
            db,
            write,
        })
    }
}

#[cfg(feature = "rocksdb")]
impl SharedBytesStore for SharedRocksDbStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        self.db
            .get_pinned(key)
            .map(|v| v.map(|v| v.to_vec()))
            .map_err(|e| Error::engine(&self.name, e))
    }
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), Error> {
        self.db
            .put_opt(key, value, &self.write)
            .map_err(|e| Error::engine(&self.name, e))
    }
    fn delete(&self, key: &[u8]) -> Result<(), Error> {
        self.db
            .delete_opt(key, &self.write)
            .map_err(|e| Error::engine(&self.name, e))
    }
    fn count(&self) -> Result<u64, Error> {
        let mut n = 0;
        for item in self.db.iterator(rocksdb::IteratorMode::Start) {
            item.map_err(|e| Error::engine(&self.name, e))?;
            n += 1;
        }
        Ok(n)
    }
    fn flush(&self) -> Result<(), Error> {
        self.db.flush().map_err(|e| Error::engine(&self.name, e))
    }
    fn persistent(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exercise(store: &dyn SharedBytesStore) {
        store.put(b"a", b"1").unwrap();
        store.put(b"b", b"2").unwrap();
        store.put(b"a", b"3").unwrap();
        store.delete(b"b").unwrap();
        store.delete(b"missing").unwrap();
        assert_eq!(store.get(b"a").unwrap(), Some(b"3".to_vec()));
        assert_eq!(store.get(b"b").unwrap(), None);
        assert_eq!(store.count().unwrap(), 1);
        store.flush().unwrap();
    }

    #[test]
    fn memory_store_reads_its_writes_from_other_threads() {
        let store = std::sync::Arc::new(SharedMemoryStore::new());
        exercise(&*store);
        let reader = store.clone();
        let read = std::thread::spawn(move || reader.get(b"a").unwrap());
        assert_eq!(read.join().unwrap(), Some(b"3".to_vec()));
        assert!(!store.persistent());
    }

    #[cfg(feature = "rocksdb")]
    #[test]
    fn rocksdb_store_keeps_its_data_across_opens() {
        let dir = std::env::temp_dir().join(format!(
            "kstreams-shared-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let settings = crate::RocksDbSettings::new();
        {
            let store = SharedRocksDbStore::open("g", &dir, &settings).unwrap();
            exercise(&store);
            assert!(store.persistent());
        }
        let store = SharedRocksDbStore::open("g", &dir, &settings).unwrap();
        assert_eq!(store.get(b"a").unwrap(), Some(b"3".to_vec()));
        assert_eq!(store.count().unwrap(), 1);
        drop(store);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
