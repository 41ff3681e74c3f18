//! PKCS#12 stores, read with p12-keystore (RustCrypto): librdkafka's
//! `ssl.keystore.location` (the client's key and certificate chain) and a
//! Java trust store of type PKCS12 (its trusted certificates, as PEM for
//! librdkafka's `ssl.ca.pem`). keytool's and openssl's stores both read:
//! PBES2 (AES, PBKDF2) and the legacy PBES1 ciphers, HMAC-SHA-1/256 MACs.

use std::path::Path;

use p12_keystore::{KeyStore, KeyStoreEntry};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::error::{Error, Result};

/// What a PKCS#12 store's first bytes say it is not: a Java KeyStore (JKS)
/// or JCEKS file, which no Rust crate reads.
const JKS_MAGIC: [u8; 4] = [0xFE, 0xED, 0xFE, 0xED];
const JCEKS_MAGIC: [u8; 4] = [0xCE, 0xCE, 0xCE, 0xCE];

/// The format of a key or trust store file, by its content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreFormat {
    /// PEM text (`-----BEGIN ...`).
    Pem,
    /// PKCS#12 (DER).
    Pkcs12,
    /// A Java KeyStore (JKS or JCEKS): Java only.
    Jks,
}

impl StoreFormat {
    /// The format of `content`, or `None` when it is none of them.
    pub fn of(content: &[u8]) -> Option<StoreFormat> {
        if content.starts_with(&JKS_MAGIC) || content.starts_with(&JCEKS_MAGIC) {
            Some(StoreFormat::Jks)
        } else if content.first() == Some(&0x30) {
            // A DER SEQUENCE: PKCS#12's PFX.
            Some(StoreFormat::Pkcs12)
        } else if String::from_utf8_lossy(content).contains("-----BEGIN ") {
            Some(StoreFormat::Pem)
        } else {
            None
        }
    }
}

/// The trusted certificates of the PKCS#12 trust store in `content` (what
/// keytool `-importcert` puts there), as PEM text. `source` names the
/// store in errors (`ssl.truststore.location=...`), `password_key` the key
/// of its password.
pub fn pkcs12_trusted_certificates_pem(
    content: &[u8],
    password: &str,
    source: &str,
    password_key: &str,
) -> Result<String> {
    let store = open(content, password, source, password_key)?;
    let mut pem = String::new();
    for (_, entry) in store.entries() {
        if let KeyStoreEntry::Certificate(certificate) = entry {
            let block = pem_rfc7468::encode_string(
                "CERTIFICATE",
                pem_rfc7468::LineEnding::LF,
                certificate.as_der(),
            )
            .map_err(|e| Error::Config(format!("{source}: a certificate: {e}")))?;
            pem.push_str(&block);
        }
    }
    if pem.is_empty() {
        return Err(Error::Config(format!(
            "{source} holds no trusted certificate entry (a store made with `keytool \
             -importcert` has them; a certificate without the trusted mark, as `openssl pkcs12 \
             -export` writes it, Java does not trust either): import the CA with keytool, or \
             give it as PEM"
        )));
    }
    Ok(pem)
}

/// The key and certificate chain of the PKCS#12 key store at `path`
/// (librdkafka's `ssl.keystore.location` and `ssl.keystore.password`).
#[allow(clippy::type_complexity)]
pub(crate) fn identity(
    path: &Path,
    password: &str,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let source = format!("ssl.keystore.location={}", path.display());
    let content =
        std::fs::read(path).map_err(|e| Error::Config(format!("{source}: cannot read it: {e}")))?;
    match StoreFormat::of(&content) {
        Some(StoreFormat::Pkcs12) => {}
        Some(StoreFormat::Jks) => return Err(jks(&source)),
        Some(StoreFormat::Pem) | None => {
            return Err(Error::Config(format!(
                "{source} is not a PKCS#12 store: give a PEM certificate and key as \
                 ssl.certificate.location and ssl.key.location"
            )))
        }
    }
    let store = open(&content, password, &source, "ssl.keystore.password")?;
    let Some((_, chain)) = store.private_key_chain() else {
        return Err(Error::Config(format!(
            "{source} holds no private key with its certificate: mutual TLS needs both"
        )));
    };
    let certificates = chain
        .chain()
        .iter()
        .map(|c| CertificateDer::from(c.as_der().to_vec()))
        .collect();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(chain.key().to_vec()));
    Ok((certificates, key))
}

