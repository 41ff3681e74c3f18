//! `TimeWindowedKStream`: a grouped stream with time (tumbling, hopping)
//! or sliding windows.

use std::sync::Arc;

use kstreams_record::{I64Serde, SharedSerde};
use kstreams_state::{TimeWindowedSerde, Windowed};
use kstreams_time::{EmitStrategy, FixedSizeWindows, SlidingWindows};

use crate::change::Change;
use crate::handles::grouped_stream::KGroupedStream;
use crate::handles::ktable::KTable;
use crate::handles::windowed::windowed_table;
use crate::handles::windowed::WindowedParts;
use crate::materialized::add_store;
use crate::operators::forwarder::OldValuesFlag;
use crate::operators::window_aggregate::WindowAggregate;
use crate::operators::Fold;
use crate::options::IntoName;
use crate::{Materialized, TopologyError};

/// A grouped stream with time windows: Kafka Streams'
/// `TimeWindowedKStream`. The results are a table keyed by
/// [`Windowed<K>`].
pub struct TimeWindowedKStream<K, V> {
    pub(crate) grouped: KGroupedStream<K, V>,
    pub(crate) windows: FixedSizeWindows,
    pub(crate) sliding: Option<SlidingWindows>,
    pub(crate) emit: EmitStrategy,
    pub(crate) late_topic: Option<String>,
}

impl<K: Clone + 'static, V: Clone + 'static> TimeWindowedKStream<K, V> {
    /// Every update of a window (the default), or only each window's final
    /// result once it has closed (KIP-825).
    pub fn emit_strategy(mut self, emit: EmitStrategy) -> Self {
        self.emit = emit;
        self
    }

    /// Besides dropping and counting records that arrive after their
    /// window closed, writes them to `topic` with their original key,
    /// value and timestamp, and headers saying why (see [`late_headers`]).
    pub fn late_records_to(mut self, topic: impl Into<String>) -> Self {
        self.late_topic = Some(topic.into());
        self
    }

    /// The number of records per key and window.
    pub fn count(&self) -> KTable<Windowed<K>, i64> {
        self.count_with(None, Materialized::new())
    }

    /// [`TimeWindowedKStream::count`] with a processor name and a store.
    pub fn count_with(
        &self,
        named: impl IntoName,
        materialized: Materialized<K, i64>,
    ) -> KTable<Windowed<K>, i64> {
        let fold: Fold<K, V, i64> = Arc::new(|_, _, count| count.unwrap_or(0) + 1);
        self.aggregate_into(
            "KSTREAM-AGGREGATE-",
            fold,
            named,
            materialized,
            Some(Arc::new(I64Serde)),
        )
    }

    /// Combines the values of a key in a window with `reducer`.
    pub fn reduce(
        &self,
        reducer: impl Fn(V, V) -> V + Send + Sync + 'static,
    ) -> KTable<Windowed<K>, V> {
        self.reduce_with(reducer, None, Materialized::new())
    }

    /// [`TimeWindowedKStream::reduce`] with a processor name and a store.
    pub fn reduce_with(
        &self,
        reducer: impl Fn(V, V) -> V + Send + Sync + 'static,
        named: impl IntoName,
        materialized: Materialized<K, V>,
    ) -> KTable<Windowed<K>, V> {
        let fold: Fold<K, V, V> = Arc::new(move |_, value, agg| match agg {
            Some(agg) => reducer(agg, value),
            None => value,
        });
        let value_serde = self.grouped.value_serde.clone();
        self.aggregate_into("KSTREAM-REDUCE-", fold, named, materialized, value_serde)
    }

