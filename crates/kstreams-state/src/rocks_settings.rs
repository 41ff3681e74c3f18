//! RocksDB's options for kstreams' stores: Kafka Streams' defaults, the
//! user's options hook and the bounded-memory mode. Apart from the store
//! itself so that a task's `StoreContext` can carry them without the
//! context and the store importing each other.

use std::sync::Arc;

use rocksdb::{
    BlockBasedOptions, Cache, DBCompactionStyle, DBCompressionType, Options, WriteBufferManager,
};

/// Kafka Streams' RocksDB defaults.
const BLOCK_CACHE_BYTES: usize = 50 * 1024 * 1024;
const BLOCK_SIZE: usize = 4096;
const WRITE_BUFFER_BYTES: usize = 16 * 1024 * 1024;
const MAX_WRITE_BUFFERS: i32 = 3;

/// Adjusts the options of each RocksDB store, as Kafka Streams'
/// `RocksDBConfigSetter` (`rocksdb.config.setter`): block cache, write
/// buffers, compaction, ...
///
/// `set_config` is called for every store the instance opens (each task's
/// copy of a store, global stores included), after Kafka Streams' defaults
/// and the bounded-memory settings are in `options` and `table`, so what it
/// sets wins. One setter object serves every store (Kafka Streams makes one
/// per store): state it keeps for a store is keyed by the store's name, and
/// state shared by all stores, such as a cache of its own, is simply a
/// field. `close` is called when the store closes.
///
/// Set one in code with `StreamsConfig::rocksdb_config_setter`, or register
/// it by name with `StreamsConfig::register_rocksdb_config_setter` for a
/// properties file's `rocksdb.config.setter=<name>`.
///
/// ```
/// use kstreams_state::rocksdb::{BlockBasedOptions, Options};
/// use kstreams_state::RocksDbConfigSetter;
///
/// /// Kafka Streams' docs example: a smaller block size, fewer memtables.
/// struct CustomRocksDbConfig;
///
/// impl RocksDbConfigSetter for CustomRocksDbConfig {
///     fn set_config(&self, _store: &str, options: &mut Options, table: &mut BlockBasedOptions) {
///         table.set_block_size(16 * 1024);
///         options.set_max_write_buffer_number(2);
///     }
/// }
/// ```
pub trait RocksDbConfigSetter: Send + Sync + 'static {
    /// Changes `options` and `table` for store `store_name`.
    fn set_config(&self, store_name: &str, options: &mut Options, table: &mut BlockBasedOptions);
    /// Called when the store closes, to release what `set_config` made for
    /// it (not what all stores share).
    fn close(&self, store_name: &str) {
        let _ = store_name;
    }
}

/// One block cache and one write buffer manager shared by every RocksDB
/// store that uses these bounds: Kafka Streams' `BoundedMemoryRocksDBConfig`
/// recipe. Memtables are charged to the cache, and index and filter blocks
/// live in it with high priority, so block cache, index and filter blocks
/// and memtables together stay within `total_bytes` whatever the number of
/// stores and segments.
///
/// As in Kafka Streams' recipe, the cache does not enforce its capacity
/// strictly (RocksDB fails reads into a strict cache that memtables are
/// charged to); what can exceed it is what readers pin at that moment.
/// RocksDB keeps half of the cache for index and filter blocks (its
/// high-priority pool) and pins the top level of partitioned indexes.
///
/// Running state: the application sets the figures
/// (`StreamsConfig::rocksdb_bounded_memory`) and each `KafkaStreams`
/// instance makes one of these for all its stores.
#[derive(Clone)]
pub struct RocksDbMemoryBounds {
    cache: Cache,
    write_buffers: WriteBufferManager,
    total_bytes: usize,
    memtable_bytes: usize,
}

impl RocksDbMemoryBounds {
    /// Bounds block cache, index and filter blocks and memtables together to
    /// `total_bytes`, of which at most `memtable_bytes` (at most
    /// `total_bytes`) are memtables.
    pub fn new(total_bytes: usize, memtable_bytes: usize) -> Self {
        let memtable_bytes = memtable_bytes.min(total_bytes);
        let cache = Cache::new_lru_cache(total_bytes);
        // No stall: as in Kafka Streams' recipe, a write past the bound
        // makes its store flush instead of waiting for others to.
        let write_buffers = WriteBufferManager::new_write_buffer_manager_with_cache(
            memtable_bytes,
            false,
            cache.clone(),
        );
        RocksDbMemoryBounds {
            cache,
            write_buffers,
            total_bytes,
            memtable_bytes,
        }
    }

