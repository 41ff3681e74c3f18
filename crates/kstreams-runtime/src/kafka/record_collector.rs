//! The record collector (Kafka Streams' `RecordCollectorImpl` with its
//! `StreamsProducer`): sends a stream thread's output and changelog
//! records, keeps their delivery reports, and runs the exactly-once
//! transactions.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kstreams_dsl::__private::ProducedRecord;
use kstreams_dsl::TaskId;
use kstreams_record::{partition_for_key, Headers};
use kstreams_state::TopicPartition;
use rdkafka::consumer::ConsumerGroupMetadata;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, DeliveryResult, Headers as _, Message};
use rdkafka::producer::{BaseProducer, Producer, ProducerContext};
use rdkafka::{ClientContext, TopicPartitionList};
use rustc_hash::FxHashMap;

use super::client_error::ClientError;
use super::config::ProcessingGuarantee;
use super::ffi::{Outgoing, TopicHandle};
use super::outbox::Outbox;
use super::partition_counts::PartitionCounts;
use super::refusals::{self, Origins, Refusal, Refused};
use super::spare_buffers::SpareBuffers;
use super::RuntimeError;
use crate::handlers::{DeadLetterRecord, ProductionExceptionHandler};
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

/// The producer's context: remembers the first failure that fails the
/// thread, the refused output records for the production handler, and the
/// acknowledged changelog offsets.
#[derive(Default)]
pub(crate) struct DeliveryContext {
    /// The first failure no handler is asked about (a changelog record or
    /// a handler's own record refused, a fatal error): the partition's
    /// topic and number, and why.
    failure: Mutex<Option<(String, i32, KafkaError)>>,
    /// Output records refused since the thread last looked, in order.
    refused: Mutex<Vec<Refused>>,
    /// Offset of the last acknowledged record per changelog partition, for
    /// the tasks' checkpoints. By topic, then partition, so that a report
    /// finds its entry by the borrowed topic name: no allocation per
    /// acknowledged changelog record.
    changelog_offsets: Mutex<FxHashMap<String, FxHashMap<i32, i64>>>,
}

