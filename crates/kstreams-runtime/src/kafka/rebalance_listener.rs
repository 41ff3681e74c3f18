//! The group protocol's callbacks turned into events for the stream
//! thread's task manager (Kafka Streams' `StreamsRebalanceListener`).
//!
//! librdkafka calls the consumer context's `rebalance` inside `poll`, on
//! the stream thread itself, but out of reach of the thread's tasks: the
//! callback records what changed and the loop applies it after the poll.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use kstreams_state::TopicPartition;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, RebalanceProtocol};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{ClientContext, TopicPartitionList};

use super::ffi::FetchQueue;
use super::uncommitted_start::{Placement, UncommittedStarts};

/// What a rebalance changed, in the order the callbacks saw it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum AssignmentEvent {
    /// Partitions this thread now owns.
    Assigned(Vec<TopicPartition>),
    /// Partitions this thread gave up (or lost).
    Revoked(Vec<TopicPartition>),
}

/// What the callbacks share with the loop.
#[derive(Default)]
pub(crate) struct RebalanceEvents {
    /// Changes the callbacks saw, for the loop to apply.
    events: Mutex<Vec<AssignmentEvent>>,
    /// The partitions of a revocation waiting for the loop: their tasks
    /// are committed, then closed, then the revocation is acknowledged to
    /// librdkafka (which waits for that before the group moves on).
    pending_revocation: Mutex<Option<Vec<TopicPartition>>>,
    /// Whether the loop runs and so takes revocations over; outside it
    /// (before it starts, while it shuts down, after a panic) the callback
    /// acknowledges at once, or closing the consumer would wait forever.
    deferring: AtomicBool,
    /// Where assigned partitions without a committed offset were placed,
    /// and those that may not start, for the thread's next assignment.
    placement: Mutex<Placement>,
}

impl RebalanceEvents {
    pub(super) fn record_placement(&self, placement: Placement) {
        self.placement
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .merge(placement);
    }

