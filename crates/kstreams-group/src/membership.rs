//! The member's side of the streams group protocol as a state machine without
//! I/O: which heartbeat to send next, and what an answer means (epochs,
//! assignment, fencing, leaving). The heartbeat loop drives it; tests drive it
//! with made-up answers.

use std::time::{Duration, Instant};

use kacrab_protocol::generated::streams_group_heartbeat_request::{
    self as request, StreamsGroupHeartbeatRequestData,
};
use kacrab_protocol::generated::streams_group_heartbeat_response::StreamsGroupHeartbeatResponseData;
use kacrab_protocol::generated::ErrorCode;
use kacrab_protocol::KafkaString;
use uuid::Uuid;

use crate::assignment::{tasks_from_wire, Assignment, Endpoints};
use crate::config::MemberConfig;
use crate::error::{Error, Result};
use crate::status::GroupStatus;
use crate::task::Tasks;
use crate::task_offset::TaskOffset;
use crate::topology::{key_values, Topology};
use crate::wire::Rpc;

/// The epoch that asks to join (or rejoin after fencing).
const JOIN_EPOCH: i32 = 0;
/// The epoch that leaves the group for good.
const LEAVE_EPOCH: i32 = -1;
/// The epoch with which a static member leaves for a while, keeping its tasks
/// for its instance id until the session times out.
const STATIC_LEAVE_EPOCH: i32 = -2;
/// The endpoint information epoch of a member that has no endpoint picture
/// yet (Kafka's client starts there too): any group epoch differs from it, so
/// the first answer carries the picture.
const NO_ENDPOINT_EPOCH: i32 = -1;
/// Until the first answer says otherwise (Kafka's default heartbeat interval).
const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(5);

/// Where a member is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// Its next heartbeat joins with epoch 0 (first, or again after fencing).
    Joining,
    /// A member of the group with a positive epoch.
    Stable,
    /// The application missed its poll deadline
    /// ([`MemberConfig::max_poll_interval`](crate::MemberConfig::max_poll_interval)):
    /// the member left the group (epoch -1) and lost its tasks; it rejoins
    /// once the application polls again.
    Stale,
    /// Its last heartbeat left the group.
    Leaving,
    /// It has left.
    Left,
    /// The broker refused it for good (see the member's error).
    Failed,
}

/// What changed for the application after a heartbeat answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberEvent {
    /// The broker's assignment for this member is now this. Tasks no longer in
    /// it are to be closed (clean), new ones to be created; report what is
    /// then owned so that the broker can move tasks on.
    Assigned(Assignment),
    /// Every task the member had is someone else's now: close them without
    /// committing. Comes when the broker fenced (or forgot) the member, which
    /// then rejoins; when the application missed its poll deadline, the
    /// member left and rejoins at the next poll; and before the event stream
    /// ends on a fatal error.
    TasksLost,
    /// Which endpoint serves which partitions, for interactive queries.
    EndpointsChanged(Endpoints),
    /// The group's conditions (missing topics, say); empty when none.
    StatusChanged(Vec<GroupStatus>),
    /// The broker refused a heartbeat with TOPIC_AUTHORIZATION_FAILED (the
    /// member may not describe or create a topic of its topology); the
    /// broker's message. The member stays and heartbeats again after a
    /// pause, as Kafka's client does, since an ACL change can lift it.
    TopicAuthorizationFailed(String),
}

/// What a member does with its group membership when it closes: Kafka's
/// `CloseOptions.GroupMembershipOperation` (KIP-1092).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LeaveOperation {
    /// A dynamic member leaves; a static one (`group.instance.id`) keeps
    /// its tasks reserved until its session times out, for its restart.
    #[default]
    Default,
    /// Leaves for good, static or not: its tasks move at once.
    LeaveGroup,
    /// Stays in the group until its session times out, dynamic or not.
    RemainInGroup,
}

