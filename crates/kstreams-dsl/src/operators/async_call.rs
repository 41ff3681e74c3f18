//! The async node: starts a call per record on the task's tokio runtime
//! and forwards its result when the task applies the completion (see
//! [`crate::async_processing`] for why it works this way).

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::Instant;

use kstreams_record::{Headers, Record, RecordMetadata, Timestamp};
use kstreams_state::StoreContext;

use crate::async_processing::{
    AsyncOptions, AsyncOrder, AsyncRuntime, AsyncTimeout, CompletionSignal,
};
use crate::forwarding::{Input, NodeInfo, Outputs};
use crate::graph::ProcessorFactory;
use crate::nodes::NodeHandle;
use crate::task_context::TaskContext;
use crate::{ProcessorError, StreamsError};

/// What one call returns: the records to forward (key and value; they keep
/// the input's timestamp and headers).
pub(crate) type CallResult<K, V> = Result<Vec<(K, V)>, ProcessorError>;

/// A future of one attempt.
pub(crate) type CallFuture<K, V> = Pin<Box<dyn Future<Output = CallResult<K, V>> + Send>>;

/// The user's function, shared by the tasks and called again for a retry.
pub(crate) type SharedCall<KIn, VIn, KOut, VOut> =
    Arc<dyn Fn(KIn, VIn) -> CallFuture<KOut, VOut> + Send + Sync>;

/// A user's record-to-records async function as the node's shared call:
/// the Processor-API shape (`process_async`, `add_async_processor`).
pub(crate) fn records_call<KIn, VIn, KOut, VOut, F, Fut, E>(
    call: F,
) -> SharedCall<KIn, VIn, KOut, VOut>
where
    F: Fn(KIn, VIn) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Vec<(KOut, VOut)>, E>> + Send + 'static,
    E: Into<ProcessorError> + 'static,
{
    Arc::new(move |key, value| {
        let future = call(key, value);
        Box::pin(async move { future.await.map_err(Into::into) }) as CallFuture<KOut, VOut>
    })
}

/// The factory of an async node, shared by the DSL's `KStream` operators and
/// the Processor API's `Topology::add_async_processor`: one node per task,
/// each with its own queues, all calling the same function.
pub(crate) fn async_node_factory<KIn, VIn, KOut, VOut>(
    call: SharedCall<KIn, VIn, KOut, VOut>,
    options: AsyncOptions,
) -> ProcessorFactory
where
    KIn: Clone + Hash + Eq + Send + 'static,
    VIn: Clone + Send + 'static,
    KOut: Clone + Send + 'static,
    VOut: Clone + Send + 'static,
{
    Arc::new(move |info, children| {
        let outputs = Outputs::<KOut, VOut>::from_children(children)?;
        let node = Rc::new(AsyncNode::new(info, call.clone(), options.clone(), outputs));
        let input: Rc<dyn Input<KIn, VIn>> = node.clone();
        let handle: Rc<dyn NodeHandle> = node;
        Ok((Box::new(input) as Box<dyn std::any::Any>, handle))
    })
}

/// Where the record came from, restored when its result is forwarded.
struct Origin {
    metadata: Option<RecordMetadata>,
    timestamp: Timestamp,
    headers: Headers,
    /// The `tracing` span the record was pushed in (the runtime's record
    /// span when tracing is on): the call runs in it, so spans the call
    /// opens (an HTTP client's) are its children, even when the call
    /// starts later, after the key's earlier call.
    span: tracing::Span,
}

/// A record whose key has a call out: it starts when that call finishes.
struct Waiting<KIn, VIn> {
    seq: u64,
    key: KIn,
    value: VIn,
    origin: Origin,
    queued_at: Instant,
}

/// A record whose call was started (and may have finished).
struct Call<KIn> {
    key: KIn,
    origin: Origin,
    abort: tokio::task::AbortHandle,
}

struct State<KIn, VIn, KOut, VOut> {
    next_seq: u64,
    sender: Sender<(u64, CallResult<KOut, VOut>)>,
    receiver: Receiver<(u64, CallResult<KOut, VOut>)>,
    /// Keys with a call out, each with the records waiting behind it.
    busy_keys: HashMap<KIn, VecDeque<Waiting<KIn, VIn>>>,
    calls: HashMap<u64, Call<KIn>>,
    /// Finished calls not applied yet, by admission order.
    finished: BTreeMap<u64, CallResult<KOut, VOut>>,
    /// Under [`AsyncOrder::Input`]: every admitted record, in order.
    admitted: VecDeque<u64>,
    /// The runtime of the first record, to give back the thread's count
    /// when the node closes with records in it.
    runtime: Option<AsyncRuntime>,
}

/// An async node: one per task.
pub(crate) struct AsyncNode<KIn, VIn, KOut, VOut> {
    info: NodeInfo,
    call: SharedCall<KIn, VIn, KOut, VOut>,
    options: AsyncOptions,
    outputs: Outputs<KOut, VOut>,
    state: RefCell<State<KIn, VIn, KOut, VOut>>,
}

