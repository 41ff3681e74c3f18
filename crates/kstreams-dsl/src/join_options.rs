//! Join options: Kafka Streams' `Joined` (stream-table) and `StreamJoined`
//! (stream-stream).

use std::sync::Arc;
use std::time::Duration;

use kstreams_record::{Serde, SharedSerde};

/// Options of a stream-table join: Kafka Streams' `Joined`.
pub struct Joined<K, V> {
    pub(crate) name: Option<String>,
    pub(crate) grace: Option<Duration>,
    pub(crate) bootstrap: bool,
    pub(crate) key_serde: Option<SharedSerde<K>>,
    pub(crate) value_serde: Option<SharedSerde<V>>,
}

impl<K, V> Default for Joined<K, V> {
    fn default() -> Self {
        Joined {
            name: None,
            grace: None,
            bootstrap: false,
            key_serde: None,
            value_serde: None,
        }
    }
}

impl<K: 'static, V: 'static> Joined<K, V> {
    /// A join processor named `name`.
    pub fn as_(name: impl Into<String>) -> Self {
        Joined {
            name: Some(name.into()),
            ..Self::default()
        }
    }

    /// Holds stream records back for `grace` of stream time and joins them
    /// in timestamp order, so that table updates with earlier timestamps
    /// that arrive a little later are seen (KIP-923). Needs a versioned
    /// table.
    pub fn with_grace_period(mut self, grace: Duration) -> Self {
        self.grace = Some(grace);
        self
    }

    /// Bootstraps the table side (beyond Kafka Streams): each task reads
    /// the table's partitions to the end offsets seen at assignment before
    /// it joins any stream record. See [`crate::Consumed::with_bootstrap`].
    pub fn with_table_bootstrap(mut self) -> Self {
        self.bootstrap = true;
        self
    }

    /// The stream's key serde (for the grace buffer and a repartition).
    pub fn with_key_serde(mut self, serde: impl Serde<K>) -> Self {
        self.key_serde = Some(Arc::new(serde));
        self
    }

    /// The stream's value serde (for the grace buffer and a repartition).
    pub fn with_value_serde(mut self, serde: impl Serde<V>) -> Self {
        self.value_serde = Some(Arc::new(serde));
        self
    }
}

/// Names and serdes of a stream-stream join: Kafka Streams' `StreamJoined`.
pub struct StreamJoined<K, V1, V2> {
    pub(crate) name: Option<String>,
    pub(crate) store_name: Option<String>,
    pub(crate) key_serde: Option<SharedSerde<K>>,
    pub(crate) value_serde: Option<SharedSerde<V1>>,
    pub(crate) other_value_serde: Option<SharedSerde<V2>>,
}

impl<K, V1, V2> Default for StreamJoined<K, V1, V2> {
    fn default() -> Self {
        StreamJoined {
            name: None,
            store_name: None,
            key_serde: None,
            value_serde: None,
            other_value_serde: None,
        }
    }
}

impl<K: 'static, V1: 'static, V2: 'static> StreamJoined<K, V1, V2> {
    /// Serdes of the key and both values (for the join's stores).
    pub fn with(
        key_serde: impl Serde<K>,
        value_serde: impl Serde<V1>,
        other_value_serde: impl Serde<V2>,
    ) -> Self {
        StreamJoined {
            key_serde: Some(Arc::new(key_serde)),
            value_serde: Some(Arc::new(value_serde)),
            other_value_serde: Some(Arc::new(other_value_serde)),
            ..Self::default()
        }
    }

    /// Names the join's processors (`<name>-this-windowed`,
    /// `<name>-this-join` or `<name>-outer-this-join`, `<name>-merge`, ...)
    /// and its repartition topics (`<name>-left-repartition`, ...).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Names the join's stores (`<name>-this-join-store`,
    /// `<name>-outer-other-join-store`, `<name>-left-shared-join-store`, ...),
    /// and so their changelog topics.
    pub fn with_store_name(mut self, name: impl Into<String>) -> Self {
        self.store_name = Some(name.into());
        self
    }
}
