//! `KafkaStreams`: the application's lifecycle.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use kstreams_dsl::Topology;

use super::config::{GroupProtocol, KafkaClient, StreamsConfig};
use super::instance::Instance;
pub(super) use super::state::State;
use super::thread::{StreamThread, ThreadState};
use super::topics::{prepare_topics, SourceTopicIndex};
use super::RuntimeError;

mod async_face;
mod close_options;
mod state_cleaner;
mod stream_threads;

pub use async_face::{AsyncKafkaStreams, StateTransitions, UncaughtException, UncaughtExceptions};
pub use close_options::{CloseOptions, GroupMembershipOperation};
use stream_threads::{StreamThreadHandle, ThreadFactory};

/// What to do when a stream thread fails: Kafka Streams'
/// `StreamsUncaughtExceptionHandler` responses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StreamThreadExceptionResponse {
    /// Start a new thread in its place; it resumes from the last commit.
    ReplaceThread,
    /// Stop every thread of this instance (the default).
    #[default]
    ShutdownClient,
    /// Stop the whole application: every instance ends in ERROR. Under
    /// `group.protocol=streams` the instance's live threads ask the streams
    /// group (a new thread joins to ask when the failed one was the last),
    /// and the broker tells every member of the group; each instance that
    /// hears it stops its threads cleanly, the reason in its
    /// [`KafkaStreams::errors`]. Without an answer in 30 s the asking
    /// instance stops alone. Under the classic and consumer protocols only
    /// this instance stops, as with `ShutdownClient`: Kafka Streams asks the
    /// others through an error code in the group's assignment, which
    /// librdkafka's consumer gives kstreams no way to set; stop them from
    /// outside.
    ShutdownApplication,
}

type StateListener = Box<dyn Fn(State, State) + Send + Sync>;
type ExceptionHandler = Box<dyn Fn(&RuntimeError) -> StreamThreadExceptionResponse + Send + Sync>;

struct Shared {
    state: Mutex<State>,
    listener: Mutex<Option<StateListener>>,
    handler: Mutex<Option<ExceptionHandler>>,
    stop: AtomicBool,
    /// Stops the global thread: set only once the stream threads are done,
    /// as their last records and commit may still read the global stores.
    global_stop: AtomicBool,
    /// The stream threads the instance runs: `num.stream.threads`, then
    /// one more or fewer for each thread added or removed.
    threads_total: AtomicUsize,
    threads_assigned: AtomicUsize,
    threads_alive: AtomicUsize,
    errors: Mutex<Vec<String>>,
    /// The async face's watch and streams of states and failures.
    observers: async_face::Observers,
}

impl Shared {
    fn transition(&self, to: State) {
        let from = {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            let from = *state;
            let allowed = match (from, to) {
                (a, b) if a == b => false,
                (State::NotRunning | State::Error, _) => false,
                (State::PendingShutdown, b) => b == State::NotRunning,
                (State::PendingError, b) => b == State::Error,
                _ => true,
            };
            if !allowed {
                return;
            }
            *state = to;
            self.observers.changed(to, from);
            from
        };
        log::info!("state transition from {from:?} to {to:?}");
        if let Some(listener) = self
            .listener
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            listener(to, from);
        }
    }
}

/// A kstreams application on Kafka: Kafka Streams' `KafkaStreams`.
///
/// Its calls block the caller; async code (an axum or tonic service) wraps
/// it in [`AsyncKafkaStreams`], whose start, close and queries are awaited.
///
/// ```no_run
/// use kstreams_dsl::StreamsBuilder;
/// use kstreams_runtime::kafka::{KafkaStreams, StreamsConfig};
///
/// let builder = StreamsBuilder::new();
/// builder.stream::<String, String>("in").map_values(|v| v.to_uppercase()).to("out");
/// let config = StreamsConfig::new("upper", "localhost:9092");
/// let mut app = KafkaStreams::new(builder.build().unwrap(), config);
/// app.start().unwrap();
/// // ... until SIGTERM:
/// app.close(std::time::Duration::from_secs(30));
/// ```
pub struct KafkaStreams {
    topology: Arc<Topology>,
    config: StreamsConfig,
    /// What the instance runs with, shared by its threads.
    instance: Instance,
    shared: Arc<Shared>,
    threads: Vec<StreamThreadHandle>,
    /// What the stream threads are made from, from `start` on.
    factory: Option<ThreadFactory>,
    /// Reads the changelogs' end offsets for
    /// [`all_local_store_partition_lags`](Self::all_local_store_partition_lags),
    /// made at its first call.
    lag_consumer: Mutex<Option<rdkafka::consumer::BaseConsumer>>,
    /// The global thread, when the topology has global tables.
    global: Option<JoinHandle<()>>,
    /// Deletes the state of tasks no longer owned here, from `start` until
    /// the threads have stopped.
    state_cleaner: Option<state_cleaner::StateCleaner>,
    /// The process id and the application directory's lock, held from
    /// `start` until the threads are stopped.
    process: Option<ProcessIdentity>,
    /// Tasks (partitions) per stream sub-topology, from `start`: where
    /// interactive queries find a key's partition.
    tasks_per_subtopology: std::collections::BTreeMap<u32, usize>,
}

/// Who this instance is across restarts: Kafka Streams' process id.
struct ProcessIdentity {
    id: String,
    /// `None` when the id is not the persisted one (see `ProcessIdentity::initialize`).
    _directory_lock: Option<kstreams_state::__private::ApplicationDirectoryLock>,
}

