//! What the broker tests of this directory that use it share.

// Each test binary that includes this module uses a part of it.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kstreams_embedded::rdkafka::consumer::{BaseConsumer, Consumer};
use kstreams_embedded::rdkafka::ClientConfig;
use kstreams_embedded::{create_topic, unique_name};
use kstreams_runtime::kafka::{KafkaStreams, State};

/// A consumer of its own new group, subscribed to `topic` from its start,
/// that sees committed transactions only.
pub fn read_committed_consumer(bootstrap: &str, topic: &str) -> BaseConsumer {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", unique_name("reader"))
        .set("auto.offset.reset", "earliest")
        .set("isolation.level", "read_committed")
        .create()
        .unwrap();
    consumer.subscribe(&[topic]).unwrap();
    consumer
}

/// A fresh run named after `name`: new input and output topics of two
/// partitions, an application id and a state directory (not created).
pub struct FreshRun {
    pub input: String,
    pub output: String,
    pub app_id: String,
    pub state_dir: PathBuf,
}

impl FreshRun {
    pub fn new(bootstrap: &str, name: &str) -> FreshRun {
        let input = unique_name(&format!("{name}-in"));
        let output = unique_name(&format!("{name}-out"));
        create_topic(bootstrap, &input, 2, 1).unwrap();
        create_topic(bootstrap, &output, 2, 1).unwrap();
        FreshRun {
            input,
            output,
            app_id: unique_name(&format!("{name}-app")),
            state_dir: std::env::temp_dir().join(unique_name(&format!("{name}-state"))),
        }
    }
}

/// Runs this test binary again as a child process running only the test
/// `test`, with `env` set to `value` (the child's test reads its part from
/// there), for a test that kills the child.
pub fn spawn_test_child(test: &str, env: &str, value: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env(env, value)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// The child's side: starts `app` and runs it until the process is
/// killed, failing if it reaches ERROR first.
pub fn run_until_killed(mut app: KafkaStreams) -> ! {
    app.start().unwrap();
    loop {
        std::thread::sleep(Duration::from_millis(100));
        assert_ne!(app.state(), State::Error, "{:?}", app.errors());
    }
}

/// Sum of a metric family's samples in Prometheus text.
pub fn metric_sum(text: &str, family: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}
