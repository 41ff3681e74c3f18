//! The group's status codes a heartbeat answer may carry.

/// A condition of the whole group that keeps it from running as asked. The
/// broker reports it on every heartbeat until it clears.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupStatus {
    /// The member's topology epoch is older than the group's.
    StaleTopology(String),
    /// Source topics are missing (or a pattern matches none); no task of the
    /// affected sub-topologies is assigned until they exist.
    MissingSourceTopics(String),
    /// Co-partitioned topics differ in partition count, or a changelog's
    /// partition count does not match its sub-topology.
    IncorrectlyPartitionedTopics(String),
    /// Internal topics are missing; the broker tries to create them.
    MissingInternalTopics(String),
    /// A member asked the whole application to shut down.
    ShutdownApplication(String),
    /// The broker has not computed an assignment yet (it batches them).
    AssignmentDelayed(String),
    /// Client tags that rack-aware standby placement needs are missing (sent
    /// from heartbeat v1 on).
    MissingClientTags(String),
    /// A code this client does not know yet.
    Unknown {
        /// The code.
        code: i8,
        /// The broker's detail.
        detail: String,
    },
}

impl GroupStatus {
    /// Whether the broker cannot configure the group's topology while this
    /// status holds (so it assigns no task of it).
    pub fn blocks_topology(&self) -> bool {
        matches!(
            self,
            GroupStatus::StaleTopology(_)
                | GroupStatus::MissingSourceTopics(_)
                | GroupStatus::IncorrectlyPartitionedTopics(_)
                | GroupStatus::MissingInternalTopics(_)
        )
    }

    /// The status for `code` with the broker's `detail` (codes from
    /// StreamsGroupHeartbeatResponse.json of Kafka 4.4).
    pub(crate) fn from_code(code: i8, detail: String) -> GroupStatus {
        match code {
            0 => GroupStatus::StaleTopology(detail),
            1 => GroupStatus::MissingSourceTopics(detail),
            2 => GroupStatus::IncorrectlyPartitionedTopics(detail),
            3 => GroupStatus::MissingInternalTopics(detail),
            4 => GroupStatus::ShutdownApplication(detail),
            5 => GroupStatus::AssignmentDelayed(detail),
            6 => GroupStatus::MissingClientTags(detail),
            code => GroupStatus::Unknown { code, detail },
        }
    }
}