impl ProcessIdentity {
    /// The id persisted in `<state.dir>/<application.id>`, as Kafka
    /// Streams' `StateDirectory#initializeProcessId`: the transactional ids
    /// are made from it, so a restarted instance fences the producers of
    /// the one it replaces and aborts their open transactions at once,
    /// instead of read_committed consumers waiting out
    /// `transaction.timeout.ms`.
    ///
    /// Kafka Streams persists it only for topologies with persistent stores
    /// and draws a new one otherwise; kstreams persists it for every
    /// topology (the state directory exists anyway), as stateless
    /// exactly-once apps gain the most. A stateless topology whose directory
    /// another instance holds gets a new id, as in Kafka Streams; a stateful
    /// one fails, as in Kafka Streams.
    fn initialize(topology: &Topology, config: &StreamsConfig) -> Result<Self, RuntimeError> {
        let state_dir = kstreams_state::__private::StateDirectory::new(
            &config.state_dir,
            &config.application_id,
        )?;
        let stateful = !topology.global_stores().is_empty()
            || topology
                .subtopology_ids()
                .into_iter()
                .any(|id| topology.subtopology_has_stores(id));
        let lock = match state_dir.lock_application_directory() {
            Ok(lock) => lock,
            Err(e @ kstreams_state::Error::StateDirectoryLocked { .. }) if !stateful => {
                let id = uuid::Uuid::new_v4().to_string();
                log::warn!("{e}; this stateless instance runs with a new process id {id}");
                return Ok(Self {
                    id,
                    _directory_lock: None,
                });
            }
            Err(e) => {
                log::error!("unable to take the state directory's lock: {e}");
                return Err(e.into());
            }
        };
        let id = lock.initialize_process_id()?.to_string();
        Ok(Self {
            id,
            _directory_lock: Some(lock),
        })
    }
}

impl KafkaStreams {
    /// An application, in state CREATED.
    pub fn new(topology: Topology, config: StreamsConfig) -> Self {
        let threads_total = config.num_stream_threads;
        Self {
            topology: Arc::new(topology),
            config,
            instance: Instance::default(),
            shared: Arc::new(Shared {
                state: Mutex::new(State::Created),
                listener: Mutex::new(None),
                handler: Mutex::new(None),
                stop: AtomicBool::new(false),
                global_stop: AtomicBool::new(false),
                threads_total: AtomicUsize::new(threads_total),
                threads_assigned: AtomicUsize::new(0),
                threads_alive: AtomicUsize::new(0),
                errors: Mutex::new(Vec::new()),
                observers: Default::default(),
            }),
            threads: Vec::new(),
            factory: None,
            lag_consumer: Mutex::new(None),
            global: None,
            state_cleaner: None,
            process: None,
            tasks_per_subtopology: Default::default(),
        }
    }

    /// Called with (new, old) on every state change. Async code awaits
    /// [`state_changes`](Self::state_changes) or
    /// [`state_transitions`](Self::state_transitions) instead.
    pub fn set_state_listener(&self, listener: impl Fn(State, State) + Send + Sync + 'static) {
        *self
            .shared
            .listener
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(Box::new(listener));
    }

    /// Decides what happens when a stream thread fails. Its failures, with
    /// the answer, are also a stream:
    /// [`uncaught_exceptions`](Self::uncaught_exceptions).
    pub fn set_uncaught_exception_handler(
        &self,
        handler: impl Fn(&RuntimeError) -> StreamThreadExceptionResponse + Send + Sync + 'static,
    ) {
        *self
            .shared
            .handler
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(Box::new(handler));
    }

    /// Sets the listener told about every restoration of this instance's
    /// state (Kafka Streams' `setGlobalStateRestoreListener`): its tasks'
    /// stores restoring from their changelogs, the global stores loading,
    /// and its tasks bootstrapping their tables. Only before
    /// [`KafkaStreams::start`], as in Kafka Streams; a second call replaces
    /// the first listener.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use kstreams_dsl::StreamsBuilder;
    /// use kstreams_runtime::kafka::{KafkaStreams, StateRestoreListener, StreamsConfig, TopicPartition};
    ///
    /// struct Log;
    /// impl StateRestoreListener for Log {
    ///     fn on_restore_end(&self, partition: &TopicPartition, store: &str, total: u64) {
    ///         println!("{store} restored {total} records from {partition}");
    ///     }
    /// }
    /// let builder = StreamsBuilder::new();
    /// builder.stream::<String, String>("in").group_by_key().count();
    /// let mut app = KafkaStreams::new(builder.build().unwrap(), StreamsConfig::new("app", "localhost:9092"));
    /// app.set_global_state_restore_listener(Arc::new(Log)).unwrap();
    /// app.start().unwrap();
    /// ```
    pub fn set_global_state_restore_listener(
        &self,
        listener: Arc<dyn kstreams_state::StateRestoreListener>,
    ) -> Result<(), RuntimeError> {
        match self.state() {
            State::Created => {
                self.instance.restore_board.set_listener(listener);
                Ok(())
            }
            state => Err(RuntimeError::IllegalState(state)),
        }
    }

    /// The restorations in flight now (changelog, global and bootstrap),
    /// with their offsets and records restored: what `/state` shows.
    pub fn restore_progress(&self) -> Vec<super::RestoreProgress> {
        self.instance.restore_board.in_progress()
    }

