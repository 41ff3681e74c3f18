//! A stream thread: one consumer, one producer, the tasks of the partitions
//! the group gave it, and the loop that drives them.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kstreams_dsl::internals::{ConsumedRecord, ProducedRecord};
use kstreams_dsl::{TaskId, Topology};
use kstreams_metrics::{MetricsRegistry, PartitionSensors, ThreadSensors};
use kstreams_record::{Header, Headers};
use kstreams_state::TaskDirectory;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, RebalanceProtocol};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, DeliveryResult, Headers as _, Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{ClientConfig, ClientContext, Offset, TopicPartitionList};

use super::config::{GroupProtocol, ProcessingGuarantee, StreamsConfig};
use super::offset_metadata::PartitionMetadata;
use super::partition_group::PartitionGroup;
use super::partitioner::partition_for_key;
use super::restore::TaskOpener;
use super::topics::SourceTopicIndex;
use super::RuntimeError;
use crate::StreamTask;

/// What a stream thread shares with its consumer's callbacks, which run
/// inside `poll` on the same thread.
#[derive(Default)]
pub(crate) struct ThreadShared {
    /// Partition changes the callbacks saw, for the loop to apply.
    events: Mutex<Vec<AssignmentEvent>>,
    /// Next offset to commit per partition: last processed + 1.
    processed: Mutex<HashMap<(String, i32), i64>>,
    /// Whether an exactly-once transaction is open.
    in_transaction: AtomicBool,
    /// Set when a transaction had to be aborted: the loop must go back to
    /// the last commit before processing on.
    needs_rewind: AtomicBool,
    /// The partitions of a revocation waiting for the loop: their tasks
    /// are committed, then closed, then the revocation is acknowledged to
    /// librdkafka (which waits for that before the group moves on).
    pending_revocation: Mutex<Option<Vec<(String, i32)>>>,
    /// Whether the loop runs and so takes revocations over; outside it
    /// (before it starts, while it shuts down, after a panic) the callback
    /// acknowledges at once, or closing the consumer would wait forever.
    deferring: AtomicBool,
}

impl ThreadShared {
    fn revocation_pending(&self) -> bool {
        self.pending_revocation
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Acknowledges a pending revocation, if there is one.
    fn acknowledge_pending<C: Consumer<StreamsConsumerContext>>(&self, consumer: &C) {
        let pending = self
            .pending_revocation
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(revoked) = pending {
            let mut tpl = TopicPartitionList::new();
            for (topic, partition) in &revoked {
                tpl.add_partition(topic, *partition);
            }
            acknowledge_revocation(consumer, &tpl);
        }
    }
}

#[derive(Debug)]
enum AssignmentEvent {
    Assigned(Vec<(String, i32)>),
    Revoked(Vec<(String, i32)>),
}

fn partitions(tpl: &TopicPartitionList) -> Vec<(String, i32)> {
    tpl.elements()
        .iter()
        .map(|e| (e.topic().to_string(), e.partition()))
        .collect()
}

/// Turns rebalances into [`AssignmentEvent`]s. Under the classic eager
/// protocol a revocation takes every partition and the assignment that
/// follows gives the whole new set (`assign`); when librdkafka reports the
/// COOPERATIVE protocol, as it does for `group.protocol=consumer`, both
/// carry only the partitions that change owner (`incremental_assign`,
/// `incremental_unassign`). Either way the loop creates and closes only the
/// tasks of the partitions named, and acknowledges a revocation only after
/// committing (see `rebalance` below).
pub(crate) struct StreamsConsumerContext {
    shared: Arc<ThreadShared>,
}

impl ClientContext for StreamsConsumerContext {}

impl ConsumerContext for StreamsConsumerContext {
    /// Assignments are taken at once; revocations are left pending for the
    /// loop (see [`ThreadLoop::revoke`]): Kafka Streams commits the revoked
    /// tasks inside `onPartitionsRevoked`, but our tasks live on the loop,
    /// out of this callback's reach. librdkafka waits for the application
    /// to acknowledge a revocation (`unassign`/`incremental_unassign`), so
    /// the loop commits first and acknowledges after: no record processed
    /// before a rebalance is processed again by the next owner.
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        tpl: &mut TopicPartitionList,
    ) {
        match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                let assigned = match consumer.rebalance_protocol() {
                    RebalanceProtocol::Cooperative => consumer.incremental_assign(tpl),
                    _ => consumer.assign(tpl),
                };
                if let Err(e) = assigned {
                    log::error!("could not take the assignment: {e}");
                }
                push_event(&self.shared, AssignmentEvent::Assigned(partitions(tpl)));
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                push_event(&self.shared, AssignmentEvent::Revoked(partitions(tpl)));
                if self.shared.deferring.load(Ordering::Acquire) {
                    *self
                        .shared
                        .pending_revocation
                        .lock()
                        .unwrap_or_else(|p| p.into_inner()) = Some(partitions(tpl));
                } else {
                    acknowledge_revocation(consumer, tpl);
                }
            }
            other => {
                let code: RDKafkaErrorCode = other.into();
                log::error!("rebalance failed: {code}");
                // As rdkafka's default: give up the assignment. The loop
                // closes the tasks of what was assigned (they must not go on
                // with buffers of partitions fetched again later).
                let assigned = consumer
                    .assignment()
                    .map(|a| partitions(&a))
                    .unwrap_or_default();
                acknowledge_revocation(consumer, tpl);
                if !assigned.is_empty() {
                    push_event(&self.shared, AssignmentEvent::Revoked(assigned));
                }
            }
        }
    }
}

/// Gives up revoked partitions: incrementally under a cooperative protocol
/// (KIP-848's included), the whole assignment under the eager one.
fn acknowledge_revocation<C: Consumer<StreamsConsumerContext>>(
    consumer: &C,
    tpl: &TopicPartitionList,
) {
    let result = match consumer.rebalance_protocol() {
        RebalanceProtocol::Cooperative => consumer.incremental_unassign(tpl),
        _ => consumer.unassign(),
    };
    if let Err(e) = result {
        log::error!("could not give up revoked partitions: {e}");
    }
}

fn push_event(shared: &ThreadShared, event: AssignmentEvent) {
    shared
        .events
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(event);
}

/// Remembers the first failed delivery, for the loop to act on.
#[derive(Default)]
pub(crate) struct DeliveryContext {
    failure: Mutex<Option<KafkaError>>,
    /// Offset of the last acknowledged record per changelog partition, for
    /// the tasks' checkpoints.
    changelog_offsets: Mutex<HashMap<(String, i32), i64>>,
    /// `production.exception.handler` says continue: a refused output
    /// record is logged and counted, not fatal. Changelog records and
    /// exactly-once transactions always fail hard: losing them loses state.
    continue_on_failure: bool,
    /// Output records dropped under that handler.
    dropped: std::sync::atomic::AtomicU64,
}

