//! The one owner of every librdkafka handle the runtime makes or is handed
//! (as rust-rdkafka's `NativePtr` with `KafkaDrop`): [`Owned`], a non-null
//! pointer destroyed once, when its owner is dropped, by the call its type
//! names ([`Destroy`]). The handles rust-rdkafka owns (clients, partition
//! lists, the messages of its poll) stay with rust-rdkafka's owners and are
//! only borrowed here.

use std::ptr::NonNull;

use rdkafka::bindings as rd;

/// A librdkafka object type, with the call that releases an application's
/// handle of it.
///
/// # Safety
/// `DESTROY` is the call librdkafka documents for releasing a handle of
/// this type that it handed to the application (one reference, for the
/// objects it counts), and it may run on any thread.
pub(super) unsafe trait Destroy {
    /// Releases one handle the application owns.
    const DESTROY: unsafe extern "C" fn(*mut Self);
}

// SAFETY: rd_kafka_queue_destroy releases the application's handle of a
// queue (rd_kafka_queue_new, rd_kafka_queue_get_consumer,
// rd_kafka_queue_get_partition): it drops the handle's reference to the
// queue (an owner handle also disables and purges it) under the queue's
// lock, from any thread.
unsafe impl Destroy for rd::rd_kafka_queue_t {
    const DESTROY: unsafe extern "C" fn(*mut Self) = rd::rd_kafka_queue_destroy;
}

// SAFETY: rd_kafka_topic_destroy releases the application's reference to a
// topic (rd_kafka_topic_new); the count is atomic, so any thread may.
unsafe impl Destroy for rd::rd_kafka_topic_t {
    const DESTROY: unsafe extern "C" fn(*mut Self) = rd::rd_kafka_topic_destroy;
}

// SAFETY: rd_kafka_message_destroy frees a consumed message the
// application holds (rd_kafka_consume_batch_queue hands each one over) and
// drops its references (topic, partition), which are atomic counts: any
// thread may (rust-rdkafka's own messages are Send and destroyed wherever
// they are dropped).
unsafe impl Destroy for rd::rd_kafka_message_t {
    const DESTROY: unsafe extern "C" fn(*mut Self) = rd::rd_kafka_message_destroy;
}

// SAFETY: rd_kafka_headers_destroy frees a header list that no message has
// taken (rd_kafka_headers_new): plain memory, freed on any thread.
unsafe impl Destroy for rd::rd_kafka_headers_t {
    const DESTROY: unsafe extern "C" fn(*mut Self) = rd::rd_kafka_headers_destroy;
}

// SAFETY: rd_kafka_error_destroy frees an error object handed to the
// application (rd_kafka_produceva's): plain memory, freed on any thread.
unsafe impl Destroy for rd::rd_kafka_error_t {
    const DESTROY: unsafe extern "C" fn(*mut Self) = rd::rd_kafka_error_destroy;
}

/// A librdkafka handle the runtime owns: destroyed once, when dropped,
/// unless [handed over](Owned::hand_over) to a call that takes it. Laid
/// out as the pointer itself, so librdkafka can write an array of them.
#[repr(transparent)]
pub(super) struct Owned<T: Destroy>(NonNull<T>);

// SAFETY: an owned handle may move to another thread and be destroyed
// there (`Destroy`'s contract). Anything else a thread does with it goes
// through `as_ptr` and an unsafe call, whose own proof covers that thread.
// Not Sync: an owner that is shared proves that itself.
unsafe impl<T: Destroy> Send for Owned<T> {}

impl<T: Destroy> Owned<T> {
    /// The owner of `ptr`; `None` when it is null.
    ///
    /// # Safety
    /// A non-null `ptr` is a handle of a `T` that librdkafka handed to the
    /// application to destroy, given up by the caller (nothing else
    /// destroys it), and the caller keeps what the object needs (its
    /// client) alive until this owner is dropped.
    pub(super) unsafe fn from_ptr(ptr: *mut T) -> Option<Self> {
        NonNull::new(ptr).map(Self)
    }

    /// The handle, for a librdkafka call; it stays owned here.
    #[inline]
    pub(super) fn as_ptr(&self) -> *mut T {
        self.0.as_ptr()
    }

    /// Gives the handle up without destroying it: a call took it over (a
    /// produced record takes its header list).
    pub(super) fn hand_over(self) {
        std::mem::forget(self);
    }
}

impl<T: Destroy> Drop for Owned<T> {
    fn drop(&mut self) {
        // SAFETY: the handle is owned here (`from_ptr`'s contract), with
        // what it needs still alive, and is destroyed this once: `hand_over`
        // forgets the owner instead of dropping it.
        unsafe { (T::DESTROY)(self.0.as_ptr()) }
    }
}
