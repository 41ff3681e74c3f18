//! Async processing: a node that calls an external service (an HTTP
//! endpoint, a database) without stalling the stream thread.
//!
//! # Why it is built this way
//!
//! A processor that waits on a 50 ms call inside `process` caps its thread at
//! 20 records/s, whatever the partition count. The async operators
//! ([`crate::KStream::map_values_async`], [`crate::KStream::process_async`])
//! start the call on a tokio runtime and return at once, so the thread takes
//! the next record while the call is out; many calls overlap.
//!
//! - **Futures run on tokio, never on the record path.** The runtime crate
//!   installs a runtime handle in each task's context ([`AsyncRuntime`]);
//!   the future and its retries and timeouts run on that runtime's workers.
//!   Everything else (the nodes downstream, stores, the output) stays on the
//!   stream thread, depth-first and lock-free as for any other node.
//! - **Completions are applied on the stream thread.** A finished call is
//!   queued; the task takes it in its next processing step and forwards the
//!   result through the node's ordinary children with the record's own
//!   origin (topic, partition, offset), timestamp and headers restored. So
//!   store writes downstream happen on the owning thread, one at a time,
//!   and the error handlers and dead-letter queue see the record that
//!   failed, as for a synchronous processor.
//! - **Per-key order.** A record whose key has a call out waits behind it
//!   (it is not started): records of one key are called, finished and
//!   forwarded in input order; records of different keys overlap. This
//!   serializes side effects per key (a call that writes), not just the
//!   order of the results.
//! - **Across keys**, output goes out as calls finish ([`AsyncOrder::PerKey`],
//!   the default) or in input order ([`AsyncOrder::Input`], head-of-line
//!   blocking, as Flink's ordered Async I/O).
//! - **Commits cover only finished work.** Each record taken into an async
//!   node holds its source offset ([`AsyncWork`]); the runtime commits a
//!   partition at its lowest held offset (the record not finished yet) or,
//!   without holds, past the last record processed. At-least-once may then
//!   repeat records that finished after the lowest unfinished one; under
//!   exactly-once the runtime drains every call before committing the
//!   transaction, so a transaction holds only finished records and offsets.
//! - **Rebalances and closes wait for calls** (up to
//!   `kstreams.async.drain.timeout.ms`) before their commit. Past that the
//!   commit stops at the lowest unfinished offset (exactly-once aborts and
//!   rewinds instead), closing the task cancels its calls, and whoever owns
//!   the task next reads those records again.
//! - **Bounded in flight, backpressure by not taking records.** A task that
//!   has `max in flight per task` records held (called or waiting behind
//!   their key), or whose thread has `max in flight per thread`, takes no
//!   record from its partition group: records stay buffered (nothing
//!   prefetched is dropped) and the consumer pauses a partition by the
//!   usual buffered-records bound.
//! - **Stream time and punctuation** move when a record is *taken*, as for
//!   any record: a stream-time punctuation or window downstream sees the
//!   result of an async call after stream time has moved past the record
//!   (by at most what is in flight). The forwarded record keeps its own
//!   timestamp, so a windowed aggregation downstream needs a grace of at
//!   least the call latency for the record not to count as late.
//!   Punctuations are not held back by calls in flight.
//! - **Failures.** A call that returns an error or times out is retried
//!   with exponential backoff up to [`AsyncOptions::with_retries`]; the last
//!   failure (or a panic in the call, which is not retried) reaches the
//!   processing exception handler (and the dead-letter queue) as a
//!   processing error of the async node.
//!
//! The driver (TopologyTestDriver) runs the same node and waits for the
//! calls after each input, so tests see deterministic output.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// How the results of an async node's calls are ordered across keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AsyncOrder {
    /// Results of one key go out in input order; results of different keys
    /// go out as their calls finish (fastest throughput).
    #[default]
    PerKey,
    /// All results go out in input order: a slow call holds back the
    /// results of later records, whatever their key.
    Input,
}

/// Options of an async operator: output order, a timeout per attempt,
/// retries and their backoff.
///
/// ```
/// use std::time::Duration;
/// use kstreams_dsl::{AsyncOptions, AsyncOrder};
///
/// let options = AsyncOptions::new()
///     .with_order(AsyncOrder::Input)
///     .with_timeout(Duration::from_millis(500))
///     .with_retries(3, Duration::from_millis(20));
/// assert_eq!(options.retries(), 3);
/// ```
#[derive(Debug, Clone)]
pub struct AsyncOptions {
    pub(crate) order: AsyncOrder,
    pub(crate) timeout: Option<Duration>,
    pub(crate) retries: u32,
    pub(crate) backoff: Duration,
    pub(crate) max_backoff: Duration,
    pub(crate) name: Option<String>,
}

impl Default for AsyncOptions {
    fn default() -> Self {
        Self {
            order: AsyncOrder::PerKey,
            timeout: None,
            retries: 0,
            backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(10),
            name: None,
        }
    }
}

