//! Kafka Streams' `KTableSource`: a table's source node and the store writes
//! of table operators (`TableStore`).

use std::sync::Arc;

use kstreams_record::{Record, Timestamp};
use kstreams_state::{TimestampedKeyValueStoreHandle, ValueAndTimestamp};

use crate::operators::forwarder::sends_old;
use crate::operators::forwarder::timestamped_change;
use crate::operators::forwarder::CacheForwarder;
use crate::operators::forwarder::OldValuesFlag;
use crate::operators::LazyStoreName;
use crate::Change;
use crate::{Processor, ProcessorContext, ProcessorError};

/// A timestamped key-value store of a table operator with the forwarding
/// of its cache.
pub(crate) struct TableStore<K, V> {
    pub store: TimestampedKeyValueStoreHandle<K, V>,
    pub forwarder: CacheForwarder<K, ValueAndTimestamp<V>>,
}

impl<K: Clone + 'static, V: Clone + 'static> TableStore<K, V> {
    pub(crate) fn open<KO, VO>(
        ctx: &ProcessorContext<'_, KO, VO>,
        name: &str,
        send_old: bool,
    ) -> Result<Self, ProcessorError> {
        let store: TimestampedKeyValueStoreHandle<K, V> = ctx.get_state_store(name)?;
        let forwarder =
            CacheForwarder::attach(|l| store.borrow_mut().set_flush_listener(l, send_old));
        Ok(TableStore { store, forwarder })
    }

    pub(crate) fn get(&self, key: &K) -> Result<Option<ValueAndTimestamp<V>>, ProcessorError> {
        Ok(self.store.borrow().get(key)?)
    }

    /// Writes `value` (or deletes on `None`) and, behind a cache, forwards
    /// what the write evicted; returns whether the caller must forward.
    pub(crate) fn put(
        &self,
        ctx: &mut ProcessorContext<'_, K, Change<V>>,
        key: K,
        value: Option<V>,
        timestamp: Timestamp,
    ) -> Result<bool, ProcessorError> {
        {
            let mut store = self.store.borrow_mut();
            match value {
                Some(v) => store.put(key, ValueAndTimestamp::make(v, timestamp))?,
                None => {
                    store.delete(&key)?;
                }
            }
        }
        if self.forwarder.caching() {
            self.forwarder.drain(ctx, timestamped_change)?;
            Ok(false)
        } else {
            Ok(true)
        }
    }

    /// At commit: the cache writes down, what it held is forwarded.
    pub(crate) fn flush(
        &self,
        ctx: &mut ProcessorContext<'_, K, Change<V>>,
    ) -> Result<(), ProcessorError> {
        if self.forwarder.caching() {
            self.store.borrow_mut().flush_cache()?;
            self.forwarder.drain(ctx, timestamped_change)?;
        }
        Ok(())
    }
}

/// Whether a key or value is Kafka's null.
pub(crate) type IsNull<T> = Arc<dyn Fn(&T) -> bool + Send + Sync>;

/// Tells an input's null keys and values: Kafka's nulls as the input's
/// serdes write them ([`kstreams_record::Serde::is_null`]).
pub(crate) struct InputNulls<KI, I> {
    pub key: Option<IsNull<KI>>,
    pub value: Option<IsNull<I>>,
}

impl<KI, I> InputNulls<KI, I> {
    /// No null but the ones `to_key` and `to_value` tell.
    pub(crate) fn none() -> Self {
        InputNulls {
            key: None,
            value: None,
        }
    }
}

impl<KI, I> Clone for InputNulls<KI, I> {
    fn clone(&self) -> Self {
        InputNulls {
            key: self.key.clone(),
            value: self.value.clone(),
        }
    }
}

