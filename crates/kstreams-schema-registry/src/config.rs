//! Settings under the keys of Confluent's serializers (Avro, Protobuf and
//! JSON Schema share them), so that a ported Java config keeps working.
//!
//! ```
//! use kstreams_schema_registry::{RegistryConfig, SerdeConfig, SubjectNameStrategy};
//!
//! let properties = [
//!     ("schema.registry.url", "http://registry:8081"),
//!     ("auto.register.schemas", "false"),
//!     ("value.subject.name.strategy", "RecordNameStrategy"),
//! ];
//! let registry = RegistryConfig::from_properties(properties)?;
//! let serde = SerdeConfig::from_properties(properties)?;
//! assert_eq!(registry.urls, ["http://registry:8081"]);
//! assert_eq!(serde.subject_name_strategy(false), SubjectNameStrategy::RecordName);
//! # Ok::<(), kstreams_schema_registry::Error>(())
//! ```
//!
//! Keys this crate does not know are ignored: in Kafka Streams the serdes get
//! the whole application config, most of which is not theirs.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::strategy::SubjectNameStrategy;

/// `schema.registry.url`: one or more comma-separated registry URLs.
pub const SCHEMA_REGISTRY_URL: &str = "schema.registry.url";
/// `basic.auth.credentials.source`: `USER_INFO` or `URL`.
pub const BASIC_AUTH_CREDENTIALS_SOURCE: &str = "basic.auth.credentials.source";
/// `basic.auth.user.info`: `user:password`.
pub const BASIC_AUTH_USER_INFO: &str = "basic.auth.user.info";
/// `http.connect.timeout.ms`.
pub const HTTP_CONNECT_TIMEOUT_MS: &str = "http.connect.timeout.ms";
/// `http.read.timeout.ms`.
pub const HTTP_READ_TIMEOUT_MS: &str = "http.read.timeout.ms";
/// `auto.register.schemas`: whether a serializer registers its schema.
pub const AUTO_REGISTER_SCHEMAS: &str = "auto.register.schemas";
/// `use.latest.version`: whether a serializer that does not register writes
/// with the subject's latest schema instead of its own.
pub const USE_LATEST_VERSION: &str = "use.latest.version";
/// `key.subject.name.strategy`.
pub const KEY_SUBJECT_NAME_STRATEGY: &str = "key.subject.name.strategy";
/// `value.subject.name.strategy`.
pub const VALUE_SUBJECT_NAME_STRATEGY: &str = "value.subject.name.strategy";

/// Where the registry is and how to reach it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistryConfig {
    /// Base URLs, tried in order until one answers (Confluent's failover).
    /// For Apicurio Registry's Confluent-compatible API this includes the
    /// path, e.g. `http://host:8080/apis/ccompat/v7`.
    pub urls: Vec<String>,
    /// HTTP basic auth user and password.
    pub basic_auth: Option<(String, String)>,
    /// How long to wait for a connection (Confluent's default: 60 s).
    pub connect_timeout: Duration,
    /// How long to wait for an answer (Confluent's default: 60 s).
    pub read_timeout: Duration,
}

impl RegistryConfig {
    /// A registry at `url` (one or more, comma-separated), without auth.
    pub fn new(url: &str) -> Self {
        RegistryConfig {
            urls: split_urls(url),
            basic_auth: None,
            connect_timeout: Duration::from_secs(60),
            read_timeout: Duration::from_secs(60),
        }
    }

