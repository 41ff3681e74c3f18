//! The topics an application reads and the internal ones it creates.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures_executor::block_on;
use kstreams_dsl::__private::TopicPattern;
use kstreams_dsl::{ChangelogTopic, Topology};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseProducer, DeliveryResult, Producer, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;
use rustc_hash::FxHashMap;

use super::client_error::ClientError;
use super::config::{ConfigError, StreamsConfig};
use super::RuntimeError;
use crate::kafka::client_error::ClientResult;

/// Which sub-topology reads which topic.
#[derive(Debug)]
pub(crate) struct SourceTopicIndex {
    /// Fx-hashed: looked up per consumed record, by the application's own
    /// topic names.
    topics: FxHashMap<String, u32>,
    patterns: Vec<(TopicPattern, u32)>,
}

impl SourceTopicIndex {
    pub(super) fn new(topology: &Topology, application_id: &str) -> Self {
        let mut topics = FxHashMap::default();
        let mut patterns = Vec::new();
        for sources in topology.source_topics(application_id) {
            let id = sources.id;
            for t in sources.topics {
                topics.insert(t, id);
            }
            for p in sources.patterns {
                patterns.push((p, id));
            }
        }
        Self { topics, patterns }
    }

    pub(super) fn subtopology_of(&self, topic: &str) -> Option<u32> {
        self.topics.get(topic).copied().or_else(|| {
            self.patterns
                .iter()
                .find(|(p, _)| p.regex.is_match(topic))
                .map(|(_, id)| *id)
        })
    }

    pub(super) fn topics(&self) -> impl Iterator<Item = &str> {
        self.topics.keys().map(String::as_str)
    }

    /// Patterns as librdkafka subscribes to them: a leading `^` marks a
    /// regex; the whole-name match is checked again in `subtopology_of`.
    pub(super) fn patterns(&self) -> impl Iterator<Item = String> + '_ {
        // A group around the text, so `a|b` stays anchored at both ends.
        self.patterns.iter().map(|(p, _)| format!("^({})$", p.text))
    }
}

/// How long the start waits for the cluster's metadata.
const METADATA_TIMEOUT: Duration = Duration::from_secs(30);
/// One metadata request's share of it: between two, the start looks at what
/// librdkafka reported, so that a refused login fails it at once.
const METADATA_ATTEMPT: Duration = Duration::from_secs(2);

/// The context of the start's metadata probe: librdkafka's errors logged
/// as rust-rdkafka does, and the last authentication (`__AUTHENTICATION`) or
/// TLS (`__SSL`) failure kept. librdkafka reports those as error events of
/// the client's main queue only: a metadata request on a client whose every
/// login fails just fails (transport failure, timeout), without the cause.
/// (rust-rdkafka's `AdminClient` never polls its main queue, so the probe is
/// a producer, the kind of client an admin client is inside librdkafka.)
#[derive(Default)]
struct StartContext {
    refused: Mutex<Option<(RDKafkaErrorCode, String)>>,
}

impl ClientContext for StartContext {
    fn error(&self, error: KafkaError, reason: &str) {
        log::error!("librdkafka: {error}: {reason}");
        if let Some(code @ (RDKafkaErrorCode::Authentication | RDKafkaErrorCode::SSL)) =
            error.rdkafka_error_code()
        {
            *self.refused.lock().unwrap_or_else(|p| p.into_inner()) =
                Some((code, reason.to_owned()));
        }
    }
}

