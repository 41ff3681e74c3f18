//! Windowed aggregations, whatever their windows. [`WindowedStream`] is
//! what the time-, sliding- and session-windowed streams are made of: count,
//! reduce and aggregate, the emit strategy and the late-record topic,
//! written once. [`WindowKind`] is what a kind of windows adds to it: its
//! checks, its store, its key serde and its processor. The windowed
//! cogroups ([`cogrouped`]) use the same kinds.

pub(crate) mod cogrouped;
pub(crate) mod session;
pub(crate) mod time;

use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

use kstreams_record::{I64Serde, SharedSerde};
use kstreams_state::{StoreBuilder, Windowed};
use kstreams_time::EmitStrategy;

use crate::handles::state::SharedState;
use crate::handles::types::{KGroupedStream, KTable, OldValues, WindowInfo, WindowedStream};
use crate::materialized::{add_store, StoreSpec};
use crate::operators::forwarder::OldValuesFlag;
use crate::operators::getters::no_getter;
use crate::operators::late_records::LateRecordSink;
use crate::operators::window_output::WindowedSetup;
use crate::operators::Reducer;
use crate::options::IntoName;
use crate::{Materialized, Named, Topology, TopologyError};

/// What a kind of windows (time, sliding, session) adds to the windowed
/// aggregation they share.
pub(crate) trait WindowKind: Clone + 'static {
    /// How records fold into a window's aggregate: a fold for time
    /// windows; a fold, a merge and an initializer for sessions.
    type Fns<K: 'static, V: 'static, A: 'static>: Clone + Send + Sync + 'static;
    /// The store builder of the aggregates.
    type Store<K: 'static, A: Clone + 'static>: StoreBuilder;

    /// How long after a window's end stream time must pass before its
    /// result is final (`suppress(until_window_closes)`): the grace period,
    /// and for sessions the inactivity gap too, since a record within the
    /// gap after a session's end still merges into it (Kafka Streams'
    /// `GraphGraceSearchUtil`).
    fn close_delay_ms(&self) -> i64;
    /// The windows' own checks (size, grace, ...), as a message.
    fn validate(&self) -> Result<(), String>;
    /// The store of the aggregates, kept as long as the windows need.
    fn store<K: 'static, A: Clone + 'static>(
        &self,
        spec: &StoreSpec<K, A>,
    ) -> Result<Self::Store<K, A>, TopologyError>;
    /// The serde of the result table's windowed keys.
    fn key_serde<K: 'static>(&self, key_serde: SharedSerde<K>) -> SharedSerde<Windowed<K>>;
    /// The functions of `count`.
    fn count<K: 'static, V: 'static>() -> Self::Fns<K, V, i64>;
    /// The functions of `reduce`.
    fn reduce<K: 'static, V: 'static>(reducer: Reducer<V>) -> Self::Fns<K, V, V>;
    /// Adds the aggregation processor under `parent`.
    fn add_processor<K: Clone + 'static, V: Clone + 'static, A: Clone + 'static>(
        &self,
        topology: &mut Topology,
        name: String,
        parent: &str,
        fns: Self::Fns<K, V, A>,
        setup: WindowedSetup<K, V>,
    ) -> Result<usize, TopologyError>;
}

/// The methods a windowed grouped stream has whatever its windows (emit
/// strategy, late-record topic, count, reduce), for a handle whose field
/// `windowed` is its [`WindowedStream`]; `$unit` is what the docs call a
/// window ("window", "session"), `$reduce_doc` what `reduce` says.
macro_rules! windowed_stream_methods {
    ($handle:ident, $unit:literal, $reduce_doc:literal) => {
        #[doc = concat!(
            "Every update of a ", $unit, " (the default), or only each ", $unit,
            "'s final result once it has closed (KIP-825)."
        )]
        pub fn emit_strategy(mut self, emit: kstreams_time::EmitStrategy) -> Self {
            self.windowed.emit = emit;
            self
        }

        #[doc = concat!(
            "Besides dropping and counting records that arrive after their ", $unit,
            " closed, writes them to `topic` with their original key, value and timestamp, ",
            "and headers saying why (see [`late_headers`](crate::late_headers))."
        )]
        pub fn late_records_to(mut self, topic: impl Into<String>) -> Self {
            self.windowed.late_topic = Some(topic.into());
            self
        }

        #[doc = concat!("The number of records per key and ", $unit, ".")]
        pub fn count(&self) -> KTable<Windowed<K>, i64> {
            self.count_with(None, Materialized::new())
        }

        #[doc = concat!("[`", stringify!($handle), "::count`] with a processor name and a store.")]
        pub fn count_with(
            &self,
            named: impl IntoName,
            materialized: Materialized<K, i64>,
        ) -> KTable<Windowed<K>, i64> {
            self.windowed.count(named, materialized)
        }

        #[doc = $reduce_doc]
        pub fn reduce(
            &self,
            reducer: impl Fn(V, V) -> V + Send + Sync + 'static,
        ) -> KTable<Windowed<K>, V> {
            self.reduce_with(reducer, None, Materialized::new())
        }

        #[doc = concat!("[`", stringify!($handle), "::reduce`] with a processor name and a store.")]
        pub fn reduce_with(
            &self,
            reducer: impl Fn(V, V) -> V + Send + Sync + 'static,
            named: impl IntoName,
            materialized: Materialized<K, V>,
        ) -> KTable<Windowed<K>, V> {
            self.windowed.reduce(reducer, named, materialized)
        }
    };
}
pub(crate) use windowed_stream_methods;

