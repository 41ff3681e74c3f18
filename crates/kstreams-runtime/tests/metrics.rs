//! The runtime's metrics on librdkafka's in-process mock cluster: what a
//! Prometheus scrape of a running application reads (task, thread,
//! partition, end-to-end and store metrics), at Kafka Streams' recording
//! levels, and that a closed application's task series are gone.

use crate::common::{self, Input};

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kstreams_dsl::{Materialized, Produced, StreamsBuilder};
use kstreams_embedded::EmbeddedKafka;
use kstreams_metrics::RecordingLevel;
use kstreams_record::{I64Serde, Nullable, StringSerde};
use kstreams_runtime::kafka::{KafkaStreams, StreamsConfig};

const INPUT: &str = "clicks";
const OUTPUT: &str = "click-counts";
const RECORDS: usize = 300;
/// How old the input records' timestamps are when produced.
const AGE_MS: i64 = 5_000;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Sum of every sample of `name` (exactly that family, any labels) whose
/// label set contains each of `labels`, in Prometheus text.
fn sum(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (family, label_set) = series.split_once('{').unwrap_or((series, ""));
            (family == name && labels.iter().all(|l| label_set.contains(l)))
                .then(|| value.parse::<f64>().unwrap())
        })
        .sum()
}

fn count_app(kafka: &EmbeddedKafka, app_id: &str, level: RecordingLevel) -> KafkaStreams {
    let _ = env_logger::builder().is_test(true).try_init();
    // The mock cluster takes no CreateTopics with configs: the changelog
    // is made here.
    kafka
        .create_topic(&format!("{app_id}-counts-changelog"), 3, 1)
        .unwrap();
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(INPUT)
        .group_by_key()
        .count_with(None, Materialized::as_("counts"))
        .to_stream()
        .to_with(OUTPUT, Produced::with(StringSerde, Nullable(I64Serde)));
    let state_dir = std::env::temp_dir().join(format!("kstreams-metrics-{app_id}-{}", now_ms()));
    let config = StreamsConfig::new(app_id, kafka.bootstrap_servers())
        .commit_interval(Duration::from_millis(100))
        .state_dir(state_dir)
        .metrics_recording_level(level);
    KafkaStreams::new(builder.build().unwrap(), config)
}

fn produce(bootstrap: &str) {
    let timestamp = now_ms() - AGE_MS;
    let inputs = (0..RECORDS).map(|i| Input::new(format!("page{}", i % 10), "x").at(timestamp));
    common::produce(bootstrap, INPUT, inputs);
}

