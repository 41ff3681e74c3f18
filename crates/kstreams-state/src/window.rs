//! Window stores: the typed traits, the typed store over an engine with its
//! cache and changelog, and the builder.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::ops::Bound;
use std::rc::Rc;
use std::sync::Arc;

use kstreams_record::{Serde, SharedSerde};
use kstreams_time::expiry::RetainedTime;

use crate::cache::FlushListener;
use crate::engine::{WindowBytesStore, WindowBytesStoreSupplier};
use crate::format::window_store_key;
use crate::key_value::KeyValueIter;
use crate::layered::{Found, LayeredStore, StoreKind};
use crate::metered::{Metered, Op, WINDOW_OPS};
use crate::options::{changelog_retention, store_builder_options, BuilderParts};
use crate::typed::ValueFormat;
use crate::{
    BuiltStore, Error, StateStore, StoreBuilder, StoreIter, Timestamp, ValueAndTimestamp, Window,
    Windowed,
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

/// A window found by a query: key bytes, window start, value.
type FoundWindow<V> = (Vec<u8>, Timestamp, Found<V>);

/// The window store type of the shared layers; the cache is keyed by (key
/// bytes, window start).
pub(crate) struct WindowKind<K>(PhantomData<K>);

impl<K: 'static> StoreKind for WindowKind<K> {
    type Key = K;
    type Engine = dyn WindowBytesStore;
    type CacheKey = (Vec<u8>, Timestamp);
    type ChangeKey = Windowed<K>;

    fn engine_value(
        engine: &Self::Engine,
        (key, start): &Self::CacheKey,
    ) -> Result<Option<Vec<u8>>, Error> {
        engine.fetch(key, *start)
    }
    fn engine_write<'k>(
        engine: &mut Self::Engine,
        (key, start): &'k Self::CacheKey,
        value: Option<&[u8]>,
    ) -> Result<Option<Cow<'k, [u8]>>, Error> {
        let seq = engine.put(key, value, *start)?;
        Ok(seq.map(|seq| Cow::Owned(window_store_key(key, *start, seq))))
    }
    fn key_bytes((key, _): &Self::CacheKey) -> &[u8] {
        key
    }
    fn change_key(engine: &Self::Engine, key: K, (_, start): &Self::CacheKey) -> Windowed<K> {
        Windowed::new(key, window_of(engine, *start))
    }
    fn restored_time(changelog_key: &[u8]) -> Option<Timestamp> {
        crate::format::parse_window_store_key(changelog_key).map(|(_, start, _)| start)
    }
}

/// The window that starts at `start` in `engine`.
fn window_of(engine: &dyn WindowBytesStore, start: Timestamp) -> Window {
    Window::new(start, start.saturating_add(engine.window_size()))
}

/// A typed window store over a byte engine, with its cache and changelog;
/// the metered layer goes on top.
type LayeredWindowStore<K, V> = LayeredStore<WindowKind<K>, V>;

impl<K: 'static, V: Clone + 'static> LayeredWindowStore<K, V> {
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
        let first_live = self.first_live(RetainedTime::WindowStart, self.inner.retention_period());
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
        for ((k, start), entry) in cache.borrow_mut().range((lo, hi)) {
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
                Windowed::new(
                    self.serdes.key_from_bytes(&k)?,
                    window_of(&*self.inner, start),
                ),
                v.value(&self.serdes)?,
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
        Ok(Box::new(found.into_iter().map(move |(_, start, v)| {
            Ok((start, v.value(&self.serdes)?))
        })))
    }

    fn fetch(&self, key: &K, window_start: Timestamp) -> Result<Option<V>, Error> {
        if self.cache.is_some()
            && self.expired(
                RetainedTime::WindowStart,
                window_start,
                self.inner.retention_period(),
            )
        {
            return Ok(None);
        }
        // The key through the reused buffer (a re-entrant call, none today,
        // would find it taken and allocate).
        let mut borrowed = self.scratch.try_borrow_mut();
        let mut kb = match &mut borrowed {
            Ok(scratch) => std::mem::take(&mut scratch.key),
            Err(_) => Vec::new(),
        };
        kb.clear();
        let found = self.fetch_bytes_key(key, window_start, &mut kb);
        if let Ok(scratch) = &mut borrowed {
            scratch.key = kb;
        }
        found
    }

