//! How far this instance's local stores are behind their changelogs: Kafka
//! Streams' `KafkaStreams#allLocalStorePartitionLags` and its `LagInfo`.
//!
//! A store partition's position comes from where the instance keeps it: an
//! active task that runs is current (Kafka Streams reports its position as
//! the end offset), an active task that restores is where its restoration
//! reached (the restore board), a standby is past the last record it applied
//! (recorded here, from the standby updates). The end offsets are the
//! changelog partitions' high watermarks, asked of the broker at each call.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use kstreams_dsl::Topology;
use kstreams_state::TopicPartition;

use super::local_metadata::ThreadMetadata;
use super::standby_listener::{StandbyUpdateListener, SuspendReason};
use super::RuntimeError;

/// How far a local copy of one store partition is behind the end of its
/// changelog partition: Kafka Streams' `LagInfo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LagInfo {
    current_offset_position: i64,
    end_offset_position: i64,
    offset_lag: i64,
}

impl LagInfo {
    /// A store at `current` (the next changelog offset it would read) of a
    /// changelog partition ending at `end`.
    pub(crate) fn new(current: i64, end: i64) -> Self {
        LagInfo {
            current_offset_position: current,
            end_offset_position: end,
            offset_lag: (end - current).max(0),
        }
    }

    /// The changelog offset the local store has reached: the next one it
    /// would apply. An active task that runs is at the end.
    pub fn current_offset_position(&self) -> i64 {
        self.current_offset_position
    }

    /// The changelog partition's end offset (its high watermark) when asked.
    pub fn end_offset_position(&self) -> i64 {
        self.end_offset_position
    }

    /// Offsets still to apply: the end less the current position, never
    /// below 0. Under exactly-once a store that has applied every record
    /// may lag by the transaction markers after them, as in Kafka Streams.
    pub fn offset_lag(&self) -> i64 {
        self.offset_lag
    }
}

impl std::fmt::Display for LagInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "LagInfo {{currentOffsetPosition={}, endOffsetPosition={}, offsetLag={}}}",
            self.current_offset_position, self.end_offset_position, self.offset_lag
        )
    }
}

/// Where each standby store of the instance has got to: store and
/// changelog partition to the next offset to apply. Shared by clones.
#[derive(Clone, Default)]
pub(crate) struct StandbyPositions(Arc<Mutex<BTreeMap<(String, TopicPartition), i64>>>);

impl StandbyPositions {
    /// The standby listener the stream threads get: it records positions
    /// here and passes every call on to the application's listener.
    pub(crate) fn listener(
        &self,
        application: Option<Arc<dyn StandbyUpdateListener>>,
    ) -> Arc<dyn StandbyUpdateListener> {
        Arc::new(RecordingListener {
            positions: self.clone(),
            application,
        })
    }

    fn set(&self, store: &str, partition: &TopicPartition, next: i64) {
        self.lock()
            .insert((store.to_string(), partition.clone()), next);
    }

    fn remove(&self, store: &str, partition: &TopicPartition) {
        self.lock().remove(&(store.to_string(), partition.clone()));
    }

    fn positions(&self) -> Vec<(String, TopicPartition, i64)> {
        self.lock()
            .iter()
            .map(|((store, partition), next)| (store.clone(), partition.clone(), *next))
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, TopicPartition), i64>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

struct RecordingListener {
    positions: StandbyPositions,
    application: Option<Arc<dyn StandbyUpdateListener>>,
}

impl StandbyUpdateListener for RecordingListener {
    fn on_update_start(&self, partition: &TopicPartition, store: &str, starting_offset: i64) {
        // The offset of the last record held (-1: none): the next is after it.
        self.positions.set(store, partition, starting_offset + 1);
        if let Some(listener) = &self.application {
            listener.on_update_start(partition, store, starting_offset);
        }
    }

    fn on_batch_loaded(
        &self,
        partition: &TopicPartition,
        store: &str,
        task_id: &str,
        batch_end_offset: i64,
        batch_size: u64,
        current_end_offset: i64,
    ) {
        self.positions.set(store, partition, batch_end_offset + 1);
        if let Some(listener) = &self.application {
            listener.on_batch_loaded(
                partition,
                store,
                task_id,
                batch_end_offset,
                batch_size,
                current_end_offset,
            );
        }
    }

