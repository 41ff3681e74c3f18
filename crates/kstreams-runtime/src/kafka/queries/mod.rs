//! Interactive queries: Kafka Streams' `KafkaStreams#store` and its
//! metadata calls.
//!
//! A task's stores belong to the stream thread that runs it (`Rc`,
//! `RefCell`: the record path takes no lock), so a query is not a read
//! from another thread: it is a message. [`KafkaStreams::store`] hands out a
//! typed read-only view; each call on the view posts a read to every
//! stream thread's [`QueryInbox`], each thread runs it on its own tasks'
//! stores between two steps of its loop and answers on a channel, and the
//! view merges the answers as Kafka Streams' composite stores do (the first
//! value found for a key; ranges store after store). A query therefore reads
//! through the record cache, as in Kafka Streams, and sees every write of
//! the records processed so far; one that asks for
//! [`IsolationLevel::ReadCommitted`] with transactional stores under
//! exactly-once is served only at a commit point of the thread, where its
//! stores hold what it committed and nothing more.
//!
//! While a view is in use, an idle thread blocks in its poll at most
//! [`QUERY_POLL`] at a time, so a query waits at most that long for a
//! thread with nothing to do, and at most one output slice (5 ms) per task
//! for a busy one. Applications that never call `store` keep the plain
//! blocking poll.
//!
//! Which instance holds a key is in the streams group's endpoints
//! (`group.protocol=streams` with `application.server`): see
//! [`KeyQueryMetadata`]. The classic and KIP-848 protocols carry no
//! endpoints through librdkafka, so there the metadata calls fail with
//! [`QueryError::MetadataUnavailable`] and only local stores can be read.
//!
//! [`KafkaStreams::store`]: super::KafkaStreams::store

mod metadata;
mod parameters;
mod views;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kstreams_dsl::TaskId;
use kstreams_state::BuiltStore;

pub(crate) use metadata::{unknown_store, EndpointBoard, MetadataSource};
pub use metadata::{HostInfo, KeyQueryMetadata, StreamsMetadata};
pub use parameters::{
    IsolationLevel, KeyValueStoreType, QueryableStoreType, QueryableStoreTypes, SessionStoreType,
    StoreQueryParameters, TimestampedKeyValueStoreType, TimestampedWindowStoreType,
    VersionedKeyValueStoreType, WindowStoreType,
};
pub(crate) use views::{LocalQuery, QUERY_TIMEOUT};
pub use views::{
    ReadOnlyKeyValueView, ReadOnlySessionView, ReadOnlyVersionedView, ReadOnlyWindowView,
};

use super::state::State;

/// How long an idle stream thread blocks in one poll while interactive
/// queries are in use: the longest a query waits for such a thread.
pub(crate) const QUERY_POLL: Duration = Duration::from_millis(2);

/// Why an interactive query could not be answered: Kafka Streams'
/// `InvalidStateStoreException` family, with the reason in the variant.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// `store` or a metadata call before `start` (Kafka Streams'
    /// `StreamsNotStartedException`).
    #[error("KafkaStreams has not been started, you can retry after calling start()")]
    NotStarted,
    /// The application is neither running nor rebalancing.
    #[error("KafkaStreams is not running. State is {state:?}.")]
    NotRunning {
        /// Its state.
        state: State,
    },
    /// No stream processor of the topology uses a store of that name
    /// (Kafka Streams' `UnknownStateStoreException`).
    #[error(
        "Cannot get state store {store} because no such store is registered in the topology{hint}"
    )]
    UnknownStore {
        /// The name asked for.
        store: String,
        /// What to do instead, when kstreams knows (e.g. a global store).
        hint: String,
    },
    /// None of this instance's tasks holds the store (or the asked
    /// partition of it) now: it is elsewhere, moving, or still restoring.
    #[error("The state store, {store}, may have migrated to another instance: {reason}")]
    NotAvailable {
        /// The store.
        store: String,
        /// What the instance saw.
        reason: String,
    },
    /// The store exists but its type is not the one asked for.
    #[error(
        "Cannot get state store {store} because the queryable store type {requested} does not \
         accept the actual store type {actual}"
    )]
    WrongStoreType {
        /// The store.
        store: String,
        /// The store's handle type.
        actual: String,
        /// The view asked for.
        requested: String,
    },
    /// Reading the store failed (a serde, the engine).
    #[error("reading state store {store}: {message}")]
    Store {
        /// The store.
        store: String,
        /// The store's error.
        message: String,
    },
    /// The metadata calls need what the group protocol does not provide.
    #[error("{0}")]
    MetadataUnavailable(String),
}

