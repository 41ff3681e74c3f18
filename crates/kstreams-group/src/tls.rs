//! TLS with rustls (on ring): the client configuration from librdkafka's
//! `ssl.*` keys, and what a failed handshake means in their terms.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::error::{Error, Result};

const ENCRYPTED_PKCS8_BEGIN: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
const ENCRYPTED_PKCS8_END: &str = "-----END ENCRYPTED PRIVATE KEY-----";
/// How OpenSSL's legacy (pre-PKCS#8) encrypted PEM keys announce themselves.
const LEGACY_ENCRYPTED_PEM: &str = "Proc-Type: 4,ENCRYPTED";

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// What TLS trusts and presents, by librdkafka's `ssl.*` keys. Secure by
/// default: the broker's certificate and its host name are verified.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TlsOptions {
    /// `ssl.ca.location`: a PEM file of CA certificates, or a directory of
    /// such files. With neither this nor [`ca_pem`](Self::ca_pem), the
    /// system's CA store (Mozilla's roots where the system has none).
    pub ca_location: Option<PathBuf>,
    /// `ssl.ca.pem`: CA certificates in PEM, inline.
    pub ca_pem: Option<String>,
    /// `ssl.certificate.location`: this client's certificate chain (PEM),
    /// for mutual TLS.
    pub certificate_location: Option<PathBuf>,
    /// `ssl.certificate.pem`: the same, inline.
    pub certificate_pem: Option<String>,
    /// `ssl.key.location`: the certificate's private key (PEM: PKCS#8,
    /// PKCS#1 or SEC1; an encrypted PKCS#8 key with
    /// [`key_password`](Self::key_password)).
    pub key_location: Option<PathBuf>,
    /// `ssl.key.pem`: the same, inline.
    pub key_pem: Option<String>,
    /// `ssl.key.password`: decrypts an encrypted PKCS#8 key.
    pub key_password: Option<String>,
    /// `ssl.keystore.location`: this client's key and certificate chain in
    /// a PKCS#12 store, instead of `ssl.certificate.*` and `ssl.key.*`.
    pub keystore_location: Option<PathBuf>,
    /// `ssl.keystore.password`: the PKCS#12 store's password.
    pub keystore_password: Option<String>,
    /// `ssl.endpoint.identification.algorithm=https` (the default): the
    /// certificate must be valid for the host name connected to; `none`
    /// verifies the certificate's chain only.
    pub verify_hostname: bool,
    /// `enable.ssl.certificate.verification` (true by default): false
    /// accepts any certificate, as librdkafka does. For tests only.
    pub verify_certificate: bool,
}

impl Default for TlsOptions {
    fn default() -> Self {
        TlsOptions {
            ca_location: None,
            ca_pem: None,
            certificate_location: None,
            certificate_pem: None,
            key_location: None,
            key_pem: None,
            key_password: None,
            keystore_location: None,
            keystore_password: None,
            verify_hostname: true,
            verify_certificate: true,
        }
    }
}

impl fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redacted = |secret: &Option<String>| secret.as_ref().map(|_| "[redacted]");
        f.debug_struct("TlsOptions")
            .field("ca_location", &self.ca_location)
            .field("ca_pem", &self.ca_pem.as_ref().map(|_| "[inline]"))
            .field("certificate_location", &self.certificate_location)
            .field(
                "certificate_pem",
                &self.certificate_pem.as_ref().map(|_| "[inline]"),
            )
            .field("key_location", &self.key_location)
            .field("key_pem", &redacted(&self.key_pem))
            .field("key_password", &redacted(&self.key_password))
            .field("keystore_location", &self.keystore_location)
            .field("keystore_password", &redacted(&self.keystore_password))
            .field("verify_hostname", &self.verify_hostname)
            .field("verify_certificate", &self.verify_certificate)
            .finish()
    }
}

