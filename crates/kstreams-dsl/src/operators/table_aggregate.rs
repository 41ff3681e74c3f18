//! Kafka Streams' `KTableAggregate` and `KTableReduce`: a grouped table's
//! aggregate, the old value subtracted and the new one added.

use kstreams_record::Record;

use crate::operators::forwarder::sends_old;
use crate::operators::forwarder::OldValuesFlag;
use crate::operators::table_source::TableStore;
use crate::operators::Fold;
use crate::operators::Unfold;
use crate::Change;
use crate::{Processor, ProcessorContext, ProcessorError};

/// `grouped_table.count() / reduce() / aggregate()`: Kafka Streams'
/// `KTableAggregate` and `KTableReduce`. The old value is taken out with
/// the subtractor, then the new one added with the adder.
pub(crate) struct TableAggregate<K, V, A> {
    pub add: Fold<K, V, A>,
    pub subtract: Unfold<K, V, A>,
    pub store_name: String,
    pub send_old: OldValuesFlag,
    pub store: Option<TableStore<K, A>>,
}

impl<K: Clone + 'static, V: Clone + 'static, A: Clone + 'static>
    Processor<K, Change<V>, K, Change<A>> for TableAggregate<K, V, A>
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
        record: Record<K, Change<V>>,
    ) -> Result<(), ProcessorError> {
        let table = self.store.as_ref().ok_or("aggregation store not open")?;
        let Record {
            key,
            value: change,
            timestamp,
            headers,
        } = record;
        let old = table.get(&key)?;
        let (old_agg, old_ts) = match old {
            Some(o) => (Some(o.value), Some(o.timestamp)),
            None => (None, None),
        };
        let mut new_ts = timestamp;
        let intermediate = match (change.old_value, old_agg.clone()) {
            (Some(old_value), Some(agg)) => {
                new_ts = timestamp.max(old_ts.unwrap_or(timestamp));
                Some((self.subtract)(&key, old_value, agg))
            }
            (_, agg) => agg,
        };
        let new_agg = match change.new_value {
            Some(new_value) => {
                if let Some(old_ts) = old_ts {
                    new_ts = timestamp.max(old_ts);
                }
                Some((self.add)(&key, new_value, intermediate))
            }
            None => intermediate,
        };
        if table.put(ctx, key.clone(), new_agg.clone(), new_ts)? {
            let old_agg = if sends_old(&self.send_old) {
                old_agg
            } else {
                None
            };
            ctx.forward(Record {
                key,
                value: Change::new(new_agg, old_agg),
                timestamp: new_ts,
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
