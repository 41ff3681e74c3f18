//! Kafka Streams' `KTableSuppressProcessor`: hold a table's updates back and
//! emit them later, either each window's final result once the window has
//! closed, or each key's latest value a time limit after its first
//! held-back update.
//!
//! The buffer is kept in a logged key-value store (one entry per key, so a
//! later update replaces an earlier one but keeps its place), which makes it
//! survive restarts; the release order, by time and then by serialized key
//! as Kafka Streams' buffer has it, is an index rebuilt from the store when
//! the task starts.

use std::collections::BTreeMap;

use kstreams_record::{Headers, Record, Serde, SerdeError, SharedSerde, Timestamp};
use kstreams_state::KeyValueStoreHandle;
use kstreams_time::expiry;

use crate::change::Change;
use crate::suppressed::BufferTime;
use crate::suppressed::WhenFull;
use crate::BufferConfig;
use crate::{Processor, ProcessorContext, ProcessorError};

/// A buffered update: when it is due, the latest new value, the value
/// before the first buffered update of the key, and the record timestamp.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Buffered<V> {
    pub(crate) time: Timestamp,
    pub(crate) record_timestamp: Timestamp,
    pub(crate) size: u64,
    pub(crate) new_value: Option<V>,
    pub(crate) prior_value: Option<V>,
    /// The headers of the latest update, emitted with it (Kafka Streams'
    /// buffer keeps the record context).
    pub(crate) headers: Headers,
}

/// The buffer store's value bytes: time, record timestamp, size (8 bytes
/// each, big-endian), then the new and the prior value, each a 4-byte
/// length (-1 for none) and its bytes, then the headers: a 4-byte count
/// and per header its key and value as parts (an entry written before
/// headers were kept ends after the values: no headers).
pub(crate) struct BufferedSerde<V>(pub(crate) SharedSerde<V>);

pub(crate) fn put_part(out: &mut Vec<u8>, bytes: Option<Vec<u8>>) {
    match bytes {
        Some(b) => {
            out.extend_from_slice(&(b.len() as i32).to_be_bytes());
            out.extend_from_slice(&b);
        }
        None => out.extend_from_slice(&(-1i32).to_be_bytes()),
    }
}

impl<V: 'static> Serde<Buffered<V>> for BufferedSerde<V> {
    fn serialize(
        &self,
        topic: &str,
        headers: &mut Headers,
        value: &Buffered<V>,
    ) -> Result<Option<Vec<u8>>, SerdeError> {
        let mut out = Vec::with_capacity(40);
        for n in [value.time, value.record_timestamp, value.size as i64] {
            out.extend_from_slice(&n.to_be_bytes());
        }
        for part in [&value.new_value, &value.prior_value] {
            let bytes = match part {
                Some(v) => self.0.serialize(topic, headers, v)?,
                None => None,
            };
            put_part(&mut out, bytes);
        }
        if !value.headers.is_empty() {
            out.extend_from_slice(&(value.headers.len() as i32).to_be_bytes());
            for header in value.headers.iter() {
                put_part(&mut out, Some(header.key.as_bytes().to_vec()));
                put_part(&mut out, header.value.clone());
            }
        }
        Ok(Some(out))
    }

    fn deserialize(
        &self,
        topic: &str,
        headers: &Headers,
        bytes: Option<&[u8]>,
    ) -> Result<Buffered<V>, SerdeError> {
        let malformed = || SerdeError::Custom {
            topic: topic.to_string(),
            message: "malformed suppression buffer entry".to_string(),
        };
        let bytes = bytes.ok_or_else(malformed)?;
        let number = |at: usize| -> Result<i64, SerdeError> {
            let slice = bytes.get(at..at + 8).ok_or_else(malformed)?;
            Ok(i64::from_be_bytes(
                slice.try_into().map_err(|_| malformed())?,
            ))
        };
        let (time, record_timestamp, size) = (number(0)?, number(8)?, number(16)?);
        let mut rest = &bytes[24..];
        let mut parts = [None, None];
        for part in &mut parts {
            let len = rest.get(..4).ok_or_else(malformed)?;
            let len = i32::from_be_bytes(len.try_into().map_err(|_| malformed())?);
            rest = &rest[4..];
            if len >= 0 {
                let value = rest.get(..len as usize).ok_or_else(malformed)?;
                *part = Some(self.0.deserialize(topic, headers, Some(value))?);
                rest = &rest[len as usize..];
            }
        }
        let [new_value, prior_value] = parts;
        let mut record_headers = Headers::new();
        if !rest.is_empty() {
            let take_part = |rest: &mut &[u8]| -> Result<Option<Vec<u8>>, SerdeError> {
                let len = rest.get(..4).ok_or_else(malformed)?;
                let len = i32::from_be_bytes(len.try_into().map_err(|_| malformed())?);
                *rest = &rest[4..];
                if len < 0 {
                    return Ok(None);
                }
                let bytes = rest.get(..len as usize).ok_or_else(malformed)?.to_vec();
                *rest = &rest[len as usize..];
                Ok(Some(bytes))
            };
            let count = rest.get(..4).ok_or_else(malformed)?;
            let count = i32::from_be_bytes(count.try_into().map_err(|_| malformed())?);
            rest = &rest[4..];
            for _ in 0..count {
                let key = take_part(&mut rest)?.ok_or_else(malformed)?;
                let key = String::from_utf8(key).map_err(|_| malformed())?;
                let value = take_part(&mut rest)?;
                record_headers.add(key, value);
            }
        }
        Ok(Buffered {
            time,
            record_timestamp,
            size: size as u64,
            new_value,
            prior_value,
            headers: record_headers,
        })
    }
}

