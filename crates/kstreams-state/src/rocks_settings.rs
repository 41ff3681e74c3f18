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
/// buffers, compaction, ... Called once per store instance, after Kafka
/// Streams' defaults are set.
pub trait RocksDbConfigSetter: Send + Sync + 'static {
    /// Changes `options` and `table` for store `store_name`.
    fn set_config(&self, store_name: &str, options: &mut Options, table: &mut BlockBasedOptions);
    /// Called when the store closes, to release what `set_config` made.
    fn close(&self, store_name: &str) {
        let _ = store_name;
    }
}

/// One block cache and one write buffer manager shared by every RocksDB
/// store that uses these bounds (Kafka Streams' `BoundedMemoryRocksDBConfig`):
/// memtables are charged to the cache, so the total stays within
/// `total_bytes` whatever the number of stores and segments.
#[derive(Clone)]
pub struct RocksDbMemoryBounds {
    cache: Cache,
    write_buffers: WriteBufferManager,
}

impl RocksDbMemoryBounds {
    /// Bounds block cache, index and filter blocks and memtables together to
    /// `total_bytes`, of which at most `memtable_bytes` are memtables.
    pub fn new(total_bytes: usize, memtable_bytes: usize) -> Self {
        let cache = Cache::new_lru_cache(total_bytes);
        let write_buffers = WriteBufferManager::new_write_buffer_manager_with_cache(
            memtable_bytes,
            false,
            cache.clone(),
        );
        RocksDbMemoryBounds {
            cache,
            write_buffers,
        }
    }

    /// Bytes in use in the shared cache (memtables included).
    pub fn usage(&self) -> usize {
        self.cache.get_usage()
    }
}

impl std::fmt::Debug for RocksDbMemoryBounds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RocksDbMemoryBounds")
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

    /// The options store `store` opens with: Kafka Streams' defaults (no
    /// compression, universal compaction, 16 MiB write buffers, a bloom
    /// filter, a 50 MiB block cache of its own unless memory is bounded),
    /// then the config setter's changes.
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
                table.set_block_cache(&bounds.cache);
                table.set_cache_index_and_filter_blocks(true);
                table.set_pin_l0_filter_and_index_blocks_in_cache(true);
                options.set_write_buffer_manager(&bounds.write_buffers);
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
