//! Session stores: the typed traits, the typed store over an engine with
//! its cache and changelog, and the builder.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::ops::Bound;
use std::rc::Rc;
use std::sync::Arc;

use kstreams_record::Serde;

use crate::cache::FlushListener;
use crate::engine::{SessionBytesEntry, SessionBytesStore, SessionBytesStoreSupplier};
use crate::format::session_key;
use crate::key_value::KeyValueIter;
use crate::layered::{Found, LayeredStore, StoreKind};
use crate::metered::{Metered, Op, SESSION_OPS};
use crate::options::{changelog_retention, store_builder_options, BuilderParts};
use crate::typed::ValueFormat;
use crate::{BuiltStore, Error, StateStore, StoreBuilder, Timestamp, Window, Windowed};

/// Reads of a session store: Kafka Streams' `ReadOnlySessionStore`.
///
/// Sessions come in (end, key bytes, start) order, backward variants in the
/// exact reverse. The store finds only sessions that ended after `stream
/// time - retention` (stream time being the largest session end put), as
/// Kafka Streams' session stores do; with caching, a session still in the
/// cache is found whatever its end, as in Kafka Streams' caching layer.
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

/// A session found by a query: key bytes, window, value.
type FoundSession<V> = (Vec<u8>, Window, Found<V>);

/// The session store type of the shared layers; the cache is keyed by
/// (key bytes, start, end).
pub(crate) struct SessionKind<K>(PhantomData<K>);

impl<K: 'static> StoreKind for SessionKind<K> {
    type Key = K;
    type Engine = dyn SessionBytesStore;
    type CacheKey = (Vec<u8>, Timestamp, Timestamp);
    type ChangeKey = Windowed<K>;

    fn engine_value(
        engine: &Self::Engine,
        (key, start, end): &Self::CacheKey,
    ) -> Result<Option<Vec<u8>>, Error> {
        engine.fetch_session(key, *start, *end)
    }
    fn engine_write<'k>(
        engine: &mut Self::Engine,
        (key, start, end): &'k Self::CacheKey,
        value: Option<&[u8]>,
    ) -> Result<Option<Cow<'k, [u8]>>, Error> {
        let written = engine.put(key, *start, *end, value)?;
        Ok(written.then(|| Cow::Owned(session_key(key, *start, *end))))
    }
    fn key_bytes((key, _, _): &Self::CacheKey) -> &[u8] {
        key
    }
    fn change_key(_: &Self::Engine, key: K, (_, start, end): &Self::CacheKey) -> Windowed<K> {
        Windowed::new(key, Window::new(*start, *end))
    }
    fn restored_time(changelog_key: &[u8]) -> Option<Timestamp> {
        crate::format::parse_session_key(changelog_key).map(|(_, _, end)| end)
    }
}

/// A typed session store over a byte engine, with its cache and changelog;
/// the metered layer goes on top.
type LayeredSessionStore<K, V> = LayeredStore<SessionKind<K>, V>;