impl ClientContext for DeliveryContext {}

impl ProducerContext for DeliveryContext {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Ok(message) = result {
            if message.topic().ends_with("-changelog") {
                let mut offsets = self
                    .changelog_offsets
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                let key = (message.topic().to_string(), message.partition());
                let offset = offsets.entry(key).or_insert(-1);
                *offset = (*offset).max(message.offset());
            }
        }
        if let Err((error, message)) = result {
            if self.continue_on_failure && !message.topic().ends_with("-changelog") {
                log::warn!(
                    "dropping a record the broker refused for {}-{}: {error} \
                     (production.exception.handler: continue)",
                    message.topic(),
                    message.partition()
                );
                self.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
            log::error!(
                "could not produce to {}-{}: {error}",
                message.topic(),
                message.partition()
            );
            self.failure
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert(error.clone());
        }
    }
}

struct TaskEntry {
    task: StreamTask,
    group: PartitionGroup,
    /// Held while the task lives: the lock on its state directory
    /// (stateful tasks only).
    directory: Option<TaskDirectory>,
    /// When the task began reading its bootstrap partitions, and when it
    /// last logged its progress.
    bootstrap: Option<(Instant, Instant)>,
    /// Source partitions of the task this thread was not given (yet): the
    /// task processes nothing until it has them all, so that under an
    /// incremental protocol two members never run halves of one task.
    missing: Vec<(String, i32)>,
}

/// A stream thread's clients, made before its OS thread starts so that a
/// bad client setting fails `start()`.
pub(crate) struct StreamThread {
    name: String,
    config: StreamsConfig,
    topology: Arc<Topology>,
    sources: Arc<SourceTopicIndex>,
    consumer: BaseConsumer<StreamsConsumerContext>,
    producer: Arc<BaseProducer<DeliveryContext>>,
    shared: Arc<ThreadShared>,
}

/// A running stream thread: its clients and its tasks. Tasks hold
/// single-threaded node graphs, so this lives on the thread that made it.
struct ThreadLoop {
    name: String,
    config: StreamsConfig,
    sources: Arc<SourceTopicIndex>,
    consumer: BaseConsumer<StreamsConsumerContext>,
    producer: Arc<BaseProducer<DeliveryContext>>,
    shared: Arc<ThreadShared>,
    tasks: HashMap<TaskId, TaskEntry>,
    /// Opens tasks: directory lock, stores, restoration; collects the
    /// stores' changelog records.
    opener: TaskOpener,
    paused: HashSet<(String, i32)>,
    last_commit: Instant,
    /// Topics a task reads to their end before its other partitions.
    bootstrap_topics: HashSet<String>,
    /// Deletes what the application has consumed from its repartition
    /// topics.
    purge: RepartitionPurge,
    /// Partition counts of the topics the thread picks partitions in itself.
    partition_counts: HashMap<String, i32>,
    /// Committed offsets of the assigned partitions, fetched at assignment:
    /// where reading starts before a record is consumed (for KIP-695).
    start_offsets: HashMap<(String, i32), i64>,
    /// What was committed with those offsets (partition time, operators'
    /// metadata), for the tasks to resume from.
    start_metadata: HashMap<(String, i32), PartitionMetadata>,
    /// Set when the last commit ended in an abort and rewind.
    rewound: bool,
    /// The thread's metrics.
    sensors: ThreadSensors,
    /// When the partitions' lag gauges were last set.
    lag_recorded: Instant,
    /// Each assigned partition's lag and consumed count, by topic then
    /// partition (looked up by `&str` per record, with no allocation).
    partition_sensors: HashMap<String, HashMap<i32, PartitionSensors>>,
}

/// Kafka Streams' repartition purge: repartition topics keep records
/// forever (a backfill must survive), so the application deletes records
/// it has committed past, every `repartition.purge.interval.ms`, with the
/// DeleteRecords API.
pub(crate) struct RepartitionPurge {
    topics: HashSet<String>,
    admin: Option<rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext>>,
    committed: HashMap<(String, i32), i64>,
    last: Instant,
    interval: Duration,
}

impl RepartitionPurge {
    fn new(topology: &Topology, config: &StreamsConfig) -> Self {
        let topics: HashSet<String> = topology
            .internal_topics()
            .map(|t| format!("{}-{t}", config.application_id))
            .collect();
        let admin = if topics.is_empty() {
            None
        } else {
            let mut client = ClientConfig::new();
            client.set("bootstrap.servers", &config.bootstrap_servers);
            for (k, v) in &config.admin {
                client.set(k, v);
            }
            client
                .create()
                .map_err(|e| log::warn!("no repartition purge: cannot make an admin client: {e}"))
                .ok()
        };
        RepartitionPurge {
            topics,
            admin,
            committed: HashMap::new(),
            last: Instant::now(),
            interval: config.repartition_purge_interval,
        }
    }

    /// Notes the committed offsets of repartition partitions.
    fn committed(&mut self, offsets: &TopicPartitionList) {
        for e in offsets.elements() {
            if let (true, Offset::Offset(o)) = (self.topics.contains(e.topic()), e.offset()) {
                self.committed
                    .insert((e.topic().to_string(), e.partition()), o);
            }
        }
    }

    /// Deletes records before the committed offsets, at most every
    /// interval. A failure only delays the purge.
    fn maybe_purge(&mut self, thread: &str) {
        if self.last.elapsed() < self.interval || self.committed.is_empty() {
            return;
        }
        self.last = Instant::now();
        let Some(admin) = &self.admin else {
            return;
        };
        let mut tpl = TopicPartitionList::new();
        for ((topic, partition), offset) in self.committed.drain() {
            if tpl
                .add_partition_offset(&topic, partition, Offset::Offset(offset))
                .is_err()
            {
                return;
            }
        }
        let options =
            rdkafka::admin::AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
        match futures_executor::block_on(admin.delete_records(&tpl, &options)) {
            Ok(_) => log::debug!("{thread}: purged {} repartition partitions", tpl.count()),
            Err(e) => log::warn!("{thread}: repartition purge failed (retried later): {e}"),
        }
    }
}

/// How often the partitions' lag gauges are set (from cached values, so
/// cheap; often enough for a scrape every few seconds).
const LAG_RECORDING_INTERVAL: Duration = Duration::from_secs(1);

