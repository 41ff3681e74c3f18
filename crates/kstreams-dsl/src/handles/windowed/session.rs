//! `SessionWindowedKStream`: a grouped stream with session windows.

use std::sync::Arc;

use kstreams_record::SharedSerde;
use kstreams_state::{SessionStoreBuilder, SessionWindowedSerde, Windowed};
use kstreams_time::SessionWindows;

use crate::change::Change;
use crate::handles::types::{KTable, SessionWindowedKStream};
use crate::handles::windowed::{windowed_stream_methods, WindowKind};
use crate::materialized::StoreSpec;
use crate::operators::session_aggregate::{SessionAggregate, SessionFns, SessionInitializer};
use crate::operators::window_output::WindowedSetup;
use crate::operators::{aggregate_fold, count_fold, reduce_fold, Fold, Reducer};
use crate::options::IntoName;
use crate::{Materialized, Topology, TopologyError};

impl WindowKind for SessionWindows {
    type Fns<K: 'static, V: 'static, A: 'static> = SessionFns<K, V, A>;
    type Store<K: 'static, A: Clone + 'static> = SessionStoreBuilder<K, A>;

    fn close_delay_ms(&self) -> i64 {
        SessionWindows::grace_ms(self).saturating_add(self.inactivity_gap_ms())
    }

    fn validate(&self) -> Result<(), String> {
        SessionWindows::validate(self).map_err(|e| e.to_string())
    }

    fn store<K: 'static, A: Clone + 'static>(
        &self,
        spec: &StoreSpec<K, A>,
    ) -> Result<SessionStoreBuilder<K, A>, TopologyError> {
        Ok(spec.session_store(spec.retention_ms(self.retention_ms())?))
    }

    fn key_serde<K: 'static>(&self, key_serde: SharedSerde<K>) -> SharedSerde<Windowed<K>> {
        Arc::new(SessionWindowedSerde::shared(key_serde))
    }

    fn count<K: 'static, V: 'static>() -> SessionFns<K, V, i64> {
        SessionFns {
            fold: count_fold(),
            merge: Arc::new(|_, a, b| a + b),
            initial: Some(Arc::new(|| 0)),
        }
    }

    /// The reducer also merges sessions that a record joins together.
    fn reduce<K: 'static, V: 'static>(reducer: Reducer<V>) -> SessionFns<K, V, V> {
        SessionFns {
            fold: reduce_fold(reducer.clone()),
            merge: Arc::new(move |_, a, b| reducer(a, b)),
            initial: None,
        }
    }

    fn add_processor<K: Clone + 'static, V: Clone + 'static, A: Clone + 'static>(
        &self,
        topology: &mut Topology,
        name: String,
        parent: &str,
        fns: SessionFns<K, V, A>,
        setup: WindowedSetup<K, V>,
    ) -> Result<usize, TopologyError> {
        let windows = *self;
        topology.add_typed_processor::<K, V, Windowed<K>, Change<A>, _>(
            name,
            Arc::new(move || SessionAggregate::new(fns.clone(), windows, setup.clone())),
            &[parent],
        )
    }
}

impl<K: Clone + 'static, V: Clone + 'static> SessionWindowedKStream<K, V> {
    windowed_stream_methods!(SessionWindowedKStream, "session", "Combines the values of a session with `reducer` (also used to merge sessions that a record joins together).");

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
        let fold: Fold<K, V, A> = aggregate_fold(move || init(), aggregator);
        let initial: SessionInitializer<A> = initializer;
        let fns = SessionFns {
            fold,
            merge: Arc::new(merger),
            initial: Some(initial),
        };
        self.windowed
            .aggregate("KSTREAM-AGGREGATE-", fns, named, materialized, None)
    }
}
