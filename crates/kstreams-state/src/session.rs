//! Session stores: the typed traits, the typed store over an engine with
//! its cache and changelog, and the builder.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::rc::Rc;
use std::sync::Arc;

use kstreams_record::{Serde, SharedSerde};

use crate::cache::{CachedChange, FlushListener, NamedCache};
use crate::changelog::{ChangeLogger, RecordClock};
use crate::engine::{horizon, SessionBytesStore, SessionBytesStoreSupplier};
use crate::format::session_key;
use crate::key_value::KeyValueIter;
use crate::metered::{Metering, SESSION_OPS};
use crate::typed::StoreSerdes;
use crate::{
    BuiltStore, ChangelogRecord, Error, StateStore, StoreBuilder, StoreContext, Timestamp, Window,
    Windowed,
};

/// Reads of a session store: Kafka Streams' `ReadOnlySessionStore`.
///
/// Sessions come in (end, key bytes, start) order, backward variants in the
/// exact reverse. Only sessions that ended after `stream time - retention`
/// are seen (stream time being the largest session end put).
pub trait ReadOnlySessionStore<K, V> {
    /// The value of one session.
    fn fetch_session(&self, key: &K, start: Timestamp, end: Timestamp) -> Result<Option<V>, Error>;
    /// `key`'s sessions that end at or after `earliest_end` and start at or
    /// before `latest_start`: the sessions a record could merge with.
    fn find_sessions(
        &self,
        key: &K,
        earliest_end: Timestamp,
        latest_start: Timestamp,
    ) -> Result<KeyValueIter<'_, Windowed<K>, V>, Error>;
    /// [`ReadOnlySessionStore::find_sessions`] in reverse.
    fn backward_find_sessions(
        &self,
        key: &K,
        earliest_end: Timestamp,
        latest_start: Timestamp,
    ) -> Result<KeyValueIter<'_, Windowed<K>, V>, Error>;
    /// [`ReadOnlySessionStore::find_sessions`] over keys in
    /// `[key_from, key_to]` (`None` is open).
    fn find_sessions_key_range(
        &self,
        key_from: Option<&K>,
        key_to: Option<&K>,
        earliest_end: Timestamp,
        latest_start: Timestamp,
    ) -> Result<KeyValueIter<'_, Windowed<K>, V>, Error>;
    /// [`ReadOnlySessionStore::find_sessions_key_range`] in reverse.
    fn backward_find_sessions_key_range(
        &self,
        key_from: Option<&K>,
        key_to: Option<&K>,
        earliest_end: Timestamp,
        latest_start: Timestamp,
    ) -> Result<KeyValueIter<'_, Windowed<K>, V>, Error>;
    /// Sessions of every key that end in `[earliest_end, latest_end]`, for
    /// emitting closed sessions (KIP-825).
    fn find_sessions_ending_in(
        &self,
        earliest_end: Timestamp,
        latest_end: Timestamp,
    ) -> Result<KeyValueIter<'_, Windowed<K>, V>, Error>
    where
        K: 'static,
        V: 'static,
    {
        let all = self.find_sessions_key_range(None, None, earliest_end, i64::MAX)?;
        Ok(Box::new(all.filter(move |r| {
            r.as_ref().map_or(true, |(w, _)| w.window.end <= latest_end)
        })))
    }
    /// Every session of `key`.
    fn fetch(&self, key: &K) -> Result<KeyValueIter<'_, Windowed<K>, V>, Error> {
        self.find_sessions(key, 0, i64::MAX)
    }
    /// Every session of keys in `[key_from, key_to]`.
    fn fetch_key_range(
        &self,
        key_from: Option<&K>,
        key_to: Option<&K>,
    ) -> Result<KeyValueIter<'_, Windowed<K>, V>, Error> {
        self.find_sessions_key_range(key_from, key_to, 0, i64::MAX)
    }
}

