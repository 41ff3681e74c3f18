//! SASL against a scripted broker on a local socket (SASL_PLAINTEXT, PLAIN):
//! the handshake order, a refused password stopping a join or a running
//! member for good, a mechanism the broker does not enable, and KIP-368
//! re-authentication before the broker's session ends — which a broker of
//! `cargo xtask kafka start` does not set (`connections.max.reauth.ms`).
//!
//! The fake behaves as Kafka's SaslServerAuthenticator does where it
//! matters: ApiVersions is served before authentication, any other request
//! before it closes the connection, and so does any request but
//! SaslHandshake once the session has expired.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;

use bytes::BytesMut;
use common::{API_VERSIONS, FIND_COORDINATOR, STREAMS_GROUP_HEARTBEAT};
use kacrab_protocol::generated::sasl_authenticate_request::SaslAuthenticateRequestData;
use kacrab_protocol::generated::sasl_authenticate_response::SaslAuthenticateResponseData;
use kacrab_protocol::generated::sasl_handshake_request::SaslHandshakeRequestData;
use kacrab_protocol::generated::sasl_handshake_response::SaslHandshakeResponseData;
use kacrab_protocol::generated::streams_group_heartbeat_request::StreamsGroupHeartbeatRequestData;
use kacrab_protocol::generated::streams_group_heartbeat_response::{
    StreamsGroupHeartbeatResponseData, TaskIds,
};
use kacrab_protocol::generated::ErrorCode;
use kstreams_group::{
    ConnectionConfig, Error, MemberConfig, MemberEvent, StreamsGroupMember, Subtopology, Topology,
    Uuid,
};
use kstreams_group::{Sasl, SaslMechanism, Security};
use tokio::net::{TcpListener, TcpStream};

const SASL_HANDSHAKE: i16 = 17;
const SASL_AUTHENTICATE: i16 = 36;

const USER: &str = "alice";
const PASSWORD: &str = "alice-secret";

/// How the fake broker behaves.
#[derive(Clone)]
struct Script {
    /// The mechanisms it enables.
    mechanisms: Vec<&'static str>,
    /// `connections.max.reauth.ms`; 0: sessions do not expire.
    session_lifetime: Duration,
    /// The heartbeat interval it asks for.
    heartbeat_interval: Duration,
}

impl Default for Script {
    fn default() -> Self {
        Script {
            mechanisms: vec!["PLAIN"],
            session_lifetime: Duration::ZERO,
            heartbeat_interval: Duration::from_millis(50),
        }
    }
}

/// What the fake broker saw.
#[derive(Default)]
struct Seen {
    connections: usize,
    /// API keys in the order they came, per connection.
    requests: HashMap<usize, Vec<i16>>,
    /// Connections it closed because a session had expired.
    expired: usize,
}

struct Fake {
    address: String,
    seen: Arc<Mutex<Seen>>,
    /// Whether the user's password is still `PASSWORD` (a test "rotates" it).
    password_valid: Arc<AtomicBool>,
}

impl Fake {
    async fn start(script: Script) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let password_valid = Arc::new(AtomicBool::new(true));
        let port = listener.local_addr().unwrap().port();
        let (shared, valid) = (seen.clone(), password_valid.clone());
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let id = {
                    let mut seen = shared.lock().unwrap();
                    seen.connections += 1;
                    seen.connections
                };
                let state = Connection {
                    id,
                    port,
                    script: script.clone(),
                    seen: shared.clone(),
                    password_valid: valid.clone(),
                    session_ends: None,
                };
                tokio::spawn(serve(socket, state));
            }
        });
        Fake {
            address,
            seen,
            password_valid,
        }
    }

    fn connections(&self) -> usize {
        self.seen.lock().unwrap().connections
    }

    fn expired(&self) -> usize {
        self.seen.lock().unwrap().expired
    }

    fn requests(&self, connection: usize) -> Vec<i16> {
        self.seen.lock().unwrap().requests[&connection].clone()
    }

    fn count(&self, connection: usize, key: i16) -> usize {
        self.requests(connection)
            .iter()
            .filter(|k| **k == key)
            .count()
    }
}

struct Connection {
    id: usize,
    port: u16,
    script: Script,
    seen: Arc<Mutex<Seen>>,
    password_valid: Arc<AtomicBool>,
    /// Authenticated until then (`Some(None)`-like: authenticated for good
    /// is a far instant).
    session_ends: Option<Instant>,
}

