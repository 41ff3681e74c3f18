//! `KafkaStreams::close_with`: Kafka Streams' `close(CloseOptions)` (KIP-812,
//! and KIP-1153's `CloseOptions` of Kafka 4.1+), a timeout and whether the
//! stream threads leave the consumer group.

use std::time::Duration;

use super::super::config::{GroupProtocol, KafkaClient, StreamsConfig};
use super::KafkaStreams;

/// What the stream threads do about their group membership when the
/// instance closes: Kafka Streams' `CloseOptions.GroupMembershipOperation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GroupMembershipOperation {
    /// What each protocol does by default: under `group.protocol=streams`
    /// a dynamic member leaves and a static one (`group.instance.id`) stays;
    /// under the classic protocol Kafka Streams' members stay.
    #[default]
    Default,
    /// Every member leaves, static ones too: their tasks move to the other
    /// instances at once. For an instance that is scaled down for good.
    LeaveGroup,
    /// Every member stays: its tasks wait for it (or for the session
    /// timeout). For a restart that comes back soon.
    RemainInGroup,
}

/// How [`KafkaStreams::close_with`] closes: Kafka Streams' `CloseOptions`.
///
/// ```
/// use std::time::Duration;
/// use kstreams_runtime::kafka::{CloseOptions, GroupMembershipOperation};
///
/// let options = CloseOptions::timeout(Duration::from_secs(30))
///     .with_group_membership_operation(GroupMembershipOperation::LeaveGroup);
/// # let _ = options;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CloseOptions {
    /// `None`: no limit, as Kafka Streams' default `Long.MAX_VALUE` ms.
    pub(crate) timeout: Option<Duration>,
    pub(crate) operation: GroupMembershipOperation,
}

impl CloseOptions {
    /// Close within `timeout`, the membership operation by default.
    pub fn timeout(timeout: Duration) -> Self {
        Self::default().with_timeout(timeout)
    }

    /// Close with `operation`, without a time limit.
    pub fn group_membership_operation(operation: GroupMembershipOperation) -> Self {
        Self::default().with_group_membership_operation(operation)
    }

    /// These options with `timeout`.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// These options with `operation`.
    pub fn with_group_membership_operation(mut self, operation: GroupMembershipOperation) -> Self {
        self.operation = operation;
        self
    }
}

/// Whether the stream threads, as they end, leave the group: what the
/// group member does today when its thread ends (see
/// `thread/membership.rs`, `Membership::leave`).
impl GroupMembershipOperation {
    /// The streams group member's counterpart.
    pub(crate) fn for_member(self) -> kstreams_group::LeaveOperation {
        match self {
            Self::Default => kstreams_group::LeaveOperation::Default,
            Self::LeaveGroup => kstreams_group::LeaveOperation::LeaveGroup,
            Self::RemainInGroup => kstreams_group::LeaveOperation::RemainInGroup,
        }
    }
}

fn threads_leave(config: &StreamsConfig) -> (bool, bool) {
    let is_static = config
        .client_settings(KafkaClient::MainConsumer)
        .contains_key("group.instance.id");
    // The streams group member leaves with epoch -1 when dynamic and -2
    // (staying) when static; the classic and KIP-848 consumers unsubscribe,
    // which makes librdkafka leave for static members too.
    let leaves = config.group_protocol() != GroupProtocol::Streams || !is_static;
    (is_static, leaves)
}

/// Whether `operation` asks the members to leave, as Kafka Streams 4.4's
/// `StreamThread#completeShutdown` maps it onto the consumer's close.
fn operation_leaves(
    operation: GroupMembershipOperation,
    protocol: GroupProtocol,
    is_static: bool,
) -> bool {
    match operation {
        GroupMembershipOperation::LeaveGroup => true,
        GroupMembershipOperation::RemainInGroup => false,
        GroupMembershipOperation::Default => protocol == GroupProtocol::Streams && !is_static,
    }
}

