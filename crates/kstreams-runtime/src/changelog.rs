//! Changelog records on their way out: stores write them during processing,
//! and whoever drives the task (a stream thread, the test driver) takes them
//! with the task outputs.

use std::cell::RefCell;

use kstreams_dsl::__private::ProducedRecord;
use kstreams_record::Headers;
use kstreams_state::{BoxError, ChangelogRecord, ChangelogWriter};

use crate::topic_names::TopicNames;

/// Collects the changelog records of the stores it is given to, until
/// drained.
#[derive(Default)]
pub(crate) struct ChangelogCollector {
    records: RefCell<Vec<ProducedRecord>>,
    /// The changelog topics' shared names, so that a changelog record
    /// does not allocate its topic's name.
    names: RefCell<TopicNames>,
}

impl ChangelogCollector {
    /// Takes what was written since the last call, in write order.
    pub(crate) fn drain(&self) -> Vec<ProducedRecord> {
        std::mem::take(&mut *self.records.borrow_mut())
    }

    /// How many records wait to be drained: a mark for
    /// [`ChangelogCollector::discard_from`].
    pub(crate) fn mark(&self) -> usize {
        self.records.borrow().len()
    }

    /// Drops the records written since `mark` (0: all that wait), the
    /// changelog records of work thrown away (an aborted transaction, lost
    /// tasks), which must never be sent. Returns how many were dropped.
    pub(crate) fn discard_from(&self, mark: usize) -> usize {
        let mut records = self.records.borrow_mut();
        let dropped = records.len().saturating_sub(mark);
        records.truncate(mark);
        dropped
    }
}

impl ChangelogWriter for ChangelogCollector {
    fn send(&self, record: &ChangelogRecord<'_>) -> Result<(), BoxError> {
        let topic = self.names.borrow_mut().get(record.topic);
        self.records.borrow_mut().push(ProducedRecord {
            topic,
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
