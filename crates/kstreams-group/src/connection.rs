//! One connection to one broker: the API versions it serves, and requests
//! sent one at a time (a member's heartbeats are sequential by design).

use std::collections::HashMap;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kacrab_protocol::generated::api_versions_request::ApiVersionsRequestData;
use kacrab_protocol::version::{resolve_api_version, ApiVersionRange};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::error::{Error, Result};
use crate::transport::{self, Security, Stream};
use crate::wire::{self, Rpc};

/// Largest response accepted; Kafka's own `socket.request.max.bytes` default.
const MAX_RESPONSE_BYTES: usize = 100 * 1024 * 1024;
/// The ApiVersions version sent first: the oldest with client software fields,
/// served by every broker this crate can use.
const API_VERSIONS_VERSION: i16 = 3;

/// Where the brokers are and how to talk to them: what every connection of a
/// member or an admin call shares.
#[derive(Debug, Clone)]
pub struct ConnectionConfig {
    /// `bootstrap.servers`: `host:port` entries separated by commas.
    pub bootstrap: String,
    /// `client.id`, shown by the broker's describe tools.
    pub client_id: String,
    /// `security.protocol`.
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

/// An open connection whose broker's API versions are known.
pub(crate) struct Connection {
    address: String,
    stream: Box<dyn Stream>,
    client_id: String,
    request_timeout: Duration,
    next_correlation_id: i32,
    versions: HashMap<i16, ApiVersionRange>,
}

impl Connection {
    /// Connects to `address` and asks for its API versions.
    pub(crate) async fn open(address: &str, config: &ConnectionConfig) -> Result<Connection> {
        let stream = transport::open(address, &config.security, config.request_timeout).await?;
        let mut connection = Connection {
            address: address.to_owned(),
            stream,
            client_id: config.client_id.clone(),
            request_timeout: config.request_timeout,
            next_correlation_id: 0,
            versions: HashMap::new(),
        };
        let request = ApiVersionsRequestData {
            client_software_name: "kstreams".to_owned().into(),
            client_software_version: env!("CARGO_PKG_VERSION").to_owned().into(),
            ..Default::default()
        };
        let response = connection.exchange(&request, API_VERSIONS_VERSION).await?;
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
        Ok(connection)
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

    async fn exchange<R: Rpc>(&mut self, request: &R, version: i16) -> Result<R::Response> {
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
        let io = |source| Error::Io {
            address: address.clone(),
            source,
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
