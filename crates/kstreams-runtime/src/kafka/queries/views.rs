//! The read-only views `KafkaStreams::store` returns: each call posts a
//! read to the stream threads and merges their answers, as Kafka Streams'
//! composite stores read every local store of a name.

use std::marker::PhantomData;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kstreams_dsl::TaskId;
use kstreams_record::Timestamp;
use kstreams_state::{
    BuiltStore, Error as StoreError, KeyValueIter, KeyValueStore, KeyValueStoreHandle,
    ReadOnlyKeyValueStore, ReadOnlySessionStore, ReadOnlyWindowStore, SessionStoreHandle,
    TimestampedKeyValueStoreHandle, TimestampedWindowStoreHandle, ValueAndTimestamp,
    VersionedKeyValueStoreHandle, VersionedRecord, WindowStore, WindowStoreHandle, WindowStoreIter,
};
use kstreams_time::Windowed;

use super::{LocalStores, QueryError, QueryRouter, StoreRead};
use crate::kafka::local_metadata::MetadataBoard;

/// How long a query waits for a stream thread's answer. A thread answers
/// between two steps of its loop; this bounds a thread stuck in a long
/// step (a slow commit), not a normal query.
pub(crate) const QUERY_TIMEOUT: Duration = Duration::from_secs(10);

/// One query's target: the store, the partition, whether stale stores may
/// answer, and the way to the stream threads.
pub struct LocalQuery {
    pub(crate) router: QueryRouter,
    pub(crate) threads: MetadataBoard,
    pub(crate) store: Arc<str>,
    pub(crate) partition: Option<i32>,
    pub(crate) stale: bool,
    /// Whether the read may see only committed writes: it waits for a
    /// stream thread's commit point.
    pub(crate) committed_only: bool,
    /// How long the query waits for the threads' answers: [`QUERY_TIMEOUT`],
    /// plus a commit interval for a read that waits for a commit point.
    pub(crate) timeout: Duration,
    /// Fails while the application cannot be queried (not started,
    /// stopped).
    pub(crate) check_state: Arc<dyn Fn() -> Result<(), QueryError> + Send + Sync>,
}

/// What one task's instance of the store said.
enum Answer<R> {
    Read(TaskId, Result<R, QueryError>),
    /// The task has the store but it is not current, and stale stores
    /// were not asked for.
    NotCurrent(TaskId),
}

/// The answers of the threads a query was posted to, merged as they come.
struct Merge<R> {
    asked: usize,
    answered: usize,
    /// Threads not asked: restoring, and stale stores not enabled.
    skipped: Vec<String>,
    found: Vec<(TaskId, R)>,
    not_current: Vec<TaskId>,
}

impl<R> Merge<R> {
    fn waiting(&self) -> bool {
        self.answered < self.asked
    }

    fn add(&mut self, answers: Vec<Answer<R>>) -> Result<(), QueryError> {
        self.answered += 1;
        for answer in answers {
            match answer {
                Answer::Read(task, result) => self.found.push((task, result?)),
                Answer::NotCurrent(task) => self.not_current.push(task),
            }
        }
        Ok(())
    }

    /// The results in task order, once every asked thread answered or
    /// stopped.
    fn finish(mut self, query: &LocalQuery) -> Result<Vec<R>, QueryError> {
        // Stores that could not be read make any answer incomplete (a key
        // not found may be in them), unless the one partition asked for was
        // read: as Kafka Streams fails a query while a thread is not running.
        let complete = self.skipped.is_empty() && self.answered == self.asked;
        let asked_partition_read = query.partition.is_some() && !self.found.is_empty();
        if !complete && !asked_partition_read {
            let reason = match self.skipped.first() {
                Some(thread) => format!("stream thread {thread} is restoring its tasks' stores"),
                None => "a stream thread stopped before it answered".to_string(),
            };
            return Err(query.not_available(reason));
        }
        if self.found.is_empty() {
            return Err(query.not_found(&self.not_current));
        }
        self.found.sort_by_key(|(task, _)| *task);
        Ok(self.found.into_iter().map(|(_, r)| r).collect())
    }
}

