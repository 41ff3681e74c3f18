//! What an instance can say about itself, read-only: Kafka Streams'
//! `KafkaStreams#metadataForLocalThreads()` with the readiness facts an
//! operator's probe needs (restoring, bootstrapping, threads dead).
//!
//! Each stream thread publishes a snapshot of its own tasks on a
//! [`MetadataBoard`] (after an assignment and about once a second); readers
//! copy it out under a short lock, so the record path never waits on them.

use std::collections::{BTreeMap, BTreeSet};

use kstreams_metrics::names::CONSUMER_RECORDS_LAG_SKEW;
use kstreams_metrics::MetricsRegistry;
use std::sync::{Arc, Mutex};

use super::state::State;
use super::thread::ThreadState;

/// The instance as a whole, at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalMetadata {
    /// The application's state.
    pub state: State,
    /// Stream threads the instance runs: `num.stream.threads`, plus those
    /// added and less those removed since `start`.
    pub threads_configured: usize,
    /// Stream threads still running (a failed thread that was not replaced
    /// is no longer counted).
    pub threads_alive: usize,
    /// Each live stream thread, by name.
    pub threads: Vec<ThreadMetadata>,
    /// Whether processing is paused (`KafkaStreams::pause`; Kafka Streams'
    /// `isPaused`): the threads stay in the group and commit, but process
    /// nothing and standbys update nothing.
    pub paused: bool,
}

impl LocalMetadata {
    /// Why the instance cannot take traffic yet, or `None` when it can:
    /// RUNNING, every thread alive, no store restoring, no table
    /// bootstrapping.
    ///
    /// While the instance rebalances, the reason names what it waits on
    /// when a thread can say (a restore, a bootstrap).
    pub fn not_ready_reason(&self) -> Option<String> {
        let state_reason = || Some(format!("state is {:?}, not Running", self.state));
        if !matches!(self.state, State::Running | State::Rebalancing) {
            return state_reason();
        }
        if self.threads_alive < self.threads_configured {
            return Some(format!(
                "{} of {} stream threads are dead",
                self.threads_configured - self.threads_alive,
                self.threads_configured
            ));
        }
        for thread in &self.threads {
            if thread.restoring {
                return Some(format!(
                    "{} is creating its tasks and restoring their stores",
                    thread.thread_name
                ));
            }
            if let Some(task) = thread.active_tasks.iter().find(|t| t.bootstrapping) {
                return Some(format!(
                    "task {}_{} of {} is bootstrapping its tables",
                    task.subtopology, task.partition, thread.thread_name
                ));
            }
        }
        if self.state != State::Running {
            return state_reason();
        }
        None
    }
}

/// One stream thread: Kafka Streams' `ThreadMetadata`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadMetadata {
    /// The thread's name, as Kafka Streams names it.
    pub thread_name: String,
    /// Where it is in its life (Kafka Streams' `threadState`).
    pub thread_state: ThreadState,
    /// Whether it is creating tasks and restoring their stores (it
    /// processes nothing meanwhile).
    pub restoring: bool,
    /// Its active tasks, by id.
    pub active_tasks: Vec<TaskMetadata>,
    /// Its standby tasks, by id, with their input partitions (no lag: a
    /// standby reads its changelogs, not its input).
    pub standby_tasks: Vec<TaskMetadata>,
    /// Its main consumer's `client.id` (Kafka Streams' `consumerClientId`).
    pub consumer_client_id: String,
    /// Its restore consumer's `client.id` (`restoreConsumerClientId`),
    /// which standbys read with too.
    pub restore_consumer_client_id: String,
    /// Its producers' `client.id`s (`producerClientIds`): one per thread
    /// under both guarantees (exactly-once v2 has no producer per task).
    pub producer_client_ids: Vec<String>,
}