    /// A function that reads [`KafkaStreams::restore_progress`] from any
    /// thread, for as long as it is kept.
    pub fn restore_progress_source(
        &self,
    ) -> impl Fn() -> Vec<super::RestoreProgress> + Send + Sync + 'static {
        let board = self.instance.restore_board.clone();
        move || board.in_progress()
    }

    /// The current state; [`state_changes`](Self::state_changes) watches it.
    pub fn state(&self) -> State {
        *self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Pauses this instance's processing (Kafka Streams'
    /// `KafkaStreams#pause`): its active tasks process and punctuate no
    /// more, its standbys are not updated and its restorations wait, from
    /// each stream thread's next pass on. The threads stay in the group:
    /// they poll (their input partitions paused, nothing fetched), commit
    /// what was processed before, and keep their tasks; tasks assigned
    /// while paused start paused. The state does not change (RUNNING stays
    /// RUNNING). Global tables keep updating. Callable in any state, also
    /// before [`start`](Self::start). Only this instance pauses.
    pub fn pause(&self) {
        self.instance.paused.set(true);
    }

    /// Continues after [`pause`](Self::pause) (Kafka Streams'
    /// `KafkaStreams#resume`), each task from where it stopped.
    pub fn resume(&self) {
        self.instance.paused.set(false);
    }

    /// Whether [`pause`](Self::pause) was called and
    /// [`resume`](Self::resume) not since (Kafka Streams'
    /// `KafkaStreams#isPaused`).
    pub fn is_paused(&self) -> bool {
        self.instance.paused.get()
    }

    /// The application's metrics (Kafka Streams' `KafkaStreams#metrics`):
    /// serve them with kstreams-http's `HttpServer` or read them
    /// with [`MetricsRegistry::gather_text`](kstreams_metrics::MetricsRegistry::gather_text).
    pub fn metrics(&self) -> &kstreams_metrics::MetricsRegistry {
        &self.config.metrics
    }

    /// What made threads fail, oldest first.
    pub fn errors(&self) -> Vec<String> {
        self.shared
            .errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Checks the topics, creates internal ones, and starts the threads.
    /// It blocks on broker round trips: async code awaits
    /// [`AsyncKafkaStreams::start`] instead.
    pub fn start(&mut self) -> Result<(), RuntimeError> {
        let state = self.state();
        if state != State::Created {
            return Err(RuntimeError::IllegalState(state));
        }
        self.config.validate()?;
        // Named handlers resolve only now: the application registers them
        // after reading its properties.
        self.config.exception_handlers.resolve()?;
        // Once per instance: its stores share what it makes (the bounded
        // cache), across retried starts too.
        #[cfg(feature = "rocksdb")]
        if self.instance.rocksdb.is_none() {
            self.instance.rocksdb = Some(self.config.rocksdb.instance_settings()?);
        }
        if self.config.application_server.is_some()
            && self.config.group_protocol() != super::config::GroupProtocol::Streams
        {
            log::warn!(
                "config application.server has no effect without group.protocol=streams: \
                 only a streams group tells other instances about endpoints"
            );
        }
        // Before the broker is asked anything, as Kafka Streams does it in
        // its constructor: a second instance on this state directory fails
        // at once. Kept when a failed start is retried: this instance holds
        // the directory's lock already.
        if self.process.is_none() {
            self.process = Some(ProcessIdentity::initialize(&self.topology, &self.config)?);
        }
        if self.state_cleaner.is_none() {
            self.state_cleaner = Some(self.state_cleaner()?);
        }
        self.tasks_per_subtopology = prepare_topics(&self.topology, &self.config)?;
        if let (Some(replicas), super::config::GroupProtocol::Streams) = (
            self.config.num_standby_replicas,
            self.config.group_protocol(),
        ) {
            set_standby_replicas(&self.config, replicas)?;
        }
        let sources = Arc::new(SourceTopicIndex::new(
            &self.topology,
            &self.config.application_id,
        ));
        let process_id = self
            .process
            .as_ref()
            .map(|p| p.id.clone())
            .unwrap_or_default();
        self.shared.transition(State::Rebalancing);
        // Global tables are loaded whole before any stream thread runs, so
        // no record is joined against a half-loaded global table.
        if let Some(updater) =
            super::global::GlobalUpdater::load(&self.topology, &self.config, &self.instance)?
        {
            let shared = self.shared.clone();
            let name = format!("{}-GlobalStreamThread", self.config.application_id);
            let handle = std::thread::Builder::new()
                .name(name)
                .spawn(move || {
                    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        updater.run(&shared.global_stop)
                    }))
                    .unwrap_or_else(|panic| {
                        Err(RuntimeError::ThreadPanicked {
                            thread: std::thread::current()
                                .name()
                                .unwrap_or("global")
                                .to_string(),
                            message: panic_message(panic.as_ref()),
                        })
                    });
                    if let Err(e) = result {
                        global_thread_failed(&shared, &e);
                    }
                })
                .map_err(|source| RuntimeError::Spawn {
                    name: format!("{}-GlobalStreamThread", self.config.application_id),
                    source,
                })?;
            self.global = Some(handle);
        }
        if sources.topics().next().is_none() && sources.patterns().next().is_none() {
            // Only global tables: as in Kafka Streams, the instance runs
            // with its global thread alone.
            self.shared.transition(State::Running);
            return Ok(());
        }
        // The threads' standby listener records where each standby store
        // is, for all_local_store_partition_lags, and tells the
        // application's listener.
        let mut instance = self.instance.clone();
        instance.standby_listener = Some(
            self.instance
                .standby_positions
                .listener(self.instance.standby_listener.clone()),
        );
        self.factory = Some(ThreadFactory {
            process_id,
            config: self.config.clone(),
            instance,
            topology: self.topology.clone(),
            sources,
        });
        let threads = self.config.num_stream_threads;
        for index in 0..threads {
            self.start_thread(index, threads, false)?;
        }
        Ok(())
    }

    /// The state directory's cleaner (Kafka Streams' `stateDirCleaner`):
    /// what the instance owns is what its threads publish, active and
    /// standby tasks both.
    fn state_cleaner(&self) -> Result<state_cleaner::StateCleaner, RuntimeError> {
        let shared = self.shared.clone();
        let board = self.instance.local_metadata.clone();
        state_cleaner::StateCleaner::start(
            self.config.state_dir.clone(),
            &self.config.application_id,
            self.config.state_cleanup_delay,
            move || *shared.state.lock().unwrap_or_else(|p| p.into_inner()) == State::Running,
            move || {
                board
                    .threads()
                    .iter()
                    .flat_map(|t| t.active_tasks.iter().chain(&t.standby_tasks))
                    .map(|task| format!("{}_{}", task.subtopology, task.partition))
                    .collect()
            },
        )
    }

    /// Stops the threads (each commits and closes its tasks) and waits up
    /// to `timeout`. Returns whether all stopped in time. Kafka Streams'
    /// `close(Duration)`: [`close_with`](Self::close_with) with the timeout
    /// and the default membership operation. Async code awaits
    /// [`AsyncKafkaStreams::close`] instead.
    pub fn close(&mut self, timeout: Duration) -> bool {
        self.close_with(CloseOptions::timeout(timeout))
    }

    /// Deletes this application's local state: every task's stores and
    /// checkpoint and the global stores' state under
    /// `<state.dir>/<application.id>`, so that the next [`start`](Self::start)
    /// restores them from their changelogs. Kafka Streams'
    /// `KafkaStreams#cleanUp`.
    ///
    /// Only before `start` or after [`close`](Self::close): in states
    /// `Created`, `NotRunning` and `Error`, as in Kafka Streams; otherwise
    /// [`RuntimeError::CleanUpWhileRunning`]. (In `Error` the stopped
    /// threads are joined first.) Another instance running on the same
    /// state directory holds its lock: then nothing is deleted and the
    /// error is the state directory's `StateDirectoryLocked`; a task
    /// directory someone else locks is left and reported
    /// (`TaskDirectoryLocked`) once the rest is deleted. The application
    /// directory itself stays with its lock file and the process id file
    /// (`kafka-streams-process-metadata`), as in Kafka Streams 4.4
    /// (KIP-1283): the instance keeps its process id.
    ///
    /// The reset runbook: stop every instance; reset the application on
    /// the cluster with Kafka's tool (it deletes the internal topics and
    /// moves the input offsets back); then clean up each instance before
    /// starting it again, or its stores keep the counts of the first run
    /// and the reprocessed input adds to them. (Should one be started
    /// without it, kstreams notices a store checkpointed past the end of
    /// its re-created changelog and rebuilds it, logging why; a changelog
    /// that has grown past the checkpoint again cannot be told apart.)
    ///
    /// ```no_run
    /// use kstreams_dsl::StreamsBuilder;
    /// use kstreams_runtime::kafka::{KafkaStreams, RuntimeError, StreamsConfig};
    ///
    /// // 1. Every instance of "word-counts" is stopped.
    /// // 2. bin/kafka-streams-application-reset.sh --bootstrap-server localhost:9092 \
    /// //        --application-id word-counts --input-topics words
    /// // 3. On each instance:
    /// let builder = StreamsBuilder::new();
    /// builder.stream::<String, String>("words").group_by_key().count();
    /// let config = StreamsConfig::new("word-counts", "localhost:9092");
    /// let mut app = KafkaStreams::new(builder.build().unwrap(), config);
    /// app.clean_up()?; // <state.dir>/word-counts keeps no task's state
    /// app.start()?; // the input from the start, counted afresh
    /// # Ok::<(), RuntimeError>(())
    /// ```
    pub fn clean_up(&mut self) -> Result<(), RuntimeError> {
        let state = self.state();
        if !matches!(state, State::Created | State::NotRunning | State::Error) {
            return Err(RuntimeError::CleanUpWhileRunning(state));
        }
        // In ERROR the threads have stopped but are not joined: joined now,
        // every task directory is free and the instance's lock released.
        if (!self.threads.is_empty() || self.global.is_some())
            && !self.close(Duration::from_secs(30))
        {
            return Err(RuntimeError::CleanUpWhileRunning(state));
        }
        let state_dir = kstreams_state::__private::StateDirectory::new(
            &self.config.state_dir,
            &self.config.application_id,
        )?;
        // A start that failed in CREATED keeps the lock for the next try.
        let taken;
        let lock = match self
            .process
            .as_ref()
            .and_then(|p| p._directory_lock.as_ref())
        {
            Some(lock) => lock,
            None => {
                taken = state_dir.lock_application_directory()?;
                &taken
            }
        };
        let removed = state_dir.clean(lock)?;
        log::info!(
            "cleaned up the local state of {} in {}: {} director{} deleted",
            self.config.application_id,
            state_dir.application_directory().display(),
            removed.len(),
            if removed.len() == 1 { "y" } else { "ies" }
        );
        Ok(())
    }
}

