//! The async face of [`KafkaStreams`] (issue 50): what an axum or tonic
//! service awaits instead of blocking its runtime's workers.
//!
//! - [`AsyncKafkaStreams`]: start and close as futures, interactive
//!   queries without blocking. What blocks (the broker round trips of a
//!   start, joining the stream threads at a close) runs on a thread of
//!   kstreams' own, one per call, and is awaited through a oneshot channel.
//! - [`KafkaStreams::state_changes`]: a `tokio::sync::watch` of the state;
//!   [`KafkaStreams::state_transitions`] and
//!   [`KafkaStreams::uncaught_exceptions`]: lossless streams of every
//!   transition and every stream thread failure from the subscription on.
//! - The store views' `*_async` reads (e.g.
//!   [`ReadOnlyKeyValueView::get_async`](crate::kafka::ReadOnlyKeyValueView::get_async)):
//!   the read is posted to the stream threads as the blocking one is, and
//!   the task sleeps until their answers wake it.
//!
//! Only tokio's channels are used, which work on any executor: nothing
//! here needs a tokio runtime, and nothing starts a timer.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use kstreams_dsl::Topology;
use tokio::sync::{mpsc, oneshot, watch};

use super::super::config::GroupProtocol;
use super::super::instance::PauseFlag;
use super::super::local_metadata::MetadataBoard;
use super::super::queries::{
    self, EndpointBoard, IsolationLevel, MetadataSource, QueryRouter, QUERY_TIMEOUT,
};
use super::super::{
    KeyQueryMetadata, LocalMetadata, QueryError, QueryableStoreType, RuntimeError,
    StoreQueryParameters, StreamsMetadata,
};
use super::{
    key_bytes, panic_message, query_state_check, CloseOptions, KafkaStreams, Shared, State,
    StreamThreadExceptionResponse,
};

// ------------------------------------------------------------ observers

/// A stream thread's failure, as the uncaught-exception handler saw it
/// (Kafka Streams' `StreamsUncaughtExceptionHandler#handle` arguments and
/// its answer): an item of [`KafkaStreams::uncaught_exceptions`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UncaughtException {
    /// The thread that failed (a stream thread, or the global one).
    pub thread: String,
    /// What failed, as [`KafkaStreams::errors`] lists it.
    pub error: String,
    /// What the handler answered (the default handler:
    /// [`ShutdownClient`](StreamThreadExceptionResponse::ShutdownClient)).
    pub response: StreamThreadExceptionResponse,
}

/// Who hears of the instance's state changes and failures besides the
/// listener and the handler: the async face's channels. Kept in `Shared`.
pub(super) struct Observers {
    state: watch::Sender<State>,
    transitions: Subscribers<(State, State)>,
    failures: Subscribers<UncaughtException>,
}

impl Default for Observers {
    fn default() -> Self {
        Self {
            state: watch::channel(State::Created).0,
            transitions: Subscribers::default(),
            failures: Subscribers::default(),
        }
    }
}

impl Observers {
    /// Called under the state's lock, so every observer sees the
    /// transitions in the order they happened. Nothing here waits.
    pub(super) fn changed(&self, new: State, old: State) {
        self.state.send_replace(new);
        self.transitions.publish(&(new, old));
        // Nothing follows a final state: the streams end.
        if matches!(new, State::NotRunning | State::Error) {
            self.transitions.close();
            self.failures.close();
        }
    }

    /// A thread failed and the handler answered `response`.
    pub(super) fn failed(
        &self,
        thread: &str,
        error: &RuntimeError,
        response: StreamThreadExceptionResponse,
    ) {
        self.failures.publish(&UncaughtException {
            thread: thread.to_string(),
            error: error.to_string(),
            response,
        });
    }
}

/// One unbounded channel per subscriber: a subscriber misses nothing
/// between subscribing and reading, and a publisher never waits. The
/// items are few (lifecycle events), so unbounded holds little.
struct Subscribers<T> {
    /// `None` once closed: later subscribers get an ended stream.
    senders: Mutex<Option<Vec<mpsc::UnboundedSender<T>>>>,
}

impl<T> Default for Subscribers<T> {
    fn default() -> Self {
        Self {
            senders: Mutex::new(Some(Vec::new())),
        }
    }
}

impl<T: Clone> Subscribers<T> {
    fn subscribe(&self) -> mpsc::UnboundedReceiver<T> {
        let (sender, receiver) = mpsc::unbounded_channel();
        if let Some(senders) = self
            .senders
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
        {
            senders.push(sender);
        }
        receiver
    }

