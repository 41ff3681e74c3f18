//! Why the stream thread does not fetch a partition, and the consumer's
//! pauses that follow from it.
//!
//! Three reasons compose (Kafka Streams has the same three, spread over
//! `StreamThread`, `TaskManager` and `KafkaStreams.pause`): a partition's
//! buffer over `buffered.records.per.partition` (backpressure), its task
//! restoring (held), and the application paused. A partition is fetched
//! only when it is assigned and none of them applies; ending one reason
//! never resumes a partition another still pauses. The consumer is reached
//! through [`Fetching`], so the rules are tested against a fake.

use std::collections::HashSet;

use kstreams_state::TopicPartition;
use rdkafka::consumer::Consumer;

use super::MainConsumer;
use crate::kafka::client_error::ClientResult;
use crate::kafka::rebalance_listener::{partition_list, partitions};
use crate::kafka::RuntimeError;

/// What the pauses need of the consumer.
pub(super) trait Fetching {
    /// Stops fetching `partitions`.
    fn pause(&self, partitions: &[TopicPartition]) -> Result<(), RuntimeError>;
    /// Fetches `partitions` again.
    fn resume(&self, partitions: &[TopicPartition]) -> Result<(), RuntimeError>;
    /// The partitions assigned now.
    fn assignment(&self) -> Result<Vec<TopicPartition>, RuntimeError>;
}

impl Fetching for MainConsumer {
    fn pause(&self, partitions: &[TopicPartition]) -> Result<(), RuntimeError> {
        Consumer::pause(&**self, &partition_list(partitions)).client()
    }

    fn resume(&self, partitions: &[TopicPartition]) -> Result<(), RuntimeError> {
        Consumer::resume(&**self, &partition_list(partitions)).client()
    }

    fn assignment(&self) -> Result<Vec<TopicPartition>, RuntimeError> {
        Ok(partitions(&Consumer::assignment(&**self).client()?))
    }
}

/// The partitions paused, by reason.
#[derive(Debug, Default)]
pub(super) struct Pauses {
    /// Paused for backpressure: their buffers went over the bound.
    backpressure: HashSet<TopicPartition>,
    /// Paused while their task restores.
    held: HashSet<TopicPartition>,
    /// The application is paused (`KafkaStreams::pause`): every assigned
    /// partition is.
    instance: bool,
}

impl Pauses {
    /// `partition`'s buffer went over the bound: paused until it drains.
    /// Returns whether it was not paused for that already.
    pub(super) fn over_bound(
        &mut self,
        partition: &TopicPartition,
        consumer: &impl Fetching,
    ) -> Result<bool, RuntimeError> {
        if self.backpressure.contains(partition) {
            return Ok(false);
        }
        consumer.pause(std::slice::from_ref(partition))?;
        self.backpressure.insert(partition.clone());
        Ok(true)
    }

    /// Resumes the partitions paused for backpressure that `drained` says
    /// are low enough, unless held or the application is paused (those
    /// stay paused for backpressure and are looked at again next time).
    pub(super) fn resume_drained(
        &mut self,
        drained: impl Fn(&TopicPartition) -> bool,
        consumer: &impl Fetching,
    ) -> Result<(), RuntimeError> {
        if self.instance {
            return Ok(());
        }
        let resumable: Vec<TopicPartition> = self
            .backpressure
            .iter()
            .filter(|tp| !self.held.contains(*tp) && drained(tp))
            .cloned()
            .collect();
        if resumable.is_empty() {
            return Ok(());
        }
        for tp in &resumable {
            self.backpressure.remove(tp);
        }
        consumer.resume(&resumable)
    }

