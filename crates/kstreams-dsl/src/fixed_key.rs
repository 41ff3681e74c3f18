//! Processors that may change values but never keys: Kafka Streams'
//! `FixedKeyProcessor`, used by `process_values`. Keeping the key fixed is
//! what lets a downstream aggregation skip a repartition.

use std::time::Duration;

use kstreams_record::{Headers, Record, RecordMetadata, Timestamp};
use kstreams_time::PunctuationType;

use crate::{ProcessorContext, ProcessorError, PunctuationId, StreamsError, TaskId};

/// A record whose key cannot be replaced.
#[derive(Debug, Clone, PartialEq)]
pub struct FixedKeyRecord<K, V>(Record<K, V>);

impl<K, V> FixedKeyRecord<K, V> {
    /// The key.
    pub fn key(&self) -> &K {
        &self.0.key
    }
    /// The value.
    pub fn value(&self) -> &V {
        &self.0.value
    }
    /// The timestamp.
    pub fn timestamp(&self) -> Timestamp {
        self.0.timestamp
    }
    /// The headers.
    pub fn headers(&self) -> &Headers {
        &self.0.headers
    }
    /// The same record (same key) with another value.
    pub fn with_value<V2>(self, value: V2) -> FixedKeyRecord<K, V2> {
        FixedKeyRecord(self.0.with_value(value))
    }
    /// The same record with another timestamp.
    pub fn with_timestamp(self, timestamp: Timestamp) -> Self {
        Self(self.0.with_timestamp(timestamp))
    }
    /// The same record with other headers.
    pub fn with_headers(self, headers: Headers) -> Self {
        Self(self.0.with_headers(headers))
    }
    /// Takes the value out, leaving the key behind with the value's
    /// replacement.
    pub fn into_value(self) -> V {
        self.0.value
    }
}

/// The context of a [`FixedKeyProcessor`]: forwards only fixed-key records.
pub struct FixedKeyProcessorContext<'c, 'a, K, V> {
    inner: &'c mut ProcessorContext<'a, K, V>,
}

impl<K: Clone + 'static, V: Clone + 'static> FixedKeyProcessorContext<'_, '_, K, V> {
    /// Sends a record to every child.
    pub fn forward(&mut self, record: FixedKeyRecord<K, V>) -> Result<(), StreamsError> {
        self.inner.forward(record.0)
    }
    /// Sends a record to one child, by name.
    pub fn forward_to(
        &mut self,
        child: &str,
        record: FixedKeyRecord<K, V>,
    ) -> Result<(), StreamsError> {
        self.inner.forward_to(child, record.0)
    }
}

impl<K, V> FixedKeyProcessorContext<'_, '_, K, V> {
    /// See [`ProcessorContext::node_name`].
    pub fn node_name(&self) -> &str {
        self.inner.node_name()
    }
    /// See [`ProcessorContext::application_id`].
    pub fn application_id(&self) -> &str {
        self.inner.application_id()
    }
    /// See [`ProcessorContext::task_id`].
    pub fn task_id(&self) -> TaskId {
        self.inner.task_id()
    }
    /// See [`ProcessorContext::record_metadata`].
    pub fn record_metadata(&self) -> Option<&RecordMetadata> {
        self.inner.record_metadata()
    }
    /// See [`ProcessorContext::current_stream_time`].
    pub fn current_stream_time(&self) -> Timestamp {
        self.inner.current_stream_time()
    }
    /// See [`ProcessorContext::current_system_time_ms`].
    pub fn current_system_time_ms(&self) -> Timestamp {
        self.inner.current_system_time_ms()
    }
    /// See [`ProcessorContext::schedule`].
    pub fn schedule(&mut self, interval: Duration, kind: PunctuationType) -> PunctuationId {
        self.inner.schedule(interval, kind)
    }
    /// See [`ProcessorContext::schedule_anchored`].
    pub fn schedule_anchored(
        &mut self,
        start: Timestamp,
        interval: Duration,
        kind: PunctuationType,
    ) -> PunctuationId {
        self.inner.schedule_anchored(start, interval, kind)
    }
    /// See [`ProcessorContext::cancel`].
    pub fn cancel(&mut self, punctuation: PunctuationId) {
        self.inner.cancel(punctuation)
    }
    /// See [`ProcessorContext::get_state_store`].
    pub fn get_state_store<H: Clone + 'static>(&self, name: &str) -> Result<H, StreamsError> {
        self.inner.get_state_store(name)
    }
    /// See [`ProcessorContext::commit`].
    pub fn commit(&mut self) {
        self.inner.commit()
    }
}

/// Processes values under a fixed key: Kafka Streams' `FixedKeyProcessor`.
pub trait FixedKeyProcessor<K, VIn, VOut>: 'static {
    /// Called once before the first record.
    fn init(
        &mut self,
        ctx: &mut FixedKeyProcessorContext<'_, '_, K, VOut>,
    ) -> Result<(), ProcessorError> {
        let _ = ctx;
        Ok(())
    }
    /// Processes one record.
    fn process(
        &mut self,
        ctx: &mut FixedKeyProcessorContext<'_, '_, K, VOut>,
        record: FixedKeyRecord<K, VIn>,
    ) -> Result<(), ProcessorError>;
    /// Called when a punctuation this processor scheduled fires.
    fn punctuate(
        &mut self,
        ctx: &mut FixedKeyProcessorContext<'_, '_, K, VOut>,
        punctuation: PunctuationId,
        timestamp: Timestamp,
    ) -> Result<(), ProcessorError> {
        let _ = (ctx, punctuation, timestamp);
        Ok(())
    }
    /// Called when the task closes.
    fn close(&mut self) {}
}

/// Runs a `FixedKeyProcessor` as a node.
pub(crate) struct FixedKeyAdapter<P>(pub P);

impl<K, VIn, VOut, P> crate::Processor<K, VIn, K, VOut> for FixedKeyAdapter<P>
where
    K: Clone + 'static,
    VOut: Clone + 'static,
    P: FixedKeyProcessor<K, VIn, VOut>,
{
    fn init(&mut self, ctx: &mut ProcessorContext<'_, K, VOut>) -> Result<(), ProcessorError> {
        self.0.init(&mut FixedKeyProcessorContext { inner: ctx })
    }
    fn process(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, VOut>,
        record: Record<K, VIn>,
    ) -> Result<(), ProcessorError> {
        self.0.process(
            &mut FixedKeyProcessorContext { inner: ctx },
            FixedKeyRecord(record),
        )
    }
    fn punctuate(
        &mut self,
        ctx: &mut ProcessorContext<'_, K, VOut>,
        punctuation: PunctuationId,
        timestamp: Timestamp,
    ) -> Result<(), ProcessorError> {
        self.0.punctuate(
            &mut FixedKeyProcessorContext { inner: ctx },
            punctuation,
            timestamp,
        )
    }
    fn close(&mut self) {
        self.0.close()
    }
}
