//! The record collector (Kafka Streams' `RecordCollectorImpl` with its
//! `StreamsProducer`): sends a stream thread's output and changelog
//! records, keeps their delivery reports, and runs the exactly-once
//! transactions.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kstreams_dsl::__private::ProducedRecord;
use kstreams_record::partition_for_key;
use kstreams_state::TopicPartition;
use rdkafka::consumer::ConsumerGroupMetadata;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Message};
use rdkafka::producer::{BaseProducer, Producer, ProducerContext};
use rdkafka::{ClientContext, TopicPartitionList};
use rustc_hash::FxHashMap;

use super::client_error::ClientError;
use super::config::ProcessingGuarantee;
use super::ffi::{Outgoing, TopicHandle};
use super::outbox::Outbox;
use super::partition_counts::PartitionCounts;
use super::spare_buffers::SpareBuffers;
use super::RuntimeError;
use crate::kafka::client_error::ClientResult;

/// How long a transaction step or a flush may take.
const PRODUCER_TIMEOUT: Duration = Duration::from_secs(60);

/// How much longer than its own timeout a transaction call may take
/// before the thread stops waiting for librdkafka.
const STALL_GRACE: Duration = Duration::from_secs(5);
/// The first and the longest pause of a flush between two looks at the
/// delivery reports (the pause doubles while none arrive).
const FLUSH_PAUSE_MIN: Duration = Duration::from_micros(100);
const FLUSH_PAUSE_MAX: Duration = Duration::from_millis(1);

/// The pause between two looks at the delivery reports while waiting on
/// the producer: 0.1 ms, doubling to 1 ms while no report arrives.
struct ReportPause(Duration);

impl ReportPause {
    fn new() -> Self {
        ReportPause(FLUSH_PAUSE_MIN)
    }

    /// Reports arrived: the next pause is the shortest again.
    fn reset(&mut self) {
        self.0 = FLUSH_PAUSE_MIN;
    }

    /// Sleeps for the pause, and doubles the next one.
    fn sleep(&mut self) {
        std::thread::sleep(self.0);
        self.0 = (self.0 * 2).min(FLUSH_PAUSE_MAX);
    }
}

/// The producer's context: remembers the first failed delivery, for the
/// loop to act on, and the acknowledged changelog offsets.
#[derive(Default)]
pub(crate) struct DeliveryContext {
    /// The first refusal: the partition's topic and number, and why.
    failure: Mutex<Option<(String, i32, KafkaError)>>,
    /// Offset of the last acknowledged record per changelog partition, for
    /// the tasks' checkpoints. By topic, then partition, so that a report
    /// finds its entry by the borrowed topic name: no allocation per
    /// acknowledged changelog record.
    changelog_offsets: Mutex<FxHashMap<String, FxHashMap<i32, i64>>>,
    /// `production.exception.handler` says continue: a refused output
    /// record is logged and counted, not fatal. Changelog records and
    /// exactly-once transactions always fail hard: losing them loses state.
    continue_on_failure: bool,
    /// Output records dropped under that handler.
    dropped: AtomicU64,
}

impl DeliveryContext {
    /// A context that fails on refused records unless `continue_on_failure`.
    pub(super) fn new(continue_on_failure: bool) -> Self {
        Self {
            continue_on_failure,
            ..Self::default()
        }
    }

