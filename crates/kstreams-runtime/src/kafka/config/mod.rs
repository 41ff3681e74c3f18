//! `StreamsConfig`: the application's configuration, typed, loadable from
//! Kafka-style properties and checked key by key (Kafka Streams'
//! `StreamsConfig`).
//!
//! - here: the values, their defaults, the builder methods, and `set`,
//!   which looks each key up in `keys`;
//! - `keys`: every key kstreams reads, declared once (Kafka Streams'
//!   `StreamsConfig.configDef()`), and what `set` does with each;
//! - `client`: Kafka client settings, prefixed or not, checked against
//!   librdkafka and resolved per client; `offset_reset`: `auto.offset.reset`;
//! - `group_protocol`: the group the stream threads join;
//! - `validate`: settings that are fine alone but not together;
//! - `properties`: loading `.properties` files and key-value pairs;
//! - `error`: `ConfigError`;
//! - `kafka_names` (a test): every config Kafka Streams' jar defines is one
//!   the table knows.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kstreams_metrics::{MetricsRegistry, RecordingLevel};
use kstreams_time::{FailOnInvalidTimestamp, TimestampExtractor};

use crate::handlers::{
    DeserializationExceptionHandler, ProcessingExceptionHandler, ProductionExceptionHandler,
};
use crate::kafka::partition_group::MaxTaskIdle;
use crate::kafka::queries::IsolationLevel;
use crate::{DeserializationHandling, ProcessingHandling, ProductionHandling, TaskConfig};
use registry::Chosen;

mod client;
mod error;
mod exception_handlers;
mod group_protocol;
#[cfg(test)]
mod kafka_names;
mod keys;
mod offset_reset;
mod properties;
mod registry;
mod rocksdb;
mod validate;

pub(crate) use client::KafkaClient;
pub use error::ConfigError;
pub(crate) use group_protocol::{is_group_membership_key, GroupProtocol};
pub(crate) use offset_reset::{reset_by_duration, BY_DURATION_FALLBACK};

use client::ClientPrefix;

/// `processing.guarantee`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProcessingGuarantee {
    /// Offsets are committed after outputs are acknowledged: after a crash
    /// some records are processed again (Kafka Streams' default).
    #[default]
    AtLeastOnce,
    /// Outputs and offsets commit in one transaction (KIP-447).
    ExactlyOnceV2,
}

