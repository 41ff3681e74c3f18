//! A stream thread (Kafka Streams' `StreamThread`): one consumer, one
//! producer, and the loop that drives the thread's parts.
//!
//! Each pass of the loop ([`ThreadLoop::run_once`]):
//! 1. polls the consumer, buffering records in their tasks' partition
//!    groups (the rebalance listener records assignment changes meanwhile);
//! 2. applies those changes through the task manager: revoked tasks are
//!    committed and closed, assigned ones created and restored by the
//!    changelog reader;
//! 3. processes what the partition groups allow and sends the outputs
//!    through the record collector;
//! 4. runs wall-clock punctuators;
//! 5. commits when the interval is up or a task asked for it.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kstreams_dsl::Topology;
use kstreams_metrics::ThreadSensors;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, Producer};
use rdkafka::Offset;

use super::clients;
use super::config::{GroupProtocol, ProcessingGuarantee, StreamsConfig};
use super::consumer_position::{
    consumed, is_fatal_consumer_error, is_lagging, is_rebalance_error, PartitionMetrics,
};
use super::ffi::{FetchedMessage, MessageView, QueuedConsumer};
use super::instance::Instance;
use super::local_metadata::ThreadMetadata;
use super::queries::{QueryInbox, QUERY_POLL};
use super::rebalance_listener::{
    partition_list, partitions, AssignmentEvent, Partition, RebalanceEvents, RebalanceListener,
};
use super::record_collector::{DeliveryContext, RecordCollector};
use super::repartition_purge::RepartitionPurge;
use super::streams_group::{GroupMembership, MemberChange};
use super::task_manager::TaskManager;
use super::topics::SourceTopicIndex;
use super::uncommitted_start::UncommittedStart;
use super::RuntimeError;
use crate::clock::now_ms;
use crate::topic_names::TopicNames;

/// The longest an idle thread waits on its fetch queue before it looks at
/// the consumer's queue again (a rebalance waits at most this long).
const FETCH_WAIT_STEP: Duration = Duration::from_millis(10);

/// How long after an assignment its partitions are forwarded to the fetch
/// queue again on every poll. librdkafka stops the fetch of a revoked
/// partition asynchronously, and the stop clears the partition's
/// forwarding: a stop that lands after the forwarding of the partition
/// assigned again would leave its records in its own queue. Forwarding
/// again moves them over, in order; stops land within milliseconds.
const FORWARD_AGAIN_FOR: Duration = Duration::from_secs(2);

/// How often the assigned partitions are forwarded to the fetch queue
/// again outside that window: a last resort, should a stop land later
/// still (a few calls per partition).
const FORWARD_EVERY: Duration = Duration::from_secs(1);

/// At most this many events are served from the consumer's own queue per
/// poll (logs and statistics arrive there too).
const EVENTS_PER_POLL: usize = 100;

/// How often the partitions' lag gauges are set (from cached values, so
/// cheap; often enough for a scrape every few seconds).
const LAG_RECORDING_INTERVAL: Duration = Duration::from_secs(1);

/// How long the consumer may take to answer for committed offsets and
/// watermarks.
const CONSUMER_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a thread waits before it tries again to write to a sink topic
/// that did not exist.
const MISSING_SINK_RETRY_BACKOFF: Duration = Duration::from_secs(1);

/// How long a task processes before its outputs go to the producer. Kafka
/// Streams' sinks send each record as it is written; ours are gathered per
/// task, and without a bound a slow processor held every output of a polled
/// batch (up to `buffered.records.per.partition` records) until its end.
/// The producer's own `linger.ms` (5) batches them again.
const OUTPUT_SLICE: Duration = Duration::from_millis(5);

/// How often a stream thread of a streams group recomputes its task offset
/// sums (reading the checkpoints on disk); the broker takes them at its
/// `streams.task.offset.interval.ms` (a minute by default, 15 s at least).
const TASK_OFFSETS_EVERY: Duration = Duration::from_secs(10);

/// How long a poll blocks while async calls are out and none has finished:
/// a finished call waits at most this long to be applied.
const ASYNC_POLL: Duration = Duration::from_millis(1);

/// A stream thread's clients, made before its OS thread starts so that a
/// bad client setting fails `start()`.
pub(crate) struct StreamThread {
    name: String,
    config: StreamsConfig,
    instance: Instance,
    topology: Arc<Topology>,
    sources: Arc<SourceTopicIndex>,
    consumer: MainConsumer,
    producer: Arc<BaseProducer<DeliveryContext>>,
    rebalance: Arc<RebalanceEvents>,
    /// Under `group.protocol=streams`: the thread's streams group member,
    /// which assigns the consumer its partitions (it subscribes to nothing).
    membership: Option<GroupMembership>,
}

