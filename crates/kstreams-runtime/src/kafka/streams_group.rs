//! A stream thread's membership in a streams group (`group.protocol=streams`,
//! KIP-1071): the broker's task assignment turned into partition changes for
//! the task manager (the seam the rebalance listener feeds under the consumer
//! group protocols), and offset commits as the member.

use std::collections::BTreeSet;
use std::time::Duration;

use kstreams_group::{
    Assignment, CommitOffset, ConnectionConfig, Endpoint, LeaveOperation, MemberConfig,
    MemberEvent, Security, StreamsGroupMember, TaskOffset, Tasks, Uuid,
};
use rdkafka::{Offset, TopicPartitionList};

use super::config::{KafkaClient, StreamsConfig};
use super::task_manager::TaskOffsetSums;
use super::RuntimeError;
use kstreams_state::TopicPartition;

/// How long a commit as the member may wait for the coordinator's answer.
const COMMIT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long closing waits for the leave heartbeat's answer.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the thread must do, in this order, to follow the broker.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum MemberChange {
    /// Give these partitions up: committed first and closed clean, unless
    /// `lost` (the tasks are someone else's already: closed dirty).
    Revoke {
        partitions: Vec<TopicPartition>,
        lost: bool,
    },
    /// Close these standby tasks, checkpointed: `promoted` ones become
    /// active tasks of the thread next (their stores restore only the rest).
    RemoveStandbys {
        tasks: Vec<kstreams_dsl::TaskId>,
        promoted: bool,
    },
    /// Take these partitions over.
    Assign(Vec<TopicPartition>),
    /// Keep these tasks' stores current from their changelogs (standby and
    /// warm-up tasks).
    AddStandbys(Vec<kstreams_dsl::TaskId>),
    /// The changes before this are applied: tell the broker.
    Report(Assignment),
    /// The group asks every member to shut down (a handler's
    /// `ShutdownApplication` on some instance): why.
    ShutdownApplication(String),
}

/// One stream thread's streams group member.
pub(crate) struct GroupMembership {
    thread: String,
    member: Option<StreamsGroupMember>,
    topology: kstreams_group::Topology,
    /// The partitions of the active tasks the thread runs now.
    owned: BTreeSet<TopicPartition>,
    /// The standby and warm-up tasks the thread keeps.
    standbys: BTreeSet<kstreams_group::TaskId>,
    /// Where the group's endpoints go for interactive queries.
    endpoints: super::queries::EndpointBoard,
}

impl GroupMembership {
    /// Joins the application's streams group as the member of stream thread
    /// `index` (0-based) of process `process_id`.
    pub(super) fn join(
        config: &StreamsConfig,
        endpoints: super::queries::EndpointBoard,
        thread: &str,
        index: usize,
        process_id: &str,
        topology: kstreams_group::Topology,
    ) -> Result<Self, RuntimeError> {
        let process_id = Uuid::parse_str(process_id).map_err(|e| {
            kstreams_group::Error::Config(format!("process id {process_id} is not a UUID: {e}"))
        })?;
        let mut connection = connection_config(config, KafkaClient::MainConsumer)?;
        connection.client_id = format!("{thread}-consumer");
        let mut member_config =
            MemberConfig::new(connection, config.application_id.clone(), process_id);
        member_config.user_endpoint =
            config
                .application_server
                .as_ref()
                .map(|(host, port)| Endpoint {
                    host: host.clone(),
                    port: *port,
                });
        let main = config.client_settings(KafkaClient::MainConsumer);
        if let Some((_, instance)) = main.get("group.instance.id") {
            // One id per thread, as Kafka Streams suffixes it.
            member_config.instance_id = Some(format!("{instance}-{}", index + 1));
        }
        // The state at hand from an earlier run, sent with the join as
        // Kafka Streams does (every thread of the process offers it).
        member_config.task_offsets = on_disk_task_offsets(config);
        if let Some(ms) = main
            .get("max.poll.interval.ms")
            .and_then(|(_, v)| v.parse::<u64>().ok())
        {
            member_config.max_poll_interval = Duration::from_millis(ms);
            member_config.rebalance_timeout = Duration::from_millis(ms);
        }
        let member = StreamsGroupMember::join_blocking(member_config, &topology)?;
        log::info!(
            "{thread}: joined streams group {} as member {}",
            config.application_id,
            member.member_id()
        );
        Ok(Self {
            thread: thread.to_string(),
            member: Some(member),
            topology,
            owned: BTreeSet::new(),
            standbys: BTreeSet::new(),
            endpoints,
        })
    }