/// Milliseconds since the epoch.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl StreamThread {
    pub fn new(
        index: usize,
        process_id: &str,
        config: StreamsConfig,
        topology: Arc<Topology>,
        sources: Arc<SourceTopicIndex>,
    ) -> Result<Self, RuntimeError> {
        let name = format!(
            "{}-{process_id}-StreamThread-{}",
            config.application_id,
            index + 1
        );
        let shared = Arc::new(ThreadShared::default());
        let eos = config.processing_guarantee == ProcessingGuarantee::ExactlyOnceV2;

        let mut consumer_config = ClientConfig::new();
        consumer_config
            .set("bootstrap.servers", &config.bootstrap_servers)
            .set("group.id", &config.application_id)
            .set("client.id", format!("{name}-consumer"))
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .set(
                "isolation.level",
                if eos {
                    "read_committed"
                } else {
                    "read_uncommitted"
                },
            );
        // A range assignor with identical subscriptions gives every thread
        // the same partition numbers of co-partitioned topics, so a task's
        // partitions stay together. Under the classic protocol it runs in
        // the group leader (eager: every task stops at a rebalance); under
        // KIP-848 the broker runs it and members move only the partitions
        // that change owner, and librdkafka refuses the client-side setting.
        match config.group_protocol() {
            GroupProtocol::Classic => {
                consumer_config.set("partition.assignment.strategy", "range");
            }
            GroupProtocol::Consumer => {
                consumer_config.set("group.remote.assignor", "range");
                match config.consumer.get("group.remote.assignor") {
                    Some(assignor) if assignor != "range" => log::warn!(
                        "{name}: group.remote.assignor={assignor}: unless that assignor gives \
                         every member the same partition numbers of all subscribed topics, \
                         co-partitioned topics (joins, merges) can land in different tasks"
                    ),
                    _ => {}
                }
            }
        }
        for (k, v) in &config.consumer {
            consumer_config.set(k, v);
        }
        if let Some(instance) = config.consumer.get("group.instance.id") {
            // Static membership: one id per thread, as Kafka Streams
            // suffixes it, or the threads would fence each other.
            consumer_config.set("group.instance.id", format!("{instance}-{}", index + 1));
        }
        let consumer: BaseConsumer<StreamsConsumerContext> =
            consumer_config.create_with_context(StreamsConsumerContext {
                shared: shared.clone(),
            })?;

        let mut producer_config = ClientConfig::new();
        producer_config
            .set("bootstrap.servers", &config.bootstrap_servers)
            .set("client.id", format!("{name}-producer"))
            // Java's default partitioner: murmur2 of the key bytes, so a
            // key lands where Kafka Streams would put it.
            .set("partitioner", "murmur2_random")
            .set("linger.ms", "5");
        if eos {
            producer_config.set(
                "transactional.id",
                format!("{}-{process_id}-{}", config.application_id, index + 1),
            );
        }
        for (k, v) in &config.producer {
            producer_config.set(k, v);
        }
        let producer: Arc<BaseProducer<DeliveryContext>> =
            Arc::new(producer_config.create_with_context(DeliveryContext {
                continue_on_failure: !eos
                    && config.production == crate::ProductionHandling::Continue,
                ..DeliveryContext::default()
            })?);
        if eos {
            producer.init_transactions(Duration::from_secs(60))?;
        }

        let mut subscription: Vec<String> = sources.topics().map(str::to_string).collect();
        subscription.extend(sources.patterns());
        let subscription: Vec<&str> = subscription.iter().map(String::as_str).collect();
        consumer.subscribe(&subscription)?;

        Ok(Self {
            name,
            config,
            topology,
            sources,
            consumer,
            producer,
            shared,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs until `stop` is set or an error ends the thread. `on_assignment`
    /// is told each time the thread gains or loses partitions.
    pub fn run(self, stop: &AtomicBool, on_assignment: &dyn Fn(bool)) -> Result<(), RuntimeError> {
        let opener = TaskOpener::new(&self.name, &self.config, self.topology.clone())?;
        let bootstrap_topics = self
            .topology
            .bootstrap_topics(&self.config.application_id)
            .into_iter()
            .collect();
        let purge = RepartitionPurge::new(&self.topology, &self.config);
        let sensors = self
            .config
            .metrics
            .thread_sensors(&self.name)
            .map_err(|e| {
                RuntimeError::Streams(kstreams_dsl::StreamsError::Internal(format!(
                    "thread metrics: {e}"
                )))
            })?;
        ThreadLoop {
            sensors,
            rewound: false,
            lag_recorded: Instant::now(),
            partition_sensors: HashMap::new(),
            opener,
            name: self.name,
            config: self.config,
            sources: self.sources,
            consumer: self.consumer,
            producer: self.producer,
            shared: self.shared,
            tasks: HashMap::new(),
            paused: HashSet::new(),
            last_commit: Instant::now(),
            bootstrap_topics,
            purge,
            partition_counts: HashMap::new(),
            start_offsets: HashMap::new(),
            start_metadata: HashMap::new(),
        }
        .run(stop, on_assignment)
    }
}

impl Drop for ThreadLoop {
    /// However the loop ended (a panic included), revocations from now on
    /// are acknowledged in the callback, and one left pending is
    /// acknowledged here: the consumer, dropped next, closes only then.
    fn drop(&mut self) {
        self.shared.deferring.store(false, Ordering::Release);
        self.shared.acknowledge_pending(&self.consumer);
    }
}

impl ThreadLoop {
    fn run(mut self, stop: &AtomicBool, on_assignment: &dyn Fn(bool)) -> Result<(), RuntimeError> {
        self.shared.deferring.store(true, Ordering::Release);
        let result = self.run_loop(stop, on_assignment);
        let finish = match &result {
            // A clean close checkpoints under exactly-once too.
            Ok(()) => self.commit().and_then(|()| self.write_checkpoints()),
            Err(_) => {
                self.abort_if_in_transaction();
                // Offsets of records whose outputs may not have gone out
                // are never committed.
                self.shared
                    .processed
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clear();
                Ok(())
            }
        };
        for (id, entry) in &mut self.tasks {
            entry.task.close();
            self.config.metrics.remove_task(&id.to_string());
        }
        for (topic, partitions) in &self.partition_sensors {
            for partition in partitions.keys() {
                remove_partition_series(&self.config.metrics, topic, *partition);
            }
        }
        self.config
            .metrics
            .remove_matching(kstreams_metrics::names::THREAD_ID, &self.name);
        // From here on revocations (closing the consumer revokes all) are
        // acknowledged inside the callback: the tasks are closed already.
        self.shared.deferring.store(false, Ordering::Release);
        self.shared.acknowledge_pending(&self.consumer);
        self.consumer.unsubscribe();
        result.and(finish)
    }

    fn run_loop(
        &mut self,
        stop: &AtomicBool,
        on_assignment: &dyn Fn(bool),
    ) -> Result<(), RuntimeError> {
        let commit_interval = self.config.effective_commit_interval();
        while !stop.load(Ordering::Acquire) {
            self.poll_records(self.config.poll)?;
            if let Some(assigned) = self.apply_assignment_events()? {
                on_assignment(assigned);
            }
            if self.shared.needs_rewind.swap(false, Ordering::AcqRel) {
                self.abort_and_rewind()?;
            }
            // After the poll: a revocation inside it may have committed the
            // transaction, and outputs below need an open one.
            self.begin_transaction_if_needed()?;
            let committable = self.process_buffered()?;
            self.punctuate_wall_clock()?;
            self.producer.poll(Duration::ZERO);
            self.check_deliveries()?;
            self.resume_drained_partitions()?;
            if self.lag_recorded.elapsed() >= LAG_RECORDING_INTERVAL {
                self.record_lag();
                self.lag_recorded = Instant::now();
            }
            let requested = self
                .tasks
                .values_mut()
                .any(|e| e.task.context().take_commit_request());
            if committable && (requested || self.last_commit.elapsed() >= commit_interval) {
                self.commit()?;
            }
        }
        Ok(())
    }

    fn begin_transaction_if_needed(&mut self) -> Result<(), RuntimeError> {
        if self.config.processing_guarantee == ProcessingGuarantee::ExactlyOnceV2
            && !self.shared.in_transaction.load(Ordering::Acquire)
        {
            self.producer.begin_transaction()?;
            self.shared.in_transaction.store(true, Ordering::Release);
        }
        Ok(())
    }

    fn abort_if_in_transaction(&mut self) {
        if self.shared.in_transaction.swap(false, Ordering::AcqRel) {
            if let Err(e) = self.producer.abort_transaction(Duration::from_secs(30)) {
                log::error!("{}: could not abort the transaction: {e}", self.name);
            }
        }
    }

    /// Polls once with `timeout`, then drains what is already fetched,
    /// buffering records in their tasks' partition groups.
    fn poll_records(&mut self, timeout: Duration) -> Result<(), RuntimeError> {
        let started = Instant::now();
        let mut polled = 0;
        let result = self.poll_into_groups(timeout, &mut polled);
        self.sensors.poll_latency.observe_since(started);
        self.sensors.poll_records.add(polled);
        result
    }

    fn poll_into_groups(
        &mut self,
        timeout: Duration,
        polled: &mut u64,
    ) -> Result<(), RuntimeError> {
        let mut wait = timeout;
        // One batch of at most the per-partition bound: then every buffer is
        // worked down before the next poll, so a partition only goes over
        // the bound (and is paused) while its task waits on another
        // partition. Pausing is costly in librdkafka: it drops the
        // partition's prefetched records, which are fetched again on resume.
        for _ in 0..self.config.buffered_records_per_partition {
            if self.shared.revocation_pending() {
                // Revoked tasks are committed before anything else.
                break;
            }
            let Some(result) = self.consumer.poll(wait) else {
                break;
            };
            wait = Duration::ZERO;
            let message = match result {
                Ok(m) => m,
                Err(e) if is_fatal_consumer_error(&e) => {
                    log::error!("{}: fatal consumer error: {e}", self.name);
                    return Err(e.into());
                }
                Err(e) => {
                    log::warn!("{}: consumer error: {e}", self.name);
                    continue;
                }
            };
            *polled += 1;
            if let Some(sensors) = self
                .partition_sensors
                .get(message.topic())
                .and_then(|p| p.get(&message.partition()))
            {
                sensors.records_consumed.inc();
            }
            let record = consumed(&message);
            let Some(subtopology) = self.sources.subtopology_of(&record.topic) else {
                continue;
            };
            let id = TaskId {
                subtopology,
                partition: record.partition,
            };
            let Some(entry) = self.tasks.get_mut(&id) else {
                continue; // a record of a partition revoked in this poll
            };
            // Event time is extracted as the record is buffered, so that the
            // partition group orders by it (Kafka Streams' RecordQueue).
            let Some(timestamp) = entry.task.extract_timestamp(&record)? else {
                continue;
            };
            let buffered = entry.group.push(record, timestamp);
            if buffered > self.config.buffered_records_per_partition {
                // Backpressure: stop fetching this partition until the
                // task has worked its buffer down.
                let tp = (message.topic().to_string(), message.partition());
                if !self.paused.insert(tp.clone()) {
                    continue;
                }
                let mut tpl = TopicPartitionList::new();
                tpl.add_partition(&tp.0, tp.1);
                self.consumer.pause(&tpl)?;
            }
        }
        Ok(())
    }

    fn resume_drained_partitions(&mut self) -> Result<(), RuntimeError> {
        let bound = self.config.buffered_records_per_partition;
        let mut resumable = Vec::new();
        for tp in &self.paused {
            let buffered = self
                .sources
                .subtopology_of(&tp.0)
                .and_then(|s| {
                    self.tasks.get(&TaskId {
                        subtopology: s,
                        partition: tp.1,
                    })
                })
                .map_or(0, |e| e.group.buffered(&tp.0, tp.1));
            if buffered < bound {
                resumable.push(tp.clone());
            }
        }
        if resumable.is_empty() {
            return Ok(());
        }
        let mut tpl = TopicPartitionList::new();
        for tp in &resumable {
            self.paused.remove(tp);
            tpl.add_partition(&tp.0, tp.1);
        }
        self.consumer.resume(&tpl)?;
        Ok(())
    }

    /// Creates and closes tasks as partitions come and go. Returns
    /// `Some(true)` after an assignment, `Some(false)` after a revocation.
    fn apply_assignment_events(&mut self) -> Result<Option<bool>, RuntimeError> {
        let events: Vec<AssignmentEvent> =
            std::mem::take(&mut *self.shared.events.lock().unwrap_or_else(|p| p.into_inner()));
        let mut outcome = None;
        for event in events {
            match event {
                AssignmentEvent::Revoked(tps) => {
                    let clean = self.commit_before_revocation()?;
                    for (topic, partition) in &tps {
                        let (topic, partition) = (topic.clone(), *partition);
                        if let Some(partitions) = self.partition_sensors.get_mut(&topic) {
                            if partitions.remove(&partition).is_some() {
                                remove_partition_series(&self.config.metrics, &topic, partition);
                            }
                        }
                        self.paused.remove(&(topic.clone(), partition));
                        self.start_offsets.remove(&(topic.clone(), partition));
                        self.start_metadata.remove(&(topic.clone(), partition));
                        self.shared
                            .processed
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .remove(&(topic.clone(), partition));
                        let Some(subtopology) = self.sources.subtopology_of(&topic) else {
                            continue;
                        };
                        let id = TaskId {
                            subtopology,
                            partition,
                        };
                        if let Some(entry) = self.tasks.get_mut(&id) {
                            if entry.group.remove_partition(&topic, partition) {
                                let mut entry = self.tasks.remove(&id).expect("present");
                                if clean {
                                    // Its stores hold exactly what was just
                                    // committed: whoever opens the task next
                                    // (this thread after an eager rebalance)
                                    // restores from here, not from scratch.
                                    self.checkpoint_task(id, &entry)?;
                                }
                                entry.task.close();
                                self.sensors.task_closed.inc();
                                self.config.metrics.remove_task(&id.to_string());
                                log::info!("{}: closed task {id}", self.name);
                            }
                        }
                    }
                    self.shared.acknowledge_pending(&self.consumer);
                    outcome = Some(false);
                }
                AssignmentEvent::Assigned(tps) => {
                    // librdkafka keeps an application pause across a
                    // revocation: a partition paused before and assigned
                    // again would never be fetched.
                    let mut resume = TopicPartitionList::new();
                    for (topic, partition) in &tps {
                        resume.add_partition(topic, *partition);
                    }
                    if let Err(e) = self.consumer.resume(&resume) {
                        log::debug!("{}: resume of assigned partitions: {e}", self.name);
                    }
                    match self
                        .consumer
                        .committed_offsets(resume, Duration::from_secs(10))
                    {
                        Ok(committed) => {
                            for e in committed.elements() {
                                let key = (e.topic().to_string(), e.partition());
                                if let Offset::Offset(o) = e.offset() {
                                    self.start_offsets.insert(key.clone(), o);
                                }
                                if let Some(metadata) = PartitionMetadata::decode(e.metadata()) {
                                    self.start_metadata.insert(key, metadata);
                                }
                            }
                        }
                        // Partitions then start without their committed
                        // partition time and operators' metadata (an
                        // emit-final window may be emitted again).
                        Err(e) => log::warn!(
                            "{}: committed offsets and their metadata unknown: {e}",
                            self.name
                        ),
                    }
                    for (topic, partition) in tps {
                        match self.config.metrics.partition_sensors(&topic, partition) {
                            Ok(sensors) => {
                                self.partition_sensors
                                    .entry(topic.clone())
                                    .or_default()
                                    .insert(partition, sensors);
                            }
                            Err(e) => log::warn!("{}: partition metrics: {e}", self.name),
                        }
                        let Some(subtopology) = self.sources.subtopology_of(&topic) else {
                            continue;
                        };
                        let id = TaskId {
                            subtopology,
                            partition,
                        };
                        if !self.tasks.contains_key(&id) {
                            let (task, directory) = self.opener.open(id)?;
                            self.sensors.task_created.inc();
                            log::info!("{}: created task {id}", self.name);
                            self.tasks.insert(
                                id,
                                TaskEntry {
                                    task,
                                    group: PartitionGroup::default(),
                                    directory,
                                    bootstrap: None,
                                    missing: Vec::new(),
                                },
                            );
                        }
                        let end = if self.bootstrap_topics.contains(&topic) {
                            self.bootstrap_end(&topic, partition).unwrap_or_else(|e| {
                                log::warn!(
                                    "{}: no bootstrap of {topic}-{partition}: its end offset is \
                                     unknown ({e}); processing without waiting for it",
                                    self.name
                                );
                                None
                            })
                        } else {
                            None
                        };
                        let entry = self.tasks.get_mut(&id).expect("present");
                        if let Some(committed) =
                            self.start_metadata.remove(&(topic.clone(), partition))
                        {
                            entry.task.resume_partition(
                                &topic,
                                partition,
                                committed.partition_time,
                                committed.processor,
                            );
                        }
                        match end {
                            Some(end) => {
                                log::info!(
                                    "{}: task {id} bootstraps {topic}-{partition} up to offset {end} \
                                     before its other partitions",
                                    self.name
                                );
                                entry.group.add_bootstrap(&topic, partition, end);
                                let now = Instant::now();
                                entry.bootstrap.get_or_insert((now, now));
                            }
                            None => entry.group.add_partition(&topic, partition),
                        }
                    }
                    outcome = Some(true);
                }
            }
        }
        if outcome.is_some() {
            self.find_missing_partitions();
        }
        Ok(outcome)
    }

    /// For each task, the partitions of its source topics this thread does
    /// not have: partition p of every named source topic with more than p
    /// partitions (pattern sources are not known in advance and not
    /// checked). The range assignors give them together; a split (KIP-848
    /// moving co-partitioned partitions in different steps, or a
    /// non-range assignor) holds the task back instead of running half of
    /// it here and half on another member.
    fn find_missing_partitions(&mut self) {
        let topics: Vec<(String, u32)> = self
            .sources
            .topics()
            .filter_map(|t| Some((t.to_string(), self.sources.subtopology_of(t)?)))
            .collect();
        let mut counts: HashMap<String, i32> = HashMap::new();
        for (topic, _) in &topics {
            if let Ok(n) = self.partition_count(topic) {
                counts.insert(topic.clone(), n);
            }
        }
        for (id, entry) in &mut self.tasks {
            let missing = missing_partitions(*id, &topics, &counts, |t, p| {
                entry.group.has_partition(t, p)
            });
            if !missing.is_empty() && missing != entry.missing {
                log::info!(
                    "{}: task {id} waits for {missing:?}, assigned elsewhere for now, before \
                     processing its other partitions",
                    self.name
                );
            }
            entry.missing = missing;
        }
    }

    /// Kafka Streams' `onPartitionsRevoked`: before partitions go, every
    /// task is flushed and committed (its outputs and changelog records
    /// acknowledged, then the offsets), so the next owner starts exactly
    /// where this thread stopped and no store update is applied twice. A
    /// lost assignment (the member was dropped from the group) cannot
    /// commit: under exactly-once the transaction is aborted and the
    /// thread rewinds; under at-least-once the next owner reprocesses from
    /// the last commit.
    /// Returns whether the commit went through, so that the revoked tasks'
    /// stores match their committed changelogs (and may be checkpointed).
    fn commit_before_revocation(&mut self) -> Result<bool, RuntimeError> {
        if self.consumer.assignment_lost() {
            log::warn!(
                "{}: partitions lost (dropped from the group); records since the last commit \
                 will be processed again",
                self.name
            );
            if self.config.processing_guarantee == ProcessingGuarantee::ExactlyOnceV2 {
                self.abort_and_rewind()?;
            }
            return Ok(false);
        }
        self.rewound = false;
        self.commit()?;
        Ok(!self.rewound && !self.shared.in_transaction.load(Ordering::Acquire))
    }

    /// Writes one task's checkpoint from the acknowledged changelog offsets
    /// (at-least-once writes them at every commit already; exactly-once
    /// only when the task is closed clean).
    fn checkpoint_task(&self, id: TaskId, entry: &TaskEntry) -> Result<(), RuntimeError> {
        let Some(directory) = &entry.directory else {
            return Ok(());
        };
        let delivered = self.delivered_changelog_offsets();
        self.opener.write_checkpoint(id, directory, &delivered)
    }

    /// The end offset a bootstrap partition must be read to: its high
    /// watermark now, unless the committed position is already there.
    fn bootstrap_end(&self, topic: &str, partition: i32) -> Result<Option<i64>, RuntimeError> {
        let timeout = Duration::from_secs(30);
        let (low, high) = self.consumer.fetch_watermarks(topic, partition, timeout)?;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition(topic, partition);
        let committed = self
            .consumer
            .committed_offsets(tpl, timeout)?
            .find_partition(topic, partition)
            .and_then(|e| match e.offset() {
                Offset::Offset(o) => Some(o),
                _ => None,
            })
            .unwrap_or(0);
        // Records before the low watermark are gone (retention, purge):
        // reading starts at the later of the two.
        Ok((committed.max(low) < high).then_some(high))
    }

    /// Ends the bootstrap of partitions the consumer has read past their
    /// end (transaction markers are never handed out as records), and
    /// logs bootstrap progress and completion as a restore does.
    fn track_bootstrap(&mut self) -> Result<(), RuntimeError> {
        if !self.tasks.values().any(|e| e.group.bootstrapping()) {
            return Ok(());
        }
        let positions = self.consumer.position()?;
        for (id, entry) in &mut self.tasks {
            let Some((began, last_log)) = entry.bootstrap else {
                continue;
            };
            let pending: Vec<(String, i32, i64)> = entry.group.bootstrap_partitions().to_vec();
            for (topic, partition, _) in &pending {
                if let Some(Offset::Offset(position)) = positions
                    .find_partition(topic, *partition)
                    .map(|e| e.offset())
                {
                    entry.group.bootstrap_position(topic, *partition, position);
                }
            }
            if !entry.group.bootstrapping() {
                log::info!(
                    "{}: task {id} bootstrapped its tables in {:.1} s; processing its other partitions",
                    self.name,
                    began.elapsed().as_secs_f64()
                );
                entry.bootstrap = None;
            } else if last_log.elapsed() >= Duration::from_secs(5) {
                let left: Vec<String> = entry
                    .group
                    .bootstrap_partitions()
                    .iter()
                    .map(|(t, p, end)| {
                        let at = positions
                            .find_partition(t, *p)
                            .and_then(|e| match e.offset() {
                                Offset::Offset(o) => Some(o),
                                _ => None,
                            })
                            .unwrap_or(0);
                        format!("{t}-{p} at {at}/{end}")
                    })
                    .collect();
                log::info!(
                    "{}: task {id} bootstrapping for {:.0} s: {}",
                    self.name,
                    began.elapsed().as_secs_f64(),
                    left.join(", ")
                );
                entry.bootstrap = Some((began, Instant::now()));
            }
        }
        Ok(())
    }

    /// Assigned partitions known to be behind their end (KIP-695: with
    /// max.task.idle.ms at 0 a task waits for these when they are empty).
    /// From librdkafka's cached watermarks and positions: no request.
    fn lagging_partitions(&self, max_idle: Duration) -> Vec<(String, i32)> {
        if !max_idle.is_zero() {
            return Vec::new();
        }
        let Ok(positions) = self.consumer.position() else {
            return Vec::new();
        };
        positions
            .elements()
            .iter()
            .filter_map(|e| {
                let key = (e.topic().to_string(), e.partition());
                let lagging = match cached_watermarks(&self.consumer, e.topic(), e.partition()) {
                    // No fetch answered yet: the lag is unknown, and as in
                    // Kafka Streams the task waits rather than guess.
                    None => true,
                    Some((low, high)) => {
                        // Nothing consumed yet: reading starts at the
                        // committed offset, else at the low watermark.
                        let position = match e.offset() {
                            Offset::Offset(position) => Some(position),
                            _ => match self.start_offsets.get(&key) {
                                Some(&committed) => Some(committed.max(low)),
                                None => (low >= 0).then_some(low),
                            },
                        };
                        position.is_none_or(|p| high > p)
                    }
                };
                lagging.then_some(key)
            })
            .collect()
    }

    /// Processes what the partition groups allow, sending outputs as they
    /// come. Returns whether anything can be committed.
    fn process_buffered(&mut self) -> Result<bool, RuntimeError> {
        self.track_bootstrap()?;
        let max_idle = self.config.max_task_idle;
        let mut outputs = Vec::new();
        let mut progress = Vec::new();
        let lagging = self.lagging_partitions(max_idle);
        let is_lagging = |topic: &str, partition: i32| {
            lagging.iter().any(|(t, p)| *p == partition && t == topic)
        };
        for entry in self.tasks.values_mut().filter(|e| e.missing.is_empty()) {
            let now = Instant::now();
            while let Some((record, timestamp)) = entry.group.next(
                max_idle,
                now,
                &entry.task.metrics().enforced_processing,
                &is_lagging,
            ) {
                entry.task.process_at(record, timestamp)?;
            }
            progress.extend(
                entry
                    .group
                    .take_progress()
                    .map(|(topic, partition, next)| ((topic.to_string(), partition), next)),
            );
            outputs.extend(entry.task.drain_output());
        }
        // Progress counts only once its outputs (and the stores' changelog
        // records) are with the producer: if processing fails above, nothing
        // of this batch gets committed.
        outputs.extend(self.opener.changelog().drain());
        for record in outputs {
            self.send(record)?;
        }
        let mut processed = self
            .shared
            .processed
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        processed.extend(progress);
        Ok(!processed.is_empty())
    }

    fn punctuate_wall_clock(&mut self) -> Result<(), RuntimeError> {
        let now = now_ms();
        let mut outputs = Vec::new();
        for entry in self.tasks.values_mut() {
            entry.task.advance_wall_clock(now)?;
            outputs.extend(entry.task.drain_output());
        }
        outputs.extend(self.opener.changelog().drain());
        for record in outputs {
            self.send(record)?;
        }
        Ok(())
    }

    fn send(&mut self, record: ProducedRecord) -> Result<(), RuntimeError> {
        let partition = match (record.partition, record.partition_key_len, &record.key) {
            (None, Some(len), Some(key)) => Some(partition_for_key(
                &key[..len],
                self.partition_count(&record.topic)?,
            )),
            (partition, _, _) => partition,
        };
        let mut base: BaseRecord<'_, Vec<u8>, Vec<u8>> =
            BaseRecord::to(&record.topic).timestamp(record.timestamp);
        if let Some(key) = &record.key {
            base = base.key(key);
        }
        if let Some(value) = &record.value {
            base = base.payload(value);
        }
        if let Some(partition) = partition {
            base = base.partition(partition);
        }
        // librdkafka allocates a header list: only for records with headers.
        if !record.headers.is_empty() {
            base = base.headers(owned_headers(&record.headers));
        }
        let mut pending = base;
        loop {
            match self.producer.send(pending) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    // The local queue is full: serve delivery reports, retry.
                    self.producer.poll(Duration::from_millis(100));
                    pending = back;
                }
                Err((e, _)) => return Err(e.into()),
            }
        }
    }

    /// The partition count of `topic`, from the producer's metadata on first
    /// use, as Kafka Streams' record collector asks `partitionsFor`.
    fn partition_count(&mut self, topic: &str) -> Result<i32, RuntimeError> {
        if let Some(&count) = self.partition_counts.get(topic) {
            return Ok(count);
        }
        let metadata = self
            .producer
            .client()
            .fetch_metadata(Some(topic), Duration::from_secs(30))?;
        let count = metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic && t.error().is_none())
            .map_or(0, |t| t.partitions().len() as i32);
        if count == 0 {
            return Err(RuntimeError::NoPartitionInfo(topic.to_string()));
        }
        self.partition_counts.insert(topic.to_string(), count);
        Ok(count)
    }

    fn check_deliveries(&self) -> Result<(), RuntimeError> {
        let mut failure = self
            .producer
            .context()
            .failure
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        // Under at-least-once the failure stays: the thread fails and
        // commits nothing more. Exactly-once aborts and goes on, so the
        // failure is taken.
        let failure = match self.config.processing_guarantee {
            ProcessingGuarantee::AtLeastOnce => failure.clone(),
            ProcessingGuarantee::ExactlyOnceV2 => failure.take(),
        };
        match failure {
            Some(e) => Err(RuntimeError::Production(e)),
            None => Ok(()),
        }
    }

    /// Flushes stores and outputs, then commits offsets (inside the
    /// transaction under exactly-once). A commit refused because the group
    /// is rebalancing is not an error: at-least-once reprocesses from the
    /// last commit, exactly-once aborts and rewinds to it.
    fn commit(&mut self) -> Result<(), RuntimeError> {
        let started = Instant::now();
        let result = self.flush_and_commit();
        self.sensors.commit_latency.observe_since(started);
        result
    }

    /// What is committed with a partition's offset (Kafka Streams'
    /// `TopicPartitionMetadata`): its task's processed partition time and
    /// operators' metadata, so a restarted task resumes from them.
    fn commit_metadata(&self, topic: &str, partition: i32) -> Option<String> {
        let subtopology = self.sources.subtopology_of(topic)?;
        let entry = self.tasks.get(&TaskId {
            subtopology,
            partition,
        })?;
        let metadata = PartitionMetadata {
            partition_time: entry.task.processed_partition_time(topic, partition),
            processor: entry.task.processor_metadata().clone(),
        };
        Some(metadata.encode())
    }

    /// Sets each assigned partition's lag gauge: its high watermark minus
    /// the consumer's position, from librdkafka's cached watermarks (no
    /// request). A partition with no fetch answered yet keeps its value.
    fn record_lag(&self) {
        let Ok(positions) = self.consumer.position() else {
            return;
        };
        for e in positions.elements() {
            let Some(sensors) = self
                .partition_sensors
                .get(e.topic())
                .and_then(|p| p.get(&e.partition()))
            else {
                continue;
            };
            let Some((low, high)) = cached_watermarks(&self.consumer, e.topic(), e.partition())
            else {
                continue;
            };
            let position = match e.offset() {
                Offset::Offset(position) => position,
                _ => {
                    let key = (e.topic().to_string(), e.partition());
                    self.start_offsets.get(&key).map_or(low, |c| (*c).max(low))
                }
            };
            sensors.records_lag.set((high - position).max(0));
        }
    }

    fn flush_and_commit(&mut self) -> Result<(), RuntimeError> {
        // Flushing stores (their caches) may write downstream and to the
        // changelogs: all of it goes out before the offsets are committed.
        let mut outputs = Vec::new();
        for entry in self.tasks.values_mut() {
            entry.task.flush()?;
            outputs.extend(entry.task.drain_output());
        }
        outputs.extend(self.opener.changelog().drain());
        for record in outputs {
            self.send(record)?;
        }
        let mut tpl = TopicPartitionList::new();
        for ((topic, partition), offset) in self
            .shared
            .processed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            let mut element = tpl.add_partition(topic, *partition);
            element.set_offset(Offset::Offset(*offset))?;
            if let Some(metadata) = self.commit_metadata(topic, *partition) {
                element.set_metadata(metadata);
            }
        }
        match self.config.processing_guarantee {
            ProcessingGuarantee::AtLeastOnce => {
                self.producer.flush(Duration::from_secs(60))?;
                // Every output of these offsets must be acknowledged.
                self.check_deliveries()?;
                if tpl.count() > 0 {
                    match self.consumer.commit(&tpl, CommitMode::Sync) {
                        Err(e) if is_rebalance_error(&e) => {
                            log::info!("{}: commit skipped during a rebalance: {e}", self.name)
                        }
                        other => {
                            other?;
                            self.purge.committed(&tpl);
                        }
                    }
                }
                // Everything the stores logged is acknowledged: checkpoint it.
                self.write_checkpoints()?;
            }
            ProcessingGuarantee::ExactlyOnceV2 => {
                if self.shared.in_transaction.load(Ordering::Acquire) {
                    let committed = self.commit_transaction(&tpl);
                    if committed.is_ok() {
                        self.purge.committed(&tpl);
                    }
                    if let Err(e) = committed {
                        if !is_rebalance_error(&e) && !is_abortable(&e) {
                            return Err(e.into());
                        }
                        log::warn!(
                            "{}: transaction not committed, aborting and rewinding: {e}",
                            self.name
                        );
                        self.abort_and_rewind()?;
                    }
                }
            }
        }
        self.last_commit = Instant::now();
        self.purge.maybe_purge(&self.name);
        Ok(())
    }

    /// The offset of the last acknowledged record per changelog partition,
    /// after serving pending delivery reports (they carry the offsets).
    fn delivered_changelog_offsets(&self) -> HashMap<(String, i32), i64> {
        self.producer.poll(Duration::ZERO);
        self.producer
            .context()
            .changelog_offsets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn write_checkpoints(&self) -> Result<(), RuntimeError> {
        let delivered = self.delivered_changelog_offsets();
        for (id, entry) in &self.tasks {
            if let Some(directory) = &entry.directory {
                self.opener.write_checkpoint(*id, directory, &delivered)?;
            }
        }
        Ok(())
    }

    fn commit_transaction(&self, offsets: &TopicPartitionList) -> Result<(), KafkaError> {
        if offsets.count() > 0 {
            // No group metadata means the consumer is between generations:
            // as good as a rebalance for what the caller must do.
            let metadata = self
                .consumer
                .group_metadata()
                .ok_or(KafkaError::Rebalance(RDKafkaErrorCode::RebalanceInProgress))?;
            self.producer.send_offsets_to_transaction(
                offsets,
                &metadata,
                Duration::from_secs(60),
            )?;
        }
        self.producer.commit_transaction(Duration::from_secs(60))?;
        self.shared.in_transaction.store(false, Ordering::Release);
        Ok(())
    }

    /// Aborts the open transaction and goes back to the last committed
    /// offsets: buffered records are dropped and tasks are rebuilt, so what
    /// the aborted transaction saw is processed again from scratch.
    fn abort_and_rewind(&mut self) -> Result<(), RuntimeError> {
        self.rewound = true;
        self.abort_if_in_transaction();
        self.shared
            .processed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        let assignment = self.consumer.assignment()?;
        let committed = self
            .consumer
            .committed_offsets(assignment, Duration::from_secs(30))?;
        let mut resume = Vec::new();
        for element in committed.elements() {
            if let Some(metadata) = PartitionMetadata::decode(element.metadata()) {
                resume.push((element.topic().to_string(), element.partition(), metadata));
            }
            let offset = match element.offset() {
                Offset::Invalid => Offset::Beginning,
                other => other,
            };
            self.consumer.seek(
                element.topic(),
                element.partition(),
                offset,
                Duration::from_secs(30),
            )?;
        }
        let ids: Vec<TaskId> = self.tasks.keys().copied().collect();
        for id in ids {
            let mut entry = self.tasks.remove(&id).expect("present");
            entry.task.close();
            let mut group = std::mem::take(&mut entry.group);
            group.clear();
            // The old task's directory lock goes before the new one is taken.
            drop(entry);
            let (task, directory) = self.opener.open(id)?;
            let now = Instant::now();
            let bootstrap = group.bootstrapping().then_some((now, now));
            self.tasks.insert(
                id,
                TaskEntry {
                    task,
                    group,
                    directory,
                    bootstrap,
                    missing: Vec::new(),
                },
            );
        }
        self.find_missing_partitions();
        // The rebuilt tasks go on from the last commit's partition times
        // and operators' metadata, as after a restart.
        for (topic, partition, metadata) in resume {
            let Some(subtopology) = self.sources.subtopology_of(&topic) else {
                continue;
            };
            if let Some(entry) = self.tasks.get_mut(&TaskId {
                subtopology,
                partition,
            }) {
                entry.task.resume_partition(
                    &topic,
                    partition,
                    metadata.partition_time,
                    metadata.processor,
                );
            }
        }
        Ok(())
    }
}

