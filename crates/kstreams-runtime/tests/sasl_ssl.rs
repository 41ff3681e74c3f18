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
//! A Kafka Streams application's `streams.properties` in Java's keys only
//! (`sasl.jaas.config` with ScramLoginModule for SCRAM-SHA-512, a PEM
//! `ssl.truststore.*`) runs unchanged: kstreams translates them for every
//! librdkafka client and the streams group member alike.
//!
//! On the mutual-TLS listener (`security.protocol=SSL` with a client
//! certificate) a streams group app runs to exact outputs, and static
//! members (`group.instance.id`) restarted within their session get their
//! own tasks back.
//!
//! Skipped without KSTREAMS_BOOTSTRAP and KSTREAMS_SASL_SSL_BOOTSTRAP (the
//! mutual-TLS tests without KSTREAMS_MTLS_BOOTSTRAP; `eval "$(cargo xtask
//! kafka start)"` sets them all; `cargo xtask ci` passes them to the tests).

// Its own test binary (Cargo.toml), not a module of tests/integration.rs:
// it installs the process's one logger to capture what kstreams logs, which
// another test of a shared binary may have taken first.
#[allow(dead_code)] // the helpers the other tests use
#[path = "common/mod.rs"]
mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kstreams_dsl::{Materialized, Produced, StreamsBuilder};
use kstreams_embedded::{test_broker, unique_name};
use kstreams_record::{I64Serde, Nullable, StringSerde};
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

/// A Java application's streams.properties for the secured listener, in
/// Java's keys only: SCRAM-SHA-512 through `sasl.jaas.config` (the JAAS
/// text with a quoted, escaped password as Java writes it) and the CA as a
/// PEM trust store.
fn java_streams_properties(
    secured: &SecuredCluster,
    run: &common::FreshRun,
    password: &str,
) -> String {
    // In a .properties file a backslash is escaped once more; the JAAS
    // text itself escapes `"` and `\` inside the quotes.
    let jaas_password = password.replace('\\', "\\\\").replace('"', "\\\"");
    format!(
        "# streams.properties of a Kafka Streams application, unchanged\n\
         application.id={app}\n\
         bootstrap.servers={bootstrap}\n\
         processing.guarantee=exactly_once_v2\n\
         group.protocol=streams\n\
         statestore.cache.max.bytes=0\n\
         commit.interval.ms=100\n\
         state.dir={state}\n\
         security.protocol=SASL_SSL\n\
         sasl.mechanism=SCRAM-SHA-512\n\
         sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n\
         \x20   username=\"{user}\" \\\n\
         \x20   password=\"{password}\";\n\
         ssl.truststore.type=PEM\n\
         ssl.truststore.location={ca}\n\
         ssl.endpoint.identification.algorithm=https\n",
        app = run.app_id,
        bootstrap = secured.bootstrap,
        state = run.state_dir.display(),
        user = secured.username,
        password = jaas_password.replace('\\', "\\\\"),
        ca = secured.ca,
    )
}

/// The done-when of issue 47: a Java application's streams.properties with
/// SASL_SSL, SCRAM-SHA-512 in `sasl.jaas.config` and a PEM trust store runs
/// unchanged against the secured listener: a stateful exactly-once app
/// under `group.protocol=streams` (its streams group member and its
/// librdkafka clients all logged in with SCRAM-SHA-512), outputs exact.
#[test]
fn a_java_streams_properties_with_jaas_scram_sha_512_and_a_pem_truststore_runs_unchanged() {
    let (Some(plaintext), Some(secured)) = (test_broker(), secured_cluster()) else {
        return;
    };
    let run = common::FreshRun::new(&plaintext, "java-keys");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("streams.properties");
    std::fs::write(
        &path,
        java_streams_properties(&secured, &run, &secured.password),
    )
    .unwrap();
    let config = StreamsConfig::from_properties_file(&path).unwrap();
    counts_arrive_exactly_once(&plaintext, &run, config);
}

