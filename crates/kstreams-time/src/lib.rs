//! Event time for kstreams.
//!
//! This crate owns how a record gets its timestamp ([`TimestampExtractor`]),
//! how a task's stream time advances, and when punctuations fire
//! ([`PunctuationType`], [`PunctuationSchedule`]), and the window
//! definitions with their grace periods and emit strategies
//! ([`TimeWindows`], [`SlidingWindows`], [`SessionWindows`],
//! [`UnlimitedWindows`], [`EmitStrategy`]), and the window instances
//! windowed results carry ([`Window`], [`Windowed`]), and every expiry
//! rule: when windows and sessions close and what a store's retention keeps
//! ([`expiry`]), and the partition time a task commits beside each offset
//! ([`PartitionMetadata`], Kafka Streams' `TopicPartitionMetadata`).

#![warn(missing_docs)]
#![forbid(unsafe_code)]

use std::time::Duration;

pub mod expiry;
mod partition_metadata;
mod windowed;
mod windows;
pub use partition_metadata::PartitionMetadata;
pub use windowed::{Window, Windowed};
pub use windows::{
    duration_ms, CustomWindows, EmitStrategy, FixedSizeWindows, JoinWindows, SessionWindows,
    SlidingWindows, TimeWindows, UnlimitedWindows, WindowError, Windows, WindowsContaining,
    WindowsOf,
};

use kstreams_record::Timestamp;

/// Why a timestamp could not be extracted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The record carries a negative (invalid) timestamp.
    #[error(
        "record in {topic}-{partition} at offset {offset} has invalid timestamp {timestamp}; \
         use a timestamp extractor that tolerates invalid timestamps (log and skip, or \
         use partition time) if such records are expected"
    )]
    InvalidTimestamp {
        /// Source topic.
        topic: String,
        /// Source partition.
        partition: i32,
        /// Source offset.
        offset: i64,
        /// The timestamp found.
        timestamp: Timestamp,
    },
}

/// What an extractor sees of a consumed record before it is deserialized
/// further than the topology needs.
#[derive(Debug, Clone, Copy)]
pub struct ConsumedRecordView<'a> {
    /// Source topic.
    pub topic: &'a str,
    /// Source partition.
    pub partition: i32,
    /// Source offset.
    pub offset: i64,
    /// The timestamp Kafka stored with the record.
    pub timestamp: Timestamp,
    /// Raw value bytes.
    pub value: Option<&'a [u8]>,
}

/// Chooses the event time of a consumed record, as Kafka Streams'
/// `TimestampExtractor`. `partition_time` is the largest timestamp seen so
/// far on the partition (-1 if none).
///
/// Returning `Ok(t)` with `t < 0` means "skip this record" (Kafka Streams
/// drops records whose extracted timestamp is negative and counts them).
pub trait TimestampExtractor: Send + Sync + 'static {
    /// The record's event time.
    fn extract(
        &self,
        record: &ConsumedRecordView<'_>,
        partition_time: Timestamp,
    ) -> Result<Timestamp, Error>;
}

/// Kafka Streams' default: the record's own timestamp; an invalid (negative)
/// one is an error.
#[derive(Debug, Clone, Copy, Default)]
pub struct FailOnInvalidTimestamp;

impl TimestampExtractor for FailOnInvalidTimestamp {
    fn extract(&self, record: &ConsumedRecordView<'_>, _: Timestamp) -> Result<Timestamp, Error> {
        if record.timestamp < 0 {
            return Err(Error::InvalidTimestamp {
                topic: record.topic.to_string(),
                partition: record.partition,
                offset: record.offset,
                timestamp: record.timestamp,
            });
        }
        Ok(record.timestamp)
    }
}

/// The record's own timestamp; an invalid one is logged and the record
/// skipped (dropped and counted): Kafka Streams'
/// `LogAndSkipOnInvalidTimestamp`.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogAndSkipOnInvalidTimestamp;

impl TimestampExtractor for LogAndSkipOnInvalidTimestamp {
    fn extract(&self, record: &ConsumedRecordView<'_>, _: Timestamp) -> Result<Timestamp, Error> {
        if record.timestamp < 0 {
            log::warn!(
                "skipping record {}-{}@{}: invalid timestamp {}",
                record.topic,
                record.partition,
                record.offset,
                record.timestamp
            );
        }
        Ok(record.timestamp)
    }
}

/// The record's own timestamp; an invalid one is replaced by the
/// partition's time (the largest timestamp seen on the partition), and the
/// record skipped only if there is none yet: Kafka Streams'
/// `UsePartitionTimeOnInvalidTimestamp`.
#[derive(Debug, Clone, Copy, Default)]
pub struct UsePartitionTimeOnInvalidTimestamp;

