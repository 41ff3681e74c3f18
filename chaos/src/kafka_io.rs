//! The scenarios' own Kafka clients: a producer of the input, a
//! read_committed reader of the output, and the topics.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kstreams::embedded::rdkafka::consumer::{BaseConsumer, Consumer};
use kstreams::embedded::rdkafka::message::Headers as _;
use kstreams::embedded::rdkafka::producer::{
    BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext,
};
use kstreams::embedded::rdkafka::{ClientContext, Message};

pub(crate) use kstreams::embedded::{create_topic, unique_name};

use crate::listener::Listener;

/// One record as a read_committed consumer saw it.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub key: String,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Vec<u8>)>,
    pub arrived: Instant,
    /// Where it is in the topic: a record the app wrote twice has two
    /// places, one the reader read twice only one.
    pub partition: i32,
    pub offset: i64,
}

/// A consumer of a topic that keeps everything it reads, from the start,
/// under read_committed, until dropped. A record read again (the reader's
/// own group rebalanced under a broker fault and it went back to the
/// start) is kept once: the verdicts are about the topic, not the reader.
pub(crate) struct Reader {
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Reader {
    pub(crate) fn start(bootstrap: &str, topic: &str) -> Reader {
        Reader::on(&Listener::plaintext(bootstrap), topic)
    }

    /// [`Reader::start`] through `listener`, with its security keys.
    pub(crate) fn on(listener: &Listener, topic: &str) -> Reader {
        let consumer: BaseConsumer = listener
            .client_config()
            .set("group.id", unique_name("chaos-verifier"))
            .set("auto.offset.reset", "earliest")
            .set("enable.auto.commit", "false")
            .set("isolation.level", "read_committed")
            .create()
            .expect("a consumer config without errors");
        consumer
            .subscribe(&[topic])
            .expect("subscribing to one topic");
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (sink, stopping) = (seen.clone(), stop.clone());
        let topic_name = topic.to_string();
        let thread = std::thread::spawn(move || {
            let mut places = std::collections::HashSet::new();
            let mut read_again = 0u64;
            let mut errors = 0u64;
            while !stopping.load(Ordering::Acquire) {
                let m = match consumer.poll(Duration::from_millis(50)) {
                    Some(Ok(m)) => m,
                    Some(Err(error)) => {
                        // The first says why a reader sees nothing (a
                        // secured listener refusing it, say); librdkafka
                        // retries on its own.
                        if errors == 0 {
                            eprintln!("chaos: the reader of {topic_name}: {error}");
                        }
                        errors += 1;
                        continue;
                    }
                    None => continue,
                };
                if !places.insert((m.partition(), m.offset())) {
                    read_again += 1;
                    continue;
                }
                let headers = m
                    .headers()
                    .map(|h| {
                        h.iter()
                            .map(|h| (h.key.to_string(), h.value.unwrap_or_default().to_vec()))
                            .collect()
                    })
                    .unwrap_or_default();
                let record = Seen {
                    key: String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned(),
                    value: m.payload().map(<[u8]>::to_vec),
                    headers,
                    arrived: Instant::now(),
                    partition: m.partition(),
                    offset: m.offset(),
                };
                sink.lock().unwrap_or_else(|p| p.into_inner()).push(record);
            }
            if read_again > 0 {
                eprintln!("chaos: the reader read {read_again} record(s) again (kept once)");
            }
        });
        Reader {
            seen,
            stop,
            thread: Some(thread),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// When record number `index` arrived, if it did.
    pub(crate) fn arrival(&self, index: usize) -> Option<Instant> {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(index)
            .map(|s| s.arrived)
    }

    /// Waits until `done` holds for what was read, or the timeout.
    pub(crate) fn wait_for(&self, timeout: Duration, done: impl Fn(&[Seen]) -> bool) -> bool {
        self.wait_unless(timeout, || false, done)
    }

    /// Waits until `done` holds for what was read, the timeout, or
    /// `give_up` (the app under test died, say).
    pub(crate) fn wait_unless(
        &self,
        timeout: Duration,
        mut give_up: impl FnMut() -> bool,
        done: impl Fn(&[Seen]) -> bool,
    ) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if done(&self.seen.lock().unwrap_or_else(|p| p.into_inner())) {
                return true;
            }
            if Instant::now() > deadline || give_up() {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(crate) fn snapshot(&self) -> Vec<Seen> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A producer of the scenarios' input (Java's partitioner, as kstreams'
/// sinks use). Idempotent: the broker faults make it retry, and a retried
/// batch must not land twice, or the input itself would hold duplicates
/// that the verifier would blame on the app.
pub(crate) struct Input {
    producer: BaseProducer<Deliveries>,
    topic: String,
}

/// Counts the input records the broker never acknowledged.
#[derive(Default)]
struct Deliveries {
    failed: AtomicU64,
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((error, _)) = result {
            if self.failed.fetch_add(1, Ordering::Relaxed) == 0 {
                eprintln!("chaos: an input record was not delivered: {error}");
            }
        }
    }
}

impl Input {
    pub(crate) fn new(bootstrap: &str, topic: &str) -> Input {
        Input::on(&Listener::plaintext(bootstrap), topic)
    }

    /// [`Input::new`] through `listener`, with its security keys.
    pub(crate) fn on(listener: &Listener, topic: &str) -> Input {
        let producer = listener
            .client_config()
            .set("linger.ms", "5")
            .set("partitioner", "murmur2_random")
            .set("enable.idempotence", "true")
            .create_with_context(Deliveries::default())
            .expect("a producer config without errors");
        Input {
            producer,
            topic: topic.to_string(),
        }
    }

    pub(crate) fn send(&self, key: &str, value: &[u8]) {
        let mut record = BaseRecord::to(&self.topic).key(key).payload(value);
        loop {
            match self.producer.send(record) {
                Ok(()) => break,
                Err((_, back)) => {
                    record = back;
                    self.producer.poll(Duration::from_millis(20));
                }
            }
        }
        self.producer.poll(Duration::ZERO);
    }

    /// Waits for every input record's acknowledgement; panics if one was
    /// not written, as the scenario's expectation would then be wrong.
    pub(crate) fn flush(&self) {
        self.producer
            .flush(Duration::from_secs(60))
            .expect("the input is acknowledged within 60 s");
        let failed = self.producer.context().failed.load(Ordering::Relaxed);
        assert_eq!(failed, 0, "{failed} input record(s) were not written");
    }
}
