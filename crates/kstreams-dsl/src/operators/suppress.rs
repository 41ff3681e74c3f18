//! Kafka Streams' `KTableSuppressProcessor`: hold a table's updates back and
//! emit them later, either each window's final result once the window has
//! closed, or each key's latest value a time limit after its first
//! held-back update.
//!
//! The buffer is kept in a logged key-value store (one entry per key, so a
//! later update replaces an earlier one but keeps its place), which makes it
//! survive restarts; its changelog has Kafka Streams' bytes
//! (`suppress_buffer`). The release order, by time and then by serialized
//! key as Kafka Streams' buffer has it, is an index rebuilt from the store
//! when the task starts.

use std::collections::BTreeMap;

use kstreams_record::{Headers, Record, Serde, SharedSerde, Timestamp};
use kstreams_state::KeyValueStoreHandle;
use kstreams_time::expiry;

use super::suppress_buffer::{Buffered, BufferedContext, BufferedSerde};
use crate::change::Change;
use crate::suppressed::BufferTime;
use crate::suppressed::WhenFull;
use crate::BufferConfig;
use crate::{Processor, ProcessorContext, ProcessorError};

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
    /// Whether `index` holds what the store held when processing began.
    pub(crate) indexed: bool,
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

    /// The entry's size as Kafka Streams counts it against `max_bytes`.
    fn entry_size(&self, key: &[u8], entry: &Buffered<V>) -> Result<u64, ProcessorError> {
        if self.buffer.max_bytes.is_none() {
            return Ok(0);
        }
        let serde = BufferedSerde(self.value_serde.clone());
        Ok(serde.size(&self.store_name, key, entry)?)
    }

    /// Builds the release order from what the buffer store holds. Not at
    /// init: the task restores its stores after it has initialized its
    /// processors, and the buffer (in memory) comes back from its changelog
    /// only then. The first record finds it restored.
    fn index_restored_entries(&mut self) -> Result<(), ProcessorError> {
        let store = self.store()?.clone();
        for entry in store.borrow().all()? {
            let (key, buffered) = entry?;
            let key_bytes = self.serialized_key(&key)?;
            self.bytes += self.entry_size(&key_bytes, &buffered)?;
            self.index.insert((buffered.time, key_bytes), key);
            self.observed_stream_time = self.observed_stream_time.max(buffered.context.timestamp);
        }
        self.indexed = true;
        Ok(())
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
        let key_bytes = self.serialized_key(&key)?;
        self.bytes = self
            .bytes
            .saturating_sub(self.entry_size(&key_bytes, &entry)?);
        if entry.new_value.is_none() && self.final_results {
            return Ok(());
        }
        // As Kafka Streams' buffer: the latest update's new and old value,
        // with its record's timestamp and headers.
        ctx.forward(Record {
            key,
            value: Change::new(entry.new_value, entry.old_value),
            timestamp: entry.context.timestamp,
            headers: entry.context.headers,
        })?;
        Ok(())
    }
}

impl<K: Clone + 'static, V: Clone + 'static> Processor<K, Change<V>, K, Change<V>>
    for SuppressProcessor<K, V>
{
    fn init(&mut self, ctx: &mut ProcessorContext<'_, K, Change<V>>) -> Result<(), ProcessorError> {
        self.store = Some(ctx.get_state_store(&self.store_name)?);
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Change<V>>,
        record: Record<K, Change<V>>,
    ) -> Result<(), ProcessorError> {
        if !self.indexed {
            self.index_restored_entries()?;
        }
        self.observed_stream_time = self.observed_stream_time.max(record.timestamp);
        let key_bytes = self.serialized_key(&record.key)?;
        let store = self.store()?.clone();
        let previous = store.borrow().get(&record.key)?;
        // An update of a buffered key keeps its place, and so its time, as
        // in Kafka Streams' buffer: a time limit runs from the first update.
        let (time, prior_value) = match previous {
            Some(previous) => {
                let size = self.entry_size(&key_bytes, &previous)?;
                self.bytes = self.bytes.saturating_sub(size);
                (previous.time, previous.prior_value)
            }
            None => {
                let time = (self.time)(&record.key, record.timestamp);
                self.index
                    .insert((time, key_bytes.clone()), record.key.clone());
                (time, record.value.old_value.clone())
            }
        };
        let metadata = ctx.record_metadata();
        let entry = Buffered {
            time,
            context: BufferedContext {
                timestamp: record.timestamp,
                offset: metadata.map_or(-1, |m| m.offset),
                topic: metadata.map_or_else(String::new, |m| m.topic.to_string()),
                partition: metadata.map_or(-1, |m| m.partition),
                headers: record.headers,
            },
            prior_value,
            old_value: record.value.old_value,
            new_value: record.value.new_value,
        };
        self.bytes += self.entry_size(&key_bytes, &entry)?;
        store.borrow_mut().put(record.key, entry)?;

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
