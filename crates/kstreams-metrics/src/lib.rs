//! Metrics for kstreams: Kafka Streams' metrics, exposed to Prometheus.
//!
//! This crate owns
//!
//! - the metric handles the engine records into: [`Counter`], [`Gauge`]
//!   and [`Histogram`], each a cheap atomic update with no lookup (a caller
//!   asks for a labelled handle once, when its task or store is created, and
//!   keeps it);
//! - the [`MetricsRegistry`] that creates those handles under their
//!   families and labels and renders them in the Prometheus text format
//!   ([`MetricsRegistry::gather_text`]);
//! - the [`names`] of Kafka Streams' metrics in Prometheus spelling, such as
//!   `kstreams_task_process_total{thread_id,task_id}` for
//!   `stream-task-metrics` `process-rate`/`process-total`.
//!
//! Serving them over HTTP is kstreams-http's (`HttpServer` serves
//! `/metrics` beside the health, topology and state endpoints).
//!
//! ```
//! use kstreams_metrics::{names, MetricsRegistry};
//!
//! let registry = MetricsRegistry::new();
//! let task = registry.task_sensors("app-StreamThread-1", "0_1").unwrap();
//! task.process.inc(); // a record went through task 0_1
//! let text = registry.gather_text();
//! assert!(text.contains(
//!     r#"kstreams_task_process_total{task_id="0_1",thread_id="app-StreamThread-1"} 1"#
//! ));
//! # let _ = names::TASK_PROCESS_TOTAL;
//! ```
//!
//! The `prometheus` crate does the bookkeeping underneath (without its
//! protobuf support); [`MetricsRegistry::prometheus_registry`] reaches it
//! for collectors of your own.

#![forbid(unsafe_code)]

pub mod names;
mod registry;

use std::time::{Duration, Instant};

pub use registry::{
    MetricsRegistry, NodeSensors, PartitionSensors, RestoreSensors, Sample, TaskSensors,
    ThreadSensors,
};

/// Which metrics are recorded: Kafka Streams' `metrics.recording.level`.
///
/// `Info` (the default) records thread, task and partition metrics and the
/// end-to-end latency at source nodes; `Debug` adds per-record process
/// latency and every state store operation's latency (as in Kafka Streams,
/// where store metrics are DEBUG); `Trace` records the same as `Debug`
/// here (Kafka Streams' TRACE adds RocksDB statistics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RecordingLevel {
    /// Thread, task, partition and source end-to-end latency metrics.
    #[default]
    Info,
    /// `Info`, per-record latencies and state store metrics.
    Debug,
    /// `Debug` and more detail.
    Trace,
}

impl std::str::FromStr for RecordingLevel {
    type Err = String;

    /// `INFO`, `DEBUG` or `TRACE`, as Kafka Streams spells them (any case).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_uppercase().as_str() {
            "INFO" => Ok(RecordingLevel::Info),
            "DEBUG" => Ok(RecordingLevel::Debug),
            "TRACE" => Ok(RecordingLevel::Trace),
            _ => Err(format!("{s:?} is not INFO, DEBUG or TRACE")),
        }
    }
}

/// Errors of the metrics layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The `prometheus` crate refused a metric (a bad name or label, or a
    /// family already registered with other labels).
    #[error("metric {name}: {source}")]
    Prometheus {
        /// The metric family.
        name: String,
        /// The crate's error.
        source: prometheus::Error,
    },
    /// A family is already known under the same name with another kind,
    /// help text, labels or buckets.
    #[error("metric {name} is already registered with another definition")]
    Conflict {
        /// The metric family.
        name: String,
    },
    /// A handle of one kind was asked for a family of another.
    #[error("metric {name} is a {actual:?}, not the {requested:?} that was asked for")]
    WrongKind {
        /// The metric family.
        name: String,
        /// What the family is.
        actual: names::MetricKind,
        /// What was asked.
        requested: names::MetricKind,
    },
}

/// A monotonically increasing count, cheap to bump from the hot path (one
/// relaxed atomic add).
///
/// [`Counter::new`] makes one of its own, seen by nobody else;
/// [`MetricsRegistry::counter`] makes one that a Prometheus scrape reads.
/// Both work the same for whoever bumps them.
#[derive(Clone)]
pub struct Counter(prometheus::IntCounter);

impl Counter {
    /// A counter at zero that no registry exports.
    pub fn new() -> Self {
        Self(
            prometheus::IntCounter::new("kstreams_unregistered_total", "not exported")
                .expect("a valid metric name"),
        )
    }
    pub(crate) fn from_prometheus(counter: prometheus::IntCounter) -> Self {
        Self(counter)
    }
    /// Adds `n`.
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.inc_by(n)
    }
    /// Adds one.
    #[inline]
    pub fn inc(&self) {
        self.0.inc()
    }
    /// The current count.
    pub fn get(&self) -> u64 {
        self.0.get()
    }
}