impl<KIn, VIn, KOut, VOut> AsyncNode<KIn, VIn, KOut, VOut>
where
    KIn: Clone + Hash + Eq + Send + 'static,
    VIn: Clone + Send + 'static,
    KOut: Clone + Send + 'static,
    VOut: Clone + Send + 'static,
{
    pub(crate) fn new(
        info: NodeInfo,
        call: SharedCall<KIn, VIn, KOut, VOut>,
        options: AsyncOptions,
        outputs: Outputs<KOut, VOut>,
    ) -> Self {
        let (sender, receiver) = channel();
        Self {
            info,
            call,
            options,
            outputs,
            state: RefCell::new(State {
                next_seq: 0,
                sender,
                receiver,
                busy_keys: HashMap::new(),
                calls: HashMap::new(),
                finished: BTreeMap::new(),
                admitted: VecDeque::new(),
                runtime: None,
            }),
        }
    }

    /// Starts the call of one record on the runtime.
    fn start(
        &self,
        state: &mut State<KIn, VIn, KOut, VOut>,
        runtime: &AsyncRuntime,
        seq: u64,
        key: KIn,
        value: VIn,
        origin: Origin,
    ) {
        let call = self.call.clone();
        let options = self.options.clone();
        let sensors = runtime.sensors.clone();
        let mut reply = Reply {
            seq,
            sender: Some(state.sender.clone()),
            signal: runtime.signal.clone(),
        };
        let call_key = key.clone();
        let span = origin.span.clone();
        let task = runtime.handle.spawn(tracing::Instrument::instrument(
            async move {
                let started = Instant::now();
                let mut attempts = 0u32;
                let result = loop {
                    attempts += 1;
                    let attempt = call(call_key.clone(), value.clone());
                    let outcome = match options.timeout {
                        Some(timeout) => match tokio::time::timeout(timeout, attempt).await {
                            Ok(outcome) => outcome,
                            Err(_) => {
                                if let Some(count) = &sensors.timeouts {
                                    count(1);
                                }
                                Err(Box::new(AsyncTimeout { timeout, attempts }) as ProcessorError)
                            }
                        },
                        None => attempt.await,
                    };
                    match outcome {
                        Ok(records) => break Ok(records),
                        Err(_) if attempts <= options.retries => {
                            if let Some(count) = &sensors.retries {
                                count(1);
                            }
                            tokio::time::sleep(options.backoff_before(attempts)).await;
                        }
                        Err(error) => break Err(error),
                    }
                };
                if let Some(observe) = &sensors.call_latency {
                    observe(started.elapsed().as_secs_f64());
                }
                reply.send(result);
            },
            span,
        ));
        state.calls.insert(
            seq,
            Call {
                key,
                origin,
                abort: task.abort_handle(),
            },
        );
    }

    /// Moves what finished into `finished`, starting the next record of
    /// each key whose call finished.
    fn collect(&self, state: &mut State<KIn, VIn, KOut, VOut>) {
        let Some(runtime) = state.runtime.clone() else {
            return;
        };
        while let Ok((seq, result)) = state.receiver.try_recv() {
            let Some(call) = state.calls.get(&seq) else {
                continue;
            };
            let key = call.key.clone();
            let next = match state.busy_keys.get_mut(&key) {
                Some(queue) => queue.pop_front(),
                None => None,
            };
            match next {
                Some(next) => {
                    if let Some(observe) = &runtime.sensors.queue_time {
                        observe(next.queued_at.elapsed().as_secs_f64());
                    }
                    self.start(state, &runtime, next.seq, next.key, next.value, next.origin);
                }
                None => {
                    state.busy_keys.remove(&key);
                }
            }
            state.finished.insert(seq, result);
        }
    }

    /// The next completion to apply, by the output order.
    fn take_next(&self) -> Option<(Call<KIn>, CallResult<KOut, VOut>)> {
        let mut guard = self.state.borrow_mut();
        let state = &mut *guard;
        self.collect(state);
        let (seq, result) = match self.options.order {
            AsyncOrder::PerKey => state.finished.pop_first()?,
            AsyncOrder::Input => {
                let head = *state.admitted.front()?;
                let result = state.finished.remove(&head)?;
                state.admitted.pop_front();
                (head, result)
            }
        };
        let call = state.calls.remove(&seq)?;
        Some((call, result))
    }
}

/// Sends a call's result back, or on drop (a panic in the user's future,
/// or the task cancelled) a failure in its place, so that no record stays
/// in flight forever.
struct Reply<KOut, VOut> {
    seq: u64,
    sender: Option<Sender<(u64, CallResult<KOut, VOut>)>>,
    signal: Arc<CompletionSignal>,
}

impl<KOut, VOut> Reply<KOut, VOut> {
    fn send(&mut self, result: CallResult<KOut, VOut>) {
        if let Some(sender) = self.sender.take() {
            // The node may be gone (its task closed): nobody waits then.
            let _ = sender.send((self.seq, result));
            self.signal.notify();
        }
    }
}

