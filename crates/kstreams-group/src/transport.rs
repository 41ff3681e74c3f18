//! The byte stream under a connection, by security protocol: TCP, or TLS
//! over it (rustls). SASL authenticates on top of either, in
//! [`crate::connection`], once the broker's API versions are known, as
//! Kafka's clients do.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::error::{Error, Result};
use crate::security::Security;
use crate::tls;

/// A connected byte stream of any security protocol.
pub(crate) trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Stream for S {}

/// Opens a stream to `address` (`host:port`): the TCP connection within
/// `timeout`, then the TLS handshake, if any, within `timeout` again.
pub(crate) async fn open(
    address: &str,
    security: &Security,
    timeout: Duration,
) -> Result<Box<dyn Stream>> {
    let connect = TcpStream::connect(address);
    let stream = tokio::time::timeout(timeout, connect)
        .await
        .map_err(|_| Error::Connect {
            address: address.to_owned(),
            source: std::io::ErrorKind::TimedOut.into(),
        })?
        .map_err(|source| Error::Connect {
            address: address.to_owned(),
            source,
        })?;
    // Heartbeats are small and latency matters more than packing.
    let _ = stream.set_nodelay(true);
    let Some(settings) = security.tls() else {
        return Ok(Box::new(stream));
    };
    let server_name = tls::server_name(address)?;
    let connector = tokio_rustls::TlsConnector::from(settings.config());
    let stream = tokio::time::timeout(timeout, connector.connect(server_name, stream))
        .await
        .map_err(|_| Error::Timeout {
            address: address.to_owned(),
            api: "the TLS handshake",
            timeout,
        })?
        .map_err(|error| tls::classify(address, settings, error))?;
    Ok(Box::new(stream))
}
