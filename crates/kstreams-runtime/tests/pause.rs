//! `KafkaStreams::pause`, `resume` and `is_paused` (Kafka Streams'
//! KIP-834) on librdkafka's in-process mock cluster: a paused instance
//! processes and punctuates nothing, yet stays in its group (no rebalance,
//! RUNNING throughout, its tasks kept) for longer than its poll interval and
//! session timeout; on resume every record is processed exactly once. The
//! pause is the instance's own: one joining the group is not paused, and
//! the tasks a paused instance gets in a rebalance stay paused.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kstreams_dsl::{Processor, ProcessorContext, ProcessorError, StreamsBuilder};
use kstreams_embedded::rdkafka::consumer::{BaseConsumer, Consumer};
use kstreams_embedded::rdkafka::{ClientConfig, Message};
use kstreams_embedded::{unique_name, EmbeddedKafka};
use kstreams_record::Record;
use kstreams_runtime::kafka::{KafkaStreams, State, StreamsConfig};

use crate::common::{self, Input};

const INPUT: &str = "input";
const OUTPUT: &str = "output";

type S = String;

/// What one instance processed: each input value's count, and the wall-clock
/// punctuations of its tasks.
#[derive(Default)]
struct Seen {
    processed: Mutex<BTreeMap<String, usize>>,
    punctuations: AtomicUsize,
}

impl Seen {
    fn total(&self) -> usize {
        self.processed.lock().unwrap().values().sum()
    }
}

/// The state changes an instance's listener heard: (old, new).
type StateChanges = Arc<Mutex<Vec<(State, State)>>>;

/// Counts each record and punctuates every 100 ms of wall-clock time.
struct Counting(Arc<Seen>);

impl Processor<S, S, S, S> for Counting {
    fn init(&mut self, ctx: &mut ProcessorContext<'_, S, S>) -> Result<(), ProcessorError> {
        ctx.schedule(
            Duration::from_millis(100),
            kstreams_time::PunctuationType::WallClockTime,
        );
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, S, S>,
        record: Record<S, S>,
    ) -> Result<(), ProcessorError> {
        *self
            .0
            .processed
            .lock()
            .unwrap()
            .entry(record.value.clone())
            .or_default() += 1;
        let upper = record.value.to_uppercase();
        ctx.forward(record.with_value(upper))?;
        Ok(())
    }

    fn punctuate(
        &mut self,
        _: &mut ProcessorContext<'_, S, S>,
        _: kstreams_dsl::PunctuationId,
        _: i64,
    ) -> Result<(), ProcessorError> {
        self.0.punctuations.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// An instance of `app_id`, its state changes recorded. Its poll interval
/// and session timeout are 3 s: a thread that stopped polling for longer
/// would leave the group, and its instance would rebalance.
fn app(bootstrap: &str, app_id: &str, seen: Arc<Seen>) -> (KafkaStreams, StateChanges) {
    let _ = env_logger::builder().is_test(true).try_init();
    let builder = StreamsBuilder::new();
    builder
        .stream::<S, S>(INPUT)
        .process(move || Counting(seen.clone()), &[])
        .to(OUTPUT);
    let config = StreamsConfig::new(app_id, bootstrap)
        .state_dir(std::env::temp_dir().join(unique_name("pause-state")))
        .commit_interval(Duration::from_millis(100))
        .client_config("consumer.session.timeout.ms", "3000")
        .client_config("consumer.heartbeat.interval.ms", "500")
        .client_config("consumer.max.poll.interval.ms", "3000");
    let app = KafkaStreams::new(builder.build().unwrap(), config);
    let changes = Arc::new(Mutex::new(Vec::new()));
    let heard = changes.clone();
    app.set_state_listener(move |new, old| heard.lock().unwrap().push((old, new)));
    (app, changes)
}

fn wait_for(what: &str, timeout: Duration, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + timeout;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Values `v<i>` for `range`, record `i` to partition `i % partitions`.
fn produce(bootstrap: &str, range: std::ops::Range<usize>, partitions: usize) {
    let inputs = range.map(|i| {
        Input::new(format!("k{i}"), format!("v{i}"))
            .in_partition((i % partitions) as i32)
            .at(1_000 + i as i64)
    });
    common::produce(bootstrap, INPUT, inputs);
}

fn values(range: std::ops::Range<usize>) -> BTreeSet<String> {
    range.map(|i| format!("v{i}")).collect()
}

/// The partitions of the instance's active tasks now.
fn task_partitions(app: &KafkaStreams) -> BTreeSet<i32> {
    app.metadata()
        .threads
        .iter()
        .flat_map(|t| t.active_tasks.iter().map(|task| task.partition))
        .collect()
}

/// Every record of OUTPUT, read until `want` arrived and then for another
/// second (a duplicate would show).
fn read_output(bootstrap: &str, want: usize) -> Vec<String> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", unique_name("pause-reader"))
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&[OUTPUT]).unwrap();
    let mut read = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut settle: Option<Instant> = None;
    while Instant::now() < deadline && settle.is_none_or(|at| Instant::now() < at) {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            read.push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap());
        }
        if read.len() >= want && settle.is_none() {
            settle = Some(Instant::now() + Duration::from_secs(1));
        }
    }
    read
}

