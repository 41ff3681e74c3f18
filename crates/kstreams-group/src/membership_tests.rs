//! The member state machine against made-up broker answers.

use kacrab_protocol::generated::streams_group_heartbeat_response::{
    self as response, StreamsGroupHeartbeatResponseData,
};

use super::*;
use crate::assignment::Endpoint;
use crate::connection::ConnectionConfig;
use crate::task::TaskId;
use crate::topology::Subtopology;

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

fn config() -> MemberConfig {
    let mut config = MemberConfig::new(ConnectionConfig::new("127.0.0.1:9"), "app", Uuid::nil());
    config.user_endpoint = Some(Endpoint {
        host: "app-1".to_owned(),
        port: 8080,
    });
    config
}

fn member() -> Membership {
    Membership::new(&config(), &topology()).unwrap()
}

fn task_ids(subtopology: &str, partitions: &[i32]) -> response::TaskIds {
    response::TaskIds {
        subtopology_id: subtopology.to_owned().into(),
        partitions: partitions.to_vec(),
        ..Default::default()
    }
}

/// An accepting answer at `epoch` with a 1 s heartbeat interval.
fn accepted(epoch: i32) -> StreamsGroupHeartbeatResponseData {
    StreamsGroupHeartbeatResponseData {
        member_epoch: epoch,
        heartbeat_interval_ms: 1000,
        task_offset_interval_ms: 60_000,
        acceptable_recovery_lag: 10_000,
        ..Default::default()
    }
}

fn assigned(epoch: i32, active: &[i32], standby: &[i32]) -> StreamsGroupHeartbeatResponseData {
    StreamsGroupHeartbeatResponseData {
        active_tasks: Some(vec![task_ids("0", active)]),
        standby_tasks: Some(vec![task_ids("0", standby)]),
        warmup_tasks: Some(Vec::new()),
        ..accepted(epoch)
    }
}

fn failed(code: ErrorCode) -> StreamsGroupHeartbeatResponseData {
    StreamsGroupHeartbeatResponseData {
        error_code: code.code(),
        ..Default::default()
    }
}

fn events(reaction: Reaction) -> Vec<MemberEvent> {
    match reaction {
        Reaction::Continue(events) => events,
        other => panic!("expected Continue, got {other:?}"),
    }
}

fn tasks(partitions: &[i32]) -> Tasks {
    partitions.iter().map(|p| TaskId::new("0", *p)).collect()
}

#[test]
fn the_join_says_everything_and_the_next_heartbeat_only_what_changed() {
    let mut member = member();
    let join = member.heartbeat(Instant::now());
    assert_eq!(join.member_epoch, 0);
    assert_eq!(join.group_id.as_str(), "app");
    assert!(!join.member_id.as_str().is_empty());
    let topology = join.topology.expect("the join registers the topology");
    assert_eq!(topology.subtopologies[0].source_topics[0].as_str(), "in");
    assert_eq!(
        join.process_id.unwrap().as_str(),
        "00000000-0000-0000-0000-000000000000"
    );
    assert!(
        join.user_endpoint.is_none(),
        "the endpoint waits for a ready topology"
    );
    assert_eq!(join.rebalance_timeout_ms, 300_000);
    assert_eq!(join.active_tasks, Some(Vec::new()), "owns nothing yet");

    events(member.on_response(accepted(1)));
    assert_eq!(member.state(), MemberState::Stable);
    assert_eq!(member.heartbeat_interval(), Duration::from_secs(1));
    let snapshot = member.snapshot();
    assert_eq!(
        (snapshot.epoch, snapshot.acceptable_recovery_lag),
        (1, 10_000)
    );
    assert_eq!(snapshot.task_offset_interval, Duration::from_secs(60));
    let next = member.heartbeat(Instant::now());
    assert_eq!(
        next.user_endpoint.unwrap().port,
        8080,
        "the topology is ready"
    );
    let next = member.heartbeat(Instant::now());
    assert_eq!(next.member_epoch, 1);
    assert!(next.topology.is_none());
    assert!(next.process_id.is_none());
    assert!(next.user_endpoint.is_none(), "sent once");
    assert_eq!(next.rebalance_timeout_ms, -1);
    assert!(next.active_tasks.is_none(), "ownership unchanged");
}

