//! Window definitions: which windows a record falls into, and how long a
//! window stays open for late records (grace).
//!
//! As in Kafka Streams since KIP-633 there is no implicit grace: every
//! constructor says whether it has one. A window is closed once stream time
//! has passed its end plus the grace period; records for closed windows are
//! late and dropped (and counted).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use kstreams_record::Timestamp;

/// Milliseconds of a duration, saturating at `i64::MAX`.
pub fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A window definition that cannot work (for example a zero size).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}: {message}")]
pub struct WindowError {
    /// The window definition.
    pub what: &'static str,
    /// What is wrong and how to fix it.
    pub message: String,
}

fn window_error(what: &'static str, message: impl Into<String>) -> WindowError {
    WindowError {
        what,
        message: message.into(),
    }
}

/// Fixed-size windows: tumbling (advance = size) or hopping (advance <
/// size). Kafka Streams' `TimeWindows`; a window is `[start, start + size)`
/// and starts are multiples of the advance since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeWindows {
    size_ms: i64,
    advance_ms: i64,
    grace_ms: i64,
}

impl TimeWindows {
    /// Tumbling windows of `size`; a record is late as soon as stream time
    /// has passed its window's end.
    pub fn of_size_with_no_grace(size: Duration) -> Self {
        Self::of_size_and_grace(size, Duration::ZERO)
    }

    /// Tumbling windows of `size` that accept late records for `grace`
    /// after their end.
    pub fn of_size_and_grace(size: Duration, grace: Duration) -> Self {
        let size_ms = duration_ms(size);
        TimeWindows {
            size_ms,
            advance_ms: size_ms,
            grace_ms: duration_ms(grace),
        }
    }

    /// Hopping windows: a new window every `advance` (at most the size).
    pub fn advance_by(mut self, advance: Duration) -> Self {
        self.advance_ms = duration_ms(advance);
        self
    }

    /// Window size in milliseconds.
    pub fn size_ms(&self) -> i64 {
        self.size_ms
    }

    /// Advance in milliseconds.
    pub fn advance_ms(&self) -> i64 {
        self.advance_ms
    }

    /// Grace period in milliseconds.
    pub fn grace_ms(&self) -> i64 {
        self.grace_ms
    }

    /// Checks size and advance, as Kafka Streams does when they are set.
    pub fn validate(&self) -> Result<(), WindowError> {
        if self.size_ms <= 0 {
            return Err(window_error(
                "TimeWindows",
                "the window size must be at least 1 ms",
            ));
        }
        if self.advance_ms <= 0 || self.advance_ms > self.size_ms {
            return Err(window_error(
                "TimeWindows",
                format!(
                    "the advance ({} ms) must be at least 1 ms and at most the window size ({} ms)",
                    self.advance_ms, self.size_ms
                ),
            ));
        }
        Ok(())
    }

    /// The windows `[start, end)` that contain `timestamp`, by start.
    pub fn windows_for(&self, timestamp: Timestamp) -> Vec<(Timestamp, Timestamp)> {
        self.windows_containing(timestamp).collect()
    }

    /// [`Self::windows_for`] without collecting them.
    pub fn windows_containing(&self, timestamp: Timestamp) -> WindowsContaining {
        let mut start = (timestamp - self.size_ms + self.advance_ms).max(0);
        start -= start % self.advance_ms;
        WindowsContaining {
            next: Some(start),
            last: timestamp,
            size_ms: self.size_ms,
            advance_ms: self.advance_ms,
        }
    }

    /// How long a window store must keep windows: size plus grace.
    pub fn retention_ms(&self) -> i64 {
        self.size_ms.saturating_add(self.grace_ms)
    }
}

/// Sliding windows (KIP-450): a window of `time_difference` ending at each
/// record, `[t - difference, t]` with both ends inclusive. Kafka Streams'
/// `SlidingWindows`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlidingWindows {
    time_difference_ms: i64,
    grace_ms: i64,
}

impl SlidingWindows {
    /// Sliding windows without grace.
    pub fn of_time_difference_with_no_grace(time_difference: Duration) -> Self {
        Self::of_time_difference_and_grace(time_difference, Duration::ZERO)
    }

