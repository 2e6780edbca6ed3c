//! ApiVersions (key 18): the advertised table, the feature levels (v3+: `supported_features`,
//! `finalized_features`), and Kafka's reply to an unknown ApiVersions version.
//!
//! The supported ranges are the controller's [`SUPPORTED_FEATURES`] (what this broker registers
//! with); the finalized levels and their epoch come from the metadata image (FeatureLevel records:
//! the bootstrap levels, then UpdateFeatures), so a level change reaches clients at the next
//! ApiVersions. `transaction.version` tells clients whether to speak Transactions V2;
//! `share.version` 1+ advertises the share-group APIs. As Kafka 4.1.2 does: a supported feature
//! whose minimum is 0 is left out for ApiVersions v3 (older clients refuse a minimum of 0,
//! KIP-1022), and a finalized level of 0 is not listed at all.

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;

use super::{error, Frame, RequestContext};
use crate::controller::SUPPORTED_FEATURES;
use crate::metadata::MetadataImage;
use crate::protocol::ADVERTISED;

/// Kafka's feature name for share groups (KIP-932): level 1 is ShareFetch/ShareAcknowledge v1
/// (Kafka 4.1's preview, on by default from 4.2), level 2 their v2 (not implemented).
pub const SHARE_VERSION_FEATURE: &str = "share.version";

pub fn handle(
    ctx: &RequestContext,
    _request: ApiVersionsRequest,
    image: &MetadataImage,
) -> ApiVersionsResponse {
    let share_enabled = image.finalized_level(SHARE_VERSION_FEATURE) > 0;
    let mut response = ApiVersionsResponse::default()
        .with_error_code(error::NONE)
        .with_api_keys(api_list(share_enabled));
    // Features are tagged fields of v3+; the crate writes them only there.
    response.supported_features = SUPPORTED_FEATURES
        .iter()
        .filter(|(_, min, _)| ctx.api_version >= 4 || *min > 0)
        .map(|(name, min, max)| {
            SupportedFeatureKey::default()
                .with_name(StrBytes::from_static_str(name))
                .with_min_version(*min)
                .with_max_version(*max)
        })
        .collect();
    // Kafka's epoch is the metadata offset the levels were read at.
    response.finalized_features_epoch = i64::try_from(image.offset).unwrap_or(i64::MAX);
    response.finalized_features = image
        .features()
        .filter(|(_, level)| *level > 0)
        .map(|(name, level)| {
            FinalizedFeatureKey::default()
                .with_name(StrBytes::from_string(name.to_string()))
                .with_min_version_level(level)
                .with_max_version_level(level)
        })
        .collect();
    response
}

fn api_list(share_enabled: bool) -> Vec<ApiVersion> {
    ADVERTISED
        .iter()
        .filter(|a| share_enabled || !crate::protocol::versions::SHARE_APIS.contains(&a.key))
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
