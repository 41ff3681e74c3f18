//! The clock of one processing slice: when a task's turn is over, and the
//! wall-clock time its records' end-to-end latency is measured against.
//!
//! Reading the clock twice for every record was a visible share of a
//! pass-through's CPU, its records being cheap (see BENCHMARKS.md, "Stream
//! thread: clock reads"). The slice clock reads it again only after as
//! many records as half the slice's remaining time would take at the pace
//! seen so far (at most [`MAX_STRIDE`]), so a fast task reads it every few
//! dozen records, and a slow one, whose records take a good part of the
//! slice each, after every record.

use std::time::{Duration, Instant};

/// The most records between two clock reads. At a pass-through's pace
/// (BENCHMARKS.md, "Stream thread: clock reads") that many records take a
/// small fraction of a millisecond: the wall-clock time it gives is never
/// older, well under the millisecond the end-to-end latency is measured in.
const MAX_STRIDE: u32 = 32;

/// The clock of one slice: started when the slice starts, asked after each
/// record whether the slice is over.
pub(crate) struct SliceClock {
    started: Instant,
    slice: Duration,
    /// Wall-clock milliseconds at the last read.
    wall_ms: i64,
    /// Records since the slice started.
    records: u32,
    /// Records left before the next read.
    until_read: u32,
}

impl SliceClock {
    /// A slice of `slice` that starts now.
    pub(crate) fn start(slice: Duration) -> Self {
        SliceClock {
            started: Instant::now(),
            slice,
            wall_ms: crate::clock::now_ms(),
            records: 0,
            until_read: 1,
        }
    }

    /// The wall-clock time in milliseconds, as of the last read.
    pub(crate) fn wall_ms(&self) -> i64 {
        self.wall_ms
    }

    /// Counts one record done; whether the slice is over.
    pub(crate) fn record_done(&mut self) -> bool {
        self.records += 1;
        self.until_read -= 1;
        if self.until_read > 0 {
            return false;
        }
        let elapsed = self.started.elapsed();
        self.wall_ms = crate::clock::now_ms();
        if elapsed >= self.slice {
            return true;
        }
        self.until_read = next_stride(elapsed, self.slice, self.records);
        false
    }
}

/// How many records may run before the clock is read again: those that
/// fit in half of the slice's remaining time at the pace of the `records`
/// that took `elapsed`, between 1 and [`MAX_STRIDE`].
fn next_stride(elapsed: Duration, slice: Duration, records: u32) -> u32 {
    let per_record = elapsed.as_nanos() / u128::from(records.max(1));
    let half_left = slice.saturating_sub(elapsed).as_nanos() / 2;
    let fit = half_left.checked_div(per_record).unwrap_or(u128::MAX);
    fit.clamp(1, u128::from(MAX_STRIDE)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_records_read_the_clock_every_few_dozen() {
        let slice = Duration::from_millis(5);
        // 2 µs per record, 1 ms into the slice: 2 ms left would take 1000.
        assert_eq!(
            next_stride(Duration::from_millis(1), slice, 500),
            MAX_STRIDE
        );
        // A zero-duration pace (a coarse clock) is fast too.
        assert_eq!(next_stride(Duration::ZERO, slice, 3), MAX_STRIDE);
    }

    #[test]
    fn slow_records_read_the_clock_after_each() {
        let slice = Duration::from_millis(5);
        // 2 ms per record: half of the 3 ms left holds no whole record.
        assert_eq!(next_stride(Duration::from_millis(2), slice, 1), 1);
        // 100 µs per record, 3 ms in: 1 ms of the 2 ms left holds 10.
        assert_eq!(next_stride(Duration::from_millis(3), slice, 30), 10);
    }

    #[test]
    fn a_slow_record_ends_the_slice_at_once() {
        let mut clock = SliceClock::start(Duration::from_millis(5));
        std::thread::sleep(Duration::from_millis(6));
        assert!(clock.record_done());
    }

    #[test]
    fn the_wall_clock_is_read_with_the_slice_clock() {
        let mut clock = SliceClock::start(Duration::from_secs(60));
        let first = clock.wall_ms();
        assert!(first > 0);
        std::thread::sleep(Duration::from_millis(3));
        // The first record reads the clock (no pace known yet).
        assert!(!clock.record_done());
        assert!(clock.wall_ms() >= first + 3);
    }
}
