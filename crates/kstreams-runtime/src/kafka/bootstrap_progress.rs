//! A task's table bootstrap reported as a restoration: each bootstrap
//! partition starts, reports batches as the consumer's position moves and
//! ends when read through, to the application's restore listener, the
//! `kstreams_task_bootstrap_*` metrics, the log and `/state`.
//!
//! Bootstrap records go through the topology (they are the table's
//! source), so what counts as restored is the consumer's progress over the
//! partition's offsets up to the end seen at assignment.

use std::collections::HashMap;

use kstreams_dsl::{NodeDescriptionKind, Topology, TopologyDescription};
use kstreams_state::{StateRestoreListener, TopicPartition};

use super::config::StreamsConfig;
use super::restore_progress::{RestoreBoard, RestoreKind, RestoreReporter};
use super::RuntimeError;

/// The store each bootstrap topic fills: the first store downstream of the
/// source that reads it (the table's). A topic whose table keeps no store
/// of its own is named by itself.
pub(crate) fn bootstrap_stores(
    topology: &Topology,
    application_id: &str,
) -> HashMap<String, String> {
    let description = topology.describe();
    topology
        .bootstrap_topics(application_id)
        .into_iter()
        .map(|topic| {
            let store = first_store_downstream(&description, &topic, application_id)
                .unwrap_or_else(|| topic.clone());
            (topic, store)
        })
        .collect()
}

fn first_store_downstream(
    description: &TopologyDescription,
    topic: &str,
    application_id: &str,
) -> Option<String> {
    for subtopology in &description.subtopologies {
        let node = |name: &str| subtopology.nodes.iter().find(|n| n.name == name);
        let reads_topic = |topics: &str| {
            topics
                .trim_matches(|c| c == '[' || c == ']')
                .split(", ")
                .any(|t| t == topic || format!("{application_id}-{t}") == topic)
        };
        let Some(source) = subtopology.nodes.iter().find(
            |n| matches!(&n.kind, NodeDescriptionKind::Source { topics } if reads_topic(topics)),
        ) else {
            continue;
        };
        let mut queue = std::collections::VecDeque::from([source.name.clone()]);
        let mut seen = std::collections::HashSet::new();
        while let Some(name) = queue.pop_front() {
            if !seen.insert(name.clone()) {
                continue;
            }
            let Some(n) = node(&name) else { continue };
            if let NodeDescriptionKind::Processor { stores } = &n.kind {
                if let Some(store) = stores.first() {
                    return Some(store.clone());
                }
            }
            queue.extend(n.successors.iter().cloned());
        }
    }
    None
}

/// One bootstrap partition of a task.
struct Partition {
    partition: TopicPartition,
    store: String,
    /// The next offset not yet reported, and the end (exclusive).
    position: i64,
    end: i64,
    restored: u64,
}

/// A task's bootstrap partitions, as restorations.
pub(crate) struct BootstrapProgress {
    reporter: RestoreReporter,
    partitions: Vec<Partition>,
}

impl BootstrapProgress {
    /// The bootstrap of task `task_id` on thread `thread`.
    pub(super) fn new(
        config: &StreamsConfig,
        board: &RestoreBoard,
        thread: &str,
        task_id: &str,
    ) -> Result<Self, RuntimeError> {
        let sensors = config.metrics.task_bootstrap_sensors(thread, task_id)?;
        Ok(Self {
            reporter: board.reporter(
                RestoreKind::Bootstrap,
                thread,
                Some(task_id.to_string()),
                sensors,
            ),
            partitions: Vec::new(),
        })
    }

    /// [`BootstrapProgress::start`] on the task's progress, made at its
    /// first bootstrap partition: the task manager's one call.
    pub(super) fn start_in(
        progress: &mut Option<Self>,
        (config, board, thread, task_id): (&StreamsConfig, &RestoreBoard, &str, &str),
        (topic, partition, store): (&str, i32, &str),
        (start, end): (i64, i64),
    ) -> Result<(), RuntimeError> {
        if progress.is_none() {
            *progress = Some(Self::new(config, board, thread, task_id)?);
        }
        progress
            .as_mut()
            .expect("just made")
            .start(topic, partition, store, start, end);
        Ok(())
    }

    /// The task reads `topic`'s partition into `store` from `start` up to
    /// `end` (exclusive) before its other partitions.
    pub(super) fn start(&mut self, topic: &str, partition: i32, store: &str, start: i64, end: i64) {
        let partition = TopicPartition::new(topic, partition);
        self.reporter
            .on_restore_start(&partition, store, start, end);
        self.partitions.push(Partition {
            partition,
            store: store.to_string(),
            position: start,
            end,
            restored: 0,
        });
    }

    /// The consumer is at `position` (the next offset it hands out) on a
    /// bootstrap partition: what it passed since is a batch; at the end,
    /// the partition's restoration ends.
    pub(super) fn position(&mut self, topic: &str, partition: i32, position: i64) {
        let Some(index) = self
            .partitions
            .iter()
            .position(|p| p.partition.partition == partition && p.partition.topic == topic)
        else {
            return;
        };
        let p = &mut self.partitions[index];
        let reached = position.min(p.end);
        if reached > p.position {
            let read = (reached - p.position) as u64;
            p.restored += read;
            p.position = reached;
            self.reporter
                .on_batch_restored(&p.partition, &p.store, reached - 1, read);
        }
        if position >= p.end {
            let p = self.partitions.swap_remove(index);
            self.reporter
                .on_restore_end(&p.partition, &p.store, p.restored);
        }
    }

    /// The task closes with bootstrap partitions not read through: they
    /// are suspended (KIP-869).
    pub(super) fn suspend(&mut self) {
        for p in self.partitions.drain(..) {
            self.reporter
                .on_restore_suspended(&p.partition, &p.store, p.restored);
        }
    }
}

impl Drop for BootstrapProgress {
    fn drop(&mut self) {
        self.suspend();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_become_batches_that_sum_to_the_total() {
        let config = StreamsConfig::new("app", "localhost:9092");
        let board = RestoreBoard::default();
        let mut progress = BootstrapProgress::new(&config, &board, "t", "0_0").unwrap();
        progress.start("table", 0, "table-store", 10, 20);
        progress.position("table", 0, 14);
        progress.position("table", 0, 14);
        assert_eq!(board.in_progress()[0].restored, 4);
        let sensors = config.metrics.task_bootstrap_sensors("t", "0_0").unwrap();
        assert_eq!(sensors.remaining.get(), 6);
        // Past the end: a marker after the last record.
        progress.position("table", 0, 21);
        assert!(board.in_progress().is_empty());
        assert_eq!(sensors.restored.get(), 10);
        assert_eq!(sensors.remaining.get(), 0);
    }

    #[test]
    fn a_table_bootstraps_into_its_store() {
        use kstreams_dsl::{Consumed, Materialized};
        use kstreams_record::StringSerde;
        let builder = kstreams_dsl::StreamsBuilder::new();
        let table = builder.table_with(
            "prices",
            Consumed::with(StringSerde, StringSerde).with_bootstrap(),
            Materialized::as_("prices-store"),
        );
        builder
            .stream::<String, String>("orders")
            .join(&table, |o: &String, p: &String| format!("{o}{p}"))
            .to("out");
        let topology = builder.build().unwrap();
        let stores = bootstrap_stores(&topology, "app");
        assert_eq!(stores.len(), 1);
        assert_eq!(stores["prices"], "prices-store");
    }
}
