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
use kstreams_dsl::TaskId;

/// The largest buffer kept after a drain, in records: a burst's buffer is
/// let go rather than held for the thread's life.
const MAX_KEPT: usize = 16 * 1024;

/// Records for the producer, in the order they are to be sent, with the
/// task that wrote each: the production handler names it when the record
/// cannot be written.
#[derive(Default)]
pub(crate) struct Outbox {
    records: Vec<ProducedRecord>,
    /// Where each task's records begin: `(first index, task)`, in order;
    /// `None` for records of no task (the stores' changelog records).
    /// One entry per task and step, not per record.
    runs: Vec<(usize, Option<TaskId>)>,
}

impl Outbox {
    /// Where a step appends what `task` made.
    pub(super) fn task_records(&mut self, task: TaskId) -> &mut Vec<ProducedRecord> {
        self.begin_run(Some(task));
        &mut self.records
    }

    /// Appends `records` of no task (the changelogs'), in order.
    pub(super) fn extend(&mut self, records: impl IntoIterator<Item = ProducedRecord>) {
        self.begin_run(None);
        self.records.extend(records);
    }

    fn begin_run(&mut self, task: Option<TaskId>) {
        match self.runs.last_mut() {
            Some((_, last)) if *last == task => {}
            // A run that got no record is taken over.
            Some((start, last)) if *start == self.records.len() => *last = task,
            _ => self.runs.push((self.records.len(), task)),
        }
    }

    /// Whether nothing waits.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Takes every waiting record out, in order, with its task, for
    /// `send`; what `send` did not take (it failed) is dropped, as the
    /// thread then ends or rewinds to its last commit. The buffer is kept
    /// for the next step unless a burst made it unusually large.
    pub(super) fn drain_into<E>(
        &mut self,
        mut send: impl FnMut(Option<TaskId>, ProducedRecord) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut runs = self.runs.iter().peekable();
        let mut task = None;
        let result = self
            .records
            .drain(..)
            .enumerate()
            .try_for_each(|(i, record)| {
                while let Some(&&(start, run)) = runs.peek() {
                    if start > i {
                        break;
                    }
                    task = run;
                    runs.next();
                }
                send(task, record)
            });
        self.records.clear();
        self.runs.clear();
        if self.records.capacity() > MAX_KEPT {
            self.records = Vec::new();
        }
        result
    }

    /// The waiting records, taken out (tests read what a step wrote).
    #[cfg(test)]
    pub(super) fn take(&mut self) -> Vec<ProducedRecord> {
        self.runs.clear();
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
        let result = outbox.drain_into(|_, r| {
            if r.value.as_deref() == Some(b"b") {
                return Err("b failed");
            }
            sent.push(r.value.unwrap());
            Ok(())
        });
        assert_eq!(result, Err("b failed"));
        assert_eq!(sent, [b"a".to_vec()]);
        assert!(outbox.is_empty(), "nothing after a failure is sent later");
        let task = TaskId {
            subtopology: 0,
            partition: 0,
        };
        outbox.task_records(task).push(record("d"));
        let mut sent = Vec::new();
        outbox
            .drain_into(|_, r| {
                sent.push(r.value.unwrap());
                Ok::<_, ()>(())
            })
            .unwrap();
        assert_eq!(sent, [b"d".to_vec()]);
    }

    #[test]
    fn each_record_is_drained_with_the_task_that_wrote_it() {
        let task = |partition| TaskId {
            subtopology: 1,
            partition,
        };
        let mut outbox = Outbox::default();
        outbox.task_records(task(0)).push(record("a0"));
        outbox.task_records(task(0)).push(record("b0"));
        // A task that wrote nothing leaves no run behind.
        outbox.task_records(task(1));
        outbox.task_records(task(2)).push(record("c2"));
        outbox.extend([record("changelog")]);
        outbox.task_records(task(0)).push(record("d0"));
        let mut drained = Vec::new();
        outbox
            .drain_into(|task, r| {
                drained.push((task.map(|t| t.partition), r.value.unwrap()));
                Ok::<_, ()>(())
            })
            .unwrap();
        assert_eq!(
            drained,
            [
                (Some(0), b"a0".to_vec()),
                (Some(0), b"b0".to_vec()),
                (Some(2), b"c2".to_vec()),
                (None, b"changelog".to_vec()),
                (Some(0), b"d0".to_vec()),
            ]
        );
        // The next step starts with no runs.
        outbox.extend([record("e")]);
        let mut tasks = Vec::new();
        outbox
            .drain_into(|task, _| {
                tasks.push(task);
                Ok::<_, ()>(())
            })
            .unwrap();
        assert_eq!(tasks, [None]);
    }
}
