//! Window stores: the typed traits, the typed store over an engine with its
//! cache and changelog, and the builder.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::rc::Rc;
use std::sync::Arc;

use kstreams_record::{Serde, SharedSerde};

use crate::cache::{CachedChange, FlushListener, NamedCache};
use crate::changelog::{ChangeLogger, RecordClock};
use crate::engine::{horizon, WindowBytesStore, WindowBytesStoreSupplier};
use crate::format::window_store_key;
use crate::key_value::{restore_with_format, KeyValueIter};
use crate::metered::{Metering, WINDOW_OPS};
use crate::typed::{StoreSerdes, ValueFormat};
use crate::{
    BuiltStore, ChangelogRecord, Error, StateStore, StoreBuilder, StoreContext, StoreIter,
    Timestamp, ValueAndTimestamp, Window, Windowed,
};

/// Windows of one key as (window start, value), in start order.
pub type WindowStoreIter<'a, V> = StoreIter<'a, (Timestamp, V)>;

/// Reads of a window store: Kafka Streams' `ReadOnlyWindowStore`.
///
/// Only windows that started after `stream time - retention` are seen
/// (stream time being the largest window start the store was given).
/// Fetches over many keys come in (window start, key bytes) order, the
/// backward variants in the exact reverse.
pub trait ReadOnlyWindowStore<K, V> {
    /// The value of `key`'s window that starts at `window_start`.
    fn fetch(&self, key: &K, window_start: Timestamp) -> Result<Option<V>, Error>;
    /// `key`'s windows starting in `[time_from, time_to]`, by start.
    fn fetch_time_range(
        &self,
        key: &K,
        time_from: Timestamp,
        time_to: Timestamp,
    ) -> Result<WindowStoreIter<'_, V>, Error>;
    /// [`ReadOnlyWindowStore::fetch_time_range`], latest first.
    fn backward_fetch_time_range(
        &self,
        key: &K,
        time_from: Timestamp,
        time_to: Timestamp,
    ) -> Result<WindowStoreIter<'_, V>, Error>;
    /// Windows of keys in `[key_from, key_to]` (`None` is open) starting in
    /// `[time_from, time_to]`.
    fn fetch_key_range(
        &self,
        key_from: Option<&K>,
        key_to: Option<&K>,
        time_from: Timestamp,
        time_to: Timestamp,
    ) -> Result<KeyValueIter<'_, Windowed<K>, V>, Error>;
    /// [`ReadOnlyWindowStore::fetch_key_range`] in reverse.
    fn backward_fetch_key_range(
        &self,
        key_from: Option<&K>,
        key_to: Option<&K>,
        time_from: Timestamp,
        time_to: Timestamp,
    ) -> Result<KeyValueIter<'_, Windowed<K>, V>, Error>;
    /// Windows of every key starting in `[time_from, time_to]`.
    fn fetch_all(
        &self,
        time_from: Timestamp,
        time_to: Timestamp,
    ) -> Result<KeyValueIter<'_, Windowed<K>, V>, Error> {
        self.fetch_key_range(None, None, time_from, time_to)
    }
    /// [`ReadOnlyWindowStore::fetch_all`] in reverse.
    fn backward_fetch_all(
        &self,
        time_from: Timestamp,
        time_to: Timestamp,
    ) -> Result<KeyValueIter<'_, Windowed<K>, V>, Error> {
        self.backward_fetch_key_range(None, None, time_from, time_to)
    }
    /// Every window.
    fn all(&self) -> Result<KeyValueIter<'_, Windowed<K>, V>, Error> {
        self.fetch_all(i64::MIN, i64::MAX)
    }
    /// Every window, in reverse.
    fn backward_all(&self) -> Result<KeyValueIter<'_, Windowed<K>, V>, Error> {
        self.backward_fetch_all(i64::MIN, i64::MAX)
    }
}