impl ProducerContext for StartContext {
    type DeliveryOpaque = ();
    // The probe produces nothing.
    fn delivery(&self, _: &DeliveryResult<'_>, _: ()) {}
}

impl StartContext {
    /// The authentication or TLS failure librdkafka last reported, as the
    /// error naming its cause and the keys to check (`client` is the
    /// configuration the client was made with).
    fn refusal(&self, client: &ClientConfig) -> Option<ConfigError> {
        let refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        let (code, reason) = refused.as_ref()?;
        Some(ConfigError::Refused {
            message: explain_refusal(*code, reason, |key| client.get(key)),
        })
    }
}

/// What an authentication (`__AUTHENTICATION`) or TLS (`__SSL`) failure
/// librdkafka reported with `reason` means, naming the user and mechanism
/// (from `get`, the client's settings; never the password) and the keys to
/// check.
fn explain_refusal<'a>(
    code: RDKafkaErrorCode,
    reason: &str,
    get: impl Fn(&str) -> Option<&'a str>,
) -> String {
    // librdkafka's reason ends with how long the state lasted, of no use here.
    let reason = reason
        .rsplit_once(" (after ")
        .map_or(reason, |(reason, _)| reason)
        .trim();
    if code == RDKafkaErrorCode::SSL {
        let lower = reason.to_ascii_lowercase();
        let (cause, fix) = if lower.contains("certificate verify failed")
            || lower.contains("could not be verified")
        {
            (
                "certificate not trusted",
                "check ssl.ca.location / ssl.ca.pem (Java: ssl.truststore.*): the CA that \
                 signed the brokers' certificates",
            )
        } else if lower.contains("hostname") || lower.contains("host name") {
            (
                "certificate not valid for the host name",
                "connect by a name the certificate lists, or set \
                 ssl.endpoint.identification.algorithm=none",
            )
        } else {
            (
                "the handshake did not complete",
                "check security.protocol (SSL or SASL_SSL on a TLS listener only) and the ssl.* \
                 settings (Java: ssl.truststore.*, ssl.keystore.*)",
            )
        };
        return format!("TLS handshake failed: {cause}: {reason}; {fix}");
    }
    let mechanism = get("sasl.mechanism")
        .or_else(|| get("sasl.mechanisms"))
        .unwrap_or("GSSAPI");
    if mechanism.eq_ignore_ascii_case("OAUTHBEARER") {
        return format!(
            "SASL authentication failed (mechanism OAUTHBEARER): {reason}; check the token's \
             source: sasl.oauthbearer.config with enable.sasl.oauthbearer.unsecure.jwt, or \
             sasl.oauthbearer.method=oidc with sasl.oauthbearer.token.endpoint.url, .client.id, \
             .client.secret and .scope (Java: sasl.jaas.config)"
        );
    }
    let user = get("sasl.username").unwrap_or("");
    format!(
        "SASL authentication failed for user {user:?} (mechanism {mechanism}): {reason}; check \
         sasl.username/sasl.password or sasl.jaas.config (the user needs {mechanism} \
         credentials on the cluster)"
    )
}

/// The partition count of every topic the cluster has. A login or TLS
/// handshake the cluster refuses fails it at once, naming the cause; other
/// failures are retried for [`METADATA_TIMEOUT`].
fn partition_counts_on_broker(
    client: &ClientConfig,
) -> Result<HashMap<String, usize>, RuntimeError> {
    let probe: BaseProducer<StartContext> = client
        .create_with_context(StartContext::default())
        .client()?;
    let probe = DropAside(Some(probe));
    let probe = probe.0.as_ref().expect("present until dropped");
    let deadline = Instant::now() + METADATA_TIMEOUT;
    let metadata = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let error = match probe
            .client()
            .fetch_metadata(None, left.min(METADATA_ATTEMPT))
        {
            Ok(metadata) => break metadata,
            Err(error) => error,
        };
        // The error events wait in the main queue, and the failed login's
        // may trail the request's failure.
        let waited = Instant::now();
        loop {
            probe.poll(Duration::from_millis(50));
            if let Some(refused) = probe.context().refusal(client) {
                return Err(refused.into());
            }
            if waited.elapsed() >= Duration::from_millis(300) {
                break;
            }
        }
        if Instant::now() >= deadline {
            return Err(RuntimeError::client(error));
        }
    };
    Ok(metadata
        .topics()
        .iter()
        .filter(|t| t.error().is_none())
        .map(|t| (t.name().to_string(), t.partitions().len()))
        .collect())
}

