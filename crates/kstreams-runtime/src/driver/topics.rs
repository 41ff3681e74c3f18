//! Input and output topics of the `TopologyTestDriver`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::Hash;
use std::rc::Rc;
use std::time::Duration;

use kstreams_dsl::__private::{ConsumedRecord, ProducedRecord};
use kstreams_dsl::StreamsError;
use kstreams_record::{Headers, Record, SerdeError, SharedSerde, Timestamp};

use super::DriverState;

/// Pipes records into one topic of the driver: Kafka Streams'
/// `TestInputTopic`.
///
/// The `pipe_*` methods panic with the engine's error message, which is
/// what a test wants; the `try_pipe_*` methods return the error, for tests
/// of failures.
pub struct TestInputTopic<K, V> {
    state: Rc<RefCell<DriverState>>,
    topic: String,
    key_serde: SharedSerde<K>,
    value_serde: SharedSerde<V>,
    next_time: RefCell<Timestamp>,
    advance: Duration,
}

impl<K: 'static, V: 'static> TestInputTopic<K, V> {
    pub(crate) fn new(
        state: Rc<RefCell<DriverState>>,
        topic: &str,
        key_serde: SharedSerde<K>,
        value_serde: SharedSerde<V>,
        start: Timestamp,
        advance: Duration,
    ) -> Self {
        Self {
            state,
            topic: topic.to_string(),
            key_serde,
            value_serde,
            next_time: RefCell::new(start),
            advance,
        }
    }

    /// Moves this topic's clock for records piped without a timestamp.
    pub fn advance_time(&self, by: Duration) {
        *self.next_time.borrow_mut() += by.as_millis() as i64;
    }

    fn auto_time(&self) -> Timestamp {
        let mut next = self.next_time.borrow_mut();
        let now = *next;
        *next += self.advance.as_millis() as i64;
        now
    }

    /// Pipes a record with this topic's current time.
    pub fn pipe_input(&self, key: K, value: V) {
        self.try_pipe_input(key, value)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`TestInputTopic::pipe_input`], returning errors.
    pub fn try_pipe_input(&self, key: K, value: V) -> Result<(), StreamsError> {
        let timestamp = self.auto_time();
        self.try_pipe_record(Record::new(key, value, timestamp))
    }

    /// Pipes a record with a null key (whatever `K`'s serde would write).
    pub fn pipe_value(&self, value: V) {
        let timestamp = self.auto_time();
        let mut headers = Headers::new();
        let result = self
            .value_serde
            .serialize(&self.topic, &mut headers, &value)
            .map_err(|e| serialization_error(&self.topic, e))
            .and_then(|value| self.pipe_bytes(None, value, timestamp, headers));
        result.unwrap_or_else(|e| panic!("{e}"))
    }

    /// Pipes a record with this timestamp.
    pub fn pipe_input_at(&self, key: K, value: V, timestamp: Timestamp) {
        self.pipe_record(Record::new(key, value, timestamp))
    }

    /// Pipes a whole record (key, value, timestamp, headers).
    pub fn pipe_record(&self, record: Record<K, V>) {
        self.try_pipe_record(record)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`TestInputTopic::pipe_record`], returning errors.
    pub fn try_pipe_record(&self, record: Record<K, V>) -> Result<(), StreamsError> {
        let mut headers = record.headers;
        let key = self
            .key_serde
            .serialize(&self.topic, &mut headers, &record.key)
            .map_err(|e| serialization_error(&self.topic, e))?;
        let value = self
            .value_serde
            .serialize(&self.topic, &mut headers, &record.value)
            .map_err(|e| serialization_error(&self.topic, e))?;
        self.pipe_bytes(key, value, record.timestamp, headers)
    }

    /// Pipes raw bytes, as a producer with another serde would.
    pub fn try_pipe_raw(
        &self,
        key: Option<Vec<u8>>,
        value: Option<Vec<u8>>,
        timestamp: Timestamp,
    ) -> Result<(), StreamsError> {
        self.pipe_bytes(key, value, timestamp, Headers::new())
    }

    fn pipe_bytes(
        &self,
        key: Option<Vec<u8>>,
        value: Option<Vec<u8>>,
        timestamp: Timestamp,
        headers: Headers,
    ) -> Result<(), StreamsError> {
        self.state.borrow_mut().pipe(ConsumedRecord {
            topic: self.topic.as_str().into(),
            partition: 0,
            offset: 0,
            timestamp,
            key,
            value,
            headers,
        })
    }

