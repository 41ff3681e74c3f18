//! Windowed aggregations: `grouped.windowed_by(..)` with time (tumbling,
//! hopping) and session windows; count, reduce and aggregate per window;
//! grace, late records (dropped and counted, and optionally kept on a side
//! topic), and emitting every update or only final results (KIP-825).

use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

use kstreams_record::{Headers, I64Serde, Record, SharedSerde, Timestamp};
use kstreams_state::{
    SessionStoreHandle, SessionWindowedSerde, TimeWindowedSerde, TimestampedWindowStoreHandle,
    ValueAndTimestamp, Window, Windowed,
};
use kstreams_time::{EmitStrategy, FixedSizeWindows, SessionWindows, SlidingWindows, TimeWindows};

use crate::grouped::KGroupedStream;
use crate::internals::ProducedRecord;
use crate::materialized::{add_store, StoreSpec};
use crate::options::IntoName;
use crate::stateful::{sends_old, timestamped_change, CacheForwarder, Change, Fold, OldValuesFlag};
use crate::table::{KTable, OldValues, WindowInfo};
use crate::{Materialized, Named, Processor, ProcessorContext, ProcessorError, TopologyError};

/// Header names on records of the late-record side topic.
pub mod late_headers {
    /// Start of the window the record was late for (8 bytes, big-endian).
    pub const WINDOW_START: &str = "kstreams.late.window.start";
    /// End of that window.
    pub const WINDOW_END: &str = "kstreams.late.window.end";
    /// The operator's stream time when the record arrived.
    pub const STREAM_TIME: &str = "kstreams.late.stream.time";
    /// The grace period of the windows, in milliseconds.
    pub const GRACE_MS: &str = "kstreams.late.grace.ms";
    /// The aggregation (processor name) that rejected the record.
    pub const OPERATOR: &str = "kstreams.late.operator";
}

/// Where late records go besides the dropped-records count: a topic, with
/// the serdes to write them.
pub(crate) struct LateRecordSink<K, V> {
    topic: String,
    key_serde: SharedSerde<K>,
    value_serde: SharedSerde<V>,
}

impl<K, V> Clone for LateRecordSink<K, V> {
    fn clone(&self) -> Self {
        LateRecordSink {
            topic: self.topic.clone(),
            key_serde: self.key_serde.clone(),
            value_serde: self.value_serde.clone(),
        }
    }
}

/// Counts a late record, logs it, and writes it to the side topic if there
/// is one, with headers saying which window, what stream time and grace.
pub(crate) fn reject_late<K: 'static, V: 'static, KO, VO>(
    ctx: &mut ProcessorContext<'_, KO, VO>,
    sink: Option<&LateRecordSink<K, V>>,
    record: &Record<K, V>,
    window: Window,
    stream_time: Timestamp,
    grace_ms: i64,
) -> Result<(), ProcessorError> {
    ctx.record_dropped();
    log::warn!(
        "{}: dropping a late record (timestamp {}) for window [{}, {}): stream time {stream_time}, \
         grace {grace_ms} ms",
        ctx.node_name(),
        record.timestamp,
        window.start,
        window.end
    );
    let Some(sink) = sink else {
        return Ok(());
    };
    let mut headers = record.headers.clone();
    let key = sink
        .key_serde
        .serialize(&sink.topic, &mut headers, &record.key)?;
    let value = sink
        .value_serde
        .serialize(&sink.topic, &mut headers, &record.value)?;
    headers.add(late_headers::WINDOW_START, Some(window.start.to_be_bytes()));
    headers.add(late_headers::WINDOW_END, Some(window.end.to_be_bytes()));
    headers.add(late_headers::STREAM_TIME, Some(stream_time.to_be_bytes()));
    headers.add(late_headers::GRACE_MS, Some(grace_ms.to_be_bytes()));
    headers.add(late_headers::OPERATOR, Some(ctx.node_name().as_bytes()));
    ctx.send_raw(ProducedRecord {
        topic: sink.topic.clone(),
        partition: None,
        partition_key_len: None,
        key,
        value,
        timestamp: record.timestamp,
        headers,
        sink: None,
    });
    Ok(())
}

impl<K: Clone + 'static, V: Clone + 'static> KGroupedStream<K, V> {
    /// Aggregates per time window (tumbling or hopping), or in the
    /// unlimited window.
    pub fn windowed_by(&self, windows: impl Into<FixedSizeWindows>) -> TimeWindowedKStream<K, V> {
        TimeWindowedKStream {
            grouped: self.clone_grouped(),
            windows: windows.into(),
            sliding: None,
            emit: EmitStrategy::default(),
            late_topic: None,
        }
    }

