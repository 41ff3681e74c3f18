//! The application's restore listener on librdkafka's in-process mock
//! cluster: a store restoring 60,000 changelog records, a global table
//! loading 20,000 and a bootstrap table of 10,000 are each heard as start,
//! batches and end with Kafka's figures, and the restore metrics and the
//! instance's restore progress agree.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kstreams_dsl::{Consumed, Materialized, Produced, StreamsBuilder};
use kstreams_embedded::rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use kstreams_embedded::rdkafka::ClientConfig;
use kstreams_embedded::EmbeddedKafka;
use kstreams_record::{I64Serde, Nullable, StringSerde};
use kstreams_runtime::kafka::{
    KafkaStreams, RuntimeError, State, StateRestoreListener, StreamsConfig, TopicPartition,
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
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "5")
        .create()
        .unwrap();
    for i in 0..count {
        let key = format!("{prefix}{i}");
        let payload = value(i);
        let mut record = BaseRecord::to(topic)
            .key(&key)
            .payload(&payload)
            .partition((i % PARTITIONS as usize) as i32)
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
