//! The stream thread's outbox: every record its tasks write for the
//! producer waits here until the record collector sends it.
//!
//! Kafka Streams' sink node calls `RecordCollector.send` itself. Here a
//! task's sinks write into the task's context, and whichever step ran the
//! task (processing, punctuation, an async completion, a flush) moves those
//! records, then the stores' changelog records, into the one outbox; the
//! thread then hands the outbox to [`RecordCollector::send_outbox`]
//! (`super::record_collector`). A record so goes one way, task -> outbox ->
//! collector, whichever step made it, and the collector has one way in.

use kstreams_dsl::__private::ProducedRecord;

/// The largest buffer kept after a drain, in records: a burst's buffer is
/// let go rather than held for the thread's life.
const MAX_KEPT: usize = 16 * 1024;

/// Records for the producer, in the order they are to be sent.
#[derive(Default)]
pub(crate) struct Outbox {
    records: Vec<ProducedRecord>,
}

impl Outbox {
    /// Where a step appends what it made (a task's outputs, then the
    /// changelog records).
    pub(super) fn records(&mut self) -> &mut Vec<ProducedRecord> {
        &mut self.records
    }

    /// Appends `records`, in order.
    pub(super) fn extend(&mut self, records: impl IntoIterator<Item = ProducedRecord>) {
        self.records.extend(records);
    }

    /// Whether nothing waits.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Takes every waiting record out, in order, for `send`; what `send`
    /// did not take (it failed) is dropped, as the thread then ends or
    /// rewinds to its last commit. The buffer is kept for the next step
    /// unless a burst made it unusually large.
    pub(super) fn drain_into<E>(
        &mut self,
        mut send: impl FnMut(ProducedRecord) -> Result<(), E>,
    ) -> Result<(), E> {
        let result = self.records.drain(..).try_for_each(&mut send);
        self.records.clear();
        if self.records.capacity() > MAX_KEPT {
            self.records = Vec::new();
        }
        result
    }

    /// The waiting records, taken out (tests read what a step wrote).
    #[cfg(test)]
    pub(super) fn take(&mut self) -> Vec<ProducedRecord> {
        std::mem::take(&mut self.records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn record(value: &str) -> ProducedRecord {
        ProducedRecord {
            topic: Arc::from("out"),
            partition: None,
            partition_key_len: None,
            key: None,
            value: Some(value.as_bytes().to_vec()),
            timestamp: 0,
            headers: kstreams_record::Headers::new(),
            sink: None,
        }
    }

    #[test]
    fn a_drain_sends_in_order_and_drops_the_rest_after_a_failure() {
        let mut outbox = Outbox::default();
        outbox.extend([record("a"), record("b"), record("c")]);
        let mut sent = Vec::new();
        let result = outbox.drain_into(|r| {
            if r.value.as_deref() == Some(b"b") {
                return Err("b failed");
            }
            sent.push(r.value.unwrap());
            Ok(())
        });
        assert_eq!(result, Err("b failed"));
        assert_eq!(sent, [b"a".to_vec()]);
        assert!(outbox.is_empty(), "nothing after a failure is sent later");
        outbox.records().push(record("d"));
        let mut sent = Vec::new();
        outbox
            .drain_into(|r| {
                sent.push(r.value.unwrap());
                Ok::<_, ()>(())
            })
            .unwrap();
        assert_eq!(sent, [b"d".to_vec()]);
    }
}