/// A client of an application's start, closed on a thread of its own: a
/// librdkafka client's close waits for its threads (rust-rdkafka's
/// `AdminClient` joins a polling thread that polls in 100 ms steps), and
/// the start (the stream threads joining the group) need not wait for it.
struct DropAside<T: Send + 'static>(Option<T>);

impl<T: Send + 'static> Drop for DropAside<T> {
    fn drop(&mut self) {
        if let Some(client) = self.0.take() {
            // If no thread can be made, the closure, and the client with
            // it, is dropped here.
            let _ = std::thread::Builder::new()
                .name("kstreams-start-client-close".into())
                .spawn(move || drop(client));
        }
    }
}

/// Checks that the user's source topics exist and creates the internal
/// (repartition) topics, with as many partitions as the widest source topic.
/// Returns each stream sub-topology's number of tasks (its partitions),
/// which interactive queries need to find the partition of a key.
pub(crate) fn prepare_topics(
    topology: &Topology,
    config: &StreamsConfig,
) -> Result<BTreeMap<u32, usize>, RuntimeError> {
    let client = super::clients::admin(config);
    let partitions = partition_counts_on_broker(&client)?;
    let partitions: HashMap<&str, usize> =
        partitions.iter().map(|(t, n)| (t.as_str(), *n)).collect();
    let internal: Vec<String> = topology
        .internal_topics()
        .map(|t| format!("{}-{t}", config.application_id))
        .collect();
    let mut missing = Vec::new();
    let mut widest = 1;
    for sources in topology.source_topics(&config.application_id) {
        for topic in sources.topics.iter().filter(|t| !internal.contains(t)) {
            match partitions.get(topic.as_str()) {
                Some(&n) => widest = widest.max(n),
                None => missing.push(topic.clone()),
            }
        }
    }
    if !missing.is_empty() {
        missing.sort();
        return Err(RuntimeError::MissingSourceTopics(missing));
    }
    check_copartitioning(topology, &config.application_id, &partitions)?;
    let counts = partition_counts(topology, &config.application_id, &partitions);
    let count_of = |subtopology: Option<u32>| {
        subtopology
            .and_then(|s| counts.subtopologies.get(&s).copied())
            .unwrap_or(widest)
    };
    let writers: HashMap<String, u32> = topology
        .internal_topic_writers(&config.application_id)
        .into_iter()
        .collect();
    let changelogs = topology.changelog_topics(&config.application_id);
    let mut specs: Vec<(&str, usize, BTreeMap<String, String>)> = internal
        .iter()
        .filter(|t| !partitions.contains_key(t.as_str()))
        .map(|t| {
            // As many partitions as the tasks of the sub-topology writing
            // it, as Kafka Streams: a key's records stay on one partition
            // as the data moves from one sub-topology to the next.
            let n = counts
                .fixed
                .get(t)
                .copied()
                .unwrap_or_else(|| count_of(writers.get(t).copied()));
            (t.as_str(), n, repartition_topic_config(config))
        })
        .collect();
    for changelog in changelogs
        .iter()
        .filter(|c| !partitions.contains_key(c.topic.as_str()))
    {
        // One changelog partition per task of the store's sub-topology.
        specs.push((
            &changelog.topic,
            count_of(Some(changelog.subtopology)),
            changelog_topic_config(config, changelog),
        ));
    }
    let tasks_per_subtopology: BTreeMap<u32, usize> = topology
        .subtopology_ids()
        .into_iter()
        .map(|id| (id, count_of(Some(id))))
        .collect();
    let new_topics: Vec<NewTopic<'_>> = specs
        .iter()
        .map(|(name, partitions, topic_config)| {
            topic_config.iter().fold(
                NewTopic::new(
                    name,
                    *partitions as i32,
                    TopicReplication::Fixed(config.replication_factor),
                ),
                |topic, (k, v)| topic.set(k, v),
            )
        })
        .collect();
    if new_topics.is_empty() {
        return Ok(tasks_per_subtopology);
    }
    let admin: AdminClient<DefaultClientContext> = client.create().client()?;
    let admin = DropAside(Some(admin));
    let admin = admin.0.as_ref().expect("present until dropped");
    let results = block_on(admin.create_topics(&new_topics, &AdminOptions::new())).client()?;
    for result in results {
        match result {
            Ok(name) => log::info!("created internal topic {name}"),
            Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((name, code)) => {
                return Err(RuntimeError::CreateTopic {
                    topic: name,
                    source: ClientError::new(KafkaError::AdminOp(code)),
                })
            }
        }
    }
    Ok(tasks_per_subtopology)
}