    /// Sliding windows that accept late records for `grace`.
    pub fn of_time_difference_and_grace(time_difference: Duration, grace: Duration) -> Self {
        SlidingWindows {
            time_difference_ms: duration_ms(time_difference),
            grace_ms: duration_ms(grace),
        }
    }

    /// The maximum time difference between two records of a window.
    pub fn time_difference_ms(&self) -> i64 {
        self.time_difference_ms
    }

    /// Grace period in milliseconds.
    pub fn grace_ms(&self) -> i64 {
        self.grace_ms
    }

    /// Checks the time difference.
    pub fn validate(&self) -> Result<(), WindowError> {
        if self.time_difference_ms <= 0 {
            return Err(window_error(
                "SlidingWindows",
                "the time difference must be at least 1 ms",
            ));
        }
        Ok(())
    }

    /// Retention of the window store: twice the difference plus grace, as
    /// Kafka Streams (a right window can start after the record).
    pub fn retention_ms(&self) -> i64 {
        self.time_difference_ms
            .saturating_mul(2)
            .saturating_add(self.grace_ms)
    }
}

/// Session windows: records of a key closer than the inactivity gap belong
/// to one session, `[first, last]`. Kafka Streams' `SessionWindows`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionWindows {
    gap_ms: i64,
    grace_ms: i64,
}

impl SessionWindows {
    /// Sessions closed by `gap` of inactivity, without grace.
    pub fn of_inactivity_gap_with_no_grace(gap: Duration) -> Self {
        Self::of_inactivity_gap_and_grace(gap, Duration::ZERO)
    }

    /// Sessions closed by `gap` of inactivity, accepting late records for
    /// `grace` after a session's end.
    pub fn of_inactivity_gap_and_grace(gap: Duration, grace: Duration) -> Self {
        SessionWindows {
            gap_ms: duration_ms(gap),
            grace_ms: duration_ms(grace),
        }
    }

    /// The inactivity gap in milliseconds.
    pub fn inactivity_gap_ms(&self) -> i64 {
        self.gap_ms
    }

    /// Grace period in milliseconds.
    pub fn grace_ms(&self) -> i64 {
        self.grace_ms
    }

    /// Checks the gap.
    pub fn validate(&self) -> Result<(), WindowError> {
        if self.gap_ms <= 0 {
            return Err(window_error(
                "SessionWindows",
                "the inactivity gap must be at least 1 ms",
            ));
        }
        Ok(())
    }

    /// Retention of the session store: gap plus grace.
    pub fn retention_ms(&self) -> i64 {
        self.gap_ms.saturating_add(self.grace_ms)
    }
}

/// One window from a start time on, never closing. Kafka Streams'
/// `UnlimitedWindows`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UnlimitedWindows {
    start_ms: i64,
}

impl UnlimitedWindows {
    /// The window starting at the epoch.
    pub fn of() -> Self {
        Self::default()
    }

    /// The window starting at `start` (ms since the epoch).
    pub fn start_on(start: Timestamp) -> Self {
        UnlimitedWindows { start_ms: start }
    }

    /// The window a timestamp falls into, if it is not before the start.
    pub fn windows_for(&self, timestamp: Timestamp) -> Vec<(Timestamp, Timestamp)> {
        self.windows_containing(timestamp).collect()
    }

    /// [`Self::windows_for`] without collecting it.
    pub fn windows_containing(&self, timestamp: Timestamp) -> WindowsContaining {
        WindowsContaining {
            next: (timestamp >= self.start_ms).then_some(self.start_ms),
            last: self.start_ms,
            size_ms: i64::MAX,
            advance_ms: 1,
        }
    }
}

/// The windows `[start, end)` of fixed size that contain a timestamp, by
/// start: what `windows_for` collects, one window at a time, so that a
/// record's windows cost no allocation.
#[derive(Debug, Clone)]
pub struct WindowsContaining {
    next: Option<Timestamp>,
    /// The last start that contains the timestamp.
    last: Timestamp,
    size_ms: i64,
    advance_ms: i64,
}

