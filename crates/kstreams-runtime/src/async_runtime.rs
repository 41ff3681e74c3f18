//! Where async processors' calls run, and what a stream thread (or the
//! test driver) needs to drive them.
//!
//! # One small multi-thread tokio runtime per application instance
//!
//! The calls of async processors (see `kstreams_dsl::async_processing`)
//! are I/O-bound futures: two worker threads serve thousands of them in
//! flight. One runtime per stream thread would multiply OS threads (and
//! connection pools) by `num.stream.threads` for no gain, and a current-
//! thread runtime driven from the stream thread would put the futures back
//! on the record path, which is what async processing is to avoid. So the
//! instance owns one runtime (`kstreams.async.worker.threads` workers,
//! default 2), made only when a task with an async processor is created:
//! applications without one start no tokio thread. Its clones of the
//! configuration share it; it stops when the last clone goes (after the
//! stream threads, which hold one each).
//!
//! Each stream thread has its own [`ThreadAsync`]: the completion signal
//! its loop waits on while calls are out, and the count of records in
//! flight over all its tasks (the per-thread bound). Both live on the
//! stream thread; only the signal is touched from the runtime's workers.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kstreams_dsl::__private::{AsyncRuntime, AsyncSensors, CompletionSignal};
use kstreams_dsl::StreamsError;
use kstreams_metrics::names::{MetricDef, MetricKind, LATENCY_BUCKETS, THREAD_ID};
use kstreams_metrics::MetricsRegistry;

/// Default of `kstreams.async.max.in.flight.per.task`.
pub const DEFAULT_MAX_IN_FLIGHT_PER_TASK: usize = 64;
/// Default of `kstreams.async.max.in.flight.per.thread`.
pub const DEFAULT_MAX_IN_FLIGHT_PER_THREAD: usize = 256;
/// Default of `kstreams.async.worker.threads`.
pub const DEFAULT_WORKER_THREADS: usize = 2;
/// Default of `kstreams.async.drain.timeout.ms`: how long a commit under
/// exactly-once, a rebalance or a close waits for calls in flight.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Records in async processors, taken and not finished.
pub(crate) const ASYNC_IN_FLIGHT: MetricDef = MetricDef {
    name: "kstreams_async_in_flight",
    help: "Records in async processors of the thread: called or waiting behind their key.",
    kind: MetricKind::Gauge,
    labels: &[THREAD_ID],
    buckets: &[],
    kafka_name: "",
};
/// How long a record waited behind an earlier record of its key.
pub(crate) const ASYNC_QUEUE_TIME: MetricDef = MetricDef {
    name: "kstreams_async_queue_time_seconds",
    help: "Time a record waited behind an earlier record of its key before its call started.",
    kind: MetricKind::Histogram,
    labels: &[THREAD_ID],
    buckets: LATENCY_BUCKETS,
    kafka_name: "",
};
/// A call's duration, retries and backoff included.
pub(crate) const ASYNC_CALL_LATENCY: MetricDef = MetricDef {
    name: "kstreams_async_call_latency_seconds",
    help: "Duration of an async call, from its first attempt to its last one's end.",
    kind: MetricKind::Histogram,
    labels: &[THREAD_ID],
    buckets: LATENCY_BUCKETS,
    kafka_name: "",
};
/// Attempts that timed out.
pub(crate) const ASYNC_TIMEOUTS: MetricDef = MetricDef {
    name: "kstreams_async_timeouts_total",
    help: "Attempts of async calls that timed out.",
    kind: MetricKind::Counter,
    labels: &[THREAD_ID],
    buckets: &[],
    kafka_name: "",
};
/// Attempts made again.
pub(crate) const ASYNC_RETRIES: MetricDef = MetricDef {
    name: "kstreams_async_retries_total",
    help: "Attempts of async calls made again after a failure or a timeout.",
    kind: MetricKind::Counter,
    labels: &[THREAD_ID],
    buckets: &[],
    kafka_name: "",
};

/// The instance's tokio runtime for async calls, made on first use.
/// Clones share it.
#[derive(Clone, Default)]
pub(crate) struct AsyncExecutor {
    runtime: Arc<Mutex<Option<Arc<tokio::runtime::Runtime>>>>,
}

impl std::fmt::Debug for AsyncExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let started = self.runtime.lock().map(|r| r.is_some()).unwrap_or(false);
        f.debug_struct("AsyncExecutor")
            .field("started", &started)
            .finish()
    }
}

impl AsyncExecutor {
    /// The runtime, started now with `workers` threads if not yet.
    pub(crate) fn runtime(
        &self,
        workers: usize,
    ) -> Result<Arc<tokio::runtime::Runtime>, StreamsError> {
        let mut slot = self.runtime.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(runtime) = slot.as_ref() {
            return Ok(runtime.clone());
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers.max(1))
            .thread_name("kstreams-async")
            .enable_time()
            .enable_io()
            .build()
            .map_err(|e| StreamsError::Internal(format!("cannot start the async runtime: {e}")))?;
        let runtime = Arc::new(runtime);
        *slot = Some(runtime.clone());
        Ok(runtime)
    }
}

/// Bounds of records in flight.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AsyncLimits {
    /// Per task.
    pub per_task: usize,
    /// Per stream thread, over its tasks.
    pub per_thread: usize,
    /// Workers of the instance's runtime.
    pub workers: usize,
}

