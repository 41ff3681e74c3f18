//! Per-source offset reset policies (Kafka Streams' `AutoOffsetReset`,
//! KIP-1106) on librdkafka's mock cluster: a partition without a committed
//! offset starts where its source says, whatever `auto.offset.reset` is.

use crate::common::{self, Input};

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kstreams_dsl::{AutoOffsetReset, Consumed, StreamsBuilder, Topology};
use kstreams_embedded::rdkafka::consumer::{BaseConsumer, Consumer};
use kstreams_embedded::rdkafka::{ClientConfig, Message};
use kstreams_embedded::{unique_name, EmbeddedKafka};
use kstreams_record::StringSerde;
use kstreams_runtime::kafka::{
    KafkaStreams, RuntimeError, State, StreamThreadExceptionResponse, StreamsConfig,
};

fn values(prefix: &str, range: std::ops::Range<usize>) -> Vec<Input> {
    range
        .map(|i| Input::new(format!("k{i}"), format!("{prefix}{i}")))
        .collect()
}

/// Reads a topic from its start.
struct Reader {
    consumer: BaseConsumer,
    seen: BTreeSet<String>,
}

impl Reader {
    fn new(bootstrap: &str, topic: &str) -> Self {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", unique_name("offset-reset-reader"))
            .set("auto.offset.reset", "earliest")
            .create()
            .unwrap();
        consumer.subscribe(&[topic]).unwrap();
        Self {
            consumer,
            seen: BTreeSet::new(),
        }
    }

    /// The values read once `want` arrived (or after 30 s), and a second
    /// more for any extra.
    fn until(&mut self, want: usize) -> &BTreeSet<String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut settle: Option<Instant> = None;
        while Instant::now() < deadline && settle.is_none_or(|s| Instant::now() < s) {
            if let Some(Ok(m)) = self.consumer.poll(Duration::from_millis(100)) {
                let value = m.payload().unwrap_or_default();
                self.seen
                    .insert(String::from_utf8_lossy(value).into_owned());
            }
            if self.seen.len() >= want && settle.is_none() {
                settle = Some(Instant::now() + Duration::from_secs(1));
            }
        }
        &self.seen
    }
}

#[test]
fn a_source_with_latest_skips_what_was_there_while_the_default_reads_it_all() {
    let _ = env_logger::builder().is_test(true).try_init();
    let kafka = EmbeddedKafka::start(1).unwrap();
    let bootstrap = kafka.bootstrap_servers();
    for topic in ["recent", "everything", "merged"] {
        kafka.create_topic(topic, 1, 1).unwrap();
    }
    common::produce(&bootstrap, "recent", values("old-r", 0..5));
    common::produce(&bootstrap, "everything", values("old-e", 0..5));
    let builder = StreamsBuilder::new();
    let recent = builder.stream_with::<String, String>(
        "recent",
        Consumed::with(StringSerde, StringSerde)
            .with_offset_reset_policy(AutoOffsetReset::latest()),
    );
    builder
        .stream::<String, String>("everything")
        .merge(&recent)
        .to("merged");
    // auto.offset.reset is earliest (Kafka Streams' default).
    let config = StreamsConfig::new("offset-reset-latest", &bootstrap)
        .commit_interval(Duration::from_millis(100));
    let mut app = KafkaStreams::new(builder.build().unwrap(), config);
    app.start().unwrap();
    // The default source read its old records: the partitions are placed.
    let mut merged = Reader::new(&bootstrap, "merged");
    let before = merged.until(5).len();
    assert_eq!(before, 5, "{:?}", merged.seen);
    common::produce(&bootstrap, "recent", values("new-r", 0..3));
    common::produce(&bootstrap, "everything", values("new-e", 0..3));
    let all = merged.until(11).clone();
    app.close(Duration::from_secs(30));
    let expected: BTreeSet<String> = (0..5)
        .map(|i| format!("old-e{i}"))
        .chain((0..3).flat_map(|i| [format!("new-e{i}"), format!("new-r{i}")]))
        .collect();
    assert_eq!(
        all, expected,
        "the latest source skipped its old records only"
    );
}

#[test]
fn a_source_with_none_fails_the_thread_naming_its_partition_under_an_earliest_default() {
    let kafka = EmbeddedKafka::start(1).unwrap();
    let bootstrap = kafka.bootstrap_servers();
    for topic in ["strict", "lenient", "out"] {
        kafka.create_topic(topic, 1, 1).unwrap();
    }
    common::produce(&bootstrap, "strict", values("s", 0..2));
    let mut topology = Topology::new();
    topology
        .add_source_with_offset_reset(
            AutoOffsetReset::none(),
            "strict-source",
            &["strict"],
            StringSerde,
            StringSerde,
        )
        .unwrap()
        .add_source("lenient-source", &["lenient"], StringSerde, StringSerde)
        .unwrap()
        .add_sink::<String, String>(
            "sink",
            "out",
            StringSerde,
            StringSerde,
            &["strict-source", "lenient-source"],
        )
        .unwrap();
    let config = StreamsConfig::new("offset-reset-none", &bootstrap)
        .commit_interval(Duration::from_millis(100));
    let mut app = KafkaStreams::new(topology, config);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    app.set_uncaught_exception_handler(move |error: &RuntimeError| {
        record.lock().unwrap().push(error.to_string());
        StreamThreadExceptionResponse::ShutdownClient
    });
    app.start().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while app.state() != State::Error {
        assert!(Instant::now() < deadline, "no failure: {:?}", app.state());
        std::thread::sleep(Duration::from_millis(50));
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(
        seen[0].starts_with("no committed offset for strict-0 and "),
        "the strict source's partition alone: {seen:?}"
    );
    assert!(
        Reader::new(&bootstrap, "out").until(1).is_empty(),
        "nothing of the strict source was processed"
    );
}
