//! The handle types, fields and all, apart from their methods.
//!
//! Each handle's methods return other handles (a stream groups into a
//! grouped stream, which aggregates into a table, which turns back into a
//! stream), so a file holding both a handle and its methods would import
//! the files of the handles it returns, and they would import it back.
//! Here the types import no handle's methods; each file of methods
//! (`kstream`, `ktable`, `grouped_stream`, ...) imports these types and
//! never another file of methods.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use kstreams_record::SharedSerde;
use kstreams_time::{EmitStrategy, FixedSizeWindows, SessionWindows, SlidingWindows};

use crate::handles::state::{BuilderState, SharedState};
use crate::operators::forwarder::OldValuesFlag;
use crate::operators::getters::TableGetter;
use crate::operators::session_aggregate::{SessionInitializer, SessionMerger};
use crate::operators::stateless::Branch;
use crate::operators::LazyStoreName;
use crate::{GlobalStore, Grouped, TopologyError};

/// A stream of records with keys `K` and values `V`: Kafka Streams'
/// `KStream`. Each operator adds a node to the builder's topology and
/// returns a handle on it; a handle may be used many times (fan-out).
pub struct KStream<K, V> {
    pub(crate) state: SharedState,
    pub(crate) node: String,
    /// Serdes known for the keys and values here (from the source, kept
    /// by operators that do not change them); stateful operators use them
    /// when not given others.
    pub(crate) key_serde: Option<SharedSerde<K>>,
    pub(crate) value_serde: Option<SharedSerde<V>>,
    /// Whether an operator upstream may have changed the key, so that a
    /// grouping must go through a repartition topic (Kafka Streams'
    /// `repartitionRequired`).
    pub(crate) repartition_required: bool,
    pub(crate) types: PhantomData<fn() -> (K, V)>,
}

impl<K, V> Clone for KStream<K, V> {
    fn clone(&self) -> Self {
        Self {
            state: self.state.clone(),
            node: self.node.clone(),
            key_serde: self.key_serde.clone(),
            value_serde: self.value_serde.clone(),
            repartition_required: self.repartition_required,
            types: PhantomData,
        }
    }
}

/// A table: the latest value of each key, updated by a changelog stream.
/// Kafka Streams' `KTable`. Operators on a table see each update with the
/// value it replaced (when needed), so that aggregations and joins can take
/// the old value back out.
pub struct KTable<K, V> {
    pub(crate) state: SharedState,
    pub(crate) node: String,
    /// The store holding this table's values, once materialized.
    pub(crate) store: LazyStoreName,
    pub(crate) key_serde: Option<SharedSerde<K>>,
    pub(crate) value_serde: Option<SharedSerde<V>>,
    pub(crate) old_values: OldValues,
    /// How to read this table from another operator (joins).
    pub(crate) getter: TableGetter<K, V>,
    pub(crate) window: Option<WindowInfo>,
    pub(crate) types: PhantomData<fn() -> (K, V)>,
}

impl<K, V> Clone for KTable<K, V> {
    fn clone(&self) -> Self {
        KTable {
            state: self.state.clone(),
            node: self.node.clone(),
            store: self.store.clone(),
            key_serde: self.key_serde.clone(),
            value_serde: self.value_serde.clone(),
            old_values: self.old_values.clone(),
            getter: self.getter.clone(),
            window: self.window,
            types: PhantomData,
        }
    }
}

/// What a windowed table knows of its windows, for `suppress`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WindowInfo {
    /// A window is final once stream time reaches its end plus this delay
    /// (grace; for sessions, inactivity gap + grace).
    pub close_delay_ms: i64,
}

/// How a table turns on old values: for a source table it materializes
/// the store (when forced), for a derived table it asks upstream.
#[derive(Clone)]
pub(crate) struct OldValues {
    pub enable: Rc<dyn Fn(bool) -> bool>,
}

/// A stream grouped by key, ready to aggregate: Kafka Streams'
/// `KGroupedStream`.
pub struct KGroupedStream<K, V> {
    pub(crate) stream: KStream<K, V>,
    pub(crate) key_serde: Option<SharedSerde<K>>,
    pub(crate) value_serde: Option<SharedSerde<V>>,
    pub(crate) repartition_name: Option<String>,
    pub(crate) repartition_required: bool,
}

/// A table grouped by a new key, ready to aggregate with an adder and a
/// subtractor: Kafka Streams' `KGroupedTable`.
pub struct KGroupedTable<K, V> {
    pub(crate) state: SharedState,
    pub(crate) node: String,
    pub(crate) grouped: Grouped<K, V>,
}

