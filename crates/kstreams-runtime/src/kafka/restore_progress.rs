//! Restoration progress, one source for everything that reports it: the
//! application's [`StateRestoreListener`] (Kafka Streams'
//! `KafkaStreams#setGlobalStateRestoreListener`), the restore metrics, the
//! log lines with rate and time left, and `/state`'s list of restorations
//! in flight ([`KafkaStreams::restore_progress`](super::KafkaStreams::restore_progress)).
//!
//! Three kinds of restoration report through it: a task's stores restoring
//! from their changelogs (the changelog reader), the global stores loading
//! from their topics (the global thread), and a task bootstrapping its
//! tables (kstreams' table bootstrap, read through the main consumer).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use kstreams_metrics::RestoreSensors;
use kstreams_state::{StateRestoreListener, TopicPartition};

/// How often a restoration in progress logs a line.
const LOG_INTERVAL: Duration = Duration::from_secs(5);

/// What is being restored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RestoreKind {
    /// A task's store from its changelog partition, before the task
    /// processes anything (Kafka Streams' active-task restoration).
    Changelog,
    /// A global store from its topic, before the instance runs.
    GlobalStore,
    /// A task's table from a bootstrap partition, read to its end before
    /// the task's other partitions (kstreams' table bootstrap).
    Bootstrap,
}

impl RestoreKind {
    /// `changelog`, `global`, `bootstrap`: the kind in `/state` and in logs.
    pub fn name(self) -> &'static str {
        match self {
            RestoreKind::Changelog => "changelog",
            RestoreKind::GlobalStore => "global",
            RestoreKind::Bootstrap => "bootstrap",
        }
    }
}

/// One restoration in flight, at one moment.
#[derive(Clone, Debug, PartialEq)]
pub struct RestoreProgress {
    /// What is restored.
    pub kind: RestoreKind,
    /// The task (`0_1`), `None` for a global store.
    pub task_id: Option<String>,
    /// The store.
    pub store: String,
    /// The partition it is restored from.
    pub partition: TopicPartition,
    /// The first offset read.
    pub starting_offset: i64,
    /// The end offset (exclusive) it runs to.
    pub ending_offset: i64,
    /// Records restored so far.
    pub restored: u64,
    /// Time since the restoration began.
    pub elapsed: Duration,
}

impl RestoreProgress {
    /// The records to restore at most (compaction and transaction markers
    /// leave fewer).
    pub fn total(&self) -> u64 {
        (self.ending_offset - self.starting_offset).max(0) as u64
    }

    /// Records still to restore, at most.
    pub fn remaining(&self) -> u64 {
        self.total().saturating_sub(self.restored)
    }

    /// Records restored per second since the start.
    pub fn rate(&self) -> f64 {
        self.restored as f64 / self.elapsed.as_secs_f64().max(1e-3)
    }

    /// The time left at the rate so far; `None` before the first record.
    pub fn time_left(&self) -> Option<Duration> {
        (self.restored > 0)
            .then(|| Duration::from_secs_f64(self.remaining() as f64 / self.rate().max(1e-9)))
    }
}

/// Who restores what: a restoration's identity on the board.
type RestoreKey = (RestoreKind, Option<String>, String, TopicPartition);

struct Running {
    starting_offset: i64,
    ending_offset: i64,
    /// The next offset to restore: the starting offset, then past each
    /// batch's last record.
    position: i64,
    restored: u64,
    began: Instant,
    last_log: Instant,
}

/// The application's listener and the restorations in flight. Shared by
/// clones (it travels in the `StreamsConfig`, as the metrics do).
#[derive(Clone, Default)]
pub(crate) struct RestoreBoard {
    listener: Arc<RwLock<Option<Arc<dyn StateRestoreListener>>>>,
    running: Arc<Mutex<BTreeMap<RestoreKey, Running>>>,
}

impl RestoreBoard {
    /// Every restoration from now on is also told to `listener`.
    pub(super) fn set_listener(&self, listener: Arc<dyn StateRestoreListener>) {
        *self.listener.write().unwrap_or_else(|p| p.into_inner()) = Some(listener);
    }

