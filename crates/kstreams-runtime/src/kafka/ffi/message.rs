//! Reading a consumed message where librdkafka laid it out: its topic,
//! partition, offset, timestamp and error, its key and value borrowed (the
//! caller copies them where it wants them), its headers copied.
//!
//! A [`MessageView`] is made only from a message librdkafka handed over
//! and that is alive for the view's lifetime (a [`FetchedMessage`] of the
//! thread's fetch queue, or rust-rdkafka's `BorrowedMessage` of a poll):
//! every pointer in it is then librdkafka's own. These accessors are on
//! the per-record path: inlined, no allocation but the headers' copy.

use std::ffi::{c_char, c_void, CStr};

use kstreams_record::Headers;
use rdkafka::bindings as rd;
use rdkafka::error::KafkaError;
use rdkafka::message::BorrowedMessage;
use rdkafka::types::RDKafkaRespErr;

use super::fetch_queue::FetchedMessage;

/// A consumed message, borrowed for `'a` from its owner.
#[derive(Clone, Copy)]
pub(crate) struct MessageView<'a> {
    /// Private: made only from a live message (see the module docs).
    raw: &'a rd::rd_kafka_message_t,
}

impl FetchedMessage {
    /// The message, to read.
    #[inline]
    pub(crate) fn view(&self) -> MessageView<'_> {
        MessageView::of_fetched(self)
    }

    /// The consumer error this message carries instead of a record, as
    /// rust-rdkafka's poll returns it.
    #[inline]
    pub(crate) fn error(&self) -> Option<KafkaError> {
        self.view().error()
    }
}

impl<'a> MessageView<'a> {
    /// The message a consumer's poll returned.
    #[inline]
    pub(crate) fn of_polled(message: &'a BorrowedMessage<'_>) -> Self {
        // SAFETY: a `BorrowedMessage` owns its non-null message pointer
        // (`ptr`) until it is dropped, which the borrow of `message` rules
        // out for `'a`; librdkafka does not write the message struct while
        // the application holds it.
        let raw = unsafe { &*message.ptr() };
        Self { raw }
    }

    /// A message of the thread's fetch queue.
    #[inline]
    fn of_fetched(message: &'a FetchedMessage) -> Self {
        // SAFETY: a `FetchedMessage` owns its non-null message pointer until
        // it is dropped, which the borrow of `message` rules out for `'a`;
        // librdkafka does not write the message struct while the
        // application holds it.
        let raw = unsafe { &*message.as_ptr() };
        Self { raw }
    }

    /// The message's topic name (empty for an error no topic goes with).
    #[inline]
    pub(crate) fn topic_name(self) -> &'a CStr {
        if self.raw.rkt.is_null() {
            return c"";
        }
        // SAFETY: `rkt` is the message's topic handle, non-null, alive with
        // the message (a message holds a reference to it) and so for `'a`;
        // librdkafka keeps a handle's name as a NUL-terminated string for
        // as long as the handle.
        unsafe { CStr::from_ptr(rd::rd_kafka_topic_name(self.raw.rkt)) }
    }

    /// The partition.
    #[inline]
    pub(crate) fn partition(self) -> i32 {
        self.raw.partition
    }

    /// The offset.
    #[inline]
    pub(crate) fn offset(self) -> i64 {
        self.raw.offset
    }

    /// The record's timestamp as librdkafka gives it (-1 when there is
    /// none, as for an error).
    #[inline]
    pub(crate) fn timestamp(self) -> i64 {
        // SAFETY: the message is one librdkafka made (see the module docs:
        // it reads the enclosing rd_kafka_msg_t) and is alive for the call;
        // a null timestamp type asks for the timestamp alone.
        unsafe { rd::rd_kafka_message_timestamp(self.raw, std::ptr::null_mut()) }
    }

    /// The key's bytes; `None` for a null key.
    #[inline]
    pub(crate) fn key(self) -> Option<&'a [u8]> {
        // SAFETY: as `bytes` requires: librdkafka's key and its length.
        unsafe { bytes(self.raw.key, self.raw.key_len) }
    }

    /// The value's bytes; `None` for a null value.
    #[inline]
    pub(crate) fn payload(self) -> Option<&'a [u8]> {
        // SAFETY: as `bytes` requires: librdkafka's payload and its length.
        unsafe { bytes(self.raw.payload, self.raw.len) }
    }

    /// The consumer error this message carries instead of a record, as
    /// rust-rdkafka's poll returns it.
    #[inline]
    pub(crate) fn error(self) -> Option<KafkaError> {
        match self.raw.err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR => None,
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__PARTITION_EOF => {
                Some(KafkaError::PartitionEOF(self.raw.partition))
            }
            e => Some(KafkaError::MessageConsumption(e.into())),
        }
    }

    /// The message's headers, copied (none when it has none).
    pub(crate) fn headers(self) -> Headers {
        let mut headers = Headers::new();
        let mut list: *mut rd::rd_kafka_headers_t = std::ptr::null_mut();
        // SAFETY: the message is one librdkafka made and is alive for the
        // call; `list` is a valid out-pointer. The list it sets belongs to
        // the message (parsed on first use and kept in the enclosing
        // rd_kafka_msg_t, outside the struct `raw` borrows): read here,
        // never freed.
        let found = unsafe { rd::rd_kafka_message_headers(self.raw, &mut list) };
        if found != RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR || list.is_null() {
            return headers;
        }
        // SAFETY: `list` is the message's live header list.
        let count = unsafe { rd::rd_kafka_header_cnt(list) };
        for index in 0..count {
            let mut name: *const c_char = std::ptr::null();
            let mut value: *const c_void = std::ptr::null();
            let mut size: usize = 0;
            // SAFETY: `list` is the message's live header list, `index` is
            // below its count, and the three out-pointers are valid locals.
            let got = unsafe {
                rd::rd_kafka_header_get_all(list, index, &mut name, &mut value, &mut size)
            };
            if got != RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR {
                break;
            }
            // SAFETY: a header's name is a NUL-terminated string that the
            // list keeps while the message lives; it is copied at once.
            let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
            // SAFETY: a non-null value is `size` bytes the list keeps while
            // the message lives; they are copied at once.
            let value = (!value.is_null())
                .then(|| unsafe { std::slice::from_raw_parts(value.cast::<u8>(), size) }.to_vec());
            headers.add(name.into_owned(), value);
        }
        headers
    }
}

/// A consumed message's key or payload: `None` when `ptr` is null.
///
/// # Safety
/// A non-null `ptr` points to `len` bytes that stay valid and unwritten for
/// `'a` (librdkafka's key or payload of a message alive for `'a`).
#[inline]
unsafe fn bytes<'a>(ptr: *mut c_void, len: usize) -> Option<&'a [u8]> {
    // SAFETY: per the caller; bytes need no alignment.
    (!ptr.is_null()).then(|| unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
}
