//! `security.protocol` and the keys that go with it, read with the very
//! names librdkafka gives them, so that one configuration drives the
//! application's librdkafka clients and its streams group member alike.

use std::fmt;

use crate::error::{Error, Result};
use crate::oauth::OAuthBearer;
use crate::tls::{Tls, TlsOptions};

/// The SASL mechanisms this client speaks, for error messages.
pub(crate) const SPOKEN_MECHANISMS: &str = "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER";

/// How the client reaches the brokers (`security.protocol`).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub enum Security {
    /// `PLAINTEXT`: TCP, no encryption, no authentication.
    #[default]
    Plaintext,
    /// `SSL`: TLS, the broker's certificate verified; with a client
    /// certificate, mutual TLS.
    Ssl(Tls),
    /// `SASL_PLAINTEXT`: SASL authentication over plain TCP.
    SaslPlaintext(Sasl),
    /// `SASL_SSL`: SASL authentication over TLS.
    SaslSsl(Tls, Sasl),
}

impl Security {
    /// The security settings of a librdkafka client configuration, `get`
    /// answering a key with its value when set: `security.protocol`
    /// (`plaintext`, `ssl`, `sasl_plaintext`, `sasl_ssl`, any case),
    /// `ssl.ca.location` (a PEM file or a directory of them; unset, or
    /// `probe`: the system's CA store), `ssl.ca.pem`,
    /// `ssl.certificate.location`/`ssl.certificate.pem` with
    /// `ssl.key.location`/`ssl.key.pem` (mutual TLS; `ssl.key.password` for
    /// an encrypted PKCS#8 key) or `ssl.keystore.location` with
    /// `ssl.keystore.password` (a PKCS#12 store), `ssl.endpoint.identification.algorithm`
    /// (`https`, the default, or `none`), `enable.ssl.certificate.verification`,
    /// `sasl.mechanism` or its alias `sasl.mechanisms` (librdkafka's default
    /// is GSSAPI), `sasl.username`, `sasl.password`; for OAUTHBEARER
    /// `sasl.oauthbearer.method` and the keys of its token source
    /// ([`OAuthBearer`]: librdkafka's unsecured JWT or OIDC client
    /// credentials).
    ///
    /// The files are read here, so that a missing or unreadable one is an
    /// [`Error::Config`] naming its key before any connection is tried.
    /// Settings this client cannot honour are refused, never ignored: the
    /// GSSAPI (Kerberos), a revocation list (`ssl.crl.location`).
    pub fn from_client_config(get: impl Fn(&str) -> Option<String>) -> Result<Security> {
        let get = |key: &str| get(key).filter(|value| !value.trim().is_empty());
        let protocol = get("security.protocol").unwrap_or_else(|| "plaintext".to_owned());
        let (tls, sasl) = match protocol.trim().to_ascii_lowercase().as_str() {
            "plaintext" => (false, false),
            "ssl" => (true, false),
            "sasl_plaintext" => (false, true),
            "sasl_ssl" => (true, true),
            _ => {
                return Err(Error::Config(format!(
                    "security.protocol={protocol} is not one of plaintext, ssl, sasl_plaintext, \
                     sasl_ssl"
                )))
            }
        };
        let tls = if tls {
            Some(Tls::new(TlsOptions::from_client_config(&get)?)?)
        } else {
            None
        };
        let sasl = if sasl {
            Some(Sasl::from_client_config(&get)?)
        } else {
            None
        };
        Ok(match (tls, sasl) {
            (None, None) => Security::Plaintext,
            (Some(tls), None) => Security::Ssl(tls),
            (None, Some(sasl)) => Security::SaslPlaintext(sasl),
            (Some(tls), Some(sasl)) => Security::SaslSsl(tls, sasl),
        })
    }