#[test]
fn an_assignment_is_an_event_and_its_ownership_is_reported_once() {
    let mut member = member();
    member.heartbeat(Instant::now());
    let got = events(member.on_response(assigned(2, &[0, 1], &[2])));
    let expected = Assignment {
        active: tasks(&[0, 1]),
        standby: tasks(&[2]),
        warmup: Tasks::new(),
        generation: 1,
    };
    assert_eq!(got, [MemberEvent::Assigned(expected.clone())]);

    member.set_owned(expected.clone());
    assert!(member.owned_unreported());
    let report = member.heartbeat(Instant::now());
    let active = report.active_tasks.unwrap();
    assert_eq!(active[0].subtopology_id.as_str(), "0");
    assert_eq!(active[0].partitions, [0, 1]);
    assert_eq!(report.standby_tasks.unwrap()[0].partitions, [2]);
    assert!(!member.owned_unreported());

    // The same assignment again is no news; a null list is unchanged.
    assert!(events(member.on_response(assigned(2, &[0, 1], &[2]))).is_empty());
    let got = events(member.on_response(assigned(3, &[0], &[2])));
    let MemberEvent::Assigned(assignment) = &got[0] else {
        panic!("{got:?}");
    };
    assert_eq!(assignment.active, tasks(&[0]));
    assert_eq!(assignment.standby, tasks(&[2]));
    assert!(member.heartbeat(Instant::now()).active_tasks.is_none());
    // Null lists are unchanged.
    assert!(events(member.on_response(accepted(3))).is_empty());
    assert_eq!(member.snapshot().assignment.active, tasks(&[0]));
}

#[test]
fn an_answer_with_some_task_lists_but_not_all_is_refused() {
    let mut member = member();
    member.heartbeat(Instant::now());
    events(member.on_response(assigned(1, &[0], &[])));
    let only_active = StreamsGroupHeartbeatResponseData {
        active_tasks: Some(vec![task_ids("0", &[0, 1])]),
        ..accepted(2)
    };
    let Reaction::Fatal(error, lost) = member.on_response(only_active) else {
        panic!("a mix of null and present task lists is a broken answer");
    };
    assert!(matches!(error, Error::Protocol { .. }), "{error}");
    assert_eq!(lost, [MemberEvent::TasksLost]);
    assert_eq!(member.state(), MemberState::Failed);
}

#[test]
fn a_fatal_refusal_loses_the_tasks_first() {
    let mut member = member();
    member.heartbeat(Instant::now());
    events(member.on_response(assigned(1, &[0], &[])));
    let Reaction::Fatal(_, lost) = member.on_response(failed(ErrorCode::GroupAuthorizationFailed))
    else {
        panic!("expected Fatal");
    };
    assert_eq!(lost, [MemberEvent::TasksLost]);
    assert!(member.snapshot().assignment.is_empty());
}

#[test]
fn a_topic_authorization_failure_is_reported_and_the_member_stays() {
    let mut member = member();
    member.heartbeat(Instant::now());
    events(member.on_response(assigned(1, &[0], &[])));
    let refusal = StreamsGroupHeartbeatResponseData {
        error_message: Some("not allowed: in".to_owned().into()),
        ..failed(ErrorCode::TopicAuthorizationFailed)
    };
    let Reaction::Report(got) = member.on_response(refusal) else {
        panic!("not fatal");
    };
    assert_eq!(
        got,
        [MemberEvent::TopicAuthorizationFailed(
            "not allowed: in".to_owned()
        )]
    );
    assert_eq!(member.state(), MemberState::Stable);
    assert_eq!(member.snapshot().assignment.active, tasks(&[0]), "kept");
    assert_eq!(member.heartbeat(Instant::now()).member_epoch, 1);
}

