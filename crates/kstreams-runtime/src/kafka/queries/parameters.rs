//! What a query asks for: Kafka Streams' `StoreQueryParameters` and
//! `QueryableStoreTypes`.

use std::marker::PhantomData;

use kstreams_state::ValueAndTimestamp;

use super::views::{
    LocalQuery, ReadOnlyKeyValueView, ReadOnlySessionView, ReadOnlyVersionedView,
    ReadOnlyWindowView,
};

/// A kind of store a query can read, and the view it gets. Made by
/// [`QueryableStoreTypes`]; sealed (the view is built from crate-private
/// parts).
pub trait QueryableStoreType {
    /// The read-only view [`KafkaStreams::store`](super::super::KafkaStreams::store) returns.
    type View;
    #[doc(hidden)]
    fn view(self, query: LocalQuery) -> Self::View;
}

/// The store kinds a query can ask for, as Kafka Streams'
/// `QueryableStoreTypes`: the key and value types are the store's own (the
/// types of its serdes).
pub struct QueryableStoreTypes;

impl QueryableStoreTypes {
    /// A key-value store, plain or timestamped: values of a timestamped
    /// store (every store of the DSL) come without their timestamps, as
    /// Kafka Streams' `keyValueStore()` reads them.
    pub fn key_value_store<K, V>() -> KeyValueStoreType<K, V> {
        KeyValueStoreType(PhantomData)
    }

    /// A timestamped key-value store, values with their timestamps.
    pub fn timestamped_key_value_store<K, V>() -> TimestampedKeyValueStoreType<K, V> {
        TimestampedKeyValueStoreType(PhantomData)
    }

    /// A window store, plain or timestamped (values without timestamps).
    pub fn window_store<K, V>() -> WindowStoreType<K, V> {
        WindowStoreType(PhantomData)
    }

    /// A timestamped window store, values with their timestamps.
    pub fn timestamped_window_store<K, V>() -> TimestampedWindowStoreType<K, V> {
        TimestampedWindowStoreType(PhantomData)
    }

    /// A session store.
    pub fn session_store<K, V>() -> SessionStoreType<K, V> {
        SessionStoreType(PhantomData)
    }

    /// A versioned key-value store (KIP-889): the latest version of a key
    /// or the one valid at a time. Kafka Streams reads these through
    /// IQv2's `VersionedKeyQuery`; here they have a view like the others.
    pub fn versioned_key_value_store<K, V>() -> VersionedKeyValueStoreType<K, V> {
        VersionedKeyValueStoreType(PhantomData)
    }
}

