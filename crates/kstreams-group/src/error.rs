//! The crate's one error type.

use std::time::Duration;

/// Why a group operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No TCP connection could be made.
    #[error("cannot connect to {address}: {source}")]
    Connect {
        /// `host:port` tried.
        address: String,
        /// Why.
        source: std::io::Error,
    },
    /// An open connection failed while sending or receiving.
    #[error("connection to {address} failed: {source}")]
    Io {
        /// `host:port` of the broker.
        address: String,
        /// Why.
        source: std::io::Error,
    },
    /// A request got no answer in time.
    #[error("{address} did not answer {api} within {timeout:?}")]
    Timeout {
        /// `host:port` of the broker.
        address: String,
        /// The request's name, as Kafka calls it.
        api: &'static str,
        /// How long it waited.
        timeout: Duration,
    },
    /// Bytes that are not the Kafka protocol, or a message that cannot be
    /// encoded.
    #[error("Kafka protocol error with {address}: {detail}")]
    Protocol {
        /// `host:port` of the broker.
        address: String,
        /// What was wrong.
        detail: String,
    },
    /// The broker does not serve a request this client needs in any version
    /// this client speaks: for the streams group requests, a broker older than
    /// Kafka 4.2 or one without `streams` in `group.coordinator.rebalance.protocols`.
    #[error(
        "the broker at {address} does not support {api}{hint}",
        hint = if api.starts_with("StreamsGroup") {
            " (the streams group protocol needs Kafka 4.2 or newer with `streams` in \
             group.coordinator.rebalance.protocols)"
        } else {
            ""
        }
    )]
    Unsupported {
        /// `host:port` of the broker.
        address: String,
        /// The request's name, as Kafka calls it.
        api: &'static str,
    },
    /// SASL authentication failed: the broker refused the credentials
    /// (SaslAuthenticate's error, a wrong password or an expired or
    /// insufficient OAUTHBEARER token among them), the broker failed
    /// SCRAM's proof that it holds the password, or no OAUTHBEARER token
    /// could be had.
    #[error(
        "SASL {mechanism} authentication as {username:?} failed at {address}: {reason}; {hint}"
    )]
    Authentication {
        /// `host:port` of the broker.
        address: String,
        /// The mechanism, as Kafka names it.
        mechanism: &'static str,
        /// `sasl.username`.
        username: String,
        /// The broker's message and error code, or what failed on this side.
        reason: String,
        /// What to check, naming the keys.
        hint: String,
    },
    /// The broker does not enable the SASL mechanism asked for.
    #[error(
        "the broker at {address} does not enable SASL {mechanism} (it enables: {enabled}); set \
         sasl.mechanism to one of those (this client speaks PLAIN, SCRAM-SHA-256, \
         SCRAM-SHA-512 and OAUTHBEARER)"
    )]
    SaslMechanism {
        /// `host:port` of the broker.
        address: String,
        /// The mechanism asked for.
        mechanism: &'static str,
        /// The broker's enabled mechanisms.
        enabled: String,
    },
    /// The broker's TLS certificate is not trusted: signed by a CA this
    /// client does not trust, expired, or otherwise invalid.
    #[error("the TLS certificate of the broker at {address} is not trusted: {reason}; {fix}")]
    UntrustedCertificate {
        /// `host:port` of the broker.
        address: String,
        /// Why.
        reason: String,
        /// What to change, naming the key.
        fix: String,
    },
    /// The broker's TLS certificate is good but not for the host name
    /// connected to (`ssl.endpoint.identification.algorithm=https`).
    #[error(
        "the TLS certificate of the broker at {address} is not valid for the host name \
         {host}{listed}; connect by a name the certificate lists (bootstrap.servers, and the \
         broker's advertised.listeners), or set ssl.endpoint.identification.algorithm=none to \
         verify the certificate's chain only",
        listed = if presented.is_empty() {
            String::new()
        } else {
            format!(" (it is valid for {})", presented.join(", "))
        }
    )]
    CertificateHostname {
        /// `host:port` of the broker.
        address: String,
        /// The host name (or IP address) verified.
        host: String,
        /// The names the certificate lists, when known.
        presented: Vec<String>,
    },
    /// The TLS handshake failed otherwise: the broker refused this client's
    /// certificate, or the listener does not speak TLS.
    #[error("TLS with the broker at {address} failed: {reason}; {fix}")]
    Tls {
        /// `host:port` of the broker.
        address: String,
        /// Why.
        reason: String,
        /// What to change, naming the key.
        fix: String,
    },
    /// The broker answered with an error code.
    #[error("{api} failed: {name} (code {code}){}", message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    Broker {
        /// The request's name, as Kafka calls it.
        api: &'static str,
        /// Kafka's error code.
        code: i16,
        /// Kafka's name for the code, e.g. `FencedMemberEpoch`.
        name: String,
        /// The broker's message, when it sent one.
        message: Option<String>,
    },
    /// The group refused this static member's `group.instance.id`
    /// (UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID): another member holds
    /// it. Kafka's clients stop on it, and so does this one.
    #[error(
        "streams group {group_id}: group.instance.id={instance_id} {reason} ({name}, code \
         {code}); {fix}"
    )]
    InstanceId {
        /// The group.
        group_id: String,
        /// The static member's instance id.
        instance_id: String,
        /// Kafka's error code.
        code: i16,
        /// Kafka's name for the code.
        name: &'static str,
        /// What happened.
        reason: &'static str,
        /// What to do.
        fix: &'static str,
    },
    /// A configuration value that cannot work.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The topology cannot be described to the broker as it stands.
    #[error("invalid topology: {0}")]
    InvalidTopology(String),
    /// None of the bootstrap brokers could be used.
    #[error("no broker of {bootstrap} could be used; the last said: {last}")]
    NoBroker {
        /// The bootstrap list.
        bootstrap: String,
        /// The last broker's error.
        last: Box<Error>,
    },
    /// The member's heartbeat task has ended (it was closed, or failed).
    #[error("the group member has stopped")]
    Stopped,
    /// A blocking close did not see the member leave in time (it keeps
    /// trying in the background; the broker drops it after its session
    /// timeout otherwise).
    #[error("the group member did not leave within {0:?}")]
    CloseTimedOut(Duration),
    /// The member's own tokio runtime could not be started.
    #[error("cannot start the group member's runtime: {0}")]
    Runtime(std::io::Error),
}

