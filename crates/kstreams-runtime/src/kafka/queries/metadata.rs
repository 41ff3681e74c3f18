//! Which instance holds what: Kafka Streams' `StreamsMetadata` and
//! `KeyQueryMetadata`, from the endpoints the streams group hands every
//! member (KIP-1071: each member's `application.server` with the
//! partitions of its active and standby tasks).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Arc, Mutex};

use kstreams_dsl::Topology;
use kstreams_group::{Endpoints, TopicPartitions};
use kstreams_state::TopicPartition;

use super::QueryError;

/// An instance's `application.server`: Kafka Streams' `HostInfo`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostInfo {
    /// Host name or address, as the instance configured it.
    pub host: String,
    /// Port.
    pub port: u16,
}

impl fmt::Display for HostInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// Where a key's store partition lives: Kafka Streams' `KeyQueryMetadata`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyQueryMetadata {
    /// The instance whose active task holds the key.
    pub active_host: HostInfo,
    /// Instances with a standby task of that partition.
    pub standby_hosts: BTreeSet<HostInfo>,
    /// The partition (the task's) the key belongs to.
    pub partition: i32,
}

/// One instance of the application: Kafka Streams' `StreamsMetadata`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamsMetadata {
    /// Its `application.server`.
    pub host_info: HostInfo,
    /// The stores of its active tasks.
    pub state_store_names: BTreeSet<String>,
    /// The source partitions of its active tasks.
    pub topic_partitions: BTreeSet<TopicPartition>,
    /// The stores of its standby tasks.
    pub standby_state_store_names: BTreeSet<String>,
    /// The source partitions of its standby tasks.
    pub standby_topic_partitions: BTreeSet<TopicPartition>,
}

/// The latest endpoints any of the instance's members was told. Shared by
/// clones.
#[derive(Clone, Default)]
pub(crate) struct EndpointBoard {
    latest: Arc<Mutex<Option<Endpoints>>>,
}

impl EndpointBoard {
    /// Keeps `endpoints` unless a member already reported a later epoch.
    pub(crate) fn update(&self, endpoints: Endpoints) {
        let mut latest = self.latest.lock().unwrap_or_else(|p| p.into_inner());
        if latest.as_ref().is_none_or(|l| l.epoch <= endpoints.epoch) {
            *latest = Some(endpoints);
        }
    }

    fn get(&self) -> Option<Endpoints> {
        self.latest
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// What the metadata calls read: the topology, its task counts and the
/// group's endpoints.
pub(crate) struct MetadataSource<'a> {
    pub topology: &'a Topology,
    pub application_id: &'a str,
    /// Tasks (partitions) per stream sub-topology, known once started.
    pub tasks: &'a BTreeMap<u32, usize>,
    /// `None` under a protocol without endpoints: why.
    pub endpoints: Result<&'a EndpointBoard, &'static str>,
}

impl MetadataSource<'_> {
    fn endpoints(&self) -> Result<Endpoints, QueryError> {
        let board = self
            .endpoints
            .map_err(|why| QueryError::MetadataUnavailable(why.to_string()))?;
        board.get().ok_or_else(|| {
            QueryError::MetadataUnavailable(
                "the streams group has not sent its endpoints yet (the group is forming, or no \
                 member sets application.server)"
                    .to_string(),
            )
        })
    }

    /// Each sub-topology's source topics, internal ones by their full name.
    fn sources(&self) -> BTreeMap<u32, BTreeSet<String>> {
        self.topology
            .source_topics(self.application_id)
            .into_iter()
            .map(|s| (s.id, s.topics.into_iter().collect()))
            .collect()
    }

    /// The stores of the sub-topologies that read any of `partitions`.
    fn stores_reading(
        &self,
        partitions: &TopicPartitions,
        sources: &BTreeMap<u32, BTreeSet<String>>,
    ) -> BTreeSet<String> {
        let reading: BTreeSet<u32> = sources
            .iter()
            .filter(|(_, topics)| {
                partitions
                    .iter()
                    .any(|(t, ps)| !ps.is_empty() && topics.contains(t))
            })
            .map(|(id, _)| *id)
            .collect();
        self.topology
            .store_subtopologies()
            .into_iter()
            .filter(|(_, id)| reading.contains(id))
            .map(|(store, _)| store)
            .collect()
    }

