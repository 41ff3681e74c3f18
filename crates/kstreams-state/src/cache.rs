//! The caching layer: typed entries, a byte budget per stream thread,
//! consecutive updates of a key coalesced until flush or eviction.
//!
//! As in Kafka Streams, the budget (`statestore.cache.max.bytes`) is shared
//! by every caching store of a stream thread, sizes are counted on the
//! serialized bytes, a put over budget evicts least recently used entries of
//! the store being written, and evicting a dirty entry first flushes all the
//! store's dirty entries, in the order they were last written. A flush
//! writes each dirty entry down (engine and changelog, with the timestamp
//! of the write that made it) and hands the flush listener the new value
//! and, when asked, the old value the engine had.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

use crate::Timestamp;

/// The cache budget of one stream thread, shared by its stores.
#[derive(Debug)]
pub struct ThreadCache {
    max_bytes: Cell<usize>,
    used: Cell<usize>,
    hits: Cell<u64>,
    misses: Cell<u64>,
    evictions: Cell<u64>,
    flushes: Cell<u64>,
}

impl ThreadCache {
    /// Kafka Streams' default `statestore.cache.max.bytes` (10 MiB).
    pub const DEFAULT_MAX_BYTES: usize = 10 * 1024 * 1024;

    /// A budget of `max_bytes` (0 turns caching into write-through).
    pub fn new(max_bytes: usize) -> Self {
        ThreadCache {
            max_bytes: Cell::new(max_bytes),
            used: Cell::new(0),
            hits: Cell::new(0),
            misses: Cell::new(0),
            evictions: Cell::new(0),
            flushes: Cell::new(0),
        }
    }
    /// Changes the budget (when threads are added or removed); takes effect
    /// at the next put.
    pub fn resize(&self, max_bytes: usize) {
        self.max_bytes.set(max_bytes);
    }
    /// The budget.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes.get()
    }
    /// Bytes in use by all stores of the thread.
    pub fn size_bytes(&self) -> usize {
        self.used.get()
    }
    /// Reads answered from a cache.
    pub fn hits(&self) -> u64 {
        self.hits.get()
    }
    /// Reads that went to an engine.
    pub fn misses(&self) -> u64 {
        self.misses.get()
    }
    /// Entries evicted.
    pub fn evictions(&self) -> u64 {
        self.evictions.get()
    }
    /// Flushes of a store's dirty entries (commits and evictions).
    pub fn flushes(&self) -> u64 {
        self.flushes.get()
    }
    fn over_budget(&self) -> bool {
        self.used.get() > self.max_bytes.get()
    }
    fn add(&self, n: usize) {
        self.used.set(self.used.get() + n);
    }
    fn sub(&self, n: usize) {
        self.used.set(self.used.get().saturating_sub(n));
    }
    pub(crate) fn hit(&self) {
        self.hits.set(self.hits.get() + 1);
    }
    pub(crate) fn miss(&self) {
        self.misses.set(self.misses.get() + 1);
    }
}

/// What a flush of the cache hands downstream for one key: Kafka Streams'
/// `Change` with the record context of the write that made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachedChange<K, V> {
    /// The key.
    pub key: K,
    /// The value now (`None` after a delete).
    pub new_value: Option<V>,
    /// The value before, from the engine; `None` unless old values were
    /// asked for (or the key was absent).
    pub old_value: Option<V>,
    /// The timestamp of the last write of the key.
    pub timestamp: Timestamp,
    /// The headers of the record whose processing made the last write.
    pub headers: kstreams_record::Headers,
}

/// Called for every entry a caching store writes down.
pub type FlushListener<K, V> = Box<dyn FnMut(CachedChange<K, V>)>;

/// Bytes an entry is charged beyond its key and value.
const ENTRY_OVERHEAD: usize = 64;

