//! The application's restore listener on librdkafka's in-process mock
//! cluster: a store restoring 60,000 changelog records, a global table
//! loading 20,000 and a bootstrap table of 10,000 are each heard as start,
//! batches and end with Kafka's figures, and the restore metrics and the
//! instance's restore progress agree. And a restore that takes longer than
//! the poll interval: the thread keeps its group membership, restores once,
//! and its restored task processes and commits meanwhile.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kstreams_dsl::{Consumed, Materialized, Produced, StreamsBuilder};
use kstreams_embedded::rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use kstreams_embedded::rdkafka::ClientConfig;
use kstreams_embedded::EmbeddedKafka;
use kstreams_record::{I64Serde, Nullable, StringSerde};
use kstreams_runtime::kafka::{
    KafkaStreams, ProcessingGuarantee, RuntimeError, State, StateRestoreListener, StreamsConfig,
    TopicPartition,
};

const APP: &str = "restore-listener";
const ORDERS: &str = "orders";
const PRICES: &str = "prices";
const RATES: &str = "rates";
const COUNTS: &str = "order-counts";
const PARTITIONS: i32 = 2;
const CHANGELOG_RECORDS: usize = 60_000;
const GLOBAL_RECORDS: usize = 20_000;
const BOOTSTRAP_RECORDS: usize = 10_000;

/// One callback, as heard.
#[derive(Debug, Clone, PartialEq)]
enum Call {
    Start(i64, i64),
    Batch(i64, u64),
    End(u64),
    Suspended(u64),
}

/// Every callback per (store, partition), in order.
#[derive(Default)]
struct Recorder(Mutex<BTreeMap<(String, TopicPartition), Vec<Call>>>);

impl Recorder {
    fn push(&self, partition: &TopicPartition, store: &str, call: Call) {
        self.0
            .lock()
            .unwrap()
            .entry((store.to_string(), partition.clone()))
            .or_default()
            .push(call);
    }

    fn ended(&self) -> usize {
        self.0
            .lock()
            .unwrap()
            .values()
            .filter(|calls| matches!(calls.last(), Some(Call::End(_))))
            .count()
    }
}

impl StateRestoreListener for Recorder {
    fn on_restore_start(&self, partition: &TopicPartition, store: &str, start: i64, end: i64) {
        self.push(partition, store, Call::Start(start, end));
    }
    fn on_batch_restored(&self, partition: &TopicPartition, store: &str, end: i64, n: u64) {
        self.push(partition, store, Call::Batch(end, n));
    }
    fn on_restore_end(&self, partition: &TopicPartition, store: &str, total: u64) {
        self.push(partition, store, Call::End(total));
    }
    fn on_restore_suspended(&self, partition: &TopicPartition, store: &str, total: u64) {
        self.push(partition, store, Call::Suspended(total));
    }
}

/// Writes `count` records spread round-robin over the partitions of
/// `topic`, with keys `prefix{i}`.
fn produce(
    bootstrap: &str,
    topic: &str,
    prefix: &str,
    count: usize,
    value: impl Fn(usize) -> Vec<u8>,
) {
    let key = |i: usize| format!("{prefix}{i}");
    produce_to(bootstrap, topic, key, count, value, |i| {
        (i % PARTITIONS as usize) as i32
    });
}

/// Writes `count` records to `topic`, record `i` with key `key(i)` to
/// partition `partition(i)`.
fn produce_to(
    bootstrap: &str,
    topic: &str,
    key: impl Fn(usize) -> String,
    count: usize,
    value: impl Fn(usize) -> Vec<u8>,
    partition: impl Fn(usize) -> i32,
) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "5")
        .create()
        .unwrap();
    for i in 0..count {
        let key = key(i);
        let payload = value(i);
        let mut record = BaseRecord::to(topic)
            .key(&key)
            .payload(&payload)
            .partition(partition(i))
            .timestamp(1_000 + i as i64);
        while let Err((_, returned)) = producer.send(record) {
            producer.poll(Duration::from_millis(10));
            record = returned;
        }
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(60)).unwrap();
}

