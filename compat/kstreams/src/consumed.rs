//! `--consumed-to FILE`: how many records this instance consumed from each
//! input topic, as `topic<TAB>count` lines (the Java side's `RunApp` writes
//! the same from its consumers' `records-consumed-total`). A migration
//! checks with them that the side taking over read exactly the input past
//! the last commit: nothing twice, nothing skipped.
//!
//! The counts come from `kstreams_consumer_records_consumed_total`, a
//! series per assigned partition that goes away when the partition is
//! revoked (and starts again at zero if it comes back), so they are summed
//! as deltas between reads. The file is rewritten, whole and atomically,
//! whenever a count changed: a side killed with SIGKILL leaves its last
//! counts behind.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use kstreams::metrics::{names, MetricsRegistry};

pub(crate) struct ConsumedCounts {
    file: PathBuf,
    /// Records consumed from each input topic so far.
    totals: BTreeMap<String, u64>,
    /// Each partition series' value at the last read.
    last: HashMap<(String, String), u64>,
    written: bool,
}

impl ConsumedCounts {
    pub(crate) fn new(file: PathBuf, inputs: &str) -> Self {
        ConsumedCounts {
            file,
            totals: inputs.split(',').map(|t| (t.to_owned(), 0)).collect(),
            last: HashMap::new(),
            written: false,
        }
    }

    /// Reads the partition series again and rewrites the file if a count
    /// moved (or was never written).
    pub(crate) fn update(&mut self, registry: &MetricsRegistry) -> std::io::Result<()> {
        let mut now = HashMap::new();
        for sample in registry.samples(&names::CONSUMER_RECORDS_CONSUMED_TOTAL) {
            let (Some(topic), Some(partition)) = (sample.label("topic"), sample.label("partition"))
            else {
                continue;
            };
            now.insert(
                (topic.to_owned(), partition.to_owned()),
                sample.value as u64,
            );
        }
        let mut moved = false;
        for (series, value) in &now {
            // A series missing from the last read is new, one below it was
            // removed and made again since: both counted from zero.
            let before = self.last.get(series).copied().unwrap_or(0);
            let delta = if *value >= before {
                value - before
            } else {
                *value
            };
            if let Some(total) = self.totals.get_mut(&series.0) {
                if delta > 0 {
                    *total += delta;
                    moved = true;
                }
            }
        }
        self.last = now;
        if moved || !self.written {
            self.write()?;
        }
        Ok(())
    }

    fn write(&mut self) -> std::io::Result<()> {
        let text: String = self
            .totals
            .iter()
            .map(|(topic, count)| format!("{topic}\t{count}\n"))
            .collect();
        let temporary = self.file.with_extension("tmp");
        std::fs::write(&temporary, text)?;
        std::fs::rename(&temporary, &self.file)?;
        self.written = true;
        Ok(())
    }
}
