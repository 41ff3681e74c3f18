//! A task's time per input partition.

use std::sync::Arc;

use kstreams_record::Timestamp;

/// A timestamp per input partition of a task. A task has few partitions,
/// so a vector searched per record beats a map: no key to hash or
/// allocate. Names are kept as the records' shared `Arc<str>` (one per
/// topic and thread, see `TopicNames`), so a record's partition is found by
/// comparing addresses before names; a name first given as a plain string
/// (a partition resumed from its commit) is replaced by the first record's.
#[derive(Debug, Default)]
pub(crate) struct PartitionTimes(Vec<(Arc<str>, i32, Timestamp)>);

impl PartitionTimes {
    /// The slot of `topic`'s `partition`, added at -1 if new.
    pub(crate) fn slot(&mut self, topic: &Arc<str>, partition: i32) -> usize {
        if let Some(slot) = self
            .0
            .iter()
            .position(|(t, p, _)| *p == partition && Arc::ptr_eq(t, topic))
        {
            return slot;
        }
        match self
            .0
            .iter()
            .position(|(t, p, _)| *p == partition && **t == **topic)
        {
            Some(slot) => {
                self.0[slot].0 = topic.clone();
                slot
            }
            None => {
                self.0.push((topic.clone(), partition, -1));
                self.0.len() - 1
            }
        }
    }

    /// The time in `slot`.
    pub(crate) fn at(&self, slot: usize) -> Timestamp {
        self.0[slot].2
    }

    /// Raises the time in `slot` to `time`.
    pub(crate) fn raise(&mut self, slot: usize, time: Timestamp) {
        let current = &mut self.0[slot].2;
        *current = (*current).max(time);
    }

    /// Raises the time of a record's partition to `time`.
    pub(crate) fn raise_for(&mut self, topic: &Arc<str>, partition: i32, time: Timestamp) {
        let slot = self.slot(topic, partition);
        self.raise(slot, time);
    }

    /// Raises the time of `topic`'s `partition` to `time`, by name.
    pub(crate) fn raise_named(&mut self, topic: &str, partition: i32, time: Timestamp) {
        match self
            .0
            .iter_mut()
            .find(|(t, p, _)| *p == partition && **t == *topic)
        {
            Some((_, _, current)) => *current = (*current).max(time),
            None => self.0.push((Arc::from(topic), partition, time)),
        }
    }

    /// The time of `topic`'s `partition`, if it has one.
    pub(crate) fn get(&self, topic: &str, partition: i32) -> Option<Timestamp> {
        self.0
            .iter()
            .find(|(t, p, _)| *p == partition && **t == *topic)
            .map(|(_, _, time)| *time)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_finds_its_partition_by_shared_name_or_by_equal_name() {
        let mut times = PartitionTimes::default();
        times.raise_named("orders", 0, 7);
        let shared: Arc<str> = Arc::from("orders");
        let slot = times.slot(&shared, 0);
        assert_eq!(times.at(slot), 7, "resumed by name, found by the record's");
        assert!(
            Arc::ptr_eq(&times.0[slot].0, &shared),
            "the shared name adopted"
        );
        times.raise(slot, 5);
        assert_eq!(times.get("orders", 0), Some(7), "never lowered");
        times.raise(slot, 9);
        assert_eq!(times.get("orders", 0), Some(9));
        let other = times.slot(&shared, 1);
        assert_ne!(other, slot);
        assert_eq!(times.at(other), -1);
        assert_eq!(times.get("payments", 0), None);
    }
}
