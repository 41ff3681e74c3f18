//! `SessionWindowedKStream`: a grouped stream with session windows.

use std::sync::Arc;

use kstreams_record::{I64Serde, SharedSerde};
use kstreams_state::{SessionWindowedSerde, Windowed};
use kstreams_time::{EmitStrategy, SessionWindows};

use crate::change::Change;
use crate::handles::grouped_stream::KGroupedStream;
use crate::handles::ktable::KTable;
use crate::handles::windowed::windowed_table;
use crate::handles::windowed::WindowedParts;
use crate::materialized::add_store;
use crate::operators::forwarder::OldValuesFlag;
use crate::operators::session_aggregate::SessionAggregate;
use crate::operators::session_aggregate::SessionFns;
use crate::operators::session_aggregate::SessionInitializer;
use crate::operators::session_aggregate::SessionMerger;
use crate::operators::Fold;
use crate::options::IntoName;
use crate::{Materialized, TopologyError};

/// A grouped stream with session windows: Kafka Streams'
/// `SessionWindowedKStream`.
pub struct SessionWindowedKStream<K, V> {
    pub(crate) grouped: KGroupedStream<K, V>,
    pub(crate) windows: SessionWindows,
    pub(crate) emit: EmitStrategy,
    pub(crate) late_topic: Option<String>,
}

impl<K: Clone + 'static, V: Clone + 'static> SessionWindowedKStream<K, V> {
    /// Every update of a session (the default), or only each session's
    /// final result once it has closed (KIP-825).
    pub fn emit_strategy(mut self, emit: EmitStrategy) -> Self {
        self.emit = emit;
        self
    }

    /// Writes records that arrive after their session closed to `topic`
    /// (see [`TimeWindowedKStream::late_records_to`]).
    pub fn late_records_to(mut self, topic: impl Into<String>) -> Self {
        self.late_topic = Some(topic.into());
        self
    }

    /// The number of records per key and session.
    pub fn count(&self) -> KTable<Windowed<K>, i64> {
        self.count_with(None, Materialized::new())
    }

    /// [`SessionWindowedKStream::count`] with a processor name and a store.
    pub fn count_with(
        &self,
        named: impl IntoName,
        materialized: Materialized<K, i64>,
    ) -> KTable<Windowed<K>, i64> {
        let fold: Fold<K, V, i64> = Arc::new(|_, _, count| count.unwrap_or(0) + 1);
        let merge: SessionMerger<K, i64> = Arc::new(|_, a, b| a + b);
        self.aggregate_into(
            "KSTREAM-AGGREGATE-",
            SessionFns {
                fold,
                merge,
                initial: Some(Arc::new(|| 0)),
            },
            named,
            materialized,
            Some(Arc::new(I64Serde)),
        )
    }

    /// Combines the values of a session with `reducer` (also used to merge
    /// sessions that a record joins together).
    pub fn reduce(
        &self,
        reducer: impl Fn(V, V) -> V + Send + Sync + 'static,
    ) -> KTable<Windowed<K>, V> {
        self.reduce_with(reducer, None, Materialized::new())
    }

    /// [`SessionWindowedKStream::reduce`] with a processor name and a store.
    pub fn reduce_with(
        &self,
        reducer: impl Fn(V, V) -> V + Send + Sync + 'static,
        named: impl IntoName,
        materialized: Materialized<K, V>,
    ) -> KTable<Windowed<K>, V> {
        let reducer = Arc::new(reducer);
        let fold_reducer = reducer.clone();
        let fold: Fold<K, V, V> = Arc::new(move |_, value, agg| match agg {
            Some(agg) => fold_reducer(agg, value),
            None => value,
        });
        let merge: SessionMerger<K, V> = Arc::new(move |_, a, b| reducer(a, b));
        let value_serde = self.grouped.value_serde.clone();
        self.aggregate_into(
            "KSTREAM-REDUCE-",
            SessionFns {
                fold,
                merge,
                initial: None,
            },
            named,
            materialized,
            value_serde,
        )
    }

    /// Folds a session's values into an aggregate starting at
    /// `initializer()`; `merger` combines the aggregates of two sessions
    /// that a record joins together.
    pub fn aggregate<A: Clone + 'static>(
        &self,
        initializer: impl Fn() -> A + Send + Sync + 'static,
        aggregator: impl Fn(&K, V, A) -> A + Send + Sync + 'static,
        merger: impl Fn(&K, A, A) -> A + Send + Sync + 'static,
    ) -> KTable<Windowed<K>, A> {
        self.aggregate_with(initializer, aggregator, merger, None, Materialized::new())
    }

    /// [`SessionWindowedKStream::aggregate`] with a processor name and a
    /// store.
    pub fn aggregate_with<A: Clone + 'static>(
        &self,
        initializer: impl Fn() -> A + Send + Sync + 'static,
        aggregator: impl Fn(&K, V, A) -> A + Send + Sync + 'static,
        merger: impl Fn(&K, A, A) -> A + Send + Sync + 'static,
        named: impl IntoName,
        materialized: Materialized<K, A>,
    ) -> KTable<Windowed<K>, A> {
        let initializer = Arc::new(initializer);
        let init = initializer.clone();
        let fold: Fold<K, V, A> =
            Arc::new(move |key, value, agg| aggregator(key, value, agg.unwrap_or_else(|| init())));
        let initial: SessionInitializer<A> = initializer;
        self.aggregate_into(
            "KSTREAM-AGGREGATE-",
            SessionFns {
                fold,
                merge: Arc::new(merger),
                initial: Some(initial),
            },
            named,
            materialized,
            None,
        )
    }

    fn aggregate_into<A: Clone + 'static>(
        &self,
        prefix: &str,
        fns: SessionFns<K, V, A>,
        named: impl IntoName,
        materialized: Materialized<K, A>,
        default_value_serde: Option<SharedSerde<A>>,
    ) -> KTable<Windowed<K>, A> {
        let SessionFns {
            fold,
            merge,
            initial,
        } = fns;
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
        let Some(retention) = s.record(spec.retention_ms(windows.retention_ms())) else {
            return table;
        };
        let builder = spec.session_store(retention);
        let store_name = spec.name.clone();
        let emit = self.emit;
        let added = s
            .topology
            .add_typed_processor::<K, V, Windowed<K>, Change<A>, _>(
                name.clone(),
                Arc::new(move || SessionAggregate {
                    fold: fold.clone(),
                    merge: merge.clone(),
                    initial: initial.clone(),
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
        table.key_serde = Some(Arc::new(SessionWindowedSerde::shared(
            spec.key_serde.clone(),
        )));
        table.value_serde = Some(spec.value_serde.clone());
        table
    }
}
