//! Kafka Streams' `topic.` prefix on a real broker (`cargo xtask kafka
//! start`; skipped without KSTREAMS_BOOTSTRAP locally): the topic configs
//! it names reach the repartition and changelog topics kstreams creates,
//! under the store type's own changelog configs; windowed changelogs keep
//! `windowstore.changelog.additional.retention.ms` beyond their store.

use std::collections::BTreeMap;
use std::time::Duration;

use kstreams_dsl::{Grouped, Materialized, Produced, StreamsBuilder};
use kstreams_embedded::{create_topic, test_broker, unique_name};
use kstreams_record::{I64Serde, Nullable, StringSerde};
use kstreams_runtime::kafka::{KafkaStreams, StreamsConfig};
use kstreams_time::{SessionWindows, TimeWindows};
use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::ClientConfig;

/// The configs of `topic` as the broker reports them.
fn topic_configs(bootstrap: &str, topic: &str) -> BTreeMap<String, String> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let results = futures_executor::block_on(
        admin.describe_configs([&ResourceSpecifier::Topic(topic)], &AdminOptions::new()),
    )
    .unwrap();
    let resource = results.into_iter().next().unwrap().unwrap();
    resource
        .entries
        .into_iter()
        .filter_map(|e| e.value.map(|v| (e.name, v)))
        .collect()
}

#[test]
fn topic_prefixed_configs_reach_the_internal_topics() {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let _ = env_logger::builder().is_test(true).try_init();
    let input = unique_name("topic-prefix-in");
    let output = unique_name("topic-prefix-out");
    create_topic(&bootstrap, &input, 1, 1).unwrap();
    create_topic(&bootstrap, &output, 1, 1).unwrap();
    let app_id = unique_name("topic-prefix-app");
    let builder = StreamsBuilder::new();
    builder
        .stream::<String, String>(&input)
        .group_by_with(|_, w| w.clone(), Grouped::as_("by-word"))
        .count()
        .to_stream()
        .to_with(&output, Produced::with(StringSerde, Nullable(I64Serde)));
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().display().to_string();
    let config = StreamsConfig::from_properties([
        ("application.id", app_id.as_str()),
        ("bootstrap.servers", bootstrap.as_str()),
        ("state.dir", state_dir.as_str()),
        ("topic.segment.bytes", "1048576"),
        ("topic.max.message.bytes", "2000000"),
        // Under the changelog's own cleanup.policy=compact.
        ("topic.cleanup.policy", "delete"),
    ])
    .unwrap();
    let mut app = KafkaStreams::new(builder.build().unwrap(), config);
    app.start().unwrap();
    let probe: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    let metadata = probe.fetch_metadata(None, Duration::from_secs(10)).unwrap();
    let changelog = metadata
        .topics()
        .iter()
        .map(|t| t.name().to_string())
        .find(|t| t.starts_with(&app_id) && t.ends_with("-changelog"))
        .expect("the count's changelog topic");
    let repartition = format!("{app_id}-by-word-repartition");
    let repartition_configs = topic_configs(&bootstrap, &repartition);
    let changelog_configs = topic_configs(&bootstrap, &changelog);
    app.close(Duration::from_secs(30));
    for configs in [&repartition_configs, &changelog_configs] {
        assert_eq!(configs["segment.bytes"], "1048576", "{configs:?}");
        assert_eq!(configs["max.message.bytes"], "2000000", "{configs:?}");
    }
    assert_eq!(repartition_configs["cleanup.policy"], "delete");
    assert_eq!(repartition_configs["retention.ms"], "-1");
    assert_eq!(changelog_configs["cleanup.policy"], "compact");
}

/// Kafka Streams' `windowstore.changelog.additional.retention.ms`: a window
/// or session store's changelog keeps the store's retention plus that
/// (a day by default), unless the store's logging config names its own
/// `retention.ms`.
#[test]
fn windowed_changelogs_keep_the_store_retention_plus_the_additional_retention() {
    let Some(bootstrap) = test_broker() else {
        return;
    };
    let _ = env_logger::builder().is_test(true).try_init();
    let input = unique_name("window-retention-in");
    create_topic(&bootstrap, &input, 1, 1).unwrap();
    let app_id = unique_name("window-retention-app");
    let builder = StreamsBuilder::new();
    let grouped = builder.stream::<String, String>(&input).group_by_key();
    // Retention: size + grace = 60 s.
    grouped
        .windowed_by(TimeWindows::of_size_with_no_grace(Duration::from_secs(60)))
        .count_with(None, Materialized::as_("per-minute"));
    // Retention: gap + grace = 30 s.
    grouped
        .windowed_by_session(SessionWindows::of_inactivity_gap_with_no_grace(
            Duration::from_secs(30),
        ))
        .count_with(None, Materialized::as_("sessions"));
    // Its own retention.ms wins over the computed one.
    grouped
        .windowed_by(TimeWindows::of_size_with_no_grace(Duration::from_secs(60)))
        .count_with(
            None,
            Materialized::as_("kept-a-week").with_logging_enabled(BTreeMap::from([(
                "retention.ms".to_string(),
                "604800000".to_string(),
            )])),
        );
    let state = tempfile::tempdir().unwrap();
    let state_dir = state.path().display().to_string();
    let config = StreamsConfig::from_properties([
        ("application.id", app_id.as_str()),
        ("bootstrap.servers", bootstrap.as_str()),
        ("state.dir", state_dir.as_str()),
        ("windowstore.changelog.additional.retention.ms", "1000"),
    ])
    .unwrap();
    let mut app = KafkaStreams::new(builder.build().unwrap(), config);
    app.start().unwrap();
    let retention = |store: &str| {
        topic_configs(&bootstrap, &format!("{app_id}-{store}-changelog"))["retention.ms"].clone()
    };
    let (minute, sessions, week) = (
        retention("per-minute"),
        retention("sessions"),
        retention("kept-a-week"),
    );
    app.close(Duration::from_secs(30));
    assert_eq!(minute, "61000");
    assert_eq!(sessions, "31000");
    assert_eq!(week, "604800000");
}
