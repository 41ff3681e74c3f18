//! Output records the producer could not write, from librdkafka's word to
//! the production handler's answer: Kafka Streams'
//! `RecordCollectorImpl.recordSendError`.
//!
//! A delivery report arrives long after its record was processed, on
//! librdkafka's terms, so the report keeps only what the handler needs
//! later: the record's bytes (copied, only for a refusal) and where it
//! came from, an index into [`Origins`] carried in the report's opaque
//! value (the task and the sink, no allocation per record). The stream
//! thread then hands each refusal to the handler ([`judge`]) and acts on
//! the answers: drop and count, write dead letters, fail, or retry: the
//! thread fails with a retriable [`RuntimeError::Production`], which makes
//! its owner start it over with a new producer from the last commit (as a
//! retriable failure of a changelog record does).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;

use kstreams_dsl::TaskId;
use kstreams_record::{Headers, Timestamp};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};

use super::client_error::ClientError;
use super::ffi::error_name;
use super::RuntimeError;
use crate::handlers::{
    DeadLetterRecord, ErrorHandlerContext, ProductionError, ProductionExceptionHandler,
    ProductionResult, RefusedRecord,
};

/// The tasks and sinks output records came from, by index: an index is
/// what a record's delivery report carries.
#[derive(Default)]
pub(super) struct Origins {
    seen: Vec<Origin>,
    /// The index found last: consecutive records mostly share a sink.
    last: usize,
}

struct Origin {
    task: TaskId,
    sink: Option<Rc<str>>,
}

impl Origin {
    fn is(&self, task: TaskId, sink: Option<&Rc<str>>) -> bool {
        self.task == task
            && match (&self.sink, sink) {
                (Some(a), Some(b)) => Rc::ptr_eq(a, b) || a == b,
                (None, None) => true,
                _ => false,
            }
    }
}

impl Origins {
    /// The index of `task`'s `sink` (`None` for the records a task's
    /// handlers write), added on first sight. The list grows with the
    /// tasks a thread ever ran times their sinks: small.
    pub(super) fn index(&mut self, task: TaskId, sink: Option<&Rc<str>>) -> usize {
        if self.seen.get(self.last).is_some_and(|o| o.is(task, sink)) {
            return self.last;
        }
        self.last = match self.seen.iter().position(|o| o.is(task, sink)) {
            Some(i) => i,
            None => {
                self.seen.push(Origin {
                    task,
                    sink: sink.cloned(),
                });
                self.seen.len() - 1
            }
        };
        self.last
    }

    fn get(&self, index: usize) -> Option<&Origin> {
        self.seen.get(index)
    }
}

/// An output record the producer refused, as it was sent.
#[derive(Debug)]
pub(crate) struct Refused {
    /// Its [`Origins`] index.
    pub(crate) origin: usize,
    pub(crate) topic: String,
    /// `None` when no partition was chosen (the topic does not exist).
    pub(crate) partition: Option<i32>,
    pub(crate) key: Option<Vec<u8>>,
    pub(crate) value: Option<Vec<u8>>,
    pub(crate) timestamp: Timestamp,
    pub(crate) headers: Headers,
    pub(crate) code: RDKafkaErrorCode,
}

/// Whether a refusal goes to the handler: Kafka Streams fails at once on
/// the errors it calls fatal (security, an invalid topic, an unknown
/// server error, metadata too large) and on a fenced producer, and never
/// asks about records an abort purged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Fail without asking.
    Fatal,
    /// Purged by an abort: the abort's own cause is being handled.
    Purged,
    /// Ask the handler.
    Handled,
}

impl Refusal {
    pub(crate) fn of(code: RDKafkaErrorCode) -> Refusal {
        use RDKafkaErrorCode as C;
        match code {
            C::PurgeQueue | C::PurgeInflight => Refusal::Purged,
            // Kafka Streams' isFatalException: security, InvalidTopic,
            // UnknownServer, OffsetMetadataTooLarge (and its fenced
            // producer cases, TaskMigrated there).
            C::Authentication
            | C::SaslAuthenticationFailed
            | C::TopicAuthorizationFailed
            | C::ClusterAuthorizationFailed
            | C::TransactionalIdAuthorizationFailed
            | C::GroupAuthorizationFailed
            | C::SecurityDisabled
            | C::InvalidTopic
            | C::Unknown
            | C::OffsetMetadataTooLarge
            | C::Fatal
            | C::Fenced
            | C::ProducerFenced
            | C::InvalidProducerEpoch
            | C::InvalidProducerIdMapping
            | C::OutOfOrderSequenceNumber => Refusal::Fatal,
            _ => Refusal::Handled,
        }
    }
}

