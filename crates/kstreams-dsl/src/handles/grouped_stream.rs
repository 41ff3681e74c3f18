//! `KGroupedStream`: what `KStream::group_by` returns: count, reduce and
//! aggregate per key, and the entries to windowed and cogrouped
//! aggregations.

use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

use kstreams_record::{DefaultSerde, I64Serde, SharedSerde};
use kstreams_time::{FixedSizeWindows, SessionWindows, SlidingWindows};

use crate::change::Change;
use crate::handles::types::{KGroupedStream, KTable, OldValues, TimeWindowing, WindowedStream};
use crate::materialized::{add_store, StoreSpec};
use crate::operators::forwarder::OldValuesFlag;
use crate::operators::stream_aggregate::StreamAggregate;
use crate::operators::AggregateFold;
use crate::options::IntoName;
use crate::CogroupedKStream;
use crate::SessionWindowedKStream;
use crate::TimeWindowedKStream;
use crate::{KStream, Materialized, TopologyError};

impl<K: Clone + 'static, V: Clone + 'static> KGroupedStream<K, V> {
    /// The number of records per key.
    pub fn count(&self) -> KTable<K, i64> {
        self.count_with(None, Materialized::new())
    }

    /// [`KGroupedStream::count`] with a processor name and a store.
    pub fn count_with(
        &self,
        named: impl IntoName,
        materialized: Materialized<K, i64>,
    ) -> KTable<K, i64> {
        self.aggregate_into(
            "KSTREAM-AGGREGATE-",
            AggregateFold::<K, V, i64>::count(),
            named,
            materialized,
            Some(Arc::new(I64Serde)),
        )
    }

    /// Combines the values of a key with `reducer`; the first value of a
    /// key is its first result.
    pub fn reduce(&self, reducer: impl Fn(V, V) -> V + Send + Sync + 'static) -> KTable<K, V> {
        self.reduce_with(reducer, None, Materialized::new())
    }

    /// [`KGroupedStream::reduce`] with a processor name and a store.
    pub fn reduce_with(
        &self,
        reducer: impl Fn(V, V) -> V + Send + Sync + 'static,
        named: impl IntoName,
        materialized: Materialized<K, V>,
    ) -> KTable<K, V> {
        let fns = AggregateFold::<K, V, V>::reduce(Arc::new(reducer));
        let value_serde = self.value_serde.clone();
        self.aggregate_into("KSTREAM-REDUCE-", fns, named, materialized, value_serde)
    }

    /// Folds the values of a key into an aggregate that starts at
    /// `initializer()`. The aggregate's serde comes from `A`'s default;
    /// use [`KGroupedStream::aggregate_with`] to give one.
    pub fn aggregate<A: DefaultSerde + Clone>(
        &self,
        initializer: impl Fn() -> A + Send + Sync + 'static,
        aggregator: impl Fn(&K, V, A) -> A + Send + Sync + 'static,
    ) -> KTable<K, A> {
        self.aggregate_with(
            initializer,
            aggregator,
            None,
            Materialized::new().with_value_serde(A::default_serde()),
        )
    }

    /// [`KGroupedStream::aggregate`] with a processor name and a store.
    pub fn aggregate_with<A: Clone + 'static>(
        &self,
        initializer: impl Fn() -> A + Send + Sync + 'static,
        aggregator: impl Fn(&K, V, A) -> A + Send + Sync + 'static,
        named: impl IntoName,
        materialized: Materialized<K, A>,
    ) -> KTable<K, A> {
        let fns = AggregateFold::aggregate(initializer, aggregator);
        self.aggregate_into("KSTREAM-AGGREGATE-", fns, named, materialized, None)
    }

    /// The input of an aggregation named `processor`: this stream, or the
    /// stream read back from the repartition topic (named after `prefix`)
    /// when the keys may have changed.
    pub(crate) fn input(
        &self,
        state: &mut crate::handles::state::BuilderState,
        store_name: &str,
    ) -> Result<KStream<K, V>, TopologyError> {
        if !self.repartition_required {
            return Ok(self.stream.clone());
        }
        let prefix = self
            .repartition_name
            .clone()
            .unwrap_or_else(|| store_name.to_string());
        let missing = |part| TopologyError::MissingSerde {
            store: format!("{prefix}-repartition"),
            part,
            type_name: if part == "key" {
                std::any::type_name::<K>()
            } else {
                std::any::type_name::<V>()
            },
        };
        let topic = format!("{prefix}-repartition");
        if self.repartition_name.is_some() {
            if let Some(source) = state.named_repartitions.get(&topic).cloned() {
                // A second aggregation of a named grouping reads the same
                // topic; the three indexes are still drawn, as in Kafka.
                for prefix in ["KSTREAM-SINK-", "KSTREAM-FILTER-", "KSTREAM-SOURCE-"] {
                    state.new_name(prefix);
                }
                let mut stream = KStream::new(self.stream.state.clone(), source);
                stream.key_serde = self.key_serde.clone();
                stream.value_serde = self.value_serde.clone();
                return Ok(stream);
            }
        }
        let key_serde = self
            .key_serde
            .clone()
            .or_else(kstreams_record::builtin_serde::<K>)
            .ok_or_else(|| missing("key"))?;
        let value_serde = self
            .value_serde
            .clone()
            .or_else(kstreams_record::builtin_serde::<V>)
            .ok_or_else(|| missing("value"))?;
        let named = self.repartition_name.is_some();
        let stream = self
            .stream
            .through_repartition_topic(state, prefix, key_serde, value_serde);
        if named {
            state.named_repartitions.insert(topic, stream.node.clone());
        }
        Ok(stream)
    }

    fn aggregate_into<A: Clone + 'static>(
        &self,
        prefix: &str,
        fns: AggregateFold<K, V, A>,
        named: impl IntoName,
        materialized: Materialized<K, A>,
        default_value_serde: Option<SharedSerde<A>>,
    ) -> KTable<K, A> {
        let state = self.stream.state.clone();
        let mut s = state.borrow_mut();
        let spec = StoreSpec::settle(
            materialized,
            || s.new_name(&format!("{prefix}STATE-STORE-")),
            self.key_serde.clone(),
            default_value_serde,
        );
        let name = s.name_or_generate(named.into_name().map(|n| n.0), prefix);
        let flag: OldValuesFlag = Arc::default();
        let store = Arc::new(OnceLock::new());
        let mut table = KTable {
            state: state.clone(),
            node: name.clone(),
            store: store.clone(),
            key_serde: None,
            value_serde: None,
            old_values: OldValues::own(flag.clone()),
            getter: crate::operators::getters::lazy_store_getter(&store),
            window: None,
            types: PhantomData,
        };
        let Some(spec) = s.record(spec) else {
            return table;
        };
        let input = self.input(&mut s, &spec.name);
        let Some(input) = s.record(input) else {
            return table;
        };
        let key_serde = spec.key_serde.clone();
        let null_key = key_serde.clone();
        let null_value = self
            .value_serde
            .clone()
            .or_else(kstreams_record::builtin_serde::<V>);
        let store_name = spec.name.clone();
        let added = s.topology.add_typed_processor::<K, V, K, Change<A>, _>(
            name.clone(),
            Arc::new(move || StreamAggregate {
                fns: fns.clone(),
                store_name: store_name.clone(),
                send_old: flag.clone(),
                is_null_key: {
                    let serde = null_key.clone();
                    Arc::new(move |k: &K| serde.is_null(k))
                },
                is_null_value: {
                    let serde = null_value.clone();
                    Arc::new(move |v: &V| serde.as_ref().is_some_and(|s| s.is_null(v)))
                },
                store: None,
            }),
            &[input.node.as_str()],
        );
        s.record(added);
        let added = add_store(&mut s.topology, spec.key_value_store(), &name);
        s.record(added);
        let _ = store.set(spec.name.clone());
        table.key_serde = Some(key_serde);
        table.value_serde = Some(spec.value_serde.clone());
        table
    }
}

