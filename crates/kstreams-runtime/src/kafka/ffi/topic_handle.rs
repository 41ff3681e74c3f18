//! Producing by librdkafka topic handle. rust-rdkafka's `BaseProducer::send`
//! names the topic: it makes a C string of the name, and librdkafka looks
//! the topic up by name under its lock, for every record (a visible share
//! of a pass-through's instructions: BENCHMARKS.md, "Producer: by topic
//! handle"). A handle per topic, made once, does neither; the record goes
//! to `rd_kafka_produceva` as before.

use std::ffi::{c_char, c_void, CString};
use std::sync::Arc;

use kstreams_record::Headers;
use rdkafka::bindings as rd;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, Producer, ProducerContext};

use super::owned::Owned;

/// librdkafka's "no partition chosen": its partitioner picks one.
const PARTITION_UNASSIGNED: i32 = -1;

/// One record to produce; the bytes are copied by librdkafka.
pub(crate) struct Outgoing<'a> {
    pub partition: Option<i32>,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub timestamp: i64,
    pub headers: &'a Headers,
    /// Handed back with the record's delivery report.
    pub opaque: usize,
}

/// librdkafka's handle of one topic of `producer`. It keeps the producer
/// alive: a topic handle must be destroyed before its client. Send (the
/// handle's owner is), not Sync.
pub(crate) struct TopicHandle<C: ProducerContext> {
    /// Declared before `producer`: fields drop in order, so the handle is
    /// destroyed while the producer still holds the client alive.
    raw: Owned<rd::rd_kafka_topic_t>,
    producer: Arc<BaseProducer<C>>,
}

impl<C: ProducerContext> TopicHandle<C> {
    /// The handle of `topic` (librdkafka's existing one when it knows the
    /// topic already, counted once more).
    pub(crate) fn new(producer: &Arc<BaseProducer<C>>, topic: &str) -> Result<Self, KafkaError> {
        let name = CString::new(topic)?;
        // SAFETY: the client handle is live (borrowed through `producer`),
        // `name` is NUL-terminated and outlives the call, and a null
        // configuration asks for the producer's defaults. librdkafka copies
        // the name and keeps no pointer to it. The handle it returns (or
        // null) is the application's, to destroy before the client: the
        // owner goes into `Self`, which holds the producer until then.
        let raw = unsafe {
            Owned::from_ptr(rd::rd_kafka_topic_new(
                producer.client().native_ptr(),
                name.as_ptr(),
                std::ptr::null_mut(),
            ))
        };
        match raw {
            Some(raw) => Ok(Self {
                raw,
                producer: Arc::clone(producer),
            }),
            // SAFETY: reads this thread's last librdkafka error; no pointer.
            None => Err(KafkaError::MessageProduction(
                unsafe { rd::rd_kafka_last_error() }.into(),
            )),
        }
    }

