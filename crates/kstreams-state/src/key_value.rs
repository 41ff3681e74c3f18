//! Key-value stores: the typed traits, the typed store over an engine with
//! its cache and changelog, and the builder.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::iter::Peekable;
use std::ops::Bound;
use std::rc::Rc;
use std::sync::Arc;

use kstreams_record::{Serde, SharedSerde};

use crate::cache::{CachedChange, FlushListener, NamedCache};
use crate::changelog::{ChangeLogger, RecordClock};
use crate::engine::{BytesIter, KeyValueBytesStore, KeyValueBytesStoreSupplier};
use crate::metered::{Metering, KEY_VALUE_OPS};
use crate::typed::{StoreSerdes, ValueFormat};
use crate::{
    BuiltStore, ChangelogRecord, Error, StateStore, StoreBuilder, StoreContext, StoreIter,
    ValueAndTimestamp,
};

/// Key-value pairs, in key-byte order (or reversed).
pub type KeyValueIter<'a, K, V> = StoreIter<'a, (K, V)>;

/// Reads of a key-value store, for processors and interactive queries:
/// Kafka Streams' `ReadOnlyKeyValueStore`.
///
/// Order is the order of the serialized keys, as in Kafka Streams (for
/// big-endian integers, negative numbers come after positive ones).
pub trait ReadOnlyKeyValueStore<K, V> {
    /// The value of a key.
    fn get(&self, key: &K) -> Result<Option<V>, Error>;
    /// Entries with `from <= key <= to` (`None` is open), in key order;
    /// empty when `from > to`.
    fn range(&self, from: Option<&K>, to: Option<&K>) -> Result<KeyValueIter<'_, K, V>, Error>;
    /// [`ReadOnlyKeyValueStore::range`] in reverse order.
    fn reverse_range(
        &self,
        from: Option<&K>,
        to: Option<&K>,
    ) -> Result<KeyValueIter<'_, K, V>, Error>;
    /// Every entry, in key order.
    fn all(&self) -> Result<KeyValueIter<'_, K, V>, Error> {
        self.range(None, None)
    }
    /// Every entry, in reverse key order.
    fn reverse_all(&self) -> Result<KeyValueIter<'_, K, V>, Error> {
        self.reverse_range(None, None)
    }
    /// Entries whose serialized key starts with `prefix` (serialize the
    /// prefix with the key's serde, e.g. `"user-".as_bytes()` for strings).
    fn prefix_scan(&self, prefix: &[u8]) -> Result<KeyValueIter<'_, K, V>, Error>;
    /// An estimate of the number of entries.
    fn approximate_num_entries(&self) -> Result<u64, Error>;
}

/// A key-value store: Kafka Streams' `KeyValueStore`.
pub trait KeyValueStore<K, V>: ReadOnlyKeyValueStore<K, V> + StateStore {
    /// Sets the value of a key.
    fn put(&mut self, key: K, value: V) -> Result<(), Error>;
    /// Sets the value only if the key has none; returns the existing value.
    fn put_if_absent(&mut self, key: K, value: V) -> Result<Option<V>, Error>;
    /// Sets many keys.
    fn put_all(&mut self, entries: Vec<(K, V)>) -> Result<(), Error> {
        for (k, v) in entries {
            self.put(k, v)?;
        }
        Ok(())
    }
    /// Removes a key; returns its old value.
    fn delete(&mut self, key: &K) -> Result<Option<V>, Error>;
    /// With caching on, `listener` gets every entry the cache writes down
    /// (old values only if `send_old_values`), and the call returns true.
    /// Without caching it returns false: the caller forwards itself.
    fn set_flush_listener(&mut self, listener: FlushListener<K, V>, send_old_values: bool) -> bool {
        let _ = (listener, send_old_values);
        false
    }
}

/// A typed handle on a task's key-value store.
pub type KeyValueStoreHandle<K, V> = Rc<RefCell<dyn KeyValueStore<K, V>>>;

/// A timestamped key-value store: Kafka Streams' `TimestampedKeyValueStore`.
pub type TimestampedKeyValueStore<K, V> = dyn KeyValueStore<K, ValueAndTimestamp<V>>;