impl TlsOptions {
    pub(crate) fn from_client_config(get: &impl Fn(&str) -> Option<String>) -> Result<TlsOptions> {
        if get("ssl.crl.location").is_some() {
            return Err(Error::Config(
                "ssl.crl.location is not supported by the streams group member; use no \
                 revocation list (remove the key), or group.protocol=classic"
                    .to_owned(),
            ));
        }
        let verify_hostname = choice(
            get,
            "ssl.endpoint.identification.algorithm",
            &[("https", true), ("none", false)],
        )?
        .unwrap_or(true);
        let verify_certificate = choice(
            get,
            "enable.ssl.certificate.verification",
            &[("true", true), ("false", false)],
        )?
        .unwrap_or(true);
        let ca_location = get("ssl.ca.location").filter(|location| location.trim() != "probe");
        Ok(TlsOptions {
            ca_location: ca_location.map(PathBuf::from),
            ca_pem: get("ssl.ca.pem"),
            certificate_location: get("ssl.certificate.location").map(PathBuf::from),
            certificate_pem: get("ssl.certificate.pem"),
            key_location: get("ssl.key.location").map(PathBuf::from),
            key_pem: get("ssl.key.pem"),
            key_password: get("ssl.key.password"),
            keystore_location: get("ssl.keystore.location").map(PathBuf::from),
            keystore_password: get("ssl.keystore.password"),
            verify_hostname,
            verify_certificate,
        })
    }
}

/// The value of `key` among `choices` (any case), `None` when unset; any
/// other value is an error naming the key and the choices.
fn choice<T: Copy>(
    get: &impl Fn(&str) -> Option<String>,
    key: &str,
    choices: &[(&str, T)],
) -> Result<Option<T>> {
    let Some(value) = get(key) else {
        return Ok(None);
    };
    choices
        .iter()
        .find(|(text, _)| value.trim().eq_ignore_ascii_case(text))
        .map(|(_, chosen)| Some(*chosen))
        .ok_or_else(|| {
            let names: Vec<&str> = choices.iter().map(|(text, _)| *text).collect();
            Error::Config(format!("{key}={value} is not one of {}", names.join(", ")))
        })
}

/// TLS settings with their certificates and key loaded: ready to connect.
#[derive(Clone)]
pub struct Tls {
    options: TlsOptions,
    config: Arc<rustls::ClientConfig>,
}

impl Tls {
    /// Loads the files `options` name and checks them (an unreadable file,
    /// one without certificates, a key that does not decrypt or does not
    /// suit the certificate are [`Error::Config`]s naming their key).
    pub fn new(options: TlsOptions) -> Result<Tls> {
        let config = client_config(&options)?;
        Ok(Tls { options, config })
    }

    /// The settings it was made from.
    pub fn options(&self) -> &TlsOptions {
        &self.options
    }

    pub(crate) fn config(&self) -> Arc<rustls::ClientConfig> {
        self.config.clone()
    }

    /// Where the client certificate comes from, for error messages; `None`
    /// without one.
    pub(crate) fn client_identity_source(&self) -> Option<String> {
        let options = &self.options;
        match (
            &options.keystore_location,
            &options.certificate_location,
            &options.certificate_pem,
        ) {
            (Some(store), _, _) => Some(format!("ssl.keystore.location={}", store.display())),
            (None, Some(file), _) => Some(format!("ssl.certificate.location={}", file.display())),
            (None, None, Some(_)) => Some("ssl.certificate.pem".to_owned()),
            (None, None, None) => None,
        }
    }

    /// Where the trusted CAs come from, for error messages.
    pub(crate) fn trust_source(&self) -> String {
        match (&self.options.ca_location, &self.options.ca_pem) {
            (Some(location), _) => format!("ssl.ca.location={}", location.display()),
            (None, Some(_)) => "ssl.ca.pem".to_owned(),
            (None, None) => "the system's CA store (ssl.ca.location unset)".to_owned(),
        }
    }
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Tls").field(&self.options).finish()
    }
}