macro_rules! store_type {
    ($(#[$doc:meta])* $name:ident => $view:ty, $unwrap:expr) => {
        $(#[$doc])*
        pub struct $name<K, V>(PhantomData<fn() -> (K, V)>);

        impl<K, V> QueryableStoreType for $name<K, V> {
            type View = $view;
            fn view(self, query: LocalQuery) -> Self::View {
                <$view>::new(query, $unwrap)
            }
        }
    };
}

store_type!(
    /// See [`QueryableStoreTypes::key_value_store`].
    KeyValueStoreType => ReadOnlyKeyValueView<K, V>, true
);
store_type!(
    /// See [`QueryableStoreTypes::timestamped_key_value_store`].
    TimestampedKeyValueStoreType => ReadOnlyKeyValueView<K, ValueAndTimestamp<V>>, false
);
store_type!(
    /// See [`QueryableStoreTypes::window_store`].
    WindowStoreType => ReadOnlyWindowView<K, V>, true
);
store_type!(
    /// See [`QueryableStoreTypes::timestamped_window_store`].
    TimestampedWindowStoreType => ReadOnlyWindowView<K, ValueAndTimestamp<V>>, false
);
store_type!(
    /// See [`QueryableStoreTypes::session_store`].
    SessionStoreType => ReadOnlySessionView<K, V>, false
);
store_type!(
    /// See [`QueryableStoreTypes::versioned_key_value_store`].
    VersionedKeyValueStoreType => ReadOnlyVersionedView<K, V>, false
);

/// What a query may see of writes not yet committed (KIP-892's
/// `default.interactive.query.isolation.level` and Kafka Streams 4.4's
/// per-query `withIsolationLevel`).
///
/// It matters only where stores hold uncommitted writes apart:
/// transactional state stores under exactly-once
/// ([`StreamsConfig::transactional_state_stores`](crate::kafka::StreamsConfig::transactional_state_stores)).
/// There a [`ReadCommitted`](IsolationLevel::ReadCommitted) read never sees a
/// write whose transaction may still abort: a stream thread answers it only
/// at a point where its stores hold exactly what it committed (right after
/// a commit, or while it has processed nothing since), so it waits up to a
/// commit interval (100 ms by default under exactly-once) for a busy
/// thread. Kafka Streams reads the state of the last commit at once
/// instead; both see only committed writes. Elsewhere both levels read
/// the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IsolationLevel {
    /// Every write of the records processed so far, committed or not
    /// (Kafka Streams' default).
    #[default]
    ReadUncommitted,
    /// Only what the stream thread committed.
    ReadCommitted,
}

/// Which store a query reads, of which type, where: Kafka Streams'
/// `StoreQueryParameters`.
///
/// ```
/// use kstreams_runtime::kafka::{IsolationLevel, QueryableStoreTypes, StoreQueryParameters};
///
/// let counts = StoreQueryParameters::from_name_and_type(
///     "counts",
///     QueryableStoreTypes::key_value_store::<String, i64>(),
/// )
/// .with_partition(2)
/// .enable_stale_stores()
/// .with_isolation_level(IsolationLevel::ReadCommitted);
/// assert_eq!(counts.partition(), Some(2));
/// assert!(counts.stale_stores_enabled());
/// assert_eq!(counts.isolation_level(), Some(IsolationLevel::ReadCommitted));
/// ```
pub struct StoreQueryParameters<T> {
    pub(crate) store_name: String,
    pub(crate) store_type: T,
    pub(crate) partition: Option<i32>,
    pub(crate) stale_stores: bool,
    pub(crate) isolation: Option<IsolationLevel>,
}

impl<T: QueryableStoreType> StoreQueryParameters<T> {
    /// Every local partition of store `store_name`, active tasks that are
    /// current only.
    pub fn from_name_and_type(store_name: impl Into<String>, store_type: T) -> Self {
        Self {
            store_name: store_name.into(),
            store_type,
            partition: None,
            stale_stores: false,
            isolation: None,
        }
    }

    /// Only the store of the task of this partition.
    pub fn with_partition(mut self, partition: i32) -> Self {
        self.partition = Some(partition);
        self
    }

    /// Every partition (the default).
    pub fn with_all_partitions(mut self) -> Self {
        self.partition = None;
        self
    }

    /// Also stores that may lag behind: standby (and warm-up) tasks', and
    /// those of tasks still loading a bootstrap table or waiting for
    /// partitions.
    pub fn enable_stale_stores(mut self) -> Self {
        self.stale_stores = true;
        self
    }

    /// What the query may see of uncommitted writes, instead of
    /// `default.interactive.query.isolation.level`.
    pub fn with_isolation_level(mut self, level: IsolationLevel) -> Self {
        self.isolation = Some(level);
        self
    }

    /// The isolation level asked for, if one (else the configured default).
    pub fn isolation_level(&self) -> Option<IsolationLevel> {
        self.isolation
    }

    /// The store's name.
    pub fn store_name(&self) -> &str {
        &self.store_name
    }

    /// The partition asked for, if one.
    pub fn partition(&self) -> Option<i32> {
        self.partition
    }

    /// Whether stale stores may answer.
    pub fn stale_stores_enabled(&self) -> bool {
        self.stale_stores
    }
}
