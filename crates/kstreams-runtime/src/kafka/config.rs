//! `StreamsConfig`: the application's configuration, typed, loadable from
//! Kafka-style properties, and checked key by key.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kstreams_metrics::{MetricsRegistry, RecordingLevel};
use kstreams_time::{FailOnInvalidTimestamp, TimestampExtractor};

use crate::{DeserializationHandling, ProcessingHandling, ProductionHandling, TaskConfig};

/// A configuration mistake, naming the key and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A required key has no value.
    #[error("missing required config {key}: {hint}")]
    Missing {
        /// The key.
        key: &'static str,
        /// How to set it.
        hint: &'static str,
    },
    /// A key kstreams does not know.
    #[error(
        "unknown config {key}{}: neither a Kafka Streams setting nor a librdkafka client property",
        suggestion.map(|s| format!(" (did you mean {s}?)")).unwrap_or_default()
    )]
    Unknown {
        /// The key as given.
        key: String,
        /// The known key it is closest to, when it looks like a typo.
        suggestion: Option<&'static str>,
    },
    /// A Kafka Streams config whose behaviour kstreams does not have.
    #[error("config {key}={value} is not supported: {why}")]
    Unsupported {
        /// The key.
        key: String,
        /// The value given.
        value: String,
        /// What kstreams does instead, and what to do.
        why: &'static str,
    },
    /// A value that does not parse or is out of range.
    #[error("invalid value {value:?} for config {key}: {expected}")]
    Invalid {
        /// The key.
        key: String,
        /// The value given.
        value: String,
        /// What is accepted.
        expected: String,
    },
    /// A Kafka client setting librdkafka refuses.
    #[error("config {key}={value} is refused by librdkafka: {message}; {hint}")]
    Client {
        /// The key as written, with its prefix.
        key: String,
        /// The value given.
        value: String,
        /// librdkafka's reason.
        message: String,
        /// How to fix it.
        hint: String,
    },
    /// A mistake in a properties file or text, with where it is: the file
    /// (or what the text came from) and the line of the key.
    #[error("{origin}{}: {error}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    InProperties {
        /// The file's path, or what the text came from.
        origin: String,
        /// The line (1-based) of the key, or of the syntax error.
        line: Option<usize>,
        /// What is wrong there.
        error: Box<ConfigError>,
    },
    /// Properties text that is not Java `.properties` syntax, or a file
    /// that cannot be read.
    #[error("{message}")]
    Unreadable {
        /// What went wrong, and what to do.
        message: String,
    },
    /// Two settings that cannot be used together.
    #[error("config {key} cannot be used with {with}: {hint}")]
    Conflict {
        /// The key that has to go.
        key: String,
        /// The setting it conflicts with, as `key=value`.
        with: String,
        /// What to do instead.
        hint: String,
    },
}

impl ConfigError {
    /// The key the mistake is about, as written.
    fn key(&self) -> Option<String> {
        match self {
            ConfigError::Missing { key, .. } => Some(key.to_string()),
            ConfigError::Unknown { key, .. }
            | ConfigError::Unsupported { key, .. }
            | ConfigError::Invalid { key, .. }
            | ConfigError::Client { key, .. }
            | ConfigError::Conflict { key, .. } => Some(key.clone()),
            ConfigError::InProperties { error, .. } => error.key(),
            ConfigError::Unreadable { .. } => None,
        }
    }
}

/// java-properties' message without its own "(line_number = n)" suffix:
/// the line is said once, in front.
fn properties_error_text(error: &java_properties::PropertiesError) -> String {
    let text = error.to_string();
    match text.rfind(" (line_number") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// The consumer group protocol of the stream threads' consumers
/// (`consumer.group.protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum GroupProtocol {
    /// The classic protocol: the client-side range assignor, eager
    /// rebalances that stop every task.
    #[default]
    Classic,
    /// KIP-848: the broker assigns (`group.remote.assignor`, range by
    /// default here) and members give up and take partitions
    /// incrementally, so tasks that keep their owner go on processing.
    Consumer,
    /// KIP-1071 (`group.protocol=streams`, brokers 4.2+): each stream thread
    /// is a member of a streams group, the broker assigns tasks and the
    /// consumer reads the partitions of its active tasks by manual
    /// assignment.
    Streams,
}

/// Consumer settings of group membership under the classic protocol that
/// librdkafka refuses under `group.protocol=consumer`, and what to use
/// instead.
const CLASSIC_ONLY: [(&str, &str); 4] = [
    (
        "partition.assignment.strategy",
        "the broker assigns partitions under this protocol; choose its assignor with \
         consumer.group.remote.assignor (kstreams sets range, which keeps co-partitioned \
         topics in one task)",
    ),
    (
        "session.timeout.ms",
        "the broker sets it (group.consumer.session.timeout.ms)",
    ),
    (
        "heartbeat.interval.ms",
        "the broker sets it (group.consumer.heartbeat.interval.ms)",
    ),
    (
        "group.protocol.type",
        "only the classic protocol has protocol types",
    ),
];

/// Consumer settings that only a group member uses: consumers that only
/// assign partitions to themselves (restore, global) leave them out.
pub(crate) fn is_group_membership_key(key: &str) -> bool {
    key == "group.id"
        || key == "group.protocol"
        || key == "group.remote.assignor"
        || key == "group.instance.id"
        || CLASSIC_ONLY.iter().any(|(k, _)| *k == key)
}

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
/// value is checked against librdkafka when set. Java client settings with
/// no librdkafka counterpart (`max.poll.records`, serializer classes,
/// `sasl.jaas.config`, truststores) are logged once as ignored, with what to
/// set instead. kstreams decides `bootstrap.servers`, `group.id`,
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
/// pattern sources are refused, and the member connects in plaintext only.
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
    pub(crate) max_task_idle: super::partition_group::MaxTaskIdle,
    pub(crate) buffered_records_per_partition: usize,
    pub(crate) replication_factor: i32,
    pub(crate) timestamp_extractor: Arc<dyn TimestampExtractor>,
    pub(crate) deserialization: DeserializationHandling,
    pub(crate) processing: ProcessingHandling,
    pub(crate) production: ProductionHandling,
    pub(crate) dead_letter_queue: Option<String>,
    pub(crate) repartition_purge_interval: Duration,
    /// `windowstore.changelog.additional.retention.ms`: what a window or
    /// session store's changelog keeps beyond the store's retention.
    pub(crate) window_store_changelog_additional_retention_ms: i64,
    /// The user's Kafka client settings, by the prefix they came with;
    /// [`StreamsConfig::client_settings`] resolves them per client.
    pub(crate) client_settings: BTreeMap<(ClientPrefix, String), String>,
    /// `topic.*`: topic configs (without the prefix) for every internal
    /// topic kstreams creates, as Kafka Streams applies them.
    pub(crate) internal_topic_configs: BTreeMap<String, String>,
    /// The keys of [`DEPRECATED_KEYS`]' new names that were set: the old
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

