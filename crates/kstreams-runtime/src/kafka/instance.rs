//! What one `KafkaStreams` instance runs with, shared by its threads: the
//! running state that Kafka Streams keeps on the `KafkaStreams` object and
//! hands to its `StreamThread`s (the metadata they publish, restore
//! progress and listeners, query routing, the streams group's endpoints,
//! the async executor, whether the instance is paused). The configuration (`StreamsConfig`) holds values
//! only; `KafkaStreams::new` builds this, its setters fill it, and every
//! thread, task, standby and query gets a clone.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use kstreams_group::LeaveOperation;

use super::application_shutdown::ApplicationShutdown;
use super::local_metadata::MetadataBoard;
use super::queries::{EndpointBoard, QueryRouter};
use super::restore_progress::RestoreBoard;
use super::standby_listener::StandbyUpdateListener;
use super::store_lags::StandbyPositions;
use crate::async_runtime::AsyncExecutor;

/// The instance's shared running state. A clone shares every part.
#[derive(Clone, Default)]
pub(crate) struct Instance {
    /// The stream threads publish their tasks on it; `KafkaStreams::metadata`
    /// reads it.
    pub(crate) local_metadata: MetadataBoard,
    /// The application's restore listener and the restorations in flight.
    pub(crate) restore_board: RestoreBoard,
    /// Hears of standby tasks' updates (set before `start`).
    pub(crate) standby_listener: Option<Arc<dyn StandbyUpdateListener>>,
    /// Where the standby stores have got to, for
    /// `KafkaStreams::all_local_store_partition_lags`: `start` hands the
    /// threads a standby listener that records here (and passes on to
    /// `standby_listener`).
    pub(crate) standby_positions: StandbyPositions,
    /// The stream threads' inboxes for interactive queries.
    pub(crate) store_queries: QueryRouter,
    /// The streams group's latest endpoints, for the interactive query
    /// metadata calls.
    pub(crate) endpoints: EndpointBoard,
    /// Set by `KafkaStreams::pause`, cleared by `resume`; every stream
    /// thread reads it each pass of its loop.
    pub(crate) paused: PauseFlag,
    /// How the threads' group members leave when the threads stop.
    pub(crate) leave_operations: LeaveOperations,
    /// A `ShutdownApplication` asked for here or heard from the group.
    pub(crate) application_shutdown: ApplicationShutdown,
    /// The runtime for async calls, started with the first task that has an
    /// async processor.
    pub(crate) async_executor: AsyncExecutor,
    /// What every RocksDB store of the instance opens with: the config
    /// setter, and under bounded memory the one block cache and write buffer
    /// manager all the stores share. Made at the first `start`.
    #[cfg(feature = "rocksdb")]
    pub(crate) rocksdb: Option<kstreams_state::RocksDbSettings>,
}

/// How each stream thread's group member ends its membership when the
/// thread stops, by thread name: what `close_with` asks of all of them and
/// `remove_stream_thread` of one (leave for good). A thread not named does
/// the default.
#[derive(Clone, Default)]
pub(crate) struct LeaveOperations(Arc<std::sync::Mutex<HashMap<String, LeaveOperation>>>);

impl LeaveOperations {
    pub(crate) fn set(&self, thread: &str, operation: LeaveOperation) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(thread.to_string(), operation);
    }

    pub(crate) fn of(&self, thread: &str) -> LeaveOperation {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(thread)
            .copied()
            .unwrap_or_default()
    }
}

/// Whether the instance's processing is paused (Kafka Streams'
/// `TopologyMetadata#pausedTopologies`, for the one unnamed topology): the
/// stream threads stay in the group, poll and commit, but process,
/// punctuate, restore and update standbys no more until it is cleared.
#[derive(Clone, Default)]
pub(crate) struct PauseFlag(Arc<AtomicBool>);

impl PauseFlag {
    pub(crate) fn set(&self, paused: bool) {
        self.0.store(paused, Ordering::Release);
    }

    pub(crate) fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}