impl<K: 'static, V: Clone + 'static> LayeredSessionStore<K, V> {
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
        let ends = (earliest_end, i64::MAX);
        Ok(self.merge_cache(engine, key_from, key_to, ends, latest_start, reverse))
    }

    /// The sessions of every key ending in `[earliest_end, latest_end]`:
    /// the engine's scan by end time, and the cache.
    fn collect_ending_in(
        &self,
        earliest_end: Timestamp,
        latest_end: Timestamp,
    ) -> Result<Vec<FoundSession<V>>, Error> {
        let engine = self.inner.sessions_ending_in(earliest_end, latest_end)?;
        let ends = (earliest_end, latest_end);
        Ok(self.merge_cache(engine, None, None, ends, i64::MAX, false))
    }

    /// `engine`'s sessions overlaid with the cache's for the same keys,
    /// ends and starts. As in Kafka Streams' `CachingSessionStore`, the
    /// cache shows what it holds without a retention bound of its own: the
    /// engine alone decides what it still finds.
    fn merge_cache(
        &self,
        engine: Vec<SessionBytesEntry>,
        key_from: Option<&[u8]>,
        key_to: Option<&[u8]>,
        (min_end, max_end): (Timestamp, Timestamp),
        latest_start: Timestamp,
        reverse: bool,
    ) -> Vec<FoundSession<V>> {
        let Some(cache) = &self.cache else {
            return engine
                .into_iter()
                .map(|e| (e.key, Window::new(e.start, e.end), Found::Bytes(e.value)))
                .collect();
        };
        let mut merged: BTreeMap<(Timestamp, Vec<u8>, Timestamp), Option<Found<V>>> = engine
            .into_iter()
            .map(|e| ((e.end, e.key, e.start), Some(Found::Bytes(e.value))))
            .collect();
        // The cache is ordered by (key, start, end): only the keys asked for.
        let lo = Bound::Included((key_from.unwrap_or_default().to_vec(), i64::MIN, i64::MIN));
        let hi = key_to.map_or(Bound::Unbounded, |t| {
            Bound::Included((t.to_vec(), i64::MAX, i64::MAX))
        });
        for ((k, start, end), entry) in cache.borrow_mut().range((lo, hi)) {
            if !(min_end..=max_end).contains(end) || *start > latest_start {
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
        if reverse {
            out.rev().collect()
        } else {
            out.collect()
        }
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
        Ok(self.typed(found))
    }

    fn find_ending_in(
        &self,
        earliest_end: Timestamp,
        latest_end: Timestamp,
    ) -> Result<KeyValueIter<'_, Windowed<K>, V>, Error> {
        Ok(self.typed(self.collect_ending_in(earliest_end, latest_end)?))
    }

    /// Found sessions as typed records, deserialized as they are read.
    fn typed(&self, found: Vec<FoundSession<V>>) -> KeyValueIter<'_, Windowed<K>, V> {
        Box::new(found.into_iter().map(move |(k, window, v)| {
            let value = v.value(&self.serdes)?;
            Ok((
                Windowed::new(self.serdes.key_from_bytes(&k)?, window),
                value,
            ))
        }))
    }

    fn fetch_session(&self, key: &K, start: Timestamp, end: Timestamp) -> Result<Option<V>, Error> {
        let key = (self.serdes.key_to_bytes(key)?, start, end);
        if let Some(cached) = self.cached(&key) {
            return Ok(cached);
        }
        self.inner
            .fetch_session(&key.0, start, end)?
            .map(|b| self.serdes.value_from_bytes(&b))
            .transpose()
    }

    /// Puts (`Some`) or removes a session.
    fn write(
        &mut self,
        kb: Vec<u8>,
        Window { start, end }: Window,
        value: Option<V>,
        bytes: Option<Vec<u8>>,
    ) -> Result<(), Error> {
        if self.cache.is_none() {
            let now = self.clock.now();
            return self.write_down(&(kb, start, end), bytes.as_deref(), now);
        }
        // No retention check here: as Kafka Streams' `CachingSessionStore`,
        // the cache takes every put; the engine drops an expired one when
        // it is flushed down.
        self.observed = self.observed.max(end);
        let size = kb.len() + 16;
        self.write_cached(&(kb, start, end), size, value, bytes)
    }

    fn put(&mut self, session: Windowed<K>, value: Option<V>) -> Result<(), Error> {
        let kb = self.serdes.key_to_bytes(&session.key)?;
        let bytes = match &value {
            Some(v) => self.serdes.value_to_bytes(v)?,
            None => None,
        };
        self.write(kb, session.window, value, bytes)
    }

    fn remove(&mut self, session: &Windowed<K>) -> Result<(), Error> {
        let kb = self.serdes.key_to_bytes(&session.key)?;
        self.write(kb, session.window, None, None)
    }
}