async fn serve(mut socket: TcpStream, mut state: Connection) {
    while let Some(mut request) = common::read_request(&mut socket).await {
        let (key, version) = (request.key, request.version);
        state
            .seen
            .lock()
            .unwrap()
            .requests
            .entry(state.id)
            .or_default()
            .push(key);
        let authenticated = state.session_ends.is_some_and(|end| Instant::now() < end);
        if !matches!(key, API_VERSIONS | SASL_HANDSHAKE | SASL_AUTHENTICATE) && !authenticated {
            if state.session_ends.is_some() {
                state.seen.lock().unwrap().expired += 1;
            }
            // Kafka closes a connection that skips (or outlived) its
            // authentication.
            return;
        }
        let mut body = BytesMut::new();
        match key {
            API_VERSIONS => {
                body = common::api_versions(
                    &mut request,
                    &[
                        (API_VERSIONS, 4),
                        (SASL_HANDSHAKE, 1),
                        (SASL_AUTHENTICATE, 2),
                        (FIND_COORDINATOR, 6),
                        (STREAMS_GROUP_HEARTBEAT, 0),
                    ],
                );
            }
            SASL_HANDSHAKE => {
                let handshake = SaslHandshakeRequestData::read(&mut request.body, version).unwrap();
                let enabled = state
                    .script
                    .mechanisms
                    .contains(&handshake.mechanism.as_str());
                SaslHandshakeResponseData {
                    error_code: if enabled {
                        0
                    } else {
                        ErrorCode::UnsupportedSaslMechanism.code()
                    },
                    mechanisms: state
                        .script
                        .mechanisms
                        .iter()
                        .map(|m| (*m).to_owned().into())
                        .collect(),
                    ..Default::default()
                }
                .write(&mut body, version)
                .unwrap();
            }
            SASL_AUTHENTICATE => {
                let authenticate =
                    SaslAuthenticateRequestData::read(&mut request.body, version).unwrap();
                let expected = format!("\0{USER}\0{PASSWORD}");
                let accepted = authenticate.auth_bytes.as_ref() == expected.as_bytes()
                    && state.password_valid.load(Ordering::SeqCst);
                let lifetime = state.script.session_lifetime;
                let response = if accepted {
                    state.session_ends = Some(if lifetime.is_zero() {
                        Instant::now() + Duration::from_secs(3600)
                    } else {
                        Instant::now() + lifetime
                    });
                    SaslAuthenticateResponseData {
                        session_lifetime_ms: lifetime.as_millis() as i64,
                        ..Default::default()
                    }
                } else {
                    SaslAuthenticateResponseData {
                        error_code: ErrorCode::SaslAuthenticationFailed.code(),
                        error_message: Some(
                            "Authentication failed: Invalid username or password"
                                .to_owned()
                                .into(),
                        ),
                        ..Default::default()
                    }
                };
                response.write(&mut body, version).unwrap();
            }
            FIND_COORDINATOR => {
                body = common::find_coordinator(&mut request, state.port, 0);
            }
            STREAMS_GROUP_HEARTBEAT => {
                let heartbeat =
                    StreamsGroupHeartbeatRequestData::read(&mut request.body, version).unwrap();
                let joining = heartbeat.member_epoch == 0;
                StreamsGroupHeartbeatResponseData {
                    member_id: heartbeat.member_id.clone(),
                    member_epoch: heartbeat.member_epoch.max(1),
                    heartbeat_interval_ms: state.script.heartbeat_interval.as_millis() as i32,
                    active_tasks: joining.then(|| {
                        vec![TaskIds {
                            subtopology_id: "0".to_owned().into(),
                            partitions: vec![0],
                            ..Default::default()
                        }]
                    }),
                    standby_tasks: joining.then(Vec::new),
                    warmup_tasks: joining.then(Vec::new),
                    ..Default::default()
                }
                .write(&mut body, version)
                .unwrap();
            }
            other => panic!("the fake broker does not serve API {other}"),
        }
        if !common::write_response(&mut socket, &request, &body).await {
            return;
        }
    }
}

fn topology() -> Topology {
    Topology {
        epoch: 0,
        subtopologies: vec![Subtopology {
            id: "0".to_owned(),
            source_topics: vec!["in".to_owned()],
            ..Subtopology::default()
        }],
    }
}

fn config(fake: &Fake, mechanism: SaslMechanism, password: &str) -> MemberConfig {
    let mut connection = ConnectionConfig::new(&fake.address);
    connection.security = Security::SaslPlaintext(Sasl::new(mechanism, USER, password).unwrap());
    connection.request_timeout = Duration::from_secs(5);
    MemberConfig::new(connection, "app", Uuid::new_v4())
}

async fn next(member: &mut StreamsGroupMember) -> Option<MemberEvent> {
    tokio::time::timeout(Duration::from_secs(10), member.next_event())
        .await
        .expect("an event within 10 s")
}

#[tokio::test]
async fn a_member_authenticates_after_api_versions_then_joins() {
    let fake = Fake::start(Script::default()).await;
    let mut member =
        StreamsGroupMember::join(config(&fake, SaslMechanism::Plain, PASSWORD), &topology())
            .await
            .unwrap();
    assert!(matches!(
        next(&mut member).await,
        Some(MemberEvent::Assigned(_))
    ));
    // As Kafka's clients: ApiVersions (served unauthenticated), then the
    // SASL handshake and the token, then the group's requests.
    assert_eq!(
        fake.requests(1)[..4],
        [
            API_VERSIONS,
            SASL_HANDSHAKE,
            SASL_AUTHENTICATE,
            FIND_COORDINATOR
        ]
    );
    member.close().await.unwrap();
}

