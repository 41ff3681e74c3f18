//! Kafka Streams' `KTableFilter`, `KTableMapValues` and
//! `KTableTransformValues`: a table's values changed one by one.

use std::marker::PhantomData;
use std::sync::Arc;

use kstreams_record::Record;

use crate::operators::forwarder::sends_old;
use crate::operators::forwarder::OldValuesFlag;
use crate::operators::table_source::TableStore;
use crate::value_transformer::{ValueTransformerContext, ValueTransformerWithKey};
use crate::Change;
use crate::{Processor, ProcessorContext, ProcessorError};

/// A table value function: `None` drops the value (a filter).
pub(crate) type ValueFn<K, V, V2> = Arc<dyn Fn(&K, V) -> Option<V2> + Send + Sync>;

/// A function of a table's values: filter (`Some` keeps, `None` drops) or
/// map_values. Kafka Streams' `KTableFilter` and `KTableMapValues`.
pub(crate) struct TableTransformValues<K, V, V2> {
    pub compute: ValueFn<K, V, V2>,
    pub store_name: Option<String>,
    pub send_old: OldValuesFlag,
    /// A filter sends nothing when both results are absent and old values
    /// are sent; map_values has no such rule in Kafka Streams.
    pub skip_double_absent: bool,
    pub store: Option<TableStore<K, V2>>,
}

impl<K: Clone + 'static, V: Clone + 'static, V2: Clone + 'static>
    Processor<K, Change<V>, K, Change<V2>> for TableTransformValues<K, V, V2>
{
    fn init(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Change<V2>>,
    ) -> Result<(), ProcessorError> {
        if let Some(name) = &self.store_name {
            self.store = Some(TableStore::open(ctx, name, sends_old(&self.send_old))?);
        }
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Change<V2>>,
        record: Record<K, Change<V>>,
    ) -> Result<(), ProcessorError> {
        let send_old = sends_old(&self.send_old);
        let Record {
            key,
            value: change,
            timestamp,
            headers,
        } = record;
        let new_value = change.new_value.and_then(|v| (self.compute)(&key, v));
        let old_value = match (&self.store, send_old) {
            (_, false) => None,
            (Some(table), true) => table.get(&key)?.map(|o| o.value),
            (None, true) => change.old_value.and_then(|v| (self.compute)(&key, v)),
        };
        if self.skip_double_absent && send_old && new_value.is_none() && old_value.is_none() {
            return Ok(());
        }
        let forward = match &self.store {
            Some(table) => table.put(ctx, key.clone(), new_value.clone(), timestamp)?,
            None => true,
        };
        if forward {
            ctx.forward(Record {
                key,
                value: Change::new(new_value, old_value),
                timestamp,
                headers,
            })?;
        }
        Ok(())
    }

    fn flush(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Change<V2>>,
    ) -> Result<(), ProcessorError> {
        match &self.store {
            Some(table) => table.flush(ctx),
            None => Ok(()),
        }
    }
}

/// `KTable::transform_values`: Kafka Streams' `KTableTransformValues` with
/// a user [`ValueTransformerWithKey`]. The transformer sees deletes (a
/// `None` value) too; without a store, old values are the transformer's
/// result for the old value (a second call), with one, the store's.
pub(crate) struct TableValueTransformer<K, V, V2, T> {
    pub transformer: T,
    pub store_name: Option<String>,
    pub send_old: OldValuesFlag,
    pub store: Option<TableStore<K, V2>>,
    pub types: PhantomData<fn(V)>,
}

impl<K, V, V2, T> Processor<K, Change<V>, K, Change<V2>> for TableValueTransformer<K, V, V2, T>
where
    K: Clone + 'static,
    V: Clone + 'static,
    V2: Clone + 'static,
    T: ValueTransformerWithKey<K, V, V2>,
{
    fn init(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Change<V2>>,
    ) -> Result<(), ProcessorError> {
        self.transformer.init(&ValueTransformerContext {
            lookup: ctx.store_lookup(),
            stores: &ctx.node.stores,
            node: &ctx.node.name,
        })?;
        if let Some(name) = &self.store_name {
            self.store = Some(TableStore::open(ctx, name, sends_old(&self.send_old))?);
        }
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Change<V2>>,
        record: Record<K, Change<V>>,
    ) -> Result<(), ProcessorError> {
        let send_old = sends_old(&self.send_old);
        let Record {
            key,
            value: change,
            timestamp,
            headers,
        } = record;
        let new_value = self.transformer.transform(&key, change.new_value)?;
        let Some(table) = &self.store else {
            let old_value = if send_old {
                self.transformer.transform(&key, change.old_value)?
            } else {
                None
            };
            ctx.forward(Record {
                key,
                value: Change::new(new_value, old_value),
                timestamp,
                headers,
            })?;
            return Ok(());
        };
        let old_value = if send_old {
            table.get(&key)?.map(|o| o.value)
        } else {
            None
        };
        if table.put(ctx, key.clone(), new_value.clone(), timestamp)? {
            ctx.forward(Record {
                key,
                value: Change::new(new_value, old_value),
                timestamp,
                headers,
            })?;
        }
        Ok(())
    }

    fn flush(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Change<V2>>,
    ) -> Result<(), ProcessorError> {
        match &self.store {
            Some(table) => table.flush(ctx),
            None => Ok(()),
        }
    }

    fn close(&mut self) {
        self.transformer.close();
    }
}
