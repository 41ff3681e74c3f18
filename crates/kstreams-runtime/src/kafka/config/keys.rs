//! Every key kstreams reads, declared once: Kafka Streams'
//! `StreamsConfig.configDef()` (a `ConfigDef`) as a table. An entry gives
//! the key's name, the deprecated name it replaces, what kstreams does with
//! it ([`Kind`]: how a value is parsed and applied, or why it has no
//! counterpart) and its doc line.
//!
//! [`StreamsConfig::set`] looks keys up here (Kafka client settings, which
//! librdkafka checks, are the `client` module's); the known keys suggested
//! for a misspelt one, the deprecated names and the kstreams-only keys are
//! read from the table, and the jar conformance test (`kafka_names.rs`)
//! iterates it.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use kstreams_time::FailOnInvalidTimestamp;

use super::registry::Chosen;
use super::{ConfigError, ProcessingGuarantee, StreamsConfig};
use crate::kafka::partition_group::MaxTaskIdle;
use crate::kafka::queries::IsolationLevel;
use crate::{DeserializationHandling, ProcessingHandling, ProductionHandling};

/// Keys the rest of the configuration names too (as Kafka's
/// `CommonClientConfigs`): the properties loader, and the client settings
/// of the same name.
pub(super) const APPLICATION_ID: &str = "application.id";
pub(super) const BOOTSTRAP_SERVERS: &str = "bootstrap.servers";
/// Kafka Streams' key, and the consumer's (`consumer.group.protocol`).
pub(super) const GROUP_PROTOCOL: &str = "group.protocol";
/// Kafka Streams' keys, and Java client settings librdkafka has no
/// counterpart for.
pub(super) const METRICS_RECORDING_LEVEL: &str = "metrics.recording.level";
pub(super) const METRICS_NUM_SAMPLES: &str = "metrics.num.samples";
pub(super) const METRICS_SAMPLE_WINDOW_MS: &str = "metrics.sample.window.ms";
pub(super) const METRIC_REPORTERS: &str = "metric.reporters";
pub(super) const AUTO_INCLUDE_JMX_REPORTER: &str = "auto.include.jmx.reporter";

/// One key (or, in [`PREFIXES`], a family of keys): Kafka's
/// `ConfigDef.ConfigKey`.
pub(super) struct ConfigKey {
    /// The key, or the prefix of the family.
    pub(super) name: &'static str,
    /// The name it had before Kafka Streams renamed it; of the two, the new
    /// one wins whatever the order.
    pub(super) deprecated: Option<&'static str>,
    /// What kstreams does with it.
    pub(super) kind: Kind,
    /// What it sets.
    pub(super) doc: &'static str,
}