/// A session store: Kafka Streams' `SessionStore`.
pub trait SessionStore<K, V>: ReadOnlySessionStore<K, V> + StateStore {
    /// Sets a session's value; `None` removes it. Sessions that ended at or
    /// before `stream time - retention` are dropped.
    fn put(&mut self, session: Windowed<K>, value: Option<V>) -> Result<(), Error>;
    /// Removes a session.
    fn remove(&mut self, session: &Windowed<K>) -> Result<(), Error>;
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

/// A typed handle on a task's session store.
pub type SessionStoreHandle<K, V> = Rc<RefCell<dyn SessionStore<K, V>>>;

enum Found<V> {
    Bytes(Vec<u8>),
    Typed(V),
}

/// A session found by a query: key bytes, window, value.
type FoundSession<V> = (Vec<u8>, Window, Found<V>);

/// Cache key: (key bytes, start, end).
type SessionCacheKey = (Vec<u8>, Timestamp, Timestamp);

pub(crate) struct TypedSessionStore<K, V> {
    name: String,
    serdes: StoreSerdes<K, V>,
    inner: Box<dyn SessionBytesStore>,
    logger: Option<ChangeLogger>,
    clock: RecordClock,
    cache: Option<NamedCache<SessionCacheKey, V>>,
    listener: Option<(FlushListener<Windowed<K>, V>, bool)>,
    observed: Timestamp,
    metering: Metering,
}

impl<K: 'static, V: Clone + 'static> TypedSessionStore<K, V> {
    fn write_down(
        &mut self,
        key: &[u8],
        start: Timestamp,
        end: Timestamp,
        value: Option<&[u8]>,
        ts: Timestamp,
    ) -> Result<(), Error> {
        let written = self.inner.put(key, start, end, value)?;
        if let (Some(logger), true) = (&self.logger, written) {
            logger.log(&session_key(key, start, end), value, ts)?;
        }
        Ok(())
    }