    /// Notes one delivery report: `Ok(offset)` or the broker's refusal.
    fn delivered(
        &self,
        topic: &str,
        partition: i32,
        changelog: bool,
        result: Result<i64, &KafkaError>,
    ) {
        match result {
            Ok(offset) if changelog => {
                let mut offsets = self
                    .changelog_offsets
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                let partitions = match offsets.get_mut(topic) {
                    Some(partitions) => partitions,
                    None => offsets.entry(topic.to_string()).or_default(),
                };
                let last = partitions.entry(partition).or_insert(-1);
                *last = (*last).max(offset);
            }
            Ok(_) => {}
            Err(error) if self.continue_on_failure && !changelog => {
                log::warn!(
                    "dropping a record the broker refused for {topic}-{partition}: {error} \
                     (production.exception.handler: continue)"
                );
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => {
                // Not an error log: the thread fails with it, and says so once.
                log::debug!("could not produce to {topic}-{partition}: {error}");
                self.failure
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_or_insert_with(|| (topic.to_string(), partition, error.clone()));
            }
        }
    }

    /// The acknowledged changelog offsets so far, by partition.
    fn changelog_offsets(&self) -> HashMap<TopicPartition, i64> {
        let offsets = self
            .changelog_offsets
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        offsets
            .iter()
            .flat_map(|(topic, partitions)| {
                partitions.iter().map(move |(&partition, &offset)| {
                    (TopicPartition::new(topic.as_str(), partition), offset)
                })
            })
            .collect()
    }
}

impl ClientContext for DeliveryContext {}

/// What a sent record is, carried to its delivery report as the report's
/// opaque value: an acknowledged output record needs nothing done, so its
/// report is not even asked for its topic (rust-rdkafka checks the name as
/// UTF-8 on every ask, a measurable share of a pass-through's stream
/// thread: BENCHMARKS.md, "Producer: delivery reports").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    Output = 0,
    Changelog = 1,
}

impl Sent {
    fn of(topic: &str) -> Sent {
        if topic.ends_with("-changelog") {
            Sent::Changelog
        } else {
            Sent::Output
        }
    }
}

impl ProducerContext for DeliveryContext {
    /// A [`Sent`], as librdkafka carries it.
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, sent: usize) {
        let changelog = sent == Sent::Changelog as usize;
        match result {
            Ok(_) if !changelog => {}
            Ok(message) => self.delivered(
                message.topic(),
                message.partition(),
                changelog,
                Ok(message.offset()),
            ),
            Err((error, message)) => {
                self.delivered(message.topic(), message.partition(), changelog, Err(error))
            }
        }
    }
}

/// Sends records through the thread's producer, in or out of a transaction.
pub(crate) struct RecordCollector {
    producer: Arc<BaseProducer<DeliveryContext>>,
    guarantee: ProcessingGuarantee,
    /// Whether an exactly-once transaction is open.
    in_transaction: bool,
    /// Partition counts of the topics the collector picks partitions in,
    /// by name (source topics are asked too).
    partition_counts: Rc<PartitionCounts<DeliveryContext>>,
    /// The topics sent to, with librdkafka's handle of each.
    sinks: SinkTopics,
    /// The byte buffers of the records sent, for the next poll's copies.
    spare: SpareBuffers,
}

/// A topic records are sent to: librdkafka's handle, the kind of topic,
/// and its partition count once asked.
struct SinkTopic {
    name: Arc<str>,
    handle: TopicHandle<DeliveryContext>,
    sent: Sent,
    partitions: Option<i32>,
}

/// The collector's sink topics, found per record by the sink's shared name
/// (an address comparison) and else by the name's text.
#[derive(Default)]
struct SinkTopics {
    topics: Vec<SinkTopic>,
    by_name: FxHashMap<Arc<str>, usize>,
}

/// Topics past this many are found by name only: a topic name extractor
/// could make thousands.
const SINKS_SCANNED: usize = 16;

impl SinkTopics {
    /// The index of `topic`, its handle made on first use.
    fn index(
        &mut self,
        topic: &Arc<str>,
        producer: &Arc<BaseProducer<DeliveryContext>>,
    ) -> Result<usize, RuntimeError> {
        let scanned = &self.topics[..self.topics.len().min(SINKS_SCANNED)];
        if let Some(i) = scanned.iter().position(|t| Arc::ptr_eq(&t.name, topic)) {
            return Ok(i);
        }
        if let Some(&i) = self.by_name.get(topic) {
            return Ok(i);
        }
        let handle = TopicHandle::new(producer, topic).client()?;
        let i = self.topics.len();
        self.topics.push(SinkTopic {
            name: Arc::clone(topic),
            handle,
            sent: Sent::of(topic),
            partitions: None,
        });
        self.by_name.insert(Arc::clone(topic), i);
        Ok(i)
    }
}

