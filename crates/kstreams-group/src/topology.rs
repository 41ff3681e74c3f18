//! The topology as a member registers it with the group: sub-topologies with
//! their source, repartition and changelog topics and co-partition groups.
//!
//! State stores appear only through their changelog topics: the protocol has
//! no field for a store, and the broker needs the changelog to create it and
//! to weigh warm-up tasks.

use std::collections::{BTreeMap, BTreeSet};

use kacrab_protocol::generated::streams_group_heartbeat_request as wire;

use crate::error::{Error, Result};
use crate::task::Tasks;

/// What the members of one application run: the broker checks every member
/// sends the same one (same epoch) and assigns its sub-topologies' tasks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    /// Bumped when the application's topology changes (Kafka Streams sends 0).
    pub epoch: i32,
    /// The sub-topologies, each a unit of task assignment.
    pub subtopologies: Vec<Subtopology>,
}

/// One sub-topology: its tasks are one per partition of its source topics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subtopology {
    /// A deterministic id, the same on every member (Kafka Streams uses the
    /// sub-topology's index: `"0"`, `"1"`, ...).
    pub id: String,
    /// User topics it reads.
    pub source_topics: Vec<String>,
    /// Patterns of user topics it reads.
    pub source_topic_patterns: Vec<String>,
    /// Repartition topics it reads; the broker creates them.
    pub repartition_source_topics: Vec<InternalTopic>,
    /// Repartition topics it writes (read by another sub-topology).
    pub repartition_sink_topics: Vec<String>,
    /// Changelog topics of its state stores; the broker creates them.
    pub changelog_topics: Vec<InternalTopic>,
    /// Sets of its source and repartition source topics that must have the
    /// same partition count (joins).
    pub copartition_groups: Vec<CopartitionGroup>,
}

/// A topic the broker creates for the application.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InternalTopic {
    /// The full name, e.g. `<application.id>-<store>-changelog`.
    pub name: String,
    /// A fixed partition count, or `None` to let the broker derive it from the
    /// source topics (always `None` for changelogs).
    pub partitions: Option<i32>,
    /// A replication factor, or `None` for the broker's default.
    pub replication_factor: Option<i16>,
    /// Topic configs, e.g. `cleanup.policy=compact`.
    pub configs: BTreeMap<String, String>,
}

impl InternalTopic {
    /// A topic with the broker's defaults.
    pub fn new(name: impl Into<String>) -> InternalTopic {
        InternalTopic {
            name: name.into(),
            ..InternalTopic::default()
        }
    }
}

/// Topics, by name, that must be co-partitioned. Each is a source topic or a
/// repartition source topic of the same sub-topology.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopartitionGroup {
    /// The topics' names.
    pub topics: Vec<String>,
}

impl Topology {
    /// The topic partitions that `tasks` read: for each task, its partition
    /// of each source and repartition source topic of its sub-topology (what
    /// the consumer is assigned for them). A sub-topology this topology does
    /// not have contributes nothing.
    pub fn input_partitions(&self, tasks: &Tasks) -> BTreeMap<String, BTreeSet<i32>> {
        let mut partitions: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
        for subtopology in &self.subtopologies {
            let of_tasks: BTreeSet<i32> = tasks.partitions(&subtopology.id).collect();
            if of_tasks.is_empty() {
                continue;
            }
            let repartition = subtopology.repartition_source_topics.iter();
            let topics = subtopology
                .source_topics
                .iter()
                .chain(repartition.map(|t| &t.name));
            for topic in topics {
                partitions
                    .entry(topic.clone())
                    .or_default()
                    .extend(&of_tasks);
            }
        }
        partitions
    }

    /// Checks what the broker would reject with `STREAMS_INVALID_TOPOLOGY` and
    /// what cannot be put on the wire, then converts.
    pub(crate) fn to_wire(&self) -> Result<wire::Topology> {
        if self.subtopologies.is_empty() {
            return Err(Error::InvalidTopology(
                "a topology needs at least one sub-topology".to_owned(),
            ));
        }
        let mut ids = BTreeSet::new();
        let mut subtopologies = self
            .subtopologies
            .iter()
            .map(|subtopology| {
                if subtopology.id.is_empty() || !ids.insert(subtopology.id.as_str()) {
                    return Err(Error::InvalidTopology(format!(
                        "sub-topology ids must be unique and non-empty, got {:?}",
                        subtopology.id
                    )));
                }
                subtopology.to_wire()
            })
            .collect::<Result<Vec<_>>>()?;
        // Kafka's client sorts sub-topologies by id (as strings: "10"
        // before "2"); the broker compares topologies in list order.
        subtopologies.sort_by(|a, b| a.subtopology_id.as_str().cmp(b.subtopology_id.as_str()));
        Ok(wire::Topology {
            epoch: self.epoch,
            subtopologies,
            ..Default::default()
        })
    }
}

impl Subtopology {
    /// The sub-topology as Kafka's client sends it: source, sink and
    /// internal topics sorted by name, configs by key (a member that lists
    /// them in another order registers another topology). Co-partition
    /// groups keep the order given: Kafka Streams hands them over as Java
    /// sets, which the caller orders as such.
    fn to_wire(&self) -> Result<wire::Subtopology> {
        let mut sorted = self.clone();
        sorted.source_topics.sort();
        sorted.repartition_sink_topics.sort();
        sorted
            .repartition_source_topics
            .sort_by(|a, b| a.name.cmp(&b.name));
        sorted.changelog_topics.sort_by(|a, b| a.name.cmp(&b.name));
        sorted.sorted_to_wire()
    }

