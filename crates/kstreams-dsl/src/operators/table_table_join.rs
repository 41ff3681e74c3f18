//! Kafka Streams' `KTableKTableJoin*` processors: each side looks the other
//! up for each change of its own; and the getter of a joined table.

use std::sync::Arc;

use kstreams_record::Record;
use kstreams_state::ValueAndTimestamp;

use crate::change::Change;
use crate::operators::forwarder::{sends_old, OldValuesFlag};
use crate::operators::getters::{GetterFactory, GetterSupplier, ValueGetter};
use crate::operators::table_source::TableStore;
use crate::processor::StoreLookup;
use crate::{Processor, ProcessorContext, ProcessorError};

/// A table-table joiner over the values present (`None`: absent).
pub(crate) type TableJoiner<V1, V2, VR> = Arc<dyn Fn(Option<&V1>, Option<&V2>) -> VR + Send + Sync>;

/// Which records of a table-table join produce results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TableJoinKind {
    Inner,
    Left,
    Outer,
}

/// One side of a table-table join: Kafka Streams' `KTableKTableJoin*`
/// processors. Looks the other side up for each change of its own.
pub(crate) struct TableJoinSide<K, VM, VT, VR> {
    /// (my value, their value) -> result.
    pub(crate) joiner: TableJoiner<VM, VT, VR>,
    pub(crate) make: GetterFactory<K, VT>,
    pub(crate) getter: Option<Box<dyn ValueGetter<K, VT>>>,
    /// A result needs my value (inner, and the left side of a left join).
    pub(crate) mine_required: bool,
    /// A result needs their value (inner, and the right side of a left join).
    pub(crate) theirs_required: bool,
    pub(crate) send_old: OldValuesFlag,
}

impl<K: Clone + 'static, VM: Clone + 'static, VT: 'static, VR: Clone + 'static>
    Processor<K, Change<VM>, K, Change<VR>> for TableJoinSide<K, VM, VT, VR>
{
    fn init(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Change<VR>>,
    ) -> Result<(), ProcessorError> {
        self.getter = Some((self.make)(&ctx.store_lookup())?);
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Change<VR>>,
        record: Record<K, Change<VM>>,
    ) -> Result<(), ProcessorError> {
        let getter = self.getter.as_ref().ok_or("join not initialized")?;
        let theirs = getter.get(&record.key)?;
        if self.theirs_required && theirs.is_none() {
            return Ok(());
        }
        let change = &record.value;
        if theirs.is_none() && change.new_value.is_none() && change.old_value.is_none() {
            return Ok(());
        }
        let timestamp = theirs
            .as_ref()
            .map_or(record.timestamp, |t| record.timestamp.max(t.timestamp));
        let theirs = theirs.map(|t| t.value);
        let result = |mine: Option<&VM>| -> Option<VR> {
            let has_result = if self.mine_required {
                mine.is_some()
            } else {
                mine.is_some() || theirs.is_some()
            };
            has_result.then(|| (self.joiner)(mine, theirs.as_ref()))
        };
        let new_value = result(change.new_value.as_ref());
        let old_value = if sends_old(&self.send_old) {
            result(change.old_value.as_ref())
        } else {
            None
        };
        ctx.forward(Record {
            key: record.key,
            value: Change::new(new_value, old_value),
            timestamp,
            headers: record.headers,
        })?;
        Ok(())
    }
}

/// The value getter of a table-table join's result: both sides' getters
/// and the joiner.
pub(crate) fn joined_getter<K: 'static, V: 'static, VO: 'static, VR: 'static>(
    this: GetterSupplier<K, V>,
    other: GetterSupplier<K, VO>,
    joiner: TableJoiner<V, VO, VR>,
    kind: TableJoinKind,
) -> GetterSupplier<K, VR> {
    let make_this = this.make.clone();
    let make_other = other.make.clone();
    let make: GetterFactory<K, VR> = Arc::new(move |lookup: &StoreLookup<'_>| {
        let getter: Box<dyn ValueGetter<K, VR>> = Box::new(JoinedGetter {
            this: make_this(lookup)?,
            other: make_other(lookup)?,
            joiner: joiner.clone(),
            kind,
        });
        Ok(getter)
    });
    let mut stores = this.stores;
    stores.extend(other.stores);
    GetterSupplier {
        stores,
        make,
        versioned: false,
    }
}

pub(crate) struct JoinedGetter<K, V, VO, VR> {
    pub(crate) this: Box<dyn ValueGetter<K, V>>,
    pub(crate) other: Box<dyn ValueGetter<K, VO>>,
    pub(crate) joiner: TableJoiner<V, VO, VR>,
    pub(crate) kind: TableJoinKind,
}

impl<K, V, VO, VR> ValueGetter<K, VR> for JoinedGetter<K, V, VO, VR> {
    fn get(&self, key: &K) -> Result<Option<ValueAndTimestamp<VR>>, ProcessorError> {
        let this = self.this.get(key)?;
        let other = self.other.get(key)?;
        let present = match self.kind {
            TableJoinKind::Inner => this.is_some() && other.is_some(),
            TableJoinKind::Left => this.is_some(),
            TableJoinKind::Outer => this.is_some() || other.is_some(),
        };
        if !present {
            return Ok(None);
        }
        let timestamp = this
            .as_ref()
            .map(|t| t.timestamp)
            .max(other.as_ref().map(|o| o.timestamp))
            .unwrap_or(-1);
        let value = (self.joiner)(
            this.as_ref().map(|t| &t.value),
            other.as_ref().map(|o| &o.value),
        );
        Ok(Some(ValueAndTimestamp::make(value, timestamp)))
    }
}

/// The merge node of a table-table join materialized in a store: Kafka
/// Streams' `KTableKTableJoinMerger` with a queryable name. Each result is
/// written to the store and forwarded (behind a cache, at its flush); the
/// old value is the one the join side computed, when old values are sent.
pub(crate) struct MaterializedJoinMerge<K, V> {
    pub(crate) store_name: String,
    pub(crate) send_old: OldValuesFlag,
    pub(crate) store: Option<TableStore<K, V>>,
}

impl<K: Clone + 'static, V: Clone + 'static> Processor<K, Change<V>, K, Change<V>>
    for MaterializedJoinMerge<K, V>
{
    fn init(&mut self, ctx: &mut ProcessorContext<'_, K, Change<V>>) -> Result<(), ProcessorError> {
        self.store = Some(TableStore::open(
            ctx,
            &self.store_name,
            sends_old(&self.send_old),
        )?);
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Change<V>>,
        record: Record<K, Change<V>>,
    ) -> Result<(), ProcessorError> {
        let store = self.store.as_ref().ok_or("join merge not initialized")?;
        let Record {
            key,
            value: change,
            timestamp,
            headers,
        } = record;
        let old_value = change.old_value.filter(|_| sends_old(&self.send_old));
        if store.put(ctx, key.clone(), change.new_value.clone(), timestamp)? {
            ctx.forward(Record {
                key,
                value: Change::new(change.new_value, old_value),
                timestamp,
                headers,
            })?;
        }
        Ok(())
    }

    fn flush(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, Change<V>>,
    ) -> Result<(), ProcessorError> {
        match &self.store {
            Some(store) => store.flush(ctx),
            None => Ok(()),
        }
    }
}
