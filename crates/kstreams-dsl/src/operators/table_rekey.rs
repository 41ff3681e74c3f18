//! Kafka Streams' `KTableRepartitionMap`: a table's rows re-keyed for its
//! `group_by`, old and new value sent apart.

use std::sync::Arc;

use kstreams_record::Record;

use crate::Change;
use crate::{Processor, ProcessorContext, ProcessorError};

/// A table re-keying function.
pub(crate) type RekeyFn<K, V, K2, V2> = Arc<dyn Fn(&K, V) -> (K2, V2) + Send + Sync>;

/// `table.group_by(selector)`: re-keys each change, the old value under the
/// key it came from and the new one under its own, old first. Kafka
/// Streams' `KTableRepartitionMap`.
pub(crate) struct TableRekey<K, V, K2, V2> {
    pub selector: RekeyFn<K, V, K2, V2>,
}

impl<
        K: Clone + 'static,
        V: Clone + 'static,
        K2: Clone + PartialEq + 'static,
        V2: Clone + 'static,
    > Processor<K, Change<V>, K2, Change<V2>> for TableRekey<K, V, K2, V2>
{
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, K2, Change<V2>>,
        record: Record<K, Change<V>>,
    ) -> Result<(), ProcessorError> {
        let Record {
            key,
            value: change,
            timestamp,
            headers,
        } = record;
        let new_pair = change.new_value.map(|v| (self.selector)(&key, v));
        let old_pair = change.old_value.map(|v| (self.selector)(&key, v));
        match (old_pair, new_pair) {
            (Some((old_key, old_value)), Some((new_key, new_value))) if old_key == new_key => {
                ctx.forward(Record {
                    key: new_key,
                    value: Change::new(Some(new_value), Some(old_value)),
                    timestamp,
                    headers,
                })?;
            }
            (old_pair, new_pair) => {
                if let Some((old_key, old_value)) = old_pair {
                    ctx.forward(Record {
                        key: old_key,
                        value: Change::new(None, Some(old_value)),
                        timestamp,
                        headers: headers.clone(),
                    })?;
                }
                if let Some((new_key, new_value)) = new_pair {
                    ctx.forward(Record {
                        key: new_key,
                        value: Change::new(Some(new_value), None),
                        timestamp,
                        headers,
                    })?;
                }
            }
        }
        Ok(())
    }
}
