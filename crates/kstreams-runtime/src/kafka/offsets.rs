//! The input offsets the task manager deals in, as plain values: what the
//! group committed for a partition (with Kafka Streams'
//! `TopicPartitionMetadata`), where the consumer is, and what to commit.
//! The task manager owns no Kafka client; the stream thread turns the
//! consumer's lists into these and back (`from_list`, `to_list`), so its
//! signatures say so and its unit tests need no rdkafka type.

use std::collections::HashMap;

use kstreams_time::PartitionMetadata;
use rdkafka::{Offset, TopicPartitionList};

use super::RuntimeError;
use crate::kafka::client_error::ClientResult;
use kstreams_state::TopicPartition;

/// What the group committed for a partition.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Committed {
    pub partition: TopicPartition,
    /// `None`: nothing committed (reading starts by `auto.offset.reset`).
    pub offset: Option<i64>,
    /// The partition time and operators' metadata committed with it.
    pub metadata: Option<PartitionMetadata>,
}

/// Where the consumer reads each partition next.
pub(crate) type Positions = HashMap<TopicPartition, i64>;

/// An offset to commit: the next record to read of a partition, with the
/// encoded `TopicPartitionMetadata` its task resumes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToCommit {
    pub partition: TopicPartition,
    pub offset: i64,
    pub metadata: Option<String>,
}

/// The committed offsets in a list the consumer returned.
pub(crate) fn committed_of(list: &TopicPartitionList) -> Vec<Committed> {
    list.elements()
        .iter()
        .map(|e| Committed {
            partition: TopicPartition::new(e.topic(), e.partition()),
            offset: match e.offset() {
                Offset::Offset(o) => Some(o),
                _ => None,
            },
            metadata: PartitionMetadata::decode(e.metadata()),
        })
        .collect()
}

/// The positions in a list the consumer returned (partitions without one
/// left out).
pub(crate) fn positions_of(list: &TopicPartitionList) -> Positions {
    list.elements()
        .iter()
        .filter_map(|e| match e.offset() {
            Offset::Offset(o) => Some((TopicPartition::new(e.topic(), e.partition()), o)),
            _ => None,
        })
        .collect()
}

/// The list the consumer (or the transaction) commits.
pub(crate) fn to_list(offsets: &[ToCommit]) -> Result<TopicPartitionList, RuntimeError> {
    let mut list = TopicPartitionList::new();
    for offset in offsets {
        let mut element = list.add_partition(&offset.partition.topic, offset.partition.partition);
        element.set_offset(Offset::Offset(offset.offset)).client()?;
        if let Some(metadata) = &offset.metadata {
            element.set_metadata(metadata.clone());
        }
    }
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_values_carry_the_same_offsets_and_metadata() {
        let metadata = PartitionMetadata {
            partition_time: 42,
            processor: Default::default(),
        };
        let to_commit = vec![
            ToCommit {
                partition: TopicPartition::new("in", 0),
                offset: 7,
                metadata: Some(metadata.encode()),
            },
            ToCommit {
                partition: TopicPartition::new("in", 1),
                offset: 3,
                metadata: None,
            },
        ];
        let list = to_list(&to_commit).unwrap();
        let committed = committed_of(&list);
        assert_eq!(committed[0].offset, Some(7));
        assert_eq!(committed[0].metadata, Some(metadata));
        assert_eq!(committed[1].offset, Some(3));
        assert_eq!(committed[1].metadata, None);
        assert_eq!(
            positions_of(&list),
            Positions::from([
                (TopicPartition::new("in", 0), 7),
                (TopicPartition::new("in", 1), 3)
            ])
        );
        let mut unset = TopicPartitionList::new();
        unset.add_partition("in", 2);
        assert_eq!(committed_of(&unset)[0].offset, None);
        assert!(positions_of(&unset).is_empty());
    }
}
