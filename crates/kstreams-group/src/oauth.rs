//! SASL OAUTHBEARER (RFC 7628, KIP-255) for the streams group member: the
//! token sources librdkafka has built in, read from the same keys, so that
//! one configuration drives every client of an application.
//!
//! - `enable.sasl.oauthbearer.unsecure.jwt=true` with `sasl.oauthbearer.config`
//!   (`principal=... scope=... lifeSeconds=... extension_NAME=...`): an
//!   unsigned JWT made here as librdkafka makes it (header `{"alg":"none"}`,
//!   claims `sub`, `iat`, `exp` and `scope`), for test brokers, whose
//!   validator Kafka ships as the OAUTHBEARER default.
//! - `sasl.oauthbearer.method=oidc`: a token from
//!   `sasl.oauthbearer.token.endpoint.url` by the OAuth 2 client credentials
//!   grant (`sasl.oauthbearer.client.id`, `.client.secret`, `.scope`; HTTPS
//!   trusting `https.ca.location`/`https.ca.pem`, else the system's CAs), its
//!   expiry and principal read from the JWT's `exp` and `sub` claims.
//!
//! A token is fetched when a connection authenticates and reused by every
//! connection until 80 % of its life has passed (librdkafka's refresh
//! point); a broker with `connections.max.reauth.ms` makes the member
//! authenticate again before its session ends (KIP-368,
//! [`crate::connection`]), with a fresh token by then.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;

use crate::error::{Error, Result};

/// librdkafka's default `lifeSeconds` of an unsecured token.
const DEFAULT_LIFE: Duration = Duration::from_secs(3600);
/// The share of a token's life after which it is refreshed (librdkafka's).
const REFRESH_SHARE: f64 = 0.8;
/// How long a token request may take.
const TOKEN_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the member's OAUTHBEARER tokens come from, and the SASL extensions
/// sent with them. Clones share the current token.
#[derive(Clone)]
pub struct OAuthBearer {
    source: Arc<TokenSource>,
    extensions: Vec<(String, String)>,
    current: Arc<Mutex<Option<Token>>>,
}

#[derive(PartialEq, Eq)]
enum TokenSource {
    /// librdkafka's unsecured JWT.
    Unsecured {
        principal_claim: String,
        principal: String,
        scope_claim: String,
        scopes: Vec<String>,
        life: Duration,
    },
    /// OIDC client credentials.
    Oidc(Oidc),
}

#[derive(PartialEq, Eq)]
struct Oidc {
    endpoint: String,
    client_id: String,
    client_secret: String,
    scope: Option<String>,
    /// `https.ca.location`/`https.ca.pem`'s certificates (DER); empty: the
    /// system's.
    trusted: Vec<Vec<u8>>,
}

/// A token and what the client knows of it.
#[derive(Clone, Debug)]
pub(crate) struct Token {
    pub(crate) value: String,
    pub(crate) principal: String,
    pub(crate) expires_at: SystemTime,
    received_at: SystemTime,
}

impl Token {
    fn needs_refresh(&self, now: SystemTime) -> bool {
        let life = self
            .expires_at
            .duration_since(self.received_at)
            .unwrap_or_default();
        now >= self.received_at + life.mul_f64(REFRESH_SHARE)
    }
}

impl PartialEq for OAuthBearer {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source && self.extensions == other.extensions
    }
}

impl Eq for OAuthBearer {}

impl fmt::Debug for OAuthBearer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("OAuthBearer");
        match &*self.source {
            TokenSource::Unsecured {
                principal, scopes, ..
            } => debug
                .field("source", &"unsecured JWT")
                .field("principal", principal)
                .field("scopes", scopes),
            TokenSource::Oidc(oidc) => debug
                .field("source", &"OIDC client credentials")
                .field("endpoint", &oidc.endpoint)
                .field("client_id", &oidc.client_id)
                .field("client_secret", &"[redacted]"),
        };
        let names: Vec<&str> = self.extensions.iter().map(|(k, _)| k.as_str()).collect();
        debug.field("extensions", &names).finish()
    }
}

fn config_error(message: String) -> Error {
    Error::Config(message)
}