impl Drop for KafkaStreams {
    fn drop(&mut self) {
        if !self.threads.is_empty() || self.global.is_some() {
            self.close(Duration::from_secs(30));
        }
    }
}

/// What makes stream thread `index`: at start, and again when it rejoins
/// after fencing or replaces itself after a failure.
struct ThreadRecipe {
    index: usize,
    process_id: String,
    config: StreamsConfig,
    instance: Instance,
    topology: Arc<Topology>,
    sources: Arc<SourceTopicIndex>,
}

impl ThreadRecipe {
    fn make(&self) -> Result<StreamThread, RuntimeError> {
        StreamThread::new(
            self.index,
            &self.process_id,
            self.config.clone(),
            self.instance.clone(),
            self.topology.clone(),
            self.sources.clone(),
        )
    }
}

/// Runs `thread` on a thread of its own until `stop` (this thread's) or
/// the instance's stop is set.
fn spawn(
    thread: StreamThread,
    recipe: ThreadRecipe,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
) -> Result<JoinHandle<()>, RuntimeError> {
    let name = thread.name().to_string();
    let thread_name = name.clone();
    shared.threads_alive.fetch_add(1, Ordering::AcqRel);
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            let _alive = AliveGuard(&shared);
            let mut current = Some(thread);
            while let Some(thread) = current.take() {
                let assigned_once = AtomicBool::new(false);
                // Kafka Streams' `StreamStateListener`: the application is
                // REBALANCING while a thread is (one just added too), and
                // RUNNING once every thread is.
                let on_state = |_from: ThreadState, to: ThreadState| {
                    let assigned = match to {
                        ThreadState::Running => true,
                        to if to.is_rebalancing() => false,
                        _ => return,
                    };
                    let was = assigned_once.swap(assigned, Ordering::AcqRel);
                    if assigned && !was {
                        let n = shared.threads_assigned.fetch_add(1, Ordering::AcqRel) + 1;
                        if n >= shared.threads_total.load(Ordering::Acquire) {
                            shared.transition(State::Running);
                        }
                    } else if !assigned {
                        if was {
                            shared.threads_assigned.fetch_sub(1, Ordering::AcqRel);
                        }
                        shared.transition(State::Rebalancing);
                    }
                };
                let stopping =
                    || stop.load(Ordering::Acquire) || shared.stop.load(Ordering::Acquire);
                let thread_name = thread.name().to_string();
                // A panic outside the processors (they turn theirs into
                // processing errors) must reach the handler too.
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    thread.run(&stopping, &on_state)
                }))
                .unwrap_or_else(|panic| {
                    Err(RuntimeError::ThreadPanicked {
                        thread: thread_name,
                        message: panic_message(panic.as_ref()),
                    })
                });
                if assigned_once.load(Ordering::Acquire) {
                    shared.threads_assigned.fetch_sub(1, Ordering::AcqRel);
                }
                let shutdown = &recipe.instance.application_shutdown;
                let Err(error) = result else {
                    // Ended for an application shutdown: the whole
                    // instance stops, with the reason among its errors.
                    if let Some(reason) = shutdown.reason_to_report() {
                        shared
                            .errors
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(reason);
                    }
                    if shutdown.heard() {
                        shutdown_client(&shared);
                    }
                    return;
                };
                let fenced = error.is_producer_fenced();
                let retriable = error.is_retriable_production();
                let stalled = matches!(error, RuntimeError::TransactionStalled { .. });
                if (fenced || retriable || stalled || is_recoverable_transaction_error(&error))
                    && !stopping()
                {
                    // Another producer took over this thread's transactional
                    // id (a zombie was fenced, or this thread was), or the
                    // transaction failed without the producer being lost (the
                    // broker went away mid-commit): as Kafka Streams'
                    // TaskMigratedException, the thread rejoins the group
                    // with a fresh producer, whose init fences the old one and
                    // aborts its transaction; that transaction's records are
                    // processed again from the last commit.
                    // A record that could not be produced in time is the
                    // same case: nothing since the last commit is committed
                    // (at-least-once keeps the failure until the thread
                    // ends), so processing it again loses nothing.
                    let why = if fenced {
                        "producer fenced"
                    } else if retriable {
                        "a record could not be produced in time"
                    } else if stalled {
                        "the producer stalled"
                    } else {
                        "transaction failed"
                    };
                    log::warn!("{name}: {why} ({error}); rejoining with a new producer");
                    // A pause, so that a fencing loop does not spin.
                    std::thread::sleep(Duration::from_millis(500));
                    match recipe.make() {
                        Ok(replacement) => {
                            current = Some(replacement);
                            continue;
                        }
                        Err(e) => log::error!("{name}: could not rejoin after fencing: {e}"),
                    }
                }
                log::error!("{name} failed: {error}");
                shared
                    .errors
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(error.to_string());
                let response = handler_response(&shared, &error);
                shared.observers.failed(&name, &error, response);
                match response {
                    StreamThreadExceptionResponse::ReplaceThread if !stopping() => {
                        match recipe.make() {
                            Ok(replacement) => {
                                log::info!("{name}: replaced after failure");
                                current = Some(replacement);
                            }
                            Err(e) => {
                                log::error!("{name}: could not be replaced: {e}");
                                shutdown_client(&shared);
                            }
                        }
                    }
                    StreamThreadExceptionResponse::ReplaceThread => {}
                    StreamThreadExceptionResponse::ShutdownClient => shutdown_client(&shared),
                    StreamThreadExceptionResponse::ShutdownApplication => {
                        shutdown.request();
                        let streams = recipe.config.group_protocol() == GroupProtocol::Streams;
                        let alone = shared.threads_alive.load(Ordering::Acquire) == 1;
                        if !streams {
                            log::error!(
                                "{name}: shutting the application down as the handler asked; \
                                 only this instance stops: the other instances of {} hear of it \
                                 only through a streams group (group.protocol=streams)",
                                recipe.config.application_id
                            );
                            shutdown_client(&shared);
                        } else if alone && !stopping() {
                            // As Kafka Streams: with no live thread left to
                            // tell the group, a new one joins to tell it.
                            log::error!(
                                "{name}: shutting the application down as the handler asked; a \
                                 new thread joins the streams group to tell every instance"
                            );
                            match recipe.make() {
                                Ok(messenger) => current = Some(messenger),
                                Err(e) => {
                                    log::error!("{name}: could not tell the group: {e}");
                                    shutdown_client(&shared);
                                }
                            }
                        } else {
                            log::error!(
                                "{name}: shutting the application down as the handler asked; \
                                 the instance's other threads tell the streams group"
                            );
                        }
                    }
                }
            }
        })
        .map_err(|source| RuntimeError::Spawn {
            name: thread_name,
            source,
        })
}

