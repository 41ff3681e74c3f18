//! A stream thread (Kafka Streams' `StreamThread`): one consumer, one
//! producer, and the loop that drives the thread's parts.
//!
//! Each pass of the loop ([`ThreadLoop::run_once`]) goes one way:
//! 1. intake ([`intake`]): polls the consumer, buffering records in their
//!    tasks' partition groups;
//! 2. assignment ([`assignment`]): applies what the group changed
//!    ([`membership`], one seam for every group protocol): revoked tasks
//!    are committed and closed, assigned ones created and handed to the
//!    state updater, their partitions held;
//! 3. process: the running tasks run what their partition groups allow,
//!    writing into the thread's outbox, which the record collector sends;
//! 4. restore: the state updater restores for a slice of the pass, and the
//!    tasks it restored start running (their partitions released);
//! 5. punctuate: wall-clock punctuators, into the outbox likewise;
//! 6. commit ([`commit`]): when the interval is up or a task asked for it.
//!
//! While the instance is paused (`KafkaStreams::pause`, read at the start
//! of each pass) steps 3 to 5 and the standbys' updates are skipped, as
//! Kafka Streams skips the tasks of a paused topology in its task executor
//! and state updater; the intake pauses every assigned partition, and the
//! thread keeps polling, serving queries and committing.
//!
//! The thread's state ([`state`]) follows Kafka Streams' `StreamThread.State`.

mod assignment;
mod commit;
mod intake;
mod membership;
mod pauses;
mod state;

pub use state::ThreadState;

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kstreams_dsl::Topology;
use kstreams_metrics::ThreadSensors;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, Producer};

use self::intake::{Intake, PollTarget};
use self::membership::Membership;
use self::state::StateMachine;
use super::application_shutdown::ANSWER_TIMEOUT;
use super::clients;
use super::config::{GroupProtocol, ProcessingGuarantee, StreamsConfig};
use super::consumer_position::is_lagging;
use super::ffi::QueuedConsumer;
use super::instance::Instance;
use super::local_metadata::ThreadMetadata;
use super::offsets::positions_of;
use super::outbox::Outbox;
use super::queries::QueryInbox;
use super::rebalance_listener::{RebalanceEvents, RebalanceListener};
use super::record_collector::{DeliveryContext, RecordCollector};
use super::repartition_purge::RepartitionPurge;
use super::streams_group::GroupMembership;
use super::task_manager::TaskManager;
use super::topics::SourceTopicIndex;
use super::uncommitted_start::UncommittedStarts;
use super::RuntimeError;
use crate::clock::now_ms;
use crate::kafka::client_error::ClientResult;

/// A stream thread's main consumer, with its fetch queue (shared with the
/// rebalance listener, the consumer's context, which forwards assigned
/// partitions to it); the queue is destroyed before the consumer's client,
/// as librdkafka requires of an application's queues.
pub(crate) type MainConsumer = QueuedConsumer<RebalanceListener>;

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

/// How long a poll blocks while async calls are out and none has finished:
/// a finished call waits at most this long to be applied.
const ASYNC_POLL: Duration = Duration::from_millis(1);

/// How long the state updater restores per pass while running tasks have
/// records waiting: their latency grows by at most this much while others
/// restore. With nothing else to do it restores for the poll time.
const RESTORE_SLICE: Duration = Duration::from_millis(20);

/// Told of each change of a thread's state: (from, to).
pub(crate) type StateListener<'a> = &'a dyn Fn(ThreadState, ThreadState);

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
    membership: Membership,
}

impl StreamThread {
    /// Makes thread `index` (0-based) of instance `process_id`: its
    /// consumer subscribed to the topology's sources, and its producer
    /// (with its transactions initialized under exactly-once).
    pub(super) fn new(
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
        let consumer: BaseConsumer<RebalanceListener> =
            clients::main_consumer(&config, &name, index)
                .create_with_context(RebalanceListener::new(
                    rebalance.clone(),
                    UncommittedStarts::new(&config, topology.clone()),
                ))
                .client()?;
        let consumer = MainConsumer::new(consumer);
        consumer
            .context()
            .install_fetch_queue(consumer.fetch_queue().clone());
        let producer: Arc<BaseProducer<DeliveryContext>> = Arc::new(
            clients::producer(&config, &name, process_id, index)
                .create_with_context(DeliveryContext::default())
                .client()?,
        );
        if eos {
            producer
                .init_transactions(Duration::from_secs(60))
                .client()?;
        }
        let streams_member = if config.group_protocol() == GroupProtocol::Streams {
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
            consumer.subscribe(&subscription).client()?;
            None
        };
        Ok(Self {
            membership: Membership::new(rebalance, streams_member),
            name,
            config,
            instance,
            topology,
            sources,
            consumer,
            producer,
        })
    }

