//! Kafka's default partitioning of keyed records, for the expected outputs
//! to say which partition every record lands in: kstreams-record's, checked
//! there against values of Kafka's own `Utils.murmur2` (and against Kafka
//! Streams by every scenario run on both sides).

pub(crate) use kstreams_record::partition_for_key;