/// Whether a transaction failed in a way that a new producer recovers from:
/// librdkafka says it is retriable or needs an abort, and not fatal (the
/// broker was unreachable mid-commit, a coordinator moved). Kafka Streams'
/// Java producer rides these out inside its own timeouts; librdkafka
/// returns them to the caller.
fn is_recoverable_transaction_error(error: &RuntimeError) -> bool {
    match error {
        RuntimeError::Kafka(e) => match e.kafka() {
            rdkafka::error::KafkaError::Transaction(e) => {
                !e.is_fatal() && (e.is_retriable() || e.txn_requires_abort())
            }
            _ => false,
        },
        _ => false,
    }
}

/// Counts a stream thread out when it ends; the last one out completes a
/// shutdown after a failure (PENDING_ERROR -> ERROR) without waiting for
/// `close`, as Kafka Streams does.
struct AliveGuard<'a>(&'a Shared);

impl Drop for AliveGuard<'_> {
    fn drop(&mut self) {
        if self.0.threads_alive.fetch_sub(1, Ordering::AcqRel) == 1 {
            if *self.0.state.lock().unwrap_or_else(|p| p.into_inner()) == State::PendingError {
                self.0.transition(State::Error);
            }
            // The last stream thread is out: the global stores may close.
            if self.0.stop.load(Ordering::Acquire) {
                self.0.global_stop.store(true, Ordering::Release);
            }
        }
    }
}

