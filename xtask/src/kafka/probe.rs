//! Just enough of the Kafka wire protocol to ask a broker how many brokers its
//! cluster has, which is how `kafka start` knows the cluster is usable.
//!
//! A broker lists only registered, unfenced brokers in a Metadata response, so
//! "every node lists all nodes" means the cluster accepts clients. Speaking the
//! protocol here keeps librdkafka (a C build) and a JVM out of xtask.
//!
//! Requests use the non-flexible encodings: ApiVersions v0, then Metadata at a
//! version between 4 and 8 that the broker supports (their request bodies and
//! the start of their responses are laid out alike).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

const API_METADATA: i16 = 3;
const API_VERSIONS: i16 = 18;
/// Metadata versions this probe can encode, oldest first.
const METADATA_VERSIONS: std::ops::RangeInclusive<i16> = 4..=8;

/// Asks the broker at `address` for the number of live brokers in its cluster.
pub(super) fn broker_count(address: &str, timeout: Duration) -> io::Result<usize> {
    let mut stream = connect(address, timeout)?;
    let (min, max) = metadata_versions(&mut stream)?;
    let version = (*METADATA_VERSIONS.start()).max(min);
    if version > max.min(*METADATA_VERSIONS.end()) {
        return Err(io::Error::other(format!(
            "broker supports Metadata v{min}..v{max}, the probe only v4..v8"
        )));
    }
    let response = call(
        &mut stream,
        API_METADATA,
        version,
        2,
        &metadata_request(version),
    )?;
    let mut body = Reader::new(&response);
    let _throttle_time_ms = body.i32()?;
    let brokers = body.i32()?;
    usize::try_from(brokers).map_err(|_| bad_data("negative broker count"))
}

fn connect(address: &str, timeout: Duration) -> io::Result<TcpStream> {
    let socket: SocketAddr = address
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| bad_data("address resolves to nothing"))?;
    let stream = TcpStream::connect_timeout(&socket, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    Ok(stream)
}

/// The Metadata version range the broker supports, from ApiVersions v0.
fn metadata_versions(stream: &mut TcpStream) -> io::Result<(i16, i16)> {
    let response = call(stream, API_VERSIONS, 0, 1, &[])?;
    let mut body = Reader::new(&response);
    let error = body.i16()?;
    if error != 0 {
        return Err(bad_data(&format!("ApiVersions error code {error}")));
    }
    for _ in 0..body.i32()? {
        let (key, min, max) = (body.i16()?, body.i16()?, body.i16()?);
        if key == API_METADATA {
            return Ok((min, max));
        }
    }
    Err(bad_data("broker does not list the Metadata API"))
}

/// An empty topic list (brokers only), no auto-creation, and from v8 on no
/// authorized-operations lists.
fn metadata_request(version: i16) -> Vec<u8> {
    let mut body = 0i32.to_be_bytes().to_vec();
    body.push(0);
    if version >= 8 {
        body.extend([0, 0]);
    }
    body
}

/// Sends one request (header v1) and returns the response body after the
/// correlation id (header v0).
fn call(
    stream: &mut TcpStream,
    api_key: i16,
    version: i16,
    correlation_id: i32,
    body: &[u8],
) -> io::Result<Vec<u8>> {
    const CLIENT_ID: &[u8] = b"xtask-probe";
    let mut message = Vec::with_capacity(14 + CLIENT_ID.len() + body.len());
    message.extend(api_key.to_be_bytes());
    message.extend(version.to_be_bytes());
    message.extend(correlation_id.to_be_bytes());
    message.extend((CLIENT_ID.len() as i16).to_be_bytes());
    message.extend(CLIENT_ID);
    message.extend(body);
    stream.write_all(&(message.len() as i32).to_be_bytes())?;
    stream.write_all(&message)?;

    let mut size = [0; 4];
    stream.read_exact(&mut size)?;
    let size = usize::try_from(i32::from_be_bytes(size)).map_err(|_| bad_data("bad size"))?;
    let mut response = vec![0; size];
    stream.read_exact(&mut response)?;
    let mut header = Reader::new(&response);
    if header.i32()? != correlation_id {
        return Err(bad_data("response for another request"));
    }
    Ok(response.split_off(4))
}

/// Big-endian reads that fail instead of panicking on a short response.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes }
    }

    fn take<const N: usize>(&mut self) -> io::Result<[u8; N]> {
        let (head, rest) = self
            .bytes
            .split_first_chunk::<N>()
            .ok_or_else(|| bad_data("response too short"))?;
        self.bytes = rest;
        Ok(*head)
    }

    fn i16(&mut self) -> io::Result<i16> {
        self.take().map(i16::from_be_bytes)
    }

    fn i32(&mut self) -> io::Result<i32> {
        self.take().map(i32::from_be_bytes)
    }
}

fn bad_data(message: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_request_bodies() {
        assert_eq!(metadata_request(4), [0, 0, 0, 0, 0]);
        assert_eq!(metadata_request(8), [0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn reader_refuses_short_input() {
        let mut reader = Reader::new(&[0, 1, 0]);
        assert_eq!(reader.i16().unwrap(), 1);
        assert!(reader.i16().is_err());
    }

    #[test]
    fn nothing_listening_is_an_error() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        assert!(broker_count(&format!("127.0.0.1:{port}"), Duration::from_secs(1)).is_err());
    }
}