/// What the heartbeat loop does after an answer.
#[derive(Debug)]
pub(crate) enum Reaction {
    /// Accepted; heartbeat again after [`Membership::heartbeat_interval`].
    Continue(Vec<MemberEvent>),
    /// The coordinator is loading: try again soon.
    Retry,
    /// Not (or no longer) the coordinator: find it again.
    Rediscover,
    /// Fenced: the events say the tasks are lost; join again.
    Rejoin(Vec<MemberEvent>),
    /// Refused this time, and the application is to hear why; try again
    /// after a pause.
    Report(Vec<MemberEvent>),
    /// Refused for good; the events say the tasks are lost.
    Fatal(Error, Vec<MemberEvent>),
}

/// A point-in-time view of a member, for whoever watches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSnapshot {
    /// The member id this client generated.
    pub member_id: String,
    /// The member epoch the broker gave (0 before the first answer and
    /// while rejoining, -1 once out of the group).
    pub epoch: i32,
    /// The lifecycle state.
    pub state: MemberState,
    /// The broker's latest assignment for this member.
    pub assignment: Assignment,
    /// The latest endpoint picture.
    pub endpoints: Endpoints,
    /// The latest group conditions.
    pub statuses: Vec<GroupStatus>,
    /// The group's `acceptable.recovery.lag`: how far behind its changelogs
    /// a warm-up task may be and still count as caught up.
    pub acceptable_recovery_lag: i32,
    /// How often the broker wants task offsets
    /// ([`StreamsGroupMember::report_task_offsets`](crate::StreamsGroupMember::report_task_offsets)).
    pub task_offset_interval: Duration,
}

/// One member's protocol state.
pub(crate) struct Membership {
    group_id: String,
    member_id: String,
    process_id: Uuid,
    instance_id: Option<String>,
    rack_id: Option<String>,
    user_endpoint: Option<request::Endpoint>,
    client_tags: Vec<request::KeyValue>,
    rebalance_timeout_ms: i32,
    topology: request::Topology,
    state: MemberState,
    epoch: i32,
    /// Send every field, not only the changed ones: on joining, and after a
    /// failed request (the broker may not have seen the last changes).
    full: bool,
    /// Whether an answer has shown the group's topology configured (no
    /// missing or mis-partitioned topics).
    topology_configured: bool,
    /// Whether the broker has the user endpoint.
    endpoint_sent: bool,
    /// What the application reports it owns.
    owned: Assignment,
    /// The generation of the latest assignment handed out (or lost): a report
    /// of an older one is out of date.
    generation: u64,
    /// What the last heartbeat reported as owned.
    sent_owned: Option<Assignment>,
    assignment: Assignment,
    endpoints: Endpoints,
    statuses: Vec<GroupStatus>,
    heartbeat_interval: Duration,
    task_offset_interval: Duration,
    acceptable_recovery_lag: i32,
    pending_offsets: Option<(Vec<TaskOffset>, Vec<TaskOffset>)>,
    offsets_sent_at: Option<Instant>,
    shutdown_application: bool,
}

impl Membership {
    /// A member that has not joined yet; fails on a topology the broker would
    /// refuse.
    pub(crate) fn new(config: &MemberConfig, topology: &Topology) -> Result<Membership> {
        if config.group_id.is_empty() {
            return Err(Error::Config("the group id is empty".to_owned()));
        }
        let rebalance_timeout_ms = i32::try_from(config.rebalance_timeout.as_millis())
            .map_err(|_| Error::Config("the rebalance timeout is too long".to_owned()))?;
        Ok(Membership {
            group_id: config.group_id.clone(),
            member_id: Uuid::new_v4().to_string(),
            process_id: config.process_id,
            instance_id: config.instance_id.clone(),
            rack_id: config.rack_id.clone(),
            user_endpoint: config
                .user_endpoint
                .as_ref()
                .map(|endpoint| request::Endpoint {
                    host: endpoint.host.clone().into(),
                    port: endpoint.port,
                    ..Default::default()
                }),
            client_tags: key_values(&config.client_tags),
            rebalance_timeout_ms,
            topology: topology.to_wire()?,
            state: MemberState::Joining,
            epoch: JOIN_EPOCH,
            full: true,
            topology_configured: false,
            endpoint_sent: false,
            owned: Assignment::default(),
            generation: 0,
            sent_owned: None,
            assignment: Assignment::default(),
            endpoints: Endpoints {
                epoch: NO_ENDPOINT_EPOCH,
                hosts: Vec::new(),
            },
            statuses: Vec::new(),
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            task_offset_interval: Duration::ZERO,
            acceptable_recovery_lag: 0,
            // With the join, if there is state at hand: no end offsets yet.
            pending_offsets: (!config.task_offsets.is_empty())
                .then(|| (config.task_offsets.clone(), Vec::new())),
            offsets_sent_at: None,
            shutdown_application: false,
        })
    }