    fn publish(&self, item: &T) {
        if let Some(senders) = self
            .senders
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
        {
            // A dropped receiver unsubscribes.
            senders.retain(|s| s.send(item.clone()).is_ok());
        }
    }

    fn close(&self) {
        *self.senders.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

/// Every state transition of the instance from the subscription on, as
/// `(new, old)` (the state listener's order); it ends after NOT_RUNNING or
/// ERROR. A [`Stream`](futures_core::Stream), and [`next`](Self::next)
/// without one. See [`KafkaStreams::state_transitions`].
#[derive(Debug)]
pub struct StateTransitions(mpsc::UnboundedReceiver<(State, State)>);

impl StateTransitions {
    /// The next transition, `None` once the instance stopped.
    pub async fn next(&mut self) -> Option<(State, State)> {
        self.0.recv().await
    }
}

impl futures_core::Stream for StateTransitions {
    type Item = (State, State);

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().0.poll_recv(cx)
    }
}

/// Every stream thread failure of the instance from the subscription on;
/// it ends after NOT_RUNNING or ERROR. A
/// [`Stream`](futures_core::Stream), and [`next`](Self::next) without one.
/// See [`KafkaStreams::uncaught_exceptions`].
#[derive(Debug)]
pub struct UncaughtExceptions(mpsc::UnboundedReceiver<UncaughtException>);

impl UncaughtExceptions {
    /// The next failure, `None` once the instance stopped.
    pub async fn next(&mut self) -> Option<UncaughtException> {
        self.0.recv().await
    }
}

impl futures_core::Stream for UncaughtExceptions {
    type Item = UncaughtException;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().0.poll_recv(cx)
    }
}

impl KafkaStreams {
    /// The state, watched: a `tokio::sync::watch` receiver that holds the
    /// current state and wakes its task at each change (changes in quick
    /// succession may be seen as the last one; for every transition see
    /// [`state_transitions`](Self::state_transitions)). The async twin of
    /// polling [`state`](Self::state); it works on any executor.
    ///
    /// ```no_run
    /// # use kstreams_runtime::kafka::{KafkaStreams, State};
    /// # async fn ready(app: &KafkaStreams) {
    /// let mut state = app.state_changes();
    /// let now = state
    ///     .wait_for(|s| matches!(s, State::Running | State::PendingError | State::Error))
    ///     .await
    ///     .map(|s| *s);
    /// println!("{now:?}");
    /// # }
    /// ```
    pub fn state_changes(&self) -> watch::Receiver<State> {
        self.shared.observers.state.subscribe()
    }

    /// Every state transition from now on, as `(new, old)`: what
    /// [`set_state_listener`](Self::set_state_listener)'s listener is told,
    /// as a stream, for as many subscribers as want one and without
    /// replacing the listener. Nothing is lost between this call and the
    /// first read; the stream ends after NOT_RUNNING or ERROR (at once when
    /// subscribed after it).
    ///
    /// ```no_run
    /// # use kstreams_runtime::kafka::KafkaStreams;
    /// # async fn log(app: &KafkaStreams) {
    /// let mut transitions = app.state_transitions();
    /// while let Some((new, old)) = transitions.next().await {
    ///     println!("{old:?} -> {new:?}");
    /// }
    /// # }
    /// ```
    pub fn state_transitions(&self) -> StateTransitions {
        StateTransitions(self.shared.observers.transitions.subscribe())
    }

    /// Every stream thread failure from now on, with the
    /// [`set_uncaught_exception_handler`](Self::set_uncaught_exception_handler)
    /// handler's answer: an alert or a supervisor awaits it instead of
    /// polling [`errors`](Self::errors). The handler still decides; this
    /// only hears. The stream ends after NOT_RUNNING or ERROR.
    ///
    /// ```no_run
    /// # use kstreams_runtime::kafka::KafkaStreams;
    /// # async fn alert(app: &KafkaStreams) {
    /// let mut failures = app.uncaught_exceptions();
    /// while let Some(failure) = failures.next().await {
    ///     eprintln!("{} failed ({}), {:?}", failure.thread, failure.error, failure.response);
    /// }
    /// # }
    /// ```
    pub fn uncaught_exceptions(&self) -> UncaughtExceptions {
        UncaughtExceptions(self.shared.observers.failures.subscribe())
    }

