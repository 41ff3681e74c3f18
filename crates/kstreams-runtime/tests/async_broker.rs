//! Async processors on a real broker (`cargo xtask kafka start`, found
//! through KSTREAMS_BOOTSTRAP; skipped without it): per-key order under
//! random call latencies, a rebalance with calls in flight, and a SIGKILL
//! under exactly-once with calls in flight.

use crate::common::{self, Input};

use std::collections::{BTreeMap, BTreeSet};
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{metric_sum, FreshRun};
use kstreams_dsl::{AsyncOptions, StreamsBuilder};
use kstreams_embedded::rdkafka::Message;
use kstreams_embedded::{create_topic, test_broker, unique_name};
use kstreams_runtime::kafka::{KafkaStreams, ProcessingGuarantee, State, StreamsConfig};

/// Set in a child process: run the exactly-once async app until killed.
const CHILD_ENV: &str = "KSTREAMS_TEST_ASYNC_EOS_CHILD";

/// 0 to 29 ms, from the value: latencies differ per record, so calls
/// finish out of input order.
fn latency(value: &str) -> Duration {
    let mut x: u64 = value.bytes().fold(1469598103934665603, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(1099511628211)
    });
    x ^= x >> 29;
    Duration::from_millis(x % 30)
}

/// `input` through a slow async call (the value marked) to `output`.
fn async_app(input: &str, output: &str, config: StreamsConfig) -> KafkaStreams {
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(input)
        .map_values_async(
            |_key: String, value: String| async move {
                tokio::time::sleep(latency(&value)).await;
                Ok::<_, std::io::Error>(format!("{value}+"))
            },
            AsyncOptions::new(),
        )
        .to(output);
    KafkaStreams::new(builder.build().unwrap(), config)
}

/// Produces `range` at about `per_second` (unbounded when 0), keys
/// `k0`..`k{keys-1}`, values the sequence number.
fn produce(
    bootstrap: &str,
    topic: &str,
    range: std::ops::Range<usize>,
    keys: usize,
    per_second: u64,
) -> std::thread::JoinHandle<()> {
    let inputs = range.map(|i| Input::new(format!("k{}", i % keys), i.to_string()));
    common::produce_paced(bootstrap, topic, inputs.collect(), per_second)
}

/// What a read_committed consumer of the output saw, in order, as (key,
/// value).
type Seen = Arc<Mutex<Vec<(String, String)>>>;

fn read_in_background(
    bootstrap: &str,
    topic: &str,
    stop: Arc<AtomicBool>,
) -> (Seen, std::thread::JoinHandle<()>) {
    let consumer = common::read_committed_consumer(bootstrap, topic);
    let seen: Seen = Arc::default();
    let sink = seen.clone();
    let handle = std::thread::spawn(move || {
        while !stop.load(Ordering::Acquire) {
            if let Some(Ok(m)) = consumer.poll(Duration::from_millis(50)) {
                let key = String::from_utf8_lossy(m.key().unwrap_or_default()).to_string();
                let value = String::from_utf8_lossy(m.payload().unwrap_or_default()).to_string();
                sink.lock().unwrap().push((key, value));
            }
        }
    });
    (seen, handle)
}

