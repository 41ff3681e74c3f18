//! The test cluster's layout and each node's server.properties.

use std::fmt::Write;
use std::path::PathBuf;

use super::tls::{self, Keys};

/// One combined broker+controller process.
#[derive(Debug, Clone)]
pub(super) struct Node {
    pub id: u32,
    /// Clients connect here.
    pub port: u16,
    /// The KRaft quorum talks here.
    pub controller_port: u16,
    /// The SASL_SSL listener (SCRAM over TLS), when the cluster has one.
    pub sasl_ssl_port: Option<u16>,
    /// The OAUTHBEARER listener (SASL_SSL, the broker's unsecured-JWT
    /// validator), beside the SCRAM one.
    pub oauth_port: Option<u16>,
    /// The mutual-TLS listener (SSL, a client certificate of the test CA
    /// required), beside the SASL ones.
    pub mtls_port: Option<u16>,
    /// `.kafka/node-<id>`: config, data, log and pid file.
    pub dir: PathBuf,
}

impl Node {
    pub(super) fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub(super) fn sasl_ssl_address(&self) -> Option<String> {
        self.sasl_ssl_port.map(|port| format!("127.0.0.1:{port}"))
    }

    pub(super) fn oauth_address(&self) -> Option<String> {
        self.oauth_port.map(|port| format!("127.0.0.1:{port}"))
    }

    pub(super) fn mtls_address(&self) -> Option<String> {
        self.mtls_port.map(|port| format!("127.0.0.1:{port}"))
    }

    pub(super) fn config_file(&self) -> PathBuf {
        self.dir.join("server.properties")
    }

    pub(super) fn log_file(&self) -> PathBuf {
        self.dir.join("broker.log")
    }

    pub(super) fn pid_file(&self) -> PathBuf {
        self.dir.join("pid")
    }

    pub(super) fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }
}

/// The longest session of the OAUTHBEARER listener (its
/// `connections.max.reauth.ms`): a client re-authenticates before then.
pub(super) const OAUTH_REAUTH_MS: u64 = 60_000;

/// `controller.quorum.voters`: every node votes (a static quorum, so each node
/// is formatted alike and no dynamic-quorum bootstrapping is needed).
pub(super) fn voters(nodes: &[Node]) -> String {
    nodes
        .iter()
        .map(|n| format!("{}@127.0.0.1:{}", n.id, n.controller_port))
        .collect::<Vec<_>>()
        .join(",")
}

/// Whether `release` serves the streams group protocol: generally available
/// from 4.2 (4.1 had it as early access, which tests must not rely on).
pub(super) fn streams_groups(release: Option<(u32, u32, u32)>) -> bool {
    release.is_some_and(|(major, minor, _)| (major, minor) >= (4, 2))
}