/// The rustls configuration `options` describe, its files read.
fn client_config(options: &TlsOptions) -> Result<Arc<rustls::ClientConfig>> {
    let provider = provider();
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Config(format!("TLS: {e}")))?;
    let builder = if !options.verify_certificate {
        log::warn!(
            "enable.ssl.certificate.verification=false: the streams group member accepts any \
             broker certificate (as librdkafka does); never do this in production"
        );
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
    } else {
        let roots = Arc::new(root_store(options)?);
        let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider)
            .build()
            .map_err(|e| Error::Config(format!("TLS: the trusted CAs cannot be used: {e}")))?;
        if options.verify_hostname {
            builder.with_webpki_verifier(webpki)
        } else {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyHostName(webpki)))
        }
    };
    let config = match client_identity(options)? {
        Some((chain, key)) => builder.with_client_auth_cert(chain, key).map_err(|e| {
            Error::Config(format!(
                "ssl.certificate.location and ssl.key.location do not make a client identity: \
                 {e} (the key must be the certificate's: RSA, ECDSA P-256/P-384 or Ed25519)"
            ))
        })?,
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

/// The CAs to trust: `ssl.ca.location` and `ssl.ca.pem`, else the
/// system's store, else Mozilla's roots.
fn root_store(options: &TlsOptions) -> Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    let mut given = Vec::new();
    if let Some(location) = &options.ca_location {
        let files = if location.is_dir() {
            let entries = std::fs::read_dir(location).map_err(|e| {
                Error::Config(format!(
                    "ssl.ca.location={}: cannot list the directory: {e}",
                    location.display()
                ))
            })?;
            let mut files: Vec<_> = entries
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .filter(|path| path.is_file())
                .collect();
            files.sort();
            files
        } else {
            vec![location.clone()]
        };
        for file in files {
            let pem = read("ssl.ca.location", &file)?;
            // In a directory, files without certificates (a hash link's
            // target is read once more, a README) are skipped.
            let certificates = certificates(&pem);
            if certificates.is_empty() && !location.is_dir() {
                return Err(Error::Config(format!(
                    "ssl.ca.location={} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
                    file.display()
                )));
            }
            given.extend(
                certificates
                    .into_iter()
                    .map(|c| (file.display().to_string(), c)),
            );
        }
        if given.is_empty() {
            return Err(Error::Config(format!(
                "ssl.ca.location={} holds no PEM certificate",
                location.display()
            )));
        }
    }
    if let Some(pem) = &options.ca_pem {
        let certificates = certificates(pem.as_bytes());
        if certificates.is_empty() {
            return Err(Error::Config(
                "ssl.ca.pem holds no PEM certificate (-----BEGIN CERTIFICATE-----)".to_owned(),
            ));
        }
        given.extend(
            certificates
                .into_iter()
                .map(|c| ("ssl.ca.pem".to_owned(), c)),
        );
    }
    if !given.is_empty() {
        for (source, certificate) in given {
            roots.add(certificate).map_err(|e| {
                Error::Config(format!(
                    "ssl.ca.location: a CA certificate in {source}: {e}"
                ))
            })?;
        }
        return Ok(roots);
    }
    let native = rustls_native_certs::load_native_certs();
    for error in &native.errors {
        log::debug!("the system's CA store: {error}");
    }
    let (added, _) = roots.add_parsable_certificates(native.certs);
    if added == 0 {
        log::info!(
            "the system has no CA store; the streams group member trusts Mozilla's roots \
             (set ssl.ca.location for another CA)"
        );
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    }
    Ok(roots)
}

fn read(key: &str, path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path)
        .map_err(|e| Error::Config(format!("{key}={}: cannot read it: {e}", path.display())))
}

/// Every PEM certificate in `pem` (other sections are skipped).
pub(crate) fn certificates(pem: &[u8]) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem)
        .filter_map(std::result::Result::ok)
        .collect()
}

/// The client certificate chain and key for mutual TLS, when configured.
#[allow(clippy::type_complexity)]
fn client_identity(
    options: &TlsOptions,
) -> Result<Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>> {
    if let Some(store) = &options.keystore_location {
        if let Some(other) = [
            (
                "ssl.certificate.location",
                options.certificate_location.is_some(),
            ),
            ("ssl.certificate.pem", options.certificate_pem.is_some()),
            ("ssl.key.location", options.key_location.is_some()),
            ("ssl.key.pem", options.key_pem.is_some()),
        ]
        .iter()
        .find_map(|(key, set)| set.then_some(*key))
        {
            return Err(Error::Config(format!(
                "ssl.keystore.location and {other} both give the client's identity: set the \
                 PKCS#12 store or the PEM certificate and key, not both"
            )));
        }
        let password = options.keystore_password.as_deref().unwrap_or_default();
        return crate::pkcs12::identity(store, password).map(Some);
    }
    let certificate = match (&options.certificate_pem, &options.certificate_location) {
        (Some(pem), _) => Some(("ssl.certificate.pem".to_owned(), pem.as_bytes().to_vec())),
        (None, Some(path)) => Some((
            format!("ssl.certificate.location={}", path.display()),
            read("ssl.certificate.location", path)?,
        )),
        (None, None) => None,
    };
    let key = match (&options.key_pem, &options.key_location) {
        (Some(pem), _) => Some(("ssl.key.pem".to_owned(), pem.as_bytes().to_vec())),
        (None, Some(path)) => Some((
            format!("ssl.key.location={}", path.display()),
            read("ssl.key.location", path)?,
        )),
        (None, None) => None,
    };
    let ((certificate_source, certificate), (key_source, key)) = match (certificate, key) {
        (None, None) => return Ok(None),
        (Some(certificate), Some(key)) => (certificate, key),
        (Some((source, _)), None) => {
            return Err(Error::Config(format!(
                "{source} is set without ssl.key.location: mutual TLS needs the \
                 certificate's private key too"
            )))
        }
        (None, Some((source, _))) => {
            return Err(Error::Config(format!(
                "{source} is set without ssl.certificate.location: mutual TLS needs the \
                 key's certificate too"
            )))
        }
    };
    let chain = certificates(&certificate);
    if chain.is_empty() {
        return Err(Error::Config(format!(
            "{certificate_source} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
        )));
    }
    let key = private_key(&key_source, &key, options.key_password.as_deref())?;
    Ok(Some((chain, key)))
}

