//! One connection to one broker: the API versions it serves, and requests
//! sent one at a time (a member's heartbeats are sequential by design).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kacrab_protocol::generated::api_versions_request::ApiVersionsRequestData;
use kacrab_protocol::generated::sasl_authenticate_request::SaslAuthenticateRequestData;
use kacrab_protocol::generated::sasl_handshake_request::SaslHandshakeRequestData;
use kacrab_protocol::generated::ErrorCode;
use kacrab_protocol::version::{resolve_api_version, ApiVersionRange};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::error::{Error, Result};
use crate::sasl::{Exchange, Step};
use crate::security::{Sasl, Security};
use crate::tls::{self, Tls};
use crate::transport::{self, Stream};
use crate::wire::{self, Rpc};

/// Largest response accepted; Kafka's own `socket.request.max.bytes` default.
const MAX_RESPONSE_BYTES: usize = 100 * 1024 * 1024;
/// The ApiVersions version sent first: the oldest with client software fields,
/// served by every broker this crate can use.
const API_VERSIONS_VERSION: i16 = 3;
/// SaslHandshake v1 is the first whose tokens travel in SaslAuthenticate
/// requests (KIP-152); v0's raw tokens are not spoken here.
const SASL_HANDSHAKE_VERSION: i16 = 1;
/// When, as a share of the broker's session lifetime (KIP-368), the
/// connection authenticates again: Kafka's client picks 85 to 95 %; this
/// one 85 %, before the 90 % mark.
const REAUTHENTICATE_SHARE: f64 = 0.85;

/// Where the brokers are and how to talk to them: what every connection of a
/// member or an admin call shares.
#[derive(Debug, Clone)]
pub struct ConnectionConfig {
    /// `bootstrap.servers`: `host:port` entries separated by commas.
    pub bootstrap: String,
    /// `client.id`, shown by the broker's describe tools.
    pub client_id: String,
    /// `security.protocol` and its TLS and SASL settings
    /// ([`Security::from_client_config`] reads them from a librdkafka
    /// client's configuration).
    pub security: Security,
    /// How long one request (connect included) may take.
    pub request_timeout: Duration,
}

impl ConnectionConfig {
    /// Plaintext to `bootstrap`, client id `kstreams`, 30 s per request
    /// (Kafka's `request.timeout.ms` default).
    pub fn new(bootstrap: impl Into<String>) -> ConnectionConfig {
        ConnectionConfig {
            bootstrap: bootstrap.into(),
            client_id: "kstreams".to_owned(),
            security: Security::Plaintext,
            request_timeout: Duration::from_secs(30),
        }
    }

    /// The bootstrap entries, trimmed, empty ones dropped.
    pub(crate) fn bootstrap_addresses(&self) -> impl Iterator<Item = &str> {
        self.bootstrap
            .split(',')
            .map(str::trim)
            .filter(|address| !address.is_empty())
    }
}

/// An open connection whose broker's API versions are known and, under
/// SASL, on which the client has authenticated.
pub(crate) struct Connection {
    address: String,
    stream: Box<dyn Stream>,
    client_id: String,
    request_timeout: Duration,
    next_correlation_id: i32,
    versions: HashMap<i16, ApiVersionRange>,
    /// The TLS settings, for what a failure on the stream means.
    tls: Option<Tls>,
    /// The SASL credentials, kept for re-authentication.
    sasl: Option<Sasl>,
    /// When the broker wants the client to authenticate again (KIP-368),
    /// minus a margin; `None` when its sessions do not expire.
    reauthenticate_at: Option<Instant>,
}

impl Connection {
    /// Connects to `address`, asks for its API versions and, under SASL,
    /// authenticates: Kafka's clients' order (SaslClientAuthenticator sends
    /// ApiVersions first, which a broker answers before authentication,
    /// and so learns the SaslHandshake and SaslAuthenticate versions).
    pub(crate) async fn open(address: &str, config: &ConnectionConfig) -> Result<Connection> {
        let stream = transport::open(address, &config.security, config.request_timeout).await?;
        let mut connection = Connection {
            address: address.to_owned(),
            stream,
            client_id: config.client_id.clone(),
            request_timeout: config.request_timeout,
            next_correlation_id: 0,
            versions: HashMap::new(),
            tls: config.security.tls().cloned(),
            sasl: config.security.sasl().cloned(),
            reauthenticate_at: None,
        };
        let request = ApiVersionsRequestData {
            client_software_name: "kstreams".to_owned().into(),
            client_software_version: env!("CARGO_PKG_VERSION").to_owned().into(),
            ..Default::default()
        };
        let response = connection
            .exchange_now(&request, API_VERSIONS_VERSION)
            .await?;
        Error::check(ApiVersionsRequestData::NAME, response.error_code, None)?;
        connection.versions = response
            .api_keys
            .iter()
            .map(|api| {
                let range = ApiVersionRange {
                    min_version: api.min_version,
                    max_version: api.max_version,
                };
                (api.api_key, range)
            })
            .collect();
        connection.authenticate().await?;
        Ok(connection)
    }

