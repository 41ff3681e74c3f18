//! Where a window store without local state starts restoring: at the first
//! changelog record stamped within the retention of the newest window, not
//! at the changelog's start (Kafka Streams 4.4 seeks a windowed changelog
//! by time too, `StoreChangelogReader#seekByRetentionFromPolledRecords`).
//!
//! A windowed changelog is kept for the store's retention plus a day
//! (`windowstore.changelog.additional.retention.ms`), and Kafka deletes
//! whole log segments only, so it holds far more than the store keeps: a
//! one-hour count's changelog spans a day to a week of windows. Everything
//! but the last hour would be written and then dropped as expired.
//!
//! The rule holds for stores whose changelog records are each stamped at
//! or after their window's start
//! ([`StoreBuilder::restore_within_retention`](kstreams_state::StoreBuilder::restore_within_retention)).
//! The newest window start `s` in the changelog's tail bounds the store's
//! stream time after a full restore from below, so every window starting
//! before `s - retention + 1` is expired then; a record stamped before that
//! belongs to such a window. Reading from the first record stamped at or
//! after it (the broker's lookup by time) therefore ends in the same store
//! as reading everything. Kafka Streams 4.4 subtracts the retention from the
//! last record's timestamp instead, which can lie a window's size past its
//! start and skip retained windows; and under exactly-once the last offset
//! is a transaction marker, so it always restores in full.
//!
//! Under exactly-once the changelog holds commit markers, each stamped with
//! the wall clock of its commit, and the broker's lookup by time answers
//! the first offset stamped at or after the time, marker or record. Where
//! records are stamped close to the wall clock that is the first commit
//! within the retention; where the store's event time lags the wall clock
//! by more than its retention (reprocessing old input), it is an earlier
//! marker, and the store restores more than it needs, never less.

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use super::RuntimeError;
use crate::kafka::client_error::ClientResult;

/// Records read back from the changelog's end to find its newest window;
/// eight times more, up to [`WIDENINGS`] times, while they hold none (a
/// tail of aborted transactions' records and markers).
const TAIL: i64 = 1_000;
const WIDENINGS: u32 = 3;

/// How long reading the tail and looking the time up may take: the stream
/// thread waits meanwhile. A tail read short of the end (an open
/// transaction holds a read_committed reader back) goes on with the newest
/// window found so far, which can only start the restore earlier.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// The newest window in a changelog: its start and the offset of a record
/// of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct NewestWindow {
    start: i64,
    offset: i64,
}

/// The offset a window store of `retention` restores `topic`/`partition`
/// from, when its log spans `low..high` and the store holds nothing:
/// `low` unless the changelog's tail and the broker's lookup by time allow
/// a later one. Reads with `probe`, an assign-only consumer of the
/// restore consumer's configuration (its isolation level included), and
/// leaves it unassigned.
pub(crate) fn retention_start(
    probe: &BaseConsumer,
    topic: &str,
    partition: i32,
    retention: i64,
    (low, high): (i64, i64),
) -> Result<i64, RuntimeError> {
    let deadline = Instant::now() + PROBE_TIMEOUT;
    let newest = newest_window(probe, topic, partition, (low, high), deadline);
    probe.unassign().client()?;
    let Some(newest) = newest? else {
        return Ok(low);
    };
    let Some(first_live) = first_live(newest.start, retention) else {
        return Ok(low);
    };
    let mut at = TopicPartitionList::new();
    at.add_partition_offset(topic, partition, Offset::Offset(first_live))
        .client()?;
    // At least a second for the lookup, however long the tail took.
    let lookup = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_secs(1));
    let found = probe
        .offsets_for_times(at, lookup)
        .client()?
        .find_partition(topic, partition)
        .and_then(|e| match e.offset() {
            Offset::Offset(o) => Some(o),
            _ => None,
        });
    log::debug!(
        "{topic}-{partition}: newest window {newest:?}, first live {first_live}, first \
         offset stamped there {found:?}"
    );
    Ok(clamped_start(low, found, newest.offset))
}