    /// Queues `record` for the topic, as `BaseProducer::send` would; a
    /// full local queue is `QueueFull`, for the caller to wait out.
    pub(crate) fn produce(&self, record: &Outgoing<'_>) -> Result<(), RDKafkaErrorCode> {
        let headers = native_headers(record.headers);
        let mut args = Args::default();
        args.push(
            rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_RKT,
            rd::rd_kafka_vu_s__bindgen_ty_1 {
                rkt: self.raw.as_ptr(),
            },
        );
        args.push(
            rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_PARTITION,
            rd::rd_kafka_vu_s__bindgen_ty_1 {
                i32_: record.partition.unwrap_or(PARTITION_UNASSIGNED),
            },
        );
        args.push(
            rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_MSGFLAGS,
            rd::rd_kafka_vu_s__bindgen_ty_1 {
                i: rd::RD_KAFKA_MSG_F_COPY,
            },
        );
        // A missing key or value is null; an empty one keeps its (dangling
        // but non-null) pointer, as rust-rdkafka passes it: an empty value
        // is not a tombstone.
        if let Some(value) = record.value {
            args.push(rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_VALUE, bytes(value));
        }
        if let Some(key) = record.key {
            args.push(rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_KEY, bytes(key));
        }
        args.push(
            rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_OPAQUE,
            rd::rd_kafka_vu_s__bindgen_ty_1 {
                ptr: record.opaque as *mut c_void,
            },
        );
        args.push(
            rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_TIMESTAMP,
            rd::rd_kafka_vu_s__bindgen_ty_1 {
                i64_: record.timestamp,
            },
        );
        if let Some(headers) = &headers {
            args.push(
                rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_HEADERS,
                rd::rd_kafka_vu_s__bindgen_ty_1 {
                    headers: headers.as_ptr(),
                },
            );
        }
        // SAFETY: the client handle is live (`self.producer`), and so is the
        // topic handle (`self.raw`, destroyed only on drop). Every pointer
        // in `args` outlives the call: the key and value borrow `record`,
        // which librdkafka copies (F_COPY) before returning; the headers
        // are ours until the call succeeds. `args` holds `len` initialized
        // entries. The error returned, if any, is ours to destroy (it needs
        // no client).
        let error = unsafe {
            Owned::from_ptr(rd::rd_kafka_produceva(
                self.producer.client().native_ptr(),
                args.entries.as_ptr(),
                args.len,
            ))
        };
        let Some(error) = error else {
            // On success the record owns the header list.
            if let Some(headers) = headers {
                headers.hand_over();
            }
            return Ok(());
        };
        // SAFETY: `error` is a valid error object, owned (destroyed when
        // dropped, after this read).
        let code = unsafe { rd::rd_kafka_error_code(error.as_ptr()) };
        // On failure the header list stays ours: dropped (destroyed) here.
        // Unlike `rd_kafka_producev` (rust-rdkafka's `send`), which says
        // `__FATAL` once the producer has a fatal error, the error object
        // carries the fatal error's own code: `__FENCED` for a fenced
        // transactional producer, which the thread answers as any fencing
        // (a new producer, as Kafka Streams' task migration).
        Err(code.into())
    }
}

/// At most the eight arguments `produce` passes.
const MAX_ARGS: usize = 8;

/// `rd_kafka_produceva`'s argument list.
struct Args {
    entries: [rd::rd_kafka_vu_t; MAX_ARGS],
    len: usize,
}

impl Default for Args {
    fn default() -> Self {
        let end = rd::rd_kafka_vu_t {
            vtype: rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_END,
            u: rd::rd_kafka_vu_s__bindgen_ty_1 { i: 0 },
        };
        Self {
            entries: [end; MAX_ARGS],
            len: 0,
        }
    }
}

impl Args {
    fn push(&mut self, vtype: rd::rd_kafka_vtype_t, u: rd::rd_kafka_vu_s__bindgen_ty_1) {
        self.entries[self.len] = rd::rd_kafka_vu_t { vtype, u };
        self.len += 1;
    }
}

fn bytes(bytes: &[u8]) -> rd::rd_kafka_vu_s__bindgen_ty_1 {
    rd::rd_kafka_vu_s__bindgen_ty_1 {
        mem: rd::rd_kafka_vu_s__bindgen_ty_1__bindgen_ty_1 {
            ptr: bytes.as_ptr() as *mut c_void,
            size: bytes.len(),
        },
    }
}

