//! Task ids and sets of tasks, as the streams group protocol names them: a
//! sub-topology id and a partition.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// One task: a sub-topology and the partition of its input topics it
/// processes (Kafka Streams' `TaskId`, printed the same way: `0_3`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskId {
    /// The sub-topology's id as the topology sent it.
    pub subtopology: String,
    /// The partition.
    pub partition: i32,
}

impl TaskId {
    /// The task of `subtopology` for `partition`.
    pub fn new(subtopology: impl Into<String>, partition: i32) -> TaskId {
        TaskId {
            subtopology: subtopology.into(),
            partition,
        }
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}_{}", self.subtopology, self.partition)
    }
}

/// A set of tasks grouped by sub-topology, the shape the protocol sends.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tasks {
    by_subtopology: BTreeMap<String, BTreeSet<i32>>,
}

impl Tasks {
    /// No tasks.
    pub fn new() -> Tasks {
        Tasks::default()
    }

    /// Adds `task`; returns whether it was new.
    pub fn insert(&mut self, task: TaskId) -> bool {
        self.by_subtopology
            .entry(task.subtopology)
            .or_default()
            .insert(task.partition)
    }

    /// Whether `task` is in the set.
    pub fn contains(&self, task: &TaskId) -> bool {
        self.by_subtopology
            .get(&task.subtopology)
            .is_some_and(|partitions| partitions.contains(&task.partition))
    }

    /// The partitions of `subtopology` in the set (empty when none).
    pub fn partitions(&self, subtopology: &str) -> impl Iterator<Item = i32> + '_ {
        self.by_subtopology
            .get(subtopology)
            .into_iter()
            .flatten()
            .copied()
    }

    /// Every task, in sub-topology then partition order.
    pub fn iter(&self) -> impl Iterator<Item = TaskId> + '_ {
        self.by_subtopology
            .iter()
            .flat_map(|(subtopology, partitions)| {
                partitions
                    .iter()
                    .map(move |partition| TaskId::new(subtopology.clone(), *partition))
            })
    }

    /// How many tasks.
    pub fn len(&self) -> usize {
        self.by_subtopology.values().map(BTreeSet::len).sum()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The set of `(sub-topology id, partitions)` pairs, the wire's `TaskIds`
    /// entries (each message has its own struct for them).
    pub(crate) fn from_groups<P: IntoIterator<Item = i32>>(
        groups: impl IntoIterator<Item = (String, P)>,
    ) -> Tasks {
        let mut tasks = Tasks::new();
        for (subtopology, partitions) in groups {
            tasks
                .by_subtopology
                .entry(subtopology)
                .or_default()
                .extend(partitions);
        }
        tasks
    }

    /// `(sub-topology id, partitions)` pairs, the wire's `TaskIds` entries.
    pub(crate) fn groups(&self) -> impl Iterator<Item = (&str, Vec<i32>)> {
        self.by_subtopology
            .iter()
            .filter(|(_, partitions)| !partitions.is_empty())
            .map(|(subtopology, partitions)| {
                (subtopology.as_str(), partitions.iter().copied().collect())
            })
    }
}

impl FromIterator<TaskId> for Tasks {
    fn from_iter<I: IntoIterator<Item = TaskId>>(tasks: I) -> Tasks {
        let mut set = Tasks::new();
        for task in tasks {
            set.insert(task);
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_group_by_subtopology_and_print_as_kafka_streams_does() {
        let tasks: Tasks = [
            TaskId::new("1", 2),
            TaskId::new("0", 3),
            TaskId::new("1", 0),
        ]
        .into_iter()
        .collect();
        assert_eq!(tasks.len(), 3);
        assert!(tasks.contains(&TaskId::new("1", 0)));
        assert!(!tasks.contains(&TaskId::new("0", 0)));
        let printed: Vec<String> = tasks.iter().map(|t| t.to_string()).collect();
        assert_eq!(printed, ["0_3", "1_0", "1_2"]);
        let groups: Vec<(&str, Vec<i32>)> = tasks.groups().collect();
        assert_eq!(groups, [("0", vec![3]), ("1", vec![0, 2])]);
        assert_eq!(tasks.partitions("1").collect::<Vec<_>>(), [0, 2]);
        assert_eq!(tasks.partitions("9").count(), 0);
    }
}
