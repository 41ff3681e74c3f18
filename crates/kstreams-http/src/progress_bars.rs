//! [`RestoreProgressBars`]: a terminal progress bar per long restoration,
//! driven by the restore listener.

use std::collections::HashMap;
use std::sync::Mutex;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use kstreams_runtime::kafka::{StateRestoreListener, TopicPartition};

/// Draws one progress bar on stderr for each restoration of at least
/// [`RestoreProgressBars::min_records`] records (changelog restores,
/// global store loads and table bootstraps alike), with the rate and the
/// time left; shorter ones draw nothing. Not on a terminal, nothing is
/// drawn at all (the log lines say the same).
///
/// ```no_run
/// use std::sync::Arc;
/// use kstreams_dsl::StreamsBuilder;
/// use kstreams_http::RestoreProgressBars;
/// use kstreams_runtime::kafka::{KafkaStreams, StreamsConfig};
///
/// let builder = StreamsBuilder::new();
/// builder.stream::<String, String>("in").group_by_key().count();
/// let mut app = KafkaStreams::new(builder.build().unwrap(), StreamsConfig::new("app", "localhost:9092"));
/// app.set_global_state_restore_listener(Arc::new(RestoreProgressBars::new())).unwrap();
/// app.start().unwrap();
/// ```
pub struct RestoreProgressBars {
    bars: MultiProgress,
    min_records: u64,
    running: Mutex<HashMap<(TopicPartition, String), ProgressBar>>,
}

impl Default for RestoreProgressBars {
    fn default() -> Self {
        Self::new()
    }
}

impl RestoreProgressBars {
    /// Restorations shorter than this draw no bar by default.
    pub const MIN_RECORDS: u64 = 10_000;

    /// Bars on stderr for restorations of [`Self::MIN_RECORDS`] or more.
    pub fn new() -> Self {
        Self::with_target(ProgressDrawTarget::stderr())
    }

    /// Bars drawn to `target` (hidden, in tests).
    pub fn with_target(target: ProgressDrawTarget) -> Self {
        Self {
            bars: MultiProgress::with_draw_target(target),
            min_records: Self::MIN_RECORDS,
            running: Mutex::default(),
        }
    }

    /// Draws bars only for restorations of at least `records` records.
    pub fn min_records(mut self, records: u64) -> Self {
        self.min_records = records;
        self
    }

    /// The bars drawn now, with their position and length.
    pub fn positions(&self) -> Vec<(String, u64, u64)> {
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<(String, u64, u64)> = running
            .iter()
            .map(|((tp, store), bar)| {
                (
                    format!("{store} {tp}"),
                    bar.position(),
                    bar.length().unwrap_or(0),
                )
            })
            .collect();
        out.sort();
        out
    }

    fn take(&self, partition: &TopicPartition, store: &str) -> Option<ProgressBar> {
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&(partition.clone(), store.to_string()))
    }
}

impl StateRestoreListener for RestoreProgressBars {
    fn on_restore_start(
        &self,
        partition: &TopicPartition,
        store: &str,
        starting_offset: i64,
        ending_offset: i64,
    ) {
        let total = (ending_offset - starting_offset).max(0) as u64;
        if total < self.min_records {
            return;
        }
        let bar = self.bars.add(ProgressBar::new(total));
        bar.set_style(
            ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({per_sec}, {eta} left)")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar.set_message(format!("restoring {store} from {partition}"));
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((partition.clone(), store.to_string()), bar);
    }

    fn on_batch_restored(
        &self,
        partition: &TopicPartition,
        store: &str,
        _batch_end_offset: i64,
        num_restored: u64,
    ) {
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(bar) = running.get(&(partition.clone(), store.to_string())) {
            bar.inc(num_restored);
        }
    }

    fn on_restore_end(&self, partition: &TopicPartition, store: &str, total_restored: u64) {
        if let Some(bar) = self.take(partition, store) {
            bar.finish_with_message(format!(
                "restored {store} from {partition}: {total_restored} records"
            ));
        }
    }

    fn on_restore_suspended(&self, partition: &TopicPartition, store: &str, total_restored: u64) {
        if let Some(bar) = self.take(partition, store) {
            bar.abandon_with_message(format!(
                "suspended {store} from {partition} after {total_restored} records"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_restoration_has_a_bar_a_short_one_none() {
        let bars = RestoreProgressBars::with_target(ProgressDrawTarget::hidden());
        let long = TopicPartition::new("app-s-changelog", 0);
        let short = TopicPartition::new("app-s-changelog", 1);
        bars.on_restore_start(&long, "s", 0, 50_000);
        bars.on_restore_start(&short, "s", 0, 10);
        bars.on_batch_restored(&long, "s", 9_999, 10_000);
        bars.on_batch_restored(&short, "s", 9, 10);
        assert_eq!(
            bars.positions(),
            [("s app-s-changelog-0".to_string(), 10_000, 50_000)]
        );
        bars.on_restore_end(&long, "s", 50_000);
        assert!(bars.positions().is_empty());
    }
}
