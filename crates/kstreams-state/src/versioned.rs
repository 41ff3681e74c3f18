//! Versioned key-value stores (KIP-889): the typed trait, the typed store
//! over an engine with its changelog, and the builder.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::Arc;

use kstreams_record::Serde;

use crate::engine::{VersionedBytes, VersionedBytesStore, VersionedBytesStoreSupplier};
use crate::layered::{LayeredStore, StoreKind};
use crate::metered::{Metered, Op, VERSIONED_OPS};
use crate::options::{changelog_retention, store_builder_options, BuilderParts};
use crate::typed::ValueFormat;
use crate::{BuiltStore, Error, StateStore, StoreBuilder, Timestamp};

pub use crate::engine::{PUT_RETURN_CODE_NOT_PUT, PUT_RETURN_CODE_VALID_TO_UNDEFINED};

/// One version of a key: Kafka Streams' `VersionedRecord`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionedRecord<V> {
    /// The value.
    pub value: V,
    /// When the version became valid (inclusive).
    pub timestamp: Timestamp,
    /// When the next version took over (exclusive); `None` for the latest.
    pub valid_to: Option<Timestamp>,
}

/// A versioned key-value store: Kafka Streams' `VersionedKeyValueStore`.
///
/// Each put adds a version valid from its timestamp until the next
/// version's. Stream time is the largest timestamp put. Puts and deletes
/// older than `stream time - history retention` are dropped (the history
/// retention is also the grace period); reads as of a time older than that
/// see only the latest version, which never expires.
pub trait VersionedKeyValueStore<K, V>: StateStore {
    /// Adds a version (`None` is a tombstone). Returns its valid-to,
    /// [`PUT_RETURN_CODE_VALID_TO_UNDEFINED`] if it is the latest, or
    /// [`PUT_RETURN_CODE_NOT_PUT`] when it was too old.
    fn put(&mut self, key: K, value: Option<V>, timestamp: Timestamp) -> Result<Timestamp, Error>;
    /// Adds a tombstone at `timestamp`; returns the version valid then.
    fn delete(
        &mut self,
        key: &K,
        timestamp: Timestamp,
    ) -> Result<Option<VersionedRecord<V>>, Error>;
    /// The latest version, unless it is a tombstone.
    fn get(&self, key: &K) -> Result<Option<VersionedRecord<V>>, Error>;
    /// The version valid at `as_of`.
    fn get_as_of(&self, key: &K, as_of: Timestamp) -> Result<Option<VersionedRecord<V>>, Error>;
}

/// A typed handle on a task's versioned store.
pub type VersionedKeyValueStoreHandle<K, V> = Rc<RefCell<dyn VersionedKeyValueStore<K, V>>>;

/// The versioned store type of the shared layers: no cache (its cache key
/// is uninhabited), a changelog written by the store itself.
pub(crate) struct VersionedKind<K>(PhantomData<K>);

impl<K: 'static> StoreKind for VersionedKind<K> {
    type Key = K;
    type Engine = dyn VersionedBytesStore;
    type CacheKey = Infallible;
    type ChangeKey = K;

    fn engine_value(_: &Self::Engine, key: &Infallible) -> Result<Option<Vec<u8>>, Error> {
        match *key {}
    }
    fn engine_write<'k>(
        _: &mut Self::Engine,
        key: &'k Infallible,
        _: Option<&[u8]>,
    ) -> Result<Option<Cow<'k, [u8]>>, Error> {
        match *key {}
    }
    fn key_bytes(key: &Infallible) -> &[u8] {
        match *key {}
    }
    fn change_key(_: &Self::Engine, _: K, cached: &Infallible) -> K {
        match *cached {}
    }
}

/// A typed versioned store over a byte engine, with its changelog; the
/// metered layer goes on top.
type LayeredVersionedStore<K, V> = LayeredStore<VersionedKind<K>, V>;

impl<K: 'static, V: 'static> LayeredVersionedStore<K, V> {
    fn record(&self, found: Option<VersionedBytes>) -> Result<Option<VersionedRecord<V>>, Error> {
        found
            .map(|b| {
                Ok(VersionedRecord {
                    value: self.serdes.value_from_bytes(&b.value)?,
                    timestamp: b.timestamp,
                    valid_to: b.valid_to,
                })
            })
            .transpose()
    }