impl<K: Clone + 'static, V: Clone + 'static, W: WindowKind> WindowedStream<K, V, W> {
    pub(crate) fn new(grouped: KGroupedStream<K, V>, windows: W) -> Self {
        WindowedStream {
            grouped,
            windows,
            emit: EmitStrategy::default(),
            late_topic: None,
        }
    }

    /// The number of records per key and window.
    pub(crate) fn count(
        &self,
        named: impl IntoName,
        materialized: Materialized<K, i64>,
    ) -> KTable<Windowed<K>, i64> {
        self.aggregate(
            "KSTREAM-AGGREGATE-",
            W::count(),
            named,
            materialized,
            Some(Arc::new(I64Serde)),
        )
    }

    /// The values of a key and window combined with `reducer`.
    pub(crate) fn reduce(
        &self,
        reducer: impl Fn(V, V) -> V + Send + Sync + 'static,
        named: impl IntoName,
        materialized: Materialized<K, V>,
    ) -> KTable<Windowed<K>, V> {
        let value_serde = self.grouped.value_serde.clone();
        let fns = W::reduce(Arc::new(reducer));
        self.aggregate("KSTREAM-REDUCE-", fns, named, materialized, value_serde)
    }

    /// Adds the aggregation (processor `prefix`...) and its store; the
    /// result table is keyed by window.
    pub(crate) fn aggregate<A: Clone + 'static>(
        &self,
        prefix: &str,
        fns: W::Fns<K, V, A>,
        named: impl IntoName,
        materialized: Materialized<K, A>,
        default_value_serde: Option<SharedSerde<A>>,
    ) -> KTable<Windowed<K>, A> {
        let state = self.grouped.stream.state.clone();
        let mut s = state.borrow_mut();
        let spec = StoreSpec::settle(
            materialized,
            || s.new_name(&format!("{prefix}STATE-STORE-")),
            self.grouped.key_serde.clone(),
            default_value_serde,
        );
        let name = s.name_or_generate(named.into_name().map(|Named(n)| n), prefix);
        let flag: OldValuesFlag = Arc::default();
        let mut table = windowed_table(
            &state,
            name.clone(),
            self.windows.close_delay_ms(),
            flag.clone(),
        );
        let checked = self
            .windows
            .validate()
            .map_err(|message| TopologyError::InvalidOperator {
                operator: name.clone(),
                message,
            });
        let parts = spec.and_then(|spec| {
            let input = self.grouped.input(&mut s, &spec.name)?;
            let late = self.late_sink(&spec)?;
            Ok((spec, input, late))
        });
        let Some((spec, input, late)) = s.record(checked.and(parts)) else {
            return table;
        };
        let Some(builder) = s.record(self.windows.store(&spec)) else {
            return table;
        };
        let setup = WindowedSetup {
            emit: self.emit,
            store_name: spec.name.clone(),
            send_old: flag,
            late,
        };
        let added =
            self.windows
                .add_processor(&mut s.topology, name.clone(), &input.node, fns, setup);
        s.record(added);
        let added = add_store(&mut s.topology, builder, &name);
        s.record(added);
        set_windowed_store(&mut table, &spec, self.windows.clone());
        table
    }

    /// Where late records go besides the dropped-records count, if the
    /// user chose a topic: written with the store's key serde and the
    /// stream's (or the built-in) value serde.
    fn late_sink<A>(
        &self,
        spec: &StoreSpec<K, A>,
    ) -> Result<Option<LateRecordSink<K, V>>, TopologyError> {
        let Some(topic) = self.late_topic.clone() else {
            return Ok(None);
        };
        let value_serde = self
            .grouped
            .value_serde
            .clone()
            .or_else(kstreams_record::builtin_serde::<V>)
            .ok_or_else(|| TopologyError::MissingSerde {
                store: topic.clone(),
                part: "value",
                type_name: std::any::type_name::<V>(),
            })?;
        Ok(Some(LateRecordSink {
            topic,
            key_serde: spec.key_serde.clone(),
            value_serde,
        }))
    }
}

/// The table a windowed aggregation returns, before its store is known.
pub(crate) fn windowed_table<K, A>(
    state: &SharedState,
    node: String,
    close_delay_ms: i64,
    flag: OldValuesFlag,
) -> KTable<Windowed<K>, A> {
    KTable {
        state: state.clone(),
        node,
        store: Arc::new(OnceLock::new()),
        key_serde: None,
        value_serde: None,
        old_values: OldValues::own(flag),
        getter: no_getter(),
        window: Some(WindowInfo { close_delay_ms }),
        types: PhantomData,
    }
}

/// Gives a windowed table its store and the serdes of its windowed keys and
/// values.
pub(crate) fn set_windowed_store<K: 'static, A: 'static, W: WindowKind>(
    table: &mut KTable<Windowed<K>, A>,
    spec: &StoreSpec<K, A>,
    windows: W,
) {
    let _ = table.store.set(spec.name.clone());
    table.key_serde = Some(windows.key_serde(spec.key_serde.clone()));
    table.value_serde = Some(spec.value_serde.clone());
}