impl RecordCollector {
    /// A collector over `producer` (whose transactions, under exactly-once,
    /// are initialized already).
    pub(super) fn new(
        producer: Arc<BaseProducer<DeliveryContext>>,
        guarantee: ProcessingGuarantee,
    ) -> Self {
        Self {
            partition_counts: Rc::new(PartitionCounts::new(Arc::clone(&producer))),
            producer,
            guarantee,
            in_transaction: false,
            sinks: SinkTopics::default(),
            spare: SpareBuffers::default(),
        }
    }

    /// The key and value buffers of the records sent so far (librdkafka
    /// copies what it is given), for the thread's next record copies.
    pub(super) fn spare_buffers(&mut self) -> &mut SpareBuffers {
        &mut self.spare
    }

    /// Sends every record waiting in the thread's outbox, in order: the one
    /// way a record reaches the producer. On an error the rest of the
    /// outbox is dropped (the thread ends, or rewinds to its last commit).
    pub(super) fn send_outbox(&mut self, outbox: &mut Outbox) -> Result<(), RuntimeError> {
        outbox.drain_into(|record| self.send(record))
    }

    /// Sends one record. A record keyed for partitioning gets Java's
    /// murmur2 partition of its key (bytes `..partition_key_len`), as Kafka
    /// Streams' default partitioner; a full local queue is waited out.
    ///
    /// A topic that does not exist fails the send with
    /// [`RuntimeError::MissingSinkTopic`] before anything is queued (the
    /// thread retries from its last commit), or, under
    /// `production.exception.handler` continue, the record is dropped:
    /// librdkafka would otherwise hold it until `message.timeout.ms`.
    fn send(&mut self, record: ProducedRecord) -> Result<(), RuntimeError> {
        let index = self.sinks.index(&record.topic, &self.producer)?;
        // Changelogs are created by start(): no check, and no metadata
        // request for a record whose partition is given.
        let count = match self.sinks.topics[index] {
            SinkTopic {
                sent: Sent::Changelog,
                ..
            } => None,
            SinkTopic {
                partitions: Some(count),
                ..
            } => Some(Ok(count)),
            _ => Some(self.partition_count(&record.topic)),
        };
        let count = match count.transpose() {
            Err(RuntimeError::MissingSinkTopic { topic })
                if self.producer.context().continue_on_failure =>
            {
                log::warn!(
                    "dropping a record for sink topic {topic}, which does not exist \
                     (production.exception.handler: continue); create the topic to keep them"
                );
                self.producer
                    .context()
                    .dropped
                    .fetch_add(1, Ordering::Relaxed);
                return Ok(());
            }
            other => other?,
        };
        if count.is_some() {
            self.sinks.topics[index].partitions = count;
        }
        let partition = target_partition(&record, |topic| match count {
            Some(count) => Ok(count),
            None => self.partition_count(topic),
        })?;
        let sink = &self.sinks.topics[index];
        let outgoing = Outgoing {
            partition,
            key: record.key.as_deref(),
            value: record.value.as_deref(),
            timestamp: record.timestamp,
            headers: &record.headers,
            opaque: sink.sent as usize,
        };
        let mut pause = ReportPause::new();
        loop {
            match sink.handle.produce(&outgoing) {
                Ok(()) => break,
                Err(RDKafkaErrorCode::QueueFull) => {
                    // The local queue is full: serve the delivery reports
                    // that came (each frees room), else pause briefly, and
                    // retry. Not `poll(100 ms)`, which returns only at its
                    // deadline (see `wait_for_acknowledgements`).
                    if self.serve_arrived_reports() {
                        pause.reset();
                    } else {
                        pause.sleep();
                    }
                }
                Err(code) => return Err(RuntimeError::client(KafkaError::MessageProduction(code))),
            }
        }
        if let Some(key) = record.key {
            self.spare.keep_key(key);
        }
        if let Some(value) = record.value {
            self.spare.keep_value(value);
        }
        Ok(())
    }