impl StreamThread {
    /// Makes thread `index` (0-based) of instance `process_id`: its
    /// consumer subscribed to the topology's sources, and its producer
    /// (with its transactions initialized under exactly-once).
    pub fn new(
        index: usize,
        process_id: &str,
        config: StreamsConfig,
        instance: Instance,
        topology: Arc<Topology>,
        sources: Arc<SourceTopicIndex>,
    ) -> Result<Self, RuntimeError> {
        let name = format!(
            "{}-{process_id}-StreamThread-{}",
            config.application_id,
            index + 1
        );
        let eos = config.processing_guarantee == ProcessingGuarantee::ExactlyOnceV2;
        let rebalance = Arc::new(RebalanceEvents::default());
        let consumer: BaseConsumer<RebalanceListener> = clients::main_consumer(
            &config, &name, index,
        )
        .create_with_context(RebalanceListener::new(
            rebalance.clone(),
            UncommittedStart::of_main_consumer(&config),
        ))?;
        let consumer = MainConsumer::new(consumer);
        consumer
            .context()
            .install_fetch_queue(consumer.fetch_queue().clone());
        let continue_on_failure = !eos && config.production == crate::ProductionHandling::Continue;
        let producer: Arc<BaseProducer<DeliveryContext>> = Arc::new(
            clients::producer(&config, &name, process_id, index)
                .create_with_context(DeliveryContext::new(continue_on_failure))?,
        );
        if eos {
            producer.init_transactions(Duration::from_secs(60))?;
        }
        let membership = if config.group_protocol() == GroupProtocol::Streams {
            let group_topology = super::topics::streams_group_topology(&topology, &config)?;
            Some(GroupMembership::join(
                &config,
                instance.endpoints.clone(),
                &name,
                index,
                process_id,
                group_topology,
            )?)
        } else {
            let mut subscription: Vec<String> = sources.topics().map(str::to_string).collect();
            subscription.extend(sources.patterns());
            let subscription: Vec<&str> = subscription.iter().map(String::as_str).collect();
            consumer.subscribe(&subscription)?;
            None
        };
        Ok(Self {
            membership,
            name,
            config,
            instance,
            topology,
            sources,
            consumer,
            producer,
            rebalance,
        })
    }

    /// The thread's name, as Kafka Streams names it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs until `stop` is set or an error ends the thread. `on_assignment`
    /// is told each time the thread gains or loses partitions.
    pub fn run(self, stop: &AtomicBool, on_assignment: &dyn Fn(bool)) -> Result<(), RuntimeError> {
        let sensors = self.config.metrics.thread_sensors(&self.name)?;
        let tasks = TaskManager::new(
            &self.name,
            &self.config,
            &self.instance,
            self.topology.clone(),
            self.sources,
            &sensors,
        )?;
        ThreadLoop {
            topic_names: TopicNames::default(),
            fetched: Vec::new(),
            forward_again_until: Instant::now(),
            next_forward: Instant::now(),
            queries: self.instance.store_queries.register(&self.name),
            purge: RepartitionPurge::new(&self.topology, &self.config),
            collector: RecordCollector::new(self.producer, self.config.processing_guarantee),
            tasks,
            sensors,
            partition_metrics: PartitionMetrics::default(),
            lag_recorded: Instant::now(),
            lags: HashMap::new(),
            missing_sink_reported: HashSet::new(),
            paused: HashSet::new(),
            last_commit: Instant::now(),
            offsets_reported: Instant::now(),
            rewound: false,
            name: self.name,
            config: self.config,
            instance: self.instance,
            consumer: Rc::new(self.consumer),
            rebalance: self.rebalance,
            membership: self.membership,
        }
        .run(stop, on_assignment)
    }
}

/// The topic of a consumed message (read on rare paths only).
fn topic_of(message: MessageView<'_>) -> String {
    message.topic_name().to_string_lossy().into_owned()
}

/// A stream thread's main consumer, with its fetch queue (shared with the
/// rebalance listener, the consumer's context, which forwards assigned
/// partitions to it); the queue is destroyed before the consumer's client,
/// as librdkafka requires of an application's queues.
type MainConsumer = QueuedConsumer<RebalanceListener>;

/// A running stream thread. Tasks hold single-threaded node graphs, so
/// this lives on the thread that made it.
struct ThreadLoop {
    name: String,
    config: StreamsConfig,
    instance: Instance,
    /// Shared only with the poll: a polled record borrows the consumer,
    /// and that borrow must not be one of `self` (the record is buffered
    /// by `&mut self` methods).
    consumer: Rc<MainConsumer>,
    rebalance: Arc<RebalanceEvents>,
    membership: Option<GroupMembership>,
    collector: RecordCollector,
    tasks: TaskManager,
    purge: RepartitionPurge,
    /// Partitions paused for backpressure.
    paused: HashSet<Partition>,
    last_commit: Instant,
    /// When the task offsets were last handed to the streams group member.
    offsets_reported: Instant,
    /// Set when the last commit ended in an abort and rewind.
    rewound: bool,
    sensors: ThreadSensors,
    partition_metrics: PartitionMetrics,
    /// When the partitions' lag gauges were last set.
    lag_recorded: Instant,
    /// The lags last set, for the thread's published metadata.
    lags: HashMap<Partition, i64>,
    /// Missing sink topics already logged as errors: retries log quietly.
    missing_sink_reported: HashSet<String>,
    /// Interactive queries for this thread's stores.
    queries: Arc<QueryInbox>,
    /// The consumed topics' shared names.
    topic_names: TopicNames,
    /// The last batch read from the fetch queue (its buffer, kept).
    fetched: Vec<FetchedMessage>,
    /// Until when the assigned partitions are forwarded to the fetch queue
    /// again on every poll (see [`FORWARD_AGAIN_FOR`]).
    forward_again_until: Instant,
    /// When they are forwarded again next otherwise ([`FORWARD_EVERY`]).
    next_forward: Instant,
}

impl Drop for ThreadLoop {
    /// However the loop ended (a panic included), revocations from now on
    /// are acknowledged in the callback, and one left pending is
    /// acknowledged here: the consumer, dropped next, closes only then.
    fn drop(&mut self) {
        self.rebalance.set_deferring(false);
        self.rebalance.acknowledge_pending(&**self.consumer);
        // Fetched records go before their queue (closed by the consumer,
        // dropped next).
        self.fetched.clear();
    }
}