#[test]
fn a_missed_poll_leaves_with_epoch_minus_1_loses_the_tasks_and_rejoins_later() {
    let mut config = config();
    config.instance_id = Some("instance-a".to_owned());
    let mut member = Membership::new(&config, &topology()).unwrap();
    member.heartbeat(Instant::now());
    events(member.on_response(assigned(3, &[0], &[])));
    let (leave, lost) = member.leave_stale();
    assert_eq!(
        leave.member_epoch, -1,
        "even a static member leaves for good"
    );
    assert_eq!(leave.instance_id.unwrap().as_str(), "instance-a");
    assert_eq!(lost, [MemberEvent::TasksLost]);
    assert_eq!(member.state(), MemberState::Stale);
    assert_eq!(member.snapshot().epoch, -1, "no commit as a member");
    assert!(member.snapshot().assignment.is_empty());
    events(member.on_response(accepted(3)));
    assert_eq!(member.state(), MemberState::Stale, "the leave's answer");

    member.rejoin();
    let join = member.heartbeat(Instant::now());
    assert_eq!(join.member_epoch, 0);
    assert!(join.topology.is_some());
    assert_eq!(join.active_tasks, Some(Vec::new()));
}

#[test]
fn every_heartbeat_names_the_instance() {
    let mut config = config();
    config.instance_id = Some("instance-a".to_owned());
    let mut member = Membership::new(&config, &topology()).unwrap();
    member.heartbeat(Instant::now());
    events(member.on_response(accepted(1)));
    let next = member.heartbeat(Instant::now());
    assert!(next.process_id.is_none(), "not a full heartbeat");
    assert_eq!(next.instance_id.unwrap().as_str(), "instance-a");
}

#[test]
fn a_refused_instance_id_stops_the_member_saying_what_holds_it_and_what_to_do() {
    for (code, reason, fix) in [
        (
            ErrorCode::UnreleasedInstanceId,
            "is still held by another member that has not left the group",
            "wait until its session times out (the group's streams.session.timeout.ms)",
        ),
        (
            ErrorCode::FencedInstanceId,
            "was taken over by a newer member with the same id",
            "give every instance (and stream thread) its own group.instance.id",
        ),
    ] {
        let mut config = config();
        config.instance_id = Some("instance-a".to_owned());
        let mut member = Membership::new(&config, &topology()).unwrap();
        member.heartbeat(Instant::now());
        events(member.on_response(assigned(3, &[0], &[])));
        let Reaction::Fatal(error, events) = member.on_response(failed(code)) else {
            panic!("{code:?} must stop the member");
        };
        assert_eq!(events, [MemberEvent::TasksLost]);
        assert!(matches!(error, Error::InstanceId { .. }), "{error:?}");
        assert!(error.is_fatal());
        assert_eq!(error.broker_code(), Some(i16::from(code)));
        let message = error.to_string();
        for part in ["group.instance.id=instance-a", reason, fix] {
            assert!(message.contains(part), "{part:?} not in {message}");
        }
    }
}

#[test]
fn fencing_loses_the_tasks_and_rejoins_with_epoch_0_and_the_topology() {
    for code in [ErrorCode::FencedMemberEpoch, ErrorCode::UnknownMemberId] {
        let mut member = member();
        member.heartbeat(Instant::now());
        events(member.on_response(assigned(5, &[0], &[])));
        member.set_owned(member.snapshot().assignment);
        let member_id = member.member_id().to_owned();
        member.heartbeat(Instant::now());

        let Reaction::Rejoin(got) = member.on_response(failed(code)) else {
            panic!("{code:?} should rejoin");
        };
        assert_eq!(got, [MemberEvent::TasksLost]);
        assert_eq!(member.state(), MemberState::Joining);
        assert!(member.snapshot().assignment.is_empty());
        let rejoin = member.heartbeat(Instant::now());
        assert_eq!(rejoin.member_epoch, 0);
        assert_eq!(rejoin.member_id.as_str(), member_id, "same member id");
        assert!(rejoin.topology.is_some());
        assert!(rejoin.process_id.is_some());
        assert_eq!(rejoin.active_tasks, Some(Vec::new()));
    }
}

