//! The changelogging layer: each write of a store becomes a changelog
//! record, sent through the task's [`ChangelogWriter`].

use std::cell::Cell;
use std::rc::Rc;

use crate::context::{
    changelog_topic_name, ChangelogHeader, ChangelogRecord, ChangelogWriter, StoreContext,
};
use crate::{Error, Timestamp};

/// Sends a store's changelog records. Until `init` attaches a writer it
/// sends nothing (a store in a test without a changelog).
pub(crate) struct ChangeLogger {
    store: String,
    topic: String,
    partition: i32,
    writer: Option<Rc<dyn ChangelogWriter>>,
    headers: &'static [ChangelogHeader],
}

impl ChangeLogger {
    pub(crate) fn new(store: &str, headers: &'static [ChangelogHeader]) -> Self {
        ChangeLogger {
            store: store.to_string(),
            topic: String::new(),
            partition: 0,
            writer: None,
            headers,
        }
    }

    pub(crate) fn init(&mut self, context: &StoreContext) {
        self.topic = changelog_topic_name(context.application_id(), &self.store);
        self.partition = context.partition();
        self.writer = context.changelog_writer().cloned();
    }

    pub(crate) fn log(
        &self,
        key: &[u8],
        value: Option<&[u8]>,
        timestamp: Timestamp,
    ) -> Result<(), Error> {
        let Some(writer) = &self.writer else {
            return Ok(());
        };
        writer
            .send(&ChangelogRecord {
                topic: &self.topic,
                partition: self.partition,
                key,
                value,
                timestamp,
                headers: self.headers,
            })
            .map_err(|source| Error::Changelog {
                store: self.store.clone(),
                topic: self.topic.clone(),
                source,
            })
    }
}

/// The record timestamp and headers a store sees: the task's, once
/// initialized (Kafka Streams' record context at the time of a write).
#[derive(Clone, Default)]
pub(crate) struct RecordClock {
    timestamp: Rc<Cell<Timestamp>>,
    headers: Rc<std::cell::RefCell<kstreams_record::Headers>>,
}

impl RecordClock {
    pub(crate) fn now(&self) -> Timestamp {
        self.timestamp.get()
    }
    pub(crate) fn set(&self, ts: Timestamp) -> Timestamp {
        self.timestamp.replace(ts)
    }
    /// The headers of the record being processed, for a cache entry to
    /// forward with when it is flushed.
    pub(crate) fn headers(&self) -> kstreams_record::Headers {
        self.headers.borrow().clone()
    }
    pub(crate) fn attach(&mut self, context: &StoreContext) {
        self.timestamp = context.timestamp_cell().clone();
        self.headers = context.headers_cell().clone();
    }
}
