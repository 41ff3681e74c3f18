//! What a stream thread reads off its main consumer without a request to
//! the broker: librdkafka's cached watermarks, the partitions' lag (their
//! gauges and KIP-695's "lagging" check), the consumed records, and which
//! consumer errors end the thread.

use std::collections::HashMap;
use std::sync::Arc;

use kstreams_dsl::__private::ConsumedRecord;
use kstreams_metrics::{Counter, MetricsRegistry, PartitionSensors};
use kstreams_state::TopicPartition;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::Offset;
use rustc_hash::FxHashMap;

use super::ffi::{cached_position, cached_watermarks, MessageView};
use super::spare_buffers::SpareBuffers;
use crate::topic_names::TopicNames;

/// The low and high watermarks librdkafka last saw for a partition, without
/// a request to the broker; `None` while the high one is unknown (the low
/// one may be unknown too: negative).
fn fetched_watermarks<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    topic: &str,
    partition: i32,
) -> Option<(i64, i64)> {
    cached_watermarks(consumer, topic, partition).filter(|&(_, high)| high >= 0)
}

/// Where reading of a partition is: the consumer's `position`, or before
/// a record was consumed, the committed offset (`start`) if still in the
/// log, else the low watermark `low` (`None` if that is unknown too).
pub(crate) fn reading_position(position: Offset, start: Option<i64>, low: i64) -> Option<i64> {
    match position {
        Offset::Offset(position) => Some(position),
        _ => match start {
            Some(committed) => Some(committed.max(low)),
            None => (low >= 0).then_some(low),
        },
    }
}

/// Whether a partition is known to be behind its end (KIP-695: unless
/// `max.task.idle.ms` is -1 a task waits for it when it is empty), from
/// librdkafka's cached watermarks and position; `start` is the committed
/// offset its reading began at. A partition with no fetch answered yet
/// counts as lagging: as in Kafka Streams, the task waits rather than
/// guess.
pub(crate) fn is_lagging<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    topic: &str,
    partition: i32,
    start: Option<i64>,
) -> bool {
    match fetched_watermarks(consumer, topic, partition) {
        None => true,
        Some((low, high)) => {
            reading_position(cached_position(consumer, topic, partition), start, low)
                .is_none_or(|p| high > p)
        }
    }
}

/// The per-partition metrics of a thread's assigned partitions: records
/// consumed and lag, by topic then partition (looked up by `&str` per
/// record, with no allocation; Fx-hashed, as the topics are the
/// application's own and SipHash of the topic showed in a pass-through's
/// profile: BENCHMARKS.md, "Per-record maps: Fx").
#[derive(Default)]
pub(crate) struct PartitionMetrics {
    sensors: FxHashMap<String, FxHashMap<i32, PartitionSensors>>,
    /// The partition counted last (its topic's shared name) and its
    /// counter: records come in runs of one partition, so most counts
    /// need no lookup.
    last_counted: Option<(Arc<str>, i32, Counter)>,
}

impl PartitionMetrics {
    /// Starts exposing an assigned partition's series.
    pub(super) fn add(&mut self, registry: &MetricsRegistry, topic: &str, partition: i32) {
        self.last_counted = None;
        match registry.partition_sensors(topic, partition) {
            Ok(sensors) => {
                self.sensors
                    .entry(topic.to_string())
                    .or_default()
                    .insert(partition, sensors);
            }
            Err(e) => log::warn!("partition metrics of {topic}-{partition}: {e}"),
        }
    }

    /// Stops exposing a revoked partition's series.
    pub(super) fn remove(&mut self, registry: &MetricsRegistry, topic: &str, partition: i32) {
        self.last_counted = None;
        if let Some(partitions) = self.sensors.get_mut(topic) {
            if partitions.remove(&partition).is_some() {
                remove_partition_series(registry, topic, partition);
            }
        }
    }

    /// Stops exposing every partition's series (the thread ends).
    pub(super) fn remove_all(&mut self, registry: &MetricsRegistry) {
        self.last_counted = None;
        for (topic, partitions) in self.sensors.drain() {
            for partition in partitions.keys() {
                remove_partition_series(registry, &topic, *partition);
            }
        }
    }

    /// Counts one record consumed from a partition (`topic` is the shared
    /// name [`TopicNames`] gives).
    pub(super) fn consumed(&mut self, topic: &Arc<str>, partition: i32) {
        if let Some((last, p, counter)) = &self.last_counted {
            if *p == partition && Arc::ptr_eq(last, topic) {
                counter.inc();
                return;
            }
        }
        let sensors = self.sensors.get(&**topic).and_then(|p| p.get(&partition));
        if let Some(sensors) = sensors {
            sensors.records_consumed.inc();
            self.last_counted = Some((
                Arc::clone(topic),
                partition,
                sensors.records_consumed.clone(),
            ));
        }
    }

