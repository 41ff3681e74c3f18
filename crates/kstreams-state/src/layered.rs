//! The caching and change-logging layers over an engine, written once for
//! every store type: Kafka Streams' `CachingKeyValueStore`,
//! `ChangeLoggingKeyValueBytesStore` and their window, session and
//! versioned siblings, with the `StateStore` plumbing of
//! `WrappedStateStore`.
//!
//! A store type says only what differs through [`StoreKind`]: its engine,
//! what its cache is keyed by, how a cached write reaches the engine and
//! which changelog key it gets. Its reads and writes are methods on
//! `LayeredStore<ItsKind, V>` in its own module; the metered layer
//! ([`crate::metered::Metered`]) goes on top.

use std::borrow::Cow;
use std::cell::RefCell;
use std::rc::Rc;

use smallvec::SmallVec;

use kstreams_time::expiry::RetainedTime;

use crate::cache::{CachedChange, FlushListener, NamedCache};
use crate::changelog::{ChangeLogger, RecordClock};
use crate::metered::{Metered, Op};
use crate::options::BuilderParts;
use crate::typed::{StoreSerdes, ValueFormat};
use crate::{
    BuiltStore, ChangelogRecord, Error, StateStore, StoreContext, StoreOptions, ThreadCache,
    Timestamp,
};

/// What a store type adds to the shared layers.
pub(crate) trait StoreKind: 'static {
    /// The typed key of the store's records.
    type Key: 'static;
    /// The byte store under the layers.
    type Engine: ?Sized + StateStore;
    /// What the cache is keyed by: the key's bytes, with the window for
    /// windowed stores. Uninhabited for stores without a cache.
    type CacheKey: Ord + std::hash::Hash + Clone;
    /// The key a flush listener is given.
    type ChangeKey;

    /// The engine's value for a cached key.
    fn engine_value(engine: &Self::Engine, key: &Self::CacheKey) -> Result<Option<Vec<u8>>, Error>;

    /// Writes a value (`None` deletes) into the engine. Returns the key of
    /// its changelog record, or `None` when the engine dropped the write
    /// (an expired window), which is then not logged.
    fn engine_write<'k>(
        engine: &mut Self::Engine,
        key: &'k Self::CacheKey,
        value: Option<&[u8]>,
    ) -> Result<Option<Cow<'k, [u8]>>, Error>;

    /// The key bytes of a cached key.
    fn key_bytes(key: &Self::CacheKey) -> &[u8];

    /// The listener's key of a cached key whose record key is `key`.
    fn change_key(
        engine: &Self::Engine,
        key: Self::Key,
        cached: &Self::CacheKey,
    ) -> Self::ChangeKey;

    /// The stream time a restored changelog record moves the store to
    /// (windowed stores expire what their cache holds by it).
    fn restored_time(changelog_key: &[u8]) -> Option<Timestamp> {
        let _ = changelog_key;
        None
    }
}

/// A typed store over an engine, with an optional cache and changelog.
pub(crate) struct LayeredStore<S: StoreKind, V> {
    pub(crate) name: String,
    pub(crate) serdes: StoreSerdes<S::Key, V>,
    pub(crate) inner: Box<S::Engine>,
    logger: Option<ChangeLogger>,
    format: ValueFormat,
    pub(crate) clock: RecordClock,
    /// In a `RefCell` so that reads through `&self` can fill it.
    pub(crate) cache: Option<RefCell<NamedCache<S::CacheKey, V>>>,
    listener: Option<(FlushListener<S::ChangeKey, V>, bool)>,
    /// The largest stream time (window start, session end) put through
    /// the cache or restored: what the cache hides as expired.
    pub(crate) observed: Timestamp,
    /// Buffers reused by reads and uncached writes, so that neither
    /// allocates for the key or the value bytes.
    pub(crate) scratch: RefCell<Scratch>,
    /// [`LayeredStore::write_down_dirty`] when there is a cache: only a
    /// cache needs `V: Clone`, so the `StateStore` plumbing does not
    /// (versioned stores have no cache and no such bound).
    flush_dirty: fn(&mut Self) -> Result<(), Error>,
}

