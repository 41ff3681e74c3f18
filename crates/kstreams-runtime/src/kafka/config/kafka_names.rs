//! Every config Kafka Streams defines is one `StreamsConfig::set` knows,
//! and every key of the table (`keys.rs`) but kstreams' own is one Kafka
//! Streams defines: a properties file ported from a Kafka Streams
//! application never meets "unknown config".
//!
//! The names come from the real jar, not from a list typed here:
//! `kafka_streams_configs.tsv` is the output of compat's `config-names`
//! command (compat/src/main/java/dev/kstreams/compat/ConfigNames.java) for
//! the Kafka release in compat/pom.xml. After a Kafka upgrade regenerate it,
//! from compat/:
//!
//! ```text
//! mvn -q compile dependency:build-classpath -Dmdep.outputFile=target/classpath.txt
//! java -cp target/classes:$(cat target/classpath.txt) dev.kstreams.compat.Main config-names \
//!     > ../crates/kstreams-runtime/src/kafka/config/kafka_streams_configs.tsv
//! ```
//!
//! and declare the new names in the table of `keys.rs` (implemented, or
//! with why they have no effect or are refused).

use std::collections::BTreeMap;
use std::time::Duration;

use super::client::ClientPrefix;
use super::keys::{find, Kind, KEYS, PREFIXES};
use super::{ConfigError, StreamsConfig};
use crate::{DeserializationHandling, ProductionHandling};

const FIXTURE: &str = include_str!("kafka_streams_configs.tsv");

/// One line of the fixture: a config, or a key prefix (`kind` "prefix").
struct KafkaConfig {
    name: &'static str,
    kind: &'static str,
    /// Kafka's default as a properties file writes it; `None` when there is
    /// none or it is null (the key is then unset by default).
    default: Option<&'static str>,
}

fn fixture() -> Vec<KafkaConfig> {
    FIXTURE
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .map(|line| {
            let mut fields = line.split('\t');
            let (kind_or_prefix, name, default) =
                match (fields.next(), fields.next(), fields.next()) {
                    (Some("prefix"), Some(prefix), Some(_)) => ("prefix", prefix, None),
                    (Some(name), Some(kind), Some(default)) => (
                        kind,
                        name,
                        (!matches!(default, "<none>" | "<null>")).then_some(default),
                    ),
                    _ => panic!("malformed fixture line {line:?}"),
                };
            KafkaConfig {
                name,
                kind: kind_or_prefix,
                default,
            }
        })
        .collect()
}

fn configs() -> impl Iterator<Item = KafkaConfig> {
    fixture().into_iter().filter(|c| c.kind != "prefix")
}

/// The prefixes whose keys Kafka Streams reads as families.
fn prefixes() -> Vec<&'static str> {
    fixture()
        .into_iter()
        .filter(|c| c.kind == "prefix")
        .map(|c| c.name)
        .collect()
}

/// A value of the config's type for a key unset by default.
fn sample_value(config: &KafkaConfig) -> &'static str {
    config.default.unwrap_or(match config.kind {
        "CLASS" => "com.example.Custom",
        "INT" | "LONG" => "1",
        "BOOLEAN" => "true",
        _ => "x",
    })
}

/// How kstreams takes a Kafka Streams config, for the classification
/// summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Handling {
    /// Implemented by kstreams with Kafka's meaning.
    Implemented,
    /// A client setting, passed to the librdkafka clients it applies to (or
    /// ignored with a warning naming librdkafka's counterpart).
    Client,
    /// Accepted, with a warning saying why it has no effect.
    NoEffect,
    /// Accepted only at its default; other values are refused with why.
    OnlyDefault,
    /// Refused whatever the value, saying what to do instead.
    Refused,
}

fn handling(key: &str) -> Handling {
    match find(key).map(|entry| &entry.kind) {
        Some(Kind::Implemented(_) | Kind::KstreamsOnly(_)) => Handling::Implemented,
        Some(Kind::NoEffect(_)) => Handling::NoEffect,
        Some(Kind::OnlyDefault { .. }) => Handling::OnlyDefault,
        Some(Kind::Refused(_)) => Handling::Refused,
        None => Handling::Client,
    }
}

