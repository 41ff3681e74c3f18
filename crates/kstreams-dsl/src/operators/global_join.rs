//! Kafka Streams' `KStreamGlobalKTableJoin`: a lookup in the global store by
//! a key computed from each record.

use std::sync::Arc;

use kstreams_record::{Headers, Record, SharedSerde};

use crate::GlobalStore;
use crate::{Processor, ProcessorContext, ProcessorError};

/// Maps a stream record to the global table's key.
pub(crate) type KeySelector<K, V, KG> = Arc<dyn Fn(&K, &V) -> KG + Send + Sync>;

/// Joins a stream value with the global table's value (`None`: absent).
pub(crate) type GlobalJoiner<K, V, VG, VR> =
    Arc<dyn Fn(&K, &V, Option<&VG>) -> Option<VR> + Send + Sync>;

/// Kafka Streams' `KStreamGlobalKTableJoin`: a lookup in the global store
/// by the selected key, serialized with the table's key serde.
pub(crate) struct GlobalJoin<K, V, KG, VG, VR> {
    pub(crate) store: Arc<GlobalStore>,
    pub(crate) key_serde: SharedSerde<KG>,
    pub(crate) value_serde: SharedSerde<VG>,
    pub(crate) key_selector: KeySelector<K, V, KG>,
    pub(crate) joiner: GlobalJoiner<K, V, VG, VR>,
}

impl<K: Clone + 'static, V: Clone + 'static, KG: 'static, VG: 'static, VR: Clone + 'static>
    Processor<K, V, K, VR> for GlobalJoin<K, V, KG, VG, VR>
{
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, VR>,
        record: Record<K, V>,
    ) -> Result<(), ProcessorError> {
        let topic = self.store.topic();
        let global_key = (self.key_selector)(&record.key, &record.value);
        let key_bytes = self
            .key_serde
            .serialize(topic, &mut Headers::new(), &global_key)?;
        let found = match key_bytes {
            Some(bytes) => self.store.get(&bytes)?,
            None => None,
        };
        let value = match found {
            Some((bytes, _)) => Some(self.value_serde.deserialize(
                topic,
                &Headers::new(),
                Some(&bytes),
            )?),
            None => None,
        };
        if let Some(joined) = (self.joiner)(&record.key, &record.value, value.as_ref()) {
            ctx.forward(record.with_value(joined))?;
        }
        Ok(())
    }
}
