//! The runtime's integration tests, as one test binary: each file of this
//! directory is a module (`cargo test -p kstreams-runtime --test integration
//! windows::` runs one of them). One binary links librdkafka and RocksDB
//! once instead of once per file, and the helpers the files share live in
//! `common/`. sasl_ssl.rs is a binary of its own: it installs the process's
//! logger to read what kstreams logs. The broker tests need `KSTREAMS_BOOTSTRAP` (`cargo xtask kafka
//! start`); without it they return early.

mod async_broker;
mod async_face;
mod boundaries;
mod cache_equivalence;
mod commit_needed;
mod common;
mod damaged_state;
mod driver_async;
mod driver_config;
// Opens RocksDB stores by name (Stores::persistent_*).
#[cfg(feature = "rocksdb")]
mod driver_stores;
mod eos_restart;
mod fk_join_options;
mod handlers;
mod interactive_queries;
mod internal_topic_configs;
mod joins;
// Opens RocksDB stores by name (Stores::persistent_*).
#[cfg(feature = "rocksdb")]
mod kafka_broker;
mod kafka_embedded;
mod metrics;
mod mock_context;
mod offset_reset;
mod partitioners;
mod pause;
mod ported_config;
mod regrouped_aggregations;
mod reset;
mod restore_listener;
// Bounds RocksDB stores' memory (Stores::persistent_* by default).
#[cfg(feature = "rocksdb")]
mod rocksdb_memory;
mod stateless;
mod stream_threads;
// Opens RocksDB stores by name (Stores::persistent_*).
#[cfg(feature = "rocksdb")]
mod streams_group;
mod suppress;
mod suppress_restart;
mod tables;
mod thread_failures;
mod tracing;
// Transactional RocksDB stores (KIP-892).
#[cfg(feature = "rocksdb")]
mod transactional_stores;
mod windows;
