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
const QUERY_TIMEOUT: Duration = Duration::from_secs(10);

/// One query's target: the store, the partition, whether stale stores may
/// answer, and the way to the stream threads.
pub struct LocalQuery {
    pub(crate) router: QueryRouter,
    pub(crate) threads: MetadataBoard,
    pub(crate) store: Arc<str>,
    pub(crate) partition: Option<i32>,
    pub(crate) stale: bool,
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

impl LocalQuery {
    /// Runs `read` on every matching local instance of the store, on the
    /// threads that own them; the results in task order.
    fn run<R: Send + 'static>(
        &self,
        read: impl Fn(&BuiltStore) -> Result<R, QueryError> + Send + Sync + 'static,
    ) -> Result<Vec<R>, QueryError> {
        (self.check_state)()?;
        let read = Arc::new(read);
        let restoring = self.threads.restoring_threads();
        let (answers, received) = mpsc::channel::<Vec<Answer<R>>>();
        let (mut asked, mut skipped) = (0, Vec::new());
        for (thread, inbox) in self.router.inboxes() {
            if restoring.contains(&thread) && !self.stale {
                // As Kafka Streams, a thread whose tasks restore (not
                // RUNNING) serves no current store: a key not found
                // elsewhere may be in one of them.
                skipped.push(thread);
                continue;
            }
            let (read, answers) = (read.clone(), answers.clone());
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
                let _ = answers.send(found);
            });
            inbox.post(post);
            asked += 1;
        }
        drop(answers);
        let deadline = Instant::now() + QUERY_TIMEOUT;
        let mut found = Vec::new();
        let mut not_current = Vec::new();
        let mut answered = 0;
        while answered < asked {
            match received.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(answers) => {
                    answered += 1;
                    for answer in answers {
                        match answer {
                            Answer::Read(task, result) => found.push((task, result?)),
                            Answer::NotCurrent(task) => not_current.push(task),
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    return Err(self.not_available(format!(
                        "a stream thread did not answer within {QUERY_TIMEOUT:?}"
                    )))
                }
                // A thread stopped with the read unanswered.
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        // Stores that could not be read make any answer incomplete (a key
        // not found may be in them), unless the one partition asked for was
        // read: as Kafka Streams fails a query while a thread is not running.
        let complete = skipped.is_empty() && answered == asked;
        let asked_partition_read = self.partition.is_some() && !found.is_empty();
        if !complete && !asked_partition_read {
            let reason = match skipped.first() {
                Some(thread) => format!("stream thread {thread} is restoring its tasks' stores"),
                None => "a stream thread stopped before it answered".to_string(),
            };
            return Err(self.not_available(reason));
        }
        if found.is_empty() {
            return Err(self.not_found(&not_current));
        }
        found.sort_by_key(|(task, _)| *task);
        Ok(found.into_iter().map(|(_, r)| r).collect())
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
    fn read<R: Send + 'static>(
        &self,
        op: impl Fn(&dyn ReadOnlyKeyValueStore<K, V>) -> Result<R, StoreError> + Send + Sync + 'static,
    ) -> Result<Vec<R>, QueryError> {
        let unwrap = self.unwrap_timestamps;
        self.query.run(move |built| {
            read_as!(
                built,
                |s: &dyn ReadOnlyKeyValueStore<K, V>| op(s),
                unwrap,
                KeyValueStoreHandle<K, V>,
                TimestampedKeyValueStoreHandle<K, V>,
                KeyValueWithoutTimestamps
            )
        })
    }

    fn pairs(
        &self,
        op: impl Fn(&dyn ReadOnlyKeyValueStore<K, V>) -> Result<KeyValueIter<'_, K, V>, StoreError>
            + Send
            + Sync
            + 'static,
    ) -> Result<Vec<(K, V)>, QueryError> {
        Ok(self
            .read(move |s| collect(op(s)))?
            .into_iter()
            .flatten()
            .collect())
    }

    /// The value of a key: the first local store that has it answers.
    pub fn get(&self, key: &K) -> Result<Option<V>, QueryError> {
        let key = key.clone();
        Ok(self
            .read(move |s| s.get(&key))?
            .into_iter()
            .flatten()
            .next())
    }

    /// Entries with `from <= key <= to` (`None` is open).
    pub fn range(&self, from: Option<&K>, to: Option<&K>) -> Result<Vec<(K, V)>, QueryError> {
        let (from, to) = (from.cloned(), to.cloned());
        self.pairs(move |s| s.range(from.as_ref(), to.as_ref()))
    }

    /// [`ReadOnlyKeyValueView::range`], each store in reverse key order.
    pub fn reverse_range(
        &self,
        from: Option<&K>,
        to: Option<&K>,
    ) -> Result<Vec<(K, V)>, QueryError> {
        let (from, to) = (from.cloned(), to.cloned());
        self.pairs(move |s| s.reverse_range(from.as_ref(), to.as_ref()))
    }

    /// Every entry.
    pub fn all(&self) -> Result<Vec<(K, V)>, QueryError> {
        self.pairs(|s| s.all())
    }

    /// Every entry, each store in reverse key order.
    pub fn reverse_all(&self) -> Result<Vec<(K, V)>, QueryError> {
        self.pairs(|s| s.reverse_all())
    }

    /// Entries whose serialized key starts with `prefix`.
    pub fn prefix_scan(&self, prefix: &[u8]) -> Result<Vec<(K, V)>, QueryError> {
        let prefix = prefix.to_vec();
        self.pairs(move |s| s.prefix_scan(&prefix))
    }

    /// The sum of the local stores' estimates.
    pub fn approximate_num_entries(&self) -> Result<u64, QueryError> {
        Ok(self
            .read(|s| s.approximate_num_entries())?
            .into_iter()
            .fold(0u64, u64::saturating_add))
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
    fn read<R: Send + 'static>(
        &self,
        op: impl Fn(&dyn ReadOnlyWindowStore<K, V>) -> Result<R, StoreError> + Send + Sync + 'static,
    ) -> Result<Vec<R>, QueryError> {
        let unwrap = self.unwrap_timestamps;
        self.query.run(move |built| {
            read_as!(
                built,
                |s: &dyn ReadOnlyWindowStore<K, V>| op(s),
                unwrap,
                WindowStoreHandle<K, V>,
                TimestampedWindowStoreHandle<K, V>,
                WindowWithoutTimestamps
            )
        })
    }

    fn windows(
        &self,
        op: impl Fn(
                &dyn ReadOnlyWindowStore<K, V>,
            ) -> Result<KeyValueIter<'_, Windowed<K>, V>, StoreError>
            + Send
            + Sync
            + 'static,
    ) -> Result<Vec<(Windowed<K>, V)>, QueryError> {
        Ok(self
            .read(move |s| collect(op(s)))?
            .into_iter()
            .flatten()
            .collect())
    }

    fn of_key(
        &self,
        op: impl Fn(&dyn ReadOnlyWindowStore<K, V>) -> Result<WindowStoreIter<'_, V>, StoreError>
            + Send
            + Sync
            + 'static,
    ) -> Result<Vec<(Timestamp, V)>, QueryError> {
        Ok(self
            .read(move |s| collect(op(s)))?
            .into_iter()
            .flatten()
            .collect())
    }

    /// The value of `key`'s window that starts at `window_start`.
    pub fn fetch(&self, key: &K, window_start: Timestamp) -> Result<Option<V>, QueryError> {
        let key = key.clone();
        Ok(self
            .read(move |s| s.fetch(&key, window_start))?
            .into_iter()
            .flatten()
            .next())
    }

    /// `key`'s windows starting in `[from, to]`, by start.
    pub fn fetch_time_range(
        &self,
        key: &K,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<Vec<(Timestamp, V)>, QueryError> {
        let key = key.clone();
        self.of_key(move |s| s.fetch_time_range(&key, from, to))
    }

    /// [`ReadOnlyWindowView::fetch_time_range`], latest first.
    pub fn backward_fetch_time_range(
        &self,
        key: &K,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<Vec<(Timestamp, V)>, QueryError> {
        let key = key.clone();
        self.of_key(move |s| s.backward_fetch_time_range(&key, from, to))
    }

    /// Windows of keys in `[key_from, key_to]` (`None` is open) starting in
    /// `[from, to]`.
    pub fn fetch_key_range(
        &self,
        key_from: Option<&K>,
        key_to: Option<&K>,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<Vec<(Windowed<K>, V)>, QueryError> {
        let (kf, kt) = (key_from.cloned(), key_to.cloned());
        self.windows(move |s| s.fetch_key_range(kf.as_ref(), kt.as_ref(), from, to))
    }

    /// [`ReadOnlyWindowView::fetch_key_range`], each store in reverse.
    pub fn backward_fetch_key_range(
        &self,
        key_from: Option<&K>,
        key_to: Option<&K>,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<Vec<(Windowed<K>, V)>, QueryError> {
        let (kf, kt) = (key_from.cloned(), key_to.cloned());
        self.windows(move |s| s.backward_fetch_key_range(kf.as_ref(), kt.as_ref(), from, to))
    }

    /// Windows of every key starting in `[from, to]`.
    pub fn fetch_all(
        &self,
        from: Timestamp,
        to: Timestamp,
    ) -> Result<Vec<(Windowed<K>, V)>, QueryError> {
        self.windows(move |s| s.fetch_all(from, to))
    }

    /// Every window.
    pub fn all(&self) -> Result<Vec<(Windowed<K>, V)>, QueryError> {
        self.windows(|s| s.all())
    }

    /// Every window, each store in reverse.
    pub fn backward_all(&self) -> Result<Vec<(Windowed<K>, V)>, QueryError> {
        self.windows(|s| s.backward_all())
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
    fn read<R: Send + 'static>(
        &self,
        op: impl Fn(&dyn ReadOnlySessionStore<K, V>) -> Result<R, StoreError> + Send + Sync + 'static,
    ) -> Result<Vec<R>, QueryError> {
        self.query.run(move |built| {
            let handle = built
                .handle
                .downcast_ref::<SessionStoreHandle<K, V>>()
                .ok_or_else(|| wrong_type::<SessionStoreHandle<K, V>>(built))?;
            let store = handle.borrow();
            op(&*store).map_err(|e| store_error(built, e))
        })
    }

    fn sessions(
        &self,
        op: impl Fn(
                &dyn ReadOnlySessionStore<K, V>,
            ) -> Result<KeyValueIter<'_, Windowed<K>, V>, StoreError>
            + Send
            + Sync
            + 'static,
    ) -> Result<Vec<(Windowed<K>, V)>, QueryError> {
        Ok(self
            .read(move |s| collect(op(s)))?
            .into_iter()
            .flatten()
            .collect())
    }

    /// Every session of `key`.
    pub fn fetch(&self, key: &K) -> Result<Vec<(Windowed<K>, V)>, QueryError> {
        let key = key.clone();
        self.sessions(move |s| s.fetch(&key))
    }

    /// Every session of keys in `[key_from, key_to]` (`None` is open).
    pub fn fetch_key_range(
        &self,
        key_from: Option<&K>,
        key_to: Option<&K>,
    ) -> Result<Vec<(Windowed<K>, V)>, QueryError> {
        let (kf, kt) = (key_from.cloned(), key_to.cloned());
        self.sessions(move |s| s.fetch_key_range(kf.as_ref(), kt.as_ref()))
    }

    /// `key`'s sessions that end at or after `earliest_end` and start at or
    /// before `latest_start`.
    pub fn find_sessions(
        &self,
        key: &K,
        earliest_end: Timestamp,
        latest_start: Timestamp,
    ) -> Result<Vec<(Windowed<K>, V)>, QueryError> {
        let key = key.clone();
        self.sessions(move |s| s.find_sessions(&key, earliest_end, latest_start))
    }

    /// [`ReadOnlySessionView::find_sessions`] in reverse.
    pub fn backward_find_sessions(
        &self,
        key: &K,
        earliest_end: Timestamp,
        latest_start: Timestamp,
    ) -> Result<Vec<(Windowed<K>, V)>, QueryError> {
        let key = key.clone();
        self.sessions(move |s| s.backward_find_sessions(&key, earliest_end, latest_start))
    }

    /// The value of one session.
    pub fn fetch_session(
        &self,
        key: &K,
        start: Timestamp,
        end: Timestamp,
    ) -> Result<Option<V>, QueryError> {
        let key = key.clone();
        Ok(self
            .read(move |s| s.fetch_session(&key, start, end))?
            .into_iter()
            .flatten()
            .next())
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
    fn read_version(
        &self,
        key: &K,
        as_of: Option<Timestamp>,
    ) -> Result<Option<VersionedRecord<V>>, QueryError> {
        let key = key.clone();
        let found = self.query.run(move |built| {
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
        })?;
        Ok(found.into_iter().flatten().next())
    }

    /// The latest version of `key`, unless it is a tombstone.
    pub fn get(&self, key: &K) -> Result<Option<VersionedRecord<V>>, QueryError> {
        self.read_version(key, None)
    }

    /// The version of `key` valid at `as_of`.
    pub fn get_as_of(
        &self,
        key: &K,
        as_of: Timestamp,
    ) -> Result<Option<VersionedRecord<V>>, QueryError> {
        self.read_version(key, Some(as_of))
    }
}