impl OAuthBearer {
    /// The token source of a librdkafka client configuration (`get`
    /// answering a set key): `sasl.oauthbearer.method` (`default` or
    /// `oidc`), and for `default` `enable.sasl.oauthbearer.unsecure.jwt=true`
    /// with `sasl.oauthbearer.config`; for `oidc`
    /// `sasl.oauthbearer.token.endpoint.url`, `.client.id`, `.client.secret`,
    /// `.scope`, `.extensions`, `https.ca.location`, `https.ca.pem`. Nothing
    /// is fetched here.
    pub(crate) fn from_client_config(get: &impl Fn(&str) -> Option<String>) -> Result<OAuthBearer> {
        let method = get("sasl.oauthbearer.method").unwrap_or_else(|| "default".to_owned());
        let (source, extensions) = match method.trim().to_ascii_lowercase().as_str() {
            "oidc" => oidc_source(get)?,
            "default" => {
                let unsecure = get("enable.sasl.oauthbearer.unsecure.jwt")
                    .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
                if !unsecure {
                    return Err(config_error(
                        "sasl.mechanism=OAUTHBEARER needs a token source the streams group \
                         member can use: sasl.oauthbearer.method=oidc with \
                         sasl.oauthbearer.token.endpoint.url, sasl.oauthbearer.client.id and \
                         sasl.oauthbearer.client.secret, or (test brokers) \
                         enable.sasl.oauthbearer.unsecure.jwt=true with sasl.oauthbearer.config"
                            .to_owned(),
                    ));
                }
                let config = get("sasl.oauthbearer.config").unwrap_or_default();
                unsecured_source(&config)?
            }
            _ => {
                return Err(config_error(format!(
                    "sasl.oauthbearer.method={method} is not one of default, oidc"
                )))
            }
        };
        Ok(OAuthBearer {
            source: Arc::new(source),
            extensions,
            current: Arc::new(Mutex::new(None)),
        })
    }

    /// Who the tokens are for, for messages: the unsecured token's
    /// principal, or the OIDC client id.
    pub(crate) fn principal(&self) -> &str {
        match &*self.source {
            TokenSource::Unsecured { principal, .. } => principal,
            TokenSource::Oidc(oidc) => &oidc.client_id,
        }
    }

    /// What to check when the broker refuses a token.
    pub(crate) fn hint(&self) -> &'static str {
        match &*self.source {
            TokenSource::Unsecured { .. } => {
                "check sasl.oauthbearer.config (principal, scope, lifeSeconds: the broker's \
                 validator may require a scope) or, in Java's keys, sasl.jaas.config"
            }
            TokenSource::Oidc(_) => {
                "check sasl.oauthbearer.token.endpoint.url, sasl.oauthbearer.client.id, \
                 sasl.oauthbearer.client.secret and sasl.oauthbearer.scope (the token's issuer, \
                 audience and scope must be those the broker expects)"
            }
        }
    }

    /// The current token, fetched or made anew when there is none or it is
    /// past 80 % of its life. The OIDC request runs on a blocking thread.
    pub(crate) async fn token(&self) -> std::result::Result<Token, String> {
        let now = SystemTime::now();
        if let Some(token) = self.lock().as_ref() {
            if !token.needs_refresh(now) {
                return Ok(token.clone());
            }
        }
        let token = match &*self.source {
            TokenSource::Unsecured { .. } => self.unsecured_token(now),
            TokenSource::Oidc(_) => {
                let source = self.source.clone();
                tokio::task::spawn_blocking(move || match &*source {
                    TokenSource::Oidc(oidc) => oidc.fetch(),
                    TokenSource::Unsecured { .. } => unreachable!("an OIDC source"),
                })
                .await
                .map_err(|e| format!("the token request failed: {e}"))??
            }
        };
        if token.expires_at <= SystemTime::now() {
            return Err(format!(
                "the token expired {} s ago, before it could be used (its exp claim)",
                SystemTime::now()
                    .duration_since(token.expires_at)
                    .unwrap_or_default()
                    .as_secs()
            ));
        }
        *self.lock() = Some(token.clone());
        Ok(token)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Token>> {
        self.current.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The client's first message (RFC 7628 §3.1): the GS2 header without
    /// an authorization identity, `auth=Bearer <token>`, the extensions,
    /// each after a ^A, and ^A^A at the end.
    pub(crate) fn initial_response(&self, token: &Token) -> Vec<u8> {
        let mut message = format!("n,,\x01auth=Bearer {}", token.value);
        for (key, value) in &self.extensions {
            message.push('\x01');
            message.push_str(key);
            message.push('=');
            message.push_str(value);
        }
        message.push_str("\x01\x01");
        message.into_bytes()
    }

    fn unsecured_token(&self, now: SystemTime) -> Token {
        let TokenSource::Unsecured {
            principal_claim,
            principal,
            scope_claim,
            scopes,
            life,
        } = &*self.source
        else {
            unreachable!("an unsecured source")
        };
        let issued = now.duration_since(UNIX_EPOCH).unwrap_or_default();
        let expires = issued + *life;
        let mut claims = serde_json::Map::new();
        claims.insert(principal_claim.clone(), principal.clone().into());
        claims.insert("iat".to_owned(), seconds(issued).into());
        claims.insert("exp".to_owned(), seconds(expires).into());
        if !scopes.is_empty() {
            claims.insert(scope_claim.clone(), scopes.clone().into());
        }
        let claims = serde_json::Value::Object(claims).to_string();
        let value = format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#),
            URL_SAFE_NO_PAD.encode(claims)
        );
        Token {
            value,
            principal: principal.clone(),
            expires_at: now + *life,
            received_at: now,
        }
    }
}