    pub(crate) fn member_id(&self) -> &str {
        &self.member_id
    }

    /// The member epoch as of the latest answer.
    pub(crate) fn epoch(&self) -> i32 {
        self.epoch
    }

    pub(crate) fn state(&self) -> MemberState {
        self.state
    }

    /// How long until the next regular heartbeat, as the broker asked.
    pub(crate) fn heartbeat_interval(&self) -> Duration {
        self.heartbeat_interval
    }

    /// The application owns `owned` now (after closing revoked tasks and
    /// creating assigned ones); the next heartbeat says so. A report answering
    /// an assignment that has since been replaced or lost is dropped, as
    /// Kafka drops an out-of-date reconciliation: after fencing the broker
    /// refuses a rejoin that claims tasks. Returns whether the broker has yet
    /// to hear the report.
    pub(crate) fn set_owned(&mut self, owned: Assignment) -> bool {
        if owned.generation < self.generation {
            log::debug!(
                "streams group {}: ignoring the ownership report of assignment {} (now {})",
                self.group_id,
                owned.generation,
                self.generation
            );
            return false;
        }
        self.owned = owned;
        self.owned_unreported()
    }

    /// Whether the broker has not yet heard what the application owns.
    pub(crate) fn owned_unreported(&self) -> bool {
        self.sent_owned
            .as_ref()
            .is_none_or(|sent| !sent.same_tasks(&self.owned))
    }

    /// Offsets to send once the broker's task offset interval has passed.
    pub(crate) fn set_task_offsets(&mut self, offsets: Vec<TaskOffset>, end: Vec<TaskOffset>) {
        self.pending_offsets = Some((offsets, end));
    }

    /// Asks every member of the application to shut down (Kafka Streams'
    /// `SHUTDOWN_APPLICATION` uncaught-exception response).
    pub(crate) fn request_shutdown_application(&mut self) {
        self.shutdown_application = true;
    }

    /// The next heartbeat. Fields the broker already has are left out
    /// (null) unless the request is a full one.
    pub(crate) fn heartbeat(&mut self, now: Instant) -> StreamsGroupHeartbeatRequestData {
        let full = self.full;
        let joining = self.epoch == JOIN_EPOCH;
        let mut request = StreamsGroupHeartbeatRequestData {
            group_id: self.group_id.clone().into(),
            member_id: self.member_id.clone().into(),
            member_epoch: self.epoch,
            endpoint_information_epoch: self.endpoints.epoch,
            shutdown_application: self.shutdown_application,
            ..Default::default()
        };
        // Every heartbeat names the instance, as Kafka's client does: the
        // broker checks it against the member id of a static member.
        request.instance_id = self.instance_id.clone().map(KafkaString::from);
        if full {
            request.rack_id = self.rack_id.clone().map(KafkaString::from);
            request.rebalance_timeout_ms = self.rebalance_timeout_ms;
            request.process_id = Some(self.process_id.to_string().into());
            request.client_tags = Some(self.client_tags.clone());
        }
        // Kafka 4.4.0's coordinator fails the whole heartbeat (an unknown
        // server error from a NoSuchElementException in
        // EndpointToPartitionsManager; the group not even created) when it
        // has to send the endpoint picture while the group's topology is not
        // configured yet, as on a new application whose internal topics it is
        // about to create. So the endpoint goes out only once an answer has
        // shown the topology ready; from then on the group has a configured
        // topology, and every full heartbeat (a rejoin too) carries it.
        if self.topology_configured && (full || !self.endpoint_sent) {
            request.user_endpoint = self.user_endpoint.clone().map(Box::new);
            self.endpoint_sent = true;
        }
        if joining {
            // Joining owns nothing, whatever the application said before: the
            // broker refuses a join that claims tasks (INVALID_REQUEST).
            request.topology = Some(Box::new(self.topology.clone()));
            request.active_tasks = Some(Vec::new());
            request.standby_tasks = Some(Vec::new());
            request.warmup_tasks = Some(Vec::new());
            self.sent_owned = Some(Assignment::default());
        } else if full || self.owned_unreported() {
            request.active_tasks = Some(tasks_to_wire(&self.owned.active));
            request.standby_tasks = Some(tasks_to_wire(&self.owned.standby));
            request.warmup_tasks = Some(tasks_to_wire(&self.owned.warmup));
            self.sent_owned = Some(self.owned.clone());
        }
        let offsets_due = self
            .offsets_sent_at
            .is_none_or(|sent| now.duration_since(sent) >= self.task_offset_interval);
        if offsets_due {
            if let Some((offsets, end)) = self.pending_offsets.take() {
                request.task_offsets = Some(offsets.iter().map(TaskOffset::to_wire).collect());
                request.task_end_offsets = Some(end.iter().map(TaskOffset::to_wire).collect());
                self.offsets_sent_at = Some(now);
            }
        }
        self.full = false;
        request
    }