/// A repartition topic's configs: deleted, never by age (a backfill of
/// old timestamps must survive until read), 50 MB segments so that purged
/// records go soon, the producer's timestamps; the user's `topic.*` over
/// them. Kafka Streams' `RepartitionTopicConfig` defaults, key for key: a
/// streams group keeps the topology its first member registered and
/// refuses a member whose topology differs in any config.
fn repartition_topic_config(config: &StreamsConfig) -> BTreeMap<String, String> {
    let mut topic_config = BTreeMap::from([
        ("cleanup.policy".to_string(), "delete".to_string()),
        (
            "message.timestamp.type".to_string(),
            "CreateTime".to_string(),
        ),
        ("retention.ms".to_string(), "-1".to_string()),
        ("segment.bytes".to_string(), "52428800".to_string()),
    ]);
    topic_config.extend(config.internal_topic_configs.clone());
    topic_config
}

/// A changelog topic's configs: the user's `topic.*`, with the store's
/// changelog configs over them (the store type's own, such as
/// `cleanup.policy=compact` and a window store's `retention.ms`, and what
/// the operator set with `Materialized::with_logging_enabled`). Kafka
/// Streams does the same except that `topic.*` also overrides the store
/// type's own `cleanup.policy`.
///
/// Under them all, as Kafka Streams' changelog topic configs have it, the
/// producer's timestamps (`message.timestamp.type=CreateTime`).
///
/// A window or session store's changelog keeps records for the store's
/// retention plus `windowstore.changelog.additional.retention.ms`, unless
/// the store's own logging config set `retention.ms` (Kafka Streams'
/// `WindowedChangelogTopicConfig`; a sum past `i64::MAX` is `i64::MAX`).
fn changelog_topic_config(
    config: &StreamsConfig,
    changelog: &ChangelogTopic,
) -> BTreeMap<String, String> {
    let mut topic_config = BTreeMap::from([(
        "message.timestamp.type".to_string(),
        "CreateTime".to_string(),
    )]);
    topic_config.extend(config.internal_topic_configs.clone());
    topic_config.extend(changelog.config.clone());
    if let Some(retention) = changelog.windowed_retention {
        let kept = retention.saturating_add(config.window_store_changelog_additional_retention_ms);
        topic_config.insert("retention.ms".to_string(), kept.to_string());
    }
    topic_config
}

/// Fails when topics joined in one task have different partition counts
/// (internal topics not created yet are made to match).
fn check_copartitioning(
    topology: &Topology,
    application_id: &str,
    partitions: &HashMap<&str, usize>,
) -> Result<(), RuntimeError> {
    for group in topology.copartition_groups(application_id) {
        // Internal topics not made yet are made to match; those that exist
        // (from an earlier run) must match as they are.
        let counts: Vec<(String, usize)> = group
            .into_iter()
            .filter_map(|t| partitions.get(t.as_str()).map(|&n| (t, n)))
            .collect();
        if counts.windows(2).any(|w| w[0].1 != w[1].1) {
            return Err(RuntimeError::CoPartitioning(counts));
        }
    }
    Ok(())
}

/// Partition counts of the sub-topologies (tasks per sub-topology): the
/// most partitions among a sub-topology's source topics, where an internal
/// topic not created yet gets the count of the sub-topology writing it.
struct PartitionCounts {
    subtopologies: HashMap<u32, usize>,
    /// Repartition topics with a count the user set.
    fixed: HashMap<String, usize>,
}

