//! Runnable kstreams applications live in this package as examples; this
//! library holds what they share around the application itself: putting
//! records on the embedded cluster with chosen partitions and timestamps,
//! reading a topic back whole, and waiting for an instance to run.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use kstreams::embedded::rdkafka::consumer::{BaseConsumer, Consumer};
use kstreams::embedded::rdkafka::message::Headers as _;
use kstreams::embedded::rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use kstreams::embedded::rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use kstreams::prelude::*;

/// What the examples' own code can fail with.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The partition of `key` among `partitions`: every example producer uses
/// it for every topic, so records of one key meet in one task (co-partitioned)
/// whatever partitioner the client would pick.
pub fn partition_of(key: &str, partitions: i32) -> i32 {
    // FNV-1a: stable across runs and platforms, unlike std's hasher.
    let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (hash % partitions as u64) as i32
}

/// One record to produce: key, value (`None` is a tombstone), timestamp.
pub struct Outgoing<'a> {
    /// The record key; also decides the partition.
    pub key: &'a str,
    /// The value bytes.
    pub value: Option<&'a [u8]>,
    /// The record timestamp (CreateTime), in ms.
    pub timestamp: i64,
}

/// A producer of the examples' input records.
pub struct InputProducer {
    producer: BaseProducer,
}

impl InputProducer {
    /// A producer on `bootstrap` that sends each record at once
    /// (`linger.ms` 0), so the order of `send` calls is the offset order.
    pub fn new(bootstrap: &str) -> Result<Self, BoxError> {
        let producer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("linger.ms", "0")
            .create()?;
        Ok(Self { producer })
    }

    /// Sends `record` to `topic` (of `partitions` partitions) on the
    /// partition [`partition_of`] its key.
    pub fn send(&self, topic: &str, partitions: i32, record: Outgoing<'_>) -> Result<(), BoxError> {
        let mut outgoing = BaseRecord::to(topic)
            .key(record.key)
            .partition(partition_of(record.key, partitions))
            .timestamp(record.timestamp);
        if let Some(value) = record.value {
            outgoing = outgoing.payload(value);
        }
        loop {
            match self.producer.send(outgoing) {
                Ok(()) => break,
                Err((e, back)) => {
                    if e.rdkafka_error_code()
                        != Some(kstreams::embedded::rdkafka::types::RDKafkaErrorCode::QueueFull)
                    {
                        return Err(e.into());
                    }
                    self.producer.poll(Duration::from_millis(10));
                    outgoing = back;
                }
            }
        }
        self.producer.poll(Duration::ZERO);
        Ok(())
    }

    /// Waits until every record sent so far is acknowledged.
    pub fn flush(&self) -> Result<(), BoxError> {
        self.producer.flush(Duration::from_secs(10))?;
        Ok(())
    }
}

/// A record read back from a topic.
#[derive(Debug, Clone)]
pub struct Incoming {
    /// The key, as UTF-8.
    pub key: String,
    /// The key bytes.
    pub raw_key: Vec<u8>,
    /// The value bytes (`None`: a tombstone).
    pub value: Option<Vec<u8>>,
    /// The record timestamp.
    pub timestamp: i64,
    /// The headers, with their value bytes.
    pub headers: Vec<(String, Vec<u8>)>,
    /// When this reader got it.
    pub received: Instant,
}

impl Incoming {
    /// The header `name` as an 8-byte big-endian number.
    pub fn header_i64(&self, name: &str) -> Option<i64> {
        let (_, bytes) = self.headers.iter().find(|(k, _)| k == name)?;
        Some(i64::from_be_bytes(bytes.as_slice().try_into().ok()?))
    }

    /// The header `name` as UTF-8 text.
    pub fn header_text(&self, name: &str) -> Option<String> {
        let (_, bytes) = self.headers.iter().find(|(k, _)| k == name)?;
        Some(String::from_utf8_lossy(bytes).into_owned())
    }

    /// The value as UTF-8 text (empty for a tombstone).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(self.value.as_deref().unwrap_or_default()).into_owned()
    }
}

/// Every committed record of `topic`, from the beginning, read until
/// `until` holds of what was read or `timeout` passes; then what is left up
/// to the end of the topic at that moment. Reads by assignment (no group),
/// `read_committed`.
pub fn read_topic(
    bootstrap: &str,
    topic: &str,
    timeout: Duration,
    until: impl Fn(&[Incoming]) -> bool,
) -> Result<Vec<Incoming>, BoxError> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", format!("examples-reader-{topic}"))
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .create()?;
    let metadata = consumer.fetch_metadata(Some(topic), Duration::from_secs(10))?;
    let mut assignment = TopicPartitionList::new();
    for partition in metadata.topics().iter().flat_map(|t| t.partitions()) {
        assignment.add_partition_offset(topic, partition.id(), Offset::Beginning)?;
    }
    consumer.assign(&assignment)?;
    let mut read = Vec::new();
    let deadline = Instant::now() + timeout;
    let mut idle_since: Option<Instant> = None;
    loop {
        let done = until(&read);
        if Instant::now() >= deadline {
            break;
        }
        match consumer.poll(Duration::from_millis(100)) {
            Some(message) => {
                idle_since = None;
                let message = message?;
                let headers = message
                    .headers()
                    .map(|hs| {
                        hs.iter()
                            .map(|h| (h.key.to_string(), h.value.unwrap_or_default().to_vec()))
                            .collect()
                    })
                    .unwrap_or_default();
                read.push(Incoming {
                    key: String::from_utf8_lossy(message.key().unwrap_or_default()).into_owned(),
                    raw_key: message.key().unwrap_or_default().to_vec(),
                    value: message.payload().map(<[u8]>::to_vec),
                    timestamp: message.timestamp().to_millis().unwrap_or(-1),
                    headers,
                    received: Instant::now(),
                });
            }
            // Once the condition holds, a short quiet spell means the rest
            // of the topic is read too.
            None if done => {
                let since = *idle_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= Duration::from_millis(300) {
                    break;
                }
            }
            None => {}
        }
    }
    Ok(read)
}