    /// The `security.protocol` value, as Kafka spells it.
    pub fn protocol(&self) -> &'static str {
        match self {
            Security::Plaintext => "PLAINTEXT",
            Security::Ssl(_) => "SSL",
            Security::SaslPlaintext(_) => "SASL_PLAINTEXT",
            Security::SaslSsl(..) => "SASL_SSL",
        }
    }

    pub(crate) fn tls(&self) -> Option<&Tls> {
        match self {
            Security::Ssl(tls) | Security::SaslSsl(tls, _) => Some(tls),
            Security::Plaintext | Security::SaslPlaintext(_) => None,
        }
    }

    pub(crate) fn sasl(&self) -> Option<&Sasl> {
        match self {
            Security::SaslPlaintext(sasl) | Security::SaslSsl(_, sasl) => Some(sasl),
            Security::Plaintext | Security::Ssl(_) => None,
        }
    }
}

/// A SASL mechanism this client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SaslMechanism {
    /// `PLAIN` (RFC 4616): the password in the clear, so over TLS only in
    /// production.
    Plain,
    /// `SCRAM-SHA-256` (RFC 5802, 7677).
    ScramSha256,
    /// `SCRAM-SHA-512`.
    ScramSha512,
    /// `OAUTHBEARER` (RFC 7628, KIP-255): a bearer token, from
    /// librdkafka's unsecured JWT or OIDC client credentials.
    OAuthBearer,
}

impl SaslMechanism {
    /// Kafka's name for it (`sasl.mechanism`).
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
            SaslMechanism::OAuthBearer => "OAUTHBEARER",
        }
    }

    /// The mechanism `name` names (any case); GSSAPI and the others are
    /// refused, naming those that work.
    pub fn parse(name: &str) -> Result<SaslMechanism> {
        match name.trim().to_ascii_uppercase().as_str() {
            "PLAIN" => Ok(SaslMechanism::Plain),
            "SCRAM-SHA-256" => Ok(SaslMechanism::ScramSha256),
            "SCRAM-SHA-512" => Ok(SaslMechanism::ScramSha512),
            "OAUTHBEARER" => Ok(SaslMechanism::OAuthBearer),
            "GSSAPI" => Err(Error::Config(format!(
                "sasl.mechanism={name} (Kerberos) is not supported by the streams group member: \
                 no sound pure-Rust GSSAPI client exists to build it on; it speaks \
                 {SPOKEN_MECHANISMS} (librdkafka's default when sasl.mechanism is unset is \
                 GSSAPI: set it explicitly)"
            ))),
            _ => Err(Error::Config(format!(
                "sasl.mechanism={name} is not a SASL mechanism the streams group member speaks: \
                 use {SPOKEN_MECHANISMS}"
            ))),
        }
    }
}

impl fmt::Display for SaslMechanism {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// SASL credentials. Their `Debug` never shows the password or a token
/// source's secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Sasl {
    mechanism: SaslMechanism,
    username: String,
    password: String,
    /// OAUTHBEARER's token source.
    oauth: Option<OAuthBearer>,
}

impl Sasl {
    /// `username` and `password` for `mechanism`; neither may be empty.
    /// OAUTHBEARER takes a token source instead
    /// ([`Security::from_client_config`]).
    pub fn new(
        mechanism: SaslMechanism,
        username: impl Into<String>,
        password: impl Into<String>,
    ) -> Result<Sasl> {
        if mechanism == SaslMechanism::OAuthBearer {
            return Err(Error::Config(
                "SASL OAUTHBEARER takes a token source (sasl.oauthbearer.*), not a user name \
                 and password"
                    .to_owned(),
            ));
        }
        let (username, password) = (username.into(), password.into());
        for (key, value) in [("sasl.username", &username), ("sasl.password", &password)] {
            if value.is_empty() {
                return Err(Error::Config(format!(
                    "{key} is not set: SASL {mechanism} needs sasl.username and sasl.password"
                )));
            }
        }
        Ok(Sasl {
            mechanism,
            username,
            password,
            oauth: None,
        })
    }