fn partition_counts(
    topology: &Topology,
    application_id: &str,
    existing: &HashMap<&str, usize>,
) -> PartitionCounts {
    let sources = topology.source_topics(application_id);
    let writers = topology.internal_topic_writers(application_id);
    let groups = topology.copartition_groups(application_id);
    let internal: Vec<String> = topology
        .internal_topics()
        .map(|t| format!("{application_id}-{t}"))
        .collect();
    // Counts that are given: topics that exist, and repartition topics
    // whose count the user set.
    let mut firm: HashMap<String, usize> =
        existing.iter().map(|(t, n)| (t.to_string(), *n)).collect();
    for (topic, n) in topology.repartition_partitions(application_id) {
        firm.entry(topic).or_insert(n.max(1) as usize);
    }
    let mut topics = firm.clone();
    let mut subtopologies: HashMap<u32, usize> = HashMap::new();
    // Each round settles at least one more sub-topology downstream.
    for _ in 0..=sources.len() + groups.len() {
        for s in &sources {
            if let Some(n) = s.topics.iter().filter_map(|t| topics.get(t)).max() {
                subtopologies.insert(s.id, *n);
            }
        }
        for (topic, writer) in &writers {
            if let (false, Some(&n)) = (firm.contains_key(topic), subtopologies.get(writer)) {
                topics.entry(topic.clone()).or_insert(n);
            }
        }
        // Topics that meet in one task need one count, as Kafka Streams'
        // CopartitionedTopicsEnforcer: a user topic's (they are checked
        // equal), else the largest of the group's internal topics.
        for group in &groups {
            let user = group
                .iter()
                .filter(|t| !internal.contains(t))
                .filter_map(|t| firm.get(t))
                .max();
            let n = match user {
                Some(&n) => Some(n),
                None => group.iter().filter_map(|t| topics.get(t)).max().copied(),
            };
            if let Some(n) = n {
                for topic in group
                    .iter()
                    .filter(|t| internal.contains(t) && !firm.contains_key(*t))
                {
                    topics.insert(topic.clone(), n);
                }
            }
        }
    }
    let fixed = topics
        .into_iter()
        .filter(|(t, _)| internal.contains(t) && !existing.contains_key(t.as_str()))
        .collect();
    PartitionCounts {
        subtopologies,
        fixed,
    }
}