impl KafkaStreams {
    /// Stops the instance as [`close`](Self::close) does, with `options`:
    /// Kafka Streams' `KafkaStreams#close(CloseOptions)`. Each stream thread
    /// commits and closes its tasks; this waits up to the options' timeout
    /// (without one, until every thread has stopped) and returns whether all
    /// stopped in time. A second call after a shutdown began only waits.
    ///
    /// The membership operation says whether the threads leave the group
    /// ([`GroupMembershipOperation`]); it matters for static members
    /// (`consumer.group.instance.id`): leaving moves their tasks to the
    /// other instances at once (a scale-down), staying keeps the tasks
    /// waiting for the member's return (a rolling restart).
    ///
    /// Under `group.protocol=streams` every operation is honoured: by
    /// default a dynamic member leaves and a static one stays (Kafka
    /// Streams' default); `LeaveGroup` makes a static member leave for good
    /// (epoch -1) and `RemainInGroup` a dynamic one stop heartbeating
    /// without leaving. Under the classic and KIP-848 protocols every
    /// member leaves (it unsubscribes through librdkafka; Kafka Streams'
    /// classic members stay by default): when
    /// [`LeaveGroup`](GroupMembershipOperation::LeaveGroup) or
    /// [`RemainInGroup`](GroupMembershipOperation::RemainInGroup) asks
    /// otherwise there, a warning says what happens instead.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use kstreams_dsl::StreamsBuilder;
    /// use kstreams_runtime::kafka::{CloseOptions, GroupMembershipOperation, KafkaStreams, StreamsConfig};
    ///
    /// let builder = StreamsBuilder::new();
    /// builder.stream::<String, String>("in").to("out");
    /// let mut config = StreamsConfig::new("app", "localhost:9092");
    /// config.set("consumer.group.instance.id", "pod-7").unwrap();
    /// let mut app = KafkaStreams::new(builder.build().unwrap(), config);
    /// app.start().unwrap();
    /// // Scaling down: hand the tasks over now, not after the session timeout.
    /// let stopped = app.close_with(
    ///     CloseOptions::timeout(Duration::from_secs(30))
    ///         .with_group_membership_operation(GroupMembershipOperation::LeaveGroup),
    /// );
    /// assert!(stopped);
    /// ```
    pub fn close_with(&mut self, options: CloseOptions) -> bool {
        let protocol = self.config.group_protocol();
        for thread in &self.threads {
            self.instance
                .leave_operations
                .set(&thread.name, options.operation.for_member());
        }
        let (is_static, leaves) = threads_leave(&self.config);
        let asked = operation_leaves(options.operation, protocol, is_static);
        // The default is what the threads have always done (see above).
        let explicit = options.operation != GroupMembershipOperation::Default;
        if protocol != GroupProtocol::Streams
            && explicit
            && asked != leaves
            && !self.threads.is_empty()
        {
            log::warn!(
                "close: {:?} asks the {} stream threads to {} the group, but they {}: kstreams \
                 chooses a thread's membership operation at close under group.protocol=streams \
                 only",
                options.operation,
                if is_static { "static" } else { "dynamic" },
                if asked { "leave" } else { "stay in" },
                if leaves {
                    "leave it (their tasks move now)"
                } else {
                    "stay (their tasks wait for the session timeout)"
                },
            );
        }
        self.stop_and_wait(options.timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_leaves_only_for_dynamic_members_of_a_streams_group() {
        use GroupMembershipOperation::*;
        for protocol in [GroupProtocol::Streams, GroupProtocol::Classic] {
            for is_static in [false, true] {
                assert!(operation_leaves(LeaveGroup, protocol, is_static));
                assert!(!operation_leaves(RemainInGroup, protocol, is_static));
            }
        }
        assert!(operation_leaves(Default, GroupProtocol::Streams, false));
        assert!(!operation_leaves(Default, GroupProtocol::Streams, true));
        assert!(!operation_leaves(Default, GroupProtocol::Classic, false));
        assert!(!operation_leaves(Default, GroupProtocol::Classic, true));
    }

    #[test]
    fn options_build_as_kafka_streams_close_options() {
        let options =
            CloseOptions::group_membership_operation(GroupMembershipOperation::LeaveGroup)
                .with_timeout(Duration::from_secs(3));
        assert_eq!(options.timeout, Some(Duration::from_secs(3)));
        assert_eq!(options.operation, GroupMembershipOperation::LeaveGroup);
        assert_eq!(CloseOptions::default().timeout, None);
        assert_eq!(
            CloseOptions::timeout(Duration::ZERO).operation,
            GroupMembershipOperation::Default
        );
    }
}
