//! The Kafka runtime on librdkafka's in-process mock cluster: records flow
//! end to end, instances of one application share partitions and take over
//! each other's when one leaves, and faults injected into the cluster lose
//! no record (at-least-once: duplicates allowed, losses not).

use crate::common::{self, Input};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kstreams_dsl::{Produced, StreamsBuilder};
use kstreams_embedded::rdkafka::consumer::{BaseConsumer, Consumer};
use kstreams_embedded::rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use kstreams_embedded::rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
use kstreams_embedded::rdkafka::{ClientConfig, Message};
use kstreams_embedded::EmbeddedKafka;
use kstreams_record::{Headers, I64Serde, Serde, StringSerde};
use kstreams_runtime::kafka::{
    KafkaStreams, RuntimeError, State, StreamThreadExceptionResponse, StreamsConfig,
};
use kstreams_state::{TimeWindowedSerde, Window, Windowed};

const INPUT: &str = "input";
const OUTPUT: &str = "output";

fn produce(bootstrap: &str, range: std::ops::Range<usize>) {
    let inputs =
        range.map(|i| Input::new(format!("k{}", i % 17), format!("v{i}")).at(1_000 + i as i64));
    common::produce(bootstrap, INPUT, inputs);
}

/// Reads OUTPUT until `want` distinct values were seen (or time runs out).
struct OutputReader {
    consumer: BaseConsumer,
    seen: BTreeMap<String, (String, i32, i64)>,
    total: usize,
}

impl OutputReader {
    fn new(bootstrap: &str) -> Self {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", "test-reader")
            .set("auto.offset.reset", "earliest")
            .create()
            .unwrap();
        consumer.subscribe(&[OUTPUT]).unwrap();
        Self {
            consumer,
            seen: BTreeMap::new(),
            total: 0,
        }
    }

    fn read_until(&mut self, want: usize, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        while self.seen.len() < want && Instant::now() < deadline {
            if let Some(Ok(m)) = self.consumer.poll(Duration::from_millis(100)) {
                let key = String::from_utf8(m.key().unwrap().to_vec()).unwrap();
                let value = String::from_utf8(m.payload().unwrap().to_vec()).unwrap();
                let ts = m.timestamp().to_millis().unwrap();
                self.seen.insert(value, (key, m.partition(), ts));
                self.total += 1;
            }
        }
        self.seen.len()
    }
}

fn app(bootstrap: &str, processed: Arc<AtomicUsize>) -> KafkaStreams {
    let _ = env_logger::builder().is_test(true).try_init();
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(INPUT)
        .peek(move |_, _| {
            processed.fetch_add(1, Ordering::Relaxed);
        })
        .map_values(|v| v.to_uppercase())
        .to(OUTPUT);
    let config = StreamsConfig::new("embedded-test", bootstrap)
        .commit_interval(Duration::from_millis(100))
        .client_config("consumer.session.timeout.ms", "6000")
        .client_config("consumer.heartbeat.interval.ms", "500");
    KafkaStreams::new(builder.build().unwrap(), config)
}

