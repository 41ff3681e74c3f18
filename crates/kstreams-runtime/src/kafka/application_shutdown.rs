//! Kafka Streams' `SHUTDOWN_APPLICATION`: a stream thread's
//! uncaught-exception handler asks every instance of the application to
//! stop, not only its own.
//!
//! Under the streams group protocol (KIP-1071) the request travels in the
//! heartbeats of the instance's live members (`ShutdownApplication`), and
//! the broker answers every member of the group, on every instance, with
//! the group status `SHUTDOWN_APPLICATION`. An instance that hears it stops
//! its threads cleanly and ends in ERROR, as Kafka Streams' `closeToError`.
//! The classic and consumer protocols have no such field through
//! librdkafka: there only the asking instance stops.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long an instance waits for the group to answer its request before
/// it stops alone: a broker that never answers must not keep a failed
/// application running.
pub(crate) const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// The instance's side of an application shutdown, shared by its threads.
#[derive(Clone, Default)]
pub(crate) struct ApplicationShutdown(Arc<Inner>);

#[derive(Default)]
struct Inner {
    /// When a handler of this instance asked for it.
    requested: Mutex<Option<Instant>>,
    /// Whether one did: every pass of every thread's loop reads it, so one
    /// load and no lock.
    asked: AtomicBool,
    /// Why the instance stops: the group's word, or no answer in time.
    heard: Mutex<Option<String>>,
    /// Whether the instance stops: read like `asked`.
    stopping: AtomicBool,
    /// Whether the instance's error list has the reason already.
    reported: AtomicBool,
}

impl ApplicationShutdown {
    /// A handler answered `ShutdownApplication`: the threads tell the group.
    pub(crate) fn request(&self) {
        let mut requested = self.0.requested.lock().unwrap_or_else(|p| p.into_inner());
        requested.get_or_insert_with(Instant::now);
        self.0.asked.store(true, Ordering::Release);
    }

    /// When a shutdown was asked for here, if one was.
    pub(crate) fn requested_at(&self) -> Option<Instant> {
        if !self.0.asked.load(Ordering::Acquire) {
            return None;
        }
        *self.0.requested.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The instance stops, for `reason`: every thread ends its loop.
    pub(crate) fn hear(&self, reason: String) {
        let mut heard = self.0.heard.lock().unwrap_or_else(|p| p.into_inner());
        heard.get_or_insert(reason);
        self.0.stopping.store(true, Ordering::Release);
    }

    /// Whether the instance stops for an application shutdown.
    pub(crate) fn heard(&self) -> bool {
        self.0.stopping.load(Ordering::Acquire)
    }

    /// The reason, the first time it is asked for (for the instance's error
    /// list, once whichever thread ends first).
    pub(crate) fn reason_to_report(&self) -> Option<String> {
        if !self.heard() || self.0.reported.swap(true, Ordering::AcqRel) {
            return None;
        }
        self.0
            .heard
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_reason_is_reported_once() {
        let shutdown = ApplicationShutdown::default();
        assert!(!shutdown.heard());
        assert_eq!(shutdown.reason_to_report(), None);
        shutdown.request();
        let asked = shutdown.requested_at().unwrap();
        shutdown.request();
        assert_eq!(
            shutdown.requested_at(),
            Some(asked),
            "the first request counts"
        );
        shutdown.hear("the group said so".into());
        shutdown.hear("a later reason".into());
        assert!(shutdown.heard());
        assert_eq!(
            shutdown.reason_to_report().as_deref(),
            Some("the group said so")
        );
        assert_eq!(shutdown.reason_to_report(), None);
    }
}
