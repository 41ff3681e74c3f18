use std::cell::RefCell;
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::ops::Bound;
use std::rc::Rc;

use crate::{BuiltStore, StateStore, StoreBuilder};

/// Reads of a key-value store, for processors and interactive queries.
pub trait ReadOnlyKeyValueStore<K, V> {
    /// The value of a key.
    fn get(&self, key: &K) -> Option<V>;
    /// Entries with `from <= key <= to`, in key order.
    fn range(&self, from: &K, to: &K) -> Vec<(K, V)>;
    /// Every entry, in key order.
    fn all(&self) -> Vec<(K, V)>;
    /// An estimate of the number of entries.
    fn approximate_num_entries(&self) -> u64;
}

/// A key-value store: Kafka Streams' `KeyValueStore`.
pub trait KeyValueStore<K, V>: ReadOnlyKeyValueStore<K, V> + StateStore {
    /// Sets the value of a key.
    fn put(&mut self, key: K, value: V);
    /// Sets the value only if the key has none; returns the existing value.
    fn put_if_absent(&mut self, key: K, value: V) -> Option<V>;
    /// Removes a key; returns its old value.
    fn delete(&mut self, key: &K) -> Option<V>;
}

/// A typed handle on a task's key-value store.
pub type KeyValueStoreHandle<K, V> = Rc<RefCell<dyn KeyValueStore<K, V>>>;

/// An ordered in-memory key-value store.
#[derive(Debug)]
pub struct InMemoryKeyValueStore<K, V> {
    name: String,
    entries: BTreeMap<K, V>,
}

impl<K: Ord, V> InMemoryKeyValueStore<K, V> {
    /// An empty store.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            entries: BTreeMap::new(),
        }
    }
}

impl<K: Ord + Clone + 'static, V: Clone + 'static> ReadOnlyKeyValueStore<K, V>
    for InMemoryKeyValueStore<K, V>
{
    fn get(&self, key: &K) -> Option<V> {
        self.entries.get(key).cloned()
    }
    fn range(&self, from: &K, to: &K) -> Vec<(K, V)> {
        if from > to {
            return Vec::new();
        }
        self.entries
            .range((Bound::Included(from), Bound::Included(to)))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
    fn all(&self) -> Vec<(K, V)> {
        self.entries
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
    fn approximate_num_entries(&self) -> u64 {
        self.entries.len() as u64
    }
}

impl<K: 'static, V: 'static> StateStore for InMemoryKeyValueStore<K, V> {
    fn name(&self) -> &str {
        &self.name
    }
    fn persistent(&self) -> bool {
        false
    }
    fn flush(&mut self) {}
    fn close(&mut self) {}
}

impl<K: Ord + Clone + 'static, V: Clone + 'static> KeyValueStore<K, V>
    for InMemoryKeyValueStore<K, V>
{
    fn put(&mut self, key: K, value: V) {
        self.entries.insert(key, value);
    }
    fn put_if_absent(&mut self, key: K, value: V) -> Option<V> {
        if let Some(existing) = self.entries.get(&key) {
            return Some(existing.clone());
        }
        self.entries.insert(key, value);
        None
    }
    fn delete(&mut self, key: &K) -> Option<V> {
        self.entries.remove(key)
    }
}

/// Builds one in-memory key-value store per task.
pub struct KeyValueStoreBuilder<K, V> {
    name: String,
    logging: bool,
    types: PhantomData<fn() -> (K, V)>,
}

impl<K, V> KeyValueStoreBuilder<K, V> {
    /// Turns the changelog off (it is on by default, as in Kafka Streams).
    pub fn with_logging_disabled(mut self) -> Self {
        self.logging = false;
        self
    }
}

impl<K: Ord + Clone + 'static, V: Clone + 'static> StoreBuilder for KeyValueStoreBuilder<K, V> {
    fn name(&self) -> &str {
        &self.name
    }
    fn logging_enabled(&self) -> bool {
        self.logging
    }
    fn build(&self) -> BuiltStore {
        let store = Rc::new(RefCell::new(InMemoryKeyValueStore::<K, V>::new(
            self.name.clone(),
        )));
        let handle: KeyValueStoreHandle<K, V> = store.clone();
        BuiltStore {
            lifecycle: store,
            handle: Box::new(handle),
            handle_type: std::any::type_name::<KeyValueStoreHandle<K, V>>(),
        }
    }
}

/// Factory functions for store builders, as Kafka Streams' `Stores`.
pub struct Stores;

impl Stores {
    /// An in-memory key-value store builder.
    pub fn in_memory_key_value_store<K, V>(name: impl Into<String>) -> KeyValueStoreBuilder<K, V> {
        KeyValueStoreBuilder {
            name: name.into(),
            logging: true,
            types: PhantomData,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_memory_store_keeps_keys_ordered() {
        let mut s = InMemoryKeyValueStore::new("s");
        s.put("b".to_string(), 2);
        s.put("a".to_string(), 1);
        s.put("c".to_string(), 3);
        assert_eq!(s.put_if_absent("a".to_string(), 9), Some(1));
        assert_eq!(s.range(&"a".to_string(), &"b".to_string()).len(), 2);
        assert_eq!(s.delete(&"b".to_string()), Some(2));
        assert_eq!(s.all(), vec![("a".to_string(), 1), ("c".to_string(), 3)]);
        assert!(s.range(&"c".to_string(), &"a".to_string()).is_empty());
    }

    #[test]
    fn built_store_handle_checks_its_type() {
        let builder = Stores::in_memory_key_value_store::<String, i64>("counts");
        let built = builder.build();
        let ok: KeyValueStoreHandle<String, i64> = built.handle().unwrap();
        ok.borrow_mut().put("k".into(), 1);
        let err = match built.handle::<KeyValueStoreHandle<String, String>>() {
            Ok(_) => panic!("a store of the wrong type was handed out"),
            Err(e) => e,
        };
        assert!(err.to_string().contains("counts"), "{err}");
    }
}