impl Default for AsyncLimits {
    fn default() -> Self {
        Self {
            per_task: DEFAULT_MAX_IN_FLIGHT_PER_TASK,
            per_thread: DEFAULT_MAX_IN_FLIGHT_PER_THREAD,
            workers: DEFAULT_WORKER_THREADS,
        }
    }
}

/// One stream thread's (or the driver's) side of async processing.
pub(crate) struct ThreadAsync {
    executor: AsyncExecutor,
    limits: AsyncLimits,
    signal: Arc<CompletionSignal>,
    in_flight: Rc<Cell<usize>>,
    sensors: AsyncSensors,
    /// The runtime, held from the first async task on so that it outlives
    /// every call this thread started.
    runtime: Option<Arc<tokio::runtime::Runtime>>,
}

impl ThreadAsync {
    /// The side of a thread whose calls run on `executor`.
    pub(crate) fn new(executor: AsyncExecutor, limits: AsyncLimits) -> Self {
        Self {
            executor,
            limits,
            signal: Arc::default(),
            in_flight: Rc::default(),
            sensors: AsyncSensors::default(),
            runtime: None,
        }
    }

    /// Records the thread's calls into `registry` (labels `thread_id`).
    pub(crate) fn with_metrics(
        mut self,
        registry: &MetricsRegistry,
        thread_id: &str,
    ) -> Result<Self, kstreams_metrics::Error> {
        let in_flight = registry.gauge(&ASYNC_IN_FLIGHT, &[thread_id])?;
        let queue_time = registry.histogram(&ASYNC_QUEUE_TIME, &[thread_id])?;
        let latency = registry.histogram(&ASYNC_CALL_LATENCY, &[thread_id])?;
        let timeouts = registry.counter(&ASYNC_TIMEOUTS, &[thread_id])?;
        let retries = registry.counter(&ASYNC_RETRIES, &[thread_id])?;
        self.sensors = AsyncSensors {
            in_flight: Some(Arc::new(move |delta| in_flight.add(delta))),
            queue_time: Some(Arc::new(move |s| queue_time.observe(s))),
            call_latency: Some(Arc::new(move |s| latency.observe(s))),
            timeouts: Some(Arc::new(move |n| timeouts.add(n))),
            retries: Some(Arc::new(move |n| retries.add(n))),
        };
        Ok(self)
    }

    /// What a task with async processors gets (starting the instance's
    /// runtime on the first).
    pub(crate) fn for_task(&mut self) -> Result<AsyncRuntime, StreamsError> {
        let runtime = match &self.runtime {
            Some(runtime) => runtime.clone(),
            None => {
                let runtime = self.executor.runtime(self.limits.workers)?;
                self.runtime = Some(runtime.clone());
                runtime
            }
        };
        Ok(AsyncRuntime {
            handle: runtime.handle().clone(),
            signal: self.signal.clone(),
            thread_in_flight: self.in_flight.clone(),
            max_per_task: self.limits.per_task,
            max_per_thread: self.limits.per_thread,
            sensors: self.sensors.clone(),
        })
    }

    /// Records in flight over the thread's tasks.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.get()
    }

    /// Whether a call finished since completions were last applied.
    pub(crate) fn completion_ready(&self) -> bool {
        self.signal.is_ready()
    }

    /// Clears the completion flag, before completions are applied.
    pub(crate) fn take_ready(&self) -> bool {
        self.signal.take()
    }

    /// Waits for a call to finish, at most until `deadline`; returns
    /// whether one did.
    pub(crate) fn wait_until(&self, deadline: Instant) -> bool {
        let left = deadline.saturating_duration_since(Instant::now());
        self.signal.wait(left)
    }

    /// Waits for a call to finish, at most `timeout`.
    pub(crate) fn wait(&self, timeout: Duration) -> bool {
        self.signal.wait(timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_reports_its_calls_under_the_kstreams_async_names() {
        let registry = MetricsRegistry::new();
        let executor = AsyncExecutor::default();
        let mut side = ThreadAsync::new(executor.clone(), AsyncLimits::default())
            .with_metrics(&registry, "t-1")
            .unwrap();
        let runtime = side.for_task().unwrap();
        let sensors = &runtime.sensors;
        for report in [&sensors.timeouts, &sensors.retries] {
            report.as_ref().unwrap()(2);
        }
        sensors.in_flight.as_ref().unwrap()(3);
        sensors.call_latency.as_ref().unwrap()(0.05);
        sensors.queue_time.as_ref().unwrap()(0.0);
        let text = registry.gather_text();
        for line in [
            r#"kstreams_async_timeouts_total{thread_id="t-1"} 2"#,
            r#"kstreams_async_retries_total{thread_id="t-1"} 2"#,
            r#"kstreams_async_in_flight{thread_id="t-1"} 3"#,
            r#"kstreams_async_call_latency_seconds_count{thread_id="t-1"} 1"#,
            r#"kstreams_async_queue_time_seconds_count{thread_id="t-1"} 1"#,
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
        assert_eq!(runtime.max_per_task, DEFAULT_MAX_IN_FLIGHT_PER_TASK);
        // The threads of one instance share its runtime.
        let mut other = ThreadAsync::new(executor, AsyncLimits::default());
        other.for_task().unwrap();
        let (first, second) = (side.runtime.as_ref(), other.runtime.as_ref());
        assert!(Arc::ptr_eq(first.unwrap(), second.unwrap()));
    }
}
