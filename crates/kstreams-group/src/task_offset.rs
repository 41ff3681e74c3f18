//! A task's changelog offset, as members report them for warm-up decisions.

use crate::task::TaskId;

/// The summed changelog offset of one task's stores: how far its local state
/// is (`TaskOffsets`) or how far the changelogs reach (`TaskEndOffsets`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskOffset {
    /// The task.
    pub task: TaskId,
    /// The offset, summed over the task's changelog partitions.
    pub offset: i64,
}

impl TaskOffset {
    pub(crate) fn to_wire(
        &self,
    ) -> kacrab_protocol::generated::streams_group_heartbeat_request::TaskOffset {
        kacrab_protocol::generated::streams_group_heartbeat_request::TaskOffset {
            subtopology_id: self.task.subtopology.clone().into(),
            partition: self.task.partition,
            offset: self.offset,
            ..Default::default()
        }
    }
}