/// A window store: Kafka Streams' `WindowStore`.
pub trait WindowStore<K, V>: ReadOnlyWindowStore<K, V> + StateStore {
    /// Sets (`Some`) or deletes (`None`) `key`'s window starting at
    /// `window_start`. Puts into expired windows are dropped; a store that
    /// retains duplicates adds an entry per put and ignores deletes.
    fn put(&mut self, key: K, value: Option<V>, window_start: Timestamp) -> Result<(), Error>;
    /// See [`crate::KeyValueStore::set_flush_listener`].
    fn set_flush_listener(
        &mut self,
        listener: FlushListener<Windowed<K>, V>,
        send_old_values: bool,
    ) -> bool {
        let _ = (listener, send_old_values);
        false
    }
}

/// A typed handle on a task's window store.
pub type WindowStoreHandle<K, V> = Rc<RefCell<dyn WindowStore<K, V>>>;

/// A timestamped window store: Kafka Streams' `TimestampedWindowStore`.
pub type TimestampedWindowStore<K, V> = dyn WindowStore<K, ValueAndTimestamp<V>>;

/// A typed handle on a task's timestamped window store.
pub type TimestampedWindowStoreHandle<K, V> = WindowStoreHandle<K, ValueAndTimestamp<V>>;

/// A value found by a fetch: still bytes from the engine, or typed from
/// the cache.
enum Found<V> {
    Bytes(Vec<u8>),
    Typed(V),
}

/// A window found by a query: key bytes, window start, value.
type FoundWindow<V> = (Vec<u8>, Timestamp, Found<V>);

pub(crate) struct TypedWindowStore<K, V> {
    name: String,
    serdes: StoreSerdes<K, V>,
    inner: Box<dyn WindowBytesStore>,
    logger: Option<ChangeLogger>,
    format: ValueFormat,
    clock: RecordClock,
    cache: Option<NamedCache<(Vec<u8>, Timestamp), V>>,
    listener: Option<(FlushListener<Windowed<K>, V>, bool)>,
    /// The largest window start put through the cache.
    observed: Timestamp,
    metering: Metering,
}

impl<K: 'static, V: Clone + 'static> TypedWindowStore<K, V> {
    fn write_down(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
        start: Timestamp,
        ts: Timestamp,
    ) -> Result<(), Error> {
        let seq = self.inner.put(key, value, start)?;
        if let (Some(logger), Some(seq)) = (&self.logger, seq) {
            let (v, ts) = self.format.changelog_value(value, ts);
            logger.log(&window_store_key(key, start, seq), v, ts)?;
        }
        Ok(())
    }

    fn window(&self, start: Timestamp) -> Window {
        Window::new(start, start.saturating_add(self.inner.window_size()))
    }

