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
//! placed the same way: at the first record at or after now - `d`; and so
//! is a source's own policy (`Consumed::with_offset_reset_policy`), which
//! librdkafka's one setting per consumer cannot express.

use std::sync::Arc;
use std::time::Duration;

use kstreams_dsl::{AutoOffsetReset, Topology};
use kstreams_state::TopicPartition;
use rdkafka::consumer::{Consumer, ConsumerContext};
use rdkafka::{Offset, TopicPartitionList};

use super::config::{reset_by_duration, KafkaClient, StreamsConfig, BY_DURATION_FALLBACK};
use super::offsets::{committed_of, Committed};

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

    /// A source's own policy (KIP-1106) as the thread applies it.
    fn of_source(policy: AutoOffsetReset) -> Self {
        match policy {
            AutoOffsetReset::Earliest => Self::Earliest,
            AutoOffsetReset::Latest => Self::Latest,
            AutoOffsetReset::ByDuration(duration) => Self::ByDuration(duration),
            _ => Self::Fail,
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

/// What placing an assignment's partitions without a committed offset did.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Placement {
    /// Where reading of each partition placed at a known offset starts
    /// (latest, by duration): its lag counts from there, not from the low
    /// watermark, before a record of it is consumed.
    pub starts: Vec<(TopicPartition, i64)>,
    /// Partitions whose source's policy is `none` while librdkafka would
    /// reset them by `auto.offset.reset`: the thread fails with them.
    pub unstartable: Vec<TopicPartition>,
    /// The committed offsets (and their metadata) the placement read: the
    /// assignment step need not ask the group for these again.
    pub committed: Vec<Committed>,
}

impl Placement {
    /// Adds `other`'s partitions (two assignments before the thread took
    /// the first).
    pub(crate) fn merge(&mut self, other: Placement) {
        self.starts.extend(other.starts);
        self.unstartable.extend(other.unstartable);
        self.committed.extend(other.committed);
    }
}

/// Where each assigned partition without a committed offset starts: by its
/// source's own policy (`Consumed::with_offset_reset_policy`), else by the
/// main consumer's `auto.offset.reset`, which librdkafka also applies to
/// what the thread does not place.
pub(crate) struct UncommittedStarts {
    default: UncommittedStart,
    /// The topology and application id, to find a topic's source policy.
    sources: Option<(Arc<Topology>, String)>,
}

impl UncommittedStarts {
    /// The policies of `config`'s main consumer and `topology`'s sources.
    pub(super) fn new(config: &StreamsConfig, topology: Arc<Topology>) -> Self {
        Self {
            default: UncommittedStart::of_main_consumer(config),
            sources: Some((topology, config.application_id.clone())),
        }
    }

    /// `auto.offset.reset` alone (no source has a policy of its own).
    #[cfg(test)]
    pub(super) fn of_config(config: &StreamsConfig) -> Self {
        Self {
            default: UncommittedStart::of_main_consumer(config),
            sources: None,
        }
    }

    fn for_topic(&self, topic: &str) -> UncommittedStart {
        self.sources
            .as_ref()
            .and_then(|(topology, app)| topology.offset_reset_policy(app, topic))
            .map_or(self.default, UncommittedStart::of_source)
    }

    /// Gives each partition of `assigned` without a start of its own and
    /// without a committed offset its start by its policy (see
    /// [`Placement`]). If a lookup fails, librdkafka resets the partitions
    /// (after its backoff), as before.
    pub(super) fn place<C: ConsumerContext>(
        &self,
        consumer: &impl Consumer<C>,
        assigned: &mut TopicPartitionList,
    ) -> Placement {
        let mut unplaced = TopicPartitionList::new();
        for e in assigned.elements() {
            let policy = self.for_topic(e.topic());
            // With `none` on both sides librdkafka fails the partition.
            let ours = policy != UncommittedStart::Fail || self.default != UncommittedStart::Fail;
            if e.offset() == Offset::Invalid && ours {
                unplaced.add_partition(e.topic(), e.partition());
            }
        }
        let mut placement = Placement::default();
        if unplaced.count() == 0 {
            return placement;
        }
        let committed = match consumer.committed_offsets(unplaced, LOOKUP_TIMEOUT) {
            Ok(committed) => committed,
            Err(e) => {
                self.default.lookup_failed("committed offsets unknown", &e);
                return placement;
            }
        };
        // An answer with an error is left out: the assignment asks again.
        placement.committed = committed_of(&committed)
            .into_iter()
            .zip(committed.elements())
            .filter(|(_, e)| e.error().is_ok())
            .map(|(c, _)| c)
            .collect();
        // The partitions without a committed offset, by policy. A partition
        // the coordinator answered with an error (say an offset still
        // unstable, or no authorization) has an invalid offset too: it is
        // left to librdkafka, which asks again or reports the error, rather
        // than started by the policy.
        let mut by_policy: Vec<(UncommittedStart, TopicPartitionList)> = Vec::new();
        for e in committed.elements() {
            if e.error().is_ok() && e.offset() == Offset::Invalid {
                let policy = self.for_topic(e.topic());
                match by_policy.iter_mut().find(|(p, _)| *p == policy) {
                    Some((_, list)) => {
                        list.add_partition(e.topic(), e.partition());
                    }
                    None => {
                        let mut list = TopicPartitionList::new();
                        list.add_partition(e.topic(), e.partition());
                        by_policy.push((policy, list));
                    }
                };
            }
        }
        for (policy, uncommitted) in by_policy {
            let starts = match policy {
                UncommittedStart::Earliest => with_offset(&uncommitted, Offset::Beginning),
                // At the end offset itself, not librdkafka's logical END:
                // the lag counts from there (a task with another partition
                // to read would otherwise wait for this one's old records).
                UncommittedStart::Latest => match at_times(consumer, &uncommitted, Offset::End) {
                    Ok(starts) => starts,
                    Err(e) => {
                        policy.lookup_failed("end offsets unknown", &e);
                        with_offset(&uncommitted, Offset::End)
                    }
                },
                UncommittedStart::ByDuration(duration) => {
                    match by_duration(consumer, &uncommitted, duration) {
                        Ok(starts) => starts,
                        Err(e) => {
                            policy.lookup_failed("no offsets by time", &e);
                            continue;
                        }
                    }
                }
                UncommittedStart::Fail => {
                    placement.unstartable.extend(
                        uncommitted
                            .elements()
                            .iter()
                            .map(|e| TopicPartition::new(e.topic(), e.partition())),
                    );
                    continue;
                }
            };
            for e in starts.elements() {
                if let UncommittedStart::ByDuration(_) = policy {
                    log::info!(
                        "{}-{} has no committed offset: starting at {:?} (by_duration)",
                        e.topic(),
                        e.partition(),
                        e.offset()
                    );
                }
                if let Offset::Offset(start) = e.offset() {
                    placement
                        .starts
                        .push((TopicPartition::new(e.topic(), e.partition()), start));
                }
                let _ = assigned.set_partition_offset(e.topic(), e.partition(), e.offset());
            }
        }
        placement
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
    let found = at_times(consumer, partitions, Offset::Offset(since))?;
    let mut starts = TopicPartitionList::new();
    let mut none_since = TopicPartitionList::new();
    for e in found.elements() {
        match e.offset() {
            Offset::Offset(o) => {
                let _ = starts.add_partition_offset(e.topic(), e.partition(), Offset::Offset(o));
            }
            _ => {
                none_since.add_partition(e.topic(), e.partition());
            }
        }
    }
    if none_since.count() > 0 {
        let ends = at_times(consumer, &none_since, Offset::End)
            .unwrap_or_else(|_| with_offset(&none_since, Offset::End));
        for e in ends.elements() {
            let _ = starts.add_partition_offset(e.topic(), e.partition(), e.offset());
        }
    }
    Ok(starts)
}

/// Each of `partitions` at the first offset at or after timestamp `at`
/// (`Offset::End`: the end offset), as the broker's ListOffsets answers.
fn at_times<C: ConsumerContext>(
    consumer: &impl Consumer<C>,
    partitions: &TopicPartitionList,
    at: Offset,
) -> Result<TopicPartitionList, rdkafka::error::KafkaError> {
    consumer.offsets_for_times(with_offset(partitions, at), LOOKUP_TIMEOUT)
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