/// Whether Kafka's exception for `code` is a `RetriableException`
/// (librdkafka's local timeouts are Kafka's `TimeoutException`, which is).
pub(crate) fn retriable(code: RDKafkaErrorCode) -> bool {
    use RDKafkaErrorCode as C;
    matches!(
        code,
        C::MessageTimedOut
            | C::OperationTimedOut
            | C::TimedOutQueue
            | C::BrokerTransportFailure
            | C::AllBrokersDown
            | C::UnknownTopic
            | C::UnknownPartition
            | C::UnknownTopicOrPartition
            | C::LeaderNotAvailable
            | C::NotLeaderForPartition
            | C::RequestTimedOut
            | C::NetworkException
            | C::NotEnoughReplicas
            | C::NotEnoughReplicasAfterAppend
            | C::KafkaStorageError
            | C::InvalidMessage
            | C::NotCoordinator
            | C::CoordinatorNotAvailable
            | C::CoordinatorLoadInProgress
            | C::ConcurrentTransactions
            | C::FencedLeaderEpoch
            | C::UnknownLeaderEpoch
            | C::OffsetNotAvailable
            | C::PreferredLeaderNotAvailable
            | C::ThrottlingQuotaExceeded
            | C::ReplicaNotAvailable
            | C::BrokerNotAvailable
    )
}

/// What the handler's answers add up to, for the thread to carry out.
#[derive(Debug, Default)]
pub(crate) struct Verdicts {
    /// The task of each record dropped, for its dropped-records count.
    pub(crate) dropped: Vec<TaskId>,
    /// The records the handler asked to write.
    pub(crate) dead_letters: Vec<DeadLetterRecord>,
}

