//! The stream thread's queue of fetched records: librdkafka's fetch queue
//! of each assigned partition forwarded into one queue of the thread's
//! own, which the thread reads a batch at a time
//! (`rd_kafka_consume_batch_queue`).
//!
//! Why: the consumer's poll hands over one record per call, and each call
//! reads the clock four times (three in librdkafka, one in rust-rdkafka)
//! and wraps the record in a reference-counted event: on the pass-through,
//! a large share of the stream thread's time (BENCHMARKS.md, "Stream
//! thread: batch reads"). A batch read pays those once per batch.
//!
//! What stays on the consumer's queue: the group's events (rebalances,
//! errors, commits), which the thread still polls for every pass (the
//! batch read must not see a rebalance: it would serve it without the
//! application's callback and give the assignment up).
//!
//! Forwarding is set before librdkafka starts fetching a partition (in the
//! rebalance callback, before the assignment is taken), so none of its
//! records go to the consumer's queue: librdkafka leaves a fetch queue the
//! application forwarded alone when it starts fetching. Stopping a fetch
//! (a revocation) clears the forwarding, so it is set again for every
//! assignment, and once more by the thread after it took one: records
//! fetched while a partition was not forwarded wait in its own queue and
//! move over, in order, when it is.
//!
//! Ownership: librdkafka requires an application's queues to be destroyed
//! before their client. A [`QueuedConsumer`] owns the consumer and opens
//! its [`FetchQueue`], and closes the queue before it lets the consumer
//! (and with it the client) go. The queue is shared with the consumer's
//! context (its rebalance callback forwards partitions), which outlives
//! the client; so every use of the queue takes a borrow of its consumer,
//! which no use can hold while the owner closes it.

use std::cell::UnsafeCell;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::bindings as rd;
use rdkafka::consumer::{BaseConsumer, Consumer as _, ConsumerContext};

use super::owned::Owned;

/// A consumer with its thread's fetch queue (see the module docs): what
/// the stream thread keeps. Dereferences to the consumer.
pub(crate) struct QueuedConsumer<C: ConsumerContext> {
    consumer: BaseConsumer<C>,
    queue: FetchQueue,
}

impl<C: ConsumerContext> QueuedConsumer<C> {
    /// Opens `consumer`'s fetch queue (empty: nothing is forwarded yet).
    pub(crate) fn new(consumer: BaseConsumer<C>) -> Self {
        let queue = FetchQueue::open(&consumer);
        Self { consumer, queue }
    }

    /// The fetch queue, for the consumer's context to forward partitions
    /// to from its rebalance callback.
    pub(crate) fn fetch_queue(&self) -> &FetchQueue {
        &self.queue
    }

    /// Reads up to `max` fetched records onto the end of `into`, waiting
    /// up to `wait` for the first. Returns how many were read.
    pub(crate) fn read_fetched(
        &self,
        wait: Duration,
        max: usize,
        into: &mut Vec<FetchedMessage>,
    ) -> usize {
        self.queue.read(&self.consumer, wait, max, into)
    }

    /// Whether events (a rebalance, errors, logs) wait on the consumer's
    /// own queue.
    pub(crate) fn consumer_events_waiting(&self) -> bool {
        self.queue.consumer_events_waiting(&self.consumer)
    }
}

impl<C: ConsumerContext> std::ops::Deref for QueuedConsumer<C> {
    type Target = BaseConsumer<C>;
    fn deref(&self) -> &Self::Target {
        &self.consumer
    }
}

impl<C: ConsumerContext> Drop for QueuedConsumer<C> {
    fn drop(&mut self) {
        // Before the consumer's client is destroyed (the fields drop after
        // this). Records still in the queue are dropped (they were fetched
        // ahead, not processed: the next owner fetches them again).
        self.queue.close(&mut self.consumer);
    }
}

/// The thread's queue of fetched records, shared by its [`QueuedConsumer`]
/// and the consumer's context. Every use names the consumer whose queue it
/// is; with another consumer, or once closed, a use does nothing.
#[derive(Clone)]
pub(crate) struct FetchQueue(Arc<Queues>);

struct Queues {
    /// The address of the client the queues belong to: compared with the
    /// consumer a use is given, never used as a pointer.
    client: usize,
    /// `None` once closed. Written by `close` alone (see `handles`).
    handles: UnsafeCell<Option<Handles>>,
}

