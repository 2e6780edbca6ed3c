//! UpdateFeatures as Kafka 4.1's controller decides it (FeatureControlManager, QuorumFeatures):
//! the feature levels Sluice supports, the upgrade types, and the validation of one request's
//! updates into FeatureLevel records.
//!
//! Rules, in Kafka's order for each update: an unknown upgrade type, a negative level, a level
//! outside this controller's supported range, then outside the range of any registered broker,
//! then a feature Kafka does not know (at level 0), a downgrade asked as an UPGRADE, an upgrade
//! asked as a downgrade; `metadata.version` then refuses a downgrade past a level that changed
//! the metadata format (safe or unsafe: Kafka 4.1 has no unsafe metadata downgrade). Any refusal
//! fails the whole request (no record is written); validate_only writes nothing either. An
//! accepted update writes its FeatureLevel record even at the current level, as Kafka does.
//! Pure: no I/O, no clock.

use kafka_protocol::error::ResponseError;

use super::error::{err, ControllerError};
use super::{Controller, Outcome};
use crate::metadata::records::MetadataRecord;

/// Kafka's name of the metadata version feature.
pub const METADATA_VERSION: &str = "metadata.version";

/// The features and level ranges Sluice supports, as Kafka 4.1.2 does (its `kraft.version` is
/// the quorum's own and not a feature here). Brokers register these ranges; ApiVersions
/// advertises them; UpdateFeatures accepts levels inside them.
pub const SUPPORTED_FEATURES: &[(&str, i16, i16)] = &[
    ("eligible.leader.replicas.version", 0, 1),
    ("group.version", 0, 1),
    (METADATA_VERSION, 7, 27),
    ("share.version", 0, 1),
    ("transaction.version", 0, 2),
];

/// Features Kafka 4.1 knows by name (a level-0 update of any other is "not found").
const KNOWN_FEATURES: &[&str] = &[
    "eligible.leader.replicas.version",
    "group.version",
    "kraft.version",
    "share.version",
    "streams.version",
    "transaction.version",
];

/// `metadata.version` levels (3.3-IV3 and later) whose introduction changed the metadata
/// format (Kafka's `didMetadataChange`): a downgrade below one of them could lose metadata.
const METADATA_CHANGING_LEVELS: &[i16] = &[7, 8, 11, 13, 14, 15, 17, 23];

/// UpdateFeatures' upgrade type (v1+ `UpgradeType`; v0 always sends UPGRADE, Kafka 4.1.2 does not
/// read v0's `AllowDowngrade`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpgradeType {
    Upgrade,
    SafeDowngrade,
    UnsafeDowngrade,
    Unknown,
}

impl UpgradeType {
    /// The type of Kafka's wire code (1, 2, 3; anything else is unknown).
    pub fn from_code(code: i8) -> UpgradeType {
        match code {
            1 => UpgradeType::Upgrade,
            2 => UpgradeType::SafeDowngrade,
            3 => UpgradeType::UnsafeDowngrade,
            _ => UpgradeType::Unknown,
        }
    }
}

/// One requested change of a finalized feature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureUpdate {
    pub feature: String,
    pub max_version_level: i16,
    pub upgrade_type: UpgradeType,
}

/// This controller's supported range of `name` (0-0, "disabled", when unknown).
pub fn supported_range(name: &str) -> (i16, i16) {
    SUPPORTED_FEATURES
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, min, max)| (*min, *max))
        .unwrap_or((0, 0))
}

/// Kafka's reason why `who` (with `range`) cannot take `level`, if it cannot.
fn not_supported(level: i16, who: &str, (min, max): (i16, i16)) -> Option<String> {
    if level >= min && level <= max {
        None
    } else if max == 0 {
        Some(format!("{who} does not support this feature."))
    } else {
        Some(format!("{who} only supports versions {min}-{max}"))
    }
}

fn invalid_update(u: &FeatureUpdate, reason: &str) -> ControllerError {
    err(
        ResponseError::InvalidUpdateVersion,
        format!(
            "Invalid update version {} for feature {}. {reason}",
            u.max_version_level, u.feature
        ),
    )
}

fn invalid_metadata_version(level: i16, reason: &str) -> ControllerError {
    err(
        ResponseError::InvalidUpdateVersion,
        format!("Invalid metadata.version {level}. {reason}"),
    )
}