const THREADS_EXPECTED: &str = "a whole number of threads, at least 1";

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
            max_task_idle: super::partition_group::MaxTaskIdle::ForLagging,
            buffered_records_per_partition: 1000,
            replication_factor: -1,
            timestamp_extractor: Arc::new(FailOnInvalidTimestamp),
            deserialization: DeserializationHandling::LogAndFail,
            processing: ProcessingHandling::Fail,
            production: ProductionHandling::Fail,
            dead_letter_queue: None,
            repartition_purge_interval: Duration::from_secs(30),
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
        }
    }

    /// Reads Kafka-style properties. Unknown keys and bad values are errors
    /// naming the key.
    pub fn from_properties<K: AsRef<str>, V: AsRef<str>>(
        properties: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self, ConfigError> {
        let mut application_id = None;
        let mut bootstrap = None;
        let mut rest = Vec::new();
        for (k, v) in properties {
            let (k, v) = (k.as_ref().trim().to_string(), v.as_ref().trim().to_string());
            match k.as_str() {
                "application.id" => application_id = Some(v),
                "bootstrap.servers" => bootstrap = Some(v),
                _ => rest.push((k, v)),
            }
        }
        let application_id = application_id.filter(|v| !v.is_empty()).ok_or(ConfigError::Missing {
            key: "application.id",
            hint: "set it to a name unique to this application; it names the consumer group and internal topics",
        })?;
        let bootstrap = bootstrap
            .filter(|v| !v.is_empty())
            .ok_or(ConfigError::Missing {
                key: "bootstrap.servers",
                hint: "set it to host:port of one or more brokers, comma-separated",
            })?;
        let mut config = Self::new(application_id, bootstrap);
        for (k, v) in rest {
            config.set(&k, &v)?;
        }
        config.validate()?;
        Ok(config)
    }

    /// Reads a Java `.properties` file, as a Kafka Streams application
    /// loads its `streams.properties` (`Properties#load`): `#` and `!`
    /// comments, `=`, `:` or whitespace between key and value, `\` line
    /// continuations and escapes, `\uXXXX`, ISO-8859-1 text; a key given
    /// twice takes its last value. Then as
    /// [`StreamsConfig::from_properties`]; an error names the file and the
    /// line of the key.
    ///
    /// ```
    /// use kstreams_runtime::kafka::StreamsConfig;
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("streams.properties");
    /// std::fs::write(&path, "application.id=orders\nbootstrap.servers=localhost:9092\n\
    ///                        num.stream.threads = two\n").unwrap();
    /// let err = StreamsConfig::from_properties_file(&path).unwrap_err();
    /// assert!(err.to_string().ends_with(
    ///     "streams.properties:3: invalid value \"two\" for config num.stream.threads: \
    ///      a whole number of threads, at least 1"
    /// ));
    /// ```
    pub fn from_properties_file(path: impl AsRef<std::path::Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        let file = std::fs::File::open(path).map_err(|e| ConfigError::Unreadable {
            message: format!(
                "cannot read properties file {origin}: {e}; give the path of the application's \
                 .properties file"
            ),
        })?;
        Self::from_properties_reader(std::io::BufReader::new(file), &origin)
    }

    /// Reads Java `.properties` text from `reader` (ISO-8859-1, as
    /// `Properties#load(InputStream)`); `origin` names it in errors.
    pub fn from_properties_reader(
        reader: impl std::io::Read,
        origin: &str,
    ) -> Result<Self, ConfigError> {
        let lines = java_properties::PropertiesIter::new(reader);
        Self::from_property_lines(lines, origin)
    }

    /// Reads Java `.properties` syntax from a string (as
    /// `Properties#load(Reader)`: the text is taken as it is, no
    /// ISO-8859-1 decoding).
    ///
    /// ```
    /// use kstreams_runtime::kafka::StreamsConfig;
    ///
    /// let config = StreamsConfig::from_properties_str(
    ///     "# ported from Kafka Streams\n\
    ///      application.id : orders\n\
    ///      bootstrap.servers localhost:9092,\\\n    localhost:9093\n\
    ///      ! unprefixed client keys reach every client they apply to\n\
    ///      auto.offset.reset=earliest\n",
    /// )
    /// .unwrap();
    /// assert_eq!(config.application_id(), "orders");
    /// ```
    pub fn from_properties_str(text: &str) -> Result<Self, ConfigError> {
        let lines =
            java_properties::PropertiesIter::new_with_encoding(text.as_bytes(), encoding_rs::UTF_8);
        Self::from_property_lines(lines, "properties text")
    }

    fn from_property_lines(
        lines: java_properties::PropertiesIter<impl std::io::Read>,
        origin: &str,
    ) -> Result<Self, ConfigError> {
        let mut entries: Vec<(usize, String, String)> = Vec::new();
        for line in lines {
            let line = line.map_err(|e| ConfigError::InProperties {
                origin: origin.to_string(),
                line: e.line_number(),
                error: Box::new(ConfigError::Unreadable {
                    message: format!(
                        "not Java .properties syntax ({}); write key=value lines, escape a \
                         backslash as \\\\ and give \\u escapes four hex digits",
                        properties_error_text(&e)
                    ),
                }),
            })?;
            let number = line.line_number();
            if let java_properties::LineContent::KVPair(key, value) = line.consume_content() {
                entries.push((number, key, value));
            }
        }
        let line_of = |key: &str| {
            entries
                .iter()
                .rev()
                .find(|(_, k, _)| k.trim() == key)
                .map(|(n, _, _)| *n)
        };
        Self::from_properties(entries.iter().map(|(_, k, v)| (k, v))).map_err(|error| {
            let line = error.key().and_then(|key| line_of(&key));
            ConfigError::InProperties {
                origin: origin.to_string(),
                line,
                error: Box::new(error),
            }
        })
    }

    /// Checks settings that are fine one by one but not together: under
    /// `consumer.group.protocol=consumer` (KIP-848) the classic protocol's
    /// `partition.assignment.strategy`, `session.timeout.ms`,
    /// `heartbeat.interval.ms` and `group.protocol.type` are refused.
    /// [`KafkaStreams::start`](super::KafkaStreams::start) calls it too.
    ///
    /// ```
    /// use kstreams_runtime::kafka::StreamsConfig;
    ///
    /// let err = StreamsConfig::from_properties([
    ///     ("application.id", "app"),
    ///     ("bootstrap.servers", "localhost:9092"),
    ///     ("consumer.group.protocol", "consumer"),
    ///     ("consumer.partition.assignment.strategy", "range"),
    /// ])
    /// .unwrap_err();
    /// assert!(err.to_string().starts_with(
    ///     "config consumer.partition.assignment.strategy cannot be used with consumer.group.protocol=consumer"
    /// ));
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(e) = &self.deferred_error {
            return Err(e.clone());
        }
        let main = self.client_settings(KafkaClient::MainConsumer);
        if self.streams_group_protocol {
            if let Some((prefix, protocol)) = main.get("group.protocol") {
                return Err(ConfigError::Conflict {
                    key: format!("{}group.protocol={protocol}", prefix.as_str()),
                    with: "group.protocol=streams".to_string(),
                    hint: "the stream threads join a streams group and their consumers are \
                           assigned partitions by it; remove the consumer's group protocol"
                        .to_string(),
                });
            }
            if let Some((prefix, security)) = main.get("security.protocol") {
                if !security.eq_ignore_ascii_case("plaintext") {
                    return Err(ConfigError::Conflict {
                        key: format!("{}security.protocol={security}", prefix.as_str()),
                        with: "group.protocol=streams".to_string(),
                        hint: "the streams group member connects in plaintext only so far; \
                               use group.protocol=classic or consumer.group.protocol=consumer"
                            .to_string(),
                    });
                }
            }
        }
        let standby_replicas = self.num_standby_replicas.unwrap_or(0);
        if standby_replicas > 0 && !self.streams_group_protocol {
            let protocol = main
                .get("group.protocol")
                .map_or("classic".to_string(), |(_, p)| p.clone());
            return Err(ConfigError::Conflict {
                key: format!("num.standby.replicas={standby_replicas}"),
                with: format!("group.protocol={protocol}"),
                hint: "standby tasks are placed by the broker of a streams group: set \
                       group.protocol=streams (Kafka 4.2+ brokers), or num.standby.replicas=0; \
                       the classic and KIP-848 consumer protocols cannot carry them"
                    .to_string(),
            });
        }
        if self.group_protocol() == GroupProtocol::Consumer {
            for (key, hint) in CLASSIC_ONLY {
                if let Some((prefix, _)) = main.get(key) {
                    let (protocol_prefix, protocol) = &main["group.protocol"];
                    return Err(ConfigError::Conflict {
                        key: format!("{}{key}", prefix.as_str()),
                        with: format!("{}group.protocol={protocol}", protocol_prefix.as_str()),
                        hint: hint.to_string(),
                    });
                }
            }
        }
        Ok(())
    }

    /// The group protocol the stream threads use.
    pub(crate) fn group_protocol(&self) -> GroupProtocol {
        if self.streams_group_protocol {
            return GroupProtocol::Streams;
        }
        match self
            .client_settings(KafkaClient::MainConsumer)
            .get("group.protocol")
        {
            Some((_, p)) if p.eq_ignore_ascii_case("consumer") => GroupProtocol::Consumer,
            _ => GroupProtocol::Classic,
        }
    }

    /// The user's settings that reach `client`, with the prefix each was
    /// given with, by Kafka Streams' precedence (`getMainConsumerConfigs`
    /// and friends): unprefixed keys that apply to the client, then
    /// `consumer.` (consumers only), then the client's own prefix
    /// (`main.consumer.`, `restore.consumer.`, `global.consumer.`,
    /// `producer.`, `admin.`).
    pub(crate) fn client_settings(
        &self,
        client: KafkaClient,
    ) -> BTreeMap<String, (ClientPrefix, String)> {
        let mut resolved = BTreeMap::new();
        for layer in client.layers() {
            for ((prefix, key), value) in &self.client_settings {
                if prefix == layer && (*prefix != ClientPrefix::Unprefixed || client.takes(key)) {
                    resolved.insert(key.clone(), (*prefix, value.clone()));
                }
            }
        }
        resolved
    }

    /// Takes a Kafka client setting `key` (without `prefix`), checked
    /// against librdkafka.
    fn set_client(
        &mut self,
        prefix: ClientPrefix,
        key: &str,
        value: &str,
    ) -> Result<(), ConfigError> {
        let written = format!("{}{key}", prefix.as_str());
        if key.is_empty() {
            return Err(ConfigError::Unknown {
                key: written,
                suggestion: None,
            });
        }
        if let Some(why) = java_only_client_key(key) {
            log::warn!(
                "config {written} is ignored: it is a Java client setting with no librdkafka \
                 counterpart ({why})"
            );
            return Ok(());
        }
        // What librdkafka is asked to check, and what is kept: they differ
        // for Kafka's auto.offset.reset values librdkafka spells otherwise.
        let (value, kept) = match auto_offset_reset_for_librdkafka(key, value) {
            Some(Ok(translated)) if reset_by_duration(value).is_some() => {
                (translated, value.trim().to_string())
            }
            Some(Ok(translated)) => (translated, translated.to_string()),
            Some(Err(expected)) => {
                return Err(ConfigError::Invalid {
                    key: written,
                    value: value.to_string(),
                    expected: expected.to_string(),
                })
            }
            None => (value, value.to_string()),
        };
        if let Err(e) = rdkafka::ClientConfig::new()
            .set(key, value)
            .create_native_config()
        {
            let unknown = matches!(
                e,
                rdkafka::error::KafkaError::ClientConfig(
                    rdkafka::types::RDKafkaConfRes::RD_KAFKA_CONF_UNKNOWN,
                    ..
                )
            );
            if !unknown {
                let message = match &e {
                    rdkafka::error::KafkaError::ClientConfig(_, description, ..) => {
                        description.clone()
                    }
                    other => other.to_string(),
                };
                return Err(ConfigError::Client {
                    key: written,
                    value: value.to_string(),
                    message,
                    hint: "see librdkafka's CONFIGURATION.md for the values it takes".to_string(),
                });
            }
            return Err(match prefix {
                ClientPrefix::Unprefixed => ConfigError::Unknown {
                    key: written,
                    suggestion: closest_known_key(key),
                },
                _ => ConfigError::Client {
                    key: written,
                    value: value.to_string(),
                    message: format!("librdkafka has no property {key}"),
                    hint: "check the spelling against librdkafka's CONFIGURATION.md".to_string(),
                },
            });
        }
        // A key of one client kind under another's prefix: librdkafka would
        // ignore it with a warning per client; say it once here.
        let scope = librdkafka_scope(key);
        // The admin prefix is taken as written: the admin client's requests
        // read settings librdkafka lists as a producer's.
        if let Some(client) = prefix.only_client().filter(|c| *c != KafkaClient::Admin) {
            if !client.takes(key) {
                log::warn!(
                    "config {written} is ignored: librdkafka's {key} is a {} setting",
                    scope.name()
                );
                return Ok(());
            }
        } else if prefix == ClientPrefix::Consumer && scope == LibrdkafkaScope::Producer {
            log::warn!("config {written} is ignored: librdkafka's {key} is a producer setting");
            return Ok(());
        }
        if key == "group.protocol"
            && !["classic", "consumer"]
                .iter()
                .any(|p| value.eq_ignore_ascii_case(p))
        {
            return Err(ConfigError::Invalid {
                key: written,
                value: value.to_string(),
                expected: "classic (eager rebalances, client-side range assignor) or consumer \
                           (KIP-848: incremental rebalances, server-side assignor)"
                    .to_string(),
            });
        }
        if let Some(why) = set_by_kstreams(key) {
            log::warn!("config {written}={value} is ignored: {why}");
        }
        self.client_settings.insert((prefix, key.to_string()), kept);
        Ok(())
    }

    /// Sets one property by its Kafka Streams name. Of a deprecated key and
    /// the key that replaces it, the new one wins whatever the order, as in
    /// Kafka Streams.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        if let Some((_, new)) = DEPRECATED_KEYS.iter().find(|(old, _)| *old == key) {
            if self.new_names_set.contains(new) {
                // Checked all the same, as Kafka Streams checks both.
                StreamsConfig::new("app", "b:9092").set_one(key, value)?;
                log::warn!(
                    "config {key}={value} is ignored: {new} is set too, and Kafka Streams then \
                     uses {new}"
                );
                return Ok(());
            }
        }
        self.set_one(key, value)?;
        if let Some((_, new)) = DEPRECATED_KEYS.iter().find(|(_, new)| *new == key) {
            self.new_names_set.insert(new);
        }
        Ok(())
    }

    fn set_one(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        let invalid = |expected: &str| ConfigError::Invalid {
            key: key.to_string(),
            value: value.to_string(),
            expected: expected.to_string(),
        };
        match key {
            "application.id" | "bootstrap.servers" if value.is_empty() => return Err(invalid("a non-empty value")),
            "application.id" => self.application_id = value.to_string(),
            "bootstrap.servers" => self.bootstrap_servers = value.to_string(),
            "num.stream.threads" => {
                self.num_stream_threads = value.parse().ok().filter(|n| *n >= 1).ok_or_else(|| invalid(THREADS_EXPECTED))?
            }
            "processing.guarantee" => {
                self.processing_guarantee = match value {
                    "at_least_once" => ProcessingGuarantee::AtLeastOnce,
                    "exactly_once_v2" => ProcessingGuarantee::ExactlyOnceV2,
                    _ => return Err(invalid("at_least_once or exactly_once_v2")),
                }
            }
            "commit.interval.ms" => {
                self.commit_interval = Some(Duration::from_millis(
                    value.parse().map_err(|_| invalid("milliseconds, a whole number >= 0"))?,
                ))
            }
            "statestore.cache.max.bytes" | "cache.max.bytes.buffering" => {
                self.cache_max_bytes = value.parse().map_err(|_| invalid("bytes, a whole number >= 0"))?
            }
            "state.dir" => self.state_dir = PathBuf::from(value),
            "max.task.idle.ms" => {
                let ms: i64 = value.parse().map_err(|_| invalid("milliseconds >= 0, or -1 to never wait"))?;
                if ms < -1 {
                    return Err(invalid("milliseconds >= 0, or -1 to never wait"));
                }
                self.max_task_idle = super::partition_group::MaxTaskIdle::from_millis(ms);
            }
            "buffered.records.per.partition" => {
                self.buffered_records_per_partition =
                    value.parse().ok().filter(|n| *n >= 1).ok_or_else(|| invalid("a whole number >= 1"))?
            }
            "replication.factor" => {
                self.replication_factor = value
                    .parse()
                    .ok()
                    .filter(|n| *n == -1 || *n >= 1)
                    .ok_or_else(|| invalid("-1 (the broker default) or a whole number >= 1"))?
            }
            "default.timestamp.extractor" => {
                self.timestamp_extractor = match short_class_name(value) {
                    "FailOnInvalidTimestamp" => Arc::new(FailOnInvalidTimestamp),
                    "LogAndSkipOnInvalidTimestamp" => {
                        Arc::new(kstreams_time::LogAndSkipOnInvalidTimestamp)
                    }
                    "UsePartitionTimeOnInvalidTimestamp" => {
                        Arc::new(kstreams_time::UsePartitionTimeOnInvalidTimestamp)
                    }
                    "WallclockTimestampExtractor" => {
                        Arc::new(kstreams_time::WallclockTimestampExtractor)
                    }
                    _ => {
                        return Err(invalid(
                            "FailOnInvalidTimestamp, LogAndSkipOnInvalidTimestamp, \
                             UsePartitionTimeOnInvalidTimestamp or WallclockTimestampExtractor \
                             (set others in code with Consumed::with_timestamp_extractor)",
                        ))
                    }
                }
            }
            "deserialization.exception.handler" | "default.deserialization.exception.handler" => {
                self.deserialization = match short_class_name(value) {
                    "LogAndFailExceptionHandler" => DeserializationHandling::LogAndFail,
                    "LogAndContinueExceptionHandler" => DeserializationHandling::LogAndContinue,
                    _ => return Err(invalid("LogAndFailExceptionHandler or LogAndContinueExceptionHandler")),
                }
            }
            "production.exception.handler" | "default.production.exception.handler" => {
                self.production = match short_class_name(value) {
                    "DefaultProductionExceptionHandler" | "LogAndFailProductionExceptionHandler" => {
                        ProductionHandling::Fail
                    }
                    "LogAndContinueProductionExceptionHandler" => ProductionHandling::Continue,
                    _ => {
                        return Err(invalid(
                            "DefaultProductionExceptionHandler or LogAndContinueProductionExceptionHandler",
                        ))
                    }
                }
            }
            "repartition.purge.interval.ms" => {
                self.repartition_purge_interval = Duration::from_millis(
                    value.parse().map_err(|_| invalid("milliseconds, a whole number >= 0"))?,
                )
            }
            // Kafka Streams takes any long: a negative value shortens the
            // changelog's retention below the store's, which the broker
            // refuses at topic creation unless the sum is still >= -1.
            "windowstore.changelog.additional.retention.ms" => {
                self.window_store_changelog_additional_retention_ms =
                    value.parse().map_err(|_| invalid("milliseconds, a whole number"))?
            }
            "errors.dead.letter.queue.topic.name" => {
                self.dead_letter_queue = if value.is_empty() {
                    None
                } else {
                    Some(value.to_string())
                };
            }
            "group.protocol" => {
                self.streams_group_protocol = if value.eq_ignore_ascii_case("streams") {
                    true
                } else if value.eq_ignore_ascii_case("classic") {
                    false
                } else {
                    return Err(invalid(
                        "classic (a consumer group; for KIP-848 set consumer.group.protocol=consumer) \
                         or streams (KIP-1071, brokers 4.2 and newer)",
                    ));
                }
            }
            "application.server" => {
                self.application_server = if value.trim().is_empty() {
                    None
                } else {
                    let endpoint = value.trim().rsplit_once(':').and_then(|(host, port)| {
                        Some((host.to_string(), port.parse::<u16>().ok()?)).filter(|(h, _)| !h.is_empty())
                    });
                    Some(endpoint.ok_or_else(|| invalid("host:port, such as 10.0.0.7:8080"))?)
                }
            }
            "num.standby.replicas" => {
                self.num_standby_replicas = Some(value.trim().parse().map_err(|_| {
                    invalid("a whole number of standby copies per task, 0 or more (0: none)")
                })?)
            }
            "poll.ms" => {
                self.poll = Duration::from_millis(
                    value.parse().map_err(|_| invalid("milliseconds, a whole number >= 0"))?,
                )
            }
            "metrics.recording.level" => {
                self.metrics_recording_level =
                    value.parse().map_err(|_| invalid("INFO, DEBUG or TRACE"))?
            }
            ASYNC_MAX_IN_FLIGHT_PER_TASK => {
                self.async_limits.per_task = parse_at_least_one(value)
                    .ok_or_else(|| invalid("a whole number of records, at least 1"))?
            }
            ASYNC_MAX_IN_FLIGHT_PER_THREAD => {
                self.async_limits.per_thread = parse_at_least_one(value)
                    .ok_or_else(|| invalid("a whole number of records, at least 1"))?
            }
            ASYNC_WORKER_THREADS => {
                self.async_limits.workers = parse_at_least_one(value)
                    .ok_or_else(|| invalid("a whole number of threads, at least 1"))?
            }
            ASYNC_DRAIN_TIMEOUT => {
                self.async_drain_timeout = Duration::from_millis(
                    value.trim().parse().map_err(|_| invalid("milliseconds, a whole number >= 0"))?,
                )
            }
            HTTP_ADDRESS => {
                self.http_address = if value.trim().is_empty() {
                    None
                } else {
                    Some(value.trim().parse().map_err(|_| {
                        invalid("an IP address and port, such as 127.0.0.1:9464 (this host only) or 0.0.0.0:9464, or empty for no server")
                    })?)
                }
            }
            TRACING_ENABLED | TRACING_START_TRACES => {
                let on = match value.trim() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(invalid("true or false")),
                };
                if key == TRACING_ENABLED {
                    self.tracing.enabled = on;
                } else {
                    self.tracing.start_traces = on;
                }
            }
            TRACING_SAMPLE_RATIO => {
                self.tracing.sample_ratio = value
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|r| (0.0..=1.0).contains(r))
                    .ok_or_else(|| invalid("a number from 0 to 1"))?
            }
            "processing.exception.handler" => {
                self.processing = match short_class_name(value) {
                    "LogAndFailProcessingExceptionHandler" => ProcessingHandling::Fail,
                    "LogAndContinueProcessingExceptionHandler" => ProcessingHandling::Continue,
                    _ => {
                        return Err(invalid(
                            "LogAndFailProcessingExceptionHandler or LogAndContinueProcessingExceptionHandler",
                        ))
                    }
                }
            }
            // librdkafka's own topic.* properties (topic.metadata.*) stay
            // client settings.
            _ if key.starts_with(TOPIC_PREFIX) && !librdkafka_has_property(key) => {
                let topic_key = &key[TOPIC_PREFIX.len()..];
                if topic_key.is_empty() {
                    return Err(ConfigError::Unknown {
                        key: key.to_string(),
                        suggestion: None,
                    });
                }
                self.internal_topic_configs
                    .insert(topic_key.to_string(), value.to_string());
            }
            _ => {
                if let Some((prefix, client_key)) = ClientPrefix::split(key) {
                    return self.set_client(prefix, client_key, value);
                }
                if let Some(handling) = kafka_streams_only(key) {
                    return handling.apply(key, value);
                }
                return self.set_client(ClientPrefix::Unprefixed, key, value);
            }
        }
        Ok(())
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
        self
    }

    /// What to do when a processor fails.
    pub fn processing_handling(mut self, handling: ProcessingHandling) -> Self {
        self.processing = handling;
        self
    }

    /// What to do when a record cannot be written (serialization or the
    /// broker refusing it).
    pub fn production_handling(mut self, handling: ProductionHandling) -> Self {
        self.production = handling;
        self
    }

    /// How often records the application has consumed are deleted from
    /// its repartition topics (`repartition.purge.interval.ms`, 30 s).
    pub fn repartition_purge_interval(mut self, interval: Duration) -> Self {
        self.repartition_purge_interval = interval;
        self
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
        TaskConfig {
            application_id: self.application_id.clone(),
            default_timestamp_extractor: self.timestamp_extractor.clone(),
            deserialization: self.deserialization,
            processing: self.processing,
            production: self.production,
            dead_letter_queue: self.dead_letter_queue.clone(),
            tracing: self.tracing,
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

fn short_class_name(value: &str) -> &str {
    value.rsplit('.').next().unwrap_or(value)
}

/// The prefix a Kafka client setting was given with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum ClientPrefix {
    /// No prefix: every client the key applies to.
    Unprefixed,
    /// `consumer.`: the main, restore and global consumers.
    Consumer,
    /// `main.consumer.`
    MainConsumer,
    /// `restore.consumer.`
    RestoreConsumer,
    /// `global.consumer.`
    GlobalConsumer,
    /// `producer.`
    Producer,
    /// `admin.`
    Admin,
}

impl ClientPrefix {
    const PREFIXED: [ClientPrefix; 6] = [
        ClientPrefix::MainConsumer,
        ClientPrefix::RestoreConsumer,
        ClientPrefix::GlobalConsumer,
        ClientPrefix::Consumer,
        ClientPrefix::Producer,
        ClientPrefix::Admin,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ClientPrefix::Unprefixed => "",
            ClientPrefix::Consumer => "consumer.",
            ClientPrefix::MainConsumer => "main.consumer.",
            ClientPrefix::RestoreConsumer => "restore.consumer.",
            ClientPrefix::GlobalConsumer => "global.consumer.",
            ClientPrefix::Producer => "producer.",
            ClientPrefix::Admin => "admin.",
        }
    }

    /// The prefix of `key` and the client key after it.
    fn split(key: &str) -> Option<(ClientPrefix, &str)> {
        Self::PREFIXED
            .iter()
            .find_map(|p| key.strip_prefix(p.as_str()).map(|k| (*p, k)))
    }

    /// The one client this prefix addresses, if it addresses one.
    fn only_client(self) -> Option<KafkaClient> {
        match self {
            ClientPrefix::MainConsumer => Some(KafkaClient::MainConsumer),
            ClientPrefix::RestoreConsumer => Some(KafkaClient::RestoreConsumer),
            ClientPrefix::GlobalConsumer => Some(KafkaClient::GlobalConsumer),
            ClientPrefix::Producer => Some(KafkaClient::Producer),
            ClientPrefix::Admin => Some(KafkaClient::Admin),
            ClientPrefix::Unprefixed | ClientPrefix::Consumer => None,
        }
    }
}