/// server.properties of `node` in a cluster of `nodes.len()` nodes; with
/// `keys`, the node also listens for SASL_SSL clients (SCRAM-SHA-256 and
/// SCRAM-SHA-512) on its `sasl_ssl_port`, for OAUTHBEARER ones (over
/// TLS too, listener `OAUTH`) on its `oauth_port` and for mutual-TLS ones
/// (security protocol SSL, listener `MTLS`, a client certificate signed by
/// the test CA required; Kafka's default principal mapping, the
/// certificate's whole subject) on its `mtls_port`, while brokers and
/// controllers talk in plaintext.
///
/// The OAUTHBEARER listener validates with Kafka's default server callback,
/// the unsecured-JWT validator (unsigned tokens, `alg` `none`: a test
/// broker's), which requires the scope [`tls::OAUTH_SCOPE`] (so that a
/// token without it is refused) and checks the expiry; its sessions last at
/// most [`OAUTH_REAUTH_MS`] (KIP-368), so that clients re-authenticate with
/// fresh tokens during a test.
///
/// Choices for tests, not production:
/// - Internal topics are replicated `min(3, nodes)` times, so one broker gives
///   RF 1 and three brokers give RF 3 with min.insync.replicas 2, which lets a
///   test stop one broker and keep working.
/// - `auto.create.topics.enable=false`: Kafka Streams creates its internal
///   topics itself and expects source topics to exist; a typo in a test should
///   fail rather than create a topic.
/// - `log.retention.ms=-1`: tests use fixed timestamps far in the past, which
///   time-based retention would otherwise delete. Topics with a retention of
///   their own (windowed changelogs: window + grace + 1 day) still would, at
///   the retention check every 5 minutes (the active segment included): a
///   compat run once lost the first records of Kafka Streams' side of a join
///   store changelog that way, between writing and comparing them. So the
///   check runs once a day (`log.retention.check.interval.ms`).
/// - `group.initial.rebalance.delay.ms=0` and few internal-topic partitions make
///   the first group join and the first transaction fast.
/// - Small segments (1 MiB, the minimum) give compaction something to do.
/// - From Kafka 4.2 on (`release`, see [`streams_groups`]), streams groups
///   (KIP-1071) are enabled by name, heartbeat every second instead of every
///   5 s and assign without the initial 3 s delay, so that a test's rebalance
///   settles in seconds. Nothing is needed at format time: 4.4's storage
///   format finalizes the `streams.version` feature by default.
pub(super) fn server_properties(
    node: &Node,
    nodes: &[Node],
    release: Option<(u32, u32, u32)>,
    keys: Option<&Keys>,
) -> String {
    let replication = nodes.len().min(3);
    let min_isr = if replication >= 3 { 2 } else { 1 };
    let mut props = String::new();
    let mut set = |key: &str, value: &dyn std::fmt::Display| {
        writeln!(props, "{key}={value}").expect("writing to a String cannot fail");
    };
    set("process.roles", &"broker,controller");
    set("node.id", &node.id);
    set("controller.quorum.voters", &voters(nodes));
    let sasl_ssl = keys.zip(node.sasl_ssl_address());
    let oauth = keys.zip(node.oauth_address());
    let mtls = keys.zip(node.mtls_address());
    let (mut listeners, mut advertised, mut protocols) = (
        format!(
            "PLAINTEXT://127.0.0.1:{},CONTROLLER://127.0.0.1:{}",
            node.port, node.controller_port
        ),
        format!("PLAINTEXT://{}", node.address()),
        "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT".to_string(),
    );
    if let Some((_, address)) = &sasl_ssl {
        listeners.push_str(&format!(",SASL_SSL://{address}"));
        advertised.push_str(&format!(",SASL_SSL://{address}"));
        protocols.push_str(",SASL_SSL:SASL_SSL");
    }
    if let Some((_, address)) = &oauth {
        listeners.push_str(&format!(",OAUTH://{address}"));
        advertised.push_str(&format!(",OAUTH://{address}"));
        protocols.push_str(",OAUTH:SASL_SSL");
    }
    if let Some((_, address)) = &mtls {
        listeners.push_str(&format!(",MTLS://{address}"));
        advertised.push_str(&format!(",MTLS://{address}"));
        protocols.push_str(",MTLS:SSL");
    }
    set("listeners", &listeners);
    set("advertised.listeners", &advertised);
    set("controller.listener.names", &"CONTROLLER");
    set("inter.broker.listener.name", &"PLAINTEXT");
    set("listener.security.protocol.map", &protocols);
    if let Some((keys, _)) = sasl_ssl {
        set("sasl.enabled.mechanisms", &tls::MECHANISMS.join(","));
        for mechanism in tls::MECHANISMS {
            set(
                &format!(
                    "listener.name.sasl_ssl.{}.sasl.jaas.config",
                    mechanism.to_ascii_lowercase()
                ),
                &"org.apache.kafka.common.security.scram.ScramLoginModule required;",
            );
        }
        for (key, value) in keys.broker_settings() {
            set(&format!("listener.name.sasl_ssl.{key}"), &value);
        }
    }
    if let Some((keys, _)) = oauth {
        set(
            "listener.name.oauth.sasl.enabled.mechanisms",
            &"OAUTHBEARER",
        );
        set(
            "listener.name.oauth.oauthbearer.sasl.jaas.config",
            &format!(
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
                 unsecuredLoginStringClaim_sub=\"kstreams-broker\" \
                 unsecuredValidatorRequiredScope=\"{}\";",
                tls::OAUTH_SCOPE
            ),
        );
        set(
            "listener.name.oauth.oauthbearer.connections.max.reauth.ms",
            &OAUTH_REAUTH_MS,
        );
        for (key, value) in keys.broker_settings() {
            set(&format!("listener.name.oauth.{key}"), &value);
        }
    }
    if let Some((keys, _)) = mtls {
        for (key, value) in keys.mutual_tls_settings() {
            set(&format!("listener.name.mtls.{key}"), &value);
        }
    }
    set("log.dirs", &node.data_dir().display());

    set("auto.create.topics.enable", &false);
    set("num.partitions", &1);
    set("default.replication.factor", &replication);
    set("min.insync.replicas", &min_isr);
    set("offsets.topic.replication.factor", &replication);
    set("offsets.topic.num.partitions", &4);
    set("transaction.state.log.replication.factor", &replication);
    set("transaction.state.log.min.isr", &min_isr);
    set("transaction.state.log.num.partitions", &4);
    set(
        "share.coordinator.state.topic.replication.factor",
        &replication,
    );
    set("share.coordinator.state.topic.min.isr", &min_isr);
    set("group.initial.rebalance.delay.ms", &0);
    if streams_groups(release) {
        set(
            "group.coordinator.rebalance.protocols",
            &"classic,consumer,streams",
        );
        set("group.streams.min.heartbeat.interval.ms", &500);
        set("group.streams.heartbeat.interval.ms", &1000);
        // Lets a group lower its `streams.session.timeout.ms` (45 s by
        // default, and the broker's minimum) so that failover after a
        // SIGKILL is measured in seconds (benches/standby_failover.rs).
        set("group.streams.min.session.timeout.ms", &6000);
        // Unknown before 4.4 (the broker warns and goes on), like the classic
        // group's delay above.
        set("group.streams.initial.rebalance.delay.ms", &0);
    }

    set("log.segment.bytes", &(1024 * 1024));
    set("log.retention.ms", &-1);
    set("log.retention.check.interval.ms", &86_400_000);
    // A 2-core machine: Kafka's defaults (3 network, 8 I/O threads) per node
    // only add context switches.
    set("num.network.threads", &2);
    set("num.io.threads", &4);
    props
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(size: u32) -> Vec<Node> {
        (1..=size)
            .map(|id| Node {
                id,
                port: 9000 + id as u16,
                controller_port: 9100 + id as u16,
                sasl_ssl_port: Some(9200 + id as u16),
                oauth_port: Some(9300 + id as u16),
                mtls_port: Some(9400 + id as u16),
                dir: PathBuf::from(format!("/tmp/node-{id}")),
            })
            .collect()
    }

    #[test]
    fn single_node_replicates_once() {
        let nodes = cluster(1);
        let props = server_properties(&nodes[0], &nodes, Some((4, 1, 2)), None);
        assert!(props.contains("controller.quorum.voters=1@127.0.0.1:9101\n"));
        assert!(props.contains("offsets.topic.replication.factor=1\n"));
        assert!(props.contains("transaction.state.log.min.isr=1\n"));
        assert!(props.contains("log.dirs=/tmp/node-1/data\n"));
        // Old fixed timestamps are never deleted by time during a run.
        assert!(props.contains("log.retention.ms=-1\n"));
        assert!(props.contains("log.retention.check.interval.ms=86400000\n"));
        assert!(!props.contains("group.streams."));
    }

    #[test]
    fn streams_groups_from_kafka_4_2() {
        let nodes = cluster(1);
        let props = server_properties(&nodes[0], &nodes, Some((4, 4, 0)), None);
        assert!(props.contains("group.coordinator.rebalance.protocols=classic,consumer,streams\n"));
        assert!(props.contains("group.streams.heartbeat.interval.ms=1000\n"));
        assert!(!streams_groups(Some((4, 1, 2))));
        assert!(!streams_groups(None));
    }

    #[test]
    fn three_nodes_replicate_thrice() {
        let nodes = cluster(3);
        let props = server_properties(&nodes[1], &nodes, Some((4, 1, 2)), None);
        assert!(props.contains("node.id=2\n"));
        assert!(props.contains(
            "controller.quorum.voters=1@127.0.0.1:9101,2@127.0.0.1:9102,3@127.0.0.1:9103\n"
        ));
        assert!(props.contains("default.replication.factor=3\n"));
        assert!(props.contains("min.insync.replicas=2\n"));
        assert!(props.contains("advertised.listeners=PLAINTEXT://127.0.0.1:9002\n"));
        assert!(!props.contains("SASL_SSL"));
    }

    #[test]
    fn sasl_ssl_listener_with_keys() {
        let nodes = cluster(1);
        let keys = Keys {
            ca_pem: PathBuf::from("/keys/ca.pem"),
            keystore: PathBuf::from("/keys/broker.p12"),
            client_certificate: PathBuf::from("/keys/client.pem"),
            client_key: PathBuf::from("/keys/client.key"),
            client_keystore: PathBuf::from("/keys/client.p12"),
        };
        let props = server_properties(&nodes[0], &nodes, Some((4, 4, 0)), Some(&keys));
        assert!(props.contains(
            "listeners=PLAINTEXT://127.0.0.1:9001,CONTROLLER://127.0.0.1:9101,\
             SASL_SSL://127.0.0.1:9201,OAUTH://127.0.0.1:9301,MTLS://127.0.0.1:9401\n"
        ));
        assert!(props.contains("SASL_SSL:SASL_SSL,OAUTH:SASL_SSL,MTLS:SSL\n"));
        assert!(props.contains("listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER\n"));
        assert!(props.contains(
            "listener.name.oauth.oauthbearer.sasl.jaas.config=\
             org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
             unsecuredLoginStringClaim_sub=\"kstreams-broker\" \
             unsecuredValidatorRequiredScope=\"kstreams\";\n"
        ));
        assert!(props.contains("listener.name.oauth.oauthbearer.connections.max.reauth.ms=60000\n"));
        assert!(props.contains("listener.name.oauth.ssl.keystore.location=/keys/broker.p12\n"));
        assert!(props.contains("inter.broker.listener.name=PLAINTEXT\n"));
        assert!(props.contains("sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512\n"));
        for mechanism in ["scram-sha-256", "scram-sha-512"] {
            assert!(props.contains(&format!(
                "listener.name.sasl_ssl.{mechanism}.sasl.jaas.config=\
                 org.apache.kafka.common.security.scram.ScramLoginModule required;\n"
            )));
        }
        assert!(props.contains("listener.name.sasl_ssl.ssl.keystore.location=/keys/broker.p12\n"));
        assert!(props.contains("listener.name.sasl_ssl.ssl.client.auth=none\n"));
    }

    #[test]
    fn mutual_tls_listener_requires_a_client_certificate_of_the_test_ca() {
        let nodes = cluster(1);
        let keys = Keys {
            ca_pem: PathBuf::from("/keys/ca.pem"),
            keystore: PathBuf::from("/keys/broker.p12"),
            client_certificate: PathBuf::from("/keys/client.pem"),
            client_key: PathBuf::from("/keys/client.key"),
            client_keystore: PathBuf::from("/keys/client.p12"),
        };
        let props = server_properties(&nodes[0], &nodes, Some((4, 4, 0)), Some(&keys));
        assert!(props.contains(",MTLS://127.0.0.1:9401\n"));
        for line in [
            "listener.name.mtls.ssl.client.auth=required",
            "listener.name.mtls.ssl.truststore.type=PEM",
            "listener.name.mtls.ssl.truststore.location=/keys/ca.pem",
            "listener.name.mtls.ssl.keystore.location=/keys/broker.p12",
        ] {
            assert!(props.contains(&format!("{line}\n")), "{line}");
        }
        // Required once, not also "none" from the broker's own settings.
        assert_eq!(
            props.matches("listener.name.mtls.ssl.client.auth=").count(),
            1
        );
        // No principal mapping rules: Kafka's default (the whole subject).
        assert!(!props.contains("ssl.principal.mapping.rules"));
    }
}