/// The first time a window of a store of `retention` is live in once the
/// newest window starts at `newest_start`: the time to look up. `None`
/// when it is not after 0: every record is stamped at or after it (Kafka
/// has no negative timestamps), and the broker would read a negative time
/// as a special one (-1: the log's end).
fn first_live(newest_start: i64, retention: i64) -> Option<i64> {
    let first_live = newest_start.saturating_sub(retention).saturating_add(1);
    (first_live > 0).then_some(first_live)
}

/// Where to start given the log start `low`, the broker's answer `found`
/// (the first offset stamped at or after the newest window's first live
/// time, if any) and the offset of a record of the newest window: never
/// before the log start, and never after that record, which must be
/// restored for the store's stream time to reach the newest window.
fn clamped_start(low: i64, found: Option<i64>, newest: i64) -> i64 {
    found.map_or(low, |o| o.min(newest).max(low))
}

/// Reads the tail of `topic`/`partition` (whose log spans `low..high`) and
/// returns its newest window, as far as read by `deadline`; `None` when no
/// record read holds one.
fn newest_window(
    probe: &BaseConsumer,
    topic: &str,
    partition: i32,
    (low, high): (i64, i64),
    deadline: Instant,
) -> Result<Option<NewestWindow>, RuntimeError> {
    let mut span = TAIL;
    for _ in 0..=WIDENINGS {
        let from = high.saturating_sub(span).max(low);
        let mut assignment = TopicPartitionList::new();
        assignment
            .add_partition_offset(topic, partition, Offset::Offset(from))
            .client()?;
        probe.assign(&assignment).client()?;
        let (newest, read_through) = read_tail(probe, topic, partition, high, deadline)?;
        if newest.is_some() || from == low || !read_through {
            return Ok(newest);
        }
        span = span.saturating_mul(8);
    }
    Ok(None)
}

/// Reads the assigned partition up to `high`, or until `deadline`: the
/// newest window read, and whether it read through.
fn read_tail(
    probe: &BaseConsumer,
    topic: &str,
    partition: i32,
    high: i64,
    deadline: Instant,
) -> Result<(Option<NewestWindow>, bool), RuntimeError> {
    let mut newest: Option<NewestWindow> = None;
    loop {
        if Instant::now() >= deadline {
            return Ok((newest, false));
        }
        match probe.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => {
                let offset = message.offset();
                if offset >= high {
                    return Ok((newest, true));
                }
                let start = message
                    .key()
                    .and_then(kstreams_state::format::parse_window_store_key)
                    .map(|(_, start, _)| start);
                if let Some(start) = start {
                    if newest.is_none_or(|n| start >= n.start) {
                        newest = Some(NewestWindow { start, offset });
                    }
                }
                if offset + 1 >= high {
                    return Ok((newest, true));
                }
            }
            Some(Err(e)) => return Err(RuntimeError::client(e)),
            // Nothing more for now: read through when the position passed
            // the end (an exactly-once changelog ends with a marker, never
            // handed out).
            None => {
                let position = probe.position().client()?;
                let at = position
                    .find_partition(topic, partition)
                    .map(|e| e.offset());
                if matches!(at, Some(Offset::Offset(p)) if p >= high) {
                    return Ok((newest, true));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{clamped_start, first_live};

    #[test]
    fn the_lookup_time_is_the_first_live_one_and_never_a_special_time() {
        // One-minute windows kept an hour: the window an hour before the
        // newest one's start is expired, the next millisecond live.
        assert_eq!(first_live(7_200_000, 3_600_000), Some(3_600_001));
        // Event times near 0: no lookup (-1 would be the log's end).
        assert_eq!(first_live(90, 100), None);
        assert_eq!(first_live(99, 100), None);
        assert_eq!(first_live(100, 100), Some(1));
        assert_eq!(first_live(i64::MIN, 100), None);
    }

    #[test]
    fn the_start_lies_between_the_log_start_and_the_newest_window() {
        // The broker's answer, where it lies in between.
        assert_eq!(clamped_start(0, Some(700), 990), 700);
        // No record stamped at or after the time: from the log start.
        assert_eq!(clamped_start(5, None, 990), 5);
        // An answer before the log start (deleted meanwhile): the log start.
        assert_eq!(clamped_start(100, Some(40), 990), 100);
        // Later than the newest window's record (records after it stamped
        // earlier, out of order): that record is still restored.
        assert_eq!(clamped_start(0, Some(995), 990), 990);
    }
}
