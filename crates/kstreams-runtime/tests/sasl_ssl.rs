//! kstreams on a secured cluster: every client of an exactly-once app
//! (consumer, transactional producer, admin) connects to the SASL_SSL
//! listener of `cargo xtask kafka start` (SCRAM-SHA-256 over TLS, the CA
//! made at the broker's start), with the keys a Kafka Streams user sets:
//! `security.protocol`, `sasl.mechanism`, `sasl.username`/`sasl.password`
//! (librdkafka's names for what Java puts in `sasl.jaas.config`) and
//! `ssl.ca.location`. The password must not show in the logs, the config's
//! Debug, describe() or the instance's metadata. Under
//! `group.protocol=streams` the streams group member connects there with
//! the same keys, and the broker assigns the tasks.
//!
//! Skipped without KSTREAMS_BOOTSTRAP and KSTREAMS_SASL_SSL_BOOTSTRAP
//! (`eval "$(cargo xtask kafka start)"` sets both; `cargo xtask ci` passes
//! them to the tests).

// Its own test binary (Cargo.toml), not a module of tests/integration.rs:
// it installs the process's one logger to capture what kstreams logs, which
// another test of a shared binary may have taken first.
#[allow(dead_code)] // the helpers the other tests use
#[path = "common/mod.rs"]
mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kstreams_dsl::{Materialized, StreamsBuilder};
use kstreams_embedded::{test_broker, unique_name};
use kstreams_record::StringSerde;
use kstreams_runtime::kafka::{
    HostInfo, KafkaStreams, ProcessingGuarantee, QueryableStoreTypes, State, StoreQueryParameters,
    StreamsConfig,
};
use rdkafka::consumer::BaseConsumer;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{ClientConfig, Message};

/// Every log line of the test binary, at every level, to search for the
/// password afterwards.
struct CapturingLogger(Arc<Mutex<Vec<String>>>);

impl log::Log for CapturingLogger {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, record: &log::Record<'_>) {
        let line = format!("{} {}: {}", record.level(), record.target(), record.args());
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(line);
    }
    fn flush(&self) {}
}

struct SecuredCluster {
    bootstrap: String,
    ca: String,
    username: String,
    password: String,
}

impl SecuredCluster {
    /// The keys a user sets to reach the SASL_SSL listener.
    fn keys(&self) -> [(&str, &str); 5] {
        [
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-256"),
            ("sasl.username", self.username.as_str()),
            ("sasl.password", self.password.as_str()),
            ("ssl.ca.location", self.ca.as_str()),
        ]
    }
}

fn secured_cluster() -> Option<SecuredCluster> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let Some(bootstrap) = var("KSTREAMS_SASL_SSL_BOOTSTRAP") else {
        eprintln!("skipped: no KSTREAMS_SASL_SSL_BOOTSTRAP (cargo xtask kafka start sets it)");
        return None;
    };
    Some(SecuredCluster {
        bootstrap,
        ca: var("KSTREAMS_SASL_SSL_CA").expect("KSTREAMS_SASL_SSL_CA with the bootstrap"),
        username: var("KSTREAMS_SASL_USERNAME").expect("KSTREAMS_SASL_USERNAME"),
        password: var("KSTREAMS_SASL_PASSWORD").expect("KSTREAMS_SASL_PASSWORD"),
    })
}