/// A typed handle on a task's timestamped key-value store.
pub type TimestampedKeyValueStoreHandle<K, V> = KeyValueStoreHandle<K, ValueAndTimestamp<V>>;

/// A typed key-value store over a byte engine, with an optional cache and
/// changelog (Kafka Streams' metered, caching and changelogging layers).
///
/// The trait methods are the metered layer: each times the unmetered
/// method of the same name (`*_raw`), so that a call made of others
/// (`put_if_absent` is a get and a put) is measured once, under its name.
pub(crate) struct TypedKeyValueStore<K, V> {
    name: String,
    serdes: StoreSerdes<K, V>,
    inner: Box<dyn KeyValueBytesStore>,
    logger: Option<ChangeLogger>,
    format: ValueFormat,
    clock: RecordClock,
    cache: Option<RefCell<NamedCache<Vec<u8>, V>>>,
    listener: Option<(FlushListener<K, V>, bool)>,
    metering: Metering,
    /// Buffers reused by every get and uncached put, so that neither
    /// allocates for the key or the value bytes.
    scratch: RefCell<Scratch>,
}

#[derive(Default)]
struct Scratch {
    key: Vec<u8>,
    value: Vec<u8>,
}

/// How a typed key-value store is layered, from its builder.
pub(crate) struct KeyValueLayers<'a> {
    pub(crate) logging: bool,
    pub(crate) caching: bool,
    pub(crate) metrics: bool,
    /// The supplier's metrics scope.
    pub(crate) store_type: &'a str,
}

impl<K: 'static, V: Clone + 'static> TypedKeyValueStore<K, V> {
    pub(crate) fn new(
        inner: Box<dyn KeyValueBytesStore>,
        serdes: StoreSerdes<K, V>,
        layers: KeyValueLayers<'_>,
        format: ValueFormat,
    ) -> Self {
        let KeyValueLayers {
            logging,
            caching,
            metrics,
            store_type,
        } = layers;
        let name = inner.name().to_string();
        let clock = RecordClock::default();
        TypedKeyValueStore {
            logger: logging.then(|| ChangeLogger::new(&name)),
            cache: caching.then(|| {
                RefCell::new(NamedCache::new(Rc::new(crate::ThreadCache::new(
                    crate::ThreadCache::DEFAULT_MAX_BYTES,
                ))))
            }),
            name,
            serdes,
            inner,
            format,
            clock,
            listener: None,
            metering: Metering::new(metrics, store_type),
            scratch: RefCell::default(),
        }
    }

    fn write_down(&mut self, key: &[u8], value: Option<&[u8]>, ts: i64) -> Result<(), Error> {
        self.inner.put(key, value)?;
        if let Some(logger) = &self.logger {
            let (v, ts) = self.format.changelog_value(value, ts);
            logger.log(key, v, ts)?;
        }
        Ok(())
    }

    fn write_down_dirty(&mut self) -> Result<(), Error> {
        let Some(cache) = &self.cache else {
            return Ok(());
        };
        let (dirty, write_through) = {
            let mut cache = cache.borrow_mut();
            (cache.take_dirty(), cache.budget().max_bytes() == 0)
        };
        for d in dirty {
            let send_old = self.listener.as_ref().map(|(_, s)| *s);
            let old_bytes = match send_old {
                Some(send_old) if send_old || d.bytes.is_none() => self.inner.get(&d.key)?,
                _ => None,
            };
            // Deleted a key the engine never had: nothing to say, unless
            // the cache writes through (a zero budget), where Kafka Streams
            // forwards every update, this one included.
            if send_old.is_some() && d.bytes.is_none() && old_bytes.is_none() && !write_through {
                continue;
            }
            let previous = self.clock.set(d.timestamp);
            let written = self.write_down(&d.key, d.bytes.as_deref(), d.timestamp);
            self.clock.set(previous);
            written?;
            if let Some((listener, send_old)) = &mut self.listener {
                let key = self.serdes.key_from_bytes(&d.key)?;
                let old_value = match (*send_old, old_bytes) {
                    (true, Some(b)) => Some(self.serdes.value_from_bytes(&b)?),
                    _ => None,
                };
                listener(CachedChange {
                    key,
                    new_value: d.value,
                    old_value,
                    timestamp: d.timestamp,
                    headers: d.headers,
                });
            }
        }
        Ok(())
    }