#[test]
fn a_late_ownership_report_after_fencing_is_ignored_and_the_rejoin_claims_nothing() {
    let mut member = member();
    member.heartbeat(Instant::now());
    let got = events(member.on_response(assigned(5, &[0, 1], &[2])));
    let [MemberEvent::Assigned(first)] = &got[..] else {
        panic!("{got:?}");
    };
    member.heartbeat(Instant::now());
    let Reaction::Rejoin(_) = member.on_response(failed(ErrorCode::FencedMemberEpoch)) else {
        panic!("fencing rejoins");
    };
    // The application answers the first assignment only now.
    assert!(!member.set_owned(first.clone()), "out of date");
    let rejoin = member.heartbeat(Instant::now());
    assert_eq!(rejoin.member_epoch, 0);
    assert_eq!(rejoin.active_tasks, Some(Vec::new()));
    assert_eq!(rejoin.standby_tasks, Some(Vec::new()));
    assert_eq!(rejoin.warmup_tasks, Some(Vec::new()));

    // Neither does a report of the lost assignment go out once rejoined.
    let got = events(member.on_response(assigned(6, &[1], &[])));
    let [MemberEvent::Assigned(second)] = &got[..] else {
        panic!("{got:?}");
    };
    assert!(second.generation > first.generation);
    assert!(!member.set_owned(first.clone()));
    assert!(member.heartbeat(Instant::now()).active_tasks.is_none());
    assert!(
        member.set_owned(second.clone()),
        "the current one is reported"
    );
    let report = member.heartbeat(Instant::now());
    assert_eq!(report.active_tasks.unwrap()[0].partitions, [1]);
}

#[test]
fn joining_claims_no_task_even_when_the_application_reported_some() {
    let mut member = member();
    member.heartbeat(Instant::now());
    // A report while the join is still unanswered (the application's view of
    // an earlier life of the member).
    member.set_owned(Assignment {
        active: tasks(&[3]),
        ..Assignment::default()
    });
    member.on_request_failed();
    let join = member.heartbeat(Instant::now());
    assert_eq!(join.member_epoch, 0);
    assert_eq!(join.active_tasks, Some(Vec::new()));
}

#[test]
fn a_moved_coordinator_is_found_again_and_told_everything() {
    let mut member = member();
    member.heartbeat(Instant::now());
    events(member.on_response(accepted(1)));
    member.heartbeat(Instant::now());
    assert!(matches!(
        member.on_response(failed(ErrorCode::NotCoordinator)),
        Reaction::Rediscover
    ));
    let again = member.heartbeat(Instant::now());
    assert_eq!(again.member_epoch, 1, "still a member");
    assert!(again.process_id.is_some(), "a full heartbeat");
    assert!(again.active_tasks.is_some());
    assert!(again.topology.is_none(), "the topology only with epoch 0");
    assert!(matches!(
        member.on_response(failed(ErrorCode::CoordinatorLoadInProgress)),
        Reaction::Retry
    ));
}

#[test]
fn a_refused_topology_is_fatal_and_named() {
    let mut member = member();
    member.heartbeat(Instant::now());
    let Reaction::Fatal(error, _) = member.on_response(failed(ErrorCode::StreamsInvalidTopology))
    else {
        panic!("expected Fatal");
    };
    assert_eq!(error.broker_code(), Some(130));
    assert!(
        error.to_string().contains("StreamsInvalidTopology"),
        "{error}"
    );
    assert_eq!(member.state(), MemberState::Failed);
}