/// Waits until `app` is RUNNING (every thread has its partitions), or fails
/// with the state it is in after `timeout`.
pub fn wait_until_running(app: &KafkaStreams, timeout: Duration) -> Result<(), BoxError> {
    let deadline = Instant::now() + timeout;
    while app.state() != State::Running {
        if matches!(app.state(), State::Error | State::PendingError) {
            return Err(format!("the application failed: {:?}", app.errors()).into());
        }
        if Instant::now() >= deadline {
            return Err(format!("not running after {timeout:?}: {:?}", app.state()).into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// A state directory of its own for one run of an example (removed when
/// dropped).
pub struct StateDir(PathBuf);

impl StateDir {
    /// A fresh directory named after `example` and this process.
    pub fn new(example: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "kstreams-example-{example}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        Self(dir)
    }

    /// Its path.
    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for StateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The `sum` and `count` of a Prometheus histogram in `metrics` (text
/// format), over the series whose labels contain every one of `labels`.
pub fn histogram_sum_count(metrics: &str, name: &str, labels: &[&str]) -> (f64, u64) {
    let mut sum = 0.0;
    let mut count = 0;
    for line in metrics.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        if !labels.iter().all(|l| series.contains(l)) {
            continue;
        }
        let metric = series.split('{').next().unwrap_or_default();
        if metric == format!("{name}_sum") {
            sum += value.parse::<f64>().unwrap_or(0.0);
        } else if metric == format!("{name}_count") {
            count += value.parse::<f64>().unwrap_or(0.0) as u64;
        }
    }
    (sum, count)
}

/// Creates the internal topics of `topology` (repartition and changelog
/// topics, `partitions` each) on the embedded cluster: librdkafka's mock
/// cluster does not answer the admin API's CreateTopics, which the
/// application would otherwise use at start.
pub fn create_internal_topics(
    kafka: &EmbeddedKafka,
    topology: &Topology,
    application_id: &str,
    partitions: i32,
) -> Result<(), BoxError> {
    let repartition = topology
        .internal_topics()
        .map(|t| format!("{application_id}-{t}"));
    let changelogs = topology
        .changelog_topics(application_id)
        .into_iter()
        .map(|c| c.topic);
    for topic in repartition.chain(changelogs) {
        kafka.create_topic(&topic, partitions, 1)?;
    }
    Ok(())
}

/// Where an example runs: the embedded cluster, or the real broker that
/// `cargo xtask kafka start` runs when `KSTREAMS_BOOTSTRAP` names it.
pub enum Cluster {
    /// librdkafka's mock cluster, in this process.
    Embedded(EmbeddedKafka),
    /// A real broker at this address.
    Broker(String),
}

impl Cluster {
    /// The real broker of `KSTREAMS_BOOTSTRAP` if `use_broker` and it is
    /// set, else a one-broker embedded cluster.
    pub fn start(use_broker: bool) -> Result<Self, BoxError> {
        let broker = std::env::var(kstreams::embedded::BOOTSTRAP_ENV)
            .ok()
            .filter(|b| use_broker && !b.trim().is_empty());
        Ok(match broker {
            Some(bootstrap) => Cluster::Broker(bootstrap),
            None => Cluster::Embedded(EmbeddedKafka::start(1)?),
        })
    }

    /// Its bootstrap servers.
    pub fn bootstrap_servers(&self) -> String {
        match self {
            Cluster::Embedded(kafka) => kafka.bootstrap_servers(),
            Cluster::Broker(bootstrap) => bootstrap.clone(),
        }
    }

    /// A name for a topic or an application id: `name` on the embedded
    /// cluster (new each run), one no earlier run used on a real broker.
    pub fn name(&self, name: &str) -> String {
        match self {
            Cluster::Embedded(_) => name.to_string(),
            Cluster::Broker(_) => kstreams::embedded::unique_name(name),
        }
    }

    /// Creates a topic.
    pub fn create_topic(&self, name: &str, partitions: i32) -> Result<(), BoxError> {
        match self {
            Cluster::Embedded(kafka) => kafka.create_topic(name, partitions, 1)?,
            Cluster::Broker(bootstrap) => {
                kstreams::embedded::create_topic(bootstrap, name, partitions, 1)?
            }
        }
        Ok(())
    }

    /// Creates the application's internal topics where the application
    /// cannot (see [`create_internal_topics`]).
    pub fn prepare_internal_topics(
        &self,
        topology: &Topology,
        application_id: &str,
        partitions: i32,
    ) -> Result<(), BoxError> {
        match self {
            Cluster::Embedded(kafka) => {
                create_internal_topics(kafka, topology, application_id, partitions)
            }
            Cluster::Broker(_) => Ok(()),
        }
    }

    /// Whether exactly-once survives a restart here. librdkafka's mock
    /// cluster answers TxnOffsetCommit without storing the offsets, so
    /// under exactly-once a restarted instance there finds no committed
    /// offset and reads its input again from the beginning.
    pub fn keeps_transactional_offsets(&self) -> bool {
        matches!(self, Cluster::Broker(_))
    }
}
