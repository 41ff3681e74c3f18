//! RocksDB's options hook and bounded memory, as the application sets them:
//! a config setter given in code or named by `rocksdb.config.setter` among
//! the setters the application registered, and the figures of the bound
//! (`kstreams.rocksdb.bounded.memory.bytes`, `...memtable.bytes`).
//!
//! Values only: each `KafkaStreams` instance resolves them once, at start,
//! into the settings its stores open with, making the one block cache and
//! write buffer manager its stores share when memory is bounded. A setter
//! name is resolved there and not when the key is set, because a properties
//! file is read before the application registers its setters.

#[cfg(feature = "rocksdb")]
use std::sync::Arc;

#[cfg(feature = "rocksdb")]
use kstreams_state::{RocksDbConfigSetter, RocksDbMemoryBounds, RocksDbSettings};

use super::registry::{Chosen, Registry};
#[cfg(feature = "rocksdb")]
use super::ConfigError;

/// Kafka Streams' key.
pub(super) const CONFIG_SETTER: &str = "rocksdb.config.setter";
/// kstreams' keys of the bound.
pub(super) const BOUNDED_MEMORY_BYTES: &str = "kstreams.rocksdb.bounded.memory.bytes";
pub(super) const BOUNDED_MEMTABLE_BYTES: &str = "kstreams.rocksdb.bounded.memtable.bytes";

/// What `rocksdb.config.setter` chooses.
#[cfg(feature = "rocksdb")]
type Setter = dyn RocksDbConfigSetter;
/// Without RocksDB no setter can be given: the key's name is kept, unused.
#[cfg(not(feature = "rocksdb"))]
type Setter = ();

/// What the application set about RocksDB.
#[derive(Clone, Default)]
pub(crate) struct RocksDbConfig {
    setter: Option<Chosen<Setter>>,
    /// The setters `rocksdb.config.setter` may name, by name.
    registered: Registry<Setter>,
    /// The bound on all stores' block cache and memtables; 0: unbounded.
    bounded_bytes: usize,
    /// The memtables' part of it; `None`: half.
    memtable_bytes: Option<usize>,
}

impl std::fmt::Debug for RocksDbConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RocksDbConfig")
            .field("setter", &self.setter)
            .field("registered", &self.registered)
            .field("bounded_bytes", &self.bounded_bytes)
            .field("memtable_bytes", &self.memtable_bytes)
            .finish()
    }
}

impl RocksDbConfig {
    /// `rocksdb.config.setter`: a registered setter's name, or a Java class
    /// name whose last part is one.
    pub(super) fn set_setter_name(&mut self, name: String) {
        self.setter = Some(Chosen::Named(name));
    }

    /// `kstreams.rocksdb.bounded.memory.bytes`.
    pub(super) fn set_bounded_bytes(&mut self, bytes: usize) {
        self.bounded_bytes = bytes;
    }

    /// `kstreams.rocksdb.bounded.memtable.bytes`.
    pub(super) fn set_memtable_bytes(&mut self, bytes: usize) {
        self.memtable_bytes = Some(bytes);
    }
}

#[cfg(feature = "rocksdb")]
impl RocksDbConfig {
    pub(super) fn set_setter(&mut self, setter: Arc<dyn RocksDbConfigSetter>) {
        self.setter = Some(Chosen::Given(setter));
    }

    pub(super) fn register(&mut self, name: String, setter: Arc<dyn RocksDbConfigSetter>) {
        self.registered.register(name, setter);
    }

    /// The setter in force, a name resolved among the registered ones: by
    /// the name itself, else by its last dot-separated part, so that a
    /// Kafka Streams properties file's class name
    /// (`com.example.BoundedMemoryRocksDBConfig`) finds the setter
    /// registered as `BoundedMemoryRocksDBConfig`.
    fn setter(&self) -> Result<Option<Arc<dyn RocksDbConfigSetter>>, ConfigError> {
        let Some(chosen) = &self.setter else {
            return Ok(None);
        };
        self.registered
            .resolve(
                chosen,
                CONFIG_SETTER,
                "RocksDbConfigSetter",
                "register_rocksdb_config_setter",
            )
            .map(Some)
    }

    /// The memory bounds the figures ask for, made now: one per instance.
    fn memory_bounds(&self) -> Option<RocksDbMemoryBounds> {
        (self.bounded_bytes > 0).then(|| {
            let memtables = self.memtable_bytes.unwrap_or(self.bounded_bytes / 2);
            RocksDbMemoryBounds::new(self.bounded_bytes, memtables)
        })
    }

    /// The settings an instance's stores open with: the setter in force
    /// and, when memory is bounded, a new shared cache and write buffer
    /// manager. Called once per `KafkaStreams` instance.
    pub(crate) fn instance_settings(&self) -> Result<RocksDbSettings, ConfigError> {
        let mut settings = RocksDbSettings::new();
        if let Some(setter) = self.setter()? {
            settings = settings.with_config_setter(setter);
        }
        if let Some(bounds) = self.memory_bounds() {
            settings = settings.with_memory_bounds(bounds);
        }
        Ok(settings)
    }
}