struct Handles {
    /// The thread's queue, which partitions' fetch queues forward to.
    fetched: Owned<rd::rd_kafka_queue_t>,
    /// A handle of the consumer's own queue, for its length; `None` for a
    /// client without a group.
    consumer: Option<Owned<rd::rd_kafka_queue_t>>,
}

// SAFETY: shared use only reads `handles` (through `handles`, whose proof
// rules out a concurrent `close`) and calls librdkafka's queue functions,
// which take the queue's lock and may run on any thread; the one write,
// `close`, needs the queue's consumer exclusively. `Owned` is Send, and the
// client address is a number.
unsafe impl Sync for Queues {}

impl FetchQueue {
    /// A new, empty queue of `consumer`'s client; only a [`QueuedConsumer`]
    /// opens one, as it closes it before the client goes.
    fn open<C: ConsumerContext>(consumer: &BaseConsumer<C>) -> Self {
        let client = consumer.client().native_ptr();
        // SAFETY: the client is alive (borrowed through `consumer`). Both
        // calls return a new handle the application owns, or null
        // (rd_kafka_queue_get_consumer, for a client without a group); the
        // owners are dropped by `close`, before the client is destroyed.
        let (fetched, own) = unsafe {
            (
                Owned::from_ptr(rd::rd_kafka_queue_new(client)),
                Owned::from_ptr(rd::rd_kafka_queue_get_consumer(client)),
            )
        };
        let handles = fetched.map(|fetched| Handles {
            fetched,
            consumer: own,
        });
        Self(Arc::new(Queues {
            client: client as usize,
            handles: UnsafeCell::new(handles),
        }))
    }

    /// The queues while open, when `consumer` is the one they belong to,
    /// for as long as it is borrowed.
    #[inline]
    fn handles<'s, C: ConsumerContext>(
        &'s self,
        consumer: &'s BaseConsumer<C>,
    ) -> Option<&'s Handles> {
        if consumer.client().native_ptr() as usize != self.0.client {
            return None;
        }
        // SAFETY: `close` is the only write to the cell, once, while it
        // borrows the queue's own consumer exclusively. Here a consumer of
        // the same client is borrowed for as long as the returned
        // reference. While the queue is open its client is alive (its
        // `QueuedConsumer` closes it before destroying the client), so no
        // other client has that address and `consumer` is the queue's own:
        // `close` cannot run meanwhile. Once closed the cell holds `None`
        // for good, and that write happened before the client was freed,
        // hence before any client at the same address was made (a
        // deallocation synchronizes with the next allocation of the same
        // memory, C11 7.22.3).
        unsafe { (*self.0.handles.get()).as_ref() }
    }

    /// Forwards the fetch queues of `partitions` (of `consumer`, the one
    /// this queue belongs to) here. Harmless to repeat: what a
    /// partition's own queue holds moves over in order.
    pub(crate) fn forward<'a, C: ConsumerContext>(
        &self,
        consumer: &BaseConsumer<C>,
        partitions: impl IntoIterator<Item = (&'a str, i32)>,
    ) {
        let Some(handles) = self.handles(consumer) else {
            return;
        };
        let client = consumer.client().native_ptr();
        for (topic, partition) in partitions {
            let Ok(topic) = std::ffi::CString::new(topic) else {
                continue;
            };
            // SAFETY: the client is alive (borrowed); the topic name is a
            // valid C string for the call. rd_kafka_queue_get_partition
            // returns a new handle of the partition's fetch queue (or
            // null), owned here and released after forwarding it; the
            // forwarding itself holds its own reference to our queue, which
            // is open for the borrow of `handles`.
            unsafe {
                let source = rd::rd_kafka_queue_get_partition(client, topic.as_ptr(), partition);
                if let Some(source) = Owned::from_ptr(source) {
                    rd::rd_kafka_queue_forward(source.as_ptr(), handles.fetched.as_ptr());
                }
            }
        }
    }

    /// Reads up to `max` fetched records onto the end of `into`, waiting
    /// up to `wait` for the first. Returns how many were read.
    fn read<C: ConsumerContext>(
        &self,
        consumer: &BaseConsumer<C>,
        wait: Duration,
        max: usize,
        into: &mut Vec<FetchedMessage>,
    ) -> usize {
        let Some(handles) = self.handles(consumer) else {
            return 0;
        };
        read_queue(&handles.fetched, wait, max, into)
    }

    /// Whether events (a rebalance, errors, logs) wait on the consumer's
    /// own queue.
    fn consumer_events_waiting<C: ConsumerContext>(&self, consumer: &BaseConsumer<C>) -> bool {
        let Some(own) = self.handles(consumer).and_then(|h| h.consumer.as_ref()) else {
            return false;
        };
        // SAFETY: the handle is open for the borrow of `handles`.
        unsafe { rd::rd_kafka_queue_length(own.as_ptr()) > 0 }
    }

    /// Destroys the queues: before the consumer's client is destroyed.
    fn close<C: ConsumerContext>(&self, consumer: &mut BaseConsumer<C>) {
        if consumer.client().native_ptr() as usize != self.0.client {
            return;
        }
        // SAFETY: `consumer` is the queue's own (same client, alive) and is
        // borrowed exclusively, so no use of the queue (each borrows it)
        // reads the cell meanwhile.
        let handles = unsafe { (*self.0.handles.get()).take() };
        drop(handles);
    }
}