#[tokio::test]
async fn a_wrong_password_fails_the_join_at_once_naming_the_keys() {
    let fake = Fake::start(Script::default()).await;
    let started = Instant::now();
    let result =
        StreamsGroupMember::join(config(&fake, SaslMechanism::Plain, "wrong"), &topology()).await;
    let Err(error) = result else {
        panic!("a wrong password must fail the join");
    };
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "not fast: {:?}",
        started.elapsed()
    );
    assert!(matches!(error, Error::Authentication { .. }), "{error:?}");
    assert!(error.is_fatal());
    let message = error.to_string();
    for part in [
        "SASL PLAIN authentication as \"alice\" failed",
        "Invalid username or password",
        "SaslAuthenticationFailed",
        "check sasl.username and sasl.password",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
    assert!(!message.contains("wrong"), "the password shows: {message}");
    // One connection, no retry.
    assert_eq!(fake.connections(), 1);
}

#[tokio::test]
async fn a_mechanism_the_broker_does_not_enable_names_those_it_does() {
    let fake = Fake::start(Script {
        mechanisms: vec!["SCRAM-SHA-512", "PLAIN"],
        ..Script::default()
    })
    .await;
    let result = StreamsGroupMember::join(
        config(&fake, SaslMechanism::ScramSha256, PASSWORD),
        &topology(),
    )
    .await;
    let Err(error) = result else {
        panic!("an unsupported mechanism must fail the join");
    };
    let message = error.to_string();
    assert!(matches!(error, Error::SaslMechanism { .. }), "{message}");
    assert!(
        message.contains("does not enable SASL SCRAM-SHA-256"),
        "{message}"
    );
    assert!(message.contains("SCRAM-SHA-512, PLAIN"), "{message}");
    assert!(message.contains("sasl.mechanism"), "{message}");
}

#[tokio::test]
async fn a_busy_member_reauthenticates_before_its_session_ends() {
    let fake = Fake::start(Script {
        session_lifetime: Duration::from_millis(600),
        heartbeat_interval: Duration::from_millis(50),
        ..Script::default()
    })
    .await;
    let mut member =
        StreamsGroupMember::join(config(&fake, SaslMechanism::Plain, PASSWORD), &topology())
            .await
            .unwrap();
    assert!(matches!(
        next(&mut member).await,
        Some(MemberEvent::Assigned(_))
    ));
    tokio::time::sleep(Duration::from_millis(2000)).await;
    member.record_poll();
    assert_eq!(member.snapshot().epoch, 1, "{:?}", member.snapshot());
    // Re-authenticated on the one connection, never expired by the broker.
    assert_eq!(fake.connections(), 1);
    assert_eq!(fake.expired(), 0);
    let authentications = fake.count(1, SASL_AUTHENTICATE);
    assert!(
        authentications >= 3,
        "{authentications} authentications in 2 s"
    );
    assert_eq!(
        fake.count(1, API_VERSIONS),
        1,
        "re-authentication skips ApiVersions"
    );
    member.close().await.unwrap();
}

#[tokio::test]
async fn an_idle_member_reauthenticates_between_heartbeats() {
    // Heartbeats further apart than the session lasts: only re-authenticating
    // while idle keeps the connection.
    let fake = Fake::start(Script {
        session_lifetime: Duration::from_millis(500),
        heartbeat_interval: Duration::from_millis(1500),
        ..Script::default()
    })
    .await;
    let mut member =
        StreamsGroupMember::join(config(&fake, SaslMechanism::Plain, PASSWORD), &topology())
            .await
            .unwrap();
    assert!(matches!(
        next(&mut member).await,
        Some(MemberEvent::Assigned(_))
    ));
    tokio::time::sleep(Duration::from_millis(3500)).await;
    member.record_poll();
    assert_eq!(
        fake.expired(),
        0,
        "a session expired: {:?}",
        fake.requests(1)
    );
    assert_eq!(fake.connections(), 1);
    assert!(fake.count(1, STREAMS_GROUP_HEARTBEAT) >= 3);
    assert!(
        fake.count(1, SASL_AUTHENTICATE) >= 6,
        "{:?}",
        fake.requests(1)
    );
    member.close().await.unwrap();
}

#[tokio::test]
async fn a_refused_reauthentication_stops_the_member_with_the_error() {
    let fake = Fake::start(Script {
        session_lifetime: Duration::from_millis(400),
        ..Script::default()
    })
    .await;
    let mut member =
        StreamsGroupMember::join(config(&fake, SaslMechanism::Plain, PASSWORD), &topology())
            .await
            .unwrap();
    let Some(MemberEvent::Assigned(assignment)) = next(&mut member).await else {
        panic!("no assignment");
    };
    member.report_owned(assignment).unwrap();
    // The password changes on the cluster: the next authentication fails.
    fake.password_valid.store(false, Ordering::SeqCst);
    let started = Instant::now();
    let mut lost = false;
    while let Some(event) = next(&mut member).await {
        member.record_poll();
        lost |= event == MemberEvent::TasksLost;
    }
    assert!(lost, "the application hears its tasks are lost");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let error = member.close().await.unwrap_err();
    assert!(matches!(error, Error::Authentication { .. }), "{error:?}");
    assert!(error.to_string().contains("sasl.password"), "{error}");
}
