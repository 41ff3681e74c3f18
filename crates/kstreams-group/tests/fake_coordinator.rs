//! The heartbeat loop against a scripted coordinator on a local socket: the
//! answers a real broker gives only under faults (a coordinator not available
//! yet, fencing, a moved coordinator), in order, with every heartbeat
//! recorded.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use kacrab_protocol::generated::api_versions_request::ApiVersionsRequestData;
use kacrab_protocol::generated::api_versions_response::{ApiVersion, ApiVersionsResponseData};
use kacrab_protocol::generated::find_coordinator_request::FindCoordinatorRequestData;
use kacrab_protocol::generated::find_coordinator_response::{
    Coordinator, FindCoordinatorResponseData,
};
use kacrab_protocol::generated::request_header::RequestHeaderData;
use kacrab_protocol::generated::response_header::ResponseHeaderData;
use kacrab_protocol::generated::streams_group_heartbeat_request::StreamsGroupHeartbeatRequestData;
use kacrab_protocol::generated::streams_group_heartbeat_response::{
    StreamsGroupHeartbeatResponseData, TaskIds,
};
use kacrab_protocol::generated::ErrorCode;
use kacrab_protocol::version::{request_header_version, response_header_version};
use kstreams_group::{
    ConnectionConfig, MemberConfig, MemberEvent, StreamsGroupMember, Subtopology, TaskId, Tasks,
    Topology, Uuid,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const API_VERSIONS: i16 = 18;
const FIND_COORDINATOR: i16 = 10;
const STREAMS_GROUP_HEARTBEAT: i16 = 88;

/// What the fake coordinator has been asked.
#[derive(Default)]
struct Seen {
    heartbeats: Vec<StreamsGroupHeartbeatRequestData>,
    lookups: usize,
}

/// A coordinator whose n-th heartbeat answer is `script(n, request)`.
struct Fake {
    address: String,
    seen: Arc<Mutex<Seen>>,
}

type Script = fn(usize, &StreamsGroupHeartbeatRequestData) -> StreamsGroupHeartbeatResponseData;

impl Fake {
    async fn start(script: Script) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (port, shared) = (listener.local_addr().unwrap().port(), seen.clone());
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve(socket, port, shared.clone(), script));
            }
        });
        Fake { address, seen }
    }

    fn heartbeats(&self) -> Vec<StreamsGroupHeartbeatRequestData> {
        self.seen.lock().unwrap().heartbeats.clone()
    }

    fn lookups(&self) -> usize {
        self.seen.lock().unwrap().lookups
    }
}

async fn serve(mut socket: TcpStream, port: u16, seen: Arc<Mutex<Seen>>, script: Script) {
    while let Ok(length) = socket.read_i32().await {
        let mut payload = vec![0; length as usize];
        socket.read_exact(&mut payload).await.unwrap();
        let mut request = Bytes::from(payload);
        let (key, version) = (
            i16::from_be_bytes([request[0], request[1]]),
            i16::from_be_bytes([request[2], request[3]]),
        );
        let header =
            RequestHeaderData::read(&mut request, request_header_version(key, version)).unwrap();
        let mut body = BytesMut::new();
        match key {
            API_VERSIONS => {
                ApiVersionsRequestData::read(&mut request, version).unwrap();
                let api = |api_key, max_version| ApiVersion {
                    api_key,
                    min_version: 0,
                    max_version,
                    ..Default::default()
                };
                ApiVersionsResponseData {
                    api_keys: vec![
                        api(API_VERSIONS, 4),
                        api(FIND_COORDINATOR, 6),
                        api(STREAMS_GROUP_HEARTBEAT, 0),
                    ],
                    ..Default::default()
                }
                .write(&mut body, version)
                .unwrap();
            }
            FIND_COORDINATOR => {
                FindCoordinatorRequestData::read(&mut request, version).unwrap();
                let first = {
                    let mut seen = seen.lock().unwrap();
                    seen.lookups += 1;
                    seen.lookups == 1
                };
                // As on a fresh cluster, whose offsets topic the first lookup
                // creates: not available yet.
                let error_code = if first {
                    ErrorCode::CoordinatorNotAvailable.code()
                } else {
                    0
                };
                FindCoordinatorResponseData {
                    coordinators: vec![Coordinator {
                        key: "app".to_owned().into(),
                        node_id: 1,
                        host: "127.0.0.1".to_owned().into(),
                        port: i32::from(port),
                        error_code,
                        ..Default::default()
                    }],
                    ..Default::default()
                }
                .write(&mut body, version)
                .unwrap();
            }
            STREAMS_GROUP_HEARTBEAT => {
                let heartbeat =
                    StreamsGroupHeartbeatRequestData::read(&mut request, version).unwrap();
                let answer = {
                    let mut seen = seen.lock().unwrap();
                    let answer = script(seen.heartbeats.len(), &heartbeat);
                    seen.heartbeats.push(heartbeat);
                    answer
                };
                answer.write(&mut body, version).unwrap();
            }
            other => panic!("the fake coordinator does not serve API {other}"),
        }
        let mut frame = BytesMut::new();
        ResponseHeaderData {
            correlation_id: header.correlation_id,
            ..Default::default()
        }
        .write(&mut frame, response_header_version(key, version))
        .unwrap();
        frame.extend_from_slice(&body);
        let mut out = BytesMut::new();
        out.put_i32(frame.len() as i32);
        out.extend_from_slice(&frame);
        if socket.write_all(&out).await.is_err() {
            return;
        }
    }
}

