//! Every expiry rule in one place: when a window or a session is closed
//! (late records are dropped, emit-final forwards it) and when a store's
//! retention has dropped a time. The processors, the caching layer, the
//! change-logging layer and the engines all ask these functions, so that
//! no two of them can disagree by one millisecond at a boundary.
//!
//! Each comparison is Kafka Streams' (4.x source), named where it lives.

use kstreams_record::Timestamp;

/// `stream_time - grace`: the close time of time windows (tumbling,
/// hopping, sliding), as `windowCloseTime` in `KStreamWindowAggregate` and
/// `KStreamSlidingWindowAggregate`.
pub fn window_close_time(stream_time: Timestamp, grace: Timestamp) -> Timestamp {
    stream_time.saturating_sub(grace)
}

/// Whether the time window `[start, end)` is closed at `close_time`:
/// `KStreamWindowAggregate` updates a window only if `windowEnd >
/// windowCloseTime`, and emits on close windows with `end <=
/// windowCloseTime` (its emit range ends at start `closeTime - size`).
pub fn time_window_closed(window_end: Timestamp, close_time: Timestamp) -> bool {
    window_end <= close_time
}

/// Whether the sliding window `[start, end]` (both inclusive) is closed at
/// `close_time`: `KStreamSlidingWindowAggregate` updates a window only if
/// `windowEnd >= windowCloseTime`, and emits on close windows with `end <
/// windowCloseTime` (its emit range ends at start `closeTime - difference -
/// 1`).
pub fn sliding_window_closed(window_end: Timestamp, close_time: Timestamp) -> bool {
    window_end < close_time
}

/// `stream_time - grace - gap`: the close time of sessions, as
/// `windowCloseTime` in `KStreamSessionWindowAggregate` (since
/// KAFKA-12718: a record within the gap after a session's end still
/// merges into it).
pub fn session_close_time(stream_time: Timestamp, grace: Timestamp, gap: Timestamp) -> Timestamp {
    stream_time.saturating_sub(grace).saturating_sub(gap)
}

/// Whether the session ending at `session_end` is closed at `close_time`:
/// `KStreamSessionWindowAggregate` drops a record only if `mergedWindow.end()
/// < windowCloseTime`, and emits on close sessions that end at or before
/// `windowCloseTime - 1`.
pub fn session_closed(session_end: Timestamp, close_time: Timestamp) -> bool {
    session_end < close_time
}

/// What a windowed store's retention is measured on, which decides whether
/// the time exactly `retention` behind the store's stream time is kept.
///
/// The store's stream time is the largest such time put. A store keeps
/// everything its processor still accepts, and every layer (cache, change
/// logging, engine) asks the same rule:
/// - A window store (retention at least size + grace) expires window
///   starts at or before `observed - retention`, which are exactly the
///   windows whose end is at or before the close time: `InMemoryWindowStore`
///   drops `windowStartTimestamp <= observedStreamTime - retentionPeriod`,
///   and the RocksDB window store reads from `observedStreamTime -
///   retentionPeriod + 1`.
/// - A session store (retention at least gap + grace) keeps a session
///   ending exactly at `observed - retention`, since the processor accepts
///   a session ending at the close time; emit-on-close reads it (Kafka
///   Streams' `fetchSessions` by end time has no retention bound) before
///   the put that moves the store's time on. Lookups by key do not see it:
///   Kafka Streams' session stores answer `findSessions` and
///   `fetchSession` only from `observedStreamTime - retentionPeriod + 1`
///   (`getActualFrom`), see [`RetainedTime::first_readable`]. Its caching
///   layer has no such bound: a session still in the cache is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetainedTime {
    /// Retention counts from a window's start (window stores, and the
    /// record time of stream-stream join buffers).
    WindowStart,
    /// Retention counts from a session's end.
    SessionEnd,
}

/// `observed - retention`, the retention horizon of a store whose stream
/// time is `observed` (`i64::MIN`, before anything was put, keeps all).
pub fn retention_horizon(observed: Timestamp, retention: Timestamp) -> Timestamp {
    if observed == i64::MIN {
        i64::MIN
    } else {
        observed.saturating_sub(retention)
    }
}

impl RetainedTime {
    /// The earliest time a store whose stream time is `observed` (or
    /// `i64::MIN` before anything was put) still holds with `retention`.
    pub fn first_live(self, observed: Timestamp, retention: Timestamp) -> Timestamp {
        if observed == i64::MIN {
            return i64::MIN;
        }
        let horizon = retention_horizon(observed, retention);
        match self {
            RetainedTime::WindowStart => horizon.saturating_add(1),
            RetainedTime::SessionEnd => horizon,
        }
    }

    /// The earliest time a lookup by key still sees in such a store:
    /// Kafka Streams' `getActualFrom`, `observed - retention + 1`, for
    /// window and session stores alike. For a session store this is one
    /// after what it keeps ([`RetainedTime::first_live`]): a session ending
    /// exactly at the horizon is kept for emit-on-close but not found by a
    /// later record of its key.
    pub fn first_readable(self, observed: Timestamp, retention: Timestamp) -> Timestamp {
        if observed == i64::MIN {
            return i64::MIN;
        }
        retention_horizon(observed, retention).saturating_add(1)
    }

    /// Whether `time` has expired from such a store.
    pub fn expired(self, time: Timestamp, observed: Timestamp, retention: Timestamp) -> bool {
        time < self.first_live(observed, retention)
    }
}