/// A table of a whole topic, on every instance: Kafka Streams'
/// `GlobalKTable`. Join streams with it by a key taken from each record,
/// without repartitioning and without co-partitioning.
pub struct GlobalKTable<K, V> {
    pub(crate) store: Arc<GlobalStore>,
    pub(crate) key_serde: SharedSerde<K>,
    pub(crate) value_serde: SharedSerde<V>,
    pub(crate) types: PhantomData<fn() -> (K, V)>,
}

impl<K, V> Clone for GlobalKTable<K, V> {
    fn clone(&self) -> Self {
        GlobalKTable {
            store: self.store.clone(),
            key_serde: self.key_serde.clone(),
            value_serde: self.value_serde.clone(),
            types: PhantomData,
        }
    }
}

/// A split in progress: Kafka Streams' `BranchedKStream`.
pub struct BranchedKStream<K, V> {
    pub(crate) split: KStream<K, V>,
    pub(crate) prefix: String,
    pub(crate) spec: Arc<Mutex<SplitSpec<K, V>>>,
    pub(crate) next_index: usize,
    pub(crate) result: HashMap<String, KStream<K, V>>,
}

/// The branches of a split, filled in as `branch` is called.
pub(crate) struct SplitSpec<K, V> {
    pub(crate) branches: Arc<Vec<Branch<K, V>>>,
    pub(crate) default_child: Option<String>,
}

impl<K, V> Default for SplitSpec<K, V> {
    fn default() -> Self {
        Self {
            branches: Arc::new(Vec::new()),
            default_child: None,
        }
    }
}

/// Several grouped streams with one aggregate: Kafka Streams'
/// `CogroupedKStream`.
pub struct CogroupedKStream<K, A> {
    pub(crate) state: SharedState,
    pub(crate) key_serde: Option<SharedSerde<K>>,
    pub(crate) inputs: Vec<Arc<dyn CogroupInput<K, A>>>,
}

/// The aggregation a cogroup builds, for each of its inputs.
#[derive(Clone)]
pub(crate) enum CogroupKind<K, A> {
    Plain,
    Windowed(TimeWindowing),
    Session(SessionWindows, SessionMerger<K, A>),
}

/// One grouped stream of a cogroup, its value type hidden.
pub(crate) trait CogroupInput<K, A> {
    /// The node the aggregation reads: the stream, or its repartition
    /// topic's source.
    fn input_node(&self, s: &mut BuilderState, store: &str) -> Result<String, TopologyError>;

    /// Adds this input's aggregation processor.
    #[allow(clippy::too_many_arguments)]
    fn add_aggregation(
        &self,
        s: &mut BuilderState,
        name: String,
        parent: &str,
        store: &str,
        initializer: SessionInitializer<A>,
        kind: &CogroupKind<K, A>,
        flag: OldValuesFlag,
    );
}

/// A grouped stream with windows of kind `W`, with the emit strategy and the
/// late-record topic chosen so far.
pub(crate) struct WindowedStream<K, V, W> {
    pub(crate) grouped: KGroupedStream<K, V>,
    pub(crate) windows: W,
    pub(crate) emit: EmitStrategy,
    pub(crate) late_topic: Option<String>,
}

/// A grouped stream with time windows: Kafka Streams'
/// `TimeWindowedKStream`. The results are a table keyed by
/// [`Windowed<K>`](kstreams_state::Windowed).
pub struct TimeWindowedKStream<K, V> {
    pub(crate) windowed: WindowedStream<K, V, TimeWindowing>,
}

/// The windows of a [`TimeWindowedKStream`]: fixed-size (tumbling, hopping,
/// unlimited) or sliding.
#[derive(Clone)]
pub(crate) enum TimeWindowing {
    Fixed(FixedSizeWindows),
    Sliding(SlidingWindows),
}

/// A grouped stream with session windows: Kafka Streams'
/// `SessionWindowedKStream`.
pub struct SessionWindowedKStream<K, V> {
    pub(crate) windowed: WindowedStream<K, V, SessionWindows>,
}

/// A cogroup with time windows: fixed-size (tumbling, hopping, unlimited,
/// the application's own) or sliding.
pub struct TimeWindowedCogroupedKStream<K, A> {
    pub(crate) cogrouped: CogroupedKStream<K, A>,
    pub(crate) windows: TimeWindowing,
}

/// A cogroup with session windows.
pub struct SessionWindowedCogroupedKStream<K, A> {
    pub(crate) cogrouped: CogroupedKStream<K, A>,
    pub(crate) windows: SessionWindows,
}
