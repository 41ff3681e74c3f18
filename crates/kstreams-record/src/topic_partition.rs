//! A topic's partition: Kafka's `TopicPartition`, the one name kstreams
//! gives an input, changelog or output partition.

use std::fmt;

/// A topic's partition: Kafka's `TopicPartition`.
///
/// Ordered by topic, then partition, as Kafka sorts them in its tools.
///
/// ```
/// use kstreams_record::TopicPartition;
///
/// let tp = TopicPartition::new("orders", 3);
/// assert_eq!(tp.to_string(), "orders-3");
/// assert!(tp < TopicPartition::new("orders", 10));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// The topic.
    pub topic: String,
    /// The partition number.
    pub partition: i32,
}

impl TopicPartition {
    /// `topic`'s partition `partition`.
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        Self {
            topic: topic.into(),
            partition,
        }
    }

    /// Whether this is `topic`'s partition `partition` (no allocation).
    pub fn is(&self, topic: &str, partition: i32) -> bool {
        self.partition == partition && self.topic == topic
    }
}

impl fmt::Display for TopicPartition {
    /// As Kafka prints it: `topic-3`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}
