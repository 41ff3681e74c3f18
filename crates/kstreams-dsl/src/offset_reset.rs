//! Where a source starts reading a partition its group has no committed
//! offset for: Kafka Streams' `AutoOffsetReset` (KIP-1106), set per source
//! in [`Consumed::with_offset_reset_policy`](crate::Consumed::with_offset_reset_policy)
//! or [`Topology::add_source_with_offset_reset`](crate::Topology::add_source_with_offset_reset),
//! over the application's `auto.offset.reset`.

use std::time::Duration;

/// A source's offset reset policy: used only for a partition without a
/// committed offset (a new application, a new partition, offsets expired).
/// Global tables read their topics from the start whatever is set, as in
/// Kafka Streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AutoOffsetReset {
    /// From the first record kept (Kafka Streams' `earliest()`).
    Earliest,
    /// From the next record written (`latest()`).
    Latest,
    /// From the first record at or after now minus the duration, or the end
    /// if there is none (`byDuration(Duration)`).
    ByDuration(Duration),
    /// No start: the stream thread fails with
    /// [`NoCommittedOffset`](https://docs.rs/kstreams-runtime) naming the
    /// partition (`none()`).
    None,
}

impl AutoOffsetReset {
    /// [`AutoOffsetReset::Earliest`], as Kafka Streams spells it.
    pub fn earliest() -> Self {
        Self::Earliest
    }

    /// [`AutoOffsetReset::Latest`].
    pub fn latest() -> Self {
        Self::Latest
    }

    /// [`AutoOffsetReset::ByDuration`].
    pub fn by_duration(duration: Duration) -> Self {
        Self::ByDuration(duration)
    }

    /// [`AutoOffsetReset::None`].
    pub fn none() -> Self {
        Self::None
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kstreams_record::StringSerde;

    use crate::{AutoOffsetReset, Consumed, StreamsBuilder};

    #[test]
    fn the_policy_is_found_for_every_kind_of_source_and_only_for_its_topics() {
        let builder = StreamsBuilder::new();
        let consumed =
            |policy| Consumed::with(StringSerde, StringSerde).with_offset_reset_policy(policy);
        builder.stream_with::<String, String>("clicks", consumed(AutoOffsetReset::latest()));
        builder.stream_pattern::<String, String>(
            "audit-.*",
            consumed(AutoOffsetReset::by_duration(Duration::from_secs(60))),
        );
        builder.table_with::<String, String>(
            "users",
            consumed(AutoOffsetReset::none()),
            crate::Materialized::as_("users-store"),
        );
        builder.stream::<String, String>("orders");
        let topology = builder.build().unwrap();
        let policy = |topic| topology.offset_reset_policy("app", topic);
        assert_eq!(policy("clicks"), Some(AutoOffsetReset::Latest));
        assert_eq!(
            policy("audit-eu"),
            Some(AutoOffsetReset::ByDuration(Duration::from_secs(60)))
        );
        assert_eq!(policy("users"), Some(AutoOffsetReset::None));
        assert_eq!(
            policy("orders"),
            None,
            "the application's auto.offset.reset"
        );
        assert_eq!(policy("audit"), None, "the whole name must match");
    }
}