/// The private key in `pem`, decrypted with `password` if it is an
/// encrypted PKCS#8 key.
pub(crate) fn private_key(
    source: &str,
    pem: &[u8],
    password: Option<&str>,
) -> Result<PrivateKeyDer<'static>> {
    let text = String::from_utf8_lossy(pem);
    if let Some(start) = text.find(ENCRYPTED_PKCS8_BEGIN) {
        let Some(password) = password else {
            return Err(Error::Config(format!(
                "{source} is an encrypted key: set ssl.key.password to its password"
            )));
        };
        let end = text[start..]
            .find(ENCRYPTED_PKCS8_END)
            .map(|end| start + end + ENCRYPTED_PKCS8_END.len())
            .ok_or_else(|| {
                Error::Config(format!(
                    "{source}: the encrypted key's PEM block has no end"
                ))
            })?;
        return decrypt_pkcs8(source, &text[start..end], password);
    }
    if text.contains(LEGACY_ENCRYPTED_PEM) {
        return Err(Error::Config(format!(
            "{source} is encrypted in OpenSSL's legacy PEM format ({LEGACY_ENCRYPTED_PEM}), \
             which the streams group member cannot decrypt: convert it to an encrypted PKCS#8 \
             key, keeping ssl.key.password: `openssl pkcs8 -topk8 -v2 aes-256-cbc -v2prf \
             hmacWithSHA256 -in key.pem -out key.p8.pem`"
        )));
    }
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| {
        Error::Config(format!(
            "{source} holds no PEM private key (PKCS#8, PKCS#1 or SEC1): {e}"
        ))
    })
}

fn decrypt_pkcs8(source: &str, block: &str, password: &str) -> Result<PrivateKeyDer<'static>> {
    use pkcs8::der::Decode;
    let (_, der) = pkcs8::der::pem::decode_vec(block.as_bytes())
        .map_err(|e| Error::Config(format!("{source}: the encrypted key's PEM is broken: {e}")))?;
    let encrypted = pkcs8::EncryptedPrivateKeyInfo::from_der(&der).map_err(|e| {
        Error::Config(format!(
            "{source}: the encrypted key is not PKCS#8 EncryptedPrivateKeyInfo: {e}"
        ))
    })?;
    let decrypted = encrypted.decrypt(password).map_err(|e| {
        Error::Config(format!(
            "ssl.key.password does not decrypt {source} ({e}): either the password is wrong, \
             or the key's encryption is not PBES2 with PBKDF2 (HMAC-SHA-224/256/384/512) or \
             scrypt and AES-CBC; re-encrypt it with `openssl pkcs8 -topk8 -v2 aes-256-cbc \
             -v2prf hmacWithSHA256 -in key.pem -out key.p8.pem`"
        ))
    })?;
    Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        decrypted.as_bytes().to_vec(),
    )))
}

/// The name to verify the broker's certificate against: the host of
/// `address` (`host:port`, `[v6]:port`).
pub(crate) fn server_name(address: &str) -> Result<ServerName<'static>> {
    let host = match address.rsplit_once(':') {
        Some((host, _)) => host,
        None => address,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_owned()).map_err(|e| {
        Error::Config(format!(
            "{address}: {host} is neither a DNS name nor an IP address TLS can verify: {e}"
        ))
    })
}