    fn sorted_to_wire(&self) -> Result<wire::Subtopology> {
        if self.source_topics.is_empty()
            && self.source_topic_patterns.is_empty()
            && self.repartition_source_topics.is_empty()
        {
            return Err(Error::InvalidTopology(format!(
                "sub-topology {} reads no topic",
                self.id
            )));
        }
        let copartition_groups = self
            .copartition_groups
            .iter()
            .map(|group| self.copartition_group_to_wire(group))
            .collect::<Result<Vec<_>>>()?;
        Ok(wire::Subtopology {
            subtopology_id: self.id.clone().into(),
            source_topics: strings(&self.source_topics),
            source_topic_regex: strings(&self.source_topic_patterns),
            state_changelog_topics: self.changelog_topics.iter().map(topic_info).collect(),
            repartition_sink_topics: strings(&self.repartition_sink_topics),
            repartition_source_topics: self
                .repartition_source_topics
                .iter()
                .map(topic_info)
                .collect(),
            copartition_groups,
            ..Default::default()
        })
    }

    /// The wire names co-partitioned topics by index into the sub-topology's
    /// source and repartition source lists.
    fn copartition_group_to_wire(
        &self,
        group: &CopartitionGroup,
    ) -> Result<wire::CopartitionGroup> {
        let mut wire_group = wire::CopartitionGroup::default();
        for topic in &group.topics {
            if let Some(index) = self.source_topics.iter().position(|t| t == topic) {
                wire_group.source_topics.push(index_i16(index)?);
            } else if let Some(index) = self
                .repartition_source_topics
                .iter()
                .position(|t| &t.name == topic)
            {
                wire_group.repartition_source_topics.push(index_i16(index)?);
            } else {
                return Err(Error::InvalidTopology(format!(
                    "co-partitioned topic {topic} is not a source of sub-topology {}",
                    self.id
                )));
            }
        }
        Ok(wire_group)
    }
}

fn index_i16(index: usize) -> Result<i16> {
    i16::try_from(index)
        .map_err(|_| Error::InvalidTopology(format!("source topic index {index} is too large")))
}

fn strings(names: &[String]) -> Vec<kacrab_protocol::KafkaString> {
    names.iter().map(|name| name.clone().into()).collect()
}

fn topic_info(topic: &InternalTopic) -> wire::TopicInfo {
    wire::TopicInfo {
        name: topic.name.clone().into(),
        partitions: topic.partitions.unwrap_or(0),
        replication_factor: topic.replication_factor.unwrap_or(0),
        topic_configs: key_values(&topic.configs),
        ..Default::default()
    }
}

/// A map as the heartbeat's `KeyValue` list (topic configs, client tags).
pub(crate) fn key_values(map: &BTreeMap<String, String>) -> Vec<wire::KeyValue> {
    map.iter()
        .map(|(key, value)| wire::KeyValue {
            key: key.clone().into(),
            value: value.clone().into(),
            ..Default::default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn join_subtopology() -> Subtopology {
        Subtopology {
            id: "1".to_owned(),
            source_topics: vec!["orders".to_owned()],
            repartition_source_topics: vec![InternalTopic::new("app-by-customer-repartition")],
            changelog_topics: vec![InternalTopic::new("app-joined-changelog")],
            copartition_groups: vec![CopartitionGroup {
                topics: vec![
                    "app-by-customer-repartition".to_owned(),
                    "orders".to_owned(),
                ],
            }],
            ..Subtopology::default()
        }
    }

    #[test]
    fn copartition_groups_become_indices_into_the_source_lists() {
        let topology = Topology {
            epoch: 0,
            subtopologies: vec![join_subtopology()],
        };
        let wire = topology.to_wire().unwrap();
        let group = &wire.subtopologies[0].copartition_groups[0];
        assert_eq!(group.source_topics, [0]);
        assert_eq!(group.repartition_source_topics, [0]);
        let changelog = &wire.subtopologies[0].state_changelog_topics[0];
        assert_eq!(changelog.name.as_str(), "app-joined-changelog");
        assert_eq!(changelog.partitions, 0, "0 lets the broker decide");
    }

    #[test]
    fn tasks_read_their_partition_of_every_input_topic_of_their_subtopology() {
        let topology = Topology {
            epoch: 0,
            subtopologies: vec![
                Subtopology {
                    id: "0".to_owned(),
                    source_topics: vec!["orders".to_owned()],
                    ..Subtopology::default()
                },
                join_subtopology(),
            ],
        };
        let tasks: Tasks = [
            crate::TaskId::new("0", 2),
            crate::TaskId::new("1", 0),
            crate::TaskId::new("1", 3),
        ]
        .into_iter()
        .collect();
        let partitions = topology.input_partitions(&tasks);
        let of = |topic: &str| partitions[topic].iter().copied().collect::<Vec<_>>();
        assert_eq!(of("orders"), [0, 2, 3], "read by both sub-topologies");
        assert_eq!(of("app-by-customer-repartition"), [0, 3]);
        assert_eq!(partitions.len(), 2);
    }

    #[test]
    fn what_the_broker_would_reject_is_refused_before_sending() {
        let empty = Topology::default();
        assert!(matches!(empty.to_wire(), Err(Error::InvalidTopology(_))));

        let twice = Topology {
            epoch: 0,
            subtopologies: vec![join_subtopology(), join_subtopology()],
        };
        assert!(twice.to_wire().unwrap_err().to_string().contains("unique"));

        let mut stranger = join_subtopology();
        stranger.copartition_groups[0]
            .topics
            .push("payments".to_owned());
        let error = Topology {
            epoch: 0,
            subtopologies: vec![stranger],
        }
        .to_wire()
        .unwrap_err();
        assert!(error.to_string().contains("payments"), "{error}");
    }
}