/// Parses a value and applies it to the configuration.
pub(super) type Apply = fn(&mut StreamsConfig, &Setting<'_>) -> Result<(), ConfigError>;

/// What kstreams does with a key.
pub(super) enum Kind {
    /// A Kafka Streams config kstreams implements, with Kafka's meaning.
    Implemented(Apply),
    /// kstreams' own key: no Kafka Streams config, so a properties file of
    /// a Kafka Streams application never sets it.
    KstreamsOnly(Apply),
    /// A Kafka Streams config kstreams has no use for: accepted and
    /// ignored, with a warning saying why.
    NoEffect(&'static str),
    /// A Kafka Streams config accepted at its default (the value that means
    /// "off", or "the way kstreams works"); any other value is an error
    /// saying why.
    OnlyDefault {
        /// The value taken (compared ignoring case).
        default: &'static str,
        /// Why no other is.
        why: &'static str,
    },
    /// A Kafka Streams config refused whatever its value, saying what to do
    /// instead.
    Refused(&'static str),
}

impl ConfigKey {
    const fn new(name: &'static str, doc: &'static str, kind: Kind) -> Self {
        ConfigKey {
            name,
            deprecated: None,
            kind,
            doc,
        }
    }

    const fn implemented(name: &'static str, doc: &'static str, apply: Apply) -> Self {
        Self::new(name, doc, Kind::Implemented(apply))
    }

    /// An implemented key Kafka Streams renamed from `deprecated`.
    const fn renamed(
        name: &'static str,
        deprecated: &'static str,
        doc: &'static str,
        apply: Apply,
    ) -> Self {
        ConfigKey {
            deprecated: Some(deprecated),
            ..Self::implemented(name, doc, apply)
        }
    }

    const fn kstreams(name: &'static str, doc: &'static str, apply: Apply) -> Self {
        Self::new(name, doc, Kind::KstreamsOnly(apply))
    }

    const fn no_effect(name: &'static str, doc: &'static str, why: &'static str) -> Self {
        Self::new(name, doc, Kind::NoEffect(why))
    }

    const fn only_default(
        name: &'static str,
        doc: &'static str,
        default: &'static str,
        why: &'static str,
    ) -> Self {
        Self::new(name, doc, Kind::OnlyDefault { default, why })
    }

    const fn refused(name: &'static str, doc: &'static str, why: &'static str) -> Self {
        Self::new(name, doc, Kind::Refused(why))
    }

    /// Whether kstreams parses and applies its values.
    pub(super) fn is_implemented(&self) -> bool {
        matches!(self.kind, Kind::Implemented(_) | Kind::KstreamsOnly(_))
    }

    /// The names it is set by: its own, then the deprecated one.
    pub(super) fn names(&self) -> impl Iterator<Item = &'static str> {
        std::iter::once(self.name).chain(self.deprecated)
    }

    /// Sets `key` (one of its names, or for a prefix a key it starts) to
    /// `value`, as its kind says.
    pub(super) fn set(
        &self,
        config: &mut StreamsConfig,
        key: &str,
        value: &str,
    ) -> Result<(), ConfigError> {
        let unsupported = |why| ConfigError::Unsupported {
            key: key.to_string(),
            value: value.to_string(),
            why,
        };
        match self.kind {
            Kind::Implemented(apply) | Kind::KstreamsOnly(apply) => {
                let setting = Setting {
                    key,
                    value,
                    text: value,
                    rest: key.strip_prefix(self.name).unwrap_or_default(),
                };
                apply(config, &setting)?;
                log::debug!("config {key}={value}: {}", self.doc);
                Ok(())
            }
            Kind::NoEffect(why) => {
                log::warn!("config {key}={value} has no effect in kstreams: {why}");
                Ok(())
            }
            Kind::OnlyDefault { default, .. } if value.trim().eq_ignore_ascii_case(default) => {
                Ok(())
            }
            Kind::OnlyDefault { why, .. } | Kind::Refused(why) => Err(unsupported(why)),
        }
    }
}

/// The entry of `key`, by its name or its deprecated name.
pub(super) fn find(key: &str) -> Option<&'static ConfigKey> {
    KEYS.iter()
        .find(|entry| entry.names().any(|name| name == key))
}

/// The entry of the family of keys `key` belongs to.
pub(super) fn find_prefix(key: &str) -> Option<&'static ConfigKey> {
    PREFIXES.iter().find(|entry| key.starts_with(entry.name))
}

/// The implemented key `key` most likely meant: the nearest by edit
/// distance, if near enough to be a typo.
pub(super) fn closest_known_key(key: &str) -> Option<&'static str> {
    KEYS.iter()
        .filter(|entry| entry.is_implemented())
        .flat_map(ConfigKey::names)
        .map(|known| (strsim::levenshtein(key, known), known))
        .filter(|(distance, known)| *distance <= 2.max(known.len() / 5))
        .min()
        .map(|(_, known)| known)
}

/// A value being set, for an [`Apply`] to parse: errors name the key as
/// written and quote the value as given.
#[derive(Clone, Copy)]
pub(super) struct Setting<'a> {
    key: &'a str,
    value: &'a str,
    /// What is parsed: the value, or the value without the white space
    /// around it ([`Setting::trimmed`]).
    text: &'a str,
    /// For a family of keys, what follows the prefix.
    rest: &'a str,
}

const MILLIS: &str = "milliseconds, a whole number >= 0";
const THREADS: &str = "a whole number of threads, at least 1";
const RECORDS: &str = "a whole number of records, at least 1";

impl<'a> Setting<'a> {
    fn invalid(&self, expected: &str) -> ConfigError {
        ConfigError::Invalid {
            key: self.key.to_string(),
            value: self.value.to_string(),
            expected: expected.to_string(),
        }
    }

    /// The value without the white space around it, to parse.
    fn trimmed(self) -> Self {
        Setting {
            text: self.value.trim(),
            ..self
        }
    }

    fn parse<T: FromStr>(&self, expected: &str) -> Result<T, ConfigError> {
        self.text.parse().map_err(|_| self.invalid(expected))
    }

    /// The value parsed, if `accepted`.
    fn parse_if<T: FromStr>(
        &self,
        accepted: impl FnOnce(&T) -> bool,
        expected: &str,
    ) -> Result<T, ConfigError> {
        self.text
            .parse()
            .ok()
            .filter(accepted)
            .ok_or_else(|| self.invalid(expected))
    }

