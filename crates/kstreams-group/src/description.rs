//! A streams group as StreamsGroupDescribe shows it (what
//! `kafka-streams-groups.sh --describe` prints).

use kacrab_protocol::generated::streams_group_describe_response as wire;

use crate::assignment::{Assignment, Endpoint};
use crate::task::{TaskId, Tasks};
use crate::task_offset::TaskOffset;

/// One streams group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    /// The group id (`application.id`).
    pub group_id: String,
    /// `Empty`, `NotReady`, `Assigning`, `Reconciling`, `Stable` or `Dead`.
    pub state: String,
    /// The group epoch (bumped by every membership or topology change).
    pub group_epoch: i32,
    /// The epoch of the latest target assignment.
    pub assignment_epoch: i32,
    /// The registered topology's epoch, if a topology is registered.
    pub topology_epoch: Option<i32>,
    /// The members.
    pub members: Vec<MemberDescription>,
}

/// One member of a streams group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    /// The member id.
    pub member_id: String,
    /// Its member epoch.
    pub member_epoch: i32,
    /// `group.instance.id` of a static member.
    pub instance_id: Option<String>,
    /// `client.id`.
    pub client_id: String,
    /// The client's address as the broker saw it.
    pub client_host: String,
    /// The application instance it belongs to.
    pub process_id: String,
    /// Its `application.server`.
    pub user_endpoint: Option<Endpoint>,
    /// The changelog offsets it last reported per task.
    pub task_offsets: Vec<TaskOffset>,
    /// The changelog end offsets it last reported per task.
    pub task_end_offsets: Vec<TaskOffset>,
    /// The tasks it owns now.
    pub assignment: Assignment,
    /// The tasks it is to own once revocations elsewhere finish.
    pub target_assignment: Assignment,
}

impl GroupDescription {
    pub(crate) fn from_wire(group: wire::DescribedGroup) -> GroupDescription {
        GroupDescription {
            group_id: group.group_id.as_str().to_owned(),
            state: group.group_state.as_str().to_owned(),
            group_epoch: group.group_epoch,
            assignment_epoch: group.assignment_epoch,
            topology_epoch: group.topology.map(|topology| topology.epoch),
            members: group.members.into_iter().map(member_from_wire).collect(),
        }
    }
}

fn member_from_wire(member: wire::Member) -> MemberDescription {
    MemberDescription {
        member_id: member.member_id.as_str().to_owned(),
        member_epoch: member.member_epoch,
        instance_id: member.instance_id.map(|id| id.as_str().to_owned()),
        client_id: member.client_id.as_str().to_owned(),
        client_host: member.client_host.as_str().to_owned(),
        process_id: member.process_id.as_str().to_owned(),
        user_endpoint: member.user_endpoint.map(|endpoint| Endpoint {
            host: endpoint.host.as_str().to_owned(),
            port: endpoint.port,
        }),
        task_offsets: member
            .task_offsets
            .into_iter()
            .map(offset_from_wire)
            .collect(),
        task_end_offsets: member
            .task_end_offsets
            .into_iter()
            .map(offset_from_wire)
            .collect(),
        assignment: assignment_from_wire(member.assignment),
        target_assignment: assignment_from_wire(member.target_assignment),
    }
}

fn offset_from_wire(offset: wire::TaskOffset) -> TaskOffset {
    TaskOffset {
        task: TaskId::new(offset.subtopology_id.as_str(), offset.partition),
        offset: offset.offset,
    }
}

fn assignment_from_wire(assignment: wire::Assignment) -> Assignment {
    Assignment {
        active: tasks_from_wire(assignment.active_tasks),
        standby: tasks_from_wire(assignment.standby_tasks),
        warmup: tasks_from_wire(assignment.warmup_tasks),
        generation: 0,
    }
}

fn tasks_from_wire(groups: Vec<wire::TaskIds>) -> Tasks {
    Tasks::from_groups(
        groups
            .into_iter()
            .map(|group| (group.subtopology_id.as_str().to_owned(), group.partitions)),
    )
}