    /// What interactive queries read, taken from the instance now: owns
    /// every part it needs, so it answers while `start` or `close` holds
    /// the instance.
    pub(super) fn query_face(&self) -> QueryFace {
        QueryFace {
            shared: self.shared.clone(),
            topology: self.topology.clone(),
            application_id: self.config.application_id.clone(),
            streams_protocol: self.config.group_protocol() == GroupProtocol::Streams,
            router: self.instance.store_queries.clone(),
            threads: self.instance.local_metadata.clone(),
            endpoints: self.instance.endpoints.clone(),
            tasks: self.tasks_per_subtopology.clone(),
            isolation_default: self.config.interactive_query_isolation,
            transactional_stores: self.config.transactional_stores_in_force(),
            commit_interval: self.config.effective_commit_interval(),
        }
    }
}

// ---------------------------------------------------------- query face

/// Interactive queries' view of an instance: the store views and the
/// metadata calls of [`KafkaStreams`] and [`AsyncKafkaStreams`] both.
pub(super) struct QueryFace {
    shared: Arc<Shared>,
    topology: Arc<Topology>,
    application_id: String,
    streams_protocol: bool,
    router: QueryRouter,
    threads: MetadataBoard,
    endpoints: EndpointBoard,
    /// Tasks (partitions) per stream sub-topology, known once started.
    tasks: BTreeMap<u32, usize>,
    /// `default.interactive.query.isolation.level`.
    isolation_default: IsolationLevel,
    /// Whether stores hold uncommitted writes apart (transactional stores
    /// under exactly-once): only then does a committed read wait.
    transactional_stores: bool,
    commit_interval: Duration,
}

impl QueryFace {
    /// [`KafkaStreams::store`].
    pub(super) fn store<T: QueryableStoreType>(
        &self,
        parameters: StoreQueryParameters<T>,
    ) -> Result<T::View, QueryError> {
        let check_state = query_state_check(self.shared.clone());
        check_state()?;
        if self
            .topology
            .store_subtopology(&parameters.store_name)
            .is_none()
        {
            return Err(queries::unknown_store(
                &self.topology,
                &parameters.store_name,
            ));
        }
        self.router.mark_in_use();
        let level = parameters.isolation.unwrap_or(self.isolation_default);
        let committed_only = level == IsolationLevel::ReadCommitted && self.transactional_stores;
        let timeout = match committed_only {
            true => QUERY_TIMEOUT + self.commit_interval,
            false => QUERY_TIMEOUT,
        };
        Ok(parameters.store_type.view(queries::LocalQuery {
            router: self.router.clone(),
            threads: self.threads.clone(),
            store: parameters.store_name.into(),
            partition: parameters.partition,
            stale: parameters.stale_stores,
            committed_only,
            timeout,
            check_state,
        }))
    }

    /// [`KafkaStreams::query_metadata_for_key`].
    pub(super) fn for_key_bytes<K: 'static>(
        &self,
        store: &str,
        key: &K,
        serializer: &dyn kstreams_record::Serde<K>,
    ) -> Result<KeyQueryMetadata, QueryError> {
        let topic = self.store_source_topic(store);
        let bytes = key_bytes(store, &topic, key, serializer)?;
        self.for_key(store, |partitions| {
            kstreams_record::partition_for_key(&bytes, partitions)
        })
    }

    /// [`KafkaStreams::query_metadata_for_key_with_partitioner`].
    pub(super) fn for_key(
        &self,
        store: &str,
        partitioner: impl FnOnce(i32) -> i32,
    ) -> Result<KeyQueryMetadata, QueryError> {
        query_state_check(self.shared.clone())()?;
        self.metadata_of_group().for_key(store, partitioner)
    }

    /// [`KafkaStreams::streams_metadata_for_store`].
    pub(super) fn for_store(&self, store: &str) -> Result<Vec<StreamsMetadata>, QueryError> {
        query_state_check(self.shared.clone())()?;
        self.metadata_of_group().for_store(store)
    }

    /// [`KafkaStreams::metadata_for_all_streams_clients`].
    pub(super) fn all_clients(&self) -> Result<Vec<StreamsMetadata>, QueryError> {
        query_state_check(self.shared.clone())()?;
        self.metadata_of_group().all_clients()
    }

    fn metadata_of_group(&self) -> MetadataSource<'_> {
        let endpoints = if self.streams_protocol {
            Ok(&self.endpoints)
        } else {
            Err(
                "the classic and KIP-848 consumer protocols carry no endpoints through \
                 librdkafka: set group.protocol=streams (Kafka 4.2+ brokers) and \
                 application.server to find other instances' stores; local stores can be \
                 read with store()",
            )
        };
        MetadataSource {
            topology: &self.topology,
            application_id: &self.application_id,
            tasks: &self.tasks,
            endpoints,
        }
    }

    /// A source topic of the store's sub-topology, for the key serializer
    /// (serdes may look at the topic, as Kafka's `Serializer` may).
    pub(super) fn store_source_topic(&self, store: &str) -> String {
        let subtopology = self.topology.store_subtopology(store);
        self.topology
            .source_topics(&self.application_id)
            .into_iter()
            .find(|s| Some(s.id) == subtopology)
            .and_then(|s| s.topics.into_iter().next())
            .unwrap_or_default()
    }
}

