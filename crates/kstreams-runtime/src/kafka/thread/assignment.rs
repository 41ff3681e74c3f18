//! The assignment step of the stream thread: what the group changed,
//! applied to the tasks (Kafka Streams' `StreamsRebalanceListener` and
//! `TaskManager.handleAssignment`/`handleRevocation`).
//!
//! Revoked tasks are committed first, then closed; assigned ones are
//! created and handed to the state updater, which restores their stores in
//! slices of the thread's loop while the tasks restored already process
//! (the thread stays PARTITIONS_ASSIGNED meanwhile).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use kstreams_state::TopicPartition;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::Offset;

use super::membership::GroupChange;
use super::{ThreadLoop, ThreadState, CONSUMER_TIMEOUT};
use crate::kafka::client_error::ClientResult;
use crate::kafka::offsets::{committed_of, Committed};
use crate::kafka::rebalance_listener::{partition_list, RebalanceListener};
use crate::kafka::RuntimeError;

impl ThreadLoop<'_> {
    /// Applies what the group changed since the last pass, moving the
    /// thread through PARTITIONS_REVOKED and PARTITIONS_ASSIGNED to
    /// RUNNING. Returns whether anything changed.
    pub(super) fn apply_group_changes(&mut self) -> Result<bool, RuntimeError> {
        let changes = self.membership.take_changes(&self.consumer)?;
        let changed = !changes.is_empty();
        for change in changes {
            let _span = tracing::debug_span!(
                "kstreams.rebalance",
                thread = self.name.as_str(),
                change = change_name(&change),
            )
            .entered();
            match change {
                GroupChange::Revoke { partitions, lost } => {
                    self.settled = false;
                    self.transition(ThreadState::PartitionsRevoked);
                    self.revoke(&partitions, lost)?;
                }
                GroupChange::Assign(partitions) => {
                    self.settled = false;
                    self.transition(ThreadState::PartitionsAssigned);
                    let intake = &self.intake;
                    self.membership
                        .assign(&self.consumer, &partitions, |p| intake.forward(p))?;
                    self.assign(&partitions)?;
                }
                GroupChange::RemoveStandbys { tasks, promoted } => {
                    self.tasks.remove_standbys(&tasks, promoted)?;
                }
                GroupChange::AddStandbys(tasks) => {
                    // Opened only: the standby consumer catches them up.
                    self.tasks.add_standbys(&tasks)?;
                }
                GroupChange::Settled(owned) => {
                    self.membership.settled(owned)?;
                    // The thread has its tasks, even if none: RUNNING once
                    // they are restored.
                    self.settled = true;
                    self.transition(ThreadState::PartitionsAssigned);
                    self.maybe_running();
                }
                GroupChange::ShutdownApplication(why) => {
                    let why = if why.is_empty() {
                        "streams group status SHUTDOWN_APPLICATION".to_owned()
                    } else {
                        why
                    };
                    log::error!(
                        "{}: the streams group asks every instance to shut down: {why}",
                        self.name
                    );
                    self.instance.application_shutdown.hear(format!(
                        "the application was shut down: an instance's uncaught-exception \
                         handler answered ShutdownApplication ({why})"
                    ));
                }
            }
        }
        if changed {
            self.update_missing_partitions();
        }
        Ok(changed)
    }

    /// Kafka Streams' `onPartitionsRevoked`: every task is committed first
    /// (unless `lost`: the thread was dropped from the group), then the
    /// revoked ones close, then the revocation is acknowledged.
    fn revoke(&mut self, revoked: &[TopicPartition], lost: bool) -> Result<(), RuntimeError> {
        let clean = self.commit_before_revocation(lost)?;
        self.intake.revoked(revoked, &self.config.metrics);
        let delivered = self.collector.delivered_changelog_offsets();
        self.tasks.revoke(revoked, clean, &delivered)?;
        self.membership.revoked(&self.consumer, revoked)
    }

    /// Creates the tasks of `assigned` (handed to the state updater), each
    /// resuming from its committed offset's metadata.
    fn assign(&mut self, assigned: &[TopicPartition]) -> Result<(), RuntimeError> {
        let placement = self.membership.take_placement();
        if !placement.unstartable.is_empty() {
            return Err(RuntimeError::NoCommittedOffset {
                partitions: placement.unstartable,
            });
        }
        self.intake.assigned(assigned, &self.config.metrics)?;
        // What the placement read already is not asked for again; of a
        // partition placed twice (assigned again before the thread took the
        // first assignment), the later reading counts.
        let assigned_now: HashSet<&TopicPartition> = assigned.iter().collect();
        let placed: HashMap<TopicPartition, Committed> = placement
            .committed
            .into_iter()
            .filter(|c| assigned_now.contains(&c.partition))
            .map(|c| (c.partition.clone(), c))
            .collect();
        let unread: Vec<TopicPartition> = assigned
            .iter()
            .filter(|p| !placed.contains_key(*p))
            .cloned()
            .collect();
        let mut committed = if unread.is_empty() {
            Vec::new()
        } else {
            self.consumer
                .committed_offsets(partition_list(&unread), Duration::from_secs(10))
                // Partitions then start without their committed partition
                // time and operators' metadata (an emit-final window may be
                // emitted again).
                .map_err(|e| {
                    log::warn!(
                        "{}: committed offsets and their metadata unknown: {e}",
                        self.name
                    )
                })
                .ok()
                .map(|list| committed_of(&list))
                .unwrap_or_default()
        };
        committed.extend(placed.into_values());
        // Where a partition without a committed offset was placed is where
        // its reading starts, for the lag.
        let starts: HashMap<TopicPartition, i64> = placement.starts.into_iter().collect();
        for c in committed.iter_mut().filter(|c| c.offset.is_none()) {
            c.offset = starts.get(&c.partition).copied();
        }
        let (consumer, name) = (&self.consumer, &self.name);
        let result = self.tasks.assign(assigned, &committed, |topic, partition| {
            bootstrap_end(consumer, topic, partition).unwrap_or_else(|e| {
                log::warn!(
                    "{name}: no bootstrap of {topic}-{partition}: its end offset is unknown \
                         ({e}); processing without waiting for it"
                );
                None
            })
        });
        self.intake.tasks_created();
        result
    }

    /// Tells the tasks which of their co-partitioned partitions exist.
    pub(super) fn update_missing_partitions(&mut self) {
        let mut counts = HashMap::new();
        for (topic, _) in self.tasks.source_topics() {
            if let Ok(n) = self.collector.partition_count(&topic) {
                counts.insert(topic, n);
            }
        }
        self.tasks.update_missing_partitions(&counts);
    }
}

/// A change's name, for its trace span.
fn change_name(change: &GroupChange) -> &'static str {
    match change {
        GroupChange::Revoke { lost: false, .. } => "revoke",
        GroupChange::Revoke { lost: true, .. } => "lost",
        GroupChange::RemoveStandbys { .. } => "remove-standbys",
        GroupChange::Assign(_) => "assign",
        GroupChange::AddStandbys(_) => "add-standbys",
        GroupChange::Settled(_) => "settled",
        GroupChange::ShutdownApplication(_) => "shutdown-application",
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
    let (low, high) = consumer
        .fetch_watermarks(topic, partition, CONSUMER_TIMEOUT)
        .client()?;
    let committed = consumer
        .committed_offsets(
            partition_list(&[TopicPartition::new(topic, partition)]),
            CONSUMER_TIMEOUT,
        )
        .client()?
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