/// The low and high watermarks librdkafka last saw for a partition, without
/// a request to the broker (rust-rdkafka wraps only the network variant);
/// `None` while the high one is unknown (the low one may be -1).
fn cached_watermarks(
    consumer: &BaseConsumer<StreamsConsumerContext>,
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

/// Consumer errors no retry can fix: the thread stops with them instead of
/// polling on.
/// The source partitions task `id` needs and does not have: partition
/// `id.partition` of each topic its sub-topology reads (`topics`: topic and
/// reading sub-topology) that has that many partitions (`counts`; topics of
/// unknown count are not waited for).
fn missing_partitions(
    id: TaskId,
    topics: &[(String, u32)],
    counts: &HashMap<String, i32>,
    has: impl Fn(&str, i32) -> bool,
) -> Vec<(String, i32)> {
    topics
        .iter()
        .filter(|(t, s)| {
            *s == id.subtopology
                && counts.get(t).is_some_and(|n| id.partition < *n)
                && !has(t, id.partition)
        })
        .map(|(t, _)| (t.clone(), id.partition))
        .collect()
}

/// Stops exposing a partition's lag and consumed count (it was revoked).
fn remove_partition_series(registry: &MetricsRegistry, topic: &str, partition: i32) {
    let partition = partition.to_string();
    for def in [
        &kstreams_metrics::names::CONSUMER_RECORDS_LAG,
        &kstreams_metrics::names::CONSUMER_RECORDS_CONSUMED_TOTAL,
    ] {
        registry.remove(def, &[topic, &partition]);
    }
}

fn is_fatal_consumer_error(error: &KafkaError) -> bool {
    matches!(
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
fn is_rebalance_error(error: &KafkaError) -> bool {
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

fn is_abortable(error: &KafkaError) -> bool {
    match error {
        KafkaError::Transaction(e) => e.txn_requires_abort(),
        _ => false,
    }
}

fn consumed(message: &BorrowedMessage<'_>) -> ConsumedRecord {
    let mut headers = Headers::new();
    if let Some(h) = message.headers() {
        for header in h.iter() {
            headers.add(header.key, header.value.map(<[u8]>::to_vec));
        }
    }
    ConsumedRecord {
        topic: message.topic().to_string(),
        partition: message.partition(),
        offset: message.offset(),
        timestamp: message.timestamp().to_millis().unwrap_or(-1),
        key: message.key().map(<[u8]>::to_vec),
        value: message.payload().map(<[u8]>::to_vec),
        headers,
    }
}

fn owned_headers(headers: &Headers) -> OwnedHeaders {
    headers.iter().fold(
        OwnedHeaders::new_with_capacity(headers.len()),
        |acc, Header { key, value }| {
            acc.insert(rdkafka::message::Header {
                key,
                value: value.as_deref(),
            })
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_misses_the_co_partitioned_partitions_it_was_not_given() {
        let topics = vec![
            ("orders".to_string(), 0),
            ("customers".to_string(), 0),
            ("wide".to_string(), 0),
            ("other".to_string(), 1),
        ];
        let counts: HashMap<String, i32> =
            [("orders", 4), ("customers", 4), ("wide", 8), ("other", 4)]
                .into_iter()
                .map(|(t, n)| (t.to_string(), n))
                .collect();
        let task = |partition| TaskId {
            subtopology: 0,
            partition,
        };
        // KIP-848 moved orders-1 here, customers-1 not yet.
        let has = |t: &str, p: i32| p == 1 && (t == "orders" || t == "wide");
        assert_eq!(
            missing_partitions(task(1), &topics, &counts, has),
            vec![("customers".to_string(), 1)]
        );
        // Partition 6 exists only in "wide": nothing else to wait for.
        let has_wide = |t: &str, p: i32| t == "wide" && p == 6;
        assert!(missing_partitions(task(6), &topics, &counts, has_wide).is_empty());
        // A topic of unknown partition count is not waited for.
        let mut unknown = counts.clone();
        unknown.remove("customers");
        assert!(missing_partitions(task(1), &topics, &unknown, has).is_empty());
    }
}
