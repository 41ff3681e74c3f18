//! One window and a key in it: what windowed operators emit and windowed
//! stores hold, as opposed to the window definitions of
//! [`windows`](crate::TimeWindows) that say which windows a record falls
//! into.

use kstreams_record::Timestamp;

/// A time window: `[start, end)` for time windows, `[start, end]` for
/// sessions (Kafka Streams' `TimeWindow` and `SessionWindow`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Window {
    /// Start timestamp (inclusive).
    pub start: Timestamp,
    /// End timestamp (exclusive for time windows, inclusive for sessions).
    pub end: Timestamp,
}

impl Window {
    /// A window from `start` to `end`.
    pub fn new(start: Timestamp, end: Timestamp) -> Self {
        Window { start, end }
    }
}

/// A key with the window it belongs to: Kafka Streams' `Windowed<K>`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Windowed<K> {
    /// The record key.
    pub key: K,
    /// The window.
    pub window: Window,
}

impl<K> Windowed<K> {
    /// A windowed key.
    pub fn new(key: K, window: Window) -> Self {
        Windowed { key, window }
    }
}