/// Kafka Streams' `KTableSuppressProcessor` over a time-ordered buffer.
pub(crate) struct SuppressProcessor<K, V> {
    pub(crate) store_name: String,
    pub(crate) time: BufferTime<K>,
    pub(crate) delay_ms: i64,
    pub(crate) buffer: BufferConfig,
    pub(crate) final_results: bool,
    pub(crate) key_serde: SharedSerde<K>,
    pub(crate) value_serde: SharedSerde<V>,
    pub(crate) store: Option<KeyValueStoreHandle<K, Buffered<V>>>,
    /// (time, serialized key) -> key: the release order, as Kafka Streams'
    /// `BufferKey` sorts.
    pub(crate) index: BTreeMap<(Timestamp, Vec<u8>), K>,
    pub(crate) bytes: u64,
    pub(crate) observed_stream_time: Timestamp,
}

impl<K: Clone + 'static, V: Clone + 'static> SuppressProcessor<K, V> {
    fn store(&self) -> Result<&KeyValueStoreHandle<K, Buffered<V>>, ProcessorError> {
        Ok(self.store.as_ref().ok_or("suppression buffer not open")?)
    }

    fn serialized_key(&self, key: &K) -> Result<Vec<u8>, ProcessorError> {
        let bytes = self
            .key_serde
            .serialize(&self.store_name, &mut Headers::new(), key)?;
        Ok(bytes.unwrap_or_default())
    }

    fn entry_size(&self, key: &[u8], change: &Change<V>) -> Result<u64, ProcessorError> {
        if self.buffer.max_bytes.is_none() {
            return Ok(0);
        }
        let topic = self.store_name.as_str();
        let mut headers = Headers::new();
        let mut size = key.len();
        for v in [&change.new_value, &change.old_value].into_iter().flatten() {
            size += self
                .value_serde
                .serialize(topic, &mut headers, v)?
                .map_or(0, |b| b.len());
        }
        Ok(size as u64 + 24)
    }

    fn over_capacity(&self) -> bool {
        self.buffer
            .max_records
            .is_some_and(|max| self.index.len() as u64 > max)
            || self.buffer.max_bytes.is_some_and(|max| self.bytes > max)
    }

    /// Removes the oldest entry and forwards it (unless it is a tombstone
    /// of a final result, which nothing downstream has seen).
    fn emit_oldest(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Change<V>>,
    ) -> Result<(), ProcessorError> {
        let Some((_, key)) = self.index.pop_first() else {
            return Ok(());
        };
        let store = self.store()?.clone();
        let Some(entry) = store.borrow_mut().delete(&key)? else {
            return Ok(());
        };
        self.bytes = self.bytes.saturating_sub(entry.size);
        if entry.new_value.is_none() && self.final_results {
            return Ok(());
        }
        ctx.forward(Record {
            key,
            value: Change::new(entry.new_value, entry.prior_value),
            timestamp: entry.record_timestamp,
            headers: entry.headers,
        })?;
        Ok(())
    }
}

