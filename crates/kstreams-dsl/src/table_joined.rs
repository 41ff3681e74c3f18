//! Options of foreign-key table-table joins: Kafka Streams' `TableJoined`
//! (a name and the partitioners of the two internal topics) and
//! `ForeignKeyExtractor` (KIP-1104: the foreign key from the value, or from
//! the key and the value).

use std::sync::Arc;

use crate::partitioner::{SharedPartitioner, StreamPartitioner};

/// The name and partitioners of a foreign-key join
/// ([`KTable::join_fk_with`](crate::KTable::join_fk_with),
/// [`KTable::left_join_fk_with`](crate::KTable::left_join_fk_with)):
/// Kafka Streams' `TableJoined`.
///
/// The name replaces the generated names of the join's processors, internal
/// topics and subscription store, as Kafka Streams derives them from
/// `TableJoined#withName`: with name `orders` the subscriptions travel on
/// `<application.id>-orders-subscription-registration-topic`, the answers on
/// `<application.id>-orders-subscription-response-topic`, the subscription
/// store is `orders-subscription-store` (changelog
/// `<application.id>-orders-subscription-store-changelog`) and the result
/// node `orders-result`.
///
/// The partitioners are for tables whose topics are not partitioned by
/// Kafka's default partitioner (murmur2 of the serialized key):
///
/// - `partitioner` partitions this (the left) table's keys: the answers go
///   back to the partition of the left row they answer. Without it they go
///   to the partition the left row was read from, which the subscription
///   carries (as Kafka Streams 3.5+ does);
/// - `other_partitioner` partitions the other (foreign) table's keys: each
///   subscription goes to the partition of the foreign key's row. Without
///   it, Kafka's default partitioner.
///
/// Both see the key alone: their value is `()` (Kafka Streams passes
/// `null`, a `StreamPartitioner<K, Void>`). A closure
/// `Fn(&str, &K, &(), &Headers, i32) -> Option<Vec<i32>>` is one. Each must
/// choose exactly one partition (or `None`, the default): any other choice
/// fails the task, as in Kafka Streams. A subscription without a foreign
/// key (a left join's row whose foreign key is `None`, or a deleted row) is
/// answered without a lookup on whatever partition it lands on; it goes by
/// the default partitioner and `other_partitioner` does not see it (Kafka
/// Streams calls it with a `null` key).
///
/// ```
/// use kstreams_dsl::TableJoined;
/// use kstreams_record::Headers;
///
/// // Keys "<kind>-<n>" live in partition n % partitions, on both sides.
/// fn by_number(_topic: &str, key: &String, _: &(), _: &Headers, partitions: i32) -> Option<Vec<i32>> {
///     let n: i32 = key.rsplit('-').next()?.parse().ok()?;
///     Some(vec![n % partitions])
/// }
/// let joined = TableJoined::<String, String>::with(by_number, by_number).with_name("orders");
/// # let _ = joined;
/// ```
pub struct TableJoined<K, KO> {
    pub(crate) name: Option<String>,
    pub(crate) partitioner: Option<SharedPartitioner<K, ()>>,
    pub(crate) other_partitioner: Option<SharedPartitioner<KO, ()>>,
}

impl<K, KO> Default for TableJoined<K, KO> {
    /// Generated names, default partitioning.
    fn default() -> Self {
        TableJoined {
            name: None,
            partitioner: None,
            other_partitioner: None,
        }
    }
}

impl<K: 'static, KO: 'static> TableJoined<K, KO> {
    /// Both tables' partitioners (Kafka Streams' `TableJoined.with`). To
    /// set one of them, start from [`TableJoined::default`] or
    /// [`TableJoined::as_`] and add it with
    /// [`TableJoined::with_partitioner`] or
    /// [`TableJoined::with_other_partitioner`].
    pub fn with(
        partitioner: impl StreamPartitioner<K, ()>,
        other_partitioner: impl StreamPartitioner<KO, ()>,
    ) -> Self {
        TableJoined {
            name: None,
            partitioner: Some(Arc::new(partitioner)),
            other_partitioner: Some(Arc::new(other_partitioner)),
        }
    }

    /// A join named `name` (Kafka Streams' `TableJoined.as`).
    pub fn as_(name: impl Into<String>) -> Self {
        TableJoined {
            name: Some(name.into()),
            ..Self::default()
        }
    }

    /// Names the join: its processors, internal topics and subscription
    /// store are `<name>-<suffix>` (see [`TableJoined`]).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// How this (the left) table is partitioned: where the answers go.
    pub fn with_partitioner(mut self, partitioner: impl StreamPartitioner<K, ()>) -> Self {
        self.partitioner = Some(Arc::new(partitioner));
        self
    }

    /// How the other (the foreign) table is partitioned: where the
    /// subscriptions go.
    pub fn with_other_partitioner(mut self, partitioner: impl StreamPartitioner<KO, ()>) -> Self {
        self.other_partitioner = Some(Arc::new(partitioner));
        self
    }
}

/// Takes the foreign key from a row of the left table of a foreign-key
/// join: from its value, or from its key and value (KIP-1104). `None` is a
/// row without a foreign key (KIP-962): an inner join leaves it out of the
/// result (and retracts what the row joined before), a left join keeps it,
/// joined with `None`.
///
/// ```
/// use kstreams_dsl::ForeignKeyExtractor;
///
/// // An order's value names its customer, or "none".
/// let customer = ForeignKeyExtractor::<String, String, String>::from_value(|order: &String| {
///     (order != "none").then(|| order.clone())
/// });
/// // The region is the order key's prefix, "eu/order-7".
/// let region = ForeignKeyExtractor::<String, String, String>::from_key_and_value(
///     |key: &String, _order: &String| key.split_once('/').map(|(region, _)| region.to_string()),
/// );
/// # let _ = (customer, region);
/// ```
pub struct ForeignKeyExtractor<K, V, KO> {
    extract: ExtractFn<K, V, KO>,
}

type ExtractFn<K, V, KO> = Arc<dyn Fn(&K, &V) -> Option<KO> + Send + Sync>;

impl<K, V, KO> Clone for ForeignKeyExtractor<K, V, KO> {
    fn clone(&self) -> Self {
        ForeignKeyExtractor {
            extract: Arc::clone(&self.extract),
        }
    }
}

impl<K: 'static, V: 'static, KO: 'static> ForeignKeyExtractor<K, V, KO> {
    /// The foreign key from the value alone (Kafka Streams'
    /// `Function<V, KO>` overloads).
    pub fn from_value(extract: impl Fn(&V) -> Option<KO> + Send + Sync + 'static) -> Self {
        ForeignKeyExtractor {
            extract: Arc::new(move |_, value| extract(value)),
        }
    }

    /// The foreign key from the key and the value (Kafka Streams'
    /// `BiFunction<K, V, KO>` overloads, KIP-1104).
    pub fn from_key_and_value(
        extract: impl Fn(&K, &V) -> Option<KO> + Send + Sync + 'static,
    ) -> Self {
        ForeignKeyExtractor {
            extract: Arc::new(extract),
        }
    }

    /// The foreign key of the row `key`, `value`.
    pub(crate) fn extract(&self, key: &K, value: &V) -> Option<KO> {
        (self.extract)(key, value)
    }
}
