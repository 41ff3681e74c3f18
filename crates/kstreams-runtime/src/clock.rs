//! Wall-clock time in Kafka's unit, for wall-clock punctuation, end-to-end
//! latency and task creation.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the epoch (0 if the clock is before it).
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
