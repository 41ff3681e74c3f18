//! The processors behind tables and aggregations: table sources, table
//! filter / map_values / to_stream, stream and table aggregations, and the
//! table re-keying that feeds a table's group_by.
//!
//! Their semantics are Kafka Streams' (`KTableSource`, `KTableFilter`,
//! `KTableMapValues`, `KStreamAggregate`, `KStreamReduce`,
//! `KTableAggregate`, `KTableReduce`, `KTableRepartitionMap`): the same
//! records are dropped, the same old values sent, the same timestamps kept.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use kstreams_record::{Record, Timestamp};
use kstreams_state::{CachedChange, TimestampedKeyValueStoreHandle, ValueAndTimestamp};

use crate::{Processor, ProcessorContext, ProcessorError, StreamsError};

/// A table update: the value a key has now and, when a downstream operator
/// asked for it, the value it had before. `None` is absent (a tombstone).
/// Kafka Streams' `Change`; it is what crosses the edges between table
/// operators.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change<V> {
    /// The value now.
    pub new_value: Option<V>,
    /// The value before (only when old values are sent).
    pub old_value: Option<V>,
}

impl<V> Change<V> {
    /// An update from `old_value` to `new_value`.
    pub fn new(new_value: Option<V>, old_value: Option<V>) -> Self {
        Change {
            new_value,
            old_value,
        }
    }
}

/// Whether a table operator sends old values, decided when the topology is
/// built (a downstream group_by or join asks) and read by each task.
pub(crate) type OldValuesFlag = Arc<AtomicBool>;

pub(crate) fn sends_old(flag: &OldValuesFlag) -> bool {
    flag.load(Ordering::Relaxed)
}

/// The store of a table operator, set when the topology is built; a table
/// source gets one only if something needs it (Kafka Streams materializes
/// source tables lazily too).
pub(crate) type LazyStoreName = Arc<OnceLock<String>>;

/// Hands what a caching store writes down at flush or eviction to the
/// processor that owns the store, which forwards it: Kafka Streams'
/// `TimestampedCacheFlushListener`. Without a cache the processor forwards
/// itself.
pub(crate) struct CacheForwarder<K, SV> {
    queue: Rc<RefCell<VecDeque<CachedChange<K, SV>>>>,
    caching: bool,
}

impl<K: 'static, SV: 'static> CacheForwarder<K, SV> {
    /// Listens to `set_listener`, which installs a flush listener on a store
    /// and says whether the store caches.
    pub fn attach(set_listener: impl FnOnce(kstreams_state::FlushListener<K, SV>) -> bool) -> Self {
        let queue: Rc<RefCell<VecDeque<CachedChange<K, SV>>>> = Rc::default();
        let sink = queue.clone();
        let caching = set_listener(Box::new(move |change| sink.borrow_mut().push_back(change)));
        CacheForwarder { queue, caching }
    }

    /// Whether the store caches (then the forwarder forwards).
    pub fn caching(&self) -> bool {
        self.caching
    }

    /// Forwards everything the store wrote down since the last call.
    pub fn drain<KO: Clone + 'static, VO: Clone + 'static>(
        &self,
        ctx: &mut ProcessorContext<'_, KO, VO>,
        to_record: impl Fn(CachedChange<K, SV>) -> Record<KO, VO>,
    ) -> Result<(), StreamsError> {
        loop {
            // Popped one at a time: forwarding may reach code that flushes.
            let next = self.queue.borrow_mut().pop_front();
            match next {
                Some(change) => ctx.forward(to_record(change))?,
                None => return Ok(()),
            }
        }
    }
}

/// A timestamped table change as the cache hands it over.
pub(crate) fn timestamped_change<K, V>(
    change: CachedChange<K, ValueAndTimestamp<V>>,
) -> Record<K, Change<V>> {
    let timestamp = change
        .new_value
        .as_ref()
        .map_or(change.timestamp, |v| v.timestamp);
    Record {
        key: change.key,
        value: Change::new(
            change.new_value.map(|v| v.value),
            change.old_value.map(|v| v.value),
        ),
        timestamp,
        headers: change.headers,
    }
}

/// A timestamped key-value store of a table operator with the forwarding
/// of its cache.
pub(crate) struct TableStore<K, V> {
    pub store: TimestampedKeyValueStoreHandle<K, V>,
    pub forwarder: CacheForwarder<K, ValueAndTimestamp<V>>,
}

