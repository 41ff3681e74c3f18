//! What the broker tests of this directory share.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kstreams_dsl::{Processor, ProcessorContext, ProcessorError, PunctuationId};
use kstreams_embedded::rdkafka::consumer::{BaseConsumer, Consumer};
use kstreams_embedded::rdkafka::error::KafkaError;
use kstreams_embedded::rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use kstreams_embedded::rdkafka::types::RDKafkaErrorCode;
use kstreams_embedded::rdkafka::ClientConfig;
use kstreams_embedded::{create_topic, unique_name};
use kstreams_record::Record;
use kstreams_runtime::kafka::{KafkaStreams, State};

/// A record for [`produce`]: its key and value, and its partition and
/// timestamp when the test sets them (else the partitioner's and the
/// producer's clock).
pub(crate) struct Input {
    pub key: String,
    pub value: String,
    pub partition: Option<i32>,
    pub timestamp: Option<i64>,
}

impl Input {
    pub(crate) fn new(key: impl Into<String>, value: impl Into<String>) -> Input {
        Input {
            key: key.into(),
            value: value.into(),
            partition: None,
            timestamp: None,
        }
    }

    pub(crate) fn at(mut self, timestamp: i64) -> Input {
        self.timestamp = Some(timestamp);
        self
    }

    pub(crate) fn in_partition(mut self, partition: i32) -> Input {
        self.partition = Some(partition);
        self
    }
}

/// Writes `records` to `topic` in order and waits until all are
/// acknowledged. Keys without a partition go where Java's partitioner puts
/// them, as kstreams' sinks and Kafka Streams do; a full queue waits.
pub(crate) fn produce(bootstrap: &str, topic: &str, records: impl IntoIterator<Item = Input>) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "5")
        .set("partitioner", "murmur2_random")
        .create()
        .unwrap();
    for input in records {
        let mut record = BaseRecord::to(topic).key(&input.key).payload(&input.value);
        if let Some(partition) = input.partition {
            record = record.partition(partition);
        }
        if let Some(timestamp) = input.timestamp {
            record = record.timestamp(timestamp);
        }
        while let Err((error, back)) = producer.send(record) {
            assert_eq!(
                error,
                KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull),
                "producing to {topic}"
            );
            record = back;
            producer.poll(Duration::from_millis(20));
        }
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(30)).unwrap();
}

/// [`produce`] on a thread of its own, at about `per_second` records a
/// second (as fast as it goes when 0).
pub(crate) fn produce_paced(
    bootstrap: &str,
    topic: &str,
    records: Vec<Input>,
    per_second: u64,
) -> std::thread::JoinHandle<()> {
    let (bootstrap, topic) = (bootstrap.to_owned(), topic.to_owned());
    std::thread::spawn(move || {
        let start = Instant::now();
        let paced = records.into_iter().enumerate().map(move |(i, input)| {
            if let Some(micros) = (i as u64 * 1_000_000).checked_div(per_second) {
                let due = start + Duration::from_micros(micros);
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
            }
            input
        });
        produce(&bootstrap, &topic, paced);
    })
}

/// A consumer of its own new group, subscribed to `topic` from its start,
/// that sees committed transactions only.
pub(crate) fn read_committed_consumer(bootstrap: &str, topic: &str) -> BaseConsumer {
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
pub(crate) struct FreshRun {
    pub input: String,
    pub output: String,
    pub app_id: String,
    pub state_dir: PathBuf,
}

impl FreshRun {
    pub(crate) fn new(bootstrap: &str, name: &str) -> FreshRun {
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

impl FreshRun {
    /// The run as one string for a child process ([`spawn_test_child`]),
    /// which reads it back with [`ChildRun::parse`].
    pub(crate) fn child_spec(&self, bootstrap: &str) -> String {
        format!(
            "{bootstrap}|{}|{}|{}|{}",
            self.app_id,
            self.input,
            self.output,
            self.state_dir.display()
        )
    }
}

/// A [`FreshRun`] as a child process reads it from its environment.
pub(crate) struct ChildRun<'a> {
    pub bootstrap: &'a str,
    pub app_id: &'a str,
    pub input: &'a str,
    pub output: &'a str,
    pub state_dir: &'a str,
}

impl ChildRun<'_> {
    /// Reads [`FreshRun::child_spec`]'s string, from `env` (named in the
    /// panic of a malformed one).
    pub(crate) fn parse<'a>(spec: &'a str, env: &str) -> ChildRun<'a> {
        let parts: Vec<&str> = spec.split('|').collect();
        let [bootstrap, app_id, input, output, state_dir] = parts[..] else {
            panic!("bad {env}: {spec}");
        };
        ChildRun {
            bootstrap,
            app_id,
            input,
            output,
            state_dir,
        }
    }
}

/// Runs this test binary again as a child process running only the test
/// `test`, with `env` set to `value` (the child's test reads its part from
/// there), for a test that kills the child.
pub(crate) fn spawn_test_child(module: &str, test: &str, env: &str, value: &str) -> Child {
    // libtest names a test by its path without the crate's name:
    // `module_path!()` is `integration::eos_restart`, the test
    // `eos_restart::eos_restart_child_process`.
    let module = module.split_once("::").map_or("", |(_, module)| module);
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &format!("{module}::{test}"),
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(env, value)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// The child's side: starts `app` and runs it until the process is
/// killed, failing if it reaches ERROR first.
pub(crate) fn run_until_killed(mut app: KafkaStreams) -> ! {
    app.start().unwrap();
    loop {
        std::thread::sleep(Duration::from_millis(100));
        assert_ne!(app.state(), State::Error, "{:?}", app.errors());
    }
}

/// Sum of a metric family's samples in Prometheus text.
pub(crate) fn metric_sum(text: &str, family: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// Forwards a tick (key "tick", the punctuation's time as the value) at
/// every wall-clock punctuation, `.0` apart, input or not.
pub(crate) struct Ticker(pub Duration);

impl Processor<String, String, String, String> for Ticker {
    fn init(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, String>,
    ) -> Result<(), ProcessorError> {
        ctx.schedule(self.0, kstreams_time::PunctuationType::WallClockTime);
        Ok(())
    }

    fn process(
        &mut self,
        _: &mut ProcessorContext<'_, String, String>,
        _: Record<String, String>,
    ) -> Result<(), ProcessorError> {
        Ok(())
    }

    fn punctuate(
        &mut self,
        ctx: &mut ProcessorContext<'_, String, String>,
        _: PunctuationId,
        timestamp: i64,
    ) -> Result<(), ProcessorError> {
        assert!(
            ctx.record_metadata().is_none(),
            "no record in a punctuation"
        );
        ctx.forward(Record::new(
            "tick".to_owned(),
            timestamp.to_string(),
            timestamp,
        ))?;
        Ok(())
    }
}
