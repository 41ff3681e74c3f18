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
use std::hash::{BuildHasher, Hash};
use std::ops::RangeBounds;
use std::rc::Rc;

use hashbrown::{DefaultHashBuilder, HashTable};

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

    /// A budget of `max_bytes`. 0 turns the stores' caching off when they
    /// open, as Kafka Streams' `statestore.cache.max.bytes=0` does; a budget
    /// smaller than any entry writes every update through.
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
    dirty: bool,
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

/// The end of a list, or a free slot's "no next".
const NIL: u32 = u32::MAX;

/// A slot's place in one of the two lists that thread through the slots.
#[derive(Clone, Copy)]
struct Link {
    prev: u32,
    next: u32,
}

const UNLINKED: Link = Link {
    prev: NIL,
    next: NIL,
};

/// The ends of a list.
#[derive(Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
}

const EMPTY: List = List {
    head: NIL,
    tail: NIL,
};

#[derive(Clone, Copy)]
enum Order {
    /// Least recently used first.
    Recency,
    /// Dirty entries, least recently written first.
    Dirty,
}

struct Slot<CK, T> {
    key: CK,
    entry: CacheEntry<T>,
    recency: Link,
    dirty: Link,
}

/// The key of an indexed slot (a free function: the index's closures
/// borrow the slots beside the index).
fn slot_key<CK, T>(slots: &[Option<Slot<CK, T>>], i: u32) -> &CK {
    &slots[i as usize]
        .as_ref()
        .expect("an indexed slot is occupied")
        .key
}

/// One store's part of its thread's cache.
///
/// Entries live in slots found by a hash of their key, so that a read or a
/// write of a key is one hash lookup (and a write right after the read of
/// the same key, as every aggregation does, none). Recency and the order of
/// dirty writes are lists threaded through the slots: moving an entry to
/// their end neither allocates nor compares keys. The hash index holds
/// slot numbers only: a key lives once, in its slot, so finding it reads
/// one copy of its bytes (with a second copy in the index, comparing keys
/// was a large share of a count's time, mostly waiting on memory:
/// BENCHMARKS.md, "Record cache: keys"). The key order that range queries
/// need is kept only once a range query was asked for (a store that is
/// only read and written by key never pays for it).
pub(crate) struct NamedCache<CK, T> {
    slots: Vec<Option<Slot<CK, T>>>,
    free: Vec<u32>,
    /// Slot numbers, hashed by their slots' keys. Keys come from records:
    /// the hasher is seeded at random, so that no input can be made to
    /// collide in every process.
    index: HashTable<u32>,
    hasher: DefaultHashBuilder,
    recency: List,
    dirty: List,
    /// The keys in order, with their slots, from the first range query on.
    ordered: Option<BTreeMap<CK, u32>>,
    /// The slot of the last key looked up.
    hint: Cell<u32>,
    bytes: usize,
    budget: Rc<ThreadCache>,
}