impl LocalQuery {
    /// Posts `read` to every stream thread that may hold the store; each
    /// answers through `reply` (a clone each) with what its tasks' instances
    /// of the store gave.
    fn post<R: Send + 'static>(
        &self,
        read: impl Fn(&BuiltStore) -> Result<R, QueryError> + Send + Sync + 'static,
        reply: impl Fn(Vec<Answer<R>>) + Clone + Send + 'static,
    ) -> Merge<R> {
        let read = Arc::new(read);
        let restoring = self.threads.restoring_threads();
        let mut merge = Merge {
            asked: 0,
            answered: 0,
            skipped: Vec::new(),
            found: Vec::new(),
            not_current: Vec::new(),
        };
        for (thread, inbox) in self.router.inboxes() {
            if restoring.contains(&thread) && !self.stale {
                // As Kafka Streams, a thread whose tasks restore (not
                // RUNNING) serves no current store: a key not found
                // elsewhere may be in one of them.
                merge.skipped.push(thread);
                continue;
            }
            let (read, reply) = (read.clone(), reply.clone());
            let (store, partition, stale) = (self.store.clone(), self.partition, self.stale);
            let post: StoreRead = Box::new(move |stores: &dyn LocalStores| {
                let found = stores
                    .instances(&store)
                    .into_iter()
                    .filter(|i| partition.is_none_or(|p| p == i.task.partition))
                    .map(|i| match i.current || stale {
                        true => Answer::Read(i.task, read_caught(&*read, &store, i.store)),
                        false => Answer::NotCurrent(i.task),
                    })
                    .collect();
                reply(found);
            });
            inbox.post(post, self.committed_only);
            merge.asked += 1;
        }
        merge
    }

    /// Runs `read` on every matching local instance of the store, on the
    /// threads that own them; the results in task order. Blocks the caller
    /// until every thread answered, at most the query's timeout.
    fn run<R: Send + 'static>(
        &self,
        read: impl Fn(&BuiltStore) -> Result<R, QueryError> + Send + Sync + 'static,
    ) -> Result<Vec<R>, QueryError> {
        (self.check_state)()?;
        let (answers, received) = mpsc::channel::<Vec<Answer<R>>>();
        let mut merge = self.post(read, move |found| {
            let _ = answers.send(found);
        });
        let deadline = Instant::now() + self.timeout;
        while merge.waiting() {
            match received.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(answers) => merge.add(answers)?,
                Err(RecvTimeoutError::Timeout) => {
                    return Err(self.not_available(format!(
                        "a stream thread did not answer within {:?}",
                        self.timeout
                    )))
                }
                // A thread stopped with the read unanswered.
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        merge.finish(self)
    }

    /// [`LocalQuery::run`] without blocking: the caller's task sleeps until
    /// the threads' answers wake it. No timer of its own (one would tie it
    /// to one runtime): a thread stuck in a long step delays the answer
    /// until the caller's own timeout; dropping the future drops the
    /// answers, which the threads do not wait for.
    async fn run_async<R: Send + 'static>(
        &self,
        read: impl Fn(&BuiltStore) -> Result<R, QueryError> + Send + Sync + 'static,
    ) -> Result<Vec<R>, QueryError> {
        (self.check_state)()?;
        let (answers, mut received) = tokio::sync::mpsc::unbounded_channel::<Vec<Answer<R>>>();
        let mut merge = self.post(read, move |found| {
            let _ = answers.send(found);
        });
        while merge.waiting() {
            match received.recv().await {
                Some(answers) => merge.add(answers)?,
                // A thread stopped with the read unanswered.
                None => break,
            }
        }
        merge.finish(self)
    }

    fn not_found(&self, not_current: &[TaskId]) -> QueryError {
        let what = match self.partition {
            Some(p) => format!("partition {p} of it"),
            None => "it".to_string(),
        };
        let reason = if let Some(task) = not_current.first() {
            format!(
                "task {task} holds {what} but is not current yet (loading a bootstrap table or \
                 waiting for its partitions); enable stale stores to read it anyway"
            )
        } else {
            format!("no task of this instance holds {what}")
        };
        self.not_available(reason)
    }

    fn not_available(&self, reason: String) -> QueryError {
        QueryError::NotAvailable {
            store: self.store.to_string(),
            reason,
        }
    }
}

/// Runs a read on the stream thread; a panic in it (a user's serde, say)
/// becomes the read's error instead of ending the thread.
fn read_caught<R>(
    read: &(dyn Fn(&BuiltStore) -> Result<R, QueryError> + Send + Sync),
    store: &str,
    built: &BuiltStore,
) -> Result<R, QueryError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read(built))).unwrap_or_else(|_| {
        Err(QueryError::Store {
            store: store.to_string(),
            message: "the read panicked (see the stream thread's log)".to_string(),
        })
    })
}