/// What a TLS failure on the connection to `address` means: a rustls
/// error (the certificate, an alert) becomes an error naming the cause and
/// the key to fix; anything else (the broker went away mid-handshake) stays
/// an I/O error, which a member retries.
pub(crate) fn classify(address: &str, tls: &Tls, error: std::io::Error) -> Error {
    let Some(rustls_error) = error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    else {
        return Error::Io {
            address: address.to_owned(),
            source: error,
        };
    };
    let address = address.to_owned();
    match rustls_error {
        rustls::Error::InvalidCertificate(certificate) => match certificate {
            CertificateError::NotValidForName => Error::CertificateHostname {
                host: host_of(&address),
                address,
                presented: Vec::new(),
            },
            CertificateError::NotValidForNameContext {
                expected,
                presented,
            } => Error::CertificateHostname {
                host: expected.to_str().into_owned(),
                address,
                presented: presented.iter().map(|name| presented_name(name)).collect(),
            },
            CertificateError::Expired
            | CertificateError::ExpiredContext { .. }
            | CertificateError::NotValidYet
            | CertificateError::NotValidYetContext { .. } => Error::UntrustedCertificate {
                address,
                reason: format!("{certificate}"),
                fix: "renew the broker's certificate (or set this machine's clock right)"
                    .to_owned(),
            },
            CertificateError::UnknownIssuer => Error::UntrustedCertificate {
                address,
                reason: format!(
                    "it is signed by a CA that is not trusted here (trusted: {})",
                    tls.trust_source()
                ),
                fix: "set ssl.ca.location to the PEM file of the CA that signed the broker's \
                      certificate"
                    .to_owned(),
            },
            other => Error::UntrustedCertificate {
                address,
                reason: format!("{other} (trusted: {})", tls.trust_source()),
                fix: "set ssl.ca.location to the PEM file of the CA that signed the broker's \
                      certificate"
                    .to_owned(),
            },
        },
        rustls::Error::AlertReceived(alert) => {
            use rustls::AlertDescription as Alert;
            let refused_certificate = matches!(
                alert,
                Alert::CertificateRequired
                    | Alert::BadCertificate
                    | Alert::UnknownCA
                    | Alert::CertificateUnknown
                    | Alert::UnsupportedCertificate
                    | Alert::CertificateExpired
                    | Alert::CertificateRevoked
                    | Alert::AccessDenied
            );
            let fix = match (refused_certificate, tls.client_identity_source()) {
                (true, None) => "the broker requires a client certificate (mutual TLS, its \
                     ssl.client.auth=required) and this client has none: set \
                     ssl.certificate.location and ssl.key.location (or ssl.keystore.location) \
                     to a certificate and key signed by a CA the broker's ssl.truststore trusts"
                    .to_owned(),
                (true, Some(source)) => format!(
                    "the broker did not accept this client's certificate ({source}): set \
                     ssl.certificate.location and ssl.key.location (or ssl.keystore.location) \
                     to a certificate and key signed by a CA the broker's ssl.truststore \
                     trusts, and valid now"
                ),
                (false, _) => {
                    "check the broker listener's TLS settings against this client's".to_owned()
                }
            };
            Error::Tls {
                address,
                reason: format!("the broker sent the TLS alert {alert:?}"),
                fix,
            }
        }
        other => Error::Tls {
            address,
            reason: other.to_string(),
            fix: "check that the listener speaks TLS (security.protocol SSL or SASL_SSL \
                  here, an SSL or SASL_SSL listener there)"
                .to_owned(),
        },
    }
}

/// A name as rustls reports it presented (`DnsName("localhost")`,
/// `IpAddress(127.0.0.1)`), as a user writes it.
fn presented_name(name: &str) -> String {
    let inner = name
        .strip_prefix("DnsName(")
        .or_else(|| name.strip_prefix("IpAddress("))
        .and_then(|rest| rest.strip_suffix(')'));
    match inner {
        Some(inner) => inner.trim_matches('"').to_owned(),
        None => name.to_owned(),
    }
}

fn host_of(address: &str) -> String {
    server_name(address)
        .map(|name| name.to_str().into_owned())
        .unwrap_or_else(|_| address.to_owned())
}

