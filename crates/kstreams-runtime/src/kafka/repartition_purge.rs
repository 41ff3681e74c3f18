//! Kafka Streams' repartition purge: repartition topics keep records
//! forever (a backfill must survive), so the application deletes records
//! it has committed past, every `repartition.purge.interval.ms`, with the
//! DeleteRecords API.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use kstreams_dsl::Topology;
use kstreams_state::TopicPartition;
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::{Offset, TopicPartitionList};

use super::clients;
use super::config::StreamsConfig;

/// Deletes committed records of a thread's repartition partitions.
pub(crate) struct RepartitionPurge {
    topics: HashSet<String>,
    admin: Option<AdminClient<DefaultClientContext>>,
    /// Committed offsets not purged yet.
    committed: HashMap<TopicPartition, i64>,
    last: Instant,
    interval: Duration,
}

impl RepartitionPurge {
    /// The purge of `topology`'s repartition topics; no admin client is
    /// made for a topology without any.
    pub(super) fn new(topology: &Topology, config: &StreamsConfig) -> Self {
        let topics: HashSet<String> = topology
            .internal_topics()
            .map(|t| format!("{}-{t}", config.application_id))
            .collect();
        let admin = if topics.is_empty() {
            None
        } else {
            clients::admin(config)
                .create()
                .map_err(|e| log::warn!("no repartition purge: cannot make an admin client: {e}"))
                .ok()
        };
        RepartitionPurge {
            topics,
            admin,
            committed: HashMap::new(),
            last: Instant::now(),
            interval: config.repartition_purge_interval,
        }
    }

    /// Notes the committed offsets of repartition partitions.
    pub(super) fn committed(&mut self, offsets: &TopicPartitionList) {
        for e in offsets.elements() {
            if let (true, Offset::Offset(o)) = (self.topics.contains(e.topic()), e.offset()) {
                self.committed
                    .insert(TopicPartition::new(e.topic(), e.partition()), o);
            }
        }
    }

    /// Whether a purge is due: the interval passed and there is something
    /// to delete.
    fn due(&self) -> bool {
        self.last.elapsed() >= self.interval && !self.committed.is_empty()
    }

    /// Deletes records before the committed offsets, at most every
    /// interval. A failure only delays the purge.
    pub(super) fn maybe_purge(&mut self, thread: &str) {
        if !self.due() {
            return;
        }
        self.last = Instant::now();
        let Some(admin) = &self.admin else {
            return;
        };
        let mut tpl = TopicPartitionList::new();
        for (tp, offset) in self.committed.drain() {
            if tpl
                .add_partition_offset(&tp.topic, tp.partition, Offset::Offset(offset))
                .is_err()
            {
                return;
            }
        }
        let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
        match futures_executor::block_on(admin.delete_records(&tpl, &options)) {
            Ok(_) => log::debug!("{thread}: purged {} repartition partitions", tpl.count()),
            Err(e) => log::warn!("{thread}: repartition purge failed (retried later): {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kstreams_dsl::StreamsBuilder;

    fn purge(interval: Duration) -> RepartitionPurge {
        let builder = StreamsBuilder::new();
        builder
            .stream::<String, String>("in")
            .select_key(|_, v| v.clone())
            .group_by_key()
            .count();
        let topology = builder.build().unwrap();
        let config = StreamsConfig::new("app", "127.0.0.1:1").repartition_purge_interval(interval);
        RepartitionPurge::new(&topology, &config)
    }

    #[test]
    fn only_committed_offsets_of_repartition_topics_are_kept_for_the_purge() {
        let mut purge = purge(Duration::ZERO);
        assert_eq!(purge.topics.len(), 1, "{:?}", purge.topics);
        let repartition = purge.topics.iter().next().unwrap().clone();
        assert!(!purge.due(), "nothing committed yet");
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset("in", 0, Offset::Offset(5))
            .unwrap();
        tpl.add_partition_offset(&repartition, 1, Offset::Offset(9))
            .unwrap();
        purge.committed(&tpl);
        assert_eq!(
            purge.committed,
            HashMap::from([(TopicPartition::new(repartition.as_str(), 1), 9)])
        );
        assert!(purge.due());
    }

    #[test]
    fn a_purge_waits_for_its_interval() {
        let mut purge = purge(Duration::from_secs(3600));
        let repartition = purge.topics.iter().next().unwrap().clone();
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&repartition, 0, Offset::Offset(3))
            .unwrap();
        purge.committed(&tpl);
        assert!(!purge.due());
        purge.maybe_purge("t");
        assert_eq!(purge.committed.len(), 1, "kept for the next purge");
    }
}