fn wait_for(what: &str, timeout: Duration, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + timeout;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn expected_values(range: std::ops::Range<usize>) -> BTreeSet<String> {
    range.map(|i| format!("V{i}")).collect()
}

#[test]
fn records_flow_end_to_end_with_keys_timestamps_and_partitions_kept() {
    let kafka = EmbeddedKafka::start(1).unwrap();
    kafka.create_topic(INPUT, 3, 1).unwrap();
    kafka.create_topic(OUTPUT, 3, 1).unwrap();
    let bootstrap = kafka.bootstrap_servers();
    produce(&bootstrap, 0..200);
    let mut app = app(&bootstrap, Arc::default());
    app.start().unwrap();
    let mut reader = OutputReader::new(&bootstrap);
    assert_eq!(reader.read_until(200, Duration::from_secs(60)), 200);
    assert!(app.close(Duration::from_secs(30)));
    assert_eq!(app.state(), State::NotRunning);
    assert_eq!(
        reader.seen.keys().cloned().collect::<BTreeSet<_>>(),
        expected_values(0..200)
    );
    // Same key, same partition: the sink partitions by key as Kafka's
    // default partitioner does, so a key's outputs stay together.
    let mut partition_of_key: BTreeMap<&str, i32> = BTreeMap::new();
    for (value, (key, partition, ts)) in &reader.seen {
        let i: i64 = value[1..].parse().unwrap();
        assert_eq!(*ts, 1_000 + i, "output keeps the input timestamp");
        assert_eq!(
            *partition_of_key.entry(key).or_insert(*partition),
            *partition,
            "key {key}"
        );
    }
}

#[test]
fn two_instances_share_the_partitions_and_one_takes_over_when_the_other_leaves() {
    let kafka = EmbeddedKafka::start(1).unwrap();
    kafka.create_topic(INPUT, 4, 1).unwrap();
    kafka.create_topic(OUTPUT, 4, 1).unwrap();
    let bootstrap = kafka.bootstrap_servers();
    let (count_a, count_b) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut a = app(&bootstrap, count_a.clone());
    let mut b = app(&bootstrap, count_b.clone());
    a.start().unwrap();
    b.start().unwrap();
    wait_for("both instances running", Duration::from_secs(60), || {
        a.state() == State::Running && b.state() == State::Running
    });
    produce(&bootstrap, 0..400);
    let mut reader = OutputReader::new(&bootstrap);
    assert_eq!(reader.read_until(400, Duration::from_secs(60)), 400);
    let (a1, b1) = (
        count_a.load(Ordering::Relaxed),
        count_b.load(Ordering::Relaxed),
    );
    assert!(
        a1 > 0 && b1 > 0,
        "both instances processed records: {a1} and {b1}"
    );
    assert!(a1 + b1 >= 400);

    assert!(b.close(Duration::from_secs(30)));
    produce(&bootstrap, 400..800);
    assert_eq!(
        reader.read_until(800, Duration::from_secs(90)),
        800,
        "no record lost after the rebalance"
    );
    assert_eq!(
        count_b.load(Ordering::Relaxed),
        b1,
        "the closed instance processed nothing more"
    );
    assert!(
        count_a.load(Ordering::Relaxed) >= a1 + 400,
        "the remaining instance took over every partition"
    );
    assert_eq!(
        reader.seen.keys().cloned().collect::<BTreeSet<_>>(),
        expected_values(0..800)
    );
    assert!(a.close(Duration::from_secs(30)));
}

#[test]
fn request_errors_and_a_broker_going_down_lose_no_record() {
    let kafka = EmbeddedKafka::start(3).unwrap();
    kafka.create_topic(INPUT, 3, 3).unwrap();
    kafka.create_topic(OUTPUT, 3, 3).unwrap();
    let bootstrap = kafka.bootstrap_servers();
    let mut app = app(&bootstrap, Arc::default());
    app.start().unwrap();
    wait_for("the instance running", Duration::from_secs(60), || {
        app.state() == State::Running
    });
    // Produce requests fail with retriable errors; the producer retries.
    kafka.fail_requests(
        RDKafkaApiKey::Produce,
        &[
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS,
        ],
    );
    // Offset commits fail once; the next commit covers them.
    kafka.fail_requests(
        RDKafkaApiKey::OffsetCommit,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT],
    );
    produce(&bootstrap, 0..150);
    let mut reader = OutputReader::new(&bootstrap);
    let seen_before_outage = reader.read_until(150, Duration::from_secs(60));
    // A broker disappears and comes back.
    kafka.broker_down(2).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    kafka.broker_up(2).unwrap();
    produce(&bootstrap, 150..300);
    let seen = reader.read_until(300, Duration::from_secs(90));
    let errors = app.errors();
    app.close(Duration::from_secs(30));
    assert_eq!(seen_before_outage, 150, "errors so far: {errors:?}");
    assert_eq!(seen, 300, "errors so far: {errors:?}");
    assert_eq!(
        reader.seen.keys().cloned().collect::<BTreeSet<_>>(),
        expected_values(0..300)
    );
}

#[test]
fn a_missing_source_topic_fails_start_naming_it() {
    let kafka = EmbeddedKafka::start(1).unwrap();
    let mut app = app(&kafka.bootstrap_servers(), Arc::default());
    match app.start() {
        Err(RuntimeError::MissingSourceTopics(topics)) => assert_eq!(topics, [INPUT]),
        other => panic!("expected a missing-topic error, got {other:?}"),
    }
    assert_eq!(app.state(), State::Created);
}

