//! Metrics for kstreams.
//!
//! This crate will own the metric registry (on the `prometheus` crate), the
//! metric names and tags (thread, task, processor node, store, partition, as
//! Kafka Streams names them) and the HTTP exporter. Today it holds the
//! sensors the processing engine already records.

use std::sync::atomic::{AtomicU64, Ordering};

/// A monotonically increasing count, cheap to bump from the hot path.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// A counter at zero.
    pub const fn new() -> Self {
        Self(AtomicU64::new(0))
    }
    /// Adds `n`.
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    /// Adds one.
    pub fn inc(&self) {
        self.add(1)
    }
    /// The current count.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_adds() {
        let c = Counter::new();
        c.inc();
        c.add(4);
        assert_eq!(c.get(), 5);
    }
}