/// A read of one store, run by a stream thread on the stores of its own
/// tasks, answering through a channel it carries.
pub(crate) type StoreRead = Box<dyn FnOnce(&dyn LocalStores) + Send>;

/// A stream thread's tasks, as a read sees them.
pub(crate) trait LocalStores {
    /// Every instance of `store` among the thread's tasks.
    fn instances(&self, store: &str) -> Vec<StoreInstance<'_>>;
}

/// One task's instance of a store.
pub(crate) struct StoreInstance<'a> {
    /// The task.
    pub task: TaskId,
    /// The store.
    pub store: &'a BuiltStore,
    /// Whether the store is current: false while its task still loads a
    /// bootstrap table or waits for partitions it was not given (a read
    /// then needs stale stores enabled, as a restoring store in Kafka
    /// Streams).
    pub current: bool,
}

/// Where a stream thread receives reads.
#[derive(Default)]
pub(crate) struct QueryInbox {
    reads: Mutex<Vec<StoreRead>>,
    /// Reads that may see only committed writes: served at a commit point.
    committed_reads: Mutex<Vec<StoreRead>>,
    /// Set with every read posted, so the thread's check is one load.
    waiting: AtomicBool,
}

impl QueryInbox {
    /// Posts `read`; `committed_only`: it waits for a commit point.
    fn post(&self, read: StoreRead, committed_only: bool) {
        let reads = match committed_only {
            true => &self.committed_reads,
            false => &self.reads,
        };
        reads.lock().unwrap_or_else(|p| p.into_inner()).push(read);
        self.waiting.store(true, Ordering::Release);
    }

    /// Whether reads wait to be served.
    pub(crate) fn has_reads(&self) -> bool {
        self.waiting.load(Ordering::Acquire)
    }

    /// The reads to serve now: all of them at a commit point (the stores
    /// hold exactly what the thread committed), else all but those waiting
    /// for one.
    pub(crate) fn take(&self, at_commit_point: bool) -> Vec<StoreRead> {
        self.waiting.store(false, Ordering::Release);
        let mut reads = std::mem::take(&mut *self.reads.lock().unwrap_or_else(|p| p.into_inner()));
        let mut committed = self
            .committed_reads
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if at_commit_point {
            reads.append(&mut committed);
        } else if !committed.is_empty() {
            self.waiting.store(true, Ordering::Release);
        }
        reads
    }
}

/// The stream threads' inboxes, by thread name. Shared by clones.
#[derive(Clone, Default)]
pub(crate) struct QueryRouter {
    inboxes: Arc<Mutex<BTreeMap<String, Arc<QueryInbox>>>>,
    /// Set once a view was handed out: from then on idle threads poll in
    /// short steps to answer quickly.
    in_use: Arc<AtomicBool>,
}

impl QueryRouter {
    /// The inbox of thread `thread`, made for it.
    pub(crate) fn register(&self, thread: &str) -> Arc<QueryInbox> {
        let inbox = Arc::new(QueryInbox::default());
        self.inboxes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(thread.to_string(), inbox.clone());
        inbox
    }

    /// Removes thread `thread`'s inbox; reads still in it are dropped, which
    /// their askers see as the thread having nothing to answer.
    pub(crate) fn unregister(&self, thread: &str) {
        let inbox = self
            .inboxes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(thread);
        if let Some(inbox) = inbox {
            drop(inbox.take(true));
        }
    }

    /// Whether a view was handed out.
    pub(crate) fn in_use(&self) -> bool {
        self.in_use.load(Ordering::Relaxed)
    }

    pub(crate) fn mark_in_use(&self) {
        self.in_use.store(true, Ordering::Relaxed);
    }

    /// The live threads' inboxes, by name.
    fn inboxes(&self) -> Vec<(String, Arc<QueryInbox>)> {
        self.inboxes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(name, inbox)| (name.clone(), inbox.clone()))
            .collect()
    }
}

/// Runs the reads a thread received on its tasks' stores, those that may
/// see only committed writes when `at_commit_point`. A read that panics (a
/// user's serde, say) is logged and answers nothing; the thread goes on.
pub(crate) fn serve(
    thread: &str,
    inbox: &QueryInbox,
    stores: &dyn LocalStores,
    at_commit_point: bool,
) {
    for read in inbox.take(at_commit_point) {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read(stores)));
        if outcome.is_err() {
            log::error!("{thread}: an interactive query panicked while reading a store");
        }
    }
}