/// Reusable key and value buffers.
/// A cached key's bytes, inline up to 36 (UUID strings fit): every lookup
/// compares the cached key, and a key behind a pointer cost a cache miss
/// per record of an aggregation (BENCHMARKS.md, "Record cache: keys").
pub(crate) type CachedKeyBytes = SmallVec<[u8; 36]>;

#[derive(Default)]
pub(crate) struct Scratch {
    pub(crate) key: Vec<u8>,
    pub(crate) value: Vec<u8>,
    /// A key-value store's key as its cache keys it: reused, so that a key
    /// too long to be inline is not allocated per lookup.
    pub(crate) cache_key: CachedKeyBytes,
    /// Value buffers given back by the cache (replaced or flushed entries)
    /// for the next cached writes to serialize into.
    spare_values: Vec<Vec<u8>>,
}

/// Value buffers kept for reuse: enough for the entries rewritten between
/// two flushes of a busy store without holding on to a flush's worth.
const SPARE_VALUES: usize = 256;

impl Scratch {
    fn give_back(&mut self, bytes: Option<Vec<u8>>) {
        if let Some(mut bytes) = bytes {
            if self.spare_values.len() < SPARE_VALUES {
                bytes.clear();
                self.spare_values.push(bytes);
            }
        }
    }
}

impl<S: StoreKind, V: 'static> LayeredStore<S, V> {
    /// `inner` with the serdes of its builder's `parts` and a changelog if
    /// their options have logging on; no cache yet.
    pub(crate) fn new<Supplier: ?Sized>(
        inner: Box<S::Engine>,
        parts: &BuilderParts<Supplier, S::Key, V>,
        format: ValueFormat,
    ) -> Self {
        let name = inner.name().to_string();
        LayeredStore {
            serdes: StoreSerdes::new(&name, parts.key_serde.clone(), parts.value_serde.clone()),
            logger: parts
                .options
                .logging_enabled()
                .then(|| ChangeLogger::new(&name, parts.options.changelog_headers())),
            cache: None,
            name,
            inner,
            format,
            clock: RecordClock::default(),
            listener: None,
            observed: i64::MIN,
            scratch: RefCell::default(),
            flush_dirty: |_| Ok(()),
        }
    }

    /// Writes only to the changelog (versioned stores write their engine
    /// themselves).
    pub(crate) fn log(
        &self,
        key: &[u8],
        value: Option<&[u8]>,
        timestamp: Timestamp,
    ) -> Result<(), Error> {
        match &self.logger {
            Some(logger) => logger.log(key, value, timestamp),
            None => Ok(()),
        }
    }

    /// Writes to the engine and, unless the engine dropped the write, to
    /// the changelog.
    pub(crate) fn write_down(
        &mut self,
        key: &S::CacheKey,
        value: Option<&[u8]>,
        timestamp: Timestamp,
    ) -> Result<(), Error> {
        match S::engine_write(&mut self.inner, key, value)? {
            Some(changelog_key) => self.log_change(&changelog_key, value, timestamp),
            None => Ok(()),
        }
    }

    /// Sends a write the engine kept to the changelog, if the store has
    /// one.
    pub(crate) fn log_change(
        &self,
        changelog_key: &[u8],
        value: Option<&[u8]>,
        timestamp: Timestamp,
    ) -> Result<(), Error> {
        if let Some(logger) = &self.logger {
            let (v, ts) = self.format.changelog_value(value, timestamp);
            logger.log(changelog_key, v, ts)?;
        }
        Ok(())
    }

    /// Drops what the cache holds, dirty entries included, and gives its
    /// bytes back to the thread's budget.
    fn clear_cache(&self) {
        if let Some(cache) = &self.cache {
            cache.borrow_mut().clear();
        }
    }

    /// The first time the cache still shows for a store that keeps
    /// `retention` of `retained`: the engine's rule, so that the cache
    /// never hides or drops what the engine keeps.
    pub(crate) fn first_live(&self, retained: RetainedTime, retention: Timestamp) -> Timestamp {
        retained.first_live(self.observed, retention)
    }

    /// Whether `time` has expired for the cache of such a store.
    pub(crate) fn expired(
        &self,
        retained: RetainedTime,
        time: Timestamp,
        retention: Timestamp,
    ) -> bool {
        retained.expired(time, self.observed, retention)
    }
}