    fn on_update_suspended(
        &self,
        partition: &TopicPartition,
        store: &str,
        store_offset: i64,
        current_end_offset: i64,
        reason: SuspendReason,
    ) {
        self.positions.remove(store, partition);
        if let Some(listener) = &self.application {
            listener.on_update_suspended(
                partition,
                store,
                store_offset,
                current_end_offset,
                reason,
            );
        }
    }
}

/// Where one local store partition is: at the end of its changelog (an
/// active task that runs), or before the offset given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Position {
    AtEnd,
    Next(i64),
}

/// Every changelog partition of the instance's local stores with its
/// position: the active tasks the threads publish (at the end, unless their
/// restoration is in flight at `restoring`), and the standbys.
pub(crate) fn local_positions(
    topology: &Topology,
    application_id: &str,
    threads: &[ThreadMetadata],
    restoring: Vec<(String, TopicPartition, i64)>,
    standbys: &StandbyPositions,
) -> BTreeMap<(String, TopicPartition), Position> {
    let changelogs = topology.changelog_topics(application_id);
    let restoring: BTreeMap<(String, TopicPartition), i64> = restoring
        .into_iter()
        .map(|(store, partition, next)| ((store, partition), next))
        .collect();
    let mut positions: BTreeMap<(String, TopicPartition), Position> = standbys
        .positions()
        .into_iter()
        .map(|(store, partition, next)| ((store, partition), Position::Next(next)))
        .collect();
    for task in threads.iter().flat_map(|t| &t.active_tasks) {
        for changelog in changelogs
            .iter()
            .filter(|c| c.subtopology == task.subtopology)
        {
            let key = (
                changelog.store.clone(),
                TopicPartition::new(changelog.topic.as_str(), task.partition),
            );
            let position = restoring
                .get(&key)
                .map_or(Position::AtEnd, |next| Position::Next(*next));
            positions.insert(key, position);
        }
    }
    positions
}

/// The lags of `positions` by store and partition, with each changelog
/// partition's end from `end_offset`.
pub(crate) fn lags(
    positions: BTreeMap<(String, TopicPartition), Position>,
    mut end_offset: impl FnMut(&TopicPartition) -> Result<i64, RuntimeError>,
) -> Result<HashMap<String, HashMap<i32, LagInfo>>, RuntimeError> {
    let mut lags: HashMap<String, HashMap<i32, LagInfo>> = HashMap::new();
    for ((store, partition), position) in positions {
        let end = end_offset(&partition)?;
        let current = match position {
            Position::AtEnd => end,
            Position::Next(next) => next,
        };
        lags.entry(store)
            .or_default()
            .insert(partition.partition, LagInfo::new(current, end));
    }
    Ok(lags)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lag_is_the_end_less_the_position_and_never_negative() {
        let lag = LagInfo::new(7, 10);
        assert_eq!(
            (
                lag.current_offset_position(),
                lag.end_offset_position(),
                lag.offset_lag()
            ),
            (7, 10, 3)
        );
        assert_eq!(LagInfo::new(12, 10).offset_lag(), 0);
        assert_eq!(
            LagInfo::new(7, 10).to_string(),
            "LagInfo {currentOffsetPosition=7, endOffsetPosition=10, offsetLag=3}"
        );
    }

    #[test]
    fn running_stores_are_at_the_end_and_standbys_where_they_applied_to() {
        let standbys = StandbyPositions::default();
        let listener = standbys.listener(None);
        let tp = |p| TopicPartition::new("app-s-changelog", p);
        listener.on_update_start(&tp(1), "s", -1);
        listener.on_update_start(&tp(2), "s", 4);
        listener.on_batch_loaded(&tp(2), "s", "0_2", 9, 5, 12);
        listener.on_update_start(&tp(3), "s", 4);
        listener.on_update_suspended(&tp(3), "s", 4, 12, SuspendReason::Migrated);
        let mut positions = BTreeMap::new();
        for (store, partition, next) in standbys.positions() {
            positions.insert((store, partition), Position::Next(next));
        }
        positions.insert(("s".to_string(), tp(0)), Position::AtEnd);
        let lags = lags(positions, |_| Ok(12)).unwrap();
        let s = &lags["s"];
        assert_eq!(s.len(), 3, "{s:?}");
        assert_eq!(s[&0], LagInfo::new(12, 12));
        assert_eq!(s[&1], LagInfo::new(0, 12));
        assert_eq!(s[&2], LagInfo::new(10, 12));
    }
}