    fn maybe_evict(&mut self) -> Result<(), Error> {
        loop {
            let eldest = match &self.cache {
                Some(cache) => {
                    let cache = cache.borrow();
                    if !cache.needs_eviction() {
                        return Ok(());
                    }
                    cache.eldest()
                }
                None => return Ok(()),
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

    fn write(
        &mut self,
        key: Vec<u8>,
        value: Option<V>,
        bytes: Option<Vec<u8>>,
    ) -> Result<(), Error> {
        let now = self.clock.now();
        match &self.cache {
            Some(cache) => {
                let value = if bytes.is_some() { value } else { None };
                let len = key.len();
                cache
                    .borrow_mut()
                    .put_dirty(key, len, value, bytes, now, self.clock.headers());
                self.maybe_evict()
            }
            None => self.write_down(&key, bytes.as_deref(), now),
        }
    }

    fn range_bytes(
        &self,
        from: Bound<Vec<u8>>,
        to: Bound<Vec<u8>>,
        reverse: bool,
    ) -> Result<KeyValueIter<'_, K, V>, Error> {
        if let (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) =
            (&from, &to)
        {
            if a > b {
                log::warn!(
                    "store {}: range from a key after the range's end key returns nothing",
                    self.name
                );
                return Ok(Box::new(std::iter::empty()));
            }
        }
        let store = self
            .inner
            .range(bound_ref(&from), bound_ref(&to), reverse)?;
        let serdes = &self.serdes;
        let Some(cache) = &self.cache else {
            return Ok(Box::new(store.map(move |r| {
                let (k, v) = r?;
                Ok((serdes.key_from_bytes(&k)?, serdes.value_from_bytes(&v)?))
            })));
        };
        if matches!((&from, &to), (Bound::Excluded(a), Bound::Excluded(b)) if a == b) {
            return Ok(Box::new(std::iter::empty()));
        }
        let cache = cache.borrow();
        let mut snapshot: Vec<(Vec<u8>, Option<V>)> = cache
            .entries()
            .range((from, to))
            .map(|(k, e)| (k.clone(), e.value.clone()))
            .collect();
        if reverse {
            snapshot.reverse();
        }
        Ok(Box::new(MergedIter {
            cache: snapshot.into_iter().peekable(),
            store: store.peekable(),
            serdes,
            reverse,
        }))
    }
}

fn bound_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Cache entries over engine entries, by key bytes; the cache wins ties and
/// its deletes hide the engine's values.
struct MergedIter<'a, K, V> {
    cache: Peekable<std::vec::IntoIter<(Vec<u8>, Option<V>)>>,
    store: Peekable<BytesIter<'a>>,
    serdes: &'a StoreSerdes<K, V>,
    reverse: bool,
}

impl<K: 'static, V: 'static> Iterator for MergedIter<'_, K, V> {
    type Item = Result<(K, V), Error>;
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(Err(_)) = self.store.peek() {
                if let Some(Err(e)) = self.store.next() {
                    return Some(Err(e));
                }
            }
            let from_cache = match (self.cache.peek(), self.store.peek()) {
                (None, None) => return None,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some((c, _)), Some(Ok((s, _)))) => {
                    let ord = if self.reverse { s.cmp(c) } else { c.cmp(s) };
                    match ord {
                        std::cmp::Ordering::Less => true,
                        std::cmp::Ordering::Greater => false,
                        std::cmp::Ordering::Equal => {
                            self.store.next();
                            true
                        }
                    }
                }
                (Some(_), Some(Err(_))) => unreachable!("errors are returned above"),
            };
            if from_cache {
                let (k, v) = self.cache.next()?;
                match v {
                    Some(v) => return Some(self.serdes.key_from_bytes(&k).map(|k| (k, v))),
                    None => continue,
                }
            }
            let (k, v) = match self.store.next()? {
                Ok(kv) => kv,
                Err(e) => return Some(Err(e)),
            };
            return Some((|| {
                Ok((
                    self.serdes.key_from_bytes(&k)?,
                    self.serdes.value_from_bytes(&v)?,
                ))
            })());
        }
    }
}