/// The topology as the streams group protocol registers it with the broker
/// (KIP-1071): one sub-topology per task group, numbered as Kafka Streams
/// numbers them, with its user source topics, the internal topics it reads
/// (repartition sources) and writes (repartition sinks), its stores'
/// changelogs and the topics its joins co-partition. Every field as Kafka
/// Streams 4.4 fills it (`StreamThread#initBrokerTopology`), so that
/// kstreams and Kafka Streams members can share one group: the broker
/// keeps the first member's topology and refuses any other.
pub(crate) fn streams_group_topology(
    topology: &Topology,
    config: &StreamsConfig,
) -> Result<kstreams_group::Topology, RuntimeError> {
    use kstreams_group::{CopartitionGroup, InternalTopic, Subtopology};
    let application_id = &config.application_id;
    let internal: Vec<String> = topology
        .internal_topics()
        .map(|t| format!("{application_id}-{t}"))
        .collect();
    let writers = topology.internal_topic_writers(application_id);
    let changelogs = topology.changelog_topics(application_id);
    let groups = topology.copartition_groups_as_registered(application_id);
    // As Kafka Streams sends it: the configured value, -1 (the broker's
    // default) included.
    let replication_factor = i16::try_from(config.replication_factor).ok();
    // Only counts the user fixed (`Repartitioned::with_partitions`): the
    // broker derives the others from the source topics, as for Kafka
    // Streams, which sends no count for them.
    let fixed: HashMap<String, i32> = topology
        .repartition_partitions(application_id)
        .into_iter()
        .collect();
    let mut subtopologies = Vec::new();
    for sources in topology.source_topics(application_id) {
        if !sources.patterns.is_empty() {
            return Err(super::ConfigError::Conflict {
                key: "group.protocol=streams".to_string(),
                with: format!("a pattern source in sub-topology {}", sources.id),
                hint: "kstreams does not register pattern sources with a streams group yet; \
                       name the source topics, or use group.protocol=classic"
                    .to_string(),
            }
            .into());
        }
        let (repartition_sources, user_sources): (Vec<String>, Vec<String>) = sources
            .topics
            .iter()
            .cloned()
            .partition(|t| internal.contains(t));
        let repartition_source_topics = repartition_sources
            .into_iter()
            .map(|name| InternalTopic {
                partitions: fixed.get(&name).copied(),
                replication_factor,
                // As prepare_topics creates them.
                configs: repartition_topic_config(config),
                name,
            })
            .collect();
        let repartition_sink_topics = writers
            .iter()
            .filter(|(_, writer)| *writer == sources.id)
            .map(|(topic, _)| topic.clone())
            .collect();
        let changelog_topics = changelogs
            .iter()
            .filter(|c| c.subtopology == sources.id)
            .map(|c| InternalTopic {
                // The broker gives a changelog one partition per task.
                partitions: None,
                replication_factor,
                configs: changelog_topic_config(config, c),
                name: c.topic.clone(),
            })
            .collect();
        let copartition_groups = groups
            .iter()
            .filter(|group| group.iter().all(|t| sources.topics.contains(t)))
            .map(|group| CopartitionGroup {
                topics: group.clone(),
            })
            .collect();
        subtopologies.push(Subtopology {
            id: sources.id.to_string(),
            source_topics: user_sources,
            source_topic_patterns: Vec::new(),
            repartition_source_topics,
            repartition_sink_topics,
            changelog_topics,
            copartition_groups,
        });
    }
    Ok(kstreams_group::Topology {
        epoch: 0,
        subtopologies,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kstreams_dsl::StreamsBuilder;
    use kstreams_group::InternalTopic;

    /// librdkafka's reasons, as its error callback gives them, become one
    /// message naming the cause, the user and mechanism and the keys to
    /// check.
    #[test]
    fn a_refused_login_or_handshake_is_explained_naming_the_keys() {
        let settings: HashMap<&str, &str> = HashMap::from([
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.username", "alice"),
            ("sasl.password", "hunter2"),
        ]);
        let get = |key: &str| settings.get(key).copied();
        let sasl = explain_refusal(
            RDKafkaErrorCode::Authentication,
            "SASL authentication error: Authentication failed during authentication due to \
             invalid credentials with SASL mechanism SCRAM-SHA-512 (after 312ms in state \
             AUTH_REQ)",
            get,
        );
        assert!(
            sasl.starts_with(
                "SASL authentication failed for user \"alice\" (mechanism SCRAM-SHA-512): SASL \
                 authentication error: Authentication failed during authentication due to \
                 invalid credentials with SASL mechanism SCRAM-SHA-512; check \
                 sasl.username/sasl.password or sasl.jaas.config"
            ),
            "{sasl}"
        );
        assert!(!sasl.contains("hunter2"), "{sasl}");
        let tls = explain_refusal(
            RDKafkaErrorCode::SSL,
            "ssl handshake failed: error:0A000086:SSL routines::certificate verify failed: \
             broker certificate could not be verified, verify that ssl.ca.location is \
             correctly configured (after 4ms in state SSL_HANDSHAKE)",
            get,
        );
        assert!(
            tls.starts_with("TLS handshake failed: certificate not trusted: ssl handshake"),
            "{tls}"
        );
        assert!(tls.ends_with("signed the brokers' certificates"), "{tls}");
        let oauth = explain_refusal(
            RDKafkaErrorCode::Authentication,
            "SASL authentication error: {\"status\":\"invalid_token\"}",
            |key| (key == "sasl.mechanisms").then_some("OAUTHBEARER"),
        );
        assert!(
            oauth.starts_with("SASL authentication failed (mechanism OAUTHBEARER)")
                && oauth.contains("invalid_token")
                && oauth.contains("sasl.oauthbearer.config"),
            "{oauth}"
        );
    }

    #[test]
    fn the_streams_group_sees_sub_topologies_with_their_internal_topics_and_joins() {
        let builder = StreamsBuilder::new();
        builder
            .stream::<String, String>("orders")
            .group_by(|_, value: &String| value.clone())
            .count();
        let users = builder.table::<String, String>("users");
        builder
            .stream::<String, String>("clicks")
            .join(&users, |click, user| format!("{click} by {user}"))
            .to("enriched");
        let topology = builder.build().unwrap();
        let mut config = StreamsConfig::new("app", "b:1");
        config.set("replication.factor", "3").unwrap();
        let repartition = "app-KSTREAM-AGGREGATE-STATE-STORE-0000000002-repartition";
        let group = streams_group_topology(&topology, &config).unwrap();
        let ids: Vec<&str> = group.subtopologies.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["0", "1", "2"], "{group:#?}");
        let [rekey, count, join] = &group.subtopologies[..] else {
            unreachable!()
        };

        assert_eq!(rekey.source_topics, ["orders"]);
        assert_eq!(rekey.repartition_sink_topics, [repartition]);
        assert!(rekey.changelog_topics.is_empty());

        assert!(count.source_topics.is_empty());
        let source = &count.repartition_source_topics[0];
        assert_eq!(
            (
                source.name.as_str(),
                source.partitions,
                source.replication_factor
            ),
            (repartition, None, Some(3)),
            "no count was fixed: the broker derives it"
        );
        // Kafka Streams 4.4 registers exactly these (RepartitionTopicConfig,
        // UnwindowedUnversionedChangelogTopicConfig).
        let configs = |c: &BTreeMap<String, String>| {
            c.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        assert_eq!(
            configs(&source.configs),
            "cleanup.policy=delete,message.timestamp.type=CreateTime,retention.ms=-1,\
             segment.bytes=52428800"
        );
        let changelog: &InternalTopic = &count.changelog_topics[0];
        assert_eq!(
            changelog.name,
            "app-KSTREAM-AGGREGATE-STATE-STORE-0000000002-changelog"
        );
        assert_eq!(changelog.partitions, None, "the broker sizes changelogs");
        assert_eq!(
            configs(&changelog.configs),
            "cleanup.policy=compact,message.timestamp.type=CreateTime"
        );

        let mut sources = join.source_topics.clone();
        sources.sort();
        assert_eq!(sources, ["clicks", "users"]);
        let mut copartitioned = join.copartition_groups[0].topics.clone();
        copartitioned.sort();
        assert_eq!(copartitioned, ["clicks", "users"]);
        assert_eq!(join.changelog_topics.len(), 1, "the table's store");
    }

    /// What Kafka Streams 4.4 registered for compat's table-table join
    /// (decoded from the broker's StreamsGroupTopology record): the
    /// co-partition group lists the right table before the left one, as
    /// its `HashSet` iterates them (both topics hash into one bucket, so
    /// the source nodes' order decides).
    #[test]
    fn copartition_groups_are_registered_in_kafka_streams_order() {
        let (left, right) = (
            "compat-table-table-join-cached-1796221367334-left",
            "compat-table-table-join-cached-1796221367334-right",
        );
        let builder = StreamsBuilder::new();
        let l = builder.table::<String, String>(left);
        let r = builder.table::<String, String>(right);
        l.join(&r, |a, b| format!("{a}{b}")).to_stream().to("out");
        let topology = builder.build().unwrap();
        let config = StreamsConfig::new("app", "b:1");
        let group = streams_group_topology(&topology, &config).unwrap();
        assert_eq!(
            group.subtopologies[0].copartition_groups[0].topics,
            [right, left]
        );
    }

    #[test]
    fn pattern_sources_are_refused_under_the_streams_group_protocol() {
        let builder = StreamsBuilder::new();
        builder
            .stream_pattern::<String, String>("orders-.*", kstreams_dsl::Consumed::default())
            .to("out");
        let topology = builder.build().unwrap();
        let config = StreamsConfig::new("app", "b:1");
        let err = streams_group_topology(&topology, &config).unwrap_err();
        assert!(err.to_string().contains("pattern source"), "{err}");
    }

    fn config(properties: &[(&str, &str)]) -> StreamsConfig {
        let mut config = StreamsConfig::new("app", "b:9092");
        for (k, v) in properties {
            config.set(k, v).unwrap();
        }
        config
    }

    fn map(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn topic_prefixed_configs_reach_every_internal_topic() {
        let config = config(&[
            ("topic.min.insync.replicas", "2"),
            ("topic.segment.bytes", "1048576"),
        ]);
        assert_eq!(
            repartition_topic_config(&config),
            map(&[
                ("cleanup.policy", "delete"),
                ("message.timestamp.type", "CreateTime"),
                ("min.insync.replicas", "2"),
                ("retention.ms", "-1"),
                ("segment.bytes", "1048576"),
            ])
        );
        let window_store = changelog(
            &[
                ("cleanup.policy", "compact,delete"),
                ("retention.ms", "90000000"),
            ],
            Some(3_600_000),
        );
        assert_eq!(
            changelog_topic_config(&config, &window_store),
            map(&[
                ("cleanup.policy", "compact,delete"),
                ("message.timestamp.type", "CreateTime"),
                ("min.insync.replicas", "2"),
                ("retention.ms", "90000000"),
                ("segment.bytes", "1048576"),
            ])
        );
    }

    #[test]
    fn the_store_changelog_config_wins_over_topic_prefixed_ones() {
        let config = config(&[
            ("topic.retention.ms", "1000"),
            ("topic.segment.bytes", "1048576"),
        ]);
        // Kafka Streams: a window store's retention.ms is its retention plus
        // the additional day whatever topic.retention.ms says, and the
        // operator's logging config beats topic.*.
        let store = changelog(
            &[("retention.ms", "90000000"), ("segment.bytes", "2097152")],
            Some(3_600_000),
        );
        let topic = changelog_topic_config(&config, &store);
        assert_eq!(topic["retention.ms"], "90000000");
        assert_eq!(topic["segment.bytes"], "2097152");
        // A repartition topic takes topic.* over kstreams' own defaults.
        assert_eq!(repartition_topic_config(&config)["retention.ms"], "1000");
    }

    #[test]
    fn a_windowed_changelog_keeps_the_store_retention_plus_the_additional_retention() {
        let store = |windowed| {
            changelog(
                &[
                    ("cleanup.policy", "compact,delete"),
                    ("retention.ms", "90000000"),
                ],
                windowed,
            )
        };
        let hour = Some(3_600_000);
        let two_days = config(&[("windowstore.changelog.additional.retention.ms", "172800000")]);
        assert_eq!(
            changelog_topic_config(&two_days, &store(hour))["retention.ms"],
            "176400000"
        );
        // retention.ms from the store's own logging config stays as it is.
        assert_eq!(
            changelog_topic_config(&two_days, &store(None))["retention.ms"],
            "90000000"
        );
        let huge = config(&[(
            "windowstore.changelog.additional.retention.ms",
            "9223372036854775807",
        )]);
        assert_eq!(
            changelog_topic_config(&huge, &store(hour))["retention.ms"],
            i64::MAX.to_string()
        );
        let mut bad = StreamsConfig::new("app", "b:1");
        let error = bad
            .set("windowstore.changelog.additional.retention.ms", "a day")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("windowstore.changelog.additional.retention.ms"),
            "{error}"
        );
    }

    fn changelog(config: &[(&str, &str)], windowed_retention: Option<i64>) -> ChangelogTopic {
        ChangelogTopic {
            subtopology: 0,
            store: "store".to_string(),
            topic: "app-store-changelog".to_string(),
            config: map(config),
            windowed_retention,
            restore_within_retention: None,
        }
    }

    #[test]
    fn librdkafka_topic_properties_stay_client_settings() {
        let config = config(&[("topic.metadata.refresh.interval.ms", "1000")]);
        assert!(config.internal_topic_configs.is_empty());
        assert!(config
            .client_settings(super::super::config::KafkaClient::MainConsumer)
            .contains_key("topic.metadata.refresh.interval.ms"));
    }
}
