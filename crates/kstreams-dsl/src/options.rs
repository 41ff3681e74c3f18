//! Operator options: Kafka Streams' `Consumed`, `Produced`, `Named`,
//! `Repartitioned` and `Printed`.

use std::sync::Arc;

use kstreams_record::{DefaultSerde, Serde, SharedSerde};
use kstreams_time::TimestampExtractor;

use crate::partitioner::{SharedPartitioner, StreamPartitioner};
use crate::AutoOffsetReset;

/// A processor name chosen by the user instead of a generated one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named(pub(crate) String);

impl Named {
    /// The name to give the operator.
    pub fn new(name: impl Into<String>) -> Self {
        Self(name.into())
    }
}

/// Anything that can name an operator: a [`Named`], a string, or `None`
/// for a generated name.
pub trait IntoName {
    /// The name, if any.
    fn into_name(self) -> Option<Named>;
}

impl IntoName for Named {
    fn into_name(self) -> Option<Named> {
        Some(self)
    }
}

impl IntoName for &str {
    fn into_name(self) -> Option<Named> {
        Some(Named::new(self))
    }
}

impl IntoName for String {
    fn into_name(self) -> Option<Named> {
        Some(Named::new(self))
    }
}

impl IntoName for Option<Named> {
    fn into_name(self) -> Option<Named> {
        self
    }
}

impl From<&str> for Named {
    fn from(name: &str) -> Self {
        Self::new(name)
    }
}

/// How a source reads a topic: serdes, timestamp extractor, name.
pub struct Consumed<K, V> {
    pub(crate) key_serde: SharedSerde<K>,
    pub(crate) value_serde: SharedSerde<V>,
    pub(crate) extractor: Option<Arc<dyn TimestampExtractor>>,
    pub(crate) name: Option<String>,
    pub(crate) bootstrap: bool,
    pub(crate) offset_reset: Option<AutoOffsetReset>,
}

impl<K: 'static, V: 'static> Consumed<K, V> {
    /// Reads keys and values with these serdes.
    pub fn with(key_serde: impl Serde<K>, value_serde: impl Serde<V>) -> Self {
        Self {
            key_serde: Arc::new(key_serde),
            value_serde: Arc::new(value_serde),
            extractor: None,
            name: None,
            bootstrap: false,
            offset_reset: None,
        }
    }

    /// Where the source starts a partition without a committed offset,
    /// instead of the application's `auto.offset.reset` (Kafka Streams'
    /// `Consumed#withOffsetResetPolicy`, KIP-1106).
    pub fn with_offset_reset_policy(mut self, policy: AutoOffsetReset) -> Self {
        self.offset_reset = Some(policy);
        self
    }

    /// Bootstraps the topic (beyond Kafka Streams): when a task is
    /// assigned a partition of it, the task reads that partition up to the
    /// end offset seen at assignment before it processes records of its
    /// other partitions. Meant for table topics, so that a join never runs
    /// against a half-loaded table; progress is logged as a restore's.
    pub fn with_bootstrap(mut self) -> Self {
        self.bootstrap = true;
        self
    }

    /// Uses this extractor instead of the application's default.
    pub fn with_timestamp_extractor(mut self, extractor: impl TimestampExtractor) -> Self {
        self.extractor = Some(Arc::new(extractor));
        self
    }

    /// Names the source node.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
}

impl<K: DefaultSerde, V: DefaultSerde> Default for Consumed<K, V> {
    fn default() -> Self {
        Self {
            key_serde: K::default_serde(),
            value_serde: V::default_serde(),
            extractor: None,
            name: None,
            bootstrap: false,
            offset_reset: None,
        }
    }
}

/// How a sink writes a topic: serdes and name.
pub struct Produced<K, V> {
    pub(crate) key_serde: SharedSerde<K>,
    pub(crate) value_serde: SharedSerde<V>,
    pub(crate) name: Option<String>,
    pub(crate) partitioner: Option<SharedPartitioner<K, V>>,
}

impl<K: 'static, V: 'static> Produced<K, V> {
    /// Writes keys and values with these serdes.
    pub fn with(key_serde: impl Serde<K>, value_serde: impl Serde<V>) -> Self {
        Self {
            key_serde: Arc::new(key_serde),
            value_serde: Arc::new(value_serde),
            name: None,
            partitioner: None,
        }
    }