#[test]
fn leaving_uses_epoch_minus_1_and_a_static_member_minus_2() {
    let mut dynamic = member();
    dynamic.heartbeat(Instant::now());
    events(dynamic.on_response(accepted(4)));
    let leave = dynamic.leave(LeaveOperation::Default).unwrap();
    assert_eq!(leave.member_epoch, -1);
    assert_eq!(dynamic.state(), MemberState::Leaving);
    // Whatever the answer, the member is out.
    events(dynamic.on_response(failed(ErrorCode::UnknownMemberId)));
    assert_eq!(dynamic.state(), MemberState::Left);

    let mut config = config();
    config.instance_id = Some("instance-a".to_owned());
    let mut fixed = Membership::new(&config, &topology()).unwrap();
    let join = fixed.heartbeat(Instant::now());
    assert_eq!(join.instance_id.unwrap().as_str(), "instance-a");
    let leave = fixed.leave(LeaveOperation::Default).unwrap();
    assert_eq!(leave.member_epoch, -2);
    assert_eq!(leave.instance_id.unwrap().as_str(), "instance-a");
}

#[test]
fn a_close_can_leave_a_static_member_for_good_or_keep_a_dynamic_one() {
    let mut config = config();
    config.instance_id = Some("instance-a".to_owned());
    let mut fixed = Membership::new(&config, &topology()).unwrap();
    fixed.heartbeat(Instant::now());
    events(fixed.on_response(accepted(4)));
    assert_eq!(
        fixed
            .leave(LeaveOperation::LeaveGroup)
            .unwrap()
            .member_epoch,
        -1
    );
    let mut fixed = Membership::new(&config, &topology()).unwrap();
    fixed.heartbeat(Instant::now());
    assert_eq!(
        fixed
            .leave(LeaveOperation::RemainInGroup)
            .unwrap()
            .member_epoch,
        -2
    );
    let mut dynamic = member();
    dynamic.heartbeat(Instant::now());
    events(dynamic.on_response(accepted(4)));
    assert!(dynamic.leave(LeaveOperation::RemainInGroup).is_none());
    assert_eq!(dynamic.state(), MemberState::Leaving);
    assert_eq!(
        member()
            .leave(LeaveOperation::LeaveGroup)
            .unwrap()
            .member_epoch,
        -1
    );
}

#[test]
fn task_offsets_go_out_once_per_broker_interval() {
    let start = Instant::now();
    let mut member = member();
    member.heartbeat(start);
    events(member.on_response(accepted(1)));
    let offsets = |offset| {
        vec![TaskOffset {
            task: TaskId::new("0", 0),
            offset,
        }]
    };
    member.set_task_offsets(offsets(10), offsets(20));
    let first = member.heartbeat(start);
    assert_eq!(first.task_offsets.unwrap()[0].offset, 10);
    assert_eq!(first.task_end_offsets.unwrap()[0].offset, 20);

    member.set_task_offsets(offsets(11), offsets(20));
    assert!(member
        .heartbeat(start + Duration::from_secs(1))
        .task_offsets
        .is_none());
    let later = member.heartbeat(start + Duration::from_secs(60));
    assert_eq!(later.task_offsets.unwrap()[0].offset, 11);
}

#[test]
fn the_join_carries_the_offsets_of_the_state_at_hand() {
    let mut config = config();
    config.task_offsets = vec![TaskOffset {
        task: TaskId::new("1", 2),
        offset: 42,
    }];
    let mut joining = Membership::new(&config, &topology()).unwrap();
    let join = joining.heartbeat(Instant::now());
    let offsets = join.task_offsets.expect("offsets with the join");
    assert_eq!(
        (
            offsets[0].subtopology_id.to_string(),
            offsets[0].partition,
            offsets[0].offset
        ),
        ("1".to_string(), 2, 42)
    );
    assert_eq!(join.task_end_offsets.map(|e| e.len()), Some(0));
    // Without state at hand the join leaves them out.
    let join = member().heartbeat(Instant::now());
    assert!(join.task_offsets.is_none());
}

