//! `StreamsConfig::validate`: settings that are fine one by one but not
//! together (Kafka Streams checks these in `StreamsConfig`'s constructor
//! and `KafkaStreams`' start), each check a function of its own.

use std::collections::BTreeMap;

use super::client::ClientPrefix;
use super::group_protocol::{GroupProtocol, CLASSIC_ONLY};
use super::keys::GROUP_PROTOCOL;
use super::{ConfigError, KafkaClient, StreamsConfig};

/// A client's settings by key, with the prefix each came with
/// ([`StreamsConfig::client_settings`]).
type Settings = BTreeMap<String, (ClientPrefix, String)>;

impl StreamsConfig {
    /// Checks settings that are fine one by one but not together: under
    /// `consumer.group.protocol=consumer` (KIP-848) the classic protocol's
    /// `partition.assignment.strategy`, `session.timeout.ms`,
    /// `heartbeat.interval.ms` and `group.protocol.type` are refused.
    /// [`KafkaStreams::start`](crate::kafka::KafkaStreams::start) calls it too.
    ///
    /// ```
    /// use kstreams_runtime::kafka::StreamsConfig;
    ///
    /// let err = StreamsConfig::from_properties([
    ///     ("application.id", "app"),
    ///     ("bootstrap.servers", "localhost:9092"),
    ///     ("consumer.group.protocol", "consumer"),
    ///     ("consumer.partition.assignment.strategy", "range"),
    /// ])
    /// .unwrap_err();
    /// assert!(err.to_string().starts_with(
    ///     "config consumer.partition.assignment.strategy cannot be used with \
    ///      consumer.group.protocol=consumer"
    /// ));
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(e) = &self.deferred_error {
            return Err(e.clone());
        }
        // Java's security settings that do not translate to librdkafka's,
        // for any client.
        for client in KafkaClient::ALL {
            self.checked_client_settings(client)
                .map_err(|(error, _)| error)?;
        }
        let main = self.client_settings(KafkaClient::MainConsumer);
        if self.streams_group_protocol {
            streams_group_without_consumer_protocol(&main)?;
            streams_group_member_security(&main)?;
        }
        self.standby_replicas_with_streams_group(&main)?;
        if self.group_protocol() == GroupProtocol::Consumer {
            consumer_protocol_without_classic_settings(&main)?;
        }
        Ok(())
    }

    /// Standby tasks are placed by a streams group's broker: under the
    /// classic and KIP-848 protocols `num.standby.replicas` above 0 is
    /// refused.
    fn standby_replicas_with_streams_group(&self, main: &Settings) -> Result<(), ConfigError> {
        let standby_replicas = self.num_standby_replicas.unwrap_or(0);
        if standby_replicas > 0 && !self.streams_group_protocol {
            let protocol = main
                .get(GROUP_PROTOCOL)
                .map_or("classic".to_string(), |(_, p)| p.clone());
            return Err(ConfigError::Conflict {
                key: format!("num.standby.replicas={standby_replicas}"),
                with: format!("group.protocol={protocol}"),
                hint: "standby tasks are placed by the broker of a streams group: set \
                       group.protocol=streams (Kafka 4.2+ brokers), or num.standby.replicas=0; \
                       the classic and KIP-848 consumer protocols cannot carry them"
                    .to_string(),
            });
        }
        Ok(())
    }
}

/// Under `group.protocol=streams` the streams group assigns the main
/// consumers their partitions: a consumer group protocol of their own is
/// refused.
fn streams_group_without_consumer_protocol(main: &Settings) -> Result<(), ConfigError> {
    match main.get(GROUP_PROTOCOL) {
        Some((prefix, protocol)) => Err(ConfigError::Conflict {
            key: format!("{}group.protocol={protocol}", prefix.as_str()),
            with: "group.protocol=streams".to_string(),
            hint: "the stream threads join a streams group and their consumers are \
                   assigned partitions by it; remove the consumer's group protocol"
                .to_string(),
        }),
        None => Ok(()),
    }
}