    /// The partition count of `topic`, from the producer's metadata on first
    /// use, as Kafka Streams' record collector asks `partitionsFor`.
    pub(super) fn partition_count(&mut self, topic: &str) -> Result<i32, RuntimeError> {
        self.partition_counts.get(topic)
    }

    /// The thread's partition counts, shared with its tasks' sinks.
    pub(super) fn partition_counts(&self) -> Rc<PartitionCounts<DeliveryContext>> {
        Rc::clone(&self.partition_counts)
    }

    /// Serves the delivery reports that arrived.
    pub(super) fn poll(&self) {
        self.producer.poll(Duration::ZERO);
    }

    /// Fails with the first refused delivery. Under at-least-once the
    /// failure stays: the thread fails and commits nothing more.
    /// Exactly-once aborts and goes on, so the failure is taken.
    pub(super) fn check_deliveries(&self) -> Result<(), RuntimeError> {
        let mut failure = self
            .producer
            .context()
            .failure
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let failure = match self.guarantee {
            ProcessingGuarantee::AtLeastOnce => failure.clone(),
            ProcessingGuarantee::ExactlyOnceV2 => failure.take(),
        };
        match failure {
            Some((topic, partition, source)) => Err(RuntimeError::Production {
                topic,
                partition,
                source: ClientError::new(source),
            }),
            None => Ok(()),
        }
    }

    /// Waits until every record sent is acknowledged (or refused), then
    /// fails with the first refusal.
    pub(super) fn flush(&self) -> Result<(), RuntimeError> {
        self.wait_for_acknowledgements(PRODUCER_TIMEOUT)?;
        self.check_deliveries()
    }

    /// `Producer::flush` without its waits. rust-rdkafka's flush serves
    /// delivery reports with `poll(100 ms)`, which returns only at its
    /// deadline: every at-least-once commit with a record in flight stood
    /// still for 100 ms, though the broker acknowledged in well under one
    /// (the stream thread applies no async completion and processes
    /// nothing meanwhile: BENCHMARKS.md, "Commits: waiting for
    /// acknowledgements"). A shorter `poll` is no better: it spins
    /// through its last millisecond, since the timeout it hands librdkafka
    /// is whole milliseconds of what remains (zero below one), so a
    /// `poll(1 ms)` per step spun the whole wait, on CPU taken from the
    /// broker that was to answer (same section). So each step serves the
    /// reports that have arrived without blocking, then pauses: 0.1 ms
    /// after reports came, doubling to 1 ms while none do. `flush(0)` says
    /// whether anything is still unacknowledged (and wakes the broker
    /// threads, so once per step).
    fn wait_for_acknowledgements(&self, timeout: Duration) -> Result<(), RuntimeError> {
        let deadline = std::time::Instant::now() + timeout;
        let mut pause = ReportPause::new();
        loop {
            match self.producer.flush(Duration::ZERO) {
                Err(KafkaError::Flush(RDKafkaErrorCode::OperationTimedOut))
                    if std::time::Instant::now() < deadline =>
                {
                    if self.serve_arrived_reports() {
                        pause.reset();
                    }
                    pause.sleep();
                }
                other => return other.map_err(RuntimeError::client),
            }
        }
    }

    /// Serves delivery reports until none is waiting; whether there was
    /// one. A report counts as in flight until served (librdkafka's
    /// `outq_len`), so serving one lowers the count.
    fn serve_arrived_reports(&self) -> bool {
        let mut served = false;
        loop {
            let waiting = self.producer.in_flight_count();
            self.producer.poll(Duration::ZERO);
            if self.producer.in_flight_count() >= waiting {
                return served;
            }
            served = true;
        }
    }

    /// The offset of the last acknowledged record per changelog partition,
    /// after serving pending delivery reports (they carry the offsets).
    pub(super) fn delivered_changelog_offsets(&self) -> HashMap<TopicPartition, i64> {
        self.poll();
        self.producer.context().changelog_offsets()
    }

    /// Whether an exactly-once transaction is open.
    pub(super) fn in_transaction(&self) -> bool {
        self.in_transaction
    }

