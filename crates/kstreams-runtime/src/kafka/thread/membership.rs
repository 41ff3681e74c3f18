//! The stream thread's one seam to its group, whichever protocol runs it.
//!
//! Under the classic and consumer (KIP-848) protocols librdkafka's consumer
//! is the member: its rebalance callback records what changed
//! ([`RebalanceEvents`]) and assigns the partitions itself. Under the
//! streams protocol (KIP-1071) the thread's [`GroupMembership`] is the
//! member, and the thread assigns the consumer what the broker gave it.
//! Either way the thread sees one list of [`GroupChange`]s, applies them in
//! one loop, and commits, reports and leaves through [`Membership`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use kstreams_dsl::TaskId;
use kstreams_group::{Assignment, LeaveOperation};
use kstreams_state::TopicPartition;
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::TopicPartitionList;

use super::MainConsumer;
use crate::kafka::client_error::ClientResult;
use crate::kafka::consumer_position::is_rebalance_error;
use crate::kafka::rebalance_listener::{partition_list, AssignmentEvent, RebalanceEvents};
use crate::kafka::streams_group::{GroupMembership, MemberChange};
use crate::kafka::task_manager::TaskOffsetSums;
use crate::kafka::uncommitted_start::Placement;
use crate::kafka::RuntimeError;

/// How often a thread of a streams group recomputes its task offset sums
/// (reading the checkpoints on disk); the broker takes them at its
/// `streams.task.offset.interval.ms` (a minute by default, 15 s at least).
const TASK_OFFSETS_EVERY: Duration = Duration::from_secs(10);

/// What the group asks of the thread, in the order to apply it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum GroupChange {
    /// Give these partitions up: committed first and closed clean, unless
    /// `lost` (the tasks are someone else's already: closed dirty).
    Revoke {
        partitions: Vec<TopicPartition>,
        lost: bool,
    },
    /// Close these standby tasks, checkpointed: `promoted` ones become
    /// active tasks of the thread next.
    RemoveStandbys { tasks: Vec<TaskId>, promoted: bool },
    /// Take these partitions over.
    Assign(Vec<TopicPartition>),
    /// Keep these tasks' stores current from their changelogs.
    AddStandbys(Vec<TaskId>),
    /// The round's changes are applied: the thread has its tasks (the
    /// streams group is told which, by [`Membership::settled`]).
    Settled(Option<Assignment>),
    /// The streams group asks the whole application to shut down: why.
    ShutdownApplication(String),
}

/// The thread's membership of its group.
pub(crate) struct Membership {
    /// The consumer's rebalance callbacks (every protocol installs them;
    /// only the consumer's own protocols fill them).
    events: Arc<RebalanceEvents>,
    /// Under `group.protocol=streams`: the thread's streams group member.
    streams: Option<GroupMembership>,
    /// When the task offsets were last handed to the streams group member.
    offsets_reported: Instant,
    /// Whether this thread's member asked the group to shut down.
    shutdown_requested: bool,
}

impl Membership {
    pub(super) fn new(events: Arc<RebalanceEvents>, streams: Option<GroupMembership>) -> Self {
        Self {
            events,
            streams,
            offsets_reported: Instant::now(),
            shutdown_requested: false,
        }
    }

    /// Whether a revocation waits for the thread: it commits and closes
    /// the revoked tasks before anything else.
    pub(super) fn revocation_pending(&self) -> bool {
        self.events.revocation_pending()
    }

    /// Whether changes wait for the thread (a poll ends early for them).
    pub(super) fn has_changes(&self) -> bool {
        self.events.has_events()
    }

    /// The thread is alive (its loop polled).
    pub(super) fn record_poll(&self) {
        if let Some(streams) = &self.streams {
            streams.record_poll();
        }
    }

    /// From now on the rebalance callback leaves revocations to the loop.
    pub(super) fn start_deferring(&self) {
        self.events.set_deferring(true);
    }

    /// The loop ends (or unwinds): revocations are acknowledged inside the
    /// callback from now on, and one left pending is acknowledged now, or
    /// closing the consumer would wait for it forever.
    pub(super) fn stop_deferring(&self, consumer: &MainConsumer) {
        self.events.set_deferring(false);
        self.events.acknowledge_pending(&**consumer);
    }