impl Default for Counter {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Counter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Counter").field(&self.get()).finish()
    }
}

/// A value that goes up and down, such as a consumer's lag.
#[derive(Clone)]
pub struct Gauge(prometheus::IntGauge);

impl Gauge {
    /// A gauge at zero that no registry exports.
    pub fn new() -> Self {
        Self(
            prometheus::IntGauge::new("kstreams_unregistered", "not exported")
                .expect("a valid metric name"),
        )
    }
    /// Sets the value.
    #[inline]
    pub fn set(&self, value: i64) {
        self.0.set(value)
    }
    /// Adds `n` (may be negative).
    #[inline]
    pub fn add(&self, n: i64) {
        self.0.add(n)
    }
    /// Adds one.
    #[inline]
    pub fn inc(&self) {
        self.0.inc()
    }
    /// Subtracts one.
    #[inline]
    pub fn dec(&self) {
        self.0.dec()
    }
    /// The current value.
    pub fn get(&self) -> i64 {
        self.0.get()
    }
}

impl Default for Gauge {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Gauge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Gauge").field(&self.get()).finish()
    }
}

/// Observations (durations, in seconds) counted in buckets, with their
/// count and sum: Prometheus derives rates, averages and quantiles.
#[derive(Clone)]
pub struct Histogram(prometheus::Histogram);

impl Histogram {
    /// A histogram with `buckets` (upper bounds, ascending) that no
    /// registry exports.
    pub fn new(buckets: &[f64]) -> Self {
        let opts = prometheus::HistogramOpts::new("kstreams_unregistered", "not exported")
            .buckets(buckets.to_vec());
        Self(prometheus::Histogram::with_opts(opts).expect("valid histogram buckets"))
    }
    /// Records one observation.
    #[inline]
    pub fn observe(&self, value: f64) {
        self.0.observe(value)
    }
    /// Records a duration in seconds.
    #[inline]
    pub fn observe_duration(&self, duration: Duration) {
        self.0.observe(duration.as_secs_f64())
    }
    /// Records the time elapsed since `start`, in seconds.
    #[inline]
    pub fn observe_since(&self, start: Instant) {
        self.observe_duration(start.elapsed())
    }
    /// A buffer of this histogram's observations for one thread: see
    /// [`LocalHistogram`].
    pub fn local(&self) -> LocalHistogram {
        LocalHistogram(self.0.local())
    }
    /// Observations so far.
    pub fn sample_count(&self) -> u64 {
        self.0.get_sample_count()
    }
    /// The sum of the observations so far.
    pub fn sample_sum(&self) -> f64 {
        self.0.get_sample_sum()
    }
}

/// Observations for a [`Histogram`] kept by one thread in plain counters
/// and added to the histogram by [`LocalHistogram::flush`] (and on drop).
/// For what is observed per record: a shared histogram's observation is
/// four atomic read-modify-writes, a local one none, and a flush per batch
/// of records costs the same four. A scrape sees observations once
/// flushed.
#[derive(Debug)]
pub struct LocalHistogram(prometheus::local::LocalHistogram);

impl LocalHistogram {
    /// Records one observation, unseen until the next flush.
    #[inline]
    pub fn observe(&self, value: f64) {
        self.0.observe(value)
    }
    /// Adds the observations so far to the histogram.
    pub fn flush(&self) {
        self.0.flush()
    }
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.sample_count())
            .field("sum", &self.sample_sum())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_observations_reach_the_histogram_when_flushed_or_dropped() {
        let h = Histogram::new(names::LATENCY_BUCKETS);
        let local = h.local();
        local.observe(0.5);
        local.observe(1.5);
        assert_eq!(h.sample_count(), 0, "unseen before a flush");
        local.flush();
        assert_eq!(h.sample_count(), 2);
        assert_eq!(h.sample_sum(), 2.0);
        local.observe(1.0);
        drop(local);
        assert_eq!(h.sample_count(), 3, "a dropped buffer flushes");
    }

    #[test]
    fn counter_adds() {
        let c = Counter::new();
        c.inc();
        c.add(4);
        assert_eq!(c.get(), 5);
        let d = Counter::default();
        d.inc();
        assert_eq!(
            (c.get(), d.get()),
            (5, 1),
            "unregistered counters are separate"
        );
    }

    #[test]
    fn gauge_and_histogram_standalone() {
        let g = Gauge::new();
        g.set(10);
        g.dec();
        g.add(-4);
        assert_eq!(g.get(), 5);
        let h = Histogram::new(names::LATENCY_BUCKETS);
        h.observe(0.5);
        h.observe_duration(Duration::from_millis(250));
        assert_eq!(h.sample_count(), 2);
        assert!((h.sample_sum() - 0.75).abs() < 1e-9);
    }
}