    /// The SASL exchange (KIP-152): SaslHandshake v1 with the mechanism,
    /// then SaslAuthenticate requests carrying the mechanism's tokens until
    /// it is done. Each request is bounded by the request timeout; a
    /// refusal is an [`Error::Authentication`] (or
    /// [`Error::SaslMechanism`]), never a retry.
    async fn authenticate(&mut self) -> Result<()> {
        let Some(sasl) = self.sasl.clone() else {
            return Ok(());
        };
        let started = Instant::now();
        let address = self.address.clone();
        let hint = match sasl.oauth() {
            Some(oauth) => oauth.hint().to_owned(),
            None => format!(
                "check sasl.username and sasl.password, or sasl.jaas.config (and \
                 sasl.mechanism: the user needs {} credentials on the cluster)",
                sasl.mechanism()
            ),
        };
        let failed = |reason: String| Error::Authentication {
            address: address.clone(),
            mechanism: sasl.mechanism().name(),
            username: sasl.username().to_owned(),
            reason,
            hint: hint.clone(),
        };
        let handshake_served = self
            .versions
            .get(&SaslHandshakeRequestData::KEY)
            .is_some_and(|range| {
                (range.min_version..=range.max_version).contains(&SASL_HANDSHAKE_VERSION)
            });
        if !handshake_served {
            return Err(Error::Unsupported {
                address: self.address.clone(),
                api: SaslHandshakeRequestData::NAME,
            });
        }
        let authenticate_version = self.require::<SaslAuthenticateRequestData>()?;
        let handshake = SaslHandshakeRequestData {
            mechanism: sasl.mechanism().name().to_owned().into(),
            ..Default::default()
        };
        let response = self
            .exchange_now(&handshake, SASL_HANDSHAKE_VERSION)
            .await?;
        match ErrorCode::from(response.error_code) {
            ErrorCode::None => {}
            ErrorCode::UnsupportedSaslMechanism => {
                let enabled: Vec<&str> = response.mechanisms.iter().map(|m| m.as_str()).collect();
                return Err(Error::SaslMechanism {
                    address: self.address.clone(),
                    mechanism: sasl.mechanism().name(),
                    enabled: enabled.join(", "),
                });
            }
            code => {
                return Err(failed(format!(
                    "SaslHandshake answered {code:?} (is the listener a SASL one, \
                     SASL_PLAINTEXT or SASL_SSL?)"
                )))
            }
        }
        let mut exchange = match sasl.oauth() {
            // The token of the moment: fetched (OIDC) or made anew once
            // past 80 % of its life, so a re-authentication presents a
            // fresh one.
            Some(oauth) => {
                let token = oauth.token().await.map_err(&failed)?;
                log::debug!(
                    "OAUTHBEARER token for {} valid until {} s after the epoch",
                    token.principal,
                    token
                        .expires_at
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap_or_default()
                        .as_secs()
                );
                Exchange::oauthbearer(oauth.initial_response(&token))
            }
            None => Exchange::start(&sasl).map_err(&failed)?,
        };
        let mut challenge: Option<Bytes> = None;
        let mut session_lifetime_ms = 0;
        loop {
            let (token, last) = match exchange.step(challenge.as_deref()).map_err(&failed)? {
                Step::Done => break,
                Step::Send { token, last } => (token, last),
            };
            let request = SaslAuthenticateRequestData {
                auth_bytes: Bytes::from(token),
                ..Default::default()
            };
            let response = self.exchange_now(&request, authenticate_version).await?;
            if response.error_code != 0 {
                let code = ErrorCode::from(response.error_code);
                let message = response
                    .error_message
                    .as_ref()
                    .map(|m| m.as_str().to_owned())
                    .unwrap_or_default();
                return Err(failed(format!("{message} ({code:?})")));
            }
            session_lifetime_ms = response.session_lifetime_ms;
            if last {
                break;
            }
            challenge = Some(response.auth_bytes);
        }
        self.reauthenticate_at = u64::try_from(session_lifetime_ms)
            .ok()
            .filter(|ms| *ms > 0)
            .map(|ms| started + Duration::from_millis(ms).mul_f64(REAUTHENTICATE_SHARE));
        log::debug!(
            "authenticated to {} as {} with SASL {}{}",
            self.address,
            sasl.username(),
            sasl.mechanism(),
            if session_lifetime_ms > 0 {
                format!(" (session lifetime {session_lifetime_ms} ms)")
            } else {
                String::new()
            }
        );
        Ok(())
    }