fn topology() -> kstreams_dsl::Topology {
    let builder = StreamsBuilder::new();
    let prices = builder.table_with(
        PRICES,
        Consumed::with(StringSerde, StringSerde).with_bootstrap(),
        Materialized::as_("prices-store"),
    );
    let rates = builder.global_table_with::<String, String>(
        RATES,
        Consumed::with(StringSerde, StringSerde),
        Materialized::as_("rates-store"),
    );
    let orders = builder.stream_with(ORDERS, Consumed::with(StringSerde, StringSerde));
    orders
        .left_join(&prices, |o, p| {
            format!("{o}@{}", p.map_or("?", String::as_str))
        })
        .left_join_global(
            &rates,
            |k: &String, _: &String| k.clone(),
            |v, r| format!("{v}x{}", r.map_or("?", String::as_str)),
        )
        .to("priced");
    orders
        .group_by_key()
        .count_with(None, Materialized::as_("counts"))
        .to_stream()
        .to_with(COUNTS, Produced::with(StringSerde, Nullable(I64Serde)));
    builder.build().unwrap()
}

/// A metric's value summed over its series.
fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Checks one restoration's calls: a start, batches whose sizes sum to
/// the total with rising end offsets up to the last record, then the end.
fn check_sequence(what: &str, calls: &[Call], start: i64, end: i64) {
    assert_eq!(
        calls.first(),
        Some(&Call::Start(start, end)),
        "{what}: {calls:?}"
    );
    let batches: Vec<(i64, u64)> = calls[1..calls.len() - 1]
        .iter()
        .map(|c| match c {
            Call::Batch(offset, n) => (*offset, *n),
            other => panic!("{what}: {other:?} between start and end"),
        })
        .collect();
    assert!(!batches.is_empty(), "{what}: no batch");
    assert!(
        batches.windows(2).all(|w| w[0].0 < w[1].0),
        "{what}: batch end offsets rise: {batches:?}"
    );
    assert_eq!(
        batches.last().unwrap().0,
        end - 1,
        "{what}: the last batch ends at the last record"
    );
    let restored: u64 = batches.iter().map(|b| b.1).sum();
    assert_eq!(
        restored,
        (end - start) as u64,
        "{what}: batches sum to the total"
    );
    assert_eq!(calls.last(), Some(&Call::End(restored)), "{what}");
}