    /// What changed since the last call. A streams group member that
    /// stopped for good fails with why.
    pub(super) fn take_changes(
        &mut self,
        consumer: &MainConsumer,
    ) -> Result<Vec<GroupChange>, RuntimeError> {
        let mut changes = Vec::new();
        for event in self.events.take() {
            match event {
                AssignmentEvent::Revoked(partitions) => changes.push(GroupChange::Revoke {
                    partitions,
                    lost: consumer.assignment_lost(),
                }),
                AssignmentEvent::Assigned(partitions) => {
                    changes.push(GroupChange::Assign(partitions));
                    changes.push(GroupChange::Settled(None));
                }
            }
        }
        if let Some(streams) = &mut self.streams {
            changes.extend(
                streams
                    .take_changes()?
                    .into_iter()
                    .map(|change| match change {
                        MemberChange::Revoke { partitions, lost } => {
                            GroupChange::Revoke { partitions, lost }
                        }
                        MemberChange::RemoveStandbys { tasks, promoted } => {
                            GroupChange::RemoveStandbys { tasks, promoted }
                        }
                        MemberChange::Assign(partitions) => GroupChange::Assign(partitions),
                        MemberChange::AddStandbys(tasks) => GroupChange::AddStandbys(tasks),
                        MemberChange::Report(owned) => GroupChange::Settled(Some(owned)),
                        MemberChange::ShutdownApplication(why) => {
                            GroupChange::ShutdownApplication(why)
                        }
                    }),
            );
        }
        Ok(changes)
    }

    /// Before the thread takes `partitions` over. The rebalance callback
    /// assigned the consumer's own; a streams group's are assigned here,
    /// forwarded to the fetch queue first and each from its committed
    /// offset (or by auto.offset.reset where there is none).
    pub(super) fn assign(
        &self,
        consumer: &MainConsumer,
        partitions: &[TopicPartition],
        forward: impl FnOnce(&[TopicPartition]),
    ) -> Result<(), RuntimeError> {
        if self.streams.is_none() {
            return Ok(());
        }
        forward(partitions);
        let mut list = partition_list(partitions);
        consumer.context().place_uncommitted(consumer, &mut list);
        consumer.incremental_assign(&list).client()?;
        Ok(())
    }

    /// Where the partitions assigned since the last call that had no
    /// committed offset were placed (kafka/uncommitted_start.rs).
    pub(super) fn take_placement(&self) -> Placement {
        self.events.take_placement()
    }

    /// After the thread closed the tasks of `partitions`: the consumer's
    /// revocation is acknowledged, a streams group's partitions unassigned.
    pub(super) fn revoked(
        &self,
        consumer: &MainConsumer,
        partitions: &[TopicPartition],
    ) -> Result<(), RuntimeError> {
        self.events.acknowledge_pending(&**consumer);
        if self.streams.is_some() {
            consumer
                .incremental_unassign(&partition_list(partitions))
                .client()?;
        }
        Ok(())
    }

    /// Asks the whole application to shut down, once; returns whether the
    /// group can carry the request (only a streams group can).
    pub(super) fn request_application_shutdown(&mut self) -> Result<bool, RuntimeError> {
        let Some(streams) = &self.streams else {
            return Ok(false);
        };
        if !self.shutdown_requested {
            streams.request_application_shutdown()?;
            self.shutdown_requested = true;
        }
        Ok(true)
    }

    /// The round's changes are applied: a streams group is told which tasks
    /// the thread runs now.
    pub(super) fn settled(&self, owned: Option<Assignment>) -> Result<(), RuntimeError> {
        match (&self.streams, owned) {
            (Some(streams), Some(owned)) => streams.report_owned(owned),
            _ => Ok(()),
        }
    }

    /// Whether the thread's tasks are still its own, as far as it can
    /// tell before an exactly-once commit (see
    /// [`GroupMembership::owns_tasks`]; the consumer's protocols fence a
    /// stale member at the commit itself).
    pub(super) fn owns_tasks(&self) -> bool {
        self.streams
            .as_ref()
            .is_none_or(GroupMembership::owns_tasks)
    }

    /// Commits `offsets` under at-least-once. Returns whether they were
    /// committed: a commit refused because the group moved on (a
    /// rebalance) is not an error; the next owner processes from the last
    /// commit.
    pub(super) fn commit(
        &self,
        consumer: &MainConsumer,
        offsets: &TopicPartitionList,
        thread: &str,
    ) -> Result<bool, RuntimeError> {
        if offsets.count() == 0 {
            return Ok(false);
        }
        if let Some(streams) = &self.streams {
            return streams.commit(offsets);
        }
        match consumer.commit(offsets, CommitMode::Sync) {
            Err(e) if is_rebalance_error(&e) => {
                log::info!("{thread}: commit skipped during a rebalance: {e}");
                Ok(false)
            }
            other => other.map(|()| true).map_err(RuntimeError::client),
        }
    }

