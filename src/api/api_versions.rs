//! ApiVersions (key 18): the advertised table, the feature levels (v3+: `supported_features`,
//! `finalized_features`), and Kafka's reply to an unknown ApiVersions version.
//!
//! Of Kafka's features Sluice advertises the one it implements levels of: `transaction.version`
//! (supported 0-2, finalized at `sluice.feature.transaction.version`), which tells clients
//! whether to speak Transactions V2. As Kafka 4.1.2 does: a supported feature whose minimum is 0
//! is left out for ApiVersions v3 (older clients refuse a minimum of 0, KIP-1022), and a
//! finalized level of 0 is not listed at all.

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::StrBytes;

use super::{error, Frame, RequestContext};
use crate::protocol::ADVERTISED;
use crate::txn::txn_version;

/// Kafka's feature name for the transaction protocol version (KIP-890).
pub const TRANSACTION_VERSION_FEATURE: &str = "transaction.version";

/// The epoch of the finalized features. Kafka uses the metadata offset of the last feature
/// change; Sluice's levels are fixed for the process, and any epoch >= 0 makes clients take them.
const FINALIZED_FEATURES_EPOCH: i64 = 0;

/// Kafka's feature name for share groups (KIP-932): level 1 is ShareFetch/ShareAcknowledge v1
/// (Kafka 4.1's preview, on by default from 4.2), level 2 their v2 (not implemented).
pub const SHARE_VERSION_FEATURE: &str = "share.version";
/// The highest `share.version` Sluice implements.
pub const SHARE_VERSION_MAX: i16 = 1;

pub fn handle(
    ctx: &RequestContext,
    _request: ApiVersionsRequest,
    transaction_version: i16,
    share_version: i16,
) -> ApiVersionsResponse {
    let mut response = ApiVersionsResponse::default()
        .with_error_code(error::NONE)
        .with_api_keys(api_list(share_version > 0));
    // Features are tagged fields of v3+; the crate writes them only there. The supported
    // ranges start at 0, so v3 does not get them.
    if ctx.api_version >= 4 {
        response.supported_features = vec![
            SupportedFeatureKey::default()
                .with_name(StrBytes::from_static_str(SHARE_VERSION_FEATURE))
                .with_min_version(0)
                .with_max_version(SHARE_VERSION_MAX),
            SupportedFeatureKey::default()
                .with_name(StrBytes::from_static_str(TRANSACTION_VERSION_FEATURE))
                .with_min_version(txn_version::V1)
                .with_max_version(txn_version::MAX),
        ];
    }
    response.finalized_features_epoch = FINALIZED_FEATURES_EPOCH;
    let finalized = [
        (SHARE_VERSION_FEATURE, share_version),
        (TRANSACTION_VERSION_FEATURE, transaction_version),
    ];
    response.finalized_features = finalized
        .into_iter()
        .filter(|(_, level)| *level > 0)
        .map(|(name, level)| {
            FinalizedFeatureKey::default()
                .with_name(StrBytes::from_static_str(name))
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