/// Waits until `condition` holds for the metrics text, returning it.
fn wait_for_metrics(app: &KafkaStreams, what: &str, condition: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = app.metrics().gather_text();
        if condition(&text) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; metrics:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_running_application_exposes_task_thread_partition_e2e_and_store_metrics() {
    let kafka = EmbeddedKafka::start(1).unwrap();
    kafka.create_topic(INPUT, 3, 1).unwrap();
    kafka.create_topic(OUTPUT, 3, 1).unwrap();
    produce(&kafka.bootstrap_servers());
    let mut app = count_app(&kafka, "metrics-debug", RecordingLevel::Debug);
    app.start().unwrap();

    let text = wait_for_metrics(&app, "every record processed, a commit, lag 0", |text| {
        sum(text, "kstreams_task_process_total", &[]) as usize == RECORDS
            && sum(text, "kstreams_thread_commit_latency_seconds_count", &[]) >= 1.0
            // The cache let each of the 10 pages' count out at a commit.
            && sum(
                text,
                "kstreams_record_e2e_latency_seconds_count",
                &[r#"node="KSTREAM-SINK-"#],
            ) >= 10.0
            && sum(
                text,
                "kstreams_consumer_records_lag",
                &[r#"topic="clicks""#],
            ) == 0.0
            && text.contains(r#"kstreams_consumer_records_lag{partition="2",topic="clicks"}"#)
    });
    // One task per input partition, each counted once.
    assert_eq!(sum(&text, "kstreams_thread_task_created_total", &[]), 3.0);
    assert_eq!(
        sum(
            &text,
            "kstreams_consumer_records_consumed_total",
            &[r#"topic="clicks""#]
        ) as usize,
        RECORDS
    );
    assert!(sum(&text, "kstreams_thread_poll_records_total", &[]) as usize >= RECORDS);
    // End-to-end latency at the source node: the records were AGE_MS old
    // when produced, so each took at least that long end to end.
    let source = r#"node="KSTREAM-SOURCE-0000000000""#;
    let e2e_count = sum(
        &text,
        "kstreams_record_e2e_latency_seconds_count",
        &[source],
    );
    let e2e_sum = sum(&text, "kstreams_record_e2e_latency_seconds_sum", &[source]);
    assert_eq!(e2e_count as usize, RECORDS);
    assert_eq!(
        sum(&text, "kstreams_node_process_total", &[source]) as usize,
        RECORDS
    );
    // And at the sink, for each count the cache let out.
    let sink = r#"node="KSTREAM-SINK-"#;
    assert!(sum(&text, "kstreams_record_e2e_latency_seconds_count", &[sink]) >= 10.0);
    assert!(
        sum(&text, "kstreams_record_e2e_latency_seconds_sum", &[sink])
            / sum(&text, "kstreams_record_e2e_latency_seconds_count", &[sink])
            >= AGE_MS as f64 / 1000.0
    );
    assert!(
        e2e_sum / e2e_count >= AGE_MS as f64 / 1000.0,
        "mean e2e {}",
        e2e_sum / e2e_count
    );
    // DEBUG: per-record process latency and the store's operations.
    assert_eq!(
        sum(&text, "kstreams_task_process_latency_seconds_count", &[]) as usize,
        RECORDS
    );
    // In-order input: every record processed at lateness 0.
    assert_eq!(
        sum(&text, "kstreams_task_record_lateness_seconds_count", &[]) as usize,
        RECORDS
    );
    assert_eq!(
        sum(&text, "kstreams_task_record_lateness_seconds_sum", &[]),
        0.0
    );
    let store = r#"store="counts""#;
    assert!(sum(&text, "kstreams_state_put_latency_seconds_count", &[store]) >= 10.0);
    assert!(sum(&text, "kstreams_state_get_latency_seconds_count", &[store]) as usize >= RECORDS);

    // The text format a scrape reads (kstreams-http's tests scrape it over
    // HTTP).
    assert!(text.contains("# TYPE kstreams_task_process_total counter"));
    assert!(text.contains(r#"kstreams_state_put_latency_seconds_bucket{store="counts""#));

    assert!(app.close(Duration::from_secs(30)));
    // A closed application's tasks, partitions and threads are gone.
    let text = app.metrics().gather_text();
    assert_eq!(
        sum(&text, "kstreams_task_process_total", &[]),
        0.0,
        "{text}"
    );
    assert!(!text.contains("task_id="), "{text}");
    assert!(!text.contains(r#"topic="clicks""#), "{text}");
}

#[test]
fn info_level_leaves_out_store_and_per_record_latencies() {
    let kafka = EmbeddedKafka::start(1).unwrap();
    kafka.create_topic(INPUT, 3, 1).unwrap();
    kafka.create_topic(OUTPUT, 3, 1).unwrap();
    produce(&kafka.bootstrap_servers());
    let mut app = count_app(&kafka, "metrics-info", RecordingLevel::Info);
    app.start().unwrap();
    let text = wait_for_metrics(&app, "every record processed", |text| {
        sum(text, "kstreams_task_process_total", &[]) as usize == RECORDS
    });
    assert_eq!(
        sum(
            &text,
            "kstreams_record_e2e_latency_seconds_count",
            &[r#"node="KSTREAM-SOURCE-0000000000""#]
        ) as usize,
        RECORDS
    );
    assert!(!text.contains("kstreams_state_"), "{text}");
    assert_eq!(
        sum(&text, "kstreams_task_process_latency_seconds_count", &[]),
        0.0
    );
    assert!(app.close(Duration::from_secs(30)));
}

/// Record lateness (DEBUG, Kafka's `record-lateness`): how far behind the
/// task's stream time each record was, straight on a task.
#[test]
fn record_lateness_measures_out_of_order_records() {
    use kstreams_dsl::__private::ConsumedRecord;
    use kstreams_dsl::TaskId;
    use kstreams_metrics::MetricsRegistry;
    use kstreams_runtime::__private::StreamTask;
    use kstreams_runtime::TaskConfig;
    let builder = StreamsBuilder::new();
    builder.stream::<String, String>("in").to("out");
    let topology = builder.build().unwrap();
    let id = TaskId {
        subtopology: 0,
        partition: 0,
    };
    let mut task = StreamTask::new(&topology, id, TaskConfig::new("app"), 0).unwrap();
    let registry = MetricsRegistry::new();
    task.register_metrics(&registry, RecordingLevel::Debug, "t")
        .unwrap();
    for (offset, timestamp) in [(0, 10_000), (1, 4_000), (2, 12_000), (3, 11_500)] {
        task.process(ConsumedRecord {
            topic: "in".into(),
            partition: 0,
            offset,
            timestamp,
            key: Some(b"k".to_vec()),
            value: Some(b"v".to_vec()),
            headers: Default::default(),
        })
        .unwrap();
    }
    // The outputs are drained as a stream thread does, which records the
    // sink's end-to-end latency.
    assert_eq!(task.drain_output().len(), 4);
    let text = registry.gather_text();
    assert_eq!(
        sum(&text, "kstreams_task_record_lateness_seconds_count", &[]),
        4.0
    );
    assert_eq!(
        sum(
            &text,
            "kstreams_record_e2e_latency_seconds_count",
            &[r#"node="KSTREAM-SINK-0000000001""#]
        ),
        4.0
    );
    // 6 s behind 10 s, then 0.5 s behind 12 s.
    assert_eq!(
        sum(&text, "kstreams_task_record_lateness_seconds_sum", &[]),
        6.5
    );
}