impl<S: StoreKind, V: Clone + 'static> LayeredStore<S, V> {
    /// Puts a cache in front of the engine if `caching`. Until `init`
    /// attaches the thread's cache, the cache has a budget of its own.
    pub(crate) fn with_cache(mut self, caching: bool) -> Self {
        if caching {
            self.cache = Some(RefCell::new(NamedCache::new(Rc::new(ThreadCache::new(
                ThreadCache::DEFAULT_MAX_BYTES,
            )))));
            self.flush_dirty = Self::write_down_dirty;
        }
        self
    }

    /// Writes the cache's dirty entries down and hands them to the flush
    /// listener.
    pub(crate) fn write_down_dirty(&mut self) -> Result<(), Error> {
        let Some(cache) = &self.cache else {
            return Ok(());
        };
        let dirty = cache.borrow_mut().take_dirty();
        for d in dirty {
            let send_old = self.listener.as_ref().map(|(_, s)| *s);
            let old_bytes = match send_old {
                Some(send_old) if send_old || d.bytes.is_none() => {
                    S::engine_value(&self.inner, &d.key)?
                }
                _ => None,
            };
            // Deleted a key the engine never had: nothing to write or say,
            // as Kafka Streams' caching stores skip it.
            if send_old.is_some() && d.bytes.is_none() && old_bytes.is_none() {
                continue;
            }
            let previous = self.clock.set(d.timestamp);
            let written = self.write_down(&d.key, d.bytes.as_deref(), d.timestamp);
            self.clock.set(previous);
            written?;
            self.scratch.get_mut().give_back(d.bytes);
            if let Some((listener, send_old)) = &mut self.listener {
                let key = self.serdes.key_from_bytes(S::key_bytes(&d.key))?;
                let old_value = match (*send_old, old_bytes) {
                    (true, Some(b)) => Some(self.serdes.value_from_bytes(&b)?),
                    _ => None,
                };
                listener(CachedChange {
                    key: S::change_key(&self.inner, key, &d.key),
                    new_value: d.value,
                    old_value,
                    timestamp: d.timestamp,
                    headers: d.headers,
                });
            }
        }
        Ok(())
    }

    /// Evicts the least recently used entries while the thread's cache is
    /// over its budget, writing them down first if dirty.
    fn maybe_evict(&mut self) -> Result<(), Error> {
        loop {
            let Some(cache) = &self.cache else {
                return Ok(());
            };
            let eldest = {
                let cache = cache.borrow();
                if !cache.needs_eviction() {
                    return Ok(());
                }
                cache.eldest()
            };
            let Some((key, dirty)) = eldest else {
                return Ok(());
            };
            if dirty {
                self.write_down_dirty()?;
            }
            if let Some(cache) = &self.cache {
                cache.borrow_mut().evict(&key);
            }
        }
    }

    /// Puts a write into the cache (the caller checked there is one), at
    /// the record's timestamp and with its headers. `size` is the key's
    /// share of the cache budget.
    pub(crate) fn write_cached(
        &mut self,
        key: &S::CacheKey,
        size: usize,
        value: Option<V>,
        bytes: Option<Vec<u8>>,
    ) -> Result<(), Error> {
        if let Some(cache) = &self.cache {
            // A value that serialized to null is a delete.
            let value = if bytes.is_some() { value } else { None };
            let (now, headers) = (self.clock.now(), self.clock.headers());
            let replaced = cache
                .borrow_mut()
                .put_dirty(key, size, value, bytes, now, headers);
            self.scratch.get_mut().give_back(replaced);
        }
        self.maybe_evict()
    }

    /// A value's bytes for the cache (`None` for a null), serialized into
    /// a buffer an earlier entry gave back when there is one.
    pub(crate) fn cached_value_bytes(&mut self, value: &V) -> Result<Option<Vec<u8>>, Error> {
        let scratch = self.scratch.get_mut();
        let mut bytes = scratch.spare_values.pop().unwrap_or_default();
        if self.serdes.value_into(value, &mut bytes)? {
            Ok(Some(bytes))
        } else {
            scratch.give_back(Some(bytes));
            Ok(None)
        }
    }

    /// A cached value (counting a hit or a miss), without touching the
    /// entry's recency: `None` when not cached, `Some(None)` for a cached
    /// delete.
    pub(crate) fn cached(&self, key: &S::CacheKey) -> Option<Option<V>> {
        let cache = self.cache.as_ref()?.borrow();
        match cache.peek(key) {
            Some(entry) => {
                cache.budget().hit();
                Some(entry.value.clone())
            }
            None => {
                cache.budget().miss();
                None
            }
        }
    }

    pub(crate) fn set_flush_listener(
        &mut self,
        listener: FlushListener<S::ChangeKey, V>,
        send_old_values: bool,
    ) -> bool {
        if self.cache.is_none() {
            return false;
        }
        self.listener = Some((listener, send_old_values));
        true
    }
}