pub(crate) struct CacheEntry<T> {
    /// `None` is a delete (or, for a clean entry, a known-absent key).
    pub(crate) value: Option<T>,
    /// The serialized value, kept while dirty.
    pub(crate) bytes: Option<Vec<u8>>,
    pub(crate) timestamp: Timestamp,
    /// The writing record's headers, kept while dirty.
    headers: kstreams_record::Headers,
    dirty: Option<u64>,
    lru: u64,
    size: usize,
}

/// The dirty entries of one flush, in the order they were last written.
pub(crate) struct DirtyEntry<CK, T> {
    pub(crate) key: CK,
    pub(crate) value: Option<T>,
    pub(crate) bytes: Option<Vec<u8>>,
    pub(crate) timestamp: Timestamp,
    pub(crate) headers: kstreams_record::Headers,
}

/// One store's part of its thread's cache.
pub(crate) struct NamedCache<CK, T> {
    entries: BTreeMap<CK, CacheEntry<T>>,
    lru: BTreeMap<u64, CK>,
    dirty: BTreeMap<u64, CK>,
    next: u64,
    bytes: usize,
    budget: Rc<ThreadCache>,
}

impl<CK: Ord + Clone, T> NamedCache<CK, T> {
    pub(crate) fn new(budget: Rc<ThreadCache>) -> Self {
        NamedCache {
            entries: BTreeMap::new(),
            lru: BTreeMap::new(),
            dirty: BTreeMap::new(),
            next: 0,
            bytes: 0,
            budget,
        }
    }

    /// Moves to another budget (the thread's, at init).
    pub(crate) fn attach(&mut self, budget: Rc<ThreadCache>) {
        self.budget.sub(self.bytes);
        budget.add(self.bytes);
        self.budget = budget;
    }

    pub(crate) fn budget(&self) -> &Rc<ThreadCache> {
        &self.budget
    }