    /// [`Self::fetch`] with `kb` as the key's buffer (given back filled).
    fn fetch_bytes_key(
        &self,
        key: &K,
        window_start: Timestamp,
        kb: &mut Vec<u8>,
    ) -> Result<Option<V>, Error> {
        self.serdes.key_into(key, kb)?;
        let cache_key = (std::mem::take(kb), window_start);
        let cached = self.cached(&cache_key);
        *kb = cache_key.0;
        if let Some(cached) = cached {
            return Ok(cached);
        }
        self.inner
            .fetch(kb, window_start)?
            .map(|b| self.serdes.value_from_bytes(&b))
            .transpose()
    }

    fn put(&mut self, key: K, value: Option<V>, window_start: Timestamp) -> Result<(), Error> {
        // The key through the reused buffer: the cache copies it only when
        // the window is new to it.
        let mut kb = std::mem::take(&mut self.scratch.get_mut().key);
        kb.clear();
        let mut cache_key = (kb, window_start);
        let result = self.put_in(&mut cache_key, key, value);
        self.scratch.get_mut().key = cache_key.0;
        result
    }

    /// [`Self::put`] with `cache_key` holding the window start and an
    /// empty buffer for the key bytes.
    fn put_in(
        &mut self,
        cache_key: &mut (Vec<u8>, Timestamp),
        key: K,
        value: Option<V>,
    ) -> Result<(), Error> {
        self.serdes.key_into(&key, &mut cache_key.0)?;
        let window_start = cache_key.1;
        let vb = match &value {
            Some(v) if self.cache.is_some() => self.cached_value_bytes(v)?,
            Some(v) => self.serdes.value_to_bytes(v)?,
            None => None,
        };
        if self.cache.is_none() {
            let now = self.clock.now();
            return self.write_down(cache_key, vb.as_deref(), now);
        }
        self.observed = self.observed.max(window_start);
        if self.expired(
            RetainedTime::WindowStart,
            window_start,
            self.inner.retention_period(),
        ) {
            log::warn!("store {}: skipping record for expired window", self.name);
            return Ok(());
        }
        let size = cache_key.0.len() + 8;
        self.write_cached(cache_key, size, value, vb)
    }
}

/// The metered layer: every read is a `fetch`, as in Kafka Streams'
/// `MeteredWindowStore`; iterators are timed until dropped.
impl<K: 'static, V: Clone + 'static> ReadOnlyWindowStore<K, V>
    for Metered<LayeredWindowStore<K, V>>
{
    fn fetch(&self, key: &K, window_start: Timestamp) -> Result<Option<V>, Error> {
        self.timed(Op::Fetch, |s| s.fetch(key, window_start))
    }
    fn fetch_time_range(
        &self,
        key: &K,
        time_from: Timestamp,
        time_to: Timestamp,
    ) -> Result<WindowStoreIter<'_, V>, Error> {
        self.timed_iter(Op::Fetch, |s| s.time_range(key, time_from, time_to, false))
    }
    fn backward_fetch_time_range(
        &self,
        key: &K,
        time_from: Timestamp,
        time_to: Timestamp,
    ) -> Result<WindowStoreIter<'_, V>, Error> {
        self.timed_iter(Op::Fetch, |s| s.time_range(key, time_from, time_to, true))
    }
    fn fetch_key_range(
        &self,
        key_from: Option<&K>,
        key_to: Option<&K>,
        time_from: Timestamp,
        time_to: Timestamp,
    ) -> Result<KeyValueIter<'_, Windowed<K>, V>, Error> {
        self.timed_iter(Op::Fetch, |s| {
            s.key_range(key_from, key_to, time_from, time_to, false)
        })
    }
    fn backward_fetch_key_range(
        &self,
        key_from: Option<&K>,
        key_to: Option<&K>,
        time_from: Timestamp,
        time_to: Timestamp,
    ) -> Result<KeyValueIter<'_, Windowed<K>, V>, Error> {
        self.timed_iter(Op::Fetch, |s| {
            s.key_range(key_from, key_to, time_from, time_to, true)
        })
    }
}

