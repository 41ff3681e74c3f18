//! Cogroups with time or session windows.

use std::sync::Arc;

use kstreams_state::{SessionWindowedSerde, TimeWindowedSerde, Windowed};
use kstreams_time::{SessionWindows, TimeWindows};

use crate::handles::cogroup::CogroupKind;
use crate::handles::ktable::KTable;
use crate::handles::windowed::windowed_table;
use crate::operators::forwarder::OldValuesFlag;
use crate::options::IntoName;
use crate::CogroupedKStream;
use crate::{Materialized, TopologyError};

/// A cogroup with time windows.
pub struct TimeWindowedCogroupedKStream<K, A> {
    pub(crate) cogrouped: CogroupedKStream<K, A>,
    pub(crate) windows: TimeWindows,
}

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
        let windows = self.windows;
        let flag: OldValuesFlag = Arc::default();
        let state = self.cogrouped.state.clone();
        let mut table = windowed_table(&state, String::new(), windows.grace_ms(), flag.clone());
        if let Err(e) = windows.validate() {
            state
                .borrow_mut()
                .record::<()>(Err(TopologyError::InvalidOperator {
                    operator: "cogroup windowed_by".to_string(),
                    message: e.to_string(),
                }));
            return table;
        }
        let built = self.cogrouped.build(
            Arc::new(initializer),
            named.into_name(),
            materialized,
            CogroupKind::Windowed(windows),
            flag,
            |spec| {
                let retention = spec.retention_ms(windows.retention_ms())?;
                spec.window_store(retention, windows.size_ms())
            },
        );
        if let Some((node, spec)) = built {
            table.node = node;
            let _ = table.store.set(spec.name.clone());
            table.key_serde = Some(Arc::new(TimeWindowedSerde::shared(
                spec.key_serde.clone(),
                windows.size_ms(),
            )));
            table.value_serde = Some(spec.value_serde.clone());
        }
        table
    }
}

/// A cogroup with session windows.
pub struct SessionWindowedCogroupedKStream<K, A> {
    pub(crate) cogrouped: CogroupedKStream<K, A>,
    pub(crate) windows: SessionWindows,
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
        let windows = self.windows;
        let flag: OldValuesFlag = Arc::default();
        let state = self.cogrouped.state.clone();
        let mut table = windowed_table(&state, String::new(), windows.grace_ms(), flag.clone());
        if let Err(e) = windows.validate() {
            state
                .borrow_mut()
                .record::<()>(Err(TopologyError::InvalidOperator {
                    operator: "cogroup windowed_by_session".to_string(),
                    message: e.to_string(),
                }));
            return table;
        }
        let built = self.cogrouped.build(
            Arc::new(initializer),
            named.into_name(),
            materialized,
            CogroupKind::Session(windows, Arc::new(merger)),
            flag,
            |spec| {
                let retention = spec.retention_ms(windows.retention_ms())?;
                Ok(spec.session_store(retention))
            },
        );
        if let Some((node, spec)) = built {
            table.node = node;
            let _ = table.store.set(spec.name.clone());
            table.key_serde = Some(Arc::new(SessionWindowedSerde::shared(
                spec.key_serde.clone(),
            )));
            table.value_serde = Some(spec.value_serde.clone());
        }
        table
    }
}