    fn millis(&self) -> Result<Duration, ConfigError> {
        self.parse(MILLIS).map(Duration::from_millis)
    }

    fn non_empty(&self) -> Result<String, ConfigError> {
        match self.text {
            "" => Err(self.invalid("a non-empty value")),
            text => Ok(text.to_string()),
        }
    }

    /// A Java class name's last part: `LogAndContinueExceptionHandler` of
    /// `org.apache.kafka.streams.errors.LogAndContinueExceptionHandler`.
    fn class(&self) -> &'a str {
        self.text.rsplit('.').next().unwrap_or(self.text)
    }
}

/// Why Kafka Streams' task assignor settings have no effect.
const ASSIGNOR: &str = "tasks are placed by the consumer group's range assignor \
                        (group.protocol=classic) or by the broker (group.protocol=streams), \
                        not by Kafka Streams' client-side task assignor";
/// Why default serdes are refused.
const SERDES: &str = "serdes are Rust values: give them with Consumed::with, Produced::with, \
                      Grouped::with or Materialized::with, or rely on the built-in serde of \
                      the type";
/// Why the settings of Kafka's sampled metrics have no effect.
const METRICS: &str = "metrics are Prometheus histograms and counters (KafkaStreams::metrics), \
                       not sampled JMX metrics";

