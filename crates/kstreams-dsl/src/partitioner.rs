//! Partitioners of the application's own: which partitions of its topic a
//! sink writes a record to (Kafka Streams' `StreamPartitioner`, with
//! multicast, KIP-837, and the record's headers, KIP-1321).

use std::sync::Arc;

use kstreams_record::Headers;

/// Chooses the partitions of `topic` a record goes to, from its key, value
/// and headers: Kafka Streams' `StreamPartitioner`.
///
/// Returns `None` for Kafka's default (murmur2 of the serialized key), or
/// the partitions to write a copy to (KIP-837 multicast; duplicates count
/// once). An empty list drops the record (counted as dropped), as Kafka
/// Streams does. A partition outside `0..partitions` fails the sink.
///
/// Set on [`Produced::with_partitioner`](crate::Produced::with_partitioner),
/// [`Repartitioned::with_partitioner`](crate::Repartitioned::with_partitioner)
/// and [`Topology::add_sink_with_partitioner`](crate::Topology::add_sink_with_partitioner).
/// A closure `Fn(&str, &K, &V, &Headers, i32) -> Option<Vec<i32>>` is one.
///
/// ```
/// use kstreams_dsl::{Produced, StreamPartitioner};
/// use kstreams_record::{Headers, StringSerde};
///
/// // Tenants in a fixed partition each; every other key where Kafka puts it.
/// let tenants = |_topic: &str, key: &String, _value: &String, _headers: &Headers, partitions: i32| {
///     key.strip_prefix("tenant-")
///         .and_then(|n| n.parse::<i32>().ok())
///         .map(|n| vec![n % partitions])
/// };
/// let produced = Produced::with(StringSerde, StringSerde).with_partitioner(tenants);
/// # let _ = produced;
/// ```
pub trait StreamPartitioner<K, V>: Send + Sync + 'static {
    /// The partitions of `topic` (which has `partitions`) for this record;
    /// `None` for the default partitioner.
    fn partitions(
        &self,
        topic: &str,
        key: &K,
        value: &V,
        headers: &Headers,
        partitions: i32,
    ) -> Option<Vec<i32>>;
}

impl<K, V, F> StreamPartitioner<K, V> for F
where
    F: Fn(&str, &K, &V, &Headers, i32) -> Option<Vec<i32>> + Send + Sync + 'static,
{
    fn partitions(
        &self,
        topic: &str,
        key: &K,
        value: &V,
        headers: &Headers,
        partitions: i32,
    ) -> Option<Vec<i32>> {
        self(topic, key, value, headers, partitions)
    }
}

pub(crate) type SharedPartitioner<K, V> = Arc<dyn StreamPartitioner<K, V>>;

/// What a partitioner's answer comes to on a topic of `count` partitions:
/// its partitions sorted, each once, every one in range; with
/// `exactly_one`, a single one, where a key must live in one place (a
/// foreign-key join's subscriptions and answers, a key's query metadata;
/// Kafka Streams throws `IllegalArgumentException` there). The error says
/// what the partitioner chose and what was needed, for the caller to name
/// where.
pub fn checked_partitions(
    mut chosen: Vec<i32>,
    count: i32,
    exactly_one: bool,
) -> Result<Vec<i32>, String> {
    if let Some(bad) = chosen.iter().find(|&&p| !(0..count).contains(&p)) {
        return Err(format!(
            "the partitioner chose partition {bad}, but the topic has {count} (partitions 0 to {})",
            count - 1
        ));
    }
    chosen.sort_unstable();
    chosen.dedup();
    if exactly_one && chosen.len() != 1 {
        return Err(format!(
            "the partitioner chose partitions {chosen:?}: a key needs exactly one here"
        ));
    }
    Ok(chosen)
}

/// How many partitions a topic has: what a sink with a partitioner asks the
/// runtime (the producer's metadata on a broker, one partition in the test
/// driver), as Kafka Streams' record collector asks `partitionsFor`.
pub trait PartitionCounts {
    /// The partition count of `topic`, or why it is not known (the topic
    /// does not exist, the metadata request failed).
    fn partition_count(&self, topic: &str) -> Result<i32, String>;
}

impl<F: Fn(&str) -> Result<i32, String>> PartitionCounts for F {
    fn partition_count(&self, topic: &str) -> Result<i32, String> {
        self(topic)
    }
}

#[cfg(test)]
mod tests {
    use super::checked_partitions;

    #[test]
    fn an_answer_is_sorted_once_each_and_in_range() {
        assert_eq!(checked_partitions(vec![3, 1, 3], 4, false), Ok(vec![1, 3]));
        assert_eq!(checked_partitions(vec![], 4, false), Ok(vec![]));
        let out = checked_partitions(vec![1, 4], 4, false).unwrap_err();
        assert!(
            out.contains("partition 4") && out.contains("0 to 3"),
            "{out}"
        );
        assert!(checked_partitions(vec![-1], 4, false).is_err());
    }

    #[test]
    fn where_a_key_lives_in_one_place_one_partition_is_needed() {
        assert_eq!(checked_partitions(vec![2, 2], 4, true), Ok(vec![2]));
        let two = checked_partitions(vec![1, 2], 4, true).unwrap_err();
        assert!(
            two.contains("[1, 2]") && two.contains("exactly one"),
            "{two}"
        );
        assert!(checked_partitions(vec![], 4, true).is_err());
    }
}
