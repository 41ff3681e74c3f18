//! The streams group member on a secured listener of a real broker: the
//! SASL_SSL listener of `cargo xtask kafka start` (SCRAM-SHA-256 over TLS,
//! the CA made at the broker's start), configured with the librdkafka keys
//! an application sets for its other clients (`Security::from_client_config`).
//!
//! Found through KSTREAMS_SASL_SSL_BOOTSTRAP, KSTREAMS_SASL_SSL_CA,
//! KSTREAMS_SASL_USERNAME and KSTREAMS_SASL_PASSWORD (`eval "$(cargo xtask
//! kafka start)"` sets them; `cargo xtask ci` passes them to the tests).
//! Skipped without them, failed without them under CI; skipped on a broker
//! without streams groups (Kafka 4.2+ needed).

use std::collections::HashMap;
use std::io::Write;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kstreams_group::{
    Admin, ConnectionConfig, Error, MemberConfig, MemberEvent, Security, StreamsGroupMember,
    Subtopology, TaskId, Topology, Uuid,
};
use tokio::net::{TcpListener, TcpStream};

const PARTITIONS: i32 = 2;
/// A rebalance on the test broker settles in seconds; this bounds a broken one.
const SETTLE: Duration = Duration::from_secs(60);
/// A refused login or handshake must be said this fast (no retries).
const FAST: Duration = Duration::from_secs(10);

struct Secured {
    bootstrap: String,
    ca: String,
    username: String,
    password: String,
}

