//! The processors behind the DSL, one operator per file, each a
//! [`Processor`](crate::Processor) like a user's. The handles in
//! [`crate::handles`] add them to the topology; nothing here knows a handle.
//!
//! Their semantics are Kafka Streams' (`KTableSource`, `KStreamAggregate`,
//! `KStreamWindowAggregate`, ...): the same records are dropped, the same old
//! values sent, the same timestamps kept.

pub(crate) mod async_call;
pub(crate) mod fk_format;
pub(crate) mod fk_join;
pub(crate) mod forwarder;
pub(crate) mod getters;
pub(crate) mod global_join;
#[cfg(test)]
mod kafka_wire_vectors;
pub(crate) mod late_records;
pub(crate) mod outer_join_format;
pub(crate) mod session_aggregate;
pub(crate) mod sliding_aggregate;
pub(crate) mod stateless;
pub(crate) mod stream_aggregate;
pub(crate) mod stream_stream_join;
pub(crate) mod stream_table_join;
pub(crate) mod suppress;
pub(crate) mod suppress_buffer;
pub(crate) mod table_aggregate;
pub(crate) mod table_rekey;
pub(crate) mod table_source;
pub(crate) mod table_table_join;
pub(crate) mod table_to_stream;
pub(crate) mod table_transform_values;
pub(crate) mod window_aggregate;
pub(crate) mod window_output;

use std::sync::{Arc, OnceLock};

/// The store of a table operator, set when the topology is built; a table
/// source gets one only if something needs it (Kafka Streams materializes
/// source tables lazily too).
pub(crate) type LazyStoreName = Arc<OnceLock<String>>;

/// How an aggregation folds a value into the aggregate so far (`None`
/// before the first value of a key): count, reduce and aggregate are all
/// one of these.
pub(crate) type Fold<K, V, A> = Arc<dyn Fn(&K, V, Option<A>) -> A + Send + Sync>;

/// A stream aggregation's functions (by key, and in fixed or sliding
/// windows): the fold, and what a key's (or window's) aggregate starts
/// from. Kafka Streams' `KStreamAggregate`, `KStreamWindowAggregate` and
/// `KStreamSlidingWindowAggregate` start at `initializer()` and, without a
/// record cache, forward that as the old value of the first update
/// (`count`: 0; `aggregate`: the user's initializer; `reduce`: null, its
/// initializer returning null), which a table aggregation downstream
/// takes back out.
pub(crate) struct AggregateFold<K, V, A> {
    pub(crate) fold: Fold<K, V, A>,
    pub(crate) initial: Option<Arc<dyn Fn() -> A + Send + Sync>>,
}

// Not derived: the functions are shared, whatever K, V and A are.
impl<K, V, A> Clone for AggregateFold<K, V, A> {
    fn clone(&self) -> Self {
        AggregateFold {
            fold: self.fold.clone(),
            initial: self.initial.clone(),
        }
    }
}

impl<K, V, A> AggregateFold<K, V, A> {
    /// `count`'s functions.
    pub(crate) fn count() -> AggregateFold<K, V, i64> {
        AggregateFold {
            fold: count_fold(),
            initial: Some(Arc::new(|| 0)),
        }
    }

    /// `reduce`'s functions: no initial aggregate.
    pub(crate) fn reduce(reducer: Reducer<V>) -> AggregateFold<K, V, V>
    where
        V: 'static,
    {
        AggregateFold {
            fold: reduce_fold(reducer),
            initial: None,
        }
    }

    /// `aggregate`'s functions.
    pub(crate) fn aggregate(
        initializer: impl Fn() -> A + Send + Sync + 'static,
        aggregator: impl Fn(&K, V, A) -> A + Send + Sync + 'static,
    ) -> Self {
        let initializer = Arc::new(initializer);
        let init = initializer.clone();
        AggregateFold {
            fold: aggregate_fold(move || init(), aggregator),
            initial: Some(initializer),
        }
    }

    /// The aggregate a record folds into: the key's (or window's) `current`
    /// one, or else the initial aggregate (`None` for reduce).
    pub(crate) fn start(&self, current: Option<A>) -> Option<A> {
        current.or_else(|| self.initial.as_ref().map(|initial| initial()))
    }
}

/// How a table aggregation takes an old value back out.
pub(crate) type Unfold<K, V, A> = Arc<dyn Fn(&K, V, A) -> A + Send + Sync>;

/// Combines two values of a key (a reduce).
pub(crate) type Reducer<V> = Arc<dyn Fn(V, V) -> V + Send + Sync>;

/// `count`'s fold.
pub(crate) fn count_fold<K, V>() -> Fold<K, V, i64> {
    Arc::new(|_, _, count| count.unwrap_or(0) + 1)
}

/// `reduce`'s fold: the first value, then the reducer.
pub(crate) fn reduce_fold<K, V: 'static>(reducer: Reducer<V>) -> Fold<K, V, V> {
    Arc::new(move |_, value, agg| match agg {
        Some(agg) => reducer(agg, value),
        None => value,
    })
}

/// `aggregate`'s fold: the aggregator over the aggregate so far, or over
/// `initializer()` for a key's first value.
pub(crate) fn aggregate_fold<K, V, A>(
    initializer: impl Fn() -> A + Send + Sync + 'static,
    aggregator: impl Fn(&K, V, A) -> A + Send + Sync + 'static,
) -> Fold<K, V, A> {
    Arc::new(move |key, value, agg| aggregator(key, value, agg.unwrap_or_else(&initializer)))
}
