//! What the broker tests of this directory that use it share.

// Each test binary that includes this module uses a part of it.
#![allow(dead_code)]

use std::path::PathBuf;

use kstreams_embedded::rdkafka::consumer::{BaseConsumer, Consumer};
use kstreams_embedded::rdkafka::ClientConfig;
use kstreams_embedded::{create_topic, unique_name};

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