/// The metered layer: every read is a `fetch`, as in Kafka Streams'
/// `MeteredSessionStore`; iterators are timed until dropped.
impl<K: 'static, V: Clone + 'static> ReadOnlySessionStore<K, V>
    for Metered<LayeredSessionStore<K, V>>
{
    fn fetch_session(&self, key: &K, start: Timestamp, end: Timestamp) -> Result<Option<V>, Error> {
        self.timed(Op::Fetch, |s| s.fetch_session(key, start, end))
    }
    fn find_sessions(
        &self,
        key: &K,
        earliest_end: Timestamp,
        latest_start: Timestamp,
    ) -> Result<KeyValueIter<'_, Windowed<K>, V>, Error> {
        let key = Some(key);
        self.timed_iter(Op::Fetch, |s| {
            s.find(key, key, earliest_end, latest_start, false)
        })
    }
    fn backward_find_sessions(
        &self,
        key: &K,
        earliest_end: Timestamp,
        latest_start: Timestamp,
    ) -> Result<KeyValueIter<'_, Windowed<K>, V>, Error> {
        let key = Some(key);
        self.timed_iter(Op::Fetch, |s| {
            s.find(key, key, earliest_end, latest_start, true)
        })
    }
    fn find_sessions_key_range(
        &self,
        key_from: Option<&K>,
        key_to: Option<&K>,
        earliest_end: Timestamp,
        latest_start: Timestamp,
    ) -> Result<KeyValueIter<'_, Windowed<K>, V>, Error> {
        self.timed_iter(Op::Fetch, |s| {
            s.find(key_from, key_to, earliest_end, latest_start, false)
        })
    }
    fn backward_find_sessions_key_range(
        &self,
        key_from: Option<&K>,
        key_to: Option<&K>,
        earliest_end: Timestamp,
        latest_start: Timestamp,
    ) -> Result<KeyValueIter<'_, Windowed<K>, V>, Error> {
        self.timed_iter(Op::Fetch, |s| {
            s.find(key_from, key_to, earliest_end, latest_start, true)
        })
    }
    fn find_sessions_ending_in(
        &self,
        earliest_end: Timestamp,
        latest_end: Timestamp,
    ) -> Result<KeyValueIter<'_, Windowed<K>, V>, Error>
    where
        K: 'static,
        V: 'static,
    {
        self.timed_iter(Op::Fetch, |s| s.find_ending_in(earliest_end, latest_end))
    }
}

impl<K: 'static, V: Clone + 'static> SessionStore<K, V> for Metered<LayeredSessionStore<K, V>> {
    fn put(&mut self, session: Windowed<K>, value: Option<V>) -> Result<(), Error> {
        self.timed_mut(Op::Put, |s| s.put(session, value))
    }
    fn remove(&mut self, session: &Windowed<K>) -> Result<(), Error> {
        self.timed_mut(Op::Remove, |s| s.remove(session))
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

/// Builds one session store per task: Kafka Streams' `SessionStoreBuilder`.
///
/// Logging is on and caching off until changed; metrics are on (given a
/// registry).
pub struct SessionStoreBuilder<K, V> {
    parts: BuilderParts<dyn SessionBytesStoreSupplier, K, V>,
}

impl<K: 'static, V: 'static> SessionStoreBuilder<K, V> {
    pub(crate) fn new(
        supplier: Arc<dyn SessionBytesStoreSupplier>,
        key_serde: impl Serde<K>,
        value_serde: impl Serde<V>,
    ) -> Self {
        SessionStoreBuilder {
            parts: BuilderParts::new(supplier, Arc::new(key_serde), Arc::new(value_serde)),
        }
    }
}

store_builder_options!(SessionStoreBuilder, caching);

impl<K: 'static, V: Clone + 'static> StoreBuilder for SessionStoreBuilder<K, V> {
    fn name(&self) -> &str {
        self.parts.supplier.name()
    }
    fn logging_enabled(&self) -> bool {
        self.parts.options.logging_enabled()
    }
    fn log_config(&self) -> BTreeMap<String, String> {
        self.parts.options.changelog_config([
            ("cleanup.policy", "compact,delete".to_string()),
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
    fn build(&self) -> BuiltStore {
        let inner = self.parts.supplier.get();
        let store = LayeredStore::<SessionKind<K>, V>::new(inner, &self.parts, ValueFormat::Plain)
            .with_cache(self.parts.options.caching_enabled());
        let store_type = self.parts.supplier.metrics_scope();
        BuiltStore::metered(
            store,
            &self.parts.options,
            store_type,
            SESSION_OPS,
            |s| -> SessionStoreHandle<K, V> { s },
        )
    }
}
