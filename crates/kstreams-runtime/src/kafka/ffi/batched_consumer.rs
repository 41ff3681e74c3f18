//! An assign-only consumer (the restore and standby consumers) read a batch
//! at a time from its own queue (`rd_kafka_consume_batch_queue`), not a
//! record per poll.
//!
//! Why: a restore spends its time reading records and writing them to
//! RocksDB, and the poll of one record reads the clock and wraps the record
//! in an event each time (BENCHMARKS.md, "The restore": the consumer's side
//! was about half of a restoring thread's time).
//!
//! Unlike the stream thread's fetch queue nothing is forwarded: librdkafka
//! itself routes each assigned partition's fetched records to the
//! consumer's queue, which is read here. (Forwarding partitions to a queue
//! of the thread's own lost the first records of a partition whose fetch
//! had started before the forwarding.) Such a consumer joins no group, so
//! that queue holds no rebalance that a batch read could serve without the
//! application's callback; errors come back as messages that carry them,
//! as the poll returns them.

use std::marker::PhantomData;
use std::time::Duration;

use rdkafka::bindings as rd;
use rdkafka::consumer::{BaseConsumer, Consumer as _};

use super::fetch_queue::{read_queue, FetchedMessage};
use super::owned::Owned;

/// A consumer with a handle of its own queue. Dereferences to the consumer.
pub(crate) struct BatchedConsumer {
    /// Declared before the consumer, so dropped first: librdkafka requires
    /// an application's queue handles to be destroyed before their client.
    queue: Owned<rd::rd_kafka_queue_t>,
    consumer: BaseConsumer,
}

impl BatchedConsumer {
    /// `consumer` read in batches; `None` for a consumer without a queue of
    /// its own (one made without `group.id`).
    pub(crate) fn new(consumer: BaseConsumer) -> Option<Self> {
        // SAFETY: the client is alive (owned by `consumer`, which the new
        // owner keeps and drops after the queue handle: field order).
        // rd_kafka_queue_get_consumer returns a new handle the application
        // owns, or null for a client without a consumer group queue.
        let queue = unsafe {
            Owned::from_ptr(rd::rd_kafka_queue_get_consumer(
                consumer.client().native_ptr(),
            ))
        }?;
        Some(Self { queue, consumer })
    }

    /// Reads up to `max` records (or consumer errors), waiting up to `wait`
    /// for the first.
    pub(crate) fn read(&self, wait: Duration, max: usize) -> Batch<'_> {
        let mut messages = Vec::new();
        read_queue(&self.queue, wait, max, &mut messages);
        Batch {
            messages,
            _consumer: PhantomData,
        }
    }
}

/// Messages read from a [`BatchedConsumer`], in the order read. It borrows
/// the consumer: destroying a message releases objects of the consumer's
/// client, so the messages cannot outlive it.
pub(crate) struct Batch<'c> {
    messages: Vec<FetchedMessage>,
    _consumer: PhantomData<&'c BatchedConsumer>,
}

impl std::ops::Deref for Batch<'_> {
    type Target = [FetchedMessage];
    fn deref(&self) -> &[FetchedMessage] {
        &self.messages
    }
}

impl std::ops::Deref for BatchedConsumer {
    type Target = BaseConsumer;
    fn deref(&self) -> &BaseConsumer {
        &self.consumer
    }
}