fn wait_for(seen: &Seen, count: usize, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while seen.lock().unwrap().len() < count && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Asserts that every sequence number of `0..total` was seen exactly once.
fn assert_once_each(seen: &[(String, String)], total: usize) {
    let mut counts: BTreeMap<usize, usize> = BTreeMap::new();
    for (_, value) in seen {
        let n = value.trim_end_matches('+').parse().unwrap();
        *counts.entry(n).or_default() += 1;
    }
    let duplicated: Vec<usize> = counts
        .iter()
        .filter(|(_, &n)| n > 1)
        .map(|(&v, _)| v)
        .collect();
    let missing: Vec<usize> = (0..total).filter(|i| !counts.contains_key(i)).collect();
    assert!(duplicated.is_empty(), "duplicated: {duplicated:?}");
    assert!(
        missing.is_empty(),
        "{} missing, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
}

fn config(bootstrap: &str, app_id: &str, state_dir: &std::path::Path) -> StreamsConfig {
    StreamsConfig::new(app_id, bootstrap)
        .state_dir(state_dir)
        .commit_interval(Duration::from_millis(200))
        .async_max_in_flight_per_task(16)
}

#[test]
fn records_of_a_key_keep_their_order_through_calls_of_random_latency() {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let FreshRun {
        input,
        output,
        app_id,
        state_dir,
    } = FreshRun::new(&bootstrap, "async-order");
    let total = 2_000;
    produce(&bootstrap, &input, 0..total, 40, 0).join().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (seen, reader) = read_in_background(&bootstrap, &output, stop.clone());
    let mut app = async_app(&input, &output, config(&bootstrap, &app_id, &state_dir));
    app.start().unwrap();
    wait_for(&seen, total, Duration::from_secs(90));
    let metrics = app.metrics().gather_text();
    assert!(app.close(Duration::from_secs(30)));
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Release);
    reader.join().unwrap();
    let _ = std::fs::remove_dir_all(&state_dir);

    let seen = seen.lock().unwrap().clone();
    assert_once_each(&seen, total);
    let mut last: BTreeMap<&str, usize> = BTreeMap::new();
    for (key, value) in &seen {
        let n: usize = value.trim_end_matches('+').parse().unwrap();
        if let Some(before) = last.insert(key, n) {
            assert!(before < n, "key {key}: {n} after {before}");
        }
    }
    assert_eq!(last.len(), 40);
    // Every call was timed; none is left in flight.
    assert_eq!(
        metric_sum(&metrics, "kstreams_async_call_latency_seconds_count"),
        total as f64
    );
    assert_eq!(metric_sum(&metrics, "kstreams_async_in_flight"), 0.0);
    assert!(metric_sum(&metrics, "kstreams_async_queue_time_seconds_count") >= total as f64);
    assert_eq!(metric_sum(&metrics, "kstreams_async_timeouts_total"), 0.0);
}

#[test]
fn a_rebalance_with_calls_in_flight_loses_and_repeats_nothing() {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let input = unique_name("async-rebalance-in");
    let output = unique_name("async-rebalance-out");
    create_topic(&bootstrap, &input, 4, 1).unwrap();
    create_topic(&bootstrap, &output, 4, 1).unwrap();
    let app_id = unique_name("async-rebalance-app");
    let dirs = [
        std::env::temp_dir().join(unique_name("async-rebalance-a")),
        std::env::temp_dir().join(unique_name("async-rebalance-b")),
    ];
    let total = 3_000;
    let stop = Arc::new(AtomicBool::new(false));
    let (seen, reader) = read_in_background(&bootstrap, &output, stop.clone());
    // Produced steadily: calls are in flight whenever the group rebalances.
    let producing = produce(&bootstrap, &input, 0..total, 40, 500);
    let mut first = async_app(&input, &output, config(&bootstrap, &app_id, &dirs[0]));
    first.start().unwrap();
    wait_for(&seen, 500, Duration::from_secs(60));
    let mut second = async_app(&input, &output, config(&bootstrap, &app_id, &dirs[1]));
    second.start().unwrap();
    producing.join().unwrap();
    wait_for(&seen, total, Duration::from_secs(90));
    std::thread::sleep(Duration::from_secs(2));
    let both_ran = first.state() == State::Running && second.state() == State::Running;
    assert!(first.close(Duration::from_secs(30)));
    assert!(second.close(Duration::from_secs(30)));
    stop.store(true, Ordering::Release);
    reader.join().unwrap();
    for dir in &dirs {
        let _ = std::fs::remove_dir_all(dir);
    }
    assert!(both_ran, "both instances were running at the end");
    let seen = seen.lock().unwrap().clone();
    // The revocation waited for the calls and committed past them.
    assert_once_each(&seen, total);
}

fn eos_async_app(spec: &str) -> KafkaStreams {
    let common::ChildRun {
        bootstrap,
        app_id,
        input,
        output,
        state_dir,
    } = common::ChildRun::parse(spec, CHILD_ENV);
    let config = StreamsConfig::new(app_id, bootstrap)
        .processing_guarantee(ProcessingGuarantee::ExactlyOnceV2)
        .commit_interval(Duration::from_millis(100))
        .state_dir(state_dir)
        .async_max_in_flight_per_task(32)
        .client_config("consumer.group.instance.id", &format!("{app_id}-member"))
        .client_config("consumer.session.timeout.ms", "30000");
    async_app(input, output, config)
}

/// The child side: runs the app until the parent kills it.
#[test]
fn async_eos_child_process() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return; // only meaningful when started by the SIGKILL test
    };
    common::run_until_killed(eos_async_app(&spec));
}

fn spawn_child(spec: &str) -> Child {
    common::spawn_test_child(module_path!(), "async_eos_child_process", CHILD_ENV, spec)
}

#[test]
fn nothing_is_lost_or_duplicated_across_a_sigkill_with_calls_in_flight_under_exactly_once() {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let run = FreshRun::new(&bootstrap, "async-eos");
    let spec = run.child_spec(&bootstrap);
    let FreshRun {
        input,
        output,
        app_id: _,
        state_dir,
    } = run;
    let total = 6_000;
    let stop = Arc::new(AtomicBool::new(false));
    let (seen, reader) = read_in_background(&bootstrap, &output, stop.clone());
    let producing = produce(&bootstrap, &input, 0..total, 50, 1_000);

    let mut first = spawn_child(&spec);
    wait_for(&seen, 1_500, Duration::from_secs(60));
    assert!(
        seen.lock().unwrap().len() >= 1_500,
        "progress before the kill"
    );
    // Input keeps arriving: the instance dies with calls in flight and a
    // transaction open.
    first.kill().unwrap();
    first.wait().unwrap();

    let mut second = spawn_child(&spec);
    producing.join().unwrap();
    wait_for(&seen, total, Duration::from_secs(120));
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Release);
    reader.join().unwrap();
    second.kill().unwrap();
    second.wait().unwrap();
    let _ = std::fs::remove_dir_all(&state_dir);

    let seen = seen.lock().unwrap().clone();
    assert_once_each(&seen, total);
    let keys: BTreeSet<&str> = seen.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys.len(), 50);
}