    fn from_client_config(get: &impl Fn(&str) -> Option<String>) -> Result<Sasl> {
        let mechanism = match (get("sasl.mechanism"), get("sasl.mechanisms")) {
            (Some(one), Some(other)) if !one.trim().eq_ignore_ascii_case(other.trim()) => {
                return Err(Error::Config(format!(
                    "sasl.mechanism={one} and sasl.mechanisms={other} disagree (the one is \
                     librdkafka's alias of the other): set one of them"
                )))
            }
            (Some(name), _) | (None, Some(name)) => name,
            (None, None) => {
                return Err(Error::Config(format!(
                    "sasl.mechanism is not set, and librdkafka's default, GSSAPI, is not \
                     supported by the streams group member: set sasl.mechanism to one of \
                     {SPOKEN_MECHANISMS}"
                )))
            }
        };
        let mechanism = SaslMechanism::parse(&mechanism)?;
        if mechanism == SaslMechanism::OAuthBearer {
            let oauth = OAuthBearer::from_client_config(get)?;
            return Ok(Sasl {
                mechanism,
                username: oauth.principal().to_owned(),
                password: String::new(),
                oauth: Some(oauth),
            });
        }
        Sasl::new(
            mechanism,
            get("sasl.username").unwrap_or_default(),
            get("sasl.password").unwrap_or_default(),
        )
    }

    /// The mechanism.
    pub fn mechanism(&self) -> SaslMechanism {
        self.mechanism
    }

    /// The user name (OAUTHBEARER: the unsecured token's principal, or
    /// the OIDC client id).
    pub fn username(&self) -> &str {
        &self.username
    }

    /// OAUTHBEARER's token source.
    pub(crate) fn oauth(&self) -> Option<&OAuthBearer> {
        self.oauth.as_ref()
    }

    pub(crate) fn password(&self) -> &str {
        &self.password
    }
}