/// Seconds since the epoch with milliseconds, as librdkafka writes `iat`
/// and `exp` (`%.3f`).
fn seconds(since_epoch: Duration) -> f64 {
    (since_epoch.as_millis() as f64) / 1000.0
}

/// `sasl.oauthbearer.config` as librdkafka reads it for its unsecured JWT:
/// space-separated `name=value`, names `principalClaimName` (default
/// `sub`), `principal` (required), `scopeClaimName` (default `scope`),
/// `scope` (comma-separated), `lifeSeconds` (default 3600),
/// `extension_NAME`.
fn unsecured_source(config: &str) -> Result<(TokenSource, Vec<(String, String)>)> {
    let refuse = |what: String| {
        config_error(format!("sasl.oauthbearer.config: {what} (librdkafka's unsecured JWT: principal=... [scope=a,b] [lifeSeconds=N] [extension_NAME=value])"))
    };
    let (mut principal_claim, mut principal, mut scope_claim, mut scopes, mut life) =
        (None, None, None, None, None);
    let mut extensions = Vec::new();
    for pair in config.split_whitespace() {
        let (name, value) = pair
            .split_once('=')
            .ok_or_else(|| refuse(format!("{pair:?} is not name=value")))?;
        if value.is_empty() {
            return Err(refuse(format!("{name} has no value")));
        }
        let slot = match name {
            "principalClaimName" => &mut principal_claim,
            "principal" => &mut principal,
            "scopeClaimName" => &mut scope_claim,
            "scope" => &mut scopes,
            "lifeSeconds" => &mut life,
            _ => match name.strip_prefix("extension_") {
                Some(extension) => {
                    extensions.push((extension.to_owned(), value.to_owned()));
                    continue;
                }
                None => return Err(refuse(format!("unknown name {name}"))),
            },
        };
        if slot.replace(value.to_owned()).is_some() {
            return Err(refuse(format!("{name} is set twice")));
        }
    }
    let principal = principal.ok_or_else(|| refuse("no principal=<value>".to_owned()))?;
    let life = match life {
        None => DEFAULT_LIFE,
        Some(seconds) => match seconds.parse::<u64>() {
            Ok(seconds) if seconds > 0 => Duration::from_secs(seconds),
            _ => {
                return Err(refuse(format!(
                    "lifeSeconds={seconds} is not a positive number"
                )))
            }
        },
    };
    check_extensions(&extensions, "sasl.oauthbearer.config")?;
    let source = TokenSource::Unsecured {
        principal_claim: principal_claim.unwrap_or_else(|| "sub".to_owned()),
        principal,
        scope_claim: scope_claim.unwrap_or_else(|| "scope".to_owned()),
        scopes: scopes
            .map(|s| {
                s.split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
        life,
    };
    Ok((source, extensions))
}

fn oidc_source(
    get: &impl Fn(&str) -> Option<String>,
) -> Result<(TokenSource, Vec<(String, String)>)> {
    let required = |key: &str| {
        get(key).ok_or_else(|| {
            config_error(format!(
                "{key} is not set: sasl.oauthbearer.method=oidc needs \
                 sasl.oauthbearer.token.endpoint.url, sasl.oauthbearer.client.id and \
                 sasl.oauthbearer.client.secret"
            ))
        })
    };
    let endpoint = required("sasl.oauthbearer.token.endpoint.url")?;
    if !(endpoint.starts_with("https://") || endpoint.starts_with("http://")) {
        return Err(config_error(format!(
            "sasl.oauthbearer.token.endpoint.url={endpoint} is not an http(s):// URL"
        )));
    }
    if let Some(grant) = get("sasl.oauthbearer.grant.type") {
        if grant.trim() != "client_credentials" {
            return Err(config_error(format!(
                "sasl.oauthbearer.grant.type={grant}: the streams group member requests tokens \
                 with the client_credentials grant only"
            )));
        }
    }
    let client_id = required("sasl.oauthbearer.client.id")?;
    let client_secret = required("sasl.oauthbearer.client.secret")?;
    let mut trusted = Vec::new();
    if let Some(location) = get("https.ca.location").filter(|l| l != "probe") {
        let pem = std::fs::read(&location).map_err(|e| {
            config_error(format!("https.ca.location={location}: cannot read it: {e}"))
        })?;
        trusted.extend(
            crate::tls::certificates(&pem)
                .into_iter()
                .map(|c| c.to_vec()),
        );
        if trusted.is_empty() {
            return Err(config_error(format!(
                "https.ca.location={location} holds no PEM certificate"
            )));
        }
    }
    if let Some(pem) = get("https.ca.pem") {
        let before = trusted.len();
        trusted.extend(
            crate::tls::certificates(pem.as_bytes())
                .into_iter()
                .map(|c| c.to_vec()),
        );
        if trusted.len() == before {
            return Err(config_error(
                "https.ca.pem holds no PEM certificate".to_owned(),
            ));
        }
    }
    let mut extensions = Vec::new();
    for pair in get("sasl.oauthbearer.extensions")
        .unwrap_or_default()
        .split(',')
        .filter(|p| !p.trim().is_empty())
    {
        let (key, value) = pair.split_once('=').ok_or_else(|| {
            config_error(format!(
                "sasl.oauthbearer.extensions: {pair:?} is not key=value"
            ))
        })?;
        extensions.push((key.trim().to_owned(), value.to_owned()));
    }
    check_extensions(&extensions, "sasl.oauthbearer.extensions")?;
    let source = TokenSource::Oidc(Oidc {
        endpoint,
        client_id,
        client_secret,
        scope: get("sasl.oauthbearer.scope"),
        trusted,
    });
    Ok((source, extensions))
}

/// Kafka's rules for SASL extensions (OAuthBearerClientInitialResponse):
/// names of letters only, not `auth`; values of printable ASCII, space,
/// tab, CR and LF.
fn check_extensions(extensions: &[(String, String)], key: &str) -> Result<()> {
    for (name, value) in extensions {
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphabetic()) || name == "auth" {
            return Err(config_error(format!(
                "{key}: the SASL extension name {name:?} must be letters only, and not auth"
            )));
        }
        if !value
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) || b" \t\r\n".contains(&b))
        {
            return Err(config_error(format!(
                "{key}: the value of the SASL extension {name} must be printable ASCII"
            )));
        }
    }
    Ok(())
}

