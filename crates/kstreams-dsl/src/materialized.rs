//! `Materialized` and `Grouped`: how a DSL operator keeps its state and
//! names its repartition topic.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kstreams_record::{Serde, SharedSerde};
use kstreams_state::{
    KeyValueStoreBuilder, SessionStoreBuilder, StoreBuilder, StoreOptions, Stores,
    ValueAndTimestamp, WindowStoreBuilder,
};
use kstreams_time::duration_ms;

use crate::TopologyError;

/// Where a store keeps its data.
///
/// Without the `rocksdb` feature (on by default) RocksDB is not compiled
/// in: the default store type is then [`StoreType::InMemory`], so a
/// topology written for Kafka Streams' defaults runs unchanged with its
/// stores in memory, rebuilt from their changelogs at each start. A store
/// that asks for [`StoreType::RocksDb`] by name is refused with a
/// [`TopologyError`] when the topology is built, rather than quietly kept
/// in memory: whoever chose disk may rely on state larger than memory or on
/// a restart that does not replay the changelog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreType {
    /// RocksDB on the task's state directory (Kafka Streams' default).
    RocksDb,
    /// An ordered map in memory, rebuilt from the changelog on restart.
    InMemory,
}

impl Default for StoreType {
    /// RocksDB, as in Kafka Streams; in memory when kstreams is built
    /// without the `rocksdb` feature.
    fn default() -> Self {
        if cfg!(feature = "rocksdb") {
            StoreType::RocksDb
        } else {
            StoreType::InMemory
        }
    }
}

impl StoreType {
    /// Fails for a store on RocksDB in a build without the `rocksdb`
    /// feature, naming the store and the way out.
    pub(crate) fn check_available(self, store: &str) -> Result<(), TopologyError> {
        if self == StoreType::RocksDb && !cfg!(feature = "rocksdb") {
            return Err(TopologyError::InvalidOperator {
                operator: format!("store {store}"),
                message: "it asks for StoreType::RocksDb, but kstreams was built without its \
                          `rocksdb` feature; enable the feature or use StoreType::InMemory"
                    .to_string(),
            });
        }
        Ok(())
    }
}

/// How a table or an aggregation keeps its state: Kafka Streams'
/// `Materialized`. The store name (queryable, and the changelog topic's
/// `<application.id>-<name>-changelog`), serdes, engine, caching, logging
/// and, for windowed stores, retention.
///
/// ```
/// use kstreams_dsl::{Materialized, StoreType};
/// use kstreams_record::{I64Serde, StringSerde};
///
/// let counts = Materialized::<String, i64>::as_("counts")
///     .with_key_serde(StringSerde)
///     .with_value_serde(I64Serde)
///     .with_store_type(StoreType::InMemory)
///     .with_caching_disabled();
/// # let _ = counts;
/// ```
pub struct Materialized<K, V> {
    pub(crate) name: Option<String>,
    pub(crate) key_serde: Option<SharedSerde<K>>,
    pub(crate) value_serde: Option<SharedSerde<V>>,
    pub(crate) store_type: StoreType,
    /// Logging, its topic configs and caching, as every store builder has
    /// them (Materialized caches by default; store builders do not).
    pub(crate) options: StoreOptions,
    pub(crate) retention: Option<Duration>,
    pub(crate) versioned_history: Option<Duration>,
}

impl<K, V> Default for Materialized<K, V> {
    fn default() -> Self {
        Materialized {
            name: None,
            key_serde: None,
            value_serde: None,
            store_type: StoreType::default(),
            options: StoreOptions::default().with_caching_enabled(),
            retention: None,
            versioned_history: None,
        }
    }
}

impl<K: 'static, V: 'static> Materialized<K, V> {
    /// A store with a generated name (not meant for queries).
    pub fn new() -> Self {
        Self::default()
    }

    /// A store named `name`.
    pub fn as_(name: impl Into<String>) -> Self {
        Materialized {
            name: Some(name.into()),
            ..Self::default()
        }
    }

    /// A store with a generated name and these serdes.
    pub fn with(key_serde: impl Serde<K>, value_serde: impl Serde<V>) -> Self {
        Self::default()
            .with_key_serde(key_serde)
            .with_value_serde(value_serde)
    }

    /// The serde of the store's keys.
    pub fn with_key_serde(mut self, serde: impl Serde<K>) -> Self {
        self.key_serde = Some(Arc::new(serde));
        self
    }

    /// The serde of the store's values.
    pub fn with_value_serde(mut self, serde: impl Serde<V>) -> Self {
        self.value_serde = Some(Arc::new(serde));
        self
    }

    /// RocksDB (the default) or in memory; see [`StoreType`] for builds
    /// without the `rocksdb` feature.
    pub fn with_store_type(mut self, store_type: StoreType) -> Self {
        self.store_type = store_type;
        self
    }

    /// Forwards every update instead of coalescing them until commit.
    pub fn with_caching_disabled(mut self) -> Self {
        self.options = self.options.with_caching_disabled();
        self
    }