    fn listener(&self) -> Option<Arc<dyn StateRestoreListener>> {
        self.listener
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The restorations in flight, ordered by kind, task, store, partition.
    pub(super) fn in_progress(&self) -> Vec<RestoreProgress> {
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        running
            .iter()
            .map(|((kind, task_id, store, partition), r)| RestoreProgress {
                kind: *kind,
                task_id: task_id.clone(),
                store: store.clone(),
                partition: partition.clone(),
                starting_offset: r.starting_offset,
                ending_offset: r.ending_offset,
                restored: r.restored,
                elapsed: r.began.elapsed(),
            })
            .collect()
    }

    /// Where each changelog restoration in flight has got to: store,
    /// changelog partition and the next offset to restore (Kafka Streams'
    /// changelog offsets of a restoring active task).
    pub(super) fn changelog_positions(&self) -> Vec<(String, TopicPartition, i64)> {
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        running
            .iter()
            .filter(|((kind, ..), _)| *kind == RestoreKind::Changelog)
            .map(|((_, _, store, partition), r)| (store.clone(), partition.clone(), r.position))
            .collect()
    }

    /// A reporter of `kind` restorations for task `task_id` (`None`: a
    /// global store) of thread `thread`, recording into `sensors`.
    pub(super) fn reporter(
        &self,
        kind: RestoreKind,
        thread: &str,
        task_id: Option<String>,
        sensors: RestoreSensors,
    ) -> RestoreReporter {
        RestoreReporter {
            board: self.clone(),
            listener: self.listener(),
            kind,
            thread: thread.to_string(),
            task_id,
            sensors,
        }
    }
}

/// Hears one scope's restorations (a task's, or the global stores') and
/// tells the board, the metrics, the log and the application's listener.
pub(crate) struct RestoreReporter {
    board: RestoreBoard,
    listener: Option<Arc<dyn StateRestoreListener>>,
    kind: RestoreKind,
    thread: String,
    task_id: Option<String>,
    sensors: RestoreSensors,
}

impl RestoreReporter {
    fn key(&self, partition: &TopicPartition, store: &str) -> RestoreKey {
        (
            self.kind,
            self.task_id.clone(),
            store.to_string(),
            partition.clone(),
        )
    }

    /// `thread: restoring store s of task 0_1 from t-0` as the log says it.
    fn what(&self, partition: &TopicPartition, store: &str) -> String {
        let verb = match self.kind {
            RestoreKind::Changelog => "restoring",
            RestoreKind::GlobalStore => "loading global store",
            RestoreKind::Bootstrap => "bootstrapping",
        };
        match &self.task_id {
            Some(task) => format!(
                "{}: {verb} {store} of task {task} from {partition}",
                self.thread
            ),
            None => format!("{}: {verb} {store} from {partition}", self.thread),
        }
    }

    /// Takes the restoration off the board; the records it did not reach
    /// leave the remaining gauge (transaction markers and compacted gaps
    /// are never handed out as records).
    fn close(&self, partition: &TopicPartition, store: &str) -> Option<Running> {
        let running = self
            .board
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.key(partition, store))?;
        let total = (running.ending_offset - running.starting_offset).max(0) as u64;
        self.sensors
            .remaining
            .add(-(total.saturating_sub(running.restored) as i64));
        Some(running)
    }
}