#[test]
fn a_paused_instance_processes_nothing_stays_in_its_group_and_resumes_where_it_stopped() {
    let kafka = EmbeddedKafka::start(1).unwrap();
    kafka.create_topic(INPUT, 2, 1).unwrap();
    kafka.create_topic(OUTPUT, 2, 1).unwrap();
    let bootstrap = kafka.bootstrap_servers();
    let seen = Arc::new(Seen::default());
    let (mut app, changes) = app(&bootstrap, &unique_name("pause"), seen.clone());
    assert!(!app.is_paused());
    app.start().unwrap();
    wait_for("the instance running", Duration::from_secs(60), || {
        app.state() == State::Running
    });
    produce(&bootstrap, 0..100, 2);
    wait_for(
        "the first records processed",
        Duration::from_secs(60),
        || seen.total() == 100,
    );
    wait_for("a punctuation", Duration::from_secs(10), || {
        seen.punctuations.load(Ordering::Relaxed) > 0
    });
    let tasks = task_partitions(&app);
    assert_eq!(tasks, BTreeSet::from([0, 1]));

    app.pause();
    assert!(app.is_paused());
    // The thread reads the flag at its next pass (a poll of 100 ms at most).
    std::thread::sleep(Duration::from_millis(500));
    let changes_before = changes.lock().unwrap().len();
    let punctuations = seen.punctuations.load(Ordering::Relaxed);
    produce(&bootstrap, 100..300, 2);
    // Longer than the poll interval and the session timeout (3 s): a thread
    // that stopped polling would have left the group.
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(seen.total(), 100, "nothing processed while paused");
    assert_eq!(
        seen.punctuations.load(Ordering::Relaxed),
        punctuations,
        "no punctuation while paused"
    );
    assert_eq!(app.state(), State::Running);
    assert_eq!(
        changes.lock().unwrap().len(),
        changes_before,
        "no rebalance while paused: {:?}",
        changes.lock().unwrap()
    );
    assert_eq!(task_partitions(&app), tasks, "the tasks are kept");
    assert!(app.is_paused());
    assert!(app.errors().is_empty(), "{:?}", app.errors());

    app.resume();
    assert!(!app.is_paused());
    wait_for("every record processed", Duration::from_secs(60), || {
        seen.total() == 300
    });
    wait_for("punctuation again", Duration::from_secs(10), || {
        seen.punctuations.load(Ordering::Relaxed) > punctuations
    });
    let output = read_output(&bootstrap, 300);
    assert!(app.close(Duration::from_secs(30)));
    let processed = seen.processed.lock().unwrap().clone();
    assert_eq!(
        processed.keys().cloned().collect::<BTreeSet<_>>(),
        values(0..300)
    );
    assert!(
        processed.values().all(|n| *n == 1),
        "each record processed once: {:?}",
        processed
            .iter()
            .filter(|(_, n)| **n != 1)
            .collect::<Vec<_>>()
    );
    assert_eq!(output.len(), 300, "each output once");
    assert_eq!(
        output.into_iter().collect::<BTreeSet<_>>(),
        values(0..300).iter().map(|v| v.to_uppercase()).collect()
    );
    assert_eq!(
        changes.lock().unwrap().len(),
        changes_before + 2,
        "only the close changed the state: {:?}",
        changes.lock().unwrap()
    );
}

