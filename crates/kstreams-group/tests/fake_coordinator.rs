//! The heartbeat loop against a scripted coordinator on a local socket: the
//! answers a real broker gives only under faults (a coordinator not available
//! yet, fencing, a moved coordinator), in order, with every heartbeat
//! recorded.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod common;

use bytes::BytesMut;
use common::{API_VERSIONS, FIND_COORDINATOR, STREAMS_GROUP_HEARTBEAT};
use kacrab_protocol::generated::streams_group_heartbeat_request::StreamsGroupHeartbeatRequestData;
use kacrab_protocol::generated::streams_group_heartbeat_response::{
    StreamsGroupHeartbeatResponseData, TaskIds,
};
use kacrab_protocol::generated::ErrorCode;
use kstreams_group::{
    ConnectionConfig, MemberConfig, MemberEvent, StreamsGroupMember, Subtopology, TaskId, Tasks,
    Topology, Uuid,
};
use tokio::net::{TcpListener, TcpStream};

/// What the fake coordinator has been asked.
#[derive(Default)]
struct Seen {
    heartbeats: Vec<StreamsGroupHeartbeatRequestData>,
    lookups: usize,
}

/// A coordinator that answers a heartbeat with `script(earlier, request)`,
/// `earlier` being the heartbeats before it.
struct Fake {
    address: String,
    seen: Arc<Mutex<Seen>>,
}

