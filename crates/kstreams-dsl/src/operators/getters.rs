//! Value getters: how a join or a downstream table reads a table's current
//! value for a key (from its store, or computed through the operators above
//! it).

use std::rc::Rc;
use std::sync::Arc;

use kstreams_record::Timestamp;
use kstreams_state::{TimestampedKeyValueStoreHandle, ValueAndTimestamp};

use crate::operators::table_transform_values::ValueFn;
use crate::operators::LazyStoreName;
use crate::processor::StoreLookup;
use crate::value_transformer::{ValueTransformerContext, ValueTransformerWithKey};
use crate::ProcessorError;

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

pub(crate) struct TimestampedGetter<K, V>(pub(crate) TimestampedKeyValueStoreHandle<K, V>);

impl<K: 'static, V: Clone + 'static> ValueGetter<K, V> for TimestampedGetter<K, V> {
    fn get(&self, key: &K) -> Result<Option<ValueAndTimestamp<V>>, ProcessorError> {
        Ok(self.0.borrow().get(key)?)
    }
}

pub(crate) struct VersionedGetter<K, V>(
    pub(crate) kstreams_state::VersionedKeyValueStoreHandle<K, V>,
);

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

pub(crate) struct MappedGetter<K, V, V2> {
    pub(crate) parent: Box<dyn ValueGetter<K, V>>,
    pub(crate) compute: ValueFn<K, V, V2>,
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

/// How a join gets a table's value getter (materializing a source table
/// if needed); `None` when the table cannot be read (a windowed or
/// suppressed table, or one without serdes for its store).
pub(crate) type TableGetter<K, V> = Rc<dyn Fn() -> Option<GetterSupplier<K, V>>>;

/// The getter of a table kept in a store set at build time.
pub(crate) fn lazy_store_getter<K: 'static, V: Clone + 'static>(
    store: &LazyStoreName,
) -> TableGetter<K, V> {
    let store = store.clone();
    Rc::new(move || Some(store_getter(store.get()?.clone(), false)))
}

/// No getter (windowed and suppressed tables).
pub(crate) fn no_getter<K, V>() -> TableGetter<K, V> {
    Rc::new(|| None)
}

/// The getter of an unmaterialized `transform_values`: the parent's value
/// run through a transformer of the getter's own (Kafka Streams'
/// `KTableTransformValuesGetter`); a key the parent has not is transformed
/// too, its result timestamped -1 (unknown).
pub(crate) struct TransformedGetter<K, V, V2, T: ValueTransformerWithKey<K, V, V2>> {
    parent: Box<dyn ValueGetter<K, V>>,
    transformer: std::cell::RefCell<T>,
    types: std::marker::PhantomData<fn(V2)>,
}

impl<K, V, V2, T: ValueTransformerWithKey<K, V, V2>> TransformedGetter<K, V, V2, T> {
    fn apply(
        &self,
        key: &K,
        found: Option<ValueAndTimestamp<V>>,
    ) -> Result<Option<ValueAndTimestamp<V2>>, ProcessorError> {
        let (value, timestamp) = match found {
            Some(found) => (Some(found.value), found.timestamp),
            None => (None, -1),
        };
        let value = self.transformer.borrow_mut().transform(key, value)?;
        Ok(value.map(|v| ValueAndTimestamp::make(v, timestamp)))
    }
}

impl<K, V, V2, T: ValueTransformerWithKey<K, V, V2>> ValueGetter<K, V2>
    for TransformedGetter<K, V, V2, T>
{
    fn get(&self, key: &K) -> Result<Option<ValueAndTimestamp<V2>>, ProcessorError> {
        self.apply(key, self.parent.get(key)?)
    }
    fn get_as_of(
        &self,
        key: &K,
        timestamp: Timestamp,
    ) -> Result<Option<ValueAndTimestamp<V2>>, ProcessorError> {
        self.apply(key, self.parent.get_as_of(key, timestamp)?)
    }
}

impl<K, V, V2, T: ValueTransformerWithKey<K, V, V2>> Drop for TransformedGetter<K, V, V2, T> {
    /// The getter ends with its task: its transformer closes.
    fn drop(&mut self) {
        self.transformer.get_mut().close();
    }
}

/// The getter of an unmaterialized `transform_values` node `node` whose
/// transformer uses `stores` (found in the task, as the node's own; not
/// connected to the reader, as Kafka Streams connects only the parent's).
pub(crate) fn transformed_getter<K, V, V2, T>(
    parent: GetterSupplier<K, V>,
    supplier: Arc<dyn Fn() -> T + Send + Sync>,
    node: String,
    stores: Vec<String>,
) -> GetterSupplier<K, V2>
where
    K: 'static,
    V: 'static,
    V2: 'static,
    T: ValueTransformerWithKey<K, V, V2>,
{
    let make_parent = parent.make.clone();
    let make: GetterFactory<K, V2> = Arc::new(move |lookup: &StoreLookup<'_>| {
        let mut transformer = supplier();
        transformer.init(&ValueTransformerContext {
            lookup: StoreLookup {
                stores: lookup.stores,
            },
            stores: &stores,
            node: &node,
        })?;
        let getter: Box<dyn ValueGetter<K, V2>> = Box::new(TransformedGetter {
            parent: make_parent(lookup)?,
            transformer: std::cell::RefCell::new(transformer),
            types: std::marker::PhantomData,
        });
        Ok(getter)
    });
    GetterSupplier {
        stores: parent.stores,
        make,
        versioned: parent.versioned,
    }
}
