//! Key-value stores: the typed traits, the typed store over an engine with
//! its cache and changelog, and the builder.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::iter::Peekable;
use std::marker::PhantomData;
use std::ops::Bound;
use std::rc::Rc;
use std::sync::Arc;

use kstreams_record::Serde;

use crate::cache::FlushListener;
use crate::engine::{BytesIter, KeyValueBytesStore, KeyValueBytesStoreSupplier};
use crate::layered::{CachedKeyBytes, LayeredStore, Scratch, StoreKind};
use crate::metered::{Metered, Op, KEY_VALUE_OPS};
use crate::options::{store_builder_options, BuilderParts};
use crate::typed::{StoreSerdes, ValueFormat};
use crate::{BuiltStore, Error, StateStore, StoreBuilder, StoreIter, ValueAndTimestamp};

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

/// The key-value store type of the shared layers.
pub(crate) struct KeyValueKind<K>(PhantomData<K>);

impl<K: 'static> StoreKind for KeyValueKind<K> {
    type Key = K;
    type Engine = dyn KeyValueBytesStore;
    type CacheKey = CachedKeyBytes;
    type ChangeKey = K;

    fn engine_value(engine: &Self::Engine, key: &CachedKeyBytes) -> Result<Option<Vec<u8>>, Error> {
        engine.get(key)
    }
    fn engine_write<'k>(
        engine: &mut Self::Engine,
        key: &'k CachedKeyBytes,
        value: Option<&[u8]>,
    ) -> Result<Option<Cow<'k, [u8]>>, Error> {
        engine.put(key, value)?;
        Ok(Some(Cow::Borrowed(key)))
    }
    fn key_bytes(key: &CachedKeyBytes) -> &[u8] {
        key
    }
    fn change_key(_: &Self::Engine, key: K, _: &CachedKeyBytes) -> K {
        key
    }
}

/// A typed key-value store over a byte engine, with its cache and
/// changelog; the metered layer goes on top.
type LayeredKeyValueStore<K, V> = LayeredStore<KeyValueKind<K>, V>;

/// The key-value store under its metered layer.
impl<K: 'static, V: Clone + 'static> LayeredKeyValueStore<K, V> {
    /// `write_down` of an uncached write: its key bytes need not become a
    /// cache key first.
    fn write_down_bytes(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
        timestamp: crate::Timestamp,
    ) -> Result<(), Error> {
        self.inner.put(key, value)?;
        self.log_change(key, value, timestamp)
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
        let mut cache = cache.borrow_mut();
        let cached = |b: Bound<Vec<u8>>| b.map(|k| CachedKeyBytes::from_slice(&k));
        let mut snapshot: Vec<(Vec<u8>, Option<V>)> = cache
            .range((cached(from), cached(to)))
            .map(|(k, e)| (k.to_vec(), e.value.clone()))
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

    fn get(&self, key: &K) -> Result<Option<V>, Error> {
        // Only a re-entrant call (none today) would find the buffers taken;
        // it gets fresh ones.
        let mut own = Scratch::default();
        let mut borrowed = self.scratch.try_borrow_mut();
        let scratch = match &mut borrowed {
            Ok(scratch) => &mut **scratch,
            Err(_) => &mut own,
        };
        let Scratch {
            key: kb,
            value: vb,
            cache_key: ck,
            ..
        } = scratch;
        kb.clear();
        vb.clear();
        self.serdes.key_into(key, kb)?;
        if let Some(cache) = &self.cache {
            let mut cache = cache.borrow_mut();
            ck.clear();
            ck.extend_from_slice(kb);
            if let Some(entry) = cache.get(ck) {
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
            cache.put_clean_if_room(ck.clone(), kb.len(), value.clone(), len);
            return Ok(value);
        }
        if self.inner.get_into(kb, vb)? {
            Ok(Some(self.serdes.value_from_bytes(vb)?))
        } else {
            Ok(None)
        }
    }
    fn range(
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
    fn prefix_scan(&self, prefix: &[u8]) -> Result<KeyValueIter<'_, K, V>, Error> {
        let to = crate::engine::backend::prefix_successor(prefix)
            .map_or(Bound::Unbounded, Bound::Excluded);
        self.range_bytes(Bound::Included(prefix.to_vec()), to, false)
    }
    fn put(&mut self, key: K, value: V) -> Result<(), Error> {
        if self.cache.is_none() {
            // Straight to the engine (and changelog): through the reused
            // buffers.
            let mut scratch = std::mem::take(self.scratch.get_mut());
            let result = self.put_uncached(&key, &value, &mut scratch);
            *self.scratch.get_mut() = scratch;
            return result;
        }
        // The key through the reused buffers: the cache copies it only
        // when the key is new to it.
        let scratch = self.scratch.get_mut();
        let mut kb = std::mem::take(&mut scratch.key);
        let mut ck = std::mem::take(&mut scratch.cache_key);
        kb.clear();
        let result = self.put_cached(key, value, &mut kb, &mut ck);
        let scratch = self.scratch.get_mut();
        scratch.key = kb;
        scratch.cache_key = ck;
        result
    }
    fn put_cached(
        &mut self,
        key: K,
        value: V,
        kb: &mut Vec<u8>,
        ck: &mut CachedKeyBytes,
    ) -> Result<(), Error> {
        self.serdes.key_into(&key, kb)?;
        ck.clear();
        ck.extend_from_slice(kb);
        let vb = self.cached_value_bytes(&value)?;
        self.write_cached(ck, kb.len(), Some(value), vb)
    }
    fn put_uncached(&mut self, key: &K, value: &V, scratch: &mut Scratch) -> Result<(), Error> {
        scratch.key.clear();
        scratch.value.clear();
        self.serdes.key_into(key, &mut scratch.key)?;
        let non_null = self.serdes.value_into(value, &mut scratch.value)?;
        let now = self.clock.now();
        self.write_down_bytes(&scratch.key, non_null.then_some(&scratch.value[..]), now)
    }
    fn put_if_absent(&mut self, key: K, value: V) -> Result<Option<V>, Error> {
        if let Some(existing) = self.get(&key)? {
            return Ok(Some(existing));
        }
        self.put(key, value)?;
        Ok(None)
    }
    fn delete(&mut self, key: &K) -> Result<Option<V>, Error> {
        let old = self.get(key)?;
        let kb = self.serdes.key_to_bytes(key)?;
        if self.cache.is_some() {
            let len = kb.len();
            self.write_cached(&CachedKeyBytes::from_slice(&kb), len, None, None)?;
        } else {
            let now = self.clock.now();
            self.write_down_bytes(&kb, None, now)?;
        }
        Ok(old)
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

/// The metered layer: each call is timed once, under its own name, even
/// when made of others (`put_if_absent` is a get and a put).
impl<K: 'static, V: Clone + 'static> ReadOnlyKeyValueStore<K, V>
    for Metered<LayeredKeyValueStore<K, V>>
{
    fn get(&self, key: &K) -> Result<Option<V>, Error> {
        self.timed(Op::Get, |s| s.get(key))
    }
    fn range(&self, from: Option<&K>, to: Option<&K>) -> Result<KeyValueIter<'_, K, V>, Error> {
        self.timed_iter(Op::Range, |s| s.range(from, to, false))
    }
    fn reverse_range(
        &self,
        from: Option<&K>,
        to: Option<&K>,
    ) -> Result<KeyValueIter<'_, K, V>, Error> {
        self.timed_iter(Op::Range, |s| s.range(from, to, true))
    }
    fn all(&self) -> Result<KeyValueIter<'_, K, V>, Error> {
        self.timed_iter(Op::All, |s| s.range(None, None, false))
    }
    fn reverse_all(&self) -> Result<KeyValueIter<'_, K, V>, Error> {
        self.timed_iter(Op::All, |s| s.range(None, None, true))
    }
    fn prefix_scan(&self, prefix: &[u8]) -> Result<KeyValueIter<'_, K, V>, Error> {
        self.timed_iter(Op::PrefixScan, |s| s.prefix_scan(prefix))
    }
    fn approximate_num_entries(&self) -> Result<u64, Error> {
        self.inner().inner.approximate_num_entries()
    }
}

