//! Streams group members on a real broker that serves the protocol (Kafka
//! 4.2+: `KSTREAMS_KAFKA_VERSION=4.4.0 cargo xtask kafka start`, found
//! through KSTREAMS_BOOTSTRAP). Skipped without a broker, and on an older one.
//!
//! With KSTREAMS_KAFKA_CLASSPATH set to the broker's jars, the describe test
//! also asks the Java Admin (`describeStreamsGroups`) through
//! `tests/DescribeStreamsGroup.java`.

use std::collections::BTreeSet;
use std::io::Write;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kstreams_group::{
    Admin, Assignment, CommitOffset, ConnectionConfig, Endpoint, GroupStatus, InternalTopic,
    MemberConfig, MemberEvent, StreamsGroupMember, Subtopology, TaskId, TaskOffset, Tasks,
    Topology, Uuid,
};

const PARTITIONS: i32 = 4;
/// Rebalances on the test broker (1 s heartbeats, no initial delay) settle in
/// a few seconds; this bounds a broken one.
const SETTLE: Duration = Duration::from_secs(60);

/// The bootstrap list of a broker with streams groups, or `None` (skip).
async fn streams_broker() -> Option<String> {
    let test = std::thread::current().name().unwrap_or("test").to_owned();
    let skip = |why: &str| {
        // One write, so that parallel tests do not interleave mid-line.
        let line = format!("skipped {test}: {why}\n");
        let _ = std::io::stderr().write_all(line.as_bytes());
        None
    };
    let Some(bootstrap) = std::env::var("KSTREAMS_BOOTSTRAP")
        .ok()
        .filter(|b| !b.is_empty())
    else {
        return skip("KSTREAMS_BOOTSTRAP not set");
    };
    match Admin::new(ConnectionConfig::new(&bootstrap))
        .supports_streams_groups()
        .await
    {
        Ok(true) => Some(bootstrap),
        Ok(false) => skip("the broker has no streams groups (Kafka 4.2+ needed)"),
        Err(error) => panic!("the broker at {bootstrap} does not answer: {error}"),
    }
}

fn unique(name: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{name}-{nanos}")
}

/// A count after a re-key: sub-topology 0 reads `input`, keeps a store and
/// writes a repartition topic; sub-topology 1 reads it and counts. Both are
/// stateful, so both get standbys.
fn rekey_and_count(app: &str, input: &str) -> Topology {
    let repartition = format!("{app}-rekey-repartition");
    Topology {
        epoch: 0,
        subtopologies: vec![
            Subtopology {
                id: "0".to_owned(),
                source_topics: vec![input.to_owned()],
                repartition_sink_topics: vec![repartition.clone()],
                changelog_topics: vec![InternalTopic::new(format!("{app}-dedup-changelog"))],
                ..Subtopology::default()
            },
            Subtopology {
                id: "1".to_owned(),
                repartition_source_topics: vec![InternalTopic::new(repartition)],
                changelog_topics: vec![InternalTopic::new(format!("{app}-count-changelog"))],
                ..Subtopology::default()
            },
        ],
    }
}

fn all_tasks() -> Tasks {
    ["0", "1"]
        .into_iter()
        .flat_map(|sub| (0..PARTITIONS).map(move |p| TaskId::new(sub, p)))
        .collect()
}

/// One application on the broker: its id, its input topic (created) and its
/// topology.
struct App {
    bootstrap: String,
    id: String,
    input: String,
    topology: Topology,
}

impl App {
    /// A new application, or `None` when the broker cannot serve it (skip).
    async fn new(name: &str) -> Option<App> {
        let bootstrap = streams_broker().await?;
        let id = unique(name);
        let input = format!("{id}-input");
        Admin::new(ConnectionConfig::new(&bootstrap))
            .create_topic(&input, PARTITIONS)
            .await
            .unwrap();
        let topology = rekey_and_count(&id, &input);
        Some(App {
            bootstrap,
            id,
            input,
            topology,
        })
    }

