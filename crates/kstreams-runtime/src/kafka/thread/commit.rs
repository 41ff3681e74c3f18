//! The commit step of the stream thread: flush, commit, abort and rewind,
//! checkpoints, and the task offsets a streams group weighs (Kafka
//! Streams' `TaskManager.commit` and `StreamThread.maybeCommit`, with the
//! transaction steps of its `StreamsProducer`).
//!
//! Under at-least-once a commit flushes the stores (their outputs and
//! changelog records go out), waits for every record to be acknowledged,
//! commits the offsets, then writes the checkpoints. Under exactly-once the
//! offsets go into the open transaction, which commits; a commit the group
//! refuses aborts the transaction and rewinds to the last commit.

use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::Offset;

use super::{ThreadLoop, CONSUMER_TIMEOUT};
use crate::kafka::client_error::ClientResult;
use crate::kafka::config::ProcessingGuarantee;
use crate::kafka::consumer_position::is_rebalance_error;
use crate::kafka::offsets::{committed_of, positions_of, to_list};
use crate::kafka::record_collector::Deliveries;
use crate::kafka::RuntimeError;

impl ThreadLoop<'_> {
    /// Before partitions go, every task is flushed and committed (its
    /// outputs and changelog records acknowledged, then the offsets), so the
    /// next owner starts exactly where this thread stopped and no store
    /// update is applied twice. A lost assignment (the member was dropped
    /// from the group) cannot commit: under exactly-once the transaction is
    /// aborted and the thread rewinds; under at-least-once the next owner
    /// reprocesses from the last commit.
    /// Returns whether the commit went through, so that the revoked tasks'
    /// stores match their committed changelogs (and may be checkpointed).
    pub(super) fn commit_before_revocation(&mut self, lost: bool) -> Result<bool, RuntimeError> {
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

    /// Flushes stores and outputs, then commits offsets (inside the
    /// transaction under exactly-once). A commit refused because the group
    /// is rebalancing is not an error: at-least-once reprocesses from the
    /// last commit, exactly-once aborts and rewinds to it.
    pub(super) fn commit(&mut self) -> Result<(), RuntimeError> {
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
    pub(super) fn commit_draining(&mut self, drain: bool) -> Result<(), RuntimeError> {
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
                self.tasks.apply_async_completions(&mut self.outbox)?;
                self.send_outbox()?;
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
        self.tasks.flush(&mut self.outbox)?;
        self.send_outbox()?;
        if let Ok(positions) = self.consumer.position() {
            self.tasks.advance_to_positions(&positions_of(&positions));
        }
        let offsets = to_list(&self.tasks.offsets_to_commit())?;
        match self.config.processing_guarantee {
            ProcessingGuarantee::AtLeastOnce => {
                // Every output of these offsets must be acknowledged.
                let flushing = Instant::now();
                let deliveries = self.collector.flush()?;
                log::debug!(
                    "{}: commit: producer flushed in {:.1} ms",
                    self.name,
                    flushing.elapsed().as_secs_f64() * 1e3
                );
                self.count_dropped(deliveries);
                if self
                    .membership
                    .commit(&self.consumer, &offsets, &self.name)?
                {
                    self.purge.committed(&offsets);
                    self.tasks.committed();
                } else if offsets.count() == 0 {
                    // A punctuation's outputs alone: acknowledged above.
                    self.tasks.committed();
                }
                // Everything the stores logged is acknowledged: checkpoint it.
                self.write_checkpoints()?;
            }
            ProcessingGuarantee::ExactlyOnceV2
                if self.collector.in_transaction() && !self.membership.owns_tasks() =>
            {
                log::warn!(
                    "{}: out of the streams group, so its tasks may run elsewhere: aborting \
                     and rewinding instead of committing",
                    self.name
                );
                self.abort_and_rewind()?;
            }
            ProcessingGuarantee::ExactlyOnceV2 if self.collector.in_transaction() => {
                // The transaction's refusals are judged before it commits
                // (librdkafka would refuse the commit of a transaction with
                // a refused record anyway).
                let deliveries = self.collector.flush()?;
                self.count_dropped(deliveries);
                let group = self.consumer.group_metadata();
                match self.collector.commit_transaction(&offsets, group) {
                    Ok(()) => {
                        self.purge.committed(&offsets);
                        self.tasks.committed();
                        if self.config.transactional_stores_in_force() {
                            // Only now: a store's files must never hold a
                            // write of a transaction that may still abort.
                            let delivered = self.collector.delivered_changelog_offsets();
                            self.tasks.commit_transactional_stores(&delivered)?;
                        }
                    }
                    Err(RuntimeError::Kafka(e))
                        if is_rebalance_error(e.kafka()) || requires_abort(e.kafka()) =>
                    {
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
        self.interval_chores()
    }

    /// What the thread does every commit interval, whether or not it had
    /// anything to commit: standbys checkpoint what they applied, purgeable
    /// repartition records go, a streams group hears the tasks' offsets.
    pub(super) fn interval_chores(&mut self) -> Result<(), RuntimeError> {
        self.tasks.checkpoint_standbys()?;
        self.last_commit = Instant::now();
        self.purge.maybe_purge(&self.name);
        let tasks = &self.tasks;
        self.membership
            .report_task_offsets(|| tasks.task_offset_sums())?;
        Ok(())
    }

    pub(super) fn write_checkpoints(&self) -> Result<(), RuntimeError> {
        let delivered = self.collector.delivered_changelog_offsets();
        self.tasks.write_checkpoints(&delivered)
    }

    /// Counts each output record the production handler dropped on its
    /// task (its RETRY and FAIL came as errors).
    pub(super) fn count_dropped(&self, deliveries: Deliveries) {
        for task in deliveries.dropped {
            self.tasks.count_dropped(task);
        }
    }

    /// Aborts the open transaction and goes back to the last committed
    /// offsets: the consumer seeks there and the task manager rebuilds the
    /// tasks (restored by the state updater again).
    pub(super) fn abort_and_rewind(&mut self) -> Result<(), RuntimeError> {
        self.rewound = true;
        self.collector.abort_if_in_transaction();
        self.tasks.forget_processed();
        let assignment = self.consumer.assignment().client()?;
        let committed = self
            .consumer
            .committed_offsets(assignment, CONSUMER_TIMEOUT)
            .client()?;
        for element in committed.elements() {
            let offset = match element.offset() {
                Offset::Invalid => Offset::Beginning,
                other => other,
            };
            self.consumer
                .seek(
                    element.topic(),
                    element.partition(),
                    offset,
                    CONSUMER_TIMEOUT,
                )
                .client()?;
        }
        self.tasks.rewind(&committed_of(&committed))?;
        // The rebuilt tasks restore: their partitions are held meanwhile.
        self.apply_holds()?;
        self.update_missing_partitions();
        self.publish_metadata();
        Ok(())
    }
}

/// A transaction error after which only an abort lets the producer go on.
fn requires_abort(error: &KafkaError) -> bool {
    match error {
        KafkaError::Transaction(e) => e.txn_requires_abort(),
        _ => false,
    }
}