    /// Partitions were assigned: no reason of before applies to them
    /// (librdkafka keeps an application's pause across a revocation, and a
    /// partition paused before and assigned again would never be fetched),
    /// so they are resumed, or paused while the application is.
    pub(super) fn assigned(
        &mut self,
        assigned: &[TopicPartition],
        consumer: &impl Fetching,
    ) -> Result<(), RuntimeError> {
        for tp in assigned {
            self.backpressure.remove(tp);
            self.held.remove(tp);
        }
        if self.instance {
            // A failed pause would let them be read and buffered without
            // bound: it fails the step.
            return consumer.pause(assigned);
        }
        if let Err(e) = consumer.resume(assigned) {
            // Not yet paused is what resuming is for; nothing is lost.
            log::debug!("resume of assigned partitions: {e}");
        }
        Ok(())
    }

    /// Partitions were revoked: no longer paused for any reason of theirs.
    pub(super) fn revoked(&mut self, revoked: &[TopicPartition]) {
        for tp in revoked {
            self.backpressure.remove(tp);
            self.held.remove(tp);
        }
    }

    /// Pauses `partitions` while their task restores (Kafka Streams'
    /// `TaskManager.handleRebalanceComplete` pausing the partitions of the
    /// tasks in its state updater).
    pub(super) fn hold(
        &mut self,
        partitions: &[TopicPartition],
        consumer: &impl Fetching,
    ) -> Result<(), RuntimeError> {
        let new: Vec<TopicPartition> = partitions
            .iter()
            .filter(|tp| !self.held.contains(*tp))
            .cloned()
            .collect();
        if new.is_empty() {
            return Ok(());
        }
        consumer.pause(&new)?;
        self.held.extend(new);
        Ok(())
    }

    /// Their task restored: `partitions` are resumed, unless paused for
    /// backpressure too (until their buffers drain) or the application is.
    pub(super) fn release(
        &mut self,
        partitions: &[TopicPartition],
        consumer: &impl Fetching,
    ) -> Result<(), RuntimeError> {
        let resumable: Vec<TopicPartition> = partitions
            .iter()
            .filter(|tp| self.held.remove(*tp) && !self.backpressure.contains(*tp))
            .cloned()
            .collect();
        if resumable.is_empty() || self.instance {
            return Ok(());
        }
        consumer.resume(&resumable)
    }

    /// The application was paused (`paused`) or resumed: every assigned
    /// partition is paused, or those that neither backpressure nor a
    /// restoring task holds are resumed.
    pub(super) fn set_instance_paused(
        &mut self,
        paused: bool,
        consumer: &impl Fetching,
    ) -> Result<(), RuntimeError> {
        if paused == self.instance {
            return Ok(());
        }
        let assigned = consumer.assignment()?;
        let change: Vec<TopicPartition> = if paused {
            assigned
        } else {
            assigned
                .into_iter()
                .filter(|tp| !self.backpressure.contains(tp) && !self.held.contains(tp))
                .collect()
        };
        if !change.is_empty() {
            if paused {
                consumer.pause(&change)?;
            } else {
                consumer.resume(&change)?;
            }
        }
        self.instance = paused;
        Ok(())
    }