// ------------------------------------------------------ the async handle

/// [`KafkaStreams`] for async code: start and close are futures, the state
/// and the failures are channels, interactive queries are awaited. For a
/// service on tokio (axum, tonic) that must not block its runtime's
/// workers. Everything it does works on any executor: it uses tokio's
/// channels, no tokio runtime.
///
/// A wrapper rather than `async` methods on `KafkaStreams`: a start or a
/// close blocks (broker round trips, joining the stream threads), so it
/// runs on a thread of kstreams' own that needs the instance for its whole
/// length. The wrapper owns the instance and lends it to that thread; its
/// queries, state and metadata read parts shared with the stream threads,
/// so they answer while a close holds the instance. Configure the
/// `KafkaStreams` first (listeners, handlers), then wrap it.
///
/// Close is cancel-safe: the thread that closes finishes whether or not
/// the future is awaited to the end, and a later close waits for it.
/// Dropping the wrapper closes the instance on such a thread as
/// `KafkaStreams`' drop does (up to 30 s) without waiting for it: await
/// [`close`](Self::close) for a shutdown that is done when it returns.
///
/// ```no_run
/// use std::time::Duration;
/// use kstreams_dsl::{Materialized, StreamsBuilder};
/// use kstreams_runtime::kafka::*;
///
/// # async fn serve() -> Result<(), Box<dyn std::error::Error>> {
/// let builder = StreamsBuilder::new();
/// builder
///     .stream::<String, String>("clicks")
///     .group_by_key()
///     .count_with(None, Materialized::as_("clicks-per-user"));
/// let config = StreamsConfig::new("clicks", "localhost:9092");
/// let app = AsyncKafkaStreams::new(KafkaStreams::new(builder.build()?, config));
/// app.start().await?;
/// app.state_changes().wait_for(|s| *s == State::Running).await?;
/// let counts = app.store(StoreQueryParameters::from_name_and_type(
///     "clicks-per-user",
///     QueryableStoreTypes::key_value_store::<String, i64>(),
/// ))?;
/// println!("alice: {:?}", counts.get_async(&"alice".to_string()).await?);
/// app.close(Duration::from_secs(30)).await;
/// # Ok(()) }
/// ```
pub struct AsyncKafkaStreams {
    /// Locked only by the threads that run its blocking calls, never by the
    /// caller's task. `None` only in `drop`, which hands it to a thread.
    app: Option<Arc<Mutex<KafkaStreams>>>,
    /// Replaced by a successful start (which knows the tasks); the lock is
    /// held only to clone or replace the `Arc`.
    face: Arc<Mutex<Arc<QueryFace>>>,
    shared: Arc<Shared>,
    paused: PauseFlag,
    metadata: Box<dyn Fn() -> LocalMetadata + Send + Sync>,
    metrics: kstreams_metrics::MetricsRegistry,
    application_id: String,
}

impl std::fmt::Debug for AsyncKafkaStreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncKafkaStreams")
            .field("application_id", &self.application_id)
            .field("state", &self.state())
            .finish()
    }
}

impl AsyncKafkaStreams {
    /// The async face of `app`, in whatever state it is (usually CREATED,
    /// configured and not started).
    pub fn new(app: KafkaStreams) -> Self {
        Self {
            face: Arc::new(Mutex::new(Arc::new(app.query_face()))),
            shared: app.shared.clone(),
            paused: app.instance.paused.clone(),
            metadata: Box::new(app.metadata_source()),
            metrics: app.metrics().clone(),
            application_id: app.config.application_id.clone(),
            app: Some(Arc::new(Mutex::new(app))),
        }
    }

