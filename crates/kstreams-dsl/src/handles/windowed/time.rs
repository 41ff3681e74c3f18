//! `TimeWindowedKStream`: a grouped stream with time (tumbling, hopping)
//! or sliding windows.

use std::sync::Arc;

use kstreams_record::SharedSerde;
use kstreams_state::{TimeWindowedSerde, ValueAndTimestamp, WindowStoreBuilder, Windowed};

use crate::change::Change;
use crate::handles::types::{KTable, TimeWindowedKStream, TimeWindowing};
use crate::handles::windowed::{windowed_stream_methods, WindowKind};
use crate::materialized::StoreSpec;
use crate::operators::sliding_aggregate::SlidingAggregate;
use crate::operators::window_aggregate::WindowAggregate;
use crate::operators::window_output::WindowedSetup;
use crate::operators::{AggregateFold, Reducer};
use crate::options::IntoName;
use crate::{Materialized, Topology, TopologyError};

impl TimeWindowing {
    /// The length of a window: what its windowed keys' serde records.
    fn size_ms(&self) -> i64 {
        match self {
            TimeWindowing::Fixed(windows) => windows.size_ms(),
            TimeWindowing::Sliding(windows) => windows.time_difference_ms(),
        }
    }
}

impl WindowKind for TimeWindowing {
    type Fns<K: 'static, V: 'static, A: 'static> = AggregateFold<K, V, A>;
    type Store<K: 'static, A: Clone + 'static> = WindowStoreBuilder<K, ValueAndTimestamp<A>>;

    fn close_delay_ms(&self) -> i64 {
        match self {
            TimeWindowing::Fixed(windows) => windows.grace_ms(),
            TimeWindowing::Sliding(windows) => windows.grace_ms(),
        }
    }

    fn validate(&self) -> Result<(), String> {
        match self {
            TimeWindowing::Fixed(windows) => windows.validate(),
            TimeWindowing::Sliding(windows) => windows.validate(),
        }
        .map_err(|e| e.to_string())
    }

    fn store<K: 'static, A: Clone + 'static>(
        &self,
        spec: &StoreSpec<K, A>,
    ) -> Result<Self::Store<K, A>, TopologyError> {
        let retention = match self {
            TimeWindowing::Fixed(windows) => windows.retention_ms(),
            TimeWindowing::Sliding(windows) => windows.retention_ms(),
        };
        spec.window_store(spec.retention_ms(retention)?, self.size_ms())
    }

    fn key_serde<K: 'static>(&self, key_serde: SharedSerde<K>) -> SharedSerde<Windowed<K>> {
        Arc::new(TimeWindowedSerde::shared(key_serde, self.size_ms()))
    }

    fn count<K: 'static, V: 'static>() -> AggregateFold<K, V, i64> {
        AggregateFold::<K, V, i64>::count()
    }

    fn reduce<K: 'static, V: 'static>(reducer: Reducer<V>) -> AggregateFold<K, V, V> {
        AggregateFold::<K, V, V>::reduce(reducer)
    }

    fn add_processor<K: Clone + 'static, V: Clone + 'static, A: Clone + 'static>(
        &self,
        topology: &mut Topology,
        name: String,
        parent: &str,
        fns: AggregateFold<K, V, A>,
        setup: WindowedSetup<K, V>,
    ) -> Result<usize, TopologyError> {
        match *self {
            TimeWindowing::Fixed(ref windows) => {
                let windows = windows.clone();
                topology.add_typed_processor::<K, V, Windowed<K>, Change<A>, _>(
                    name,
                    Arc::new(move || {
                        WindowAggregate::new(fns.clone(), windows.clone(), setup.clone())
                    }),
                    &[parent],
                )
            }
            TimeWindowing::Sliding(windows) => topology
                .add_typed_processor::<K, V, Windowed<K>, Change<A>, _>(
                    name,
                    Arc::new(move || SlidingAggregate::new(fns.clone(), windows, setup.clone())),
                    &[parent],
                ),
        }
    }
}

impl<K: Clone + 'static, V: Clone + 'static> TimeWindowedKStream<K, V> {
    windowed_stream_methods!(
        TimeWindowedKStream,
        "window",
        "Combines the values of a key in a window with `reducer`."
    );

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
        let fns = AggregateFold::aggregate(initializer, aggregator);
        self.windowed
            .aggregate("KSTREAM-AGGREGATE-", fns, named, materialized, None)
    }
}