type Script = fn(
    &[StreamsGroupHeartbeatRequestData],
    &StreamsGroupHeartbeatRequestData,
) -> StreamsGroupHeartbeatResponseData;

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
    while let Some(mut request) = common::read_request(&mut socket).await {
        let body = match request.key {
            API_VERSIONS => common::api_versions(
                &mut request,
                &[
                    (API_VERSIONS, 4),
                    (FIND_COORDINATOR, 6),
                    (STREAMS_GROUP_HEARTBEAT, 0),
                ],
            ),
            FIND_COORDINATOR => {
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
                common::find_coordinator(&mut request, port, error_code)
            }
            STREAMS_GROUP_HEARTBEAT => {
                let heartbeat =
                    StreamsGroupHeartbeatRequestData::read(&mut request.body, request.version)
                        .unwrap();
                let answer = {
                    let mut seen = seen.lock().unwrap();
                    let answer = script(&seen.heartbeats, &heartbeat);
                    seen.heartbeats.push(heartbeat);
                    answer
                };
                let mut body = BytesMut::new();
                answer.write(&mut body, request.version).unwrap();
                body
            }
            other => panic!("the fake coordinator does not serve API {other}"),
        };
        if !common::write_response(&mut socket, &request, &body).await {
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

fn reports(request: &StreamsGroupHeartbeatRequestData, partitions: &[i32]) -> bool {
    request
        .active_tasks
        .as_ref()
        .is_some_and(|tasks| tasks.iter().any(|t| t.partitions == partitions))
}

/// Join → 2 tasks; heartbeats at epoch 1 are accepted until one reports
/// owning them, which is fenced; the rejoin → 1 task; the first heartbeat
/// after it → "not the coordinator"; then plain acceptance. Decided by what
/// the member said, not by how many heartbeats came, so the timing of the
/// application's report does not matter.
fn fence_then_move(
    earlier: &[StreamsGroupHeartbeatRequestData],
    request: &StreamsGroupHeartbeatRequestData,
) -> StreamsGroupHeartbeatResponseData {
    if request.member_epoch < 0 {
        return accepted(request, request.member_epoch);
    }
    let fenced = earlier
        .iter()
        .any(|h| h.member_epoch == 1 && reports(h, &[0, 1]));
    let rejoined = earlier.iter().filter(|h| h.member_epoch == 0).count() >= 2;
    let moved = earlier.iter().any(|h| h.member_epoch == 2);
    match request.member_epoch {
        0 if earlier.is_empty() => assigning(request, 1, &[0, 1]),
        1 if reports(request, &[0, 1]) => refusing(ErrorCode::FencedMemberEpoch),
        1 => accepted(request, 1),
        0 if fenced && !rejoined => assigning(request, 2, &[0]),
        2 if !moved => refusing(ErrorCode::NotCoordinator),
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
    let at_2 = |heartbeats: Vec<StreamsGroupHeartbeatRequestData>| {
        heartbeats.iter().filter(|h| h.member_epoch == 2).count()
    };
    // The refused one and the one to the coordinator found again.
    while at_2(fake.heartbeats()) < 2 {
        assert!(Instant::now() < deadline, "heartbeats stopped");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        fake.lookups() >= 2,
        "NOT_COORDINATOR sends it looking again"
    );
    member.close().await.unwrap();

    let heartbeats = fake.heartbeats();
    let join = &heartbeats[0];
    let at = |epoch: i32| heartbeats.iter().position(|h| h.member_epoch == epoch);
    let report = heartbeats
        .iter()
        .find(|h| reports(h, &[0, 1]))
        .expect("the ownership report");
    let rejoin = heartbeats[1..]
        .iter()
        .find(|h| h.member_epoch == 0)
        .expect("a rejoin");
    assert_eq!(join.member_epoch, 0);
    assert!(join.topology.is_some() && join.process_id.is_some());
    assert_eq!(report.member_epoch, 1);
    assert_eq!(report.active_tasks.as_ref().unwrap()[0].partitions, [0, 1]);
    assert!(report.topology.is_none());
    assert_eq!(rejoin.member_epoch, 0, "fencing rejoins with epoch 0");
    assert!(rejoin.topology.is_some());
    assert_eq!(rejoin.member_id, join.member_id, "with the same member id");
    assert_eq!(rejoin.active_tasks, Some(Vec::new()), "owning nothing");
    let first_at_2 = at(2).expect("a heartbeat at epoch 2");
    let after_move = &heartbeats[first_at_2 + 1];
    assert_eq!(after_move.member_epoch, 2);
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

/// Assigns task 0_0 at epoch 1 to every join; accepts everything else.
fn assign_one(
    _: &[StreamsGroupHeartbeatRequestData],
    request: &StreamsGroupHeartbeatRequestData,
) -> StreamsGroupHeartbeatResponseData {
    match request.member_epoch {
        0 => assigning(request, 1, &[0]),
        epoch => accepted(request, epoch),
    }
}

async fn wait_for(
    fake: &Fake,
    what: &str,
    done: impl Fn(&[StreamsGroupHeartbeatRequestData]) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done(&fake.heartbeats()) {
        assert!(Instant::now() < deadline, "no {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn an_application_that_stops_polling_loses_its_tasks_and_rejoins_when_it_polls_again() {
    let fake = Fake::start(assign_one).await;
    let mut config = MemberConfig::new(ConnectionConfig::new(&fake.address), "app", Uuid::new_v4());
    config.max_poll_interval = Duration::from_millis(300);
    let mut member = StreamsGroupMember::join(config, &topology()).await.unwrap();
    let MemberEvent::Assigned(assignment) = next(&mut member).await else {
        panic!("the join is answered with a task");
    };
    member.report_owned(assignment).unwrap();
    // No record_poll: the deadline passes.
    assert_eq!(next(&mut member).await, MemberEvent::TasksLost);
    wait_for(&fake, "leave", |h| h.last().unwrap().member_epoch == -1).await;
    assert_eq!(member.member_epoch(), -1);
    let left = fake.heartbeats().len();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(fake.heartbeats().len(), left, "a stale member stays quiet");

    member.record_poll();
    let MemberEvent::Assigned(again) = next(&mut member).await else {
        panic!("polling again rejoins");
    };
    assert_eq!(again.active, tasks(&[0]));
    let heartbeats = fake.heartbeats();
    assert_eq!(heartbeats[left].member_epoch, 0, "a join after the poll");
    assert_eq!(heartbeats[left].active_tasks, Some(Vec::new()));
    member.close().await.unwrap();
}

#[tokio::test]
async fn a_polling_application_stays_in_the_group() {
    let fake = Fake::start(assign_one).await;
    let mut config = MemberConfig::new(ConnectionConfig::new(&fake.address), "app", Uuid::new_v4());
    config.max_poll_interval = Duration::from_millis(300);
    let mut member = StreamsGroupMember::join(config, &topology()).await.unwrap();
    let until = Instant::now() + Duration::from_millis(900);
    while Instant::now() < until {
        member.record_poll();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(fake.heartbeats().iter().all(|h| h.member_epoch >= 0));
    assert!(matches!(
        member.try_next_event(),
        Ok(Some(MemberEvent::Assigned(_)))
    ));
    assert_eq!(member.try_next_event().unwrap(), None, "no loss");
    member.close().await.unwrap();
}

/// The member from a thread without a tokio runtime, as the runtime's
/// blocking stream threads use it; the fake coordinator runs on a runtime of
/// the test's own.
#[test]
fn a_member_works_from_a_thread_without_a_runtime() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let fake = runtime.block_on(Fake::start(assign_one));
    let config = || MemberConfig::new(ConnectionConfig::new(&fake.address), "app", Uuid::new_v4());
    let wait = |what: &str, done: &dyn Fn(&[StreamsGroupHeartbeatRequestData]) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done(&fake.heartbeats()) {
            assert!(Instant::now() < deadline, "no {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    };

    let mut member = StreamsGroupMember::join_blocking(config(), &topology()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let assignment = loop {
        member.record_poll();
        if let Some(MemberEvent::Assigned(assignment)) = member.try_next_event().unwrap() {
            break assignment;
        }
        assert!(Instant::now() < deadline, "no assignment");
        std::thread::sleep(Duration::from_millis(10));
    };
    member.report_owned(assignment).unwrap();
    wait("ownership report", &|h| {
        h.iter()
            .any(|h| h.member_epoch == 1 && h.active_tasks.is_some())
    });
    assert_eq!(member.member_epoch(), 1);
    let id = member.member_id().to_owned();
    member.close_blocking(Duration::from_secs(10)).unwrap();
    let leave = fake.heartbeats().last().unwrap().clone();
    assert_eq!(
        (leave.member_id.as_str(), leave.member_epoch),
        (id.as_str(), -1)
    );

    let dropped = StreamsGroupMember::join_blocking(config(), &topology()).unwrap();
    let id = dropped.member_id().to_owned();
    wait("join", &|h| h.iter().any(|h| h.member_id.as_str() == id));
    drop(dropped);
    wait("leave on drop", &|h| {
        h.iter()
            .any(|h| h.member_id.as_str() == id && h.member_epoch == -1)
    });
}

#[tokio::test]
async fn a_fatal_refusal_says_the_tasks_are_lost_before_the_member_stops() {
    let fake = Fake::start(|_, request| match request.member_epoch {
        0 => assigning(request, 1, &[0]),
        _ => refusing(ErrorCode::GroupAuthorizationFailed),
    })
    .await;
    let config = MemberConfig::new(ConnectionConfig::new(&fake.address), "app", Uuid::new_v4());
    let mut member = StreamsGroupMember::join(config, &topology()).await.unwrap();
    assert!(matches!(next(&mut member).await, MemberEvent::Assigned(_)));
    assert_eq!(next(&mut member).await, MemberEvent::TasksLost);
    assert_eq!(member.next_event().await, None);
    assert_eq!(member.close().await.unwrap_err().broker_code(), Some(30));
}

#[tokio::test]
async fn a_member_fenced_again_and_again_backs_off() {
    let fake = Fake::start(|_, _| refusing(ErrorCode::UnknownMemberId)).await;
    let config = MemberConfig::new(ConnectionConfig::new(&fake.address), "app", Uuid::new_v4());
    let member = StreamsGroupMember::join(config, &topology()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    // 0, 100, 200, 400 ms pauses: a handful, not a spin.
    let joins = fake.heartbeats().len();
    assert!((2..=8).contains(&joins), "{joins} joins in a second");
    drop(member);
}

#[tokio::test]
async fn a_topic_authorization_failure_is_an_event_and_the_member_heartbeats_on() {
    let fake = Fake::start(|earlier, request| {
        let refused = earlier.iter().any(|h| h.member_epoch == 1);
        match request.member_epoch {
            0 => assigning(request, 1, &[0]),
            1 if !refused => StreamsGroupHeartbeatResponseData {
                error_message: Some("no access to in".to_owned().into()),
                ..refusing(ErrorCode::TopicAuthorizationFailed)
            },
            epoch => accepted(request, epoch),
        }
    })
    .await;
    let config = MemberConfig::new(ConnectionConfig::new(&fake.address), "app", Uuid::new_v4());
    let mut member = StreamsGroupMember::join(config, &topology()).await.unwrap();
    assert!(matches!(next(&mut member).await, MemberEvent::Assigned(_)));
    assert_eq!(
        next(&mut member).await,
        MemberEvent::TopicAuthorizationFailed("no access to in".to_owned())
    );
    wait_for(&fake, "heartbeat after the refusal", |h| {
        h.iter().filter(|h| h.member_epoch == 1).count() >= 2
    })
    .await;
    assert_eq!(member.snapshot().assignment.active, tasks(&[0]), "kept");
    member.close().await.unwrap();
}