impl<S: StoreKind, V: 'static> StateStore for LayeredStore<S, V> {
    fn name(&self) -> &str {
        &self.name
    }
    fn persistent(&self) -> bool {
        self.inner.persistent()
    }
    fn logging_enabled(&self) -> bool {
        self.logger.is_some()
    }
    fn init(&mut self, context: &StoreContext) -> Result<(), Error> {
        self.inner.init(context)?;
        if let Some(logger) = &mut self.logger {
            logger.init(context);
        }
        self.serdes.topic = crate::changelog_topic_name(context.application_id(), &self.name);
        self.clock.attach(context);
        let thread_cache = context.thread_cache();
        if thread_cache.max_bytes() == 0 {
            // Kafka Streams turns every store's caching off when
            // statestore.cache.max.bytes is 0 (InternalTopologyBuilder#
            // rewriteTopology): each update goes to the engine and the
            // processor forwards it itself, old values as it computed them.
            self.cache = None;
            self.flush_dirty = |_| Ok(());
        } else if let Some(cache) = &self.cache {
            cache.borrow_mut().attach(thread_cache.clone());
        }
        Ok(())
    }
    fn flush_cache(&mut self) -> Result<(), Error> {
        (self.flush_dirty)(self)
    }
    fn flush(&mut self) -> Result<(), Error> {
        (self.flush_dirty)(self)?;
        self.inner.flush()
    }
    fn flush_in_background(&mut self) -> Result<crate::BackgroundFlush, Error> {
        (self.flush_dirty)(self)?;
        self.inner.flush_in_background()
    }
    fn close(&mut self) -> Result<(), Error> {
        let flushed = (self.flush_dirty)(self);
        self.clear_cache();
        let closed = self.inner.close();
        flushed.and(closed)
    }
    fn close_dirty(&mut self) -> Result<(), Error> {
        // The dirty entries belong to work that is thrown away: writing
        // them down would log them into the thread's changelog collector,
        // and the next transaction would commit them.
        self.clear_cache();
        self.inner.close_dirty()
    }
    fn restore_batch(&mut self, records: &[ChangelogRecord<'_>]) -> Result<(), Error> {
        self.clear_cache();
        let inner = &mut self.inner;
        restore_with_format(self.format, records, |r| inner.restore_batch(r))?;
        for r in records {
            if let Some(time) = S::restored_time(r.key) {
                self.observed = self.observed.max(time);
            }
        }
        Ok(())
    }
    forward_offsets!(inner);
}

/// A value found by a query: still bytes from the engine, or typed from
/// the cache.
pub(crate) enum Found<V> {
    Bytes(Vec<u8>),
    Typed(V),
}

impl<V: 'static> Found<V> {
    pub(crate) fn value<K: 'static>(self, serdes: &StoreSerdes<K, V>) -> Result<V, Error> {
        match self {
            Found::Bytes(b) => serdes.value_from_bytes(&b),
            Found::Typed(v) => Ok(v),
        }
    }
}