    /// Sets each assigned partition's lag gauge: its high watermark minus
    /// the reading position, from librdkafka's cached watermarks (no
    /// request). A partition with no fetch answered yet keeps its value.
    /// Returns the lags it set.
    pub(super) fn record_lag<C: ConsumerContext>(
        &self,
        consumer: &BaseConsumer<C>,
        start: impl Fn(&str, i32) -> Option<i64>,
    ) -> HashMap<TopicPartition, i64> {
        let mut lags = HashMap::new();
        let Ok(positions) = consumer.position() else {
            return lags;
        };
        for e in positions.elements() {
            let Some(sensors) = self
                .sensors
                .get(e.topic())
                .and_then(|p| p.get(&e.partition()))
            else {
                continue;
            };
            let Some((low, high)) = fetched_watermarks(consumer, e.topic(), e.partition()) else {
                continue;
            };
            let position =
                reading_position(e.offset(), start(e.topic(), e.partition()), low).unwrap_or(low);
            let lag = (high - position).max(0);
            sensors.records_lag.set(lag);
            lags.insert(TopicPartition::new(e.topic(), e.partition()), lag);
        }
        lags
    }
}

/// Stops exposing a partition's lag and consumed count.
fn remove_partition_series(registry: &MetricsRegistry, topic: &str, partition: i32) {
    let partition = partition.to_string();
    for def in [
        &kstreams_metrics::names::CONSUMER_RECORDS_LAG,
        &kstreams_metrics::names::CONSUMER_RECORDS_CONSUMED_TOTAL,
    ] {
        registry.remove(def, &[topic, &partition]);
    }
}

/// A consumed record, copied out of librdkafka's buffer into `spare`
/// buffers where there are some (its topic's name shared from `names`).
/// `message` is from the consumer's poll or from the thread's fetch queue.
pub(crate) fn consumed(
    message: MessageView<'_>,
    names: &mut TopicNames,
    spare: &mut SpareBuffers,
) -> ConsumedRecord {
    let timestamp = message.timestamp();
    ConsumedRecord {
        // The name's bytes: `Message::topic` checks them as UTF-8 first.
        topic: names.get_bytes(message.topic_name().to_bytes()),
        partition: message.partition(),
        offset: message.offset(),
        timestamp: if timestamp < 0 { -1 } else { timestamp },
        key: message.key().map(|key| spare.copy_key(key)),
        value: message.payload().map(|value| spare.copy_value(value)),
        headers: message.headers(),
    }
}

/// Consumer errors no retry can fix: the thread stops with them instead of
/// polling on. librdkafka flags its own fatal errors (e.g. a static member
/// fenced by its successor after a broker outage): its consumer then
/// delivers nothing more, so a thread polling on would stall silently.
pub(crate) fn is_fatal_consumer_error(error: &KafkaError) -> bool {
    matches!(error, KafkaError::MessageConsumptionFatal(_))
        || matches!(
            error.rdkafka_error_code(),
            Some(
                RDKafkaErrorCode::Fatal
                    | RDKafkaErrorCode::TopicAuthorizationFailed
                    | RDKafkaErrorCode::GroupAuthorizationFailed
                    | RDKafkaErrorCode::ClusterAuthorizationFailed
                    | RDKafkaErrorCode::SaslAuthenticationFailed
            )
        )
}