fn store_error(built: &BuiltStore, error: StoreError) -> QueryError {
    QueryError::Store {
        store: built.lifecycle.borrow().name().to_string(),
        message: error.to_string(),
    }
}

fn wrong_type<Requested>(built: &BuiltStore) -> QueryError {
    QueryError::WrongStoreType {
        store: built.lifecycle.borrow().name().to_string(),
        actual: built.handle_type.to_string(),
        requested: std::any::type_name::<Requested>().to_string(),
    }
}

/// Reads a store through `op` as the typed read-only store `S`, from its
/// handle `H` (directly), or from its timestamped handle `T` with the
/// timestamps taken off (when `unwrap`).
macro_rules! read_as {
    ($built:expr, $op:expr, $unwrap:expr, $plain:ty, $stamped:ty, $strip:ident) => {{
        let built: &BuiltStore = $built;
        if let Some(handle) = built.handle.downcast_ref::<$plain>() {
            let store = handle.borrow();
            $op(&*store).map_err(|e| store_error(built, e))
        } else if let Some(handle) = $unwrap
            .then(|| built.handle.downcast_ref::<$stamped>())
            .flatten()
        {
            let store = handle.borrow();
            $op(&$strip(&*store)).map_err(|e| store_error(built, e))
        } else {
            Err(wrong_type::<$plain>(built))
        }
    }};
}

fn collect<T>(
    iter: Result<kstreams_state::StoreIter<'_, T>, StoreError>,
) -> Result<Vec<T>, StoreError> {
    iter?.collect()
}

/// Each read of a view in two forms: the blocking one, and its twin that
/// awaits the stream threads' answers (named `<read>_async`). `$body`
/// gives the read of each local store instance and the function that
/// makes the answer of their results (in task order).
macro_rules! blocking_and_async {
    ($(
        $(#[$doc:meta])*
        fn $name:ident / $async_name:ident(
            &$self:ident $(, $arg:ident: $ty:ty)* $(,)?
        ) -> $out:ty $body:block
    )*) => {$(
        $(#[$doc])*
        ///
        #[doc = concat!(
            "Blocks until the stream threads answer (at most 10 s); [`",
            stringify!($async_name), "`](Self::", stringify!($async_name),
            ") awaits them instead."
        )]
        pub fn $name(&$self $(, $arg: $ty)*) -> Result<$out, QueryError> {
            let (read, finish) = $body;
            Ok(finish($self.query.run(read)?))
        }

        #[doc = concat!(
            "[`", stringify!($name), "`](Self::", stringify!($name), "), awaited: the task ",
            "waits for the stream threads' answers without blocking its thread, on any ",
            "executor. It has no timer of its own: bound it with the runtime's (see ",
            "the type `AsyncKafkaStreams`)."
        )]
        pub async fn $async_name(&$self $(, $arg: $ty)*) -> Result<$out, QueryError> {
            let (read, finish) = $body;
            Ok(finish($self.query.run_async(read).await?))
        }
    )*};
}

/// The first local store's answer that has one.
fn first<T>(found: Vec<Option<T>>) -> Option<T> {
    found.into_iter().flatten().next()
}

/// Every local store's entries, store after store.
fn concat<T>(found: Vec<Vec<T>>) -> Vec<T> {
    found.into_iter().flatten().collect()
}

/// The local stores' counts added up.
fn sum(found: Vec<u64>) -> u64 {
    found.into_iter().fold(0u64, u64::saturating_add)
}

// ---------------------------------------------------------------- key-value

/// Reads of a key-value store across the instance's tasks: Kafka Streams'
/// `ReadOnlyKeyValueStore` as `KafkaStreams#store` returns it.
///
/// Ranges are collected: store after store (task order), each in key
/// order, as Kafka Streams' composite store iterates them.
pub struct ReadOnlyKeyValueView<K, V> {
    query: LocalQuery,
    unwrap_timestamps: bool,
    types: PhantomData<fn() -> (K, V)>,
}

/// A timestamped key-value store read without its timestamps.
struct KeyValueWithoutTimestamps<'s, K, V>(&'s dyn KeyValueStore<K, ValueAndTimestamp<V>>);