impl<K: Clone + 'static, V: Clone + 'static> KGroupedStream<K, V> {
    /// Aggregates per time window (tumbling or hopping), or in the
    /// unlimited window.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use kstreams_dsl::{Produced, StreamsBuilder};
    /// use kstreams_record::{I64Serde, Nullable, StringSerde};
    /// use kstreams_runtime::TopologyTestDriver;
    /// use kstreams_state::{TimeWindowedSerde, Window, Windowed};
    /// use kstreams_time::TimeWindows;
    ///
    /// let builder = StreamsBuilder::new();
    /// builder
    ///     .stream::<String, String>("clicks")
    ///     .group_by_key()
    ///     .windowed_by(TimeWindows::of_size_with_no_grace(Duration::from_millis(10)))
    ///     .count()
    ///     .to_stream()
    ///     .to_with(
    ///         "clicks-per-window",
    ///         Produced::with(TimeWindowedSerde::new(StringSerde, 10), Nullable(I64Serde)),
    ///     );
    /// let driver = TopologyTestDriver::new(builder.build()?)?;
    /// let clicks = driver.create_input_topic("clicks", StringSerde, StringSerde);
    /// let counts = driver.create_output_topic(
    ///     "clicks-per-window",
    ///     TimeWindowedSerde::new(StringSerde, 10),
    ///     Nullable(I64Serde),
    /// );
    /// for timestamp in [1, 5, 12] {
    ///     clicks.pipe_input_at("home".to_string(), "click".to_string(), timestamp);
    /// }
    /// let window = |start| Windowed::new("home".to_string(), Window::new(start, start + 10));
    /// assert_eq!(
    ///     counts.read_key_values_to_list(),
    ///     vec![(window(0), Some(1)), (window(0), Some(2)), (window(10), Some(1))]
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn windowed_by(&self, windows: impl Into<FixedSizeWindows>) -> TimeWindowedKStream<K, V> {
        let windows = TimeWindowing::Fixed(windows.into());
        TimeWindowedKStream {
            windowed: WindowedStream::new(self.clone_grouped(), windows),
        }
    }

    /// Aggregates per sliding window (KIP-450): one window per distinct set
    /// of records no more than the time difference apart.
    pub fn windowed_by_sliding(&self, windows: SlidingWindows) -> TimeWindowedKStream<K, V> {
        let windows = TimeWindowing::Sliding(windows);
        TimeWindowedKStream {
            windowed: WindowedStream::new(self.clone_grouped(), windows),
        }
    }

    /// Aggregates per session of activity.
    pub fn windowed_by_session(&self, windows: SessionWindows) -> SessionWindowedKStream<K, V> {
        SessionWindowedKStream {
            windowed: WindowedStream::new(self.clone_grouped(), windows),
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
}

impl<K: Clone + 'static, V: Clone + 'static> KGroupedStream<K, V> {
    /// Starts a cogroup: this grouped stream folded with `aggregator` into
    /// an aggregate that other grouped streams of the same key add to with
    /// [`CogroupedKStream::cogroup`].
    pub fn cogroup<A: Clone + 'static>(
        &self,
        aggregator: impl Fn(&K, V, A) -> A + Send + Sync + 'static,
    ) -> CogroupedKStream<K, A> {
        CogroupedKStream {
            state: self.stream.state.clone(),
            key_serde: self.key_serde.clone(),
            inputs: Vec::new(),
        }
        .cogroup(self, aggregator)
    }
}
