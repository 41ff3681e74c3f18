//! When a stream thread commits, on a real broker under exactly-once: only
//! when something needs it (Kafka Streams' `commitNeeded`), so an idle
//! thread sends no transaction every commit interval, and always when a
//! wall-clock punctuation wrote, so its outputs become visible without any
//! input.

use crate::common::{self, Input};

use std::time::{Duration, Instant};

use kstreams_dsl::StreamsBuilder;
use kstreams_embedded::rdkafka::consumer::Consumer;
use kstreams_embedded::rdkafka::Message;
use kstreams_embedded::test_broker;
use kstreams_runtime::kafka::{KafkaStreams, ProcessingGuarantee, StreamsConfig};

type S = String;

const COMMITS: &str = "kstreams_thread_commit_latency_seconds_count";

fn eos_config(run: &common::FreshRun, bootstrap: &str) -> StreamsConfig {
    StreamsConfig::new(&run.app_id, bootstrap)
        .processing_guarantee(ProcessingGuarantee::ExactlyOnceV2)
        .commit_interval(Duration::from_millis(100))
        .state_dir(&run.state_dir)
}

fn commits(app: &KafkaStreams) -> f64 {
    common::metric_sum(&app.metrics().gather_text(), COMMITS)
}

/// Values of `topic` a read_committed consumer sees within `timeout`, up
/// to `want`.
fn committed_values(bootstrap: &str, topic: &str, want: usize, timeout: Duration) -> Vec<String> {
    let consumer = common::read_committed_consumer(bootstrap, topic);
    let deadline = Instant::now() + timeout;
    let mut values = Vec::new();
    while values.len() < want && Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            values.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
        }
    }
    consumer.unsubscribe();
    values
}

#[test]
fn an_idle_exactly_once_thread_commits_nothing() {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let run = common::FreshRun::new(&bootstrap, "idle-eos");
    common::produce(
        &bootstrap,
        &run.input,
        (0..20).map(|i| Input::new(format!("k{i}"), format!("v{i}"))),
    );
    let builder = StreamsBuilder::new();
    builder
        .stream::<S, S>(&run.input)
        .map_values(|v| format!("seen:{v}"))
        .to(&run.output);
    let mut app = KafkaStreams::new(builder.build().unwrap(), eos_config(&run, &bootstrap));
    app.start().unwrap();
    let out = committed_values(&bootstrap, &run.output, 20, Duration::from_secs(60));
    assert_eq!(out.len(), 20, "every record out under read_committed");
    // The commit of the last records and that of the position past their
    // transaction's marker may still be under way.
    std::thread::sleep(Duration::from_secs(1));
    let before = commits(&app);
    assert!(before >= 1.0, "the input was committed");
    // Twenty commit intervals with nothing to commit.
    std::thread::sleep(Duration::from_secs(2));
    let after = commits(&app);
    app.close(Duration::from_secs(30));
    assert_eq!(
        after,
        before,
        "an idle thread committed {} times in 2 s (commit interval 100 ms)",
        after - before
    );
}

#[test]
fn a_wall_clock_punctuation_without_input_commits_its_outputs_under_exactly_once() {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    // No input record at all: only the punctuator writes.
    let run = common::FreshRun::new(&bootstrap, "punctuated-eos");
    let builder = StreamsBuilder::new();
    builder
        .stream::<S, S>(&run.input)
        .process(|| common::Ticker(Duration::from_millis(100)), &[])
        .to(&run.output);
    let mut app = KafkaStreams::new(builder.build().unwrap(), eos_config(&run, &bootstrap));
    app.start().unwrap();
    let ticks = committed_values(&bootstrap, &run.output, 5, Duration::from_secs(60));
    app.close(Duration::from_secs(30));
    assert!(
        ticks.len() >= 5,
        "the punctuator's ticks are committed and read under read_committed: {ticks:?}"
    );
}