impl StateRestoreListener for RestoreReporter {
    fn on_restore_start(
        &self,
        partition: &TopicPartition,
        store: &str,
        starting_offset: i64,
        ending_offset: i64,
    ) {
        let now = Instant::now();
        let total = (ending_offset - starting_offset).max(0);
        let replaced = self
            .board
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                self.key(partition, store),
                Running {
                    starting_offset,
                    ending_offset,
                    position: starting_offset,
                    restored: 0,
                    began: now,
                    last_log: now,
                },
            );
        if let Some(old) = replaced {
            let old_total = (old.ending_offset - old.starting_offset).max(0) as u64;
            self.sensors
                .remaining
                .add(-(old_total.saturating_sub(old.restored) as i64));
        }
        self.sensors.remaining.add(total);
        log::info!(
            "{}, offsets {starting_offset}..{ending_offset} ({total} records at most)",
            self.what(partition, store)
        );
        if let Some(listener) = &self.listener {
            listener.on_restore_start(partition, store, starting_offset, ending_offset);
        }
    }

    fn on_batch_restored(
        &self,
        partition: &TopicPartition,
        store: &str,
        batch_end_offset: i64,
        num_restored: u64,
    ) {
        self.sensors.restored.add(num_restored);
        self.sensors.remaining.add(-(num_restored as i64));
        let line = {
            let mut running = self.board.running.lock().unwrap_or_else(|p| p.into_inner());
            running.get_mut(&self.key(partition, store)).and_then(|r| {
                r.restored += num_restored;
                r.position = r.position.max(batch_end_offset + 1);
                (r.last_log.elapsed() >= LOG_INTERVAL).then(|| {
                    r.last_log = Instant::now();
                    RestoreProgress {
                        kind: self.kind,
                        task_id: None,
                        store: String::new(),
                        partition: partition.clone(),
                        starting_offset: r.starting_offset,
                        ending_offset: r.ending_offset,
                        restored: r.restored,
                        elapsed: r.began.elapsed(),
                    }
                })
            })
        };
        if let Some(p) = line {
            let total = p.total().max(1);
            log::info!(
                "{}: {}/{} records ({:.0}%), {:.0} records/s, about {:.1} s left",
                self.what(partition, store),
                p.restored,
                p.total(),
                p.restored as f64 * 100.0 / total as f64,
                p.rate(),
                p.time_left().unwrap_or_default().as_secs_f64()
            );
        }
        if let Some(listener) = &self.listener {
            listener.on_batch_restored(partition, store, batch_end_offset, num_restored);
        }
    }

    fn on_restore_end(&self, partition: &TopicPartition, store: &str, total_restored: u64) {
        let secs = self
            .close(partition, store)
            .map_or(0.0, |r| r.began.elapsed().as_secs_f64());
        log::info!(
            "{}: done, {total_restored} records in {secs:.1} s ({:.0} records/s)",
            self.what(partition, store),
            total_restored as f64 / secs.max(1e-3)
        );
        if let Some(listener) = &self.listener {
            listener.on_restore_end(partition, store, total_restored);
        }
    }

    fn on_restore_suspended(&self, partition: &TopicPartition, store: &str, total_restored: u64) {
        self.close(partition, store);
        log::info!(
            "{}: suspended after {total_restored} records",
            self.what(partition, store)
        );
        if let Some(listener) = &self.listener {
            listener.on_restore_suspended(partition, store, total_restored);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Calls(Mutex<Vec<String>>);

    impl StateRestoreListener for Calls {
        fn on_restore_start(&self, p: &TopicPartition, store: &str, start: i64, end: i64) {
            self.0
                .lock()
                .unwrap()
                .push(format!("start {p} {store} {start} {end}"));
        }
        fn on_batch_restored(&self, p: &TopicPartition, store: &str, end: i64, n: u64) {
            self.0
                .lock()
                .unwrap()
                .push(format!("batch {p} {store} {end} {n}"));
        }
        fn on_restore_end(&self, p: &TopicPartition, store: &str, total: u64) {
            self.0
                .lock()
                .unwrap()
                .push(format!("end {p} {store} {total}"));
        }
        fn on_restore_suspended(&self, p: &TopicPartition, store: &str, total: u64) {
            self.0
                .lock()
                .unwrap()
                .push(format!("suspended {p} {store} {total}"));
        }
    }

    #[test]
    fn progress_reaches_the_metrics_the_board_and_the_listener() {
        let registry = kstreams_metrics::MetricsRegistry::new();
        let board = RestoreBoard::default();
        let calls = Arc::new(Calls::default());
        board.set_listener(calls.clone());
        let sensors = registry.task_restore_sensors("t", "0_0").unwrap();
        let reporter = board.reporter(
            RestoreKind::Changelog,
            "t",
            Some("0_0".into()),
            sensors.clone(),
        );
        let tp = TopicPartition::new("app-s-changelog", 0);
        reporter.on_restore_start(&tp, "s", 10, 110);
        assert_eq!(sensors.remaining.get(), 100);
        reporter.on_batch_restored(&tp, "s", 49, 40);
        let progress = board.in_progress();
        assert_eq!(progress.len(), 1);
        assert_eq!(progress[0].restored, 40);
        assert_eq!(progress[0].remaining(), 60);
        assert_eq!(progress[0].task_id.as_deref(), Some("0_0"));
        assert_eq!(sensors.remaining.get(), 60);
        reporter.on_batch_restored(&tp, "s", 99, 50);
        assert_eq!(sensors.restored.get(), 90);
        // The rest were markers or compacted away: nothing remains.
        reporter.on_restore_end(&tp, "s", 90);
        assert_eq!(sensors.remaining.get(), 0);
        assert!(board.in_progress().is_empty());
        assert_eq!(
            *calls.0.lock().unwrap(),
            [
                "start app-s-changelog-0 s 10 110",
                "batch app-s-changelog-0 s 49 40",
                "batch app-s-changelog-0 s 99 50",
                "end app-s-changelog-0 s 90",
            ]
        );
    }

    #[test]
    fn a_suspended_restoration_leaves_nothing_remaining() {
        let registry = kstreams_metrics::MetricsRegistry::new();
        let board = RestoreBoard::default();
        let sensors = registry.task_bootstrap_sensors("t", "0_1").unwrap();
        let reporter = board.reporter(
            RestoreKind::Bootstrap,
            "t",
            Some("0_1".into()),
            sensors.clone(),
        );
        let (a, b) = (TopicPartition::new("a", 1), TopicPartition::new("b", 1));
        reporter.on_restore_start(&a, "ta", 0, 10);
        reporter.on_restore_start(&b, "tb", 5, 25);
        assert_eq!(sensors.remaining.get(), 30);
        reporter.on_batch_restored(&a, "ta", 3, 4);
        reporter.on_restore_suspended(&a, "ta", 4);
        assert_eq!(sensors.remaining.get(), 20);
        assert_eq!(board.in_progress()[0].store, "tb");
    }
}