    /// The heartbeat that leaves, as `operation` asks: by default epoch -1,
    /// or -2 for a static member, which keeps its tasks reserved for its
    /// instance id until the session ends; -1 for a static member too when
    /// it leaves for good; none when a dynamic member remains in the group
    /// (its session ends it, as Kafka's client does on `REMAIN_IN_GROUP`).
    pub(crate) fn leave(
        &mut self,
        operation: LeaveOperation,
    ) -> Option<StreamsGroupHeartbeatRequestData> {
        self.state = MemberState::Leaving;
        let epoch = match (operation, self.instance_id.is_some()) {
            (LeaveOperation::LeaveGroup, _) | (LeaveOperation::Default, false) => LEAVE_EPOCH,
            (LeaveOperation::Default | LeaveOperation::RemainInGroup, true) => STATIC_LEAVE_EPOCH,
            (LeaveOperation::RemainInGroup, false) => return None,
        };
        Some(StreamsGroupHeartbeatRequestData {
            group_id: self.group_id.clone().into(),
            member_id: self.member_id.clone().into(),
            member_epoch: epoch,
            instance_id: self.instance_id.clone().map(KafkaString::from),
            ..Default::default()
        })
    }

    /// The application missed its poll deadline: the heartbeat that leaves
    /// with epoch -1 even for a static member (Kafka's client does the same,
    /// so that the tasks of a stuck application move at once) and the events
    /// that lose the tasks. The member is [`MemberState::Stale`] until
    /// [`rejoin`](Self::rejoin).
    pub(crate) fn leave_stale(&mut self) -> (StreamsGroupHeartbeatRequestData, Vec<MemberEvent>) {
        let request = StreamsGroupHeartbeatRequestData {
            group_id: self.group_id.clone().into(),
            member_id: self.member_id.clone().into(),
            member_epoch: LEAVE_EPOCH,
            instance_id: self.instance_id.clone().map(KafkaString::from),
            ..Default::default()
        };
        self.state = MemberState::Stale;
        self.epoch = LEAVE_EPOCH;
        (request, self.lose_tasks())
    }

    /// The application polls again after [`leave_stale`](Self::leave_stale):
    /// the next heartbeat joins with epoch 0.
    pub(crate) fn rejoin(&mut self) {
        self.state = MemberState::Joining;
        self.epoch = JOIN_EPOCH;
        self.on_request_failed();
    }

    /// The heartbeat never got an answer: the broker may have missed what it
    /// said, so the next one says everything again.
    pub(crate) fn on_request_failed(&mut self) {
        self.full = true;
        self.sent_owned = None;
        self.endpoint_sent = false;
    }