impl Iterator for WindowsContaining {
    type Item = (Timestamp, Timestamp);

    fn next(&mut self) -> Option<Self::Item> {
        let start = self.next.filter(|&start| start <= self.last)?;
        self.next = start.checked_add(self.advance_ms);
        // An unlimited window (size i64::MAX) ends at the end of time
        // whatever its start.
        let end = match self.size_ms {
            i64::MAX => i64::MAX,
            size => start.saturating_add(size),
        };
        Some((start, end))
    }
}

/// Windows of the application's own, for `windowed_by`: Kafka Streams'
/// `Windows` (a user's subclass of it). Each window is `[start, end)` and
/// `size_ms` long, at starts the implementation chooses (calendar days in
/// a time zone, business hours, ...). A window store keeps a window's
/// start and reads its end back as start plus `size_ms`, as Kafka Streams'
/// does; a window stays open for late records until stream time passes
/// its end plus `grace_ms`, and the store keeps windows for `size_ms +
/// grace_ms`.
///
/// ```
/// use kstreams_time::{FixedSizeWindows, Windows};
///
/// /// Days that begin at 06:00 UTC.
/// #[derive(Debug)]
/// struct ShiftDays;
///
/// const DAY: i64 = 86_400_000;
/// const SHIFT: i64 = 6 * 3_600_000;
///
/// impl Windows for ShiftDays {
///     fn windows_for(&self, timestamp: i64) -> Vec<(i64, i64)> {
///         let start = (timestamp - SHIFT).div_euclid(DAY) * DAY + SHIFT;
///         vec![(start, start + DAY)]
///     }
///     fn size_ms(&self) -> i64 {
///         DAY
///     }
///     fn grace_ms(&self) -> i64 {
///         3_600_000
///     }
/// }
///
/// let windows = FixedSizeWindows::custom(ShiftDays);
/// assert_eq!(windows.windows_for(SHIFT + 5), vec![(SHIFT, SHIFT + DAY)]);
/// assert_eq!(windows.retention_ms(), DAY + 3_600_000);
/// ```
pub trait Windows: fmt::Debug + Send + Sync + 'static {
    /// The windows `[start, end)` that contain `timestamp`, in any order.
    fn windows_for(&self, timestamp: Timestamp) -> Vec<(Timestamp, Timestamp)>;
    /// The length of every window, in milliseconds.
    fn size_ms(&self) -> i64;
    /// How long after its end a window still takes late records, in
    /// milliseconds.
    fn grace_ms(&self) -> i64;
}

/// Windows of a size fixed in advance, the kinds `windowed_by` takes
/// besides sliding and session windows: time windows (tumbling, hopping),
/// the unlimited window and windows of the application's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FixedSizeWindows {
    /// Tumbling or hopping windows.
    Time(TimeWindows),
    /// One window from a start time on, never closing.
    Unlimited(UnlimitedWindows),
    /// The application's own ([`Windows`]).
    Custom(CustomWindows),
}

/// A [`Windows`] of the application's own, shared; two are equal when they
/// are the same instance.
#[derive(Debug, Clone)]
pub struct CustomWindows(Arc<dyn Windows>);

impl PartialEq for CustomWindows {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for CustomWindows {}

/// The windows that contain a timestamp, by start: see
/// [`FixedSizeWindows::windows_containing`].
#[derive(Debug, Clone)]
pub enum WindowsOf {
    /// Windows at a fixed stride, made one at a time.
    Strided(WindowsContaining),
    /// Windows an application's [`Windows`] listed.
    Listed(std::vec::IntoIter<(Timestamp, Timestamp)>),
}

impl Iterator for WindowsOf {
    type Item = (Timestamp, Timestamp);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            WindowsOf::Strided(windows) => windows.next(),
            WindowsOf::Listed(windows) => windows.next(),
        }
    }
}

impl From<TimeWindows> for FixedSizeWindows {
    fn from(w: TimeWindows) -> Self {
        FixedSizeWindows::Time(w)
    }
}