/// Without its global tables the instance cannot go on: as in Kafka
/// Streams, the handler is told and the instance stops with an error
/// whatever it answers (a global thread is not replaced).
fn global_thread_failed(shared: &Shared, error: &RuntimeError) {
    log::error!("global thread failed: {error}");
    shared
        .errors
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(error.to_string());
    let response = handler_response(shared, error);
    let thread = std::thread::current();
    shared
        .observers
        .failed(thread.name().unwrap_or("global"), error, response);
    if response == StreamThreadExceptionResponse::ReplaceThread {
        log::error!("the global thread cannot be replaced; shutting the client down");
    }
    shutdown_client(shared);
    if shared.threads_alive.load(Ordering::Acquire) == 0 {
        // No stream thread is left to complete it.
        shared.transition(State::Error);
    }
}

/// The uncaught-exception handler's answer to `error` (ShutdownClient
/// without a handler, as Kafka Streams' default). A handler that panics
/// counts as ShutdownClient.
fn handler_response(shared: &Shared, error: &RuntimeError) -> StreamThreadExceptionResponse {
    let handler = shared.handler.lock().unwrap_or_else(|p| p.into_inner());
    let Some(handler) = handler.as_ref() else {
        return StreamThreadExceptionResponse::ShutdownClient;
    };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(error))).unwrap_or_else(
        |panic| {
            log::error!(
                "the uncaught-exception handler panicked ({}); shutting the client down",
                panic_message(panic.as_ref())
            );
            StreamThreadExceptionResponse::ShutdownClient
        },
    )
}

/// A panic's message, when it has one.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string())
}

/// Asks the streams group for `num.standby.replicas` standby copies of
/// each stateful task. Under KIP-1071 the broker places standbys by the
/// group's `streams.num.standby.replicas` config (0 by default, at most the
/// broker's `group.streams.max.standby.replicas`), not by a client
/// setting; kstreams sets it when the key is set (0 included, which turns
/// standbys off again), so that the key works as in Kafka Streams' classic
/// assignor. Unset, the group's config is left as it is.
fn set_standby_replicas(config: &StreamsConfig, replicas: u32) -> Result<(), RuntimeError> {
    let admin = kstreams_group::Admin::new(super::streams_group::connection_config(
        config,
        KafkaClient::Admin,
    )?);
    let replicas = replicas.to_string();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| RuntimeError::Spawn {
            name: "standby replicas group config".to_string(),
            source,
        })?;
    runtime.block_on(admin.set_group_configs(
        &config.application_id,
        &[("streams.num.standby.replicas", &replicas)],
    ))?;
    log::info!(
        "streams group {}: streams.num.standby.replicas set to {replicas}",
        config.application_id
    );
    Ok(())
}

/// Whether the application can be queried now, as Kafka Streams checks
/// before every interactive query: started, and running or rebalancing.
fn query_state_check(
    shared: Arc<Shared>,
) -> Arc<dyn Fn() -> Result<(), super::QueryError> + Send + Sync> {
    Arc::new(
        move || match *shared.state.lock().unwrap_or_else(|p| p.into_inner()) {
            State::Running | State::Rebalancing => Ok(()),
            State::Created => Err(super::QueryError::NotStarted),
            state => Err(super::QueryError::NotRunning { state }),
        },
    )
}

fn shutdown_client(shared: &Shared) {
    shared.transition(State::PendingError);
    shared.stop.store(true, Ordering::Release);
}

impl KafkaStreams {
    /// The instance at this moment: its state, its stream threads and their
    /// tasks with partitions and lag (Kafka Streams'
    /// `metadataForLocalThreads()`), and whether it is ready for traffic
    /// ([`LocalMetadata::not_ready_reason`](super::LocalMetadata::not_ready_reason)).
    pub fn metadata(&self) -> super::LocalMetadata {
        self.metadata_source()()
    }

