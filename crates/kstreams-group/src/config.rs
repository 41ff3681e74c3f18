//! A member's identity and settings: what it tells the group about itself.

use std::collections::BTreeMap;
use std::time::Duration;

use uuid::Uuid;

use crate::assignment::Endpoint;
use crate::connection::ConnectionConfig;

/// How one member joins a streams group.
#[derive(Debug, Clone)]
pub struct MemberConfig {
    /// Brokers and security.
    pub connection: ConnectionConfig,
    /// The group: Kafka Streams' `application.id`.
    pub group_id: String,
    /// The application instance (one per process, shared by its stream
    /// threads; Kafka Streams keeps it in the state directory so that it
    /// survives restarts).
    pub process_id: Uuid,
    /// `group.instance.id` for static membership: a member that comes back
    /// under the same id within the session timeout keeps its tasks.
    pub instance_id: Option<String>,
    /// `client.rack`, for rack-aware assignment.
    pub rack_id: Option<String>,
    /// `application.server`: where this instance answers interactive queries.
    /// Sent from the heartbeat after the first answer that shows the group's
    /// topology configured, then with every full heartbeat (rejoins too),
    /// not with the very first join: Kafka 4.4.0's coordinator fails a
    /// heartbeat that carries an endpoint while the group's topology is not
    /// configured yet (a NoSuchElementException in EndpointToPartitionsManager,
    /// seen on the real broker for a new application's first join).
    pub user_endpoint: Option<Endpoint>,
    /// `client.tag.*`, for rack-aware standby placement.
    pub client_tags: BTreeMap<String, String>,
    /// How long the broker waits for the member to give up revoked tasks
    /// (Kafka Streams sends `max.poll.interval.ms`, 5 minutes by default).
    /// An application slower than this to
    /// [`report_owned`](crate::StreamsGroupMember::report_owned) after a
    /// revocation is fenced: the broker takes all its tasks
    /// ([`MemberEvent::TasksLost`](crate::MemberEvent::TasksLost)).
    pub rebalance_timeout: Duration,
    /// `max.poll.interval.ms`: the longest the application may go without
    /// [`record_poll`](crate::StreamsGroupMember::record_poll) (Kafka's
    /// consumer poll). Past it the member takes the application for stuck:
    /// it leaves the group (epoch -1, a static member too, so that the tasks
    /// move), reports [`MemberEvent::TasksLost`](crate::MemberEvent::TasksLost),
    /// and joins again at the next `record_poll`. 5 minutes, as Kafka.
    pub max_poll_interval: Duration,
    /// The offset sums of the tasks whose state this member has at hand
    /// (on disk, from their checkpoints), sent with the join as Kafka
    /// Streams does, so that the broker's assignor can prefer this member
    /// for them; later ones go with
    /// [`report_task_offsets`](crate::StreamsGroupMember::report_task_offsets).
    pub task_offsets: Vec<crate::TaskOffset>,
}

impl MemberConfig {
    /// A dynamic member of `group_id` with Kafka's defaults.
    pub fn new(
        connection: ConnectionConfig,
        group_id: impl Into<String>,
        process_id: Uuid,
    ) -> Self {
        MemberConfig {
            connection,
            group_id: group_id.into(),
            process_id,
            instance_id: None,
            rack_id: None,
            user_endpoint: None,
            client_tags: BTreeMap::new(),
            rebalance_timeout: Duration::from_secs(300),
            max_poll_interval: Duration::from_secs(300),
            task_offsets: Vec::new(),
        }
    }
}