    fn tick(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// An entry, marked as recently used.
    pub(crate) fn get(&mut self, key: &CK) -> Option<&CacheEntry<T>> {
        let seq = self.next + 1;
        let entry = self.entries.get_mut(key)?;
        self.next = seq;
        self.lru.remove(&entry.lru);
        entry.lru = seq;
        self.lru.insert(seq, key.clone());
        Some(entry)
    }

    /// A dirty write.
    pub(crate) fn put_dirty(
        &mut self,
        key: CK,
        key_len: usize,
        value: Option<T>,
        bytes: Option<Vec<u8>>,
        timestamp: Timestamp,
        headers: kstreams_record::Headers,
    ) {
        let size = key_len + bytes.as_ref().map_or(0, Vec::len) + ENTRY_OVERHEAD;
        let seq = self.tick();
        self.remove(&key);
        self.lru.insert(seq, key.clone());
        self.dirty.insert(seq, key.clone());
        self.add(size);
        self.entries.insert(
            key,
            CacheEntry {
                value,
                bytes,
                timestamp,
                headers,
                dirty: Some(seq),
                lru: seq,
                size,
            },
        );
    }

    /// A clean entry read from the engine; kept only if it fits without
    /// evicting anything (a read never writes down).
    pub(crate) fn put_clean_if_room(
        &mut self,
        key: CK,
        key_len: usize,
        value: Option<T>,
        value_len: usize,
    ) {
        let size = key_len + value_len + ENTRY_OVERHEAD;
        if self.entries.contains_key(&key)
            || self.budget.size_bytes() + size > self.budget.max_bytes()
        {
            return;
        }
        let seq = self.tick();
        self.lru.insert(seq, key.clone());
        self.add(size);
        self.entries.insert(
            key,
            CacheEntry {
                value,
                bytes: None,
                timestamp: 0,
                headers: kstreams_record::Headers::new(),
                dirty: None,
                lru: seq,
                size,
            },
        );
    }

    fn add(&mut self, size: usize) {
        self.bytes += size;
        self.budget.add(size);
    }

    pub(crate) fn remove(&mut self, key: &CK) -> Option<CacheEntry<T>> {
        let old = self.entries.remove(key)?;
        self.lru.remove(&old.lru);
        if let Some(d) = old.dirty {
            self.dirty.remove(&d);
        }
        self.bytes -= old.size;
        self.budget.sub(old.size);
        Some(old)
    }

    /// Whether the thread's budget is exceeded while this cache still has
    /// something to evict.
    pub(crate) fn needs_eviction(&self) -> bool {
        self.budget.over_budget() && !self.entries.is_empty()
    }

    /// The least recently used key, and whether it is dirty.
    pub(crate) fn eldest(&self) -> Option<(CK, bool)> {
        let (_, key) = self.lru.first_key_value()?;
        let dirty = self.entries.get(key).is_some_and(|e| e.dirty.is_some());
        Some((key.clone(), dirty))
    }

    pub(crate) fn evict(&mut self, key: &CK) {
        if self.remove(key).is_some() {
            self.budget.evictions.set(self.budget.evictions.get() + 1);
        }
    }

    pub(crate) fn entries(&self) -> &BTreeMap<CK, CacheEntry<T>> {
        &self.entries
    }

    /// Drops everything without writing (restore, close).
    pub(crate) fn clear(&mut self) {
        self.budget.sub(self.bytes);
        self.bytes = 0;
        self.entries.clear();
        self.lru.clear();
        self.dirty.clear();
    }
}

impl<CK: Ord + Clone, T: Clone> NamedCache<CK, T> {
    /// Takes the dirty entries (they stay cached, clean).
    pub(crate) fn take_dirty(&mut self) -> Vec<DirtyEntry<CK, T>> {
        if self.dirty.is_empty() {
            return Vec::new();
        }
        self.budget.flushes.set(self.budget.flushes.get() + 1);
        let dirty = std::mem::take(&mut self.dirty);
        let mut out = Vec::with_capacity(dirty.len());
        for (_, key) in dirty {
            if let Some(e) = self.entries.get_mut(&key) {
                e.dirty = None;
                out.push(DirtyEntry {
                    key,
                    value: e.value.clone(),
                    bytes: e.bytes.take(),
                    timestamp: e.timestamp,
                    headers: std::mem::take(&mut e.headers),
                });
            }
        }
        out
    }
}

impl<CK, T> Drop for NamedCache<CK, T> {
    fn drop(&mut self) {
        self.budget.sub(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_is_shared_and_eldest_is_least_recently_used() {
        let budget = Rc::new(ThreadCache::new(150));
        let mut a: NamedCache<Vec<u8>, i32> = NamedCache::new(budget.clone());
        let mut b: NamedCache<Vec<u8>, i32> = NamedCache::new(budget.clone());
        a.put_dirty(
            b"x".to_vec(),
            1,
            Some(1),
            Some(vec![1]),
            0,
            Default::default(),
        );
        b.put_dirty(
            b"y".to_vec(),
            1,
            Some(2),
            Some(vec![2]),
            0,
            Default::default(),
        );
        assert_eq!(budget.size_bytes(), 2 * (2 + ENTRY_OVERHEAD));
        a.put_dirty(
            b"z".to_vec(),
            1,
            Some(3),
            Some(vec![3]),
            0,
            Default::default(),
        );
        assert!(a.needs_eviction());
        a.get(&b"x".to_vec());
        assert_eq!(a.eldest(), Some((b"z".to_vec(), true)));
        let dirty = a.take_dirty();
        assert_eq!(
            dirty.iter().map(|d| d.key.clone()).collect::<Vec<_>>(),
            vec![b"x".to_vec(), b"z".to_vec()]
        );
        assert_eq!(a.eldest(), Some((b"z".to_vec(), false)));
        drop(a);
        assert_eq!(budget.size_bytes(), 2 + ENTRY_OVERHEAD);
    }
}