fn strip_pairs<'a, K: 'a, V: 'a>(
    iter: KeyValueIter<'a, K, ValueAndTimestamp<V>>,
) -> KeyValueIter<'a, K, V> {
    Box::new(iter.map(|r| r.map(|(k, v)| (k, v.value))))
}

impl<K, V> ReadOnlyKeyValueStore<K, V> for KeyValueWithoutTimestamps<'_, K, V> {
    fn get(&self, key: &K) -> Result<Option<V>, StoreError> {
        Ok(self.0.get(key)?.map(|v| v.value))
    }
    fn range(
        &self,
        from: Option<&K>,
        to: Option<&K>,
    ) -> Result<KeyValueIter<'_, K, V>, StoreError> {
        Ok(strip_pairs(self.0.range(from, to)?))
    }
    fn reverse_range(
        &self,
        from: Option<&K>,
        to: Option<&K>,
    ) -> Result<KeyValueIter<'_, K, V>, StoreError> {
        Ok(strip_pairs(self.0.reverse_range(from, to)?))
    }
    fn prefix_scan(&self, prefix: &[u8]) -> Result<KeyValueIter<'_, K, V>, StoreError> {
        Ok(strip_pairs(self.0.prefix_scan(prefix)?))
    }
    fn approximate_num_entries(&self) -> Result<u64, StoreError> {
        self.0.approximate_num_entries()
    }
}

impl<K, V> ReadOnlyKeyValueView<K, V> {
    pub(crate) fn new(query: LocalQuery, unwrap_timestamps: bool) -> Self {
        Self {
            query,
            unwrap_timestamps,
            types: PhantomData,
        }
    }
}

impl<K, V> ReadOnlyKeyValueView<K, V>
where
    K: Clone + Send + Sync + 'static,
    V: Send + 'static,
{
    /// The read of `op` on each local instance of the store.
    fn reader<R: Send + 'static>(
        &self,
        op: impl Fn(&dyn ReadOnlyKeyValueStore<K, V>) -> Result<R, StoreError> + Send + Sync + 'static,
    ) -> impl Fn(&BuiltStore) -> Result<R, QueryError> + Send + Sync + 'static {
        let unwrap = self.unwrap_timestamps;
        move |built| {
            read_as!(
                built,
                |s: &dyn ReadOnlyKeyValueStore<K, V>| op(s),
                unwrap,
                KeyValueStoreHandle<K, V>,
                TimestampedKeyValueStoreHandle<K, V>,
                KeyValueWithoutTimestamps
            )
        }
    }

    fn pairs(
        &self,
        op: impl Fn(&dyn ReadOnlyKeyValueStore<K, V>) -> Result<KeyValueIter<'_, K, V>, StoreError>
            + Send
            + Sync
            + 'static,
    ) -> impl Fn(&BuiltStore) -> Result<Vec<(K, V)>, QueryError> + Send + Sync + 'static {
        self.reader(move |s| collect(op(s)))
    }

    blocking_and_async! {
        /// The value of a key: the first local store that has it answers.
        fn get / get_async(&self, key: &K) -> Option<V> {
            let key = key.clone();
            (self.reader(move |s| s.get(&key)), first)
        }

        /// Entries with `from <= key <= to` (`None` is open).
        fn range / range_async(&self, from: Option<&K>, to: Option<&K>) -> Vec<(K, V)> {
            let (from, to) = (from.cloned(), to.cloned());
            (self.pairs(move |s| s.range(from.as_ref(), to.as_ref())), concat)
        }

        /// The entries of `range`, each store in reverse key order.
        fn reverse_range / reverse_range_async(
            &self,
            from: Option<&K>,
            to: Option<&K>
        ) -> Vec<(K, V)> {
            let (from, to) = (from.cloned(), to.cloned());
            (self.pairs(move |s| s.reverse_range(from.as_ref(), to.as_ref())), concat)
        }

        /// Every entry.
        fn all / all_async(&self) -> Vec<(K, V)> {
            (self.pairs(|s| s.all()), concat)
        }

        /// Every entry, each store in reverse key order.
        fn reverse_all / reverse_all_async(&self) -> Vec<(K, V)> {
            (self.pairs(|s| s.reverse_all()), concat)
        }

        /// Entries whose serialized key starts with `prefix`.
        fn prefix_scan / prefix_scan_async(&self, prefix: &[u8]) -> Vec<(K, V)> {
            let prefix = prefix.to_vec();
            (self.pairs(move |s| s.prefix_scan(&prefix)), concat)
        }

        /// The sum of the local stores' estimates.
        fn approximate_num_entries / approximate_num_entries_async(&self) -> u64 {
            (self.reader(|s| s.approximate_num_entries()), sum)
        }
    }
}

