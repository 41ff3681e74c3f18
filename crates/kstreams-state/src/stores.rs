//! `Stores`: the factory of store suppliers and builders, as Kafka Streams'.

use std::sync::Arc;
use std::time::Duration;

use kstreams_record::Serde;

use crate::engine::backend::{DirLayout, ValueFamily};
use crate::engine::{
    default_segment_interval, KeyValueBytesStore, KeyValueBytesStoreSupplier, Keyspaces, KvEngine,
    MemoryKeyspaces, SessionBytesStore, SessionBytesStoreSupplier, SessionEngine,
    VersionedBytesStore, VersionedBytesStoreSupplier, VersionedEngine, WindowBytesStore,
    WindowBytesStoreSupplier, WindowEngine,
};
use crate::typed::{ValueAndTimestampSerde, ValueFormat};
use crate::{
    Error, KeyValueStoreBuilder, SessionStoreBuilder, Timestamp, ValueAndTimestamp,
    VersionedKeyValueStoreBuilder, WindowStoreBuilder,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Engine {
    InMemory,
    #[cfg(feature = "rocksdb")]
    RocksDb,
}

impl Engine {
    /// Kafka Streams' metrics scope of a supplier: `in-memory` or
    /// `rocksdb`, with `-window` or `-session` for those stores (versioned
    /// stores share the key-value scope, as in Kafka Streams). It is the
    /// `store_type` label of the store's metrics.
    fn scope(self, kind: Kind) -> &'static str {
        match (self, kind) {
            (Engine::InMemory, Kind::KeyValue) => "in-memory",
            (Engine::InMemory, Kind::Window) => "in-memory-window",
            (Engine::InMemory, Kind::Session) => "in-memory-session",
            #[cfg(feature = "rocksdb")]
            (Engine::RocksDb, Kind::KeyValue) => "rocksdb",
            #[cfg(feature = "rocksdb")]
            (Engine::RocksDb, Kind::Window) => "rocksdb-window",
            #[cfg(feature = "rocksdb")]
            (Engine::RocksDb, Kind::Session) => "rocksdb-session",
        }
    }
}

#[derive(Clone, Copy)]
enum Kind {
    KeyValue,
    Window,
    Session,
}

