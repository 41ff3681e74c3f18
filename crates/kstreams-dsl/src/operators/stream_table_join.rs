//! Kafka Streams' `KStreamKTableJoinProcessor`, with KIP-923's grace
//! buffer on the stream side.

use std::collections::BTreeSet;
use std::sync::Arc;

use kstreams_record::{Headers, Record, Serde, SerdeError, SharedSerde, Timestamp};
use kstreams_state::KeyValueStoreHandle;
use kstreams_time::expiry;

use crate::operators::getters::{GetterFactory, ValueGetter};
use crate::{Processor, ProcessorContext, ProcessorError};

/// A joiner of a stream value with the table's value (`None` when the
/// table has none, for left joins).
pub(crate) type StreamTableJoiner<K, V, VT, VR> =
    Arc<dyn Fn(&K, &V, Option<&VT>) -> VR + Send + Sync>;

/// Kafka Streams' `KStreamKTableJoinProcessor`, with KIP-923's buffer.
pub(crate) struct StreamTableJoin<K, V, VT, VR> {
    pub(crate) joiner: StreamTableJoiner<K, V, VT, Option<VR>>,
    pub(crate) make: GetterFactory<K, VT>,
    pub(crate) versioned: bool,
    pub(crate) getter: Option<Box<dyn ValueGetter<K, VT>>>,
    /// The grace buffer's store, grace and key serde.
    pub(crate) buffer_spec: Option<(String, i64, SharedSerde<K>)>,
    pub(crate) buffer: Option<GraceBuffer<K, V>>,
}

impl<K: Clone + 'static, V: Clone + 'static, VT: 'static, VR: Clone + 'static>
    StreamTableJoin<K, V, VT, VR>
{
    fn join(
        &self,
        ctx: &mut ProcessorContext<'_, K, VR>,
        record: Record<K, V>,
    ) -> Result<(), ProcessorError> {
        let getter = self.getter.as_ref().ok_or("join not initialized")?;
        let found = if self.versioned {
            getter.get_as_of(&record.key, record.timestamp)?
        } else {
            getter.get(&record.key)?
        };
        let table_value = found.map(|f| f.value);
        if let Some(joined) = (self.joiner)(&record.key, &record.value, table_value.as_ref()) {
            ctx.forward(record.with_value(joined))?;
        }
        Ok(())
    }
}

impl<K: Clone + 'static, V: Clone + 'static, VT: 'static, VR: Clone + 'static>
    Processor<K, V, K, VR> for StreamTableJoin<K, V, VT, VR>
{
    fn init(&mut self, ctx: &mut ProcessorContext<'_, K, VR>) -> Result<(), ProcessorError> {
        self.getter = Some((self.make)(&ctx.store_lookup())?);
        if let Some((store, grace, key_serde)) = &self.buffer_spec {
            self.buffer = Some(GraceBuffer::open(
                ctx.get_state_store(store)?,
                *grace,
                key_serde.clone(),
            )?);
        }
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, VR>,
        record: Record<K, V>,
    ) -> Result<(), ProcessorError> {
        let Some(buffer) = &mut self.buffer else {
            return self.join(ctx, record);
        };
        let due = buffer.add(record)?;
        for record in due {
            self.join(ctx, record)?;
        }
        Ok(())
    }
}

/// Stream records held back for a grace period, in a logged store keyed by
/// timestamp, key bytes and arrival, as Kafka Streams'
/// `TimeFirstWindowKeySchema` orders its buffer (so the store's order is
/// the release order, ties in key order, and the buffer survives
/// restarts).
pub(crate) struct GraceBuffer<K, V> {
    pub(crate) store: KeyValueStoreHandle<Vec<u8>, Record<K, V>>,
    pub(crate) grace_ms: i64,
    pub(crate) observed: Timestamp,
    pub(crate) next_seq: u64,
    /// The buffered records' store keys, in release order, to know
    /// without a scan whether any is due.
    pub(crate) keys: BTreeSet<Vec<u8>>,
    pub(crate) key_serde: SharedSerde<K>,
    /// The store's name, the topic its key serde is given.
    pub(crate) topic: String,
}

/// A buffered record's store key: timestamp, record key bytes, arrival.
pub(crate) fn buffer_key(timestamp: Timestamp, key: &[u8], seq: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + key.len());
    // Timestamps are not negative here (the task drops those), so their
    // big-endian bytes sort in time order.
    out.extend_from_slice(&timestamp.to_be_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(&seq.to_be_bytes());
    out
}

/// The timestamp and arrival number of a buffer store key.
fn parse_buffer_key(key: &[u8]) -> Option<(Timestamp, u64)> {
    let timestamp = i64::from_be_bytes(key.get(..8)?.try_into().ok()?);
    let seq = u64::from_be_bytes(key.get(key.len().checked_sub(8)?..)?.try_into().ok()?);
    Some((timestamp, seq))
}