impl ThreadLoop {
    fn run(mut self, stop: &AtomicBool, on_assignment: &dyn Fn(bool)) -> Result<(), RuntimeError> {
        self.rebalance.set_deferring(true);
        let mut result = Ok(());
        while result.is_ok() && !stop.load(Ordering::Acquire) {
            result = match self.run_once(on_assignment) {
                Err(RuntimeError::MissingSinkTopic { topic }) => {
                    self.retry_without_sink_topic(&topic, stop)
                }
                other => other,
            };
        }
        let finish = match &result {
            // A clean close checkpoints under exactly-once too; async calls
            // in flight finish first (up to the drain timeout).
            Ok(()) => self
                .commit_draining(true)
                .and_then(|()| self.write_checkpoints()),
            Err(_) => {
                self.collector.abort_if_in_transaction();
                // Offsets of records whose outputs may not have gone out
                // are never committed.
                self.tasks.forget_processed();
                Ok(())
            }
        };
        self.instance.store_queries.unregister(&self.name);
        self.tasks.close_all();
        self.instance.local_metadata.remove(&self.name);
        self.instance
            .local_metadata
            .record_skew(&self.config.metrics);
        self.partition_metrics.remove_all(&self.config.metrics);
        self.config
            .metrics
            .remove_matching(kstreams_metrics::names::THREAD_ID, &self.name);
        // From here on revocations (closing the consumer revokes all) are
        // acknowledged inside the callback: the tasks are closed already.
        self.rebalance.set_deferring(false);
        self.rebalance.acknowledge_pending(&**self.consumer);
        match &mut self.membership {
            // After the last commit, which went out as the member.
            Some(membership) => {
                membership.close();
                if let Err(e) = self.consumer.unassign() {
                    log::debug!("{}: unassign: {e}", self.name);
                }
            }
            None => self.consumer.unsubscribe(),
        }
        result.and(finish)
    }

    /// One pass: poll, apply the assignment, process, punctuate, maybe
    /// commit.
    fn run_once(&mut self, on_assignment: &dyn Fn(bool)) -> Result<(), RuntimeError> {
        // With async calls out, the poll must not block for long: their
        // completions are applied by this loop, not by the consumer.
        let poll = if self.tasks.async_in_flight() == 0 {
            self.config.poll
        } else if self.tasks.async_completion_ready() {
            Duration::ZERO
        } else {
            self.config.poll.min(ASYNC_POLL)
        };
        self.poll_records(poll)?;
        if let Some(assigned) = self.apply_assignment_events()? {
            self.publish_metadata();
            on_assignment(assigned);
        }
        // After the poll: a revocation inside it may have committed the
        // transaction, and outputs below need an open one.
        self.collector.begin_transaction_if_needed()?;
        self.serve_queries();
        let committable = self.process()?;
        self.tasks.update_standbys()?;
        let punctuated = self.tasks.punctuate(now_ms())?;
        self.collector.send_all(punctuated)?;
        self.collector.poll();
        self.collector.check_deliveries()?;
        self.resume_drained_partitions()?;
        if self.lag_recorded.elapsed() >= LAG_RECORDING_INTERVAL {
            let tasks = &self.tasks;
            self.lags = self
                .partition_metrics
                .record_lag(&self.consumer, |t, p| tasks.start_offset(t, p));
            self.lag_recorded = Instant::now();
            self.publish_metadata();
        }
        let requested = self.tasks.commit_requested();
        let interval = self.config.effective_commit_interval();
        if committable && (requested || self.last_commit.elapsed() >= interval) {
            self.commit()?;
        }
        Ok(())
    }

    /// Polls once with `timeout`, then drains what is already fetched,
    /// buffering records in their tasks' partition groups.
    fn poll_records(&mut self, timeout: Duration) -> Result<(), RuntimeError> {
        if let Some(membership) = &self.membership {
            membership.record_poll();
        }
        let span = tracing::debug_span!(
            "kstreams.poll",
            thread = self.name.as_str(),
            records = tracing::field::Empty
        )
        .entered();
        let started = Instant::now();
        let mut polled = 0;
        let result = self.poll_into_tasks(timeout, &mut polled);
        span.record("records", polled);
        self.sensors.poll_latency.observe_since(started);
        self.sensors.poll_records.add(polled);
        result
    }

