//! The listeners of the test cluster a scenario's clients connect to: its
//! plaintext one (`--bootstrap`), and the secured ones `cargo xtask kafka
//! start` adds beside it, found through the variables `cargo xtask chaos`
//! passes (`KSTREAMS_SASL_SSL_BOOTSTRAP`, `KSTREAMS_MTLS_*`,
//! `KSTREAMS_OAUTH_*`, ...). Every client of a run (the app's librdkafka
//! clients and streams group member, the input's producer, the verifier's
//! reader, the admin calls) connects with the same keys, the ones a user
//! sets.

use std::future::Future;
use std::path::Path;

use kstreams::embedded::rdkafka::ClientConfig;

/// How a run's clients authenticate and encrypt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Security {
    /// `PLAINTEXT`, the listener `--bootstrap` names.
    Plaintext,
    /// `SASL_SSL` with SCRAM-SHA-512: the test CA verifies the broker.
    ScramSha512,
    /// `SSL` with a client certificate of the test CA (mutual TLS).
    MutualTls,
    /// `SASL_SSL` with OAUTHBEARER: librdkafka's unsecured JWT, which the
    /// broker's unsecured-JWT validator accepts with the scope it requires.
    OAuthBearer,
}

impl Security {
    /// Every one, in the order a scenario runs them.
    pub(crate) const ALL: [Security; 4] = [
        Security::Plaintext,
        Security::ScramSha512,
        Security::MutualTls,
        Security::OAuthBearer,
    ];

    /// The name in a run's name (and `--only`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Security::Plaintext => "plaintext",
            Security::ScramSha512 => "sasl-ssl-scram512",
            Security::MutualTls => "mtls",
            Security::OAuthBearer => "oauthbearer",
        }
    }
}

/// Where a run's clients connect, and the client keys that get them in.
#[derive(Debug, Clone)]
pub(crate) struct Listener {
    pub bootstrap: String,
    /// librdkafka's keys of the listener's security (none in plaintext),
    /// set on every client as given.
    pub keys: Vec<(&'static str, String)>,
}

/// The principal of the OAUTHBEARER runs' unsecured JWTs.
const OAUTH_PRINCIPAL: &str = "kstreams-chaos";

impl Listener {
    /// The plaintext listener at `bootstrap`.
    pub(crate) fn plaintext(bootstrap: &str) -> Listener {
        Listener {
            bootstrap: bootstrap.to_string(),
            keys: Vec::new(),
        }
    }

    /// The listener of `security`: `plaintext` itself, or a secured one
    /// from the variables `cargo xtask kafka status` prints; an error
    /// naming the variable that is missing.
    pub(crate) fn of(security: Security, plaintext: &str) -> Result<Listener, String> {
        Listener::from_variables(security, plaintext, |name| std::env::var(name).ok())
    }

    fn from_variables(
        security: Security,
        plaintext: &str,
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<Listener, String> {
        let var = |name: &str| {
            get(name).filter(|v| !v.trim().is_empty()).ok_or_else(|| {
                format!(
                    "{name} is not set: the {} run needs the cluster's secured listeners \
                     (`cargo xtask kafka start` makes them; `cargo xtask chaos` passes them, \
                     and `cargo xtask kafka status` prints them)",
                    security.name()
                )
            })
        };
        let (bootstrap, keys) = match security {
            Security::Plaintext => return Ok(Listener::plaintext(plaintext)),
            Security::ScramSha512 => (
                var("KSTREAMS_SASL_SSL_BOOTSTRAP")?,
                vec![
                    ("security.protocol", "SASL_SSL".to_string()),
                    ("sasl.mechanism", "SCRAM-SHA-512".to_string()),
                    ("sasl.username", var("KSTREAMS_SASL_USERNAME")?),
                    ("sasl.password", var("KSTREAMS_SASL_PASSWORD")?),
                    ("ssl.ca.location", var("KSTREAMS_SASL_SSL_CA")?),
                ],
            ),
            Security::MutualTls => (
                var("KSTREAMS_MTLS_BOOTSTRAP")?,
                vec![
                    ("security.protocol", "SSL".to_string()),
                    ("ssl.ca.location", var("KSTREAMS_MTLS_CA")?),
                    (
                        "ssl.certificate.location",
                        var("KSTREAMS_MTLS_CERTIFICATE")?,
                    ),
                    ("ssl.key.location", var("KSTREAMS_MTLS_KEY")?),
                ],
            ),
            Security::OAuthBearer => (
                var("KSTREAMS_OAUTH_BOOTSTRAP")?,
                vec![
                    ("security.protocol", "SASL_SSL".to_string()),
                    ("sasl.mechanism", "OAUTHBEARER".to_string()),
                    // The same token source for librdkafka's clients and
                    // the streams group member (kstreams-group's oauth.rs
                    // reads these two keys as librdkafka does).
                    ("enable.sasl.oauthbearer.unsecure.jwt", "true".to_string()),
                    (
                        "sasl.oauthbearer.config",
                        format!(
                            "principal={OAUTH_PRINCIPAL} scope={}",
                            var("KSTREAMS_OAUTH_SCOPE")?
                        ),
                    ),
                    // The OAUTHBEARER listener's certificate is the test
                    // CA's, as the SASL_SSL one's.
                    ("ssl.ca.location", var("KSTREAMS_SASL_SSL_CA")?),
                ],
            ),
        };
        Ok(Listener { bootstrap, keys })
    }

    /// A librdkafka configuration that reaches the listener.
    pub(crate) fn client_config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap);
        for (key, value) in &self.keys {
            config.set(*key, value);
        }
        config
    }