    /// What an answer means.
    pub(crate) fn on_response(&mut self, response: StreamsGroupHeartbeatResponseData) -> Reaction {
        let code = ErrorCode::from(response.error_code);
        if self.state == MemberState::Leaving {
            // Whatever the broker says, this member is gone from its view:
            // left, unknown, or fenced.
            self.state = MemberState::Left;
            self.epoch = LEAVE_EPOCH;
            return Reaction::Continue(Vec::new());
        }
        if self.state == MemberState::Stale {
            // The answer to leaving for a missed poll: out, whatever it says.
            return Reaction::Continue(Vec::new());
        }
        match code {
            ErrorCode::None => match self.accept(response) {
                Ok(events) => Reaction::Continue(events),
                Err(error) => self.fail(error),
            },
            ErrorCode::CoordinatorLoadInProgress => {
                self.on_request_failed();
                Reaction::Retry
            }
            ErrorCode::NotCoordinator | ErrorCode::CoordinatorNotAvailable => {
                self.on_request_failed();
                Reaction::Rediscover
            }
            ErrorCode::UnknownMemberId | ErrorCode::FencedMemberEpoch => {
                log::info!(
                    "streams group {}: member {} {code:?} at epoch {}; rejoining",
                    self.group_id,
                    self.member_id,
                    self.epoch
                );
                Reaction::Rejoin(self.fenced())
            }
            ErrorCode::TopicAuthorizationFailed => {
                let message = response.error_message.map(|m| m.as_str().to_owned());
                log::warn!(
                    "streams group {}: member {} not authorized for a topic: {}",
                    self.group_id,
                    self.member_id,
                    message.as_deref().unwrap_or("")
                );
                self.on_request_failed();
                let message = message.unwrap_or_else(|| format!("{code:?}"));
                Reaction::Report(vec![MemberEvent::TopicAuthorizationFailed(message)])
            }
            ErrorCode::UnreleasedInstanceId | ErrorCode::FencedInstanceId => {
                let error = self.instance_id_refused(code, response.error_code);
                self.fail(error)
            }
            _ => {
                let message = response.error_message.map(|m| m.as_str().to_owned());
                self.fail(Error::broker(
                    StreamsGroupHeartbeatRequestData::NAME,
                    response.error_code,
                    message,
                ))
            }
        }
    }

    /// The error for a refused `group.instance.id`. The broker's semantics
    /// (Kafka 4.4's GroupMetadataManager): a static member joining (epoch 0,
    /// any member id) replaces the member that holds its instance id only
    /// if that one left with epoch -2; otherwise it is refused with
    /// UNRELEASED_INSTANCE_ID until the holder's session times out. A
    /// member whose instance id a newer member took over is refused with
    /// FENCED_INSTANCE_ID.
    fn instance_id_refused(&self, code: ErrorCode, raw: i16) -> Error {
        let instance_id = self.instance_id.clone().unwrap_or_default();
        let (name, reason, fix) = if code == ErrorCode::UnreleasedInstanceId {
            (
                "UnreleasedInstanceId",
                "is still held by another member that has not left the group (an instance \
                 that was killed or is still running)",
                "stop the other instance with this group.instance.id, or wait until its \
                 session times out (the group's streams.session.timeout.ms) and start again; \
                 a static member that closes leaves with epoch -2 and is taken over at once",
            )
        } else {
            (
                "FencedInstanceId",
                "was taken over by a newer member with the same id",
                "give every instance (and stream thread) its own group.instance.id",
            )
        };
        Error::InstanceId {
            group_id: self.group_id.clone(),
            instance_id,
            code: raw,
            name,
            reason,
            fix,
        }
    }

    /// Refused for good: the application hears that its tasks are lost
    /// before the member stops, as Kafka's client does on a fatal error.
    fn fail(&mut self, error: Error) -> Reaction {
        Reaction::Fatal(error, self.stop())
    }

    /// Stops for good on an error of the connection (a refused
    /// authentication or TLS handshake): the events that tell the
    /// application its tasks are lost.
    pub(crate) fn stop(&mut self) -> Vec<MemberEvent> {
        let events = self.lose_tasks();
        self.state = MemberState::Failed;
        events
    }

