//! The records a task has fetched, per partition, and the choice of which
//! to process next.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use kstreams_dsl::internals::ConsumedRecord;
use kstreams_metrics::Counter;

/// A task's buffered records, one queue per input partition.
///
/// The next record is the head with the smallest timestamp across the
/// task's partitions, so that records of co-partitioned topics are
/// processed in timestamp order (Kafka Streams' timestamp synchronization).
/// While one of the task's partitions has nothing buffered, the task waits
/// up to `max.task.idle.ms` for it before processing what it has (KIP-353);
/// each time it gives up waiting is counted as enforced processing.
#[derive(Debug, Default)]
pub(crate) struct PartitionGroup {
    queues: BTreeMap<(String, i32), VecDeque<ConsumedRecord>>,
    blocked_since: Option<Instant>,
}

impl PartitionGroup {
    pub fn add_partition(&mut self, topic: &str, partition: i32) {
        self.queues
            .entry((topic.to_string(), partition))
            .or_default();
    }

    /// Forgets a partition and its buffered records; returns whether the
    /// group is now empty of partitions.
    pub fn remove_partition(&mut self, topic: &str, partition: i32) -> bool {
        self.queues.remove(&(topic.to_string(), partition));
        self.queues.is_empty()
    }

    /// Drops every buffered record, keeping the partitions.
    pub fn clear(&mut self) {
        for queue in self.queues.values_mut() {
            queue.clear();
        }
        self.blocked_since = None;
    }

    pub fn push(&mut self, record: ConsumedRecord) {
        self.queues
            .entry((record.topic.clone(), record.partition))
            .or_default()
            .push_back(record);
    }

    pub fn buffered(&self, topic: &str, partition: i32) -> usize {
        self.queues
            .get(&(topic.to_string(), partition))
            .map_or(0, VecDeque::len)
    }

    pub fn is_empty(&self) -> bool {
        self.queues.values().all(VecDeque::is_empty)
    }

    /// The next record to process, or `None` if nothing is buffered or the
    /// task is still waiting for an empty partition. Giving up the wait
    /// bumps `enforced`.
    pub fn next(
        &mut self,
        max_idle: Duration,
        now: Instant,
        enforced: &Counter,
    ) -> Option<ConsumedRecord> {
        let any_empty = self.queues.values().any(VecDeque::is_empty);
        if any_empty && self.queues.len() > 1 && !self.is_empty() {
            let since = *self.blocked_since.get_or_insert(now);
            if now.duration_since(since) < max_idle {
                return None;
            }
            enforced.inc();
        } else {
            self.blocked_since = None;
        }
        let queue = self
            .queues
            .values_mut()
            .filter(|q| !q.is_empty())
            .min_by_key(|q| q.front().map(|r| r.timestamp))?;
        let record = queue.pop_front();
        if queue.is_empty() {
            self.blocked_since = None;
        }
        record
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(topic: &str, partition: i32, offset: i64, timestamp: i64) -> ConsumedRecord {
        ConsumedRecord {
            topic: topic.into(),
            partition,
            offset,
            timestamp,
            key: None,
            value: None,
            headers: Default::default(),
        }
    }

    #[test]
    fn picks_the_smallest_head_timestamp_across_partitions() {
        let mut g = PartitionGroup::default();
        g.add_partition("a", 0);
        g.add_partition("b", 0);
        for (t, o, ts) in [("a", 0, 5), ("a", 1, 1), ("b", 0, 3), ("b", 1, 9)] {
            g.push(rec(t, 0, o, ts));
        }
        let now = Instant::now();
        let enforced = Counter::new();
        let order: Vec<_> = std::iter::from_fn(|| g.next(Duration::ZERO, now, &enforced))
            .map(|r| (r.topic, r.offset))
            .collect();
        // Within a partition, offset order is kept even when timestamps go back.
        assert_eq!(
            order,
            [
                ("b".into(), 0),
                ("a".into(), 0),
                ("a".into(), 1),
                ("b".into(), 1)
            ]
        );
    }

    #[test]
    fn waits_for_an_empty_partition_up_to_max_idle() {
        let mut g = PartitionGroup::default();
        g.add_partition("a", 0);
        g.add_partition("b", 0);
        g.push(rec("a", 0, 0, 1));
        let start = Instant::now();
        let idle = Duration::from_millis(100);
        let enforced = Counter::new();
        assert!(g.next(idle, start, &enforced).is_none());
        assert!(g
            .next(idle, start + Duration::from_millis(99), &enforced)
            .is_none());
        assert_eq!(g.next(idle, start + idle, &enforced).unwrap().offset, 0);
        assert_eq!(enforced.get(), 1);
    }
}