/// Runs a stateful app (a count per key, no cache, the output in `run`)
/// under `config` until 10 keys' counts 1..=10 arrive committed, once each
/// and in order, and nothing more.
fn counts_arrive_exactly_once(plaintext: &str, run: &common::FreshRun, config: StreamsConfig) {
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(&run.input)
        .group_by_key()
        .count_with(None, Materialized::as_("counts"))
        .to_stream()
        .to_with(&run.output, Produced::with(StringSerde, Nullable(I64Serde)));
    let mut app = KafkaStreams::new(builder.build().unwrap(), config);
    app.start().unwrap();

    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", plaintext)
        .create()
        .unwrap();
    let (keys, per_key) = (10, 10);
    for i in 0..keys * per_key {
        let key = format!("k{}", i % keys);
        producer
            .send(BaseRecord::to(&run.input).key(&key).payload("v"))
            .unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();

    // Without a cache every update is sent: each key's counts 1..=10, once
    // each and in order, committed.
    let reader = common::read_committed_consumer(plaintext, &run.output);
    let mut counts: std::collections::BTreeMap<String, Vec<i64>> = Default::default();
    let deadline = Instant::now() + Duration::from_secs(120);
    while counts.values().map(Vec::len).sum::<usize>() < keys * per_key {
        assert!(
            Instant::now() < deadline,
            "not every count arrived: {counts:?}; {:?}",
            app.errors()
        );
        assert_ne!(app.state(), State::Error, "app failed: {:?}", app.errors());
        if let Some(Ok(message)) = reader.poll(Duration::from_millis(200)) {
            let key = String::from_utf8(message.key().unwrap().to_vec()).unwrap();
            let value: [u8; 8] = message.payload().unwrap().try_into().unwrap();
            counts
                .entry(key)
                .or_default()
                .push(i64::from_be_bytes(value));
        }
    }
    // Nothing more than that arrives.
    let extra = reader.poll(Duration::from_secs(2));
    assert!(
        extra.is_none(),
        "an output beyond the exact ones: {extra:?}"
    );
    assert!(app.close(Duration::from_secs(30)));

    let expected: std::collections::BTreeMap<String, Vec<i64>> = (0..keys)
        .map(|k| (format!("k{k}"), (1..=per_key as i64).collect()))
        .collect();
    assert_eq!(counts, expected);
}

/// Starts the app of the Java streams.properties with a wrong password
/// until the start or the app fails (within 60 s, or the test fails: a
/// hang); the errors it gives.
fn errors_of_a_wrong_password(
    plaintext: &str,
    secured: &SecuredCluster,
    wrong: &str,
) -> Vec<String> {
    let run = common::FreshRun::new(plaintext, "java-keys-wrong");
    let config =
        StreamsConfig::from_properties_str(&java_streams_properties(secured, &run, wrong)).unwrap();
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(&run.input)
        .group_by_key()
        .count_with(None, Materialized::as_("counts"));
    let mut app = KafkaStreams::new(builder.build().unwrap(), config);
    let started = Instant::now();
    let start = app.start();
    let errors = loop {
        if start.is_err() || app.state() == State::Error {
            break match &start {
                Err(e) => vec![e.to_string()],
                Ok(()) => app.errors(),
            };
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "a wrong password neither failed the start nor the app: {:?}, {:?}",
            app.state(),
            app.errors()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    eprintln!("wrong password: {errors:?}");
    let _ = app.close(Duration::from_secs(10));
    errors
}

/// The same streams.properties with a wrong password: the application
/// fails (at start) within seconds, instead of hanging in retries, and the
/// password shows nowhere in what it says.
#[test]
fn a_wrong_password_in_sasl_jaas_config_fails_the_start_fast_without_showing_it() {
    let (Some(plaintext), Some(secured)) = (test_broker(), secured_cluster()) else {
        return;
    };
    let wrong = "not-\\the-\"password";
    let errors = errors_of_a_wrong_password(&plaintext, &secured, wrong);
    assert!(!errors.is_empty());
    let text = errors.join("\n");
    assert!(!text.contains("the-"), "the password shows: {text}");
}

/// What the failed start says names the cause: the SCRAM login of the
/// user refused. The topic check before the threads start (a librdkafka
/// metadata request, `kafka/topics.rs`) reads what librdkafka reported to
/// its error callback, so the start fails with the SASL failure itself, not
/// librdkafka's "Meta data fetch error: BrokerTransportFailure".
#[test]
fn a_wrong_password_failure_names_the_sasl_login_as_its_cause() {
    let (Some(plaintext), Some(secured)) = (test_broker(), secured_cluster()) else {
        return;
    };
    let errors = errors_of_a_wrong_password(&plaintext, &secured, "not-the-password");
    let text = errors.join("\n");
    assert_eq!(errors.len(), 1, "one error: {text}");
    assert!(
        text.contains(&format!(
            "SASL authentication failed for user \"{}\" (mechanism SCRAM-SHA-512): ",
            secured.username
        )),
        "{text}"
    );
    assert!(
        text.contains("check sasl.username/sasl.password or sasl.jaas.config"),
        "{text}"
    );
    assert!(!text.contains("not-the-password"), "{text}");
}

/// A CA certificate (PEM) that did not sign the broker's: a fresh
/// self-signed one, made with openssl in `dir`; `None` (the test skips)
/// where openssl is not installed.
fn another_ca(dir: &std::path::Path) -> Option<std::path::PathBuf> {
    let (key, cert) = (dir.join("other-ca.key"), dir.join("other-ca.pem"));
    let made = std::process::Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args(["-subj", "/CN=not the kstreams test CA"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output();
    match made {
        Ok(output) if output.status.success() => Some(cert),
        Ok(output) => panic!(
            "openssl could not make a CA: {}",
            String::from_utf8_lossy(&output.stderr)
        ),
        Err(error) => {
            eprintln!("skipped: no openssl to make another CA with ({error})");
            None
        }
    }
}

/// A CA file that did not sign the broker's certificate: the start fails
/// within seconds, once, naming the TLS handshake and the untrusted
/// certificate, and what to check; never a hang in retries.
#[test]
fn an_untrusted_broker_certificate_fails_the_start_naming_the_tls_handshake() {
    let (Some(plaintext), Some(secured)) = (test_broker(), secured_cluster()) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let Some(other_ca) = another_ca(dir.path()) else {
        return;
    };
    let run = common::FreshRun::new(&plaintext, "untrusted-ca");
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(&run.input)
        .map_values(|v| v.to_uppercase())
        .to(&run.output);
    let mut config = StreamsConfig::new(&run.app_id, &secured.bootstrap).state_dir(&run.state_dir);
    for (key, value) in secured.keys() {
        config.set(key, value).unwrap();
    }
    config
        .set("ssl.ca.location", other_ca.to_str().unwrap())
        .unwrap();
    let error = start_error(
        KafkaStreams::new(builder.build().unwrap(), config),
        "a broker certificate the CA did not sign was trusted",
    );
    assert!(
        error.contains("TLS handshake failed: certificate not trusted: "),
        "{error}"
    );
    assert!(error.contains("ssl.ca.location"), "{error}");
}

/// The error of `app`'s start, which must fail within 20 s (`accepted`
/// says what it would mean if it did not fail).
fn start_error(mut app: KafkaStreams, accepted: &str) -> String {
    let started = Instant::now();
    let error = app.start().expect_err(accepted).to_string();
    eprintln!("start failed: {error}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the start took {:?} to fail",
        started.elapsed()
    );
    let _ = app.close(Duration::from_secs(10));
    error
}

/// The OAUTHBEARER listener of `cargo xtask kafka start` (SASL_SSL, the
/// same CA, Kafka's unsecured-JWT validator requiring a scope): its
/// bootstrap and scope, or `None` (skip).
fn oauth_listener() -> Option<(String, String)> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let Some(bootstrap) = var("KSTREAMS_OAUTH_BOOTSTRAP") else {
        eprintln!("skipped: no KSTREAMS_OAUTH_BOOTSTRAP (cargo xtask kafka start sets it)");
        return None;
    };
    Some((
        bootstrap,
        var("KSTREAMS_OAUTH_SCOPE").expect("KSTREAMS_OAUTH_SCOPE with the bootstrap"),
    ))
}

/// A config for the OAUTHBEARER listener with librdkafka's unsecured JWT,
/// `sasl.oauthbearer.config` as given: every librdkafka client and the
/// streams group member make their tokens from it.
fn oauth_config(
    run: &common::FreshRun,
    bootstrap: &str,
    ca: &str,
    oauthbearer_config: &str,
) -> StreamsConfig {
    let mut config = StreamsConfig::new(&run.app_id, bootstrap)
        .processing_guarantee(ProcessingGuarantee::ExactlyOnceV2)
        .commit_interval(Duration::from_millis(100))
        .state_dir(&run.state_dir);
    for (key, value) in [
        ("group.protocol", "streams"),
        ("statestore.cache.max.bytes", "0"),
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "OAUTHBEARER"),
        ("enable.sasl.oauthbearer.unsecure.jwt", "true"),
        ("sasl.oauthbearer.config", oauthbearer_config),
        ("ssl.ca.location", ca),
    ] {
        config.set(key, value).unwrap();
    }
    config
}

/// `group.protocol=streams` on the OAUTHBEARER listener: a stateful
/// exactly-once app whose librdkafka clients and streams group member all
/// log in with unsecured JWTs made from `sasl.oauthbearer.config`; outputs
/// exact.
#[test]
fn a_streams_group_app_runs_over_oauthbearer_to_exact_outputs() {
    let (Some(plaintext), Some(secured), Some((bootstrap, scope))) =
        (test_broker(), secured_cluster(), oauth_listener())
    else {
        return;
    };
    let run = common::FreshRun::new(&plaintext, "oauthbearer");
    let config = oauth_config(
        &run,
        &bootstrap,
        &secured.ca,
        &format!("principal=kstreams-app scope={scope}"),
    );
    counts_arrive_exactly_once(&plaintext, &run, config);
}

/// A token the broker refuses (without the scope it requires): the start
/// fails within seconds, once, naming OAUTHBEARER, the broker's reason and
/// the keys of the token's source.
#[test]
fn a_refused_oauthbearer_token_fails_the_start_naming_the_cause() {
    let (Some(plaintext), Some(secured), Some((bootstrap, _))) =
        (test_broker(), secured_cluster(), oauth_listener())
    else {
        return;
    };
    let run = common::FreshRun::new(&plaintext, "oauthbearer-refused");
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(&run.input)
        .group_by_key()
        .count_with(None, Materialized::as_("counts"));
    let config = oauth_config(
        &run,
        &bootstrap,
        &secured.ca,
        "principal=kstreams-app scope=not-the-scope",
    );
    let error = start_error(
        KafkaStreams::new(builder.build().unwrap(), config),
        "a token without the required scope was accepted",
    );
    assert!(
        error.starts_with("SASL authentication failed (mechanism OAUTHBEARER): ")
            && error.contains("insufficient_scope")
            && error.contains("sasl.oauthbearer.config"),
        "{error}"
    );
}

/// The mutual-TLS listener of `cargo xtask kafka start` (security protocol
/// SSL, the same CA, a client certificate signed by it required) and the
/// keys of a client with that certificate, as PEM files; or `None` (skip).
fn mutual_tls_keys() -> Option<(String, [(&'static str, String); 4])> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let Some(bootstrap) = var("KSTREAMS_MTLS_BOOTSTRAP") else {
        eprintln!("skipped: no KSTREAMS_MTLS_BOOTSTRAP (cargo xtask kafka start sets it)");
        return None;
    };
    let expect =
        |name: &str| var(name).unwrap_or_else(|| panic!("{name} with KSTREAMS_MTLS_BOOTSTRAP"));
    let keys = [
        ("security.protocol", "SSL".to_owned()),
        ("ssl.ca.location", expect("KSTREAMS_MTLS_CA")),
        (
            "ssl.certificate.location",
            expect("KSTREAMS_MTLS_CERTIFICATE"),
        ),
        ("ssl.key.location", expect("KSTREAMS_MTLS_KEY")),
    ];
    Some((bootstrap, keys))
}

/// `group.protocol=streams` on mutual TLS: a stateful exactly-once app whose
/// librdkafka clients and streams group member all present the client
/// certificate (`security.protocol=SSL`, `ssl.certificate.location`,
/// `ssl.key.location`); outputs exact.
#[test]
fn a_streams_group_app_runs_over_mutual_tls_to_exact_outputs() {
    let (Some(plaintext), Some((bootstrap, keys))) = (test_broker(), mutual_tls_keys()) else {
        return;
    };
    let run = common::FreshRun::new(&plaintext, "mutual-tls");
    let mut config = StreamsConfig::new(&run.app_id, &bootstrap)
        .processing_guarantee(ProcessingGuarantee::ExactlyOnceV2)
        .commit_interval(Duration::from_millis(100))
        .state_dir(&run.state_dir);
    config.set("group.protocol", "streams").unwrap();
    config.set("statestore.cache.max.bytes", "0").unwrap();
    for (key, value) in &keys {
        config.set(key, value).unwrap();
    }
    counts_arrive_exactly_once(&plaintext, &run, config);
}

/// Which tasks each static member of `app_id` runs, by instance id, as the
/// broker describes the group (asked over the mutual-TLS listener too).
fn active_tasks_by_instance(
    bootstrap: &str,
    keys: &[(&'static str, String)],
    app_id: &str,
) -> std::collections::BTreeMap<String, Vec<kstreams_group::TaskId>> {
    let mut connection = kstreams_group::ConnectionConfig::new(bootstrap);
    connection.security = kstreams_group::Security::from_client_config(|key| {
        keys.iter()
            .find(|(k, _)| *k == key)
            .map(|(_, value)| value.clone())
    })
    .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let description = runtime
        .block_on(kstreams_group::Admin::new(connection).describe_streams_group(app_id))
        .unwrap();
    description
        .members
        .into_iter()
        .filter_map(|member| {
            let instance = member.instance_id?;
            Some((instance, member.assignment.active.iter().collect()))
        })
        .collect()
}

/// Static membership under `group.protocol=streams` (Kafka 4.4), on mutual
/// TLS: two instances with `group.instance.id`; one closes (a static member
/// leaves with epoch -2, its tasks kept for it until its session times out)
/// and starts again on its state directory well within the session: it gets
/// its own task back, the other instance never runs it, and every record
/// reaches the output exactly once.
#[test]
fn a_static_instance_restarted_within_its_session_gets_its_own_task_back() {
    let (Some(plaintext), Some((bootstrap, keys))) = (test_broker(), mutual_tls_keys()) else {
        return;
    };
    let run = common::FreshRun::new(&plaintext, "static-mtls");
    let topology = || {
        let builder = StreamsBuilder::new();
        builder
            .stream::<String, String>(&run.input)
            .map_values(|v| v.to_uppercase())
            .to(&run.output);
        builder.build().unwrap()
    };
    let config = |instance: &str| {
        let mut config = StreamsConfig::new(&run.app_id, &bootstrap)
            .processing_guarantee(ProcessingGuarantee::ExactlyOnceV2)
            .commit_interval(Duration::from_millis(100))
            .state_dir(run.state_dir.join(instance));
        config.set("group.protocol", "streams").unwrap();
        config.set("group.instance.id", instance).unwrap();
        for (key, value) in &keys {
            config.set(key, value).unwrap();
        }
        config
    };
    let owners = || active_tasks_by_instance(&bootstrap, &keys, &run.app_id);
    // Each instance's one stream thread is a member `<group.instance.id>-1`.
    let settled = |expected_members: usize| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let owners = owners();
            if owners.len() == expected_members && owners.values().all(|tasks| tasks.len() == 1) {
                return owners;
            }
            assert!(Instant::now() < deadline, "no split: {owners:?}");
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    let mut a = KafkaStreams::new(topology(), config("static-a"));
    a.start().unwrap();
    let mut b = KafkaStreams::new(topology(), config("static-b"));
    b.start().unwrap();
    let before = settled(2);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        ["static-a-1", "static-b-1"],
        "the instance ids the runtime sends"
    );

    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &plaintext)
        .create()
        .unwrap();
    let produce = |from: usize| {
        for i in from..from + 20 {
            producer
                .send(
                    BaseRecord::to(&run.input)
                        .key(&format!("k{}", i % 10))
                        .payload(&format!("v{i}")),
                )
                .unwrap();
        }
        producer.flush(Duration::from_secs(30)).unwrap();
    };
    produce(0);

    assert!(b.close(Duration::from_secs(30)));
    // Gone for 3 s (the session is 45 s): its task waits for it.
    let gap = Instant::now() + Duration::from_secs(3);
    while Instant::now() < gap {
        let during = owners();
        assert_eq!(
            during.get("static-a-1"),
            before.get("static-a-1"),
            "static-a never takes static-b's task"
        );
        assert_eq!(
            during.get("static-b-1"),
            before.get("static-b-1"),
            "static-b's task stays reserved for it"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let mut b = KafkaStreams::new(topology(), config("static-b"));
    b.start().unwrap();
    let after = settled(2);
    assert_eq!(after, before, "each instance runs the task it ran before");
    produce(20);

    let reader = common::read_committed_consumer(&plaintext, &run.output);
    let mut values = std::collections::BTreeSet::new();
    let mut read = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while read < 40 {
        assert!(Instant::now() < deadline, "only {read} outputs: {values:?}");
        assert_ne!(a.state(), State::Error, "{:?}", a.errors());
        assert_ne!(b.state(), State::Error, "{:?}", b.errors());
        if let Some(Ok(message)) = reader.poll(Duration::from_millis(200)) {
            values.insert(String::from_utf8(message.payload().unwrap().to_vec()).unwrap());
            read += 1;
        }
    }
    let extra = reader.poll(Duration::from_secs(2));
    assert!(
        extra.is_none(),
        "an output beyond the exact ones: {extra:?}"
    );
    let expected: std::collections::BTreeSet<String> = (0..40).map(|i| format!("V{i}")).collect();
    assert_eq!(values, expected);
    assert!(a.close(Duration::from_secs(30)));
    assert!(b.close(Duration::from_secs(30)));
}
