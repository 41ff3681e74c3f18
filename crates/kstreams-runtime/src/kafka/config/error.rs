//! `ConfigError`: what is wrong with a configuration, naming the key and how
//! to fix it (Kafka's `ConfigException`).

/// A configuration mistake, naming the key and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A required key has no value.
    #[error("missing required config {key}: {hint}")]
    Missing {
        /// The key.
        key: &'static str,
        /// How to set it.
        hint: &'static str,
    },
    /// A key kstreams does not know.
    #[error(
        "unknown config {key}{}: neither a Kafka Streams setting nor a librdkafka client property",
        suggestion.map(|s| format!(" (did you mean {s}?)")).unwrap_or_default()
    )]
    Unknown {
        /// The key as given.
        key: String,
        /// The known key it is closest to, when it looks like a typo.
        suggestion: Option<&'static str>,
    },
    /// A Kafka Streams config whose behaviour kstreams does not have.
    #[error("config {key}={value} is not supported: {why}")]
    Unsupported {
        /// The key.
        key: String,
        /// The value given.
        value: String,
        /// What kstreams does instead, and what to do.
        why: &'static str,
    },
    /// A value that does not parse or is out of range.
    #[error("invalid value {value:?} for config {key}: {expected}")]
    Invalid {
        /// The key.
        key: String,
        /// The value given.
        value: String,
        /// What is accepted.
        expected: String,
    },
    /// A Kafka client setting librdkafka refuses.
    #[error("config {key}={value} is refused by librdkafka: {message}; {hint}")]
    Client {
        /// The key as written, with its prefix.
        key: String,
        /// The value given.
        value: String,
        /// librdkafka's reason.
        message: String,
        /// How to fix it.
        hint: String,
    },
    /// A mistake in a properties file or text, with where it is: the file
    /// (or what the text came from) and the line of the key.
    #[error("{origin}{}: {error}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    InProperties {
        /// The file's path, or what the text came from.
        origin: String,
        /// The line (1-based) of the key, or of the syntax error.
        line: Option<usize>,
        /// What is wrong there.
        error: Box<ConfigError>,
    },
    /// Properties text that is not Java `.properties` syntax, or a file
    /// that cannot be read.
    #[error("{message}")]
    Unreadable {
        /// What went wrong, and what to do.
        message: String,
    },
    /// The cluster refused the credentials or certificates configured: a
    /// SASL login failed, or the TLS handshake (the broker's certificate not
    /// trusted, say). The message names the cause and the keys to check.
    #[error("{message}")]
    Refused {
        /// What failed, the broker's or librdkafka's reason, and what to
        /// check.
        message: String,
    },
    /// Two settings that cannot be used together.
    #[error("config {key} cannot be used with {with}: {hint}")]
    Conflict {
        /// The key that has to go.
        key: String,
        /// The setting it conflicts with, as `key=value`.
        with: String,
        /// What to do instead.
        hint: String,
    },
}

impl ConfigError {
    /// The key the mistake is about, as written.
    pub(super) fn key(&self) -> Option<String> {
        match self {
            ConfigError::Missing { key, .. } => Some(key.to_string()),
            ConfigError::Unknown { key, .. }
            | ConfigError::Unsupported { key, .. }
            | ConfigError::Invalid { key, .. }
            | ConfigError::Client { key, .. }
            | ConfigError::Conflict { key, .. } => Some(key.clone()),
            ConfigError::InProperties { error, .. } => error.key(),
            ConfigError::Unreadable { .. } | ConfigError::Refused { .. } => None,
        }
    }
}