    fn put(&mut self, key: K, value: Option<V>, timestamp: Timestamp) -> Result<Timestamp, Error> {
        let kb = self.serdes.key_to_bytes(&key)?;
        let vb = match &value {
            Some(v) => self.serdes.value_to_bytes(v)?,
            None => None,
        };
        let valid_to = self.inner.put(&kb, vb.as_deref(), timestamp)?;
        // Logged even when dropped, as Kafka Streams does: restoring applies
        // the same grace period.
        self.log(&kb, vb.as_deref(), timestamp)?;
        Ok(valid_to)
    }

    fn delete(
        &mut self,
        key: &K,
        timestamp: Timestamp,
    ) -> Result<Option<VersionedRecord<V>>, Error> {
        let kb = self.serdes.key_to_bytes(key)?;
        let old = self.inner.delete(&kb, timestamp)?;
        self.log(&kb, None, timestamp)?;
        self.record(old)
    }

    fn get(&self, key: &K, as_of: Option<Timestamp>) -> Result<Option<VersionedRecord<V>>, Error> {
        let kb = self.serdes.key_to_bytes(key)?;
        let found = match as_of {
            None => self.inner.get(&kb)?,
            Some(as_of) => self.inner.get_as_of(&kb, as_of)?,
        };
        self.record(found)
    }
}

/// The metered layer, as Kafka Streams' `MeteredVersionedKeyValueStore`:
/// both gets are a `get`.
impl<K: 'static, V: 'static> VersionedKeyValueStore<K, V> for Metered<LayeredVersionedStore<K, V>> {
    fn put(&mut self, key: K, value: Option<V>, timestamp: Timestamp) -> Result<Timestamp, Error> {
        self.timed_mut(Op::Put, |s| s.put(key, value, timestamp))
    }
    fn delete(
        &mut self,
        key: &K,
        timestamp: Timestamp,
    ) -> Result<Option<VersionedRecord<V>>, Error> {
        self.timed_mut(Op::Delete, |s| s.delete(key, timestamp))
    }
    fn get(&self, key: &K) -> Result<Option<VersionedRecord<V>>, Error> {
        self.timed(Op::Get, |s| s.get(key, None))
    }
    fn get_as_of(&self, key: &K, as_of: Timestamp) -> Result<Option<VersionedRecord<V>>, Error> {
        self.timed(Op::Get, |s| s.get(key, Some(as_of)))
    }
}

/// Builds one versioned store per task: Kafka Streams'
/// `VersionedKeyValueStoreBuilder`. Logging and metrics (given a registry)
/// are on until changed; versioned stores have no cache.
pub struct VersionedKeyValueStoreBuilder<K, V> {
    parts: BuilderParts<dyn VersionedBytesStoreSupplier, K, V>,
}

impl<K: 'static, V: 'static> VersionedKeyValueStoreBuilder<K, V> {
    pub(crate) fn new(
        supplier: Arc<dyn VersionedBytesStoreSupplier>,
        key_serde: impl Serde<K>,
        value_serde: impl Serde<V>,
    ) -> Self {
        VersionedKeyValueStoreBuilder {
            parts: BuilderParts::new(supplier, Arc::new(key_serde), Arc::new(value_serde)),
        }
    }
}

store_builder_options!(VersionedKeyValueStoreBuilder);

impl<K: 'static, V: 'static> StoreBuilder for VersionedKeyValueStoreBuilder<K, V> {
    fn name(&self) -> &str {
        self.parts.supplier.name()
    }
    fn logging_enabled(&self) -> bool {
        self.parts.options.logging_enabled()
    }
    fn log_config(&self) -> BTreeMap<String, String> {
        // Kafka Streams: compacted, and min.compaction.lag.ms covers the
        // history retention plus a day.
        self.parts.options.changelog_config([
            ("cleanup.policy", "compact".to_string()),
            (
                "min.compaction.lag.ms",
                changelog_retention(self.parts.supplier.history_retention()),
            ),
        ])
    }
    fn build(&self) -> BuiltStore {
        let inner = self.parts.supplier.get();
        let store =
            LayeredStore::<VersionedKind<K>, V>::new(inner, &self.parts, ValueFormat::Plain);
        let store_type = self.parts.supplier.metrics_scope();
        BuiltStore::metered(
            store,
            &self.parts.options,
            store_type,
            VERSIONED_OPS,
            |s| -> VersionedKeyValueStoreHandle<K, V> { s },
        )
    }
}
