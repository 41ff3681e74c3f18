//! A flush of a store's engine that the caller does not wait for.
//!
//! A stream thread restoring a long changelog checkpoints its progress on
//! the way, and a checkpoint may only say what the store's files hold: its
//! engine is flushed first. RocksDB's flush waits for its memtables to be
//! written out, and before that for compaction whenever one more level-0
//! file would stall writes, which under a bulk load on a busy machine
//! took seconds (the thread then missed `max.poll.interval.ms` and left
//! its group). Kafka Streams flushes on its state updater's thread; here a
//! persistent engine flushes on a short-lived thread of its own, and the
//! stream thread writes the checkpoint once [`BackgroundFlush::outcome`]
//! says the flush is done.

use std::sync::{Arc, OnceLock};

use crate::Error;

/// The outcome of a flush started by [`StateStore::flush_in_background`],
/// known once the flush is done.
///
/// [`StateStore::flush_in_background`]: crate::StateStore::flush_in_background
#[derive(Clone, Debug)]
pub struct BackgroundFlush {
    store: Arc<str>,
    outcome: Arc<OnceLock<Result<(), String>>>,
}

impl BackgroundFlush {
    /// A flush of `store` that is still to finish; [`BackgroundFlush::finish`]
    /// ends it.
    pub(crate) fn started(store: &str) -> Self {
        BackgroundFlush {
            store: store.into(),
            outcome: Arc::new(OnceLock::new()),
        }
    }

    /// A flush of `store` that finished before it was handed out (a store
    /// that flushed in place).
    pub fn done(store: &str) -> Self {
        let flush = Self::started(store);
        flush.finish(Ok(()));
        flush
    }

    /// Records how the flush ended; the first outcome stays.
    pub(crate) fn finish(&self, outcome: Result<(), String>) {
        let _ = self.outcome.set(outcome);
    }

    /// `None` while the flush runs; then whether it wrote everything the
    /// store held when it started.
    pub fn outcome(&self) -> Option<Result<(), Error>> {
        self.outcome.get().map(|outcome| {
            outcome
                .clone()
                .map_err(|message| Error::engine(&self.store, message))
        })
    }

    /// Whether every one of `flushes` is done: `Ok(false)` while one runs
    /// and none failed; a failure as soon as one is known, whether the
    /// others are done or not.
    pub fn all_done(flushes: &[BackgroundFlush]) -> Result<bool, Error> {
        let mut done = true;
        for flush in flushes {
            match flush.outcome() {
                None => done = false,
                Some(outcome) => outcome?,
            }
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flush_is_pending_until_it_finishes_and_keeps_its_first_outcome() {
        let flush = BackgroundFlush::started("counts");
        let seen_by_caller = flush.clone();
        assert!(seen_by_caller.outcome().is_none());
        flush.finish(Err("disk full".into()));
        flush.finish(Ok(()));
        let error = seen_by_caller.outcome().expect("finished").unwrap_err();
        assert!(error.to_string().contains("counts"), "{error}");
        assert!(error.to_string().contains("disk full"), "{error}");
        assert!(BackgroundFlush::done("counts").outcome().unwrap().is_ok());
        let running = BackgroundFlush::started("sums");
        let both = [BackgroundFlush::done("counts"), running.clone()];
        assert!(!BackgroundFlush::all_done(&both).unwrap());
        running.finish(Ok(()));
        assert!(BackgroundFlush::all_done(&both).unwrap());
        assert!(BackgroundFlush::all_done(&[flush, running]).is_err());
    }
}