    /// Under exactly-once, opens a transaction unless one is open.
    pub(super) fn begin_transaction_if_needed(&mut self) -> Result<(), RuntimeError> {
        if self.guarantee == ProcessingGuarantee::ExactlyOnceV2 && !self.in_transaction {
            self.producer.begin_transaction().client()?;
            self.in_transaction = true;
        }
        Ok(())
    }

    /// Aborts the open transaction, if there is one. A failure is logged:
    /// the broker aborts it at the transaction timeout anyway.
    pub(super) fn abort_if_in_transaction(&mut self) {
        if std::mem::take(&mut self.in_transaction) {
            // librdkafka's abort waits for the records in flight, whose
            // delivery reports only a poll serves: without this it times
            // out (30 s) whenever outputs are still on their way.
            if let Err(e) = self.wait_for_acknowledgements(Duration::from_secs(30)) {
                log::debug!("records in flight before the abort: {e}");
            }
            if let Err(e) = self.producer.abort_transaction(Duration::from_secs(30)) {
                log::error!("could not abort the transaction: {e}");
            }
            // A record of the aborted transaction that failed is processed
            // again from the last commit: its failure must not end the
            // next transaction (librdkafka also reports the records an
            // abort purges as failed).
            let failed = self
                .producer
                .context()
                .failure
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            if let Some((topic, partition, error)) = failed {
                log::debug!("aborted with a failed record for {topic}-{partition}: {error}");
            }
        }
    }

    /// Commits the open transaction with `offsets` of the consumer group
    /// `group` (KIP-447). No group metadata means the consumer is between
    /// generations: as good as a rebalance for what the caller must do.
    pub(super) fn commit_transaction(
        &mut self,
        offsets: &TopicPartitionList,
        group: Option<ConsumerGroupMetadata>,
    ) -> Result<(), RuntimeError> {
        if offsets.count() > 0 {
            let group = group
                .ok_or(KafkaError::Rebalance(RDKafkaErrorCode::RebalanceInProgress))
                .client()?;
            if let Err(error) = self.send_offsets_bounded(offsets, group) {
                if matches!(error, RuntimeError::TransactionStalled { .. }) {
                    // The producer is given up with the call still running:
                    // an abort would only be refused for it (librdkafka
                    // takes one transaction call at a time), after waiting.
                    // The next producer's init aborts the transaction.
                    self.in_transaction = false;
                }
                return Err(error);
            }
        }
        // The transaction's records acknowledged first, without the waits
        // of rust-rdkafka's flush, which `commit_transaction` runs before
        // librdkafka's: its `poll(100 ms)` steps return only at their
        // deadline, so every exactly-once commit stood still for 100 ms, a
        // large share of a run at the 100-ms commit interval (BENCHMARKS.md,
        // "Commits: waiting for acknowledgements"). Its flush then finds
        // nothing left to wait for.
        self.wait_for_acknowledgements(PRODUCER_TIMEOUT)?;
        self.producer
            .commit_transaction(PRODUCER_TIMEOUT)
            .client()?;
        self.in_transaction = false;
        Ok(())
    }

    /// `send_offsets_to_transaction`, waited for at most its timeout and a
    /// grace. librdkafka 2.12 waits for the call's answer without a bound
    /// and, when the transaction and group coordinators move while it runs
    /// (a broker killed), the answer never came: the stream thread hung
    /// for good (chaos leader-failover). The call runs on a helper thread;
    /// past the bound the thread gives the producer up
    /// ([`RuntimeError::TransactionStalled`]) and the helper ends once
    /// librdkafka answers (the new producer fences this one).
    fn send_offsets_bounded(
        &self,
        offsets: &TopicPartitionList,
        group: ConsumerGroupMetadata,
    ) -> Result<(), RuntimeError> {
        let bound = PRODUCER_TIMEOUT + STALL_GRACE;
        let producer = Arc::clone(&self.producer);
        let offsets = offsets.clone();
        let (answer, answered) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("kstreams-txn-offsets".to_string())
            .spawn(move || {
                let result =
                    producer.send_offsets_to_transaction(&offsets, &group, PRODUCER_TIMEOUT);
                // The receiver is gone if the thread gave up waiting.
                let _ = answer.send(result);
            })
            .map_err(|source| RuntimeError::Spawn {
                name: "kstreams-txn-offsets".to_string(),
                source,
            })?;
        match answered.recv_timeout(bound) {
            Ok(result) => result.map_err(RuntimeError::client),
            Err(_) => Err(RuntimeError::TransactionStalled {
                operation: "send_offsets_to_transaction",
                waited: bound,
            }),
        }
    }
}

