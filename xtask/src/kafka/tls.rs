//! The test cluster's SASL_SSL listener: a throwaway certificate authority
//! and a broker certificate for 127.0.0.1, made with the JDK's keytool (the
//! JDK runs the broker already, so nothing new is installed), and one SCRAM
//! user with a SCRAM-SHA-256 and a SCRAM-SHA-512 credential, added when the
//! storage is formatted.
//!
//! The keys are for a test broker on the loopback interface only: made once
//! and kept in `~/.cache/kstreams/tls/` (each keytool call is a JVM start),
//! remade when they are a day from expiring.

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
/// The broker's key store (PKCS12) password.
const STORE_PASSWORD: &str = "kstreams-test-store";
/// How long the certificates are valid, in days.
const VALIDITY_DAYS: u32 = 30;

/// The files a SASL_SSL listener needs.
#[derive(Debug, Clone)]
pub(super) struct Keys {
    /// The CA certificate (PEM): what clients trust (`ssl.ca.location`).
    pub ca_pem: PathBuf,
    /// The broker's key and certificate chain (PKCS12).
    pub keystore: PathBuf,
}

impl Keys {
    /// The broker's `ssl.*` settings for the keys.
    pub(super) fn broker_settings(&self) -> Vec<(&'static str, String)> {
        vec![
            ("ssl.keystore.type", "PKCS12".to_string()),
            ("ssl.keystore.location", self.keystore.display().to_string()),
            ("ssl.keystore.password", STORE_PASSWORD.to_string()),
            ("ssl.key.password", STORE_PASSWORD.to_string()),
            ("ssl.client.auth", "none".to_string()),
        ]
    }
}

/// The cached keys, made first if missing or about to expire.
pub(super) fn keys() -> Result<Keys> {
    let dir = paths::cache_dir().join("tls");
    let keys = Keys {
        ca_pem: dir.join("ca.pem"),
        keystore: dir.join("broker.p12"),
    };
    if fresh(&keys.keystore) && fresh(&keys.ca_pem) {
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

fn make(dir: &Path, keys: &Keys) -> Result<()> {
    let ca_store = dir.join("ca.p12");
    let request = dir.join("broker.csr");
    let broker_pem = dir.join("broker.pem");
    let validity = VALIDITY_DAYS.to_string();
    let san = "SAN=ip:127.0.0.1,dns:localhost";
    let store = |path: &Path| -> Vec<String> {
        vec![
            "-keystore".into(),
            path.display().to_string(),
            "-storetype".into(),
            "PKCS12".into(),
            "-storepass".into(),
            STORE_PASSWORD.into(),
        ]
    };
    let steps: Vec<(&str, Vec<String>)> = vec![
        (
            "the test CA",
            [
                "-genkeypair",
                "-alias",
                "ca",
                "-keyalg",
                "RSA",
                "-keysize",
                "2048",
                "-dname",
                "CN=kstreams test CA",
                "-ext",
                "bc:c",
                "-validity",
                &validity,
            ]
            .map(String::from)
            .into_iter()
            .chain(store(&ca_store))
            .collect(),
        ),
        (
            "the CA certificate",
            ["-exportcert", "-rfc", "-alias", "ca", "-file"]
                .map(String::from)
                .into_iter()
                .chain([keys.ca_pem.display().to_string()])
                .chain(store(&ca_store))
                .collect(),
        ),
        (
            "the broker key",
            [
                "-genkeypair",
                "-alias",
                "broker",
                "-keyalg",
                "RSA",
                "-keysize",
                "2048",
                "-dname",
                "CN=localhost",
                "-ext",
                san,
                "-validity",
                &validity,
            ]
            .map(String::from)
            .into_iter()
            .chain(store(&keys.keystore))
            .collect(),
        ),
        (
            "the broker's certificate request",
            ["-certreq", "-alias", "broker", "-file"]
                .map(String::from)
                .into_iter()
                .chain([request.display().to_string()])
                .chain(store(&keys.keystore))
                .collect(),
        ),
        (
            "the broker certificate, signed by the CA",
            [
                "-gencert",
                "-alias",
                "ca",
                "-rfc",
                "-ext",
                san,
                "-validity",
                &validity,
                "-infile",
            ]
            .map(String::from)
            .into_iter()
            .chain([request.display().to_string(), "-outfile".into()])
            .chain([broker_pem.display().to_string()])
            .chain(store(&ca_store))
            .collect(),
        ),
        (
            "the CA into the broker's store",
            ["-importcert", "-noprompt", "-alias", "ca", "-file"]
                .map(String::from)
                .into_iter()
                .chain([keys.ca_pem.display().to_string()])
                .chain(store(&keys.keystore))
                .collect(),
        ),
        (
            "the signed certificate into the broker's store",
            ["-importcert", "-noprompt", "-alias", "broker", "-file"]
                .map(String::from)
                .into_iter()
                .chain([broker_pem.display().to_string()])
                .chain(store(&keys.keystore))
                .collect(),
        ),
    ];
    for (what, args) in steps {
        process::run_captured(
            Command::new("keytool").args(&args),
            &format!("keytool: {what}"),
        )?;
    }
    for leftover in [&request, &broker_pem, &ca_store] {
        // The CA's own key is not needed again: new keys mean a new CA.
        let _ = std::fs::remove_file(leftover);
    }
    Ok(())
}