/// Reads up to `max` records of `queue` onto the end of `into`, waiting up
/// to `wait` for the first. Returns how many were read.
pub(super) fn read_queue(
    queue: &Owned<rd::rd_kafka_queue_t>,
    wait: Duration,
    max: usize,
    into: &mut Vec<FetchedMessage>,
) -> usize {
    if wait.is_zero() {
        return read_batch(queue, 0, max, into);
    }
    // librdkafka's batch read waits out its whole timeout unless `max`
    // records come: asked for a full batch of a partly filled queue, it
    // held the records that were there while more trickled in (half the
    // wait on the median record). So the wait is for the first alone, and
    // the rest is what is there at that moment.
    let timeout_ms = i32::try_from(wait.as_millis()).unwrap_or(i32::MAX);
    if read_batch(queue, timeout_ms, 1.min(max), into) == 0 {
        return 0;
    }
    1 + read_batch(queue, 0, max - 1, into)
}

/// Reads up to `max` records of `queue` onto the end of `into`, as
/// librdkafka's batch read does: waiting up to `timeout_ms` until there are
/// `max`. Returns how many were read.
fn read_batch(
    queue: &Owned<rd::rd_kafka_queue_t>,
    timeout_ms: i32,
    max: usize,
    into: &mut Vec<FetchedMessage>,
) -> usize {
    // SAFETY: the queue is open while its owner is borrowed (see below);
    // its length is read under its lock.
    let empty = unsafe { rd::rd_kafka_queue_length(queue.as_ptr()) == 0 };
    // A read that would not wait on an empty queue: no room to make (the
    // standby consumer is read this way on every pass of the loop).
    if max == 0 || (timeout_ms == 0 && empty) {
        return 0;
    }
    into.reserve(max);
    // SAFETY: the queue is open while its owner is borrowed (its client
    // outlives it: see `Owned::from_ptr`). `into` has room for `max` more
    // elements past its length; a FetchedMessage is a non-null message
    // pointer (repr(transparent), through `Owned`), so librdkafka writes at
    // most `max` of them there and returns how many (never below 0 in this
    // version; a negative count is taken as none), each an owned message,
    // non-null, that the FetchedMessage destroys when dropped.
    unsafe {
        let end = into
            .as_mut_ptr()
            .add(into.len())
            .cast::<*mut rd::rd_kafka_message_t>();
        let n = rd::rd_kafka_consume_batch_queue(queue.as_ptr(), timeout_ms, end, max);
        let n = usize::try_from(n).unwrap_or(0).min(max);
        into.set_len(into.len() + n);
        n
    }
}

/// One record (or per-partition consumer error) read from a
/// [`FetchQueue`]; destroyed with it. Laid out as the message pointer, so
/// that librdkafka writes a batch straight into a `Vec` of them.
///
/// Drop it before its consumer: destroying a message releases librdkafka
/// objects of the client's. Its type cannot say so (the thread keeps its
/// batch buffer beside the consumer), so its one holder, the stream
/// thread's loop, clears that buffer first when it is dropped.
#[repr(transparent)]
pub(crate) struct FetchedMessage(Owned<rd::rd_kafka_message_t>);

// Reading it: `view` and `error`, in message.rs.
impl FetchedMessage {
    /// The owned message pointer.
    #[inline]
    pub(super) fn as_ptr(&self) -> *mut rd::rd_kafka_message_t {
        self.0.as_ptr()
    }
}