#[test]
fn changelog_global_and_bootstrap_restorations_reach_the_listener_and_the_metrics() {
    let kafka = EmbeddedKafka::start(1).unwrap();
    let changelog = format!("{APP}-counts-changelog");
    let prices_changelog = format!("{APP}-prices-store-changelog");
    for topic in [
        ORDERS,
        PRICES,
        RATES,
        COUNTS,
        "priced",
        &changelog,
        &prices_changelog,
    ] {
        kafka.create_topic(topic, PARTITIONS, 1).unwrap();
    }
    let bootstrap = kafka.bootstrap_servers();
    // A count store's changelog as an earlier instance left it: 8-byte
    // timestamp then the count, as the timestamped store writes it.
    produce(&bootstrap, &changelog, "user", CHANGELOG_RECORDS, |i| {
        [1_000i64.to_be_bytes(), (i as i64).to_be_bytes()].concat()
    });
    produce(&bootstrap, RATES, "rate", GLOBAL_RECORDS, |i| {
        format!("r{i}").into_bytes()
    });
    produce(&bootstrap, PRICES, "item", BOOTSTRAP_RECORDS, |i| {
        format!("p{i}").into_bytes()
    });
    produce(&bootstrap, ORDERS, "item", 100, |i| {
        format!("o{i}").into_bytes()
    });

    let state_dir = tempfile::tempdir().unwrap();
    let config = StreamsConfig::new(APP, &bootstrap)
        .commit_interval(Duration::from_millis(200))
        .state_dir(state_dir.path());
    let mut app = KafkaStreams::new(topology(), config);
    let recorder = Arc::new(Recorder::default());
    app.set_global_state_restore_listener(recorder.clone())
        .unwrap();
    app.start().unwrap();
    // Kafka Streams refuses a listener once the instance runs.
    assert!(matches!(
        app.set_global_state_restore_listener(recorder.clone()),
        Err(RuntimeError::IllegalState(_))
    ));
    // Two partitions each of the changelog, the global topic and the
    // bootstrap table.
    let deadline = Instant::now() + Duration::from_secs(120);
    while recorder.ended() < 3 * PARTITIONS as usize || app.state() != State::Running {
        assert!(
            Instant::now() < deadline,
            "{:?}",
            recorder.0.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let in_flight = app.restore_progress();
    let metrics = app.metrics().gather_text();
    assert!(app.close(Duration::from_secs(30)));

    let calls = recorder.0.lock().unwrap().clone();
    let per_partition = |count: usize| (count / PARTITIONS as usize) as i64;
    let mut kinds = BTreeMap::new();
    for ((store, partition), calls) in &calls {
        let expected = if partition.topic == changelog {
            assert_eq!(store, "counts");
            per_partition(CHANGELOG_RECORDS)
        } else if partition.topic == RATES {
            assert_eq!(store, "rates-store");
            per_partition(GLOBAL_RECORDS)
        } else if partition.topic == PRICES {
            assert_eq!(store, "prices-store");
            per_partition(BOOTSTRAP_RECORDS)
        } else {
            panic!("unexpected restoration of {store} from {partition}: {calls:?}");
        };
        check_sequence(&format!("{store} {partition}"), calls, 0, expected);
        *kinds.entry(partition.topic.clone()).or_insert(0) += 1;
    }
    assert_eq!(
        kinds,
        BTreeMap::from([
            (changelog.clone(), 2),
            (PRICES.to_string(), 2),
            (RATES.to_string(), 2)
        ])
    );
    assert!(in_flight.is_empty(), "{in_flight:?}");
    for (name, expected) in [
        ("kstreams_task_restore_records_total", CHANGELOG_RECORDS),
        ("kstreams_global_restore_records_total", GLOBAL_RECORDS),
        ("kstreams_task_bootstrap_records_total", BOOTSTRAP_RECORDS),
        ("kstreams_task_restore_remaining_records", 0),
        ("kstreams_global_restore_remaining_records", 0),
        ("kstreams_task_bootstrap_remaining_records", 0),
    ] {
        assert_eq!(
            metric_sum(&metrics, name),
            expected as f64,
            "{name}\n{metrics}"
        );
    }
}

/// Counts per key of `input` in store "counts", to `output`.
fn counts_of(input: &str, output: &str) -> kstreams_dsl::Topology {
    let builder = StreamsBuilder::new();
    builder
        .stream_with(input, Consumed::with(StringSerde, StringSerde))
        .group_by_key()
        .count_with(None, Materialized::as_("counts"))
        .to_stream()
        .to_with(output, Produced::with(StringSerde, Nullable(I64Serde)));
    builder.build().unwrap()
}

/// A listener that restores slowly: it sleeps on each batch of partition 0
/// in proportion to its size, `per_record` a record, and notes when
/// partition 0's restoration ended.
struct SlowListener {
    calls: Recorder,
    per_record: Duration,
    p0_ended: Mutex<Option<Instant>>,
}

impl StateRestoreListener for SlowListener {
    fn on_restore_start(&self, partition: &TopicPartition, store: &str, start: i64, end: i64) {
        self.calls.on_restore_start(partition, store, start, end);
    }
    fn on_batch_restored(&self, partition: &TopicPartition, store: &str, end: i64, n: u64) {
        self.calls.on_batch_restored(partition, store, end, n);
        if partition.partition == 0 {
            std::thread::sleep(self.per_record * n as u32);
        }
    }
    fn on_restore_end(&self, partition: &TopicPartition, store: &str, total: u64) {
        self.calls.on_restore_end(partition, store, total);
        if partition.partition == 0 {
            *self.p0_ended.lock().unwrap() = Some(Instant::now());
        }
    }
    fn on_restore_suspended(&self, partition: &TopicPartition, store: &str, total: u64) {
        self.calls.on_restore_suspended(partition, store, total);
    }
}

/// The latest count per key in `topic`, read from the start to its end.
fn latest_counts(bootstrap: &str, topic: &str) -> BTreeMap<String, i64> {
    latest_counts_of(bootstrap, topic, PARTITIONS)
}

/// [`latest_counts`] of a topic of `partitions` partitions.
fn latest_counts_of(bootstrap: &str, topic: &str, partitions: i32) -> BTreeMap<String, i64> {
    use kstreams_embedded::rdkafka::consumer::{BaseConsumer, Consumer};
    use kstreams_embedded::rdkafka::{Message, Offset, TopicPartitionList};
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "restore-live-reader")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    let mut ends = BTreeMap::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
        let (_, high) = consumer
            .fetch_watermarks(topic, p, Duration::from_secs(5))
            .unwrap();
        ends.insert(p, high);
    }
    consumer.assign(&tpl).unwrap();
    let mut counts = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while ends.values().any(|high| *high > 0) {
        assert!(Instant::now() < deadline, "{topic} not read to its end");
        let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) else {
            continue;
        };
        if m.offset() + 1 >= ends[&m.partition()] {
            ends.insert(m.partition(), 0);
        }
        let key = String::from_utf8(m.key().unwrap().to_vec()).unwrap();
        if let Some(v) = m.payload() {
            counts.insert(key, i64::from_be_bytes(v.try_into().unwrap()));
        }
    }
    counts
}

