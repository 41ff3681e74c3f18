//! What a stream thread reads off its main consumer without a request to
//! the broker: librdkafka's cached watermarks, the partitions' lag (their
//! gauges and KIP-695's "lagging" check), the consumed records, and which
//! consumer errors end the thread.

use std::collections::HashMap;
use std::ffi::CStr;
use std::sync::Arc;

use kstreams_dsl::internals::ConsumedRecord;
use kstreams_metrics::{Counter, MetricsRegistry, PartitionSensors};
use kstreams_record::Headers;
use rdkafka::bindings as rd;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{Offset, TopicPartitionList};
use rustc_hash::FxHashMap;

use super::spare_buffers::SpareBuffers;
use crate::topic_names::TopicNames;

/// The low and high watermarks librdkafka last saw for a partition, without
/// a request to the broker (rust-rdkafka wraps only the network variant);
/// `None` while the high one is unknown (the low one may be -1).
pub(crate) fn cached_watermarks<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    topic: &str,
    partition: i32,
) -> Option<(i64, i64)> {
    let topic = std::ffi::CString::new(topic).ok()?;
    let mut low: i64 = -1;
    let mut high: i64 = -1;
    // SAFETY: `native_ptr` is the live handle of `consumer`, borrowed for
    // the whole call; `topic` is a NUL-terminated string that outlives the
    // call; `low` and `high` are valid, exclusive out-pointers to i64 on
    // this stack frame. rd_kafka_get_watermark_offsets only reads the
    // handle's cached partition state under its own locks and writes the
    // two out-parameters; it keeps none of the pointers.
    let err = unsafe {
        rdkafka::bindings::rd_kafka_get_watermark_offsets(
            consumer.client().native_ptr(),
            topic.as_ptr(),
            partition,
            &mut low,
            &mut high,
        )
    };
    (err == rdkafka::bindings::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR && high >= 0)
        .then_some((low, high))
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
    match cached_watermarks(consumer, topic, partition) {
        None => true,
        Some((low, high)) => {
            reading_position(cached_position(consumer, topic, partition), start, low)
                .is_none_or(|p| high > p)
        }
    }
}

/// The consumer's position in a partition, from librdkafka's cached state.
/// rust-rdkafka's `position()` first asks librdkafka's main thread for the
/// whole assignment and waits for its answer.
fn cached_position<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    topic: &str,
    partition: i32,
) -> Offset {
    let mut list = TopicPartitionList::with_capacity(1);
    list.add_partition(topic, partition);
    // SAFETY: `native_ptr` is the live handle of `consumer`, borrowed for
    // the whole call, and `list` is a valid list we own, borrowed mutably
    // for it. rd_kafka_position looks each partition up under librdkafka's
    // locks (making its partition object if there is none, as for the
    // assignment that rust-rdkafka's `position()` passes), writes the
    // element's offset and error, and keeps no pointer to the list.
    let err =
        unsafe { rdkafka::bindings::rd_kafka_position(consumer.client().native_ptr(), list.ptr()) };
    if err != rdkafka::bindings::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
        return Offset::Invalid;
    }
    list.elements()
        .first()
        .map_or(Offset::Invalid, |e| e.offset())
}

