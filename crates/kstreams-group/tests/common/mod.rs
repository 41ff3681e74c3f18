//! The wire side of the scripted brokers the tests run on a local socket:
//! reading a request frame (length prefix, header) and writing the
//! response frame, and the ApiVersions and FindCoordinator answers every
//! fake gives alike.

use bytes::{BufMut, Bytes, BytesMut};
use kacrab_protocol::generated::api_versions_request::ApiVersionsRequestData;
use kacrab_protocol::generated::api_versions_response::{ApiVersion, ApiVersionsResponseData};
use kacrab_protocol::generated::find_coordinator_request::FindCoordinatorRequestData;
use kacrab_protocol::generated::find_coordinator_response::{
    Coordinator, FindCoordinatorResponseData,
};
use kacrab_protocol::generated::request_header::RequestHeaderData;
use kacrab_protocol::generated::response_header::ResponseHeaderData;
use kacrab_protocol::version::{request_header_version, response_header_version};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub(crate) const API_VERSIONS: i16 = 18;
pub(crate) const FIND_COORDINATOR: i16 = 10;
pub(crate) const STREAMS_GROUP_HEARTBEAT: i16 = 88;

/// A request read off the socket: its API, version and correlation id, and
/// its body after the header.
pub(crate) struct Request {
    pub(crate) key: i16,
    pub(crate) version: i16,
    pub(crate) correlation_id: i32,
    pub(crate) body: Bytes,
}

/// The next request on `socket`; `None` once the client is gone.
pub(crate) async fn read_request(socket: &mut TcpStream) -> Option<Request> {
    let length = socket.read_i32().await.ok()?;
    let mut payload = vec![0; usize::try_from(length).ok()?];
    socket.read_exact(&mut payload).await.ok()?;
    let mut body = Bytes::from(payload);
    let (key, version) = (
        i16::from_be_bytes([body[0], body[1]]),
        i16::from_be_bytes([body[2], body[3]]),
    );
    let header = RequestHeaderData::read(&mut body, request_header_version(key, version)).unwrap();
    Some(Request {
        key,
        version,
        correlation_id: header.correlation_id,
        body,
    })
}

/// Writes the response to `request` with `body`; false once the client is
/// gone.
pub(crate) async fn write_response(socket: &mut TcpStream, request: &Request, body: &[u8]) -> bool {
    let mut frame = BytesMut::new();
    ResponseHeaderData {
        correlation_id: request.correlation_id,
        ..Default::default()
    }
    .write(
        &mut frame,
        response_header_version(request.key, request.version),
    )
    .unwrap();
    frame.extend_from_slice(body);
    let mut out = BytesMut::new();
    out.put_i32(i32::try_from(frame.len()).unwrap());
    out.extend_from_slice(&frame);
    socket.write_all(&out).await.is_ok()
}

/// The ApiVersions answer to `request`: the APIs with their highest
/// versions.
pub(crate) fn api_versions(request: &mut Request, apis: &[(i16, i16)]) -> BytesMut {
    ApiVersionsRequestData::read(&mut request.body, request.version).unwrap();
    let mut body = BytesMut::new();
    ApiVersionsResponseData {
        api_keys: apis
            .iter()
            .map(|(api_key, max_version)| ApiVersion {
                api_key: *api_key,
                min_version: 0,
                max_version: *max_version,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
    .write(&mut body, request.version)
    .unwrap();
    body
}

/// The FindCoordinator answer to `request`: the fake itself, on `port`,
/// with `error_code`.
pub(crate) fn find_coordinator(request: &mut Request, port: u16, error_code: i16) -> BytesMut {
    FindCoordinatorRequestData::read(&mut request.body, request.version).unwrap();
    let mut body = BytesMut::new();
    FindCoordinatorResponseData {
        coordinators: vec![Coordinator {
            key: "app".to_owned().into(),
            node_id: 1,
            host: "127.0.0.1".to_owned().into(),
            port: i32::from(port),
            error_code,
            ..Default::default()
        }],
        ..Default::default()
    }
    .write(&mut body, request.version)
    .unwrap();
    body
}
