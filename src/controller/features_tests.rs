//! UpdateFeatures validation, one rule per test; messages as Kafka 4.1.2 answers them.

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use super::*;
use crate::controller::{bootstrap_records, BrokerRegistration, ControllerSettings};
use crate::metadata::records::BrokerEndpoint;

const NODE: i32 = 1;

/// A broker's supported ranges: (name, min, max).
type Ranges = Vec<(String, i16, i16)>;

/// A controller of a new cluster (bootstrap levels plus `share.version` 0) with brokers
/// registered with `features` each.
fn controller(brokers: &[(i32, Ranges)]) -> Controller {
    let mut c = Controller::new(ControllerSettings::default());
    for r in bootstrap_records(&bootstrap_features(2, 0)) {
        c.apply(&r);
    }
    for (i, (id, features)) in brokers.iter().enumerate() {
        let registration = BrokerRegistration {
            broker_id: *id,
            incarnation_id: Uuid::from_u128(*id as u128),
            listeners: vec![BrokerEndpoint {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9092,
                security_protocol: 0,
            }],
            features: features.clone(),
            rack: None,
            previous_broker_epoch: -1,
        };
        let out = c
            .register_broker(&registration, 0, 10 + i as i64)
            .expect("registration");
        for r in &out.records {
            c.apply(r);
        }
    }
    c
}

fn supported() -> Ranges {
    SUPPORTED_FEATURES
        .iter()
        .map(|(n, min, max)| (n.to_string(), *min, *max))
        .collect()
}

fn update(name: &str, level: i16, upgrade_type: UpgradeType) -> FeatureUpdate {
    FeatureUpdate {
        feature: name.into(),
        max_version_level: level,
        upgrade_type,
    }
}

/// The refusal of one update, as (code, message).
fn refusal(c: &Controller, u: FeatureUpdate) -> (ResponseError, String) {
    let out = c.update_features(NODE, &[u], false);
    assert!(out.records.is_empty(), "a refusal writes nothing");
    let e = out.answer.expect_err("refused");
    (e.error, e.message)
}

fn accepted(c: &mut Controller, updates: &[FeatureUpdate]) -> Vec<MetadataRecord> {
    let out = c.update_features(NODE, updates, false);
    assert_eq!(out.answer, Ok(()));
    for r in &out.records {
        c.apply(r);
    }
    out.records
}

const INVALID: ResponseError = ResponseError::InvalidUpdateVersion;

#[test]
fn an_unknown_feature_is_not_supported_by_the_local_controller() {
    let c = controller(&[(1, supported())]);
    assert_eq!(
        refusal(&c, update("foo.version", 1, UpgradeType::Upgrade)),
        (
            INVALID,
            "Invalid update version 1 for feature foo.version. Local controller 1 does not \
             support this feature."
                .into()
        )
    );
    assert_eq!(
        refusal(&c, update("foo.version", 0, UpgradeType::SafeDowngrade)),
        (
            INVALID,
            "Invalid update version 0 for feature foo.version. Feature foo.version not found."
                .into()
        )
    );
}

#[test]
fn a_level_outside_the_local_range_is_refused() {
    let c = controller(&[(1, supported())]);
    assert_eq!(
        refusal(&c, update("transaction.version", 3, UpgradeType::Upgrade)).1,
        "Invalid update version 3 for feature transaction.version. Local controller 1 only \
         supports versions 0-2"
    );
    assert_eq!(
        refusal(&c, update(METADATA_VERSION, 6, UpgradeType::SafeDowngrade)).1,
        "Invalid update version 6 for feature metadata.version. Local controller 1 only \
         supports versions 7-27"
    );
}

#[test]
fn a_level_a_registered_broker_does_not_support_is_refused() {
    let mut older = supported();
    older.retain(|(n, _, _)| n != "share.version");
    for f in &mut older {
        if f.0 == "transaction.version" {
            f.2 = 2;
        }
    }
    let c = controller(&[(1, supported()), (2, older)]);
    assert_eq!(
        refusal(&c, update("share.version", 1, UpgradeType::Upgrade)),
        (
            INVALID,
            "Invalid update version 1 for feature share.version. broker2 does not support this \
             feature."
                .into()
        )
    );
    let mut narrow = supported();
    for f in &mut narrow {
        if f.0 == "transaction.version" {
            f.1 = 1;
        }
    }
    let c = controller(&[(3, narrow)]);
    assert_eq!(
        refusal(
            &c,
            update("transaction.version", 0, UpgradeType::SafeDowngrade)
        )
        .1,
        "Invalid update version 0 for feature transaction.version. broker3 only supports \
         versions 1-2"
    );
}

