//! The stream thread's intake: its main consumer, the fetch queue the
//! assigned partitions are forwarded to, pausing for backpressure, and the
//! copy of each consumed record into its task's buffer.
//!
//! A partition is paused for three reasons, each kept apart: its buffer is
//! over the bound (backpressure), its task restores (a hold), or the
//! instance is paused (`KafkaStreams::pause`: every assigned partition).
//! librdkafka has one pause flag per partition, so a partition is resumed
//! only when none of the three holds it any more.
//!
//! Kafka Streams' `StreamThread.pollRequests` and `addRecordsToTasks`,
//! with the consumer's lag and pause bookkeeping beside them.

use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use kstreams_metrics::MetricsRegistry;
use kstreams_state::TopicPartition;
use rdkafka::consumer::Consumer;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::Offset;

use super::membership::Membership;
use super::pauses::Pauses;
use super::{MainConsumer, CONSUMER_TIMEOUT};
use crate::kafka::consumer_position::{consumed, is_fatal_consumer_error, PartitionMetrics};
use crate::kafka::ffi::{FetchedMessage, MessageView};
use crate::kafka::queries::{QueryInbox, QUERY_POLL};
use crate::kafka::rebalance_listener::partitions;
use crate::kafka::spare_buffers::SpareBuffers;
use crate::kafka::task_manager::TaskManager;
use crate::kafka::RuntimeError;
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

/// The topic of a consumed message (read on rare paths only).
fn topic_of(message: MessageView<'_>) -> String {
    message.topic_name().to_string_lossy().into_owned()
}

/// What the intake needs of the rest of the thread for one poll.
pub(crate) struct PollTarget<'a> {
    /// Where consumed records go.
    pub tasks: &'a mut TaskManager,
    /// Buffers for the records' copies (the producer's, handed back).
    pub spare: &'a mut SpareBuffers,
    /// Why a poll ends early: a rebalance to apply.
    pub membership: &'a Membership,
    /// Posted interactive queries, when any are served: a poll ends early
    /// for them too.
    pub queries: Option<&'a QueryInbox>,
}

/// The consumer side of a stream thread.
pub(crate) struct Intake {
    thread: String,
    /// Shared only with the poll: a polled record borrows the consumer,
    /// and that borrow must not be one of `self` (the record is buffered
    /// by `&mut self` methods).
    consumer: Rc<MainConsumer>,
    /// `buffered.records.per.partition`: a partition's buffer over it
    /// pauses the partition.
    bound: usize,
    /// Why partitions are not fetched: backpressure, restoring tasks, the
    /// application paused.
    pauses: Pauses,
    /// The consumed topics' shared names.
    topic_names: TopicNames,
    /// The last batch read from the fetch queue (its buffer, kept).
    fetched: Vec<FetchedMessage>,
    /// Until when the assigned partitions are forwarded to the fetch queue
    /// again on every poll (see [`FORWARD_AGAIN_FOR`]).
    forward_again_until: Instant,
    /// When they are forwarded again next otherwise ([`FORWARD_EVERY`]).
    next_forward: Instant,
    partition_metrics: PartitionMetrics,
    /// When the partitions' lag gauges were last set.
    lag_recorded: Instant,
    /// The lags last set, for the thread's published metadata.
    lags: HashMap<TopicPartition, i64>,
}

impl Drop for Intake {
    fn drop(&mut self) {
        // Fetched records go before their queue (closed by the consumer,
        // dropped after).
        self.fetched.clear();
    }
}

impl Intake {
    pub(super) fn new(thread: &str, consumer: Rc<MainConsumer>, bound: usize) -> Self {
        Self {
            thread: thread.to_string(),
            consumer,
            bound,
            pauses: Pauses::default(),
            topic_names: TopicNames::default(),
            fetched: Vec::new(),
            forward_again_until: Instant::now(),
            next_forward: Instant::now(),
            partition_metrics: PartitionMetrics::default(),
            lag_recorded: Instant::now(),
            lags: HashMap::new(),
        }
    }

    /// The lags last recorded, by partition.
    pub(super) fn lags(&self) -> &HashMap<TopicPartition, i64> {
        &self.lags
    }

