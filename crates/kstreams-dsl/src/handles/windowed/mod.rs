//! Windowed aggregations: what `grouped.windowed_by(..)` returns.

pub(crate) mod cogrouped;
pub(crate) mod session;
pub(crate) mod time;

use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

use kstreams_state::Windowed;

use crate::handles::ktable::{KTable, OldValues, WindowInfo};
use crate::materialized::StoreSpec;
use crate::operators::forwarder::OldValuesFlag;
use crate::operators::late_records::LateRecordSink;

pub(crate) struct WindowedParts<K, V, A> {
    pub(crate) spec: StoreSpec<K, A>,
    pub(crate) input: crate::KStream<K, V>,
    pub(crate) late: Option<LateRecordSink<K, V>>,
}

pub(crate) fn windowed_table<K, A>(
    state: &crate::handles::builder::SharedState,
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
        getter: crate::operators::getters::no_getter(),
        window: Some(WindowInfo { grace_ms }),
        types: PhantomData,
    }
}
