//! A stream thread's state: Kafka Streams' `StreamThread.State`, with its
//! transitions checked as Kafka Streams checks them.
//!
//! - CREATED -> STARTING or PENDING_SHUTDOWN;
//! - STARTING and PARTITIONS_REVOKED -> PARTITIONS_REVOKED,
//!   PARTITIONS_ASSIGNED or PENDING_SHUTDOWN;
//! - PARTITIONS_ASSIGNED and RUNNING -> PARTITIONS_REVOKED,
//!   PARTITIONS_ASSIGNED, RUNNING or PENDING_SHUTDOWN;
//! - PENDING_SHUTDOWN -> DEAD.
//!
//! A thread is RUNNING once its assigned tasks are created and restored;
//! the application is REBALANCING while any thread is in one of the two
//! partition states.

use std::fmt;

/// Where a stream thread is in its life (Kafka Streams'
/// `StreamThread.State`, shown by [`ThreadMetadata`](crate::kafka::ThreadMetadata)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ThreadState {
    /// Made: its clients exist, its loop has not started.
    Created,
    /// Its loop started; no assignment yet.
    Starting,
    /// Partitions were taken away: their tasks are committed and closed.
    PartitionsRevoked,
    /// Partitions were given: their tasks are being created and restored.
    PartitionsAssigned,
    /// Processing its tasks.
    Running,
    /// Stopping: the last commit and the tasks' close.
    PendingShutdown,
    /// Stopped.
    Dead,
}

impl ThreadState {
    /// Whether Kafka Streams lets a thread go from `self` to `to`
    /// (`StreamThread.State.isValidTransition`).
    pub fn can_become(self, to: ThreadState) -> bool {
        use ThreadState::*;
        match self {
            Created => matches!(to, Starting | PendingShutdown),
            Starting | PartitionsRevoked => {
                matches!(to, PartitionsRevoked | PartitionsAssigned | PendingShutdown)
            }
            PartitionsAssigned | Running => matches!(
                to,
                PartitionsRevoked | PartitionsAssigned | Running | PendingShutdown
            ),
            PendingShutdown => to == Dead,
            Dead => false,
        }
    }

    /// Whether the thread is in a rebalance (the application is then
    /// REBALANCING).
    pub fn is_rebalancing(self) -> bool {
        matches!(
            self,
            ThreadState::PartitionsRevoked | ThreadState::PartitionsAssigned
        )
    }

    /// Kafka Streams' name of the state.
    pub fn name(self) -> &'static str {
        match self {
            ThreadState::Created => "CREATED",
            ThreadState::Starting => "STARTING",
            ThreadState::PartitionsRevoked => "PARTITIONS_REVOKED",
            ThreadState::PartitionsAssigned => "PARTITIONS_ASSIGNED",
            ThreadState::Running => "RUNNING",
            ThreadState::PendingShutdown => "PENDING_SHUTDOWN",
            ThreadState::Dead => "DEAD",
        }
    }
}

impl fmt::Display for ThreadState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A thread's current state, moved only along valid transitions.
#[derive(Debug)]
pub(crate) struct StateMachine {
    thread: String,
    state: ThreadState,
}

impl StateMachine {
    /// Thread `thread`, CREATED.
    pub(super) fn new(thread: &str) -> Self {
        Self {
            thread: thread.to_string(),
            state: ThreadState::Created,
        }
    }

    pub(super) fn state(&self) -> ThreadState {
        self.state
    }

    /// Moves to `to` and returns the state left, or `None` when the thread
    /// is in `to` already or Kafka Streams would refuse the move (then
    /// nothing changes). A refused move
    /// is the thread's own bug; it is logged, not fatal, as Kafka Streams'
    /// `setState` returns null for it.
    pub(super) fn transition_to(&mut self, to: ThreadState) -> Option<ThreadState> {
        let from = self.state;
        if from == to {
            // Already there (a round's assignment, then its end): nothing
            // to tell.
            return None;
        }
        if !from.can_become(to) {
            log::warn!("{}: no transition from {from} to {to}", self.thread);
            return None;
        }
        self.state = to;
        log::info!("{}: state transition from {from} to {to}", self.thread);
        Some(from)
    }
}

#[cfg(test)]
mod tests {
    use super::ThreadState::*;
    use super::*;

    const ALL: [ThreadState; 7] = [
        Created,
        Starting,
        PartitionsRevoked,
        PartitionsAssigned,
        Running,
        PendingShutdown,
        Dead,
    ];

    /// Kafka Streams' table (`StreamThread.State`'s valid next states, by
    /// ordinal): CREATED(1, 5), STARTING(2, 3, 5), PARTITIONS_REVOKED(2, 3,
    /// 5), PARTITIONS_ASSIGNED(2, 3, 4, 5), RUNNING(2, 3, 4, 5),
    /// PENDING_SHUTDOWN(6), DEAD().
    #[test]
    fn transitions_are_kafka_streams_own() {
        let valid: [&[usize]; 7] = [
            &[1, 5],
            &[2, 3, 5],
            &[2, 3, 5],
            &[2, 3, 4, 5],
            &[2, 3, 4, 5],
            &[6],
            &[],
        ];
        for (i, from) in ALL.iter().enumerate() {
            for (j, to) in ALL.iter().enumerate() {
                assert_eq!(
                    from.can_become(*to),
                    valid[i].contains(&j),
                    "{from} -> {to}"
                );
            }
        }
    }

    #[test]
    fn a_refused_move_changes_nothing() {
        let mut machine = StateMachine::new("t");
        assert_eq!(machine.transition_to(Running), None);
        assert_eq!(machine.state(), Created);
        assert_eq!(machine.transition_to(Starting), Some(Created));
        assert_eq!(machine.transition_to(PartitionsAssigned), Some(Starting));
        assert_eq!(machine.transition_to(Running), Some(PartitionsAssigned));
        assert_eq!(machine.transition_to(PendingShutdown), Some(Running));
        assert_eq!(machine.transition_to(Running), None);
        assert_eq!(machine.transition_to(Dead), Some(PendingShutdown));
        assert_eq!(machine.state().name(), "DEAD");
    }
}