    /// Names the sink node.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Chooses each record's partitions with `partitioner` instead of
    /// Kafka's default (Kafka Streams' `Produced#withStreamPartitioner`).
    pub fn with_partitioner(mut self, partitioner: impl StreamPartitioner<K, V>) -> Self {
        self.partitioner = Some(Arc::new(partitioner));
        self
    }
}

impl<K: DefaultSerde, V: DefaultSerde> Default for Produced<K, V> {
    fn default() -> Self {
        Self {
            key_serde: K::default_serde(),
            value_serde: V::default_serde(),
            name: None,
            partitioner: None,
        }
    }
}

/// How `repartition` writes and reads its internal topic.
pub struct Repartitioned<K, V> {
    pub(crate) key_serde: SharedSerde<K>,
    pub(crate) value_serde: SharedSerde<V>,
    pub(crate) name: Option<String>,
    pub(crate) partitions: Option<i32>,
    pub(crate) partitioner: Option<SharedPartitioner<K, V>>,
}

impl<K: 'static, V: 'static> Repartitioned<K, V> {
    /// Uses these serdes for the repartition topic.
    pub fn with(key_serde: impl Serde<K>, value_serde: impl Serde<V>) -> Self {
        Self {
            key_serde: Arc::new(key_serde),
            value_serde: Arc::new(value_serde),
            name: None,
            partitions: None,
            partitioner: None,
        }
    }

    /// Names the topic `<application.id>-<name>-repartition` and its nodes.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets the topic's partition count (default: that of the source).
    pub fn with_partitions(mut self, partitions: i32) -> Self {
        self.partitions = Some(partitions);
        self
    }

    /// Chooses each record's partitions of the topic with `partitioner`
    /// instead of Kafka's default (Kafka Streams'
    /// `Repartitioned#withStreamPartitioner`).
    pub fn with_partitioner(mut self, partitioner: impl StreamPartitioner<K, V>) -> Self {
        self.partitioner = Some(Arc::new(partitioner));
        self
    }
}

impl<K: DefaultSerde, V: DefaultSerde> Default for Repartitioned<K, V> {
    fn default() -> Self {
        Self {
            key_serde: K::default_serde(),
            value_serde: V::default_serde(),
            name: None,
            partitions: None,
            partitioner: None,
        }
    }
}

/// Where and how `print` writes records.
pub struct Printed<K, V> {
    pub(crate) label: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) mapper: PrintMapper<K, V>,
    pub(crate) sink: PrintSink,
}

/// Formats a record for `print`.
pub(crate) type PrintMapper<K, V> = Arc<dyn Fn(&K, &V) -> String + Send + Sync>;

#[derive(Clone)]
pub(crate) enum PrintSink {
    Stdout,
    Writer(Arc<std::sync::Mutex<dyn std::io::Write + Send>>),
}

impl<K: std::fmt::Debug, V: std::fmt::Debug> Printed<K, V> {
    /// Prints `[label]: key, value` lines to standard output (keys and
    /// values with `Debug`; use `with_key_value_mapper` for other text).
    pub fn to_sys_out() -> Self {
        Self {
            label: None,
            name: None,
            mapper: Arc::new(|k, v| format!("{k:?}, {v:?}")),
            sink: PrintSink::Stdout,
        }
    }

    /// Prints to any writer (a file, a buffer in a test).
    pub fn to_writer(writer: Arc<std::sync::Mutex<dyn std::io::Write + Send>>) -> Self {
        Self {
            sink: PrintSink::Writer(writer),
            ..Self::to_sys_out()
        }
    }
}

impl<K, V> Printed<K, V> {
    /// The label in brackets (default: the processor name).
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    /// Formats each record with `mapper` instead of `key, value`.
    pub fn with_key_value_mapper(
        mut self,
        mapper: impl Fn(&K, &V) -> String + Send + Sync + 'static,
    ) -> Self {
        self.mapper = Arc::new(mapper);
        self
    }

    /// Names the printing processor.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
}