    fn member(&self) -> Result<&StreamsGroupMember, RuntimeError> {
        self.member
            .as_ref()
            .ok_or(RuntimeError::StreamsGroup(kstreams_group::Error::Stopped))
    }

    /// Hands the member the thread's task offset sums, which it sends at
    /// the broker's task offset interval.
    pub(super) fn report_task_offsets(&self, sums: TaskOffsetSums) -> Result<(), RuntimeError> {
        let wire = |sums: Vec<(kstreams_dsl::TaskId, i64)>| {
            sums.into_iter()
                .map(|(id, offset)| TaskOffset {
                    task: group_task(id),
                    offset,
                })
                .collect()
        };
        self.member()?
            .report_task_offsets(wire(sums.offsets), wire(sums.ends))?;
        Ok(())
    }

    /// The thread is alive (its loop polled): keeps the member in its group.
    pub(super) fn record_poll(&self) {
        if let Some(member) = &self.member {
            member.record_poll();
        }
    }

    /// What the member's events since the last call ask of the thread.
    /// Fails once the member has stopped for good, with why.
    pub(super) fn take_changes(&mut self) -> Result<Vec<MemberChange>, RuntimeError> {
        let mut changes = Vec::new();
        loop {
            let Some(member) = self.member.as_mut() else {
                return Err(kstreams_group::Error::Stopped.into());
            };
            let event = match member.try_next_event() {
                Ok(Some(event)) => event,
                Ok(None) => return Ok(changes),
                Err(kstreams_group::Error::Stopped) => {
                    let member = self.member.take().expect("present");
                    // The member's loop ended on its own: its error says why.
                    member.close_blocking(LEAVE_TIMEOUT)?;
                    return Err(kstreams_group::Error::Stopped.into());
                }
                Err(e) => return Err(e.into()),
            };
            match event {
                MemberEvent::Assigned(assignment) => self.assigned(assignment, &mut changes),
                MemberEvent::TasksLost => {
                    log::warn!(
                        "{}: the streams group took this thread's tasks (fenced, or a missed \
                         poll deadline); they are closed without committing",
                        self.thread
                    );
                    let lost = std::mem::take(&mut self.owned);
                    if !lost.is_empty() {
                        changes.push(MemberChange::Revoke {
                            partitions: lost.into_iter().collect(),
                            lost: true,
                        });
                    }
                    // The standbys go too (checkpointed: their state is
                    // committed data): the member owns nothing now, and the
                    // broker may give one of them to another thread of this
                    // process, which needs the task directory's lock.
                    let standbys = std::mem::take(&mut self.standbys);
                    if !standbys.is_empty() {
                        changes.push(MemberChange::RemoveStandbys {
                            tasks: standbys.iter().filter_map(dsl_task).collect(),
                            promoted: false,
                        });
                    }
                    // The loss first, alone: the thread closes the lost
                    // tasks and polls before it takes a new assignment
                    // (events after this one wait for the next call), so
                    // closing and restoring do not add up to more than the
                    // poll interval without a poll.
                    return Ok(changes);
                }
                MemberEvent::EndpointsChanged(endpoints) => {
                    log::debug!("{}: endpoints {endpoints:?}", self.thread);
                    self.endpoints.update(endpoints);
                }
                MemberEvent::StatusChanged(statuses) => {
                    // Often passing (an assignment delayed, internal topics
                    // just created and not yet seen by the coordinator).
                    if !statuses.is_empty() {
                        log::info!("{}: streams group status: {statuses:?}", self.thread);
                    }
                    for status in statuses {
                        if let kstreams_group::GroupStatus::ShutdownApplication(detail) = status {
                            changes.push(MemberChange::ShutdownApplication(detail));
                        }
                    }
                }
                MemberEvent::TopicAuthorizationFailed(message) => {
                    log::error!(
                        "{}: the streams group refused a topic of the topology: {message}",
                        self.thread
                    )
                }
            }
        }
    }