    /// Whether the application is paused.
    #[cfg(test)]
    fn instance_paused(&self) -> bool {
        self.instance
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    /// A consumer as librdkafka behaves for pauses: a pause is a flag of
    /// an assigned partition, kept across nothing but the assignment.
    #[derive(Default)]
    struct FakeConsumer {
        assigned: RefCell<BTreeSet<TopicPartition>>,
        paused: RefCell<BTreeSet<TopicPartition>>,
    }

    impl FakeConsumer {
        fn assign(&self, partitions: &[TopicPartition]) {
            self.assigned
                .borrow_mut()
                .extend(partitions.iter().cloned());
        }

        fn unassign(&self, partitions: &[TopicPartition]) {
            let mut assigned = self.assigned.borrow_mut();
            for tp in partitions {
                assigned.remove(tp);
            }
        }

        fn fetched(&self) -> BTreeSet<TopicPartition> {
            let paused = self.paused.borrow();
            self.assigned
                .borrow()
                .iter()
                .filter(|tp| !paused.contains(*tp))
                .cloned()
                .collect()
        }
    }

    impl Fetching for FakeConsumer {
        fn pause(&self, partitions: &[TopicPartition]) -> Result<(), RuntimeError> {
            self.paused.borrow_mut().extend(partitions.iter().cloned());
            Ok(())
        }

        fn resume(&self, partitions: &[TopicPartition]) -> Result<(), RuntimeError> {
            let mut paused = self.paused.borrow_mut();
            for tp in partitions {
                paused.remove(tp);
            }
            Ok(())
        }

        fn assignment(&self) -> Result<Vec<TopicPartition>, RuntimeError> {
            Ok(self.assigned.borrow().iter().cloned().collect())
        }
    }

    fn tp(partition: i32) -> TopicPartition {
        TopicPartition::new("in", partition)
    }

    fn set(partitions: &[i32]) -> BTreeSet<TopicPartition> {
        partitions.iter().map(|p| tp(*p)).collect()
    }

    #[test]
    fn a_released_partition_still_over_its_bound_waits_for_its_buffer() {
        let consumer = FakeConsumer::default();
        let mut pauses = Pauses::default();
        consumer.assign(&[tp(0), tp(1)]);
        pauses.assigned(&[tp(0), tp(1)], &consumer).unwrap();
        assert!(pauses.over_bound(&tp(0), &consumer).unwrap());
        assert!(!pauses.over_bound(&tp(0), &consumer).unwrap());
        pauses.hold(&[tp(0), tp(1)], &consumer).unwrap();
        // Drained while held: still held.
        pauses.resume_drained(|_| true, &consumer).unwrap();
        assert_eq!(consumer.fetched(), set(&[]));
        pauses.release(&[tp(0), tp(1)], &consumer).unwrap();
        assert_eq!(consumer.fetched(), set(&[1]));
        pauses.resume_drained(|_| false, &consumer).unwrap();
        assert_eq!(consumer.fetched(), set(&[1]));
        pauses.resume_drained(|_| true, &consumer).unwrap();
        assert_eq!(consumer.fetched(), set(&[0, 1]));
    }

    #[test]
    fn resuming_the_application_leaves_held_and_full_partitions_paused() {
        let consumer = FakeConsumer::default();
        let mut pauses = Pauses::default();
        consumer.assign(&[tp(0), tp(1), tp(2)]);
        pauses.assigned(&[tp(0), tp(1), tp(2)], &consumer).unwrap();
        pauses.over_bound(&tp(0), &consumer).unwrap();
        pauses.hold(&[tp(1)], &consumer).unwrap();
        pauses.set_instance_paused(true, &consumer).unwrap();
        assert_eq!(consumer.fetched(), set(&[]));
        // Neither drained buffers nor a restored task resume a paused
        // application's partitions.
        pauses.resume_drained(|_| true, &consumer).unwrap();
        pauses.release(&[tp(1)], &consumer).unwrap();
        assert_eq!(consumer.fetched(), set(&[]));
        // A partition assigned meanwhile is paused too.
        consumer.assign(&[tp(3)]);
        pauses.assigned(&[tp(3)], &consumer).unwrap();
        assert_eq!(consumer.fetched(), set(&[]));
        pauses.set_instance_paused(false, &consumer).unwrap();
        assert_eq!(consumer.fetched(), set(&[1, 2, 3]));
        pauses.resume_drained(|_| true, &consumer).unwrap();
        assert_eq!(consumer.fetched(), set(&[0, 1, 2, 3]));
    }

    #[derive(Clone, Debug)]
    enum Step {
        Assign(Vec<i32>),
        Revoke(Vec<i32>),
        OverBound(i32),
        /// Buffers drain: those of these partitions are low enough.
        Drain(Vec<i32>),
        Hold(Vec<i32>),
        Release(Vec<i32>),
        PauseApplication(bool),
    }

    fn partitions_strategy() -> impl Strategy<Value = Vec<i32>> {
        proptest::collection::vec(0..4i32, 0..4)
    }

    fn step_strategy() -> impl Strategy<Value = Step> {
        prop_oneof![
            partitions_strategy().prop_map(Step::Assign),
            partitions_strategy().prop_map(Step::Revoke),
            (0..4i32).prop_map(Step::OverBound),
            partitions_strategy().prop_map(Step::Drain),
            partitions_strategy().prop_map(Step::Hold),
            partitions_strategy().prop_map(Step::Release),
            any::<bool>().prop_map(Step::PauseApplication),
        ]
    }

    /// The reasons as the thread's other parts see them, kept apart from
    /// `Pauses`, to say which partitions must be fetched.
    #[derive(Default)]
    struct Model {
        assigned: BTreeSet<i32>,
        full: BTreeSet<i32>,
        restoring: BTreeSet<i32>,
        application_paused: bool,
    }

    impl Model {
        fn fetched(&self) -> BTreeSet<TopicPartition> {
            if self.application_paused {
                return BTreeSet::new();
            }
            self.assigned
                .iter()
                .filter(|p| !self.full.contains(*p) && !self.restoring.contains(*p))
                .map(|p| tp(*p))
                .collect()
        }
    }

    proptest! {
        /// After any sequence of the thread's steps a partition is fetched
        /// exactly when it is assigned, its buffer not full, its task not
        /// restoring and the application not paused.
        #[test]
        fn a_partition_is_fetched_exactly_when_no_reason_pauses_it(
            steps in proptest::collection::vec(step_strategy(), 1..40)
        ) {
            let consumer = FakeConsumer::default();
            let mut pauses = Pauses::default();
            let mut model = Model::default();
            for step in steps {
                match step {
                    Step::Assign(ps) => {
                        let new: Vec<TopicPartition> = ps
                            .iter()
                            .filter(|p| model.assigned.insert(**p))
                            .map(|p| tp(*p))
                            .collect();
                        consumer.assign(&new);
                        for t in &new {
                            model.full.remove(&t.partition);
                            model.restoring.remove(&t.partition);
                        }
                        pauses.assigned(&new, &consumer).unwrap();
                    }
                    Step::Revoke(ps) => {
                        let gone: Vec<TopicPartition> = ps
                            .iter()
                            .filter(|p| model.assigned.remove(*p))
                            .map(|p| tp(*p))
                            .collect();
                        for t in &gone {
                            model.full.remove(&t.partition);
                            model.restoring.remove(&t.partition);
                        }
                        pauses.revoked(&gone);
                        consumer.unassign(&gone);
                    }
                    Step::OverBound(p) => {
                        // Records come only from assigned partitions that
                        // are fetched.
                        if consumer.fetched().contains(&tp(p)) {
                            model.full.insert(p);
                            pauses.over_bound(&tp(p), &consumer).unwrap();
                        }
                    }
                    Step::Drain(ps) => {
                        for p in &ps {
                            if !model.restoring.contains(p) && !model.application_paused {
                                model.full.remove(p);
                            }
                        }
                        pauses
                            .resume_drained(|t| ps.contains(&t.partition), &consumer)
                            .unwrap();
                    }
                    Step::Hold(ps) => {
                        let held: Vec<TopicPartition> = ps
                            .iter()
                            .filter(|p| model.assigned.contains(*p))
                            .map(|p| tp(*p))
                            .collect();
                        for t in &held {
                            model.restoring.insert(t.partition);
                        }
                        pauses.hold(&held, &consumer).unwrap();
                    }
                    Step::Release(ps) => {
                        let released: Vec<TopicPartition> =
                            ps.iter().map(|p| tp(*p)).collect();
                        for p in &ps {
                            model.restoring.remove(p);
                        }
                        pauses.release(&released, &consumer).unwrap();
                    }
                    Step::PauseApplication(paused) => {
                        model.application_paused = paused;
                        pauses.set_instance_paused(paused, &consumer).unwrap();
                    }
                }
                prop_assert_eq!(consumer.fetched(), model.fetched());
                prop_assert_eq!(pauses.instance_paused(), model.application_paused);
            }
        }
    }
}
