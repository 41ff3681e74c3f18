//! What librdkafka knows of a consumer's partitions without a request to
//! the broker: the watermarks of the last fetch response and the
//! consumer's position. rust-rdkafka wraps only the variants that ask the
//! broker (`fetch_watermarks`) or its main thread (`position`), too slow to
//! call per batch.

use std::ffi::CString;

use rdkafka::bindings as rd;
use rdkafka::consumer::{BaseConsumer, Consumer as _, ConsumerContext};
use rdkafka::{Offset, TopicPartitionList};

/// The low and high watermarks librdkafka last saw for a partition of
/// `consumer`'s (both come with each fetch response), as it reports them:
/// `RD_KAFKA_OFFSET_INVALID` (-1001) until one came. `None` when librdkafka
/// has no such partition (or the name holds a NUL).
pub(crate) fn cached_watermarks<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    topic: &str,
    partition: i32,
) -> Option<(i64, i64)> {
    let topic = CString::new(topic).ok()?;
    let mut low: i64 = -1;
    let mut high: i64 = -1;
    // SAFETY: `native_ptr` is the live handle of `consumer`, borrowed for
    // the whole call; `topic` is a NUL-terminated string that outlives the
    // call; `low` and `high` are valid, exclusive out-pointers to i64 on
    // this stack frame. rd_kafka_get_watermark_offsets reads the partition's
    // cached offsets under its lock (finding or making librdkafka's
    // partition object under the client's lock first) and writes the two
    // out-parameters; it keeps none of the pointers, and any thread may
    // call it.
    let err = unsafe {
        rd::rd_kafka_get_watermark_offsets(
            consumer.client().native_ptr(),
            topic.as_ptr(),
            partition,
            &mut low,
            &mut high,
        )
    };
    (err == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR).then_some((low, high))
}

/// The consumer's position in a partition, from librdkafka's cached state
/// (`Invalid` when it has none). rust-rdkafka's `position()` first asks
/// librdkafka's main thread for the whole assignment and waits for its
/// answer.
pub(crate) fn cached_position<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    topic: &str,
    partition: i32,
) -> Offset {
    let mut list = TopicPartitionList::with_capacity(1);
    list.add_partition(topic, partition);
    // SAFETY: `native_ptr` is the live handle of `consumer`, borrowed for
    // the whole call, and `list` is a valid list we own (rust-rdkafka's
    // owner), borrowed mutably for it. rd_kafka_position looks each
    // partition up under librdkafka's locks (making its partition object if
    // there is none, as for the assignment that rust-rdkafka's `position()`
    // passes), writes the element's offset and error, and keeps no pointer
    // to the list.
    let err = unsafe { rd::rd_kafka_position(consumer.client().native_ptr(), list.ptr()) };
    if err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
        return Offset::Invalid;
    }
    list.elements()
        .first()
        .map_or(Offset::Invalid, |e| e.offset())
}
