//! Committing consumed offsets as a streams group member (OffsetCommit with
//! the member id and epoch), which librdkafka cannot do for a consumer whose
//! group membership it does not run itself.

use kacrab_protocol::generated::offset_commit_request::{
    OffsetCommitRequestData, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kacrab_protocol::generated::offset_commit_response::OffsetCommitResponseData;
use kacrab_protocol::KafkaString;

use crate::error::{Error, Result};
use crate::wire::Rpc;

/// The OffsetCommit version sent: a streams group wants 9 or newer from its
/// members, and 10 names topics by id, which this client does not track.
pub(crate) const OFFSET_COMMIT_VERSION: i16 = 9;
/// Kafka's "no leader epoch known".
const NO_LEADER_EPOCH: i32 = -1;
/// The broker's offsets retention, not one of the request's own.
const DEFAULT_RETENTION: i64 = -1;

/// The next offset to consume of one partition (Kafka commits the offset
/// after the last processed record), with the commit's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitOffset {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The next offset to read.
    pub offset: i64,
    /// The commit's metadata string (Kafka Streams keeps the partition time
    /// there); empty for none.
    pub metadata: String,
}

impl CommitOffset {
    /// `offset` of `topic`'s `partition`, without metadata.
    pub fn new(topic: impl Into<String>, partition: i32, offset: i64) -> CommitOffset {
        CommitOffset {
            topic: topic.into(),
            partition,
            offset,
            metadata: String::new(),
        }
    }
}

/// The request committing `offsets` for `member_id` at `epoch`.
pub(crate) fn request(
    group_id: &str,
    member_id: &str,
    epoch: i32,
    instance_id: Option<&str>,
    offsets: &[CommitOffset],
) -> OffsetCommitRequestData {
    let mut topics: Vec<OffsetCommitRequestTopic> = Vec::new();
    for offset in offsets {
        let partition = OffsetCommitRequestPartition {
            partition_index: offset.partition,
            committed_offset: offset.offset,
            committed_leader_epoch: NO_LEADER_EPOCH,
            committed_metadata: Some(KafkaString::from(offset.metadata.clone())),
            ..Default::default()
        };
        match topics.iter_mut().find(|t| t.name.as_str() == offset.topic) {
            Some(topic) => topic.partitions.push(partition),
            None => topics.push(OffsetCommitRequestTopic {
                name: offset.topic.clone().into(),
                partitions: vec![partition],
                ..Default::default()
            }),
        }
    }
    OffsetCommitRequestData {
        group_id: group_id.to_owned().into(),
        generation_id_or_member_epoch: epoch,
        member_id: member_id.to_owned().into(),
        group_instance_id: instance_id.map(|id| id.to_owned().into()),
        retention_time_ms: DEFAULT_RETENTION,
        topics,
        ..Default::default()
    }
}

/// The first partition's error in the answer, if any.
pub(crate) fn check(response: &OffsetCommitResponseData) -> Result<()> {
    response
        .topics
        .iter()
        .flat_map(|topic| topic.partitions.iter())
        .try_for_each(|partition| {
            Error::check(OffsetCommitRequestData::NAME, partition.error_code, None)
        })
}