/// Whether a versioned store with `history_retention` has let `time` go
/// from its history: `RocksDBVersionedStore` skips a put with `timestamp <
/// observedStreamTime - historyRetention` and answers a read as of such a
/// time from the latest version only. A put or read exactly at the horizon
/// still counts.
pub fn history_expired(time: Timestamp, observed: Timestamp, history_retention: Timestamp) -> bool {
    time < retention_horizon(observed, history_retention)
}

/// Whether an unmatched record of a left or outer stream-stream join, at
/// `timestamp`, can no longer be matched: `KStreamKStreamJoin` keeps it in
/// the shared outer store while `timestamp + lookAhead + grace >=
/// streamTime` (`isOuterJoinWindowOpen`), where `look_ahead` is the join
/// window's `after` for a left record and `before` for a right one.
pub fn join_window_closed(
    timestamp: Timestamp,
    look_ahead: Timestamp,
    grace: Timestamp,
    stream_time: Timestamp,
) -> bool {
    timestamp.saturating_add(look_ahead).saturating_add(grace) < stream_time
}

/// Whether an unmatched join record whose window ends at `window_end` (its
/// time plus its side's look-ahead) is past matching the moment it
/// arrives, so it is forwarded at once instead of waiting in the outer
/// store: `KStreamKStreamJoin` checks `timeTo < streamTime`, without grace.
pub fn join_window_over(window_end: Timestamp, stream_time: Timestamp) -> bool {
    window_end < stream_time
}

/// Whether a stream record at `timestamp` is due from a stream-table join's
/// grace buffer (KIP-923) at `stream_time`: `RocksDBTimeOrderedKeyValueBuffer`
/// evicts records up to `observedStreamTime - gracePeriod` inclusive.
pub fn grace_buffer_due(timestamp: Timestamp, stream_time: Timestamp, grace: Timestamp) -> bool {
    timestamp <= stream_time.saturating_sub(grace)
}

/// Whether a stream record is too late for a stream-table join's grace
/// buffer and is joined at once without being buffered: the buffer's `put`
/// refuses `observedStreamTime - gracePeriod > timestamp`.
pub fn grace_buffer_late(timestamp: Timestamp, stream_time: Timestamp, grace: Timestamp) -> bool {
    timestamp < stream_time.saturating_sub(grace)
}

/// Whether a suppressed entry with buffer time `buffer_time` (a window's end
/// for `untilWindowCloses`, the record's time for `untilTimeLimit`) is due at
/// `stream_time` after `delay` (the grace, or the time limit):
/// `KTableSuppressProcessor` evicts while `minTimestamp <= streamTime -
/// suppressDurationMillis`.
pub fn suppression_due(buffer_time: Timestamp, stream_time: Timestamp, delay: Timestamp) -> bool {
    buffer_time <= stream_time.saturating_sub(delay)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rule_at_its_boundary() {
        // Tumbling [10, 20) at close time 20 is closed, at 19 open.
        assert!(time_window_closed(20, window_close_time(25, 5)));
        assert!(!time_window_closed(20, window_close_time(24, 5)));
        // Sliding [10, 20] stays open until close time 21.
        assert!(!sliding_window_closed(20, 20));
        assert!(sliding_window_closed(20, 21));
        // Gap 5 s, grace 0, stream time 20000: close time 15000.
        let close = session_close_time(20_000, 0, 5_000);
        assert_eq!(close, 15_000);
        assert!(!session_closed(15_000, close));
        assert!(session_closed(14_999, close));
    }

    #[test]
    fn stores_keep_what_their_processors_accept() {
        // Window store, size 10, grace 5: retention 15. Stream time 100
        // closes windows ending at or before 95, i.e. starting at or
        // before 85 = 100 - 15.
        let w = RetainedTime::WindowStart;
        assert!(w.expired(85, 100, 15));
        assert!(!w.expired(86, 100, 15));
        // Session store, gap 5000, grace 0: the session ending at the
        // close time 15000 is kept.
        let s = RetainedTime::SessionEnd;
        assert!(!s.expired(15_000, 20_000, 5_000));
        assert!(s.expired(14_999, 20_000, 5_000));
        // ... but a lookup by key sees only sessions ending after it; for
        // windows what is kept and what is read are the same.
        assert_eq!(s.first_readable(20_000, 5_000), 15_001);
        assert_eq!(w.first_readable(100, 15), w.first_live(100, 15));
        assert_eq!(s.first_readable(i64::MIN, 5_000), i64::MIN);
        // Nothing expires before the first put.
        assert!(!w.expired(i64::MIN, i64::MIN, 0));
        assert!(!s.expired(i64::MIN, i64::MIN, 0));
        // Versioned history 10 at stream time 100: 90 is kept, 89 gone.
        assert!(!history_expired(90, 100, 10));
        assert!(history_expired(89, 100, 10));
        assert!(!history_expired(i64::MIN, i64::MIN, 10));
    }

    #[test]
    fn join_and_buffer_rules_at_their_boundary() {
        // Left record at 10, after 5, grace 2: open through stream time 17.
        assert!(!join_window_closed(10, 5, 2, 17));
        assert!(join_window_closed(10, 5, 2, 18));
        assert!(!join_window_over(15, 15));
        assert!(join_window_over(15, 16));
        // Grace 5 at stream time 20: 15 is due, 14 too late to buffer.
        assert!(grace_buffer_due(15, 20, 5));
        assert!(!grace_buffer_due(16, 20, 5));
        assert!(!grace_buffer_late(15, 20, 5));
        assert!(grace_buffer_late(14, 20, 5));
        assert!(suppression_due(15, 20, 5));
        assert!(!suppression_due(16, 20, 5));
    }
}