/// Hands each refused record to `handler`, in order. A RETRY of a
/// retriable refusal is [`RuntimeError::Production`] (the thread starts
/// over from its last commit); a FAIL, a RETRY of anything else, a handler
/// that panics, or a RESUME when `doomed` (under exactly-once, where a
/// transaction with a refused record cannot commit) is
/// [`RuntimeError::ProductionFailed`]. The refusals after the first error
/// are not asked about: their records are processed again, or never.
pub(crate) fn judge(
    handler: &dyn ProductionExceptionHandler,
    origins: &Origins,
    refused: Vec<Refused>,
    doomed: bool,
) -> Result<Verdicts, RuntimeError> {
    static NO_HEADERS: std::sync::OnceLock<Headers> = std::sync::OnceLock::new();
    let mut verdicts = Verdicts::default();
    for refusal in refused {
        let origin = origins.get(refusal.origin);
        let task = origin.map_or(
            TaskId {
                subtopology: 0,
                partition: -1,
            },
            |o| o.task,
        );
        let context = ErrorHandlerContext {
            topic: None,
            partition: -1,
            offset: -1,
            headers: NO_HEADERS.get_or_init(Headers::new),
            processor_node_id: origin.and_then(|o| o.sink.as_deref()).unwrap_or(""),
            task_id: task,
            timestamp: refusal.timestamp,
            source_raw_key: None,
            source_raw_value: None,
        };
        let record = RefusedRecord {
            topic: &refusal.topic,
            partition: refusal.partition,
            key: refusal.key.as_deref(),
            value: refusal.value.as_deref(),
            timestamp: refusal.timestamp,
            headers: &refusal.headers,
        };
        let error = ProductionError::new(
            error_name(refusal.code),
            refusal.code.to_string(),
            retriable(refusal.code),
        );
        let failure = || RuntimeError::ProductionFailed {
            topic: refusal.topic.clone(),
            partition: refusal.partition.unwrap_or(-1),
            source: ClientError::new(KafkaError::MessageProduction(refusal.code)),
        };
        let Ok(response) = catch_unwind(AssertUnwindSafe(|| {
            handler.handle_error(&context, &record, &error)
        })) else {
            log::error!(
                "task {task}: the production exception handler panicked on a refused record \
                 for {}: {error}; failing",
                refusal.topic
            );
            return Err(failure());
        };
        if doomed && !response.dead_letter_records.is_empty() {
            log::warn!(
                "task {task}: the production exception handler's dead letters for a refused \
                 record are not written under exactly-once: the refusal aborts the \
                 transaction they would join"
            );
        } else {
            verdicts.dead_letters.extend(response.dead_letter_records);
        }
        match response.result {
            ProductionResult::Retry if error.is_retriable() => {
                log::debug!("task {task}: the production exception handler retries after {error}");
                return Err(RuntimeError::Production {
                    topic: refusal.topic.clone(),
                    partition: refusal.partition.unwrap_or(-1),
                    source: ClientError::new(KafkaError::MessageProduction(refusal.code)),
                });
            }
            ProductionResult::Resume if !doomed => {
                log::warn!(
                    "task {task}: dropping a record the producer refused for {}: {error}",
                    refusal.topic
                );
                verdicts.dropped.push(task);
            }
            result => {
                match result {
                    ProductionResult::Retry => log::warn!(
                        "task {task}: the production exception handler answered RETRY to \
                         {error}, which is not retriable: failing"
                    ),
                    ProductionResult::Resume => log::warn!(
                        "task {task}: the production exception handler resumes after {error}, \
                         but under exactly-once a transaction with a refused record cannot \
                         commit: failing"
                    ),
                    ProductionResult::Fail => {}
                }
                return Err(failure());
            }
        }
    }
    Ok(verdicts)
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::handlers::{
        DefaultProductionExceptionHandler, LogAndContinueProductionExceptionHandler,
        ProductionResponse,
    };

    fn task(partition: i32) -> TaskId {
        TaskId {
            subtopology: 1,
            partition,
        }
    }

    fn refused(origin: usize, code: RDKafkaErrorCode) -> Refused {
        Refused {
            origin,
            topic: "out".to_string(),
            partition: Some(2),
            key: Some(b"k".to_vec()),
            value: Some(b"v".to_vec()),
            timestamp: 42,
            headers: Headers::new(),
            code,
        }
    }

    #[test]
    fn an_origin_is_found_by_task_and_sink_whichever_copy_of_the_name() {
        let mut origins = Origins::default();
        let sink: Rc<str> = Rc::from("sink-a");
        let a = origins.index(task(0), Some(&sink));
        assert_eq!(origins.index(task(0), Some(&sink)), a);
        // Another task's topology has its own copy of the name.
        assert_eq!(origins.index(task(0), Some(&Rc::from("sink-a"))), a);
        let b = origins.index(task(1), Some(&sink));
        let c = origins.index(task(0), None);
        assert_eq!(origins.index(task(0), Some(&sink)), a);
        assert_eq!([a, b, c], [0, 1, 2]);
        assert_eq!(origins.get(b).unwrap().task, task(1));
    }

    /// What the handler was asked: task, sink, error name, partition,
    /// retriable.
    type Asked = (TaskId, String, String, Option<i32>, bool);

    /// Records what it was asked, answers `answer`.
    struct Answering {
        answer: fn(&ProductionError) -> ProductionResponse,
        asked: Mutex<Vec<Asked>>,
    }

    impl ProductionExceptionHandler for Answering {
        fn handle_error(
            &self,
            context: &ErrorHandlerContext<'_>,
            record: &RefusedRecord<'_>,
            error: &ProductionError,
        ) -> ProductionResponse {
            self.asked.lock().unwrap().push((
                context.task_id,
                context.processor_node_id.to_string(),
                error.code().to_string(),
                record.partition,
                error.is_retriable(),
            ));
            (self.answer)(error)
        }
    }

    fn answering(answer: fn(&ProductionError) -> ProductionResponse) -> Answering {
        Answering {
            answer,
            asked: Mutex::new(Vec::new()),
        }
    }

    #[test]
    fn the_handler_sees_the_task_the_sink_and_kafkas_name_of_the_error() {
        let mut origins = Origins::default();
        let origin = origins.index(task(3), Some(&Rc::from("to-out")));
        let handler = answering(|_| {
            ProductionResponse::resume_with(vec![DeadLetterRecord {
                topic: "aside".to_string(),
                partition: None,
                key: None,
                value: Some(b"x".to_vec()),
                timestamp: 1,
                headers: Headers::new(),
            }])
        });
        let verdicts = judge(
            &handler,
            &origins,
            vec![
                refused(origin, RDKafkaErrorCode::MessageSizeTooLarge),
                refused(origin, RDKafkaErrorCode::NotEnoughReplicas),
            ],
            false,
        )
        .unwrap();
        assert_eq!(verdicts.dropped, [task(3), task(3)]);
        assert_eq!(verdicts.dead_letters.len(), 2);
        assert_eq!(
            *handler.asked.lock().unwrap(),
            [
                (
                    task(3),
                    "to-out".to_string(),
                    "MSG_SIZE_TOO_LARGE".to_string(),
                    Some(2),
                    false
                ),
                (
                    task(3),
                    "to-out".to_string(),
                    "NOT_ENOUGH_REPLICAS".to_string(),
                    Some(2),
                    true
                ),
            ]
        );
    }

    #[test]
    fn the_default_handler_retries_what_is_retriable_and_fails_on_the_rest() {
        let origins = Origins::default();
        let handler = DefaultProductionExceptionHandler::default();
        let retry = judge(
            &handler,
            &origins,
            vec![
                refused(0, RDKafkaErrorCode::MessageTimedOut),
                refused(0, RDKafkaErrorCode::MessageSizeTooLarge),
            ],
            false,
        )
        .unwrap_err();
        assert!(
            retry.is_retriable_production(),
            "a timed-out record is retried: {retry}"
        );
        let error = judge(
            &handler,
            &origins,
            vec![refused(0, RDKafkaErrorCode::MessageSizeTooLarge)],
            false,
        )
        .unwrap_err();
        assert!(
            matches!(&error, RuntimeError::ProductionFailed { topic, partition: 2, .. } if topic == "out"),
            "{error}"
        );
        assert!(!error.is_retriable_production());
    }

    #[test]
    fn retry_of_what_is_not_retriable_fails_and_a_panicking_handler_fails() {
        let origins = Origins::default();
        let retrying = answering(|_| ProductionResponse::retry());
        let error = judge(
            &retrying,
            &origins,
            vec![refused(0, RDKafkaErrorCode::MessageSizeTooLarge)],
            false,
        )
        .unwrap_err();
        assert!(!error.is_retriable_production(), "{error}");
        // A FAIL of what could be retried is not retried.
        let failing = answering(|_| ProductionResponse::fail());
        let error = judge(
            &failing,
            &origins,
            vec![refused(0, RDKafkaErrorCode::NotEnoughReplicas)],
            false,
        )
        .unwrap_err();
        assert!(!error.is_retriable_production(), "{error}");
        let panicking = answering(|_| panic!("handler bug"));
        assert!(judge(
            &panicking,
            &origins,
            vec![refused(0, RDKafkaErrorCode::NotEnoughReplicas)],
            false,
        )
        .is_err());
    }

    #[test]
    fn under_exactly_once_only_a_retry_goes_on_and_no_dead_letter_is_kept() {
        let origins = Origins::default();
        let resuming = LogAndContinueProductionExceptionHandler {
            dead_letter_queue: Some("dlq".to_string()),
        };
        assert!(judge(
            &resuming,
            &origins,
            vec![refused(0, RDKafkaErrorCode::NotEnoughReplicas)],
            true,
        )
        .is_err());
        let retrying = answering(|_| {
            let mut response = ProductionResponse::retry();
            response.dead_letter_records.push(DeadLetterRecord {
                topic: "aside".to_string(),
                partition: None,
                key: None,
                value: None,
                timestamp: 0,
                headers: Headers::new(),
            });
            response
        });
        let error = judge(
            &retrying,
            &origins,
            vec![
                refused(0, RDKafkaErrorCode::NotEnoughReplicas),
                refused(0, RDKafkaErrorCode::NotEnoughReplicas),
            ],
            true,
        )
        .unwrap_err();
        assert!(error.is_retriable_production(), "{error}");
        assert_eq!(
            retrying.asked.lock().unwrap().len(),
            1,
            "the records after a retry are processed again, not judged"
        );
    }

    #[test]
    fn fatal_errors_and_purged_records_never_reach_the_handler() {
        assert_eq!(
            Refusal::of(RDKafkaErrorCode::TopicAuthorizationFailed),
            Refusal::Fatal
        );
        assert_eq!(
            Refusal::of(RDKafkaErrorCode::ProducerFenced),
            Refusal::Fatal
        );
        assert_eq!(Refusal::of(RDKafkaErrorCode::PurgeQueue), Refusal::Purged);
        assert_eq!(
            Refusal::of(RDKafkaErrorCode::MessageSizeTooLarge),
            Refusal::Handled
        );
        assert_eq!(
            Refusal::of(RDKafkaErrorCode::MessageTimedOut),
            Refusal::Handled
        );
    }
}
