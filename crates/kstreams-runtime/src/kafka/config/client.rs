//! Kafka client settings: the prefix each is given with (`consumer.`,
//! `main.consumer.`, `restore.consumer.`, `global.consumer.`, `producer.`,
//! `admin.`, or none), which of kstreams' clients it reaches (Kafka Streams'
//! `StreamsConfig#getMainConsumerConfigs` and friends), and its check
//! against librdkafka: the clients librdkafka scopes a property to, the Java
//! client settings it has no counterpart for, and those kstreams sets itself.

use std::collections::BTreeMap;

mod java_security;

use super::keys::{
    closest_known_key, AUTO_INCLUDE_JMX_REPORTER, BOOTSTRAP_SERVERS, GROUP_PROTOCOL,
    METRICS_NUM_SAMPLES, METRICS_RECORDING_LEVEL, METRICS_SAMPLE_WINDOW_MS, METRIC_REPORTERS,
};
use super::offset_reset::{auto_offset_reset_for_librdkafka, reset_by_duration};
use super::{ConfigError, StreamsConfig};

impl StreamsConfig {
    /// The user's settings that reach `client`, with the prefix each was
    /// given with, by Kafka Streams' precedence (`getMainConsumerConfigs`
    /// and friends): unprefixed keys that apply to the client, then
    /// `consumer.` (consumers only), then the client's own prefix
    /// (`main.consumer.`, `restore.consumer.`, `global.consumer.`,
    /// `producer.`, `admin.`).
    ///
    /// Java's security settings (`sasl.jaas.config`, `ssl.truststore.*`,
    /// `ssl.keystore.*`) come translated to librdkafka's keys
    /// (`java_security`); [`StreamsConfig::validate`] reports what does not
    /// translate, and an error here (a store file gone since) is logged and
    /// leaves the Java keys out.
    pub(crate) fn client_settings(
        &self,
        client: KafkaClient,
    ) -> BTreeMap<String, (ClientPrefix, String)> {
        self.checked_client_settings(client)
            .unwrap_or_else(|(error, settings)| {
                log::error!("{error}");
                settings
            })
    }

    /// [`StreamsConfig::client_settings`], or the first setting that does
    /// not translate to librdkafka's (with the settings less the Java keys).
    #[allow(clippy::type_complexity)]
    pub(super) fn checked_client_settings(
        &self,
        client: KafkaClient,
    ) -> Result<
        BTreeMap<String, (ClientPrefix, String)>,
        (ConfigError, BTreeMap<String, (ClientPrefix, String)>),
    > {
        let mut resolved = BTreeMap::new();
        for layer in client.layers() {
            for ((prefix, key), value) in &self.client_settings {
                if prefix == layer && (*prefix != ClientPrefix::Unprefixed || client.takes(key)) {
                    resolved.insert(key.clone(), (*prefix, value.clone()));
                }
            }
        }
        match java_security::translate(&mut resolved) {
            Ok(()) => Ok(resolved),
            Err(error) => Err((error, resolved)),
        }
    }

    /// Takes a Kafka client setting `key` (without `prefix`), checked
    /// against librdkafka.
    pub(super) fn set_client(
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
        if java_security::is_java_security_key(key) {
            // Kept as given, checked alone here, translated per client.
            java_security::check(&written, key, value)?;
            self.client_settings
                .insert((prefix, key.to_string()), value.to_string());
            return Ok(());
        }
        let value = java_security::librdkafka_value(key, value).unwrap_or(value);
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
        if key == GROUP_PROTOCOL
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
    pub(super) fn split(key: &str) -> Option<(ClientPrefix, &str)> {
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
    /// Every client kstreams makes.
    pub(super) const ALL: [KafkaClient; 5] = [
        KafkaClient::MainConsumer,
        KafkaClient::RestoreConsumer,
        KafkaClient::GlobalConsumer,
        KafkaClient::Producer,
        KafkaClient::Admin,
    ];

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
    GROUP_PROTOCOL,
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
            "librdkafka hands out records one by one; buffered.records.per.partition bounds \
             what a task buffers"
        }
        "interceptor.classes"
        | "partitioner.class"
        | METRIC_REPORTERS
        | METRICS_NUM_SAMPLES
        | METRICS_SAMPLE_WINDOW_MS
        | METRICS_RECORDING_LEVEL
        | AUTO_INCLUDE_JMX_REPORTER
        | "security.providers"
        | "config.providers"
        | "sasl.login.class"
        | "sasl.login.callback.handler.class"
        | "sasl.client.callback.handler.class" => "a Java class or JMX setting",
        "ssl.protocol"
        | "ssl.enabled.protocols"
        | "ssl.provider"
        | "ssl.trustmanager.algorithm"
        | "ssl.keymanager.algorithm"
        | "ssl.secure.random.implementation" => {
            "a JSSE setting: librdkafka's TLS (OpenSSL) chooses the protocol versions and \
             algorithms itself (ssl.cipher.suites, ssl.curves.list tune them)"
        }
        "sasl.login.refresh.window.factor"
        | "sasl.login.refresh.window.jitter"
        | "sasl.login.refresh.min.period.seconds"
        | "sasl.login.refresh.buffer.seconds"
        | "sasl.login.connect.timeout.ms"
        | "sasl.login.read.timeout.ms"
        | "sasl.login.retry.backoff.ms"
        | "sasl.login.retry.backoff.max.ms" => {
            "librdkafka refreshes logins and tokens on its own schedule"
        }
        "fetch.max.wait.ms" => "librdkafka's is fetch.wait.max.ms",
        "send.buffer.bytes" => "librdkafka's is socket.send.buffer.bytes",
        "receive.buffer.bytes" => "librdkafka's is socket.receive.buffer.bytes",
        "buffer.memory" => "librdkafka's is queue.buffering.max.kbytes",
        "max.request.size" => "librdkafka's is message.max.bytes",
        "default.api.timeout.ms"
        | "max.block.ms"
        | "client.dns.lookup"
        | "exclude.internal.topics"
        | "metadata.max.idle.ms"
        | "partitioner.adaptive.partitioning.enable"
        | "partitioner.availability.timeout.ms"
        | "partitioner.ignore.keys"
        | "internal.leave.group.on.close"
        | "reconnect.backoff.jitter" => "librdkafka has no such setting",
        _ => return None,
    })
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
        BOOTSTRAP_SERVERS => "every client uses the top-level bootstrap.servers",
        _ => return None,
    })
}

/// Whether librdkafka has a property `key` (whatever the value).
pub(super) fn librdkafka_has_property(key: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::super::tests::base;
    use super::*;
    use crate::DeserializationHandling;

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
            "ssl.protocol",
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
    fn every_codec_kafka_streams_writes_is_built_in_and_kerberos_too() {
        for codec in ["none", "gzip", "snappy", "lz4", "zstd"] {
            let mut config = StreamsConfig::new("app", "b:1");
            config
                .set("compression.type", codec)
                .unwrap_or_else(|e| panic!("{codec}: {e}"));
            let producer: Result<rdkafka::producer::BaseProducer, _> =
                crate::kafka::clients::producer(&config, "t", "p", 0).create();
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