impl AsyncOptions {
    /// Per-key order, no timeout, no retries.
    pub fn new() -> Self {
        Self::default()
    }

    /// How results are ordered across keys.
    pub fn with_order(mut self, order: AsyncOrder) -> Self {
        self.order = order;
        self
    }

    /// Each attempt fails with [`AsyncTimeout`] after `timeout`.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// A failed or timed-out attempt is tried again up to `retries` times,
    /// waiting `backoff` before the first retry and twice as long before
    /// each next one (at most [`AsyncOptions::with_max_backoff`]).
    pub fn with_retries(mut self, retries: u32, backoff: Duration) -> Self {
        self.retries = retries;
        self.backoff = backoff;
        self
    }

    /// The longest wait between two attempts (10 s unless set).
    pub fn with_max_backoff(mut self, max_backoff: Duration) -> Self {
        self.max_backoff = max_backoff;
        self
    }

    /// The processor's name (else `KSTREAM-ASYNC-` and an index).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The output order.
    pub fn order(&self) -> AsyncOrder {
        self.order
    }

    /// The timeout of one attempt, if any.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// How many times a failed attempt is retried.
    pub fn retries(&self) -> u32 {
        self.retries
    }

    /// The wait before retry `n` (1-based).
    pub(crate) fn backoff_before(&self, retry: u32) -> Duration {
        let factor = 1u32
            .checked_shl(retry.saturating_sub(1))
            .unwrap_or(u32::MAX);
        self.backoff.saturating_mul(factor).min(self.max_backoff)
    }
}

/// An attempt of an async call that did not finish in time.
#[derive(Debug, Clone)]
pub struct AsyncTimeout {
    /// The timeout of the attempt.
    pub timeout: Duration,
    /// Attempts made, the last included.
    pub attempts: u32,
}

impl fmt::Display for AsyncTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "async call timed out after {} ms ({} attempt{})",
            self.timeout.as_millis(),
            self.attempts,
            if self.attempts == 1 { "" } else { "s" }
        )
    }
}

impl std::error::Error for AsyncTimeout {}

/// Woken by every finished call: the stream thread (or the driver) waits
/// on it instead of spinning while calls are out and nothing else is to do.
#[derive(Debug, Default)]
pub struct CompletionSignal {
    ready: AtomicBool,
    lock: Mutex<()>,
    woken: Condvar,
}

impl CompletionSignal {
    /// Says a call finished.
    pub fn notify(&self) {
        self.ready.store(true, Ordering::Release);
        // The lock orders this against a waiter between its check and its
        // wait, so no wake-up is lost.
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.woken.notify_all();
    }

    /// Whether a call finished since the last [`CompletionSignal::take`].
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Clears the flag (before completions are applied: one that finishes
    /// meanwhile sets it again).
    pub fn take(&self) -> bool {
        self.ready.swap(false, Ordering::AcqRel)
    }

    /// Waits until a call finished or `timeout` passed; returns whether one
    /// did.
    pub fn wait(&self, timeout: Duration) -> bool {
        let guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        if self.is_ready() {
            return true;
        }
        let _ = self
            .woken
            .wait_timeout_while(guard, timeout, |_| !self.is_ready());
        self.is_ready()
    }
}

/// Counts an async node reports (the runtime registers them as the
/// `kstreams_async_*` series). Cheap to clone: the counters are shared.
#[derive(Clone, Default)]
pub struct AsyncSensors {
    /// Records admitted and not finished: `(delta)`.
    pub in_flight: Option<Arc<dyn Fn(i64) + Send + Sync>>,
    /// Seconds a record waited behind its key before its call started.
    pub queue_time: Option<Arc<dyn Fn(f64) + Send + Sync>>,
    /// Seconds from the first attempt's start to the last one's end.
    pub call_latency: Option<Arc<dyn Fn(f64) + Send + Sync>>,
    /// Attempts that timed out.
    pub timeouts: Option<Arc<dyn Fn(u64) + Send + Sync>>,
    /// Attempts made again after a failure or a timeout.
    pub retries: Option<Arc<dyn Fn(u64) + Send + Sync>>,
}

impl fmt::Debug for AsyncSensors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncSensors").finish_non_exhaustive()
    }
}

/// What the runtime gives a task's async nodes: where their futures run,
/// who to wake when one finishes, the in-flight bounds and metrics.
#[derive(Clone)]
pub struct AsyncRuntime {
    /// The tokio runtime the calls run on.
    pub handle: tokio::runtime::Handle,
    /// Woken by each finished call.
    pub signal: Arc<CompletionSignal>,
    /// Records in flight on the thread, over all its tasks.
    pub thread_in_flight: Rc<Cell<usize>>,
    /// At most this many records in flight per task.
    pub max_per_task: usize,
    /// At most this many records in flight per thread.
    pub max_per_thread: usize,
    /// The metrics the calls report to.
    pub sensors: AsyncSensors,
}

