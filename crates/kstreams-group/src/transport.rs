//! The byte stream under a connection, by security protocol.
//!
//! Only plaintext exists today. TLS adds a variant whose stream wraps the TCP
//! one (the connection only needs `AsyncRead + AsyncWrite`); SASL adds its
//! handshake in [`crate::connection`] right after the stream is open, before
//! ApiVersions, as Kafka's clients do.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::error::{Error, Result};

/// How the client reaches the brokers (`security.protocol`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Security {
    /// `PLAINTEXT`: TCP, no encryption, no authentication.
    #[default]
    Plaintext,
}

/// A connected byte stream of any security protocol.
pub(crate) trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}

impl<S: AsyncRead + AsyncWrite + Unpin + Send> Stream for S {}

/// Opens a stream to `address` (`host:port`) within `timeout`.
pub(crate) async fn open(
    address: &str,
    security: &Security,
    timeout: Duration,
) -> Result<Box<dyn Stream>> {
    match security {
        Security::Plaintext => {
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
            Ok(Box::new(stream))
        }
    }
}