    fn write_down_dirty(&mut self) -> Result<(), Error> {
        let Some(cache) = &mut self.cache else {
            return Ok(());
        };
        for d in cache.take_dirty() {
            let (key, start) = &d.key;
            let send_old = self.listener.as_ref().map(|(_, s)| *s);
            let old_bytes = match send_old {
                Some(s) if s || d.bytes.is_none() => self.inner.fetch(key, *start)?,
                _ => None,
            };
            if send_old.is_some() && d.bytes.is_none() && old_bytes.is_none() {
                continue;
            }
            let previous = self.clock.set(d.timestamp);
            let written = self.write_down(key, d.bytes.as_deref(), *start, d.timestamp);
            self.clock.set(previous);
            written?;
            let window = self.window(*start);
            if let Some((listener, send_old)) = &mut self.listener {
                let old_value = match (*send_old, old_bytes) {
                    (true, Some(b)) => Some(self.serdes.value_from_bytes(&b)?),
                    _ => None,
                };
                listener(CachedChange {
                    key: Windowed::new(self.serdes.key_from_bytes(key)?, window),
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
            let Some(cache) = &self.cache else {
                return Ok(());
            };
            if !cache.needs_eviction() {
                return Ok(());
            }
            let Some((key, dirty)) = cache.eldest() else {
                return Ok(());
            };
            if dirty {
                self.write_down_dirty()?;
            }
            if let Some(cache) = &mut self.cache {
                cache.evict(&key);
            }
        }
    }

    /// Engine results overlaid with the cache, in (start, key) order.
    fn collect(
        &self,
        key_from: Option<&[u8]>,
        key_to: Option<&[u8]>,
        time_from: Timestamp,
        time_to: Timestamp,
        reverse: bool,
    ) -> Result<Vec<FoundWindow<V>>, Error> {
        let single = matches!((key_from, key_to), (Some(a), Some(b)) if a == b);
        let engine = if single {
            self.inner
                .fetch_key(key_from.unwrap_or_default(), time_from, time_to, reverse)?
        } else {
            self.inner
                .fetch_keys(key_from, key_to, time_from, time_to, reverse)?
        };
        let Some(cache) = &self.cache else {
            return Ok(engine
                .into_iter()
                .map(|e| (e.key, e.start, Found::Bytes(e.value)))
                .collect());
        };
        let first_live = horizon(self.observed, self.inner.retention_period()).saturating_add(1);
        let mut merged: BTreeMap<(Timestamp, Vec<u8>), Option<Found<V>>> = engine
            .into_iter()
            .filter(|e| e.start >= first_live)
            .map(|e| ((e.start, e.key), Some(Found::Bytes(e.value))))
            .collect();
        // The cache is ordered by (key, start): only the keys asked for.
        let lo = Bound::Included((key_from.unwrap_or_default().to_vec(), i64::MIN));
        let hi = key_to.map_or(Bound::Unbounded, |t| {
            Bound::Included((t.to_vec(), i64::MAX))
        });
        for ((k, start), entry) in cache.entries().range((lo, hi)) {
            if *start < time_from.max(first_live) || *start > time_to {
                continue;
            }
            merged.insert((*start, k.clone()), entry.value.clone().map(Found::Typed));
        }
        let out = merged
            .into_iter()
            .filter_map(|((start, k), v)| v.map(|v| (k, start, v)));
        Ok(if reverse {
            out.rev().collect()
        } else {
            out.collect()
        })
    }

    fn value(&self, found: Found<V>) -> Result<V, Error> {
        match found {
            Found::Bytes(b) => self.serdes.value_from_bytes(&b),
            Found::Typed(v) => Ok(v),
        }
    }

    fn key_range(
        &self,
        key_from: Option<&K>,
        key_to: Option<&K>,
        time_from: Timestamp,
        time_to: Timestamp,
        reverse: bool,
    ) -> Result<KeyValueIter<'_, Windowed<K>, V>, Error> {
        let from = key_from.map(|k| self.serdes.key_to_bytes(k)).transpose()?;
        let to = key_to.map(|k| self.serdes.key_to_bytes(k)).transpose()?;
        if matches!((&from, &to), (Some(a), Some(b)) if a > b) {
            return Ok(Box::new(std::iter::empty()));
        }
        let found = self.collect(from.as_deref(), to.as_deref(), time_from, time_to, reverse)?;
        Ok(Box::new(found.into_iter().map(move |(k, start, v)| {
            Ok((
                Windowed::new(self.serdes.key_from_bytes(&k)?, self.window(start)),
                self.value(v)?,
            ))
        })))
    }

    fn time_range(
        &self,
        key: &K,
        time_from: Timestamp,
        time_to: Timestamp,
        reverse: bool,
    ) -> Result<WindowStoreIter<'_, V>, Error> {
        let kb = self.serdes.key_to_bytes(key)?;
        let found = self.collect(Some(&kb), Some(&kb), time_from, time_to, reverse)?;
        Ok(Box::new(
            found
                .into_iter()
                .map(move |(_, start, v)| Ok((start, self.value(v)?))),
        ))
    }
}

/// The store without its metered layer.
impl<K: 'static, V: Clone + 'static> TypedWindowStore<K, V> {
    fn fetch_raw(&self, key: &K, window_start: Timestamp) -> Result<Option<V>, Error> {
        let kb = self.serdes.key_to_bytes(key)?;
        if let Some(cache) = &self.cache {
            if window_start <= horizon(self.observed, self.inner.retention_period()) {
                return Ok(None);
            }
            if let Some(entry) = cache.entries().get(&(kb.clone(), window_start)) {
                cache.budget().hit();
                return Ok(entry.value.clone());
            }
            cache.budget().miss();
        }
        self.inner
            .fetch(&kb, window_start)?
            .map(|b| self.serdes.value_from_bytes(&b))
            .transpose()
    }