/// The store without its metered layer.
impl<K: 'static, V: Clone + 'static> TypedKeyValueStore<K, V> {
    fn get_raw(&self, key: &K) -> Result<Option<V>, Error> {
        // Only a re-entrant call (none today) would find the buffers taken;
        // it gets fresh ones.
        let mut own = Scratch::default();
        let mut borrowed = self.scratch.try_borrow_mut();
        let scratch = match &mut borrowed {
            Ok(scratch) => &mut **scratch,
            Err(_) => &mut own,
        };
        let Scratch { key: kb, value: vb } = scratch;
        kb.clear();
        vb.clear();
        self.serdes.key_into(key, kb)?;
        if let Some(cache) = &self.cache {
            let mut cache = cache.borrow_mut();
            if let Some(entry) = cache.get(kb) {
                let value = entry.value.clone();
                cache.budget().hit();
                return Ok(value);
            }
            cache.budget().miss();
            let value = if self.inner.get_into(kb, vb)? {
                Some(self.serdes.value_from_bytes(vb)?)
            } else {
                None
            };
            let len = if value.is_some() { vb.len() } else { 0 };
            cache.put_clean_if_room(kb.clone(), kb.len(), value.clone(), len);
            return Ok(value);
        }
        if self.inner.get_into(kb, vb)? {
            Ok(Some(self.serdes.value_from_bytes(vb)?))
        } else {
            Ok(None)
        }
    }
    fn range_raw(
        &self,
        from: Option<&K>,
        to: Option<&K>,
        reverse: bool,
    ) -> Result<KeyValueIter<'_, K, V>, Error> {
        let from = from.map(|k| self.serdes.key_to_bytes(k)).transpose()?;
        let to = to.map(|k| self.serdes.key_to_bytes(k)).transpose()?;
        self.range_bytes(
            from.map_or(Bound::Unbounded, Bound::Included),
            to.map_or(Bound::Unbounded, Bound::Included),
            reverse,
        )
    }
    fn put_raw(&mut self, key: K, value: V) -> Result<(), Error> {
        if self.cache.is_none() {
            // Straight to the engine (and changelog): through the reused
            // buffers.
            let mut scratch = std::mem::take(self.scratch.get_mut());
            let result = self.put_uncached(&key, &value, &mut scratch);
            *self.scratch.get_mut() = scratch;
            return result;
        }
        let kb = self.serdes.key_to_bytes(&key)?;
        let vb = self.serdes.value_to_bytes(&value)?;
        self.write(kb, Some(value), vb)
    }
    fn put_uncached(&mut self, key: &K, value: &V, scratch: &mut Scratch) -> Result<(), Error> {
        scratch.key.clear();
        scratch.value.clear();
        self.serdes.key_into(key, &mut scratch.key)?;
        let non_null = self.serdes.value_into(value, &mut scratch.value)?;
        let now = self.clock.now();
        self.write_down(&scratch.key, non_null.then_some(&scratch.value[..]), now)
    }
    fn put_if_absent_raw(&mut self, key: K, value: V) -> Result<Option<V>, Error> {
        if let Some(existing) = self.get_raw(&key)? {
            return Ok(Some(existing));
        }
        self.put_raw(key, value)?;
        Ok(None)
    }
    fn delete_raw(&mut self, key: &K) -> Result<Option<V>, Error> {
        let old = self.get_raw(key)?;
        let kb = self.serdes.key_to_bytes(key)?;
        self.write(kb, None, None)?;
        Ok(old)
    }
    fn flush_raw(&mut self) -> Result<(), Error> {
        self.write_down_dirty()?;
        self.inner.flush()
    }
}

