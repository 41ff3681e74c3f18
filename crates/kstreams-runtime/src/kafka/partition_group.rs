//! The records a task has fetched, per partition, and the choice of which
//! to process next.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use kstreams_dsl::__private::ConsumedRecord;
use kstreams_metrics::Counter;

/// `max.task.idle.ms`: how long a task with an empty input partition waits
/// before processing what its other partitions hold (KIP-353, KIP-695).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum MaxTaskIdle {
    /// -1: never wait, not even for a partition known to be behind.
    Never,
    /// 0 (the default): wait only for empty partitions that are behind
    /// their end, until a fetch brings their records.
    #[default]
    ForLagging,
    /// Positive: wait for lagging partitions, and up to this long for empty
    /// partitions that are caught up.
    UpTo(Duration),
}

impl MaxTaskIdle {
    /// From the setting's milliseconds (-1 and up).
    pub(crate) fn from_millis(ms: i64) -> Self {
        match ms {
            ..=-1 => MaxTaskIdle::Never,
            0 => MaxTaskIdle::ForLagging,
            ms => MaxTaskIdle::UpTo(Duration::from_millis(ms as u64)),
        }
    }

    /// Whether the decision reads which partitions are lagging.
    pub(crate) fn needs_lag(self) -> bool {
        self != MaxTaskIdle::Never
    }
}

/// One input partition of a task: its buffered records and how far the
/// task has processed it.
#[derive(Debug)]
struct PartitionQueue {
    topic: String,
    partition: i32,
    /// Buffered records with their extracted event time.
    records: VecDeque<(ConsumedRecord, i64)>,
    /// Offset after the last record handed out since the last `take_progress`.
    progress: Option<i64>,
}

/// A task's buffered records, one queue per input partition.
///
/// The next record is the head with the smallest timestamp across the
/// task's partitions, so that records of co-partitioned topics are
/// processed in timestamp order (Kafka Streams' timestamp synchronization).
/// While one of the task's partitions has nothing buffered, the task waits
/// as `max.task.idle.ms` says ([`MaxTaskIdle`], KIP-353, KIP-695) before
/// processing what it has; each time it gives up waiting for a caught-up
/// partition is counted as enforced processing.
///
/// A task has a handful of partitions, so a vector searched by name beats
/// a map whose keys would be allocated per record.
#[derive(Debug, Default)]
pub(crate) struct PartitionGroup {
    queues: Vec<PartitionQueue>,
    blocked_since: Option<Instant>,
    /// Bootstrap partitions not yet read to their end: (topic, partition,
    /// end offset seen at assignment). While any is left, only they are
    /// processed.
    bootstrap: Vec<(String, i32, i64)>,
}

impl PartitionGroup {
    fn queue_mut(&mut self, topic: &str, partition: i32) -> Option<&mut PartitionQueue> {
        self.queues
            .iter_mut()
            .find(|q| q.partition == partition && q.topic == topic)
    }

    pub(super) fn add_partition(&mut self, topic: &str, partition: i32) {
        if self.queue_mut(topic, partition).is_none() {
            self.queues.push(PartitionQueue {
                topic: topic.to_string(),
                partition,
                records: VecDeque::new(),
                progress: None,
            });
        }
    }

    /// Whether the group has `topic`-`partition`.
    pub(super) fn has_partition(&self, topic: &str, partition: i32) -> bool {
        self.queues
            .iter()
            .any(|q| q.partition == partition && q.topic == topic)
    }

