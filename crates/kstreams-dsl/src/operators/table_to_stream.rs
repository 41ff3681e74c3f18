//! `KTable::to_stream`: a table's changes as a stream of new values.

use kstreams_record::Record;

use crate::Change;
use crate::{Processor, ProcessorContext, ProcessorError};

/// `table.to_stream()`: the new values, tombstones included.
pub(crate) struct TableToStream;

impl<K: Clone + 'static, V: Clone + 'static> Processor<K, Change<V>, K, Option<V>>
    for TableToStream
{
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Option<V>>,
        record: Record<K, Change<V>>,
    ) -> Result<(), ProcessorError> {
        let new_value = record.value.new_value.clone();
        ctx.forward(record.with_value(new_value))?;
        Ok(())
    }
}