/// The Kafka clients kstreams makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KafkaClient {
    MainConsumer,
    RestoreConsumer,
    GlobalConsumer,
    Producer,
    Admin,
}

impl KafkaClient {
    /// The prefixes whose settings reach this client, weakest first.
    fn layers(self) -> &'static [ClientPrefix] {
        use ClientPrefix::*;
        match self {
            KafkaClient::MainConsumer => &[Unprefixed, Consumer, MainConsumer],
            KafkaClient::RestoreConsumer => &[Unprefixed, Consumer, RestoreConsumer],
            KafkaClient::GlobalConsumer => &[Unprefixed, Consumer, GlobalConsumer],
            KafkaClient::Producer => &[Unprefixed, Producer],
            KafkaClient::Admin => &[Unprefixed, Admin],
        }
    }

    /// Whether librdkafka's `key` means something to this client. The
    /// admin settings also serve a metadata probe made as a consumer, so
    /// they take only keys of every client.
    fn takes(self, key: &str) -> bool {
        match (librdkafka_scope(key), self) {
            (LibrdkafkaScope::Any, _) => true,
            (LibrdkafkaScope::Producer, KafkaClient::Producer) => true,
            (LibrdkafkaScope::Consumer, KafkaClient::Producer | KafkaClient::Admin) => false,
            (LibrdkafkaScope::Consumer, _) => true,
            (LibrdkafkaScope::Producer, _) => false,
        }
    }
}

