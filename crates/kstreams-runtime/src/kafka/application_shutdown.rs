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
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// How long an instance waits for the group to answer its request before
/// it stops alone: a broker that never answers must not keep a failed
/// application running.
pub(crate) const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// The instance's side of an application shutdown, shared by its threads.
/// Every pass of every thread's loop reads it: the first request and the
/// first reason are set once, and reading them takes no lock.
#[derive(Clone, Default)]
pub(crate) struct ApplicationShutdown(Arc<Inner>);

#[derive(Default)]
struct Inner {
    /// When a handler of this instance first asked for it.
    requested: OnceLock<Instant>,
    /// Why the instance stops (the group's word, or no answer in time):
    /// set, every thread ends its loop.
    heard: OnceLock<String>,
    /// Whether the instance's error list has the reason already.
    reported: AtomicBool,
}

impl ApplicationShutdown {
    /// A handler answered `ShutdownApplication`: the threads tell the group.
    pub(crate) fn request(&self) {
        self.0.requested.get_or_init(Instant::now);
    }

    /// When a shutdown was asked for here, if one was.
    pub(crate) fn requested_at(&self) -> Option<Instant> {
        self.0.requested.get().copied()
    }

    /// The instance stops, for `reason`: every thread ends its loop.
    pub(crate) fn hear(&self, reason: String) {
        let _ = self.0.heard.set(reason);
    }

    /// Whether the instance stops for an application shutdown.
    pub(crate) fn heard(&self) -> bool {
        self.0.heard.get().is_some()
    }

    /// The reason, the first time it is asked for (for the instance's error
    /// list, once whichever thread ends first).
    pub(crate) fn reason_to_report(&self) -> Option<String> {
        let reason = self.0.heard.get()?;
        (!self.0.reported.swap(true, Ordering::AcqRel)).then(|| reason.clone())
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