    fn admin(&self) -> Admin {
        Admin::new(ConnectionConfig::new(&self.bootstrap))
    }

    /// A dynamic member's config: a process of its own.
    fn config(&self) -> MemberConfig {
        let mut connection = ConnectionConfig::new(&self.bootstrap);
        connection.client_id = format!("{}-client", self.id);
        MemberConfig::new(connection, &self.id, Uuid::new_v4())
    }

    async fn join(&self, config: MemberConfig) -> StreamsGroupMember {
        StreamsGroupMember::join(config, &self.topology)
            .await
            .unwrap()
    }

    async fn member(&self) -> StreamsGroupMember {
        self.join(self.config()).await
    }

    /// The input partitions' committed offsets.
    async fn committed(&self) -> Vec<CommitOffset> {
        let partitions: Vec<i32> = (0..PARTITIONS).collect();
        self.admin()
            .committed_offsets(&self.id, &self.input, &partitions)
            .await
            .unwrap()
    }
}

/// Plays the application for one round: owns whatever a member was just
/// assigned. Returns the members' assignments.
async fn step(members: &mut [&mut StreamsGroupMember]) -> Vec<Assignment> {
    for member in members.iter_mut() {
        member.record_poll();
        let wait = tokio::time::timeout(Duration::from_millis(20), member.next_event());
        match wait.await {
            Ok(Some(MemberEvent::Assigned(assignment))) => member.report_owned(assignment).unwrap(),
            Ok(None) => panic!("a member stopped: {:#?}", member.snapshot()),
            _ => {}
        }
    }
    members.iter().map(|m| m.snapshot().assignment).collect()
}

/// Plays the application until `done` holds for the members' assignments.
async fn settle(
    members: &mut [&mut StreamsGroupMember],
    done: impl Fn(&[Assignment]) -> bool,
) -> Vec<Assignment> {
    let deadline = Instant::now() + SETTLE;
    loop {
        let assignments = step(members).await;
        if done(&assignments) {
            return assignments;
        }
        assert!(
            Instant::now() < deadline,
            "not settled within {SETTLE:?}: {assignments:#?}"
        );
    }
}

fn union<'a>(sets: impl IntoIterator<Item = &'a Tasks>) -> BTreeSet<TaskId> {
    sets.into_iter().flat_map(Tasks::iter).collect()
}

fn disjoint_and_covering(sets: &[&Tasks]) -> bool {
    let total: usize = sets.iter().map(|s| s.len()).sum();
    let all = union(sets.iter().copied());
    total == all.len() && all == union([&all_tasks()])
}