impl<CK: Ord + Hash + Clone, T> NamedCache<CK, T> {
    pub(crate) fn new(budget: Rc<ThreadCache>) -> Self {
        NamedCache {
            slots: Vec::new(),
            free: Vec::new(),
            index: HashTable::new(),
            hasher: DefaultHashBuilder::default(),
            recency: EMPTY,
            dirty: EMPTY,
            ordered: None,
            hint: Cell::new(NIL),
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

    fn slot(&self, i: u32) -> &Slot<CK, T> {
        self.slots[i as usize]
            .as_ref()
            .expect("a linked or indexed slot is occupied")
    }

    fn slot_mut(&mut self, i: u32) -> &mut Slot<CK, T> {
        self.slots[i as usize]
            .as_mut()
            .expect("a linked or indexed slot is occupied")
    }

    /// The slot of `key`: the hint if it still holds that key, else the
    /// index's.
    fn find(&self, key: &CK) -> Option<u32> {
        let hint = self.hint.get();
        if let Some(Some(slot)) = self.slots.get(hint as usize) {
            if slot.key == *key {
                return Some(hint);
            }
        }
        let slots = &self.slots;
        let i = *self
            .index
            .find(self.hasher.hash_one(key), |&i| slot_key(slots, i) == key)?;
        self.hint.set(i);
        Some(i)
    }

    fn list(&mut self, order: Order) -> &mut List {
        match order {
            Order::Recency => &mut self.recency,
            Order::Dirty => &mut self.dirty,
        }
    }

    fn link(&mut self, i: u32, order: Order) -> &mut Link {
        let slot = self.slot_mut(i);
        match order {
            Order::Recency => &mut slot.recency,
            Order::Dirty => &mut slot.dirty,
        }
    }

    fn unlink(&mut self, i: u32, order: Order) {
        let Link { prev, next } = std::mem::replace(self.link(i, order), UNLINKED);
        if prev == NIL {
            self.list(order).head = next;
        } else {
            self.link(prev, order).next = next;
        }
        if next == NIL {
            self.list(order).tail = prev;
        } else {
            self.link(next, order).prev = prev;
        }
    }

    fn push_back(&mut self, i: u32, order: Order) {
        let tail = self.list(order).tail;
        *self.link(i, order) = Link {
            prev: tail,
            next: NIL,
        };
        if tail == NIL {
            self.list(order).head = i;
        } else {
            self.link(tail, order).next = i;
        }
        self.list(order).tail = i;
    }

    fn move_to_back(&mut self, i: u32, order: Order) {
        if self.list(order).tail != i {
            self.unlink(i, order);
            self.push_back(i, order);
        }
    }

    /// A new slot for `key`, at the end of the recency list.
    fn insert(&mut self, key: CK, entry: CacheEntry<T>) -> u32 {
        let hash = self.hasher.hash_one(&key);
        let ordered_key = self.ordered.is_some().then(|| key.clone());
        let slot = Slot {
            key,
            entry,
            recency: UNLINKED,
            dirty: UNLINKED,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(slot);
                i
            }
            None => {
                let i = u32::try_from(self.slots.len()).expect("fewer than 2^32 cached entries");
                self.slots.push(Some(slot));
                i
            }
        };
        if let (Some(ordered), Some(key)) = (&mut self.ordered, ordered_key) {
            ordered.insert(key, i);
        }
        let slots = &self.slots;
        let hasher = &self.hasher;
        self.index
            .insert_unique(hash, i, |&j| hasher.hash_one(slot_key(slots, j)));
        self.push_back(i, Order::Recency);
        self.hint.set(i);
        i
    }

    /// An entry, marked as recently used.
    pub(crate) fn get(&mut self, key: &CK) -> Option<&CacheEntry<T>> {
        let i = self.find(key)?;
        self.move_to_back(i, Order::Recency);
        Some(&self.slot(i).entry)
    }

    /// An entry, its recency untouched.
    pub(crate) fn peek(&self, key: &CK) -> Option<&CacheEntry<T>> {
        let i = self.find(key)?;
        Some(&self.slot(i).entry)
    }

    /// A dirty write (the key is copied only when new); returns the bytes
    /// of the dirty value it replaced, for reuse.
    pub(crate) fn put_dirty(
        &mut self,
        key: &CK,
        key_len: usize,
        value: Option<T>,
        bytes: Option<Vec<u8>>,
        timestamp: Timestamp,
        headers: kstreams_record::Headers,
    ) -> Option<Vec<u8>> {
        let size = key_len + bytes.as_ref().map_or(0, Vec::len) + ENTRY_OVERHEAD;
        let entry = CacheEntry {
            value,
            bytes,
            timestamp,
            headers,
            dirty: true,
            size,
        };
        let (i, replaced) = match self.find(key) {
            Some(i) => {
                let slot = self.slot_mut(i);
                let old = std::mem::replace(&mut slot.entry, entry);
                self.bytes -= old.size;
                self.budget.sub(old.size);
                self.move_to_back(i, Order::Recency);
                if old.dirty {
                    self.unlink(i, Order::Dirty);
                }
                (i, old.bytes)
            }
            None => (self.insert(key.clone(), entry), None),
        };
        self.push_back(i, Order::Dirty);
        self.add(size);
        replaced
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
        if self.budget.size_bytes() + size > self.budget.max_bytes() || self.find(&key).is_some() {
            return;
        }
        self.insert(
            key,
            CacheEntry {
                value,
                bytes: None,
                timestamp: 0,
                headers: kstreams_record::Headers::new(),
                dirty: false,
                size,
            },
        );
        self.add(size);
    }

    fn add(&mut self, size: usize) {
        self.bytes += size;
        self.budget.add(size);
    }

    pub(crate) fn remove(&mut self, key: &CK) -> Option<CacheEntry<T>> {
        let slots = &self.slots;
        let (i, _) = self
            .index
            .find_entry(self.hasher.hash_one(key), |&i| slot_key(slots, i) == key)
            .ok()?
            .remove();
        if let Some(ordered) = &mut self.ordered {
            ordered.remove(key);
        }
        self.unlink(i, Order::Recency);
        if self.slot(i).entry.dirty {
            self.unlink(i, Order::Dirty);
        }
        let old = self.slots[i as usize]
            .take()
            .expect("an indexed slot is occupied")
            .entry;
        self.free.push(i);
        self.bytes -= old.size;
        self.budget.sub(old.size);
        Some(old)
    }

    /// Whether the thread's budget is exceeded while this cache still has
    /// something to evict.
    pub(crate) fn needs_eviction(&self) -> bool {
        self.budget.over_budget() && !self.index.is_empty()
    }

    /// The least recently used key, and whether it is dirty.
    pub(crate) fn eldest(&self) -> Option<(CK, bool)> {
        if self.recency.head == NIL {
            return None;
        }
        let slot = self.slot(self.recency.head);
        Some((slot.key.clone(), slot.entry.dirty))
    }

    pub(crate) fn evict(&mut self, key: &CK) {
        if self.remove(key).is_some() {
            self.budget.evictions.set(self.budget.evictions.get() + 1);
        }
    }

    /// The entries whose keys are in `range`, in key order.
    pub(crate) fn range<'a, R: RangeBounds<CK> + 'a>(
        &'a mut self,
        range: R,
    ) -> impl Iterator<Item = (&'a CK, &'a CacheEntry<T>)> + 'a {
        let this: &'a Self = &*self.ordered_keys();
        let ordered = this.ordered.as_ref().expect("just built");
        ordered
            .range(range)
            .map(move |(key, i)| (key, &this.slot(*i).entry))
    }