impl<K: Clone + 'static, V: Clone + 'static> GraceBuffer<K, V> {
    fn open(
        store: KeyValueStoreHandle<Vec<u8>, Record<K, V>>,
        grace_ms: i64,
        key_serde: SharedSerde<K>,
    ) -> Result<Self, ProcessorError> {
        let topic = store.borrow().name().to_string();
        let mut buffer = GraceBuffer {
            store,
            grace_ms,
            observed: -1,
            next_seq: 0,
            keys: BTreeSet::new(),
            key_serde,
            topic,
        };
        let entries = buffer
            .store
            .borrow()
            .all()?
            .collect::<Result<Vec<_>, _>>()?;
        for (key, record) in entries {
            let (_, seq) = parse_buffer_key(&key).ok_or("malformed join grace buffer key")?;
            buffer.keys.insert(key);
            buffer.next_seq = buffer.next_seq.max(seq + 1);
            buffer.observed = buffer.observed.max(record.timestamp);
        }
        Ok(buffer)
    }

    /// Buffers `record` and returns the records now due (timestamp at or
    /// before stream time minus grace), oldest first.
    fn add(&mut self, record: Record<K, V>) -> Result<Vec<Record<K, V>>, ProcessorError> {
        self.observed = self.observed.max(record.timestamp);
        // Too late to wait for the table: joined at once, never buffered
        // (nor logged), as the buffer's `put` refuses it in Kafka Streams.
        // Nothing else is due: a late record does not move stream time.
        if expiry::grace_buffer_late(record.timestamp, self.observed, self.grace_ms) {
            return Ok(vec![record]);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let key_bytes = self
            .key_serde
            .serialize(&self.topic, &mut Headers::new(), &record.key)?
            .unwrap_or_default();
        let key = buffer_key(record.timestamp, &key_bytes, seq);
        self.keys.insert(key.clone());
        self.store.borrow_mut().put(key, record)?;
        let mut due = Vec::new();
        while let Some(key) = self.keys.first() {
            let (timestamp, _) = parse_buffer_key(key).ok_or("malformed join grace buffer key")?;
            if !expiry::grace_buffer_due(timestamp, self.observed, self.grace_ms) {
                break;
            }
            let key = self.keys.pop_first().unwrap_or_default();
            if let Some(record) = self.store.borrow_mut().delete(&key)? {
                due.push(record);
            }
        }
        Ok(due)
    }
}

/// The grace buffer's values: a whole record (timestamp, key, value,
/// headers) in our own layout.
pub(crate) struct BufferedRecordSerde<K, V> {
    pub(crate) key: SharedSerde<K>,
    pub(crate) value: SharedSerde<V>,
}

pub(crate) fn put_bytes(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        Some(b) => {
            out.extend_from_slice(&(b.len() as i32).to_be_bytes());
            out.extend_from_slice(b);
        }
        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
    }
}

pub(crate) fn take_bytes<'a>(
    rest: &mut &'a [u8],
    malformed: &dyn Fn() -> SerdeError,
) -> Result<Option<&'a [u8]>, SerdeError> {
    let len = rest.get(..4).ok_or_else(malformed)?;
    let len = i32::from_be_bytes(len.try_into().map_err(|_| malformed())?);
    *rest = &rest[4..];
    if len < 0 {
        return Ok(None);
    }
    let bytes = rest.get(..len as usize).ok_or_else(malformed)?;
    *rest = &rest[len as usize..];
    Ok(Some(bytes))
}

impl<K: 'static, V: 'static> Serde<Record<K, V>> for BufferedRecordSerde<K, V> {
    fn serialize(
        &self,
        topic: &str,
        _: &mut Headers,
        record: &Record<K, V>,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        let mut headers = record.headers.clone();
        let mut out = record.timestamp.to_be_bytes().to_vec();
        put_bytes(
            &mut out,
            self.key
                .serialize(topic, &mut headers, &record.key)?
                .as_deref(),
        );
        put_bytes(
            &mut out,
            self.value
                .serialize(topic, &mut headers, &record.value)?
                .as_deref(),
        );
        out.extend_from_slice(&(headers.iter().count() as i32).to_be_bytes());
        for header in headers.iter() {
            put_bytes(&mut out, Some(header.key.as_bytes()));
            put_bytes(&mut out, header.value.as_deref());
        }
        Ok(Some(out))
    }

    fn deserialize(
        &self,
        topic: &str,
        _: &Headers,
        bytes: Option<&[u8]>,
    ) -> Result<Record<K, V>, SerdeError> {
        let malformed = || SerdeError::Custom {
            topic: topic.to_string(),
            message: "malformed join grace buffer entry".to_string(),
        };
        let bytes = bytes.ok_or_else(malformed)?;
        let timestamp = i64::from_be_bytes(
            bytes
                .get(..8)
                .ok_or_else(malformed)?
                .try_into()
                .map_err(|_| malformed())?,
        );
        let mut rest = &bytes[8..];
        let key_bytes = take_bytes(&mut rest, &malformed)?;
        let value_bytes = take_bytes(&mut rest, &malformed)?;
        let count = i32::from_be_bytes(
            rest.get(..4)
                .ok_or_else(malformed)?
                .try_into()
                .map_err(|_| malformed())?,
        );
        rest = &rest[4..];
        let mut headers = Headers::new();
        for _ in 0..count.max(0) {
            let name = take_bytes(&mut rest, &malformed)?.ok_or_else(malformed)?;
            let value = take_bytes(&mut rest, &malformed)?;
            headers.add(
                String::from_utf8_lossy(name).into_owned(),
                value.map(|v| v.to_vec()),
            );
        }
        let key = self.key.deserialize(topic, &headers, key_bytes)?;
        let value = self.value.deserialize(topic, &headers, value_bytes)?;
        Ok(Record {
            key,
            value,
            timestamp,
            headers,
        })
    }
}