    /// Each instance's active and standby partitions. The group sends an
    /// entry per member, that is per stream thread: an instance's threads
    /// are merged under its endpoint, as Kafka Streams shows one
    /// `StreamsMetadata` per instance.
    fn hosts(&self) -> Result<BTreeMap<HostInfo, (TopicPartitions, TopicPartitions)>, QueryError> {
        let mut hosts: BTreeMap<HostInfo, (TopicPartitions, TopicPartitions)> = BTreeMap::new();
        for member in self.endpoints()?.hosts {
            let host = HostInfo {
                host: member.endpoint.host,
                port: member.endpoint.port,
            };
            let (active, standby) = hosts.entry(host).or_default();
            for (into, from) in [(active, member.active), (standby, member.standby)] {
                for (topic, partitions) in from {
                    into.entry(topic).or_default().extend(partitions);
                }
            }
        }
        Ok(hosts)
    }

    /// Every instance of the application: Kafka Streams'
    /// `metadataForAllStreamsClients`.
    pub(crate) fn all_clients(&self) -> Result<Vec<StreamsMetadata>, QueryError> {
        let sources = self.sources();
        Ok(self
            .hosts()?
            .into_iter()
            .map(|(host_info, (active, standby))| StreamsMetadata {
                host_info,
                state_store_names: self.stores_reading(&active, &sources),
                topic_partitions: flatten(&active),
                standby_state_store_names: self.stores_reading(&standby, &sources),
                standby_topic_partitions: flatten(&standby),
            })
            .collect())
    }

    /// The instances with an active or standby task holding `store`.
    pub(crate) fn for_store(&self, store: &str) -> Result<Vec<StreamsMetadata>, QueryError> {
        self.subtopology_of(store)?;
        Ok(self
            .all_clients()?
            .into_iter()
            .filter(|m| {
                m.state_store_names.contains(store) || m.standby_state_store_names.contains(store)
            })
            .collect())
    }

    /// Which instances hold `store`'s partition `partition` (or, with
    /// `None`, the partition `key_partition` gives among the store's task
    /// count).
    pub(crate) fn for_key(
        &self,
        store: &str,
        key_partition: impl FnOnce(i32) -> i32,
    ) -> Result<KeyQueryMetadata, QueryError> {
        let subtopology = self.subtopology_of(store)?;
        let tasks = self.tasks.get(&subtopology).copied().ok_or_else(|| {
            QueryError::MetadataUnavailable(
                "the application's topics are not known yet: call start() first".to_string(),
            )
        })?;
        let partition = key_partition(tasks as i32);
        let hosts = self.hosts()?;
        let topics = self.sources().remove(&subtopology).unwrap_or_default();
        let holds = |partitions: &TopicPartitions| {
            partitions
                .iter()
                .any(|(t, ps)| topics.contains(t) && ps.contains(&partition))
        };
        let active_host = hosts
            .iter()
            .find(|(_, (active, _))| holds(active))
            .map(|(host, _)| host.clone())
            .ok_or_else(|| {
                QueryError::MetadataUnavailable(format!(
                    "no instance runs the task of partition {partition} of store {store} now \
                     (the group is rebalancing)"
                ))
            })?;
        let standby_hosts = hosts
            .iter()
            .filter(|(_, (_, standby))| holds(standby))
            .map(|(host, _)| host.clone())
            .collect();
        Ok(KeyQueryMetadata {
            active_host,
            standby_hosts,
            partition,
        })
    }

    fn subtopology_of(&self, store: &str) -> Result<u32, QueryError> {
        self.topology
            .store_subtopology(store)
            .ok_or_else(|| unknown_store(self.topology, store))
    }
}

/// The error for a store name no stream task holds, with a hint when it
/// is a global store.
pub(crate) fn unknown_store(topology: &Topology, store: &str) -> QueryError {
    let global = topology.global_stores().iter().any(|g| g.name() == store);
    QueryError::UnknownStore {
        store: store.to_string(),
        hint: if global {
            " (it is a global store: every instance has all of it; kstreams does not serve \
             global stores through store() yet)"
                .to_string()
        } else {
            String::new()
        },
    }
}

fn flatten(partitions: &TopicPartitions) -> BTreeSet<TopicPartition> {
    partitions
        .iter()
        .flat_map(|(t, ps)| ps.iter().map(move |p| TopicPartition::new(t.as_str(), *p)))
        .collect()
}