impl<K: 'static, V: Clone + 'static> KeyValueStore<K, V> for Metered<LayeredKeyValueStore<K, V>> {
    fn put(&mut self, key: K, value: V) -> Result<(), Error> {
        self.timed_mut(Op::Put, |s| s.put(key, value))
    }
    fn put_if_absent(&mut self, key: K, value: V) -> Result<Option<V>, Error> {
        self.timed_mut(Op::PutIfAbsent, |s| s.put_if_absent(key, value))
    }
    fn put_all(&mut self, entries: Vec<(K, V)>) -> Result<(), Error> {
        self.timed_mut(Op::PutAll, |s| {
            entries.into_iter().try_for_each(|(k, v)| s.put(k, v))
        })
    }
    fn delete(&mut self, key: &K) -> Result<Option<V>, Error> {
        self.timed_mut(Op::Delete, |s| s.delete(key))
    }
    fn set_flush_listener(&mut self, listener: FlushListener<K, V>, send_old_values: bool) -> bool {
        self.inner_mut()
            .set_flush_listener(listener, send_old_values)
    }
}

/// Builds one key-value store per task: Kafka Streams'
/// `KeyValueStoreBuilder` (from [`crate::Stores::key_value_store_builder`]).
///
/// Logging is on and caching off until changed, as in Kafka Streams;
/// metrics are on (they cost nothing until the task's [`StoreContext`] has
/// a registry).
pub struct KeyValueStoreBuilder<K, V> {
    parts: BuilderParts<dyn KeyValueBytesStoreSupplier, K, V>,
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
            parts: BuilderParts::new(supplier, Arc::new(key_serde), Arc::new(value_serde)),
            format,
        }
    }
}

store_builder_options!(KeyValueStoreBuilder, caching);

impl<K: 'static, V: Clone + 'static> StoreBuilder for KeyValueStoreBuilder<K, V> {
    fn name(&self) -> &str {
        self.parts.supplier.name()
    }
    fn logging_enabled(&self) -> bool {
        self.parts.options.logging_enabled()
    }
    fn log_config(&self) -> BTreeMap<String, String> {
        self.parts
            .options
            .changelog_config([("cleanup.policy", "compact".to_string())])
    }
    fn build(&self) -> BuiltStore {
        let inner = self.parts.supplier.get();
        let store = LayeredStore::<KeyValueKind<K>, V>::new(inner, &self.parts, self.format)
            .with_cache(self.parts.options.caching_enabled());
        let store_type = self.parts.supplier.metrics_scope();
        BuiltStore::metered(
            store,
            &self.parts.options,
            store_type,
            KEY_VALUE_OPS,
            |s| -> KeyValueStoreHandle<K, V> { s },
        )
    }
}