    /// A function that reads [`KafkaStreams::metadata`] from any thread, for
    /// as long as it is kept: what an HTTP server or a probe holds.
    pub fn metadata_source(&self) -> impl Fn() -> super::LocalMetadata + Send + Sync + 'static {
        let shared = self.shared.clone();
        let board = self.instance.local_metadata.clone();
        let paused = self.instance.paused.clone();
        // As start() decides: a topology of global tables alone runs no
        // stream thread, and none is missing.
        let sources = SourceTopicIndex::new(&self.topology, &self.config.application_id);
        let global_only = sources.topics().next().is_none() && sources.patterns().next().is_none();
        move || super::LocalMetadata {
            state: *shared.state.lock().unwrap_or_else(|p| p.into_inner()),
            threads_configured: if global_only {
                0
            } else {
                shared.threads_total.load(Ordering::Acquire)
            },
            threads_alive: shared.threads_alive.load(Ordering::Acquire),
            threads: board.threads(),
            paused: paused.get(),
        }
    }

    /// How far each local store partition is behind the end of its
    /// changelog: Kafka Streams' `KafkaStreams#allLocalStorePartitionLags`.
    /// By store name and partition, every changelogged store of the
    /// instance's active and standby tasks: an active task that runs is at
    /// the end (its current position is the end offset, lag 0, as Kafka
    /// Streams reports it), one that restores is where its restoration has
    /// got to, a standby is past the last record it applied. The end offsets
    /// are the partitions' high watermarks, asked of the broker now; an
    /// error is a broker that did not answer. Stores without a changelog
    /// are not listed; before `start` the map is empty.
    ///
    /// ```no_run
    /// # use kstreams_runtime::kafka::{KafkaStreams, RuntimeError};
    /// # fn lags(app: &KafkaStreams) -> Result<(), RuntimeError> {
    /// // Route a stale read to the instance whose copy lags least.
    /// for (store, partitions) in app.all_local_store_partition_lags()? {
    ///     for (partition, lag) in partitions {
    ///         println!(
    ///             "{store} partition {partition}: at {} of {}, {} behind",
    ///             lag.current_offset_position(),
    ///             lag.end_offset_position(),
    ///             lag.offset_lag()
    ///         );
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn all_local_store_partition_lags(
        &self,
    ) -> Result<HashMap<String, HashMap<i32, super::LagInfo>>, RuntimeError> {
        use super::client_error::ClientResult;
        let positions = super::store_lags::local_positions(
            &self.topology,
            &self.config.application_id,
            &self.instance.local_metadata.threads(),
            self.instance.restore_board.changelog_positions(),
            &self.instance.standby_positions,
        );
        if positions.is_empty() {
            return Ok(HashMap::new());
        }
        let mut consumer = self.lag_consumer.lock().unwrap_or_else(|p| p.into_inner());
        if consumer.is_none() {
            let name = format!("{}-store-lags", self.config.application_id);
            *consumer = Some(
                super::clients::restore_consumer(&self.config, &name)
                    .create()
                    .client()?,
            );
        }
        let Some(consumer) = consumer.as_ref() else {
            return Ok(HashMap::new());
        };
        super::store_lags::lags(positions, |partition| {
            super::state_updater::changelog_watermarks(
                consumer,
                &partition.topic,
                partition.partition,
            )
            .map(|(_, high)| high)
        })
    }

    /// Sets the listener of standby tasks' updates (Kafka Streams'
    /// `setStandbyUpdateListener`). Only before `start`.
    pub fn set_standby_update_listener(
        &mut self,
        listener: Arc<dyn super::StandbyUpdateListener>,
    ) -> Result<(), RuntimeError> {
        let state = self.state();
        if state != State::Created {
            return Err(RuntimeError::IllegalState(state));
        }
        self.instance.standby_listener = Some(listener);
        Ok(())
    }

    /// A read-only view of a state store of this instance's tasks: Kafka
    /// Streams' `KafkaStreams#store`.
    ///
    /// The view reads every local instance of the store (or the one
    /// partition asked for) on the stream threads that own them, through
    /// the record cache, so it sees every record processed so far. Other
    /// instances' partitions are not read: find their holder with
    /// [`KafkaStreams::query_metadata_for_key`]. Allowed while RUNNING or
    /// REBALANCING; a store whose task is not current (still loading a
    /// bootstrap table) answers only with stale stores enabled. A view's
    /// reads block until the stream threads answer; each has an awaited
    /// twin (`get_async`, `range_async`, ...) for async code.
    ///
    /// ```no_run
    /// # use kstreams_runtime::kafka::*;
    /// # fn counts(app: &KafkaStreams) -> Result<(), QueryError> {
    /// let counts = app.store(StoreQueryParameters::from_name_and_type(
    ///     "counts",
    ///     QueryableStoreTypes::key_value_store::<String, i64>(),
    /// ))?;
    /// println!("{:?}", counts.get(&"alice".to_string())?);
    /// # Ok(()) }
    /// ```
    pub fn store<T: super::QueryableStoreType>(
        &self,
        parameters: super::StoreQueryParameters<T>,
    ) -> Result<T::View, super::QueryError> {
        self.query_face().store(parameters)
    }

    /// Which instance holds `key` of store `store` (its active task), which
    /// ones have standby copies, and its partition: Kafka Streams'
    /// `queryMetadataForKey` with the default partitioner (the key's bytes
    /// hashed as Kafka's producer does). Needs `group.protocol=streams` and
    /// `application.server` on the instances; see
    /// [`QueryError::MetadataUnavailable`](super::QueryError::MetadataUnavailable).
    pub fn query_metadata_for_key<K: 'static>(
        &self,
        store: &str,
        key: &K,
        serializer: &dyn kstreams_record::Serde<K>,
    ) -> Result<super::KeyQueryMetadata, super::QueryError> {
        self.query_face().for_key_bytes(store, key, serializer)
    }

    /// [`KafkaStreams::query_metadata_for_key`] for a key the application
    /// partitions with `partitioner`, the one its sinks use: Kafka Streams'
    /// `queryMetadataForKey(store, key, StreamPartitioner)`. The
    /// partitioner sees the key and no value (Kafka passes a null one); if
    /// it leaves the choice to the default, `serializer`'s bytes are hashed
    /// as Kafka's producer does. A key lives in one partition: a partitioner
    /// that chooses none or several is an error, as in Kafka Streams.
    pub fn query_metadata_for_key_with_stream_partitioner<K: 'static>(
        &self,
        store: &str,
        key: &K,
        serializer: &dyn kstreams_record::Serde<K>,
        partitioner: &dyn kstreams_dsl::StreamPartitioner<K, ()>,
    ) -> Result<super::KeyQueryMetadata, super::QueryError> {
        let topic = self.query_face().store_source_topic(store);
        let headers = kstreams_record::Headers::new();
        let mut failure = None;
        let metadata = self.query_metadata_for_key_with_partitioner(store, |partitions| {
            let chosen = match partitioner.partitions(&topic, key, &(), &headers, partitions) {
                None => key_bytes(store, &topic, key, serializer)
                    .map(|bytes| kstreams_record::partition_for_key(&bytes, partitions)),
                Some(chosen) => {
                    kstreams_dsl::__private::checked_partitions(chosen, partitions, true)
                        .map(|one| one[0])
                        .map_err(|message| super::QueryError::Store {
                            store: store.to_string(),
                            message: format!("the key's metadata: {message}"),
                        })
                }
            };
            chosen.unwrap_or_else(|e| {
                failure = Some(e);
                0
            })
        });
        match failure {
            Some(e) => Err(e),
            None => metadata,
        }
    }

    /// [`KafkaStreams::query_metadata_for_key`] for a key partitioned by the
    /// application itself: `partitioner` gets the store's number of
    /// partitions and returns the key's (Kafka Streams' variant with a
    /// `StreamPartitioner`).
    pub fn query_metadata_for_key_with_partitioner(
        &self,
        store: &str,
        partitioner: impl FnOnce(i32) -> i32,
    ) -> Result<super::KeyQueryMetadata, super::QueryError> {
        self.query_face().for_key(store, partitioner)
    }

    /// The instances whose tasks (active or standby) hold store `store`:
    /// Kafka Streams' `streamsMetadataForStore`.
    pub fn streams_metadata_for_store(
        &self,
        store: &str,
    ) -> Result<Vec<super::StreamsMetadata>, super::QueryError> {
        self.query_face().for_store(store)
    }

    /// Every instance of the application with its stores and partitions:
    /// Kafka Streams' `metadataForAllStreamsClients`.
    pub fn metadata_for_all_streams_clients(
        &self,
    ) -> Result<Vec<super::StreamsMetadata>, super::QueryError> {
        self.query_face().all_clients()
    }

    /// Where the operator's HTTP endpoints are to listen
    /// (`kstreams.http.address`), if configured.
    pub fn http_address(&self) -> Option<std::net::SocketAddr> {
        self.config.configured_http_address()
    }

    /// The topology it runs, as Kafka Streams' `Topology#describe()`.
    pub fn describe(&self) -> kstreams_dsl::TopologyDescription {
        self.topology.describe()
    }
}