/// librdkafka's copy of `headers`, destroyed on drop unless a record took
/// it; none for a record without headers (librdkafka would allocate an
/// empty list).
fn native_headers(headers: &Headers) -> Option<Owned<rd::rd_kafka_headers_t>> {
    if headers.is_empty() {
        return None;
    }
    // SAFETY: rd_kafka_headers_new allocates an empty, writable list that
    // the application owns (it aborts rather than return null on
    // allocation failure); it belongs to no client.
    let list = unsafe { Owned::from_ptr(rd::rd_kafka_headers_new(headers.len())) }?;
    for header in headers.iter() {
        let (value, len) = match &header.value {
            None => (std::ptr::null(), 0),
            Some(value) => (value.as_ptr() as *const c_void, value.len() as isize),
        };
        // SAFETY: the list is writable and ours; the key and value
        // pointers are valid for the lengths given, which librdkafka
        // copies (a given name length needs no NUL). Adding to a
        // writable list cannot fail.
        unsafe {
            rd::rd_kafka_header_add(
                list.as_ptr(),
                header.key.as_ptr() as *const c_char,
                header.key.len() as isize,
                value,
                len,
            );
        }
    }
    Some(list)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use kstreams_embedded::EmbeddedKafka;
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::{Headers as _, Message};
    use rdkafka::producer::{DefaultProducerContext, Producer};
    use rdkafka::{ClientConfig, Offset, TopicPartitionList};

    use super::*;

    type Read = (
        Option<Vec<u8>>,
        Option<Vec<u8>>,
        Option<i64>,
        Vec<(String, Option<Vec<u8>>)>,
    );

    /// Everything in partition 1 of `topic`, in order.
    fn read_partition(bootstrap: &str, topic: &str, want: usize) -> Vec<Read> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap)
            .set("group.id", "topic-handle-test")
            .create()
            .unwrap();
        let mut assignment = TopicPartitionList::new();
        assignment
            .add_partition_offset(topic, 1, Offset::Beginning)
            .unwrap();
        consumer.assign(&assignment).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut read = Vec::new();
        while read.len() < want && Instant::now() < deadline {
            let Some(message) = consumer.poll(Duration::from_millis(200)) else {
                continue;
            };
            let message = message.unwrap();
            let headers = message.headers().map_or_else(Vec::new, |h| {
                h.iter()
                    .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                    .collect()
            });
            read.push((
                message.key().map(<[u8]>::to_vec),
                message.payload().map(<[u8]>::to_vec),
                message.timestamp().to_millis(),
                headers,
            ));
        }
        read
    }

    fn producer(bootstrap: &str) -> Arc<BaseProducer<DefaultProducerContext>> {
        Arc::new(
            ClientConfig::new()
                .set("bootstrap.servers", bootstrap)
                .create()
                .unwrap(),
        )
    }

    #[test]
    fn records_go_out_with_their_key_value_timestamp_partition_and_headers() {
        let cluster = EmbeddedKafka::start(1).unwrap();
        let bootstrap = cluster.bootstrap_servers();
        cluster.create_topic("handled", 2, 1).unwrap();
        let producer = producer(&bootstrap);
        let handle = TopicHandle::new(&producer, "handled").unwrap();
        let mut headers = Headers::new();
        headers.add("a", Some(b"1".to_vec()));
        headers.add("b", None::<Vec<u8>>);
        headers.add("a", Some(b"2".to_vec()));
        let none = Headers::new();
        let sent = [
            (Some(&b"k"[..]), Some(&b"v"[..]), 42, &headers),
            // A tombstone with a null key, then an empty key and value.
            (None, None, 43, &none),
            (Some(&b""[..]), Some(&b""[..]), 44, &none),
        ];
        for (key, value, timestamp, headers) in sent {
            let outgoing = Outgoing {
                partition: Some(1),
                key,
                value,
                timestamp,
                headers,
                opaque: 0,
            };
            handle.produce(&outgoing).unwrap();
        }
        producer.flush(Duration::from_secs(30)).unwrap();

        let read = read_partition(&bootstrap, "handled", 3);
        let owned = |b: &[u8]| Some(b.to_vec());
        assert_eq!(
            read,
            vec![
                (
                    owned(b"k"),
                    owned(b"v"),
                    Some(42),
                    vec![
                        ("a".to_string(), owned(b"1")),
                        ("b".to_string(), None),
                        ("a".to_string(), owned(b"2")),
                    ],
                ),
                (None, None, Some(43), vec![]),
                (owned(b""), owned(b""), Some(44), vec![]),
            ]
        );
    }

    #[test]
    fn a_partition_the_topic_lacks_is_refused_and_the_handle_goes_on() {
        let cluster = EmbeddedKafka::start(1).unwrap();
        let bootstrap = cluster.bootstrap_servers();
        cluster.create_topic("narrow", 2, 1).unwrap();
        let producer = producer(&bootstrap);
        // Metadata first: librdkafka refuses an unknown partition only
        // once it knows the topic's partitions.
        producer
            .client()
            .fetch_metadata(Some("narrow"), Duration::from_secs(30))
            .unwrap();
        let handle = TopicHandle::new(&producer, "narrow").unwrap();
        let mut headers = Headers::new();
        headers.add("h", Some(b"x".to_vec()));
        let mut outgoing = Outgoing {
            partition: Some(7),
            key: Some(b"k"),
            value: Some(b"v"),
            timestamp: 1,
            headers: &headers,
            opaque: 0,
        };
        assert_eq!(
            handle.produce(&outgoing),
            Err(RDKafkaErrorCode::UnknownPartition)
        );
        outgoing.partition = Some(1);
        handle.produce(&outgoing).unwrap();
        producer.flush(Duration::from_secs(30)).unwrap();
        assert_eq!(read_partition(&bootstrap, "narrow", 1).len(), 1);
    }
}