/// The streams group member (kstreams-group) connects as the main
/// consumer does, from its `security.protocol`, `ssl.*` and `sasl.*`
/// settings (Java's translated to librdkafka's): what it cannot honour
/// (GSSAPI, OAUTHBEARER without a token source it can use, a CA file that
/// cannot be read) fails here, not at a thread's start.
fn streams_group_member_security(main: &Settings) -> Result<(), ConfigError> {
    match kstreams_group::Security::from_client_config(|key| {
        main.get(key).map(|(_, value)| value.clone())
    }) {
        Ok(_) => Ok(()),
        Err(error) => {
            let key = match main.get("security.protocol") {
                Some((prefix, security)) => {
                    format!("{}security.protocol={security}", prefix.as_str())
                }
                None => "security.protocol=PLAINTEXT".to_string(),
            };
            Err(ConfigError::Conflict {
                key,
                with: "group.protocol=streams".to_string(),
                hint: format!("the streams group member cannot connect so: {error}"),
            })
        }
    }
}

/// Under `consumer.group.protocol=consumer` (KIP-848) librdkafka refuses the
/// classic protocol's membership settings ([`CLASSIC_ONLY`]).
fn consumer_protocol_without_classic_settings(main: &Settings) -> Result<(), ConfigError> {
    for (key, hint) in CLASSIC_ONLY {
        if let Some((prefix, _)) = main.get(key) {
            let (protocol_prefix, protocol) = &main[GROUP_PROTOCOL];
            return Err(ConfigError::Conflict {
                key: format!("{}{key}", prefix.as_str()),
                with: format!("{}group.protocol={protocol}", protocol_prefix.as_str()),
                hint: hint.to_string(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::base;
    use super::*;

    #[test]
    fn standby_replicas_need_the_streams_group_protocol() {
        let mut config = StreamsConfig::new("app", "b:1");
        config.set("num.standby.replicas", "1").unwrap();
        let text = config.validate().unwrap_err().to_string();
        assert!(text.contains("num.standby.replicas=1"), "{text}");
        assert!(text.contains("group.protocol=streams"), "{text}");
        config.set("group.protocol", "streams").unwrap();
        assert_eq!(config.validate(), Ok(()));
        assert!(config.set("num.standby.replicas", "-1").is_err());
        assert!(StreamsConfig::new("app", "b:1")
            .set("num.standby.replicas", "0")
            .is_ok());
    }

    #[test]
    fn the_consumer_group_protocol_refuses_classic_assignment_settings_in_any_order() {
        let consumer = ("consumer.group.protocol", "consumer");
        let strategy = ("consumer.partition.assignment.strategy", "range");
        for properties in [[consumer, strategy], [strategy, consumer]] {
            let mut p = base();
            p.extend(properties);
            let err = StreamsConfig::from_properties(p).unwrap_err();
            assert_eq!(
                err,
                ConfigError::Conflict {
                    key: "consumer.partition.assignment.strategy".into(),
                    with: "consumer.group.protocol=consumer".into(),
                    hint: CLASSIC_ONLY[0].1.into(),
                }
            );
            assert!(
                err.to_string().contains("consumer.group.remote.assignor"),
                "{err}"
            );
        }
        // Through main.consumer. and set on a built config, found at start.
        let config = StreamsConfig::new("app", "b:9092")
            .client_config("main.consumer.group.protocol", "CONSUMER")
            .client_config("consumer.session.timeout.ms", "6000");
        let err = config.validate().unwrap_err();
        assert!(
            err.to_string().starts_with(
                "config consumer.session.timeout.ms cannot be used with \
                 main.consumer.group.protocol=CONSUMER"
            ),
            "{err}"
        );
    }

    #[test]
    fn the_streams_group_protocol_takes_the_endpoint_and_refuses_a_consumer_protocol() {
        let mut p = base();
        p.extend([
            ("group.protocol", "STREAMS"),
            ("application.server", "host-7:8080"),
        ]);
        let c = StreamsConfig::from_properties(p).unwrap();
        assert_eq!(c.group_protocol(), GroupProtocol::Streams);
        assert_eq!(c.application_server, Some(("host-7".to_string(), 8080)));

        let mut p = base();
        p.push(("application.server", "no-port"));
        let err = StreamsConfig::from_properties(p).unwrap_err();
        assert!(err.to_string().contains("host:port"), "{err}");

        let mut p = base();
        p.extend([
            ("group.protocol", "streams"),
            ("consumer.group.protocol", "consumer"),
        ]);
        let err = StreamsConfig::from_properties(p).unwrap_err();
        assert!(
            err.to_string().contains("consumer.group.protocol=consumer")
                && err.to_string().contains("group.protocol=streams"),
            "{err}"
        );
    }

    #[test]
    fn java_security_keys_reach_every_client_translated_and_the_member_names_what_works() {
        let scram = "org.apache.kafka.common.security.scram.ScramLoginModule required \
                     username=\"app\" password=\"s3cret\";";
        let mut p = base();
        p.extend([
            ("group.protocol", "streams"),
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.jaas.config", scram),
        ]);
        let config = StreamsConfig::from_properties(p).unwrap();
        for client in KafkaClient::ALL {
            let settings = config.client_settings(client);
            assert_eq!(settings["sasl.username"].1, "app", "{client:?}");
            assert_eq!(settings["sasl.password"].1, "s3cret", "{client:?}");
            assert!(!settings.contains_key("sasl.jaas.config"), "{client:?}");
        }
        // OAUTHBEARER translates for librdkafka and the streams group
        // member alike (librdkafka's unsecured JWT here).
        let oauth = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule \
                     required unsecuredLoginStringClaim_sub=\"app\";";
        let mut p = base();
        p.extend([
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "OAUTHBEARER"),
            ("sasl.jaas.config", oauth),
        ]);
        let classic = StreamsConfig::from_properties(p.clone()).unwrap();
        let settings = classic.client_settings(KafkaClient::Producer);
        assert_eq!(
            settings["sasl.oauthbearer.config"].1,
            "principalClaimName=sub principal=app"
        );
        p.push(("group.protocol", "streams"));
        assert!(StreamsConfig::from_properties(p).is_ok());
        // OAUTHBEARER without a token source the member can use is refused
        // under group.protocol=streams, naming the keys.
        let mut p = base();
        p.extend([
            ("group.protocol", "streams"),
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "OAUTHBEARER"),
        ]);
        let err = StreamsConfig::from_properties(p).unwrap_err().to_string();
        assert!(
            err.contains("sasl.oauthbearer.method=oidc")
                && err.contains("enable.sasl.oauthbearer.unsecure.jwt=true"),
            "{err}"
        );
        // A mistake in the JAAS text is found at start, under a prefix too,
        // without showing the password.
        let config = StreamsConfig::new("app", "b:1")
            .client_config("producer.security.protocol", "SASL_SSL")
            .client_config("producer.sasl.mechanism", "PLAIN")
            .client_config("producer.sasl.jaas.config", scram);
        let err = config.validate().unwrap_err().to_string();
        assert!(
            err.starts_with("config producer.sasl.jaas.config cannot be used with"),
            "{err}"
        );
        assert!(!err.contains("s3cret"), "{err}");
    }

    #[test]
    fn the_streams_group_member_takes_the_clients_security_and_refuses_what_it_cannot_do() {
        let mut p = base();
        p.extend([
            ("group.protocol", "streams"),
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.username", "alice"),
            ("sasl.password", "secret"),
        ]);
        assert!(StreamsConfig::from_properties(p).is_ok());
        let mut p = base();
        p.extend([
            ("group.protocol", "streams"),
            ("main.consumer.security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "GSSAPI"),
        ]);
        let err = StreamsConfig::from_properties(p).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "config main.consumer.security.protocol=SASL_PLAINTEXT cannot be used with \
                 group.protocol=streams: the streams group member cannot connect so:"
            ) && err.contains("GSSAPI")
                && err.contains("SCRAM-SHA-512"),
            "{err}"
        );
    }
}
