//! The streams group member on a secured listener of a real broker: the
//! SASL_SSL listener of `cargo xtask kafka start` (SCRAM-SHA-256 and
//! SCRAM-SHA-512 over TLS, the CA made at the broker's start), configured
//! with the librdkafka keys an application sets for its other clients
//! (`Security::from_client_config`).
//!
//! Found through KSTREAMS_SASL_SSL_BOOTSTRAP, KSTREAMS_SASL_SSL_CA,
//! KSTREAMS_SASL_USERNAME and KSTREAMS_SASL_PASSWORD (`eval "$(cargo xtask
//! kafka start)"` sets them; `cargo xtask ci` passes them to the tests).
//! Skipped without them, failed without them under CI; skipped on a broker
//! without streams groups (Kafka 4.2+ needed).
//!
//! The mutual-TLS listener (security protocol SSL, a client certificate
//! signed by the test CA required) is found through KSTREAMS_MTLS_BOOTSTRAP,
//! KSTREAMS_MTLS_CA, KSTREAMS_MTLS_CERTIFICATE and KSTREAMS_MTLS_KEY (PEM),
//! KSTREAMS_MTLS_KEYSTORE and KSTREAMS_MTLS_KEYSTORE_PASSWORD (the same
//! identity in a PKCS#12 store); its tests are skipped without them.

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
        owned(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-256"),
            ("sasl.username", self.username.as_str()),
            ("sasl.password", password),
            ("ssl.ca.location", self.ca.as_str()),
        ])
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