/// `builder.table(..)` and `stream.to_table()`: each record is an upsert
/// (a `None` value a delete) of its key. With a store, old values come from
/// it; without one there are none.
pub(crate) struct TableSource<K, V, KI, I> {
    pub store_name: LazyStoreName,
    pub send_old: OldValuesFlag,
    pub to_key: fn(KI) -> Option<K>,
    pub to_value: fn(I) -> Option<V>,
    /// Which input keys and values are Kafka's nulls beyond what `to_key`
    /// and `to_value` say (`stream.to_table()`: what the stream's serdes
    /// write as null, a `None` of a `Nullable` serde).
    pub nulls: InputNulls<KI, I>,
    /// The store is versioned (KIP-889): it keeps history, and only
    /// updates that become the latest version go downstream.
    pub versioned: bool,
    pub store: Option<TableStore<K, V>>,
    pub versioned_store: Option<kstreams_state::VersionedKeyValueStoreHandle<K, V>>,
}

impl<K: Clone + 'static, V: Clone + 'static, KI: 'static, I: 'static> Processor<KI, I, K, Change<V>>
    for TableSource<K, V, KI, I>
{
    fn init(&mut self, ctx: &mut ProcessorContext<'_, K, Change<V>>) -> Result<(), ProcessorError> {
        if let Some(name) = self.store_name.get() {
            if self.versioned {
                self.versioned_store = Some(ctx.get_state_store(name)?);
            } else {
                self.store = Some(TableStore::open(ctx, name, sends_old(&self.send_old))?);
            }
        }
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Change<V>>,
        record: Record<KI, I>,
    ) -> Result<(), ProcessorError> {
        let Record {
            key,
            value,
            timestamp,
            headers,
        } = record;
        let null_key = self.nulls.key.as_ref().is_some_and(|is_null| is_null(&key));
        let Some(key) = (!null_key).then(|| (self.to_key)(key)).flatten() else {
            log::warn!(
                target: "kstreams_dsl::stateful",
                "{}: skipping a table update with a null key (at {:?})",
                ctx.node_name(),
                ctx.record_metadata()
            );
            ctx.record_dropped();
            return Ok(());
        };
        // A null value deletes the key (Kafka Streams' KTableSource puts
        // the null, which deletes).
        let null_value = self
            .nulls
            .value
            .as_ref()
            .is_some_and(|is_null| is_null(&value));
        let value = (!null_value).then(|| (self.to_value)(value)).flatten();
        if let Some(store) = &self.versioned_store {
            let old = store.borrow().get(&key)?;
            let put = store
                .borrow_mut()
                .put(key.clone(), value.clone(), timestamp)?;
            // An update older than the latest version only adds history
            // (for lookups as of its time); too old for the history
            // retention, it is dropped. Either way nothing changes now.
            if put != kstreams_state::PUT_RETURN_CODE_VALID_TO_UNDEFINED {
                return Ok(());
            }
            let old_value = if sends_old(&self.send_old) {
                old.map(|o| o.value)
            } else {
                None
            };
            ctx.forward(Record {
                key,
                value: Change::new(value, old_value),
                timestamp,
                headers,
            })?;
            return Ok(());
        }
        match &self.store {
            Some(table) => {
                let old = table.get(&key)?;
                if let Some(old) = &old {
                    if timestamp < old.timestamp {
                        log::debug!(
                            target: "kstreams_dsl::stateful",
                            "table source {}: out-of-order update (timestamp {timestamp} before \
                             {}) applied as the latest, as Kafka Streams does",
                            ctx.node_name(),
                            old.timestamp
                        );
                    }
                }
                let old_value = old.map(|o| o.value);
                let forward = table.put(ctx, key.clone(), value.clone(), timestamp)?;
                if forward {
                    let old_value = if sends_old(&self.send_old) {
                        old_value
                    } else {
                        None
                    };
                    ctx.forward(Record {
                        key,
                        value: Change::new(value, old_value),
                        timestamp,
                        headers,
                    })?;
                }
            }
            None => ctx.forward(Record {
                key,
                value: Change::new(value, None),
                timestamp,
                headers,
            })?,
        }
        Ok(())
    }

    fn flush(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Change<V>>,
    ) -> Result<(), ProcessorError> {
        match &self.store {
            Some(table) => table.flush(ctx),
            None => Ok(()),
        }
    }
}