#[cfg(all(test, feature = "rocksdb"))]
mod tests {
    use kstreams_state::rocksdb::{BlockBasedOptions, Options};

    use super::super::StreamsConfig;
    use super::*;

    struct Noop;

    impl RocksDbConfigSetter for Noop {
        fn set_config(&self, _: &str, _: &mut Options, _: &mut BlockBasedOptions) {}
    }

    /// The registered name of the setter the instance would use.
    fn setter_name(config: &StreamsConfig) -> Option<String> {
        let settings = config.rocksdb.instance_settings().unwrap();
        let setter = settings.config_setter()?;
        config
            .rocksdb
            .registered
            .iter()
            .find(|(_, registered)| Arc::ptr_eq(registered, setter))
            .map(|(name, _)| name.clone())
    }

    fn with_setters() -> StreamsConfig {
        StreamsConfig::new("app", "b:9092")
            .register_rocksdb_config_setter("small", Arc::new(Noop))
            .register_rocksdb_config_setter("BoundedMemoryRocksDBConfig", Arc::new(Noop))
    }

    #[test]
    fn the_key_names_a_setter_registered_after_the_properties_were_read() {
        let config = StreamsConfig::from_properties([
            ("application.id", "app"),
            ("bootstrap.servers", "b:9092"),
            ("rocksdb.config.setter", "small"),
        ])
        .unwrap()
        .register_rocksdb_config_setter("small", Arc::new(Noop));
        assert!(config
            .rocksdb
            .instance_settings()
            .unwrap()
            .config_setter()
            .is_some());
        let mut config = with_setters();
        config.set("rocksdb.config.setter", " small ").unwrap();
        assert_eq!(setter_name(&config), Some("small".to_string()));
    }

    #[test]
    fn a_java_class_name_finds_the_setter_registered_by_its_simple_name() {
        let mut config = with_setters();
        config
            .set(
                "rocksdb.config.setter",
                "com.example.streams.BoundedMemoryRocksDBConfig",
            )
            .unwrap();
        assert_eq!(
            setter_name(&config),
            Some("BoundedMemoryRocksDBConfig".to_string())
        );
    }

    #[test]
    fn an_unknown_setter_name_fails_naming_the_key_and_the_fix() {
        let mut config = with_setters();
        config
            .set("rocksdb.config.setter", "com.example.Missing")
            .unwrap();
        let err = config.rocksdb.instance_settings().unwrap_err().to_string();
        assert_eq!(
            err,
            "invalid value \"com.example.Missing\" for config rocksdb.config.setter: the name \
             of a RocksDbConfigSetter registered in code before start, with \
             StreamsConfig::register_rocksdb_config_setter(\"Missing\", Arc::new(..)) \
             (BoundedMemoryRocksDBConfig, small are registered; a Java class cannot be \
             loaded: port it to Rust)"
        );
        let mut config = StreamsConfig::new("app", "b:9092");
        config.set("rocksdb.config.setter", "x").unwrap();
        let err = config.rocksdb.instance_settings().unwrap_err().to_string();
        assert!(err.contains("(none is registered;"), "{err}");
    }

    #[test]
    fn the_last_setter_set_wins_whether_in_code_or_by_name() {
        let in_code: Arc<dyn RocksDbConfigSetter> = Arc::new(Noop);
        let mut config = with_setters()
            .register_rocksdb_config_setter("in-code", in_code.clone())
            .rocksdb_config_setter(in_code);
        assert_eq!(setter_name(&config), Some("in-code".to_string()));
        config.set("rocksdb.config.setter", "small").unwrap();
        assert_eq!(setter_name(&config), Some("small".to_string()));
        assert_eq!(setter_name(&StreamsConfig::new("app", "b:9092")), None);
    }

    #[test]
    fn bounded_memory_makes_new_shared_bounds_per_instance() {
        let config = StreamsConfig::from_properties([
            ("application.id", "app"),
            ("bootstrap.servers", "b:9092"),
            ("kstreams.rocksdb.bounded.memory.bytes", "67108864"),
        ])
        .unwrap();
        let first = config.rocksdb.instance_settings().unwrap();
        let bounds = first.memory_bounds().unwrap();
        assert_eq!(bounds.total_bytes(), 64 << 20);
        assert_eq!(bounds.memtable_bytes(), 32 << 20);
        let config = config.rocksdb_bounded_memory(16 << 20, 4 << 20);
        let bounds = config.rocksdb.instance_settings().unwrap();
        let bounds = bounds.memory_bounds().unwrap();
        assert_eq!(
            (bounds.total_bytes(), bounds.memtable_bytes()),
            (16 << 20, 4 << 20)
        );
        assert!(StreamsConfig::new("app", "b:9092")
            .rocksdb
            .instance_settings()
            .unwrap()
            .memory_bounds()
            .is_none());
        let mut config = StreamsConfig::new("app", "b:9092");
        let err = config
            .set("kstreams.rocksdb.bounded.memtable.bytes", "-1")
            .unwrap_err();
        assert!(err
            .to_string()
            .contains("kstreams.rocksdb.bounded.memtable.bytes"));
    }
}