/// The offset group `group` committed for partition `partition` of `topic`.
fn committed(bootstrap: &str, group: &str, topic: &str, partition: i32) -> Option<i64> {
    use kstreams_embedded::rdkafka::consumer::{BaseConsumer, Consumer};
    use kstreams_embedded::rdkafka::{Offset, TopicPartitionList};
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(topic, partition);
    let committed = consumer
        .committed_offsets(tpl, Duration::from_secs(5))
        .ok()?;
    match committed.find_partition(topic, partition)?.offset() {
        Offset::Offset(o) => Some(o),
        _ => None,
    }
}

/// Issue 46's livelock: a restore longer than `max.poll.interval.ms` made
/// the thread miss its poll, leave the group, lose the partition and
/// restore it again from the start, for ever. Now the state updater
/// restores in slices of the thread's loop: partition 0's count store
/// restores 200,000 changelog records for about 8 s (a listener slowed on
/// purpose) against a 3 s poll interval, once; meanwhile partition 1's
/// task, restored at once, counts new records and commits them; then
/// partition 0's task counts on from its restored state.
#[test]
fn a_restore_longer_than_the_poll_interval_runs_once_while_restored_tasks_process() {
    let _ = env_logger::builder().is_test(true).try_init();
    let kafka = EmbeddedKafka::start(1).unwrap();
    let run = LongRestore {
        bootstrap: kafka.bootstrap_servers(),
        app: "restore-live".to_string(),
        events: "events".to_string(),
        out: "event-counts".to_string(),
        changelog_records: 200_000,
        per_record: Duration::from_micros(40),
        // librdkafka wants the session timeout at most the poll interval.
        poll_interval_ms: 3_000,
    };
    for topic in [&run.events, &run.out, &run.changelog()] {
        kafka.create_topic(topic, PARTITIONS, 1).unwrap();
    }
    run.check();
}

/// The same on a real broker with a multi-million-record changelog:
/// 3,000,000 records on partition 0, against a poll interval of 6 s (the
/// broker's shortest session), the listener slowed by 2 µs a record so
/// that the restore lasts longer than that however fast the machine.
///
/// On a loaded machine RocksDB's flush for a progress checkpoint, and the
/// one at the restore's end, waited up to 8.4 s for compaction; the
/// thread went 6.4 s without polling and left its group. They run in the
/// background now (`StateStore::flush_in_background`); the test passes
/// with three CPU-bound processes beside it on two cores.
#[test]
fn a_multi_million_record_restore_keeps_the_thread_in_its_group_on_a_broker() {
    use kstreams_embedded::{create_topic, test_broker, unique_name};
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let _ = env_logger::builder().is_test(true).try_init();
    let run = LongRestore {
        bootstrap,
        app: unique_name("restore-millions"),
        events: unique_name("restore-millions-in"),
        out: unique_name("restore-millions-out"),
        changelog_records: 3_000_000,
        per_record: Duration::from_micros(2),
        poll_interval_ms: 6_000,
    };
    for topic in [&run.events, &run.out, &run.changelog()] {
        create_topic(&run.bootstrap, topic, PARTITIONS, 1).unwrap();
    }
    let took = run.check();
    assert!(
        took > Duration::from_millis(run.poll_interval_ms),
        "the restore ({took:?}) was not longer than the poll interval"
    );
}

/// A count store restoring a long changelog partition while the thread's
/// other task processes, on topics the caller created.
struct LongRestore {
    bootstrap: String,
    app: String,
    events: String,
    out: String,
    /// Records on partition 0 of the changelog (partition 1 gets 100).
    changelog_records: usize,
    /// How long the listener holds each of partition 0's records.
    per_record: Duration,
    /// `max.poll.interval.ms` and `session.timeout.ms`.
    poll_interval_ms: u64,
}