/// The configuration of a kstreams application: Kafka Streams'
/// `StreamsConfig`.
///
/// Kafka client settings are resolved as Kafka Streams resolves them: an
/// unprefixed key (`auto.offset.reset`, `acks`, `compression.type`,
/// `security.protocol`, `sasl.*`, `ssl.*`, any librdkafka property) goes to
/// every client librdkafka scopes it to; `consumer.` overrides it for the
/// consumers, and `main.consumer.`, `restore.consumer.`, `global.consumer.`,
/// `producer.` and `admin.` override both for their client. Each key and
/// value is checked against librdkafka when set. Java's security keys
/// (`sasl.jaas.config`, `ssl.truststore.*`, `ssl.keystore.*`) are translated
/// to librdkafka's for every client and the streams group member, and what
/// cannot be (a JKS store) is an error naming the key (docs/security.md).
/// Other Java client settings with no librdkafka counterpart
/// (`max.poll.records`, serializer classes) are logged once as ignored, with
/// what to set instead. kstreams decides `bootstrap.servers`, `group.id`,
/// `client.id` and `enable.auto.commit` itself, and under exactly-once
/// `isolation.level` and `transactional.id`.
///
/// `auto.offset.reset` takes Kafka's values: `earliest`, `latest`, `none`
/// (a partition without a committed offset fails the thread with
/// [`RuntimeError::NoCommittedOffset`](super::RuntimeError::NoCommittedOffset),
/// as Kafka Streams' `NoOffsetForPartitionException`) and Kafka 4's
/// `by_duration:<ISO-8601 duration>` (such a partition starts at its first
/// record that young).
///
/// A Kafka Streams application's `.properties` file is read as it is by
/// [`StreamsConfig::from_properties_file`].
///
/// `group.protocol`: `classic` (the default) makes the stream threads
/// members of a consumer group (`consumer.group.protocol=consumer` picks
/// KIP-848 for it); `streams` makes each stream thread a member of a
/// streams group (KIP-1071, brokers 4.2 and newer): the broker assigns
/// tasks, and `application.server` (`host:port`) is the endpoint it hands
/// to the other members (interactive queries find other instances' stores
/// by it). Under `streams` the broker's standby and warm-up tasks are run
/// (`num.standby.replicas` sets the group's `streams.num.standby.replicas`),
/// pattern sources are refused, and the member connects with the main
/// consumer's `security.protocol`, `ssl.*` and `sasl.*` settings.
///
/// `max.task.idle.ms`: -1 never waits for an empty input partition, 0 (the
/// default) waits only for one known to be behind its end, a positive
/// value also waits that long for a caught-up one (KIP-695).
///
/// ```
/// use kstreams_runtime::kafka::StreamsConfig;
///
/// let config = StreamsConfig::new("word-count", "localhost:9092")
///     .num_stream_threads(2)
///     .commit_interval(std::time::Duration::from_millis(500))
///     .client_config("consumer.fetch.min.bytes", "1");
/// assert_eq!(config.application_id(), "word-count");
///
/// let parsed = StreamsConfig::from_properties([
///     ("application.id", "word-count"),
///     ("bootstrap.servers", "localhost:9092"),
///     ("num.stream.threads", "two"),
/// ]);
/// assert_eq!(
///     parsed.unwrap_err().to_string(),
///     "invalid value \"two\" for config num.stream.threads: a whole number of threads, at least 1"
/// );
/// ```
#[derive(Clone)]
pub struct StreamsConfig {
    pub(crate) application_id: String,
    pub(crate) bootstrap_servers: String,
    pub(crate) num_stream_threads: usize,
    pub(crate) processing_guarantee: ProcessingGuarantee,
    pub(crate) commit_interval: Option<Duration>,
    pub(crate) cache_max_bytes: u64,
    pub(crate) state_dir: PathBuf,
    pub(crate) max_task_idle: MaxTaskIdle,
    pub(crate) buffered_records_per_partition: usize,
    pub(crate) replication_factor: i32,
    pub(crate) timestamp_extractor: Arc<dyn TimestampExtractor>,
    pub(crate) deserialization: DeserializationHandling,
    pub(crate) processing: ProcessingHandling,
    pub(crate) production: ProductionHandling,
    pub(crate) dead_letter_queue: Option<String>,
    pub(crate) repartition_purge_interval: Duration,
    /// `state.cleanup.delay.ms`: how often, and after how long idle, the
    /// state of tasks the instance no longer owns is deleted.
    pub(crate) state_cleanup_delay: Duration,
    /// `enable.transactional.statestores` (KIP-892, on by default): under
    /// exactly-once, persistent stores hold their writes until the
    /// transaction commits.
    pub(crate) transactional_state_stores: bool,
    /// `statestore.uncommitted.max.bytes`: the uncommitted writes of a
    /// thread's transactional stores that force a commit.
    pub(crate) state_store_uncommitted_max_bytes: u64,
    /// `default.interactive.query.isolation.level`: what a query sees of
    /// uncommitted writes unless it asks otherwise.
    pub(crate) interactive_query_isolation: IsolationLevel,
    /// `windowstore.changelog.additional.retention.ms`: what a window or
    /// session store's changelog keeps beyond the store's retention.
    pub(crate) window_store_changelog_additional_retention_ms: i64,
    /// The user's Kafka client settings, by the prefix they came with;
    /// [`StreamsConfig::client_settings`] resolves them per client.
    pub(crate) client_settings: BTreeMap<(ClientPrefix, String), String>,
    /// `topic.*`: topic configs (without the prefix) for every internal
    /// topic kstreams creates, as Kafka Streams applies them.
    pub(crate) internal_topic_configs: BTreeMap<String, String>,
    /// The renamed keys that were set by their new name: their deprecated
    /// name no longer overrides them.
    pub(crate) new_names_set: std::collections::BTreeSet<&'static str>,
    /// The first mistake [`StreamsConfig::client_config`] met: it cannot
    /// return it, so [`StreamsConfig::validate`] (and so `start()`) does.
    pub(crate) deferred_error: Option<ConfigError>,
    pub(crate) metrics_recording_level: RecordingLevel,
    /// `poll.ms`: how long a stream thread blocks waiting for input.
    pub(crate) poll: Duration,
    /// The registry every thread and task of the application records into
    /// (`KafkaStreams::metrics` hands it out): an input, which an
    /// application may supply (`metrics_registry`) to share with its own.
    pub(crate) metrics: MetricsRegistry,
    /// `num.standby.replicas`, when set: standby copies of each stateful
    /// task the streams group is asked to place (`group.protocol=streams`).
    pub(crate) num_standby_replicas: Option<u32>,
    /// `kstreams.http.address`: where kstreams-http's server listens when
    /// started from the configuration; `None` (the default) serves nothing.
    pub(crate) http_address: Option<std::net::SocketAddr>,
    /// `kstreams.tracing.*`: the tasks' record tracing (off by default).
    pub(crate) tracing: crate::TracingConfig,
    /// `group.protocol=streams` (Kafka Streams' key): the stream threads
    /// join a streams group (KIP-1071) instead of a consumer group.
    pub(crate) streams_group_protocol: bool,
    /// `application.server`: the `host:port` the streams group hands to
    /// other members as this instance's endpoint.
    pub(crate) application_server: Option<(String, u16)>,
    /// `kstreams.async.max.in.flight.per.task`, `...per.thread` and
    /// `kstreams.async.worker.threads`: async processors' bounds.
    pub(crate) async_limits: crate::async_runtime::AsyncLimits,
    /// `kstreams.async.drain.timeout.ms`: how long an exactly-once commit,
    /// a rebalance or a close waits for async calls in flight.
    pub(crate) async_drain_timeout: Duration,
    /// `rocksdb.config.setter`, the setters registered for it and
    /// `kstreams.rocksdb.bounded.*`.
    pub(crate) rocksdb: rocksdb::RocksDbConfig,
    /// The exception handlers of the application's own: chosen in code or
    /// by name, and the ones registered for the keys to name.
    pub(crate) exception_handlers: exception_handlers::ExceptionHandlers,
}