/// `pairs` as a map of owned keys and values.
fn owned(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn skip<T>(why: &str) -> Option<T> {
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

/// Joins, and plays the application until the member runs every task,
/// then for `stay` more, every task kept.
async fn join_and_run_everything(
    connection: ConnectionConfig,
    id: &str,
    topology: &Topology,
    stay: Duration,
) {
    let config = MemberConfig::new(connection, id, Uuid::new_v4());
    let mut member = StreamsGroupMember::join(config, topology).await.unwrap();
    let all: Vec<TaskId> = (0..PARTITIONS).map(|p| TaskId::new("0", p)).collect();
    let deadline = Instant::now() + SETTLE + stay;
    let mut settled: Option<Instant> = None;
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
            if settled.get_or_insert_with(Instant::now).elapsed() >= stay {
                break;
            }
        } else {
            assert!(settled.is_none(), "tasks moved away: {active:?}");
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
    join_and_run_everything(secured.good(), &id, &topology, Duration::ZERO).await;
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
    let message = refused_join(connection, &id, &topology).await;
    for part in [
        "SASL SCRAM-SHA-256 authentication as \"kstreams\" failed",
        "SaslAuthenticationFailed",
        "sasl.password",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
    assert!(!message.contains("not-the-password"), "{message}");
}

/// Joins with `connection`, which the broker must refuse within [`FAST`]
/// with a (fatal) [`Error::Authentication`]; its message.
async fn refused_join(connection: ConnectionConfig, id: &str, topology: &Topology) -> String {
    let started = Instant::now();
    let result =
        StreamsGroupMember::join(MemberConfig::new(connection, id, Uuid::new_v4()), topology).await;
    let Err(error) = result else {
        panic!("the member joined");
    };
    eprintln!("refused: {error}");
    assert!(started.elapsed() < FAST, "{:?}", started.elapsed());
    assert!(matches!(error, Error::Authentication { .. }), "{error:?}");
    assert!(error.is_fatal());
    error.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mechanism_the_listener_does_not_enable_is_named_with_those_it_does() {
    let Some(secured) = secured().await else {
        return;
    };
    let mut keys = secured.keys(&secured.password);
    // The listener enables SCRAM-SHA-256 and SCRAM-SHA-512, not PLAIN.
    keys.insert("sasl.mechanism".to_owned(), "PLAIN".to_owned());
    let admin = Admin::new(secured.connection(&secured.bootstrap, &keys));
    let error = admin.supports_streams_groups().await.unwrap_err();
    eprintln!("mechanism: {error}");
    assert!(matches!(error, Error::SaslMechanism { .. }), "{error:?}");
    for enabled in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
        assert!(error.to_string().contains(enabled), "{error}");
    }
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
        skip::<()>("127.0.0.2 cannot be bound here");
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
    let connection = secured.connection(&other_name, &unchecked);
    join_and_run_everything(connection, &id, &topology, Duration::ZERO).await;
}

/// The OAUTHBEARER listener of `cargo xtask kafka start` (SASL_SSL, the
/// same CA; Kafka's unsecured-JWT validator requiring a scope): its
/// bootstrap and scope, or `None` (skip).
async fn oauth() -> Option<(Secured, String, String)> {
    let secured = secured().await?;
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let Some(bootstrap) = var("KSTREAMS_OAUTH_BOOTSTRAP") else {
        skip::<()>("no KSTREAMS_OAUTH_BOOTSTRAP (cargo xtask kafka start sets it)");
        return None;
    };
    let scope = var("KSTREAMS_OAUTH_SCOPE").expect("KSTREAMS_OAUTH_SCOPE with the bootstrap");
    Some((secured, bootstrap, scope))
}

/// The librdkafka keys of an OAUTHBEARER client with librdkafka's
/// unsecured JWT (`sasl.oauthbearer.config`).
fn unsecured_keys(secured: &Secured, config: &str) -> HashMap<String, String> {
    owned(&[
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "OAUTHBEARER"),
        ("enable.sasl.oauthbearer.unsecure.jwt", "true"),
        ("sasl.oauthbearer.config", config),
        ("ssl.ca.location", secured.ca.as_str()),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_joins_over_oauthbearer_with_an_unsecured_jwt() {
    let Some((secured, bootstrap, scope)) = oauth().await else {
        return;
    };
    let (id, topology) = app(&secured, "oauth-join").await;
    let keys = unsecured_keys(
        &secured,
        &format!("principal=kstreams-app scope={scope} lifeSeconds=600 extension_traceId=t1"),
    );
    let connection = secured.connection(&bootstrap, &keys);
    join_and_run_everything(connection.clone(), &id, &topology, Duration::ZERO).await;
    let description = Admin::new(connection)
        .describe_streams_group(&id)
        .await
        .unwrap();
    assert_eq!(description.group_id, id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_without_the_scope_the_broker_requires_fails_fast_naming_the_cause() {
    let Some((secured, bootstrap, _)) = oauth().await else {
        return;
    };
    let (id, topology) = app(&secured, "oauth-scope").await;
    let keys = unsecured_keys(&secured, "principal=kstreams-app scope=another-scope");
    let message = refused_join(secured.connection(&bootstrap, &keys), &id, &topology).await;
    for part in [
        "SASL OAUTHBEARER authentication as \"kstreams-app\" failed",
        "insufficient_scope",
        "SaslAuthenticationFailed",
        "check sasl.oauthbearer.config",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
}

/// A token endpoint on loopback (OAuth 2 client credentials): each request
/// answered with `token(n)`'s access token, `n` counting from 0; the
/// requests counted.
fn token_endpoint(
    token: impl Fn(usize) -> String + Send + 'static,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{BufRead, BufReader, Read};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/token", listener.local_addr().unwrap());
    let count = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = count.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let mut stream = stream.unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let (mut length, mut basic) = (0, false);
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                let lower = line.to_ascii_lowercase();
                if let Some(value) = lower.strip_prefix("content-length:") {
                    length = value.trim().parse().unwrap();
                }
                basic |= lower.starts_with("authorization: basic ");
                if line == "\r\n" {
                    break;
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let form = String::from_utf8(body).unwrap();
            let (status, answer) = if basic && form.starts_with("grant_type=client_credentials") {
                let token = token(counted.fetch_add(1, Ordering::SeqCst));
                (
                    200,
                    format!(r#"{{"access_token":"{token}","token_type":"Bearer"}}"#),
                )
            } else {
                (400, r#"{"error":"invalid_request"}"#.to_owned())
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{answer}",
                answer.len()
            );
        }
    });
    (url, count)
}

/// An unsigned JWT (`alg` `none`, what the broker's unsecured validator
/// takes) for `sub` with `scope`, expiring `life_secs` from now.
fn unsigned_jwt(sub: &str, scope: &str, life_secs: i64) -> String {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let claims =
        serde_json::json!({"sub": sub, "iat": now, "exp": now + life_secs, "scope": scope});
    format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    )
}

fn oidc_keys(secured: &Secured, url: &str, scope: &str) -> HashMap<String, String> {
    owned(&[
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "OAUTHBEARER"),
        ("sasl.oauthbearer.method", "oidc"),
        ("sasl.oauthbearer.token.endpoint.url", url),
        ("sasl.oauthbearer.client.id", "kstreams-app"),
        ("sasl.oauthbearer.client.secret", "client-secret"),
        ("sasl.oauthbearer.scope", scope),
        ("ssl.ca.location", secured.ca.as_str()),
    ])
}

/// OIDC client credentials against a local token endpoint whose tokens
/// live 6 s: the broker ends each session with the token (KIP-368), so the
/// member, staying in its group for 20 s, authenticates again on its
/// connections with fresh tokens, and keeps its tasks. (The principal, the
/// tokens' `sub`, stays the same: a broker refuses a re-authentication as
/// another principal.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oidc_member_refreshes_its_token_and_reauthenticates_before_the_session_ends() {
    let Some((secured, bootstrap, scope)) = oauth().await else {
        return;
    };
    let (id, topology) = app(&secured, "oauth-oidc").await;
    let token_scope = scope.clone();
    let (url, requests) = token_endpoint(move |_| unsigned_jwt("svc", &token_scope, 6));
    let connection = secured.connection(&bootstrap, &oidc_keys(&secured, &url, &scope));
    join_and_run_everything(connection, &id, &topology, Duration::from_secs(20)).await;
    // A 6 s token is refreshed after 4.8 s: 20 s in the group take several.
    let fetched = requests.load(std::sync::atomic::Ordering::SeqCst);
    assert!(fetched >= 4, "only {fetched} token(s) fetched");
}

/// A token endpoint that hands out an expired token: the join fails at
/// once, saying so, before the broker is asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_token_fails_the_join_fast_saying_it_expired() {
    let Some((secured, bootstrap, scope)) = oauth().await else {
        return;
    };
    let (id, topology) = app(&secured, "oauth-expired").await;
    let token_scope = scope.clone();
    let (url, _) = token_endpoint(move |_| unsigned_jwt("svc", &token_scope, -120));
    let connection = secured.connection(&bootstrap, &oidc_keys(&secured, &url, &scope));
    let message = refused_join(connection, &id, &topology).await;
    for part in [
        "SASL OAUTHBEARER authentication as \"kstreams-app\" failed",
        "the token expired 12",
        "sasl.oauthbearer.token.endpoint.url",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
    assert!(!message.contains("client-secret"), "{message}");
}

/// The mutual-TLS listener of `cargo xtask kafka start` and the client
/// identity its CA signed.
struct MutualTls {
    bootstrap: String,
    ca: String,
    certificate: String,
    key: String,
    keystore: String,
    keystore_password: String,
}

impl MutualTls {
    /// The librdkafka keys of an SSL client that trusts the test CA, with
    /// `identity` (the client certificate's keys) added.
    fn keys(&self, identity: &[(&str, &str)]) -> HashMap<String, String> {
        let mut keys = owned(&[
            ("security.protocol", "SSL"),
            ("ssl.ca.location", self.ca.as_str()),
        ]);
        keys.extend(owned(identity));
        keys
    }

    /// The keys with the client certificate and key as PEM files.
    fn pem_keys(&self) -> HashMap<String, String> {
        self.keys(&[
            ("ssl.certificate.location", self.certificate.as_str()),
            ("ssl.key.location", self.key.as_str()),
        ])
    }

    /// The keys with the client identity in the PKCS#12 store.
    fn keystore_keys(&self) -> HashMap<String, String> {
        self.keys(&[
            ("ssl.keystore.location", self.keystore.as_str()),
            ("ssl.keystore.password", self.keystore_password.as_str()),
        ])
    }

    fn connection(&self, keys: &HashMap<String, String>) -> ConnectionConfig {
        let mut connection = ConnectionConfig::new(&self.bootstrap);
        connection.security = Security::from_client_config(|key| keys.get(key).cloned()).unwrap();
        connection.request_timeout = Duration::from_secs(10);
        connection
    }
}

/// The mutual-TLS listener of a broker with streams groups, or `None`
/// (skip).
async fn mutual_tls() -> Option<MutualTls> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let Some(bootstrap) = var("KSTREAMS_MTLS_BOOTSTRAP") else {
        return skip("no KSTREAMS_MTLS_BOOTSTRAP (cargo xtask kafka start sets it)");
    };
    let expect =
        |name: &str| var(name).unwrap_or_else(|| panic!("{name} with KSTREAMS_MTLS_BOOTSTRAP"));
    let mtls = MutualTls {
        bootstrap,
        ca: expect("KSTREAMS_MTLS_CA"),
        certificate: expect("KSTREAMS_MTLS_CERTIFICATE"),
        key: expect("KSTREAMS_MTLS_KEY"),
        keystore: expect("KSTREAMS_MTLS_KEYSTORE"),
        keystore_password: expect("KSTREAMS_MTLS_KEYSTORE_PASSWORD"),
    };
    match Admin::new(mtls.connection(&mtls.pem_keys()))
        .supports_streams_groups()
        .await
    {
        Ok(true) => Some(mtls),
        Ok(false) => skip("the broker has no streams groups (Kafka 4.2+ needed)"),
        Err(error) => panic!(
            "the mutual-TLS listener at {} does not answer: {error}",
            mtls.bootstrap
        ),
    }
}

/// A new application on the mutual-TLS listener: its id and topology, its
/// input topic made over that listener.
async fn mutual_tls_app(mtls: &MutualTls, name: &str) -> (String, Topology) {
    let id = unique(name);
    let input = format!("{id}-input");
    Admin::new(mtls.connection(&mtls.pem_keys()))
        .create_topic(&input, PARTITIONS)
        .await
        .unwrap();
    (id, topology(&input))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_joins_over_mutual_tls_with_a_pem_certificate_and_key() {
    let Some(mtls) = mutual_tls().await else {
        return;
    };
    let (id, topology) = mutual_tls_app(&mtls, "mtls-pem").await;
    let connection = mtls.connection(&mtls.pem_keys());
    join_and_run_everything(connection.clone(), &id, &topology, Duration::ZERO).await;
    let description = Admin::new(connection)
        .describe_streams_group(&id)
        .await
        .unwrap();
    assert_eq!(description.group_id, id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_joins_over_mutual_tls_with_a_pkcs12_key_store() {
    let Some(mtls) = mutual_tls().await else {
        return;
    };
    let (id, topology) = mutual_tls_app(&mtls, "mtls-pkcs12").await;
    let connection = mtls.connection(&mtls.keystore_keys());
    join_and_run_everything(connection, &id, &topology, Duration::ZERO).await;
}

/// Joins with `keys`, which the mutual-TLS listener must refuse within
/// [`FAST`] with one fatal TLS error saying `expected` and naming the client
/// certificate keys; its message.
async fn refused_client_certificate(
    mtls: &MutualTls,
    keys: &HashMap<String, String>,
    id: &str,
    topology: &Topology,
    expected: &str,
) -> String {
    let started = Instant::now();
    let config = MemberConfig::new(mtls.connection(keys), id, Uuid::new_v4());
    let Err(error) = StreamsGroupMember::join(config, topology).await else {
        panic!("the member joined without a certificate the listener trusts");
    };
    eprintln!("refused: {error}");
    assert!(started.elapsed() < FAST, "{:?}", started.elapsed());
    assert!(error.is_fatal(), "{error:?}");
    let cause = match &error {
        Error::NoBroker { last, .. } => last.as_ref(),
        other => other,
    };
    assert!(matches!(cause, Error::Tls { .. }), "{error:?}");
    let message = error.to_string();
    for part in [
        expected,
        "ssl.certificate.location and ssl.key.location (or ssl.keystore.location)",
        "ssl.truststore trusts",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
    message
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_client_certificate_the_join_fails_fast_naming_the_keys() {
    let Some(mtls) = mutual_tls().await else {
        return;
    };
    let (id, topology) = mutual_tls_app(&mtls, "mtls-none").await;
    let cause = "the broker requires a client certificate (mutual TLS, its \
                 ssl.client.auth=required) and this client has none";
    refused_client_certificate(&mtls, &mtls.keys(&[]), &id, &topology, cause).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_of_another_ca_fails_the_join_fast_naming_the_keys() {
    let Some(mtls) = mutual_tls().await else {
        return;
    };
    let (id, topology) = mutual_tls_app(&mtls, "mtls-other-ca").await;
    // A CA the broker does not trust, and a client certificate it signed.
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let ca = rcgen::CertifiedIssuer::self_signed(params, ca_key).unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["kstreams-client".to_owned()]).unwrap();
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let key = rcgen::KeyPair::generate().unwrap();
    let certificate = params.signed_by(&key, &ca).unwrap();
    let dir = std::env::temp_dir().join(unique("kstreams-other-client"));
    std::fs::create_dir_all(&dir).unwrap();
    let (certificate_file, key_file) = (dir.join("client.pem"), dir.join("client.key"));
    std::fs::write(&certificate_file, certificate.pem()).unwrap();
    std::fs::write(&key_file, key.serialize_pem()).unwrap();
    let keys = mtls.keys(&[
        (
            "ssl.certificate.location",
            &certificate_file.display().to_string(),
        ),
        ("ssl.key.location", &key_file.display().to_string()),
    ]);
    let cause = format!(
        "the broker did not accept this client's certificate (ssl.certificate.location={})",
        certificate_file.display()
    );
    let message = refused_client_certificate(&mtls, &keys, &id, &topology, &cause).await;
    let _ = std::fs::remove_dir_all(&dir);
    // The key's content never shows.
    assert!(!message.contains("PRIVATE KEY"), "{message}");
}