impl fmt::Debug for Sasl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sasl")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .field("password", &"[redacted]")
            .field("oauth", &self.oauth)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<Security> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Security::from_client_config(|key| map.get(key).cloned())
    }

    fn config_error(pairs: &[(&str, &str)]) -> String {
        match parse(pairs) {
            Err(Error::Config(message)) => message,
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn nothing_set_is_plaintext_in_any_case() {
        assert!(matches!(parse(&[]).unwrap(), Security::Plaintext));
        let plaintext = parse(&[("security.protocol", "PLAINTEXT")]).unwrap();
        assert_eq!(plaintext.protocol(), "PLAINTEXT");
        // SASL keys without a SASL protocol are ignored, as librdkafka does.
        let ignored = parse(&[
            ("security.protocol", "plaintext"),
            ("sasl.mechanism", "GSSAPI"),
        ]);
        assert!(matches!(ignored.unwrap(), Security::Plaintext));
    }

    #[test]
    fn sasl_plaintext_takes_the_mechanism_and_credentials() {
        let security = parse(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanisms", "scram-sha-512"),
            ("sasl.username", "alice"),
            ("sasl.password", "secret"),
        ])
        .unwrap();
        assert_eq!(security.protocol(), "SASL_PLAINTEXT");
        let sasl = security.sasl().unwrap();
        assert_eq!(sasl.mechanism(), SaslMechanism::ScramSha512);
        assert_eq!(sasl.username(), "alice");
        assert_eq!(sasl.password(), "secret");
        assert!(security.tls().is_none());
    }

    #[test]
    fn the_password_never_shows_in_debug() {
        let security = parse(&[
            ("security.protocol", "sasl_ssl"),
            ("sasl.mechanism", "PLAIN"),
            ("sasl.username", "alice"),
            ("sasl.password", "hunter2-very-secret"),
        ])
        .unwrap();
        let shown = format!("{security:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("alice"), "{shown}");
        let options = TlsOptions {
            key_password: Some("key-secret-too".to_owned()),
            key_pem: Some("-----BEGIN PRIVATE KEY-----".to_owned()),
            ..TlsOptions::default()
        };
        let shown = format!("{options:?}");
        assert!(!shown.contains("key-secret-too"), "{shown}");
        assert!(!shown.contains("BEGIN"), "{shown}");
    }

    #[test]
    fn ssl_defaults_to_verifying_the_certificate_and_the_host_name() {
        let security = parse(&[("security.protocol", "SSL")]).unwrap();
        let tls = security.tls().unwrap();
        assert!(tls.options().verify_hostname);
        assert!(tls.options().verify_certificate);
        assert!(security.sasl().is_none());
        let none = parse(&[
            ("security.protocol", "ssl"),
            ("ssl.endpoint.identification.algorithm", "none"),
        ])
        .unwrap();
        assert!(!none.tls().unwrap().options().verify_hostname);
        assert!(config_error(&[
            ("security.protocol", "ssl"),
            ("ssl.endpoint.identification.algorithm", "sha"),
        ])
        .contains("ssl.endpoint.identification.algorithm=sha"));
    }

    #[test]
    fn an_unknown_protocol_is_named() {
        let message = config_error(&[("security.protocol", "tls")]);
        assert!(message.contains("security.protocol=tls"), "{message}");
    }

    #[test]
    fn oauthbearer_takes_its_token_source_and_gssapi_is_refused_naming_what_works() {
        let oauth = parse(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "OAUTHBEARER"),
            ("enable.sasl.oauthbearer.unsecure.jwt", "true"),
            ("sasl.oauthbearer.config", "principal=alice scope=kstreams"),
        ])
        .unwrap();
        let sasl = oauth.sasl().unwrap();
        assert_eq!(sasl.mechanism(), SaslMechanism::OAuthBearer);
        assert_eq!(sasl.username(), "alice");
        assert!(sasl.oauth().is_some());
        // Without a token source it is refused, naming the keys.
        let message = config_error(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "OAUTHBEARER"),
        ]);
        assert!(
            message.contains("sasl.oauthbearer.method=oidc"),
            "{message}"
        );
        let message = config_error(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "GSSAPI"),
            ("sasl.username", "u"),
            ("sasl.password", "p"),
        ]);
        assert!(message.contains("GSSAPI"), "{message}");
        assert!(message.contains(SPOKEN_MECHANISMS), "{message}");
        // librdkafka's default mechanism is GSSAPI: unset is refused too.
        let message = config_error(&[("security.protocol", "SASL_PLAINTEXT")]);
        assert!(message.contains("GSSAPI"), "{message}");
        assert!(message.contains("sasl.mechanism"), "{message}");
    }

    #[test]
    fn missing_credentials_name_their_key() {
        let message = config_error(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "PLAIN"),
            ("sasl.username", "alice"),
        ]);
        assert!(message.contains("sasl.password"), "{message}");
    }

    #[test]
    fn disagreeing_mechanism_aliases_are_refused() {
        let message = config_error(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "PLAIN"),
            ("sasl.mechanisms", "SCRAM-SHA-256"),
            ("sasl.username", "u"),
            ("sasl.password", "p"),
        ]);
        assert!(message.contains("disagree"), "{message}");
        let agreeing = parse(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "PLAIN"),
            ("sasl.mechanisms", "plain"),
            ("sasl.username", "u"),
            ("sasl.password", "p"),
        ]);
        assert!(agreeing.is_ok());
    }

    #[test]
    fn unsupported_ssl_keys_are_refused_not_ignored() {
        let message = config_error(&[("security.protocol", "SSL"), ("ssl.crl.location", "/x")]);
        assert!(message.contains("ssl.crl.location"), "{message}");
        // A PKCS#12 key store is read, so one that is not there is named.
        let message = config_error(&[
            ("security.protocol", "SSL"),
            ("ssl.keystore.location", "/nonexistent/client.p12"),
        ]);
        assert!(
            message.contains("ssl.keystore.location=/nonexistent/client.p12"),
            "{message}"
        );
    }

    #[test]
    fn a_missing_ca_file_names_its_key() {
        let message = config_error(&[
            ("security.protocol", "SSL"),
            ("ssl.ca.location", "/nonexistent/ca.pem"),
        ]);
        assert!(message.contains("ssl.ca.location"), "{message}");
        assert!(message.contains("/nonexistent/ca.pem"), "{message}");
    }
}
