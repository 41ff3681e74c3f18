//! Where a stream thread's assigned partitions that have no committed
//! offset start (`auto.offset.reset`), decided before librdkafka takes them.
//!
//! librdkafka asks the group for an assigned partition's committed offset
//! itself, and when there is none it resets the partition by
//! `auto.offset.reset`, but only after a 100 ms backoff: its reset treats
//! the missing offset as an error (`rd_kafka_offset_reset` in
//! rdkafka_offset.c, `err ? 100 : 0`). Every partition of a new
//! application, and every partition added to a topic, waited those 100 ms
//! before its first fetch. So the thread looks the committed offsets up
//! first (one OffsetFetch, the request librdkafka would send) and gives
//! each partition without one a logical start, BEGINNING or END, which
//! librdkafka looks up at once. Partitions with a committed offset are
//! left to librdkafka, which fetches it again with its leader epoch.
//!
//! Kafka 4's `by_duration:<d>` (KIP-1106), which librdkafka lacks, is
//! placed the same way: at the first record at or after now - `d`.

use std::time::Duration;

use rdkafka::consumer::{Consumer, ConsumerContext};
use rdkafka::{Offset, TopicPartitionList};

use super::config::{reset_by_duration, KafkaClient, StreamsConfig, BY_DURATION_FALLBACK};

/// How long the group coordinator may take to answer for committed
/// offsets (and the broker for offsets by time) before the partitions are
/// left to librdkafka's own reset.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);

/// `auto.offset.reset` of the stream threads' consumer, for partitions the
/// group has no committed offset for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UncommittedStart {
    /// `earliest`: the first record kept.
    Earliest,
    /// `latest`: after the last record.
    Latest,
    /// `by_duration:<d>`: the first record at or after now - `d`, or the
    /// end if there is none.
    ByDuration(Duration),
    /// `none` (librdkafka's `error`): librdkafka fails such a partition,
    /// which the thread turns into `RuntimeError::NoCommittedOffset`.
    Fail,
}

impl UncommittedStart {
    /// The policy the main consumer of `config` runs with.
    pub(super) fn of_main_consumer(config: &StreamsConfig) -> Self {
        let settings = config.client_settings(KafkaClient::MainConsumer);
        // The user's value as librdkafka spells it (`none` is `error`);
        // `by_duration:` is kept as written. Kafka Streams' default: earliest.
        let value = settings
            .get("auto.offset.reset")
            .map_or("earliest", |(_, value)| value.as_str());
        if let Some(duration) = reset_by_duration(value) {
            return Self::ByDuration(duration);
        }
        match value.trim().to_ascii_lowercase().as_str() {
            "smallest" | "earliest" | "beginning" => Self::Earliest,
            "largest" | "latest" | "end" => Self::Latest,
            _ => Self::Fail,
        }
    }

    /// Gives each partition of `assigned` without a start of its own and
    /// without a committed offset its start by this policy. If the lookup
    /// fails, librdkafka resets them itself (after its backoff), as before.
    pub(super) fn place<C: ConsumerContext>(
        self,
        consumer: &impl Consumer<C>,
        assigned: &mut TopicPartitionList,
    ) {
        if self == Self::Fail {
            return;
        }
        let mut unplaced = TopicPartitionList::new();
        for e in assigned.elements() {
            if e.offset() == Offset::Invalid {
                unplaced.add_partition(e.topic(), e.partition());
            }
        }
        if unplaced.count() == 0 {
            return;
        }
        let committed = match consumer.committed_offsets(unplaced, LOOKUP_TIMEOUT) {
            Ok(committed) => committed,
            Err(e) => {
                self.lookup_failed("committed offsets unknown", &e);
                return;
            }
        };
        let mut uncommitted = TopicPartitionList::new();
        for e in committed.elements() {
            // A partition the coordinator answered with an error (say an
            // offset still unstable, or no authorization) has an invalid
            // offset too: it is left to librdkafka, which asks again or
            // reports the error, rather than started by the policy.
            if e.error().is_ok() && e.offset() == Offset::Invalid {
                uncommitted.add_partition(e.topic(), e.partition());
            }
        }
        if uncommitted.count() == 0 {
            return;
        }
        let starts = match self {
            Self::Earliest => with_offset(&uncommitted, Offset::Beginning),
            Self::Latest => with_offset(&uncommitted, Offset::End),
            Self::ByDuration(duration) => match by_duration(consumer, &uncommitted, duration) {
                Ok(starts) => starts,
                Err(e) => {
                    self.lookup_failed("no offsets by time", &e);
                    return;
                }
            },
            Self::Fail => return,
        };
        for e in starts.elements() {
            if let Self::ByDuration(_) = self {
                log::info!(
                    "{}-{} has no committed offset: starting at {:?} (auto.offset.reset=by_duration)",
                    e.topic(),
                    e.partition(),
                    e.offset()
                );
            }
            let _ = assigned.set_partition_offset(e.topic(), e.partition(), e.offset());
        }
    }

    fn lookup_failed(self, what: &str, e: &rdkafka::error::KafkaError) {
        match self {
            Self::ByDuration(_) => log::warn!(
                "{what} ({e}); partitions without a committed offset start as \
                 auto.offset.reset={BY_DURATION_FALLBACK}, not by_duration"
            ),
            _ => log::debug!("{what} ({e}); librdkafka resets partitions without one itself"),
        }
    }
}

fn with_offset(partitions: &TopicPartitionList, offset: Offset) -> TopicPartitionList {
    let mut list = TopicPartitionList::new();
    for e in partitions.elements() {
        let _ = list.add_partition_offset(e.topic(), e.partition(), offset);
    }
    list
}

/// Each of `partitions` at its first record at or after now - `duration`,
/// or at its end if there is none, as Kafka's consumer does.
fn by_duration<C: ConsumerContext>(
    consumer: &impl Consumer<C>,
    partitions: &TopicPartitionList,
    duration: Duration,
) -> Result<TopicPartitionList, rdkafka::error::KafkaError> {
    let since = crate::clock::now_ms() - i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
    let found = consumer.offsets_for_times(
        with_offset(partitions, Offset::Offset(since)),
        LOOKUP_TIMEOUT,
    )?;
    let mut starts = TopicPartitionList::new();
    for e in found.elements() {
        let start = match e.offset() {
            Offset::Offset(o) => Offset::Offset(o),
            _ => Offset::End,
        };
        let _ = starts.add_partition_offset(e.topic(), e.partition(), start);
    }
    Ok(starts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::clients::tests::config;

    #[test]
    fn the_policy_follows_auto_offset_reset_in_every_spelling() {
        assert_eq!(
            UncommittedStart::of_main_consumer(&config(&[])),
            UncommittedStart::Earliest,
            "Kafka Streams' default"
        );
        for (value, expected) in [
            ("earliest", UncommittedStart::Earliest),
            ("smallest", UncommittedStart::Earliest),
            ("latest", UncommittedStart::Latest),
            ("LARGEST", UncommittedStart::Latest),
            ("end", UncommittedStart::Latest),
            ("none", UncommittedStart::Fail),
            (
                "by_duration:PT1H",
                UncommittedStart::ByDuration(Duration::from_secs(3600)),
            ),
        ] {
            assert_eq!(
                UncommittedStart::of_main_consumer(&config(&[("auto.offset.reset", value)])),
                expected,
                "auto.offset.reset={value}"
            );
            assert_eq!(
                UncommittedStart::of_main_consumer(&config(&[(
                    "main.consumer.auto.offset.reset",
                    value
                )])),
                expected,
                "main.consumer.auto.offset.reset={value}"
            );
        }
    }
}