    /// Pipes key-value pairs in order, each with the topic's current time.
    pub fn pipe_key_value_list(&self, records: impl IntoIterator<Item = (K, V)>) {
        for (k, v) in records {
            self.pipe_input(k, v);
        }
    }

    /// Pipes values with null keys, in order.
    pub fn pipe_value_list(&self, values: impl IntoIterator<Item = V>) {
        for v in values {
            self.pipe_value(v);
        }
    }

    /// Pipes records in order.
    pub fn pipe_record_list(&self, records: impl IntoIterator<Item = Record<K, V>>) {
        for r in records {
            self.pipe_record(r);
        }
    }
}

fn serialization_error(topic: &str, source: SerdeError) -> StreamsError {
    StreamsError::Serialization {
        node: format!("test input topic {topic}"),
        part: "record",
        topic: topic.to_string(),
        source: Box::new(source),
    }
}

/// Reads what the topology wrote to one topic: Kafka Streams'
/// `TestOutputTopic`. Reading an empty topic panics, as Kafka Streams'
/// throws; check [`TestOutputTopic::is_empty`] first when unsure.
pub struct TestOutputTopic<K, V> {
    state: Rc<RefCell<DriverState>>,
    topic: String,
    key_serde: SharedSerde<K>,
    value_serde: SharedSerde<V>,
}

impl<K: 'static, V: 'static> TestOutputTopic<K, V> {
    pub(crate) fn new(
        state: Rc<RefCell<DriverState>>,
        topic: &str,
        key_serde: SharedSerde<K>,
        value_serde: SharedSerde<V>,
    ) -> Self {
        Self {
            state,
            topic: topic.to_string(),
            key_serde,
            value_serde,
        }
    }

    fn next_raw(&self) -> Option<ProducedRecord> {
        self.state.borrow_mut().read_output(&self.topic)
    }

    fn decode(&self, raw: ProducedRecord) -> Record<K, V> {
        let key = self
            .key_serde
            .deserialize(&self.topic, &raw.headers, raw.key.as_deref())
            .unwrap_or_else(|e| panic!("output topic {}: cannot read key: {e}", self.topic));
        let value = self
            .value_serde
            .deserialize(&self.topic, &raw.headers, raw.value.as_deref())
            .unwrap_or_else(|e| panic!("output topic {}: cannot read value: {e}", self.topic));
        Record {
            key,
            value,
            timestamp: raw.timestamp,
            headers: raw.headers,
        }
    }

    /// The next record, if any.
    pub fn try_read_record(&self) -> Option<Record<K, V>> {
        self.next_raw().map(|raw| self.decode(raw))
    }

    /// The next record (key, value, timestamp, headers).
    pub fn read_record(&self) -> Record<K, V> {
        self.try_read_record()
            .unwrap_or_else(|| panic!("output topic {} is empty", self.topic))
    }

    /// The next value.
    pub fn read_value(&self) -> V {
        self.read_record().value
    }

    /// The next key and value.
    pub fn read_key_value(&self) -> (K, V) {
        let r = self.read_record();
        (r.key, r.value)
    }

    /// Every waiting record, in order.
    pub fn read_records_to_list(&self) -> Vec<Record<K, V>> {
        std::iter::from_fn(|| self.try_read_record()).collect()
    }

    /// Every waiting value, in order.
    pub fn read_values_to_list(&self) -> Vec<V> {
        self.read_records_to_list()
            .into_iter()
            .map(|r| r.value)
            .collect()
    }

    /// Every waiting key and value, in order.
    pub fn read_key_values_to_list(&self) -> Vec<(K, V)> {
        self.read_records_to_list()
            .into_iter()
            .map(|r| (r.key, r.value))
            .collect()
    }

    /// The latest value of each key, as a table would hold them: a
    /// tombstone (null value) removes its key.
    pub fn read_key_values_to_map(&self) -> HashMap<K, V>
    where
        K: Eq + Hash,
    {
        let mut map = HashMap::new();
        while let Some(raw) = self.next_raw() {
            let tombstone = raw.value.is_none();
            let record = self.decode(raw);
            if tombstone {
                map.remove(&record.key);
            } else {
                map.insert(record.key, record.value);
            }
        }
        map
    }

    /// Whether no record is waiting.
    pub fn is_empty(&self) -> bool {
        self.queue_size() == 0
    }

    /// How many records are waiting.
    pub fn queue_size(&self) -> usize {
        self.state.borrow().output_len(&self.topic)
    }
}
