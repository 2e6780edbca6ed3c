//! The feature entries of the differential corpus: UpdateFeatures (57) at v0, v1 and v2, its
//! refusals (unknown feature, level outside the supported range, downgrade without a downgrade
//! type, upgrade with one, metadata.version downgrades, a negative level, an unknown upgrade
//! type), validate_only, and the finalized levels ApiVersions v4 reports after each applied
//! change. [`crate::corpus::CORPUS`] orders them: the first entry puts `share.version` at 0 on
//! both brokers (Kafka 4.1 formats it at 0, Sluice at `sluice.feature.share.version`).

use anyhow::Result;
use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::UpdateFeaturesRequest;
use kafka_protocol::protocol::StrBytes;
use protocol_tests::{api_versions_request, Client};

/// The features whose finalized levels the ApiVersions entries compare (Kafka also lists
/// `kraft.version`, which Sluice's quorum does not have as a feature).
const COMPARED: &[&str] = &[
    "eligible.leader.replicas.version",
    "group.version",
    "metadata.version",
    "share.version",
    "transaction.version",
];

/// UpgradeType values of UpdateFeatures v1+.
const UPGRADE: i8 = 1;
const SAFE_DOWNGRADE: i8 = 2;
const UNSAFE_DOWNGRADE: i8 = 3;

#[derive(Clone, Copy)]
pub enum FeatureCase {
    /// Both brokers to `share.version` 0 (UNSAFE_DOWNGRADE; a no-op on Kafka).
    ShareOff,
    UnknownFeature,
    AboveSupported,
    DowngradeAsUpgrade,
    ValidateOnlyDowngrade,
    UpgradeAsDowngrade,
    MetadataVersionLossy,
    MetadataVersionLossyUnsafe,
    MetadataVersionBelowSupported,
    NegativeLevel,
    UnknownUpgradeType,
    OneBadOfTwo,
    V0DowngradeNotAllowed,
    /// v0 with allow_downgrade: Kafka 4.1.2 reads the upgrade type (UPGRADE at v0), not the flag.
    V0Downgrade,
    UnknownFeatureOff,
    Duplicate,
    V1SafeDowngrade,
    /// ApiVersions v3's supported features (names and ranges).
    SupportedV3,
    /// ApiVersions v4's finalized levels, asked until `transaction.version` and `share.version`
    /// are the given levels (0: not listed).
    FinalizedAfter(i16, i16),
    V1Upgrade,
    MetadataVersionSafeDowngrade,
    MetadataVersionUpgrade,
    V2ShareOn,
    V2ShareOff,
    Empty,
}