impl<K: Clone + 'static, V: Clone + 'static> TableStore<K, V> {
    pub fn open<KO, VO>(
        ctx: &ProcessorContext<'_, KO, VO>,
        name: &str,
        send_old: bool,
    ) -> Result<Self, ProcessorError> {
        let store: TimestampedKeyValueStoreHandle<K, V> = ctx.get_state_store(name)?;
        let forwarder =
            CacheForwarder::attach(|l| store.borrow_mut().set_flush_listener(l, send_old));
        Ok(TableStore { store, forwarder })
    }

    pub fn get(&self, key: &K) -> Result<Option<ValueAndTimestamp<V>>, ProcessorError> {
        Ok(self.store.borrow().get(key)?)
    }

    /// Writes `value` (or deletes on `None`) and, behind a cache, forwards
    /// what the write evicted; returns whether the caller must forward.
    pub fn put(
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
    pub fn flush(
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

/// `builder.table(..)` and `stream.to_table()`: each record is an upsert
/// (a `None` value a delete) of its key. With a store, old values come from
/// it; without one there are none.
pub(crate) struct TableSource<K, V, KI, I> {
    pub store_name: LazyStoreName,
    pub send_old: OldValuesFlag,
    pub to_key: fn(KI) -> Option<K>,
    pub to_value: fn(I) -> Option<V>,
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
        let Some(key) = (self.to_key)(key) else {
            log::warn!(
                "{}: skipping a table update with a null key (at {:?})",
                ctx.node_name(),
                ctx.record_metadata()
            );
            ctx.record_dropped();
            return Ok(());
        };
        let value = (self.to_value)(value);
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

/// A table value function: `None` drops the value (a filter).
pub(crate) type ValueFn<K, V, V2> = Arc<dyn Fn(&K, V) -> Option<V2> + Send + Sync>;

/// A table re-keying function.
pub(crate) type RekeyFn<K, V, K2, V2> = Arc<dyn Fn(&K, V) -> (K2, V2) + Send + Sync>;

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

/// How an aggregation folds a value into the aggregate so far (`None`
/// before the first value of a key): count, reduce and aggregate are all
/// one of these.
pub(crate) type Fold<K, V, A> = Arc<dyn Fn(&K, V, Option<A>) -> A + Send + Sync>;

/// How a table aggregation takes an old value back out.
pub(crate) type Unfold<K, V, A> = Arc<dyn Fn(&K, V, A) -> A + Send + Sync>;

/// `grouped_stream.count() / reduce() / aggregate()`: Kafka Streams'
/// `KStreamAggregate` and `KStreamReduce`. Records with a null key or value
/// are dropped (counted); the result's timestamp is the largest of the
/// key's records.
pub(crate) struct StreamAggregate<K, V, A> {
    pub fold: Fold<K, V, A>,
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
        let (old_value, timestamp) = match old {
            Some(o) => (Some(o.value), timestamp.max(o.timestamp)),
            None => (None, timestamp),
        };
        let new_value = (self.fold)(&key, value, old_value.clone());
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

/// The task's stores by name, for value getters (which read the stores of
/// another operator's table: a join reads its table side this way).
pub(crate) struct StoreLookup<'a> {
    pub(crate) stores: &'a std::collections::HashMap<String, kstreams_state::BuiltStore>,
}

impl StoreLookup<'_> {
    pub fn handle<H: Clone + 'static>(&self, name: &str) -> Result<H, ProcessorError> {
        let built = self
            .stores
            .get(name)
            .ok_or_else(|| StreamsError::Internal(format!("store {name:?} is not in this task")))?;
        Ok(built.handle::<H>()?)
    }
}

/// Reads a table's current value for a key inside a task: Kafka Streams'
/// `KTableValueGetter`.
pub(crate) trait ValueGetter<K, V> {
    /// The latest value.
    fn get(&self, key: &K) -> Result<Option<ValueAndTimestamp<V>>, ProcessorError>;
    /// The value as of `timestamp`: a versioned table's version valid then;
    /// other tables only know their latest value.
    fn get_as_of(
        &self,
        key: &K,
        timestamp: Timestamp,
    ) -> Result<Option<ValueAndTimestamp<V>>, ProcessorError> {
        let _ = timestamp;
        self.get(key)
    }
}

/// Makes a table's value getter in a task.
pub(crate) type GetterFactory<K, V> = Arc<
    dyn Fn(&StoreLookup<'_>) -> Result<Box<dyn ValueGetter<K, V>>, ProcessorError> + Send + Sync,
>;

/// A table's value getter before it is made: the stores it reads (to be
/// connected to the processor that uses it) and how to make it.
pub(crate) struct GetterSupplier<K, V> {
    pub stores: Vec<String>,
    pub make: GetterFactory<K, V>,
    /// Whether lookups as of a time see history (a versioned table).
    pub versioned: bool,
}

impl<K, V> Clone for GetterSupplier<K, V> {
    fn clone(&self) -> Self {
        GetterSupplier {
            stores: self.stores.clone(),
            make: self.make.clone(),
            versioned: self.versioned,
        }
    }
}

struct TimestampedGetter<K, V>(TimestampedKeyValueStoreHandle<K, V>);

impl<K: 'static, V: Clone + 'static> ValueGetter<K, V> for TimestampedGetter<K, V> {
    fn get(&self, key: &K) -> Result<Option<ValueAndTimestamp<V>>, ProcessorError> {
        Ok(self.0.borrow().get(key)?)
    }
}

struct VersionedGetter<K, V>(kstreams_state::VersionedKeyValueStoreHandle<K, V>);

impl<K: 'static, V: Clone + 'static> ValueGetter<K, V> for VersionedGetter<K, V> {
    fn get(&self, key: &K) -> Result<Option<ValueAndTimestamp<V>>, ProcessorError> {
        Ok(self
            .0
            .borrow()
            .get(key)?
            .map(|r| ValueAndTimestamp::make(r.value, r.timestamp)))
    }
    fn get_as_of(
        &self,
        key: &K,
        timestamp: Timestamp,
    ) -> Result<Option<ValueAndTimestamp<V>>, ProcessorError> {
        Ok(self
            .0
            .borrow()
            .get_as_of(key, timestamp)?
            .map(|r| ValueAndTimestamp::make(r.value, r.timestamp)))
    }
}

/// The getter of a table kept in the store `name`.
pub(crate) fn store_getter<K: 'static, V: Clone + 'static>(
    name: String,
    versioned: bool,
) -> GetterSupplier<K, V> {
    let store = name.clone();
    let make: GetterFactory<K, V> = Arc::new(move |lookup: &StoreLookup<'_>| {
        let getter: Box<dyn ValueGetter<K, V>> = if versioned {
            Box::new(VersionedGetter(lookup.handle(&store)?))
        } else {
            Box::new(TimestampedGetter(lookup.handle(&store)?))
        };
        Ok(getter)
    });
    GetterSupplier {
        stores: vec![name],
        make,
        versioned,
    }
}

struct MappedGetter<K, V, V2> {
    parent: Box<dyn ValueGetter<K, V>>,
    compute: ValueFn<K, V, V2>,
}

impl<K, V, V2> MappedGetter<K, V, V2> {
    fn apply(&self, key: &K, found: Option<ValueAndTimestamp<V>>) -> Option<ValueAndTimestamp<V2>> {
        let found = found?;
        let timestamp = found.timestamp;
        (self.compute)(key, found.value).map(|v| ValueAndTimestamp::make(v, timestamp))
    }
}

impl<K, V, V2> ValueGetter<K, V2> for MappedGetter<K, V, V2> {
    fn get(&self, key: &K) -> Result<Option<ValueAndTimestamp<V2>>, ProcessorError> {
        Ok(self.apply(key, self.parent.get(key)?))
    }
    fn get_as_of(
        &self,
        key: &K,
        timestamp: Timestamp,
    ) -> Result<Option<ValueAndTimestamp<V2>>, ProcessorError> {
        Ok(self.apply(key, self.parent.get_as_of(key, timestamp)?))
    }
}

/// The getter of an unmaterialized filter or map_values: the parent's,
/// computed through.
pub(crate) fn mapped_getter<K: 'static, V: 'static, V2: 'static>(
    parent: GetterSupplier<K, V>,
    compute: ValueFn<K, V, V2>,
) -> GetterSupplier<K, V2> {
    let make_parent = parent.make.clone();
    let make: GetterFactory<K, V2> = Arc::new(move |lookup: &StoreLookup<'_>| {
        let getter: Box<dyn ValueGetter<K, V2>> = Box::new(MappedGetter {
            parent: make_parent(lookup)?,
            compute: compute.clone(),
        });
        Ok(getter)
    });
    GetterSupplier {
        stores: parent.stores,
        make,
        versioned: parent.versioned,
    }
}