#[test]
fn a_failed_thread_commits_nothing_of_its_failed_batch_and_the_app_reaches_error() {
    let kafka = EmbeddedKafka::start(1).unwrap();
    kafka.create_topic(INPUT, 1, 1).unwrap();
    kafka.create_topic(OUTPUT, 1, 1).unwrap();
    let bootstrap = kafka.bootstrap_servers();
    produce(&bootstrap, 0..100);
    let failing = {
        let builder = StreamsBuilder::new();
        builder
            .stream::<String, String>(INPUT)
            .map_values(|v| {
                assert_ne!(v, "v50", "a poison record");
                v.to_uppercase()
            })
            .to(OUTPUT);
        // Commits are rare, so the failed batch is still open when the
        // thread dies; closing its consumer must not commit it.
        let config =
            StreamsConfig::new("failing-app", &bootstrap).commit_interval(Duration::from_secs(60));
        KafkaStreams::new(builder.build().unwrap(), config)
    };
    let mut failing = failing;
    failing.set_uncaught_exception_handler(|_| StreamThreadExceptionResponse::ShutdownClient);
    failing.start().unwrap();
    wait_for(
        "the failing app to reach ERROR by itself",
        Duration::from_secs(60),
        || failing.state() == State::Error,
    );
    assert!(
        failing.errors()[0].contains("a poison record"),
        "{:?}",
        failing.errors()
    );
    drop(failing);

    // The same application, fixed, resumes from what was committed: v50 and
    // its batch were not, so they come out now.
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(INPUT)
        .map_values(|v| v.to_uppercase())
        .to(OUTPUT);
    let config =
        StreamsConfig::new("failing-app", &bootstrap).commit_interval(Duration::from_millis(100));
    let mut fixed = KafkaStreams::new(builder.build().unwrap(), config);
    fixed.start().unwrap();
    let mut reader = OutputReader::new(&bootstrap);
    assert_eq!(reader.read_until(100, Duration::from_secs(60)), 100);
    assert!(reader.seen.contains_key("V50"));
    assert!(fixed.close(Duration::from_secs(30)));
}

/// `to()` with a windowed key serde partitions by the plain key, as Kafka
/// Streams' `WindowedStreamPartitioner` does: every window of a key lands
/// in the partition Kafka's default partitioner gives the key alone, not
/// where the hash of the key and window start would put it.
#[test]
fn windowed_keys_are_written_to_the_partition_of_their_plain_key() {
    let kafka = EmbeddedKafka::start(1).unwrap();
    kafka.create_topic(INPUT, 1, 1).unwrap();
    kafka.create_topic(OUTPUT, 3, 1).unwrap();
    let bootstrap = kafka.bootstrap_servers();
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    for key in ["alice", "dave", "carol"] {
        for start in [0, 10, 20] {
            producer
                .send(BaseRecord::to(INPUT).key(key).payload(&start.to_string()))
                .map_err(|(e, _)| e)
                .unwrap();
        }
    }
    producer.flush(Duration::from_secs(30)).unwrap();

    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(INPUT)
        .map(|key, start| {
            let start: i64 = start.parse().unwrap();
            (
                Windowed::new(key.clone(), Window::new(start, start + 10)),
                start,
            )
        })
        .to_with(
            OUTPUT,
            Produced::with(TimeWindowedSerde::new(StringSerde, 10), I64Serde),
        );
    let config = StreamsConfig::new("windowed-partitions", &bootstrap)
        .commit_interval(Duration::from_millis(100));
    let mut app = KafkaStreams::new(builder.build().unwrap(), config);
    app.start().unwrap();

    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", "windowed-reader")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&[OUTPUT]).unwrap();
    let serde = TimeWindowedSerde::new(StringSerde, 10);
    let mut seen = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < 9 && Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            let windowed = serde.deserialize(OUTPUT, &Headers::new(), m.key()).unwrap();
            seen.insert((windowed.key, windowed.window.start, m.partition()));
        }
    }
    assert!(app.close(Duration::from_secs(30)));
    // Partitions of the plain keys by Kafka's Utils.murmur2 (3 partitions);
    // with the window start in the hash, alice@0 would go to 1, dave@0 to
    // 2, carol@10 to 1.
    let expected: BTreeSet<_> = [("alice", 0), ("dave", 1), ("carol", 2)]
        .into_iter()
        .flat_map(|(key, partition)| [0, 10, 20].map(|start| (key.to_string(), start, partition)))
        .collect();
    assert_eq!(seen, expected);
}

/// The KIP-848 group protocol with a classic assignment setting fails
/// `start()` with the conflict named, before any client is made.
#[test]
fn start_refuses_an_assignment_strategy_under_the_consumer_group_protocol() {
    let builder = StreamsBuilder::new();
    builder.stream::<String, String>(INPUT).to(OUTPUT);
    let config = StreamsConfig::new("kip848-conflict", "127.0.0.1:1")
        .client_config(
            "consumer.partition.assignment.strategy",
            "cooperative-sticky",
        )
        .client_config("consumer.group.protocol", "consumer");
    let mut app = KafkaStreams::new(builder.build().unwrap(), config);
    let err = app.start().unwrap_err();
    assert!(
        matches!(err, RuntimeError::Config(_)),
        "a config error: {err}"
    );
    assert!(
        err.to_string().starts_with(
            "config consumer.partition.assignment.strategy cannot be used with \
             consumer.group.protocol=consumer"
        ),
        "{err}"
    );
}