impl<K: 'static, V: Clone + 'static> WindowStore<K, V> for Metered<LayeredWindowStore<K, V>> {
    fn put(&mut self, key: K, value: Option<V>, window_start: Timestamp) -> Result<(), Error> {
        self.timed_mut(Op::Put, |s| s.put(key, value, window_start))
    }
    fn set_flush_listener(
        &mut self,
        listener: FlushListener<Windowed<K>, V>,
        send_old_values: bool,
    ) -> bool {
        self.inner_mut()
            .set_flush_listener(listener, send_old_values)
    }
}

/// Builds one window store per task: Kafka Streams' `WindowStoreBuilder`.
///
/// Logging is on and caching off until changed. Caching is never used for
/// a store that retains duplicates. Metrics are on (given a registry).
pub struct WindowStoreBuilder<K, V> {
    parts: BuilderParts<dyn WindowBytesStoreSupplier, K, V>,
    format: ValueFormat,
    /// Every changelog record is stamped at or after its window's start.
    stamped_in_window: bool,
}

impl<K: 'static, V: 'static> WindowStoreBuilder<K, V> {
    pub(crate) fn new(
        supplier: Arc<dyn WindowBytesStoreSupplier>,
        key_serde: impl Serde<K>,
        value_serde: SharedSerde<V>,
        format: ValueFormat,
    ) -> Self {
        WindowStoreBuilder {
            parts: BuilderParts::new(supplier, Arc::new(key_serde), value_serde),
            format,
            stamped_in_window: false,
        }
    }

    /// Promises that every record this store writes to its changelog is
    /// stamped at or after the start of its window, so that a restore
    /// without local state may start at the first changelog record stamped
    /// within the retention of the newest window and skip what lies before
    /// (windows the store would drop as expired anyway).
    ///
    /// The DSL's window aggregations keep the promise (a window's value
    /// carries the largest timestamp of its records, and a record only
    /// goes into windows that start at or before it), and so do the stores
    /// of windowed stream-stream joins (a record is put at its own
    /// timestamp into the window that starts there). A processor that puts
    /// into windows starting after its record's timestamp must not set it:
    /// the restore would lose those windows.
    pub fn with_changelog_stamped_in_window(mut self) -> Self {
        self.stamped_in_window = true;
        self
    }
}

store_builder_options!(WindowStoreBuilder, caching);

impl<K: 'static, V: Clone + 'static> StoreBuilder for WindowStoreBuilder<K, V> {
    fn name(&self) -> &str {
        self.parts.supplier.name()
    }
    fn logging_enabled(&self) -> bool {
        self.parts.options.logging_enabled()
    }
    fn log_config(&self) -> BTreeMap<String, String> {
        // Kafka Streams: compact,delete with retention.ms = retention + 1 day.
        let policy = if self.parts.supplier.retain_duplicates() {
            "delete"
        } else {
            "compact,delete"
        };
        self.parts.options.changelog_config([
            ("cleanup.policy", policy.to_string()),
            (
                "retention.ms",
                changelog_retention(self.parts.supplier.retention_period()),
            ),
        ])
    }
    fn windowed_changelog_retention(&self) -> Option<crate::Timestamp> {
        self.parts
            .options
            .windowed_changelog_retention(self.parts.supplier.retention_period())
    }
    fn restore_within_retention(&self) -> Option<crate::Timestamp> {
        self.stamped_in_window
            .then(|| self.parts.supplier.retention_period())
    }
    fn build(&self) -> BuiltStore {
        let inner = self.parts.supplier.get();
        // A store that retains duplicates has no cache: every put counts.
        let caching = self.parts.options.caching_enabled() && !inner.retain_duplicates();
        let store = LayeredStore::<WindowKind<K>, V>::new(inner, &self.parts, self.format)
            .with_cache(caching);
        let store_type = self.parts.supplier.metrics_scope();
        BuiltStore::metered(
            store,
            &self.parts.options,
            store_type,
            WINDOW_OPS,
            |s| -> WindowStoreHandle<K, V> { s },
        )
    }
}