    /// When the connection must authenticate again (KIP-368), if ever.
    pub(crate) fn reauthenticate_at(&self) -> Option<Instant> {
        self.reauthenticate_at
    }

    /// Authenticates again on this connection once the time has come:
    /// SaslHandshake and SaslAuthenticate between two requests, as Kafka's
    /// client does. Every request checks first; a member also calls it when
    /// idle, so that a quiet connection does not outlive its session.
    pub(crate) async fn reauthenticate_if_due(&mut self) -> Result<()> {
        if self
            .reauthenticate_at
            .is_some_and(|at| Instant::now() >= at)
        {
            log::debug!("re-authenticating to {} (KIP-368)", self.address);
            self.authenticate().await?;
        }
        Ok(())
    }

    /// `host:port` of the broker.
    pub(crate) fn address(&self) -> &str {
        &self.address
    }

    /// The newest version of `R` that both sides speak, if any.
    pub(crate) fn version_of<R: Rpc>(&self) -> Option<i16> {
        let range = *self.versions.get(&R::KEY)?;
        resolve_api_version(R::KEY, range)
    }

    /// Fails with [`Error::Unsupported`] unless the broker serves `R`.
    pub(crate) fn require<R: Rpc>(&self) -> Result<i16> {
        self.version_of::<R>().ok_or_else(|| Error::Unsupported {
            address: self.address.clone(),
            api: R::NAME,
        })
    }

    /// Sends `request` in the newest common version and waits for its answer.
    pub(crate) async fn send<R: Rpc>(&mut self, request: &R) -> Result<R::Response> {
        let version = self.require::<R>()?;
        self.exchange(request, version).await
    }

    /// Sends `request` in `version`, which the broker must serve.
    pub(crate) async fn send_version<R: Rpc>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<R::Response> {
        let served = self
            .versions
            .get(&R::KEY)
            .is_some_and(|range| (range.min_version..=range.max_version).contains(&version));
        if !served {
            return Err(Error::Unsupported {
                address: self.address.clone(),
                api: R::NAME,
            });
        }
        self.exchange(request, version).await
    }

    /// A request, after re-authenticating if the session is due to expire.
    async fn exchange<R: Rpc>(&mut self, request: &R, version: i16) -> Result<R::Response> {
        self.reauthenticate_if_due().await?;
        self.exchange_now(request, version).await
    }

    async fn exchange_now<R: Rpc>(&mut self, request: &R, version: i16) -> Result<R::Response> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let frame = wire::encode_request(request, version, correlation_id, &self.client_id)
            .map_err(|error| self.protocol(format!("encoding {}: {error}", R::NAME)))?;
        let timeout = self.request_timeout;
        let payload = tokio::time::timeout(timeout, self.round_trip(&frame))
            .await
            .map_err(|_| Error::Timeout {
                address: self.address.clone(),
                api: R::NAME,
                timeout,
            })??;
        let (answered, response) = wire::decode_response::<R>(payload, version)
            .map_err(|error| self.protocol(format!("decoding {}: {error}", R::NAME)))?;
        if answered != correlation_id {
            return Err(self.protocol(format!(
                "{} answered correlation id {answered}, expected {correlation_id}",
                R::NAME
            )));
        }
        Ok(response)
    }

    async fn round_trip(&mut self, frame: &BytesMut) -> Result<Bytes> {
        let address = self.address.clone();
        let tls = self.tls.clone();
        // Over TLS, an alert (the broker refusing this client's certificate
        // under TLS 1.3, say) arrives as an I/O error of the first request.
        let io = |source| match &tls {
            Some(tls) => tls::classify(&address, tls, source),
            None => Error::Io {
                address: address.clone(),
                source,
            },
        };
        self.stream.write_all(frame).await.map_err(io)?;
        self.stream.flush().await.map_err(io)?;
        let length = self.stream.read_i32().await.map_err(io)?;
        let length = usize::try_from(length)
            .ok()
            .filter(|length| *length <= MAX_RESPONSE_BYTES)
            .ok_or_else(|| self.protocol(format!("response length {length}")))?;
        let mut payload = vec![0; length];
        self.stream.read_exact(&mut payload).await.map_err(io)?;
        Ok(Bytes::from(payload))
    }

    /// The first of the `what`s in an answer to `api` that must have one
    /// (this client asks about one thing per request).
    pub(crate) fn first<T>(&self, items: Vec<T>, api: &str, what: &str) -> Result<T> {
        items
            .into_iter()
            .next()
            .ok_or_else(|| self.protocol(format!("{api} answered no {what}")))
    }

    fn protocol(&self, detail: String) -> Error {
        Error::Protocol {
            address: self.address.clone(),
            detail,
        }
    }
}