/// One active or standby task: Kafka Streams' `TaskMetadata`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskMetadata {
    /// The sub-topology it runs (the first half of its id, `0` in `0_3`).
    pub subtopology: u32,
    /// The partition number (the second half of its id).
    pub partition: i32,
    /// The source partitions it reads, with their lag.
    pub topic_partitions: Vec<TaskPartition>,
    /// Whether it still reads a bootstrap table up to its end before its
    /// other partitions.
    pub bootstrapping: bool,
    /// Whether its stores still restore from their changelogs (it
    /// processes nothing meanwhile).
    pub restoring: bool,
}

/// A source partition of a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskPartition {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// Records between the reading position and the high watermark; `None`
    /// until the consumer has fetched from it.
    pub lag: Option<i64>,
}

/// Where stream threads publish their [`ThreadMetadata`]. Shared by clones.
#[derive(Clone, Default)]
pub(crate) struct MetadataBoard {
    threads: Arc<Mutex<BTreeMap<String, ThreadMetadata>>>,
    /// Topics whose skew gauge is exported, to drop those no thread reads
    /// any more.
    skewed_topics: Arc<Mutex<BTreeSet<String>>>,
}

impl MetadataBoard {
    /// Replaces what the thread of that name said before.
    pub(crate) fn publish(&self, thread: ThreadMetadata) {
        self.lock().insert(thread.thread_name.clone(), thread);
    }

    /// The threads creating tasks and restoring their stores now.
    pub(crate) fn restoring_threads(&self) -> Vec<String> {
        self.lock()
            .values()
            .filter(|t| t.restoring)
            .map(|t| t.thread_name.clone())
            .collect()
    }

    /// Forgets a thread that ended.
    pub(crate) fn remove(&self, thread_name: &str) {
        self.lock().remove(thread_name);
    }

    /// The live threads, by name.
    pub(crate) fn threads(&self) -> Vec<ThreadMetadata> {
        self.lock().values().cloned().collect()
    }