    fn poll_into_tasks(&mut self, timeout: Duration, polled: &mut u64) -> Result<(), RuntimeError> {
        let bound = self.config.buffered_records_per_partition;
        let now = Instant::now();
        let deadline = now + timeout;
        if now < self.forward_again_until || now >= self.next_forward {
            self.next_forward = now + FORWARD_EVERY;
            if let Ok(assignment) = self.consumer.assignment() {
                self.forward_to_fetch_queue(&partitions(&assignment));
            }
        }
        // One batch of at most the per-partition bound: then every buffer is
        // worked down before the next poll, so a partition only goes over
        // the bound (and is paused) while its task waits on another
        // partition. Pausing is costly in librdkafka: it drops the
        // partition's prefetched records, which are fetched again on resume.
        // A polled record borrows the consumer: this handle of it, not
        // `self`, which buffers the record.
        let consumer = Rc::clone(&self.consumer);
        loop {
            // The consumer's own queue first: the group's events (a
            // rebalance is served here, by its callback) and the records of
            // partitions not forwarded to the fetch queue.
            let mut events = 0;
            while (*polled as usize) < bound {
                if self.rebalance.revocation_pending() {
                    // Revoked tasks are committed before anything else.
                    return Ok(());
                }
                let Some(result) = consumer.poll(Duration::ZERO) else {
                    // An event was served (or the queue is empty): the
                    // poll says which only by timing, the queue by length.
                    events += 1;
                    if events < EVENTS_PER_POLL
                        && !self.rebalance.has_events()
                        && self.consumer.consumer_events_waiting()
                    {
                        continue;
                    }
                    break;
                };
                let Some(message) = self.accept(result)? else {
                    continue;
                };
                *polled += 1;
                self.buffer_consumed(MessageView::of_polled(&message), bound)?;
            }
            if self.rebalance.revocation_pending() || self.rebalance.has_events() {
                return Ok(());
            }
            let left = bound.saturating_sub(*polled as usize);
            let queries = self
                .instance
                .store_queries
                .in_use()
                .then(|| self.queries.clone());
            // Waits in steps: the consumer's queue (a rebalance) is looked
            // at between them, as are posted queries.
            let step = if *polled > 0 {
                Duration::ZERO
            } else {
                let step = deadline
                    .saturating_duration_since(Instant::now())
                    .min(FETCH_WAIT_STEP);
                if queries.is_some() {
                    step.min(QUERY_POLL)
                } else {
                    step
                }
            };
            let mut fetched = std::mem::take(&mut self.fetched);
            self.consumer.read_fetched(step, left, &mut fetched);
            let mut result = Ok(());
            // Partitions whose last message in the batch was an error at an
            // offset: librdkafka moved their position past it anyway.
            let mut ended_in_error: Vec<(String, i32, i64)> = Vec::new();
            for message in fetched.drain(..) {
                if result.is_err() {
                    // Dropped unprocessed: fetched again after a rewind.
                    continue;
                }
                let view = message.view();
                if !ended_in_error.is_empty() {
                    let topic = topic_of(view);
                    ended_in_error.retain(|(t, p, _)| !(*p == view.partition() && *t == topic));
                }
                match self.accept_fetched(&message) {
                    Ok(true) => {
                        *polled += 1;
                        result = self.buffer_consumed(view, bound);
                    }
                    Ok(false) if view.offset() >= 0 => {
                        ended_in_error.push((topic_of(view), view.partition(), view.offset()));
                    }
                    Ok(false) => {}
                    Err(e) => result = Err(e),
                }
            }
            self.fetched = fetched;
            result?;
            for (topic, partition, offset) in ended_in_error {
                // Back to the record not yet fetched, as the consumer's
                // poll left the position (a commit or a resume reads it).
                if let Err(e) =
                    self.consumer
                        .seek(&topic, partition, Offset::Offset(offset), Duration::ZERO)
                {
                    log::warn!(
                        "{}: seek of {topic}-{partition} to {offset}: {e}",
                        self.name
                    );
                }
            }
            if *polled > 0 || Instant::now() >= deadline || queries.is_some_and(|q| q.has_reads()) {
                return Ok(());
            }
        }
    }

