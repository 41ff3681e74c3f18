//! The test cluster's TLS listeners: a throwaway certificate authority, a
//! broker certificate for 127.0.0.1 and a client certificate for the
//! mutual-TLS listener, all signed by that CA and made with the JDK's keytool
//! (the JDK runs the broker already, so nothing new is installed); and one
//! SCRAM user with a SCRAM-SHA-256 and a SCRAM-SHA-512 credential, added when
//! the storage is formatted.
//!
//! The keys are for a test broker on the loopback interface only: made once
//! and kept in `~/.cache/kstreams/tls/` (each keytool call is a JVM start, so
//! independent calls run side by side), remade when they are a day from
//! expiring.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};

use crate::paths;
use crate::process;

/// The SCRAM mechanisms of the listener: the user has a credential for
/// each, so a client may log in with either.
pub(super) const MECHANISMS: [&str; 2] = ["SCRAM-SHA-256", "SCRAM-SHA-512"];
/// The SCRAM user clients log in as.
pub(super) const USER: &str = "kstreams";
/// Its password; a test broker's, on loopback only.
pub(super) const PASSWORD: &str = "kstreams-test-secret";
/// The scope the OAUTHBEARER listener requires of a token.
pub(super) const OAUTH_SCOPE: &str = "kstreams";
/// The client certificate's subject. Kafka's default principal mapping
/// (`ssl.principal.mapping.rules=DEFAULT`) makes it the principal
/// `User:CN=kstreams-client,O=kstreams test`.
pub(super) const CLIENT_DN: &str = "CN=kstreams-client,O=kstreams test";
/// The client's PKCS#12 store password (`ssl.keystore.password`).
pub(super) const CLIENT_STORE_PASSWORD: &str = "kstreams-test-client";
/// The broker's key store (PKCS12) password.
const STORE_PASSWORD: &str = "kstreams-test-store";
/// How long the certificates are valid, in days.
const VALIDITY_DAYS: u32 = 30;

/// The files the TLS listeners and their clients need.
#[derive(Debug, Clone)]
pub(super) struct Keys {
    /// The CA certificate (PEM): what clients trust (`ssl.ca.location`), and
    /// what the mutual-TLS listener trusts client certificates of.
    pub ca_pem: PathBuf,
    /// The broker's key and certificate chain (PKCS12).
    pub keystore: PathBuf,
    /// The client's certificate (PEM, `ssl.certificate.location`).
    pub client_certificate: PathBuf,
    /// Its private key (unencrypted PKCS#8 PEM, `ssl.key.location`).
    pub client_key: PathBuf,
    /// The same key and certificate chain in a PKCS12 store
    /// (`ssl.keystore.location`, password [`CLIENT_STORE_PASSWORD`]).
    pub client_keystore: PathBuf,
}

impl Keys {
    /// The broker's `ssl.*` settings for the keys, on a listener that asks
    /// clients for no certificate.
    pub(super) fn broker_settings(&self) -> Vec<(&'static str, String)> {
        vec![
            ("ssl.keystore.type", "PKCS12".to_string()),
            ("ssl.keystore.location", self.keystore.display().to_string()),
            ("ssl.keystore.password", STORE_PASSWORD.to_string()),
            ("ssl.key.password", STORE_PASSWORD.to_string()),
            ("ssl.client.auth", "none".to_string()),
        ]
    }

    /// The `ssl.*` settings of the mutual-TLS listener: the broker's keys,
    /// and a client certificate required, signed by the test CA (a PEM
    /// trust store, KIP-651).
    pub(super) fn mutual_tls_settings(&self) -> Vec<(&'static str, String)> {
        let mut settings = self.broker_settings();
        settings.retain(|(key, _)| *key != "ssl.client.auth");
        settings.extend([
            ("ssl.client.auth", "required".to_string()),
            ("ssl.truststore.type", "PEM".to_string()),
            ("ssl.truststore.location", self.ca_pem.display().to_string()),
        ]);
        settings
    }

    fn files(&self) -> [&PathBuf; 5] {
        [
            &self.ca_pem,
            &self.keystore,
            &self.client_certificate,
            &self.client_key,
            &self.client_keystore,
        ]
    }
}

/// Where the keys are kept (made or not).
pub(super) fn cached() -> Keys {
    let dir = paths::cache_dir().join("tls");
    Keys {
        ca_pem: dir.join("ca.pem"),
        keystore: dir.join("broker.p12"),
        client_certificate: dir.join("client.pem"),
        client_key: dir.join("client.key"),
        client_keystore: dir.join("client.p12"),
    }
}