    /// Reads [`SCHEMA_REGISTRY_URL`] (required), the basic auth keys and the
    /// HTTP timeouts.
    ///
    /// Credentials come from [`BASIC_AUTH_USER_INFO`] when it is set, or
    /// with `basic.auth.credentials.source=URL` from the URL's user info
    /// (`http://user:password@host`). `SASL_INHERIT` is not supported.
    pub fn from_properties<'a>(
        properties: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self> {
        let mut url = None;
        let mut source = None;
        let mut user_info = None;
        let mut connect = None;
        let mut read = None;
        for (key, value) in properties {
            match key.trim() {
                SCHEMA_REGISTRY_URL => url = Some(value),
                BASIC_AUTH_CREDENTIALS_SOURCE => source = Some(value.trim()),
                BASIC_AUTH_USER_INFO => user_info = Some(value),
                HTTP_CONNECT_TIMEOUT_MS => connect = Some(millis(key, value)?),
                HTTP_READ_TIMEOUT_MS => read = Some(millis(key, value)?),
                _ => {}
            }
        }
        let url = url.ok_or_else(|| Error::Config {
            key: SCHEMA_REGISTRY_URL.into(),
            message: "missing: the serde needs the registry's address".into(),
        })?;
        let mut config = RegistryConfig::new(url);
        if config.urls.is_empty() {
            return Err(Error::Config {
                key: SCHEMA_REGISTRY_URL.into(),
                message: format!("`{url}` names no URL"),
            });
        }
        config.connect_timeout = connect.unwrap_or(config.connect_timeout);
        config.read_timeout = read.unwrap_or(config.read_timeout);
        config.basic_auth = match (source.map(str::to_ascii_uppercase).as_deref(), user_info) {
            (Some("URL"), _) => config.take_url_user_info(),
            (None | Some("USER_INFO"), Some(info)) => Some(split_user_info(info)?),
            (Some("USER_INFO"), None) => {
                return Err(Error::Config {
                    key: BASIC_AUTH_USER_INFO.into(),
                    message: "missing, but basic.auth.credentials.source is USER_INFO".into(),
                })
            }
            (None, None) => config.take_url_user_info(),
            (Some(other), _) => {
                return Err(Error::Config {
                    key: BASIC_AUTH_CREDENTIALS_SOURCE.into(),
                    message: format!("`{other}` is not supported; use USER_INFO or URL"),
                })
            }
        };
        Ok(config)
    }

    /// Removes `user:password@` from the URLs and returns the first found.
    fn take_url_user_info(&mut self) -> Option<(String, String)> {
        let mut found = None;
        for url in &mut self.urls {
            let Some((scheme, rest)) = url.split_once("://") else {
                continue;
            };
            let authority_end = rest.find('/').unwrap_or(rest.len());
            let Some(at) = rest[..authority_end].rfind('@') else {
                continue;
            };
            let info = &rest[..at];
            if found.is_none() {
                found = split_user_info(info).ok();
            }
            *url = format!("{scheme}://{}", &rest[at + 1..]);
        }
        found
    }
}

/// How a serializer picks the schema id it writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SerdeConfig {
    /// Register the serializer's schema under its subject (Confluent's
    /// default: true). When false the schema must already be registered.
    pub auto_register_schemas: bool,
    /// Write with the subject's latest registered schema (default: false).
    /// As in Confluent's serializer it applies only with
    /// `auto.register.schemas=false`: registering comes first.
    pub use_latest_version: bool,
    /// Subjects of key schemas.
    pub key_subject_name_strategy: SubjectNameStrategy,
    /// Subjects of value schemas.
    pub value_subject_name_strategy: SubjectNameStrategy,
}

impl Default for SerdeConfig {
    fn default() -> Self {
        SerdeConfig {
            auto_register_schemas: true,
            use_latest_version: false,
            key_subject_name_strategy: SubjectNameStrategy::TopicName,
            value_subject_name_strategy: SubjectNameStrategy::TopicName,
        }
    }
}

impl SerdeConfig {
    /// Reads [`AUTO_REGISTER_SCHEMAS`], [`USE_LATEST_VERSION`] and the two
    /// subject name strategy keys; the others keep their defaults.
    pub fn from_properties<'a>(
        properties: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self> {
        let mut config = SerdeConfig::default();
        for (key, value) in properties {
            let key = key.trim();
            match key {
                AUTO_REGISTER_SCHEMAS => config.auto_register_schemas = boolean(key, value)?,
                USE_LATEST_VERSION => config.use_latest_version = boolean(key, value)?,
                KEY_SUBJECT_NAME_STRATEGY => {
                    config.key_subject_name_strategy = SubjectNameStrategy::from_config(key, value)?
                }
                VALUE_SUBJECT_NAME_STRATEGY => {
                    config.value_subject_name_strategy =
                        SubjectNameStrategy::from_config(key, value)?
                }
                _ => {}
            }
        }
        Ok(config)
    }

    /// The strategy for keys or for values.
    pub fn subject_name_strategy(&self, is_key: bool) -> SubjectNameStrategy {
        if is_key {
            self.key_subject_name_strategy
        } else {
            self.value_subject_name_strategy
        }
    }
}