impl std::fmt::Debug for StreamsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamsConfig")
            .field("application_id", &self.application_id)
            .field("bootstrap_servers", &self.bootstrap_servers)
            .field("num_stream_threads", &self.num_stream_threads)
            .field("processing_guarantee", &self.processing_guarantee)
            .field("commit_interval", &self.effective_commit_interval())
            .finish_non_exhaustive()
    }
}

impl StreamsConfig {
    /// A configuration with Kafka Streams' defaults.
    pub fn new(application_id: impl Into<String>, bootstrap_servers: impl Into<String>) -> Self {
        Self {
            application_id: application_id.into(),
            bootstrap_servers: bootstrap_servers.into(),
            num_stream_threads: 1,
            processing_guarantee: ProcessingGuarantee::AtLeastOnce,
            commit_interval: None,
            cache_max_bytes: 10 * 1024 * 1024,
            state_dir: std::env::temp_dir().join("kstreams"),
            max_task_idle: MaxTaskIdle::ForLagging,
            buffered_records_per_partition: 1000,
            replication_factor: -1,
            timestamp_extractor: Arc::new(FailOnInvalidTimestamp),
            deserialization: DeserializationHandling::LogAndFail,
            processing: ProcessingHandling::Fail,
            production: ProductionHandling::Fail,
            dead_letter_queue: None,
            repartition_purge_interval: Duration::from_secs(30),
            // Kafka Streams' default: 10 minutes.
            state_cleanup_delay: Duration::from_secs(600),
            // Kafka Streams' defaults (KIP-892): off, and 64 MiB.
            transactional_state_stores: true,
            state_store_uncommitted_max_bytes: 64 << 20,
            interactive_query_isolation: IsolationLevel::ReadUncommitted,
            // Kafka Streams' default: a day, for clock drift between the
            // application and the brokers.
            window_store_changelog_additional_retention_ms: 24 * 60 * 60 * 1000,
            client_settings: BTreeMap::new(),
            internal_topic_configs: BTreeMap::new(),
            new_names_set: Default::default(),
            deferred_error: None,
            metrics_recording_level: RecordingLevel::Info,
            poll: Duration::from_millis(100),
            metrics: MetricsRegistry::new(),
            num_standby_replicas: None,
            http_address: None,
            tracing: crate::TracingConfig::default(),
            streams_group_protocol: false,
            application_server: None,
            async_limits: Default::default(),
            async_drain_timeout: crate::async_runtime::DEFAULT_DRAIN_TIMEOUT,
            rocksdb: Default::default(),
            exception_handlers: Default::default(),
        }
    }