    /// Aggregates per sliding window (KIP-450): one window per distinct set
    /// of records no more than the time difference apart.
    pub fn windowed_by_sliding(&self, windows: SlidingWindows) -> TimeWindowedKStream<K, V> {
        TimeWindowedKStream {
            grouped: self.clone_grouped(),
            // Unused for sliding windows; the sliding definition decides.
            windows: FixedSizeWindows::Time(TimeWindows::of_size_with_no_grace(
                std::time::Duration::from_millis(windows.time_difference_ms().max(1) as u64),
            )),
            sliding: Some(windows),
            emit: EmitStrategy::default(),
            late_topic: None,
        }
    }

    /// Aggregates per session of activity.
    pub fn windowed_by_session(&self, windows: SessionWindows) -> SessionWindowedKStream<K, V> {
        SessionWindowedKStream {
            grouped: self.clone_grouped(),
            windows,
            emit: EmitStrategy::default(),
            late_topic: None,
        }
    }

    pub(crate) fn clone_grouped(&self) -> KGroupedStream<K, V> {
        KGroupedStream {
            stream: self.stream.clone(),
            key_serde: self.key_serde.clone(),
            value_serde: self.value_serde.clone(),
            repartition_name: self.repartition_name.clone(),
            repartition_required: self.repartition_required,
        }
    }

    /// What windowed aggregations share: the store spec, the processor
    /// name, the input (repartitioned if needed) and the late-record sink.
    fn windowed_parts<A: 'static>(
        &self,
        s: &mut crate::builder::BuilderState,
        prefix: &str,
        named: Option<Named>,
        materialized: Materialized<K, A>,
        default_value_serde: Option<SharedSerde<A>>,
        late_topic: Option<String>,
    ) -> (String, Result<WindowedParts<K, V, A>, TopologyError>) {
        let spec = StoreSpec::settle(
            materialized,
            || s.new_name(&format!("{prefix}STATE-STORE-")),
            self.key_serde.clone(),
            default_value_serde,
        );
        let name = s.name_or_generate(named.map(|n| n.0), prefix);
        let parts = spec.and_then(|spec| {
            let input = self.input(s, &spec.name)?;
            let late = match late_topic {
                None => None,
                Some(topic) => {
                    let value_serde = self
                        .value_serde
                        .clone()
                        .or_else(kstreams_record::builtin_serde::<V>)
                        .ok_or_else(|| TopologyError::MissingSerde {
                            store: topic.clone(),
                            part: "value",
                            type_name: std::any::type_name::<V>(),
                        })?;
                    Some(LateRecordSink {
                        topic,
                        key_serde: spec.key_serde.clone(),
                        value_serde,
                    })
                }
            };
            Ok(WindowedParts { spec, input, late })
        });
        (name, parts)
    }
}

struct WindowedParts<K, V, A> {
    spec: StoreSpec<K, A>,
    input: crate::KStream<K, V>,
    late: Option<LateRecordSink<K, V>>,
}

pub(crate) fn windowed_table<K, A>(
    state: &crate::builder::SharedState,
    node: String,
    grace_ms: i64,
    flag: OldValuesFlag,
) -> KTable<Windowed<K>, A> {
    KTable {
        state: state.clone(),
        node,
        store: Arc::new(OnceLock::new()),
        key_serde: None,
        value_serde: None,
        old_values: OldValues::own(flag),
        getter: crate::table::no_getter(),
        window: Some(WindowInfo { grace_ms }),
        types: PhantomData,
    }
}