/// Which clients a librdkafka property is for (the C/P column of
/// librdkafka's CONFIGURATION.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LibrdkafkaScope {
    Any,
    Consumer,
    Producer,
}

impl LibrdkafkaScope {
    fn name(self) -> &'static str {
        match self {
            LibrdkafkaScope::Any => "client",
            LibrdkafkaScope::Consumer => "consumer",
            LibrdkafkaScope::Producer => "producer",
        }
    }
}

/// librdkafka 2.12's consumer-only and producer-only properties (aliases
/// included); every other property it knows is for any client.
const LIBRDKAFKA_CONSUMER_ONLY: &[&str] = &[
    "auto.commit.enable",
    "auto.commit.interval.ms",
    "auto.offset.reset",
    "check.crcs",
    "consume.callback.max.messages",
    "coordinator.query.interval.ms",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "enable.partition.eof",
    "fetch.error.backoff.ms",
    "fetch.max.bytes",
    "fetch.message.max.bytes",
    "fetch.min.bytes",
    "fetch.queue.backoff.ms",
    "fetch.wait.max.ms",
    "group.id",
    "group.instance.id",
    "group.protocol",
    "group.protocol.type",
    "group.remote.assignor",
    "heartbeat.interval.ms",
    "isolation.level",
    "max.partition.fetch.bytes",
    "max.poll.interval.ms",
    "offset.store.method",
    "offset.store.path",
    "offset.store.sync.interval.ms",
    "partition.assignment.strategy",
    "queued.max.messages.kbytes",
    "queued.min.messages",
    "session.timeout.ms",
];
const LIBRDKAFKA_PRODUCER_ONLY: &[&str] = &[
    "acks",
    "batch.num.messages",
    "batch.size",
    "compression.codec",
    "compression.level",
    "compression.type",
    "delivery.report.only.error",
    "delivery.timeout.ms",
    "enable.gapless.guarantee",
    "enable.idempotence",
    "linger.ms",
    "message.send.max.retries",
    "message.timeout.ms",
    "partitioner",
    "produce.offset.report",
    "queue.buffering.backpressure.threshold",
    "queue.buffering.max.kbytes",
    "queue.buffering.max.messages",
    "queue.buffering.max.ms",
    "queuing.strategy",
    "request.required.acks",
    "request.timeout.ms",
    "retries",
    "sticky.partitioning.linger.ms",
    "transaction.timeout.ms",
    "transactional.id",
];

fn librdkafka_scope(key: &str) -> LibrdkafkaScope {
    if LIBRDKAFKA_CONSUMER_ONLY.contains(&key) {
        LibrdkafkaScope::Consumer
    } else if LIBRDKAFKA_PRODUCER_ONLY.contains(&key) {
        LibrdkafkaScope::Producer
    } else {
        LibrdkafkaScope::Any
    }
}

/// Java client settings librdkafka has no property for, and why kstreams
/// can ignore them (or what to set instead).
fn java_only_client_key(key: &str) -> Option<&'static str> {
    Some(match key {
        "key.serializer" | "value.serializer" | "key.deserializer" | "value.deserializer" => {
            "serdes are Rust values: Consumed::with, Produced::with"
        }
        "max.poll.records" => {
            "librdkafka hands out records one by one; buffered.records.per.partition bounds what a task buffers"
        }
        "interceptor.classes" | "partitioner.class" | "metric.reporters" | "metrics.num.samples"
        | "metrics.sample.window.ms" | "metrics.recording.level" | "auto.include.jmx.reporter"
        | "security.providers" | "config.providers" | "sasl.login.class"
        | "sasl.login.callback.handler.class" | "sasl.client.callback.handler.class" => {
            "a Java class or JMX setting"
        }
        "sasl.jaas.config" => {
            "librdkafka takes sasl.username and sasl.password (PLAIN, SCRAM) or sasl.oauthbearer.* instead"
        }
        "ssl.truststore.location" | "ssl.truststore.password" | "ssl.truststore.type"
        | "ssl.truststore.certificates" | "ssl.keystore.type" | "ssl.protocol"
        | "ssl.enabled.protocols" | "ssl.provider" | "ssl.trustmanager.algorithm"
        | "ssl.keymanager.algorithm" | "ssl.secure.random.implementation" => {
            "librdkafka uses OpenSSL: set ssl.ca.location (PEM) instead of a truststore; \
             ssl.keystore.location takes a PKCS#12 file"
        }
        "fetch.max.wait.ms" => "librdkafka's is fetch.wait.max.ms",
        "send.buffer.bytes" => "librdkafka's is socket.send.buffer.bytes",
        "receive.buffer.bytes" => "librdkafka's is socket.receive.buffer.bytes",
        "buffer.memory" => "librdkafka's is queue.buffering.max.kbytes",
        "max.request.size" => "librdkafka's is message.max.bytes",
        "default.api.timeout.ms" | "max.block.ms" | "client.dns.lookup" | "exclude.internal.topics"
        | "metadata.max.idle.ms" | "partitioner.adaptive.partitioning.enable"
        | "partitioner.availability.timeout.ms" | "partitioner.ignore.keys"
        | "internal.leave.group.on.close" | "reconnect.backoff.jitter" => {
            "librdkafka has no such setting"
        }
        _ => return None,
    })
}