impl Error {
    /// An [`Error::Broker`] for `code` answered to `api`.
    pub(crate) fn broker(api: &'static str, code: i16, message: Option<String>) -> Error {
        let name = format!("{:?}", kacrab_protocol::generated::ErrorCode::from(code));
        Error::Broker {
            api,
            code,
            name,
            message,
        }
    }

    /// `Ok` for error code 0 (NONE), else the broker's error for `api`.
    pub(crate) fn check(
        api: &'static str,
        code: i16,
        message: Option<&kacrab_protocol::KafkaString>,
    ) -> Result<()> {
        if code == 0 {
            return Ok(());
        }
        Err(Error::broker(
            api,
            code,
            message.map(|m| m.as_str().to_owned()),
        ))
    }

    /// Whether retrying cannot help: a refused authentication or TLS
    /// handshake, or a configuration that cannot work. A member stops on
    /// such an error (its [`close`](crate::StreamsGroupMember::close) returns
    /// it) rather than retry forever.
    pub fn is_fatal(&self) -> bool {
        match self {
            Error::Authentication { .. }
            | Error::SaslMechanism { .. }
            | Error::UntrustedCertificate { .. }
            | Error::CertificateHostname { .. }
            | Error::Tls { .. }
            | Error::InstanceId { .. }
            | Error::Config(_)
            | Error::InvalidTopology(_) => true,
            Error::NoBroker { last, .. } => last.is_fatal(),
            _ => false,
        }
    }

    /// Kafka's error code when the broker answered with one.
    pub fn broker_code(&self) -> Option<i16> {
        match self {
            Error::Broker { code, .. } | Error::InstanceId { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
