//! Java's key and trust stores (`ssl.truststore.*`, `ssl.keystore.*`)
//! translated to librdkafka's keys: a PEM file to `ssl.ca.location` or
//! `ssl.certificate.location`/`ssl.key.location`, a PKCS#12 trust store to
//! `ssl.ca.pem` (a PKCS#12 key store is librdkafka's own), inline PEM to
//! `ssl.ca.pem`, `ssl.certificate.pem` and `ssl.key.pem`. A JKS store is
//! refused with the command that converts it.

use kstreams_group::StoreFormat;

use super::{put, written, Settings};
use crate::kafka::config::client::ClientPrefix;
use crate::kafka::config::ConfigError;

pub(super) const TRUSTSTORE_TYPE: &str = "ssl.truststore.type";
pub(super) const TRUSTSTORE_LOCATION: &str = "ssl.truststore.location";
pub(super) const TRUSTSTORE_PASSWORD: &str = "ssl.truststore.password";
pub(super) const TRUSTSTORE_CERTIFICATES: &str = "ssl.truststore.certificates";
pub(super) const KEYSTORE_TYPE: &str = "ssl.keystore.type";
const KEYSTORE_LOCATION: &str = "ssl.keystore.location";
const KEYSTORE_PASSWORD: &str = "ssl.keystore.password";
pub(super) const KEYSTORE_CERTIFICATE_CHAIN: &str = "ssl.keystore.certificate.chain";
pub(super) const KEYSTORE_KEY: &str = "ssl.keystore.key";

/// `ssl.truststore.type` / `ssl.keystore.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StoreType {
    Pem,
    Pkcs12,
    /// Java's default; Java reads a PKCS#12 file as it too.
    Jks,
}

impl StoreType {
    pub(super) fn parse(value: &str) -> Result<StoreType, String> {
        match value.trim().to_ascii_uppercase().as_str() {
            "PEM" => Ok(StoreType::Pem),
            "PKCS12" => Ok(StoreType::Pkcs12),
            "JKS" => Ok(StoreType::Jks),
            _ => Err("PEM or PKCS12 (JKS stores must be converted, see there)".to_string()),
        }
    }
}

/// A store file named by a `*.location` key, read.
struct Store {
    /// The prefix of its location key.
    prefix: ClientPrefix,
    path: String,
    content: Vec<u8>,
    format: StoreFormat,
}

/// The store at `settings[location_key]`, its format checked against its
/// type key; a JKS file is an error with the conversion.
fn store_format(
    settings: &Settings,
    location_key: &str,
    type_key: &str,
) -> Result<Option<Store>, ConfigError> {
    let Some((prefix, path)) = settings.get(location_key).cloned() else {
        return Ok(None);
    };
    let source = format!("{}={path}", written(prefix, location_key));
    let content = std::fs::read(&path).map_err(|e| ConfigError::Invalid {
        key: written(prefix, location_key),
        value: path.clone(),
        expected: format!("a store this process can read ({e})"),
    })?;
    let format = StoreFormat::of(&content).ok_or_else(|| ConfigError::Invalid {
        key: written(prefix, location_key),
        value: path.clone(),
        expected: "a PEM or PKCS#12 store: the file is neither".to_string(),
    })?;
    if format == StoreFormat::Jks {
        return Err(ConfigError::Invalid {
            key: written(prefix, location_key),
            value: path,
            expected: format!(
                "a PEM or PKCS#12 store; this is a Java KeyStore (JKS), which only Java reads: \
                 {}",
                kstreams_group::JKS_CONVERSION
            ),
        });
    }
    if let Some((type_prefix, given)) = settings.get(type_key) {
        let matches = match StoreType::parse(given) {
            Ok(StoreType::Pem) => format == StoreFormat::Pem,
            // Java reads a PKCS#12 file whether the type says PKCS12 or JKS.
            Ok(StoreType::Pkcs12 | StoreType::Jks) => format == StoreFormat::Pkcs12,
            Err(_) => false,
        };
        if !matches {
            let found = if format == StoreFormat::Pem {
                "PEM"
            } else {
                "PKCS12"
            };
            return Err(ConfigError::Conflict {
                key: format!("{}={given}", written(*type_prefix, type_key)),
                with: source,
                hint: format!("the file is {found}: set {type_key}={found}"),
            });
        }
    }
    Ok(Some(Store {
        prefix,
        path,
        content,
        format,
    }))
}

