//! The windowed counts: windowed-count (tumbling, suppressed to final
//! results), windowed-count-histogram, session-windows and sliding-windows.

use kstreams::prelude::*;

use crate::{SESSION_GAP, SESSION_GRACE, SLIDING_DIFFERENCE, SLIDING_GRACE};
use crate::{WINDOW_GRACE, WINDOW_SIZE};

/// windowed-count: `groupByKey`, tumbling 10 s windows with 5 s grace,
/// `count`, `suppress(untilWindowCloses(unbounded()))`, `toStream`, `to`.
pub(crate) fn windowed_count(builder: &StreamsBuilder, input: &str, output: &str) {
    builder
        .stream_with(input, Consumed::with(StringSerde, StringSerde))
        .group_by_key()
        .windowed_by(TimeWindows::of_size_and_grace(WINDOW_SIZE, WINDOW_GRACE))
        .count()
        .suppress(Suppressed::until_window_closes(BufferConfig::unbounded()))
        .to_stream()
        .to_with(
            output,
            Produced::with(
                TimeWindowedSerde::new(StringSerde, millis(WINDOW_SIZE)),
                Nullable(I64Serde),
            ),
        );
}

/// windowed-count-histogram: windowed-count's counts (without the
/// suppression) regrouped by count (`groupBy((window, count) -> (count,
/// user))`) and counted: how many (user, window) pairs have each count. A
/// window's first update carries the initial count 0 as its old value.
pub(crate) fn windowed_count_histogram(builder: &StreamsBuilder, input: &str, output: &str) {
    builder
        .stream_with(input, Consumed::with(StringSerde, StringSerde))
        .group_by_key()
        .windowed_by(TimeWindows::of_size_and_grace(WINDOW_SIZE, WINDOW_GRACE))
        .count()
        .group_by_with(
            |window: &Windowed<String>, count: i64| (count.to_string(), window.key.clone()),
            Grouped::with(StringSerde, StringSerde),
        )
        .count()
        .to_stream()
        .to_with(output, Produced::with(StringSerde, Nullable(I64Serde)));
}

/// session-windows: `groupByKey`, sessions of 5 s inactivity with 2 s
/// grace, `count`, `toStream`, `to`. Merged sessions are deleted with
/// tombstones, hence the nullable count.
pub(crate) fn session_windows(builder: &StreamsBuilder, input: &str, output: &str) {
    builder
        .stream_with(input, Consumed::with(StringSerde, StringSerde))
        .group_by_key()
        .windowed_by_session(SessionWindows::of_inactivity_gap_and_grace(
            SESSION_GAP,
            SESSION_GRACE,
        ))
        .count()
        .to_stream()
        .to_with(
            output,
            Produced::with(SessionWindowedSerde::new(StringSerde), Nullable(I64Serde)),
        );
}

/// sliding-windows: `groupByKey`, sliding windows of 5 s time difference
/// with 2 s grace, `count`, `toStream`, `to`; the key is written as a time
/// window of the difference's size, as Java's
/// `timeWindowedSerdeFrom(String.class, 5000)`.
pub(crate) fn sliding_windows(builder: &StreamsBuilder, input: &str, output: &str) {
    builder
        .stream_with(input, Consumed::with(StringSerde, StringSerde))
        .group_by_key()
        .windowed_by_sliding(SlidingWindows::of_time_difference_and_grace(
            SLIDING_DIFFERENCE,
            SLIDING_GRACE,
        ))
        .count()
        .to_stream()
        .to_with(
            output,
            Produced::with(
                TimeWindowedSerde::new(StringSerde, millis(SLIDING_DIFFERENCE)),
                Nullable(I64Serde),
            ),
        );
}

/// A window size as the serdes take it.
fn millis(duration: std::time::Duration) -> i64 {
    duration.as_millis() as i64
}

/// session-suppress: session-windows' sessions suppressed until they close
/// (`suppress(untilWindowCloses(unbounded()))`): each session written once,
/// when stream time passes its end + inactivity gap + grace.
pub(crate) fn session_suppress(builder: &StreamsBuilder, input: &str, output: &str) {
    builder
        .stream_with(input, Consumed::with(StringSerde, StringSerde))
        .group_by_key()
        .windowed_by_session(SessionWindows::of_inactivity_gap_and_grace(
            SESSION_GAP,
            SESSION_GRACE,
        ))
        .count()
        .suppress(Suppressed::until_window_closes(BufferConfig::unbounded()))
        .to_stream()
        .to_with(
            output,
            Produced::with(SessionWindowedSerde::new(StringSerde), Nullable(I64Serde)),
        );
}