// ------------------------------------------------------------------- window

/// Reads of a window store across the instance's tasks: Kafka Streams'
/// `ReadOnlyWindowStore` as `KafkaStreams#store` returns it.
pub struct ReadOnlyWindowView<K, V> {
    query: LocalQuery,
    unwrap_timestamps: bool,
    types: PhantomData<fn() -> (K, V)>,
}

/// A timestamped window store read without its timestamps.
struct WindowWithoutTimestamps<'s, K, V>(&'s dyn WindowStore<K, ValueAndTimestamp<V>>);

fn strip_windows<'a, V: 'a>(
    iter: WindowStoreIter<'a, ValueAndTimestamp<V>>,
) -> WindowStoreIter<'a, V> {
    Box::new(iter.map(|r| r.map(|(t, v)| (t, v.value))))
}

impl<K, V> ReadOnlyWindowStore<K, V> for WindowWithoutTimestamps<'_, K, V> {
    fn fetch(&self, key: &K, window_start: Timestamp) -> Result<Option<V>, StoreError> {
        Ok(self.0.fetch(key, window_start)?.map(|v| v.value))
    }
    fn fetch_time_range(
        &self,
        key: &K,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<WindowStoreIter<'_, V>, StoreError> {
        Ok(strip_windows(self.0.fetch_time_range(key, from, to)?))
    }
    fn backward_fetch_time_range(
        &self,
        key: &K,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<WindowStoreIter<'_, V>, StoreError> {
        Ok(strip_windows(
            self.0.backward_fetch_time_range(key, from, to)?,
        ))
    }
    fn fetch_key_range(
        &self,
        key_from: Option<&K>,
        key_to: Option<&K>,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<KeyValueIter<'_, Windowed<K>, V>, StoreError> {
        Ok(strip_pairs(
            self.0.fetch_key_range(key_from, key_to, from, to)?,
        ))
    }
    fn backward_fetch_key_range(
        &self,
        key_from: Option<&K>,
        key_to: Option<&K>,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<KeyValueIter<'_, Windowed<K>, V>, StoreError> {
        Ok(strip_pairs(
            self.0
                .backward_fetch_key_range(key_from, key_to, from, to)?,
        ))
    }
}

impl<K, V> ReadOnlyWindowView<K, V> {
    pub(crate) fn new(query: LocalQuery, unwrap_timestamps: bool) -> Self {
        Self {
            query,
            unwrap_timestamps,
            types: PhantomData,
        }
    }
}