impl<K: 'static, V: Clone + 'static> ReadOnlyKeyValueStore<K, V> for TypedKeyValueStore<K, V> {
    fn get(&self, key: &K) -> Result<Option<V>, Error> {
        let sensor = &self.metering.sensors.get;
        let start = sensor.start();
        let result = self.get_raw(key);
        sensor.record(start);
        result
    }
    fn range(&self, from: Option<&K>, to: Option<&K>) -> Result<KeyValueIter<'_, K, V>, Error> {
        let sensor = &self.metering.sensors.range;
        let start = sensor.start();
        sensor.record_iter(start, self.range_raw(from, to, false))
    }
    fn reverse_range(
        &self,
        from: Option<&K>,
        to: Option<&K>,
    ) -> Result<KeyValueIter<'_, K, V>, Error> {
        let sensor = &self.metering.sensors.range;
        let start = sensor.start();
        sensor.record_iter(start, self.range_raw(from, to, true))
    }
    fn all(&self) -> Result<KeyValueIter<'_, K, V>, Error> {
        let sensor = &self.metering.sensors.all;
        let start = sensor.start();
        sensor.record_iter(start, self.range_raw(None, None, false))
    }
    fn reverse_all(&self) -> Result<KeyValueIter<'_, K, V>, Error> {
        let sensor = &self.metering.sensors.all;
        let start = sensor.start();
        sensor.record_iter(start, self.range_raw(None, None, true))
    }
    fn prefix_scan(&self, prefix: &[u8]) -> Result<KeyValueIter<'_, K, V>, Error> {
        let sensor = &self.metering.sensors.prefix_scan;
        let start = sensor.start();
        let to = crate::engine::backend::prefix_successor(prefix)
            .map_or(Bound::Unbounded, Bound::Excluded);
        sensor.record_iter(
            start,
            self.range_bytes(Bound::Included(prefix.to_vec()), to, false),
        )
    }
    fn approximate_num_entries(&self) -> Result<u64, Error> {
        self.inner.approximate_num_entries()
    }
}

impl<K: 'static, V: Clone + 'static> KeyValueStore<K, V> for TypedKeyValueStore<K, V> {
    fn put(&mut self, key: K, value: V) -> Result<(), Error> {
        let start = self.metering.sensors.put.start();
        let result = self.put_raw(key, value);
        self.metering.sensors.put.record(start);
        result
    }
    fn put_if_absent(&mut self, key: K, value: V) -> Result<Option<V>, Error> {
        let start = self.metering.sensors.put_if_absent.start();
        let result = self.put_if_absent_raw(key, value);
        self.metering.sensors.put_if_absent.record(start);
        result
    }
    fn put_all(&mut self, entries: Vec<(K, V)>) -> Result<(), Error> {
        let start = self.metering.sensors.put_all.start();
        let result = entries
            .into_iter()
            .try_for_each(|(k, v)| self.put_raw(k, v));
        self.metering.sensors.put_all.record(start);
        result
    }
    fn delete(&mut self, key: &K) -> Result<Option<V>, Error> {
        let start = self.metering.sensors.delete.start();
        let result = self.delete_raw(key);
        self.metering.sensors.delete.record(start);
        result
    }
    fn set_flush_listener(&mut self, listener: FlushListener<K, V>, send_old_values: bool) -> bool {
        if self.cache.is_none() {
            return false;
        }
        self.listener = Some((listener, send_old_values));
        true
    }
}

impl<K: 'static, V: Clone + 'static> StateStore for TypedKeyValueStore<K, V> {
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
        if let Some(cache) = &self.cache {
            cache.borrow_mut().attach(context.thread_cache().clone());
        }
        self.metering.init(&self.name, context, KEY_VALUE_OPS)
    }
    fn flush_cache(&mut self) -> Result<(), Error> {
        self.write_down_dirty()
    }
    fn flush(&mut self) -> Result<(), Error> {
        let start = self.metering.sensors.flush.start();
        let result = self.flush_raw();
        self.metering.sensors.flush.record(start);
        result
    }
    fn close(&mut self) -> Result<(), Error> {
        let flushed = self.write_down_dirty();
        if let Some(cache) = &self.cache {
            cache.borrow_mut().clear();
        }
        let closed = self.inner.close();
        self.metering.close();
        flushed.and(closed)
    }
    fn restore_batch(&mut self, records: &[ChangelogRecord<'_>]) -> Result<(), Error> {
        if let Some(cache) = &self.cache {
            cache.borrow_mut().clear();
        }
        let inner = &mut self.inner;
        restore_with_format(self.format, records, |r| inner.restore_batch(r))
    }
}

