//! `group.protocol=streams` (KIP-1071) on a real broker: the stream threads
//! are members of a streams group and run the tasks the broker assigns.
//! Skipped without a broker, or on one without streams groups (before 4.2).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kstreams_dsl::{Materialized, Produced, StreamsBuilder};
use kstreams_embedded::rdkafka::consumer::{BaseConsumer, Consumer};
use kstreams_embedded::rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use kstreams_embedded::rdkafka::{ClientConfig, Message};
use kstreams_embedded::{create_topic, test_broker, unique_name};
use kstreams_group::{Admin, ConnectionConfig, GroupDescription, TaskId};
use kstreams_record::{Headers, I64Serde, Nullable, StringSerde};
use kstreams_runtime::kafka::{
    HostInfo, KafkaStreams, ProcessingGuarantee, QueryError, QueryableStoreTypes,
    StandbyUpdateListener, State, StateRestoreListener, StoreQueryParameters, StreamsConfig,
    SuspendReason, TopicPartition,
};

const PARTITIONS: i32 = 4;
const KEYS: usize = 20;

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
    /// Set: the first record keyed `stall` holds its stream thread for
    /// STALL (longer than the poll interval the test allows).
    stall: Arc<AtomicBool>,
}

const STALL: Duration = Duration::from_secs(6);

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
            stall: Arc::new(AtomicBool::new(false)),
        })
    }

    /// Counts the input's values: sub-topology 0 re-keys by value into a
    /// repartition topic, sub-topology 1 counts in a logged store.
    fn app(&self, instance: &str, configure: impl FnOnce(StreamsConfig) -> StreamsConfig) -> App {
        let dir = std::env::temp_dir().join(unique_name(&format!("kstreams-sg-{instance}")));
        let mut config = StreamsConfig::new(&self.app_id, &self.bootstrap)
            .commit_interval(Duration::from_millis(100))
            .state_dir(&dir);
        config.set("group.protocol", "streams").unwrap();
        config
            .set("application.server", &format!("{instance}.local:8080"))
            .unwrap();
        let config = configure(config);
        let builder = StreamsBuilder::new();
        let stall = self.stall.clone();
        builder
            .stream::<String, String>(&self.input)
            .group_by(move |key: &String, value: &String| {
                if key == "stall" && stall.swap(false, Ordering::SeqCst) {
                    std::thread::sleep(STALL);
                }
                value.clone()
            })
            .count_with(None, Materialized::as_("counts"))
            .to_stream()
            .to_with(
                &self.output,
                Produced::with(StringSerde, Nullable(I64Serde)),
            );
        let streams = KafkaStreams::new(builder.build().unwrap(), config);
        App { streams, dir }
    }

    /// `n` records from `from` on, values spread over KEYS keys.
    fn produce(&self, from: usize, n: usize) {
        self.produce_keyed(from, n, |i| format!("r{i}"));
    }

    fn produce_keyed(&self, from: usize, n: usize, key_of: impl Fn(usize) -> String) {
        let producer: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .set("linger.ms", "5")
            .create()
            .unwrap();
        for i in from..from + n {
            let (key, value) = (key_of(i), format!("k{}", i % KEYS));
            loop {
                match producer.send(BaseRecord::to(&self.input).key(&key).payload(&value)) {
                    Ok(()) => break,
                    Err(_) => producer.poll(Duration::from_millis(50)),
                }
            }
            producer.poll(Duration::ZERO);
        }
        producer.flush(Duration::from_secs(30)).unwrap();
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

    /// Waits until the group has `members` members that own their tasks
    /// and together run every task once; returns the members' tasks.
    fn settled(&self, members: usize) -> Vec<BTreeSet<TaskId>> {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let group = self.describe();
            let owned: Vec<BTreeSet<TaskId>> = group
                .members
                .iter()
                .map(|m| m.assignment.active.iter().collect())
                .collect();
            let all: BTreeSet<TaskId> = owned.iter().flatten().cloned().collect();
            let total: usize = owned.iter().map(BTreeSet::len).sum();
            if group.members.len() == members && all == all_tasks() && total == all.len() {
                return owned;
            }
            assert!(
                Instant::now() < deadline,
                "the group did not settle on {members} members: {group:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The group's committed offsets of the input, summed.
    fn committed_input(&self) -> i64 {
        let admin = Admin::new(ConnectionConfig::new(&self.bootstrap));
        let partitions: Vec<i32> = (0..PARTITIONS).collect();
        runtime()
            .block_on(admin.committed_offsets(&self.app_id, &self.input, &partitions))
            .unwrap()
            .iter()
            .map(|c| c.offset)
            .sum()
    }
}

/// Both sub-topologies' tasks, one per input partition each.
fn all_tasks() -> BTreeSet<TaskId> {
    (0..PARTITIONS)
        .flat_map(|p| [TaskId::new("0", p), TaskId::new("1", p)])
        .collect()
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

fn wait_until_running(apps: &[&App]) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while !apps.iter().all(|a| a.streams.state() == State::Running) {
        assert!(Instant::now() < deadline, "instances did not reach RUNNING");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn exactly(each: i64) -> BTreeMap<String, i64> {
    (0..KEYS).map(|k| (format!("k{k}"), each)).collect()
}

fn counts_end_to_end(guarantee: ProcessingGuarantee) {
    let Some(run) = Run::new("sg-count") else {
        return;
    };
    let mut app = run.app("a", |c| {
        c.num_stream_threads(2).processing_guarantee(guarantee)
    });
    app.streams.start().unwrap();
    run.produce(0, 400);
    assert_eq!(run.counts_reaching(20), exactly(20));

    // The group is a streams group: one member per stream thread, both of
    // this process, with the endpoint, running every task between them.
    let owned = run.settled(2);
    assert!(owned.iter().all(|tasks| !tasks.is_empty()), "{owned:?}");
    let group = run.describe();
    assert_eq!(group.state, "Stable", "{group:?}");
    let processes: BTreeSet<&str> = group
        .members
        .iter()
        .map(|m| m.process_id.as_str())
        .collect();
    assert_eq!(processes.len(), 1, "{group:?}");
    for member in &group.members {
        let endpoint = member.user_endpoint.as_ref().expect("the endpoint");
        assert_eq!((endpoint.host.as_str(), endpoint.port), ("a.local", 8080));
    }
    // Committed as the members (or in the transaction): every input record.
    let deadline = Instant::now() + Duration::from_secs(30);
    while run.committed_input() < 400 {
        assert!(Instant::now() < deadline, "input offsets not committed");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(app.streams.close(Duration::from_secs(30)));
    // Closing left the group.
    assert!(run.describe().members.is_empty(), "{:?}", run.describe());
}

#[test]
fn a_streams_group_app_counts_end_to_end_and_shows_as_a_streams_group() {
    counts_end_to_end(ProcessingGuarantee::AtLeastOnce);
}

/// Under exactly-once the offsets go into the transaction with group
/// metadata that names no member, which a streams group accepts.
#[test]
fn a_streams_group_app_counts_end_to_end_under_exactly_once() {
    counts_end_to_end(ProcessingGuarantee::ExactlyOnceV2);
}

#[test]
fn two_instances_split_the_tasks_and_one_takes_over_when_the_other_closes() {
    let Some(run) = Run::new("sg-split") else {
        return;
    };
    let mut first = run.app("a", |c| c);
    let mut second = run.app("b", |c| c);
    first.streams.start().unwrap();
    second.streams.start().unwrap();
    wait_until_running(&[&first, &second]);
    let owned = run.settled(2);
    assert!(owned.iter().all(|tasks| !tasks.is_empty()), "{owned:?}");
    run.produce(0, 400);
    assert_eq!(run.counts_reaching(20), exactly(20));

    // The second leaves: the first takes its tasks over, their stores
    // restored from the changelogs, and counts on from the commits.
    assert!(second.streams.close(Duration::from_secs(30)));
    run.settled(1);
    run.produce(400, 400);
    assert_eq!(run.counts_reaching(40), exactly(40));
    assert!(first.streams.close(Duration::from_secs(30)));
}

/// Interactive queries across instances: the endpoints the group sends
/// name, for every key, the instance whose active task holds it, and that
/// instance's local store has the key's count while the other's has not.
#[test]
fn key_queries_find_the_instance_that_holds_the_key_from_the_group_endpoints() {
    let Some(run) = Run::new("sg-iq") else {
        return;
    };
    let mut first = run.app("a", |c| c);
    let mut second = run.app("b", |c| c);
    first.streams.start().unwrap();
    second.streams.start().unwrap();
    wait_until_running(&[&first, &second]);
    run.settled(2);
    run.produce(0, 400);
    assert_eq!(run.counts_reaching(20), exactly(20));

    let host = |name: &str| HostInfo {
        host: format!("{name}.local"),
        port: 8080,
    };
    // The instances whose members run a counting task (sub-topology 1): the
    // broker may give both halves of the topology to one member each.
    let counting: BTreeSet<HostInfo> = run
        .describe()
        .members
        .iter()
        .filter(|m| m.assignment.active.iter().any(|t| t.subtopology == "1"))
        .filter_map(|m| m.user_endpoint.as_ref())
        .map(|e| HostInfo {
            host: e.host.clone(),
            port: e.port,
        })
        .collect();
    // The endpoints arrive with a heartbeat after the assignment settled.
    let deadline = Instant::now() + Duration::from_secs(60);
    let clients = loop {
        let clients = first.streams.metadata_for_all_streams_clients();
        if let Ok(clients) = &clients {
            let stores: BTreeSet<HostInfo> = clients
                .iter()
                .filter(|c| c.state_store_names.contains("counts"))
                .map(|c| c.host_info.clone())
                .collect();
            if clients.len() == 2 && stores == counting {
                break clients.clone();
            }
        }
        assert!(
            Instant::now() < deadline,
            "no endpoints for both instances: {clients:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let hosts: BTreeSet<HostInfo> = clients.iter().map(|c| c.host_info.clone()).collect();
    assert_eq!(hosts, BTreeSet::from([host("a"), host("b")]));
    let by_store = second.streams.streams_metadata_for_store("counts").unwrap();
    assert_eq!(by_store.len(), counting.len(), "{by_store:?}");

    let local = |app: &App, partition: i32| {
        app.streams
            .store(
                StoreQueryParameters::from_name_and_type(
                    "counts",
                    QueryableStoreTypes::key_value_store::<String, i64>(),
                )
                .with_partition(partition),
            )
            .unwrap()
    };
    let mut answered_by = BTreeSet::new();
    for k in 0..KEYS {
        let key = format!("k{k}");
        let metadata = first
            .streams
            .query_metadata_for_key("counts", &key, &StringSerde)
            .unwrap();
        assert_eq!(
            second
                .streams
                .query_metadata_for_key("counts", &key, &StringSerde)
                .unwrap(),
            metadata
        );
        let (holder, other) = if metadata.active_host == host("a") {
            (&first, &second)
        } else {
            (&second, &first)
        };
        assert_eq!(
            local(holder, metadata.partition).get(&key).unwrap(),
            Some(20),
            "{key}"
        );
        let elsewhere = local(other, metadata.partition).get(&key);
        assert!(
            elsewhere.is_err(),
            "{key} also on the other instance: {elsewhere:?}"
        );
        answered_by.insert(metadata.active_host.clone());
        // The same through a StreamPartitioner: one that leaves the
        // choice to the default agrees, one that names a partition is
        // taken at its word, one that names two is an error.
        let default = |_: &str, _: &String, _: &(), _: &Headers, _: i32| None;
        assert_eq!(
            first
                .streams
                .query_metadata_for_key_with_stream_partitioner(
                    "counts",
                    &key,
                    &StringSerde,
                    &default
                )
                .unwrap(),
            metadata
        );
        let last = |_: &str, _: &String, _: &(), _: &Headers, n: i32| Some(vec![n - 1]);
        let named = first
            .streams
            .query_metadata_for_key_with_stream_partitioner("counts", &key, &StringSerde, &last)
            .unwrap();
        assert_eq!(named.partition, PARTITIONS - 1, "{key}");
        let two = |_: &str, _: &String, _: &(), _: &Headers, _: i32| Some(vec![0, 1]);
        let refused = first
            .streams
            .query_metadata_for_key_with_stream_partitioner("counts", &key, &StringSerde, &two);
        assert!(
            matches!(&refused, Err(QueryError::Store { message, .. }) if message.contains("exactly one")),
            "{refused:?}"
        );
    }
    assert_eq!(answered_by, counting, "the keys' holders");
    assert!(second.streams.close(Duration::from_secs(30)));
    assert!(first.streams.close(Duration::from_secs(30)));
}

/// What an instance's standby tasks and restorations did.
#[derive(Default)]
struct StandbyLog {
    /// Changelog records applied to standby stores.
    applied: AtomicU64,
    /// Standby stores closed (promoted, or given up before the broker
    /// makes the task active here), and where they were.
    suspended: Mutex<Vec<(i32, i64, SuspendReason)>>,
    /// Changelog records restored when active tasks were created.
    restored: AtomicU64,
}

impl StandbyUpdateListener for StandbyLog {
    fn on_update_start(&self, _: &TopicPartition, _: &str, _: i64) {}
    fn on_batch_loaded(&self, _: &TopicPartition, _: &str, _: &str, _: i64, n: u64, _: i64) {
        self.applied.fetch_add(n, Ordering::SeqCst);
    }
    fn on_update_suspended(
        &self,
        p: &TopicPartition,
        _: &str,
        at: i64,
        _: i64,
        reason: SuspendReason,
    ) {
        self.suspended
            .lock()
            .unwrap()
            .push((p.partition, at, reason));
    }
}

impl StateRestoreListener for StandbyLog {
    fn on_restore_start(&self, _: &TopicPartition, _: &str, _: i64, _: i64) {}
    fn on_batch_restored(&self, _: &TopicPartition, _: &str, _: i64, n: u64) {
        self.restored.fetch_add(n, Ordering::SeqCst);
    }
    fn on_restore_end(&self, _: &TopicPartition, _: &str, _: u64) {}
}

/// `num.standby.replicas=1`: each instance keeps the other's count stores
/// current from their changelogs; when one leaves, the other promotes its
/// standbys and restores (almost) nothing, and counts go on exactly.
#[test]
fn standby_tasks_keep_copies_current_and_are_promoted_without_a_full_restore() {
    let Some(run) = Run::new("sg-standby") else {
        return;
    };
    let with_standby = |mut c: StreamsConfig| {
        c.set("num.standby.replicas", "1").unwrap();
        // Every count update is a changelog record: 400 of them over the
        // four counting tasks.
        c.set("statestore.cache.max.bytes", "0").unwrap();
        c
    };
    // The broker takes task offsets at most this often (15 s is its least).
    let admin = Admin::new(ConnectionConfig::new(&run.bootstrap));
    runtime()
        .block_on(
            admin.set_group_configs(&run.app_id, &[("streams.task.offset.interval.ms", "15000")]),
        )
        .unwrap();
    let mut first = run.app("a", with_standby);
    let mut second = run.app("b", with_standby);
    let log = Arc::new(StandbyLog::default());
    first
        .streams
        .set_standby_update_listener(log.clone())
        .unwrap();
    first
        .streams
        .set_global_state_restore_listener(log.clone())
        .unwrap();
    first.streams.start().unwrap();
    second.streams.start().unwrap();
    wait_until_running(&[&first, &second]);
    run.settled(2);
    // The broker places one standby of each counting task (sub-topology 1,
    // the stateful one) on the member without its active task.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let group = run.describe();
        let standby: BTreeSet<TaskId> = group
            .members
            .iter()
            .flat_map(|m| m.assignment.standby.iter())
            .collect();
        let counting: BTreeSet<TaskId> = (0..PARTITIONS).map(|p| TaskId::new("1", p)).collect();
        if standby == counting {
            break;
        }
        assert!(Instant::now() < deadline, "no standbys placed: {group:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    run.produce(0, 400);
    assert_eq!(run.counts_reaching(20), exactly(20));
    let deadline = Instant::now() + Duration::from_secs(30);
    while log.applied.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the standbys applied nothing");
        std::thread::sleep(Duration::from_millis(100));
    }
    // A standby is readable as a stale store: the counts of the second
    // instance's partitions, from the first one's standby copies.
    let stale = first
        .streams
        .store(
            StoreQueryParameters::from_name_and_type(
                "counts",
                QueryableStoreTypes::key_value_store::<String, i64>(),
            )
            .enable_stale_stores(),
        )
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let all: BTreeMap<String, i64> = stale.all().unwrap_or_default().into_iter().collect();
        if all == exactly(20) {
            break;
        }
        assert!(Instant::now() < deadline, "stale reads: {all:?}");
        std::thread::sleep(Duration::from_millis(100));
    }

    // Each member reports its standbys' changelog positions and ends (the
    // offsets the broker's assignor weighs), as Kafka Streams does.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let group = run.describe();
        let reported = group.members.iter().all(|member| {
            let standbys: BTreeSet<TaskId> = member.assignment.standby.iter().collect();
            let at = |offsets: &[kstreams_group::TaskOffset], task: &TaskId| {
                offsets.iter().find(|o| &o.task == task).map(|o| o.offset)
            };
            !standbys.is_empty()
                && standbys.iter().all(|task| {
                    matches!(
                        (at(&member.task_offsets, task), at(&member.task_end_offsets, task)),
                        (Some(offset), Some(end)) if offset > 0 && end > offset
                    )
                })
        });
        if reported {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no standby offsets reported: {group:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    let restored_before = log.restored.load(Ordering::SeqCst);
    assert!(second.streams.close(Duration::from_secs(30)));
    run.settled(1);
    run.produce(400, 400);
    assert_eq!(run.counts_reaching(40), exactly(40));
    // Each standby closed once, as its task became active here (promoted,
    // or first given up when the broker revokes a standby before it assigns
    // the active task to the same member).
    let promoted = log.suspended.lock().unwrap().clone();
    assert!(!promoted.is_empty(), "no standby closed");
    // The promoted stores restored at most what the second instance wrote
    // after the standby's last update (its final commit), not their whole
    // changelogs (the standbys held every record up to `at`).
    let restored = log.restored.load(Ordering::SeqCst) - restored_before;
    let held: i64 = promoted.iter().map(|(_, at, _)| at + 1).sum();
    eprintln!("promoted {promoted:?}: the standbys held {held} records, {restored} restored");
    assert!(
        held >= 20,
        "the promoted standbys held {held} records: {promoted:?}"
    );
    assert!(
        restored < 20,
        "{restored} records restored after promotion ({promoted:?})"
    );
    assert!(first.streams.close(Duration::from_secs(30)));
}

/// A thread that misses its poll deadline is out of the group: its tasks
/// are lost, closed without committing (the open transaction aborted), and
/// it rejoins and runs them again from the last commit, so exactly-once
/// counts stay exact.
#[test]
fn a_thread_that_misses_its_poll_deadline_loses_its_tasks_and_counts_stay_exact() {
    let Some(run) = Run::new("sg-lost") else {
        return;
    };
    let mut app = run.app("a", |mut c| {
        // librdkafka wants a session timeout below the poll interval; the
        // consumer joins no group, so only the member uses the latter.
        c.set("main.consumer.session.timeout.ms", "2000").unwrap();
        c.set("main.consumer.max.poll.interval.ms", "3000").unwrap();
        c.processing_guarantee(ProcessingGuarantee::ExactlyOnceV2)
    });
    app.streams.start().unwrap();
    wait_until_running(&[&app]);
    run.produce(0, 200);
    assert_eq!(run.counts_reaching(10), exactly(10));
    run.stall.store(true, Ordering::SeqCst);
    // 200 more, one of them keyed "stall" (the 300th: value k0).
    run.produce_keyed(200, 200, |i| {
        if i == 300 {
            "stall".to_string()
        } else {
            format!("r{i}")
        }
    });
    assert_eq!(run.counts_reaching(20), exactly(20));
    assert!(!run.stall.load(Ordering::SeqCst), "the stall happened");
    run.settled(1);
    assert!(app.streams.close(Duration::from_secs(30)));
}

/// Kafka Streams' `SHUTDOWN_APPLICATION` reaches every instance: the
/// instance whose thread meets a poison record asks the streams group (its
/// only thread is dead, so a new one joins to ask), and the broker's answer
/// stops the other instance too, both ending in ERROR.
#[test]
fn shutdown_application_stops_every_instance_of_the_group() {
    use kstreams_runtime::kafka::{RuntimeError, StreamThreadExceptionResponse};
    let Some(run) = Run::new("sg-shutdown-app") else {
        return;
    };
    let instance = |name: &str| {
        let builder = StreamsBuilder::new();
        builder
            .stream::<String, String>(&run.input)
            .map_values(|v| {
                assert_ne!(v, "poison", "a poison record");
                v
            })
            .to(&run.output);
        let dir = std::env::temp_dir().join(unique_name(&format!("kstreams-sg-{name}")));
        let mut config = StreamsConfig::new(&run.app_id, &run.bootstrap)
            .commit_interval(Duration::from_millis(100))
            .state_dir(&dir);
        config.set("group.protocol", "streams").unwrap();
        let streams = KafkaStreams::new(builder.build().unwrap(), config);
        streams.set_uncaught_exception_handler(|_: &RuntimeError| {
            StreamThreadExceptionResponse::ShutdownApplication
        });
        App { streams, dir }
    };
    let mut first = instance("a");
    let mut second = instance("b");
    first.streams.start().unwrap();
    second.streams.start().unwrap();
    wait_until_running(&[&first, &second]);
    run.produce_keyed(0, 1, |_| "k".to_owned());
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &run.bootstrap)
        .create()
        .unwrap();
    producer
        .send(BaseRecord::to(&run.input).key("p").payload("poison"))
        .map_err(|(e, _)| e)
        .unwrap();
    producer.flush(Duration::from_secs(30)).unwrap();

    let deadline = Instant::now() + Duration::from_secs(90);
    while [&first, &second]
        .iter()
        .any(|a| a.streams.state() != State::Error)
    {
        assert!(
            Instant::now() < deadline,
            "not every instance stopped: {:?} {:?} / {:?} {:?}",
            first.streams.state(),
            first.streams.errors(),
            second.streams.state(),
            second.streams.errors()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let errors = [first.streams.errors(), second.streams.errors()];
    let poisoned = errors
        .iter()
        .filter(|e| e.iter().any(|e| e.contains("a poison record")))
        .count();
    assert_eq!(poisoned, 1, "one instance met the record: {errors:?}");
    for e in &errors {
        assert!(
            e.iter()
                .any(|e| e.starts_with("the application was shut down")
                    && !e.contains("only this instance")),
            "each instance stopped at the group's word: {errors:?}"
        );
    }
}

/// Kafka's own `kafka-streams-groups.sh` (`StreamsGroupCommand`, on the
/// test cluster's jars: KSTREAMS_KAFKA_CLASSPATH) with `args`; what it
/// printed. `None` where the variable is not set (skipped; a failure in
/// CI).
fn kafka_streams_groups(bootstrap: &str, args: &[&str]) -> Option<String> {
    const CLASSPATH_ENV: &str = "KSTREAMS_KAFKA_CLASSPATH";
    let Ok(classpath) = std::env::var(CLASSPATH_ENV) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "{CLASSPATH_ENV} is not set but CI is: run the tests through `cargo xtask ci`"
        );
        let line = format!("skipped kafka-streams-groups.sh: {CLASSPATH_ENV} not set\n");
        let _ = std::io::stderr().write_all(line.as_bytes());
        return None;
    };
    let output = std::process::Command::new("java")
        .args(["-cp", classpath.trim()])
        .arg("org.apache.kafka.tools.streams.StreamsGroupCommand")
        .args(["--bootstrap-server", bootstrap])
        .args(args)
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "kafka-streams-groups.sh {args:?} failed: {printed}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    Some(printed)
}

/// The rows of a table `kafka-streams-groups.sh` printed, split on
/// whitespace, header left out.
fn table_rows(printed: &str) -> Vec<Vec<&str>> {
    printed
        .lines()
        .filter(|l| !l.trim().is_empty())
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect()
}

#[test]
fn kafka_streams_groups_describes_a_kstreams_group_and_resets_its_offsets() {
    let Some(run) = Run::new("sg-tool") else {
        return;
    };
    let group = run.app_id.clone();
    let tool = |args: &[&str]| kafka_streams_groups(&run.bootstrap, args);
    let mut app = run.app("a", |c| c);
    app.streams.start().unwrap();
    wait_until_running(&[&app]);
    run.settled(1);
    run.produce(0, 400);
    assert_eq!(run.counts_reaching(20), exactly(20));
    let Some(listed) = tool(&["--list"]) else {
        return;
    };
    assert!(listed.lines().any(|l| l.trim() == group), "{listed}");

    let state = tool(&["--describe", "--group", &group, "--state", "--verbose"]).unwrap();
    let rows = table_rows(&state);
    assert!(
        rows.len() == 1 && rows[0].contains(&"Stable") && rows[0].last() == Some(&"1"),
        "one member, stable: {state}"
    );
    // The member: a streams member of the thread's client id, running
    // both sub-topologies' four tasks.
    let members = tool(&["--describe", "--group", &group, "--members", "--verbose"]).unwrap();
    let lines: Vec<&str> = members
        .lines()
        .filter(|l| !l.trim().is_empty())
        .skip(1)
        .collect();
    assert_eq!(lines.len(), 1, "{members}");
    assert!(
        lines[0].contains(" streams ")
            && lines[0].contains("-StreamThread-1-consumer")
            && lines[0].contains("ACTIVE: 0:[0,1,2,3]; 1:[0,1,2,3];"),
        "{members}"
    );
    // Offsets and lag of the input and the repartition topic: all read.
    let offsets = tool(&["--describe", "--group", &group, "--offsets", "--verbose"]).unwrap();
    let rows = table_rows(&offsets);
    let input: Vec<_> = rows.iter().filter(|r| r[1] == run.input).collect();
    assert_eq!(input.len(), PARTITIONS as usize, "{offsets}");
    assert!(
        input.iter().all(|r| r[3] == "100" && r[5] == "100"),
        "100 records read of each input partition: {offsets}"
    );
    assert!(
        rows.len() == 2 * PARTITIONS as usize && rows.iter().all(|r| r.last() == Some(&"0")),
        "input and repartition topic without lag: {offsets}"
    );

    // Reset while the application is down, its internal topics deleted
    // (found through the topology the group holds); it starts again from
    // the input's start on a new state directory, as Kafka Streams' reset
    // asks, and counts afresh: nothing is restored.
    assert!(app.streams.close(Duration::from_secs(30)));
    drop(app);
    let reset = tool(&[
        "--reset-offsets",
        "--group",
        &group,
        "--all-input-topics",
        "--to-earliest",
        "--delete-all-internal-topics",
        "--execute",
    ])
    .unwrap();
    let rows = table_rows(&reset);
    assert!(
        rows.len() == PARTITIONS as usize && rows.iter().all(|r| r.last() == Some(&"0")),
        "{reset}"
    );
    assert_eq!(run.committed_input(), 0, "the reset committed offsets 0");
    let mut again = run.app("b", |c| c);
    again.streams.start().unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    while run.committed_input() < 400 {
        assert!(
            Instant::now() < deadline,
            "the input was not read again: {:?}",
            again.streams.errors()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(run.counts_reaching(20), exactly(20), "counted afresh");
}
