//! Threads added to and removed from a running instance (Kafka Streams'
//! `addStreamThread` / `removeStreamThread`), `close_with` (its
//! `close(CloseOptions)`) and `all_local_store_partition_lags`, on a real
//! broker under `group.protocol=streams`, where the group's description
//! shows each thread's member and tasks. Skipped without a broker, or on
//! one without streams groups (before 4.2).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::time::{Duration, Instant};

use kstreams_dsl::{Materialized, Produced, StreamsBuilder};
use kstreams_embedded::rdkafka::consumer::{BaseConsumer, Consumer};
use kstreams_embedded::rdkafka::{ClientConfig, Message};
use kstreams_embedded::{create_topic, test_broker, unique_name};
use kstreams_group::{Admin, ConnectionConfig, GroupDescription, TaskId};
use kstreams_record::{I64Serde, Nullable, StringSerde};
use kstreams_runtime::kafka::{
    CloseOptions, GroupMembershipOperation, KafkaStreams, LagInfo, State, StreamsConfig,
};

use crate::common::{self, Input};

const PARTITIONS: i32 = 4;
const KEYS: usize = 20;
const STORE: &str = "counts";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The test broker, if it serves streams groups.
fn streams_broker() -> Option<String> {
    let bootstrap = test_broker()?;
    let admin = Admin::new(ConnectionConfig::new(&bootstrap));
    match runtime().block_on(admin.supports_streams_groups()) {
        Ok(true) => Some(bootstrap),
        Ok(false) => {
            let test = std::thread::current().name().unwrap_or("test").to_owned();
            let line = format!("skipped {test}: the broker has no streams groups (Kafka 4.2+)\n");
            let _ = std::io::stderr().write_all(line.as_bytes());
            None
        }
        Err(e) => panic!("the broker at {bootstrap} does not answer: {e}"),
    }
}

struct Run {
    bootstrap: String,
    input: String,
    output: String,
    app_id: String,
}

impl Run {
    fn new(name: &str) -> Option<Run> {
        let bootstrap = streams_broker()?;
        let input = unique_name(&format!("{name}-in"));
        let output = unique_name(&format!("{name}-out"));
        create_topic(&bootstrap, &input, PARTITIONS, 1).unwrap();
        create_topic(&bootstrap, &output, PARTITIONS, 1).unwrap();
        let _ = env_logger::builder()
            .is_test(true)
            .format_timestamp_millis()
            .try_init();
        Some(Run {
            bootstrap,
            input,
            output,
            app_id: unique_name(&format!("{name}-app")),
        })
    }

    /// Counts the input's values: sub-topology 0 re-keys by value into a
    /// repartition topic, sub-topology 1 counts in the logged store STORE.
    fn app(&self, instance: &str, configure: impl FnOnce(StreamsConfig) -> StreamsConfig) -> App {
        let dir = std::env::temp_dir().join(unique_name(&format!("kstreams-threads-{instance}")));
        let mut config = StreamsConfig::new(&self.app_id, &self.bootstrap)
            .commit_interval(Duration::from_millis(100))
            .state_dir(&dir);
        config.set("group.protocol", "streams").unwrap();
        let config = configure(config);
        let builder = StreamsBuilder::new();
        builder
            .stream::<String, String>(&self.input)
            .group_by(|_: &String, value: &String| value.clone())
            .count_with(None, Materialized::as_(STORE))
            .to_stream()
            .to_with(
                &self.output,
                Produced::with(StringSerde, Nullable(I64Serde)),
            );
        App {
            streams: KafkaStreams::new(builder.build().unwrap(), config),
            dir,
        }
    }

    /// `n` records from `from` on, values spread over KEYS keys.
    fn produce(&self, from: usize, n: usize) {
        let inputs =
            (from..from + n).map(|i| Input::new(format!("r{i}"), format!("k{}", i % KEYS)));
        common::produce(&self.bootstrap, &self.input, inputs);
    }