impl TimestampExtractor for UsePartitionTimeOnInvalidTimestamp {
    fn extract(
        &self,
        record: &ConsumedRecordView<'_>,
        partition_time: Timestamp,
    ) -> Result<Timestamp, Error> {
        if record.timestamp >= 0 {
            return Ok(record.timestamp);
        }
        if partition_time < 0 {
            log::warn!(
                "skipping record {}-{}@{}: invalid timestamp {} and no partition time yet",
                record.topic,
                record.partition,
                record.offset,
                record.timestamp
            );
        }
        Ok(partition_time)
    }
}

/// Processing time: the wall clock when the record is read, whatever its
/// timestamp: Kafka Streams' `WallclockTimestampExtractor`.
#[derive(Debug, Clone, Copy, Default)]
pub struct WallclockTimestampExtractor;

impl TimestampExtractor for WallclockTimestampExtractor {
    fn extract(&self, _: &ConsumedRecordView<'_>, _: Timestamp) -> Result<Timestamp, Error> {
        Ok(std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as Timestamp))
    }
}

/// Event time from the record itself, by a function of its raw value,
/// timestamp and partition time; for a business time field in the value:
///
/// ```
/// use kstreams_time::{ConsumedRecordView, TimestampExtractor, ValueTimestampExtractor};
///
/// // Values look like "1700000000000,order-42": the time comes first.
/// let extractor = ValueTimestampExtractor::new(|record: &ConsumedRecordView<'_>, _| {
///     let value = std::str::from_utf8(record.value?).ok()?;
///     value.split(',').next()?.parse().ok()
/// });
/// let view = ConsumedRecordView {
///     topic: "orders",
///     partition: 0,
///     offset: 7,
///     timestamp: 5,
///     value: Some(b"1700000000000,order-42"),
/// };
/// assert_eq!(extractor.extract(&view, -1).unwrap(), 1_700_000_000_000);
/// ```
///
/// When the function returns `None` (no field, bad bytes), the record is
/// skipped (dropped and counted) rather than failing the task.
pub struct ValueTimestampExtractor<F> {
    extract: F,
}

impl<F> ValueTimestampExtractor<F>
where
    F: Fn(&ConsumedRecordView<'_>, Timestamp) -> Option<Timestamp> + Send + Sync + 'static,
{
    /// An extractor calling `extract` on each record.
    pub fn new(extract: F) -> Self {
        ValueTimestampExtractor { extract }
    }
}

impl<F> TimestampExtractor for ValueTimestampExtractor<F>
where
    F: Fn(&ConsumedRecordView<'_>, Timestamp) -> Option<Timestamp> + Send + Sync + 'static,
{
    fn extract(
        &self,
        record: &ConsumedRecordView<'_>,
        partition_time: Timestamp,
    ) -> Result<Timestamp, Error> {
        Ok((self.extract)(record, partition_time).unwrap_or(-1))
    }
}

/// Which clock drives a punctuation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PunctuationType {
    /// Fires as stream time (the largest record timestamp a task has seen)
    /// passes each interval; driven by data.
    StreamTime,
    /// Fires as the wall clock passes each interval; driven by the clock.
    WallClockTime,
}

/// One scheduled punctuation: when it fires next and how often.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PunctuationSchedule {
    /// Which clock drives it.
    pub kind: PunctuationType,
    /// The interval in milliseconds (at least 1).
    pub interval_ms: i64,
    /// The time at which it fires next.
    pub next_ms: Timestamp,
}

impl PunctuationSchedule {
    /// A new schedule, as Kafka Streams starts them: stream-time
    /// punctuations are aligned to 0 and so fire on the first record
    /// processed after scheduling; wall-clock ones first fire one interval
    /// after `now`.
    pub fn new(kind: PunctuationType, interval: Duration, now: Timestamp) -> Self {
        let interval_ms = (interval.as_millis() as i64).max(1);
        let next_ms = match kind {
            PunctuationType::StreamTime => 0,
            PunctuationType::WallClockTime => now + interval_ms,
        };
        Self {
            kind,
            interval_ms,
            next_ms,
        }
    }

    /// A schedule anchored at `start` (Kafka Streams' `schedule(Instant,
    /// Duration, ...)`, KIP-1146): it fires at `start`, then each interval
    /// after it. A `start` before `now` (the clock it runs on) fires first
    /// at the next of those times after `now`, not at once.
    pub fn anchored(
        kind: PunctuationType,
        start: Timestamp,
        interval: Duration,
        now: Timestamp,
    ) -> Self {
        let interval_ms = (interval.as_millis() as i64).max(1);
        let next_ms = if start >= now {
            start
        } else {
            start + ((now - start) / interval_ms + 1) * interval_ms
        };
        Self {
            kind,
            interval_ms,
            next_ms,
        }
    }