/// The cached keys, made first if missing or about to expire. Only a start
/// calls this: new keys mean a new CA, which a running broker does not know.
pub(super) fn keys() -> Result<Keys> {
    let dir = paths::cache_dir().join("tls");
    let keys = cached();
    if keys.files().into_iter().all(|file| fresh(file)) {
        return Ok(keys);
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("clearing {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    make(&dir, &keys).with_context(|| format!("making test TLS keys in {}", dir.display()))?;
    Ok(keys)
}

/// Whether `file` exists and was made recently enough to be valid for at
/// least another day.
fn fresh(file: &Path) -> bool {
    let max_age = Duration::from_secs(u64::from(VALIDITY_DAYS - 1) * 24 * 3600);
    std::fs::metadata(file)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|made| SystemTime::now().duration_since(made).ok())
        .is_some_and(|age| age < max_age)
}

/// One keytool call: what it makes (for errors) and its arguments.
type Step = (&'static str, Vec<String>);

/// keytool's arguments for `store` (PKCS12) with `password`.
fn store(path: &Path, password: &str) -> Vec<String> {
    vec![
        "-keystore".into(),
        path.display().to_string(),
        "-storetype".into(),
        "PKCS12".into(),
        "-storepass".into(),
        password.into(),
    ]
}

/// `fixed` then `rest`, as owned arguments.
fn args(fixed: &[&str], rest: impl IntoIterator<Item = String>) -> Vec<String> {
    fixed.iter().map(|a| (*a).to_owned()).chain(rest).collect()
}

fn make(dir: &Path, keys: &Keys) -> Result<()> {
    let ca_store = dir.join("ca.p12");
    let broker_request = dir.join("broker.csr");
    let broker_pem = dir.join("broker.pem");
    let client_request = dir.join("client.csr");
    let validity = VALIDITY_DAYS.to_string();
    let san = "SAN=ip:127.0.0.1,dns:localhost";
    let ca = || store(&ca_store, STORE_PASSWORD);
    let broker = || store(&keys.keystore, STORE_PASSWORD);
    let client = || store(&keys.client_keystore, CLIENT_STORE_PASSWORD);
    let path = |p: &Path| p.display().to_string();
    let new_key = |alias: &str, dname: &str, ext: &str| {
        args(
            &[
                "-genkeypair",
                "-alias",
                alias,
                "-keyalg",
                "RSA",
                "-keysize",
                "2048",
            ],
            ["-dname", dname, "-ext", ext, "-validity", &validity].map(String::from),
        )
    };
    let sign = |request: &Path, certificate: &Path, ext: &str| {
        args(
            &["-gencert", "-alias", "ca", "-rfc", "-ext", ext, "-validity"],
            [
                validity.clone(),
                "-infile".into(),
                path(request),
                "-outfile".into(),
                path(certificate),
            ]
            .into_iter()
            .chain(ca()),
        )
    };
    // Each phase's calls are independent of one another (run side by side:
    // each is a JVM start); a phase uses what the ones before it made.
    let phases: Vec<Vec<Step>> = vec![
        vec![
            (
                "the test CA",
                [new_key("ca", "CN=kstreams test CA", "bc:c"), ca()].concat(),
            ),
            (
                "the broker key",
                [new_key("broker", "CN=localhost", san), broker()].concat(),
            ),
            (
                "the client key",
                [new_key("client", CLIENT_DN, "EKU=clientAuth"), client()].concat(),
            ),
        ],
        vec![
            (
                "the CA certificate",
                [
                    args(
                        &["-exportcert", "-rfc", "-alias", "ca", "-file"],
                        [path(&keys.ca_pem)],
                    ),
                    ca(),
                ]
                .concat(),
            ),
            (
                "the broker's certificate request",
                [
                    args(
                        &["-certreq", "-alias", "broker", "-file"],
                        [path(&broker_request)],
                    ),
                    broker(),
                ]
                .concat(),
            ),
            (
                "the client's certificate request",
                [
                    args(
                        &["-certreq", "-alias", "client", "-file"],
                        [path(&client_request)],
                    ),
                    client(),
                ]
                .concat(),
            ),
        ],
        vec![
            (
                "the broker certificate, signed by the CA",
                sign(&broker_request, &broker_pem, san),
            ),
            (
                "the client certificate, signed by the CA",
                sign(&client_request, &keys.client_certificate, "EKU=clientAuth"),
            ),
            (
                "the CA into the broker's store",
                [
                    args(
                        &["-importcert", "-noprompt", "-alias", "ca", "-file"],
                        [path(&keys.ca_pem)],
                    ),
                    broker(),
                ]
                .concat(),
            ),
            (
                "the CA into the client's store",
                [
                    args(
                        &["-importcert", "-noprompt", "-alias", "ca", "-file"],
                        [path(&keys.ca_pem)],
                    ),
                    client(),
                ]
                .concat(),
            ),
        ],
        vec![
            (
                "the signed certificate into the broker's store",
                [
                    args(
                        &["-importcert", "-noprompt", "-alias", "broker", "-file"],
                        [path(&broker_pem)],
                    ),
                    broker(),
                ]
                .concat(),
            ),
            (
                "the signed certificate into the client's store",
                [
                    args(
                        &["-importcert", "-noprompt", "-alias", "client", "-file"],
                        [path(&keys.client_certificate)],
                    ),
                    client(),
                ]
                .concat(),
            ),
        ],
    ];
    for phase in phases {
        std::thread::scope(|scope| {
            let runs: Vec<_> = phase
                .iter()
                .map(|(what, args)| {
                    scope.spawn(move || {
                        process::run_captured(
                            Command::new("keytool").args(args),
                            &format!("keytool: {what}"),
                        )
                    })
                })
                .collect();
            runs.into_iter()
                .try_for_each(|run| run.join().expect("keytool thread panicked"))
        })?;
    }
    export_client_key(keys)?;
    for leftover in [&broker_request, &broker_pem, &client_request, &ca_store] {
        // The CA's own key is not needed again: new keys mean a new CA.
        let _ = std::fs::remove_file(leftover);
    }
    Ok(())
}

/// Writes the client's private key as PEM (PKCS#8), which keytool cannot
/// export: a few lines of Java (`xtask/kafka/PemKey.java`, run by the JDK's
/// source launcher) read it from the client's PKCS12 store.
fn export_client_key(keys: &Keys) -> Result<()> {
    let program = paths::repo_root().join("xtask/kafka/PemKey.java");
    process::run_captured(
        Command::new("java")
            .arg(&program)
            .arg(&keys.client_keystore)
            .arg(CLIENT_STORE_PASSWORD)
            .arg("client")
            .arg(&keys.client_key),
        "exporting the client key as PEM (xtask/kafka/PemKey.java)",
    )
}
