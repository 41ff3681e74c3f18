//! What the broker assigns a member: active, standby and warm-up tasks; and,
//! for interactive queries, which partitions every member's endpoint serves.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use kacrab_protocol::generated::streams_group_heartbeat_response as wire;

use crate::task::Tasks;

/// A member's tasks by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assignment {
    /// Tasks to process.
    pub active: Tasks,
    /// Tasks whose state to keep current from the changelogs, for failover.
    pub standby: Tasks,
    /// Tasks whose state to restore before the broker moves them here as
    /// active (like standbys, until their offsets say they have caught up).
    pub warmup: Tasks,
    /// Which of the member's assignments this is: it counts up with every
    /// [`MemberEvent::Assigned`](crate::MemberEvent::Assigned) and with every
    /// loss of the tasks (fencing, an expired poll deadline), so that a
    /// [`report_owned`](crate::StreamsGroupMember::report_owned) answering an
    /// assignment that has since been replaced or lost is ignored, as Kafka
    /// drops an out-of-date reconciliation. 0 in a group description.
    pub generation: u64,
}

impl Assignment {
    /// Whether no task of any kind is assigned.
    pub fn is_empty(&self) -> bool {
        self.active.is_empty() && self.standby.is_empty() && self.warmup.is_empty()
    }

    /// Whether both hold the same tasks, whatever their generations.
    pub fn same_tasks(&self, other: &Assignment) -> bool {
        self.active == other.active && self.standby == other.standby && self.warmup == other.warmup
    }
}

/// The wire's `TaskIds` list as a set.
pub(crate) fn tasks_from_wire(groups: Vec<wire::TaskIds>) -> Tasks {
    Tasks::from_groups(
        groups
            .into_iter()
            .map(|group| (group.subtopology_id.as_str().to_owned(), group.partitions)),
    )
}

/// `application.server`: where a member answers interactive queries.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Endpoint {
    /// Host name or address.
    pub host: String,
    /// Port.
    pub port: u16,
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// Topic name to partitions.
pub type TopicPartitions = BTreeMap<String, BTreeSet<i32>>;

/// The partitions one endpoint's tasks materialize.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointPartitions {
    /// The endpoint.
    pub endpoint: Endpoint,
    /// Partitions of its active tasks.
    pub active: TopicPartitions,
    /// Partitions of its standby tasks.
    pub standby: TopicPartitions,
}

/// Every endpoint of the group with its partitions, as of one epoch: what
/// `query_metadata_for_key` and `streams_metadata_for_store` are built from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Endpoints {
    /// The broker's endpoint information epoch this picture is of.
    pub epoch: i32,
    /// One entry per endpoint.
    pub hosts: Vec<EndpointPartitions>,
}

impl Endpoints {
    pub(crate) fn from_wire(epoch: i32, entries: Vec<wire::EndpointToPartitions>) -> Endpoints {
        let hosts = entries
            .into_iter()
            .map(|entry| EndpointPartitions {
                endpoint: Endpoint {
                    host: entry.user_endpoint.host.as_str().to_owned(),
                    port: entry.user_endpoint.port,
                },
                active: partitions_from_wire(entry.active_partitions),
                standby: partitions_from_wire(entry.standby_partitions),
            })
            .collect();
        Endpoints { epoch, hosts }
    }
}

fn partitions_from_wire(topics: Vec<wire::TopicPartition>) -> TopicPartitions {
    let mut map = TopicPartitions::new();
    for topic in topics {
        map.entry(topic.topic.as_str().to_owned())
            .or_default()
            .extend(topic.partitions);
    }
    map
}