    fn put_raw(&mut self, key: K, value: Option<V>, window_start: Timestamp) -> Result<(), Error> {
        let kb = self.serdes.key_to_bytes(&key)?;
        let vb = match &value {
            Some(v) => self.serdes.value_to_bytes(v)?,
            None => None,
        };
        let now = self.clock.now();
        let Some(cache) = &mut self.cache else {
            return self.write_down(&kb, vb.as_deref(), window_start, now);
        };
        self.observed = self.observed.max(window_start);
        if window_start <= horizon(self.observed, self.inner.retention_period()) {
            log::warn!("store {}: skipping record for expired window", self.name);
            return Ok(());
        }
        let value = if vb.is_some() { value } else { None };
        let len = kb.len() + 8;
        cache.put_dirty(
            (kb, window_start),
            len,
            value,
            vb,
            now,
            self.clock.headers(),
        );
        self.maybe_evict()
    }

    fn flush_raw(&mut self) -> Result<(), Error> {
        self.write_down_dirty()?;
        self.inner.flush()
    }
}

/// The metered layer: every read is a `fetch`, as in Kafka Streams'
/// `MeteredWindowStore`; iterators are timed until dropped.
impl<K: 'static, V: Clone + 'static> ReadOnlyWindowStore<K, V> for TypedWindowStore<K, V> {
    fn fetch(&self, key: &K, window_start: Timestamp) -> Result<Option<V>, Error> {
        let sensor = &self.metering.sensors.fetch;
        let start = sensor.start();
        let result = self.fetch_raw(key, window_start);
        sensor.record(start);
        result
    }
    fn fetch_time_range(
        &self,
        key: &K,
        time_from: Timestamp,
        time_to: Timestamp,
    ) -> Result<WindowStoreIter<'_, V>, Error> {
        let sensor = &self.metering.sensors.fetch;
        let start = sensor.start();
        sensor.record_iter(start, self.time_range(key, time_from, time_to, false))
    }
    fn backward_fetch_time_range(
        &self,
        key: &K,
        time_from: Timestamp,
        time_to: Timestamp,
    ) -> Result<WindowStoreIter<'_, V>, Error> {
        let sensor = &self.metering.sensors.fetch;
        let start = sensor.start();
        sensor.record_iter(start, self.time_range(key, time_from, time_to, true))
    }
    fn fetch_key_range(
        &self,
        key_from: Option<&K>,
        key_to: Option<&K>,
        time_from: Timestamp,
        time_to: Timestamp,
    ) -> Result<KeyValueIter<'_, Windowed<K>, V>, Error> {
        let sensor = &self.metering.sensors.fetch;
        let start = sensor.start();
        sensor.record_iter(
            start,
            self.key_range(key_from, key_to, time_from, time_to, false),
        )
    }
    fn backward_fetch_key_range(
        &self,
        key_from: Option<&K>,
        key_to: Option<&K>,
        time_from: Timestamp,
        time_to: Timestamp,
    ) -> Result<KeyValueIter<'_, Windowed<K>, V>, Error> {
        let sensor = &self.metering.sensors.fetch;
        let start = sensor.start();
        sensor.record_iter(
            start,
            self.key_range(key_from, key_to, time_from, time_to, true),
        )
    }
}

impl<K: 'static, V: Clone + 'static> WindowStore<K, V> for TypedWindowStore<K, V> {
    fn put(&mut self, key: K, value: Option<V>, window_start: Timestamp) -> Result<(), Error> {
        let start = self.metering.sensors.put.start();
        let result = self.put_raw(key, value, window_start);
        self.metering.sensors.put.record(start);
        result
    }
    fn set_flush_listener(
        &mut self,
        listener: FlushListener<Windowed<K>, V>,
        send_old_values: bool,
    ) -> bool {
        if self.cache.is_none() {
            return false;
        }
        self.listener = Some((listener, send_old_values));
        true
    }
}