/// `ssl.endpoint.identification.algorithm=none`: the chain is verified as
/// always, the host name is not. rustls checks the name after the chain,
/// so a name error means the chain was found good.
#[derive(Debug)]
struct AnyHostName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyHostName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `enable.ssl.certificate.verification=false`: any certificate goes (the
/// handshake's signatures are still checked against it).
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use pkcs8::der::pem::LineEnding;
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose,
        IsCa, KeyPair,
    };
    use rustls::server::WebPkiClientVerifier;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;
    use crate::security::Security;
    use crate::transport;

    const TIMEOUT: Duration = Duration::from_secs(5);

    /// A certificate authority of the test's own.
    fn authority(name: &str) -> CertifiedIssuer<'static, KeyPair> {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
    }

    /// A certificate for `names`, signed by `ca`: its PEM and its key.
    fn certificate(
        ca: &CertifiedIssuer<'static, KeyPair>,
        names: &[&str],
        purpose: ExtendedKeyUsagePurpose,
        expired: bool,
    ) -> (String, KeyPair) {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name.push(DnType::CommonName, "test");
        params.extended_key_usages = vec![purpose];
        if expired {
            params.not_before = rcgen::date_time_ymd(2001, 1, 1);
            params.not_after = rcgen::date_time_ymd(2002, 1, 1);
        }
        let key = KeyPair::generate().unwrap();
        let certificate = params.signed_by(&key, ca).unwrap();
        (certificate.pem(), key)
    }

    /// A TLS echo server on a local port with `ca`'s certificate for
    /// `names`; with `client_ca`, it requires a client certificate signed by
    /// it. Its address.
    async fn server(
        ca: &CertifiedIssuer<'static, KeyPair>,
        names: &[&str],
        expired: bool,
        client_ca: Option<&CertifiedIssuer<'static, KeyPair>>,
    ) -> String {
        let (pem, key) = certificate(ca, names, ExtendedKeyUsagePurpose::ServerAuth, expired);
        let chain = certificates(pem.as_bytes());
        let key = PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).unwrap();
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap();
        let builder = match client_ca {
            Some(client_ca) => {
                let mut roots = RootCertStore::empty();
                roots.add(client_ca.der().clone()).unwrap();
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                        .build()
                        .unwrap();
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let config = Arc::new(builder.with_single_cert(chain, key).unwrap());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut stream) = acceptor.accept(socket).await else {
                        return;
                    };
                    let mut buf = [0u8; 4];
                    if stream.read_exact(&mut buf).await.is_ok() {
                        let _ = stream.write_all(&buf).await;
                        let _ = stream.flush().await;
                    }
                });
            }
        });
        address
    }

    fn trusting(ca: &CertifiedIssuer<'static, KeyPair>) -> TlsOptions {
        TlsOptions {
            ca_pem: Some(ca.pem()),
            ..TlsOptions::default()
        }
    }

    /// Connects, sends 4 bytes and reads them back.
    async fn echo(address: &str, options: TlsOptions) -> Result<()> {
        let tls = Tls::new(options)?;
        let security = Security::Ssl(tls.clone());
        let mut stream = transport::open(address, &security, TIMEOUT).await?;
        let io = |e| classify(address, &tls, e);
        stream.write_all(b"ping").await.map_err(io)?;
        stream.flush().await.map_err(io)?;
        let mut buf = [0u8; 4];
        stream.read_exact(&mut buf).await.map_err(io)?;
        assert_eq!(&buf, b"ping");
        Ok(())
    }

    #[tokio::test]
    async fn a_broker_certificate_from_the_trusted_ca_for_its_address_is_accepted() {
        let ca = authority("trusted");
        let address = server(&ca, &["localhost", "127.0.0.1"], false, None).await;
        echo(&address, trusting(&ca)).await.unwrap();
        // By name too: localhost is in the certificate.
        let port = address.rsplit_once(':').unwrap().1;
        echo(&format!("localhost:{port}"), trusting(&ca))
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_certificate_from_another_ca_is_untrusted_naming_ssl_ca_location() {
        let (ca, other) = (authority("broker's"), authority("someone else's"));
        let address = server(&ca, &["127.0.0.1"], false, None).await;
        let error = echo(&address, trusting(&other)).await.unwrap_err();
        assert!(
            matches!(error, Error::UntrustedCertificate { .. }),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(message.contains("not trusted"), "{message}");
        assert!(message.contains("set ssl.ca.location"), "{message}");
        assert!(error.is_fatal());
    }

    #[tokio::test]
    async fn an_expired_certificate_is_untrusted_and_says_so() {
        let ca = authority("trusted");
        let address = server(&ca, &["127.0.0.1"], true, None).await;
        let error = echo(&address, trusting(&ca)).await.unwrap_err();
        let message = error.to_string();
        assert!(
            matches!(error, Error::UntrustedCertificate { .. }),
            "{message}"
        );
        assert!(message.contains("expired"), "{message}");
    }

    #[tokio::test]
    async fn a_certificate_for_another_host_fails_the_hostname_check_unless_it_is_off() {
        let ca = authority("trusted");
        let address = server(&ca, &["kafka.example.com"], false, None).await;
        let error = echo(&address, trusting(&ca)).await.unwrap_err();
        let message = error.to_string();
        assert!(
            matches!(error, Error::CertificateHostname { .. }),
            "{message}"
        );
        assert!(message.contains("127.0.0.1"), "{message}");
        assert!(message.contains("kafka.example.com"), "{message}");
        assert!(
            message.contains("ssl.endpoint.identification.algorithm=none"),
            "{message}"
        );
        assert!(error.is_fatal());
        let unchecked = TlsOptions {
            verify_hostname: false,
            ..trusting(&ca)
        };
        echo(&address, unchecked).await.unwrap();
        // The chain is still checked with the host name off.
        let other = TlsOptions {
            verify_hostname: false,
            ..trusting(&authority("someone else's"))
        };
        let error = echo(&address, other).await.unwrap_err();
        assert!(
            matches!(error, Error::UntrustedCertificate { .. }),
            "{error}"
        );
    }

    #[tokio::test]
    async fn certificate_verification_off_accepts_any_certificate() {
        let address = server(&authority("unknown"), &["elsewhere"], true, None).await;
        let anything = TlsOptions {
            verify_certificate: false,
            ..TlsOptions::default()
        };
        echo(&address, anything).await.unwrap();
    }

    fn encrypted_pkcs8(key: &KeyPair, password: &str) -> String {
        use pkcs8::der::Decode;
        let der = key.serialize_der();
        let info = pkcs8::PrivateKeyInfo::from_der(&der).unwrap();
        let params =
            pkcs8::pkcs5::pbes2::Parameters::pbkdf2_sha256_aes256cbc(2048, b"test-salt", &[7; 16])
                .unwrap();
        let document = info.encrypt_with_params(params, password).unwrap();
        document
            .to_pem("ENCRYPTED PRIVATE KEY", LineEnding::LF)
            .unwrap()
            .to_string()
    }

    /// A server that requires a client certificate of a CA of its own: the
    /// broker's CA, its address, and a client certificate (PEM) with its
    /// key that it accepts.
    async fn mutual_tls_server() -> (CertifiedIssuer<'static, KeyPair>, String, String, KeyPair) {
        let (ca, clients) = (authority("broker's"), authority("clients'"));
        let address = server(&ca, &["127.0.0.1"], false, Some(&clients)).await;
        let (certificate_pem, key) = certificate(
            &clients,
            &["app"],
            ExtendedKeyUsagePurpose::ClientAuth,
            false,
        );
        (ca, address, certificate_pem, key)
    }

    #[tokio::test]
    async fn mutual_tls_presents_the_client_certificate_plain_or_encrypted() {
        let (ca, address, certificate_pem, key) = mutual_tls_server().await;

        let without = echo(&address, trusting(&ca)).await.unwrap_err();
        let message = without.to_string();
        assert!(matches!(without, Error::Tls { .. }), "{without:?}");
        assert!(message.contains("ssl.certificate.location"), "{message}");

        let plain = TlsOptions {
            certificate_pem: Some(certificate_pem.clone()),
            key_pem: Some(key.serialize_pem()),
            ..trusting(&ca)
        };
        echo(&address, plain).await.unwrap();

        let encrypted = TlsOptions {
            certificate_pem: Some(certificate_pem.clone()),
            key_pem: Some(encrypted_pkcs8(&key, "key-secret")),
            key_password: Some("key-secret".to_owned()),
            ..trusting(&ca)
        };
        echo(&address, encrypted).await.unwrap();
    }

    #[tokio::test]
    async fn mutual_tls_presents_the_identity_of_a_pkcs12_key_store() {
        use p12_keystore::{Certificate, KeyStore, KeyStoreEntry, PrivateKeyChain};
        let (ca, address, certificate_pem, key) = mutual_tls_server().await;
        let chain = certificates(certificate_pem.as_bytes())
            .iter()
            .map(|c| Certificate::from_der(c.as_ref()).unwrap())
            .collect::<Vec<_>>();
        let mut store = KeyStore::new();
        store.add_entry(
            "app",
            KeyStoreEntry::PrivateKeyChain(PrivateKeyChain::new(key.serialize_der(), [1], chain)),
        );
        let dir = std::env::temp_dir().join(format!("kstreams-group-p12-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("client.p12");
        std::fs::write(&path, store.writer("store-secret").write().unwrap()).unwrap();

        let options = |password: &str| TlsOptions {
            keystore_location: Some(path.clone()),
            keystore_password: Some(password.to_owned()),
            ..trusting(&ca)
        };
        echo(&address, options("store-secret")).await.unwrap();
        let Err(Error::Config(wrong)) = Tls::new(options("not-it")) else {
            panic!("a wrong store password must fail");
        };
        assert!(wrong.contains("ssl.keystore.password"), "{wrong}");
        assert!(wrong.contains("client.p12"), "{wrong}");
        assert!(!wrong.contains("not-it"), "{wrong}");
        let both = TlsOptions {
            key_pem: Some(key.serialize_pem()),
            ..options("store-secret")
        };
        let Err(Error::Config(both)) = Tls::new(both) else {
            panic!("a store and a PEM key together must fail");
        };
        assert!(both.contains("ssl.key.pem"), "{both}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_encrypted_key_without_or_with_a_wrong_password_names_ssl_key_password() {
        let key = KeyPair::generate().unwrap();
        let pem = encrypted_pkcs8(&key, "right");
        let source = "ssl.key.location=/keys/client.key";
        let Err(Error::Config(missing)) = private_key(source, pem.as_bytes(), None) else {
            panic!("no password must fail");
        };
        assert!(missing.contains("set ssl.key.password"), "{missing}");
        assert!(missing.contains("/keys/client.key"), "{missing}");
        let Err(Error::Config(wrong)) = private_key(source, pem.as_bytes(), Some("wrong")) else {
            panic!("a wrong password must fail");
        };
        assert!(
            wrong.contains("ssl.key.password does not decrypt"),
            "{wrong}"
        );
        assert!(wrong.contains("/keys/client.key"), "{wrong}");
        let right = private_key(source, pem.as_bytes(), Some("right")).unwrap();
        assert_eq!(right.secret_der(), key.serialize_der());
    }

    #[test]
    fn a_legacy_encrypted_pem_key_is_refused_with_the_conversion() {
        let legacy = "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n\
                      DEK-Info: AES-256-CBC,00112233445566778899AABBCCDDEEFF\n\nAAAA\n\
                      -----END RSA PRIVATE KEY-----\n";
        let Err(Error::Config(message)) =
            private_key("ssl.key.location=/k.pem", legacy.as_bytes(), Some("pw"))
        else {
            panic!("a legacy encrypted key must be refused");
        };
        assert!(message.contains("/k.pem"), "{message}");
        assert!(message.contains("openssl pkcs8 -topk8"), "{message}");
    }

    #[test]
    fn half_a_client_identity_is_refused() {
        let options = TlsOptions {
            certificate_location: Some("/certs/client.pem".into()),
            ..TlsOptions::default()
        };
        let Err(Error::Config(message)) = Tls::new(options) else {
            panic!("a certificate without a key must fail");
        };
        // The file is read first: the missing one is named.
        assert!(message.contains("ssl.certificate.location"), "{message}");
    }

    #[test]
    fn a_ca_file_without_certificates_is_named() {
        let dir = std::env::temp_dir().join(format!("kstreams-group-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("empty-ca.pem");
        std::fs::write(&file, "not a certificate\n").unwrap();
        let options = TlsOptions {
            ca_location: Some(file.clone()),
            ..TlsOptions::default()
        };
        let Err(Error::Config(message)) = Tls::new(options) else {
            panic!("a CA file without certificates must fail");
        };
        assert!(message.contains("ssl.ca.location"), "{message}");
        assert!(message.contains("no PEM certificate"), "{message}");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn a_listener_that_never_answers_the_handshake_times_out() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        // Accepts and keeps the socket open, silent.
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        let tls = Tls::new(TlsOptions::default()).unwrap();
        let started = std::time::Instant::now();
        let result =
            transport::open(&address, &Security::Ssl(tls), Duration::from_millis(300)).await;
        let Err(error) = result else {
            panic!("a silent listener must fail");
        };
        assert!(matches!(error, Error::Timeout { .. }), "{error:?}");
        assert!(error.to_string().contains("TLS handshake"), "{error}");
        assert!(started.elapsed() < Duration::from_secs(3));
    }

    #[test]
    fn presented_names_read_as_written() {
        assert_eq!(presented_name("DnsName(\"localhost\")"), "localhost");
        assert_eq!(presented_name("IpAddress(127.0.0.1)"), "127.0.0.1");
        assert_eq!(presented_name("something else"), "something else");
    }

    #[test]
    fn the_server_name_is_the_host_of_the_address() {
        assert_eq!(
            server_name("broker-1.example.com:9093").unwrap().to_str(),
            "broker-1.example.com"
        );
        assert_eq!(server_name("127.0.0.1:9093").unwrap().to_str(), "127.0.0.1");
        assert_eq!(server_name("[::1]:9093").unwrap().to_str(), "::1");
    }
}