/// The store type given with inline PEM must be PEM, as Kafka requires.
fn inline_pem_type(
    settings: &Settings,
    type_key: &str,
    inline_key: &str,
) -> Result<(), ConfigError> {
    match settings.get(type_key) {
        Some((prefix, given)) if StoreType::parse(given) != Ok(StoreType::Pem) => {
            Err(ConfigError::Conflict {
                key: format!("{}={given}", written(*prefix, type_key)),
                with: inline_key.to_string(),
                hint: format!("{inline_key} is PEM: set {type_key}=PEM"),
            })
        }
        _ => Ok(()),
    }
}

/// `ssl.truststore.*` to librdkafka's `ssl.ca.location` (a PEM file) or
/// `ssl.ca.pem` (inline PEM, or a PKCS#12 store's trusted certificates).
pub(super) fn translate_truststore(settings: &mut Settings) -> Result<(), ConfigError> {
    let password = settings.get(TRUSTSTORE_PASSWORD).cloned();
    if let Some((prefix, pem)) = settings.get(TRUSTSTORE_CERTIFICATES).cloned() {
        let source = written(prefix, TRUSTSTORE_CERTIFICATES);
        if let Some((location_prefix, _)) = settings.get(TRUSTSTORE_LOCATION) {
            return Err(ConfigError::Conflict {
                key: source,
                with: written(*location_prefix, TRUSTSTORE_LOCATION),
                hint: "give the trusted certificates inline or in a file, not both".to_string(),
            });
        }
        inline_pem_type(settings, TRUSTSTORE_TYPE, &source)?;
        return put(settings, prefix, &source, "ssl.ca.pem", pem);
    }
    let Some(Store {
        prefix,
        path,
        content,
        format,
    }) = store_format(settings, TRUSTSTORE_LOCATION, TRUSTSTORE_TYPE)?
    else {
        return Ok(());
    };
    let source = written(prefix, TRUSTSTORE_LOCATION);
    match format {
        StoreFormat::Pem => {
            if let Some((password_prefix, _)) = password {
                return Err(ConfigError::Conflict {
                    key: written(password_prefix, TRUSTSTORE_PASSWORD),
                    with: format!("{source}={path} (PEM)"),
                    hint: "a PEM trust store has no password (Kafka refuses one too): remove it"
                        .to_string(),
                });
            }
            put(settings, prefix, &source, "ssl.ca.location", path)
        }
        _ => {
            let password_key = password.as_ref().map_or_else(
                || format!("{TRUSTSTORE_PASSWORD} (unset)"),
                |(p, _)| written(*p, TRUSTSTORE_PASSWORD),
            );
            let pem = kstreams_group::pkcs12_trusted_certificates_pem(
                &content,
                password.as_ref().map_or("", |(_, p)| p.as_str()),
                &format!("{source}={path}"),
                &password_key,
            )
            .map_err(|e| ConfigError::Invalid {
                key: source.clone(),
                value: path.clone(),
                expected: e.to_string(),
            })?;
            put(settings, prefix, &source, "ssl.ca.pem", pem)
        }
    }
}