    /// Coalesces updates of a key in the thread's cache until commit (the
    /// default).
    pub fn with_caching_enabled(mut self) -> Self {
        self.options = self.options.with_caching_enabled();
        self
    }

    /// No changelog topic: the store is rebuilt empty after a failure.
    pub fn with_logging_disabled(mut self) -> Self {
        self.options = self.options.with_logging_disabled();
        self
    }

    /// A changelog topic (the default) with these extra topic configs.
    pub fn with_logging_enabled(mut self, config: BTreeMap<String, String>) -> Self {
        self.options = self.options.with_logging_enabled(config);
        self
    }

    /// A versioned store (KIP-889) keeping each key's history for
    /// `history_retention`: a table on it answers lookups as of a
    /// timestamp, which stream-table joins use (KIP-914). Versioned stores
    /// do not cache.
    pub fn with_versioned_history(mut self, history_retention: Duration) -> Self {
        self.versioned_history = Some(history_retention);
        self
    }

    /// How long a windowed store keeps windows (at least window size plus
    /// grace).
    pub fn with_retention(mut self, retention: Duration) -> Self {
        self.retention = Some(retention);
        self
    }
}

/// A `Materialized` whose name and serdes have been settled by the operator.
pub(crate) struct StoreSpec<K, V> {
    pub name: String,
    pub key_serde: SharedSerde<K>,
    pub value_serde: SharedSerde<V>,
    pub store_type: StoreType,
    pub options: StoreOptions,
    pub retention: Option<Duration>,
    pub versioned_history: Option<Duration>,
}

impl<K: 'static, V: 'static> StoreSpec<K, V> {
    /// Settles `materialized`: its name or `generated`, its serdes or the
    /// ones the stream carries or the built-in serde of the type, else an
    /// error naming the store.
    pub(crate) fn settle(
        materialized: Materialized<K, V>,
        generated: impl FnOnce() -> String,
        key_serde: Option<SharedSerde<K>>,
        value_serde: Option<SharedSerde<V>>,
    ) -> Result<Self, TopologyError> {
        let name = materialized.name.unwrap_or_else(generated);
        materialized.store_type.check_available(&name)?;
        let key_serde = materialized
            .key_serde
            .or(key_serde)
            .or_else(kstreams_record::builtin_serde::<K>)
            .ok_or_else(|| TopologyError::MissingSerde {
                store: name.clone(),
                part: "key",
                type_name: std::any::type_name::<K>(),
            })?;
        let value_serde = materialized
            .value_serde
            .or(value_serde)
            .or_else(kstreams_record::builtin_serde::<V>)
            .ok_or_else(|| TopologyError::MissingSerde {
                store: name.clone(),
                part: "value",
                type_name: std::any::type_name::<V>(),
            })?;
        Ok(StoreSpec {
            name,
            key_serde,
            value_serde,
            store_type: materialized.store_type,
            options: materialized.options,
            retention: materialized.retention,
            versioned_history: materialized.versioned_history,
        })
    }

    /// A timestamped key-value store builder.
    pub(crate) fn key_value_store(&self) -> KeyValueStoreBuilder<K, ValueAndTimestamp<V>> {
        let supplier = match self.store_type {
            #[cfg(feature = "rocksdb")]
            StoreType::RocksDb => Stores::persistent_timestamped_key_value_store(&self.name),
            // Without the feature, `settle` has refused RocksDB.
            _ => Stores::in_memory_key_value_store(&self.name),
        };
        Stores::timestamped_key_value_store_builder(
            supplier,
            self.key_serde.clone(),
            self.value_serde.clone(),
        )
        .with_options(self.options.clone())
    }

    /// A versioned key-value store builder (history from the spec).
    pub(crate) fn versioned_store(&self) -> kstreams_state::VersionedKeyValueStoreBuilder<K, V> {
        let history = self.versioned_history.unwrap_or_default();
        let supplier = match self.store_type {
            #[cfg(feature = "rocksdb")]
            StoreType::RocksDb => Stores::persistent_versioned_key_value_store(&self.name, history),
            _ => Stores::in_memory_versioned_key_value_store(&self.name, history),
        };
        // Versioned stores have no cache.
        Stores::versioned_key_value_store_builder(
            supplier,
            self.key_serde.clone(),
            self.value_serde.clone(),
        )
        .with_options(self.options.clone().with_caching_disabled())
    }

    /// The retention of a windowed store: the user's (if not below
    /// `minimum`) or `minimum`.
    pub(crate) fn retention_ms(&self, minimum: i64) -> Result<i64, TopologyError> {
        match self.retention {
            None => Ok(minimum),
            Some(r) if duration_ms(r) >= minimum => Ok(duration_ms(r)),
            Some(r) => Err(TopologyError::InvalidOperator {
                operator: format!("store {}", self.name),
                message: format!(
                    "the retention ({} ms) must be at least the window size plus grace \
                     ({minimum} ms); raise it with Materialized::with_retention or leave it unset",
                    duration_ms(r)
                ),
            }),
        }
    }