#[test]
fn an_instance_paused_before_start_joins_and_processes_once_resumed() {
    let kafka = EmbeddedKafka::start(1).unwrap();
    kafka.create_topic(INPUT, 2, 1).unwrap();
    kafka.create_topic(OUTPUT, 2, 1).unwrap();
    let bootstrap = kafka.bootstrap_servers();
    produce(&bootstrap, 0..100, 2);
    let seen = Arc::new(Seen::default());
    let (mut app, _) = app(&bootstrap, &unique_name("pause-early"), seen.clone());
    app.pause();
    assert!(app.is_paused());
    app.start().unwrap();
    wait_for("the instance running", Duration::from_secs(60), || {
        app.state() == State::Running
    });
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(seen.total(), 0, "nothing processed while paused");
    assert_eq!(seen.punctuations.load(Ordering::Relaxed), 0);
    assert_eq!(task_partitions(&app), BTreeSet::from([0, 1]));
    app.resume();
    wait_for("every record processed", Duration::from_secs(60), || {
        seen.total() == 100
    });
    assert!(app.close(Duration::from_secs(30)));
    assert!(!app.is_paused());
    let processed = seen.processed.lock().unwrap();
    assert!(processed.values().all(|n| *n == 1));
    assert_eq!(
        processed.keys().cloned().collect::<BTreeSet<_>>(),
        values(0..100)
    );
}

#[test]
fn a_pause_holds_the_tasks_a_rebalance_brings_and_is_the_instance_own() {
    const PARTITIONS: usize = 4;
    const PER_PARTITION: usize = 50;
    let kafka = EmbeddedKafka::start(1).unwrap();
    kafka.create_topic(INPUT, PARTITIONS as i32, 1).unwrap();
    kafka.create_topic(OUTPUT, PARTITIONS as i32, 1).unwrap();
    let bootstrap = kafka.bootstrap_servers();
    let app_id = unique_name("pause-rebalance");
    let (seen_a, seen_b) = (Arc::new(Seen::default()), Arc::new(Seen::default()));
    let (mut a, _) = app(&bootstrap, &app_id, seen_a.clone());
    let (mut b, _) = app(&bootstrap, &app_id, seen_b.clone());
    a.start().unwrap();
    wait_for(
        "the first instance running",
        Duration::from_secs(60),
        || a.state() == State::Running,
    );
    a.pause();
    std::thread::sleep(Duration::from_millis(500));
    // Those before the thread saw the pause.
    let punctuations = seen_a.punctuations.load(Ordering::Relaxed);
    produce(&bootstrap, 0..PARTITIONS * PER_PARTITION, PARTITIONS);

    // The second instance joins: the partitions are split (the range
    // assignor revokes and assigns them all), the second one processes
    // its half, the paused one still nothing.
    b.start().unwrap();
    wait_for(
        "both running with two tasks each",
        Duration::from_secs(60),
        || {
            a.state() == State::Running
                && b.state() == State::Running
                && task_partitions(&a).len() == 2
                && task_partitions(&b).len() == 2
        },
    );
    assert!(a.is_paused() && !b.is_paused());
    wait_for(
        "the second instance's records processed",
        Duration::from_secs(60),
        || seen_b.total() == 2 * PER_PARTITION,
    );
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        seen_a.total(),
        0,
        "the paused instance's new tasks are paused"
    );
    assert_eq!(seen_a.punctuations.load(Ordering::Relaxed), punctuations);

    // The second instance leaves: the paused one takes every partition,
    // and still processes nothing.
    assert!(b.close(Duration::from_secs(30)));
    wait_for(
        "one instance with every task",
        Duration::from_secs(60),
        || a.state() == State::Running && task_partitions(&a).len() == PARTITIONS,
    );
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        seen_a.total(),
        0,
        "the paused instance's new tasks are paused"
    );
    assert!(a.is_paused());
    assert_eq!(seen_a.punctuations.load(Ordering::Relaxed), punctuations);

    a.resume();
    wait_for("every record processed", Duration::from_secs(60), || {
        seen_a.total() + seen_b.total() == PARTITIONS * PER_PARTITION
    });
    let output = read_output(&bootstrap, PARTITIONS * PER_PARTITION);
    assert!(a.close(Duration::from_secs(30)));
    let mut processed = seen_a.processed.lock().unwrap().clone();
    for (value, n) in seen_b.processed.lock().unwrap().iter() {
        *processed.entry(value.clone()).or_default() += n;
    }
    assert_eq!(
        processed.keys().cloned().collect::<BTreeSet<_>>(),
        values(0..PARTITIONS * PER_PARTITION)
    );
    assert!(
        processed.values().all(|n| *n == 1),
        "each record processed once: {:?}",
        processed
            .iter()
            .filter(|(_, n)| **n != 1)
            .collect::<Vec<_>>()
    );
    assert_eq!(output.len(), PARTITIONS * PER_PARTITION, "each output once");
}