impl fmt::Debug for AsyncRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AsyncRuntime")
            .field("max_per_task", &self.max_per_task)
            .field("max_per_thread", &self.max_per_thread)
            .field("thread_in_flight", &self.thread_in_flight.get())
            .finish_non_exhaustive()
    }
}

/// A task's records in async nodes: how many, and which source offsets
/// they hold back from the commit.
#[derive(Debug, Default)]
pub struct AsyncWork {
    pub(crate) runtime: Option<AsyncRuntime>,
    in_flight: usize,
    /// Per source partition: held offsets, each with how many records of
    /// that offset are unfinished (a flat-map before the node makes several).
    holds: Vec<(std::sync::Arc<str>, i32, BTreeMap<i64, u32>)>,
}

impl AsyncWork {
    /// Records taken into the task's async nodes and not finished.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Whether the task may take another record: below its bound and its
    /// thread's.
    pub fn admits(&self) -> bool {
        match &self.runtime {
            None => true,
            Some(rt) => {
                self.in_flight < rt.max_per_task.max(1)
                    && rt.thread_in_flight.get() < rt.max_per_thread.max(1)
            }
        }
    }

    /// The lowest source offset of `topic`-`partition` a record still in an
    /// async node came from: the commit may not pass it.
    pub fn lowest_held(&self, topic: &str, partition: i32) -> Option<i64> {
        self.holds
            .iter()
            .find(|(t, p, _)| *p == partition && **t == *topic)
            .and_then(|(_, _, offsets)| offsets.keys().next().copied())
    }

    /// Whether a record of `topic`-`partition` at `offset` is in an async
    /// node.
    pub fn holds(&self, topic: &str, partition: i32, offset: i64) -> bool {
        self.holds
            .iter()
            .find(|(t, p, _)| *p == partition && **t == *topic)
            .is_some_and(|(_, _, offsets)| offsets.contains_key(&offset))
    }

    /// The runtime handle, once installed.
    pub fn runtime(&self) -> Option<&AsyncRuntime> {
        self.runtime.as_ref()
    }

    pub(crate) fn admit(&mut self, origin: Option<&kstreams_record::RecordMetadata>) {
        self.in_flight += 1;
        if let Some(rt) = &self.runtime {
            rt.thread_in_flight.set(rt.thread_in_flight.get() + 1);
            if let Some(gauge) = &rt.sensors.in_flight {
                gauge(1);
            }
        }
        let Some(m) = origin else { return };
        let slot = match self
            .holds
            .iter()
            .position(|(t, p, _)| *p == m.partition && *t == m.topic)
        {
            Some(slot) => slot,
            None => {
                self.holds
                    .push((m.topic.clone(), m.partition, BTreeMap::new()));
                self.holds.len() - 1
            }
        };
        *self.holds[slot].2.entry(m.offset).or_insert(0) += 1;
    }

    pub(crate) fn finish(&mut self, origin: Option<&kstreams_record::RecordMetadata>) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if let Some(rt) = &self.runtime {
            rt.thread_in_flight
                .set(rt.thread_in_flight.get().saturating_sub(1));
            if let Some(gauge) = &rt.sensors.in_flight {
                gauge(-1);
            }
        }
        let Some(m) = origin else { return };
        if let Some((_, _, offsets)) = self
            .holds
            .iter_mut()
            .find(|(t, p, _)| *p == m.partition && *t == m.topic)
        {
            if let Some(count) = offsets.get_mut(&m.offset) {
                *count -= 1;
                if *count == 0 {
                    offsets.remove(&m.offset);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kstreams_record::RecordMetadata;

    fn at(offset: i64) -> RecordMetadata {
        RecordMetadata {
            topic: "in".into(),
            partition: 0,
            offset,
        }
    }

    #[test]
    fn the_lowest_unfinished_offset_holds_the_commit() {
        let mut work = AsyncWork::default();
        work.admit(Some(&at(5)));
        work.admit(Some(&at(7)));
        work.admit(Some(&at(7)));
        assert_eq!(work.lowest_held("in", 0), Some(5));
        assert_eq!(work.lowest_held("in", 1), None);
        work.finish(Some(&at(5)));
        assert_eq!(work.lowest_held("in", 0), Some(7));
        work.finish(Some(&at(7)));
        assert_eq!(
            work.lowest_held("in", 0),
            Some(7),
            "one of offset 7's records is out"
        );
        work.finish(Some(&at(7)));
        assert_eq!(work.lowest_held("in", 0), None);
        assert_eq!(work.in_flight(), 0);
    }

    #[test]
    fn backoff_doubles_up_to_its_maximum() {
        let options = AsyncOptions::new()
            .with_retries(5, Duration::from_millis(10))
            .with_max_backoff(Duration::from_millis(35));
        assert_eq!(options.backoff_before(1), Duration::from_millis(10));
        assert_eq!(options.backoff_before(2), Duration::from_millis(20));
        assert_eq!(options.backoff_before(3), Duration::from_millis(35));
    }
}