    fn assigned(&mut self, assignment: Assignment, changes: &mut Vec<MemberChange>) {
        let target: BTreeSet<TopicPartition> = self
            .topology
            .input_partitions(&assignment.active)
            .into_iter()
            .flat_map(|(topic, partitions)| {
                partitions
                    .into_iter()
                    .map(move |p| TopicPartition::new(topic.as_str(), p))
            })
            .collect();
        let revoked: Vec<TopicPartition> = self.owned.difference(&target).cloned().collect();
        let added: Vec<TopicPartition> = target.difference(&self.owned).cloned().collect();
        if !revoked.is_empty() {
            changes.push(MemberChange::Revoke {
                partitions: revoked,
                lost: false,
            });
        }
        // Standbys first give up what is no longer theirs (a promoted one
        // before its active task opens the same directory), new ones after
        // the active tasks are made.
        let wanted: BTreeSet<kstreams_group::TaskId> = assignment
            .standby
            .iter()
            .chain(assignment.warmup.iter())
            .filter(|t| !assignment.active.contains(t))
            .filter(|t| dsl_task(t).is_some())
            .collect();
        let (promoted, migrated): (Vec<_>, Vec<_>) = self
            .standbys
            .difference(&wanted)
            .cloned()
            .partition(|t| assignment.active.contains(t));
        for (tasks, promoted) in [(migrated, false), (promoted, true)] {
            if !tasks.is_empty() {
                changes.push(MemberChange::RemoveStandbys {
                    tasks: tasks.iter().filter_map(dsl_task).collect(),
                    promoted,
                });
            }
        }
        if !added.is_empty() {
            changes.push(MemberChange::Assign(added));
        }
        let new: Vec<kstreams_dsl::TaskId> = wanted
            .difference(&self.standbys)
            .filter_map(dsl_task)
            .collect();
        if !new.is_empty() {
            changes.push(MemberChange::AddStandbys(new));
        }
        self.owned = target;
        let owned_of =
            |tasks: &Tasks| -> Tasks { tasks.iter().filter(|t| wanted.contains(t)).collect() };
        changes.push(MemberChange::Report(Assignment {
            standby: owned_of(&assignment.standby),
            warmup: owned_of(&assignment.warmup),
            active: assignment.active,
            generation: assignment.generation,
        }));
        self.standbys = wanted;
    }

    /// The thread runs the tasks of `owned` now.
    pub(super) fn report_owned(&self, owned: Assignment) -> Result<(), RuntimeError> {
        Ok(self.member()?.report_owned(owned)?)
    }

    /// Asks every member of the group to shut down, in the next heartbeat
    /// (sent at once).
    pub(super) fn request_application_shutdown(&self) -> Result<(), RuntimeError> {
        Ok(self.member()?.request_application_shutdown()?)
    }

    /// Whether the member is in its group at an epoch that owns tasks. A
    /// transaction's offsets go out with group metadata that names no member,
    /// which the broker accepts unchecked: this is the thread's own check
    /// that its tasks are still its own (a member that missed its poll
    /// deadline has left, and its tasks may run elsewhere).
    pub(super) fn owns_tasks(&self) -> bool {
        self.member.as_ref().is_some_and(|m| m.member_epoch() > 0)
    }