    /// Builds the key order on first use.
    fn ordered_keys(&mut self) -> &mut Self {
        if self.ordered.is_none() {
            let ordered = self
                .index
                .iter()
                .map(|&i| (self.slot(i).key.clone(), i))
                .collect();
            self.ordered = Some(ordered);
        }
        self
    }

    /// Drops everything without writing (restore, close).
    pub(crate) fn clear(&mut self) {
        self.budget.sub(self.bytes);
        self.bytes = 0;
        self.slots.clear();
        self.free.clear();
        self.index.clear();
        if let Some(ordered) = &mut self.ordered {
            ordered.clear();
        }
        self.recency = EMPTY;
        self.dirty = EMPTY;
        self.hint.set(NIL);
    }
}

impl<CK: Ord + Hash + Clone, T: Clone> NamedCache<CK, T> {
    /// Takes the dirty entries (they stay cached, clean).
    pub(crate) fn take_dirty(&mut self) -> Vec<DirtyEntry<CK, T>> {
        if self.dirty.head == NIL {
            return Vec::new();
        }
        self.budget.flushes.set(self.budget.flushes.get() + 1);
        let mut out = Vec::new();
        let mut i = std::mem::replace(&mut self.dirty, EMPTY).head;
        while i != NIL {
            let slot = self.slot_mut(i);
            let next = std::mem::replace(&mut slot.dirty, UNLINKED).next;
            let e = &mut slot.entry;
            e.dirty = false;
            out.push(DirtyEntry {
                key: slot.key.clone(),
                value: e.value.clone(),
                bytes: e.bytes.take(),
                timestamp: e.timestamp,
                headers: std::mem::take(&mut e.headers),
            });
            i = next;
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
            &b"x".to_vec(),
            1,
            Some(1),
            Some(vec![1]),
            0,
            Default::default(),
        );
        b.put_dirty(
            &b"y".to_vec(),
            1,
            Some(2),
            Some(vec![2]),
            0,
            Default::default(),
        );
        assert_eq!(budget.size_bytes(), 2 * (2 + ENTRY_OVERHEAD));
        a.put_dirty(
            &b"z".to_vec(),
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

    fn put(cache: &mut NamedCache<Vec<u8>, i32>, key: &[u8], value: i32) {
        cache.put_dirty(
            &key.to_vec(),
            key.len(),
            Some(value),
            Some(value.to_be_bytes().to_vec()),
            0,
            Default::default(),
        );
    }

    fn keys_in_range(cache: &mut NamedCache<Vec<u8>, i32>) -> Vec<(Vec<u8>, Option<i32>)> {
        cache.range(..).map(|(k, e)| (k.clone(), e.value)).collect()
    }

    #[test]
    fn a_rewrite_moves_a_key_to_the_end_of_the_flush_and_ranges_follow_every_change() {
        let mut cache: NamedCache<Vec<u8>, i32> =
            NamedCache::new(Rc::new(ThreadCache::new(1 << 20)));
        put(&mut cache, b"c", 1);
        put(&mut cache, b"a", 2);
        put(&mut cache, b"b", 3);
        put(&mut cache, b"c", 4);
        let replaced = cache.put_dirty(&b"a".to_vec(), 1, None, None, 0, Default::default());
        assert_eq!(replaced, Some(2i32.to_be_bytes().to_vec()));
        let flushed: Vec<_> = cache
            .take_dirty()
            .into_iter()
            .map(|d| (d.key, d.value))
            .collect();
        assert_eq!(
            flushed,
            vec![
                (b"b".to_vec(), Some(3)),
                (b"c".to_vec(), Some(4)),
                (b"a".to_vec(), None)
            ]
        );
        assert!(cache.take_dirty().is_empty());
        assert_eq!(
            keys_in_range(&mut cache),
            vec![
                (b"a".to_vec(), None),
                (b"b".to_vec(), Some(3)),
                (b"c".to_vec(), Some(4))
            ]
        );
        // The key order, once built, follows inserts and removals.
        cache.evict(&b"b".to_vec());
        put(&mut cache, b"ab", 5);
        assert!(cache.peek(&b"b".to_vec()).is_none());
        assert_eq!(
            cache
                .range(b"a".to_vec()..b"c".to_vec())
                .map(|(k, _)| k.clone())
                .collect::<Vec<_>>(),
            vec![b"a".to_vec(), b"ab".to_vec()]
        );
        // A freed slot is reused by the next new key.
        put(&mut cache, b"d", 6);
        assert_eq!(cache.peek(&b"d".to_vec()).and_then(|e| e.value), Some(6));
        assert_eq!(cache.eldest(), Some((b"c".to_vec(), false)));
        cache.clear();
        assert!(keys_in_range(&mut cache).is_empty());
        assert_eq!(cache.budget().size_bytes(), 0);
    }
}