/// `ssl.keystore.*` to librdkafka's: a PEM store to `ssl.certificate.*` and
/// `ssl.key.*` (its key decrypted with `ssl.key.password`, the same key in
/// both), a PKCS#12 store stays `ssl.keystore.location` (librdkafka's own,
/// which the streams group member reads too).
pub(super) fn translate_keystore(settings: &mut Settings) -> Result<(), ConfigError> {
    let chain = settings.get(KEYSTORE_CERTIFICATE_CHAIN).cloned();
    let key = settings.get(KEYSTORE_KEY).cloned();
    match (chain, key) {
        (Some((prefix, chain)), Some((key_prefix, key))) => {
            let source = written(prefix, KEYSTORE_CERTIFICATE_CHAIN);
            if let Some((location_prefix, _)) = settings.get(KEYSTORE_LOCATION) {
                return Err(ConfigError::Conflict {
                    key: source,
                    with: written(*location_prefix, KEYSTORE_LOCATION),
                    hint: "give the client's certificate and key inline or in a store, not both"
                        .to_string(),
                });
            }
            inline_pem_type(settings, KEYSTORE_TYPE, &source)?;
            put(settings, prefix, &source, "ssl.certificate.pem", chain)?;
            let key_source = written(key_prefix, KEYSTORE_KEY);
            return put(settings, key_prefix, &key_source, "ssl.key.pem", key);
        }
        (Some((prefix, _)), None) | (None, Some((prefix, _))) => {
            return Err(ConfigError::Conflict {
                key: written(prefix, KEYSTORE_CERTIFICATE_CHAIN),
                with: written(prefix, KEYSTORE_KEY),
                hint: "mutual TLS needs both, the certificate chain and its private key"
                    .to_string(),
            });
        }
        (None, None) => {}
    }
    let Some(Store {
        prefix,
        path,
        format,
        ..
    }) = store_format(settings, KEYSTORE_LOCATION, KEYSTORE_TYPE)?
    else {
        return Ok(());
    };
    if format == StoreFormat::Pem {
        let source = written(prefix, KEYSTORE_LOCATION);
        if let Some((password_prefix, _)) = settings.get(KEYSTORE_PASSWORD) {
            return Err(ConfigError::Conflict {
                key: written(*password_prefix, KEYSTORE_PASSWORD),
                with: format!("{source}={path} (PEM)"),
                hint: "a PEM key store has no store password (Kafka refuses one too): give the \
                       key's password as ssl.key.password"
                    .to_string(),
            });
        }
        settings.remove(KEYSTORE_LOCATION);
        put(
            settings,
            prefix,
            &source,
            "ssl.certificate.location",
            path.clone(),
        )?;
        put(settings, prefix, &source, "ssl.key.location", path)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::translated;
    use super::*;

    fn temp_file(name: &str, content: &[u8]) -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, content).unwrap();
        (dir, path.display().to_string())
    }

    const PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    #[test]
    fn pem_stores_become_librdkafka_ca_certificate_and_key() {
        let (_dir, ca) = temp_file("ca.pem", PEM.as_bytes());
        let got = translated(&[(TRUSTSTORE_TYPE, "PEM"), (TRUSTSTORE_LOCATION, &ca)]).unwrap();
        assert_eq!(got["ssl.ca.location"], ca);
        assert_eq!(got.len(), 1, "{got:?}");
        let text = translated(&[
            (TRUSTSTORE_TYPE, "PEM"),
            (TRUSTSTORE_LOCATION, &ca),
            (TRUSTSTORE_PASSWORD, "x"),
        ])
        .unwrap_err()
        .to_string();
        assert!(text.contains("ssl.truststore.password"), "{text}");

        let got = translated(&[(TRUSTSTORE_TYPE, "PEM"), (TRUSTSTORE_CERTIFICATES, PEM)]).unwrap();
        assert_eq!(got["ssl.ca.pem"], PEM);

        let (_dir, store) = temp_file("client.pem", PEM.as_bytes());
        let got = translated(&[
            (KEYSTORE_TYPE, "PEM"),
            (KEYSTORE_LOCATION, &store),
            ("ssl.key.password", "k"),
        ])
        .unwrap();
        assert_eq!(got["ssl.certificate.location"], store);
        assert_eq!(got["ssl.key.location"], store);
        assert!(!got.contains_key(KEYSTORE_LOCATION));
        let got = translated(&[
            (KEYSTORE_CERTIFICATE_CHAIN, PEM),
            (KEYSTORE_KEY, "-----BEGIN K"),
        ])
        .unwrap();
        assert_eq!(got["ssl.certificate.pem"], PEM);
        assert_eq!(got["ssl.key.pem"], "-----BEGIN K");
        // The type must say what the file is.
        let text = translated(&[(TRUSTSTORE_TYPE, "PKCS12"), (TRUSTSTORE_LOCATION, &ca)])
            .unwrap_err()
            .to_string();
        assert!(text.contains("set ssl.truststore.type=PEM"), "{text}");
    }

    #[test]
    fn a_jks_store_is_refused_with_the_conversion_and_a_missing_one_is_named() {
        let (_dir, jks) = temp_file("trust.jks", &[0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2]);
        for key in [TRUSTSTORE_LOCATION, KEYSTORE_LOCATION] {
            let text = translated(&[(key, &jks)]).unwrap_err().to_string();
            assert!(text.contains(key) && text.contains("trust.jks"), "{text}");
            assert!(text.contains("keytool -importkeystore"), "{text}");
        }
        let text = translated(&[(TRUSTSTORE_LOCATION, "/nonexistent/trust.p12")])
            .unwrap_err()
            .to_string();
        assert!(
            text.contains("ssl.truststore.location") && text.contains("/nonexistent/trust.p12"),
            "{text}"
        );
    }
}