fn open(content: &[u8], password: &str, source: &str, password_key: &str) -> Result<KeyStore> {
    KeyStore::from_pkcs12(content, password).map_err(|e| {
        let why = match e {
            p12_keystore::error::Error::MacError(_) => {
                format!("the password is wrong (its {password_key} does not open it)")
            }
            other => format!("{other}"),
        };
        Error::Config(format!(
            "{source} cannot be read as PKCS#12: {why}; check {password_key}"
        ))
    })
}

/// How to convert a Java KeyStore (JKS), which only Java reads, to what
/// librdkafka and the streams group member read.
pub const JKS_CONVERSION: &str = "convert it to PKCS#12 (`keytool -importkeystore -srckeystore \
     store.jks -srcstoretype JKS -destkeystore store.p12 -deststoretype PKCS12`) or export PEM \
     (`keytool -exportcert -rfc -alias ca -keystore store.jks -file ca.pem`)";

/// The error for a Java KeyStore file, with the conversion.
pub(crate) fn jks(source: &str) -> Error {
    Error::Config(format!(
        "{source} is a Java KeyStore (JKS), which only Java reads: {JKS_CONVERSION}"
    ))
}

#[cfg(test)]
mod tests {
    use p12_keystore::{Certificate, KeyStore, KeyStoreEntry};
    use rcgen::{CertificateParams, DnType, KeyPair};
    use rustls::pki_types::pem::PemObject;

    use super::*;

    fn ca_der(name: &str) -> Vec<u8> {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn a_trust_store_gives_its_trusted_certificates_as_pem() {
        let (first, second) = (ca_der("first CA"), ca_der("second CA"));
        let mut store = KeyStore::new();
        for (alias, der) in [("first", &first), ("second", &second)] {
            let certificate = Certificate::from_der(der).unwrap();
            store.add_entry(alias, KeyStoreEntry::Certificate(certificate));
        }
        let bytes = store.writer("trust-secret").write().unwrap();
        assert_eq!(StoreFormat::of(&bytes), Some(StoreFormat::Pkcs12));
        let source = "ssl.truststore.location=/keys/trust.p12";
        let pem =
            pkcs12_trusted_certificates_pem(&bytes, "trust-secret", source, "pw.key").unwrap();
        assert_eq!(StoreFormat::of(pem.as_bytes()), Some(StoreFormat::Pem));
        let read: Vec<Vec<u8>> = CertificateDer::pem_slice_iter(pem.as_bytes())
            .map(|c| c.unwrap().to_vec())
            .collect();
        assert_eq!(read.len(), 2);
        assert!(read.contains(&first) && read.contains(&second));

        let Err(Error::Config(wrong)) =
            pkcs12_trusted_certificates_pem(&bytes, "wrong", source, "pw.key")
        else {
            panic!("a wrong password must fail");
        };
        assert!(
            wrong.contains("/keys/trust.p12") && wrong.contains("pw.key"),
            "{wrong}"
        );
        assert!(wrong.contains("password is wrong"), "{wrong}");
    }

    #[test]
    fn a_store_s_format_is_told_by_its_content() {
        assert_eq!(
            StoreFormat::of(&[0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2]),
            Some(StoreFormat::Jks)
        );
        assert_eq!(
            StoreFormat::of(b"# CA\n-----BEGIN CERTIFICATE-----\nMII"),
            Some(StoreFormat::Pem)
        );
        assert_eq!(StoreFormat::of(b"hello"), None);
        let message = jks("ssl.truststore.location=/x.jks").to_string();
        assert!(
            message.contains("/x.jks") && message.contains("keytool"),
            "{message}"
        );
    }
}