/// `key`'s bytes for the default partitioner, as `serializer` writes them
/// for `topic`; null bytes have no partition.
fn key_bytes<K: 'static>(
    store: &str,
    topic: &str,
    key: &K,
    serializer: &dyn kstreams_record::Serde<K>,
) -> Result<Vec<u8>, super::QueryError> {
    serializer
        .serialize(topic, &mut kstreams_record::Headers::new(), key)
        .map_err(|e| super::QueryError::Store {
            store: store.to_string(),
            message: format!("serializing the key: {e}"),
        })?
        .ok_or_else(|| super::QueryError::Store {
            store: store.to_string(),
            message: "the key serialized to null, which has no partition".to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn shared() -> Shared {
        Shared {
            state: Mutex::new(State::Running),
            listener: Mutex::new(None),
            handler: Mutex::new(None),
            stop: AtomicBool::new(false),
            global_stop: AtomicBool::new(false),
            threads_total: AtomicUsize::new(1),
            threads_assigned: AtomicUsize::new(0),
            threads_alive: AtomicUsize::new(0),
            errors: Mutex::new(Vec::new()),
            observers: Default::default(),
        }
    }

    #[test]
    fn a_failed_global_thread_reaches_the_handler_and_stops_the_client_whatever_it_answers() {
        for answer in [
            StreamThreadExceptionResponse::ReplaceThread,
            StreamThreadExceptionResponse::ShutdownClient,
            StreamThreadExceptionResponse::ShutdownApplication,
        ] {
            let shared = shared();
            let seen = Arc::new(Mutex::new(Vec::new()));
            let record = seen.clone();
            *shared.handler.lock().unwrap() = Some(Box::new(move |e: &RuntimeError| {
                record.lock().unwrap().push(e.to_string());
                answer
            }));
            let error = RuntimeError::ThreadPanicked {
                thread: "app-GlobalStreamThread".into(),
                message: "boom".into(),
            };
            global_thread_failed(&shared, &error);
            assert_eq!(
                *seen.lock().unwrap(),
                ["stream thread app-GlobalStreamThread panicked: boom"],
                "{answer:?}"
            );
            assert_eq!(*shared.state.lock().unwrap(), State::Error, "{answer:?}");
            assert!(shared.stop.load(Ordering::Acquire));
            assert_eq!(shared.errors.lock().unwrap().len(), 1);
        }
    }

    #[test]
    fn a_panicking_handler_counts_as_shutdown_client() {
        let shared = shared();
        *shared.handler.lock().unwrap() = Some(Box::new(|_: &RuntimeError| panic!("handler bug")));
        let error = RuntimeError::MissingSinkTopic {
            topic: "out".into(),
        };
        assert_eq!(
            handler_response(&shared, &error),
            StreamThreadExceptionResponse::ShutdownClient
        );
        assert_eq!(panic_message(&"text"), "text");
        assert_eq!(panic_message(&String::from("owned")), "owned");
        assert_eq!(panic_message(&7), "a panic without a message");
    }
}