impl LongRestore {
    fn changelog(&self) -> String {
        format!("{}-counts-changelog", self.app)
    }

    /// Runs the application over the prepared changelog and checks it;
    /// returns how long partition 0's restoration took.
    fn check(&self) -> Duration {
        let LongRestore {
            bootstrap,
            app: app_id,
            events,
            out,
            changelog_records: big,
            ..
        } = self;
        let (bootstrap, big) = (bootstrap.as_str(), *big);
        let changelog = self.changelog();
        // The count store's changelog as an earlier instance left it: key
        // k{i} counted i times on partition 0, j{i} on partition 1.
        let count_value = |i: usize| (i as i64).to_be_bytes().to_vec();
        let k = |i: usize| format!("k{i}");
        produce_to(bootstrap, &changelog, k, big, count_value, |_| 0);
        let j = |i: usize| format!("j{i}");
        produce_to(bootstrap, &changelog, j, 100, count_value, |_| 1);

        let state_dir = tempfile::tempdir().unwrap();
        let mut config = StreamsConfig::new(app_id, bootstrap)
            .commit_interval(Duration::from_millis(200))
            .state_dir(state_dir.path());
        let interval = self.poll_interval_ms.to_string();
        config
            .set("main.consumer.session.timeout.ms", &interval)
            .unwrap();
        config
            .set("main.consumer.heartbeat.interval.ms", "500")
            .unwrap();
        config
            .set("main.consumer.max.poll.interval.ms", &interval)
            .unwrap();
        let mut app = KafkaStreams::new(counts_of(events, out), config);
        let listener = Arc::new(SlowListener {
            calls: Recorder::default(),
            per_record: self.per_record,
            p0_ended: Mutex::new(None),
        });
        app.set_global_state_restore_listener(listener.clone())
            .unwrap();
        let started = Instant::now();
        app.start().unwrap();

        // Partition 1's task counts j7 five more times (7 restored) and
        // commits while partition 0's store still restores.
        let j7 = |_| "j7".to_string();
        produce_to(bootstrap, events, j7, 5, |_| b"e".to_vec(), |_| 1);
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut seen = None;
        while seen.is_none() {
            let counts = latest_counts(bootstrap, out);
            let committed = committed(bootstrap, app_id, events, 1);
            assert!(
                Instant::now() < deadline,
                "partition 1: j7 counted {:?}, offset {committed:?} committed; {:?}",
                counts.get("j7"),
                app.metadata()
            );
            let done = committed == Some(5);
            if counts.get("j7") == Some(&12) && done {
                seen = Some(Instant::now());
            }
        }
        let ended = *listener.p0_ended.lock().unwrap();
        assert!(
            ended.is_none(),
            "partition 1 was processed and committed only after partition 0 restored"
        );
        assert_ne!(app.state(), State::Running, "RUNNING while a task restores");

        // Then partition 0's task: restored once, it counts on.
        let deadline = Instant::now() + Duration::from_secs(300);
        while listener.p0_ended.lock().unwrap().is_none() || app.state() != State::Running {
            assert!(Instant::now() < deadline, "partition 0 never restored");
            std::thread::sleep(Duration::from_millis(100));
        }
        let took = listener.p0_ended.lock().unwrap().expect("ended") - started;
        let k3 = |_| "k3".to_string();
        produce_to(bootstrap, events, k3, 1, |_| b"e".to_vec(), |_| 0);
        let deadline = Instant::now() + Duration::from_secs(60);
        while latest_counts(bootstrap, out).get("k3") != Some(&4) {
            assert!(
                Instant::now() < deadline,
                "k3 was not counted from its restored 3"
            );
        }
        let metrics = app.metrics().gather_text();
        assert!(app.close(Duration::from_secs(30)));

        let calls = listener.calls.0.lock().unwrap().clone();
        let p0 = calls
            .get(&("counts".to_string(), TopicPartition::new(&changelog, 0)))
            .expect("partition 0 restored");
        // The mock cluster keeps the newest records of a long partition
        // only: the restore starts at its log start.
        let Some(&Call::Start(start, _)) = p0.first() else {
            panic!("{p0:?}")
        };
        check_sequence("counts p0", p0, start, big as i64);
        let p1 = calls
            .get(&("counts".to_string(), TopicPartition::new(&changelog, 1)))
            .expect("partition 1 restored");
        check_sequence("counts p1", p1, 0, 100);
        assert_eq!(
            metric_sum(&metrics, "kstreams_thread_task_created_total"),
            2.0,
            "a task was lost and created again\n{metrics}"
        );
        took
    }
}

