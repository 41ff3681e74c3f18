//! `GlobalKTable`: a table replicated whole to every instance.

use std::sync::Arc;

use crate::handles::types::GlobalKTable;
use crate::GlobalStore;

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