    /// Folds the values of a key in a window into an aggregate starting at
    /// `initializer()`; the aggregate's serde comes from `materialized` or
    /// is the built-in one of `A`.
    pub fn aggregate<A: Clone + 'static>(
        &self,
        initializer: impl Fn() -> A + Send + Sync + 'static,
        aggregator: impl Fn(&K, V, A) -> A + Send + Sync + 'static,
    ) -> KTable<Windowed<K>, A> {
        self.aggregate_with(initializer, aggregator, None, Materialized::new())
    }

    /// [`TimeWindowedKStream::aggregate`] with a processor name and a store.
    pub fn aggregate_with<A: Clone + 'static>(
        &self,
        initializer: impl Fn() -> A + Send + Sync + 'static,
        aggregator: impl Fn(&K, V, A) -> A + Send + Sync + 'static,
        named: impl IntoName,
        materialized: Materialized<K, A>,
    ) -> KTable<Windowed<K>, A> {
        let fold: Fold<K, V, A> = Arc::new(move |key, value, agg| {
            aggregator(key, value, agg.unwrap_or_else(&initializer))
        });
        self.aggregate_into("KSTREAM-AGGREGATE-", fold, named, materialized, None)
    }

    fn aggregate_into<A: Clone + 'static>(
        &self,
        prefix: &str,
        fold: Fold<K, V, A>,
        named: impl IntoName,
        materialized: Materialized<K, A>,
        default_value_serde: Option<SharedSerde<A>>,
    ) -> KTable<Windowed<K>, A> {
        let state = self.grouped.stream.state.clone();
        let mut s = state.borrow_mut();
        let windows = self.windows;
        let (name, parts) = self.grouped.windowed_parts(
            &mut s,
            prefix,
            named.into_name(),
            materialized,
            default_value_serde,
            self.late_topic.clone(),
        );
        let flag: OldValuesFlag = Arc::default();
        if let Some(sliding) = self.sliding {
            drop(s);
            return self.sliding_into(sliding, name, parts, fold, flag);
        }
        let mut table = windowed_table(&state, name.clone(), windows.grace_ms(), flag.clone());
        let checked = windows
            .validate()
            .map_err(|e| TopologyError::InvalidOperator {
                operator: name.clone(),
                message: e.to_string(),
            });
        let Some(WindowedParts { spec, input, late }) = s.record(checked.and(parts)) else {
            return table;
        };
        let retention = spec.retention_ms(windows.retention_ms());
        let builder = retention.and_then(|r| spec.window_store(r, windows.size_ms()));
        let Some(builder) = s.record(builder) else {
            return table;
        };
        let store_name = spec.name.clone();
        let emit = self.emit;
        let added = s
            .topology
            .add_typed_processor::<K, V, Windowed<K>, Change<A>, _>(
                name.clone(),
                Arc::new(move || WindowAggregate {
                    fold: fold.clone(),
                    windows,
                    emit,
                    store_name: store_name.clone(),
                    send_old: flag.clone(),
                    late: late.clone(),
                    observed_stream_time: -1,
                    last_emitted_close: -1,
                    store: None,
                }),
                &[input.node.as_str()],
            );
        s.record(added);
        let added = add_store(&mut s.topology, builder, &name);
        s.record(added);
        let _ = table.store.set(spec.name.clone());
        table.key_serde = Some(Arc::new(TimeWindowedSerde::shared(
            spec.key_serde.clone(),
            windows.size_ms(),
        )));
        table.value_serde = Some(spec.value_serde.clone());
        table
    }
}

impl<K: Clone + 'static, V: Clone + 'static> TimeWindowedKStream<K, V> {
    fn sliding_into<A: Clone + 'static>(
        &self,
        windows: SlidingWindows,
        name: String,
        parts: Result<WindowedParts<K, V, A>, TopologyError>,
        fold: Fold<K, V, A>,
        flag: OldValuesFlag,
    ) -> KTable<Windowed<K>, A> {
        let state = self.grouped.stream.state.clone();
        let mut s = state.borrow_mut();
        let mut table = windowed_table(&state, name.clone(), windows.grace_ms(), flag.clone());
        let invalid = |message: String| TopologyError::InvalidOperator {
            operator: name.clone(),
            message,
        };
        let checked = windows.validate().map_err(|e| invalid(e.to_string()));
        let Some(WindowedParts { spec, input, late }) = s.record(checked.and(parts)) else {
            return table;
        };
        let difference = windows.time_difference_ms();
        let retention = spec.retention_ms(windows.retention_ms());
        let builder = retention.and_then(|r| spec.window_store(r, difference));
        let Some(builder) = s.record(builder) else {
            return table;
        };
        let store_name = spec.name.clone();
        let emit = self.emit;
        let added = s
            .topology
            .add_typed_processor::<K, V, Windowed<K>, Change<A>, _>(
                name.clone(),
                Arc::new(
                    move || crate::operators::sliding_aggregate::SlidingAggregate {
                        fold: fold.clone(),
                        windows,
                        emit,
                        last_emitted_close: -1,
                        store_name: store_name.clone(),
                        send_old: flag.clone(),
                        late: late.clone(),
                        observed_stream_time: -1,
                        store: None,
                        forwarder: None,
                    },
                ),
                &[input.node.as_str()],
            );
        s.record(added);
        let added = add_store(&mut s.topology, builder, &name);
        s.record(added);
        let _ = table.store.set(spec.name.clone());
        table.key_serde = Some(Arc::new(TimeWindowedSerde::shared(
            spec.key_serde.clone(),
            difference,
        )));
        table.value_serde = Some(spec.value_serde.clone());
        table
    }
}
