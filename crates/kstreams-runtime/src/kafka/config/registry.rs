//! Objects of the application's own that a key names (a RocksDB config
//! setter, an exception handler): given in code, or registered under a name
//! in code for properties to name. A Java class can't be loaded, so a
//! Kafka Streams properties file's class name finds the object registered
//! under its last part (`com.example.DeadLetters` finds `DeadLetters`).
//!
//! A name is resolved at start and not when the key is set, because a
//! properties file is read before the application registers its objects.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::ConfigError;

/// The choice in force for a key: the last one set.
pub(crate) enum Chosen<T: ?Sized> {
    /// Named by the key, resolved at start.
    Named(String),
    /// Given in code.
    Given(Arc<T>),
}

impl<T: ?Sized> Clone for Chosen<T> {
    fn clone(&self) -> Self {
        match self {
            Self::Named(name) => Self::Named(name.clone()),
            Self::Given(object) => Self::Given(Arc::clone(object)),
        }
    }
}

impl<T: ?Sized> std::fmt::Debug for Chosen<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Named(name) => write!(f, "named {name}"),
            Self::Given(_) => write!(f, "set in code"),
        }
    }
}

/// The objects registered for one key, by name.
pub(crate) struct Registry<T: ?Sized> {
    by_name: BTreeMap<String, Arc<T>>,
}

impl<T: ?Sized> Default for Registry<T> {
    fn default() -> Self {
        Self {
            by_name: BTreeMap::new(),
        }
    }
}

impl<T: ?Sized> Clone for Registry<T> {
    fn clone(&self) -> Self {
        Self {
            by_name: self.by_name.clone(),
        }
    }
}

impl<T: ?Sized> std::fmt::Debug for Registry<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.by_name.keys()).finish()
    }
}

impl<T: ?Sized> Registry<T> {
    pub(crate) fn register(&mut self, name: String, object: Arc<T>) {
        self.by_name.insert(name, object);
    }

    /// The registered objects, by name.
    #[cfg(all(test, feature = "rocksdb"))]
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&String, &Arc<T>)> {
        self.by_name.iter()
    }

    /// The object `chosen` stands for: the one given, or the one
    /// registered under the name (else its last dot-separated part). An
    /// unknown name is an error naming `key`, what kind of object it wants
    /// (`kind`) and the call that registers one (`register`).
    pub(crate) fn resolve(
        &self,
        chosen: &Chosen<T>,
        key: &str,
        kind: &str,
        register: &str,
    ) -> Result<Arc<T>, ConfigError> {
        let name = match chosen {
            Chosen::Given(object) => return Ok(Arc::clone(object)),
            Chosen::Named(name) => name.trim(),
        };
        let class = name.rsplit('.').next().unwrap_or(name);
        if let Some(object) = self.by_name.get(name).or_else(|| self.by_name.get(class)) {
            return Ok(Arc::clone(object));
        }
        let registered = match self.by_name.len() {
            0 => "none is".to_string(),
            n => format!(
                "{} {}",
                self.by_name
                    .keys()
                    .map(String::as_str)
                    .collect::<Vec<_>>()
                    .join(", "),
                if n == 1 { "is" } else { "are" }
            ),
        };
        Err(ConfigError::Invalid {
            key: key.to_string(),
            value: name.to_string(),
            expected: format!(
                "the name of a {kind} registered in code before start, with \
                 StreamsConfig::{register}(\"{class}\", Arc::new(..)) ({registered} \
                 registered; a Java class cannot be loaded: port it to Rust)"
            ),
        })
    }
}