impl Oidc {
    /// A token by the client credentials grant (RFC 6749 §4.4), as
    /// librdkafka requests it: HTTP basic authentication with the client id
    /// and secret, `grant_type=client_credentials` and the scope in the
    /// form body; the JWT's `exp` and `sub` claims read.
    fn fetch(&self) -> std::result::Result<Token, String> {
        let roots = if self.trusted.is_empty() {
            let native = rustls_native_certs::load_native_certs();
            if native.certs.is_empty() {
                ureq::tls::RootCerts::WebPki
            } else {
                ureq::tls::RootCerts::Specific(Arc::new(
                    native
                        .certs
                        .iter()
                        .map(|c| ureq::tls::Certificate::from_der(c).to_owned())
                        .collect(),
                ))
            }
        } else {
            ureq::tls::RootCerts::Specific(Arc::new(
                self.trusted
                    .iter()
                    .map(|c| ureq::tls::Certificate::from_der(c).to_owned())
                    .collect(),
            ))
        };
        let agent = ureq::Agent::new_with_config(
            ureq::Agent::config_builder()
                .tls_config(ureq::tls::TlsConfig::builder().root_certs(roots).build())
                .timeout_global(Some(TOKEN_REQUEST_TIMEOUT))
                .http_status_as_error(false)
                .build(),
        );
        let mut body = "grant_type=client_credentials".to_owned();
        if let Some(scope) = &self.scope {
            body.push_str("&scope=");
            body.push_str(&form_encode(scope));
        }
        let credentials = STANDARD.encode(format!("{}:{}", self.client_id, self.client_secret));
        let at = &self.endpoint;
        let mut response = agent
            .post(at)
            .header("Authorization", &format!("Basic {credentials}"))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .header("Accept", "application/json")
            .send(body.as_str())
            .map_err(|e| format!("the token request to {at} failed: {e}"))?;
        let status = response.status();
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| format!("the token endpoint {at} answered unreadably: {e}"))?;
        if !status.is_success() {
            let text: String = text.chars().take(300).collect();
            return Err(format!(
                "the token endpoint {at} refused the client credentials of {:?}: HTTP {status}: \
                 {text}",
                self.client_id
            ));
        }
        let answer: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("the token endpoint {at} answered no JSON: {e}"))?;
        let value = answer
            .get("access_token")
            .and_then(|t| t.as_str())
            .ok_or_else(|| format!("the token endpoint {at} answered no access_token"))?;
        token_of_jwt(value, SystemTime::now())
            .map_err(|e| format!("the access token from {at} {e}"))
    }
}