    /// Sets each source topic's lag skew (its largest partition lag less
    /// the mean, over every thread's partitions with a known lag) and
    /// drops the gauge of topics no longer read.
    pub(crate) fn record_skew(&self, registry: &MetricsRegistry) {
        let skews = lag_skew_by_topic(&self.threads());
        let mut exported = self.skewed_topics.lock().unwrap_or_else(|p| p.into_inner());
        for topic in exported.iter() {
            if !skews.contains_key(topic) {
                registry.remove(&CONSUMER_RECORDS_LAG_SKEW, &[topic]);
            }
        }
        exported.clear();
        for (topic, skew) in skews {
            match registry.gauge(&CONSUMER_RECORDS_LAG_SKEW, &[&topic]) {
                Ok(gauge) => gauge.set(skew),
                Err(e) => log::warn!("lag skew of {topic}: {e}"),
            }
            exported.insert(topic);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, ThreadMetadata>> {
        self.threads.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Per topic: the largest partition lag less the mean lag (rounded down),
/// over the partitions whose lag is known.
fn lag_skew_by_topic(threads: &[ThreadMetadata]) -> BTreeMap<String, i64> {
    let mut lags: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for task in threads.iter().flat_map(|t| &t.active_tasks) {
        for p in &task.topic_partitions {
            if let Some(lag) = p.lag {
                lags.entry(p.topic.as_str()).or_default().push(lag);
            }
        }
    }
    lags.into_iter()
        .map(|(topic, lags)| {
            let max = lags.iter().copied().max().unwrap_or(0);
            let mean = lags.iter().sum::<i64>() / lags.len() as i64;
            (topic.to_string(), max - mean)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running(threads: Vec<ThreadMetadata>) -> LocalMetadata {
        LocalMetadata {
            state: State::Running,
            threads_configured: 1,
            threads_alive: 1,
            paused: false,
            threads,
        }
    }

    fn thread(restoring: bool, bootstrapping: bool) -> ThreadMetadata {
        ThreadMetadata {
            thread_name: "app-1-StreamThread-1".to_string(),
            standby_tasks: Vec::new(),
            consumer_client_id: String::new(),
            restore_consumer_client_id: String::new(),
            producer_client_ids: Vec::new(),
            thread_state: ThreadState::Running,
            restoring,
            active_tasks: vec![TaskMetadata {
                subtopology: 0,
                partition: 2,
                topic_partitions: Vec::new(),
                bootstrapping,
                restoring,
            }],
        }
    }

    #[test]
    fn ready_only_when_running_whole_and_caught_up() {
        assert_eq!(running(vec![thread(false, false)]).not_ready_reason(), None);
        let rebalancing = LocalMetadata {
            state: State::Rebalancing,
            ..running(Vec::new())
        };
        assert!(rebalancing
            .not_ready_reason()
            .unwrap()
            .contains("Rebalancing"));
        let dead = LocalMetadata {
            threads_configured: 2,
            ..running(Vec::new())
        };
        assert!(dead.not_ready_reason().unwrap().contains("1 of 2"));
        let restoring = running(vec![thread(true, false)]);
        assert!(restoring.not_ready_reason().unwrap().contains("restoring"));
        let restoring_in_a_rebalance = LocalMetadata {
            state: State::Rebalancing,
            ..running(vec![thread(true, false)])
        };
        assert!(restoring_in_a_rebalance
            .not_ready_reason()
            .unwrap()
            .contains("restoring"));
        let bootstrapping = running(vec![thread(false, true)]);
        assert!(bootstrapping
            .not_ready_reason()
            .unwrap()
            .contains("task 0_2"));
    }

    fn reading(partitions: &[(&str, i32, Option<i64>)]) -> ThreadMetadata {
        ThreadMetadata {
            thread_name: "t".to_string(),
            standby_tasks: Vec::new(),
            consumer_client_id: String::new(),
            restore_consumer_client_id: String::new(),
            producer_client_ids: Vec::new(),
            thread_state: ThreadState::Running,
            restoring: false,
            active_tasks: partitions
                .iter()
                .map(|(topic, partition, lag)| TaskMetadata {
                    subtopology: 0,
                    partition: *partition,
                    topic_partitions: vec![TaskPartition {
                        topic: topic.to_string(),
                        partition: *partition,
                        lag: *lag,
                    }],
                    bootstrapping: false,
                    restoring: false,
                })
                .collect(),
        }
    }

    #[test]
    fn skew_is_the_hottest_partition_against_the_mean() {
        let threads = vec![
            reading(&[("a", 0, Some(10)), ("a", 1, Some(10)), ("b", 0, None)]),
            reading(&[("a", 2, Some(100)), ("b", 1, Some(0))]),
        ];
        let skews = lag_skew_by_topic(&threads);
        // Mean 40, largest 100.
        assert_eq!(skews["a"], 60);
        assert_eq!(skews["b"], 0);

        let registry = MetricsRegistry::new();
        let board = MetadataBoard::default();
        board.publish(threads[1].clone());
        board.record_skew(&registry);
        assert!(registry
            .gather_text()
            .contains(r#"kstreams_consumer_records_lag_skew{topic="b"} 0"#));
        board.remove("t");
        board.record_skew(&registry);
        assert!(!registry.gather_text().contains("lag_skew{"));
    }

    #[test]
    fn the_board_keeps_one_entry_per_thread() {
        let board = MetadataBoard::default();
        let mut other = thread(true, false);
        other.thread_name = "t1".to_string();
        board.publish(other.clone());
        board.publish(thread(false, false));
        board.publish(thread(false, true));
        assert_eq!(board.threads().len(), 2);
        assert_eq!(board.restoring_threads(), vec!["t1".to_string()]);
        other.restoring = false;
        board.publish(other);
        assert!(board.restoring_threads().is_empty());
        board.remove("t1");
        assert_eq!(board.threads(), vec![thread(false, true)]);
    }
}