impl From<UnlimitedWindows> for FixedSizeWindows {
    fn from(w: UnlimitedWindows) -> Self {
        FixedSizeWindows::Unlimited(w)
    }
}

impl FixedSizeWindows {
    /// Windows of the application's own.
    pub fn custom(windows: impl Windows) -> Self {
        FixedSizeWindows::Custom(CustomWindows(Arc::new(windows)))
    }

    /// The windows `[start, end)` that contain `timestamp`, by start.
    pub fn windows_for(&self, timestamp: Timestamp) -> Vec<(Timestamp, Timestamp)> {
        self.windows_containing(timestamp).collect()
    }

    /// [`Self::windows_for`] without collecting them (time windows and the
    /// unlimited window allocate nothing).
    pub fn windows_containing(&self, timestamp: Timestamp) -> WindowsOf {
        match self {
            FixedSizeWindows::Time(w) => WindowsOf::Strided(w.windows_containing(timestamp)),
            FixedSizeWindows::Unlimited(w) => WindowsOf::Strided(w.windows_containing(timestamp)),
            FixedSizeWindows::Custom(w) => {
                let mut windows = w.0.windows_for(timestamp);
                windows.sort_unstable();
                windows.dedup();
                WindowsOf::Listed(windows.into_iter())
            }
        }
    }

    /// Window size in milliseconds (`i64::MAX` for the unlimited window).
    pub fn size_ms(&self) -> i64 {
        match self {
            FixedSizeWindows::Time(w) => w.size_ms(),
            FixedSizeWindows::Unlimited(_) => i64::MAX,
            FixedSizeWindows::Custom(w) => w.0.size_ms(),
        }
    }

    /// Grace period in milliseconds (none for the unlimited window, which
    /// never closes).
    pub fn grace_ms(&self) -> i64 {
        match self {
            FixedSizeWindows::Time(w) => w.grace_ms(),
            FixedSizeWindows::Unlimited(_) => 0,
            FixedSizeWindows::Custom(w) => w.0.grace_ms(),
        }
    }

    /// How long a window store keeps windows.
    pub fn retention_ms(&self) -> i64 {
        match self {
            FixedSizeWindows::Time(w) => w.retention_ms(),
            FixedSizeWindows::Unlimited(_) => i64::MAX,
            FixedSizeWindows::Custom(w) => w.0.size_ms().saturating_add(w.0.grace_ms()),
        }
    }

    /// Checks the definition.
    pub fn validate(&self) -> Result<(), WindowError> {
        match self {
            FixedSizeWindows::Time(w) => w.validate(),
            FixedSizeWindows::Unlimited(_) => Ok(()),
            FixedSizeWindows::Custom(w) => {
                let (size, grace) = (w.0.size_ms(), w.0.grace_ms());
                if size <= 0 {
                    return Err(window_error(
                        "Windows",
                        format!(
                            "{:?}: size_ms is {size}; a window must be longer than 0 ms",
                            w.0
                        ),
                    ));
                }
                if grace < 0 {
                    return Err(window_error(
                        "Windows",
                        format!("{:?}: grace_ms is {grace}; it must be 0 or more", w.0),
                    ));
                }
                Ok(())
            }
        }
    }
}

/// The time window of a stream-stream join: Kafka Streams' `JoinWindows`.
/// A record at `t` joins records of the other stream at `t - before` to
/// `t + after` (both inclusive); both are the time difference unless set
/// apart with [`JoinWindows::before`] and [`JoinWindows::after`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JoinWindows {
    before_ms: i64,
    after_ms: i64,
    grace_ms: i64,
}

impl JoinWindows {
    /// Records at most `difference` apart join; late records are dropped
    /// as soon as their window has passed.
    pub fn of_time_difference_with_no_grace(difference: Duration) -> Self {
        Self::of_time_difference_and_grace(difference, Duration::ZERO)
    }