    fn accept(&mut self, response: StreamsGroupHeartbeatResponseData) -> Result<Vec<MemberEvent>> {
        // The broker sends all three task lists or none (none: unchanged);
        // Kafka's client refuses a mix as a broken answer.
        let lists = [
            response.active_tasks.is_some(),
            response.standby_tasks.is_some(),
            response.warmup_tasks.is_some(),
        ];
        if lists.contains(&true) && lists.contains(&false) {
            return Err(Error::Protocol {
                address: "the group coordinator".to_owned(),
                detail: format!(
                    "StreamsGroupHeartbeat answered some task lists but not all (active, standby, \
                     warm-up present: {lists:?})"
                ),
            });
        }
        let mut events = Vec::new();
        if !response.member_id.as_str().is_empty() {
            self.member_id = response.member_id.as_str().to_owned();
        }
        self.epoch = response.member_epoch;
        self.state = MemberState::Stable;
        if let Ok(ms) = u64::try_from(response.heartbeat_interval_ms) {
            if ms > 0 {
                self.heartbeat_interval = Duration::from_millis(ms);
            }
        }
        self.task_offset_interval =
            Duration::from_millis(u64::try_from(response.task_offset_interval_ms).unwrap_or(0));
        self.acceptable_recovery_lag = response.acceptable_recovery_lag;
        if let Some(statuses) = response.status {
            let statuses: Vec<GroupStatus> = statuses
                .into_iter()
                .map(|s| GroupStatus::from_code(s.status_code, s.status_detail.as_str().to_owned()))
                .collect();
            if statuses != self.statuses {
                self.statuses = statuses.clone();
                events.push(MemberEvent::StatusChanged(statuses));
            }
        }
        if !self.statuses.iter().any(GroupStatus::blocks_topology) {
            self.topology_configured = true;
        }
        // The broker sends the lists when they changed; null ones are unchanged.
        let current = &self.assignment;
        let assignment = Assignment {
            active: response
                .active_tasks
                .map(tasks_from_wire)
                .unwrap_or_else(|| current.active.clone()),
            standby: response
                .standby_tasks
                .map(tasks_from_wire)
                .unwrap_or_else(|| current.standby.clone()),
            warmup: response
                .warmup_tasks
                .map(tasks_from_wire)
                .unwrap_or_else(|| current.warmup.clone()),
            generation: current.generation,
        };
        if !assignment.same_tasks(&self.assignment) {
            self.generation += 1;
            let assignment = Assignment {
                generation: self.generation,
                ..assignment
            };
            self.assignment = assignment.clone();
            events.push(MemberEvent::Assigned(assignment));
        }
        if let Some(entries) = response.partitions_by_user_endpoint {
            let endpoints = Endpoints::from_wire(response.endpoint_information_epoch, entries);
            if endpoints != self.endpoints {
                self.endpoints = endpoints.clone();
                events.push(MemberEvent::EndpointsChanged(endpoints));
            }
        }
        Ok(events)
    }

    /// Fencing: the tasks are gone, the next heartbeat joins again with the
    /// same member id and epoch 0.
    fn fenced(&mut self) -> Vec<MemberEvent> {
        self.state = MemberState::Joining;
        self.epoch = JOIN_EPOCH;
        self.on_request_failed();
        self.lose_tasks()
    }

    /// Forgets the assignment and what the application owns; the event tells
    /// it, when it had any task.
    fn lose_tasks(&mut self) -> Vec<MemberEvent> {
        let had_tasks = !self.owned.is_empty() || !self.assignment.is_empty();
        self.generation += 1;
        self.owned = Assignment::default();
        self.assignment = Assignment::default();
        if had_tasks {
            vec![MemberEvent::TasksLost]
        } else {
            Vec::new()
        }
    }

    pub(crate) fn snapshot(&self) -> MemberSnapshot {
        MemberSnapshot {
            member_id: self.member_id.clone(),
            epoch: self.epoch,
            state: self.state,
            assignment: self.assignment.clone(),
            endpoints: self.endpoints.clone(),
            statuses: self.statuses.clone(),
            acceptable_recovery_lag: self.acceptable_recovery_lag,
            task_offset_interval: self.task_offset_interval,
        }
    }
}

#[cfg(test)]
#[path = "membership_tests.rs"]
mod tests;

fn tasks_to_wire(tasks: &Tasks) -> Vec<request::TaskIds> {
    tasks
        .groups()
        .map(|(subtopology, partitions)| request::TaskIds {
            subtopology_id: subtopology.to_owned().into(),
            partitions,
            ..Default::default()
        })
        .collect()
}
