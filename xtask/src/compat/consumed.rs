//! How many input records each side of a migration consumed: both write
//! `topic<TAB>count` lines to the file `--consumed-to` names (Kafka
//! Streams from its consumers' `records-consumed-total`, kstreams from
//! `kstreams_consumer_records_consumed_total`). The side that hands over
//! must have read exactly its half and the side that takes over exactly
//! the rest: a record read again past the last commit, or one skipped,
//! changes a count even where it would not change the output.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};

use crate::process;

/// Records consumed by topic.
pub(super) type Counts = BTreeMap<String, u64>;

/// Reads a side's counts.
pub(super) fn read(file: &Path) -> Result<Counts> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("no consumed-record counts in {}", file.display()))?;
    text.lines()
        .map(|line| {
            let (topic, count) = line
                .split_once('\t')
                .with_context(|| format!("{}: not topic<TAB>count: {line}", file.display()))?;
            Ok((topic.to_owned(), count.parse()?))
        })
        .collect()
}

/// Before a side is killed: waits until its counts are on disk and have
/// not changed for half a second (kstreams rewrites them as it consumes;
/// Kafka Streams writes them once it saw its group idle, which may be a
/// moment after the harness saw it).
pub(super) fn await_settled(file: &Path) {
    let modified = || std::fs::metadata(file).and_then(|m| m.modified()).ok();
    process::wait_until(Duration::from_secs(30), || {
        modified().is_some_and(|at| {
            SystemTime::now()
                .duration_since(at)
                .is_ok_and(|age| age >= Duration::from_millis(500))
        })
    });
}

/// Compares what a side consumed with what it should have; `None` when
/// equal, else what differs.
pub(super) fn differences(side: &str, consumed: &Counts, expected: &Counts) -> Option<String> {
    let differing: Vec<String> = expected
        .iter()
        .filter(|(topic, count)| consumed.get(*topic) != Some(count))
        .map(|(topic, count)| {
            format!(
                "{side} consumed {} records of {topic}, not {count}",
                consumed.get(topic).copied().unwrap_or(0)
            )
        })
        .collect();
    (!differing.is_empty()).then(|| differing.join("; "))
}