    /// The partitions of the group, in the order they were added.
    pub(super) fn partitions(&self) -> impl Iterator<Item = (&str, i32)> + '_ {
        self.queues.iter().map(|q| (q.topic.as_str(), q.partition))
    }

    /// Forgets a partition and its buffered records; returns whether the
    /// group is now empty of partitions.
    pub(super) fn remove_partition(&mut self, topic: &str, partition: i32) -> bool {
        self.queues
            .retain(|q| !(q.partition == partition && q.topic == topic));
        self.bootstrap
            .retain(|(t, p, _)| !(*p == partition && t == topic));
        self.queues.is_empty()
    }

    /// The task must read `topic`-`partition` up to `end` (exclusive)
    /// before anything else.
    pub(super) fn add_bootstrap(&mut self, topic: &str, partition: i32, end: i64) {
        self.add_partition(topic, partition);
        self.bootstrap.push((topic.to_string(), partition, end));
    }

    /// Whether bootstrap partitions are still being read.
    pub(super) fn bootstrapping(&self) -> bool {
        !self.bootstrap.is_empty()
    }

    /// The bootstrap partitions still being read, with their end offsets.
    pub(super) fn bootstrap_partitions(&self) -> &[(String, i32, i64)] {
        &self.bootstrap
    }

    /// The consumer is at `position` on a bootstrap partition: done with it
    /// if that is at or past its end (the last offsets may be transaction
    /// markers, which are never handed out as records).
    pub(super) fn bootstrap_position(&mut self, topic: &str, partition: i32, position: i64) {
        let nothing_buffered = self.buffered(topic, partition) == 0;
        self.bootstrap.retain(|(t, p, end)| {
            !(*p == partition && t == topic && nothing_buffered && position >= *end)
        });
    }

    /// Drops every buffered record and the progress not yet taken, keeping
    /// the partitions.
    pub(super) fn clear(&mut self) {
        for queue in &mut self.queues {
            queue.records.clear();
            queue.progress = None;
        }
        self.blocked_since = None;
    }

    /// Buffers a record with its extracted event time; returns how many
    /// its partition now holds.
    pub(super) fn push(&mut self, record: ConsumedRecord, timestamp: i64) -> usize {
        let (topic, partition) = (&*record.topic, record.partition);
        let index = match self
            .queues
            .iter()
            .position(|q| q.partition == partition && q.topic == topic)
        {
            Some(index) => index,
            None => {
                self.add_partition(topic, partition);
                self.queues.len() - 1
            }
        };
        let queue = &mut self.queues[index];
        queue.records.push_back((record, timestamp));
        queue.records.len()
    }

    pub(super) fn buffered(&self, topic: &str, partition: i32) -> usize {
        self.queues
            .iter()
            .find(|q| q.partition == partition && q.topic == topic)
            .map_or(0, |q| q.records.len())
    }

    pub(super) fn is_empty(&self) -> bool {
        self.queues.iter().all(|q| q.records.is_empty())
    }

    /// The next record (with its event time) to process, or `None` if
    /// nothing is buffered or the task is still waiting for an empty
    /// partition, as `max_idle` says (`lagging` says which partitions are
    /// known to be behind their end). Giving up a wait for a caught-up
    /// partition bumps `enforced`.
    pub(super) fn next(
        &mut self,
        max_idle: MaxTaskIdle,
        now: Instant,
        enforced: &Counter,
        lagging: &dyn Fn(&str, i32) -> bool,
    ) -> Option<(ConsumedRecord, i64)> {
        if !self.bootstrap.is_empty() {
            return self.next_bootstrap();
        }
        let any_empty = self.queues.iter().any(|q| q.records.is_empty());
        if !any_empty || self.queues.len() < 2 || self.is_empty() || max_idle == MaxTaskIdle::Never
        {
            self.blocked_since = None;
        } else if self
            .queues
            .iter()
            .any(|q| q.records.is_empty() && lagging(&q.topic, q.partition))
        {
            // Data is on its way to an empty partition that is behind:
            // wait for it rather than process out of order.
            return None;
        } else if let MaxTaskIdle::UpTo(max_idle) = max_idle {
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
            .iter_mut()
            .filter(|q| !q.records.is_empty())
            .min_by_key(|q| q.records.front().map(|(_, ts)| *ts))?;
        let (record, timestamp) = queue.records.pop_front()?;
        queue.progress = Some(record.offset + 1);
        if queue.records.is_empty() {
            self.blocked_since = None;
        }
        Some((record, timestamp))
    }

    /// The next record of a bootstrap partition, in timestamp order among
    /// them; the other partitions wait.
    fn next_bootstrap(&mut self) -> Option<(ConsumedRecord, i64)> {
        let bootstrap = &self.bootstrap;
        let queue = self
            .queues
            .iter_mut()
            .filter(|q| {
                !q.records.is_empty()
                    && bootstrap
                        .iter()
                        .any(|(t, p, _)| *p == q.partition && *t == q.topic)
            })
            .min_by_key(|q| q.records.front().map(|(_, ts)| *ts))?;
        let (record, timestamp) = queue.records.pop_front()?;
        queue.progress = Some(record.offset + 1);
        let (topic, partition, next) = (&*record.topic, record.partition, record.offset + 1);
        self.bootstrap
            .retain(|(t, p, end)| !(*p == partition && t == topic && next >= *end));
        Some((record, timestamp))
    }

    /// For each partition that advanced since the last call: the offset to
    /// commit (after the last record handed out).
    pub(super) fn take_progress(&mut self) -> impl Iterator<Item = (&str, i32, i64)> + '_ {
        self.queues.iter_mut().filter_map(|q| {
            q.progress
                .take()
                .map(|o| (q.topic.as_str(), q.partition, o))
        })
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
            g.push(rec(t, 0, o, ts), ts);
        }
        let now = Instant::now();
        let enforced = Counter::new();
        let order: Vec<_> =
            std::iter::from_fn(|| g.next(MaxTaskIdle::ForLagging, now, &enforced, &|_, _| false))
                .map(|(r, _)| (r.topic, r.offset))
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
        let mut progress: Vec<_> = g
            .take_progress()
            .map(|(t, p, o)| (t.to_string(), p, o))
            .collect();
        progress.sort();
        assert_eq!(progress, [("a".to_string(), 0, 2), ("b".to_string(), 0, 2)]);
        assert_eq!(g.take_progress().count(), 0, "progress is taken once");
    }

    #[test]
    fn bootstrap_partitions_go_first_until_their_end() {
        let mut group = PartitionGroup::default();
        let enforced = Counter::default();
        let now = Instant::now();
        group.add_partition("stream", 0);
        group.add_bootstrap("table", 0, 2);
        group.push(rec("stream", 0, 0, 1), 1);
        group.push(rec("table", 0, 0, 50), 50);
        // The stream record is older, but the table is read first.
        let first = group
            .next(MaxTaskIdle::ForLagging, now, &enforced, &|_, _| false)
            .unwrap()
            .0;
        assert_eq!((&*first.topic, first.offset), ("table", 0));
        assert!(
            group
                .next(MaxTaskIdle::ForLagging, now, &enforced, &|_, _| false)
                .is_none(),
            "waits for table offset 1"
        );
        assert!(group.bootstrapping());
        group.push(rec("table", 0, 1, 60), 60);
        let second = group
            .next(MaxTaskIdle::ForLagging, now, &enforced, &|_, _| false)
            .unwrap()
            .0;
        assert_eq!((&*second.topic, second.offset), ("table", 1));
        assert!(!group.bootstrapping());
        let third = group
            .next(MaxTaskIdle::ForLagging, now, &enforced, &|_, _| false)
            .unwrap()
            .0;
        assert_eq!(&*third.topic, "stream");
    }

    #[test]
    fn bootstrap_ends_at_the_consumer_position_past_markers() {
        let mut group = PartitionGroup::default();
        group.add_bootstrap("table", 0, 10);
        group.bootstrap_position("table", 0, 9);
        assert!(group.bootstrapping());
        group.bootstrap_position("table", 0, 10);
        assert!(!group.bootstrapping());
    }

    #[test]
    fn waits_for_an_empty_partition_up_to_max_idle() {
        let mut g = PartitionGroup::default();
        g.add_partition("a", 0);
        g.add_partition("b", 0);
        assert_eq!(g.push(rec("a", 0, 0, 1), 1), 1);
        let start = Instant::now();
        let idle = MaxTaskIdle::UpTo(Duration::from_millis(100));
        let enforced = Counter::new();
        assert!(g.next(idle, start, &enforced, &|_, _| false).is_none());
        assert!(g
            .next(
                idle,
                start + Duration::from_millis(99),
                &enforced,
                &|_, _| false
            )
            .is_none());
        assert_eq!(
            g.next(
                idle,
                start + Duration::from_millis(100),
                &enforced,
                &|_, _| false
            )
            .unwrap()
            .0
            .offset,
            0
        );
        assert_eq!(enforced.get(), 1);
    }

    /// KIP-695: with max.task.idle.ms at 0 the task waits for an empty
    /// partition only while it is not caught up.
    #[test]
    fn with_no_idle_time_waits_only_for_lagging_partitions() {
        let mut g = PartitionGroup::default();
        g.add_partition("a", 0);
        g.add_partition("b", 0);
        g.push(rec("a", 0, 0, 5), 5);
        let now = Instant::now();
        let enforced = Counter::new();
        assert!(g
            .next(MaxTaskIdle::ForLagging, now, &enforced, &|t, _| t == "b")
            .is_none());
        let (record, ts) = g
            .next(MaxTaskIdle::ForLagging, now, &enforced, &|_, _| false)
            .unwrap();
        assert_eq!((&*record.topic, ts), ("a", 5));
        assert_eq!(enforced.get(), 0);
    }

    /// KIP-695: -1 never waits, 0 waits for lagging partitions only, > 0
    /// also waits up to that long for caught-up ones.
    #[test]
    fn max_task_idle_minus_one_zero_and_positive() {
        let group = || {
            let mut g = PartitionGroup::default();
            g.add_partition("a", 0);
            g.add_partition("b", 0);
            g.push(rec("a", 0, 0, 5), 5);
            g
        };
        let now = Instant::now();
        let enforced = Counter::new();
        let b_lags = |t: &str, _| t == "b";
        let none_lag = |_: &str, _| false;

        assert!(group()
            .next(MaxTaskIdle::Never, now, &enforced, &b_lags)
            .is_some());
        assert!(group()
            .next(MaxTaskIdle::ForLagging, now, &enforced, &b_lags)
            .is_none());
        assert!(group()
            .next(MaxTaskIdle::ForLagging, now, &enforced, &none_lag)
            .is_some());

        let idle = MaxTaskIdle::UpTo(Duration::from_millis(50));
        let mut g = group();
        assert!(g.next(idle, now, &enforced, &b_lags).is_none());
        // A lagging partition is waited for past the idle time.
        assert!(g
            .next(idle, now + Duration::from_secs(1), &enforced, &b_lags)
            .is_none());
        // Once caught up, the idle time runs from then.
        let later = now + Duration::from_secs(1);
        assert!(g.next(idle, later, &enforced, &none_lag).is_none());
        assert!(g
            .next(
                idle,
                later + Duration::from_millis(50),
                &enforced,
                &none_lag
            )
            .is_some());
        assert_eq!(enforced.get(), 1);

        assert_eq!(MaxTaskIdle::from_millis(-1), MaxTaskIdle::Never);
        assert_eq!(MaxTaskIdle::from_millis(0), MaxTaskIdle::ForLagging);
        assert_eq!(
            MaxTaskIdle::from_millis(7),
            MaxTaskIdle::UpTo(Duration::from_millis(7))
        );
    }
}