impl Controller {
    /// The finalized level of `name` (0 when not finalized).
    pub fn finalized_level(&self, name: &str) -> i16 {
        self.state.features.get(name).copied().unwrap_or(0)
    }

    /// UpdateFeatures: the FeatureLevel records of `updates` when every one is valid (none when
    /// `validate_only`), else the first refusal. `node_id` is this controller's node id (Kafka
    /// names it in the range refusals).
    pub fn update_features(
        &self,
        node_id: i32,
        updates: &[FeatureUpdate],
        validate_only: bool,
    ) -> Outcome<Result<(), ControllerError>> {
        let mut records = Vec::new();
        for u in updates {
            match self.check_update(node_id, u) {
                Ok(()) => records.push(MetadataRecord::FeatureLevel {
                    name: u.feature.clone(),
                    feature_level: u.max_version_level,
                }),
                Err(e) => {
                    return Outcome {
                        records: Vec::new(),
                        answer: Err(e),
                    }
                }
            }
        }
        if validate_only {
            records.clear();
        }
        Outcome {
            records,
            answer: Ok(()),
        }
    }

    fn check_update(&self, node_id: i32, u: &FeatureUpdate) -> Result<(), ControllerError> {
        let level = u.max_version_level;
        if u.upgrade_type == UpgradeType::Unknown {
            return Err(invalid_update(
                u,
                "The controller does not support the given upgrade type.",
            ));
        }
        if level < 0 {
            return Err(invalid_update(
                u,
                "A feature version cannot be less than 0.",
            ));
        }
        let local = format!("Local controller {node_id}");
        if let Some(reason) = not_supported(level, &local, supported_range(&u.feature)) {
            return Err(invalid_update(u, &reason));
        }
        for b in self.state.brokers.values() {
            let range = b
                .registration
                .features
                .iter()
                .find(|(n, _, _)| *n == u.feature)
                .map(|(_, min, max)| (*min, *max))
                .unwrap_or((0, 0));
            let who = format!("broker{}", b.registration.broker_id);
            if let Some(reason) = not_supported(level, &who, range) {
                return Err(invalid_update(u, &reason));
            }
        }
        let is_metadata_version = u.feature == METADATA_VERSION;
        if !is_metadata_version && !KNOWN_FEATURES.contains(&u.feature.as_str()) {
            return Err(invalid_update(
                u,
                &format!("Feature {} not found.", u.feature),
            ));
        }
        let current = self.finalized_level(&u.feature);
        if level < current && u.upgrade_type == UpgradeType::Upgrade {
            return Err(invalid_update(
                u,
                "Can't downgrade the version of this feature without setting the upgrade type \
                 to either safe or unsafe downgrade.",
            ));
        }
        if level > current && u.upgrade_type != UpgradeType::Upgrade {
            return Err(invalid_update(u, "Can't downgrade to a newer version."));
        }
        if is_metadata_version && level < current {
            let lossy = METADATA_CHANGING_LEVELS
                .iter()
                .any(|l| *l > level && *l <= current);
            if lossy && u.upgrade_type == UpgradeType::UnsafeDowngrade {
                return Err(invalid_metadata_version(
                    level,
                    "Unsafe metadata downgrade is not supported in this version.",
                ));
            }
            if lossy {
                return Err(invalid_metadata_version(
                    level,
                    "Refusing to perform the requested downgrade because it might delete \
                     metadata information.",
                ));
            }
        }
        Ok(())
    }
}

/// The features a new cluster's metadata log starts with: [`super::BOOTSTRAP_FEATURES`] with
/// `transaction.version` at `transaction_version` and `share.version` at `share_version` (the
/// `sluice.feature.*` keys), levels of 0 left out.
pub fn bootstrap_features(
    transaction_version: i16,
    share_version: i16,
) -> Vec<(&'static str, i16)> {
    let mut out: Vec<(&'static str, i16)> = super::BOOTSTRAP_FEATURES
        .iter()
        .filter(|(name, _)| *name != "transaction.version")
        .copied()
        .collect();
    out.push(("transaction.version", transaction_version));
    out.push(("share.version", share_version));
    out.retain(|(_, level)| *level != 0);
    out
}

#[cfg(test)]
#[path = "features_tests.rs"]
mod tests;