/// Errors that mean "the group moved on": the commit is lost, not the app.
pub(crate) fn is_rebalance_error(error: &KafkaError) -> bool {
    matches!(
        error.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::RebalanceInProgress
                | RDKafkaErrorCode::IllegalGeneration
                | RDKafkaErrorCode::UnknownMemberId
                | RDKafkaErrorCode::FencedInstanceId
                | RDKafkaErrorCode::AssignmentLost
                // KIP-848: the member's epoch moved on (a newer assignment).
                | RDKafkaErrorCode::StaleMemberEpoch
                | RDKafkaErrorCode::FencedMemberEpoch
        )
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_lags_until_its_position_reaches_the_cached_end() {
        use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
        use rdkafka::{ClientConfig, TopicPartitionList};
        use std::time::{Duration, Instant};

        let cluster = kstreams_embedded::EmbeddedKafka::start(1).unwrap();
        let bootstrap = cluster.bootstrap_servers();
        cluster.create_topic("lagged", 1, 1).unwrap();
        let producer: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .create()
            .unwrap();
        for i in 0..3 {
            producer
                .send(BaseRecord::<str, str>::to("lagged").payload(&i.to_string()))
                .unwrap();
        }
        producer.flush(Duration::from_secs(30)).unwrap();
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("group.id", "lag-test")
            .create()
            .unwrap();
        let mut assignment = TopicPartitionList::new();
        assignment
            .add_partition_offset("lagged", 0, Offset::Beginning)
            .unwrap();
        consumer.assign(&assignment).unwrap();
        // No fetch answered yet: lagging, as Kafka Streams would wait.
        assert!(is_lagging(&consumer, "lagged", 0, None));

        let deadline = Instant::now() + Duration::from_secs(30);
        let mut consumed = 0;
        while consumed < 3 && Instant::now() < deadline {
            if let Some(message) = consumer.poll(Duration::from_millis(100)) {
                message.unwrap();
                consumed += 1;
                // Behind the end until the last record is consumed.
                assert_eq!(is_lagging(&consumer, "lagged", 0, None), consumed < 3);
            }
        }
        assert_eq!(consumed, 3);
        assert_eq!(cached_position(&consumer, "lagged", 0), Offset::Offset(3));
        // A partition the consumer does not have: no position.
        assert_eq!(cached_position(&consumer, "lagged", 5), Offset::Invalid);
    }

    #[test]
    fn before_a_record_is_consumed_reading_starts_at_the_commit_or_the_log_start() {
        assert_eq!(reading_position(Offset::Offset(7), Some(3), 0), Some(7));
        assert_eq!(reading_position(Offset::Invalid, Some(3), 0), Some(3));
        // Retention removed the committed offset: from the log start.
        assert_eq!(reading_position(Offset::Invalid, Some(3), 5), Some(5));
        assert_eq!(reading_position(Offset::Invalid, None, 2), Some(2));
        assert_eq!(reading_position(Offset::Invalid, None, -1), None);
    }

    #[test]
    fn rebalance_errors_are_told_apart_from_fatal_ones() {
        let error = |code| KafkaError::ConsumerCommit(code);
        assert!(is_rebalance_error(&error(
            RDKafkaErrorCode::RebalanceInProgress
        )));
        assert!(is_rebalance_error(&error(
            RDKafkaErrorCode::StaleMemberEpoch
        )));
        assert!(!is_rebalance_error(&error(RDKafkaErrorCode::Fatal)));
        assert!(is_fatal_consumer_error(&KafkaError::MessageConsumption(
            RDKafkaErrorCode::GroupAuthorizationFailed
        )));
        assert!(!is_fatal_consumer_error(&KafkaError::MessageConsumption(
            RDKafkaErrorCode::UnknownTopicOrPartition
        )));
        assert!(is_fatal_consumer_error(
            &KafkaError::MessageConsumptionFatal(RDKafkaErrorCode::FencedInstanceId)
        ));
    }

    #[test]
    fn partition_series_come_and_go_with_the_assignment() {
        let registry = MetricsRegistry::new();
        let mut metrics = PartitionMetrics::default();
        metrics.add(&registry, "in", 0);
        metrics.add(&registry, "in", 1);
        let topic: Arc<str> = Arc::from("in");
        metrics.consumed(&topic, 1);
        metrics.consumed(&topic, 1);
        metrics.consumed(&topic, 0);
        metrics.consumed(&topic, 1);
        metrics.consumed(&Arc::from("unassigned"), 0);
        let consumed = |registry: &MetricsRegistry, partition: &str| {
            let series = format!("partition=\"{partition}\",topic=\"in\"}} ");
            registry.gather_text().lines().find_map(|l| {
                l.strip_prefix("kstreams_consumer_records_consumed_total{")
                    .and_then(|l| l.strip_prefix(series.as_str()))
                    .map(str::to_owned)
            })
        };
        assert_eq!(consumed(&registry, "1").as_deref(), Some("3"));
        assert_eq!(consumed(&registry, "0").as_deref(), Some("1"));
        metrics.remove(&registry, "in", 1);
        assert!(!registry.gather_text().contains("partition=\"1\""));
        // Assigned again, the partition counts from zero: the last
        // partition counted is forgotten with its series.
        metrics.add(&registry, "in", 1);
        metrics.consumed(&topic, 1);
        assert_eq!(consumed(&registry, "1").as_deref(), Some("1"));
        metrics.remove_all(&registry);
        assert!(!registry.gather_text().contains("partition=\"0\""));
    }
}