    fn write_down_dirty(&mut self) -> Result<(), Error> {
        let Some(cache) = &mut self.cache else {
            return Ok(());
        };
        for d in cache.take_dirty() {
            let (key, start, end) = &d.key;
            let send_old = self.listener.as_ref().map(|(_, s)| *s);
            let old_bytes = match send_old {
                Some(s) if s || d.bytes.is_none() => self.inner.fetch_session(key, *start, *end)?,
                _ => None,
            };
            if send_old.is_some() && d.bytes.is_none() && old_bytes.is_none() {
                continue;
            }
            let previous = self.clock.set(d.timestamp);
            let written = self.write_down(key, *start, *end, d.bytes.as_deref(), d.timestamp);
            self.clock.set(previous);
            written?;
            if let Some((listener, send_old)) = &mut self.listener {
                let old_value = match (*send_old, old_bytes) {
                    (true, Some(b)) => Some(self.serdes.value_from_bytes(&b)?),
                    _ => None,
                };
                listener(CachedChange {
                    key: Windowed::new(self.serdes.key_from_bytes(key)?, Window::new(*start, *end)),
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

    fn collect(
        &self,
        key_from: Option<&[u8]>,
        key_to: Option<&[u8]>,
        earliest_end: Timestamp,
        latest_start: Timestamp,
        reverse: bool,
    ) -> Result<Vec<FoundSession<V>>, Error> {
        let engine =
            self.inner
                .find_sessions(key_from, key_to, earliest_end, latest_start, reverse)?;
        let Some(cache) = &self.cache else {
            return Ok(engine
                .into_iter()
                .map(|e| (e.key, Window::new(e.start, e.end), Found::Bytes(e.value)))
                .collect());
        };
        let first_live = horizon(self.observed, self.inner.retention_period()).saturating_add(1);
        let mut merged: BTreeMap<(Timestamp, Vec<u8>, Timestamp), Option<Found<V>>> = engine
            .into_iter()
            .filter(|e| e.end >= first_live)
            .map(|e| ((e.end, e.key, e.start), Some(Found::Bytes(e.value))))
            .collect();
        // The cache is ordered by (key, start, end): only the keys asked for.
        let lo = Bound::Included((key_from.unwrap_or_default().to_vec(), i64::MIN, i64::MIN));
        let hi = key_to.map_or(Bound::Unbounded, |t| {
            Bound::Included((t.to_vec(), i64::MAX, i64::MAX))
        });
        for ((k, start, end), entry) in cache.entries().range((lo, hi)) {
            if *end < earliest_end.max(first_live) || *start > latest_start {
                continue;
            }
            merged.insert(
                (*end, k.clone(), *start),
                entry.value.clone().map(Found::Typed),
            );
        }
        let out = merged
            .into_iter()
            .filter_map(|((end, k, start), v)| v.map(|v| (k, Window::new(start, end), v)));
        Ok(if reverse {
            out.rev().collect()
        } else {
            out.collect()
        })
    }

    fn find(
        &self,
        key_from: Option<&K>,
        key_to: Option<&K>,
        earliest_end: Timestamp,
        latest_start: Timestamp,
        reverse: bool,
    ) -> Result<KeyValueIter<'_, Windowed<K>, V>, Error> {
        let from = key_from.map(|k| self.serdes.key_to_bytes(k)).transpose()?;
        let to = key_to.map(|k| self.serdes.key_to_bytes(k)).transpose()?;
        if matches!((&from, &to), (Some(a), Some(b)) if a > b) {
            return Ok(Box::new(std::iter::empty()));
        }
        let found = self.collect(
            from.as_deref(),
            to.as_deref(),
            earliest_end,
            latest_start,
            reverse,
        )?;
        Ok(Box::new(found.into_iter().map(move |(k, window, v)| {
            let value = match v {
                Found::Bytes(b) => self.serdes.value_from_bytes(&b)?,
                Found::Typed(v) => v,
            };
            Ok((
                Windowed::new(self.serdes.key_from_bytes(&k)?, window),
                value,
            ))
        })))
    }
}

/// The store without its metered layer.
impl<K: 'static, V: Clone + 'static> TypedSessionStore<K, V> {
    fn fetch_session_raw(
        &self,
        key: &K,
        start: Timestamp,
        end: Timestamp,
    ) -> Result<Option<V>, Error> {
        let kb = self.serdes.key_to_bytes(key)?;
        if let Some(cache) = &self.cache {
            if end <= horizon(self.observed, self.inner.retention_period()) {
                return Ok(None);
            }
            if let Some(entry) = cache.entries().get(&(kb.clone(), start, end)) {
                cache.budget().hit();
                return Ok(entry.value.clone());
            }
            cache.budget().miss();
        }
        self.inner
            .fetch_session(&kb, start, end)?
            .map(|b| self.serdes.value_from_bytes(&b))
            .transpose()
    }

    fn put_raw(&mut self, session: Windowed<K>, value: Option<V>) -> Result<(), Error> {
        let kb = self.serdes.key_to_bytes(&session.key)?;
        let vb = match &value {
            Some(v) => self.serdes.value_to_bytes(v)?,
            None => None,
        };
        let Window { start, end } = session.window;
        let now = self.clock.now();
        let Some(cache) = &mut self.cache else {
            return self.write_down(&kb, start, end, vb.as_deref(), now);
        };
        self.observed = self.observed.max(end);
        if end <= horizon(self.observed, self.inner.retention_period()) {
            log::warn!("store {}: skipping record for expired session", self.name);
            return Ok(());
        }
        let value = if vb.is_some() { value } else { None };
        let len = kb.len() + 16;
        cache.put_dirty((kb, start, end), len, value, vb, now, self.clock.headers());
        self.maybe_evict()
    }

    fn remove_raw(&mut self, session: &Windowed<K>) -> Result<(), Error> {
        let kb = self.serdes.key_to_bytes(&session.key)?;
        let Window { start, end } = session.window;
        let now = self.clock.now();
        let Some(cache) = &mut self.cache else {
            return self.write_down(&kb, start, end, None, now);
        };
        self.observed = self.observed.max(end);
        if end <= horizon(self.observed, self.inner.retention_period()) {
            return Ok(());
        }
        let len = kb.len() + 16;
        cache.put_dirty((kb, start, end), len, None, None, now, self.clock.headers());
        self.maybe_evict()
    }

    fn flush_raw(&mut self) -> Result<(), Error> {
        self.write_down_dirty()?;
        self.inner.flush()
    }
}

/// The metered layer: every read is a `fetch`, as in Kafka Streams'
/// `MeteredSessionStore`; iterators are timed until dropped.
impl<K: 'static, V: Clone + 'static> ReadOnlySessionStore<K, V> for TypedSessionStore<K, V> {
    fn fetch_session(&self, key: &K, start: Timestamp, end: Timestamp) -> Result<Option<V>, Error> {
        let sensor = &self.metering.sensors.fetch;
        let began = sensor.start();
        let result = self.fetch_session_raw(key, start, end);
        sensor.record(began);
        result
    }
    fn find_sessions(
        &self,
        key: &K,
        earliest_end: Timestamp,
        latest_start: Timestamp,
    ) -> Result<KeyValueIter<'_, Windowed<K>, V>, Error> {
        let sensor = &self.metering.sensors.fetch;
        let start = sensor.start();
        sensor.record_iter(
            start,
            self.find(Some(key), Some(key), earliest_end, latest_start, false),
        )
    }
    fn backward_find_sessions(
        &self,
        key: &K,
        earliest_end: Timestamp,
        latest_start: Timestamp,
    ) -> Result<KeyValueIter<'_, Windowed<K>, V>, Error> {
        let sensor = &self.metering.sensors.fetch;
        let start = sensor.start();
        sensor.record_iter(
            start,
            self.find(Some(key), Some(key), earliest_end, latest_start, true),
        )
    }
    fn find_sessions_key_range(
        &self,
        key_from: Option<&K>,
        key_to: Option<&K>,
        earliest_end: Timestamp,
        latest_start: Timestamp,
    ) -> Result<KeyValueIter<'_, Windowed<K>, V>, Error> {
        let sensor = &self.metering.sensors.fetch;
        let start = sensor.start();
        sensor.record_iter(
            start,
            self.find(key_from, key_to, earliest_end, latest_start, false),
        )
    }
    fn backward_find_sessions_key_range(
        &self,
        key_from: Option<&K>,
        key_to: Option<&K>,
        earliest_end: Timestamp,
        latest_start: Timestamp,
    ) -> Result<KeyValueIter<'_, Windowed<K>, V>, Error> {
        let sensor = &self.metering.sensors.fetch;
        let start = sensor.start();
        sensor.record_iter(
            start,
            self.find(key_from, key_to, earliest_end, latest_start, true),
        )
    }
}

impl<K: 'static, V: Clone + 'static> SessionStore<K, V> for TypedSessionStore<K, V> {
    fn put(&mut self, session: Windowed<K>, value: Option<V>) -> Result<(), Error> {
        let start = self.metering.sensors.put.start();
        let result = self.put_raw(session, value);
        self.metering.sensors.put.record(start);
        result
    }
    fn remove(&mut self, session: &Windowed<K>) -> Result<(), Error> {
        let start = self.metering.sensors.remove.start();
        let result = self.remove_raw(session);
        self.metering.sensors.remove.record(start);
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

impl<K: 'static, V: Clone + 'static> StateStore for TypedSessionStore<K, V> {
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
        self.metering.init(&self.name, context, SESSION_OPS)
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
        self.inner.restore_batch(records)?;
        for r in records {
            if let Some((_, _, end)) = crate::format::parse_session_key(r.key) {
                self.observed = self.observed.max(end);
            }
        }
        Ok(())
    }
}

/// Builds one session store per task: Kafka Streams' `SessionStoreBuilder`.
///
/// Logging is on and caching off until changed; metrics are on (given a
/// registry).
pub struct SessionStoreBuilder<K, V> {
    supplier: Arc<dyn SessionBytesStoreSupplier>,
    key_serde: SharedSerde<K>,
    value_serde: SharedSerde<V>,
    logging: bool,
    log_config: BTreeMap<String, String>,
    caching: bool,
    metrics: bool,
}

impl<K: 'static, V: 'static> SessionStoreBuilder<K, V> {
    pub(crate) fn new(
        supplier: Arc<dyn SessionBytesStoreSupplier>,
        key_serde: impl Serde<K>,
        value_serde: impl Serde<V>,
    ) -> Self {
        SessionStoreBuilder {
            supplier,
            key_serde: Arc::new(key_serde),
            value_serde: Arc::new(value_serde),
            logging: true,
            log_config: BTreeMap::new(),
            caching: false,
            metrics: true,
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

impl<K: 'static, V: Clone + 'static> StoreBuilder for SessionStoreBuilder<K, V> {
    fn name(&self) -> &str {
        self.supplier.name()
    }
    fn logging_enabled(&self) -> bool {
        self.logging
    }
    fn log_config(&self) -> BTreeMap<String, String> {
        let retention = self
            .supplier
            .retention_period()
            .saturating_add(24 * 60 * 60 * 1000);
        let mut config = BTreeMap::from([
            ("cleanup.policy".to_string(), "compact,delete".to_string()),
            ("retention.ms".to_string(), retention.to_string()),
        ]);
        config.extend(self.log_config.clone());
        config
    }
    fn build(&self) -> BuiltStore {
        let inner = self.supplier.get();
        let name = inner.name().to_string();
        let store = Rc::new(RefCell::new(TypedSessionStore {
            serdes: StoreSerdes::new(&name, self.key_serde.clone(), self.value_serde.clone()),
            logger: self.logging.then(|| ChangeLogger::new(&name)),
            cache: self.caching.then(|| {
                NamedCache::new(Rc::new(crate::ThreadCache::new(
                    crate::ThreadCache::DEFAULT_MAX_BYTES,
                )))
            }),
            name,
            inner,
            clock: RecordClock::default(),
            listener: None,
            observed: i64::MIN,
            metering: Metering::new(self.metrics, self.supplier.metrics_scope()),
        }));
        let handle: SessionStoreHandle<K, V> = store.clone();
        BuiltStore::new(store, handle)
    }
}