    /// The thread's name, as Kafka Streams names it.
    pub(super) fn name(&self) -> &str {
        &self.name
    }

    /// Runs until `stop` says so, an application shutdown stops the
    /// instance, or an error ends the thread. `on_state` is told of each
    /// change of the thread's state.
    pub(super) fn run(
        self,
        stop: &dyn Fn() -> bool,
        on_state: StateListener<'_>,
    ) -> Result<(), RuntimeError> {
        let sensors = self.config.metrics.thread_sensors(&self.name)?;
        let collector = RecordCollector::new(
            self.producer,
            self.config.processing_guarantee,
            self.config.task_config().production_handler(),
        );
        let tasks = TaskManager::new(
            &self.name,
            &self.config,
            &self.instance,
            self.topology.clone(),
            self.sources,
            &sensors,
            collector.partition_counts(),
        )?;
        let consumer = Rc::new(self.consumer);
        ThreadLoop {
            state: StateMachine::new(&self.name),
            on_state,
            intake: Intake::new(
                &self.name,
                Rc::clone(&consumer),
                self.config.buffered_records_per_partition,
            ),
            queries: self.instance.store_queries.register(&self.name),
            purge: RepartitionPurge::new(&self.topology, &self.config),
            collector,
            outbox: Outbox::default(),
            tasks,
            sensors,
            missing_sink_reported: std::collections::HashSet::new(),
            last_commit: Instant::now(),
            rewound: false,
            settled: false,
            paused: false,
            name: self.name,
            config: self.config,
            instance: self.instance,
            consumer,
            membership: self.membership,
        }
        .run(stop)
    }
}

/// A running stream thread. Tasks hold single-threaded node graphs, so
/// this lives on the thread that made it.
struct ThreadLoop<'a> {
    name: String,
    config: StreamsConfig,
    instance: Instance,
    state: StateMachine,
    on_state: StateListener<'a>,
    /// Shared with the intake, whose polled records borrow it.
    consumer: Rc<MainConsumer>,
    intake: Intake,
    membership: Membership,
    tasks: TaskManager,
    /// What the tasks wrote, on its way to the collector.
    outbox: Outbox,
    collector: RecordCollector,
    purge: RepartitionPurge,
    last_commit: Instant,
    /// Set when the last commit ended in an abort and rewind.
    rewound: bool,
    /// The group settled the thread's assignment: RUNNING once its active
    /// tasks are restored.
    settled: bool,
    /// The instance was paused as this pass began (`KafkaStreams::pause`).
    paused: bool,
    sensors: ThreadSensors,
    /// Missing sink topics already logged as errors: retries log quietly.
    missing_sink_reported: std::collections::HashSet<String>,
    /// Interactive queries for this thread's stores.
    queries: Arc<QueryInbox>,
}

impl Drop for ThreadLoop<'_> {
    /// However the loop ended (a panic included), revocations from now on
    /// are acknowledged in the callback, and one left pending is
    /// acknowledged here: the consumer, dropped after, closes only then.
    fn drop(&mut self) {
        self.membership.stop_deferring(&self.consumer);
    }
}