    /// The size of each memtable: an eighth of the memtables' part, at
    /// most Kafka Streams' 16 MiB and at least 256 KiB.
    fn write_buffer_bytes(&self) -> usize {
        (self.memtable_bytes / 8).clamp(256 << 10, WRITE_BUFFER_BYTES)
    }

    /// The bound on block cache, index and filter blocks and memtables.
    pub fn total_bytes(&self) -> usize {
        self.total_bytes
    }

    /// The part of the bound memtables may take.
    pub fn memtable_bytes(&self) -> usize {
        self.memtable_bytes
    }

    /// Bytes in use in the shared cache: cached blocks and the memtables'
    /// reservations.
    pub fn usage(&self) -> usize {
        self.cache.get_usage()
    }

    /// Bytes of the shared cache pinned by readers now.
    pub fn pinned_usage(&self) -> usize {
        self.cache.get_pinned_usage()
    }

    /// Bytes of memtables of all stores sharing the bounds.
    pub fn memtable_usage(&self) -> usize {
        self.write_buffers.get_usage()
    }
}

impl std::fmt::Debug for RocksDbMemoryBounds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RocksDbMemoryBounds")
            .field("total_bytes", &self.total_bytes)
            .field("memtable_bytes", &self.memtable_bytes)
            .field("usage", &self.usage())
            .finish()
    }
}

/// RocksDB settings of an application: an options hook and bounded memory.
#[derive(Clone, Default)]
pub struct RocksDbSettings {
    pub(crate) config_setter: Option<Arc<dyn RocksDbConfigSetter>>,
    memory_bounds: Option<RocksDbMemoryBounds>,
}

impl std::fmt::Debug for RocksDbSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RocksDbSettings")
            .field("config_setter", &self.config_setter.is_some())
            .field("memory_bounds", &self.memory_bounds)
            .finish()
    }
}

impl RocksDbSettings {
    /// Kafka Streams' defaults, nothing shared.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds an options hook.
    pub fn with_config_setter(mut self, setter: Arc<dyn RocksDbConfigSetter>) -> Self {
        self.config_setter = Some(setter);
        self
    }
    /// Shares one cache and write buffer manager among all stores.
    pub fn with_memory_bounds(mut self, bounds: RocksDbMemoryBounds) -> Self {
        self.memory_bounds = Some(bounds);
        self
    }

    /// The options hook, if any.
    pub fn config_setter(&self) -> Option<&Arc<dyn RocksDbConfigSetter>> {
        self.config_setter.as_ref()
    }

    /// The shared memory bounds, if memory is bounded.
    pub fn memory_bounds(&self) -> Option<&RocksDbMemoryBounds> {
        self.memory_bounds.as_ref()
    }

    /// The options store `store` opens with: Kafka Streams' defaults (no
    /// compression, universal compaction, 16 MiB write buffers, a bloom
    /// filter, a 50 MiB block cache of its own unless memory is bounded),
    /// the shared cache and write buffer manager when it is, then the config
    /// setter's changes.
    pub fn options(&self, store: &str) -> Options {
        let mut table = BlockBasedOptions::default();
        table.set_block_size(BLOCK_SIZE);
        table.set_bloom_filter(10.0, false);
        let mut options = Options::default();
        options.create_if_missing(true);
        options.create_missing_column_families(true);
        options.set_compression_type(DBCompressionType::None);
        options.set_compaction_style(DBCompactionStyle::Universal);
        options.set_write_buffer_size(WRITE_BUFFER_BYTES);
        options.set_max_write_buffer_number(MAX_WRITE_BUFFERS);
        options.increase_parallelism(2);
        options.set_keep_log_file_num(2);
        match &self.memory_bounds {
            Some(bounds) => {
                // Kafka Streams' recipe. Index and filter blocks go to the
                // cache's high-priority pool (RocksDB's default for cached
                // ones); pinning L0's there instead would put them beyond
                // eviction, and universal compaction keeps most files in L0.
                table.set_block_cache(&bounds.cache);
                table.set_cache_index_and_filter_blocks(true);
                table.set_pin_top_level_index_and_filter(true);
                options.set_write_buffer_manager(&bounds.write_buffers);
                // A memtable takes memory in arena blocks, an eighth of its
                // write buffer (2 MiB) by default, and the write buffer
                // manager makes a store writing past the bound start a new
                // memtable however little the last one held: with many
                // stores those blocks alone would pass the bound.
                options.set_write_buffer_size(bounds.write_buffer_bytes());
                options.set_arena_block_size(bounds.write_buffer_bytes() / 8);
            }
            None => table.set_block_cache(&Cache::new_lru_cache(BLOCK_CACHE_BYTES)),
        }
        if let Some(setter) = &self.config_setter {
            setter.set_config(store, &mut options, &mut table);
        }
        options.set_block_based_table_factory(&table);
        options
    }
}