/// `group.protocol=streams` on the test broker (`KSTREAMS_BOOTSTRAP`, Kafka
/// 4.2+), with a standby of each counting task on the other instance: the
/// paused instance processes nothing and applies nothing to its standbys,
/// the group does not move (same epoch, both members), the other instance
/// goes on; after resume the counts are exact and the standbys catch up.
#[cfg(feature = "rocksdb")]
mod streams_group {
    use super::*;

    use std::io::Write;
    use std::sync::atomic::AtomicU64;

    use kstreams_dsl::{Materialized, Produced};
    use kstreams_embedded::{create_topic, test_broker};
    use kstreams_group::{Admin, ConnectionConfig, GroupDescription, TaskId};
    use kstreams_record::{I64Serde, Nullable, StringSerde};
    use kstreams_runtime::kafka::{StandbyUpdateListener, SuspendReason, TopicPartition};

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
                let _ = std::io::stderr()
                    .write_all(b"skipped: the broker has no streams groups (Kafka 4.2+)\n");
                None
            }
            Err(e) => panic!("the broker at {bootstrap} does not answer: {e}"),
        }
    }

    /// Changelog records applied to an instance's standby stores.
    #[derive(Default)]
    struct Applied(AtomicU64);

    impl StandbyUpdateListener for Applied {
        fn on_update_start(&self, _: &TopicPartition, _: &str, _: i64) {}
        fn on_batch_loaded(&self, _: &TopicPartition, _: &str, _: &str, _: i64, n: u64, _: i64) {
            self.0.fetch_add(n, Ordering::SeqCst);
        }
        fn on_update_suspended(
            &self,
            _: &TopicPartition,
            _: &str,
            _: i64,
            _: i64,
            _: SuspendReason,
        ) {
        }
    }

    struct Run {
        bootstrap: String,
        input: String,
        output: String,
        app_id: String,
    }

    impl Run {
        /// Counts the input's values per instance (`seen`), re-keyed by
        /// value into sub-topology 1, which counts in a logged store.
        fn app(&self, seen: Arc<Seen>) -> KafkaStreams {
            let mut config = StreamsConfig::new(&self.app_id, &self.bootstrap)
                .commit_interval(Duration::from_millis(100))
                .state_dir(std::env::temp_dir().join(unique_name("pause-sg-state")));
            config.set("group.protocol", "streams").unwrap();
            config.set("num.standby.replicas", "1").unwrap();
            // Every count update is a changelog record.
            config.set("statestore.cache.max.bytes", "0").unwrap();
            let builder = StreamsBuilder::new();
            builder
                .stream::<S, S>(&self.input)
                .peek(move |_, v: &S| {
                    *seen.processed.lock().unwrap().entry(v.clone()).or_default() += 1;
                })
                .group_by(|_: &S, value: &S| value.clone())
                .count_with(None, Materialized::as_("counts"))
                .to_stream()
                .to_with(
                    &self.output,
                    Produced::with(StringSerde, Nullable(I64Serde)),
                );
            KafkaStreams::new(builder.build().unwrap(), config)
        }

        /// Records `from..from + n`, keyed `r<i>`, valued `k<i % KEYS>`.
        fn produce(&self, from: usize, n: usize) {
            let inputs =
                (from..from + n).map(|i| Input::new(format!("r{i}"), format!("k{}", i % KEYS)));
            common::produce(&self.bootstrap, &self.input, inputs);
        }

        /// The latest count per key once every key reached `each`, and a few
        /// quiet seconds more (a count past it would show).
        fn counts_reaching(&self, each: i64) -> BTreeMap<String, i64> {
            let consumer: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", &self.bootstrap)
                .set("group.id", unique_name("pause-counts-reader"))
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
    }

    fn exactly(each: i64) -> BTreeMap<String, i64> {
        (0..KEYS).map(|k| (format!("k{k}"), each)).collect()
    }

    #[test]
    fn a_paused_member_keeps_its_tasks_updates_no_standby_and_counts_stay_exact() {
        let Some(bootstrap) = streams_broker() else {
            return;
        };
        let _ = env_logger::builder().is_test(true).try_init();
        let run = Run {
            input: unique_name("pause-sg-in"),
            output: unique_name("pause-sg-out"),
            app_id: unique_name("pause-sg-app"),
            bootstrap,
        };
        create_topic(&run.bootstrap, &run.input, PARTITIONS, 1).unwrap();
        create_topic(&run.bootstrap, &run.output, PARTITIONS, 1).unwrap();
        let (seen_a, seen_b) = (Arc::new(Seen::default()), Arc::new(Seen::default()));
        let mut a = run.app(seen_a.clone());
        let mut b = run.app(seen_b.clone());
        let applied = Arc::new(Applied::default());
        a.set_standby_update_listener(applied.clone()).unwrap();
        let changes = Arc::new(Mutex::new(Vec::new()));
        let heard = changes.clone();
        a.set_state_listener(move |new, old| heard.lock().unwrap().push((old, new)));
        a.start().unwrap();
        b.start().unwrap();
        // Settled: both RUNNING, and a standby of each counting task placed.
        let counting: BTreeSet<TaskId> = (0..PARTITIONS).map(|p| TaskId::new("1", p)).collect();
        wait_for(
            "a settled group with standbys",
            Duration::from_secs(90),
            || {
                // Running first: the group may not exist before
                // (GroupIdNotFound).
                if a.state() != State::Running || b.state() != State::Running {
                    return false;
                }
                let group = run.describe();
                let standby: BTreeSet<TaskId> = group
                    .members
                    .iter()
                    .flat_map(|m| m.assignment.standby.iter())
                    .collect();
                standby == counting
            },
        );
        run.produce(0, 400);
        assert_eq!(run.counts_reaching(20), exactly(20));
        wait_for("the standbys applying", Duration::from_secs(30), || {
            applied.0.load(Ordering::SeqCst) > 0
        });

        a.pause();
        std::thread::sleep(Duration::from_secs(1));
        let group = run.describe();
        let (applied_paused, processed_a, processed_b) = (
            applied.0.load(Ordering::SeqCst),
            seen_a.total(),
            seen_b.total(),
        );
        let changes_before = changes.lock().unwrap().len();
        run.produce(400, 400);
        wait_for(
            "the other member processing",
            Duration::from_secs(60),
            || seen_b.total() > processed_b,
        );
        std::thread::sleep(Duration::from_secs(5));
        assert_eq!(
            seen_a.total(),
            processed_a,
            "nothing processed while paused"
        );
        assert_eq!(
            applied.0.load(Ordering::SeqCst),
            applied_paused,
            "no standby updated while paused"
        );
        assert_eq!(a.state(), State::Running);
        assert_eq!(changes.lock().unwrap().len(), changes_before);
        let now = run.describe();
        assert_eq!(now.group_epoch, group.group_epoch, "no rebalance: {now:?}");
        assert_eq!(now.members.len(), 2);
        assert!(a.is_paused() && !b.is_paused());

        a.resume();
        assert_eq!(run.counts_reaching(40), exactly(40));
        wait_for("the standbys catching up", Duration::from_secs(30), || {
            applied.0.load(Ordering::SeqCst) > applied_paused
        });
        assert!(a.close(Duration::from_secs(30)));
        assert!(b.close(Duration::from_secs(30)));
        let mut processed = seen_a.processed.lock().unwrap().clone();
        for (value, n) in seen_b.processed.lock().unwrap().iter() {
            *processed.entry(value.clone()).or_default() += n;
        }
        assert_eq!(
            processed,
            (0..KEYS).map(|k| (format!("k{k}"), 40)).collect()
        );
    }
}