impl ThreadLoop<'_> {
    fn run(mut self, stop: &dyn Fn() -> bool) -> Result<(), RuntimeError> {
        self.transition(ThreadState::Starting);
        self.membership.start_deferring();
        let mut result = Ok(());
        while result.is_ok() && !stop() && !self.instance.application_shutdown.heard() {
            result = match self.run_once() {
                Err(RuntimeError::MissingSinkTopic { topic }) => {
                    self.retry_without_sink_topic(&topic, stop)
                }
                other => other,
            };
        }
        self.transition(ThreadState::PendingShutdown);
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
        self.intake.remove_metrics(&self.config.metrics);
        self.config
            .metrics
            .remove_matching(kstreams_metrics::names::THREAD_ID, &self.name);
        // From here on revocations (closing the consumer revokes all) are
        // acknowledged inside the callback: the tasks are closed already.
        let operation = self.instance.leave_operations.of(&self.name);
        self.membership.leave(&self.consumer, &self.name, operation);
        self.transition(ThreadState::Dead);
        result.and(finish)
    }

    /// Moves the thread to `to`, telling the listener.
    fn transition(&mut self, to: ThreadState) {
        if let Some(from) = self.state.transition_to(to) {
            (self.on_state)(from, to);
        }
    }

    /// One pass: intake, assignment, process, punctuate, maybe commit.
    fn run_once(&mut self) -> Result<(), RuntimeError> {
        self.follow_pause()?;
        // With async calls out, the poll must not block for long: their
        // completions are applied by this loop, not by the consumer.
        // While tasks restore the thread waits in the state updater
        // instead. Paused, it has nothing to do but poll.
        let poll = if self.paused {
            self.config.poll
        } else if self.tasks.restores_active() {
            Duration::ZERO
        } else if self.tasks.async_in_flight() == 0 {
            self.config.poll
        } else if self.tasks.async_completion_ready() {
            Duration::ZERO
        } else {
            self.config.poll.min(ASYNC_POLL)
        };
        self.poll(poll)?;
        if self.apply_group_changes()? {
            self.apply_holds()?;
            self.publish_metadata();
        }
        // After the poll: a revocation inside it may have committed the
        // transaction, and outputs below need an open one.
        self.collector.begin_transaction_if_needed()?;
        self.serve_queries();
        // Paused, what was processed before the pause is still committed.
        if !self.paused {
            self.process()?;
            self.restore()?;
            self.tasks.update_standbys()?;
            self.tasks.punctuate(now_ms(), &mut self.outbox)?;
        }
        self.send_outbox()?;
        self.collector.poll();
        let deliveries = self.collector.check_deliveries()?;
        self.count_dropped(deliveries);
        self.intake.resume_drained(&self.tasks)?;
        if self.intake.record_lag(&self.tasks) {
            self.publish_metadata();
        }
        self.follow_application_shutdown()?;
        self.maybe_commit()?;
        // Right after a commit: reads of committed writes only are served.
        self.serve_queries();
        Ok(())
    }

    /// Commits when a task asked for it, the uncommitted writes outgrew
    /// their bound or the commit interval is up, and only when something
    /// needs a commit (Kafka Streams' `maybeCommit`); the interval's other
    /// chores run either way.
    fn maybe_commit(&mut self) -> Result<(), RuntimeError> {
        let requested = self.tasks.commit_requested() || self.uncommitted_over_bound();
        let interval_up = self.last_commit.elapsed() >= self.config.effective_commit_interval();
        if !(requested || interval_up) {
            return Ok(());
        }
        if !self.tasks.commit_needed() {
            // Input ending in a transaction marker: the position moves
            // past it after the last record's commit.
            if let Ok(positions) = self.consumer.position() {
                self.tasks.advance_to_positions(&positions_of(&positions));
            }
        }
        if self.tasks.commit_needed() {
            self.commit()
        } else if interval_up {
            self.interval_chores()
        } else {
            Ok(())
        }
    }

    /// A handler of this instance answered `ShutdownApplication`: the
    /// thread's streams group member asks the group, whose answer stops
    /// every instance (see [`ApplicationShutdown`]). Without an answer in
    /// time, or without a streams group to carry it, the instance stops
    /// alone.
    ///
    /// [`ApplicationShutdown`]: crate::kafka::application_shutdown::ApplicationShutdown
    fn follow_application_shutdown(&mut self) -> Result<(), RuntimeError> {
        let Some(asked) = self.instance.application_shutdown.requested_at() else {
            return Ok(());
        };
        let carried = self.membership.request_application_shutdown()?;
        if !carried || asked.elapsed() >= ANSWER_TIMEOUT {
            self.instance.application_shutdown.hear(format!(
                "the application was shut down: a stream thread's uncaught-exception handler \
                 answered ShutdownApplication; {}",
                if carried {
                    "the streams group did not answer the request in time, so only this instance stopped"
                } else {
                    "only a streams group (group.protocol=streams) tells the other instances, so only this one stopped"
                }
            ));
        }
        Ok(())
    }

    /// Whether the thread's transactional stores hold more uncommitted
    /// writes than `statestore.uncommitted.max.bytes`: a commit is forced
    /// then (KIP-892), before the interval is up.
    fn uncommitted_over_bound(&self) -> bool {
        self.config.transactional_stores_in_force()
            && self.tasks.uncommitted_store_bytes() as u64
                >= self.config.state_store_uncommitted_max_bytes
    }

    /// Follows `KafkaStreams::pause` and `resume`: the thread's input
    /// partitions are paused (or resumed, those nothing else holds) as the
    /// flag changes.
    fn follow_pause(&mut self) -> Result<(), RuntimeError> {
        let paused = self.instance.paused.get();
        if paused != self.paused {
            self.intake.set_instance_paused(paused)?;
            self.paused = paused;
            log::info!(
                "{}: {}",
                self.name,
                if paused {
                    "paused: processing, punctuation, restoration and standby updates stop"
                } else {
                    "resumed"
                }
            );
        }
        Ok(())
    }

    /// Gives the state updater its slice of the pass; tasks it restored
    /// start running, and the thread once none is left (Kafka Streams'
    /// `StreamThread.checkStateUpdater`).
    fn restore(&mut self) -> Result<(), RuntimeError> {
        if !self.tasks.restores_active() {
            return Ok(());
        }
        let budget = if self.tasks.running_have_records() {
            RESTORE_SLICE
        } else {
            self.config.poll.max(RESTORE_SLICE)
        };
        if self.tasks.restore(budget)? {
            self.apply_holds()?;
            self.maybe_running();
            self.publish_metadata();
        }
        Ok(())
    }

    /// RUNNING once the group settled the assignment and no active task
    /// restores.
    fn maybe_running(&mut self) {
        if self.settled && !self.tasks.restores_active() {
            self.transition(ThreadState::Running);
        }
    }

    /// Tells the consumer which partitions to hold while their tasks
    /// restore, and which to release.
    fn apply_holds(&mut self) -> Result<(), RuntimeError> {
        let (hold, release) = self.tasks.take_holds();
        self.intake.hold(&hold)?;
        self.intake.release(&release)
    }

    /// The intake's poll, timed and traced.
    fn poll(&mut self, timeout: Duration) -> Result<(), RuntimeError> {
        self.membership.record_poll();
        let span = tracing::debug_span!(
            "kstreams.poll",
            thread = self.name.as_str(),
            records = tracing::field::Empty
        )
        .entered();
        let started = Instant::now();
        let queries = self
            .instance
            .store_queries
            .in_use()
            .then_some(&*self.queries);
        let result = self.intake.poll(
            timeout,
            PollTarget {
                tasks: &mut self.tasks,
                spare: self.collector.spare_buffers(),
                membership: &self.membership,
                queries,
            },
        );
        let polled = *result.as_ref().unwrap_or(&0);
        span.record("records", polled);
        self.sensors.poll_latency.observe_since(started);
        self.sensors.poll_records.add(polled);
        result.map(drop)
    }

    /// Processes what the partition groups allow, the outputs sent as each
    /// slice ends.
    fn process(&mut self) -> Result<(), RuntimeError> {
        let _span =
            tracing::debug_span!("kstreams.process_batch", thread = self.name.as_str()).entered();
        if self.tasks.bootstrapping() {
            let positions = self.consumer.position().client()?;
            self.tasks.track_bootstrap(&positions_of(&positions));
        }
        let needs_lag = self.config.max_task_idle.needs_lag();
        loop {
            let consumer = &self.consumer;
            let lagging = |topic: &str, partition: i32, start: Option<i64>| {
                needs_lag && is_lagging(consumer, topic, partition, start)
            };
            let more = self
                .tasks
                .process(&lagging, OUTPUT_SLICE, &mut self.outbox)?;
            self.send_outbox()?;
            if !more {
                return Ok(());
            }
            // A long batch: serve the producer's delivery reports between
            // slices, as a sink's send would.
            self.collector.poll();
        }
    }

    /// Hands the outbox to the record collector: the one way out of the
    /// thread for a record, whichever step wrote it. Offsets count as
    /// processed only once their outputs (and the stores' changelog
    /// records) are with the producer: if sending fails, nothing of the
    /// step gets committed.
    fn send_outbox(&mut self) -> Result<(), RuntimeError> {
        self.collector.send_outbox(&mut self.outbox)?;
        self.tasks.outputs_sent();
        Ok(())
    }

    /// Answers the interactive queries posted since the last pass, on this
    /// thread's stores; those of committed writes only wait for a commit
    /// point (nothing processed since the last commit).
    fn serve_queries(&self) {
        if self.queries.has_reads() {
            // Without transactional stores a committed read is any read
            // (Kafka Streams: no transaction buffer to read past).
            let at_commit_point =
                !self.config.transactional_stores_in_force() || !self.tasks.commit_needed();
            super::queries::serve(
                &self.name,
                &self.queries,
                &self.tasks.local_stores(),
                at_commit_point,
            );
        }
    }

    /// Tells readers of `KafkaStreams::metadata` what this thread runs now.
    fn publish_metadata(&self) {
        self.instance.local_metadata.publish(ThreadMetadata {
            thread_name: self.name.clone(),
            thread_state: self.state.state(),
            restoring: self.tasks.restores_active(),
            active_tasks: self.tasks.metadata(self.intake.lags()),
            standby_tasks: self.tasks.standby_metadata(),
            consumer_client_id: clients::consumer_client_id(&self.name),
            restore_consumer_client_id: clients::restore_consumer_client_id(&self.name),
            producer_client_ids: vec![clients::producer_client_id(&self.name)],
        });
        self.instance
            .local_metadata
            .record_skew(&self.config.metrics);
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
        stop: &dyn Fn() -> bool,
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
        while Instant::now() < resume && !stop() {
            // Polling keeps the thread in its group (max.poll.interval.ms);
            // what it fetches is read again after the next rewind.
            self.poll(Duration::from_millis(100))?;
            if self.apply_group_changes()? {
                self.apply_holds()?;
            }
        }
        self.abort_and_rewind()
    }
}