impl<K: Clone + 'static, V: Clone + 'static> Processor<K, Change<V>, K, Change<V>>
    for SuppressProcessor<K, V>
{
    fn init(&mut self, ctx: &mut ProcessorContext<'_, K, Change<V>>) -> Result<(), ProcessorError> {
        let store: KeyValueStoreHandle<K, Buffered<V>> = ctx.get_state_store(&self.store_name)?;
        // After a restart the buffer comes back from its changelog; rebuild
        // the release order from it.
        for entry in store.borrow().all()? {
            let (key, buffered) = entry?;
            self.index
                .insert((buffered.time, self.serialized_key(&key)?), key);
            self.bytes += buffered.size;
            self.observed_stream_time = self.observed_stream_time.max(buffered.record_timestamp);
        }
        self.store = Some(store);
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Change<V>>,
        record: Record<K, Change<V>>,
    ) -> Result<(), ProcessorError> {
        self.observed_stream_time = self.observed_stream_time.max(record.timestamp);
        let key_bytes = self.serialized_key(&record.key)?;
        let size = self.entry_size(&key_bytes, &record.value)?;
        let store = self.store()?.clone();
        let previous = store.borrow().get(&record.key)?;
        // An update of a buffered key keeps its place, and so its time, as
        // in Kafka Streams' buffer: a time limit runs from the first update.
        let (time, prior_value) = match previous {
            Some(previous) => {
                self.bytes = self.bytes.saturating_sub(previous.size);
                (previous.time, previous.prior_value)
            }
            None => {
                let time = (self.time)(&record.key, record.timestamp);
                self.index.insert((time, key_bytes), record.key.clone());
                (time, record.value.old_value.clone())
            }
        };
        store.borrow_mut().put(
            record.key,
            Buffered {
                time,
                record_timestamp: record.timestamp,
                size,
                new_value: record.value.new_value,
                prior_value,
                headers: record.headers,
            },
        )?;
        self.bytes += size;

        while self.index.first_key_value().is_some_and(|((t, _), _)| {
            expiry::suppression_due(*t, self.observed_stream_time, self.delay_ms)
        }) {
            self.emit_oldest(ctx)?;
        }
        if self.over_capacity() {
            match self.buffer.when_full {
                WhenFull::EmitEarly => {
                    while self.over_capacity() {
                        self.emit_oldest(ctx)?;
                    }
                }
                WhenFull::ShutDown => {
                    return Err(format!(
                        "suppression buffer {} is full ({} keys, {} bytes; bounds: {:?} keys, \
                         {:?} bytes) and may not emit early: raise its bounds or use \
                         BufferConfig::unbounded()",
                        self.store_name,
                        self.index.len(),
                        self.bytes,
                        self.buffer.max_records,
                        self.buffer.max_bytes
                    )
                    .into());
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kstreams_record::{Headers, I64Serde, Serde};

    use super::{Buffered, BufferedSerde};

    fn serde() -> BufferedSerde<i64> {
        BufferedSerde(Arc::new(I64Serde))
    }

    #[test]
    fn buffered_entries_round_trip_with_and_without_headers() {
        for headers in [
            Headers::new(),
            Headers::new()
                .with("trace", "abc")
                .with("empty", Vec::<u8>::new()),
        ] {
            let mut headers = headers;
            headers.add("null", None::<Vec<u8>>);
            let entry = Buffered {
                time: 10,
                record_timestamp: 7,
                size: 33,
                new_value: Some(2),
                prior_value: None,
                headers,
            };
            let bytes = serde().serialize("t", &mut Headers::new(), &entry).unwrap();
            let back = serde()
                .deserialize("t", &Headers::new(), bytes.as_deref())
                .unwrap();
            assert_eq!(back, entry);
        }
    }

    #[test]
    fn entries_written_before_headers_were_kept_still_read() {
        let mut old = Vec::new();
        for n in [10i64, 7, 33] {
            old.extend_from_slice(&n.to_be_bytes());
        }
        old.extend_from_slice(&8i32.to_be_bytes());
        old.extend_from_slice(&2i64.to_be_bytes());
        old.extend_from_slice(&(-1i32).to_be_bytes());
        let back = serde()
            .deserialize("t", &Headers::new(), Some(&old))
            .unwrap();
        assert_eq!(back.new_value, Some(2));
        assert_eq!(back.prior_value, None);
        assert!(back.headers.is_empty());
        // A truncated header section is an error, not a panic.
        old.extend_from_slice(&1i32.to_be_bytes());
        assert!(serde()
            .deserialize("t", &Headers::new(), Some(&old))
            .is_err());
    }
}
