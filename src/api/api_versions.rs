//! ApiVersions (key 18): the advertised table, and Kafka's reply to an unknown ApiVersions version.

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};

use super::{error, Frame, RequestContext};
use crate::protocol::ADVERTISED;

pub fn handle(_ctx: &RequestContext, _request: ApiVersionsRequest) -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(error::NONE)
        .with_api_keys(api_list())
}

fn api_list() -> Vec<ApiVersion> {
    ADVERTISED
        .iter()
        .map(|a| {
            ApiVersion::default()
                .with_api_key(a.key as i16)
                .with_min_version(a.min)
                .with_max_version(a.max)
        })
        .collect()
}

/// The v0-format answer to an ApiVersions request whose version the broker does not know:
/// error 35 plus the table, so the client retries with a version inside it.
pub fn unsupported_version_frame(correlation_id: i32) -> Frame {
    let mut buf = BytesMut::with_capacity(16 + 6 * ADVERTISED.len());
    buf.put_i32(0);
    buf.put_i32(correlation_id);
    buf.put_i16(error::UNSUPPORTED_VERSION);
    buf.put_i32(ADVERTISED.len() as i32);
    for a in ADVERTISED {
        buf.put_i16(a.key as i16);
        buf.put_i16(a.min);
        buf.put_i16(a.max);
    }
    let len = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    vec![buf.freeze().into()]
}
