//! The requests this crate sends, as pairs of kacrab-protocol's generated
//! messages, and their framing: `[length][request header][body]` out,
//! `[length][response header][body]` in.

use bytes::{BufMut, Bytes, BytesMut};
use kacrab_protocol::generated::api_versions_request::ApiVersionsRequestData;
use kacrab_protocol::generated::api_versions_response::ApiVersionsResponseData;
use kacrab_protocol::generated::create_topics_request::CreateTopicsRequestData;
use kacrab_protocol::generated::create_topics_response::CreateTopicsResponseData;
use kacrab_protocol::generated::find_coordinator_request::FindCoordinatorRequestData;
use kacrab_protocol::generated::find_coordinator_response::FindCoordinatorResponseData;
use kacrab_protocol::generated::incremental_alter_configs_request::IncrementalAlterConfigsRequestData;
use kacrab_protocol::generated::incremental_alter_configs_response::IncrementalAlterConfigsResponseData;
use kacrab_protocol::generated::offset_commit_request::OffsetCommitRequestData;
use kacrab_protocol::generated::offset_commit_response::OffsetCommitResponseData;
use kacrab_protocol::generated::offset_fetch_request::OffsetFetchRequestData;
use kacrab_protocol::generated::offset_fetch_response::OffsetFetchResponseData;
use kacrab_protocol::generated::request_header::RequestHeaderData;
use kacrab_protocol::generated::response_header::ResponseHeaderData;
use kacrab_protocol::generated::sasl_authenticate_request::SaslAuthenticateRequestData;
use kacrab_protocol::generated::sasl_authenticate_response::SaslAuthenticateResponseData;
use kacrab_protocol::generated::sasl_handshake_request::SaslHandshakeRequestData;
use kacrab_protocol::generated::sasl_handshake_response::SaslHandshakeResponseData;
use kacrab_protocol::generated::streams_group_describe_request::StreamsGroupDescribeRequestData;
use kacrab_protocol::generated::streams_group_describe_response::StreamsGroupDescribeResponseData;
use kacrab_protocol::generated::streams_group_heartbeat_request::StreamsGroupHeartbeatRequestData;
use kacrab_protocol::generated::streams_group_heartbeat_response::StreamsGroupHeartbeatResponseData;
use kacrab_protocol::generated::ApiKey;
use kacrab_protocol::version::{request_header_version, response_header_version};

/// A request message and the response it gets.
pub(crate) trait Rpc {
    /// Kafka's API key.
    const KEY: i16;
    /// Kafka's name for the request, for errors and logs.
    const NAME: &'static str;
    /// The response message.
    type Response;
    /// Appends the body in `version`.
    fn write_body(&self, buf: &mut BytesMut, version: i16) -> kacrab_protocol::Result<()>;
    /// Reads a response body in `version`.
    fn read_response(buf: &mut Bytes, version: i16) -> kacrab_protocol::Result<Self::Response>;
}

macro_rules! rpc {
    ($request:ty => $response:ty, $key:ident) => {
        impl Rpc for $request {
            const KEY: i16 = ApiKey::$key as i16;
            const NAME: &'static str = stringify!($key);
            type Response = $response;
            fn write_body(&self, buf: &mut BytesMut, version: i16) -> kacrab_protocol::Result<()> {
                self.write(buf, version)
            }
            fn read_response(
                buf: &mut Bytes,
                version: i16,
            ) -> kacrab_protocol::Result<Self::Response> {
                <$response>::read(buf, version)
            }
        }
    };
}

rpc!(ApiVersionsRequestData => ApiVersionsResponseData, ApiVersions);
rpc!(FindCoordinatorRequestData => FindCoordinatorResponseData, FindCoordinator);
rpc!(StreamsGroupHeartbeatRequestData => StreamsGroupHeartbeatResponseData, StreamsGroupHeartbeat);
rpc!(StreamsGroupDescribeRequestData => StreamsGroupDescribeResponseData, StreamsGroupDescribe);
rpc!(IncrementalAlterConfigsRequestData => IncrementalAlterConfigsResponseData, IncrementalAlterConfigs);
rpc!(OffsetCommitRequestData => OffsetCommitResponseData, OffsetCommit);
rpc!(OffsetFetchRequestData => OffsetFetchResponseData, OffsetFetch);
rpc!(CreateTopicsRequestData => CreateTopicsResponseData, CreateTopics);
rpc!(SaslHandshakeRequestData => SaslHandshakeResponseData, SaslHandshake);
rpc!(SaslAuthenticateRequestData => SaslAuthenticateResponseData, SaslAuthenticate);

/// One request frame, length prefix included.
pub(crate) fn encode_request<R: Rpc>(
    request: &R,
    version: i16,
    correlation_id: i32,
    client_id: &str,
) -> kacrab_protocol::Result<BytesMut> {
    let mut frame = BytesMut::with_capacity(256);
    // The length is known only once the body is written; patched below.
    frame.put_i32(0);
    RequestHeaderData {
        request_api_key: R::KEY,
        request_api_version: version,
        correlation_id,
        client_id: Some(client_id.to_owned().into()),
        ..Default::default()
    }
    .write(&mut frame, request_header_version(R::KEY, version))?;
    request.write_body(&mut frame, version)?;
    let length = i32::try_from(frame.len() - 4).unwrap_or(i32::MAX);
    frame[..4].copy_from_slice(&length.to_be_bytes());
    Ok(frame)
}

/// The correlation id and body of one response frame (length prefix removed).
pub(crate) fn decode_response<R: Rpc>(
    mut payload: Bytes,
    version: i16,
) -> kacrab_protocol::Result<(i32, R::Response)> {
    let header = ResponseHeaderData::read(&mut payload, response_header_version(R::KEY, version))?;
    let body = R::read_response(&mut payload, version)?;
    Ok((header.correlation_id, body))
}

#[cfg(test)]
mod tests {
    use bytes::Buf;

    use super::*;

    #[test]
    fn a_request_frame_carries_its_length_header_and_body() {
        let request = StreamsGroupDescribeRequestData {
            group_ids: vec!["app".to_owned().into()],
            ..Default::default()
        };
        let mut frame = encode_request(&request, 0, 7, "me").unwrap().freeze();
        let length = frame.get_i32();
        assert_eq!(length as usize, frame.len());
        // Flexible request header v2: key, version, correlation id, client id.
        let header = RequestHeaderData::read(&mut frame, 2).unwrap();
        assert_eq!(header.request_api_key, 89);
        assert_eq!(header.request_api_version, 0);
        assert_eq!(header.correlation_id, 7);
        assert_eq!(header.client_id.unwrap().as_str(), "me");
        let body = StreamsGroupDescribeRequestData::read(&mut frame, 0).unwrap();
        assert_eq!(body, request);
    }

    #[test]
    fn a_response_frame_decodes_to_its_correlation_id_and_body() {
        let response = StreamsGroupHeartbeatResponseData {
            member_id: "m".to_owned().into(),
            member_epoch: 3,
            heartbeat_interval_ms: 1000,
            ..Default::default()
        };
        let mut payload = BytesMut::new();
        ResponseHeaderData {
            correlation_id: 42,
            ..Default::default()
        }
        .write(&mut payload, 1)
        .unwrap();
        response.write(&mut payload, 0).unwrap();
        let (correlation_id, decoded) =
            decode_response::<StreamsGroupHeartbeatRequestData>(payload.freeze(), 0).unwrap();
        assert_eq!(correlation_id, 42);
        assert_eq!(decoded, response);
    }
}
