//! Local state for kstreams.
//!
//! This crate owns the state store traits and their engines. Today: the
//! [`StateStore`] lifecycle every store shares, the [`StoreBuilder`] a
//! topology holds to create one store per task, and an in-memory ordered
//! key-value store. The window, session and versioned stores, the RocksDB
//! engine, the caching, changelogging and metering layers, checkpoints and
//! restoration will live here too.
//!
//! A task owns its stores and runs on one thread, so a handle is an
//! `Rc<RefCell<..>>`: no lock on the hot path.

mod key_value;

use std::any::Any;
use std::cell::RefCell;
use std::rc::Rc;

pub use key_value::{
    InMemoryKeyValueStore, KeyValueStore, KeyValueStoreBuilder, KeyValueStoreHandle,
    ReadOnlyKeyValueStore, Stores,
};

/// Errors of the state layer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A processor asked for a store under a type it does not have.
    #[error("state store {name} is a {actual}, not the {requested} that was asked for")]
    WrongStoreType {
        /// Store name.
        name: String,
        /// What the store is.
        actual: &'static str,
        /// What was asked.
        requested: &'static str,
    },
}

/// What every store has, whatever it holds: Kafka Streams' `StateStore`.
pub trait StateStore: 'static {
    /// The store name, unique in a topology.
    fn name(&self) -> &str;
    /// Whether the store keeps its data on disk.
    fn persistent(&self) -> bool;
    /// Writes buffered data down (called at commit).
    fn flush(&mut self);
    /// Releases the store's resources (called when its task closes).
    fn close(&mut self);
}

/// One store created for one task: a lifecycle view for the engine and a
/// typed handle (as `Any`) that processors ask for by type.
pub struct BuiltStore {
    /// Flush and close go through here.
    pub lifecycle: Rc<RefCell<dyn StateStore>>,
    /// The typed handle, for example a [`KeyValueStoreHandle`].
    pub handle: Box<dyn Any>,
    /// A readable name of the handle's type, for errors.
    pub handle_type: &'static str,
}

impl BuiltStore {
    /// The typed handle, or a clear error naming both types.
    pub fn handle<H: Clone + 'static>(&self) -> Result<H, Error> {
        self.handle
            .downcast_ref::<H>()
            .cloned()
            .ok_or_else(|| Error::WrongStoreType {
                name: self.lifecycle.borrow().name().to_string(),
                actual: self.handle_type,
                requested: std::any::type_name::<H>(),
            })
    }
}

/// Creates a store for each task: Kafka Streams' `StoreBuilder`.
pub trait StoreBuilder: Send + Sync + 'static {
    /// The store name.
    fn name(&self) -> &str;
    /// Whether a changelog topic backs the store.
    fn logging_enabled(&self) -> bool;
    /// A fresh store for one task.
    fn build(&self) -> BuiltStore;
}
