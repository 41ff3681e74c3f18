//! Which group the stream threads' consumers join, and the consumer
//! settings each protocol allows: Kafka's `GroupProtocol` (`classic`,
//! KIP-848's `consumer`) and Kafka Streams' `group.protocol=streams`
//! (KIP-1071).

use super::keys::GROUP_PROTOCOL;
use super::{KafkaClient, StreamsConfig};

/// The consumer group protocol of the stream threads' consumers
/// (`consumer.group.protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum GroupProtocol {
    /// The classic protocol: the client-side range assignor, eager
    /// rebalances that stop every task.
    #[default]
    Classic,
    /// KIP-848: the broker assigns (`group.remote.assignor`, range by
    /// default here) and members give up and take partitions
    /// incrementally, so tasks that keep their owner go on processing.
    Consumer,
    /// KIP-1071 (`group.protocol=streams`, brokers 4.2+): each stream thread
    /// is a member of a streams group, the broker assigns tasks and the
    /// consumer reads the partitions of its active tasks by manual
    /// assignment.
    Streams,
}

/// Consumer settings of group membership under the classic protocol that
/// librdkafka refuses under `group.protocol=consumer`, and what to use
/// instead.
pub(super) const CLASSIC_ONLY: [(&str, &str); 4] = [
    (
        "partition.assignment.strategy",
        "the broker assigns partitions under this protocol; choose its assignor with \
         consumer.group.remote.assignor (kstreams sets range, which keeps co-partitioned \
         topics in one task)",
    ),
    (
        "session.timeout.ms",
        "the broker sets it (group.consumer.session.timeout.ms)",
    ),
    (
        "heartbeat.interval.ms",
        "the broker sets it (group.consumer.heartbeat.interval.ms)",
    ),
    (
        "group.protocol.type",
        "only the classic protocol has protocol types",
    ),
];

/// Consumer settings that only a group member uses: consumers that only
/// assign partitions to themselves (restore, global) leave them out.
pub(crate) fn is_group_membership_key(key: &str) -> bool {
    key == "group.id"
        || key == GROUP_PROTOCOL
        || key == "group.remote.assignor"
        || key == "group.instance.id"
        || CLASSIC_ONLY.iter().any(|(k, _)| *k == key)
}

impl StreamsConfig {
    /// The group protocol the stream threads use.
    pub(crate) fn group_protocol(&self) -> GroupProtocol {
        if self.streams_group_protocol {
            return GroupProtocol::Streams;
        }
        match self
            .client_settings(KafkaClient::MainConsumer)
            .get(GROUP_PROTOCOL)
        {
            Some((_, p)) if p.eq_ignore_ascii_case("consumer") => GroupProtocol::Consumer,
            _ => GroupProtocol::Classic,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::base;
    use super::*;

    #[test]
    fn group_protocol_values_and_what_each_allows() {
        let mut p = base();
        p.push(("consumer.group.protocol", "kip848"));
        let err = StreamsConfig::from_properties(p).unwrap_err();
        assert!(err.to_string().contains("consumer.group.protocol"), "{err}");

        // The classic protocol keeps its settings.
        let mut p = base();
        p.extend([
            ("consumer.group.protocol", "classic"),
            ("consumer.partition.assignment.strategy", "range"),
            ("consumer.session.timeout.ms", "6000"),
        ]);
        let c = StreamsConfig::from_properties(p).unwrap();
        assert_eq!(c.group_protocol(), GroupProtocol::Classic);
        assert_eq!(
            StreamsConfig::new("a", "b").group_protocol(),
            GroupProtocol::Classic
        );

        // The remote assignor may be overridden.
        let mut p = base();
        p.extend([
            ("consumer.group.protocol", "consumer"),
            ("consumer.group.remote.assignor", "uniform"),
        ]);
        let c = StreamsConfig::from_properties(p).unwrap();
        assert_eq!(c.group_protocol(), GroupProtocol::Consumer);
        assert_eq!(
            c.client_settings(KafkaClient::MainConsumer)["group.remote.assignor"].1,
            "uniform"
        );
    }

    #[test]
    fn assign_only_consumers_leave_group_membership_settings_out() {
        for key in [
            "group.id",
            "group.protocol",
            "group.remote.assignor",
            "partition.assignment.strategy",
            "session.timeout.ms",
            "heartbeat.interval.ms",
        ] {
            assert!(is_group_membership_key(key), "{key}");
        }
        assert!(!is_group_membership_key("fetch.min.bytes"));
    }
}