/// A grouped stream with time windows: Kafka Streams'
/// `TimeWindowedKStream`. The results are a table keyed by
/// [`Windowed<K>`].
pub struct TimeWindowedKStream<K, V> {
    grouped: KGroupedStream<K, V>,
    windows: FixedSizeWindows,
    sliding: Option<SlidingWindows>,
    emit: EmitStrategy,
    late_topic: Option<String>,
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
                Arc::new(move || crate::sliding::SlidingAggregate {
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
                }),
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

pub(crate) struct OpenWindowStore<K, A> {
    store: TimestampedWindowStoreHandle<K, A>,
    forwarder: Option<CacheForwarder<Windowed<K>, ValueAndTimestamp<A>>>,
}

/// Kafka Streams' `KStreamWindowAggregate`: each record updates every
/// window it falls into that has not closed (window end + grace after
/// stream time); records for closed windows are late.
pub(crate) struct WindowAggregate<K, V, A> {
    pub(crate) fold: Fold<K, V, A>,
    pub(crate) windows: FixedSizeWindows,
    pub(crate) emit: EmitStrategy,
    pub(crate) store_name: String,
    pub(crate) send_old: OldValuesFlag,
    pub(crate) late: Option<LateRecordSink<K, V>>,
    pub(crate) observed_stream_time: Timestamp,
    pub(crate) last_emitted_close: Timestamp,
    pub(crate) store: Option<OpenWindowStore<K, A>>,
}

impl<K: Clone + 'static, V: Clone + 'static, A: Clone + 'static>
    Processor<K, V, Windowed<K>, Change<A>> for WindowAggregate<K, V, A>
{
    fn init(
        &mut self,
        ctx: &mut ProcessorContext<'_, Windowed<K>, Change<A>>,
    ) -> Result<(), ProcessorError> {
        let store: TimestampedWindowStoreHandle<K, A> = ctx.get_state_store(&self.store_name)?;
        // Final results are read back from the store when windows close;
        // nothing is forwarded on flush.
        let forwarder = match self.emit {
            EmitStrategy::OnWindowUpdate => {
                let send_old = sends_old(&self.send_old);
                let forwarder =
                    CacheForwarder::attach(|l| store.borrow_mut().set_flush_listener(l, send_old));
                Some(forwarder)
            }
            EmitStrategy::OnWindowClose => None,
        };
        self.store = Some(OpenWindowStore { store, forwarder });
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, Windowed<K>, Change<A>>,
        record: Record<K, V>,
    ) -> Result<(), ProcessorError> {
        let timestamp = record.timestamp;
        self.observed_stream_time = self.observed_stream_time.max(timestamp);
        let grace = self.windows.grace_ms();
        let close_time = self.observed_stream_time - grace;
        if self.emit == EmitStrategy::OnWindowClose {
            // Before this record's writes: a write can advance the store's
            // retention past windows that close with this very record. The
            // windows written below are open, so the output is the same.
            self.emit_closed(ctx, close_time, &record.headers)?;
        }
        let open = self.store.as_ref().ok_or("window store not open")?;
        for (start, end) in self.windows.windows_for(timestamp) {
            let window = Window::new(start, end);
            if end <= close_time {
                reject_late(
                    ctx,
                    self.late.as_ref(),
                    &record,
                    window,
                    self.observed_stream_time,
                    grace,
                )?;
                continue;
            }
            let old = open.store.borrow().fetch(&record.key, start)?;
            let (old_agg, new_ts) = match old {
                Some(o) => (Some(o.value), timestamp.max(o.timestamp)),
                None => (None, timestamp),
            };
            let new_agg = (self.fold)(&record.key, record.value.clone(), old_agg.clone());
            open.store.borrow_mut().put(
                record.key.clone(),
                Some(ValueAndTimestamp::make(new_agg.clone(), new_ts)),
                start,
            )?;
            match &open.forwarder {
                Some(f) if f.caching() => f.drain(ctx, timestamped_change)?,
                Some(_) => {
                    let old_agg = if sends_old(&self.send_old) {
                        old_agg
                    } else {
                        None
                    };
                    ctx.forward(Record {
                        key: Windowed::new(record.key.clone(), window),
                        value: Change::new(Some(new_agg), old_agg),
                        timestamp: new_ts,
                        headers: record.headers.clone(),
                    })?;
                }
                None => {}
            }
        }
        Ok(())
    }

    fn flush(
        &mut self,
        ctx: &mut ProcessorContext<'_, Windowed<K>, Change<A>>,
    ) -> Result<(), ProcessorError> {
        if let Some(OpenWindowStore {
            store,
            forwarder: Some(f),
        }) = &self.store
        {
            if f.caching() {
                store.borrow_mut().flush_cache()?;
                f.drain(ctx, timestamped_change)?;
            }
        }
        Ok(())
    }
}

impl<K: Clone + 'static, V: Clone + 'static, A: Clone + 'static> WindowAggregate<K, V, A> {
    /// Forwards each window that closed since the last call (its end in
    /// `(last close, close_time]`), by window start.
    fn emit_closed(
        &mut self,
        ctx: &mut ProcessorContext<'_, Windowed<K>, Change<A>>,
        close_time: Timestamp,
        headers: &Headers,
    ) -> Result<(), ProcessorError> {
        if let Some(committed) = ctx.last_emitted_close(&self.store_name) {
            self.last_emitted_close = self.last_emitted_close.max(committed);
        }
        if close_time <= self.last_emitted_close {
            return Ok(());
        }
        let size = self.windows.size_ms();
        let from = self
            .last_emitted_close
            .saturating_sub(size)
            .saturating_add(1)
            .max(0);
        let to = close_time.saturating_sub(size);
        self.last_emitted_close = close_time;
        ctx.set_last_emitted_close(&self.store_name, close_time);
        if to < from {
            return Ok(());
        }
        let open = self.store.as_ref().ok_or("window store not open")?;
        let mut closed = open
            .store
            .borrow()
            .fetch_all(from, to)?
            .collect::<Result<Vec<_>, _>>()?;
        closed.sort_by_key(|(windowed, _)| windowed.window.start);
        for (windowed, value) in closed {
            ctx.forward(Record {
                key: windowed,
                value: Change::new(Some(value.value), None),
                timestamp: value.timestamp,
                headers: headers.clone(),
            })?;
        }
        Ok(())
    }
}

