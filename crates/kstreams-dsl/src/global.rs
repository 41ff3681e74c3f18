//! `GlobalKTable`: a table replicated whole to every instance, and the
//! stream joins that look it up by a key computed from each record.
//!
//! Each instance's global thread reads every partition of the table's topic
//! (from the beginning, to the end offsets seen at start, before the
//! instance runs; then as it goes), and all stream threads read the one
//! copy. So that many threads can read while one writes, the global store
//! is a thread-safe byte store, deserialized at lookup: RocksDB on disk by
//! default, going on from a checkpoint at restart, or an ordered map in
//! memory rebuilt from the topic at each start (the topic is its
//! changelog, as in Kafka Streams).

use std::marker::PhantomData;
use std::sync::{Arc, RwLock};

use kstreams_record::{DefaultSerde, Headers, Record, SharedSerde, Timestamp};
use kstreams_state::{SharedBytesStore, SharedMemoryStore};

use crate::builder::SharedState;
use crate::internals::graph::GlobalStoreNodes;
use crate::{
    Consumed, KStream, Materialized, Processor, ProcessorContext, ProcessorError, StoreType,
};

/// The store of a global table: its topic's latest value per key, as bytes
/// (Kafka Streams' timestamped layout: the 8-byte timestamp, then the
/// value). In memory until the runtime opens it on disk
/// ([`GlobalStore::open_persistent`]) when its `Materialized` store type is
/// RocksDB (the default, as in Kafka Streams).
pub struct GlobalStore {
    name: String,
    topic: String,
    store_type: StoreType,
    engine: RwLock<Arc<dyn SharedBytesStore>>,
}

impl std::fmt::Debug for GlobalStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GlobalStore")
            .field("name", &self.name)
            .field("topic", &self.topic)
            .field("store_type", &self.store_type)
            .finish_non_exhaustive()
    }
}

impl GlobalStore {
    fn new(name: String, topic: String, store_type: StoreType) -> Self {
        GlobalStore {
            name,
            topic,
            store_type,
            engine: RwLock::new(Arc::new(SharedMemoryStore::new())),
        }
    }

    /// The store name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The topic the store is read from.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Whether the store is kept on disk (its `Materialized` store type is
    /// RocksDB), so that a restart goes on from a checkpoint.
    pub fn wants_persistence(&self) -> bool {
        self.store_type == StoreType::RocksDb
    }

    /// Opens the store on disk in `dir` (with the application's RocksDB
    /// settings), replacing the in-memory engine; a store that asked for
    /// memory stays there.
    pub fn open_persistent(
        &self,
        dir: &std::path::Path,
        settings: &kstreams_state::RocksDbSettings,
    ) -> Result<(), kstreams_state::Error> {
        if !self.wants_persistence() {
            return Ok(());
        }
        let engine = kstreams_state::SharedRocksDbStore::open(&self.name, dir, settings)?;
        *self.engine.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(engine);
        Ok(())
    }

    /// Closes the store (the global thread ended): its files are released,
    /// and reads fail with [`kstreams_state::Error::NotOpen`] as queries
    /// of a closed Kafka Streams store do.
    pub fn close(&self) {
        *self.engine.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(ClosedStore {
            name: self.name.clone(),
        });
    }

    /// Whether the open engine outlives the process.
    pub fn is_persistent(&self) -> bool {
        self.engine().persistent()
    }