fn split_urls(urls: &str) -> Vec<String> {
    urls.split(',')
        .map(|url| url.trim().trim_end_matches('/'))
        .filter(|url| !url.is_empty())
        .map(str::to_owned)
        .collect()
}

fn split_user_info(info: &str) -> Result<(String, String)> {
    info.split_once(':')
        .map(|(user, password)| (user.to_owned(), password.to_owned()))
        .ok_or_else(|| Error::Config {
            key: BASIC_AUTH_USER_INFO.into(),
            message: "expected `user:password`".into(),
        })
}

/// As Java's ConfigDef reads a boolean: `true` or `false`, any case.
fn boolean(key: &str, value: &str) -> Result<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(Error::Config {
            key: key.into(),
            message: format!("expected true or false, got `{value}`"),
        }),
    }
}

fn millis(key: &str, value: &str) -> Result<Duration> {
    value
        .trim()
        .parse()
        .map(Duration::from_millis)
        .map_err(|_| Error::Config {
            key: key.into(),
            message: format!("expected milliseconds, got `{value}`"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_urls_auth_and_timeouts() {
        let config = RegistryConfig::from_properties([
            ("schema.registry.url", "http://a:8081/, http://b:8081"),
            ("basic.auth.credentials.source", "USER_INFO"),
            ("basic.auth.user.info", "me:se:cret"),
            ("http.read.timeout.ms", "1500"),
            ("application.id", "ignored"),
        ])
        .unwrap();
        assert_eq!(config.urls, ["http://a:8081", "http://b:8081"]);
        assert_eq!(config.basic_auth, Some(("me".into(), "se:cret".into())));
        assert_eq!(config.read_timeout, Duration::from_millis(1500));
        assert_eq!(config.connect_timeout, Duration::from_secs(60));
    }

    #[test]
    fn credentials_from_the_url() {
        let config = RegistryConfig::from_properties([
            (
                "schema.registry.url",
                "https://me:pw@registry:8081/apis/ccompat/v7",
            ),
            ("basic.auth.credentials.source", "URL"),
        ])
        .unwrap();
        assert_eq!(config.urls, ["https://registry:8081/apis/ccompat/v7"]);
        assert_eq!(config.basic_auth, Some(("me".into(), "pw".into())));
    }

    #[test]
    fn bad_registry_configs_name_their_key() {
        let error = |props: &[(&str, &str)]| {
            RegistryConfig::from_properties(props.iter().copied())
                .unwrap_err()
                .to_string()
        };
        assert!(error(&[]).contains("schema.registry.url"));
        assert!(error(&[("schema.registry.url", " , ")]).contains("names no URL"));
        let sasl = error(&[
            ("schema.registry.url", "http://a"),
            ("basic.auth.credentials.source", "SASL_INHERIT"),
        ]);
        assert!(sasl.contains("not supported"), "{sasl}");
        let missing = error(&[
            ("schema.registry.url", "http://a"),
            ("basic.auth.credentials.source", "USER_INFO"),
        ]);
        assert!(missing.contains("basic.auth.user.info"), "{missing}");
        assert!(error(&[
            ("schema.registry.url", "http://a"),
            ("basic.auth.user.info", "nocolon")
        ])
        .contains("user:password"));
    }

    #[test]
    fn serde_settings() {
        assert_eq!(
            SerdeConfig::from_properties([]).unwrap(),
            SerdeConfig::default()
        );
        let config = SerdeConfig::from_properties([
            ("auto.register.schemas", "FALSE"),
            ("use.latest.version", "true"),
            (
                "value.subject.name.strategy",
                "io.confluent.kafka.serializers.subject.RecordNameStrategy",
            ),
        ])
        .unwrap();
        assert!(!config.auto_register_schemas && config.use_latest_version);
        assert_eq!(
            config.subject_name_strategy(false),
            SubjectNameStrategy::RecordName
        );
        assert_eq!(
            config.subject_name_strategy(true),
            SubjectNameStrategy::TopicName
        );
        let error = SerdeConfig::from_properties([("auto.register.schemas", "yes")]).unwrap_err();
        assert!(
            error.to_string().contains("auto.register.schemas"),
            "{error}"
        );
    }
}