#[test]
fn endpoints_and_statuses_are_decoded_and_reported_when_they_change() {
    let mut member = member();
    member.heartbeat(Instant::now());
    let answer = StreamsGroupHeartbeatResponseData {
        status: Some(vec![response::Status {
            status_code: 1,
            status_detail: "Source topics in are missing.".to_owned().into(),
            ..Default::default()
        }]),
        endpoint_information_epoch: 7,
        partitions_by_user_endpoint: Some(vec![response::EndpointToPartitions {
            user_endpoint: response::Endpoint {
                host: "app-1".to_owned().into(),
                port: 8080,
                ..Default::default()
            },
            active_partitions: vec![response::TopicPartition {
                topic: "in".to_owned().into(),
                partitions: vec![1, 0],
                ..Default::default()
            }],
            standby_partitions: Vec::new(),
            ..Default::default()
        }]),
        ..accepted(1)
    };
    let got = events(member.on_response(answer.clone()));
    assert_eq!(
        got[0],
        MemberEvent::StatusChanged(vec![GroupStatus::MissingSourceTopics(
            "Source topics in are missing.".to_owned()
        )])
    );
    let MemberEvent::EndpointsChanged(endpoints) = &got[1] else {
        panic!("{got:?}");
    };
    assert_eq!(endpoints.epoch, 7);
    assert_eq!(endpoints.hosts[0].endpoint.to_string(), "app-1:8080");
    assert_eq!(
        endpoints.hosts[0].active["in"]
            .iter()
            .copied()
            .collect::<Vec<_>>(),
        [0, 1]
    );
    assert_eq!(
        member.heartbeat(Instant::now()).endpoint_information_epoch,
        7
    );
    assert!(
        events(member.on_response(answer)).is_empty(),
        "no change, no event"
    );
}

#[test]
fn the_endpoint_waits_until_the_broker_has_configured_the_topology() {
    let mut member = member();
    member.heartbeat(Instant::now());
    let status = |code: i8| response::Status {
        status_code: code,
        status_detail: "internal topics are missing".to_owned().into(),
        ..Default::default()
    };
    let missing = StreamsGroupHeartbeatResponseData {
        status: Some(vec![status(3)]),
        ..accepted(1)
    };
    events(member.on_response(missing));
    assert!(member.heartbeat(Instant::now()).user_endpoint.is_none());
    // A null status list is unchanged: still missing.
    events(member.on_response(accepted(1)));
    assert!(member.heartbeat(Instant::now()).user_endpoint.is_none());
    let delayed_only = StreamsGroupHeartbeatResponseData {
        status: Some(vec![status(5)]),
        ..accepted(1)
    };
    events(member.on_response(delayed_only));
    assert!(member.heartbeat(Instant::now()).user_endpoint.is_some());
}

#[test]
fn an_unusable_config_is_refused_before_joining() {
    let mut config = config();
    config.group_id.clear();
    assert!(matches!(
        Membership::new(&config, &topology()),
        Err(Error::Config(_))
    ));
    assert!(matches!(
        Membership::new(&self::config(), &Topology::default()),
        Err(Error::InvalidTopology(_))
    ));
}

#[test]
fn once_the_topology_was_ready_the_endpoint_goes_with_every_rejoin() {
    let mut member = member();
    let join = member.heartbeat(Instant::now());
    assert_eq!(
        join.endpoint_information_epoch, -1,
        "no picture yet, as Java"
    );
    events(member.on_response(accepted(1)));
    assert!(member.heartbeat(Instant::now()).user_endpoint.is_some());
    let Reaction::Rejoin(_) = member.on_response(failed(ErrorCode::FencedMemberEpoch)) else {
        panic!("fencing rejoins");
    };
    let rejoin = member.heartbeat(Instant::now());
    assert_eq!(rejoin.member_epoch, 0);
    assert_eq!(rejoin.user_endpoint.unwrap().port, 8080);
    // Even when the answer to the rejoin lists a blocking status again.
    let missing = StreamsGroupHeartbeatResponseData {
        status: Some(vec![response::Status {
            status_code: 3,
            status_detail: "internal topics are missing".to_owned().into(),
            ..Default::default()
        }]),
        ..accepted(2)
    };
    events(member.on_response(missing));
    member.on_request_failed();
    assert!(member.heartbeat(Instant::now()).user_endpoint.is_some());
}