/// The partition a record goes to: the one it names, else, for a record
/// keyed for partitioning, Java's murmur2 partition of its key bytes
/// `..partition_key_len` among the topic's `count`; else librdkafka's choice.
fn target_partition(
    record: &ProducedRecord,
    count: impl FnOnce(&str) -> Result<i32, RuntimeError>,
) -> Result<Option<i32>, RuntimeError> {
    Ok(
        match (record.partition, record.partition_key_len, &record.key) {
            (None, Some(len), Some(key)) => {
                Some(partition_for_key(&key[..len], count(&record.topic)?))
            }
            (partition, _, _) => partition,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdkafka::ClientConfig;

    fn collector(guarantee: ProcessingGuarantee) -> RecordCollector {
        // Nothing listens there: records stay queued, nothing is delivered.
        let producer = ClientConfig::new()
            .set("bootstrap.servers", "127.0.0.1:1")
            .create_with_context(DeliveryContext::new(false))
            .unwrap();
        RecordCollector::new(Arc::new(producer), guarantee)
    }

    #[test]
    fn a_full_local_queue_is_waited_out_and_every_record_is_delivered_in_order() {
        let cluster = kstreams_embedded::EmbeddedKafka::start(1).unwrap();
        cluster
            .create_topic("changelog-full-changelog", 1, 1)
            .unwrap();
        // Room for one record: every send after the first finds the queue
        // full until the one before is acknowledged.
        let producer = ClientConfig::new()
            .set("bootstrap.servers", cluster.bootstrap_servers())
            .set("queue.buffering.max.messages", "1")
            .set("linger.ms", "0")
            .create_with_context(DeliveryContext::new(false))
            .unwrap();
        let mut collector =
            RecordCollector::new(Arc::new(producer), ProcessingGuarantee::AtLeastOnce);
        let mut outbox = Outbox::default();
        outbox.extend((0..50).map(|i| ProducedRecord {
            topic: "changelog-full-changelog".into(),
            partition: Some(0),
            partition_key_len: None,
            key: Some(b"k".to_vec()),
            value: Some(i.to_string().into_bytes()),
            timestamp: i,
            headers: kstreams_record::Headers::new(),
            sink: None,
        }));
        collector.send_outbox(&mut outbox).unwrap();
        collector.flush().unwrap();
        // The 50 records are offsets 0..=49 of the changelog, in order.
        assert_eq!(
            collector.delivered_changelog_offsets()
                [&TopicPartition::new("changelog-full-changelog", 0)],
            49
        );
    }

    #[test]
    fn changelog_acknowledgements_keep_the_highest_offset_per_partition() {
        let context = DeliveryContext::new(false);
        context.delivered("app-store-changelog", 0, true, Ok(7));
        context.delivered("app-store-changelog", 0, true, Ok(5));
        context.delivered("app-store-changelog", 1, true, Ok(2));
        context.delivered("output", 0, false, Ok(99));
        let offsets = context.changelog_offsets();
        assert_eq!(offsets.len(), 2);
        assert_eq!(offsets[&TopicPartition::new("app-store-changelog", 0)], 7);
        assert_eq!(offsets[&TopicPartition::new("app-store-changelog", 1)], 2);
    }

    #[test]
    fn a_refused_output_fails_unless_the_handler_continues_but_a_changelog_always_fails() {
        let refused = KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge);
        let continuing = DeliveryContext::new(true);
        continuing.delivered("output", 0, false, Err(&refused));
        assert!(continuing.failure.lock().unwrap().is_none());
        assert_eq!(continuing.dropped.load(Ordering::Relaxed), 1);
        continuing.delivered("app-store-changelog", 0, true, Err(&refused));
        assert!(continuing.failure.lock().unwrap().is_some());

        let failing = DeliveryContext::new(false);
        failing.delivered("output", 0, false, Err(&refused));
        assert!(failing.failure.lock().unwrap().is_some());
    }

    #[test]
    fn at_least_once_keeps_a_delivery_failure_and_exactly_once_takes_it() {
        let refused = KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge);
        for (guarantee, sticky) in [
            (ProcessingGuarantee::AtLeastOnce, true),
            (ProcessingGuarantee::ExactlyOnceV2, false),
        ] {
            let collector = collector(guarantee);
            assert!(collector.check_deliveries().is_ok());
            collector
                .producer
                .context()
                .delivered("output", 0, false, Err(&refused));
            assert!(matches!(
                collector.check_deliveries(),
                Err(RuntimeError::Production { topic, partition: 0, .. }) if topic == "output"
            ));
            assert_eq!(
                collector.check_deliveries().is_err(),
                sticky,
                "{guarantee:?}"
            );
        }
    }

    #[test]
    fn an_abort_forgets_the_failed_records_of_its_transaction() {
        let refused = KafkaError::MessageProduction(RDKafkaErrorCode::PurgeQueue);
        let mut collector = collector(ProcessingGuarantee::ExactlyOnceV2);
        collector.in_transaction = true;
        collector
            .producer
            .context()
            .delivered("output", 0, false, Err(&refused));
        collector.abort_if_in_transaction();
        assert!(!collector.in_transaction);
        assert!(collector.check_deliveries().is_ok());
    }

    #[test]
    fn records_for_a_known_partition_count_are_queued_without_metadata() {
        let mut collector = collector(ProcessingGuarantee::AtLeastOnce);
        collector.partition_counts.insert("out", 4);
        let mut headers = kstreams_record::Headers::new();
        headers.add("h", Some(b"v".to_vec()));
        let mut outbox = Outbox::default();
        outbox.extend([
            ProducedRecord {
                topic: "out".into(),
                partition: None,
                partition_key_len: Some(1),
                key: Some(b"k".to_vec()),
                value: Some(b"v".to_vec()),
                timestamp: 1,
                headers,
                sink: None,
            },
            ProducedRecord {
                topic: "app-s-changelog".into(),
                partition: Some(2),
                partition_key_len: None,
                key: Some(b"k".to_vec()),
                value: None,
                timestamp: 1,
                headers: kstreams_record::Headers::new(),
                sink: None,
            },
        ]);
        collector.send_outbox(&mut outbox).unwrap();
        assert!(!collector.in_transaction());
        // At-least-once opens no transaction.
        collector.begin_transaction_if_needed().unwrap();
        assert!(!collector.in_transaction());
    }

    #[test]
    fn a_named_partition_wins_and_a_partitioning_key_is_hashed_as_java_does() {
        let record = |partition, key_len| ProducedRecord {
            topic: "out".into(),
            partition,
            partition_key_len: key_len,
            key: Some(b"alice-suffix".to_vec()),
            value: None,
            timestamp: 0,
            headers: kstreams_record::Headers::new(),
            sink: None,
        };
        let never = |_: &str| -> Result<i32, RuntimeError> { panic!("no count needed") };
        assert_eq!(
            target_partition(&record(Some(3), Some(5)), never).unwrap(),
            Some(3)
        );
        assert_eq!(target_partition(&record(None, None), never).unwrap(), None);
        // Only the key's first 5 bytes ("alice") choose the partition.
        let hashed = target_partition(&record(None, Some(5)), |_| Ok(8)).unwrap();
        assert_eq!(hashed, Some(partition_for_key(b"alice", 8)));
        let unknown = target_partition(&record(None, Some(5)), |t| {
            Err(RuntimeError::NoPartitionInfo(t.to_string()))
        });
        assert!(matches!(unknown, Err(RuntimeError::NoPartitionInfo(t)) if t == "out"));
    }
}
