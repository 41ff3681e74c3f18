//! Versioned key-value stores (KIP-889): the typed trait, the typed store
//! over an engine with its changelog, and the builder.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use kstreams_record::{Serde, SharedSerde};

use crate::changelog::ChangeLogger;
use crate::engine::{VersionedBytes, VersionedBytesStore, VersionedBytesStoreSupplier};
use crate::metered::{Metering, VERSIONED_OPS};
use crate::typed::StoreSerdes;
use crate::{
    BuiltStore, ChangelogRecord, Error, StateStore, StoreBuilder, StoreContext, Timestamp,
};

/// What [`VersionedKeyValueStore::put`] returns when the put was older than
/// the history retention and was dropped.
pub const PUT_RETURN_CODE_NOT_PUT: Timestamp = i64::MIN;
/// What [`VersionedKeyValueStore::put`] returns when the new version is the
/// latest (its valid-to is open).
pub const PUT_RETURN_CODE_VALID_TO_UNDEFINED: Timestamp = i64::MAX;

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

pub(crate) struct TypedVersionedStore<K, V> {
    name: String,
    serdes: StoreSerdes<K, V>,
    inner: Box<dyn VersionedBytesStore>,
    logger: Option<ChangeLogger>,
    metering: Metering,
}

impl<K: 'static, V: 'static> TypedVersionedStore<K, V> {
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

    fn put_raw(
        &mut self,
        key: K,
        value: Option<V>,
        timestamp: Timestamp,
    ) -> Result<Timestamp, Error> {
        let kb = self.serdes.key_to_bytes(&key)?;
        let vb = match &value {
            Some(v) => self.serdes.value_to_bytes(v)?,
            None => None,
        };
        let valid_to = self.inner.put(&kb, vb.as_deref(), timestamp)?;
        // Logged even when dropped, as Kafka Streams does: restoring applies
        // the same grace period.
        if let Some(logger) = &self.logger {
            logger.log(&kb, vb.as_deref(), timestamp)?;
        }
        Ok(valid_to)
    }

    fn delete_raw(
        &mut self,
        key: &K,
        timestamp: Timestamp,
    ) -> Result<Option<VersionedRecord<V>>, Error> {
        let kb = self.serdes.key_to_bytes(key)?;
        let old = self.inner.delete(&kb, timestamp)?;
        if let Some(logger) = &self.logger {
            logger.log(&kb, None, timestamp)?;
        }
        self.record(old)
    }

    fn get_raw(
        &self,
        key: &K,
        as_of: Option<Timestamp>,
    ) -> Result<Option<VersionedRecord<V>>, Error> {
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
impl<K: 'static, V: 'static> VersionedKeyValueStore<K, V> for TypedVersionedStore<K, V> {
    fn put(&mut self, key: K, value: Option<V>, timestamp: Timestamp) -> Result<Timestamp, Error> {
        let start = self.metering.sensors.put.start();
        let result = self.put_raw(key, value, timestamp);
        self.metering.sensors.put.record(start);
        result
    }
    fn delete(
        &mut self,
        key: &K,
        timestamp: Timestamp,
    ) -> Result<Option<VersionedRecord<V>>, Error> {
        let start = self.metering.sensors.delete.start();
        let result = self.delete_raw(key, timestamp);
        self.metering.sensors.delete.record(start);
        result
    }
    fn get(&self, key: &K) -> Result<Option<VersionedRecord<V>>, Error> {
        let sensor = &self.metering.sensors.get;
        let start = sensor.start();
        let result = self.get_raw(key, None);
        sensor.record(start);
        result
    }
    fn get_as_of(&self, key: &K, as_of: Timestamp) -> Result<Option<VersionedRecord<V>>, Error> {
        let sensor = &self.metering.sensors.get;
        let start = sensor.start();
        let result = self.get_raw(key, Some(as_of));
        sensor.record(start);
        result
    }
}

impl<K: 'static, V: 'static> StateStore for TypedVersionedStore<K, V> {
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
        self.metering.init(&self.name, context, VERSIONED_OPS)
    }
    fn flush(&mut self) -> Result<(), Error> {
        let start = self.metering.sensors.flush.start();
        let result = self.inner.flush();
        self.metering.sensors.flush.record(start);
        result
    }
    fn close(&mut self) -> Result<(), Error> {
        let closed = self.inner.close();
        self.metering.close();
        closed
    }
    fn restore_batch(&mut self, records: &[ChangelogRecord<'_>]) -> Result<(), Error> {
        self.inner.restore_batch(records)
    }
}

/// Builds one versioned store per task: Kafka Streams'
/// `VersionedKeyValueStoreBuilder`. Logging and metrics (given a registry)
/// are on until changed; versioned stores have no cache.
pub struct VersionedKeyValueStoreBuilder<K, V> {
    supplier: Arc<dyn VersionedBytesStoreSupplier>,
    key_serde: SharedSerde<K>,
    value_serde: SharedSerde<V>,
    logging: bool,
    log_config: BTreeMap<String, String>,
    metrics: bool,
}

impl<K: 'static, V: 'static> VersionedKeyValueStoreBuilder<K, V> {
    pub(crate) fn new(
        supplier: Arc<dyn VersionedBytesStoreSupplier>,
        key_serde: impl Serde<K>,
        value_serde: impl Serde<V>,
    ) -> Self {
        VersionedKeyValueStoreBuilder {
            supplier,
            key_serde: Arc::new(key_serde),
            value_serde: Arc::new(value_serde),
            logging: true,
            log_config: BTreeMap::new(),
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

impl<K: 'static, V: 'static> StoreBuilder for VersionedKeyValueStoreBuilder<K, V> {
    fn name(&self) -> &str {
        self.supplier.name()
    }
    fn logging_enabled(&self) -> bool {
        self.logging
    }
    fn log_config(&self) -> BTreeMap<String, String> {
        // Kafka Streams: compacted, and min.compaction.lag.ms covers the
        // history retention plus a day.
        let lag = self
            .supplier
            .history_retention()
            .saturating_add(24 * 60 * 60 * 1000);
        let mut config = BTreeMap::from([
            ("cleanup.policy".to_string(), "compact".to_string()),
            ("min.compaction.lag.ms".to_string(), lag.to_string()),
        ]);
        config.extend(self.log_config.clone());
        config
    }
    fn build(&self) -> BuiltStore {
        let inner = self.supplier.get();
        let name = inner.name().to_string();
        let store = Rc::new(RefCell::new(TypedVersionedStore {
            serdes: StoreSerdes::new(&name, self.key_serde.clone(), self.value_serde.clone()),
            logger: self.logging.then(|| ChangeLogger::new(&name)),
            name,
            inner,
            metering: Metering::new(self.metrics, self.supplier.metrics_scope()),
        }));
        let handle: VersionedKeyValueStoreHandle<K, V> = store.clone();
        BuiltStore::new(store, handle)
    }
}