/// The per-partition metrics of a thread's assigned partitions: records
/// consumed and lag, by topic then partition (looked up by `&str` per
/// record, with no allocation; Fx-hashed, as the topics are the
/// application's own: SipHash of the topic was 2 % of a pass-through).
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
    pub fn add(&mut self, registry: &MetricsRegistry, topic: &str, partition: i32) {
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
    pub fn remove(&mut self, registry: &MetricsRegistry, topic: &str, partition: i32) {
        self.last_counted = None;
        if let Some(partitions) = self.sensors.get_mut(topic) {
            if partitions.remove(&partition).is_some() {
                remove_partition_series(registry, topic, partition);
            }
        }
    }

    /// Stops exposing every partition's series (the thread ends).
    pub fn remove_all(&mut self, registry: &MetricsRegistry) {
        self.last_counted = None;
        for (topic, partitions) in self.sensors.drain() {
            for partition in partitions.keys() {
                remove_partition_series(registry, &topic, *partition);
            }
        }
    }

    /// Counts one record consumed from a partition (`topic` is the shared
    /// name [`TopicNames`] gives).
    pub fn consumed(&mut self, topic: &Arc<str>, partition: i32) {
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
    pub fn record_lag<C: ConsumerContext>(
        &self,
        consumer: &BaseConsumer<C>,
        start: impl Fn(&str, i32) -> Option<i64>,
    ) -> HashMap<(String, i32), i64> {
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
            let Some((low, high)) = cached_watermarks(consumer, e.topic(), e.partition()) else {
                continue;
            };
            let position =
                reading_position(e.offset(), start(e.topic(), e.partition()), low).unwrap_or(low);
            let lag = (high - position).max(0);
            sensors.records_lag.set(lag);
            lags.insert((e.topic().to_string(), e.partition()), lag);
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
/// `message` is librdkafka's: from the consumer's poll
/// (`BorrowedMessage::ptr`) or from the thread's fetch queue.
pub(crate) fn consumed(
    message: &rd::rd_kafka_message_t,
    names: &mut TopicNames,
    spare: &mut SpareBuffers,
) -> ConsumedRecord {
    // SAFETY (all below): `message` is a consumed message, alive for this
    // call, with its key and payload `key_len`/`len` bytes long (or null),
    // and its topic handle alive with it (a message holds a reference);
    // librdkafka keeps a handle's name as a NUL-terminated string for as
    // long as the handle, and a message's headers for as long as the
    // message.
    let bytes = |ptr: *mut std::ffi::c_void, len: usize| {
        (!ptr.is_null()).then(|| unsafe { std::slice::from_raw_parts(ptr as *const u8, len) })
    };
    let timestamp = unsafe { rd::rd_kafka_message_timestamp(message, std::ptr::null_mut()) };
    ConsumedRecord {
        // The name's bytes: `Message::topic` checks them as UTF-8 first.
        topic: names.get_bytes(topic_name(message).to_bytes()),
        partition: message.partition,
        offset: message.offset,
        timestamp: if timestamp < 0 { -1 } else { timestamp },
        key: bytes(message.key, message.key_len).map(|key| spare.copy_key(key)),
        value: bytes(message.payload, message.len).map(|value| spare.copy_value(value)),
        headers: unsafe { consumed_headers(message) },
    }
}

/// The name of a consumed message's topic.
pub(crate) fn topic_name(message: &rd::rd_kafka_message_t) -> &CStr {
    // SAFETY: the message, and with it its topic handle (a message holds a
    // reference), is alive for as long as the borrow; librdkafka keeps a
    // handle's name as a NUL-terminated string for as long as the handle.
    unsafe { CStr::from_ptr(rd::rd_kafka_topic_name(message.rkt)) }
}

/// A consumed message's headers, copied.
///
/// # Safety
/// `message` is a consumed message, alive for the call.
unsafe fn consumed_headers(message: &rd::rd_kafka_message_t) -> Headers {
    let mut headers = Headers::new();
    let mut list: *mut rd::rd_kafka_headers_t = std::ptr::null_mut();
    // SAFETY: per the caller; the list belongs to the message (not freed
    // here), and each header's name and value stay valid while it does.
    unsafe {
        if rd::rd_kafka_message_headers(message, &mut list)
            != RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR
            || list.is_null()
        {
            return headers;
        }
        for index in 0..rd::rd_kafka_header_cnt(list) {
            let mut name: *const std::ffi::c_char = std::ptr::null();
            let mut value: *const std::ffi::c_void = std::ptr::null();
            let mut size: usize = 0;
            if rd::rd_kafka_header_get_all(list, index, &mut name, &mut value, &mut size)
                != RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR
            {
                break;
            }
            let name = CStr::from_ptr(name).to_string_lossy();
            let value = (!value.is_null())
                .then(|| std::slice::from_raw_parts(value as *const u8, size).to_vec());
            headers.add(name.into_owned(), value);
        }
    }
    headers
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
        use rdkafka::ClientConfig;
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