    fn engine(&self) -> Arc<dyn SharedBytesStore> {
        self.engine
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Applies a record of the topic: a value sets the key, a null deletes
    /// it; records without a key are skipped.
    pub fn apply(
        &self,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        timestamp: Timestamp,
    ) -> Result<(), kstreams_state::Error> {
        let Some(key) = key else {
            return Ok(());
        };
        let engine = self.engine();
        match value {
            Some(v) => {
                let mut bytes = Vec::with_capacity(8 + v.len());
                bytes.extend_from_slice(&timestamp.to_be_bytes());
                bytes.extend_from_slice(v);
                engine.put(key, &bytes)
            }
            None => engine.delete(key),
        }
    }

    /// The value bytes and timestamp of a key.
    pub fn get(&self, key: &[u8]) -> Result<Option<(Vec<u8>, Timestamp)>, kstreams_state::Error> {
        let Some(mut bytes) = self.engine().get(key)? else {
            return Ok(None);
        };
        if bytes.len() < 8 {
            return Err(kstreams_state::Error::Engine {
                store: self.name.clone(),
                source: format!("a value of {} bytes has no timestamp", bytes.len()).into(),
            });
        }
        let timestamp = Timestamp::from_be_bytes(bytes[..8].try_into().expect("8 bytes"));
        bytes.drain(..8);
        Ok(Some((bytes, timestamp)))
    }

    /// Makes the writes so far durable, before a checkpoint records them.
    pub fn flush(&self) -> Result<(), kstreams_state::Error> {
        self.engine().flush()
    }

    /// How many keys the store holds (a scan of the store on disk).
    pub fn len(&self) -> usize {
        self.engine().count().unwrap_or_else(|e| {
            log::warn!("global store {}: cannot count keys: {e}", self.name);
            0
        }) as usize
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The engine of a closed global store.
struct ClosedStore {
    name: String,
}

impl ClosedStore {
    fn closed<T>(&self) -> Result<T, kstreams_state::Error> {
        Err(kstreams_state::Error::NotOpen {
            store: self.name.clone(),
        })
    }
}

impl SharedBytesStore for ClosedStore {
    fn get(&self, _: &[u8]) -> Result<Option<Vec<u8>>, kstreams_state::Error> {
        self.closed()
    }
    fn put(&self, _: &[u8], _: &[u8]) -> Result<(), kstreams_state::Error> {
        self.closed()
    }
    fn delete(&self, _: &[u8]) -> Result<(), kstreams_state::Error> {
        self.closed()
    }
    fn count(&self) -> Result<u64, kstreams_state::Error> {
        self.closed()
    }
    fn flush(&self) -> Result<(), kstreams_state::Error> {
        Ok(())
    }
    fn persistent(&self) -> bool {
        false
    }
}

/// A table of a whole topic, on every instance: Kafka Streams'
/// `GlobalKTable`. Join streams with it by a key taken from each record,
/// without repartitioning and without co-partitioning.
pub struct GlobalKTable<K, V> {
    store: Arc<GlobalStore>,
    key_serde: SharedSerde<K>,
    value_serde: SharedSerde<V>,
    types: PhantomData<fn() -> (K, V)>,
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

impl crate::StreamsBuilder {
    /// A global table of a topic with the default serdes of `K` and `V`.
    pub fn global_table<K, V>(&self, topic: &str) -> GlobalKTable<K, V>
    where
        K: DefaultSerde + Clone,
        V: DefaultSerde + Clone,
    {
        self.global_table_with(topic, Consumed::default(), Materialized::new())
    }

    /// A global table of a topic, read with `consumed`; `materialized` may
    /// name the store.
    pub fn global_table_with<K: Clone + 'static, V: Clone + 'static>(
        &self,
        topic: &str,
        consumed: Consumed<K, V>,
        materialized: Materialized<K, V>,
    ) -> GlobalKTable<K, V> {
        let state: SharedState = self.state();
        let mut s = state.borrow_mut();
        let name = match materialized.name {
            Some(name) => name,
            None => s.new_name(&format!("{topic}-STATE-STORE-")),
        };
        // The source and table nodes of Kafka Streams' global topology:
        // `<name>-source` and `<name>` when `consumed` names them.
        let source = s.name_or_generate(
            consumed.name.as_ref().map(|n| format!("{n}-source")),
            "KSTREAM-SOURCE-",
        );
        let processor = s.name_or_generate(consumed.name.clone(), "KTABLE-SOURCE-");
        let position = s.topology.graph.nodes.len();
        s.topology.graph.global_stores.push(GlobalStoreNodes {
            source,
            processor,
            store: name.clone(),
            topic: topic.to_string(),
            position,
        });
        let store = Arc::new(GlobalStore::new(
            name,
            topic.to_string(),
            materialized.store_type,
        ));
        s.topology.global_stores.push(store.clone());
        GlobalKTable {
            store,
            key_serde: consumed.key_serde,
            value_serde: consumed.value_serde,
            types: PhantomData,
        }
    }
}

/// Maps a stream record to the global table's key.
type KeySelector<K, V, KG> = Arc<dyn Fn(&K, &V) -> KG + Send + Sync>;

/// Joins a stream value with the global table's value (`None`: absent).
type GlobalJoiner<K, V, VG, VR> = Arc<dyn Fn(&K, &V, Option<&VG>) -> Option<VR> + Send + Sync>;

impl<K: Clone + 'static, V: Clone + 'static> KStream<K, V> {
    /// Joins each record with the global table's value for the key
    /// `key_selector` computes; records with no match are dropped.
    pub fn join_global<KG: 'static, VG: 'static, VR: Clone + 'static>(
        &self,
        table: &GlobalKTable<KG, VG>,
        key_selector: impl Fn(&K, &V) -> KG + Send + Sync + 'static,
        joiner: impl Fn(&V, &VG) -> VR + Send + Sync + 'static,
    ) -> KStream<K, VR> {
        let joiner: GlobalJoiner<K, V, VG, VR> = Arc::new(move |_, v, g| g.map(|g| joiner(v, g)));
        self.global_join(table, Arc::new(key_selector), joiner)
    }

    /// Joins each record with the global table's value for the key
    /// `key_selector` computes, `None` when it has none.
    pub fn left_join_global<KG: 'static, VG: 'static, VR: Clone + 'static>(
        &self,
        table: &GlobalKTable<KG, VG>,
        key_selector: impl Fn(&K, &V) -> KG + Send + Sync + 'static,
        joiner: impl Fn(&V, Option<&VG>) -> VR + Send + Sync + 'static,
    ) -> KStream<K, VR> {
        let joiner: GlobalJoiner<K, V, VG, VR> = Arc::new(move |_, v, g| Some(joiner(v, g)));
        self.global_join(table, Arc::new(key_selector), joiner)
    }

    fn global_join<KG: 'static, VG: 'static, VR: Clone + 'static>(
        &self,
        table: &GlobalKTable<KG, VG>,
        key_selector: KeySelector<K, V, KG>,
        joiner: GlobalJoiner<K, V, VG, VR>,
    ) -> KStream<K, VR> {
        let mut s = self.state.borrow_mut();
        // Kafka Streams names inner and left global joins alike.
        let name = s.new_name("KSTREAM-LEFTJOIN-");
        let table = table.clone();
        let added = s.topology.add_typed_processor::<K, V, K, VR, _>(
            name.clone(),
            Arc::new(move || GlobalJoin {
                table: table.clone(),
                key_selector: key_selector.clone(),
                joiner: joiner.clone(),
            }),
            &[self.node.as_str()],
        );
        s.record(added);
        drop(s);
        let mut out = KStream::new(self.state.clone(), name);
        out.key_serde = self.key_serde.clone();
        out.repartition_required = self.repartition_required;
        out
    }
}

/// Kafka Streams' `KStreamGlobalKTableJoin`: a lookup in the global store
/// by the selected key, serialized with the table's key serde.
struct GlobalJoin<K, V, KG, VG, VR> {
    table: GlobalKTable<KG, VG>,
    key_selector: KeySelector<K, V, KG>,
    joiner: GlobalJoiner<K, V, VG, VR>,
}

impl<K: Clone + 'static, V: Clone + 'static, KG: 'static, VG: 'static, VR: Clone + 'static>
    Processor<K, V, K, VR> for GlobalJoin<K, V, KG, VG, VR>
{
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, VR>,
        record: Record<K, V>,
    ) -> Result<(), ProcessorError> {
        let topic = self.table.store.topic();
        let global_key = (self.key_selector)(&record.key, &record.value);
        let key_bytes = self
            .table
            .key_serde
            .serialize(topic, &mut Headers::new(), &global_key)?;
        let found = match key_bytes {
            Some(bytes) => self.table.store.get(&bytes)?,
            None => None,
        };
        let value = match found {
            Some((bytes, _)) => Some(self.table.value_serde.deserialize(
                topic,
                &Headers::new(),
                Some(&bytes),
            )?),
            None => None,
        };
        if let Some(joined) = (self.joiner)(&record.key, &record.value, value.as_ref()) {
            ctx.forward(record.with_value(joined))?;
        }
        Ok(())
    }
}