    /// [`KafkaStreams::start`], awaited: validates, checks and creates the
    /// topics, loads the global tables and starts the stream threads, on a
    /// thread of kstreams' own. It returns once the threads run (state
    /// REBALANCING, or RUNNING for global tables alone); await RUNNING with
    /// [`state_changes`](Self::state_changes). Dropping the future does not
    /// stop the start; it goes on, and the state tells how it went.
    pub async fn start(&self) -> Result<(), RuntimeError> {
        let face = self.face.clone();
        self.on_own_thread(
            "start",
            move |app: &mut KafkaStreams| -> Result<(), RuntimeError> {
                app.start()?;
                // The tasks per sub-topology, for the metadata calls.
                *face.lock().unwrap_or_else(|p| p.into_inner()) = Arc::new(app.query_face());
                Ok(())
            },
        )
        .await?
    }

    /// [`KafkaStreams::close`], awaited: every stream thread commits, closes
    /// its tasks and stops, for up to `timeout`; returns whether all
    /// stopped in time. Cancel-safe (see the type's doc).
    pub async fn close(&self, timeout: Duration) -> bool {
        self.close_with(CloseOptions::timeout(timeout)).await
    }

    /// [`KafkaStreams::close_with`], awaited; cancel-safe (see the type's
    /// doc). `false` also when the closing thread could not be started:
    /// then nothing was closed and a later close can do it.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use kstreams_runtime::kafka::*;
    /// # async fn stop(app: &AsyncKafkaStreams) {
    /// let options = CloseOptions::timeout(Duration::from_secs(30))
    ///     .with_group_membership_operation(GroupMembershipOperation::LeaveGroup);
    /// if !app.close_with(options).await {
    ///     eprintln!("some threads were still stopping after 30 s");
    /// }
    /// # }
    /// ```
    pub async fn close_with(&self, options: CloseOptions) -> bool {
        match self
            .on_own_thread("close", move |app| app.close_with(options))
            .await
        {
            Ok(stopped) => stopped,
            Err(e) => {
                log::error!("close: {e}");
                false
            }
        }
    }