/// The keys, by name: Kafka Streams' configs kstreams implements, kstreams'
/// own, and the Kafka Streams configs it has no use for. Kafka Streams'
/// other configs are the clients' (`client.id`, `security.protocol`, ...),
/// which go to librdkafka.
pub(super) static KEYS: &[ConfigKey] = &[
    // Kafka Streams' configs, implemented.
    ConfigKey::implemented(
        APPLICATION_ID,
        "The application's name, unique in the cluster: it names the consumer group, the \
         internal topics and the state directories.",
        |c, s| {
            c.application_id = s.non_empty()?;
            Ok(())
        },
    ),
    ConfigKey::implemented(
        BOOTSTRAP_SERVERS,
        "host:port of one or more brokers, comma-separated, to connect to the cluster by.",
        |c, s| {
            c.bootstrap_servers = s.non_empty()?;
            Ok(())
        },
    ),
    ConfigKey::implemented(
        "num.stream.threads",
        "The stream threads of the instance, each with its own consumer, producer and tasks.",
        |c, s| {
            c.num_stream_threads = s.parse_if(|n: &usize| *n >= 1, THREADS)?;
            Ok(())
        },
    ),
    ConfigKey::implemented(
        "processing.guarantee",
        "at_least_once, or exactly_once_v2: outputs and offsets commit in one transaction.",
        |c, s| {
            c.processing_guarantee = match s.text {
                "at_least_once" => ProcessingGuarantee::AtLeastOnce,
                "exactly_once_v2" => ProcessingGuarantee::ExactlyOnceV2,
                _ => return Err(s.invalid("at_least_once or exactly_once_v2")),
            };
            Ok(())
        },
    ),
    ConfigKey::implemented(
        "commit.interval.ms",
        "How often the stream threads commit: 30 s, or 100 ms under exactly-once.",
        |c, s| {
            c.commit_interval = Some(s.millis()?);
            Ok(())
        },
    ),
    ConfigKey::renamed(
        "statestore.cache.max.bytes",
        "cache.max.bytes.buffering",
        "The bytes of the record caches, split evenly between the stream threads; 0: none.",
        |c, s| {
            c.cache_max_bytes = s.parse("bytes, a whole number >= 0")?;
            Ok(())
        },
    ),
    ConfigKey::implemented(
        "state.dir",
        "The directory the state stores live under.",
        |c, s| {
            c.state_dir = PathBuf::from(s.text);
            Ok(())
        },
    ),
    ConfigKey::implemented(
        "max.task.idle.ms",
        "How long a task waits for data of an empty input partition: -1 never, 0 only for a \
         partition known to be behind its end (KIP-695).",
        |c, s| {
            let ms = s.parse_if(
                |ms: &i64| *ms >= -1,
                "milliseconds >= 0, or -1 to never wait",
            )?;
            c.max_task_idle = MaxTaskIdle::from_millis(ms);
            Ok(())
        },
    ),
    ConfigKey::implemented(
        "buffered.records.per.partition",
        "The records a task buffers per input partition before the partition is paused.",
        |c, s| {
            c.buffered_records_per_partition =
                s.parse_if(|n: &usize| *n >= 1, "a whole number >= 1")?;
            Ok(())
        },
    ),
    ConfigKey::implemented(
        "replication.factor",
        "The replication factor of the internal topics kstreams creates; -1: the broker's.",
        |c, s| {
            c.replication_factor = s.parse_if(
                |n: &i32| *n == -1 || *n >= 1,
                "-1 (the broker default) or a whole number >= 1",
            )?;
            Ok(())
        },
    ),
    ConfigKey::implemented(
        "default.timestamp.extractor",
        "The timestamp extractor of the sources that are given none.",
        |c, s| {
            c.timestamp_extractor = match s.class() {
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
                    return Err(s.invalid(
                        "FailOnInvalidTimestamp, LogAndSkipOnInvalidTimestamp, \
                         UsePartitionTimeOnInvalidTimestamp or WallclockTimestampExtractor \
                         (set others in code with Consumed::with_timestamp_extractor)",
                    ))
                }
            };
            Ok(())
        },
    ),
    ConfigKey::renamed(
        "deserialization.exception.handler",
        "default.deserialization.exception.handler",
        "What is done with a record that cannot be deserialized: fail, log and skip it, or a \
         handler of the application's own registered under the name \
         (StreamsConfig::register_deserialization_exception_handler; a Java class name finds it \
         by its last part).",
        |c, s| {
            // A built-in class sets the built-in handling; any other name
            // is a handler the application registers, resolved at start.
            let built_in = match s.class() {
                "LogAndFailExceptionHandler" => Some(DeserializationHandling::LogAndFail),
                "LogAndContinueExceptionHandler" => Some(DeserializationHandling::LogAndContinue),
                _ => None,
            };
            match built_in {
                Some(handling) => {
                    c.deserialization = handling;
                    c.exception_handlers.choose_deserialization(None);
                }
                None => c
                    .exception_handlers
                    .choose_deserialization(Some(Chosen::Named(s.non_empty()?))),
            }
            Ok(())
        },
    ),
    ConfigKey::renamed(
        "production.exception.handler",
        "default.production.exception.handler",
        "What is done with a record that cannot be produced: fail (retrying what Kafka calls \
         retriable), log and drop it, or a handler of the application's own registered under \
         the name (StreamsConfig::register_production_exception_handler; a Java class name \
         finds it by its last part).",
        |c, s| {
            // A built-in class sets the built-in handling; any other name
            // is a handler the application registers, resolved at start.
            let built_in = match s.class() {
                "DefaultProductionExceptionHandler" | "LogAndFailProductionExceptionHandler" => {
                    Some(ProductionHandling::Fail)
                }
                "LogAndContinueProductionExceptionHandler" => Some(ProductionHandling::Continue),
                _ => None,
            };
            match built_in {
                Some(handling) => {
                    c.production = handling;
                    c.exception_handlers.choose_production(None);
                }
                None => c
                    .exception_handlers
                    .choose_production(Some(Chosen::Named(s.non_empty()?))),
            }
            Ok(())
        },
    ),
    ConfigKey::implemented(
        "processing.exception.handler",
        "What is done when a processor fails on a record (KIP-1033): fail, log and skip it, or a \
         handler of the application's own registered under the name \
         (StreamsConfig::register_processing_exception_handler; a Java class name finds it by \
         its last part).",
        |c, s| {
            // A built-in class sets the built-in handling; any other name
            // is a handler the application registers, resolved at start.
            let built_in = match s.class() {
                "LogAndFailProcessingExceptionHandler" => Some(ProcessingHandling::Fail),
                "LogAndContinueProcessingExceptionHandler" => Some(ProcessingHandling::Continue),
                _ => None,
            };
            match built_in {
                Some(handling) => {
                    c.processing = handling;
                    c.exception_handlers.choose_processing(None);
                }
                None => c
                    .exception_handlers
                    .choose_processing(Some(Chosen::Named(s.non_empty()?))),
            }
            Ok(())
        },
    ),
    ConfigKey::implemented(
        "repartition.purge.interval.ms",
        "How often records the application has consumed are deleted from its repartition topics.",
        |c, s| {
            c.repartition_purge_interval = s.millis()?;
            Ok(())
        },
    ),
    ConfigKey::implemented(
        "windowstore.changelog.additional.retention.ms",
        "What a window or session store's changelog keeps beyond the store's retention.",
        // Kafka Streams takes any long: a negative value shortens the
        // changelog's retention below the store's, which the broker
        // refuses at topic creation unless the sum is still >= -1.
        |c, s| {
            c.window_store_changelog_additional_retention_ms =
                s.parse("milliseconds, a whole number")?;
            Ok(())
        },
    ),
    ConfigKey::implemented(
        "errors.dead.letter.queue.topic.name",
        "The topic the records the handlers drop also go to, the failure in headers (KIP-1034).",
        |c, s| {
            c.dead_letter_queue = (!s.text.is_empty()).then(|| s.text.to_string());
            Ok(())
        },
    ),
    ConfigKey::implemented(
        GROUP_PROTOCOL,
        "classic: the stream threads are members of a consumer group; streams: of a streams \
         group (KIP-1071), whose broker assigns tasks.",
        |c, s| {
            c.streams_group_protocol = if s.text.eq_ignore_ascii_case("streams") {
                true
            } else if s.text.eq_ignore_ascii_case("classic") {
                false
            } else {
                return Err(s.invalid(
                    "classic (a consumer group; for KIP-848 set consumer.group.protocol=consumer) \
                     or streams (KIP-1071, brokers 4.2 and newer)",
                ));
            };
            Ok(())
        },
    ),
    ConfigKey::implemented(
        "application.server",
        "host:port: the endpoint the streams group hands to other members as this instance's.",
        |c, s| {
            let s = s.trimmed();
            c.application_server = if s.text.is_empty() {
                None
            } else {
                let endpoint = s.text.rsplit_once(':').and_then(|(host, port)| {
                    Some((host.to_string(), port.parse::<u16>().ok()?))
                        .filter(|(h, _)| !h.is_empty())
                });
                Some(endpoint.ok_or_else(|| s.invalid("host:port, such as 10.0.0.7:8080"))?)
            };
            Ok(())
        },
    ),
    ConfigKey::implemented(
        "num.standby.replicas",
        "The standby copies of each stateful task the streams group is asked to place.",
        |c, s| {
            c.num_standby_replicas = Some(
                s.trimmed()
                    .parse("a whole number of standby copies per task, 0 or more (0: none)")?,
            );
            Ok(())
        },
    ),
    ConfigKey::implemented(
        "poll.ms",
        "How long a stream thread blocks waiting for input.",
        |c, s| {
            c.poll = s.millis()?;
            Ok(())
        },
    ),
    ConfigKey::implemented(
        METRICS_RECORDING_LEVEL,
        "Which metrics are recorded: store and per-record latencies only from DEBUG on.",
        |c, s| {
            c.metrics_recording_level = s.parse("INFO, DEBUG or TRACE")?;
            Ok(())
        },
    ),
    // kstreams' own keys.
    ConfigKey::kstreams(
        super::rocksdb::BOUNDED_MEMORY_BYTES,
        "The bytes of block cache, index and filter blocks and memtables all RocksDB stores of \
         an instance share (Kafka Streams' BoundedMemoryRocksDBConfig); 0: each store has \
         Kafka Streams' defaults.",
        |c, s| {
            c.rocksdb
                .set_bounded_bytes(s.trimmed().parse("bytes, a whole number >= 0")?);
            Ok(())
        },
    ),
    ConfigKey::kstreams(
        super::rocksdb::BOUNDED_MEMTABLE_BYTES,
        "The part of kstreams.rocksdb.bounded.memory.bytes memtables may take; default half.",
        |c, s| {
            c.rocksdb
                .set_memtable_bytes(s.trimmed().parse("bytes, a whole number >= 0")?);
            Ok(())
        },
    ),
    ConfigKey::kstreams(
        "kstreams.http.address",
        "Where kstreams-http's server listens when started from the configuration; empty: \
         nowhere.",
        |c, s| {
            let s = s.trimmed();
            c.http_address = if s.text.is_empty() {
                None
            } else {
                Some(s.parse(
                    "an IP address and port, such as 127.0.0.1:9464 (this host only) or \
                     0.0.0.0:9464, or empty for no server",
                )?)
            };
            Ok(())
        },
    ),
    ConfigKey::kstreams(
        "kstreams.async.max.in.flight.per.task",
        "The most records in the async processors of one task.",
        |c, s| {
            c.async_limits.per_task = s.trimmed().parse_if(|n: &usize| *n >= 1, RECORDS)?;
            Ok(())
        },
    ),
    ConfigKey::kstreams(
        "kstreams.async.max.in.flight.per.thread",
        "The most records in the async processors of one stream thread's tasks.",
        |c, s| {
            c.async_limits.per_thread = s.trimmed().parse_if(|n: &usize| *n >= 1, RECORDS)?;
            Ok(())
        },
    ),
    ConfigKey::kstreams(
        "kstreams.async.worker.threads",
        "The worker threads of the instance's runtime for async calls.",
        |c, s| {
            c.async_limits.workers = s.trimmed().parse_if(|n: &usize| *n >= 1, THREADS)?;
            Ok(())
        },
    ),
    ConfigKey::kstreams(
        "kstreams.async.drain.timeout.ms",
        "How long an exactly-once commit, a rebalance or a close waits for async calls.",
        |c, s| {
            c.async_drain_timeout = s.trimmed().millis()?;
            Ok(())
        },
    ),
    ConfigKey::kstreams(
        "kstreams.tracing.enabled",
        "Whether the tasks trace records, with W3C traceparent headers.",
        |c, s| {
            c.tracing.enabled = s.trimmed().parse("true or false")?;
            Ok(())
        },
    ),
    ConfigKey::kstreams(
        "kstreams.tracing.start.traces",
        "Whether a record without a traceparent header starts a trace.",
        |c, s| {
            c.tracing.start_traces = s.trimmed().parse("true or false")?;
            Ok(())
        },
    ),
    ConfigKey::kstreams(
        "kstreams.tracing.sample.ratio",
        "The share of the traces started here that are sampled, from 0 to 1.",
        |c, s| {
            c.tracing.sample_ratio = s
                .trimmed()
                .parse_if(|r: &f64| (0.0..=1.0).contains(r), "a number from 0 to 1")?;
            Ok(())
        },
    ),
    // Kafka Streams' configs kstreams has no use for: its task assignor.
    ConfigKey::no_effect(
        "acceptable.recovery.lag",
        "The lag behind a task's end up to which a client may be given it as active.",
        ASSIGNOR,
    ),
    ConfigKey::no_effect(
        "max.warmup.replicas",
        "The most warm-up replicas the task assignor places at once.",
        ASSIGNOR,
    ),
    ConfigKey::no_effect(
        "probing.rebalance.interval.ms",
        "How often a rebalance checks whether warm-up replicas have caught up.",
        ASSIGNOR,
    ),
    ConfigKey::no_effect(
        "rack.aware.assignment.strategy",
        "How the task assignor takes racks into account.",
        ASSIGNOR,
    ),
    ConfigKey::no_effect(
        "rack.aware.assignment.tags",
        "The client tags the task assignor spreads standby replicas over.",
        ASSIGNOR,
    ),
    ConfigKey::no_effect(
        "rack.aware.assignment.non_overlap_cost",
        "The rack-aware task assignor's cost of moving a task away from its client.",
        ASSIGNOR,
    ),
    ConfigKey::no_effect(
        "rack.aware.assignment.traffic_cost",
        "The rack-aware task assignor's cost of traffic between racks.",
        ASSIGNOR,
    ),
    ConfigKey::no_effect(
        "task.assignor.class",
        "A task assignor to use instead of Kafka Streams' own.",
        ASSIGNOR,
    ),
    // Topologies and serdes.
    ConfigKey::only_default(
        "topology.optimization",
        "The optimizations applied to the topology: none, all, or a list of them.",
        "none",
        "kstreams builds the topology as Kafka Streams does with topology.optimization=none \
         (describe() is the same); remove it or set none",
    ),
    ConfigKey::only_default(
        "processor.wrapper.class",
        "A class that wraps every processor of the topology (KIP-1112).",
        "org.apache.kafka.streams.processor.internals.NoOpProcessorWrapper",
        "kstreams does not wrap processors (KIP-1112); remove it or set the NoOpProcessorWrapper",
    ),
    ConfigKey::only_default(
        "ensure.explicit.internal.resource.naming",
        "Whether a topology with generated names of internal topics and stores is refused.",
        "false",
        "kstreams does not check that internal topics and stores were named explicitly; \
         remove it or set false (Topology::describe shows the generated names)",
    ),
    ConfigKey::refused(
        "default.key.serde",
        "The serde of the keys of operators given none.",
        SERDES,
    ),
    ConfigKey::refused(
        "default.value.serde",
        "The serde of the values of operators given none.",
        SERDES,
    ),
    ConfigKey::refused(
        "default.windowed.key.serde.inner",
        "The inner serde of windowed keys' default serde (Kafka Streams 3; 4 removed it).",
        SERDES,
    ),
    ConfigKey::refused(
        "default.windowed.value.serde.inner",
        "The inner serde of windowed values' default serde (Kafka Streams 3; 4 removed it).",
        SERDES,
    ),
    ConfigKey::refused(
        "windowed.inner.class.serde",
        "The inner serde of a windowed serde made from properties.",
        SERDES,
    ),
    ConfigKey::refused(
        "default.list.key.serde.inner",
        "The serde of the elements of list keys.",
        SERDES,
    ),
    ConfigKey::refused(
        "default.list.key.serde.type",
        "The List class of list keys.",
        SERDES,
    ),
    ConfigKey::refused(
        "default.list.value.serde.inner",
        "The serde of the elements of list values.",
        SERDES,
    ),
    ConfigKey::refused(
        "default.list.value.serde.type",
        "The List class of list values.",
        SERDES,
    ),
    ConfigKey::no_effect(
        "window.size.ms",
        "The window size of a windowed deserializer made from properties.",
        "it sizes Kafka Streams' windowed deserializer made from properties; serdes are Rust \
         values, and a windowed serde takes its window size in code",
    ),
    // State stores.
    ConfigKey::only_default(
        "default.dsl.store",
        "The store type of DSL operators: rocksDB or in_memory.",
        "rocksDB",
        "DSL stores are RocksDB unless an operator chooses otherwise with \
         Materialized::with_store_type; remove it or set rocksDB",
    ),
    ConfigKey::only_default(
        "dsl.store.suppliers.class",
        "The suppliers of the stores of DSL operators.",
        "org.apache.kafka.streams.state.BuiltInDslStoreSuppliers$RocksDBDslStoreSuppliers",
        "DSL stores are RocksDB unless an operator chooses otherwise with \
         Materialized::with_store_type; remove it or set \
         BuiltInDslStoreSuppliers$RocksDBDslStoreSuppliers",
    ),
    ConfigKey::only_default(
        "dsl.store.format",
        "What DSL stores keep: DEFAULT, or HEADERS to keep records' headers too.",
        "DEFAULT",
        "headers-aware stores (HEADERS) are not implemented: DSL stores keep values (with \
         timestamps where Kafka Streams' DEFAULT does), not record headers; remove it or set \
         DEFAULT",
    ),
    ConfigKey::implemented(
        "enable.transactional.statestores",
        "Whether state stores write transactionally (KIP-892): under exactly-once, persistent \
         stores hold their writes until the transaction commits, so a crash costs the \
         changelog's tail instead of the whole local state. kstreams' default is true (Kafka \
         Streams': false); false restores the whole local state after a crash, as Kafka \
         Streams does.",
        |c, s| {
            c.transactional_state_stores = s.trimmed().parse("true or false")?;
            Ok(())
        },
    ),
    ConfigKey::implemented(
        "statestore.uncommitted.max.bytes",
        "The uncommitted bytes a thread's transactional state stores hold before a commit is \
         forced (64 MiB).",
        |c, s| {
            c.state_store_uncommitted_max_bytes = s
                .trimmed()
                .parse_if(|b: &u64| *b > 0, "bytes, a whole number > 0")?;
            Ok(())
        },
    ),
    ConfigKey::implemented(
        "default.interactive.query.isolation.level",
        "What interactive queries see of transactional state stores' uncommitted writes: \
         READ_UNCOMMITTED (the default) or READ_COMMITTED.",
        |c, s| {
            c.interactive_query_isolation = match s.text.trim().to_ascii_uppercase().as_str() {
                "READ_UNCOMMITTED" => IsolationLevel::ReadUncommitted,
                "READ_COMMITTED" => IsolationLevel::ReadCommitted,
                _ => return Err(s.invalid("READ_UNCOMMITTED or READ_COMMITTED")),
            };
            Ok(())
        },
    ),
    ConfigKey::implemented(
        super::rocksdb::CONFIG_SETTER,
        "The RocksDB config setter of every store: the name of one registered with \
         StreamsConfig::register_rocksdb_config_setter (a class name finds the one registered \
         by its last part), resolved at start.",
        |c, s| {
            c.rocksdb.set_setter_name(s.trimmed().non_empty()?);
            Ok(())
        },
    ),
    ConfigKey::implemented(
        "state.cleanup.delay.ms",
        "How long the state of a task the instance no longer owns is kept before deletion, and \
         how often the cleaner looks (10 minutes).",
        |c, s| {
            c.state_cleanup_delay = s
                .parse_if(|ms: &u64| *ms > 0, "milliseconds, a whole number > 0")
                .map(Duration::from_millis)?;
            Ok(())
        },
    ),
    ConfigKey::no_effect(
        "state.cleanup.dir.max.age.ms",
        "The age past which state directories are deleted at startup.",
        "state directories are not purged by age at startup; delete an application's \
         directory under state.dir yourself to start it from its changelogs",
    ),
    ConfigKey::no_effect(
        "allow.os.group.write.access",
        "Whether the state directory may be written by the owner's group.",
        "state directories are created with the process's umask, where Kafka Streams sets \
         rwxr-x--- (rwxrwx--- with this true); set the umask to restrict them",
    ),
    // Clients and metrics.
    ConfigKey::only_default(
        "default.client.supplier",
        "The class that makes Kafka Streams' Kafka clients.",
        "org.apache.kafka.streams.processor.internals.DefaultKafkaClientSupplier",
        "kstreams makes its librdkafka clients itself; give client settings with the \
         consumer., producer. and admin. prefixes. Remove it or set the \
         DefaultKafkaClientSupplier",
    ),
    ConfigKey::only_default(
        "built.in.metrics.version",
        "The version of the built-in metrics.",
        "latest",
        "latest is the only version; kstreams' metrics are its Prometheus metrics \
         (KafkaStreams::metrics)",
    ),
    ConfigKey::no_effect(
        METRICS_NUM_SAMPLES,
        "The samples kept to compute a metric.",
        METRICS,
    ),
    ConfigKey::no_effect(
        METRICS_SAMPLE_WINDOW_MS,
        "The time a metric's sample is computed over.",
        METRICS,
    ),
    ConfigKey::no_effect(
        METRIC_REPORTERS,
        "The classes that report the metrics.",
        METRICS,
    ),
    ConfigKey::no_effect(
        AUTO_INCLUDE_JMX_REPORTER,
        "Whether the JMX reporter is added to the metric reporters (Kafka 3; 4 removed it).",
        METRICS,
    ),
    ConfigKey::no_effect(
        "log.summary.interval.ms",
        "How often a stream thread logs a summary of its processing.",
        "stream threads log no periodic summary; the metrics count what they process \
         (kstreams_task_process_total)",
    ),
    ConfigKey::no_effect(
        "topology.description.push.enabled",
        "Whether a streams group member sends the broker the topology's description.",
        "kstreams sends the broker no topology descriptions (Kafka Streams sends them only \
         under group.protocol=streams, when the broker asks)",
    ),
    ConfigKey::no_effect(
        "metadata.cluster.check.enable",
        "Whether the clients check that they reached the cluster they were meant for.",
        "librdkafka's clients send no cluster information when they connect, so a broker \
         cannot detect a misrouted connection",
    ),
    // Processing.
    ConfigKey::no_effect(
        "processing.exception.handler.global.enabled",
        "Whether the processing exception handler handles global tables' processors too.",
        "global tables are loaded into their stores as the records are, with no processors, \
         so there is nothing for the processing exception handler to handle",
    ),
    ConfigKey::no_effect(
        "task.timeout.ms",
        "How long a task may stall on client timeouts before its thread fails.",
        "kstreams does not retry a task after a client timeout: librdkafka retries requests \
         by its own settings (message.timeout.ms, request.timeout.ms)",
    ),
    ConfigKey::no_effect(
        "upgrade.from",
        "The version a rolling upgrade comes from.",
        "there is no earlier kstreams version to upgrade from",
    ),
];