/// `auto.offset.reset` as librdkafka checks it: Java's `none` (fail when a
/// partition has no committed offset) is librdkafka's `error`, which
/// kstreams turns into [`RuntimeError::NoCommittedOffset`](super::RuntimeError::NoCommittedOffset).
/// Kafka 4's `by_duration:<ISO-8601 duration>` (KIP-1106) has no librdkafka
/// counterpart: it is kept as written (the value returned is only what
/// librdkafka checks) and the stream thread seeks partitions without a
/// committed offset itself ([`reset_by_duration`]). `None` for other keys
/// and values; `Err` says what is accepted.
fn auto_offset_reset_for_librdkafka(
    key: &str,
    value: &str,
) -> Option<Result<&'static str, &'static str>> {
    if key != "auto.offset.reset" {
        return None;
    }
    let trimmed = value.trim();
    if trimmed.eq_ignore_ascii_case("none") {
        Some(Ok("error"))
    } else if trimmed.to_ascii_lowercase().starts_with("by_duration:") {
        Some(match reset_by_duration(trimmed) {
            Some(_) => Ok(BY_DURATION_FALLBACK),
            None => Err(
                "by_duration: and a non-negative ISO-8601 duration (PnDTnHnMn.nS, e.g. \
                 by_duration:PT1H), or earliest, latest or none",
            ),
        })
    } else {
        None
    }
}

/// What librdkafka does under `auto.offset.reset=by_duration:...` when the
/// stream thread has not placed a partition itself: a committed offset out
/// of range (retention deleted it) restarts at the earliest record kept,
/// where Kafka's consumer would look up the duration again.
pub(crate) const BY_DURATION_FALLBACK: &str = "earliest";

/// The duration of `by_duration:<ISO-8601>` (Java's `Duration.parse`
/// syntax: `PnDTnHnMn.nS`, case-insensitive, not negative).
pub(crate) fn reset_by_duration(value: &str) -> Option<Duration> {
    let (prefix, iso) = value.trim().split_at_checked("by_duration:".len())?;
    if !prefix.eq_ignore_ascii_case("by_duration:") {
        return None;
    }
    let iso = iso.trim().to_ascii_uppercase();
    let iso = iso.strip_prefix('+').unwrap_or(&iso);
    let rest = iso.strip_prefix('P')?;
    let (days, time) = match rest.split_once('T') {
        Some((days, time)) if !time.is_empty() => (days, Some(time)),
        Some(_) => return None,
        None => (rest, None),
    };
    let mut millis: u128 = 0;
    let mut any = false;
    if !days.is_empty() {
        let n = days.strip_suffix('D')?;
        millis += n.parse::<u128>().ok()? * 86_400_000;
        any = true;
    }
    if let Some(mut time) = time {
        for (unit, unit_millis) in [('H', 3_600_000u128), ('M', 60_000)] {
            if let Some((n, after)) = time.split_once(unit) {
                millis += n.parse::<u128>().ok()? * unit_millis;
                time = after;
                any = true;
            }
        }
        if !time.is_empty() {
            let seconds = time.strip_suffix('S')?;
            let (whole, fraction) = seconds.split_once('.').unwrap_or((seconds, ""));
            if fraction.len() > 9 || !fraction.chars().all(|c| c.is_ascii_digit()) {
                return None;
            }
            millis += whole.parse::<u128>().ok()? * 1_000;
            millis += format!("{fraction:0<3}")[..3].parse::<u128>().ok()?;
            any = true;
        }
    }
    any.then(|| Duration::from_millis(u64::try_from(millis).unwrap_or(u64::MAX)))
}

/// Client settings kstreams sets itself whatever the user says, as Kafka
/// Streams does, and why.
fn set_by_kstreams(key: &str) -> Option<&'static str> {
    Some(match key {
        "enable.auto.commit" => {
            "a stream thread commits offsets itself, after its outputs are sent"
        }
        "group.id" => "the main consumer's group is application.id",
        "client.id" => "each client's id is made from the thread's name",
        "bootstrap.servers" => "every client uses the top-level bootstrap.servers",
        _ => return None,
    })
}

/// The keys `StreamsConfig::set` takes (besides client settings), for
/// suggestions when a key is misspelt.
const KNOWN_KEYS: &[&str] = &[
    "application.id",
    "bootstrap.servers",
    "num.stream.threads",
    "processing.guarantee",
    "commit.interval.ms",
    "statestore.cache.max.bytes",
    "cache.max.bytes.buffering",
    "state.dir",
    "max.task.idle.ms",
    "buffered.records.per.partition",
    "replication.factor",
    "default.timestamp.extractor",
    "deserialization.exception.handler",
    "default.deserialization.exception.handler",
    "production.exception.handler",
    "default.production.exception.handler",
    "processing.exception.handler",
    "repartition.purge.interval.ms",
    "windowstore.changelog.additional.retention.ms",
    "errors.dead.letter.queue.topic.name",
    "metrics.recording.level",
    "poll.ms",
    "num.standby.replicas",
    "group.protocol",
    "application.server",
    HTTP_ADDRESS,
    ASYNC_MAX_IN_FLIGHT_PER_TASK,
    ASYNC_MAX_IN_FLIGHT_PER_THREAD,
    ASYNC_WORKER_THREADS,
    ASYNC_DRAIN_TIMEOUT,
    TRACING_ENABLED,
    TRACING_START_TRACES,
    TRACING_SAMPLE_RATIO,
];

/// Deprecated Kafka Streams keys and the keys that replace them: when both
/// are set Kafka Streams uses the new one (`StreamsConfig`'s
/// `totalCacheSize`, `deserializationExceptionHandler`,
/// `productionExceptionHandler`).
const DEPRECATED_KEYS: [(&str, &str); 3] = [
    ("cache.max.bytes.buffering", "statestore.cache.max.bytes"),
    (
        "default.deserialization.exception.handler",
        "deserialization.exception.handler",
    ),
    (
        "default.production.exception.handler",
        "production.exception.handler",
    ),
];

/// Kafka Streams' prefix of topic configs for the internal topics.
const TOPIC_PREFIX: &str = "topic.";

/// Whether librdkafka has a property `key` (whatever the value).
fn librdkafka_has_property(key: &str) -> bool {
    !matches!(
        rdkafka::ClientConfig::new()
            .set(key, "")
            .create_native_config(),
        Err(rdkafka::error::KafkaError::ClientConfig(
            rdkafka::types::RDKafkaConfRes::RD_KAFKA_CONF_UNKNOWN,
            ..
        ))
    )
}

/// kstreams' own key (no Kafka Streams config starts with `kstreams.`):
/// the address of the operator's HTTP endpoints.
const HTTP_ADDRESS: &str = "kstreams.http.address";
/// kstreams' own keys: record tracing with W3C `traceparent` headers.
const TRACING_ENABLED: &str = "kstreams.tracing.enabled";
const TRACING_START_TRACES: &str = "kstreams.tracing.start.traces";
const TRACING_SAMPLE_RATIO: &str = "kstreams.tracing.sample.ratio";

/// kstreams' own keys for async processors (Kafka Streams has none; see
/// `kstreams_runtime::async_runtime`): records in flight per task and per
/// stream thread, the workers of the instance's runtime, and how long a
/// commit under exactly-once, a rebalance or a close waits for calls.
const ASYNC_MAX_IN_FLIGHT_PER_TASK: &str = "kstreams.async.max.in.flight.per.task";
const ASYNC_MAX_IN_FLIGHT_PER_THREAD: &str = "kstreams.async.max.in.flight.per.thread";
const ASYNC_WORKER_THREADS: &str = "kstreams.async.worker.threads";
const ASYNC_DRAIN_TIMEOUT: &str = "kstreams.async.drain.timeout.ms";

/// kstreams' own keys: none of them is a Kafka Streams config, so a
/// properties file of a Kafka Streams application never sets one.
#[cfg(test)]
pub(crate) const KSTREAMS_ONLY_KEYS: &[&str] = &[
    HTTP_ADDRESS,
    ASYNC_MAX_IN_FLIGHT_PER_TASK,
    ASYNC_MAX_IN_FLIGHT_PER_THREAD,
    ASYNC_WORKER_THREADS,
    ASYNC_DRAIN_TIMEOUT,
];

fn parse_at_least_one(value: &str) -> Option<usize> {
    value.trim().parse::<usize>().ok().filter(|n| *n >= 1)
}