fn update(version_level: &[(&'static str, i16, i8)], validate_only: bool) -> UpdateFeaturesRequest {
    UpdateFeaturesRequest::default()
        .with_timeout_ms(5000)
        .with_validate_only(validate_only)
        .with_feature_updates(
            version_level
                .iter()
                .map(|(name, level, upgrade_type)| {
                    FeatureUpdateKey::default()
                        .with_feature(StrBytes::from_static_str(name))
                        .with_max_version_level(*level)
                        .with_upgrade_type(*upgrade_type)
                        .with_allow_downgrade(*upgrade_type != UPGRADE)
                })
                .collect(),
        )
}

/// Sends `r` at `version`: v0 carries `allow_downgrade`, v1+ the upgrade type (the other field
/// must keep its default to be encodable).
async fn call(c: &mut Client, version: i16, mut r: UpdateFeaturesRequest) -> Result<String> {
    for u in &mut r.feature_updates {
        if version == 0 {
            u.upgrade_type = UPGRADE;
        } else {
            u.allow_downgrade = false;
        }
    }
    Ok(format!("{:#?}", c.call(version, &r).await?))
}

/// The compared finalized levels of ApiVersions v4, one line each ("name = min..max").
async fn finalized(c: &mut Client) -> Result<(Vec<String>, i64)> {
    let answer = c.call(4, &api_versions_request()).await?;
    let mut lines: Vec<String> = answer
        .finalized_features
        .iter()
        .filter(|f| COMPARED.contains(&f.name.as_str()))
        .map(|f| {
            format!(
                "{} = {}..{}",
                f.name.as_str(),
                f.min_version_level,
                f.max_version_level
            )
        })
        .collect();
    lines.sort();
    Ok((lines, answer.finalized_features_epoch))
}

/// Sends `case`'s request and renders the decoded answer.
pub async fn exchange(c: &mut Client, case: FeatureCase) -> Result<String> {
    use FeatureCase as F;
    match case {
        F::ShareOff => {
            let r = update(&[("share.version", 0, UNSAFE_DOWNGRADE)], false);
            call(c, 1, r).await
        }
        F::UnknownFeature => call(c, 1, update(&[("diff.nope.version", 1, UPGRADE)], false)).await,
        F::AboveSupported => {
            call(c, 1, update(&[("transaction.version", 3, UPGRADE)], false)).await
        }
        F::DowngradeAsUpgrade => {
            call(c, 1, update(&[("transaction.version", 1, UPGRADE)], false)).await
        }
        F::ValidateOnlyDowngrade => {
            let r = update(&[("transaction.version", 1, SAFE_DOWNGRADE)], true);
            call(c, 1, r).await
        }
        F::UpgradeAsDowngrade => {
            call(c, 1, update(&[("share.version", 1, SAFE_DOWNGRADE)], false)).await
        }
        F::UnknownFeatureOff => {
            let r = update(&[("diff.nope.version", 0, SAFE_DOWNGRADE)], false);
            call(c, 1, r).await
        }
        F::Duplicate => {
            let r = update(
                &[
                    ("transaction.version", 2, UPGRADE),
                    ("transaction.version", 2, UPGRADE),
                ],
                false,
            );
            call(c, 1, r).await
        }
        F::V1SafeDowngrade => {
            let r = update(&[("transaction.version", 1, SAFE_DOWNGRADE)], false);
            call(c, 1, r).await
        }
        F::MetadataVersionLossy => {
            let r = update(&[("metadata.version", 22, SAFE_DOWNGRADE)], false);
            call(c, 1, r).await
        }
        F::MetadataVersionLossyUnsafe => {
            let r = update(&[("metadata.version", 22, UNSAFE_DOWNGRADE)], false);
            call(c, 1, r).await
        }
        F::MetadataVersionBelowSupported => {
            let r = update(&[("metadata.version", 6, SAFE_DOWNGRADE)], false);
            call(c, 1, r).await
        }
        F::NegativeLevel => {
            let r = update(&[("transaction.version", -1, SAFE_DOWNGRADE)], false);
            call(c, 1, r).await
        }
        F::UnknownUpgradeType => call(c, 1, update(&[("transaction.version", 1, 7)], false)).await,
        F::OneBadOfTwo => {
            let r = update(
                &[
                    ("transaction.version", 1, SAFE_DOWNGRADE),
                    ("diff.nope.version", 1, UPGRADE),
                ],
                false,
            );
            call(c, 1, r).await
        }
        F::V0DowngradeNotAllowed => {
            call(c, 0, update(&[("transaction.version", 1, UPGRADE)], false)).await
        }
        F::V0Downgrade => {
            let r = update(&[("transaction.version", 1, SAFE_DOWNGRADE)], false);
            call(c, 0, r).await
        }
        F::FinalizedAfter(level, share) => {
            // Kafka applies the change when its metadata log reaches the broker: ask again
            // until ApiVersions reports it, for up to 5 s
            let at = |lines: &[String], name: &str, level: i16| {
                if level == 0 {
                    !lines.iter().any(|l| l.starts_with(name))
                } else {
                    lines.contains(&format!("{name} = {level}..{level}"))
                }
            };
            let (mut lines, _) = finalized(c).await?;
            for _ in 0..50 {
                if at(&lines, "transaction.version", level) && at(&lines, "share.version", share) {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                (lines, _) = finalized(c).await?;
            }
            Ok(lines.join("\n"))
        }
        F::SupportedV3 => {
            let answer = c.call(3, &api_versions_request()).await?;
            let mut lines: Vec<String> = answer
                .supported_features
                .iter()
                .map(|f| format!("{} = {}..{}", f.name.as_str(), f.min_version, f.max_version))
                .collect();
            lines.sort();
            Ok(lines.join("\n"))
        }
        F::V1Upgrade => call(c, 1, update(&[("transaction.version", 2, UPGRADE)], false)).await,
        F::MetadataVersionSafeDowngrade => {
            let r = update(&[("metadata.version", 26, SAFE_DOWNGRADE)], false);
            call(c, 1, r).await
        }
        F::MetadataVersionUpgrade => {
            call(c, 1, update(&[("metadata.version", 27, UPGRADE)], false)).await
        }
        F::V2ShareOn => call(c, 2, update(&[("share.version", 1, UPGRADE)], false)).await,
        F::V2ShareOff => call(c, 2, update(&[("share.version", 0, SAFE_DOWNGRADE)], false)).await,
        F::Empty => call(c, 1, update(&[], false)).await,
    }
}