/// The families of keys, by prefix (the client prefixes, `consumer.` and
/// the others, are the `client` module's).
pub(super) static PREFIXES: &[ConfigKey] = &[
    ConfigKey::implemented(
        "topic.",
        "topic.<config>: a topic config of every internal topic kstreams creates.",
        |c, s| {
            if s.rest.is_empty() {
                return Err(ConfigError::Unknown {
                    key: s.key.to_string(),
                    suggestion: None,
                });
            }
            c.internal_topic_configs
                .insert(s.rest.to_string(), s.value.to_string());
            Ok(())
        },
    ),
    ConfigKey::no_effect(
        "client.tag.",
        "client.tag.<tag>: a tag of this client, for rack.aware.assignment.tags.",
        ASSIGNOR,
    ),
];

#[cfg(test)]
mod tests {
    use super::super::tests::base;
    use super::*;

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
        for key in KEYS
            .iter()
            .filter(|entry| entry.is_implemented())
            .flat_map(ConfigKey::names)
        {
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
            ("deserialization.exception.handler", " "),
            ("metrics.recording.level", "verbose"),
        ] {
            let mut p = base();
            p.push((key, value));
            let err = StreamsConfig::from_properties(p).unwrap_err();
            assert!(err.to_string().contains(key), "{key}: {err}");
        }
    }

    #[test]
    fn max_task_idle_keeps_minus_one_apart_from_zero() {
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
}