fn millis(d: Duration) -> Timestamp {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The part of a supplier's `get` that differs per store type: its engine
/// on a given backend. [`engine_on`] picks the backend.
trait OnBackend {
    /// The engine trait object the supplier hands out.
    type Store: ?Sized;
    /// What kind of store it is, for its metrics scope.
    #[cfg_attr(not(feature = "rocksdb"), allow(dead_code))]
    const KIND: Kind;
    /// Where the RocksDB backend keeps its files, and how.
    #[cfg_attr(not(feature = "rocksdb"), allow(dead_code))]
    fn layout(&self) -> DirLayout;
    fn on<B: Keyspaces>(&self, backend: B) -> Box<Self::Store>;
}

/// A fresh engine of `supplier` on the backend of `engine`.
fn engine_on<S: OnBackend>(supplier: &S, engine: Engine) -> Box<S::Store> {
    match engine {
        Engine::InMemory => supplier.on(MemoryKeyspaces::default()),
        #[cfg(feature = "rocksdb")]
        Engine::RocksDb => supplier.on(crate::rocks::RocksKeyspaces::new(
            supplier.layout(),
            engine.scope(S::KIND),
        )),
    }
}

struct KvSupplier {
    name: String,
    engine: Engine,
    family: ValueFamily,
}

impl OnBackend for KvSupplier {
    type Store = dyn KeyValueBytesStore;
    const KIND: Kind = Kind::KeyValue;
    fn layout(&self) -> DirLayout {
        DirLayout::KeyValue(self.family)
    }
    fn on<B: Keyspaces>(&self, backend: B) -> Box<Self::Store> {
        Box::new(KvEngine::new(&self.name, backend))
    }
}

impl KeyValueBytesStoreSupplier for KvSupplier {
    fn name(&self) -> &str {
        &self.name
    }
    fn get(&self) -> Box<dyn KeyValueBytesStore> {
        engine_on(self, self.engine)
    }
    fn metrics_scope(&self) -> &str {
        self.engine.scope(Kind::KeyValue)
    }
}

struct WindowSupplier {
    name: String,
    engine: Engine,
    retention: Timestamp,
    window_size: Timestamp,
    retain_duplicates: bool,
    segment_interval: Timestamp,
}

impl OnBackend for WindowSupplier {
    type Store = dyn WindowBytesStore;
    const KIND: Kind = Kind::Window;
    fn layout(&self) -> DirLayout {
        DirLayout::Segmented
    }
    fn on<B: Keyspaces>(&self, backend: B) -> Box<Self::Store> {
        Box::new(WindowEngine::window(
            &self.name,
            backend,
            self.retention,
            self.window_size,
            self.retain_duplicates,
            self.segment_interval,
        ))
    }
}

impl WindowBytesStoreSupplier for WindowSupplier {
    fn name(&self) -> &str {
        &self.name
    }
    fn get(&self) -> Box<dyn WindowBytesStore> {
        engine_on(self, self.engine)
    }
    fn metrics_scope(&self) -> &str {
        self.engine.scope(Kind::Window)
    }
    fn window_size(&self) -> Timestamp {
        self.window_size
    }
    fn retention_period(&self) -> Timestamp {
        self.retention
    }
    fn retain_duplicates(&self) -> bool {
        self.retain_duplicates
    }
}

struct SessionSupplier {
    name: String,
    engine: Engine,
    retention: Timestamp,
    segment_interval: Timestamp,
}

impl OnBackend for SessionSupplier {
    type Store = dyn SessionBytesStore;
    const KIND: Kind = Kind::Session;
    fn layout(&self) -> DirLayout {
        DirLayout::Segmented
    }
    fn on<B: Keyspaces>(&self, backend: B) -> Box<Self::Store> {
        Box::new(SessionEngine::session(
            &self.name,
            backend,
            self.retention,
            self.segment_interval,
        ))
    }
}

impl SessionBytesStoreSupplier for SessionSupplier {
    fn name(&self) -> &str {
        &self.name
    }
    fn get(&self) -> Box<dyn SessionBytesStore> {
        engine_on(self, self.engine)
    }
    fn metrics_scope(&self) -> &str {
        self.engine.scope(Kind::Session)
    }
    fn retention_period(&self) -> Timestamp {
        self.retention
    }
}

struct VersionedSupplier {
    name: String,
    engine: Engine,
    history_retention: Timestamp,
}

impl OnBackend for VersionedSupplier {
    type Store = dyn VersionedBytesStore;
    const KIND: Kind = Kind::KeyValue;
    fn layout(&self) -> DirLayout {
        DirLayout::Versioned
    }
    fn on<B: Keyspaces>(&self, backend: B) -> Box<Self::Store> {
        Box::new(VersionedEngine::new(
            &self.name,
            backend,
            self.history_retention,
        ))
    }
}

impl VersionedBytesStoreSupplier for VersionedSupplier {
    fn name(&self) -> &str {
        &self.name
    }
    fn get(&self) -> Box<dyn VersionedBytesStore> {
        engine_on(self, self.engine)
    }
    fn metrics_scope(&self) -> &str {
        self.engine.scope(Kind::KeyValue)
    }
    fn history_retention(&self) -> Timestamp {
        self.history_retention
    }
}

fn window_supplier(
    name: &str,
    engine: Engine,
    retention: Duration,
    window_size: Duration,
    retain_duplicates: bool,
) -> Result<Arc<dyn WindowBytesStoreSupplier>, Error> {
    let (retention, window_size) = (millis(retention), millis(window_size));
    if retention < window_size {
        return Err(Error::InvalidConfig {
            store: name.to_string(),
            message: format!(
                "the retention period of the window store ({retention} ms) must be no smaller \
                 than its window size ({window_size} ms)"
            ),
        });
    }
    Ok(Arc::new(WindowSupplier {
        name: name.to_string(),
        engine,
        retention,
        window_size,
        retain_duplicates,
        segment_interval: default_segment_interval(retention),
    }))
}

/// Factory functions for store suppliers and builders: Kafka Streams'
/// `Stores`.
///
/// ```
/// use kstreams_record::{I64Serde, StringSerde};
/// use kstreams_state::{KeyValueStoreHandle, StoreBuilder, Stores};
///
/// let builder = Stores::key_value_store_builder(
///     Stores::in_memory_key_value_store("counts"),
///     StringSerde,
///     I64Serde,
/// );
/// let built = builder.build();
/// let store: KeyValueStoreHandle<String, i64> = built.handle().unwrap();
/// store.borrow_mut().put("a".to_string(), 1).unwrap();
/// assert_eq!(store.borrow().get(&"a".to_string()).unwrap(), Some(1));
/// ```
pub struct Stores;

impl Stores {
    /// An ordered in-memory key-value engine.
    pub fn in_memory_key_value_store(name: &str) -> Arc<dyn KeyValueBytesStoreSupplier> {
        Arc::new(KvSupplier {
            name: name.to_string(),
            engine: Engine::InMemory,
            family: ValueFamily::Plain,
        })
    }

    /// A RocksDB key-value engine: its values in the `default` column
    /// family, as Kafka Streams' `RocksDBStore`.
    #[cfg(feature = "rocksdb")]
    pub fn persistent_key_value_store(name: &str) -> Arc<dyn KeyValueBytesStoreSupplier> {
        Arc::new(KvSupplier {
            name: name.to_string(),
            engine: Engine::RocksDb,
            family: ValueFamily::Plain,
        })
    }

    /// A RocksDB key-value engine for a timestamped store (timestamps are
    /// part of the value bytes): its values in the `keyValueWithTimestamp`
    /// column family, as Kafka Streams' `RocksDBTimestampedStore`, so that
    /// either opens the other's files.
    #[cfg(feature = "rocksdb")]
    pub fn persistent_timestamped_key_value_store(
        name: &str,
    ) -> Arc<dyn KeyValueBytesStoreSupplier> {
        Arc::new(KvSupplier {
            name: name.to_string(),
            engine: Engine::RocksDb,
            family: ValueFamily::Timestamped,
        })
    }

    /// An in-memory window engine. `retain_duplicates` keeps every put
    /// (stream-stream joins).
    pub fn in_memory_window_store(
        name: &str,
        retention: Duration,
        window_size: Duration,
        retain_duplicates: bool,
    ) -> Result<Arc<dyn WindowBytesStoreSupplier>, Error> {
        window_supplier(
            name,
            Engine::InMemory,
            retention,
            window_size,
            retain_duplicates,
        )
    }

    /// A RocksDB window engine, segmented by window start.
    #[cfg(feature = "rocksdb")]
    pub fn persistent_window_store(
        name: &str,
        retention: Duration,
        window_size: Duration,
        retain_duplicates: bool,
    ) -> Result<Arc<dyn WindowBytesStoreSupplier>, Error> {
        window_supplier(
            name,
            Engine::RocksDb,
            retention,
            window_size,
            retain_duplicates,
        )
    }

    /// A RocksDB window engine for a timestamped store.
    #[cfg(feature = "rocksdb")]
    pub fn persistent_timestamped_window_store(
        name: &str,
        retention: Duration,
        window_size: Duration,
        retain_duplicates: bool,
    ) -> Result<Arc<dyn WindowBytesStoreSupplier>, Error> {
        Self::persistent_window_store(name, retention, window_size, retain_duplicates)
    }

    /// An in-memory session engine.
    pub fn in_memory_session_store(
        name: &str,
        retention: Duration,
    ) -> Arc<dyn SessionBytesStoreSupplier> {
        let retention = millis(retention);
        Arc::new(SessionSupplier {
            name: name.to_string(),
            engine: Engine::InMemory,
            retention,
            segment_interval: default_segment_interval(retention),
        })
    }

    /// A RocksDB session engine, segmented by session end.
    #[cfg(feature = "rocksdb")]
    pub fn persistent_session_store(
        name: &str,
        retention: Duration,
    ) -> Arc<dyn SessionBytesStoreSupplier> {
        let retention = millis(retention);
        Arc::new(SessionSupplier {
            name: name.to_string(),
            engine: Engine::RocksDb,
            retention,
            segment_interval: default_segment_interval(retention),
        })
    }

    /// An in-memory versioned engine (Kafka Streams has only RocksDB ones;
    /// this one has the same semantics).
    pub fn in_memory_versioned_key_value_store(
        name: &str,
        history_retention: Duration,
    ) -> Arc<dyn VersionedBytesStoreSupplier> {
        Arc::new(VersionedSupplier {
            name: name.to_string(),
            engine: Engine::InMemory,
            history_retention: millis(history_retention),
        })
    }

    /// A RocksDB versioned engine (KIP-889).
    #[cfg(feature = "rocksdb")]
    pub fn persistent_versioned_key_value_store(
        name: &str,
        history_retention: Duration,
    ) -> Arc<dyn VersionedBytesStoreSupplier> {
        Arc::new(VersionedSupplier {
            name: name.to_string(),
            engine: Engine::RocksDb,
            history_retention: millis(history_retention),
        })
    }

    /// A key-value store builder.
    pub fn key_value_store_builder<K: 'static, V: 'static>(
        supplier: Arc<dyn KeyValueBytesStoreSupplier>,
        key_serde: impl Serde<K>,
        value_serde: impl Serde<V>,
    ) -> KeyValueStoreBuilder<K, V> {
        KeyValueStoreBuilder::new(supplier, key_serde, value_serde, ValueFormat::Plain)
    }

    /// A timestamped key-value store builder: values are
    /// [`ValueAndTimestamp`]s; the changelog carries the plain value with
    /// the timestamp as record timestamp.
    pub fn timestamped_key_value_store_builder<K: 'static, V: 'static>(
        supplier: Arc<dyn KeyValueBytesStoreSupplier>,
        key_serde: impl Serde<K>,
        value_serde: impl Serde<V>,
    ) -> KeyValueStoreBuilder<K, ValueAndTimestamp<V>> {
        KeyValueStoreBuilder::new(
            supplier,
            key_serde,
            ValueAndTimestampSerde::<V>(Arc::new(value_serde)),
            ValueFormat::Timestamped,
        )
    }

    /// A window store builder.
    pub fn window_store_builder<K: 'static, V: 'static>(
        supplier: Arc<dyn WindowBytesStoreSupplier>,
        key_serde: impl Serde<K>,
        value_serde: impl Serde<V>,
    ) -> WindowStoreBuilder<K, V> {
        WindowStoreBuilder::new(
            supplier,
            key_serde,
            Arc::new(value_serde),
            ValueFormat::Plain,
        )
    }

    /// A timestamped window store builder.
    pub fn timestamped_window_store_builder<K: 'static, V: 'static>(
        supplier: Arc<dyn WindowBytesStoreSupplier>,
        key_serde: impl Serde<K>,
        value_serde: impl Serde<V>,
    ) -> WindowStoreBuilder<K, ValueAndTimestamp<V>> {
        WindowStoreBuilder::new(
            supplier,
            key_serde,
            Arc::new(ValueAndTimestampSerde::<V>(Arc::new(value_serde))),
            ValueFormat::Timestamped,
        )
    }

    /// A session store builder.
    pub fn session_store_builder<K: 'static, V: 'static>(
        supplier: Arc<dyn SessionBytesStoreSupplier>,
        key_serde: impl Serde<K>,
        value_serde: impl Serde<V>,
    ) -> SessionStoreBuilder<K, V> {
        SessionStoreBuilder::new(supplier, key_serde, value_serde)
    }

    /// A versioned key-value store builder.
    pub fn versioned_key_value_store_builder<K: 'static, V: 'static>(
        supplier: Arc<dyn VersionedBytesStoreSupplier>,
        key_serde: impl Serde<K>,
        value_serde: impl Serde<V>,
    ) -> VersionedKeyValueStoreBuilder<K, V> {
        VersionedKeyValueStoreBuilder::new(supplier, key_serde, value_serde)
    }
}