impl Secured {
    /// The librdkafka keys for this listener, `password` in place of the
    /// right one.
    fn keys(&self, password: &str) -> HashMap<String, String> {
        [
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-256"),
            ("sasl.username", self.username.as_str()),
            ("sasl.password", password),
            ("ssl.ca.location", self.ca.as_str()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    fn connection(&self, bootstrap: &str, keys: &HashMap<String, String>) -> ConnectionConfig {
        let mut connection = ConnectionConfig::new(bootstrap);
        connection.security = Security::from_client_config(|key| keys.get(key).cloned()).unwrap();
        connection.request_timeout = Duration::from_secs(10);
        connection
    }

    fn good(&self) -> ConnectionConfig {
        self.connection(&self.bootstrap, &self.keys(&self.password))
    }
}

fn skip(why: &str) -> Option<Secured> {
    let test = std::thread::current().name().unwrap_or("test").to_owned();
    // One write, so that parallel tests do not interleave mid-line.
    let line = format!("skipped {test}: {why}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
    None
}

/// The SASL_SSL listener of a broker with streams groups, or `None` (skip).
async fn secured() -> Option<Secured> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let Some(bootstrap) = var("KSTREAMS_SASL_SSL_BOOTSTRAP") else {
        let ci = var("CI").is_some_and(|ci| !matches!(ci.as_str(), "0" | "false"));
        assert!(
            !ci,
            "KSTREAMS_SASL_SSL_BOOTSTRAP is not set but CI is: run the tests through `cargo \
             xtask ci`, whose broker has a SASL_SSL listener"
        );
        return skip("no KSTREAMS_SASL_SSL_BOOTSTRAP (cargo xtask kafka start sets it)");
    };
    let secured = Secured {
        bootstrap,
        ca: var("KSTREAMS_SASL_SSL_CA").expect("KSTREAMS_SASL_SSL_CA with the bootstrap"),
        username: var("KSTREAMS_SASL_USERNAME").expect("KSTREAMS_SASL_USERNAME"),
        password: var("KSTREAMS_SASL_PASSWORD").expect("KSTREAMS_SASL_PASSWORD"),
    };
    match Admin::new(secured.good()).supports_streams_groups().await {
        Ok(true) => Some(secured),
        Ok(false) => skip("the broker has no streams groups (Kafka 4.2+ needed)"),
        Err(error) => panic!(
            "the SASL_SSL listener at {} does not answer: {error}",
            secured.bootstrap
        ),
    }
}

fn unique(name: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{name}-{nanos}")
}

fn topology(input: &str) -> Topology {
    Topology {
        epoch: 0,
        subtopologies: vec![Subtopology {
            id: "0".to_owned(),
            source_topics: vec![input.to_owned()],
            ..Subtopology::default()
        }],
    }
}

/// A new application: its id and topology, its input topic made over the
/// secured listener too.
async fn app(secured: &Secured, name: &str) -> (String, Topology) {
    let id = unique(name);
    let input = format!("{id}-input");
    Admin::new(secured.good())
        .create_topic(&input, PARTITIONS)
        .await
        .unwrap();
    (id, topology(&input))
}

/// Joins, and plays the application until the member runs every task.
async fn join_and_run_everything(connection: ConnectionConfig, id: &str, topology: &Topology) {
    let config = MemberConfig::new(connection, id, Uuid::new_v4());
    let mut member = StreamsGroupMember::join(config, topology).await.unwrap();
    let all: Vec<TaskId> = (0..PARTITIONS).map(|p| TaskId::new("0", p)).collect();
    let deadline = Instant::now() + SETTLE;
    loop {
        member.record_poll();
        let wait = tokio::time::timeout(Duration::from_millis(200), member.next_event());
        if let Ok(event) = wait.await {
            match event.expect("the member stopped") {
                MemberEvent::Assigned(assignment) => member.report_owned(assignment).unwrap(),
                MemberEvent::TasksLost => panic!("tasks lost"),
                _ => {}
            }
        }
        let active: Vec<TaskId> = member.snapshot().assignment.active.iter().collect();
        if active == all {
            break;
        }
        assert!(Instant::now() < deadline, "no full assignment: {active:?}");
    }
    member.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_joins_over_sasl_ssl_with_scram_and_gets_an_assignment() {
    let Some(secured) = secured().await else {
        return;
    };
    let (id, topology) = app(&secured, "secured-join").await;
    join_and_run_everything(secured.good(), &id, &topology).await;
    // The group's description, asked over the secured listener too.
    let description = Admin::new(secured.good())
        .describe_streams_group(&id)
        .await
        .unwrap();
    assert_eq!(description.group_id, id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_fails_the_join_fast_with_the_clear_error() {
    let Some(secured) = secured().await else {
        return;
    };
    let (id, topology) = app(&secured, "secured-wrong-password").await;
    let connection = secured.connection(&secured.bootstrap, &secured.keys("not-the-password"));
    let started = Instant::now();
    let result = StreamsGroupMember::join(
        MemberConfig::new(connection, &id, Uuid::new_v4()),
        &topology,
    )
    .await;
    let Err(error) = result else {
        panic!("a wrong password joined");
    };
    eprintln!("wrong password: {error}");
    assert!(started.elapsed() < FAST, "{:?}", started.elapsed());
    assert!(matches!(error, Error::Authentication { .. }), "{error:?}");
    assert!(error.is_fatal());
    let message = error.to_string();
    for part in [
        "SASL SCRAM-SHA-256 authentication as \"kstreams\" failed",
        "SaslAuthenticationFailed",
        "sasl.password",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
    assert!(!message.contains("not-the-password"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mechanism_the_listener_does_not_enable_is_named_with_those_it_does() {
    let Some(secured) = secured().await else {
        return;
    };
    let mut keys = secured.keys(&secured.password);
    keys.insert("sasl.mechanism".to_owned(), "SCRAM-SHA-512".to_owned());
    let admin = Admin::new(secured.connection(&secured.bootstrap, &keys));
    let error = admin.supports_streams_groups().await.unwrap_err();
    eprintln!("mechanism: {error}");
    assert!(matches!(error, Error::SaslMechanism { .. }), "{error:?}");
    assert!(error.to_string().contains("SCRAM-SHA-256"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_certificate_from_an_untrusted_ca_fails_naming_ssl_ca_location() {
    let Some(secured) = secured().await else {
        return;
    };
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let other_ca = params
        .self_signed(&rcgen::KeyPair::generate().unwrap())
        .unwrap();
    let file = std::env::temp_dir().join(format!("{}.pem", unique("kstreams-other-ca")));
    std::fs::write(&file, other_ca.pem()).unwrap();
    let mut keys = secured.keys(&secured.password);
    keys.insert("ssl.ca.location".to_owned(), file.display().to_string());
    let started = Instant::now();
    let error = Admin::new(secured.connection(&secured.bootstrap, &keys))
        .supports_streams_groups()
        .await
        .unwrap_err();
    let _ = std::fs::remove_file(&file);
    eprintln!("untrusted: {error}");
    assert!(started.elapsed() < FAST);
    assert!(
        matches!(error, Error::UntrustedCertificate { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains("not trusted"), "{message}");
    assert!(message.contains(&file.display().to_string()), "{message}");
    assert!(message.contains("set ssl.ca.location"), "{message}");

    // Without ssl.ca.location the system's store is used, which does not
    // have the test CA either.
    keys.remove("ssl.ca.location");
    let error = Admin::new(secured.connection(&secured.bootstrap, &keys))
        .supports_streams_groups()
        .await
        .unwrap_err();
    assert!(
        matches!(error, Error::UntrustedCertificate { .. }),
        "{error:?}"
    );
}

/// A TCP forwarder to `target` listening on another loopback address
/// (127.0.0.2), which the broker's certificate (127.0.0.1, localhost) does
/// not list. Its address, or `None` where 127.0.0.2 cannot be bound.
async fn forwarder(target: &str) -> Option<String> {
    let listener = TcpListener::bind("127.0.0.2:0").await.ok()?;
    let address = listener.local_addr().ok()?.to_string();
    let target = target.to_owned();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let target = target.clone();
            tokio::spawn(async move {
                if let Ok(mut outbound) = TcpStream::connect(&target).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    Some(address)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_name_the_certificate_does_not_list_fails_unless_the_check_is_off() {
    let Some(secured) = secured().await else {
        return;
    };
    let first = secured
        .bootstrap
        .split(',')
        .next()
        .unwrap()
        .trim()
        .to_owned();
    let Some(other_name) = forwarder(&first).await else {
        skip("127.0.0.2 cannot be bound here");
        return;
    };
    let keys = secured.keys(&secured.password);
    let started = Instant::now();
    let error = Admin::new(secured.connection(&other_name, &keys))
        .supports_streams_groups()
        .await
        .unwrap_err();
    eprintln!("hostname: {error}");
    assert!(started.elapsed() < FAST);
    assert!(
        matches!(error, Error::CertificateHostname { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains("127.0.0.2"), "{message}");
    assert!(
        message.contains("ssl.endpoint.identification.algorithm=none"),
        "{message}"
    );

    // With the check off the chain is still verified and the member joins
    // (bootstrapped through the other name; the coordinator is reached at
    // its advertised address).
    let mut unchecked = keys.clone();
    unchecked.insert(
        "ssl.endpoint.identification.algorithm".to_owned(),
        "none".to_owned(),
    );
    let (id, topology) = app(&secured, "secured-no-hostname-check").await;
    join_and_run_everything(secured.connection(&other_name, &unchecked), &id, &topology).await;
}