/// Two members that each run some of the tasks and together all of them.
fn split(assignments: &[Assignment]) -> bool {
    assignments.iter().all(|a| !a.active.is_empty())
        && disjoint_and_covering(&[&assignments[0].active, &assignments[1].active])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_members_split_the_tasks_and_one_takes_all_when_the_other_leaves() {
    let Some(app) = App::new("split").await else {
        return;
    };
    let mut a = app.member().await;
    let mut b = app.member().await;

    let halves = settle(&mut [&mut a, &mut b], split).await;
    assert!(halves.iter().all(|a| a.standby.is_empty()), "none asked");

    b.close().await.unwrap();
    let alone = settle(&mut [&mut a], |assignments| {
        assignments[0].active == all_tasks()
    })
    .await;
    assert_eq!(alone[0].active.len(), 2 * PARTITIONS as usize);
    a.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_member_learns_which_endpoint_serves_which_partitions() {
    let Some(app) = App::new("endpoints").await else {
        return;
    };
    let serving = |port| {
        let mut config = app.config();
        config.user_endpoint = Some(Endpoint {
            host: "localhost".to_owned(),
            port,
        });
        config
    };
    let mut a = app.join(serving(7001)).await;
    let mut b = app.join(serving(7002)).await;
    let deadline = Instant::now() + SETTLE;
    let endpoints = loop {
        let assignments = step(&mut [&mut a, &mut b]).await;
        let endpoints = a.snapshot().endpoints;
        let ports: BTreeSet<u16> = endpoints.hosts.iter().map(|h| h.endpoint.port).collect();
        let inputs: BTreeSet<i32> = endpoints
            .hosts
            .iter()
            .flat_map(|h| h.active.get(&app.input).into_iter().flatten().copied())
            .collect();
        if split(&assignments)
            && ports == BTreeSet::from([7001, 7002])
            && inputs == (0..PARTITIONS).collect()
        {
            break endpoints;
        }
        assert!(Instant::now() < deadline, "{endpoints:#?}");
    };
    // Each endpoint materializes the input partitions of its own tasks.
    let a_host = endpoints
        .hosts
        .iter()
        .find(|h| h.endpoint.port == 7001)
        .unwrap();
    let a_inputs: Tasks = a_host.active[&app.input]
        .iter()
        .map(|p| TaskId::new("0", *p))
        .collect();
    let a_sub0: Tasks = a
        .snapshot()
        .assignment
        .active
        .partitions("0")
        .map(|p| TaskId::new("0", p))
        .collect();
    assert_eq!(a_inputs, a_sub0);
    a.close().await.unwrap();
    b.close().await.unwrap();
}

/// Kafka 4.4.0 assigns no warm-up tasks (its sticky assignor reads task
/// offsets only to rank standby candidates, and the step meant to add
/// warm-ups, `AssignmentRefiner.refine`, returns the assignment unchanged), so
/// this checks the member's part: its offsets reach the broker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reported_task_offsets_reach_the_broker() {
    let Some(app) = App::new("offsets").await else {
        return;
    };
    let mut a = app.member().await;
    settle(&mut [&mut a], |s| s[0].active == all_tasks()).await;
    let at = |offset| {
        all_tasks()
            .iter()
            .map(|task| TaskOffset { task, offset })
            .collect::<Vec<_>>()
    };
    a.report_task_offsets(at(900), at(1000)).unwrap();
    let deadline = Instant::now() + SETTLE;
    loop {
        step(&mut [&mut a]).await;
        let described = app.admin().describe_streams_group(&app.id).await.unwrap();
        let member = &described.members[0];
        let sorted = |offsets: &[TaskOffset]| {
            let mut offsets = offsets.to_vec();
            offsets.sort_by(|a, b| a.task.cmp(&b.task));
            offsets
        };
        if sorted(&member.task_offsets) == at(900) && sorted(&member.task_end_offsets) == at(1000) {
            break;
        }
        assert!(Instant::now() < deadline, "{member:#?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    a.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_one_standby_replica_each_member_keeps_the_others_tasks_warm() {
    let Some(app) = App::new("standby").await else {
        return;
    };
    app.admin()
        .set_group_configs(&app.id, &[("streams.num.standby.replicas", "1")])
        .await
        .unwrap();
    let mut a = app.member().await;
    let mut b = app.member().await;

    let settled = settle(&mut [&mut a, &mut b], |s| {
        split(s)
            // One standby per task, never beside its active.
            && s[0].standby == s[1].active
            && s[1].standby == s[0].active
    })
    .await;
    assert!(settled.iter().all(|a| !a.standby.is_empty()));
    a.close().await.unwrap();
    b.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_shows_the_group_its_members_and_their_tasks() {
    let Some(app) = App::new("describe").await else {
        return;
    };
    let mut a = app.member().await;
    let mut b = app.member().await;
    settle(&mut [&mut a, &mut b], split).await;

    let admin = app.admin();
    let deadline = Instant::now() + SETTLE;
    let described = loop {
        let described = admin.describe_streams_group(&app.id).await.unwrap();
        // The owned assignment trails the target by one heartbeat.
        let owned: Vec<&Tasks> = described
            .members
            .iter()
            .map(|m| &m.assignment.active)
            .collect();
        if described.state == "Stable" && disjoint_and_covering(&owned) {
            break described;
        }
        assert!(Instant::now() < deadline, "{described:#?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(described.group_id, app.id);
    assert_eq!(described.topology_epoch, Some(0));
    let ids: BTreeSet<&str> = described
        .members
        .iter()
        .map(|m| m.member_id.as_str())
        .collect();
    assert_eq!(ids, BTreeSet::from([a.member_id(), b.member_id()]));
    for member in &described.members {
        assert_eq!(member.client_id, format!("{}-client", app.id));
        assert!(member.member_epoch > 0);
        assert!(Uuid::parse_str(&member.process_id).is_ok());
    }

    if let Ok(classpath) = std::env::var("KSTREAMS_KAFKA_CLASSPATH") {
        let java = java_describe(&classpath, &app.bootstrap, &app.id);
        assert!(java.contains("state=Stable"), "{java}");
        assert!(java.contains("members=2"), "{java}");
        for id in &ids {
            assert!(
                java.contains(id),
                "the Java Admin should list {id}:\n{java}"
            );
        }
    }
    a.close().await.unwrap();
    b.close().await.unwrap();
}

/// What the Java Admin's `describeStreamsGroups` prints for `group`.
fn java_describe(classpath: &str, bootstrap: &str, group: &str) -> String {
    let program = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/DescribeStreamsGroup.java"
    );
    let output = std::process::Command::new("java")
        .args(["-cp", classpath, program, bootstrap, group])
        .output()
        .expect("java runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_source_topic_is_a_group_status_and_assigns_nothing() {
    let Some(bootstrap) = streams_broker().await else {
        return;
    };
    let id = unique("missing");
    let input = format!("{id}-never-created");
    let app = App {
        topology: rekey_and_count(&id, &input),
        bootstrap,
        id,
        input,
    };
    let mut a = app.member().await;
    let deadline = Instant::now() + SETTLE;
    loop {
        let wait = tokio::time::timeout(Duration::from_secs(1), a.next_event()).await;
        if let Ok(Some(MemberEvent::StatusChanged(statuses))) = wait {
            let missing = statuses
                .iter()
                .any(|s| matches!(s, GroupStatus::MissingSourceTopics(detail) if detail.contains("never-created")));
            if missing {
                break;
            }
        }
        assert!(Instant::now() < deadline, "{:#?}", a.snapshot());
    }
    assert!(a.snapshot().assignment.active.is_empty());
    a.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_member_that_comes_back_gets_its_tasks_again() {
    let Some(app) = App::new("static").await else {
        return;
    };
    let config = |instance: &str| {
        let mut config = app.config();
        config.instance_id = Some(instance.to_owned());
        config
    };
    let mut a = app.join(config("instance-a")).await;
    let mut b = app.join(config("instance-b")).await;
    let before = settle(&mut [&mut a, &mut b], split).await;

    // A static member's close leaves with epoch -2: its tasks wait for it
    // rather than move to the member still there (a dynamic leave moves them
    // within a heartbeat or two, see the test above).
    b.close().await.unwrap();
    let gap = Instant::now() + Duration::from_secs(4);
    while Instant::now() < gap {
        let during = step(&mut [&mut a]).await;
        assert_eq!(
            during[0].active, before[0].active,
            "instance-b's tasks stay reserved"
        );
    }
    let mut b_again = app.join(config("instance-b")).await;
    let after = settle(&mut [&mut a, &mut b_again], |s| {
        disjoint_and_covering(&[&s[0].active, &s[1].active]) && !s[1].active.is_empty()
    })
    .await;
    assert_eq!(
        after[1].active, before[1].active,
        "instance-b's tasks came back"
    );
    assert_eq!(after[0].active, before[0].active, "instance-a kept its own");
    a.close().await.unwrap();
    b_again.close().await.unwrap();
}

/// A member whose heartbeat loop runs on a runtime of its own, on a thread
/// of its own; the function it comes with drops that runtime: the loop stops
/// mid-flight without a leave heartbeat, as in a killed process.
async fn join_killable(
    config: MemberConfig,
    topology: &Topology,
) -> (StreamsGroupMember, impl FnOnce()) {
    let topology = topology.clone();
    let (joined_tx, joined) = tokio::sync::oneshot::channel();
    let (kill, killed) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let _ = joined_tx.send(StreamsGroupMember::join(config, &topology).await);
            let _ = killed.await;
        });
        // Dropping the runtime drops the heartbeat loop where it stands.
        drop(runtime);
    });
    let member = joined.await.unwrap().unwrap();
    let kill = move || {
        let _ = kill.send(());
        thread.join().unwrap();
    };
    (member, kill)
}

/// Kafka 4.4's broker (GroupMetadataManager, getOrMaybeCreateStaticStreamsGroupMember)
/// lets a static member take over the instance id of one that left with
/// epoch -2 (the test above); a member killed without leaving keeps holding
/// it until its session times out. Meanwhile its tasks wait for it (no other
/// member gets them) and a new member with the same id is refused with
/// UNRELEASED_INSTANCE_ID, which stops it at once with the error naming the
/// cause and the fix; once the session has timed out the tasks move and the
/// id is free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_static_member_holds_its_id_and_its_tasks_until_its_session_times_out() {
    let Some(app) = App::new("static-killed").await else {
        return;
    };
    // The broker's minimum on the test cluster (45 s by default).
    let session = Duration::from_secs(6);
    app.admin()
        .set_group_configs(&app.id, &[("streams.session.timeout.ms", "6000")])
        .await
        .unwrap();
    let config = |instance: &str| {
        let mut config = app.config();
        config.instance_id = Some(instance.to_owned());
        config
    };
    let mut a = app.join(config("instance-a")).await;
    let (mut b, kill_b) = join_killable(config("instance-b"), &app.topology).await;
    let before = settle(&mut [&mut a, &mut b], split).await;
    kill_b();
    drop(b);
    let killed_at = Instant::now();

    // Restarted at once: refused, fast, with the error that says why.
    let mut b_again = app.join(config("instance-b")).await;
    let stopped = tokio::time::timeout(Duration::from_secs(10), async {
        while b_again.next_event().await.is_some() {}
    })
    .await;
    assert!(stopped.is_ok(), "the refused member did not stop");
    let error = b_again.close().await.unwrap_err();
    eprintln!("refused: {error}");
    assert!(
        matches!(error, kstreams_group::Error::InstanceId { .. }),
        "{error:?}"
    );
    assert_eq!(error.broker_code(), Some(111), "UNRELEASED_INSTANCE_ID");
    let message = error.to_string();
    for part in [
        "group.instance.id=instance-b",
        "still held by another member",
        "streams.session.timeout.ms",
    ] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }

    // Within the session the killed member's tasks stay its own.
    while killed_at.elapsed() < session - Duration::from_secs(2) {
        let during = step(&mut [&mut a]).await;
        assert_eq!(
            during[0].active, before[0].active,
            "instance-b's tasks wait for it during its session"
        );
    }
    // After it, they move to the member still there, and the id is free.
    settle(&mut [&mut a], |s| s[0].active == all_tasks()).await;
    let mut b_later = app.join(config("instance-b")).await;
    settle(&mut [&mut a, &mut b_later], split).await;
    a.close().await.unwrap();
    b_later.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_commits_offsets_as_the_member_and_not_once_it_left() {
    let Some(app) = App::new("commit").await else {
        return;
    };
    let mut config = app.config();
    config.max_poll_interval = Duration::from_secs(2);
    let mut a = app.join(config).await;
    settle(&mut [&mut a], |s| s[0].active == all_tasks()).await;
    assert!(a.member_epoch() > 0);
    let offsets = |offset| {
        (0..PARTITIONS)
            .map(|partition| CommitOffset {
                metadata: format!("at {offset}"),
                ..CommitOffset::new(&app.input, partition, offset + i64::from(partition))
            })
            .collect::<Vec<_>>()
    };
    a.commit_offsets(offsets(10)).await.unwrap();
    assert_eq!(app.committed().await, offsets(10), "with their metadata");

    // A second member joins: the first still commits at its (new) epoch.
    let mut b = app.member().await;
    settle(&mut [&mut a, &mut b], split).await;
    a.commit_offsets(offsets(20)).await.unwrap();

    // The first stops polling and leaves: while the group has members, a
    // commit with epoch -1 is refused (as librdkafka's own commit on a
    // manually assigned consumer would be), and nothing changes.
    let deadline = Instant::now() + SETTLE;
    while a.member_epoch() != -1 {
        step(&mut [&mut b]).await;
        assert!(Instant::now() < deadline, "{:#?}", a.snapshot());
    }
    let refused = a.commit_offsets(offsets(30)).await.unwrap_err();
    assert_eq!(
        refused.broker_code(),
        Some(25),
        "UNKNOWN_MEMBER_ID: {refused}"
    );
    assert_eq!(app.committed().await, offsets(20));
    b.close().await.unwrap();
    a.close().await.unwrap();
}

/// The runtime's stream threads have no tokio runtime: the whole life of a
/// member from such a thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_on_a_thread_without_a_runtime_joins_commits_and_leaves() {
    let Some(app) = App::new("blocking").await else {
        return;
    };
    let (config, topology) = (app.config(), app.topology.clone());
    let input = app.input.clone();
    let thread = std::thread::spawn(move || {
        let mut member = StreamsGroupMember::join_blocking(config, &topology).unwrap();
        let deadline = Instant::now() + SETTLE;
        while member.snapshot().assignment.active != all_tasks() {
            member.record_poll();
            if let Some(MemberEvent::Assigned(assignment)) = member.try_next_event().unwrap() {
                member.report_owned(assignment).unwrap();
            }
            assert!(Instant::now() < deadline, "{:#?}", member.snapshot());
            std::thread::sleep(Duration::from_millis(20));
        }
        let offset = CommitOffset::new(input, 0, 7);
        member
            .commit_offsets_blocking(vec![offset], Duration::from_secs(30))
            .unwrap();
        member.close_blocking(Duration::from_secs(30)).unwrap();
    });
    tokio::task::spawn_blocking(move || thread.join())
        .await
        .unwrap()
        .expect("the member's thread");
    assert_eq!(app.committed().await, [CommitOffset::new(&app.input, 0, 7)]);
    let described = app.admin().describe_streams_group(&app.id).await.unwrap();
    assert!(described.members.is_empty(), "it left: {described:#?}");
}

/// A new application's first member, alone: the broker creates the internal
/// topics while it joins (the case that fails Kafka 4.4.0's coordinator if
/// the endpoint comes with the join, see `MemberConfig::user_endpoint`), and
/// the member then sees its own endpoint serving every input partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_member_sees_its_own_endpoint() {
    let Some(app) = App::new("own-endpoint").await else {
        return;
    };
    let mut config = app.config();
    let endpoint = Endpoint {
        host: "localhost".to_owned(),
        port: 7101,
    };
    config.user_endpoint = Some(endpoint.clone());
    let mut a = app.join(config).await;
    let deadline = Instant::now() + SETTLE;
    loop {
        step(&mut [&mut a]).await;
        let endpoints = a.snapshot().endpoints;
        let own = endpoints.hosts.iter().find(|h| h.endpoint == endpoint);
        let inputs = own.and_then(|h| h.active.get(&app.input));
        if inputs.is_some_and(|p| p.len() == PARTITIONS as usize) {
            assert_eq!(endpoints.hosts.len(), 1, "{endpoints:#?}");
            assert!(endpoints.epoch > 0);
            break;
        }
        assert!(Instant::now() < deadline, "{:#?}", a.snapshot());
    }
    a.close().await.unwrap();
}
