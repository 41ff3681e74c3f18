//! The stream thread's queue of fetched records: librdkafka's fetch queue
//! of each assigned partition forwarded into one queue of the thread's
//! own, which the thread reads a batch at a time
//! (`rd_kafka_consume_batch_queue`).
//!
//! Why: the consumer's poll hands over one record per call, and each call
//! reads the clock four times (three in librdkafka, one in rust-rdkafka)
//! and wraps the record in a reference-counted event. On the pass-through
//! that was a sixth of the stream thread's time (`perf`, 1M records). A
//! batch read pays those once per batch.
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

use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::time::Duration;

use rdkafka::bindings as rd;
use rdkafka::consumer::{BaseConsumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaRespErr;

/// The thread's queue of fetched records (see the module docs).
pub(crate) struct FetchQueue {
    /// Null once closed.
    queue: AtomicPtr<rd::rd_kafka_queue_t>,
    /// The consumer's own queue (a handle of it, for its length).
    consumer_queue: AtomicPtr<rd::rd_kafka_queue_t>,
}

// SAFETY: librdkafka's queues are thread-safe (every operation takes the
// queue's lock). The handles are swapped out once, by `close`, which the
// owning stream thread calls when nothing else can use the queue (its
// consumer is being dropped); reads and forwards happen on that same
// thread (in its loop and in its consumer's rebalance callback).
unsafe impl Send for FetchQueue {}
// SAFETY: as above.
unsafe impl Sync for FetchQueue {}

impl FetchQueue {
    /// A new, empty queue of `consumer`'s client.
    pub fn new<C: ConsumerContext>(consumer: &BaseConsumer<C>) -> Self {
        use rdkafka::consumer::Consumer as _;
        // SAFETY: the client handle is alive (borrowed from the consumer);
        // both calls return an owned queue handle, or null.
        let (queue, consumer_queue) = unsafe {
            let client = consumer.client().native_ptr();
            (
                rd::rd_kafka_queue_new(client),
                rd::rd_kafka_queue_get_consumer(client),
            )
        };
        Self {
            queue: AtomicPtr::new(queue),
            consumer_queue: AtomicPtr::new(consumer_queue),
        }
    }

    /// Forwards the fetch queues of `partitions` (of `consumer`, whose
    /// client this queue belongs to) here. Harmless to repeat: what a
    /// partition's own queue holds moves over in order.
    pub fn forward<'a, C: ConsumerContext>(
        &self,
        consumer: &BaseConsumer<C>,
        partitions: impl IntoIterator<Item = (&'a str, i32)>,
    ) {
        use rdkafka::consumer::Consumer as _;
        let queue = self.queue.load(Ordering::Acquire);
        if queue.is_null() {
            return;
        }
        let client = consumer.client().native_ptr();
        for (topic, partition) in partitions {
            let Ok(topic) = std::ffi::CString::new(topic) else {
                continue;
            };
            // SAFETY: the client is alive; the topic name is a valid
            // C string for the call. rd_kafka_queue_get_partition returns
            // a new reference to the partition's fetch queue (or null),
            // which is released after forwarding it; the forwarding itself
            // holds its own reference to `queue`.
            unsafe {
                let source = rd::rd_kafka_queue_get_partition(client, topic.as_ptr(), partition);
                if !source.is_null() {
                    rd::rd_kafka_queue_forward(source, queue);
                    rd::rd_kafka_queue_destroy(source);
                }
            }
        }
    }

    /// Reads up to `max` fetched records onto the end of `into`, waiting
    /// up to `wait` for the first. Returns how many were read.
    pub fn read(&self, wait: Duration, max: usize, into: &mut Vec<FetchedMessage>) -> usize {
        let queue = self.queue.load(Ordering::Acquire);
        if queue.is_null() || max == 0 {
            return 0;
        }
        into.reserve(max);
        let timeout_ms = i32::try_from(wait.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: `into` has room for `max` more elements past its length;
        // a FetchedMessage is a non-null message pointer (repr(transparent)),
        // so librdkafka writes at most `max` of them there and returns how
        // many (never below 0 in this version; a negative count is taken
        // as none), each an owned message, non-null, that the
        // FetchedMessage destroys when dropped.
        unsafe {
            let end = into.as_mut_ptr().add(into.len()) as *mut *mut rd::rd_kafka_message_t;
            let n = rd::rd_kafka_consume_batch_queue(queue, timeout_ms, end, max);
            let n = usize::try_from(n).unwrap_or(0).min(max);
            into.set_len(into.len() + n);
            n
        }
    }

    /// Whether events (a rebalance, errors, logs) wait on the consumer's
    /// own queue.
    pub fn consumer_events_waiting(&self) -> bool {
        let queue = self.consumer_queue.load(Ordering::Acquire);
        // SAFETY: an owned handle until `close`.
        !queue.is_null() && unsafe { rd::rd_kafka_queue_length(queue) } > 0
    }

    /// Destroys the queue: before the consumer's client is destroyed.
    /// Records still in it are dropped (they were fetched ahead, not
    /// processed: the next owner fetches them again).
    pub fn close(&self) {
        for handle in [&self.queue, &self.consumer_queue] {
            let queue = handle.swap(std::ptr::null_mut(), Ordering::AcqRel);
            if !queue.is_null() {
                // SAFETY: the handle was owned here and is no longer
                // reachable through `self`.
                unsafe { rd::rd_kafka_queue_destroy(queue) }
            }
        }
    }
}

impl Drop for FetchQueue {
    fn drop(&mut self) {
        self.close();
    }
}

/// One record (or per-partition consumer error) read from a
/// [`FetchQueue`]; destroyed with it. Laid out as the message pointer, so
/// that librdkafka writes a batch straight into a `Vec` of them.
#[repr(transparent)]
pub(crate) struct FetchedMessage(NonNull<rd::rd_kafka_message_t>);

// SAFETY: a consumed message is owned by whoever holds it until destroyed;
// librdkafka's destroy may run on any thread.
unsafe impl Send for FetchedMessage {}

impl FetchedMessage {
    /// The message as librdkafka laid it out.
    pub fn raw(&self) -> &rd::rd_kafka_message_t {
        // SAFETY: owned and alive until dropped.
        unsafe { self.0.as_ref() }
    }

    /// The consumer error this message carries instead of a record, as
    /// rust-rdkafka's poll returns it.
    pub fn error(&self) -> Option<KafkaError> {
        let raw = self.raw();
        match raw.err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR => None,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__PARTITION_EOF => {
                Some(KafkaError::PartitionEOF(raw.partition))
            }
            e => Some(KafkaError::MessageConsumption(e.into())),
        }
    }
}

impl Drop for FetchedMessage {
    fn drop(&mut self) {
        // SAFETY: the message is owned here and destroyed once.
        unsafe { rd::rd_kafka_message_destroy(self.0.as_ptr()) }
    }
}