    /// Under the streams protocol, at most every [`TASK_OFFSETS_EVERY`]:
    /// tells the group the offsets of the state the thread has at hand
    /// (`sums`: standbys, task directories on disk), which the broker's
    /// assignor weighs when it places standbys and warm-ups. The member
    /// sends them at the broker's own interval.
    pub(super) fn report_task_offsets(
        &mut self,
        sums: impl FnOnce() -> Result<TaskOffsetSums, RuntimeError>,
    ) -> Result<(), RuntimeError> {
        let Some(streams) = &self.streams else {
            return Ok(());
        };
        if self.offsets_reported.elapsed() < TASK_OFFSETS_EVERY {
            return Ok(());
        }
        self.offsets_reported = Instant::now();
        streams.report_task_offsets(sums()?)
    }

    /// Leaves the group, after the thread's last commit and the tasks'
    /// close.
    pub(super) fn leave(
        &mut self,
        consumer: &MainConsumer,
        thread: &str,
        operation: LeaveOperation,
    ) {
        self.stop_deferring(consumer);
        match &mut self.streams {
            // After the last commit, which went out as the member.
            Some(streams) => {
                streams.close(operation);
                if let Err(e) = consumer.unassign() {
                    log::debug!("{thread}: unassign: {e}");
                }
            }
            None => consumer.unsubscribe(),
        }
    }
}

#[cfg(test)]
mod tests {
    use rdkafka::consumer::BaseConsumer;
    use rdkafka::ClientConfig;

    use super::*;
    use crate::kafka::config::StreamsConfig;
    use crate::kafka::rebalance_listener::RebalanceListener;
    use crate::kafka::uncommitted_start::UncommittedStarts;

    fn p(topic: &str, partition: i32) -> TopicPartition {
        TopicPartition::new(topic, partition)
    }

    /// A consumer that never connects (nothing here asks a broker).
    fn consumer(events: &Arc<RebalanceEvents>) -> MainConsumer {
        let config = StreamsConfig::new("app", "127.0.0.1:1");
        let consumer: BaseConsumer<RebalanceListener> = ClientConfig::new()
            .set("bootstrap.servers", "127.0.0.1:1")
            .set("group.id", "app")
            .create_with_context(RebalanceListener::new(
                events.clone(),
                UncommittedStarts::of_config(&config),
            ))
            .unwrap();
        MainConsumer::new(consumer)
    }

    #[test]
    fn the_consumer_protocols_callbacks_become_group_changes_in_their_order() {
        let events = Arc::new(RebalanceEvents::default());
        let consumer = consumer(&events);
        let mut membership = Membership::new(events.clone(), None);
        membership.start_deferring();
        events.push(AssignmentEvent::Assigned(vec![p("a", 0), p("a", 1)]));
        assert!(events.revoked(vec![p("a", 1)]), "the loop takes it over");
        assert!(membership.revocation_pending());
        assert!(membership.has_changes());
        assert_eq!(
            membership.take_changes(&consumer).unwrap(),
            vec![
                GroupChange::Assign(vec![p("a", 0), p("a", 1)]),
                GroupChange::Settled(None),
                GroupChange::Revoke {
                    partitions: vec![p("a", 1)],
                    lost: false,
                },
            ]
        );
        assert!(membership.take_changes(&consumer).unwrap().is_empty());
        // The revocation waits until the thread closed its tasks.
        assert!(membership.revocation_pending());
        membership.revoked(&consumer, &[p("a", 1)]).unwrap();
        assert!(!membership.revocation_pending());
    }

    #[test]
    fn without_a_streams_group_the_consumer_commits_and_nothing_is_reported() {
        let events = Arc::new(RebalanceEvents::default());
        let consumer = consumer(&events);
        let mut membership = Membership::new(events, None);
        // A consumer's protocols fence a stale member at the commit itself.
        assert!(membership.owns_tasks());
        // Nothing to commit: the consumer is not asked.
        assert!(!membership
            .commit(&consumer, &TopicPartitionList::new(), "t")
            .unwrap());
        membership
            .report_task_offsets(|| panic!("computed only for a streams group"))
            .unwrap();
        membership.settled(None).unwrap();
        // Assigning is the rebalance callback's: nothing to do here.
        let mut forwarded = false;
        membership
            .assign(&consumer, &[p("a", 0)], |_| forwarded = true)
            .unwrap();
        assert!(!forwarded);
    }
}
