//! Kafka Streams' `KStreamAggregate` and `KStreamReduce`: a grouped
//! stream's count, reduce and aggregate per key.

use std::sync::Arc;

use kstreams_record::Record;

use crate::operators::forwarder::sends_old;
use crate::operators::forwarder::OldValuesFlag;
use crate::operators::table_source::TableStore;
use crate::operators::AggregateFold;
use crate::Change;
use crate::{Processor, ProcessorContext, ProcessorError};

/// `grouped_stream.count() / reduce() / aggregate()`: Kafka Streams'
/// `KStreamAggregate` and `KStreamReduce`. Records with a null key or value
/// are dropped (counted); the result's timestamp is the largest of the
/// key's records.
pub(crate) struct StreamAggregate<K, V, A> {
    pub fns: AggregateFold<K, V, A>,
    pub store_name: String,
    pub send_old: OldValuesFlag,
    pub is_null_key: Arc<dyn Fn(&K) -> bool + Send + Sync>,
    pub is_null_value: Arc<dyn Fn(&V) -> bool + Send + Sync>,
    pub store: Option<TableStore<K, A>>,
}

impl<K: Clone + 'static, V: Clone + 'static, A: Clone + 'static> Processor<K, V, K, Change<A>>
    for StreamAggregate<K, V, A>
{
    fn init(&mut self, ctx: &mut ProcessorContext<'_, K, Change<A>>) -> Result<(), ProcessorError> {
        self.store = Some(TableStore::open(
            ctx,
            &self.store_name,
            sends_old(&self.send_old),
        )?);
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Change<A>>,
        record: Record<K, V>,
    ) -> Result<(), ProcessorError> {
        if (self.is_null_key)(&record.key) || (self.is_null_value)(&record.value) {
            log::warn!(
                target: "kstreams_dsl::stateful",
                "{}: skipping a record with a null key or value (at {:?})",
                ctx.node_name(),
                ctx.record_metadata()
            );
            ctx.record_dropped();
            return Ok(());
        }
        let table = self.store.as_ref().ok_or("aggregation store not open")?;
        let Record {
            key,
            value,
            timestamp,
            headers,
        } = record;
        let old = table.get(&key)?;
        let (current, timestamp) = match old {
            Some(o) => (Some(o.value), timestamp.max(o.timestamp)),
            None => (None, timestamp),
        };
        // A key's first update carries the initial aggregate as its old
        // value, as Kafka Streams' KStreamAggregate forwards it (a cache,
        // when on, forwards the store's old value instead: none).
        let old_value = self.fns.start(current);
        let new_value = (self.fns.fold)(&key, value, old_value.clone());
        if table.put(ctx, key.clone(), Some(new_value.clone()), timestamp)? {
            let old_value = if sends_old(&self.send_old) {
                old_value
            } else {
                None
            };
            ctx.forward(Record {
                key,
                value: Change::new(Some(new_value), old_value),
                timestamp,
                headers,
            })?;
        }
        Ok(())
    }

    fn flush(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Change<A>>,
    ) -> Result<(), ProcessorError> {
        match &self.store {
            Some(table) => table.flush(ctx),
            None => Ok(()),
        }
    }
}