/// Restores into `inner`, turning changelog values into store values.
fn restore_with_format(
    format: ValueFormat,
    records: &[ChangelogRecord<'_>],
    restore: impl FnOnce(&[ChangelogRecord<'_>]) -> Result<(), Error>,
) -> Result<(), Error> {
    if format == ValueFormat::Plain {
        return restore(records);
    }
    let values: Vec<Option<Vec<u8>>> = records
        .iter()
        .map(|r| format.store_value(r.value, r.timestamp))
        .collect();
    let converted: Vec<ChangelogRecord<'_>> = records
        .iter()
        .zip(&values)
        .map(|(r, v)| ChangelogRecord {
            value: v.as_deref(),
            ..*r
        })
        .collect();
    restore(&converted)
}

impl BuiltStore {
    /// A built store of `inner` under the metered layer, with the typed
    /// handle `handle` makes of it.
    pub(crate) fn metered<L: StateStore, H: Clone + 'static>(
        inner: L,
        options: &StoreOptions,
        store_type: &str,
        ops: &'static [Op],
        handle: impl FnOnce(Rc<RefCell<Metered<L>>>) -> H,
    ) -> BuiltStore {
        let store = Rc::new(RefCell::new(Metered::new(inner, options, store_type, ops)));
        let handle = handle(store.clone());
        BuiltStore::new(store, handle)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use kstreams_record::{I64Serde, StringSerde};

    use crate::{
        CachedChange, KeyValueBytesStoreSupplier, KeyValueStoreHandle, OwnedChangelogRecord,
        StoreBuilder, StoreContext, Stores, ThreadCache,
    };

    fn s(x: &str) -> String {
        x.to_string()
    }

    /// Kafka Streams' dirty close (an aborted transaction, lost tasks)
    /// throws away what the cache holds: nothing of it reaches the engine,
    /// the changelog or the flush listener. A clean close writes it all
    /// down.
    fn close_with_a_dirty_cache(supplier: fn() -> std::sync::Arc<dyn KeyValueBytesStoreSupplier>) {
        for dirty in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let log: Rc<RefCell<Vec<OwnedChangelogRecord>>> = Rc::default();
            let ctx = StoreContext::new("app", "0_0", 0)
                .with_task_directory(dir.path())
                .with_changelog_writer(log.clone())
                .with_thread_cache(Rc::new(ThreadCache::new(1 << 20)));
            let open = || {
                let built = Stores::key_value_store_builder(supplier(), StringSerde, I64Serde)
                    .with_caching_enabled()
                    .build();
                built.init(&ctx).unwrap();
                let store: KeyValueStoreHandle<String, i64> = built.handle().unwrap();
                (built, store)
            };
            let (built, store) = open();
            let changes: Rc<RefCell<Vec<CachedChange<String, i64>>>> = Rc::default();
            let sink = changes.clone();
            assert!(store
                .borrow_mut()
                .set_flush_listener(Box::new(move |c| sink.borrow_mut().push(c)), true));
            // Committed: a = 1 in the engine and the changelog.
            ctx.set_record_timestamp(1);
            store.borrow_mut().put(s("a"), 1).unwrap();
            built.lifecycle.borrow_mut().flush().unwrap();
            // Since the commit, in the cache only.
            ctx.set_record_timestamp(2);
            store.borrow_mut().put(s("a"), 2).unwrap();
            store.borrow_mut().put(s("b"), 3).unwrap();
            assert_eq!((log.borrow().len(), changes.borrow().len()), (1, 1));

            let persistent = built.lifecycle.borrow().persistent();
            let closed = if dirty {
                built.lifecycle.borrow_mut().close_dirty()
            } else {
                built.lifecycle.borrow_mut().close()
            };
            closed.unwrap();
            // The cache's bytes are back in the thread's budget.
            assert_eq!(ctx.thread_cache().size_bytes(), 0);
            let (logged, changed) = (log.borrow().len(), changes.borrow().len());
            // What the engine holds: read through the cleared cache of an
            // in-memory store, or a RocksDB store opened again.
            let read = |store: &KeyValueStoreHandle<String, i64>| {
                let store = store.borrow();
                (store.get(&s("a")).unwrap(), store.get(&s("b")).unwrap())
            };
            let engine = if persistent {
                read(&open().1)
            } else {
                read(&store)
            };
            if dirty {
                assert_eq!((logged, changed), (1, 1), "dirty");
                assert_eq!(engine, (Some(1), None), "dirty");
            } else {
                assert_eq!((logged, changed), (3, 3), "clean");
                assert_eq!(engine, (Some(2), Some(3)), "clean");
            }
        }
    }

    #[test]
    fn a_dirty_close_drops_the_cache_of_an_in_memory_store() {
        close_with_a_dirty_cache(|| Stores::in_memory_key_value_store("c"));
    }

    #[cfg(feature = "rocksdb")]
    #[test]
    fn a_dirty_close_drops_the_cache_of_a_rocksdb_store() {
        close_with_a_dirty_cache(|| Stores::persistent_key_value_store("c"));
    }
}