    /// Sets one property by its Kafka Streams name. Of a deprecated key and
    /// the key that replaces it, the new one wins whatever the order, as in
    /// Kafka Streams.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        let Some(entry) = keys::find(key) else {
            return self.set_unlisted(key, value);
        };
        if entry.deprecated == Some(key) && self.new_names_set.contains(entry.name) {
            // Checked all the same, as Kafka Streams checks both.
            entry.set(&mut StreamsConfig::new("app", "b:9092"), key, value)?;
            let new = entry.name;
            log::warn!(
                "config {key}={value} is ignored: {new} is set too, and Kafka Streams then \
                 uses {new}"
            );
            return Ok(());
        }
        entry.set(self, key, value)?;
        if entry.deprecated.is_some() && entry.name == key {
            self.new_names_set.insert(entry.name);
        }
        Ok(())
    }

    /// A key the table of keys does not list: a Kafka client setting,
    /// prefixed or not, or a key under one of Kafka Streams' prefixes
    /// (`topic.`, `client.tag.`).
    fn set_unlisted(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        if let Some((prefix, client_key)) = ClientPrefix::split(key) {
            return self.set_client(prefix, client_key, value);
        }
        match keys::find_prefix(key) {
            // librdkafka's own topic.* properties (topic.metadata.*) stay
            // client settings.
            Some(entry) if !client::librdkafka_has_property(key) => entry.set(self, key, value),
            _ => self.set_client(ClientPrefix::Unprefixed, key, value),
        }
    }

    /// At most `records` in the async processors of one task
    /// (`kstreams.async.max.in.flight.per.task`, default 64): a task at the
    /// bound takes no record from its partitions until a call finishes.
    pub fn async_max_in_flight_per_task(mut self, records: usize) -> Self {
        self.async_limits.per_task = records.max(1);
        self
    }

    /// At most `records` in the async processors of one stream thread's
    /// tasks (`kstreams.async.max.in.flight.per.thread`, default 256).
    pub fn async_max_in_flight_per_thread(mut self, records: usize) -> Self {
        self.async_limits.per_thread = records.max(1);
        self
    }

    /// Worker threads of the instance's tokio runtime for async calls
    /// (`kstreams.async.worker.threads`, default 2).
    pub fn async_worker_threads(mut self, threads: usize) -> Self {
        self.async_limits.workers = threads.max(1);
        self
    }

    /// How long a commit under exactly-once, a rebalance or a close waits
    /// for async calls in flight (`kstreams.async.drain.timeout.ms`, default
    /// 30 s). Past it the calls are cancelled and their records are read
    /// again (under exactly-once the transaction is aborted).
    pub fn async_drain_timeout(mut self, timeout: Duration) -> Self {
        self.async_drain_timeout = timeout;
        self
    }

    /// Where kstreams-http's `HttpServer::start_configured` listens
    /// (`kstreams.http.address`, unset by default: no server). Bind to
    /// 127.0.0.1 unless the endpoints are meant to be reached from other
    /// hosts.
    pub fn http_address(mut self, address: std::net::SocketAddr) -> Self {
        self.http_address = Some(address);
        self
    }

    /// How the tasks trace records (`kstreams.tracing.enabled`,
    /// `kstreams.tracing.start.traces`, `kstreams.tracing.sample.ratio`):
    /// see [`TracingConfig`](crate::TracingConfig). Off by default.
    pub fn tracing(mut self, tracing: crate::TracingConfig) -> Self {
        self.tracing = tracing;
        self
    }

    /// The address set by [`StreamsConfig::http_address`] or
    /// `kstreams.http.address`, if any.
    pub fn configured_http_address(&self) -> Option<std::net::SocketAddr> {
        self.http_address
    }

    /// Which metrics are recorded (`metrics.recording.level`): state store
    /// latencies and per-record process latency only from `Debug` on.
    pub fn metrics_recording_level(mut self, level: RecordingLevel) -> Self {
        self.metrics_recording_level = level;
        self
    }

    /// The registry the application records its metrics into, for example
    /// one shared by several applications of a process or made with
    /// constant labels ([`MetricsRegistry::with_constant_labels`]). By
    /// default each configuration has its own.
    pub fn metrics_registry(mut self, registry: MetricsRegistry) -> Self {
        self.metrics = registry;
        self
    }

    /// The application id.
    pub fn application_id(&self) -> &str {
        &self.application_id
    }

    /// Number of stream threads (each with its own consumer and producer).
    pub fn num_stream_threads(mut self, threads: usize) -> Self {
        self.num_stream_threads = threads.max(1);
        self
    }

    /// At-least-once or exactly-once.
    pub fn processing_guarantee(mut self, guarantee: ProcessingGuarantee) -> Self {
        self.processing_guarantee = guarantee;
        self
    }

    /// The options hook of every RocksDB store of the application (Kafka
    /// Streams' `rocksdb.config.setter`, given as an object): called for
    /// each store the instance opens, after Kafka Streams' defaults and the
    /// bounded-memory settings, so what it sets wins. It replaces a setter
    /// named by `rocksdb.config.setter` before, and one named after
    /// replaces it.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use kstreams_runtime::kafka::StreamsConfig;
    /// use kstreams_state::rocksdb::{BlockBasedOptions, Options};
    /// use kstreams_state::RocksDbConfigSetter;
    ///
    /// struct LargerBlocks;
    /// impl RocksDbConfigSetter for LargerBlocks {
    ///     fn set_config(&self, _store: &str, _options: &mut Options, table: &mut BlockBasedOptions) {
    ///         table.set_block_size(16 * 1024);
    ///     }
    /// }
    ///
    /// let config = StreamsConfig::new("counts", "localhost:9092")
    ///     .rocksdb_config_setter(Arc::new(LargerBlocks));
    /// ```
    #[cfg(feature = "rocksdb")]
    pub fn rocksdb_config_setter(
        mut self,
        setter: std::sync::Arc<dyn kstreams_state::RocksDbConfigSetter>,
    ) -> Self {
        self.rocksdb.set_setter(setter);
        self
    }

    /// Registers `setter` under `name`, for `rocksdb.config.setter=<name>`
    /// in properties to pick it (a Java class can't be loaded: the key
    /// names a setter written in Rust). A class name finds the setter
    /// registered by its last part, so a Kafka Streams properties file's
    /// `rocksdb.config.setter=com.example.BoundedMemoryRocksDBConfig` works
    /// unchanged once the port is registered as `BoundedMemoryRocksDBConfig`.
    /// The name is looked up by `KafkaStreams::start`, which fails with a
    /// [`ConfigError`] naming the key if nothing is registered under it.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use kstreams_runtime::kafka::StreamsConfig;
    /// use kstreams_state::rocksdb::{BlockBasedOptions, Options};
    /// use kstreams_state::RocksDbConfigSetter;
    ///
    /// struct FewerMemtables;
    /// impl RocksDbConfigSetter for FewerMemtables {
    ///     fn set_config(&self, _store: &str, options: &mut Options, _table: &mut BlockBasedOptions) {
    ///         options.set_max_write_buffer_number(2);
    ///     }
    /// }
    ///
    /// let config = StreamsConfig::from_properties([
    ///     ("application.id", "counts"),
    ///     ("bootstrap.servers", "localhost:9092"),
    ///     ("rocksdb.config.setter", "com.example.FewerMemtables"),
    /// ])
    /// .unwrap()
    /// .register_rocksdb_config_setter("FewerMemtables", Arc::new(FewerMemtables));
    /// ```
    #[cfg(feature = "rocksdb")]
    pub fn register_rocksdb_config_setter(
        mut self,
        name: impl Into<String>,
        setter: std::sync::Arc<dyn kstreams_state::RocksDbConfigSetter>,
    ) -> Self {
        self.rocksdb.register(name.into(), setter);
        self
    }

    /// Bounds the memory of all RocksDB stores of each instance together,
    /// as Kafka Streams' `BoundedMemoryRocksDBConfig` recipe does: one
    /// block cache of `total_bytes` shared by every store (task and global
    /// stores, every segment), index and filter blocks cached in it with
    /// high priority, and memtables charged to it through one write buffer
    /// manager of `memtable_bytes`. Without it each store has Kafka
    /// Streams' defaults: a 50 MiB block cache of its own and up to three
    /// 16 MiB memtables per column family. Also set by
    /// `kstreams.rocksdb.bounded.memory.bytes` and
    /// `kstreams.rocksdb.bounded.memtable.bytes` (default: half the total).
    ///
    /// ```
    /// use kstreams_runtime::kafka::StreamsConfig;
    ///
    /// // 256 MiB for every store of the instance, memtables at most 64 MiB of it.
    /// let config = StreamsConfig::new("counts", "localhost:9092")
    ///     .rocksdb_bounded_memory(256 << 20, 64 << 20);
    /// ```
    pub fn rocksdb_bounded_memory(mut self, total_bytes: usize, memtable_bytes: usize) -> Self {
        self.rocksdb.set_bounded_bytes(total_bytes);
        self.rocksdb.set_memtable_bytes(memtable_bytes);
        self
    }

    /// How often offsets are committed.
    pub fn commit_interval(mut self, interval: Duration) -> Self {
        self.commit_interval = Some(interval);
        self
    }

    /// The commit interval in force: 30 s, or 100 ms under exactly-once,
    /// unless set.
    pub fn effective_commit_interval(&self) -> Duration {
        self.commit_interval
            .unwrap_or(match self.processing_guarantee {
                ProcessingGuarantee::AtLeastOnce => Duration::from_secs(30),
                ProcessingGuarantee::ExactlyOnceV2 => Duration::from_millis(100),
            })
    }

    /// Where local state lives.
    pub fn state_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.state_dir = dir.into();
        self
    }

    /// What to do with undeserializable records.
    pub fn deserialization_handling(mut self, handling: DeserializationHandling) -> Self {
        self.deserialization = handling;
        self.exception_handlers.choose_deserialization(None);
        self
    }

    /// What to do when a processor fails.
    pub fn processing_handling(mut self, handling: ProcessingHandling) -> Self {
        self.processing = handling;
        self.exception_handlers.choose_processing(None);
        self
    }

    /// Hands records that do not deserialize to `handler`, the
    /// application's own (Kafka Streams'
    /// `default.deserialization.exception.handler` set to a class): see
    /// [`crate::handlers`].
    pub fn deserialization_exception_handler(
        mut self,
        handler: Arc<dyn DeserializationExceptionHandler>,
    ) -> Self {
        self.exception_handlers
            .choose_deserialization(Some(Chosen::Given(handler)));
        self
    }

    /// Hands processors' failures to `handler`, the application's own
    /// (Kafka Streams' `processing.exception.handler` set to a class): see
    /// [`crate::handlers`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// use kstreams_dsl::StreamsError;
    /// use kstreams_runtime::handlers::{ErrorHandlerContext, ProcessingExceptionHandler, Response};
    /// use kstreams_runtime::kafka::StreamsConfig;
    ///
    /// /// Skips records a processor rejects; a panic stops the application.
    /// struct SkipRejected;
    /// impl ProcessingExceptionHandler for SkipRejected {
    ///     fn handle_error(&self, _: &ErrorHandlerContext<'_>, error: &StreamsError) -> Response {
    ///         match error {
    ///             StreamsError::Processing { .. } => Response::resume(),
    ///             _ => Response::fail(),
    ///         }
    ///     }
    /// }
    ///
    /// let config = StreamsConfig::new("orders", "localhost:9092")
    ///     .processing_exception_handler(Arc::new(SkipRejected));
    /// ```
    pub fn processing_exception_handler(
        mut self,
        handler: Arc<dyn ProcessingExceptionHandler>,
    ) -> Self {
        self.exception_handlers
            .choose_processing(Some(Chosen::Given(handler)));
        self
    }

    /// Registers `handler` under `name`, for
    /// `default.deserialization.exception.handler=<name>` in properties to
    /// pick it; a Java class name finds the handler registered under its
    /// last part. Resolved by `KafkaStreams::start`, which fails naming the
    /// key if nothing is registered under the name.
    pub fn register_deserialization_exception_handler(
        mut self,
        name: impl Into<String>,
        handler: Arc<dyn DeserializationExceptionHandler>,
    ) -> Self {
        self.exception_handlers
            .register_deserialization(name.into(), handler);
        self
    }

    /// Registers `handler` under `name`, for
    /// `processing.exception.handler=<name>` in properties to pick it; a
    /// Java class name finds the handler registered under its last part.
    /// Resolved by `KafkaStreams::start`, which fails naming the key if
    /// nothing is registered under the name.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use kstreams_dsl::StreamsError;
    /// use kstreams_runtime::handlers::{ErrorHandlerContext, ProcessingExceptionHandler, Response};
    /// use kstreams_runtime::kafka::StreamsConfig;
    ///
    /// struct DeadLetters;
    /// impl ProcessingExceptionHandler for DeadLetters {
    ///     fn handle_error(&self, _: &ErrorHandlerContext<'_>, _: &StreamsError) -> Response {
    ///         Response::resume()
    ///     }
    /// }
    ///
    /// // A Kafka Streams properties file, unchanged, and the port registered.
    /// let config = StreamsConfig::from_properties([
    ///     ("application.id", "orders"),
    ///     ("bootstrap.servers", "localhost:9092"),
    ///     ("processing.exception.handler", "com.example.DeadLetters"),
    /// ])
    /// .unwrap()
    /// .register_processing_exception_handler("DeadLetters", Arc::new(DeadLetters));
    /// # let _ = config;
    /// ```
    pub fn register_processing_exception_handler(
        mut self,
        name: impl Into<String>,
        handler: Arc<dyn ProcessingExceptionHandler>,
    ) -> Self {
        self.exception_handlers
            .register_processing(name.into(), handler);
        self
    }

    /// What to do when a record cannot be written (serialization or the
    /// broker refusing it), with a built-in handler.
    pub fn production_handling(mut self, handling: ProductionHandling) -> Self {
        self.production = handling;
        self.exception_handlers.choose_production(None);
        self
    }

    /// Hands output records that cannot be written (they do not serialize,
    /// or the producer cannot write them) to `handler`, the application's
    /// own (Kafka Streams' `production.exception.handler` set to a class):
    /// see [`crate::handlers::ProductionExceptionHandler`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// use kstreams_runtime::handlers::{
    ///     ErrorHandlerContext, ProductionError, ProductionExceptionHandler, ProductionResponse,
    ///     RefusedRecord,
    /// };
    /// use kstreams_runtime::kafka::StreamsConfig;
    ///
    /// /// Skips records the broker finds too large; retries what may pass later.
    /// struct SkipOversized;
    /// impl ProductionExceptionHandler for SkipOversized {
    ///     fn handle_error(
    ///         &self,
    ///         _: &ErrorHandlerContext<'_>,
    ///         _: &RefusedRecord<'_>,
    ///         error: &ProductionError,
    ///     ) -> ProductionResponse {
    ///         match error.code() {
    ///             "MSG_SIZE_TOO_LARGE" => ProductionResponse::resume(),
    ///             _ if error.is_retriable() => ProductionResponse::retry(),
    ///             _ => ProductionResponse::fail(),
    ///         }
    ///     }
    /// }
    ///
    /// let config = StreamsConfig::new("orders", "localhost:9092")
    ///     .production_exception_handler(Arc::new(SkipOversized));
    /// ```
    pub fn production_exception_handler(
        mut self,
        handler: Arc<dyn ProductionExceptionHandler>,
    ) -> Self {
        self.exception_handlers
            .choose_production(Some(Chosen::Given(handler)));
        self
    }

    /// Registers `handler` under `name`, for
    /// `production.exception.handler=<name>` in properties to pick it; a
    /// Java class name finds the handler registered under its last part.
    /// Resolved by `KafkaStreams::start`, which fails naming the key if
    /// nothing is registered under the name.
    pub fn register_production_exception_handler(
        mut self,
        name: impl Into<String>,
        handler: Arc<dyn ProductionExceptionHandler>,
    ) -> Self {
        self.exception_handlers
            .register_production(name.into(), handler);
        self
    }

    /// How often records the application has consumed are deleted from
    /// its repartition topics (`repartition.purge.interval.ms`, 30 s).
    pub fn repartition_purge_interval(mut self, interval: Duration) -> Self {
        self.repartition_purge_interval = interval;
        self
    }

    /// How long the state directory of a task this instance no longer owns
    /// is kept, unmodified, before it is deleted; the cleaner looks this
    /// often, while the application is RUNNING (`state.cleanup.delay.ms`,
    /// 10 minutes). Must be more than zero.
    pub fn state_cleanup_delay(mut self, delay: Duration) -> Self {
        self.state_cleanup_delay = delay;
        self
    }

    /// Transactional state stores (KIP-892, `enable.transactional.statestores`),
    /// **on by default**, where Kafka Streams has them off: a crash then
    /// costs the changelog's tail instead of the whole local state, for a
    /// few percent more CPU (BENCHMARKS.md, "Crash recovery under
    /// exactly-once"). Under exactly-once a RocksDB
    /// store then holds its writes until the transaction commits and writes
    /// them to disk with the changelog offsets they reach, in one batch: its
    /// files only ever hold committed states, so after a crash (SIGKILL, an
    /// OOM kill) its task resumes from its own store and restores only what
    /// was committed after the store's last batch, where without it the
    /// task's whole local state is deleted and restored from the changelogs
    /// (the batches go through RocksDB's write-ahead log). No effect under
    /// at-least-once, which restores from the recorded offsets anyway.
    pub fn transactional_state_stores(mut self, enabled: bool) -> Self {
        self.transactional_state_stores = enabled;
        self
    }

    /// How many bytes of uncommitted writes a thread's transactional stores
    /// may hold before a commit is forced (`statestore.uncommitted.max.bytes`,
    /// 64 MiB).
    pub fn state_store_uncommitted_max_bytes(mut self, bytes: u64) -> Self {
        self.state_store_uncommitted_max_bytes = bytes;
        self
    }

    /// What interactive queries see of uncommitted writes unless they ask
    /// otherwise (`default.interactive.query.isolation.level`, KIP-892;
    /// [`StoreQueryParameters::with_isolation_level`](crate::kafka::StoreQueryParameters::with_isolation_level)):
    /// [`IsolationLevel::ReadUncommitted`] by default, as in Kafka Streams.
    pub fn interactive_query_isolation_level(mut self, level: IsolationLevel) -> Self {
        self.interactive_query_isolation = level;
        self
    }

    /// Whether stores are transactional now: set, and under exactly-once.
    pub(crate) fn transactional_stores_in_force(&self) -> bool {
        self.transactional_state_stores
            && self.processing_guarantee == ProcessingGuarantee::ExactlyOnceV2
    }

    /// KIP-1034: records the handlers drop also go to `topic`, with the
    /// failure in headers (`errors.dead.letter.queue.topic.name`).
    pub fn dead_letter_queue(mut self, topic: impl Into<String>) -> Self {
        self.dead_letter_queue = Some(topic.into());
        self
    }

    /// The default timestamp extractor.
    pub fn default_timestamp_extractor(mut self, extractor: impl TimestampExtractor) -> Self {
        self.timestamp_extractor = Arc::new(extractor);
        self
    }

    /// A Kafka client setting, unprefixed (every client it applies to) or
    /// with a prefix (`consumer.`, `main.consumer.`, `restore.consumer.`,
    /// `global.consumer.`, `producer.`, `admin.`), as [`StreamsConfig::set`]
    /// takes it.
    ///
    /// A key or value [`StreamsConfig::set`] would refuse does not panic:
    /// the first such error is kept and returned by
    /// [`StreamsConfig::validate`], which `KafkaStreams::start` calls.
    ///
    /// ```
    /// use kstreams_runtime::kafka::StreamsConfig;
    ///
    /// let config = StreamsConfig::new("app", "localhost:9092")
    ///     .client_config("consumer.fetch.min.byte", "1");
    /// assert!(config
    ///     .validate()
    ///     .unwrap_err()
    ///     .to_string()
    ///     .starts_with("config consumer.fetch.min.byte=1 is refused by librdkafka"));
    /// ```
    pub fn client_config(mut self, key: &str, value: &str) -> Self {
        if let Err(e) = self.set(key, value) {
            log::error!("{e}");
            self.deferred_error.get_or_insert(e);
        }
        self
    }

    pub(crate) fn task_config(&self) -> TaskConfig {
        // Resolved at start: a name that does not resolve never gets here
        // (the built-in handling is the fallback).
        let handlers = self.exception_handlers.resolve().unwrap_or_else(|e| {
            log::error!("{e}");
            exception_handlers::ResolvedHandlers {
                deserialization: None,
                processing: None,
                production: None,
            }
        });
        TaskConfig {
            application_id: self.application_id.clone(),
            default_timestamp_extractor: self.timestamp_extractor.clone(),
            deserialization: self.deserialization,
            processing: self.processing,
            production: self.production,
            dead_letter_queue: self.dead_letter_queue.clone(),
            tracing: self.tracing,
            deserialization_handler: handlers.deserialization,
            processing_handler: handlers.processing,
            production_handler: handlers.production,
            // Kafka Streams splits the budget evenly between the threads.
            // Only a total of 0 turns caching off (a thread's share of 0
            // would too): a share that rounds to 0 is a byte, which writes
            // through as Kafka's tiny caches do.
            cache_max_bytes: match self.cache_max_bytes {
                0 => 0,
                total => (total / self.num_stream_threads.max(1) as u64)
                    .max(1)
                    .try_into()
                    .unwrap_or(usize::MAX),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two keys every application sets.
    pub(super) fn base() -> Vec<(&'static str, &'static str)> {
        vec![("application.id", "app"), ("bootstrap.servers", "b:9092")]
    }

    #[test]
    fn metrics_recording_level_is_read_as_kafka_spells_it() {
        let config = StreamsConfig::from_properties(base()).unwrap();
        assert_eq!(config.metrics_recording_level, RecordingLevel::Info);
        let mut p = base();
        p.push(("metrics.recording.level", "DEBUG"));
        let config = StreamsConfig::from_properties(p).unwrap();
        assert_eq!(config.metrics_recording_level, RecordingLevel::Debug);
        // Clones record into one registry.
        let clone = config.clone();
        clone
            .metrics
            .task_sensors("t", "0_0")
            .unwrap()
            .process
            .inc();
        assert!(config
            .metrics
            .gather_text()
            .contains("kstreams_task_process_total"));
    }

    #[test]
    fn commit_interval_defaults_depend_on_the_guarantee() {
        let c = StreamsConfig::new("a", "b");
        assert_eq!(c.effective_commit_interval(), Duration::from_secs(30));
        let c = c.processing_guarantee(ProcessingGuarantee::ExactlyOnceV2);
        assert_eq!(c.effective_commit_interval(), Duration::from_millis(100));
    }

    #[test]
    fn client_config_keeps_its_first_error_for_validate_instead_of_panicking() {
        let config = StreamsConfig::new("app", "b:1")
            .client_config("producer.lingr.ms", "5")
            .client_config("num.stream.threads", "0");
        let err = config.validate().unwrap_err();
        assert!(
            err.to_string()
                .starts_with("config producer.lingr.ms=5 is refused"),
            "{err}"
        );
        assert!(StreamsConfig::new("app", "b:1")
            .client_config("producer.linger.ms", "5")
            .validate()
            .is_ok());
    }
}
