//! Records that arrive after their window closed: counted, logged, and
//! written to the side topic when there is one.

use kstreams_record::{Record, SharedSerde, Timestamp};
use kstreams_state::Window;

use crate::late_headers;
use crate::task_context::ProducedRecord;
use crate::{ProcessorContext, ProcessorError};

/// Where late records go besides the dropped-records count: a topic, with
/// the serdes to write them.
pub(crate) struct LateRecordSink<K, V> {
    pub(crate) topic: String,
    pub(crate) key_serde: SharedSerde<K>,
    pub(crate) value_serde: SharedSerde<V>,
}

impl<K, V> Clone for LateRecordSink<K, V> {
    fn clone(&self) -> Self {
        LateRecordSink {
            topic: self.topic.clone(),
            key_serde: self.key_serde.clone(),
            value_serde: self.value_serde.clone(),
        }
    }
}

/// Counts a late record, logs it, and writes it to the side topic if there
/// is one, with headers saying which window, what stream time and grace.
pub(crate) fn reject_late<K: 'static, V: 'static, KO, VO>(
    ctx: &mut ProcessorContext<'_, KO, VO>,
    sink: Option<&LateRecordSink<K, V>>,
    record: &Record<K, V>,
    window: Window,
    stream_time: Timestamp,
    grace_ms: i64,
) -> Result<(), ProcessorError> {
    ctx.record_dropped();
    // The target is the module this lived in before the split: log filters
    // in deployments (and compat/kstreams) name it.
    log::warn!(
        target: "kstreams_dsl::windowed",
        "{}: dropping a late record (timestamp {}) for window [{}, {}): stream time {stream_time}, \
         grace {grace_ms} ms",
        ctx.node_name(),
        record.timestamp,
        window.start,
        window.end
    );
    let Some(sink) = sink else {
        return Ok(());
    };
    let mut headers = record.headers.clone();
    let key = sink
        .key_serde
        .serialize(&sink.topic, &mut headers, &record.key)?;
    let value = sink
        .value_serde
        .serialize(&sink.topic, &mut headers, &record.value)?;
    headers.add(late_headers::WINDOW_START, Some(window.start.to_be_bytes()));
    headers.add(late_headers::WINDOW_END, Some(window.end.to_be_bytes()));
    headers.add(late_headers::STREAM_TIME, Some(stream_time.to_be_bytes()));
    headers.add(late_headers::GRACE_MS, Some(grace_ms.to_be_bytes()));
    headers.add(late_headers::OPERATOR, Some(ctx.node_name().as_bytes()));
    ctx.send_raw(ProducedRecord {
        topic: sink.topic.as_str().into(),
        partition: None,
        partition_key_len: None,
        key,
        value,
        timestamp: record.timestamp,
        headers,
        sink: None,
    });
    Ok(())
}