/// What kstreams does with a Kafka Streams config it has no use for.
enum KafkaStreamsOnly {
    /// Accepted and ignored, with a warning saying why.
    NoEffect(&'static str),
    /// Accepted at Kafka's default value (the one that means "off" or "the
    /// way kstreams works"); any other value is an error saying why.
    OnlyOff(&'static str, &'static str),
    /// Always an error, saying what to do instead.
    Refused(&'static str),
}

impl KafkaStreamsOnly {
    fn apply(self, key: &str, value: &str) -> Result<(), ConfigError> {
        let unsupported = |why| ConfigError::Unsupported {
            key: key.to_string(),
            value: value.to_string(),
            why,
        };
        match self {
            KafkaStreamsOnly::NoEffect(why) => {
                log::warn!("config {key}={value} has no effect in kstreams: {why}");
                Ok(())
            }
            KafkaStreamsOnly::OnlyOff(off, _) if value.trim().eq_ignore_ascii_case(off) => Ok(()),
            KafkaStreamsOnly::OnlyOff(_, why) | KafkaStreamsOnly::Refused(why) => {
                Err(unsupported(why))
            }
        }
    }
}

/// Kafka Streams configs (StreamsConfig's own, not the clients') that
/// kstreams does not implement, and what it does instead. Together with
/// [`KNOWN_KEYS`] and the client settings this covers every name of
/// Kafka Streams' `StreamsConfig.configDef()`: the test in
/// `config_kafka_names.rs` checks it against the list taken from the jar.
fn kafka_streams_only(key: &str) -> Option<KafkaStreamsOnly> {
    use KafkaStreamsOnly::{NoEffect, OnlyOff, Refused};
    const ASSIGNOR: &str = "tasks are placed by the consumer group's range assignor \
                            (group.protocol=classic) or by the broker (group.protocol=streams), \
                            not by Kafka Streams' client-side task assignor";
    Some(match key {
        "acceptable.recovery.lag" | "max.warmup.replicas" | "probing.rebalance.interval.ms"
        | "rack.aware.assignment.strategy" | "rack.aware.assignment.tags"
        | "rack.aware.assignment.non_overlap_cost" | "rack.aware.assignment.traffic_cost"
        | "task.assignor.class" => NoEffect(ASSIGNOR),
        // The tags rack.aware.assignment.tags names.
        _ if key.starts_with("client.tag.") => NoEffect(ASSIGNOR),
        "topology.optimization" => OnlyOff(
            "none",
            "kstreams builds the topology as Kafka Streams does with topology.optimization=none \
             (describe() is the same); remove it or set none",
        ),
        "default.key.serde" | "default.value.serde" | "default.windowed.key.serde.inner"
        | "default.windowed.value.serde.inner" | "windowed.inner.class.serde"
        | "default.list.key.serde.inner" | "default.list.key.serde.type"
        | "default.list.value.serde.inner" | "default.list.value.serde.type" => Refused(
            "serdes are Rust values: give them with Consumed::with, Produced::with, Grouped::with \
             or Materialized::with, or rely on the built-in serde of the type",
        ),
        "window.size.ms" => NoEffect(
            "it sizes Kafka Streams' windowed deserializer made from properties; serdes are Rust \
             values, and a windowed serde takes its window size in code",
        ),
        "default.dsl.store" => OnlyOff(
            "rocksDB",
            "DSL stores are RocksDB unless an operator chooses otherwise with \
             Materialized::with_store_type; remove it or set rocksDB",
        ),
        "dsl.store.suppliers.class" => OnlyOff(
            "org.apache.kafka.streams.state.BuiltInDslStoreSuppliers$RocksDBDslStoreSuppliers",
            "DSL stores are RocksDB unless an operator chooses otherwise with \
             Materialized::with_store_type; remove it or set BuiltInDslStoreSuppliers$RocksDBDslStoreSuppliers",
        ),
        "dsl.store.format" => OnlyOff(
            "DEFAULT",
            "headers-aware stores (HEADERS) are not implemented: DSL stores keep values (with \
             timestamps where Kafka Streams' DEFAULT does), not record headers; remove it or set DEFAULT",
        ),
        "enable.transactional.statestores" => OnlyOff(
            "false",
            "transactional state stores (KIP-892) are not implemented; remove it or set false",
        ),
        "statestore.uncommitted.max.bytes" => NoEffect(
            "it bounds the uncommitted writes of transactional state stores, which kstreams does \
             not have (enable.transactional.statestores=false)",
        ),
        "default.interactive.query.isolation.level" => NoEffect(
            "kstreams has no interactive queries, and without transactional state stores Kafka \
             Streams ignores it too",
        ),
        "rocksdb.config.setter" => Refused(
            "RocksDB options are set in code (kstreams_state::RocksDbSettings); the runtime does not \
             take a setter from properties yet",
        ),
        "processor.wrapper.class" => OnlyOff(
            "org.apache.kafka.streams.processor.internals.NoOpProcessorWrapper",
            "kstreams does not wrap processors (KIP-1112); remove it or set the NoOpProcessorWrapper",
        ),
        "default.client.supplier" => OnlyOff(
            "org.apache.kafka.streams.processor.internals.DefaultKafkaClientSupplier",
            "kstreams makes its librdkafka clients itself; give client settings with the consumer., \
             producer. and admin. prefixes. Remove it or set the DefaultKafkaClientSupplier",
        ),
        "ensure.explicit.internal.resource.naming" => OnlyOff(
            "false",
            "kstreams does not check that internal topics and stores were named explicitly; \
             remove it or set false (Topology::describe shows the generated names)",
        ),
        "upgrade.from" => NoEffect("there is no earlier kstreams version to upgrade from"),
        "built.in.metrics.version" => OnlyOff(
            "latest",
            "latest is the only version; kstreams' metrics are its Prometheus metrics \
             (KafkaStreams::metrics)",
        ),
        "metrics.num.samples" | "metrics.sample.window.ms" | "metric.reporters"
        | "auto.include.jmx.reporter" => NoEffect(
            "metrics are Prometheus histograms and counters (KafkaStreams::metrics), not sampled \
             JMX metrics",
        ),
        "log.summary.interval.ms" => NoEffect(
            "stream threads log no periodic summary; the metrics count what they process \
             (kstreams_task_process_total)",
        ),
        "topology.description.push.enabled" => NoEffect(
            "kstreams sends the broker no topology descriptions (Kafka Streams sends them only \
             under group.protocol=streams, when the broker asks)",
        ),
        "metadata.cluster.check.enable" => NoEffect(
            "librdkafka's clients send no cluster information when they connect, so a broker \
             cannot detect a misrouted connection",
        ),
        "processing.exception.handler.global.enabled" => NoEffect(
            "global tables are loaded into their stores as the records are, with no processors, \
             so there is nothing for the processing exception handler to handle",
        ),
        "state.cleanup.delay.ms" => NoEffect(
            "the state directories of tasks this instance no longer owns are kept, not deleted \
             after a delay",
        ),
        "state.cleanup.dir.max.age.ms" => NoEffect(
            "state directories are not purged by age at startup; delete an application's \
             directory under state.dir yourself to start it from its changelogs",
        ),
        "allow.os.group.write.access" => NoEffect(
            "state directories are created with the process's umask, where Kafka Streams sets \
             rwxr-x--- (rwxrwx--- with this true); set the umask to restrict them",
        ),
        "task.timeout.ms" => NoEffect(
            "kstreams does not retry a task after a client timeout: librdkafka retries requests by \
             its own settings (message.timeout.ms, request.timeout.ms)",
        ),
        _ => return None,
    })
}

#[cfg(test)]
#[path = "config_kafka_names.rs"]
mod kafka_names;

/// The known key `key` most likely meant: the nearest by edit distance,
/// if near enough to be a typo.
fn closest_known_key(key: &str) -> Option<&'static str> {
    KNOWN_KEYS
        .iter()
        .map(|known| (edit_distance(key, known), *known))
        .filter(|(distance, known)| *distance <= 2.max(known.len() / 5))
        .min()
        .map(|(_, known)| known)
}

/// Levenshtein distance over bytes (config keys are ASCII).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current.push(substitution.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Vec<(&'static str, &'static str)> {
        vec![("application.id", "app"), ("bootstrap.servers", "b:9092")]
    }

    #[test]
    fn missing_required_keys_are_named_with_a_hint() {
        let err = StreamsConfig::from_properties([("bootstrap.servers", "b:1")]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("missing required config application.id"),
            "{err}"
        );
        let err = StreamsConfig::from_properties([("application.id", "a")]).unwrap_err();
        assert!(err.to_string().contains("bootstrap.servers"), "{err}");
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
    fn the_http_address_is_an_ip_and_port_or_nothing() {
        let mut config = StreamsConfig::new("app", "b:1");
        assert_eq!(config.configured_http_address(), None);
        config
            .set("kstreams.http.address", "127.0.0.1:9464")
            .unwrap();
        assert_eq!(
            config.configured_http_address(),
            Some("127.0.0.1:9464".parse().unwrap())
        );
        let err = config
            .set("kstreams.http.address", "localhost")
            .unwrap_err();
        assert!(matches!(err, ConfigError::Invalid { .. }), "{err}");
        assert!(err.to_string().contains("kstreams.http.address"), "{err}");
        config.set("kstreams.http.address", "").unwrap();
        assert_eq!(config.configured_http_address(), None);
    }

    #[test]
    fn every_known_key_is_taken() {
        for key in KNOWN_KEYS {
            let mut config = StreamsConfig::new("app", "b:1");
            match config.set(key, "x") {
                Ok(()) | Err(ConfigError::Invalid { .. }) => {}
                Err(e) => panic!("{key}: {e}"),
            }
        }
    }

    #[test]
    fn typos_get_a_suggestion_and_strangers_none() {
        assert_eq!(
            closest_known_key("comit.interval.ms"),
            Some("commit.interval.ms")
        );
        assert_eq!(
            closest_known_key("processing.guarantees"),
            Some("processing.guarantee")
        );
        assert_eq!(closest_known_key("max.task.idle"), Some("max.task.idle.ms"));
        assert_eq!(closest_known_key("fetch.min.bytes"), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
    }

    #[test]
    fn standby_replicas_need_the_streams_group_protocol() {
        let mut config = StreamsConfig::new("app", "b:1");
        config.set("num.standby.replicas", "1").unwrap();
        let text = config.validate().unwrap_err().to_string();
        assert!(text.contains("num.standby.replicas=1"), "{text}");
        assert!(text.contains("group.protocol=streams"), "{text}");
        config.set("group.protocol", "streams").unwrap();
        assert_eq!(config.validate(), Ok(()));
        assert!(config.set("num.standby.replicas", "-1").is_err());
        assert!(StreamsConfig::new("app", "b:1")
            .set("num.standby.replicas", "0")
            .is_ok());
    }

    #[test]
    fn kafka_streams_configs_without_a_counterpart_say_why() {
        let set = |key: &str, value: &str| {
            let mut config = StreamsConfig::new("app", "b:1");
            config.set(key, value)
        };
        // Off is fine; anything else names the key, the value and the way out.
        assert_eq!(set("topology.optimization", "none"), Ok(()));
        assert!(set("topology.optimization", "all")
            .unwrap_err()
            .to_string()
            .contains("topology.optimization=none"));
        assert!(set(
            "default.key.serde",
            "org.apache.kafka.common.serialization.Serdes$StringSerde"
        )
        .unwrap_err()
        .to_string()
        .contains("Consumed::with"));
        assert!(set("group.protocol", "kip848")
            .unwrap_err()
            .to_string()
            .contains("consumer.group.protocol=consumer"));
        // Settings of Kafka Streams' own assignor and metrics have no effect.
        assert_eq!(set("acceptable.recovery.lag", "10000"), Ok(()));
        assert_eq!(set("metrics.num.samples", "2"), Ok(()));
    }

    #[test]
    fn poll_ms_is_read() {
        let mut config = StreamsConfig::new("app", "b:1");
        assert_eq!(config.poll, Duration::from_millis(100));
        config.set("poll.ms", "20").unwrap();
        assert_eq!(config.poll, Duration::from_millis(20));
        assert!(config.set("poll.ms", "soon").is_err());
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_key() {
        let mut p = base();
        p.push(("num.stream.thread", "2"));
        let err = StreamsConfig::from_properties(p).unwrap_err();
        assert_eq!(
            err,
            ConfigError::Unknown {
                key: "num.stream.thread".into(),
                suggestion: Some("num.stream.threads"),
            }
        );
        assert!(
            err.to_string()
                .starts_with("unknown config num.stream.thread (did you mean num.stream.threads?)"),
            "{err}"
        );
        for (key, value) in [
            ("processing.guarantee", "exactly_once"),
            ("commit.interval.ms", "-5"),
            ("max.task.idle.ms", "-2"),
            ("replication.factor", "0"),
            ("deserialization.exception.handler", "Ignore"),
            ("metrics.recording.level", "verbose"),
        ] {
            let mut p = base();
            p.push((key, value));
            let err = StreamsConfig::from_properties(p).unwrap_err();
            assert!(err.to_string().contains(key), "{key}: {err}");
        }
    }

    #[test]
    fn prefixed_and_shared_client_settings_reach_the_clients() {
        let mut p = base();
        p.extend([
            ("consumer.fetch.min.bytes", "10"),
            ("producer.linger.ms", "5"),
            ("admin.request.timeout.ms", "100"),
            ("security.protocol", "SASL_SSL"),
            (
                "org.apache.kafka.streams.errors.LogAndContinueExceptionHandler",
                "x",
            ),
        ]);
        let err = StreamsConfig::from_properties(p.clone()).unwrap_err();
        assert!(matches!(err, ConfigError::Unknown { .. }));
        p.pop();
        p.push((
            "deserialization.exception.handler",
            "org.apache.kafka.streams.errors.LogAndContinueExceptionHandler",
        ));
        let c = StreamsConfig::from_properties(p).unwrap();
        let get = |client, key| c.client_settings(client).get(key).map(|(_, v)| v.clone());
        assert_eq!(
            get(KafkaClient::MainConsumer, "fetch.min.bytes").unwrap(),
            "10"
        );
        assert_eq!(get(KafkaClient::Producer, "linger.ms").unwrap(), "5");
        assert_eq!(
            get(KafkaClient::Admin, "request.timeout.ms").unwrap(),
            "100"
        );
        for client in [
            KafkaClient::Producer,
            KafkaClient::Admin,
            KafkaClient::GlobalConsumer,
        ] {
            assert_eq!(get(client, "security.protocol").unwrap(), "SASL_SSL");
        }
        assert_eq!(c.deserialization, DeserializationHandling::LogAndContinue);
    }

    #[test]
    fn commit_interval_defaults_depend_on_the_guarantee() {
        let c = StreamsConfig::new("a", "b");
        assert_eq!(c.effective_commit_interval(), Duration::from_secs(30));
        let c = c.processing_guarantee(ProcessingGuarantee::ExactlyOnceV2);
        assert_eq!(c.effective_commit_interval(), Duration::from_millis(100));
    }

    #[test]
    fn the_consumer_group_protocol_refuses_classic_assignment_settings_in_any_order() {
        let consumer = ("consumer.group.protocol", "consumer");
        let strategy = ("consumer.partition.assignment.strategy", "range");
        for properties in [[consumer, strategy], [strategy, consumer]] {
            let mut p = base();
            p.extend(properties);
            let err = StreamsConfig::from_properties(p).unwrap_err();
            assert_eq!(
                err,
                ConfigError::Conflict {
                    key: "consumer.partition.assignment.strategy".into(),
                    with: "consumer.group.protocol=consumer".into(),
                    hint: CLASSIC_ONLY[0].1.into(),
                }
            );
            assert!(
                err.to_string().contains("consumer.group.remote.assignor"),
                "{err}"
            );
        }
        // Through main.consumer. and set on a built config, found at start.
        let config = StreamsConfig::new("app", "b:9092")
            .client_config("main.consumer.group.protocol", "CONSUMER")
            .client_config("consumer.session.timeout.ms", "6000");
        let err = config.validate().unwrap_err();
        assert!(
            err.to_string().starts_with(
                "config consumer.session.timeout.ms cannot be used with main.consumer.group.protocol=CONSUMER"
            ),
            "{err}"
        );
    }

    #[test]
    fn the_streams_group_protocol_takes_the_endpoint_and_refuses_a_consumer_protocol() {
        let mut p = base();
        p.extend([
            ("group.protocol", "STREAMS"),
            ("application.server", "host-7:8080"),
        ]);
        let c = StreamsConfig::from_properties(p).unwrap();
        assert_eq!(c.group_protocol(), GroupProtocol::Streams);
        assert_eq!(c.application_server, Some(("host-7".to_string(), 8080)));

        let mut p = base();
        p.push(("application.server", "no-port"));
        let err = StreamsConfig::from_properties(p).unwrap_err();
        assert!(err.to_string().contains("host:port"), "{err}");

        let mut p = base();
        p.extend([
            ("group.protocol", "streams"),
            ("consumer.group.protocol", "consumer"),
        ]);
        let err = StreamsConfig::from_properties(p).unwrap_err();
        assert!(
            err.to_string().contains("consumer.group.protocol=consumer")
                && err.to_string().contains("group.protocol=streams"),
            "{err}"
        );
    }

    #[test]
    fn group_protocol_values_and_what_each_allows() {
        let mut p = base();
        p.push(("consumer.group.protocol", "kip848"));
        let err = StreamsConfig::from_properties(p).unwrap_err();
        assert!(err.to_string().contains("consumer.group.protocol"), "{err}");

        // The classic protocol keeps its settings.
        let mut p = base();
        p.extend([
            ("consumer.group.protocol", "classic"),
            ("consumer.partition.assignment.strategy", "range"),
            ("consumer.session.timeout.ms", "6000"),
        ]);
        let c = StreamsConfig::from_properties(p).unwrap();
        assert_eq!(c.group_protocol(), GroupProtocol::Classic);
        assert_eq!(
            StreamsConfig::new("a", "b").group_protocol(),
            GroupProtocol::Classic
        );

        // The remote assignor may be overridden.
        let mut p = base();
        p.extend([
            ("consumer.group.protocol", "consumer"),
            ("consumer.group.remote.assignor", "uniform"),
        ]);
        let c = StreamsConfig::from_properties(p).unwrap();
        assert_eq!(c.group_protocol(), GroupProtocol::Consumer);
        assert_eq!(
            c.client_settings(KafkaClient::MainConsumer)["group.remote.assignor"].1,
            "uniform"
        );
    }

    #[test]
    fn assign_only_consumers_leave_group_membership_settings_out() {
        for key in [
            "group.id",
            "group.protocol",
            "group.remote.assignor",
            "partition.assignment.strategy",
            "session.timeout.ms",
            "heartbeat.interval.ms",
        ] {
            assert!(is_group_membership_key(key), "{key}");
        }
        assert!(!is_group_membership_key("fetch.min.bytes"));
    }

    #[test]
    fn client_keys_are_checked_against_librdkafka_naming_the_prefix_written() {
        let set = |key: &str, value: &str| StreamsConfig::new("app", "b:1").set(key, value);
        // A misspelt key under a prefix.
        let err = set("consumer.fetch.min.byte", "1").unwrap_err();
        assert!(
            matches!(&err, ConfigError::Client { key, .. } if key == "consumer.fetch.min.byte"),
            "{err}"
        );
        // A bad value, unprefixed and prefixed.
        for key in ["acks", "producer.acks", "main.consumer.auto.offset.reset"] {
            let err = set(key, "banana").unwrap_err();
            let text = err.to_string();
            assert!(
                text.starts_with(&format!("config {key}=banana is refused by librdkafka")),
                "{text}"
            );
        }
        // An unprefixed stranger is unknown, with a suggestion if it is a typo.
        assert!(matches!(
            set("fetch.min.byte", "1"),
            Err(ConfigError::Unknown { .. })
        ));
        // Java-only client keys and keys of another client are accepted
        // and ignored, never handed to librdkafka.
        let mut config = StreamsConfig::new("app", "b:1");
        for key in [
            "max.poll.records",
            "consumer.max.poll.records",
            "key.deserializer",
            "producer.value.serializer",
            "sasl.jaas.config",
            "consumer.acks",
            "main.consumer.linger.ms",
            "producer.auto.offset.reset",
        ] {
            let value = if key.ends_with("reset") {
                "earliest"
            } else {
                "1"
            };
            config
                .set(key, value)
                .unwrap_or_else(|e| panic!("{key}: {e}"));
        }
        assert!(
            config.client_settings.is_empty(),
            "{:?}",
            config.client_settings
        );
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

    #[test]
    fn max_task_idle_keeps_minus_one_apart_from_zero() {
        use super::super::partition_group::MaxTaskIdle;
        let mut config = StreamsConfig::new("app", "b:1");
        assert_eq!(config.max_task_idle, MaxTaskIdle::ForLagging);
        config.set("max.task.idle.ms", "-1").unwrap();
        assert_eq!(config.max_task_idle, MaxTaskIdle::Never);
        config.set("max.task.idle.ms", "0").unwrap();
        assert_eq!(config.max_task_idle, MaxTaskIdle::ForLagging);
        config.set("max.task.idle.ms", "250").unwrap();
        assert_eq!(
            config.max_task_idle,
            MaxTaskIdle::UpTo(Duration::from_millis(250))
        );
    }

    /// A Kafka Streams application's streams.properties, unchanged: every
    /// separator and escape Java's Properties#load takes.
    const PORTED: &str = r#"# streams.properties of a Kafka Streams application
! both comment markers
application.id = orders-enricher
bootstrap.servers: broker-1:9092,\
                   broker-2:9092
processing.guarantee exactly_once_v2
max.task.idle.ms=-1
compression.type=zstd
auto.offset.reset=earliest
max.poll.records=500
acks=all
state.dir=/var/lib/kstreams/\u006frders
main.consumer.fetch.min.bytes   = 1
key\ with\ spaces\=and\:colons=ignored
"#;

    #[test]
    fn a_kafka_streams_properties_file_is_read_as_java_reads_it() {
        let text = PORTED.replace("key\\ with\\ spaces\\=and\\:colons=ignored\n", "");
        let config = StreamsConfig::from_properties_str(&text).unwrap();
        assert_eq!(config.application_id, "orders-enricher");
        assert_eq!(config.bootstrap_servers, "broker-1:9092,broker-2:9092");
        assert_eq!(
            config.processing_guarantee,
            ProcessingGuarantee::ExactlyOnceV2
        );
        assert_eq!(
            config.max_task_idle,
            super::super::partition_group::MaxTaskIdle::Never
        );
        assert_eq!(config.state_dir, PathBuf::from("/var/lib/kstreams/orders"));
        let get = |client, key| {
            config
                .client_settings(client)
                .get(key)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(
            get(KafkaClient::Producer, "compression.type").as_deref(),
            Some("zstd")
        );
        assert_eq!(get(KafkaClient::Producer, "acks").as_deref(), Some("all"));
        assert_eq!(
            get(KafkaClient::MainConsumer, "auto.offset.reset").as_deref(),
            Some("earliest")
        );
        assert_eq!(
            get(KafkaClient::MainConsumer, "fetch.min.bytes").as_deref(),
            Some("1")
        );
        assert_eq!(get(KafkaClient::RestoreConsumer, "fetch.min.bytes"), None);

        // The same bytes from a file.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("streams.properties");
        std::fs::write(&path, &text).unwrap();
        let from_file = StreamsConfig::from_properties_file(&path).unwrap();
        assert_eq!(from_file.bootstrap_servers, config.bootstrap_servers);
        assert_eq!(from_file.state_dir, config.state_dir);
    }

    #[test]
    fn errors_in_a_properties_file_name_the_file_the_line_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("streams.properties");
        // A key with escaped separators is one key: unknown, on line 14.
        std::fs::write(&path, PORTED).unwrap();
        let err = StreamsConfig::from_properties_file(&path).unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with(&format!(
                "{}:14: unknown config key with spaces=and:colons",
                path.display()
            )),
            "{text}"
        );
        assert!(
            matches!(&err, ConfigError::InProperties { line: Some(14), error, .. }
            if matches!(**error, ConfigError::Unknown { .. }))
        );

        // A bad value: the line of the key.
        std::fs::write(
            &path,
            "application.id=a\nbootstrap.servers=b:1\n\n  acks = banana\n",
        )
        .unwrap();
        let text = StreamsConfig::from_properties_file(&path)
            .unwrap_err()
            .to_string();
        assert!(
            text.starts_with(&format!(
                "{}:4: config acks=banana is refused by librdkafka",
                path.display()
            )),
            "{text}"
        );

        // A missing key has no line.
        std::fs::write(&path, "bootstrap.servers=b:1\n").unwrap();
        let text = StreamsConfig::from_properties_file(&path)
            .unwrap_err()
            .to_string();
        assert!(
            text.starts_with(&format!(
                "{}: missing required config application.id",
                path.display()
            )),
            "{text}"
        );

        // Not properties syntax: a broken \u escape, with its line.
        let err = StreamsConfig::from_properties_str("application.id=a\nstate.dir=\\u00zz\n")
            .unwrap_err();
        assert!(
            matches!(&err, ConfigError::InProperties { line: Some(2), .. }),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .starts_with("properties text:2: not Java .properties syntax"),
            "{err}"
        );

        // A file that is not there.
        let gone = dir.path().join("nope.properties");
        let text = StreamsConfig::from_properties_file(&gone)
            .unwrap_err()
            .to_string();
        assert!(
            text.starts_with(&format!("cannot read properties file {}", gone.display())),
            "{text}"
        );
    }

    #[test]
    fn a_properties_file_is_iso_8859_1_and_a_string_is_taken_as_it_is() {
        // Java's Properties#load(InputStream): byte 0xE9 is 'é'.
        let bytes = b"application.id=caf\xe9\nbootstrap.servers=b:1\n";
        let config = StreamsConfig::from_properties_reader(&bytes[..], "bytes").unwrap();
        assert_eq!(config.application_id, "caf\u{e9}");
        let config =
            StreamsConfig::from_properties_str("application.id=caf\u{e9}\nbootstrap.servers=b:1")
                .unwrap();
        assert_eq!(config.application_id, "caf\u{e9}");
    }

    #[test]
    fn auto_offset_reset_none_is_librdkafkas_error_and_by_duration_is_kept() {
        let mut config = StreamsConfig::new("app", "b:1");
        config.set("auto.offset.reset", "none").unwrap();
        config
            .set("restore.consumer.auto.offset.reset", "NONE")
            .unwrap();
        assert_eq!(
            config.client_settings(KafkaClient::MainConsumer)["auto.offset.reset"].1,
            "error"
        );
        config
            .set("main.consumer.auto.offset.reset", "by_duration:PT1H")
            .unwrap();
        assert_eq!(
            config.client_settings(KafkaClient::MainConsumer)["auto.offset.reset"].1,
            "by_duration:PT1H"
        );
        let err = config
            .set("auto.offset.reset", "by_duration:1h")
            .unwrap_err();
        assert!(
            err.to_string().starts_with(
                "invalid value \"by_duration:1h\" for config auto.offset.reset: by_duration: and \
                 a non-negative ISO-8601 duration"
            ),
            "{err}"
        );
        config.set("auto.offset.reset", "latest").unwrap();
        assert_eq!(
            config.client_settings(KafkaClient::RestoreConsumer)["auto.offset.reset"].1,
            "error"
        );
    }

    #[test]
    fn by_duration_reads_durations_as_java_parses_them() {
        let ms = |v: &str| reset_by_duration(v).map(|d| d.as_millis());
        assert_eq!(ms("by_duration:PT1H"), Some(3_600_000));
        assert_eq!(ms("BY_DURATION:p1dt2h3m4.5s"), Some(93_784_500));
        assert_eq!(ms("by_duration:P2D"), Some(172_800_000));
        assert_eq!(ms("by_duration:PT0.001S"), Some(1));
        assert_eq!(ms("by_duration:PT90M"), Some(5_400_000));
        assert_eq!(ms("by_duration: PT30S"), Some(30_000));
        for bad in [
            "by_duration:",
            "by_duration:P",
            "by_duration:PT",
            "by_duration:-PT1H",
            "by_duration:PT-1H",
            "by_duration:1h",
            "by_duration:PT1.5H",
            "by_duration:P1W",
            "latest",
        ] {
            assert_eq!(ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn every_codec_kafka_streams_writes_is_built_in_and_kerberos_too() {
        for codec in ["none", "gzip", "snappy", "lz4", "zstd"] {
            let mut config = StreamsConfig::new("app", "b:1");
            config
                .set("compression.type", codec)
                .unwrap_or_else(|e| panic!("{codec}: {e}"));
            let producer: Result<rdkafka::producer::BaseProducer, _> =
                super::super::clients::producer(&config, "t", "p", 0).create();
            assert!(producer.is_ok(), "{codec}: {:?}", producer.err());
        }
        // GSSAPI needs librdkafka built with Cyrus SASL; a client without it
        // refuses the mechanism when created. No refresh: no kinit is run.
        let kerberos: Result<rdkafka::producer::BaseProducer, _> = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", "127.0.0.1:1")
            .set("security.protocol", "SASL_PLAINTEXT")
            .set("sasl.mechanisms", "GSSAPI")
            .set("sasl.kerberos.min.time.before.relogin", "0")
            .create();
        assert!(kerberos.is_ok(), "{:?}", kerberos.err());
    }
}