    /// Records at most `difference` apart join; records may come `grace`
    /// late, and left/outer results without a match wait until then.
    pub fn of_time_difference_and_grace(difference: Duration, grace: Duration) -> Self {
        let d = duration_ms(difference);
        JoinWindows {
            before_ms: d,
            after_ms: d,
            grace_ms: duration_ms(grace),
        }
    }

    /// How far back (before a record of this stream) the other stream's
    /// records join.
    pub fn before(mut self, before: Duration) -> Self {
        self.before_ms = duration_ms(before);
        self
    }

    /// How far ahead the other stream's records join.
    pub fn after(mut self, after: Duration) -> Self {
        self.after_ms = duration_ms(after);
        self
    }

    /// Milliseconds before.
    pub fn before_ms(&self) -> i64 {
        self.before_ms
    }

    /// Milliseconds after.
    pub fn after_ms(&self) -> i64 {
        self.after_ms
    }

    /// Grace period in milliseconds.
    pub fn grace_ms(&self) -> i64 {
        self.grace_ms
    }

    /// The window's size: before plus after.
    pub fn size_ms(&self) -> i64 {
        self.before_ms.saturating_add(self.after_ms)
    }

    /// Checks the window: it must hold at least one instant.
    pub fn validate(&self) -> Result<(), WindowError> {
        if self.before_ms + self.after_ms < 0 {
            return Err(window_error(
                "JoinWindows",
                "before plus after must not be negative: the window would be empty",
            ));
        }
        Ok(())
    }
}

/// When a windowed aggregation forwards results (KIP-825).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EmitStrategy {
    /// Every update of a window (the default).
    #[default]
    OnWindowUpdate,
    /// Only the final result, once the window has closed (end + grace).
    OnWindowClose,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn tumbling_windows_hold_each_timestamp_once() {
        let w = TimeWindows::of_size_with_no_grace(ms(10));
        assert_eq!(w.windows_for(0), vec![(0, 10)]);
        assert_eq!(w.windows_for(9), vec![(0, 10)]);
        assert_eq!(w.windows_for(10), vec![(10, 20)]);
        assert_eq!(w.retention_ms(), 10);
    }

    #[test]
    fn hopping_windows_overlap_and_start_at_zero_or_later() {
        let w = TimeWindows::of_size_and_grace(ms(10), ms(5)).advance_by(ms(5));
        assert_eq!(w.windows_for(3), vec![(0, 10)]);
        assert_eq!(w.windows_for(12), vec![(5, 15), (10, 20)]);
        assert_eq!(w.retention_ms(), 15);
    }

    #[test]
    fn bad_definitions_say_what_to_fix() {
        let e = TimeWindows::of_size_with_no_grace(ms(10))
            .advance_by(ms(11))
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("at most the window size"), "{e}");
        assert!(TimeWindows::of_size_with_no_grace(ms(0))
            .validate()
            .is_err());
        assert!(SessionWindows::of_inactivity_gap_with_no_grace(ms(0))
            .validate()
            .is_err());
        assert!(SlidingWindows::of_time_difference_with_no_grace(ms(0))
            .validate()
            .is_err());
    }

    #[test]
    fn unlimited_windows_start_once() {
        let w = UnlimitedWindows::start_on(100);
        assert!(w.windows_for(99).is_empty());
        assert_eq!(w.windows_for(100), vec![(100, i64::MAX)]);
        assert_eq!(w.windows_for(i64::MAX), vec![(100, i64::MAX)]);
        let before_epoch = UnlimitedWindows::start_on(-5);
        assert_eq!(before_epoch.windows_for(0), vec![(-5, i64::MAX)]);
    }

    #[test]
    fn windows_at_the_end_of_time_stop_there() {
        let w = TimeWindows::of_size_with_no_grace(ms(10)).advance_by(ms(5));
        let last = i64::MAX - i64::MAX % 5;
        assert_eq!(
            w.windows_for(i64::MAX),
            vec![(last - 5, i64::MAX), (last, i64::MAX)]
        );
        let fixed = FixedSizeWindows::from(w);
        assert_eq!(
            fixed.windows_containing(12).collect::<Vec<_>>(),
            vec![(5, 15), (10, 20)]
        );
    }
}