    /// Polls once with `timeout`, then drains what is already fetched,
    /// buffering records in their tasks' partition groups. Returns how many
    /// records it buffered.
    pub(super) fn poll(
        &mut self,
        timeout: Duration,
        to: PollTarget<'_>,
    ) -> Result<u64, RuntimeError> {
        let mut polled = 0;
        self.poll_into(timeout, to, &mut polled).map(|()| polled)
    }

    fn poll_into(
        &mut self,
        timeout: Duration,
        to: PollTarget<'_>,
        polled: &mut u64,
    ) -> Result<(), RuntimeError> {
        let PollTarget {
            tasks,
            spare,
            membership,
            queries,
        } = to;
        let bound = self.bound;
        let now = Instant::now();
        let deadline = now + timeout;
        if now < self.forward_again_until || now >= self.next_forward {
            self.next_forward = now + FORWARD_EVERY;
            if let Ok(assignment) = self.consumer.assignment() {
                self.forward(&partitions(&assignment));
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
                if membership.revocation_pending() {
                    // Revoked tasks are committed before anything else.
                    return Ok(());
                }
                let Some(result) = consumer.poll(Duration::ZERO) else {
                    // An event was served (or the queue is empty): the
                    // poll says which only by timing, the queue by length.
                    events += 1;
                    if events < EVENTS_PER_POLL
                        && !membership.has_changes()
                        && self.consumer.consumer_events_waiting()
                    {
                        continue;
                    }
                    break;
                };
                let message = match result {
                    Ok(message) => message,
                    Err(e) => {
                        self.consumer_error(e)?;
                        continue;
                    }
                };
                *polled += 1;
                self.buffer(MessageView::of_polled(&message), tasks, spare)?;
            }
            if membership.revocation_pending() || membership.has_changes() {
                return Ok(());
            }
            let left = bound.saturating_sub(*polled as usize);
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
                match message.error() {
                    None => {
                        *polled += 1;
                        result = self.buffer(view, tasks, spare);
                    }
                    Some(e) => match self.consumer_error(e) {
                        Ok(()) if view.offset() >= 0 => {
                            ended_in_error.push((topic_of(view), view.partition(), view.offset()));
                        }
                        Ok(()) => {}
                        Err(e) => result = Err(e),
                    },
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
                        self.thread
                    );
                }
            }
            if *polled > 0 || Instant::now() >= deadline || queries.is_some_and(|q| q.has_reads()) {
                return Ok(());
            }
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
                    self.thread
                );
            }
            return Err(RuntimeError::client(e));
        }
        if let KafkaError::MessageConsumption(RDKafkaErrorCode::AutoOffsetReset) = e {
            return Err(RuntimeError::NoCommittedOffset {
                partitions: self.partitions_without_committed_offset(),
            });
        }
        log::warn!("{}: consumer error: {e}", self.thread);
        Ok(())
    }

    /// Copies a consumed record into its task's buffer, pausing its
    /// partition when the buffer is over the bound.
    fn buffer(
        &mut self,
        message: MessageView<'_>,
        tasks: &mut TaskManager,
        spare: &mut SpareBuffers,
    ) -> Result<(), RuntimeError> {
        let record = consumed(message, &mut self.topic_names, spare);
        self.partition_metrics
            .consumed(&record.topic, record.partition);
        let partition = record.partition;
        if tasks.buffer(record)?.is_some_and(|n| n > self.bound) {
            // The record has moved into its task; the message still names
            // its topic (read only on this rare path).
            // Backpressure: stop fetching this partition until the task
            // has worked its buffer down.
            let tp = TopicPartition::new(topic_of(message), partition);
            if self.pauses.over_bound(&tp, &*self.consumer)? {
                log::trace!(
                    "{}: paused {tp} at {} buffered records",
                    self.thread,
                    self.bound
                );
            }
        }
        Ok(())
    }

    /// Forwards `partitions`' fetch queues to the thread's.
    pub(super) fn forward(&self, partitions: &[TopicPartition]) {
        if let Some(queue) = self.consumer.context().fetch_queue() {
            queue.forward(
                &self.consumer,
                partitions
                    .iter()
                    .map(|tp| (tp.topic.as_str(), tp.partition)),
            );
        }
    }

    /// The assigned partitions the group has no committed offset for, to
    /// name them when `auto.offset.reset=none` fails the thread (librdkafka's
    /// error does not say which partition it was).
    fn partitions_without_committed_offset(&self) -> Vec<TopicPartition> {
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
                .map(|e| TopicPartition::new(e.topic(), e.partition()))
                .collect(),
            Err(e) => {
                log::debug!("{}: committed offsets unknown: {e}", self.thread);
                Vec::new()
            }
        }
    }

    /// Resumes the paused partitions whose buffers are down to half the
    /// bound. Not as soon as they are under it: a task that takes records
    /// slowly (at its async bound, or waiting on another partition) keeps
    /// its buffer near the bound, and resuming at bound - 1 paused it again
    /// a few records later. Each pause makes librdkafka drop what it had
    /// prefetched for the partition, so every such cycle cost a fetch of up
    /// to `max.partition.fetch.bytes` for a handful of records.
    pub(super) fn resume_drained(&mut self, tasks: &TaskManager) -> Result<(), RuntimeError> {
        let low_water = self.bound / 2;
        self.pauses.resume_drained(
            |tp| tasks.buffered(&tp.topic, tp.partition) <= low_water,
            &*self.consumer,
        )
    }

    /// Partitions were assigned: their pauses follow ([`Pauses::assigned`])
    /// and they get lag gauges.
    pub(super) fn assigned(
        &mut self,
        assigned: &[TopicPartition],
        metrics: &MetricsRegistry,
    ) -> Result<(), RuntimeError> {
        self.pauses.assigned(assigned, &*self.consumer)?;
        for tp in assigned {
            self.partition_metrics.add(metrics, &tp.topic, tp.partition);
        }
        Ok(())
    }

    /// The tasks of the assigned partitions exist: their partitions are
    /// forwarded to the fetch queue again on every poll for a while, from
    /// now (creating tasks, restoring their stores, may take longer than
    /// the window).
    pub(super) fn tasks_created(&mut self) {
        self.forward_again_until = Instant::now() + FORWARD_AGAIN_FOR;
    }

    /// Partitions were revoked: no longer paused or measured.
    pub(super) fn revoked(&mut self, revoked: &[TopicPartition], metrics: &MetricsRegistry) {
        self.pauses.revoked(revoked);
        for tp in revoked {
            self.partition_metrics
                .remove(metrics, &tp.topic, tp.partition);
        }
    }

    /// Pauses `partitions` while their task restores.
    pub(super) fn hold(&mut self, partitions: &[TopicPartition]) -> Result<(), RuntimeError> {
        self.pauses.hold(partitions, &*self.consumer)
    }

    /// Resumes `partitions`, their task restored, unless another reason
    /// still pauses them.
    pub(super) fn release(&mut self, partitions: &[TopicPartition]) -> Result<(), RuntimeError> {
        self.pauses.release(partitions, &*self.consumer)
    }

    /// The application was paused (`paused`) or resumed. A pause drops
    /// what librdkafka prefetched; the records already buffered stay in
    /// their tasks, and the fetch goes on after them on resume.
    pub(super) fn set_instance_paused(&mut self, paused: bool) -> Result<(), RuntimeError> {
        self.pauses.set_instance_paused(paused, &*self.consumer)
    }

    /// Sets the partitions' lag gauges, at most every
    /// [`LAG_RECORDING_INTERVAL`]; returns whether it did.
    pub(super) fn record_lag(&mut self, tasks: &TaskManager) -> bool {
        if self.lag_recorded.elapsed() < LAG_RECORDING_INTERVAL {
            return false;
        }
        self.lags = self
            .partition_metrics
            .record_lag(&self.consumer, |t, p| tasks.start_offset(t, p));
        self.lag_recorded = Instant::now();
        true
    }

    /// The thread ends: its partitions' gauges go.
    pub(super) fn remove_metrics(&mut self, metrics: &MetricsRegistry) {
        self.partition_metrics.remove_all(metrics);
    }
}