#[test]
fn an_exactly_once_app_runs_end_to_end_over_sasl_ssl_and_keeps_its_password_out_of_sight() {
    let (Some(plaintext), Some(secured)) = (test_broker(), secured_cluster()) else {
        return;
    };
    let lines = Arc::new(Mutex::new(Vec::new()));
    log::set_boxed_logger(Box::new(CapturingLogger(lines.clone()))).unwrap();
    log::set_max_level(log::LevelFilter::Trace);

    // Topics are made through the plaintext listener of the same cluster.
    let run = common::FreshRun::new(&plaintext, "sasl-ssl");
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(&run.input)
        .map_values(|v| v.to_uppercase())
        .to(&run.output);
    let secured_keys = secured.keys();
    let mut config = StreamsConfig::new(&run.app_id, &secured.bootstrap)
        .processing_guarantee(ProcessingGuarantee::ExactlyOnceV2)
        .state_dir(&run.state_dir);
    for (key, value) in secured_keys {
        config.set(key, value).unwrap();
    }
    let config_debug = format!("{config:?}");
    let mut app = KafkaStreams::new(builder.build().unwrap(), config);
    app.start().unwrap();

    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &plaintext)
        .create()
        .unwrap();
    let records = 200;
    for i in 0..records {
        let (key, value) = (format!("k{}", i % 10), format!("value-{i}"));
        producer
            .send(BaseRecord::to(&run.input).key(&key).payload(&value))
            .unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();

    // The output is read over SASL_SSL too, by a plain librdkafka consumer
    // with the same keys: the listener serves any client, not only ours.
    let mut reader_config = ClientConfig::new();
    reader_config
        .set("bootstrap.servers", &secured.bootstrap)
        .set("group.id", unique_name("sasl-ssl-reader"))
        .set("auto.offset.reset", "earliest")
        .set("isolation.level", "read_committed");
    for (key, value) in secured_keys {
        reader_config.set(key, value);
    }
    let reader: BaseConsumer = reader_config.create().unwrap();
    rdkafka::consumer::Consumer::subscribe(&reader, &[run.output.as_str()]).unwrap();
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while seen.len() < records && Instant::now() < deadline {
        assert_ne!(app.state(), State::Error, "app failed: {:?}", app.errors());
        if let Some(Ok(message)) = reader.poll(Duration::from_millis(200)) {
            seen.push(String::from_utf8(message.payload().unwrap().to_vec()).unwrap());
        }
    }
    let metadata = format!("{:?}", app.metadata());
    let described = app.describe().to_string();
    let errors = app.errors();
    assert!(app.close(Duration::from_secs(30)));

    seen.sort();
    let mut expected: Vec<String> = (0..records).map(|i| format!("VALUE-{i}")).collect();
    expected.sort();
    assert_eq!(
        seen, expected,
        "every record once, through the SASL_SSL listener"
    );

    let logged = lines.lock().unwrap().join("\n");
    assert!(
        !logged.is_empty(),
        "the app logged nothing: the check below would be empty"
    );
    for (what, text) in [
        ("the logs", logged.as_str()),
        ("the config's Debug", config_debug.as_str()),
        ("the metadata", metadata.as_str()),
        ("describe()", described.as_str()),
        ("the errors", &errors.join("\n")),
    ] {
        assert!(
            !text.contains(&secured.password),
            "the SASL password shows in {what}"
        );
    }
}

/// `group.protocol=streams` on the secured listener: the streams group
/// member (kstreams-group) speaks SASL_SSL with the same keys as the
/// librdkafka clients, so the broker assigns the tasks and interactive
/// queries find the key's instance, where before only the plaintext
/// listener could host a streams group.
#[test]
fn a_streams_group_app_runs_over_sasl_ssl_and_answers_where_a_key_is() {
    let (Some(plaintext), Some(secured)) = (test_broker(), secured_cluster()) else {
        return;
    };
    let run = common::FreshRun::new(&plaintext, "sasl-ssl-streams-group");
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(&run.input)
        .group_by_key()
        .count_with(None, Materialized::as_("counts"));
    let mut config = StreamsConfig::new(&run.app_id, &secured.bootstrap)
        .commit_interval(Duration::from_millis(100))
        .state_dir(&run.state_dir);
    config.set("group.protocol", "streams").unwrap();
    config
        .set("application.server", "secured.local:8080")
        .unwrap();
    for (key, value) in secured.keys() {
        config.set(key, value).unwrap();
    }
    let mut app = KafkaStreams::new(builder.build().unwrap(), config);
    app.start().unwrap();

    // Java's partitioner, which query_metadata_for_key assumes (as a Kafka
    // Streams application's producers would).
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &plaintext)
        .set("partitioner", "murmur2_random")
        .create()
        .unwrap();
    for i in 0..100 {
        let key = format!("k{}", i % 10);
        producer
            .send(BaseRecord::to(&run.input).key(&key).payload("v"))
            .unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();

    let here = HostInfo {
        host: "secured.local".to_string(),
        port: 8080,
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        assert_ne!(app.state(), State::Error, "app failed: {:?}", app.errors());
        let answered = (0..10).all(|k| {
            let key = format!("k{k}");
            let Ok(metadata) = app.query_metadata_for_key("counts", &key, &StringSerde) else {
                return false;
            };
            let store = app.store(
                StoreQueryParameters::from_name_and_type(
                    "counts",
                    QueryableStoreTypes::key_value_store::<String, i64>(),
                )
                .with_partition(metadata.partition),
            );
            metadata.active_host == here
                && store.is_ok_and(|s| s.get(&key).ok().flatten() == Some(10))
        });
        if answered {
            break;
        }
        let key = "k0".to_string();
        let k0 = app.query_metadata_for_key("counts", &key, &StringSerde);
        let k0_count = k0.as_ref().ok().map(|m| {
            app.store(
                StoreQueryParameters::from_name_and_type(
                    "counts",
                    QueryableStoreTypes::key_value_store::<String, i64>(),
                )
                .with_partition(m.partition),
            )
            .map(|s| s.get(&key))
        });
        assert!(
            Instant::now() < deadline,
            "the streams group never placed every key here: k0 {k0:?}, its count {k0_count:?}; \
             {:?}",
            app.metadata()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(app.close(Duration::from_secs(30)));
}