impl<K, V> ReadOnlyWindowView<K, V>
where
    K: Clone + Send + Sync + 'static,
    V: Send + 'static,
{
    /// The read of `op` on each local instance of the store.
    fn reader<R: Send + 'static>(
        &self,
        op: impl Fn(&dyn ReadOnlyWindowStore<K, V>) -> Result<R, StoreError> + Send + Sync + 'static,
    ) -> impl Fn(&BuiltStore) -> Result<R, QueryError> + Send + Sync + 'static {
        let unwrap = self.unwrap_timestamps;
        move |built| {
            read_as!(
                built,
                |s: &dyn ReadOnlyWindowStore<K, V>| op(s),
                unwrap,
                WindowStoreHandle<K, V>,
                TimestampedWindowStoreHandle<K, V>,
                WindowWithoutTimestamps
            )
        }
    }

    fn windows(
        &self,
        op: impl Fn(
                &dyn ReadOnlyWindowStore<K, V>,
            ) -> Result<KeyValueIter<'_, Windowed<K>, V>, StoreError>
            + Send
            + Sync
            + 'static,
    ) -> impl Fn(&BuiltStore) -> Result<Vec<(Windowed<K>, V)>, QueryError> + Send + Sync + 'static
    {
        self.reader(move |s| collect(op(s)))
    }

    fn of_key(
        &self,
        op: impl Fn(&dyn ReadOnlyWindowStore<K, V>) -> Result<WindowStoreIter<'_, V>, StoreError>
            + Send
            + Sync
            + 'static,
    ) -> impl Fn(&BuiltStore) -> Result<Vec<(Timestamp, V)>, QueryError> + Send + Sync + 'static
    {
        self.reader(move |s| collect(op(s)))
    }

    blocking_and_async! {
        /// The value of `key`'s window that starts at `window_start`.
        fn fetch / fetch_async(&self, key: &K, window_start: Timestamp) -> Option<V> {
            let key = key.clone();
            (self.reader(move |s| s.fetch(&key, window_start)), first)
        }

        /// `key`'s windows starting in `[from, to]`, by start.
        fn fetch_time_range / fetch_time_range_async(
            &self,
            key: &K,
            from: Timestamp,
            to: Timestamp
        ) -> Vec<(Timestamp, V)> {
            let key = key.clone();
            (self.of_key(move |s| s.fetch_time_range(&key, from, to)), concat)
        }

        /// The windows of `fetch_time_range`, latest first.
        fn backward_fetch_time_range / backward_fetch_time_range_async(
            &self,
            key: &K,
            from: Timestamp,
            to: Timestamp
        ) -> Vec<(Timestamp, V)> {
            let key = key.clone();
            (self.of_key(move |s| s.backward_fetch_time_range(&key, from, to)), concat)
        }

        /// Windows of keys in `[key_from, key_to]` (`None` is open) starting in
        /// `[from, to]`.
        fn fetch_key_range / fetch_key_range_async(
            &self,
            key_from: Option<&K>,
            key_to: Option<&K>,
            from: Timestamp,
            to: Timestamp
        ) -> Vec<(Windowed<K>, V)> {
            let (kf, kt) = (key_from.cloned(), key_to.cloned());
            (self.windows(move |s| s.fetch_key_range(kf.as_ref(), kt.as_ref(), from, to)), concat)
        }

        /// The windows of `fetch_key_range`, each store in reverse.
        fn backward_fetch_key_range / backward_fetch_key_range_async(
            &self,
            key_from: Option<&K>,
            key_to: Option<&K>,
            from: Timestamp,
            to: Timestamp
        ) -> Vec<(Windowed<K>, V)> {
            let (kf, kt) = (key_from.cloned(), key_to.cloned());
            let read = self.windows(move |s| {
                s.backward_fetch_key_range(kf.as_ref(), kt.as_ref(), from, to)
            });
            (read, concat)
        }

        /// Windows of every key starting in `[from, to]`.
        fn fetch_all / fetch_all_async(&self, from: Timestamp, to: Timestamp) -> Vec<(Windowed<K>, V)> {
            (self.windows(move |s| s.fetch_all(from, to)), concat)
        }

        /// Every window.
        fn all / all_async(&self) -> Vec<(Windowed<K>, V)> {
            (self.windows(|s| s.all()), concat)
        }

        /// Every window, each store in reverse.
        fn backward_all / backward_all_async(&self) -> Vec<(Windowed<K>, V)> {
            (self.windows(|s| s.backward_all()), concat)
        }
    }
}

// ------------------------------------------------------------------ session

/// Reads of a session store across the instance's tasks: Kafka Streams'
/// `ReadOnlySessionStore` as `KafkaStreams#store` returns it.
pub struct ReadOnlySessionView<K, V> {
    query: LocalQuery,
    types: PhantomData<fn() -> (K, V)>,
}

impl<K, V> ReadOnlySessionView<K, V> {
    pub(crate) fn new(query: LocalQuery, _unwrap: bool) -> Self {
        Self {
            query,
            types: PhantomData,
        }
    }
}