impl<KOut, VOut> Drop for Reply<KOut, VOut> {
    fn drop(&mut self) {
        if self.sender.is_some() {
            let message = if std::thread::panicking() {
                "the async call panicked"
            } else {
                "the async call was cancelled"
            };
            self.send(Err(message.into()));
        }
    }
}

impl<KIn, VIn, KOut, VOut> Input<KIn, VIn> for AsyncNode<KIn, VIn, KOut, VOut>
where
    KIn: Clone + Hash + Eq + Send + 'static,
    VIn: Clone + Send + 'static,
    KOut: Clone + Send + 'static,
    VOut: Clone + Send + 'static,
{
    fn push(&self, record: Record<KIn, VIn>, task: &mut TaskContext) -> Result<(), StreamsError> {
        let runtime = task.async_work.runtime.clone().ok_or_else(|| {
            StreamsError::Internal(format!(
                "async processor {:?} has no runtime to run its calls on",
                self.info.name
            ))
        })?;
        let origin = Origin {
            metadata: task.metadata.clone(),
            timestamp: record.timestamp,
            headers: record.headers,
            span: tracing::Span::current(),
        };
        task.async_work.admit(origin.metadata.as_ref());
        let mut guard = self.state.borrow_mut();
        let state = &mut *guard;
        if state.runtime.is_none() {
            state.runtime = Some(runtime.clone());
        }
        let seq = state.next_seq;
        state.next_seq += 1;
        if self.options.order == AsyncOrder::Input {
            state.admitted.push_back(seq);
        }
        match state.busy_keys.get_mut(&record.key) {
            Some(queue) => queue.push_back(Waiting {
                seq,
                key: record.key,
                value: record.value,
                origin,
                queued_at: Instant::now(),
            }),
            None => {
                state.busy_keys.insert(record.key.clone(), VecDeque::new());
                if let Some(observe) = &runtime.sensors.queue_time {
                    observe(0.0);
                }
                self.start(state, &runtime, seq, record.key, record.value, origin);
            }
        }
        Ok(())
    }
}

impl<KIn, VIn, KOut, VOut> NodeHandle for AsyncNode<KIn, VIn, KOut, VOut>
where
    KIn: Clone + Hash + Eq + Send + 'static,
    VIn: Clone + Send + 'static,
    KOut: Clone + Send + 'static,
    VOut: Clone + Send + 'static,
{
    fn init(&self, _task: &mut TaskContext) -> Result<(), StreamsError> {
        Ok(())
    }

    fn punctuate(
        &self,
        _id: u64,
        _timestamp: Timestamp,
        _task: &mut TaskContext,
    ) -> Result<(), StreamsError> {
        Ok(())
    }

    fn flush(&self, _task: &mut TaskContext) -> Result<(), StreamsError> {
        Ok(())
    }

    fn is_async(&self) -> bool {
        true
    }

    fn apply_async_completion(
        &self,
        task: &mut TaskContext,
        stores: &StoreContext,
    ) -> Result<bool, StreamsError> {
        let Some((call, result)) = self.take_next() else {
            return Ok(false);
        };
        let Origin {
            metadata,
            timestamp,
            headers,
            span,
        } = call.origin;
        // Downstream of the call is still the record's processing.
        let _in_span = span.enter();
        task.async_work.finish(metadata.as_ref());
        // The result runs downstream as the record did: its origin, its
        // timestamp and headers for the stores, this node as the current one.
        let previous_metadata = std::mem::replace(&mut task.metadata, metadata);
        let previous_node = task.current_node.replace(self.info.name.clone());
        stores.set_record_timestamp(timestamp);
        stores.set_record_headers(&headers);
        let header_guard = task.enter_record_headers(&headers);
        let result = match result {
            Ok(records) => records.into_iter().try_for_each(|(key, value)| {
                self.outputs.forward(
                    Record {
                        key,
                        value,
                        timestamp,
                        headers: headers.clone(),
                    },
                    task,
                )
            }),
            Err(source) => Err(StreamsError::Processing {
                node: self.info.name.to_string(),
                position: task.position(),
                source,
            }),
        };
        task.leave_record_headers(header_guard);
        task.current_node = previous_node;
        task.metadata = previous_metadata;
        result.map(|()| true)
    }

    fn close(&self) {
        let Ok(mut state) = self.state.try_borrow_mut() else {
            return;
        };
        for call in state.calls.values() {
            call.abort.abort();
        }
        let outstanding =
            state.calls.len() + state.busy_keys.values().map(VecDeque::len).sum::<usize>();
        if let Some(runtime) = &state.runtime {
            runtime
                .thread_in_flight
                .set(runtime.thread_in_flight.get().saturating_sub(outstanding));
            if let Some(gauge) = &runtime.sensors.in_flight {
                gauge(-(outstanding as i64));
            }
        }
        state.calls.clear();
        state.busy_keys.clear();
        state.finished.clear();
        state.admitted.clear();
    }
}
