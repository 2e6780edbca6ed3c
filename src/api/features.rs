//! UpdateFeatures (57): finalized feature levels changed by the controller
//! (`controller::features` validates and writes the FeatureLevel records; this handler only
//! translates). Answered as Kafka 4.1.2 answers: any refusal is the top-level error
//! (INVALID_UPDATE_VERSION) with Kafka's "The update failed for all features since ..." message
//! and no per-feature results; a success lists every requested feature with error 0 and the
//! message "NONE" (v0-1; v2 has no results). v0's `allow_downgrade` is not read (Kafka 4.1.2's
//! controller reads the upgrade type, UPGRADE at v0). The answer is sent once the records are in
//! this broker's image, so a following ApiVersions sees the new levels.

use std::sync::Arc;

use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};
use kafka_protocol::protocol::StrBytes;

use super::error;
use crate::broker::Broker;
use crate::controller::{FeatureUpdate, UpgradeType};

/// Kafka's prefix of the top-level message when one update fails.
const FAILED_FOR_ALL: &str =
    "The update failed for all features since the following feature had an error: ";

/// UpdateFeatures: decided by this node's controller (a non-leading node forwarded it).
pub async fn update_features(
    broker: Arc<Broker>,
    version: i16,
    request: UpdateFeaturesRequest,
) -> UpdateFeaturesResponse {
    let updates: Vec<FeatureUpdate> = request
        .feature_updates
        .iter()
        .map(|u| FeatureUpdate {
            feature: u.feature.as_str().to_string(),
            max_version_level: u.max_version_level,
            upgrade_type: UpgradeType::from_code(if version == 0 { 1 } else { u.upgrade_type }),
        })
        .collect();
    let names: Vec<StrBytes> = request
        .feature_updates
        .into_iter()
        .map(|u| u.feature)
        .collect();
    let node_id = broker.identity.node_id;
    let validate_only = request.validate_only;
    let decided = broker
        .controller_run(move |c, _| c.update_features(node_id, &updates, validate_only))
        .await;
    let refusal = match decided {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some((e.code(), format!("{FAILED_FOR_ALL}{}", e.message))),
        Err(e) => Some((e.code(), e.to_string())),
    };
    match refusal {
        Some((code, message)) => {
            tracing::warn!("UpdateFeatures refused: {message}");
            UpdateFeaturesResponse::default()
                .with_error_code(code)
                .with_error_message(Some(StrBytes::from_string(message)))
        }
        None => {
            if !validate_only && !names.is_empty() {
                tracing::info!("UpdateFeatures: {names:?} changed");
            }
            let results = if version <= 1 {
                names
                    .into_iter()
                    .map(|feature| {
                        UpdatableFeatureResult::default()
                            .with_feature(feature)
                            .with_error_code(error::NONE)
                            .with_error_message(Some(StrBytes::from_static_str("NONE")))
                    })
                    .collect()
            } else {
                Vec::new()
            };
            UpdateFeaturesResponse::default()
                .with_error_code(error::NONE)
                .with_error_message(None)
                .with_results(results)
        }
    }
}