impl<K, V> ReadOnlySessionView<K, V>
where
    K: Clone + Send + Sync + 'static,
    V: Send + 'static,
{
    /// The read of `op` on each local instance of the store.
    fn reader<R: Send + 'static>(
        &self,
        op: impl Fn(&dyn ReadOnlySessionStore<K, V>) -> Result<R, StoreError> + Send + Sync + 'static,
    ) -> impl Fn(&BuiltStore) -> Result<R, QueryError> + Send + Sync + 'static {
        move |built| {
            let handle = built
                .handle
                .downcast_ref::<SessionStoreHandle<K, V>>()
                .ok_or_else(|| wrong_type::<SessionStoreHandle<K, V>>(built))?;
            let store = handle.borrow();
            op(&*store).map_err(|e| store_error(built, e))
        }
    }

    fn sessions(
        &self,
        op: impl Fn(
                &dyn ReadOnlySessionStore<K, V>,
            ) -> Result<KeyValueIter<'_, Windowed<K>, V>, StoreError>
            + Send
            + Sync
            + 'static,
    ) -> impl Fn(&BuiltStore) -> Result<Vec<(Windowed<K>, V)>, QueryError> + Send + Sync + 'static
    {
        self.reader(move |s| collect(op(s)))
    }

    blocking_and_async! {
        /// Every session of `key`.
        fn fetch / fetch_async(&self, key: &K) -> Vec<(Windowed<K>, V)> {
            let key = key.clone();
            (self.sessions(move |s| s.fetch(&key)), concat)
        }

        /// Every session of keys in `[key_from, key_to]` (`None` is open).
        fn fetch_key_range / fetch_key_range_async(
            &self,
            key_from: Option<&K>,
            key_to: Option<&K>
        ) -> Vec<(Windowed<K>, V)> {
            let (kf, kt) = (key_from.cloned(), key_to.cloned());
            (self.sessions(move |s| s.fetch_key_range(kf.as_ref(), kt.as_ref())), concat)
        }

        /// `key`'s sessions that end at or after `earliest_end` and start at or
        /// before `latest_start`.
        fn find_sessions / find_sessions_async(
            &self,
            key: &K,
            earliest_end: Timestamp,
            latest_start: Timestamp
        ) -> Vec<(Windowed<K>, V)> {
            let key = key.clone();
            (self.sessions(move |s| s.find_sessions(&key, earliest_end, latest_start)), concat)
        }

        /// The sessions of `find_sessions`, in reverse.
        fn backward_find_sessions / backward_find_sessions_async(
            &self,
            key: &K,
            earliest_end: Timestamp,
            latest_start: Timestamp
        ) -> Vec<(Windowed<K>, V)> {
            let key = key.clone();
            let read = self.sessions(move |s| s.backward_find_sessions(&key, earliest_end, latest_start));
            (read, concat)
        }

        /// The value of one session.
        fn fetch_session / fetch_session_async(
            &self,
            key: &K,
            start: Timestamp,
            end: Timestamp
        ) -> Option<V> {
            let key = key.clone();
            (self.reader(move |s| s.fetch_session(&key, start, end)), first)
        }
    }
}

// ---------------------------------------------------------------- versioned

/// Reads of a versioned key-value store across the instance's tasks.
pub struct ReadOnlyVersionedView<K, V> {
    query: LocalQuery,
    types: PhantomData<fn() -> (K, V)>,
}

impl<K, V> ReadOnlyVersionedView<K, V> {
    pub(crate) fn new(query: LocalQuery, _unwrap: bool) -> Self {
        Self {
            query,
            types: PhantomData,
        }
    }
}

impl<K, V> ReadOnlyVersionedView<K, V>
where
    K: Clone + Send + Sync + 'static,
    V: Send + 'static,
{
    /// The read of `key`'s latest version, or the one valid at `as_of`.
    fn version(
        &self,
        key: &K,
        as_of: Option<Timestamp>,
    ) -> impl Fn(&BuiltStore) -> Result<Option<VersionedRecord<V>>, QueryError> + Send + Sync + 'static
    {
        let key = key.clone();
        move |built| {
            let handle = built
                .handle
                .downcast_ref::<VersionedKeyValueStoreHandle<K, V>>()
                .ok_or_else(|| wrong_type::<VersionedKeyValueStoreHandle<K, V>>(built))?;
            let store = handle.borrow();
            match as_of {
                None => store.get(&key),
                Some(t) => store.get_as_of(&key, t),
            }
            .map_err(|e| store_error(built, e))
        }
    }

    blocking_and_async! {
        /// The latest version of `key`, unless it is a tombstone.
        fn get / get_async(&self, key: &K) -> Option<VersionedRecord<V>> {
            (self.version(key, None), first)
        }

        /// The version of `key` valid at `as_of`.
        fn get_as_of / get_as_of_async(
            &self,
            key: &K,
            as_of: Timestamp
        ) -> Option<VersionedRecord<V>> {
            (self.version(key, Some(as_of)), first)
        }
    }
}
