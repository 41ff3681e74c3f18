//! Changelog records on their way out: stores write them during processing,
//! and whoever drives the task (a stream thread, the test driver) takes them
//! with the task outputs.

use std::cell::RefCell;

use kstreams_dsl::internals::ProducedRecord;
use kstreams_record::Headers;
use kstreams_state::{BoxError, ChangelogRecord, ChangelogWriter};

/// Collects the changelog records of the stores it is given to, until
/// drained.
#[derive(Default)]
pub(crate) struct ChangelogCollector(RefCell<Vec<ProducedRecord>>);

impl ChangelogCollector {
    /// Takes what was written since the last call, in write order.
    pub fn drain(&self) -> Vec<ProducedRecord> {
        std::mem::take(&mut *self.0.borrow_mut())
    }
}

impl ChangelogWriter for ChangelogCollector {
    fn send(&self, record: &ChangelogRecord<'_>) -> Result<(), BoxError> {
        self.0.borrow_mut().push(ProducedRecord {
            topic: record.topic.to_string(),
            partition: Some(record.partition),
            partition_key_len: None,
            key: Some(record.key.to_vec()),
            value: record.value.map(<[u8]>::to_vec),
            timestamp: record.timestamp,
            headers: {
                let mut headers = Headers::new();
                for (key, value) in record.headers {
                    headers.add(*key, Some(value.to_vec()));
                }
                headers
            },
            sink: None,
        });
        Ok(())
    }
}