impl<K: 'static, V: Clone + 'static> StateStore for TypedWindowStore<K, V> {
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
        if let Some(cache) = &mut self.cache {
            cache.attach(context.thread_cache().clone());
        }
        self.metering.init(&self.name, context, WINDOW_OPS)
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
        if let Some(cache) = &mut self.cache {
            cache.clear();
        }
        let closed = self.inner.close();
        self.metering.close();
        flushed.and(closed)
    }
    fn restore_batch(&mut self, records: &[ChangelogRecord<'_>]) -> Result<(), Error> {
        if let Some(cache) = &mut self.cache {
            cache.clear();
        }
        let inner = &mut self.inner;
        restore_with_format(self.format, records, |r| inner.restore_batch(r))?;
        for r in records {
            if let Some((_, start, _)) = crate::format::parse_window_store_key(r.key) {
                self.observed = self.observed.max(start);
            }
        }
        Ok(())
    }
}

/// Builds one window store per task: Kafka Streams' `WindowStoreBuilder`.
///
/// Logging is on and caching off until changed. Caching is never used for
/// a store that retains duplicates. Metrics are on (given a registry).
pub struct WindowStoreBuilder<K, V> {
    supplier: Arc<dyn WindowBytesStoreSupplier>,
    key_serde: SharedSerde<K>,
    value_serde: SharedSerde<V>,
    logging: bool,
    log_config: BTreeMap<String, String>,
    caching: bool,
    metrics: bool,
    format: ValueFormat,
}

impl<K: 'static, V: 'static> WindowStoreBuilder<K, V> {
    pub(crate) fn new(
        supplier: Arc<dyn WindowBytesStoreSupplier>,
        key_serde: impl Serde<K>,
        value_serde: SharedSerde<V>,
        format: ValueFormat,
    ) -> Self {
        WindowStoreBuilder {
            supplier,
            key_serde: Arc::new(key_serde),
            value_serde,
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
    /// Records the store's latencies when its task has a metrics registry
    /// (the default).
    pub fn with_metrics_enabled(mut self) -> Self {
        self.metrics = true;
        self
    }
    /// Never records the store's latencies.
    pub fn with_metrics_disabled(mut self) -> Self {
        self.metrics = false;
        self
    }
}

impl<K: 'static, V: Clone + 'static> StoreBuilder for WindowStoreBuilder<K, V> {
    fn name(&self) -> &str {
        self.supplier.name()
    }
    fn logging_enabled(&self) -> bool {
        self.logging
    }
    fn log_config(&self) -> BTreeMap<String, String> {
        // Kafka Streams: compact,delete with retention.ms = retention + 1 day.
        let retention = self
            .supplier
            .retention_period()
            .saturating_add(24 * 60 * 60 * 1000);
        let policy = if self.supplier.retain_duplicates() {
            "delete"
        } else {
            "compact,delete"
        };
        let mut config = BTreeMap::from([
            ("cleanup.policy".to_string(), policy.to_string()),
            ("retention.ms".to_string(), retention.to_string()),
        ]);
        config.extend(self.log_config.clone());
        config
    }
    fn build(&self) -> BuiltStore {
        let inner = self.supplier.get();
        let name = inner.name().to_string();
        let caching = self.caching && !inner.retain_duplicates();
        let store = Rc::new(RefCell::new(TypedWindowStore {
            serdes: StoreSerdes::new(&name, self.key_serde.clone(), self.value_serde.clone()),
            logger: self.logging.then(|| ChangeLogger::new(&name)),
            cache: caching.then(|| {
                NamedCache::new(Rc::new(crate::ThreadCache::new(
                    crate::ThreadCache::DEFAULT_MAX_BYTES,
                )))
            }),
            name,
            inner,
            format: self.format,
            clock: RecordClock::default(),
            listener: None,
            observed: i64::MIN,
            metering: Metering::new(self.metrics, self.supplier.metrics_scope()),
        }));
        let handle: WindowStoreHandle<K, V> = store.clone();
        BuiltStore::new(store, handle)
    }
}