    /// If the schedule is due at `now`, returns `now` (punctuators see the
    /// current time, not the slot) and moves to the next slot after `now`;
    /// slots a jump skipped are not replayed, as in Kafka Streams.
    pub fn fire_if_due(&mut self, now: Timestamp) -> Option<Timestamp> {
        if now < self.next_ms {
            return None;
        }
        let mut next = self.next_ms + self.interval_ms;
        if now >= next {
            next = now - ((now - self.next_ms) % self.interval_ms) + self.interval_ms;
        }
        self.next_ms = next;
        Some(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_extractor_rejects_negative_timestamps() {
        let view = ConsumedRecordView {
            topic: "t",
            partition: 0,
            offset: 3,
            timestamp: -1,
            value: None,
        };
        let err = FailOnInvalidTimestamp.extract(&view, -1).unwrap_err();
        assert!(err.to_string().contains("t-0 at offset 3"), "{err}");
        let ok = ConsumedRecordView {
            timestamp: 42,
            ..view
        };
        assert_eq!(FailOnInvalidTimestamp.extract(&ok, -1).unwrap(), 42);
    }

    #[test]
    fn wall_clock_schedule_fires_each_interval_and_skips_missed_slots() {
        let mut s = PunctuationSchedule::new(
            PunctuationType::WallClockTime,
            Duration::from_millis(10),
            100,
        );
        assert_eq!(s.fire_if_due(109), None);
        assert_eq!(s.fire_if_due(110), Some(110));
        assert_eq!(s.fire_if_due(115), None);
        assert_eq!(s.fire_if_due(145), Some(145));
        assert_eq!(s.next_ms, 150);
    }

    #[test]
    fn stream_time_schedule_is_aligned_to_zero() {
        let mut s =
            PunctuationSchedule::new(PunctuationType::StreamTime, Duration::from_millis(10), -1);
        assert_eq!(s.fire_if_due(-1), None);
        assert_eq!(s.fire_if_due(7), Some(7));
        assert_eq!(s.next_ms, 10);
        assert_eq!(s.fire_if_due(9), None);
        assert_eq!(s.fire_if_due(10), Some(10));
        assert_eq!(s.fire_if_due(37), Some(37));
        assert_eq!(s.next_ms, 40);
    }

    #[test]
    fn an_anchored_schedule_fires_at_its_start_or_the_next_slot_after_now() {
        let hour = Duration::from_secs(3600);
        // A start ahead: the first punctuation is at the start itself.
        let mut s =
            PunctuationSchedule::anchored(PunctuationType::WallClockTime, 7_200_000, hour, 1_000);
        assert_eq!(s.fire_if_due(7_199_999), None);
        assert_eq!(s.fire_if_due(7_200_000), Some(7_200_000));
        assert_eq!(s.next_ms, 10_800_000);
        // A start behind: the next slot after now, never at once, even on a
        // slot.
        let s = PunctuationSchedule::anchored(PunctuationType::WallClockTime, 0, hour, 5_000_000);
        assert_eq!(s.next_ms, 7_200_000);
        let s = PunctuationSchedule::anchored(PunctuationType::StreamTime, 0, hour, 3_600_000);
        assert_eq!(s.next_ms, 7_200_000);
        // Before the first record (stream time -1) a start at 0 is ahead.
        let s = PunctuationSchedule::anchored(PunctuationType::StreamTime, 0, hour, -1);
        assert_eq!(s.next_ms, 0);
    }
}

#[cfg(test)]
mod extractor_tests {
    use super::*;

    fn view(timestamp: Timestamp) -> ConsumedRecordView<'static> {
        ConsumedRecordView {
            topic: "t",
            partition: 0,
            offset: 3,
            timestamp,
            value: None,
        }
    }

    #[test]
    fn the_kafka_streams_extractors_treat_invalid_timestamps_as_documented() {
        assert!(FailOnInvalidTimestamp.extract(&view(-1), 10).is_err());
        assert_eq!(FailOnInvalidTimestamp.extract(&view(5), 10).unwrap(), 5);
        assert!(LogAndSkipOnInvalidTimestamp.extract(&view(-1), 10).unwrap() < 0);
        assert_eq!(
            UsePartitionTimeOnInvalidTimestamp
                .extract(&view(-1), 10)
                .unwrap(),
            10
        );
        assert!(
            UsePartitionTimeOnInvalidTimestamp
                .extract(&view(-1), -1)
                .unwrap()
                < 0
        );
        assert_eq!(
            UsePartitionTimeOnInvalidTimestamp
                .extract(&view(7), 10)
                .unwrap(),
            7
        );
        assert!(WallclockTimestampExtractor.extract(&view(1), -1).unwrap() > 1_600_000_000_000);
    }
}