#[test]
fn the_fixture_is_kafka_streams_own_list() {
    let configs: Vec<_> = configs().collect();
    assert!(FIXTURE.starts_with("# Kafka Streams 4.4."), "{FIXTURE:.80}");
    // A truncated or hand-edited fixture would make the tests below vacuous.
    assert!(configs.len() >= 75, "{} configs", configs.len());
    for known in [
        "application.id",
        "windowstore.changelog.additional.retention.ms",
        "dsl.store.format",
    ] {
        assert!(configs.iter().any(|c| c.name == known), "{known} missing");
    }
    let prefixes = prefixes();
    assert!(prefixes.contains(&"client.tag."), "{prefixes:?}");
}

#[test]
fn every_kafka_streams_config_is_classified() {
    let mut summary: BTreeMap<Handling, Vec<&str>> = BTreeMap::new();
    let mut wrong = Vec::new();
    for config in configs() {
        let value = sample_value(&config);
        let mut streams = StreamsConfig::new("app", "b:9092");
        let result = streams.set(config.name, value);
        let handling = handling(config.name);
        match (&result, handling) {
            (Err(e @ ConfigError::Unknown { .. }), _) => {
                wrong.push(format!("{}={value}: {e}", config.name))
            }
            (Err(ConfigError::Unsupported { .. }), Handling::Refused | Handling::OnlyDefault)
                if config.default.is_none() => {}
            (Err(ConfigError::Unsupported { .. }), _) => wrong.push(format!(
                "{}={value}: refused though classified {handling:?}",
                config.name
            )),
            // Kafka's default is always taken, whatever kstreams does with it.
            (Err(e), _) if config.default.is_some() => {
                wrong.push(format!("{}={value}: {e}", config.name))
            }
            _ => {}
        }
        summary.entry(handling).or_default().push(config.name);
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
    for (handling, names) in &summary {
        println!("{handling:?} ({}): {}", names.len(), names.join(" "));
    }
}

/// Kafka Streams 3's configs that Kafka Streams 4 no longer defines: the
/// table keeps them, to tell an application ported from 3 what to do.
const REMOVED_IN_KAFKA_4: [&str; 3] = [
    "default.windowed.key.serde.inner",
    "default.windowed.value.serde.inner",
    "auto.include.jmx.reporter",
];

#[test]
fn every_key_of_the_table_is_kafka_streams_own_but_kstreams_own() {
    let configs: Vec<&str> = configs().map(|c| c.name).collect();
    let prefixes = prefixes();
    let mut seen = Vec::new();
    for entry in KEYS {
        for name in entry.names() {
            assert!(!seen.contains(&name), "{name} is declared twice");
            seen.push(name);
            let kafka = configs.contains(&name) || REMOVED_IN_KAFKA_4.contains(&name);
            match entry.kind {
                Kind::KstreamsOnly(_) => {}
                _ => assert!(kafka, "{name} is no Kafka Streams config"),
            }
        }
        assert!(!entry.doc.is_empty(), "{} has no doc line", entry.name);
    }
    for entry in PREFIXES {
        assert!(
            prefixes.contains(&entry.name),
            "{} is no Kafka Streams prefix",
            entry.name
        );
        assert!(find(entry.name).is_none(), "{}", entry.name);
    }
    // And every Kafka Streams prefix is the table's or a client's.
    for prefix in prefixes {
        let client = ClientPrefix::split(prefix).is_some_and(|(_, rest)| rest.is_empty());
        let table = PREFIXES.iter().any(|entry| entry.name == prefix);
        assert!(client != table, "{prefix}");
    }
}

#[test]
fn every_kafka_streams_prefix_is_taken() {
    let samples = [
        ("client.tag.", "zone", "eu-west-1a"),
        ("topic.", "segment.bytes", "1073741824"),
        ("consumer.", "fetch.min.bytes", "1"),
        ("main.consumer.", "fetch.min.bytes", "1"),
        ("restore.consumer.", "fetch.min.bytes", "1"),
        ("global.consumer.", "fetch.min.bytes", "1"),
        ("producer.", "linger.ms", "5"),
        ("admin.", "retries", "3"),
    ];
    for prefix in prefixes() {
        let (_, key, value) = samples
            .iter()
            .find(|(p, ..)| *p == prefix)
            .unwrap_or_else(|| panic!("no sample key for Kafka Streams' prefix {prefix}"));
        let key = format!("{prefix}{key}");
        let mut config = StreamsConfig::new("app", "b:9092");
        if let Err(e) = config.set(&key, value) {
            panic!("{key}={value}: {e}");
        }
    }
}

#[test]
fn a_properties_file_with_every_kafka_streams_default_loads() {
    let mut text = String::from("application.id=orders\nbootstrap.servers=localhost:9092\n");
    for config in configs().filter(|c| c.default.is_some()) {
        let default = config.default.unwrap_or_default();
        // As Properties#store writes it: a backslash is the only character
        // of the fixture's defaults that needs escaping.
        text.push_str(&format!(
            "{}={}\n",
            config.name,
            default.replace('\\', "\\\\")
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("streams.properties");
    std::fs::write(&path, &text).unwrap();
    let config =
        StreamsConfig::from_properties_file(&path).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(config.application_id(), "orders");
    assert_eq!(config.num_stream_threads, 1);
    assert_eq!(config.effective_commit_interval(), Duration::from_secs(30));
}

#[test]
fn a_deprecated_key_does_not_override_its_new_name() {
    for order in [[0, 1], [1, 0]] {
        let pairs = [
            ("statestore.cache.max.bytes", "100"),
            ("cache.max.bytes.buffering", "200"),
        ];
        let mut config = StreamsConfig::new("app", "b:9092");
        for i in order {
            config.set(pairs[i].0, pairs[i].1).unwrap();
        }
        assert_eq!(config.cache_max_bytes, 100, "order {order:?}");
    }
    let mut config = StreamsConfig::new("app", "b:9092");
    config
        .set(
            "production.exception.handler",
            "org.apache.kafka.streams.errors.DefaultProductionExceptionHandler",
        )
        .unwrap();
    config
        .set(
            "default.production.exception.handler",
            "LogAndContinueProductionExceptionHandler",
        )
        .unwrap();
    assert_eq!(config.production, ProductionHandling::Fail);
    // The ignored key's value is still checked: any other class names a
    // handler the application registers (resolved at start), an empty
    // value is no name.
    config
        .set(
            "default.production.exception.handler",
            "com.example.OversizedAside",
        )
        .unwrap();
    assert_eq!(config.production, ProductionHandling::Fail);
    let err = config
        .set("default.production.exception.handler", "")
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("default.production.exception.handler"),
        "{err}"
    );
    // Alone, the deprecated key still works.
    let mut config = StreamsConfig::new("app", "b:9092");
    config
        .set(
            "default.deserialization.exception.handler",
            "LogAndContinueExceptionHandler",
        )
        .unwrap();
    assert_eq!(
        config.deserialization,
        DeserializationHandling::LogAndContinue
    );
}

#[test]
fn kstreams_own_keys_are_not_kafka_streams_configs_and_are_taken() {
    let kafka: Vec<&str> = fixture().into_iter().map(|c| c.name).collect();
    let own: Vec<_> = KEYS
        .iter()
        .filter(|entry| matches!(entry.kind, Kind::KstreamsOnly(_)))
        .collect();
    assert!(own.len() >= 8, "{} kstreams keys", own.len());
    for entry in own {
        let key = entry.name;
        assert!(key.starts_with("kstreams."), "{key}");
        assert!(!kafka.contains(&key), "{key} is a Kafka Streams config");
        assert!(entry.deprecated.is_none(), "{key}");
    }
    let mut config = StreamsConfig::new("app", "b:9092");
    config
        .set("kstreams.async.max.in.flight.per.task", "8")
        .unwrap();
    config
        .set("kstreams.async.max.in.flight.per.thread", "32")
        .unwrap();
    config.set("kstreams.async.worker.threads", "4").unwrap();
    config
        .set("kstreams.async.drain.timeout.ms", "1500")
        .unwrap();
    assert_eq!(config.async_limits.per_task, 8);
    assert_eq!(config.async_limits.per_thread, 32);
    assert_eq!(config.async_limits.workers, 4);
    assert_eq!(config.async_drain_timeout, Duration::from_millis(1500));
    let err = config
        .set("kstreams.async.max.in.flight.per.task", "0")
        .unwrap_err();
    assert!(err.to_string().contains("at least 1"), "{err}");
}
