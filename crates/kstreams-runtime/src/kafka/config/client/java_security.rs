//! Java clients' security settings, translated to librdkafka's, so that a
//! Kafka Streams application's `streams.properties` runs unchanged:
//! `sasl.jaas.config` (PlainLoginModule, ScramLoginModule,
//! OAuthBearerLoginModule, Krb5LoginModule) and the `ssl.truststore.*` and
//! `ssl.keystore.*` stores of type PEM or PKCS12, files or inline PEM. What
//! cannot be translated (a JKS store, an unknown login module) is an error
//! naming the key and the fix, never ignored. The JAAS text is read and
//! translated in `jaas`, the stores in `stores`; here are the keys they
//! take, the checks of a value on its own, and the one translation.
//!
//! One translation, applied where a client's settings are resolved
//! ([`StreamsConfig::client_settings`](super::super::StreamsConfig)): every
//! librdkafka client, and the streams group member (which connects with the
//! main consumer's settings), see the same librdkafka keys. A translated key
//! keeps the prefix of the Java key it came from.

use std::collections::BTreeMap;

use super::ClientPrefix;
use crate::kafka::config::ConfigError;

mod jaas;
mod stores;

use jaas::{translate_jaas, SASL_JAAS_CONFIG};
use stores::{
    translate_keystore, translate_truststore, StoreType, KEYSTORE_CERTIFICATE_CHAIN, KEYSTORE_KEY,
    KEYSTORE_TYPE, TRUSTSTORE_CERTIFICATES, TRUSTSTORE_LOCATION, TRUSTSTORE_PASSWORD,
    TRUSTSTORE_TYPE,
};

type Settings = BTreeMap<String, (ClientPrefix, String)>;

/// The Java keys translated here: librdkafka has none of them.
/// (`ssl.keystore.location` and `ssl.keystore.password` are librdkafka's
/// too, for a PKCS#12 store: they stay, or become PEM keys.)
const JAVA_KEYS: [&str; 8] = [
    SASL_JAAS_CONFIG,
    TRUSTSTORE_TYPE,
    TRUSTSTORE_LOCATION,
    TRUSTSTORE_PASSWORD,
    TRUSTSTORE_CERTIFICATES,
    KEYSTORE_TYPE,
    KEYSTORE_CERTIFICATE_CHAIN,
    KEYSTORE_KEY,
];

/// What an error shows instead of a value that holds a secret.
const NOT_SHOWN: &str = "[not shown: it holds a secret]";

/// Whether `key` is a Java security setting translated here.
pub(super) fn is_java_security_key(key: &str) -> bool {
    JAVA_KEYS.contains(&key)
}

/// librdkafka's spelling of a Java value where they differ: Java turns the
/// broker host name check off with an empty
/// `ssl.endpoint.identification.algorithm`, librdkafka with `none`.
pub(super) fn librdkafka_value(key: &str, value: &str) -> Option<&'static str> {
    (key == "ssl.endpoint.identification.algorithm" && value.trim().is_empty()).then_some("none")
}

/// Checks a Java security setting on its own, when it is set (`written` is
/// the key with its prefix): the JAAS text's syntax and login module, a
/// store type, inline PEM. What depends on other keys (the mechanism, the
/// store's file) is checked by [`translate`].
pub(super) fn check(written: &str, key: &str, value: &str) -> Result<(), ConfigError> {
    let invalid = |value: &str, expected: String| ConfigError::Invalid {
        key: written.to_string(),
        value: value.to_string(),
        expected,
    };
    match key {
        SASL_JAAS_CONFIG => {
            jaas::check(value).map_err(|e| invalid(NOT_SHOWN, e))?;
        }
        TRUSTSTORE_TYPE | KEYSTORE_TYPE => {
            StoreType::parse(value).map_err(|e| invalid(value, e))?;
        }
        TRUSTSTORE_CERTIFICATES | KEYSTORE_CERTIFICATE_CHAIN | KEYSTORE_KEY
            if !value.contains("-----BEGIN ") =>
        {
            let shown = if key == KEYSTORE_KEY {
                NOT_SHOWN
            } else {
                value
            };
            return Err(invalid(
                shown,
                "PEM text (-----BEGIN ...-----), with ssl.*store.type=PEM".to_string(),
            ));
        }
        _ => {}
    }
    Ok(())
}

/// Replaces the Java security settings among a client's `settings` by
/// librdkafka's. On an error the Java keys are all removed all the same.
pub(super) fn translate(settings: &mut Settings) -> Result<(), ConfigError> {
    let result = translate_jaas(settings)
        .and_then(|()| translate_truststore(settings))
        .and_then(|()| translate_keystore(settings));
    for key in JAVA_KEYS {
        settings.remove(key);
    }
    result
}

/// `key` as written, with its prefix.
fn written(prefix: ClientPrefix, key: &str) -> String {
    format!("{}{key}", prefix.as_str())
}

/// Sets librdkafka's `key` to `value`, translated from `source` (a Java
/// key as written); a different value set for `key` itself is a conflict.
fn put(
    settings: &mut Settings,
    prefix: ClientPrefix,
    source: &str,
    key: &str,
    value: String,
) -> Result<(), ConfigError> {
    if let Some((given_prefix, given)) = settings.get(key) {
        if *given != value {
            return Err(ConfigError::Conflict {
                key: written(*given_prefix, key),
                with: source.to_string(),
                hint: format!(
                    "{source} is translated to librdkafka's {key}, which is set to something \
                     else: keep one of the two"
                ),
            });
        }
    }
    settings.insert(key.to_string(), (prefix, value));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Settings {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), (ClientPrefix::Unprefixed, v.to_string())))
            .collect()
    }

    /// `pairs`, as one client's settings, translated.
    pub(super) fn translated(
        pairs: &[(&str, &str)],
    ) -> Result<BTreeMap<String, String>, ConfigError> {
        let mut s = settings(pairs);
        translate(&mut s)?;
        Ok(s.into_iter().map(|(k, (_, v))| (k, v)).collect())
    }

    pub(super) const SCRAM: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";
    pub(super) const PLAIN: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";
    pub(super) const OAUTH: &str =
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";

    #[test]
    fn single_values_are_checked_when_set_without_showing_secrets() {
        let jaas = format!("{SCRAM} username=\"u\" password=\"hunter2\";");
        let text = check(SASL_JAAS_CONFIG, SASL_JAAS_CONFIG, &jaas)
            .unwrap_err()
            .to_string();
        assert!(
            text.contains("sasl.jaas.config") && !text.contains("hunter2"),
            "{text}"
        );
        assert!(check("x", TRUSTSTORE_TYPE, "JCEKS").is_err());
        assert!(check("x", TRUSTSTORE_TYPE, "pkcs12").is_ok());
        let text = check(KEYSTORE_KEY, KEYSTORE_KEY, "secret-bytes")
            .unwrap_err()
            .to_string();
        assert!(!text.contains("secret-bytes"), "{text}");
        assert_eq!(
            librdkafka_value("ssl.endpoint.identification.algorithm", ""),
            Some("none")
        );
        assert_eq!(
            librdkafka_value("ssl.endpoint.identification.algorithm", "https"),
            None
        );
    }
}