    /// Writes the keys as `key=value` lines, which the app reads with
    /// `security=FILE`: a password stays off the command line, where `ps`
    /// would show it.
    pub(crate) fn write_keys(&self, path: &Path) -> std::io::Result<()> {
        let lines: String = self
            .keys
            .iter()
            .map(|(key, value)| format!("{key}={value}\n"))
            .collect();
        std::fs::write(path, lines)
    }

    /// Runs one call of kstreams-group's admin client over the listener
    /// (the group configs and topic creation, which librdkafka's admin
    /// client cannot set or the streams group needs set before it forms).
    pub(crate) fn admin<T, F>(
        &self,
        call: impl FnOnce(kstreams_group::Admin) -> F,
    ) -> Result<T, String>
    where
        F: Future<Output = Result<T, kstreams_group::Error>>,
    {
        let mut connection = kstreams_group::ConnectionConfig::new(self.bootstrap.as_str());
        connection.security = kstreams_group::Security::from_client_config(|key| {
            self.keys
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, value)| value.clone())
        })
        .map_err(|e| format!("the listener's keys: {e}"))?;
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?
            .block_on(call(kstreams_group::Admin::new(connection)))
            .map_err(|e| e.to_string())
    }
}

/// Reads a file [`Listener::write_keys`] wrote: its `key=value` pairs.
pub(crate) fn read_keys(path: &Path) -> Result<Vec<(String, String)>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            line.split_once('=')
                .map(|(key, value)| (key.trim().to_string(), value.to_string()))
                .ok_or_else(|| format!("{}: {line:?} is not key=value", path.display()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_variable_is_named() {
        let error = Listener::from_variables(Security::MutualTls, "p:1", |name| {
            (name != "KSTREAMS_MTLS_KEY").then(|| format!("{name}-value"))
        })
        .unwrap_err();
        assert!(error.starts_with("KSTREAMS_MTLS_KEY is not set"), "{error}");
        let plaintext = Listener::from_variables(Security::Plaintext, "p:1", |_| None).unwrap();
        assert_eq!(
            (plaintext.bootstrap.as_str(), plaintext.keys.len()),
            ("p:1", 0)
        );
    }

    #[test]
    fn keys_written_are_read_back() {
        let listener = Listener::from_variables(Security::OAuthBearer, "p:1", |name| {
            Some(match name {
                "KSTREAMS_OAUTH_SCOPE" => "kstreams".to_string(),
                other => format!("{other}-value"),
            })
        })
        .unwrap();
        assert_eq!(listener.bootstrap, "KSTREAMS_OAUTH_BOOTSTRAP-value");
        let path = std::env::temp_dir().join(kstreams::embedded::unique_name("chaos-keys"));
        listener.write_keys(&path).unwrap();
        let read = read_keys(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let written: Vec<(String, String)> = listener
            .keys
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        assert_eq!(read, written);
        assert!(read.contains(&(
            "sasl.oauthbearer.config".to_string(),
            "principal=kstreams-chaos scope=kstreams".to_string()
        )));
    }
}