    /// Runs `op` on the instance, on a thread of kstreams' own, and awaits
    /// its answer: for the blocking calls without an async twin
    /// ([`KafkaStreams::add_stream_thread`],
    /// [`remove_stream_thread`](KafkaStreams::remove_stream_thread),
    /// [`clean_up`](KafkaStreams::clean_up),
    /// [`all_local_store_partition_lags`](KafkaStreams::all_local_store_partition_lags)).
    /// It waits for a start or close in progress first. An error is a thread
    /// that could not start, or `op` panicking.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use kstreams_runtime::kafka::*;
    /// # async fn shrink(app: &AsyncKafkaStreams) -> Result<(), RuntimeError> {
    /// let removed = app
    ///     .with_app(|app| app.remove_stream_thread(Duration::from_secs(60)))
    ///     .await??;
    /// println!("removed {removed:?}");
    /// # Ok(()) }
    /// ```
    pub async fn with_app<R: Send + 'static>(
        &self,
        op: impl FnOnce(&mut KafkaStreams) -> R + Send + 'static,
    ) -> Result<R, RuntimeError> {
        self.on_own_thread("call", op).await
    }

    /// Runs `op` on a new thread named `<application.id>-<what>` that holds
    /// the instance; the returned future awaits its answer.
    fn on_own_thread<R: Send + 'static>(
        &self,
        what: &str,
        op: impl FnOnce(&mut KafkaStreams) -> R + Send + 'static,
    ) -> impl std::future::Future<Output = Result<R, RuntimeError>> + Send + 'static {
        let name = format!("{}-{what}", self.application_id);
        let (answer, answered) = oneshot::channel();
        let app = self.app.clone();
        let spawned = std::thread::Builder::new()
            .name(name.clone())
            .spawn(move || {
                // Always there but in `drop`, which no call outlives.
                let Some(app) = app else { return };
                let mut app = app.lock().unwrap_or_else(|p| p.into_inner());
                let outcome =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| op(&mut app)))
                        .map_err(|panic| panic_message(panic.as_ref()));
                // The asker may have gone (a dropped future): the work is
                // done either way.
                let _ = answer.send(outcome);
            })
            .map_err(|source| RuntimeError::Spawn {
                name: name.clone(),
                source,
            });
        async move {
            spawned?;
            match answered.await {
                Ok(Ok(value)) => Ok(value),
                Ok(Err(message)) => Err(RuntimeError::ThreadPanicked {
                    thread: name,
                    message,
                }),
                Err(_) => Err(RuntimeError::ThreadPanicked {
                    thread: name,
                    message: "it ended without answering".to_string(),
                }),
            }
        }
    }

    /// The current state ([`KafkaStreams::state`]).
    pub fn state(&self) -> State {
        *self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// [`KafkaStreams::state_changes`].
    pub fn state_changes(&self) -> watch::Receiver<State> {
        self.shared.observers.state.subscribe()
    }

    /// [`KafkaStreams::state_transitions`].
    pub fn state_transitions(&self) -> StateTransitions {
        StateTransitions(self.shared.observers.transitions.subscribe())
    }

    /// [`KafkaStreams::uncaught_exceptions`].
    pub fn uncaught_exceptions(&self) -> UncaughtExceptions {
        UncaughtExceptions(self.shared.observers.failures.subscribe())
    }

    /// [`KafkaStreams::errors`].
    pub fn errors(&self) -> Vec<String> {
        self.shared
            .errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// [`KafkaStreams::metadata`].
    pub fn metadata(&self) -> LocalMetadata {
        (self.metadata)()
    }

    /// [`KafkaStreams::metrics`].
    pub fn metrics(&self) -> &kstreams_metrics::MetricsRegistry {
        &self.metrics
    }

    /// [`KafkaStreams::pause`].
    pub fn pause(&self) {
        self.paused.set(true);
    }

    /// [`KafkaStreams::resume`].
    pub fn resume(&self) {
        self.paused.set(false);
    }

    /// [`KafkaStreams::is_paused`].
    pub fn is_paused(&self) -> bool {
        self.paused.get()
    }

    fn face(&self) -> Arc<QueryFace> {
        self.face.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// [`KafkaStreams::store`]: a view whose `*_async` reads are awaited
    /// (its blocking reads are there too, for a thread that may block).
    /// Getting the view does not wait.
    ///
    /// ```no_run
    /// # use kstreams_runtime::kafka::*;
    /// # async fn top(app: &AsyncKafkaStreams) -> Result<(), QueryError> {
    /// let counts = app.store(StoreQueryParameters::from_name_and_type(
    ///     "counts",
    ///     QueryableStoreTypes::key_value_store::<String, i64>(),
    /// ))?;
    /// // A runtime's timeout bounds a stream thread stuck in a long step.
    /// let all = tokio::time::timeout(std::time::Duration::from_secs(10), counts.all_async())
    ///     .await
    ///     .map_err(|_| QueryError::NotAvailable {
    ///         store: "counts".into(),
    ///         reason: "no answer within 10 s".into(),
    ///     })??;
    /// println!("{} keys", all.len());
    /// # Ok(()) }
    /// ```
    pub fn store<T: QueryableStoreType>(
        &self,
        parameters: StoreQueryParameters<T>,
    ) -> Result<T::View, QueryError> {
        self.face().store(parameters)
    }

    /// [`KafkaStreams::query_metadata_for_key`]; it does not wait (the
    /// endpoints are the last ones the group sent).
    pub fn query_metadata_for_key<K: 'static>(
        &self,
        store: &str,
        key: &K,
        serializer: &dyn kstreams_record::Serde<K>,
    ) -> Result<KeyQueryMetadata, QueryError> {
        self.face().for_key_bytes(store, key, serializer)
    }

    /// [`KafkaStreams::query_metadata_for_key_with_partitioner`].
    pub fn query_metadata_for_key_with_partitioner(
        &self,
        store: &str,
        partitioner: impl FnOnce(i32) -> i32,
    ) -> Result<KeyQueryMetadata, QueryError> {
        self.face().for_key(store, partitioner)
    }

    /// [`KafkaStreams::streams_metadata_for_store`].
    pub fn streams_metadata_for_store(
        &self,
        store: &str,
    ) -> Result<Vec<StreamsMetadata>, QueryError> {
        self.face().for_store(store)
    }

    /// [`KafkaStreams::metadata_for_all_streams_clients`].
    pub fn metadata_for_all_streams_clients(&self) -> Result<Vec<StreamsMetadata>, QueryError> {
        self.face().all_clients()
    }
}

impl Drop for AsyncKafkaStreams {
    fn drop(&mut self) {
        // The last owner's drop closes the instance and may stop the async
        // processors' runtime: neither may happen on an async worker.
        let Some(app) = self.app.take() else { return };
        let name = format!("{}-drop", self.application_id);
        if let Err(e) = std::thread::Builder::new()
            .name(name)
            .spawn(move || drop(app))
        {
            log::warn!("dropping the application on the caller's thread: {e}");
        }
    }
}