    /// What the consumer's poll returned: the message, none for an error
    /// the thread carries on after (logged), or the thread's end.
    fn accept<'c>(
        &self,
        result: rdkafka::error::KafkaResult<rdkafka::message::BorrowedMessage<'c>>,
    ) -> Result<Option<rdkafka::message::BorrowedMessage<'c>>, RuntimeError> {
        match result {
            Ok(m) => Ok(Some(m)),
            Err(e) => self.consumer_error(e).map(|()| None),
        }
    }

    /// Whether a message from the fetch queue is a record (else it was a
    /// consumer error the thread carries on after), or the thread's end.
    fn accept_fetched(&self, message: &FetchedMessage) -> Result<bool, RuntimeError> {
        match message.error() {
            None => Ok(true),
            Some(e) => self.consumer_error(e).map(|()| false),
        }
    }

    /// A consumer error: the thread's end when no retry fixes it, else
    /// logged.
    fn consumer_error(&self, e: KafkaError) -> Result<(), RuntimeError> {
        // The thread's failure is logged once, where it ends.
        if is_fatal_consumer_error(&e) {
            if e.rdkafka_error_code() == Some(RDKafkaErrorCode::FencedInstanceId) {
                // librdkafka's message names no cause; the two seen in
                // practice have different fixes.
                log::error!(
                    "{}: this static member (group.instance.id) was fenced: another instance \
                     runs with the same consumer.group.instance.id, or the member's session \
                     ran out while the group coordinator was unreachable (then raise \
                     consumer.session.timeout.ms above the longest broker outage to ride it \
                     out)",
                    self.name
                );
            }
            return Err(e.into());
        }
        if let KafkaError::MessageConsumption(RDKafkaErrorCode::AutoOffsetReset) = e {
            return Err(RuntimeError::NoCommittedOffset {
                partitions: self.partitions_without_committed_offset(),
            });
        }
        log::warn!("{}: consumer error: {e}", self.name);
        Ok(())
    }

    /// Copies a consumed record into its task's buffer, pausing its
    /// partition when the buffer is over `bound`.
    fn buffer_consumed(
        &mut self,
        message: MessageView<'_>,
        bound: usize,
    ) -> Result<(), RuntimeError> {
        let record = consumed(
            message,
            &mut self.topic_names,
            self.collector.spare_buffers(),
        );
        self.partition_metrics
            .consumed(&record.topic, record.partition);
        let partition = record.partition;
        if self.tasks.buffer(record)?.is_some_and(|n| n > bound) {
            // The record has moved into its task; the message still names
            // its topic (read only on this rare path).
            let tp = (topic_of(message), partition);
            if self.paused.insert(tp.clone()) {
                log::trace!(
                    "{}: pausing {}-{} at {bound} buffered records",
                    self.name,
                    tp.0,
                    tp.1
                );
                // Backpressure: stop fetching this partition until the
                // task has worked its buffer down.
                self.consumer.pause(&partition_list(&[tp]))?;
            }
        }
        Ok(())
    }

    /// Forwards `partitions`' fetch queues to the thread's.
    fn forward_to_fetch_queue(&self, partitions: &[Partition]) {
        if let Some(queue) = self.consumer.context().fetch_queue() {
            queue.forward(
                &self.consumer,
                partitions.iter().map(|(t, p)| (t.as_str(), *p)),
            );
        }
    }

    /// Answers the interactive queries posted since the last pass, on this
    /// thread's stores.
    fn serve_queries(&self) {
        if self.queries.has_reads() {
            super::queries::serve(&self.name, &self.queries, &self.tasks.local_stores());
        }
    }

    /// The assigned partitions the group has no committed offset for, to
    /// name them when `auto.offset.reset=none` fails the thread (librdkafka's
    /// error does not say which partition it was).
    fn partitions_without_committed_offset(&self) -> Vec<Partition> {
        let Ok(assignment) = self.consumer.assignment() else {
            return Vec::new();
        };
        match self
            .consumer
            .committed_offsets(assignment, CONSUMER_TIMEOUT)
        {
            Ok(committed) => committed
                .elements()
                .iter()
                .filter(|e| !matches!(e.offset(), Offset::Offset(_)))
                .map(|e| (e.topic().to_string(), e.partition()))
                .collect(),
            Err(e) => {
                log::debug!("{}: committed offsets unknown: {e}", self.name);
                Vec::new()
            }
        }
    }

    /// Kafka Streams' answer to a sink topic that does not exist: its
    /// default production handler says RETRY (the producer's timeout is
    /// retriable, KIP-1065) and the task is revived from its last commit.
    /// Here too: what was sent since the last commit is aborted under
    /// exactly-once (at-least-once may write it again), the thread goes
    /// back to its committed offsets and tries again after a pause, for as
    /// long as the topic is missing.
    fn retry_without_sink_topic(
        &mut self,
        topic: &str,
        stop: &AtomicBool,
    ) -> Result<(), RuntimeError> {
        let missing = RuntimeError::MissingSinkTopic {
            topic: topic.to_string(),
        };
        if self.missing_sink_reported.insert(topic.to_string()) {
            log::error!("{}: {missing}", self.name);
        } else {
            log::debug!("{}: {missing}", self.name);
        }
        self.abort_and_rewind()?;
        let resume = Instant::now() + MISSING_SINK_RETRY_BACKOFF;
        while Instant::now() < resume && !stop.load(Ordering::Acquire) {
            // Polling keeps the thread in its group (max.poll.interval.ms);
            // what it fetches is read again after the next rewind.
            self.poll_records(Duration::from_millis(100))?;
            self.apply_assignment_events()?;
        }
        self.abort_and_rewind()
    }

    /// Resumes the paused partitions whose buffers are down to half the
    /// bound. Not as soon as they are under it: a task that takes records
    /// slowly (at its async bound, or waiting on another partition) keeps
    /// its buffer near the bound, and resuming at bound - 1 paused it again
    /// a few records later. Each pause makes librdkafka drop what it had
    /// prefetched for the partition, so every such cycle cost a fetch of up
    /// to `max.partition.fetch.bytes` for a handful of records.
    fn resume_drained_partitions(&mut self) -> Result<(), RuntimeError> {
        let low_water = self.config.buffered_records_per_partition / 2;
        let resumable: Vec<Partition> = self
            .paused
            .iter()
            .filter(|(t, p)| self.tasks.buffered(t, *p) <= low_water)
            .cloned()
            .collect();
        if resumable.is_empty() {
            return Ok(());
        }
        for tp in &resumable {
            self.paused.remove(tp);
        }
        self.consumer.resume(&partition_list(&resumable))?;
        Ok(())
    }

    /// Applies what the rebalance listener saw. Returns `Some(true)` after
    /// an assignment, `Some(false)` after a revocation.
    fn apply_assignment_events(&mut self) -> Result<Option<bool>, RuntimeError> {
        let mut outcome = None;
        for event in self.rebalance.take() {
            let (kind, partitions) = match &event {
                AssignmentEvent::Revoked(p) => ("revoked", p.len()),
                AssignmentEvent::Assigned(p) => ("assigned", p.len()),
            };
            let _span = tracing::debug_span!(
                "kstreams.rebalance",
                thread = self.name.as_str(),
                kind,
                partitions
            )
            .entered();
            match event {
                AssignmentEvent::Revoked(revoked) => {
                    self.revoke(&revoked)?;
                    outcome = Some(false);
                }
                AssignmentEvent::Assigned(assigned) => {
                    // Creating the tasks restores their stores: the thread
                    // processes nothing until that is done. (The callback
                    // forwarded the partitions' fetch queues before taking
                    // them; `assign` forwards them again for a while after.)
                    let board = self.instance.local_metadata.clone();
                    board.set_restoring(&self.name, true);
                    let assigned = self.assign(&assigned);
                    board.set_restoring(&self.name, false);
                    assigned?;
                    outcome = Some(true);
                }
            }
        }
        if let Some(membership) = self.membership.as_mut() {
            for change in membership.take_changes()? {
                match change {
                    MemberChange::Revoke { partitions, lost } => {
                        self.revoke_partitions(&partitions, lost)?;
                        let list = partition_list(&partitions);
                        self.consumer.incremental_unassign(&list)?;
                        outcome = Some(false);
                    }
                    MemberChange::Assign(partitions) => {
                        // Forwarded before librdkafka fetches them.
                        self.forward_to_fetch_queue(&partitions);
                        // Each starts at its committed offset, or by
                        // auto.offset.reset where there is none.
                        let mut list = partition_list(&partitions);
                        self.consumer
                            .context()
                            .place_uncommitted(&self.consumer, &mut list);
                        self.consumer.incremental_assign(&list)?;
                        let board = self.instance.local_metadata.clone();
                        board.set_restoring(&self.name, true);
                        let assigned = self.assign(&partitions);
                        board.set_restoring(&self.name, false);
                        assigned?;
                    }
                    MemberChange::RemoveStandbys { tasks, promoted } => {
                        self.tasks.remove_standbys(&tasks, promoted)?;
                    }
                    MemberChange::AddStandbys(tasks) => {
                        // Caught up with their changelogs first, as tasks
                        // are created: the thread processes nothing meanwhile.
                        let board = self.instance.local_metadata.clone();
                        board.set_restoring(&self.name, true);
                        let added = self.tasks.add_standbys(&tasks);
                        board.set_restoring(&self.name, false);
                        added?;
                    }
                    MemberChange::Report(owned) => {
                        if let Some(membership) = &self.membership {
                            membership.report_owned(owned)?;
                        }
                        // The thread has its tasks, even if none.
                        outcome = Some(true);
                    }
                }
            }
        }
        if outcome.is_some() {
            self.update_missing_partitions();
        }
        Ok(outcome)
    }

    /// Tells readers of `KafkaStreams::metadata` what this thread runs now.
    fn publish_metadata(&self) {
        self.instance.local_metadata.publish(ThreadMetadata {
            thread_name: self.name.clone(),
            restoring: false,
            active_tasks: self.tasks.metadata(&self.lags),
        });
        self.instance
            .local_metadata
            .record_skew(&self.config.metrics);
    }

    /// Kafka Streams' `onPartitionsRevoked`: every task is committed first,
    /// then the revoked ones close, then the revocation is acknowledged.
    fn revoke(&mut self, revoked: &[Partition]) -> Result<(), RuntimeError> {
        let lost = self.consumer.assignment_lost();
        self.revoke_partitions(revoked, lost)
    }

    /// [`revoke`](Self::revoke) of partitions whose tasks are `lost` (the
    /// thread was dropped from the group) or given up.
    fn revoke_partitions(&mut self, revoked: &[Partition], lost: bool) -> Result<(), RuntimeError> {
        let clean = self.commit_before_revocation(lost)?;
        for (topic, partition) in revoked {
            self.partition_metrics
                .remove(&self.config.metrics, topic, *partition);
            self.paused.remove(&(topic.clone(), *partition));
        }
        let delivered = self.collector.delivered_changelog_offsets();
        self.tasks.revoke(revoked, clean, &delivered)?;
        self.rebalance.acknowledge_pending(&**self.consumer);
        Ok(())
    }

    fn assign(&mut self, assigned: &[Partition]) -> Result<(), RuntimeError> {
        let result = self.assign_tasks(assigned);
        // From the end of it: creating tasks (restoring their stores) may
        // take longer than the window.
        self.forward_again_until = Instant::now() + FORWARD_AGAIN_FOR;
        result
    }

    fn assign_tasks(&mut self, assigned: &[Partition]) -> Result<(), RuntimeError> {
        // librdkafka keeps an application pause across a revocation: a
        // partition paused before and assigned again would never be fetched.
        let list = partition_list(assigned);
        if let Err(e) = self.consumer.resume(&list) {
            log::debug!("{}: resume of assigned partitions: {e}", self.name);
        }
        let committed = self
            .consumer
            .committed_offsets(list, Duration::from_secs(10))
            // Partitions then start without their committed partition time
            // and operators' metadata (an emit-final window may be emitted
            // again).
            .map_err(|e| {
                log::warn!(
                    "{}: committed offsets and their metadata unknown: {e}",
                    self.name
                )
            })
            .ok();
        for (topic, partition) in assigned {
            self.partition_metrics
                .add(&self.config.metrics, topic, *partition);
        }
        let (consumer, name) = (&self.consumer, &self.name);
        self.tasks
            .assign(assigned, committed.as_ref(), |topic, partition| {
                bootstrap_end(consumer, topic, partition).unwrap_or_else(|e| {
                    log::warn!(
                        "{name}: no bootstrap of {topic}-{partition}: its end offset is unknown \
                         ({e}); processing without waiting for it"
                    );
                    None
                })
            })
    }

    fn update_missing_partitions(&mut self) {
        let mut counts = HashMap::new();
        for (topic, _) in self.tasks.source_topics() {
            if let Ok(n) = self.collector.partition_count(&topic) {
                counts.insert(topic, n);
            }
        }
        self.tasks.update_missing_partitions(&counts);
    }

    /// Before partitions go, every task is flushed and committed (its
    /// outputs and changelog records acknowledged, then the offsets), so the
    /// next owner starts exactly where this thread stopped and no store
    /// update is applied twice. A lost assignment (the member was dropped
    /// from the group) cannot commit: under exactly-once the transaction is
    /// aborted and the thread rewinds; under at-least-once the next owner
    /// reprocesses from the last commit.
    /// Returns whether the commit went through, so that the revoked tasks'
    /// stores match their committed changelogs (and may be checkpointed).
    fn commit_before_revocation(&mut self, lost: bool) -> Result<bool, RuntimeError> {
        if lost {
            log::warn!(
                "{}: partitions lost (dropped from the group); records since the last commit \
                 will be processed again",
                self.name
            );
            if self.config.processing_guarantee == ProcessingGuarantee::ExactlyOnceV2 {
                // The transaction is aborted before anything can fail. The
                // rewind then asks the group coordinator for the committed
                // offsets, and a member is mostly dropped when a broker
                // went away, so the coordinator may be moving: its
                // NotCoordinator failed the whole thread (chaos
                // leader-failover). The tasks of lost partitions are closed
                // dirty next, and a partition assigned again starts from its
                // committed offset, so a client error here is not fatal.
                match self.abort_and_rewind() {
                    Err(RuntimeError::Kafka(e)) => log::warn!(
                        "{}: rewind after the lost partitions incomplete ({e}); their tasks \
                         are closed dirty and restart from the committed offsets",
                        self.name
                    ),
                    other => other?,
                }
            }
            return Ok(false);
        }
        self.rewound = false;
        self.commit_draining(true)?;
        Ok(!self.rewound && !self.collector.in_transaction())
    }

    /// Processes what the partition groups allow and sends the outputs.
    /// Returns whether anything can be committed.
    fn process(&mut self) -> Result<bool, RuntimeError> {
        let _span =
            tracing::debug_span!("kstreams.process_batch", thread = self.name.as_str()).entered();
        if self.tasks.bootstrapping() {
            let positions = self.consumer.position()?;
            self.tasks.track_bootstrap(&positions);
        }
        let needs_lag = self.config.max_task_idle.needs_lag();
        loop {
            let consumer = &self.consumer;
            let lagging = |topic: &str, partition: i32, start: Option<i64>| {
                needs_lag && is_lagging(consumer, topic, partition, start)
            };
            let mut batch = self.tasks.process(&lagging, OUTPUT_SLICE)?;
            // Progress counts only once its outputs (and the stores'
            // changelog records) are with the producer: if sending fails,
            // nothing of this batch gets committed.
            self.collector.send_drain(&mut batch.outputs)?;
            self.tasks.recycle_outputs(batch.outputs);
            let committable = self.tasks.record_progress(batch.progress);
            if !batch.more {
                return Ok(committable);
            }
            // A long batch: serve the producer's delivery reports between
            // slices, as a sink's send would.
            self.collector.poll();
        }
    }

    /// Flushes stores and outputs, then commits offsets (inside the
    /// transaction under exactly-once). A commit refused because the group
    /// is rebalancing is not an error: at-least-once reprocesses from the
    /// last commit, exactly-once aborts and rewinds to it.
    fn commit(&mut self) -> Result<(), RuntimeError> {
        // Under exactly-once a transaction holds only finished records: a
        // result that went out for a record past an unfinished one would be
        // produced again after a crash, with the offsets before it.
        let eos = self.config.processing_guarantee == ProcessingGuarantee::ExactlyOnceV2;
        self.commit_draining(eos)
    }

    /// [`commit`](Self::commit), first waiting for async calls in flight
    /// when `drain` (exactly-once, a rebalance, a close). If they do not
    /// finish in `kstreams.async.drain.timeout.ms`, at-least-once commits
    /// up to the lowest unfinished record (the tasks' close then cancels
    /// the calls, and whoever runs the task next reads those records
    /// again); exactly-once aborts and rewinds.
    fn commit_draining(&mut self, drain: bool) -> Result<(), RuntimeError> {
        let _span = tracing::debug_span!("kstreams.commit", thread = self.name.as_str()).entered();
        let started = Instant::now();
        let result = if drain && !self.drain_async()? {
            log::warn!(
                "{}: {} async records still in flight after {} ms; they will be processed again",
                self.name,
                self.tasks.async_in_flight(),
                self.config.async_drain_timeout.as_millis()
            );
            if self.config.processing_guarantee == ProcessingGuarantee::ExactlyOnceV2 {
                self.abort_and_rewind()
            } else {
                self.flush_and_commit()
            }
        } else {
            self.flush_and_commit()
        };
        self.sensors.commit_latency.observe_since(started);
        result
    }

    /// Applies async calls as they finish (their outputs go to the
    /// producer) until none is in flight or the drain timeout passes;
    /// returns whether all finished. Takes no new record meanwhile.
    fn drain_async(&mut self) -> Result<bool, RuntimeError> {
        let deadline = Instant::now() + self.config.async_drain_timeout;
        loop {
            if self.tasks.async_in_flight() > 0 || self.tasks.async_completion_ready() {
                let outputs = self.tasks.apply_async_completions()?;
                self.collector.send_all(outputs)?;
            }
            if self.tasks.async_in_flight() == 0 {
                return Ok(true);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            self.collector.poll();
            self.tasks
                .wait_for_async((deadline - now).min(Duration::from_millis(100)));
        }
    }

    fn flush_and_commit(&mut self) -> Result<(), RuntimeError> {
        let flushed = self.tasks.flush()?;
        self.collector.send_all(flushed)?;
        if let Ok(positions) = self.consumer.position() {
            self.tasks.advance_to_positions(&positions);
        }
        let offsets = self.tasks.offsets_to_commit()?;
        match self.config.processing_guarantee {
            ProcessingGuarantee::AtLeastOnce => {
                // Every output of these offsets must be acknowledged.
                let flushing = Instant::now();
                self.collector.flush()?;
                log::debug!(
                    "{}: commit: producer flushed in {:.1} ms",
                    self.name,
                    flushing.elapsed().as_secs_f64() * 1e3
                );
                if let (Some(membership), true) = (&self.membership, offsets.count() > 0) {
                    if membership.commit(&offsets)? {
                        self.purge.committed(&offsets);
                    }
                } else if offsets.count() > 0 {
                    match self.consumer.commit(&offsets, CommitMode::Sync) {
                        Err(e) if is_rebalance_error(&e) => {
                            log::info!("{}: commit skipped during a rebalance: {e}", self.name)
                        }
                        other => {
                            other?;
                            self.purge.committed(&offsets);
                        }
                    }
                }
                // Everything the stores logged is acknowledged: checkpoint it.
                self.write_checkpoints()?;
            }
            ProcessingGuarantee::ExactlyOnceV2
                if self.collector.in_transaction()
                    && self.membership.as_ref().is_some_and(|m| !m.owns_tasks()) =>
            {
                log::warn!(
                    "{}: out of the streams group, so its tasks may run elsewhere: aborting \
                     and rewinding instead of committing",
                    self.name
                );
                self.abort_and_rewind()?;
            }
            ProcessingGuarantee::ExactlyOnceV2 if self.collector.in_transaction() => {
                let group = self.consumer.group_metadata();
                match self.collector.commit_transaction(&offsets, group) {
                    Ok(()) => self.purge.committed(&offsets),
                    Err(RuntimeError::Kafka(e)) if is_rebalance_error(&e) || requires_abort(&e) => {
                        log::warn!(
                            "{}: transaction not committed, aborting and rewinding: {e}",
                            self.name
                        );
                        self.abort_and_rewind()?;
                    }
                    Err(e) => return Err(e),
                }
            }
            ProcessingGuarantee::ExactlyOnceV2 => {}
        }
        self.tasks.checkpoint_standbys()?;
        self.last_commit = Instant::now();
        self.purge.maybe_purge(&self.name);
        self.report_task_offsets()?;
        Ok(())
    }

    /// Under the streams protocol, at most every [`TASK_OFFSETS_EVERY`]:
    /// tells the group the offsets of the state the thread has at hand
    /// (standbys, task directories on disk), which the broker's assignor
    /// weighs when it places standbys (and warm-ups, where the broker
    /// makes them). The member sends them at the broker's own interval.
    fn report_task_offsets(&mut self) -> Result<(), RuntimeError> {
        let Some(membership) = &self.membership else {
            return Ok(());
        };
        if self.offsets_reported.elapsed() < TASK_OFFSETS_EVERY {
            return Ok(());
        }
        self.offsets_reported = Instant::now();
        membership.report_task_offsets(self.tasks.task_offset_sums()?)
    }

    fn write_checkpoints(&self) -> Result<(), RuntimeError> {
        let delivered = self.collector.delivered_changelog_offsets();
        self.tasks.write_checkpoints(&delivered)
    }

    /// Aborts the open transaction and goes back to the last committed
    /// offsets: the consumer seeks there and the task manager rebuilds the
    /// tasks.
    fn abort_and_rewind(&mut self) -> Result<(), RuntimeError> {
        self.rewound = true;
        self.collector.abort_if_in_transaction();
        self.tasks.forget_processed();
        let assignment = self.consumer.assignment()?;
        let committed = self
            .consumer
            .committed_offsets(assignment, CONSUMER_TIMEOUT)?;
        for element in committed.elements() {
            let offset = match element.offset() {
                Offset::Invalid => Offset::Beginning,
                other => other,
            };
            self.consumer.seek(
                element.topic(),
                element.partition(),
                offset,
                CONSUMER_TIMEOUT,
            )?;
        }
        self.tasks.rewind(&committed)?;
        self.update_missing_partitions();
        Ok(())
    }
}

/// The offsets a bootstrap partition is read from and up to: from the
/// committed position, to its high watermark now, unless the committed
/// position is already there.
fn bootstrap_end(
    consumer: &BaseConsumer<RebalanceListener>,
    topic: &str,
    partition: i32,
) -> Result<Option<(i64, i64)>, RuntimeError> {
    let (low, high) = consumer.fetch_watermarks(topic, partition, CONSUMER_TIMEOUT)?;
    let committed = consumer
        .committed_offsets(
            partition_list(&[(topic.to_string(), partition)]),
            CONSUMER_TIMEOUT,
        )?
        .find_partition(topic, partition)
        .and_then(|e| match e.offset() {
            Offset::Offset(o) => Some(o),
            _ => None,
        })
        .unwrap_or(0);
    // Records before the low watermark are gone (retention, purge): reading
    // starts at the later of the two.
    let start = committed.max(low);
    Ok((start < high).then_some((start, high)))
}

/// A transaction error after which only an abort lets the producer go on.
fn requires_abort(error: &KafkaError) -> bool {
    match error {
        KafkaError::Transaction(e) => e.txn_requires_abort(),
        _ => false,
    }
}