#[test]
fn a_downgrade_needs_a_downgrade_type() {
    let mut c = controller(&[(1, supported())]);
    assert_eq!(
        refusal(&c, update("transaction.version", 1, UpgradeType::Upgrade)).1,
        "Invalid update version 1 for feature transaction.version. Can't downgrade the version \
         of this feature without setting the upgrade type to either safe or unsafe downgrade."
    );
    assert_eq!(c.finalized_level("transaction.version"), 2);
    let records = accepted(
        &mut c,
        &[update("transaction.version", 1, UpgradeType::SafeDowngrade)],
    );
    assert_eq!(
        records,
        vec![MetadataRecord::FeatureLevel {
            name: "transaction.version".into(),
            feature_level: 1
        }]
    );
    assert_eq!(c.finalized_level("transaction.version"), 1);
    accepted(
        &mut c,
        &[update(
            "transaction.version",
            0,
            UpgradeType::UnsafeDowngrade,
        )],
    );
    assert_eq!(c.finalized_level("transaction.version"), 0);
}

#[test]
fn an_upgrade_cannot_be_asked_as_a_downgrade() {
    let c = controller(&[(1, supported())]);
    assert_eq!(
        refusal(&c, update("share.version", 1, UpgradeType::SafeDowngrade)).1,
        "Invalid update version 1 for feature share.version. Can't downgrade to a newer version."
    );
}

#[test]
fn negative_levels_and_unknown_upgrade_types_are_refused_first() {
    let c = controller(&[(1, supported())]);
    assert_eq!(
        refusal(
            &c,
            update("transaction.version", -1, UpgradeType::SafeDowngrade)
        )
        .1,
        "Invalid update version -1 for feature transaction.version. A feature version cannot \
         be less than 0."
    );
    assert_eq!(UpgradeType::from_code(7), UpgradeType::Unknown);
    assert_eq!(UpgradeType::from_code(0), UpgradeType::Unknown);
    assert_eq!(
        refusal(&c, update("foo.version", -1, UpgradeType::from_code(7))).1,
        "Invalid update version -1 for feature foo.version. The controller does not support \
         the given upgrade type."
    );
}

#[test]
fn metadata_version_downgrades_stop_at_a_metadata_change() {
    let mut c = controller(&[(1, supported())]);
    for (level, unsafe_too) in [(22, false), (22, true), (7, false)] {
        let kind = if unsafe_too {
            UpgradeType::UnsafeDowngrade
        } else {
            UpgradeType::SafeDowngrade
        };
        let reason = if unsafe_too {
            "Unsafe metadata downgrade is not supported in this version."
        } else {
            "Refusing to perform the requested downgrade because it might delete metadata \
             information."
        };
        assert_eq!(
            refusal(&c, update(METADATA_VERSION, level, kind)),
            (
                INVALID,
                format!("Invalid metadata.version {level}. {reason}")
            )
        );
    }
    // 4.0-IV1 (23) to 4.1-IV1 (27) changed no metadata format: down and up again
    accepted(
        &mut c,
        &[update(METADATA_VERSION, 23, UpgradeType::SafeDowngrade)],
    );
    assert_eq!(c.finalized_level(METADATA_VERSION), 23);
    accepted(
        &mut c,
        &[update(METADATA_VERSION, 27, UpgradeType::Upgrade)],
    );
    assert_eq!(c.finalized_level(METADATA_VERSION), 27);
}

#[test]
fn one_refusal_fails_every_update_and_validate_only_writes_nothing() {
    let c = controller(&[(1, supported())]);
    let both = [
        update("transaction.version", 1, UpgradeType::SafeDowngrade),
        update("foo.version", 1, UpgradeType::Upgrade),
    ];
    let out = c.update_features(NODE, &both, false);
    assert!(out.records.is_empty());
    assert!(out
        .answer
        .expect_err("refused")
        .message
        .contains("feature foo.version"));
    let out = c.update_features(NODE, &both[..1], true);
    assert_eq!((out.records, out.answer), (Vec::new(), Ok(())));
}

#[test]
fn an_update_at_the_current_level_still_writes_its_record() {
    let mut c = controller(&[(1, supported())]);
    let records = accepted(
        &mut c,
        &[update("transaction.version", 2, UpgradeType::Upgrade)],
    );
    assert_eq!(records.len(), 1);
    assert_eq!(c.finalized_level("transaction.version"), 2);
}

#[test]
fn bootstrap_features_follow_the_sluice_keys() {
    let features = bootstrap_features(0, 1);
    assert!(features.contains(&("share.version", 1)));
    assert!(!features.iter().any(|(n, _)| *n == "transaction.version"));
    assert!(features.contains(&(METADATA_VERSION, 27)));
    let features = bootstrap_features(2, 0);
    assert!(features.contains(&("transaction.version", 2)));
    assert!(!features.iter().any(|(n, _)| *n == "share.version"));
}