/// A grouped stream with session windows: Kafka Streams'
/// `SessionWindowedKStream`.
pub struct SessionWindowedKStream<K, V> {
    grouped: KGroupedStream<K, V>,
    windows: SessionWindows,
    emit: EmitStrategy,
    late_topic: Option<String>,
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

/// Merges the aggregates of two sessions.
pub(crate) type SessionMerger<K, A> = Arc<dyn Fn(&K, A, A) -> A + Send + Sync>;

/// What a session aggregation is made of.
pub(crate) struct SessionFns<K, V, A> {
    fold: Fold<K, V, A>,
    merge: SessionMerger<K, A>,
    initial: Option<SessionInitializer<A>>,
}

/// The aggregate a session starts from before sessions are merged into it
/// (none for reduce).
pub(crate) type SessionInitializer<A> = Arc<dyn Fn() -> A + Send + Sync>;

pub(crate) struct OpenSessionStore<K, A> {
    store: SessionStoreHandle<K, A>,
    forwarder: Option<CacheForwarder<Windowed<K>, A>>,
}

/// A session change as a record: timestamped with the session's end.
fn session_change<K, A>(
    change: kstreams_state::CachedChange<Windowed<K>, A>,
) -> Record<Windowed<K>, Change<A>> {
    let timestamp = change.key.window.end;
    Record {
        key: change.key,
        value: Change::new(change.new_value, change.old_value),
        timestamp,
        headers: change.headers,
    }
}

/// Kafka Streams' `KStreamSessionWindowAggregate`: a record starts a
/// session or extends (and merges) the sessions within the gap of it.
pub(crate) struct SessionAggregate<K, V, A> {
    pub(crate) fold: Fold<K, V, A>,
    pub(crate) merge: SessionMerger<K, A>,
    pub(crate) initial: Option<SessionInitializer<A>>,
    pub(crate) windows: SessionWindows,
    pub(crate) emit: EmitStrategy,
    pub(crate) store_name: String,
    pub(crate) send_old: OldValuesFlag,
    pub(crate) late: Option<LateRecordSink<K, V>>,
    pub(crate) observed_stream_time: Timestamp,
    pub(crate) last_emitted_close: Timestamp,
    pub(crate) store: Option<OpenSessionStore<K, A>>,
}

impl<K: Clone + 'static, V: Clone + 'static, A: Clone + 'static> SessionAggregate<K, V, A> {
    fn forward_update(
        &self,
        ctx: &mut ProcessorContext<'_, Windowed<K>, Change<A>>,
        key: Windowed<K>,
        old: Option<A>,
        new: Option<A>,
    ) -> Result<(), ProcessorError> {
        let Some(open) = &self.store else {
            return Ok(());
        };
        match &open.forwarder {
            Some(f) if f.caching() => Ok(f.drain(ctx, session_change)?),
            Some(_) => {
                let old = if sends_old(&self.send_old) { old } else { None };
                let timestamp = key.window.end;
                ctx.forward(Record {
                    key,
                    value: Change::new(new, old),
                    timestamp,
                    headers: Headers::new(),
                })?;
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn emit_closed(
        &mut self,
        ctx: &mut ProcessorContext<'_, Windowed<K>, Change<A>>,
        close_time: Timestamp,
        headers: &Headers,
    ) -> Result<(), ProcessorError> {
        if let Some(committed) = ctx.last_emitted_close(&self.store_name) {
            self.last_emitted_close = self.last_emitted_close.max(committed);
        }
        if close_time <= self.last_emitted_close {
            return Ok(());
        }
        let from = self.last_emitted_close;
        self.last_emitted_close = close_time;
        ctx.set_last_emitted_close(&self.store_name, close_time);
        let open = self.store.as_ref().ok_or("session store not open")?;
        // Sessions that ended in [last close, close time): closed now.
        let mut closed = open
            .store
            .borrow()
            .find_sessions_key_range(None, None, from.max(0), close_time)?
            .collect::<Result<Vec<_>, _>>()?;
        closed.retain(|(w, _)| w.window.end >= from && w.window.end < close_time);
        closed.sort_by_key(|(w, _)| w.window.end);
        for (windowed, value) in closed {
            let timestamp = windowed.window.end;
            ctx.forward(Record {
                key: windowed,
                value: Change::new(Some(value), None),
                timestamp,
                headers: headers.clone(),
            })?;
        }
        Ok(())
    }
}

impl<K: Clone + 'static, V: Clone + 'static, A: Clone + 'static>
    Processor<K, V, Windowed<K>, Change<A>> for SessionAggregate<K, V, A>
{
    fn init(
        &mut self,
        ctx: &mut ProcessorContext<'_, Windowed<K>, Change<A>>,
    ) -> Result<(), ProcessorError> {
        let store: SessionStoreHandle<K, A> = ctx.get_state_store(&self.store_name)?;
        let forwarder = match self.emit {
            EmitStrategy::OnWindowUpdate => {
                let send_old = sends_old(&self.send_old);
                Some(CacheForwarder::attach(|l| {
                    store.borrow_mut().set_flush_listener(l, send_old)
                }))
            }
            EmitStrategy::OnWindowClose => None,
        };
        self.store = Some(OpenSessionStore { store, forwarder });
        Ok(())
    }

    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, Windowed<K>, Change<A>>,
        record: Record<K, V>,
    ) -> Result<(), ProcessorError> {
        let timestamp = record.timestamp;
        self.observed_stream_time = self.observed_stream_time.max(timestamp);
        let grace = self.windows.grace_ms();
        let gap = self.windows.inactivity_gap_ms();
        // A session is closed once no accepted record can reach it any
        // more: a record within the gap after its end would still merge
        // into it (Kafka Streams since KAFKA-12718).
        let close_time = self.observed_stream_time - grace - gap;
        if self.emit == EmitStrategy::OnWindowClose {
            // Before this record's writes, which may expire closed sessions.
            self.emit_closed(ctx, close_time, &record.headers)?;
        }
        let store = self
            .store
            .as_ref()
            .ok_or("session store not open")?
            .store
            .clone();
        let overlapping = store
            .borrow()
            .find_sessions(
                &record.key,
                timestamp.saturating_sub(gap),
                timestamp.saturating_add(gap),
            )?
            .collect::<Result<Vec<_>, _>>()?;
        let mut merged_window = Window::new(timestamp, timestamp);
        let mut agg: Option<A> = self.initial.as_ref().map(|init| init());
        for (session, value) in &overlapping {
            agg = Some(match agg {
                None => value.clone(),
                Some(a) => (self.merge)(&record.key, a, value.clone()),
            });
            merged_window = Window::new(
                merged_window.start.min(session.window.start),
                merged_window.end.max(session.window.end),
            );
        }
        if merged_window.end < close_time {
            return reject_late(
                ctx,
                self.late.as_ref(),
                &record,
                merged_window,
                self.observed_stream_time,
                grace,
            );
        }
        if merged_window != Window::new(timestamp, timestamp) {
            for (session, value) in overlapping {
                store.borrow_mut().remove(&session)?;
                self.forward_update(ctx, session, Some(value), None)?;
            }
        }
        let new_agg = (self.fold)(&record.key, record.value, agg);
        let key = Windowed::new(record.key, merged_window);
        store.borrow_mut().put(key.clone(), Some(new_agg.clone()))?;
        self.forward_update(ctx, key, None, Some(new_agg))?;
        Ok(())
    }

    fn flush(
        &mut self,
        ctx: &mut ProcessorContext<'_, Windowed<K>, Change<A>>,
    ) -> Result<(), ProcessorError> {
        if let Some(OpenSessionStore {
            store,
            forwarder: Some(f),
        }) = &self.store
        {
            if f.caching() {
                store.borrow_mut().flush_cache()?;
                f.drain(ctx, session_change)?;
            }
        }
        Ok(())
    }
}
