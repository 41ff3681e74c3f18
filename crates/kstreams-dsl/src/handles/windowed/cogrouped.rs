//! Cogroups with time or session windows.

use std::sync::Arc;

use kstreams_state::Windowed;

use crate::handles::types::{
    CogroupKind, CogroupedKStream, KTable, SessionWindowedCogroupedKStream,
    TimeWindowedCogroupedKStream, TimeWindowing,
};
use crate::handles::windowed::{set_windowed_store, windowed_table, WindowKind};
use crate::operators::forwarder::OldValuesFlag;
use crate::operators::session_aggregate::SessionInitializer;
use crate::options::IntoName;
use crate::{Materialized, TopologyError};

impl<K: Clone + 'static, A: Clone + 'static> TimeWindowedCogroupedKStream<K, A> {
    /// The aggregate per key and window.
    pub fn aggregate(
        &self,
        initializer: impl Fn() -> A + Send + Sync + 'static,
    ) -> KTable<Windowed<K>, A> {
        self.aggregate_with(initializer, None, Materialized::new())
    }

    /// [`TimeWindowedCogroupedKStream::aggregate`] with a name and a store.
    pub fn aggregate_with(
        &self,
        initializer: impl Fn() -> A + Send + Sync + 'static,
        named: impl IntoName,
        materialized: Materialized<K, A>,
    ) -> KTable<Windowed<K>, A> {
        let operator = match self.windows {
            TimeWindowing::Fixed(_) => "cogroup windowed_by",
            TimeWindowing::Sliding(_) => "cogroup windowed_by_sliding",
        };
        windowed_cogroup(
            &self.cogrouped,
            self.windows.clone(),
            operator,
            CogroupKind::Windowed(self.windows.clone()),
            Arc::new(initializer),
            named,
            materialized,
        )
    }
}

impl<K: Clone + 'static, A: Clone + 'static> SessionWindowedCogroupedKStream<K, A> {
    /// The aggregate per key and session; `merger` combines two sessions'
    /// aggregates when a record joins them.
    pub fn aggregate(
        &self,
        initializer: impl Fn() -> A + Send + Sync + 'static,
        merger: impl Fn(&K, A, A) -> A + Send + Sync + 'static,
    ) -> KTable<Windowed<K>, A> {
        self.aggregate_with(initializer, merger, None, Materialized::new())
    }

    /// [`SessionWindowedCogroupedKStream::aggregate`] with a name and a
    /// store.
    pub fn aggregate_with(
        &self,
        initializer: impl Fn() -> A + Send + Sync + 'static,
        merger: impl Fn(&K, A, A) -> A + Send + Sync + 'static,
        named: impl IntoName,
        materialized: Materialized<K, A>,
    ) -> KTable<Windowed<K>, A> {
        windowed_cogroup(
            &self.cogrouped,
            self.windows,
            "cogroup windowed_by_session",
            CogroupKind::Session(self.windows, Arc::new(merger)),
            Arc::new(initializer),
            named,
            materialized,
        )
    }
}

/// A windowed cogroup's aggregation: the windows checked (a failure names
/// `operator`), then the cogroup's processors over one store of `windows`.
fn windowed_cogroup<K: Clone + 'static, A: Clone + 'static, W: WindowKind>(
    cogrouped: &CogroupedKStream<K, A>,
    windows: W,
    operator: &str,
    kind: CogroupKind<K, A>,
    initializer: SessionInitializer<A>,
    named: impl IntoName,
    materialized: Materialized<K, A>,
) -> KTable<Windowed<K>, A> {
    let flag: OldValuesFlag = Arc::default();
    let state = cogrouped.state.clone();
    let mut table = windowed_table(
        &state,
        String::new(),
        windows.close_delay_ms(),
        flag.clone(),
    );
    if let Err(message) = windows.validate() {
        state
            .borrow_mut()
            .record::<()>(Err(TopologyError::InvalidOperator {
                operator: operator.to_string(),
                message,
            }));
        return table;
    }
    let built = cogrouped.build(
        initializer,
        named.into_name(),
        materialized,
        kind,
        flag,
        |spec| windows.store(spec),
    );
    if let Some((node, spec)) = built {
        table.node = node;
        set_windowed_store(&mut table, &spec, windows);
    }
    table
}
