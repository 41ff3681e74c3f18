//! The global thread: loads every partition of the global tables' topics
//! before the instance runs, then keeps the global stores current.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kstreams_dsl::{GlobalStore, Topology};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};

use super::config::{is_group_membership_key, ProcessingGuarantee, StreamsConfig};
use super::RuntimeError;

/// How long loading the global tables at start may take.
const LOAD_TIMEOUT: Duration = Duration::from_secs(600);

/// The global thread's consumer and the stores it feeds, by topic.
pub(crate) struct GlobalUpdater {
    consumer: BaseConsumer,
    stores: HashMap<String, Arc<GlobalStore>>,
}

impl GlobalUpdater {
    /// Assigns every partition of the global topics from the beginning and
    /// reads them to the end offsets seen now; `None` without global
    /// tables. Start returns only after this, as in Kafka Streams.
    pub fn load(topology: &Topology, config: &StreamsConfig) -> Result<Option<Self>, RuntimeError> {
        if topology.global_stores().is_empty() {
            return Ok(None);
        }
        let stores: HashMap<String, Arc<GlobalStore>> = topology
            .global_stores()
            .iter()
            .map(|s| (s.topic().to_string(), s.clone()))
            .collect();
        let eos = config.processing_guarantee == ProcessingGuarantee::ExactlyOnceV2;
        let mut client = ClientConfig::new();
        client
            .set("bootstrap.servers", &config.bootstrap_servers)
            .set(
                "client.id",
                format!("{}-global-consumer", config.application_id),
            )
            // librdkafka's assign() needs a group id; this consumer only
            // assigns, so it never joins the group or commits.
            .set("group.id", format!("{}-global", config.application_id))
            .set("enable.auto.commit", "false")
            // Out of range (retention deleted what it was reading): start
            // over from the beginning rather than skip to the end.
            .set("auto.offset.reset", "earliest")
            .set(
                "isolation.level",
                if eos {
                    "read_committed"
                } else {
                    "read_uncommitted"
                },
            );
        for (k, v) in &config.consumer {
            if !is_group_membership_key(k) {
                client.set(k, v);
            }
        }
        let consumer: BaseConsumer = client.create()?;
        let timeout = Duration::from_secs(30);
        let mut tpl = TopicPartitionList::new();
        let mut ends: HashMap<(String, i32), i64> = HashMap::new();
        let mut missing = Vec::new();
        for topic in stores.keys() {
            let metadata = consumer.fetch_metadata(Some(topic), timeout)?;
            let partitions: Vec<i32> = metadata
                .topics()
                .iter()
                .filter(|t| t.name() == topic && t.error().is_none())
                .flat_map(|t| t.partitions().iter().map(|p| p.id()))
                .collect();
            if partitions.is_empty() {
                missing.push(topic.clone());
                continue;
            }
            for partition in partitions {
                tpl.add_partition_offset(topic, partition, Offset::Beginning)?;
                let (low, high) = consumer.fetch_watermarks(topic, partition, timeout)?;
                if high > low {
                    ends.insert((topic.clone(), partition), high);
                }
            }
        }
        if !missing.is_empty() {
            return Err(RuntimeError::MissingSourceTopics(missing));
        }
        consumer.assign(&tpl)?;
        let updater = GlobalUpdater { consumer, stores };
        let began = Instant::now();
        let total: i64 = ends.values().sum();
        let mut loaded = 0u64;
        let mut last_log = Instant::now();
        while !ends.is_empty() {
            if began.elapsed() > LOAD_TIMEOUT {
                return Err(RuntimeError::Streams(kstreams_dsl::StreamsError::Internal(format!(
                    "loading the global tables did not reach the end offsets within {LOAD_TIMEOUT:?}; \
                     left: {ends:?}"
                ))));
            }
            if let Some(message) = updater.consumer.poll(Duration::from_millis(200)) {
                let message = match message {
                    Ok(message) => message,
                    Err(e) => {
                        log::warn!("global tables: consumer error while loading: {e}");
                        continue;
                    }
                };
                updater.apply(&message);
                loaded += 1;
                let key = (message.topic().to_string(), message.partition());
                if ends
                    .get(&key)
                    .is_some_and(|end| message.offset() + 1 >= *end)
                {
                    ends.remove(&key);
                }
            }
            // Transaction markers at the end are never handed out: the
            // consumer's position says when a partition is read through.
            let positions = updater.consumer.position()?;
            ends.retain(|(topic, partition), end| {
                !matches!(
                    positions.find_partition(topic, *partition).map(|e| e.offset()),
                    Some(Offset::Offset(p)) if p >= *end
                )
            });
            if last_log.elapsed() >= Duration::from_secs(5) {
                log::info!(
                    "global tables: loading, {loaded} records so far ({total} offsets in all)"
                );
                last_log = Instant::now();
            }
        }
        let secs = began.elapsed().as_secs_f64();
        log::info!(
            "global tables: loaded {loaded} records in {secs:.1} s ({:.0} records/s)",
            loaded as f64 / secs.max(1e-3)
        );
        Ok(Some(updater))
    }

    fn apply(&self, message: &rdkafka::message::BorrowedMessage<'_>) {
        if let Some(store) = self.stores.get(message.topic()) {
            store.apply(
                message.key(),
                message.payload(),
                message.timestamp().to_millis().unwrap_or(-1),
            );
        }
    }

    /// Keeps the global stores current until `stop` is set.
    pub fn run(self, stop: &AtomicBool) -> Result<(), RuntimeError> {
        while !stop.load(Ordering::Acquire) {
            match self.consumer.poll(Duration::from_millis(100)) {
                Some(Ok(message)) => self.apply(&message),
                // Transport errors and brokers going away are retried by
                // librdkafka; only a fatal error ends the global thread.
                Some(Err(e))
                    if e.rdkafka_error_code() == Some(rdkafka::types::RDKafkaErrorCode::Fatal) =>
                {
                    return Err(e.into())
                }
                Some(Err(e)) => log::warn!("global thread: consumer error: {e}"),
                None => {}
            }
        }
        Ok(())
    }
}
