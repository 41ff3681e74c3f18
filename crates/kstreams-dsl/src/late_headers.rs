//! Header names on records of the late-record side topic.

/// Start of the window the record was late for (8 bytes, big-endian).
pub const WINDOW_START: &str = "kstreams.late.window.start";
/// End of that window.
pub const WINDOW_END: &str = "kstreams.late.window.end";
/// The operator's stream time when the record arrived.
pub const STREAM_TIME: &str = "kstreams.late.stream.time";
/// The grace period of the windows, in milliseconds.
pub const GRACE_MS: &str = "kstreams.late.grace.ms";
/// The aggregation (processor name) that rejected the record.
pub const OPERATOR: &str = "kstreams.late.operator";