    /// Commits `offsets` (with their metadata) as the member at its current
    /// epoch. Returns `false` when the broker refused because the member's
    /// epoch moved on or it is no longer in the group: its tasks may be
    /// someone else's, and at-least-once processes from the last commit.
    pub(super) fn commit(&self, offsets: &TopicPartitionList) -> Result<bool, RuntimeError> {
        let offsets: Vec<CommitOffset> = offsets
            .elements()
            .iter()
            .filter_map(|e| match e.offset() {
                Offset::Offset(offset) => Some(CommitOffset {
                    topic: e.topic().to_string(),
                    partition: e.partition(),
                    offset,
                    metadata: e.metadata().to_string(),
                }),
                _ => None,
            })
            .collect();
        if offsets.is_empty() {
            return Ok(true);
        }
        match self
            .member()?
            .commit_offsets_blocking(offsets, COMMIT_TIMEOUT)
        {
            Ok(()) => Ok(true),
            Err(e) if is_membership_moved_on(&e) => {
                log::info!("{}: commit refused, the group moved on: {e}", self.thread);
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Leaves the group (after the thread's last commit).
    pub(super) fn close(&mut self, operation: LeaveOperation) {
        if let Some(member) = self.member.take() {
            if let Err(e) = member.close_blocking_with(LEAVE_TIMEOUT, operation) {
                log::warn!("{}: leaving the streams group: {e}", self.thread);
            }
        }
    }
}

impl Drop for GroupMembership {
    fn drop(&mut self) {
        self.close(LeaveOperation::Default);
    }
}

/// The offset sums of the task directories the state directory holds, for
/// the join; none if it cannot be read (logged: the join goes on).
fn on_disk_task_offsets(config: &StreamsConfig) -> Vec<TaskOffset> {
    let sums =
        kstreams_state::__private::StateDirectory::new(&config.state_dir, &config.application_id)
            .map_err(RuntimeError::from)
            .and_then(|dir| super::task_creator::offset_sums_on_disk(&dir));
    match sums {
        Ok(sums) => sums
            .into_iter()
            .map(|(id, offset)| TaskOffset {
                task: group_task(id),
                offset,
            })
            .collect(),
        Err(e) => {
            log::warn!("the state directory's task offsets are not reported: {e}");
            Vec::new()
        }
    }
}

/// A runtime task as the streams group names it.
fn group_task(id: kstreams_dsl::TaskId) -> kstreams_group::TaskId {
    kstreams_group::TaskId::new(id.subtopology.to_string(), id.partition)
}

/// A task of the streams group as the runtime numbers it (the topology
/// registers sub-topologies by their number).
fn dsl_task(task: &kstreams_group::TaskId) -> Option<kstreams_dsl::TaskId> {
    Some(kstreams_dsl::TaskId {
        subtopology: task.subtopology.parse().ok()?,
        partition: task.partition,
    })
}

/// Where the brokers are and how to reach them, for the streams group's
/// own connections made on behalf of `client`: `bootstrap.servers`, and
/// `security.protocol` with its `ssl.*`/`sasl.*` keys as that librdkafka
/// client gets them (prefixes and precedence included), so that the member
/// connects as the thread's main consumer does.
pub(crate) fn connection_config(
    config: &StreamsConfig,
    client: KafkaClient,
) -> Result<ConnectionConfig, RuntimeError> {
    let settings = config.client_settings(client);
    let mut connection = ConnectionConfig::new(config.bootstrap_servers.clone());
    connection.security =
        Security::from_client_config(|key| settings.get(key).map(|(_, value)| value.clone()))?;
    Ok(connection)
}

/// STALE_MEMBER_EPOCH (113), UNKNOWN_MEMBER_ID (25), FENCED_MEMBER_EPOCH
/// (110), REBALANCE_IN_PROGRESS (27): the commit came from a member the
/// group has moved past.
fn is_membership_moved_on(error: &kstreams_group::Error) -> bool {
    matches!(error.broker_code(), Some(113 | 25 | 110 | 27))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kstreams_group::{InternalTopic, Subtopology, TaskId};

    fn membership() -> GroupMembership {
        GroupMembership {
            thread: "t".to_string(),
            member: None,
            topology: kstreams_group::Topology {
                epoch: 0,
                subtopologies: vec![
                    Subtopology {
                        id: "0".to_string(),
                        source_topics: vec!["words".to_string()],
                        repartition_sink_topics: vec!["app-by-word-repartition".to_string()],
                        ..Subtopology::default()
                    },
                    Subtopology {
                        id: "1".to_string(),
                        repartition_source_topics: vec![InternalTopic::new(
                            "app-by-word-repartition",
                        )],
                        ..Subtopology::default()
                    },
                ],
            },
            owned: BTreeSet::new(),
            standbys: BTreeSet::new(),
            endpoints: Default::default(),
        }
    }

    fn assignment(active: &[(&str, i32)], generation: u64) -> Assignment {
        Assignment {
            active: active.iter().map(|(s, p)| TaskId::new(*s, *p)).collect(),
            generation,
            ..Assignment::default()
        }
    }

    fn p(topic: &str, partition: i32) -> TopicPartition {
        TopicPartition::new(topic, partition)
    }

    #[test]
    fn the_member_connects_with_the_main_consumers_security_settings() {
        let mut config = StreamsConfig::new("app", "b:9093");
        for (key, value) in [
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.username", "alice"),
            ("sasl.password", "secret"),
            // The main consumer's own prefix wins over the unprefixed key.
            ("main.consumer.sasl.username", "alice-consumer"),
            // Another client's prefix does not reach the main consumer.
            ("producer.sasl.username", "alice-producer"),
        ] {
            config.set(key, value).unwrap();
        }
        let connection = connection_config(&config, KafkaClient::MainConsumer).unwrap();
        assert_eq!(connection.bootstrap, "b:9093");
        let Security::SaslSsl(tls, sasl) = &connection.security else {
            panic!("{:?}", connection.security);
        };
        assert!(tls.options().verify_hostname);
        assert_eq!(sasl.mechanism(), kstreams_group::SaslMechanism::ScramSha512);
        assert_eq!(sasl.username(), "alice-consumer");
        assert!(!format!("{connection:?}").contains("secret"));

        let plain = StreamsConfig::new("app", "b:9092");
        let connection = connection_config(&plain, KafkaClient::MainConsumer).unwrap();
        assert!(matches!(connection.security, Security::Plaintext));

        let mut kerberos = StreamsConfig::new("app", "b:9092");
        kerberos.set("security.protocol", "SASL_PLAINTEXT").unwrap();
        kerberos.set("sasl.mechanism", "GSSAPI").unwrap();
        let error = connection_config(&kerberos, KafkaClient::MainConsumer).unwrap_err();
        assert!(error.to_string().contains("GSSAPI"), "{error}");
    }

    #[test]
    fn a_new_assignment_revokes_what_left_then_assigns_what_came_then_reports() {
        let mut m = membership();
        let mut changes = Vec::new();
        m.assigned(assignment(&[("0", 0), ("1", 0)], 1), &mut changes);
        assert_eq!(
            changes,
            [
                MemberChange::Assign(vec![p("app-by-word-repartition", 0), p("words", 0)]),
                MemberChange::Report(assignment(&[("0", 0), ("1", 0)], 1)),
            ]
        );
        let mut changes = Vec::new();
        let mut with_standby = assignment(&[("0", 1), ("1", 0)], 2);
        with_standby.standby = [TaskId::new("0", 0)].into_iter().collect();
        with_standby.warmup = [TaskId::new("1", 1)].into_iter().collect();
        m.assigned(with_standby.clone(), &mut changes);
        let dsl = |s: u32, p: i32| kstreams_dsl::TaskId {
            subtopology: s,
            partition: p,
        };
        assert_eq!(
            changes,
            [
                MemberChange::Revoke {
                    partitions: vec![p("words", 0)],
                    lost: false
                },
                MemberChange::Assign(vec![p("words", 1)]),
                // Standby and warm-up tasks are run, and reported as owned.
                MemberChange::AddStandbys(vec![dsl(0, 0), dsl(1, 1)]),
                MemberChange::Report(with_standby),
            ]
        );
        // The warm-up task becomes active here: its standby closes first
        // (promoted), then its partitions are assigned; the standby that is
        // no longer asked for goes too.
        let mut changes = Vec::new();
        m.assigned(assignment(&[("0", 1), ("1", 0), ("1", 1)], 3), &mut changes);
        assert_eq!(
            changes,
            [
                MemberChange::RemoveStandbys {
                    tasks: vec![dsl(0, 0)],
                    promoted: false
                },
                MemberChange::RemoveStandbys {
                    tasks: vec![dsl(1, 1)],
                    promoted: true
                },
                MemberChange::Assign(vec![p("app-by-word-repartition", 1)]),
                MemberChange::Report(assignment(&[("0", 1), ("1", 0), ("1", 1)], 3)),
            ]
        );
    }
}