    /// A timestamped window store builder.
    pub(crate) fn window_store(
        &self,
        retention_ms: i64,
        window_size_ms: i64,
    ) -> Result<WindowStoreBuilder<K, ValueAndTimestamp<V>>, TopologyError> {
        let retention = Duration::from_millis(retention_ms.max(0) as u64);
        let size = Duration::from_millis(window_size_ms.max(0) as u64);
        let supplier = match self.store_type {
            #[cfg(feature = "rocksdb")]
            StoreType::RocksDb => {
                Stores::persistent_timestamped_window_store(&self.name, retention, size, false)
            }
            _ => Stores::in_memory_window_store(&self.name, retention, size, false),
        }
        .map_err(|e| TopologyError::InvalidOperator {
            operator: format!("store {}", self.name),
            message: e.to_string(),
        })?;
        // A window's value carries the largest timestamp of its records,
        // each at or after the window's start: its changelog records are
        // stamped within their windows.
        Ok(Stores::timestamped_window_store_builder(
            supplier,
            self.key_serde.clone(),
            self.value_serde.clone(),
        )
        .with_options(self.options.clone())
        .with_changelog_stamped_in_window())
    }

    /// A session store builder.
    pub(crate) fn session_store(&self, retention_ms: i64) -> SessionStoreBuilder<K, V> {
        let retention = Duration::from_millis(retention_ms.max(0) as u64);
        let supplier = match self.store_type {
            #[cfg(feature = "rocksdb")]
            StoreType::RocksDb => Stores::persistent_session_store(&self.name, retention),
            _ => Stores::in_memory_session_store(&self.name, retention),
        };
        Stores::session_store_builder(supplier, self.key_serde.clone(), self.value_serde.clone())
            .with_options(self.options.clone())
    }
}

/// Serdes and name of a grouping's repartition topic: Kafka Streams'
/// `Grouped`. The name makes the topic `<application.id>-<name>-repartition`.
pub struct Grouped<K, V> {
    pub(crate) name: Option<String>,
    pub(crate) key_serde: Option<SharedSerde<K>>,
    pub(crate) value_serde: Option<SharedSerde<V>>,
}

impl<K, V> Default for Grouped<K, V> {
    fn default() -> Self {
        Grouped {
            name: None,
            key_serde: None,
            value_serde: None,
        }
    }
}

impl<K: 'static, V: 'static> Grouped<K, V> {
    /// A grouping whose repartition topic is `<name>-repartition`.
    pub fn as_(name: impl Into<String>) -> Self {
        Grouped {
            name: Some(name.into()),
            ..Self::default()
        }
    }

    /// A grouping with these serdes for the repartition topic.
    pub fn with(key_serde: impl Serde<K>, value_serde: impl Serde<V>) -> Self {
        Self::default()
            .with_key_serde(key_serde)
            .with_value_serde(value_serde)
    }

    /// The key serde.
    pub fn with_key_serde(mut self, serde: impl Serde<K>) -> Self {
        self.key_serde = Some(Arc::new(serde));
        self
    }

    /// The value serde.
    pub fn with_value_serde(mut self, serde: impl Serde<V>) -> Self {
        self.value_serde = Some(Arc::new(serde));
        self
    }

    /// The repartition topic's name (without `-repartition`).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
}

/// Registers a store builder and connects it to `processor`.
pub(crate) fn add_store(
    topology: &mut crate::Topology,
    builder: impl StoreBuilder,
    processor: &str,
) -> Result<(), TopologyError> {
    topology.add_state_store(builder, &[processor]).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StreamsBuilder;

    fn count_topology(materialized: Materialized<String, i64>) -> Result<(), TopologyError> {
        let builder = StreamsBuilder::new();
        builder
            .stream::<String, String>("clicks")
            .group_by_key()
            .count_with(None, materialized)
            .to_stream()
            .to("counts");
        builder.build().map(drop)
    }

    #[test]
    fn the_default_store_type_is_rocksdb_only_with_the_feature() {
        let expected = if cfg!(feature = "rocksdb") {
            StoreType::RocksDb
        } else {
            StoreType::InMemory
        };
        assert_eq!(StoreType::default(), expected);
        count_topology(Materialized::as_("counts")).unwrap();
    }

    #[test]
    fn rocksdb_by_name_is_refused_only_without_the_feature() {
        let result =
            count_topology(Materialized::as_("counts").with_store_type(StoreType::RocksDb));
        assert_eq!(result.is_ok(), cfg!(feature = "rocksdb"), "{result:?}");
        if let Err(error) = result {
            let message = error.to_string();
            assert!(message.contains("store counts"), "{message}");
            assert!(message.contains("`rocksdb` feature"), "{message}");
        }
    }

    #[test]
    fn a_global_table_on_rocksdb_is_refused_only_without_the_feature() {
        let builder = StreamsBuilder::new();
        builder.global_table_with(
            "customers",
            crate::Consumed::with(kstreams_record::StringSerde, kstreams_record::StringSerde),
            Materialized::as_("customers-store").with_store_type(StoreType::RocksDb),
        );
        let result = builder.build().map(drop);
        assert_eq!(result.is_ok(), cfg!(feature = "rocksdb"), "{result:?}");
    }
}