/// A restore stopped part-way (here the application closes; a revocation
/// or a lost partition takes the same path) resumes from what it had
/// restored, not from the start: the restoring task closes clean, its store
/// flushed and checkpointed at the last record applied.
fn an_interrupted_restore_resumes_from_its_checkpoint(guarantee: ProcessingGuarantee) {
    const EVENTS: &str = "events";
    const OUT: &str = "event-counts";
    const RECORDS: usize = 100_000;
    let app = match guarantee {
        ProcessingGuarantee::ExactlyOnceV2 => "restore-resume-eos",
        _ => "restore-resume",
    };
    let kafka = EmbeddedKafka::start(1).unwrap();
    let bootstrap = kafka.bootstrap_servers();
    let changelog = format!("{app}-counts-changelog");
    for topic in [EVENTS, OUT, &changelog] {
        kafka.create_topic(topic, 1, 1).unwrap();
    }
    let count_value = |i: usize| (i as i64).to_be_bytes().to_vec();
    let k = |i: usize| format!("k{i}");
    produce_to(&bootstrap, &changelog, k, RECORDS, count_value, |_| 0);
    let topology = || counts_of(EVENTS, OUT);
    let state_dir = tempfile::tempdir().unwrap();
    let config = || {
        StreamsConfig::new(app, &bootstrap)
            .commit_interval(Duration::from_millis(200))
            .state_dir(state_dir.path())
            .processing_guarantee(guarantee)
    };
    let partition = TopicPartition::new(&changelog, 0);
    let key = ("counts".to_string(), partition.clone());

    // First run: slowed down, closed a third of the way in.
    let mut first = KafkaStreams::new(topology(), config());
    let slow = Arc::new(SlowListener {
        calls: Recorder::default(),
        per_record: Duration::from_micros(40),
        p0_ended: Mutex::new(None),
    });
    first
        .set_global_state_restore_listener(slow.clone())
        .unwrap();
    first.start().unwrap();
    let restored_so_far = || -> u64 {
        let calls = slow.calls.0.lock().unwrap();
        calls.get(&key).map_or(0, |calls| {
            calls
                .iter()
                .map(|c| match c {
                    Call::Batch(_, n) => *n,
                    _ => 0,
                })
                .sum()
        })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while restored_so_far() < RECORDS as u64 / 3 {
        assert!(Instant::now() < deadline, "the first run restored nothing");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(first.close(Duration::from_secs(30)));
    let calls = slow.calls.0.lock().unwrap().get(&key).cloned().unwrap();
    let Some(&Call::Suspended(suspended)) = calls.last() else {
        panic!("the first run's restore was not suspended: {calls:?}");
    };
    assert!(
        (1..RECORDS as u64).contains(&suspended),
        "suspended after {suspended}"
    );

    // Second run: resumes after the last record the first applied.
    let mut second = KafkaStreams::new(topology(), config());
    let recorder = Arc::new(Recorder::default());
    second
        .set_global_state_restore_listener(recorder.clone())
        .unwrap();
    second.start().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while recorder.ended() < 1 || second.state() != State::Running {
        assert!(
            Instant::now() < deadline,
            "{:?}",
            recorder.0.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let resumed = recorder.0.lock().unwrap().get(&key).cloned().unwrap();
    check_sequence("resumed", &resumed, suspended as i64, RECORDS as i64);
    // The store has every record: k5's count goes on from 5.
    let k5 = |_| "k5".to_string();
    produce_to(&bootstrap, EVENTS, k5, 1, |_| b"e".to_vec(), |_| 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    while latest_counts_of(&bootstrap, OUT, 1).get("k5") != Some(&6) {
        assert!(Instant::now() < deadline, "k5 not counted on from 5");
    }
    assert!(second.close(Duration::from_secs(30)));
}

#[test]
fn an_interrupted_restore_resumes_from_its_checkpoint_at_least_once() {
    an_interrupted_restore_resumes_from_its_checkpoint(ProcessingGuarantee::AtLeastOnce);
}

#[test]
fn an_interrupted_restore_resumes_from_its_checkpoint_exactly_once() {
    an_interrupted_restore_resumes_from_its_checkpoint(ProcessingGuarantee::ExactlyOnceV2);
}
