//! The admin requests a streams application needs around its group: describe
//! it, set its group configs, create a topic, and ask whether the brokers
//! serve the protocol at all.

use kacrab_protocol::generated::create_topics_request::{CreatableTopic, CreateTopicsRequestData};
use kacrab_protocol::generated::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig, IncrementalAlterConfigsRequestData,
};
use kacrab_protocol::generated::offset_fetch_request::{
    OffsetFetchRequestData, OffsetFetchRequestTopic,
};
use kacrab_protocol::generated::streams_group_describe_request::StreamsGroupDescribeRequestData;
use kacrab_protocol::generated::streams_group_heartbeat_request::StreamsGroupHeartbeatRequestData;

use crate::commit::CommitOffset;
use crate::connection::ConnectionConfig;
use crate::coordinator;
use crate::description::GroupDescription;
use crate::error::{Error, Result};
use crate::wire::Rpc;

/// `ConfigResource.Type.GROUP` in IncrementalAlterConfigs.
const GROUP_RESOURCE: i8 = 32;
/// `AlterConfigOp.OpType.SET`.
const SET: i8 = 0;
/// OffsetFetch for one group, topics by name (v8 batches groups, v10 names
/// topics by id).
const OFFSET_FETCH_VERSION: i16 = 7;

/// Admin calls over short-lived connections (one per call).
#[derive(Debug, Clone)]
pub struct Admin {
    config: ConnectionConfig,
}

impl Admin {
    /// An admin client for the brokers of `config`.
    pub fn new(config: ConnectionConfig) -> Admin {
        Admin { config }
    }

    /// Whether the brokers serve the streams group protocol (Kafka 4.2+ with
    /// `streams` among `group.coordinator.rebalance.protocols`).
    pub async fn supports_streams_groups(&self) -> Result<bool> {
        let connection = coordinator::bootstrap(&self.config).await?;
        Ok(connection
            .version_of::<StreamsGroupHeartbeatRequestData>()
            .is_some())
    }

    /// The group as its coordinator sees it (`kafka-streams-groups.sh
    /// --describe`; the Java Admin's `describeStreamsGroups`).
    pub async fn describe_streams_group(&self, group_id: &str) -> Result<GroupDescription> {
        let mut connection = coordinator::connect(&self.config, group_id).await?;
        let request = StreamsGroupDescribeRequestData {
            group_ids: vec![group_id.to_owned().into()],
            ..Default::default()
        };
        let response = connection.send(&request).await?;
        let group = connection.first(response.groups, "StreamsGroupDescribe", "group")?;
        Error::check(
            StreamsGroupDescribeRequestData::NAME,
            group.error_code,
            group.error_message.as_ref(),
        )?;
        Ok(GroupDescription::from_wire(group))
    }

    /// Sets group configs of `group_id`, e.g. `streams.num.standby.replicas`
    /// (the broker, not the client, decides standbys under this protocol).
    pub async fn set_group_configs(&self, group_id: &str, configs: &[(&str, &str)]) -> Result<()> {
        let mut connection = coordinator::bootstrap(&self.config).await?;
        let request = IncrementalAlterConfigsRequestData {
            resources: vec![AlterConfigsResource {
                resource_type: GROUP_RESOURCE,
                resource_name: group_id.to_owned().into(),
                configs: configs
                    .iter()
                    .map(|(name, value)| AlterableConfig {
                        name: (*name).to_owned().into(),
                        config_operation: SET,
                        value: Some((*value).to_owned().into()),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let response = connection.send(&request).await?;
        response.responses.iter().try_for_each(|resource| {
            Error::check(
                IncrementalAlterConfigsRequestData::NAME,
                resource.error_code,
                resource.error_message.as_ref(),
            )
        })
    }

    /// The offsets (with their metadata) `group_id` has committed for
    /// `partitions` of `topic`; partitions without one are left out. Read as
    /// an outsider (no member id), which a streams group allows.
    pub async fn committed_offsets(
        &self,
        group_id: &str,
        topic: &str,
        partitions: &[i32],
    ) -> Result<Vec<CommitOffset>> {
        let mut connection = coordinator::connect(&self.config, group_id).await?;
        let request = OffsetFetchRequestData {
            group_id: group_id.to_owned().into(),
            topics: Some(vec![OffsetFetchRequestTopic {
                name: topic.to_owned().into(),
                partition_indexes: partitions.to_vec(),
                ..Default::default()
            }]),
            ..Default::default()
        };
        let response = connection
            .send_version(&request, OFFSET_FETCH_VERSION)
            .await?;
        let api = OffsetFetchRequestData::NAME;
        Error::check(api, response.error_code, None)?;
        let mut offsets = Vec::new();
        for topic in &response.topics {
            for partition in &topic.partitions {
                Error::check(api, partition.error_code, None)?;
                // -1: nothing committed.
                if partition.committed_offset >= 0 {
                    offsets.push(CommitOffset {
                        topic: topic.name.as_str().to_owned(),
                        partition: partition.partition_index,
                        offset: partition.committed_offset,
                        metadata: partition
                            .metadata
                            .as_ref()
                            .map(|m| m.as_str().to_owned())
                            .unwrap_or_default(),
                    });
                }
            }
        }
        Ok(offsets)
    }

    /// Creates `name` with `partitions` partitions and the brokers' default
    /// replication factor.
    pub async fn create_topic(&self, name: &str, partitions: i32) -> Result<()> {
        let mut connection = coordinator::bootstrap(&self.config).await?;
        let timeout_ms = i32::try_from(self.config.request_timeout.as_millis()).unwrap_or(i32::MAX);
        let request = CreateTopicsRequestData {
            topics: vec![CreatableTopic {
                name: name.to_owned().into(),
                num_partitions: partitions,
                replication_factor: -1,
                ..Default::default()
            }],
            timeout_ms,
            ..Default::default()
        };
        let response = connection.send(&request).await?;
        response.topics.iter().try_for_each(|topic| {
            Error::check(
                CreateTopicsRequestData::NAME,
                topic.error_code,
                topic.error_message.as_ref(),
            )
        })
    }
}