fn accepted(
    request: &StreamsGroupHeartbeatRequestData,
    epoch: i32,
) -> StreamsGroupHeartbeatResponseData {
    StreamsGroupHeartbeatResponseData {
        member_id: request.member_id.clone(),
        member_epoch: epoch,
        heartbeat_interval_ms: 50,
        ..Default::default()
    }
}

fn assigning(
    request: &StreamsGroupHeartbeatRequestData,
    epoch: i32,
    active: &[i32],
) -> StreamsGroupHeartbeatResponseData {
    StreamsGroupHeartbeatResponseData {
        active_tasks: Some(vec![TaskIds {
            subtopology_id: "0".to_owned().into(),
            partitions: active.to_vec(),
            ..Default::default()
        }]),
        standby_tasks: Some(Vec::new()),
        warmup_tasks: Some(Vec::new()),
        ..accepted(request, epoch)
    }
}

fn refusing(code: ErrorCode) -> StreamsGroupHeartbeatResponseData {
    StreamsGroupHeartbeatResponseData {
        error_code: code.code(),
        ..Default::default()
    }
}

/// Join → 2 tasks; the ownership report → fenced; the rejoin → 1 task; then
/// once "not the coordinator"; then plain acceptance.
fn fence_then_move(
    n: usize,
    request: &StreamsGroupHeartbeatRequestData,
) -> StreamsGroupHeartbeatResponseData {
    if request.member_epoch < 0 {
        return accepted(request, request.member_epoch);
    }
    match n {
        0 => assigning(request, 1, &[0, 1]),
        1 => refusing(ErrorCode::FencedMemberEpoch),
        2 => assigning(request, 2, &[0]),
        3 => refusing(ErrorCode::NotCoordinator),
        _ => accepted(request, 2),
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

fn tasks(partitions: &[i32]) -> Tasks {
    partitions.iter().map(|p| TaskId::new("0", *p)).collect()
}

async fn next(member: &mut StreamsGroupMember) -> MemberEvent {
    tokio::time::timeout(Duration::from_secs(10), member.next_event())
        .await
        .expect("an event within 10 s")
        .expect("the member runs")
}

#[tokio::test]
async fn a_fenced_member_loses_its_tasks_rejoins_and_follows_a_moved_coordinator() {
    let fake = Fake::start(fence_then_move).await;
    let config = MemberConfig::new(ConnectionConfig::new(&fake.address), "app", Uuid::new_v4());
    let mut member = StreamsGroupMember::join(config, &topology()).await.unwrap();

    let MemberEvent::Assigned(first) = next(&mut member).await else {
        panic!("the join is answered with tasks");
    };
    assert_eq!(first.active, tasks(&[0, 1]));
    member.report_owned(first).unwrap();
    assert_eq!(next(&mut member).await, MemberEvent::TasksLost);
    let MemberEvent::Assigned(second) = next(&mut member).await else {
        panic!("the rejoin is answered with tasks");
    };
    assert_eq!(second.active, tasks(&[0]));

    let deadline = Instant::now() + Duration::from_secs(10);
    while fake.heartbeats().len() < 6 {
        assert!(Instant::now() < deadline, "heartbeats stopped");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        fake.lookups() >= 2,
        "NOT_COORDINATOR sends it looking again"
    );
    member.close().await.unwrap();

    let heartbeats = fake.heartbeats();
    let (join, report, rejoin) = (&heartbeats[0], &heartbeats[1], &heartbeats[2]);
    assert_eq!(join.member_epoch, 0);
    assert!(join.topology.is_some() && join.process_id.is_some());
    assert_eq!(report.member_epoch, 1);
    assert_eq!(report.active_tasks.as_ref().unwrap()[0].partitions, [0, 1]);
    assert!(report.topology.is_none());
    assert_eq!(rejoin.member_epoch, 0, "fencing rejoins with epoch 0");
    assert!(rejoin.topology.is_some());
    assert_eq!(rejoin.member_id, join.member_id, "with the same member id");
    assert_eq!(rejoin.active_tasks, Some(Vec::new()), "owning nothing");
    let after_move = &heartbeats[4];
    assert!(
        after_move.process_id.is_some(),
        "a new coordinator hears everything"
    );
    let leave = heartbeats.last().unwrap();
    assert_eq!(leave.member_epoch, -1, "close leaves the group");
}

#[tokio::test]
async fn a_dropped_member_still_leaves_the_group() {
    let fake = Fake::start(|_, request| {
        if request.member_epoch < 0 {
            accepted(request, request.member_epoch)
        } else {
            accepted(request, 1)
        }
    })
    .await;
    let config = MemberConfig::new(ConnectionConfig::new(&fake.address), "app", Uuid::new_v4());
    let member = StreamsGroupMember::join(config, &topology()).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while fake.heartbeats().is_empty() {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(member);
    while fake.heartbeats().last().unwrap().member_epoch != -1 {
        assert!(Instant::now() < deadline, "no leave heartbeat");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_refusal_ends_the_member_and_close_says_why() {
    let fake = Fake::start(|_, _| refusing(ErrorCode::StreamsInvalidTopology)).await;
    let config = MemberConfig::new(ConnectionConfig::new(&fake.address), "app", Uuid::new_v4());
    let mut member = StreamsGroupMember::join(config, &topology()).await.unwrap();
    assert_eq!(member.next_event().await, None, "the member stops");
    let error = member.close().await.unwrap_err();
    assert_eq!(error.broker_code(), Some(130), "{error}");
}