    /// The placements recorded since the last call.
    pub(super) fn take_placement(&self) -> Placement {
        std::mem::take(&mut *self.placement.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The changes seen since the last call.
    pub(super) fn take(&self) -> Vec<AssignmentEvent> {
        std::mem::take(&mut *self.events.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Whether assignment events wait for the loop.
    pub(super) fn has_events(&self) -> bool {
        !self
            .events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
    }

    /// Whether a revocation waits for the loop to acknowledge it.
    pub(super) fn revocation_pending(&self) -> bool {
        self.pending_revocation
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// From now on revocations wait for the loop (`true`), or are
    /// acknowledged inside the callback (`false`).
    pub(super) fn set_deferring(&self, deferring: bool) {
        self.deferring.store(deferring, Ordering::Release);
    }

    /// Acknowledges a pending revocation, if there is one, with
    /// `acknowledge` (given the revoked partitions).
    pub(super) fn acknowledge_pending_with(&self, acknowledge: impl FnOnce(&TopicPartitionList)) {
        let pending = self
            .pending_revocation
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(revoked) = pending {
            acknowledge(&partition_list(&revoked));
        }
    }

    /// Acknowledges a pending revocation to `consumer`, if there is one.
    pub(super) fn acknowledge_pending<C: Consumer<RebalanceListener>>(&self, consumer: &C) {
        self.acknowledge_pending_with(|tpl| acknowledge_revocation(consumer, tpl));
    }

    pub(crate) fn push(&self, event: AssignmentEvent) {
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(event);
    }

    /// Records a revocation; returns whether the loop takes it over
    /// (`false`: the caller acknowledges it now).
    pub(crate) fn revoked(&self, partitions: Vec<TopicPartition>) -> bool {
        let deferred = self.deferring.load(Ordering::Acquire);
        if deferred {
            *self
                .pending_revocation
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = Some(partitions.clone());
        }
        self.push(AssignmentEvent::Revoked(partitions));
        deferred
    }
}

/// The partitions of a list.
pub(crate) fn partitions(tpl: &TopicPartitionList) -> Vec<TopicPartition> {
    tpl.elements()
        .iter()
        .map(|e| TopicPartition::new(e.topic(), e.partition()))
        .collect()
}

/// A list of partitions, without offsets.
pub(crate) fn partition_list(partitions: &[TopicPartition]) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    for tp in partitions {
        tpl.add_partition(&tp.topic, tp.partition);
    }
    tpl
}

/// The stream thread consumer's context. Under the classic eager protocol
/// a revocation takes every partition and the assignment that follows
/// gives the whole new set (`assign`); when librdkafka reports the
/// COOPERATIVE protocol, as it does for `group.protocol=consumer`, both
/// carry only the partitions that change owner (`incremental_assign`,
/// `incremental_unassign`). Either way the task manager creates and
/// closes only the tasks of the partitions named, and a revocation is
/// acknowledged only after committing.
pub(crate) struct RebalanceListener {
    events: Arc<RebalanceEvents>,
    /// Where assigned partitions without a committed offset start.
    uncommitted: UncommittedStarts,
    /// The thread's queue of fetched records, once the consumer exists:
    /// assigned partitions are forwarded to it before they are taken.
    fetch_queue: OnceLock<FetchQueue>,
}

impl RebalanceListener {
    /// A listener recording into `events`, starting assigned partitions
    /// that have no committed offset by `uncommitted`.
    pub(super) fn new(events: Arc<RebalanceEvents>, uncommitted: UncommittedStarts) -> Self {
        Self {
            events,
            uncommitted,
            fetch_queue: OnceLock::new(),
        }
    }

    /// Gives the listener the thread's fetch queue (made from the
    /// consumer this listener is the context of).
    pub(super) fn install_fetch_queue(&self, queue: FetchQueue) {
        let _ = self.fetch_queue.set(queue);
    }

    /// Gives the partitions of `assigned` that have no committed offset
    /// their start, before the consumer takes them
    /// (kafka/uncommitted_start.rs); what it did is recorded for the
    /// thread's assignment step.
    pub(super) fn place_uncommitted(
        &self,
        consumer: &BaseConsumer<RebalanceListener>,
        assigned: &mut TopicPartitionList,
    ) {
        let placement = self.uncommitted.place(consumer, assigned);
        if placement != Placement::default() {
            self.events.record_placement(placement);
        }
    }

    /// The thread's fetch queue, once installed.
    pub(super) fn fetch_queue(&self) -> Option<&FetchQueue> {
        self.fetch_queue.get()
    }
}

impl ClientContext for RebalanceListener {}

impl ConsumerContext for RebalanceListener {
    /// Assignments are taken at once; revocations are left pending for the
    /// loop: Kafka Streams commits the revoked tasks inside
    /// `onPartitionsRevoked`, but our tasks live on the loop, out of this
    /// callback's reach. librdkafka waits for the application to
    /// acknowledge a revocation (`unassign`/`incremental_unassign`), so the
    /// loop commits first and acknowledges after: no record processed
    /// before a rebalance is processed again by the next owner.
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        tpl: &mut TopicPartitionList,
    ) {
        match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                self.place_uncommitted(consumer, tpl);
                // Before librdkafka starts fetching them: none of their
                // records go to the consumer's own queue.
                if let Some(queue) = self.fetch_queue.get() {
                    queue.forward(
                        consumer,
                        tpl.elements().iter().map(|e| (e.topic(), e.partition())),
                    );
                }
                let assigned = match consumer.rebalance_protocol() {
                    RebalanceProtocol::Cooperative => consumer.incremental_assign(tpl),
                    _ => consumer.assign(tpl),
                };
                if let Err(e) = assigned {
                    log::error!("could not take the assignment: {e}");
                }
                self.events.push(AssignmentEvent::Assigned(partitions(tpl)));
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                if !self.events.revoked(partitions(tpl)) {
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
                    self.events.push(AssignmentEvent::Revoked(assigned));
                }
            }
        }
    }
}

/// Gives up revoked partitions: incrementally under a cooperative protocol
/// (KIP-848's included), the whole assignment under the eager one.
fn acknowledge_revocation<C: Consumer<RebalanceListener>>(consumer: &C, tpl: &TopicPartitionList) {
    let result = match consumer.rebalance_protocol() {
        RebalanceProtocol::Cooperative => consumer.incremental_unassign(tpl),
        _ => consumer.unassign(),
    };
    if let Err(e) = result {
        log::error!("could not give up revoked partitions: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(topic: &str, partition: i32) -> TopicPartition {
        TopicPartition::new(topic, partition)
    }

    #[test]
    fn a_revocation_waits_for_the_loop_only_while_it_defers() {
        let events = RebalanceEvents::default();
        // Before the loop runs: the callback acknowledges at once.
        assert!(!events.revoked(vec![p("a", 0)]));
        assert!(!events.revocation_pending());

        events.set_deferring(true);
        assert!(events.revoked(vec![p("a", 1), p("b", 1)]));
        assert!(events.revocation_pending());
        assert_eq!(
            events.take(),
            vec![
                AssignmentEvent::Revoked(vec![p("a", 0)]),
                AssignmentEvent::Revoked(vec![p("a", 1), p("b", 1)]),
            ]
        );
        assert!(events.take().is_empty(), "events are taken once");

        let mut acknowledged = Vec::new();
        events.acknowledge_pending_with(|tpl| acknowledged = partitions(tpl));
        assert_eq!(acknowledged, vec![p("a", 1), p("b", 1)]);
        assert!(!events.revocation_pending());
        let mut again = false;
        events.acknowledge_pending_with(|_| again = true);
        assert!(!again, "a revocation is acknowledged once");
    }

    #[test]
    fn events_keep_the_order_the_callbacks_saw() {
        let events = RebalanceEvents::default();
        events.set_deferring(true);
        events.push(AssignmentEvent::Assigned(vec![p("a", 0)]));
        events.revoked(vec![p("a", 0)]);
        events.push(AssignmentEvent::Assigned(vec![p("a", 1)]));
        assert_eq!(
            events.take(),
            vec![
                AssignmentEvent::Assigned(vec![p("a", 0)]),
                AssignmentEvent::Revoked(vec![p("a", 0)]),
                AssignmentEvent::Assigned(vec![p("a", 1)]),
            ]
        );
    }
}