impl DeliveryContext {
    /// Notes an acknowledged changelog record.
    fn acknowledged(&self, topic: &str, partition: i32, offset: i64) {
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

    /// Notes a failure that fails the thread (the first one is kept).
    fn failed(&self, topic: &str, partition: i32, error: &KafkaError) {
        // Not an error log: the thread fails with it, and says so once.
        log::debug!("could not produce to {topic}-{partition}: {error}");
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert_with(|| (topic.to_string(), partition, error.clone()));
    }

    /// Notes a refused record of kind `sent`: an output record's refusal
    /// waits for the production handler unless it is fatal; any other
    /// record's refusal fails the thread (losing a changelog record loses
    /// state; a handler's own record is not handed back to it).
    fn refused(&self, sent: usize, error: &KafkaError, refusal: impl FnOnce() -> Refused) {
        let kind = sent & SENT_KIND_MASK;
        let refusal = refusal();
        match error.rdkafka_error_code().map(Refusal::of) {
            Some(Refusal::Purged) => {
                log::debug!("a record for {} purged: {error}", refusal.topic);
            }
            Some(Refusal::Handled) if kind == Sent::Output as usize => {
                self.refused
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(refusal);
            }
            _ => self.failed(&refusal.topic, refusal.partition.unwrap_or(-1), error),
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

/// What a sent record is, carried to its delivery report in the low bits
/// of the report's opaque value (an output record's [`Origins`] index
/// above them): an acknowledged output record needs nothing done, so its
/// report is not even asked for its topic (rust-rdkafka checks the name as
/// UTF-8 on every ask, a measurable share of a pass-through's stream
/// thread: BENCHMARKS.md, "Producer: delivery reports").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    Output = 0,
    Changelog = 1,
    /// A dead-letter record the production handler asked for.
    HandlerRecord = 2,
}

const SENT_KIND_BITS: u32 = 2;
const SENT_KIND_MASK: usize = (1 << SENT_KIND_BITS) - 1;

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
        match result {
            Ok(message) if sent == Sent::Changelog as usize => {
                self.acknowledged(message.topic(), message.partition(), message.offset())
            }
            Ok(_) => {}
            Err((error, message)) => {
                self.refused(sent, error, || refused_record(sent, message, error))
            }
        }
    }
}

/// A refused record, copied out of its delivery report.
fn refused_record(sent: usize, message: &BorrowedMessage<'_>, error: &KafkaError) -> Refused {
    let mut headers = Headers::new();
    if let Some(borrowed) = message.headers() {
        for header in borrowed.iter() {
            headers.add(header.key, header.value.map(<[u8]>::to_vec));
        }
    }
    Refused {
        origin: sent >> SENT_KIND_BITS,
        topic: message.topic().to_string(),
        partition: Some(message.partition()),
        key: message.key().map(<[u8]>::to_vec),
        value: message.payload().map(<[u8]>::to_vec),
        timestamp: message.timestamp().to_millis().unwrap_or(-1),
        headers,
        code: error
            .rdkafka_error_code()
            .unwrap_or(RDKafkaErrorCode::Unknown),
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
    /// Decides about output records that cannot be written.
    handler: Arc<dyn ProductionExceptionHandler>,
    /// The tasks and sinks output records came from.
    origins: Origins,
    /// Tasks whose records were dropped on the handler's word before being
    /// queued (a sink topic that does not exist), for their counts.
    dropped: Vec<TaskId>,
}

/// What the production handler's answers since the last look ask of the
/// thread (its RETRY and FAIL are errors).
#[derive(Debug, Default)]
pub(super) struct Deliveries {
    /// The task of each record dropped, for its dropped-records count.
    pub(super) dropped: Vec<TaskId>,
    /// Whether dead letters were sent (a flush waits for them too).
    dead_letters_sent: bool,
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
        handler: Arc<dyn ProductionExceptionHandler>,
    ) -> Self {
        Self {
            partition_counts: Rc::new(PartitionCounts::new(Arc::clone(&producer))),
            producer,
            guarantee,
            in_transaction: false,
            sinks: SinkTopics::default(),
            spare: SpareBuffers::default(),
            handler,
            origins: Origins::default(),
            dropped: Vec::new(),
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
        outbox.drain_into(|task, record| self.send(task, record, None))
    }

    /// Sends one record of `task` (`None` for a changelog record), as
    /// `kind` if given, else as what its topic is. A record keyed for
    /// partitioning gets Java's murmur2 partition of its key (bytes
    /// `..partition_key_len`), as Kafka Streams' default partitioner; a
    /// full local queue is waited out.
    ///
    /// A record librdkafka will not queue (its topic does not exist, it is
    /// too large, ...) goes to the production handler at once
    /// ([`RecordCollector::refused_at_send`]): nothing was sent, so even
    /// under exactly-once the transaction goes on if the handler resumes.
    fn send(
        &mut self,
        task: Option<TaskId>,
        record: ProducedRecord,
        kind: Option<Sent>,
    ) -> Result<(), RuntimeError> {
        let index = self.sinks.index(&record.topic, &self.producer)?;
        let topic_kind = self.sinks.topics[index].sent;
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
            Err(RuntimeError::MissingSinkTopic { topic }) => {
                return self.refused_at_send(
                    (task, kind.unwrap_or(topic_kind)),
                    record,
                    None,
                    RDKafkaErrorCode::UnknownTopicOrPartition,
                    Some(topic),
                )
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
        let opaque = match (kind, topic_kind, task) {
            (Some(kind), _, _) => kind as usize,
            (None, Sent::Output, Some(task)) => {
                let origin = self.origins.index(task, record.sink.as_ref());
                Sent::Output as usize | origin << SENT_KIND_BITS
            }
            // An output of no task (none is made): its refusal fails.
            (None, Sent::Output, None) => Sent::HandlerRecord as usize,
            (None, kind, _) => kind as usize,
        };
        let sink = &self.sinks.topics[index];
        let outgoing = Outgoing {
            partition,
            key: record.key.as_deref(),
            value: record.value.as_deref(),
            timestamp: record.timestamp,
            headers: &record.headers,
            opaque,
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
                Err(code) => {
                    let sent = (task, kind.unwrap_or(topic_kind));
                    return self.refused_at_send(sent, record, partition, code, None);
                }
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

    /// A record librdkafka would not queue, with `code`: an output record
    /// goes to the production handler now (dropped, or its dead letters
    /// written, on its word), unless the error is fatal. A missing topic
    /// the handler retries is [`RuntimeError::MissingSinkTopic`] (the
    /// thread retries from its last commit after a pause, until the topic
    /// is created); any other record's refusal fails.
    fn refused_at_send(
        &mut self,
        (task, kind): (Option<TaskId>, Sent),
        record: ProducedRecord,
        partition: Option<i32>,
        code: RDKafkaErrorCode,
        missing_topic: Option<String>,
    ) -> Result<(), RuntimeError> {
        let fail = |missing_topic: Option<String>| match missing_topic {
            Some(topic) => RuntimeError::MissingSinkTopic { topic },
            None => RuntimeError::client(KafkaError::MessageProduction(code)),
        };
        let task = match (task, kind) {
            (Some(task), Sent::Output) if Refusal::of(code) == Refusal::Handled => task,
            _ => return Err(fail(missing_topic)),
        };
        let refusal = Refused {
            origin: self.origins.index(task, record.sink.as_ref()),
            topic: record.topic.to_string(),
            partition,
            key: record.key,
            value: record.value,
            timestamp: record.timestamp,
            headers: record.headers,
            code,
        };
        let verdicts = match refusals::judge(&*self.handler, &self.origins, vec![refusal], false) {
            Ok(verdicts) => verdicts,
            // A RETRY of a missing topic: the thread waits for it.
            Err(error) if error.is_retriable_production() && missing_topic.is_some() => {
                return Err(fail(missing_topic));
            }
            Err(error) => return Err(error),
        };
        self.dropped.extend(verdicts.dropped);
        self.send_dead_letters(verdicts.dead_letters)?;
        Ok(())
    }

    /// Sends the records the production handler asked for; their refusal
    /// fails the thread (they are not handed back to the handler).
    fn send_dead_letters(&mut self, records: Vec<DeadLetterRecord>) -> Result<usize, RuntimeError> {
        let sent = records.len();
        for record in records {
            let record = ProducedRecord {
                topic: Arc::from(record.topic),
                partition: record.partition,
                partition_key_len: None,
                key: record.key,
                value: record.value,
                timestamp: record.timestamp,
                headers: record.headers,
                sink: None,
            };
            self.send(None, record, Some(Sent::HandlerRecord))?;
        }
        Ok(sent)
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

    /// Acts on the delivery reports served so far: fails with the first
    /// failure no handler is asked about, else hands the refused output
    /// records to the production handler and writes the dead letters it
    /// asks for. Under at-least-once a failure stays: the thread fails and
    /// commits nothing more. Exactly-once aborts and goes on, so the
    /// failure is taken.
    pub(super) fn check_deliveries(&mut self) -> Result<Deliveries, RuntimeError> {
        {
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
            if let Some((topic, partition, source)) = failure {
                return Err(RuntimeError::Production {
                    topic,
                    partition,
                    source: ClientError::new(source),
                });
            }
        }
        let refused = std::mem::take(
            &mut *self
                .producer
                .context()
                .refused
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        );
        let mut deliveries = Deliveries {
            dropped: std::mem::take(&mut self.dropped),
            ..Deliveries::default()
        };
        if refused.is_empty() {
            return Ok(deliveries);
        }
        let exactly_once = self.guarantee == ProcessingGuarantee::ExactlyOnceV2;
        let verdicts = refusals::judge(&*self.handler, &self.origins, refused, exactly_once)
            .inspect_err(|error| {
                // At-least-once keeps it, as any delivery failure.
                if let (
                    false,
                    RuntimeError::Production {
                        topic,
                        partition,
                        source,
                    }
                    | RuntimeError::ProductionFailed {
                        topic,
                        partition,
                        source,
                    },
                ) = (exactly_once, error)
                {
                    self.producer
                        .context()
                        .failed(topic, *partition, source.kafka());
                }
            })?;
        deliveries.dropped.extend(verdicts.dropped);
        deliveries.dead_letters_sent = self.send_dead_letters(verdicts.dead_letters)? > 0;
        Ok(deliveries)
    }

    /// Waits until every record sent is acknowledged (or refused), and acts
    /// on the reports ([`RecordCollector::check_deliveries`]); dead letters
    /// the handler wrote are waited for too.
    pub(super) fn flush(&mut self) -> Result<Deliveries, RuntimeError> {
        let mut all = Deliveries::default();
        loop {
            self.wait_for_acknowledgements(PRODUCER_TIMEOUT)?;
            let deliveries = self.check_deliveries()?;
            all.dropped.extend(deliveries.dropped);
            if !deliveries.dead_letters_sent {
                return Ok(all);
            }
        }
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
            let refused = std::mem::take(
                &mut *self
                    .producer
                    .context()
                    .refused
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()),
            );
            if !refused.is_empty() {
                log::debug!("aborted with {} refused records", refused.len());
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
    use crate::handlers::{
        DefaultProductionExceptionHandler, LogAndContinueProductionExceptionHandler,
    };
    use rdkafka::ClientConfig;

    fn collector(guarantee: ProcessingGuarantee) -> RecordCollector {
        collector_with(
            guarantee,
            Arc::new(DefaultProductionExceptionHandler::default()),
        )
    }

    fn collector_with(
        guarantee: ProcessingGuarantee,
        handler: Arc<dyn ProductionExceptionHandler>,
    ) -> RecordCollector {
        // Nothing listens there: records stay queued, nothing is delivered.
        let producer = ClientConfig::new()
            .set("bootstrap.servers", "127.0.0.1:1")
            .create_with_context(DeliveryContext::default())
            .unwrap();
        RecordCollector::new(Arc::new(producer), guarantee, handler)
    }

    const TASK: TaskId = TaskId {
        subtopology: 0,
        partition: 4,
    };

    /// A refusal of an output record of [`TASK`] as librdkafka reports it.
    fn refuse_output(collector: &mut RecordCollector, code: RDKafkaErrorCode) {
        let origin = collector.origins.index(TASK, None);
        let sent = Sent::Output as usize | origin << SENT_KIND_BITS;
        refuse(collector, sent, "output", code);
    }

    fn refuse(collector: &RecordCollector, sent: usize, topic: &str, code: RDKafkaErrorCode) {
        let error = KafkaError::MessageProduction(code);
        collector
            .producer
            .context()
            .refused(sent, &error, || Refused {
                origin: sent >> SENT_KIND_BITS,
                topic: topic.to_string(),
                partition: Some(0),
                key: None,
                value: Some(b"v".to_vec()),
                timestamp: 1,
                headers: Headers::new(),
                code,
            });
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
            .create_with_context(DeliveryContext::default())
            .unwrap();
        let mut collector = RecordCollector::new(
            Arc::new(producer),
            ProcessingGuarantee::AtLeastOnce,
            Arc::new(DefaultProductionExceptionHandler::default()),
        );
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
        let context = DeliveryContext::default();
        context.acknowledged("app-store-changelog", 0, 7);
        context.acknowledged("app-store-changelog", 0, 5);
        context.acknowledged("app-store-changelog", 1, 2);
        let offsets = context.changelog_offsets();
        assert_eq!(offsets.len(), 2);
        assert_eq!(offsets[&TopicPartition::new("app-store-changelog", 0)], 7);
        assert_eq!(offsets[&TopicPartition::new("app-store-changelog", 1)], 2);
    }

    #[test]
    fn a_refused_output_goes_to_the_handler_but_a_changelog_always_fails() {
        let mut continuing = collector_with(
            ProcessingGuarantee::AtLeastOnce,
            Arc::new(LogAndContinueProductionExceptionHandler::default()),
        );
        refuse_output(&mut continuing, RDKafkaErrorCode::MessageSizeTooLarge);
        let deliveries = continuing.check_deliveries().unwrap();
        assert_eq!(deliveries.dropped, [TASK]);
        assert!(continuing.check_deliveries().unwrap().dropped.is_empty());
        refuse(
            &continuing,
            Sent::Changelog as usize,
            "app-store-changelog",
            RDKafkaErrorCode::MessageSizeTooLarge,
        );
        assert!(continuing.check_deliveries().is_err());

        // A fatal error is never the handler's to decide.
        let mut continuing = collector_with(
            ProcessingGuarantee::AtLeastOnce,
            Arc::new(LogAndContinueProductionExceptionHandler::default()),
        );
        refuse_output(&mut continuing, RDKafkaErrorCode::TopicAuthorizationFailed);
        assert!(continuing.check_deliveries().is_err());

        let mut failing = collector(ProcessingGuarantee::AtLeastOnce);
        refuse_output(&mut failing, RDKafkaErrorCode::MessageSizeTooLarge);
        assert!(failing.check_deliveries().is_err());
        let mut retrying = collector(ProcessingGuarantee::AtLeastOnce);
        refuse_output(&mut retrying, RDKafkaErrorCode::MessageTimedOut);
        assert!(retrying
            .check_deliveries()
            .unwrap_err()
            .is_retriable_production());
    }

    #[test]
    fn at_least_once_keeps_a_delivery_failure_and_exactly_once_takes_it() {
        for (guarantee, sticky) in [
            (ProcessingGuarantee::AtLeastOnce, true),
            (ProcessingGuarantee::ExactlyOnceV2, false),
        ] {
            let mut collector = collector(guarantee);
            assert!(collector.check_deliveries().is_ok());
            refuse_output(&mut collector, RDKafkaErrorCode::MessageSizeTooLarge);
            assert!(matches!(
                collector.check_deliveries(),
                Err(RuntimeError::ProductionFailed { topic, partition: 0, .. }) if topic == "output"
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
        let mut collector = collector(ProcessingGuarantee::ExactlyOnceV2);
        collector.in_transaction = true;
        refuse_output(&mut collector, RDKafkaErrorCode::MessageSizeTooLarge);
        refuse(
            &collector,
            Sent::Changelog as usize,
            "app-store-changelog",
            RDKafkaErrorCode::MessageSizeTooLarge,
        );
        // Records an abort purges are no failure of their own.
        refuse(
            &collector,
            Sent::Changelog as usize,
            "app-store-changelog",
            RDKafkaErrorCode::PurgeQueue,
        );
        collector.abort_if_in_transaction();
        assert!(!collector.in_transaction);
        assert!(collector.check_deliveries().is_ok());
    }

    #[test]
    fn a_missing_sink_topic_is_dropped_or_retried_as_the_handler_says() {
        let record = || ProducedRecord {
            topic: "no-such-topic".into(),
            partition: None,
            partition_key_len: None,
            key: None,
            value: Some(b"v".to_vec()),
            timestamp: 1,
            headers: Headers::new(),
            sink: Some(Rc::from("to-missing")),
        };
        let missing = |collector: &mut RecordCollector| {
            collector.refused_at_send(
                (Some(TASK), Sent::Output),
                record(),
                None,
                RDKafkaErrorCode::UnknownTopicOrPartition,
                Some("no-such-topic".to_string()),
            )
        };
        let mut continuing = collector_with(
            ProcessingGuarantee::ExactlyOnceV2,
            Arc::new(LogAndContinueProductionExceptionHandler::default()),
        );
        // Nothing was sent: even a transaction goes on without the record.
        missing(&mut continuing).unwrap();
        assert_eq!(continuing.check_deliveries().unwrap().dropped, [TASK]);

        let mut retrying = collector(ProcessingGuarantee::AtLeastOnce);
        assert!(matches!(
            missing(&mut retrying),
            Err(RuntimeError::MissingSinkTopic { topic }) if topic == "no-such-topic"
        ));
        // A changelog's topic is never the handler's to drop.
        let mut continuing = collector_with(
            ProcessingGuarantee::AtLeastOnce,
            Arc::new(LogAndContinueProductionExceptionHandler::default()),
        );
        assert!(continuing
            .refused_at_send(
                (Some(TASK), Sent::Changelog),
                record(),
                None,
                RDKafkaErrorCode::UnknownTopicOrPartition,
                Some("no-such-topic".to_string()),
            )
            .is_err());
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
