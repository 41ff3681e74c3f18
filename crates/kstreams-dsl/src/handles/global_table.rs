//! `GlobalKTable`: a table replicated whole to every instance.

use std::marker::PhantomData;
use std::sync::Arc;

use kstreams_record::SharedSerde;

use crate::GlobalStore;

/// A table of a whole topic, on every instance: Kafka Streams'
/// `GlobalKTable`. Join streams with it by a key taken from each record,
/// without repartitioning and without co-partitioning.
pub struct GlobalKTable<K, V> {
    pub(crate) store: Arc<GlobalStore>,
    pub(crate) key_serde: SharedSerde<K>,
    pub(crate) value_serde: SharedSerde<V>,
    pub(crate) types: PhantomData<fn() -> (K, V)>,
}

impl<K, V> Clone for GlobalKTable<K, V> {
    fn clone(&self) -> Self {
        GlobalKTable {
            store: self.store.clone(),
            key_serde: self.key_serde.clone(),
            value_serde: self.value_serde.clone(),
            types: PhantomData,
        }
    }
}

impl<K, V> GlobalKTable<K, V> {
    /// The name of the table's store.
    pub fn queryable_store_name(&self) -> &str {
        self.store.name()
    }

    /// The table's store (for interactive queries).
    pub fn store(&self) -> &Arc<GlobalStore> {
        &self.store
    }
}