/// `value`'s expiry (`exp`) and principal (`sub`) from its JWT claims, as
/// librdkafka reads them; the signature is the broker's to check.
fn token_of_jwt(value: &str, now: SystemTime) -> std::result::Result<Token, String> {
    let payload = value
        .split('.')
        .nth(1)
        .filter(|_| value.split('.').count() == 3)
        .ok_or("is not a JWT (header.payload.signature)")?;
    let payload = URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .map_err(|e| format!("has a payload that is not base64url: {e}"))?;
    let claims: serde_json::Value = serde_json::from_slice(&payload)
        .map_err(|e| format!("has a payload that is not JSON: {e}"))?;
    let exp = claims
        .get("exp")
        .and_then(serde_json::Value::as_f64)
        .ok_or("has no exp claim")?;
    let principal = claims
        .get("sub")
        .and_then(|s| s.as_str())
        .ok_or("has no sub claim")?
        .to_owned();
    let expires_at = UNIX_EPOCH + Duration::from_millis((exp.max(0.0) * 1000.0) as u64);
    Ok(Token {
        value: value.to_owned(),
        principal,
        expires_at,
        received_at: now,
    })
}

/// `application/x-www-form-urlencoded` of `text`: unreserved characters as
/// they are, everything else percent-encoded (a space as `%20`).
fn form_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn from(pairs: &[(&str, &str)]) -> Result<OAuthBearer> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        OAuthBearer::from_client_config(&|key: &str| map.get(key).cloned())
    }

    fn claims_of(token: &str) -> serde_json::Value {
        let parts: Vec<&str> = token.split('.').collect();
        assert_eq!(parts.len(), 3, "{token}");
        assert_eq!(parts[2], "", "an unsecured JWT has an empty signature");
        let header = URL_SAFE_NO_PAD.decode(parts[0]).unwrap();
        assert_eq!(header, br#"{"alg":"none"}"#);
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap()
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn the_unsecured_jwt_is_made_as_librdkafka_makes_it() {
        let oauth = from(&[
            ("enable.sasl.oauthbearer.unsecure.jwt", "true"),
            (
                "sasl.oauthbearer.config",
                "principal=alice scope=kstreams,admin lifeSeconds=600 extension_traceId=abc123",
            ),
        ])
        .unwrap();
        assert_eq!(oauth.principal(), "alice");
        let token = runtime().block_on(oauth.token()).unwrap();
        let claims = claims_of(&token.value);
        assert_eq!(claims["sub"], "alice");
        assert_eq!(claims["scope"], serde_json::json!(["kstreams", "admin"]));
        let (iat, exp) = (
            claims["iat"].as_f64().unwrap(),
            claims["exp"].as_f64().unwrap(),
        );
        assert!((exp - iat - 600.0).abs() < 0.01, "{claims}");
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!((now - iat).abs() < 5.0, "{claims}");
        // RFC 7628's client initial response, the extension after the token.
        let initial = String::from_utf8(oauth.initial_response(&token)).unwrap();
        assert_eq!(
            initial,
            format!(
                "n,,\x01auth=Bearer {}\x01traceId=abc123\x01\x01",
                token.value
            )
        );
        // Claim names as configured.
        let named = from(&[
            ("enable.sasl.oauthbearer.unsecure.jwt", "true"),
            (
                "sasl.oauthbearer.config",
                "principalClaimName=azp principal=svc scopeClaimName=roles scope=r",
            ),
        ])
        .unwrap();
        let claims = claims_of(&runtime().block_on(named.token()).unwrap().value);
        assert_eq!(claims["azp"], "svc");
        assert_eq!(claims["roles"], serde_json::json!(["r"]));
        assert!(claims.get("sub").is_none());
    }

    #[test]
    fn a_token_is_reused_until_80_percent_of_its_life() {
        let oauth = from(&[
            ("enable.sasl.oauthbearer.unsecure.jwt", "true"),
            ("sasl.oauthbearer.config", "principal=alice lifeSeconds=100"),
        ])
        .unwrap();
        let rt = runtime();
        let first = rt.block_on(oauth.token()).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let again = rt.block_on(oauth.clone().token()).unwrap();
        assert_eq!(first.value, again.value, "clones share the token");
        let start = first.received_at;
        assert!(!first.needs_refresh(start + Duration::from_secs(79)));
        assert!(first.needs_refresh(start + Duration::from_secs(80)));
    }

    #[test]
    fn what_cannot_make_a_token_is_refused_naming_the_key() {
        let message = |pairs: &[(&str, &str)]| match from(pairs) {
            Err(Error::Config(message)) => message,
            other => panic!("expected a config error, got {other:?}"),
        };
        let no_source = message(&[]);
        assert!(
            no_source.contains("sasl.oauthbearer.method=oidc")
                && no_source.contains("enable.sasl.oauthbearer.unsecure.jwt=true"),
            "{no_source}"
        );
        let unsecure = ("enable.sasl.oauthbearer.unsecure.jwt", "true");
        for (config, says) in [
            ("scope=a", "no principal"),
            ("principal=a principal=b", "principal is set twice"),
            ("principal=a lifeSeconds=-5", "lifeSeconds=-5"),
            ("principal=a color=blue", "unknown name color"),
            ("principal=a extension_auth=x", "\"auth\""),
            ("principal=a extension_tr4ce=x", "\"tr4ce\""),
        ] {
            let text = message(&[unsecure, ("sasl.oauthbearer.config", config)]);
            assert!(
                text.starts_with("sasl.oauthbearer.config") && text.contains(says),
                "{config}: {text}"
            );
        }
        let oidc = ("sasl.oauthbearer.method", "oidc");
        let text = message(&[oidc]);
        assert!(
            text.starts_with("sasl.oauthbearer.token.endpoint.url is not set"),
            "{text}"
        );
        let text = message(&[
            oidc,
            ("sasl.oauthbearer.token.endpoint.url", "http://x/token"),
            ("sasl.oauthbearer.client.id", "id"),
        ]);
        assert!(
            text.starts_with("sasl.oauthbearer.client.secret is not set"),
            "{text}"
        );
        let text = message(&[("sasl.oauthbearer.method", "kerberos")]);
        assert!(text.contains("sasl.oauthbearer.method=kerberos"), "{text}");
        // The secret never shows.
        let shown = format!(
            "{:?}",
            from(&[
                oidc,
                ("sasl.oauthbearer.token.endpoint.url", "http://x/token"),
                ("sasl.oauthbearer.client.id", "id"),
                ("sasl.oauthbearer.client.secret", "very-secret-value"),
            ])
            .unwrap()
        );
        assert!(!shown.contains("very-secret-value"), "{shown}");
    }

    /// A one-route token endpoint on loopback: each request is recorded and
    /// answered with `answer(count)` as (status, body).
    fn token_endpoint(
        answer: impl Fn(usize) -> (u16, String) + Send + 'static,
    ) -> (String, Arc<Mutex<Vec<String>>>, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/oauth2/token", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let count = Arc::new(AtomicUsize::new(0));
        let (seen, counted) = (requests.clone(), count.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let mut stream = stream.unwrap();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut head = String::new();
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    reader.read_line(&mut line).unwrap();
                    if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = value.trim().parse().unwrap();
                    }
                    head.push_str(&line);
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).unwrap();
                head.push_str(&String::from_utf8(body).unwrap());
                seen.lock().unwrap().push(head);
                let (status, body) = answer(counted.fetch_add(1, Ordering::SeqCst));
                write!(
                    stream,
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
                .unwrap();
            }
        });
        (url, requests, count)
    }

    /// An unsigned JWT for `sub`, expiring `life_secs` from now (negative:
    /// in the past).
    pub(crate) fn jwt(sub: &str, scope: &str, life_secs: i64) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let claims = serde_json::json!({
            "sub": sub, "iat": now, "exp": now + life_secs, "scope": scope
        });
        format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        )
    }

    fn oidc(url: &str) -> OAuthBearer {
        from(&[
            ("sasl.oauthbearer.method", "oidc"),
            ("sasl.oauthbearer.token.endpoint.url", url),
            ("sasl.oauthbearer.client.id", "kstreams-app"),
            ("sasl.oauthbearer.client.secret", "s3cret"),
            ("sasl.oauthbearer.scope", "kstreams offline"),
            (
                "sasl.oauthbearer.extensions",
                "logicalCluster=lkc-1,poolId=p",
            ),
        ])
        .unwrap()
    }

    #[test]
    fn oidc_fetches_with_client_credentials_and_refreshes_before_expiry() {
        // A 2 s token: refreshed after 1.6 s.
        let (url, requests, count) = token_endpoint(|n| {
            let token = jwt(&format!("svc-{n}"), "kstreams", 2);
            (
                200,
                format!(r#"{{"access_token":"{token}","token_type":"Bearer","expires_in":2}}"#),
            )
        });
        let oauth = oidc(&url);
        assert_eq!(oauth.principal(), "kstreams-app");
        let rt = runtime();
        let token = rt.block_on(oauth.token()).unwrap();
        assert_eq!(token.principal, "svc-0");
        let request = requests.lock().unwrap()[0].clone();
        assert!(
            request.starts_with("POST /oauth2/token HTTP/1.1\r\n"),
            "{request}"
        );
        let basic = format!("Basic {}", STANDARD.encode("kstreams-app:s3cret"));
        assert!(
            request
                .to_ascii_lowercase()
                .contains(&format!("authorization: {}", basic.to_ascii_lowercase())),
            "{request}"
        );
        assert!(
            request.ends_with("\r\n\r\ngrant_type=client_credentials&scope=kstreams%20offline"),
            "{request}"
        );
        let initial = String::from_utf8(oauth.initial_response(&token)).unwrap();
        assert_eq!(
            initial,
            format!(
                "n,,\x01auth=Bearer {}\x01logicalCluster=lkc-1\x01poolId=p\x01\x01",
                token.value
            )
        );
        // Reused while fresh, refetched past 80 % of its life.
        assert_eq!(rt.block_on(oauth.token()).unwrap().value, token.value);
        assert_eq!(count.load(Ordering::SeqCst), 1);
        std::thread::sleep(Duration::from_millis(1700));
        let fresh = rt.block_on(oauth.token()).unwrap();
        assert_eq!(fresh.principal, "svc-1");
        assert_eq!(count.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn an_endpoint_refusal_or_an_expired_token_is_one_clear_error() {
        let (url, _, _) = token_endpoint(|_| {
            (
                401,
                r#"{"error":"invalid_client","error_description":"bad secret"}"#.to_owned(),
            )
        });
        let error = runtime().block_on(oidc(&url).token()).unwrap_err();
        assert!(
            error.contains("refused the client credentials of \"kstreams-app\"")
                && error.contains("401")
                && error.contains("invalid_client"),
            "{error}"
        );
        assert!(!error.contains("s3cret"), "{error}");
        let (url, _, _) = token_endpoint(|_| {
            let token = jwt("svc", "kstreams", -60);
            (200, format!(r#"{{"access_token":"{token}"}}"#))
        });
        let error = runtime().block_on(oidc(&url).token()).unwrap_err();
        assert!(error.starts_with("the token expired 6"), "{error}");
        let (url, _, _) = token_endpoint(|_| (200, r#"{"access_token":"opaque"}"#.to_owned()));
        let error = runtime().block_on(oidc(&url).token()).unwrap_err();
        assert!(error.contains("is not a JWT"), "{error}");
    }
}