/// Restores into `inner`, turning changelog values into store values.
pub(crate) fn restore_with_format(
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

/// Builds one key-value store per task: Kafka Streams'
/// `KeyValueStoreBuilder` (from [`crate::Stores::key_value_store_builder`]).
///
/// Logging is on and caching off until changed, as in Kafka Streams;
/// metrics are on (they cost nothing until the task's [`StoreContext`] has
/// a registry).
pub struct KeyValueStoreBuilder<K, V> {
    supplier: Arc<dyn KeyValueBytesStoreSupplier>,
    key_serde: SharedSerde<K>,
    value_serde: SharedSerde<V>,
    logging: bool,
    log_config: BTreeMap<String, String>,
    caching: bool,
    metrics: bool,
    format: ValueFormat,
}

impl<K: 'static, V: 'static> KeyValueStoreBuilder<K, V> {
    pub(crate) fn new(
        supplier: Arc<dyn KeyValueBytesStoreSupplier>,
        key_serde: impl Serde<K>,
        value_serde: impl Serde<V>,
        format: ValueFormat,
    ) -> Self {
        KeyValueStoreBuilder {
            supplier,
            key_serde: Arc::new(key_serde),
            value_serde: Arc::new(value_serde),
            logging: true,
            log_config: BTreeMap::new(),
            caching: false,
            metrics: true,
            format,
        }
    }

    /// Turns the changelog off.
    pub fn with_logging_disabled(mut self) -> Self {
        self.logging = false;
        self
    }
    /// Turns the changelog on, with extra topic configs.
    pub fn with_logging_enabled(mut self, config: BTreeMap<String, String>) -> Self {
        self.logging = true;
        self.log_config = config;
        self
    }
    /// Puts a cache in front of the engine.
    pub fn with_caching_enabled(mut self) -> Self {
        self.caching = true;
        self
    }
    /// Removes the cache.
    pub fn with_caching_disabled(mut self) -> Self {
        self.caching = false;
        self
    }
    /// Whether the cache is on.
    pub fn caching_enabled(&self) -> bool {
        self.caching
    }
    /// Records the store's latencies when its task has a metrics registry
    /// (the default).
    pub fn with_metrics_enabled(mut self) -> Self {
        self.metrics = true;
        self
    }
    /// Never records the store's latencies, even when its task has a
    /// metrics registry.
    pub fn with_metrics_disabled(mut self) -> Self {
        self.metrics = false;
        self
    }
    /// Whether the store records its latencies (given a registry).
    pub fn metrics_enabled(&self) -> bool {
        self.metrics
    }
}

impl<K: 'static, V: Clone + 'static> StoreBuilder for KeyValueStoreBuilder<K, V> {
    fn name(&self) -> &str {
        self.supplier.name()
    }
    fn logging_enabled(&self) -> bool {
        self.logging
    }
    fn log_config(&self) -> BTreeMap<String, String> {
        let mut config = BTreeMap::from([("cleanup.policy".to_string(), "compact".to_string())]);
        config.extend(self.log_config.clone());
        config
    }
    fn build(&self) -> BuiltStore {
        let serdes = StoreSerdes::new(
            self.supplier.name(),
            self.key_serde.clone(),
            self.value_serde.clone(),
        );
        let store = Rc::new(RefCell::new(TypedKeyValueStore::new(
            self.supplier.get(),
            serdes,
            KeyValueLayers {
                logging: self.logging,
                caching: self.caching,
                metrics: self.metrics,
                store_type: self.supplier.metrics_scope(),
            },
            self.format,
        )));
        let handle: KeyValueStoreHandle<K, V> = store.clone();
        BuiltStore::new(store, handle)
    }
}