    /// The latest count per key in the output once every key reached
    /// `each` (or after a timeout), then a few quiet seconds more so that a
    /// count past it would be seen too.
    fn counts_reaching(&self, each: i64) -> BTreeMap<String, i64> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("group.id", unique_name("counts-reader"))
            .set("auto.offset.reset", "earliest")
            .create()
            .unwrap();
        consumer.subscribe(&[&self.output]).unwrap();
        let mut latest = BTreeMap::new();
        let done = |latest: &BTreeMap<String, i64>| {
            latest.len() == KEYS && latest.values().all(|&c| c >= each)
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut quiet_since = Instant::now();
        while Instant::now() < deadline
            && (!done(&latest) || quiet_since.elapsed() < Duration::from_secs(3))
        {
            if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
                let key = String::from_utf8(m.key().unwrap().to_vec()).unwrap();
                let count = i64::from_be_bytes(m.payload().unwrap().try_into().unwrap());
                latest.insert(key, count);
                quiet_since = Instant::now();
            }
        }
        latest
    }

    fn describe(&self) -> GroupDescription {
        let admin = Admin::new(ConnectionConfig::new(&self.bootstrap));
        runtime()
            .block_on(admin.describe_streams_group(&self.app_id))
            .unwrap()
    }

    /// Waits until the group has `members` members, each owning some of
    /// the tasks and together every task once; returns each member's
    /// client id with its tasks.
    fn settled(&self, members: usize) -> BTreeMap<String, BTreeSet<TaskId>> {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let group = self.describe();
            let owned: BTreeMap<String, BTreeSet<TaskId>> = group
                .members
                .iter()
                .map(|m| (m.client_id.clone(), m.assignment.active.iter().collect()))
                .collect();
            let all: BTreeSet<TaskId> = owned.values().flatten().cloned().collect();
            let total: usize = owned.values().map(BTreeSet::len).sum();
            if group.members.len() == members
                && owned.len() == members
                && owned.values().all(|tasks| !tasks.is_empty())
                && all == all_tasks()
                && total == all.len()
            {
                return owned;
            }
            assert!(
                Instant::now() < deadline,
                "the group did not settle on {members} members: {group:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// Both sub-topologies' tasks, one per input partition each.
fn all_tasks() -> BTreeSet<TaskId> {
    (0..PARTITIONS)
        .flat_map(|p| [TaskId::new("0", p), TaskId::new("1", p)])
        .collect()
}

fn exactly(each: i64) -> BTreeMap<String, i64> {
    (0..KEYS).map(|k| (format!("k{k}"), each)).collect()
}

struct App {
    streams: KafkaStreams,
    dir: std::path::PathBuf,
}

impl Drop for App {
    fn drop(&mut self) {
        self.streams.close(Duration::from_secs(30));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn wait_for(what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The instance's threads by name, each with its active tasks, once every
/// live thread has published tasks.
fn thread_tasks(app: &KafkaStreams) -> BTreeMap<String, BTreeSet<(u32, i32)>> {
    app.metadata()
        .threads
        .iter()
        .map(|t| {
            let tasks = t.active_tasks.iter().map(|k| (k.subtopology, k.partition));
            (t.thread_name.clone(), tasks.collect())
        })
        .collect()
}

/// Records processed by the tasks of thread `thread`, from the instance's
/// metrics.
fn processed_by(app: &KafkaStreams, thread: &str) -> f64 {
    let label = format!("thread_id=\"{thread}\"");
    app.metrics()
        .gather_text()
        .lines()
        .filter(|l| l.starts_with("kstreams_task_process_total{") && l.contains(&label))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

#[test]
fn threads_added_and_removed_take_and_hand_over_tasks_and_counts_stay_exact() {
    let Some(run) = Run::new("threads") else {
        return;
    };
    let mut app = run.app("a", |c| c);
    // Not running: nothing to add to or remove from, as Kafka Streams.
    assert_eq!(app.streams.add_stream_thread().unwrap(), None);
    assert_eq!(
        app.streams
            .remove_stream_thread(Duration::from_secs(1))
            .unwrap(),
        None
    );
    app.streams.start().unwrap();
    wait_for("RUNNING", || app.streams.state() == State::Running);
    run.settled(1);
    run.produce(0, 400);
    assert_eq!(run.counts_reaching(20), exactly(20));
    let first = app.streams.metadata().threads[0].thread_name.clone();
    assert!(first.ends_with("-StreamThread-1"), "{first}");

    // A second thread joins the group and takes half of the tasks.
    let second = app.streams.add_stream_thread().unwrap().expect("added");
    assert_eq!(second, first.replace("-StreamThread-1", "-StreamThread-2"));
    let two = run.settled(2);
    assert!(
        two.keys().any(|client| client.starts_with(&second)),
        "{two:?}"
    );
    wait_for("both threads running tasks", || {
        let threads = thread_tasks(&app.streams);
        threads.len() == 2 && threads.values().all(|tasks| !tasks.is_empty())
    });
    assert_eq!(app.streams.metadata().threads_configured, 2);
    wait_for("RUNNING with two threads", || {
        app.streams.state() == State::Running
    });
    run.produce(400, 400);
    assert_eq!(run.counts_reaching(40), exactly(40));
    assert!(
        processed_by(&app.streams, &second) > 0.0,
        "the added thread processed nothing"
    );

    // The oldest thread goes: it leaves the group, the other one takes
    // every task over, and no record is lost or counted twice.
    let removed = app
        .streams
        .remove_stream_thread(Duration::from_secs(60))
        .unwrap();
    assert_eq!(removed.as_deref(), Some(first.as_str()));
    let left = run.settled(1);
    assert!(
        left.keys().all(|client| client.starts_with(&second)),
        "{left:?}"
    );
    wait_for("the remaining thread running every task", || {
        let threads = thread_tasks(&app.streams);
        threads.len() == 1 && threads.get(&second).is_some_and(|tasks| tasks.len() == 8)
    });
    assert_eq!(app.streams.metadata().threads_configured, 1);
    assert_eq!(
        processed_by(&app.streams, &first),
        0.0,
        "the removed thread's metrics are still exported"
    );
    run.produce(800, 400);
    assert_eq!(run.counts_reaching(60), exactly(60));
    wait_for("RUNNING with one thread", || {
        app.streams.state() == State::Running
    });

    // The freed number is taken again.
    let again = app.streams.add_stream_thread().unwrap().expect("added");
    assert_eq!(again, first);
    run.settled(2);
    assert_eq!(app.streams.metadata().threads_configured, 2);
    assert!(app.streams.close(Duration::from_secs(60)));
    assert_eq!(app.streams.add_stream_thread().unwrap(), None);
}

#[test]
fn close_with_leave_group_leaves_the_group_at_once() {
    let Some(run) = Run::new("close-with") else {
        return;
    };
    let mut app = run.app("a", |c| c.num_stream_threads(2));
    app.streams.start().unwrap();
    wait_for("RUNNING", || app.streams.state() == State::Running);
    run.settled(2);
    let options = CloseOptions::timeout(Duration::from_secs(60))
        .with_group_membership_operation(GroupMembershipOperation::LeaveGroup);
    assert!(app.streams.close_with(options));
    assert_eq!(app.streams.state(), State::NotRunning);
    // Left, not timed out: the group has no member right away.
    let group = run.describe();
    assert!(group.members.is_empty(), "{group:?}");
}

/// The lags of STORE's partitions, once `ready` holds of them.
fn store_lags(
    app: &KafkaStreams,
    ready: impl Fn(&BTreeMap<i32, LagInfo>) -> bool,
) -> BTreeMap<i32, LagInfo> {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let lags: BTreeMap<i32, LagInfo> = app
            .all_local_store_partition_lags()
            .unwrap()
            .remove(STORE)
            .unwrap_or_default()
            .into_iter()
            .collect();
        if ready(&lags) {
            return lags;
        }
        assert!(
            Instant::now() < deadline,
            "lags never as expected: {lags:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The partitions of STORE's tasks (sub-topology 1) active on `app`.
fn active_counting(app: &KafkaStreams) -> BTreeSet<i32> {
    app.metadata()
        .threads
        .iter()
        .flat_map(|t| &t.active_tasks)
        .filter(|t| t.subtopology == 1)
        .map(|t| t.partition)
        .collect()
}

#[test]
fn store_lags_show_active_stores_at_the_end_and_standbys_where_they_are() {
    let Some(run) = Run::new("lags") else {
        return;
    };
    let with_standby = |mut c: StreamsConfig| {
        c.set("num.standby.replicas", "1").unwrap();
        // Every count update is a changelog record.
        c.set("statestore.cache.max.bytes", "0").unwrap();
        c
    };
    let mut first = run.app("a", with_standby);
    let mut second = run.app("b", with_standby);
    assert!(first
        .streams
        .all_local_store_partition_lags()
        .unwrap()
        .is_empty());
    first.streams.start().unwrap();
    second.streams.start().unwrap();
    wait_for("RUNNING", || {
        first.streams.state() == State::Running && second.streams.state() == State::Running
    });
    run.settled(2);
    run.produce(0, 400);
    assert_eq!(run.counts_reaching(20), exactly(20));
    // Each instance holds every partition of the store: its active tasks'
    // and, as standbys, the other's; all caught up now.
    let all: BTreeSet<i32> = (0..PARTITIONS).collect();
    for app in [&first, &second] {
        let lags = store_lags(&app.streams, |lags| {
            lags.keys().copied().collect::<BTreeSet<_>>() == all
                && lags.values().all(|l| l.offset_lag() == 0)
        });
        for (partition, lag) in &lags {
            assert!(lag.end_offset_position() > 0, "{partition}: {lag}");
            assert_eq!(lag.current_offset_position(), lag.end_offset_position());
        }
    }
    // The second instance pauses: its standbys stop following the first
    // one's changelogs, which grow.
    let active_second = active_counting(&second.streams);
    let standby_second: BTreeSet<i32> = all.difference(&active_second).copied().collect();
    assert!(!standby_second.is_empty() && !active_second.is_empty());
    // Its threads' metadata lists those standbys with their input
    // partitions, and the clients' ids (Kafka Streams' ThreadMetadata).
    let standby_tasks = |streams: &KafkaStreams| -> BTreeSet<i32> {
        streams
            .metadata()
            .threads
            .iter()
            .flat_map(|t| t.standby_tasks.iter())
            .flat_map(|task| task.topic_partitions.iter().map(|p| p.partition))
            .collect()
    };
    wait_for("the standbys in the metadata", || {
        standby_tasks(&second.streams) == standby_second
    });
    for thread in second.streams.metadata().threads {
        let name = &thread.thread_name;
        assert_eq!(thread.consumer_client_id, format!("{name}-consumer"));
        assert_eq!(
            thread.restore_consumer_client_id,
            format!("{name}-restore-consumer")
        );
        assert_eq!(thread.producer_client_ids, vec![format!("{name}-producer")]);
    }
    assert!(!second.streams.metadata().paused);
    let before = store_lags(&second.streams, |_| true);
    second.streams.pause();
    assert!(second.streams.metadata().paused);
    std::thread::sleep(Duration::from_secs(1));
    let paused_at = store_lags(&second.streams, |_| true);
    // The first instance counts on: its changelogs grow past the second
    // instance's standby copies of them.
    run.produce(400, 400);
    let lags = store_lags(&second.streams, |lags| {
        standby_second
            .iter()
            .all(|p| lags.get(p).is_some_and(|l| l.offset_lag() > 0))
    });
    for p in &standby_second {
        let lag = lags[p];
        // Where the standby stopped, behind the grown end.
        assert_eq!(
            lag.current_offset_position(),
            paused_at[p].current_offset_position(),
            "{p}: {lag}"
        );
        assert!(lag.end_offset_position() > before[p].end_offset_position());
        assert_eq!(
            lag.offset_lag(),
            lag.end_offset_position() - lag.current_offset_position()
        );
    }
    // The first instance's stores of those partitions are active and run:
    // at the end.
    let first_lags = store_lags(&first.streams, |_| true);
    for p in &standby_second {
        assert_eq!(first_lags[p].offset_lag(), 0, "{p}");
    }
    // Resumed, the standbys catch up.
    second.streams.resume();
    assert!(!second.streams.metadata().paused);
    store_lags(&second.streams, |lags| {
        lags.len() == PARTITIONS as usize && lags.values().all(|l| l.offset_lag() == 0)
    });
}

/// The counting tasks (sub-topology 1) whose state directory is on disk in
/// `app`'s state directory.
fn counting_directories(run: &Run, app: &App) -> BTreeSet<i32> {
    let Ok(entries) = std::fs::read_dir(app.dir.join(&run.app_id)) else {
        return BTreeSet::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|name| name.strip_prefix("1_")?.parse().ok())
        .collect()
}

#[test]
fn the_state_of_tasks_moved_away_is_deleted_after_the_cleanup_delay() {
    let Some(run) = Run::new("cleanup") else {
        return;
    };
    let with_delay = |mut c: StreamsConfig| {
        c.set("state.cleanup.delay.ms", "1000").unwrap();
        c
    };
    let mut first = run.app("a", with_delay);
    first.streams.start().unwrap();
    wait_for("RUNNING", || first.streams.state() == State::Running);
    run.settled(1);
    run.produce(0, 200);
    assert_eq!(run.counts_reaching(10), exactly(10));
    let all: BTreeSet<i32> = (0..PARTITIONS).collect();
    assert_eq!(counting_directories(&run, &first), all);
    // A second instance takes some of the tasks: the first one's copies of
    // their stores are no longer its own.
    let mut second = run.app("b", with_delay);
    second.streams.start().unwrap();
    run.settled(2);
    wait_for("both instances RUNNING", || {
        first.streams.state() == State::Running && second.streams.state() == State::Running
    });
    let kept = active_counting(&first.streams);
    assert!(!kept.is_empty() && kept != all, "{kept:?}");
    wait_for("the moved tasks' state deleted", || {
        counting_directories(&run, &first) == kept
    });
    // The tasks it still runs keep their state and count on exactly.
    run.produce(200, 200);
    assert_eq!(run.counts_reaching(20), exactly(20));
    assert_eq!(
        counting_directories(&run, &first),
        active_counting(&first.streams)
    );
}

#[test]
fn a_static_member_closed_to_leave_the_group_hands_its_tasks_over_at_once() {
    let Some(run) = Run::new("static-leave") else {
        return;
    };
    let instance = |id: &'static str| {
        move |mut c: StreamsConfig| {
            c.set("group.instance.id", id).unwrap();
            c
        }
    };
    let mut first = run.app("a", instance("static-a"));
    let mut second = run.app("b", instance("static-b"));
    first.streams.start().unwrap();
    second.streams.start().unwrap();
    wait_for("both instances RUNNING", || {
        first.streams.state() == State::Running && second.streams.state() == State::Running
    });
    run.settled(2);
    run.produce(0, 200);
    assert_eq!(run.counts_reaching(10), exactly(10));
    // A static member that closes by default keeps its tasks reserved for
    // the session timeout (45 s); leaving the group hands them over now.
    let began = Instant::now();
    assert!(second.streams.close_with(
        CloseOptions::timeout(Duration::from_secs(30))
            .with_group_membership_operation(GroupMembershipOperation::LeaveGroup)
    ));
    run.settled(1);
    assert!(
        began.elapsed() < Duration::from_secs(30),
        "the tasks moved after {:?}, as at the session timeout",
        began.elapsed()
    );
    run.produce(200, 200);
    assert_eq!(run.counts_reaching(20), exactly(20));
}
