//! Async processors on the TopologyTestDriver: per-key order under random
//! call latencies, output order across keys, timeouts to the handler and
//! the dead-letter queue, retries.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kstreams_dsl::{AsyncOptions, AsyncOrder, StreamsBuilder, Topology};
use kstreams_record::StringSerde;
use kstreams_runtime::{ProcessingHandling, TaskConfig, TopologyTestDriver};

/// A small deterministic generator: latencies differ per record, and the
/// same on every run.
fn latency_ms(seed: u64) -> u64 {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    x ^= x >> 33;
    x % 15
}

/// Counts calls running now, per key and over all keys.
#[derive(Default)]
struct Concurrency {
    running: AtomicUsize,
    most: AtomicUsize,
    per_key: Mutex<HashMap<String, usize>>,
    same_key_overlap: AtomicUsize,
}

impl Concurrency {
    fn enter(&self, key: &str) {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        let mut keys = self.per_key.lock().unwrap();
        let n = keys.entry(key.to_string()).or_default();
        *n += 1;
        if *n > 1 {
            self.same_key_overlap.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn leave(&self, key: &str) {
        self.running.fetch_sub(1, Ordering::SeqCst);
        *self.per_key.lock().unwrap().get_mut(key).unwrap() -= 1;
    }

    /// A call as a slow service would take: as long as the record's
    /// latency, counted while it runs.
    async fn call(&self, key: &str, value: &str) {
        self.enter(key);
        let n: u64 = value.parse().unwrap();
        tokio::time::sleep(Duration::from_millis(latency_ms(n))).await;
        self.leave(key);
    }

    /// No two calls of a key ran at once, and calls of different keys did.
    fn assert_keys_serialized_and_overlapping(&self) {
        assert_eq!(
            self.same_key_overlap.load(Ordering::SeqCst),
            0,
            "two calls of one key ran at once"
        );
        assert!(
            self.most.load(Ordering::SeqCst) > 1,
            "calls of different keys never overlapped"
        );
    }
}

fn keyed_inputs(records: usize, keys: usize) -> Vec<(String, String)> {
    (0..records)
        .map(|i| (format!("k{}", i % keys), format!("{i}")))
        .collect()
}

/// The values of `key` in `records`, in their order.
fn values_of(records: &[(String, String)], key: &str) -> Vec<String> {
    records
        .iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
        .collect()
}

#[test]
fn records_of_one_key_come_out_in_input_order_while_keys_overlap() {
    let concurrency = Arc::new(Concurrency::default());
    let builder = StreamsBuilder::new();
    let seen = concurrency.clone();
    builder
        .stream::<String, String>("in")
        .map_values_async(
            move |key: String, value: String| {
                let seen = seen.clone();
                async move {
                    seen.call(&key, &value).await;
                    Ok::<_, std::io::Error>(format!("{value}!"))
                }
            },
            AsyncOptions::new(),
        )
        .to("out");
    let driver = TopologyTestDriver::new(builder.build().unwrap()).unwrap();
    driver.set_wait_for_async_after_input(false);
    let input = driver.create_input_topic("in", StringSerde, StringSerde);
    let output = driver.create_output_topic("out", StringSerde, StringSerde);
    let inputs = keyed_inputs(200, 8);
    input.pipe_key_value_list(inputs.clone());
    driver.wait_for_async().unwrap();
    assert_eq!(driver.async_in_flight(), 0);

    let out = output.read_key_values_to_list();
    assert_eq!(out.len(), inputs.len());
    for key in (0..8).map(|k| format!("k{k}")) {
        let expected: Vec<String> = values_of(&inputs, &key)
            .iter()
            .map(|v| format!("{v}!"))
            .collect();
        assert_eq!(values_of(&out, &key), expected, "key {key}");
    }
    concurrency.assert_keys_serialized_and_overlapping();
}

fn slow_and_fast(order: AsyncOrder) -> Vec<String> {
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>("in")
        .map_values_async(
            |key: String, value: String| async move {
                let wait = if key == "slow" { 200 } else { 0 };
                tokio::time::sleep(Duration::from_millis(wait)).await;
                Ok::<_, std::io::Error>(value)
            },
            AsyncOptions::new().with_order(order),
        )
        .to("out");
    let driver = TopologyTestDriver::new(builder.build().unwrap()).unwrap();
    driver.set_wait_for_async_after_input(false);
    let input = driver.create_input_topic("in", StringSerde, StringSerde);
    let output = driver.create_output_topic("out", StringSerde, StringSerde);
    input.pipe_input("slow".to_string(), "first".to_string());
    input.pipe_input("fast".to_string(), "second".to_string());
    driver.wait_for_async().unwrap();
    output.read_values_to_list()
}

#[test]
fn per_key_order_lets_a_fast_key_overtake_and_input_order_does_not() {
    assert_eq!(slow_and_fast(AsyncOrder::PerKey), ["second", "first"]);
    assert_eq!(slow_and_fast(AsyncOrder::Input), ["first", "second"]);
}

#[test]
fn by_default_each_input_waits_for_its_call() {
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>("in")
        .map_values_async(
            |_key: String, value: String| async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok::<_, std::io::Error>(value.len())
            },
            AsyncOptions::new(),
        )
        .map_values(|n| n.to_string())
        .to("out");
    let driver = TopologyTestDriver::new(builder.build().unwrap()).unwrap();
    let input = driver.create_input_topic("in", StringSerde, StringSerde);
    let output = driver.create_output_topic("out", StringSerde, StringSerde);
    input.pipe_input("a".to_string(), "abc".to_string());
    assert_eq!(output.read_key_value(), ("a".to_string(), "3".to_string()));
    assert_eq!(driver.async_in_flight(), 0);
}

fn never_answers(config: TaskConfig, options: AsyncOptions) -> TopologyTestDriver {
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>("in")
        .map_values_async(
            |_key: String, value: String| async move {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok::<_, std::io::Error>(value)
            },
            options,
        )
        .to("out");
    TopologyTestDriver::with_config(builder.build().unwrap(), config, 0).unwrap()
}

#[test]
fn a_timed_out_call_goes_to_the_handler_and_the_dead_letter_queue() {
    let mut config = TaskConfig::new("app");
    config.processing = ProcessingHandling::Continue;
    config.dead_letter_queue = Some("dlq".to_string());
    let options = AsyncOptions::new()
        .with_timeout(Duration::from_millis(20))
        .with_retries(1, Duration::from_millis(1));
    let driver = never_answers(config, options);
    let input = driver.create_input_topic("in", StringSerde, StringSerde);
    let output = driver.create_output_topic("out", StringSerde, StringSerde);
    let dlq = driver.create_output_topic("dlq", StringSerde, StringSerde);
    input.pipe_input("k".to_string(), "v".to_string());
    assert!(output.is_empty());
    assert_eq!(driver.dropped_records(), 1);
    let dead = dlq.read_record();
    assert_eq!((dead.key.as_str(), dead.value.as_str()), ("k", "v"));
    let header = |name: &str| {
        let value = dead.headers.last(name).and_then(|h| h.value.clone());
        String::from_utf8(value.unwrap_or_default()).unwrap()
    };
    assert_eq!(
        header("__streams.errors.exception"),
        "java.lang.RuntimeException"
    );
    let message = header("__streams.errors.message");
    assert!(
        message.contains("timed out after 20 ms (2 attempts)"),
        "{message}"
    );
    assert_eq!(header("__streams.errors.offset"), "0");
}

#[test]
fn a_timed_out_call_fails_the_input_under_the_fail_handler() {
    let options = AsyncOptions::new().with_timeout(Duration::from_millis(10));
    let driver = never_answers(TaskConfig::new("app"), options);
    let input = driver.create_input_topic("in", StringSerde, StringSerde);
    let error = input
        .try_pipe_input("k".to_string(), "v".to_string())
        .unwrap_err();
    assert!(error.to_string().contains("timed out"), "{error}");
}

fn flaky(failures: usize, retries: u32) -> (TopologyTestDriver, Arc<AtomicUsize>) {
    let attempts = Arc::new(AtomicUsize::new(0));
    let counted = attempts.clone();
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>("in")
        .map_values_async(
            move |_key: String, value: String| {
                let attempt = counted.fetch_add(1, Ordering::SeqCst);
                async move {
                    if attempt < failures {
                        Err(std::io::Error::other(format!("attempt {attempt} failed")))
                    } else {
                        Ok(value)
                    }
                }
            },
            AsyncOptions::new().with_retries(retries, Duration::from_millis(1)),
        )
        .to("out");
    let driver = TopologyTestDriver::new(builder.build().unwrap()).unwrap();
    (driver, attempts)
}

#[test]
fn a_failing_call_is_retried_until_it_succeeds() {
    let (driver, attempts) = flaky(2, 3);
    let input = driver.create_input_topic("in", StringSerde, StringSerde);
    let output = driver.create_output_topic("out", StringSerde, StringSerde);
    input.pipe_input("k".to_string(), "v".to_string());
    assert_eq!(output.read_value(), "v");
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
}

#[test]
fn a_call_failing_past_its_retries_reaches_the_handler() {
    let (driver, attempts) = flaky(5, 1);
    let input = driver.create_input_topic("in", StringSerde, StringSerde);
    let error = input
        .try_pipe_input("k".to_string(), "v".to_string())
        .unwrap_err();
    assert!(error.to_string().contains("KSTREAM-ASYNC-"), "{error}");
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
}

#[test]
fn process_async_forwards_any_number_of_records_and_stores_downstream_see_them() {
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>("in")
        .process_async(
            |key: String, value: String| async move {
                let words: Vec<(String, String)> = value
                    .split(' ')
                    .map(|w| (w.to_string(), key.clone()))
                    .collect();
                Ok::<_, std::io::Error>(words)
            },
            AsyncOptions::new().with_name("split-remote"),
        )
        .group_by_key()
        .count()
        .to_stream()
        .map_values(|n| n.map_or_else(String::new, |n| n.to_string()))
        .to("counts");
    let driver = TopologyTestDriver::new(builder.build().unwrap()).unwrap();
    let input = driver.create_input_topic("in", StringSerde, StringSerde);
    let output = driver.create_output_topic("counts", StringSerde, StringSerde);
    input.pipe_input("a".to_string(), "x y".to_string());
    input.pipe_input("b".to_string(), "x".to_string());
    let counts = output.read_key_values_to_map();
    assert_eq!(counts["x"], "2");
    assert_eq!(counts["y"], "1");
}

#[test]
fn a_processor_api_async_processor_keeps_per_key_order_and_may_emit_several_records() {
    let concurrency = Arc::new(Concurrency::default());
    let seen = concurrency.clone();
    let mut topology = Topology::new();
    topology
        .add_source("src", &["in"], StringSerde, StringSerde)
        .unwrap()
        .add_async_processor(
            "split",
            move |key: String, value: String| {
                let seen = seen.clone();
                async move {
                    seen.call(&key, &value).await;
                    // The key changes and one input gives two outputs.
                    Ok::<_, std::io::Error>(vec![
                        (format!("{key}-a"), value.clone()),
                        (format!("{key}-b"), value),
                    ])
                }
            },
            AsyncOptions::new(),
            &["src"],
        )
        .unwrap()
        .add_sink("sink", "out", StringSerde, StringSerde, &["split"])
        .unwrap();
    let driver = TopologyTestDriver::new(topology).unwrap();
    driver.set_wait_for_async_after_input(false);
    let input = driver.create_input_topic("in", StringSerde, StringSerde);
    let output = driver.create_output_topic("out", StringSerde, StringSerde);
    let inputs = keyed_inputs(120, 6);
    input.pipe_key_value_list(inputs.clone());
    driver.wait_for_async().unwrap();
    assert_eq!(driver.async_in_flight(), 0);

    let out = output.read_key_values_to_list();
    assert_eq!(out.len(), 2 * inputs.len());
    for key in (0..6).map(|k| format!("k{k}")) {
        let expected = values_of(&inputs, &key);
        for side in ["a", "b"] {
            let got = values_of(&out, &format!("{key}-{side}"));
            assert_eq!(got, expected, "key {key}-{side}");
        }
    }
    concurrency.assert_keys_serialized_and_overlapping();
}

#[test]
fn an_async_processor_under_a_parent_of_other_types_is_refused_at_build_time() {
    let mut topology = Topology::new();
    topology
        .add_source("src", &["in"], StringSerde, StringSerde)
        .unwrap();
    let refused = topology.add_async_processor(
        "typed",
        |key: u64, value: String| async move { Ok::<_, std::io::Error>(vec![(key, value)]) },
        AsyncOptions::new(),
        &["src"],
    );
    assert!(
        refused.is_err(),
        "a u64-keyed async processor under a String source"
    );
}
