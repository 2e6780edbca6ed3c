//! UpdateFeatures (57) on a running broker: refusals as the top-level error, an accepted change
//! seen by the next ApiVersions (levels and epoch), `share.version` switching the share-group
//! APIs, validate_only, and levels kept across a restart (the `sluice.feature.*` keys only seed a
//! new cluster).

use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, ShareGroupHeartbeatRequest, UpdateFeaturesRequest,
    UpdateFeaturesResponse,
};
use kafka_protocol::protocol::StrBytes;
use protocol_tests::{api_versions_request, Client, TestBroker};
use sluice::config::Value;

#[global_allocator]
static ALLOC: sluice::alloc_guard::GuardedAllocator = sluice::alloc_guard::GuardedAllocator;

const INVALID_UPDATE_VERSION: i16 = 95;
const UPGRADE: i8 = 1;
const SAFE_DOWNGRADE: i8 = 2;

fn update(name: &'static str, level: i16, upgrade_type: i8) -> UpdateFeaturesRequest {
    UpdateFeaturesRequest::default()
        .with_timeout_ms(5000)
        .with_feature_updates(vec![FeatureUpdateKey::default()
            .with_feature(StrBytes::from_static_str(name))
            .with_max_version_level(level)
            .with_upgrade_type(upgrade_type)])
}

async fn api_versions(c: &mut Client) -> anyhow::Result<ApiVersionsResponse> {
    c.call(4, &api_versions_request()).await
}

/// The finalized level ApiVersions reports for `name` (0 when not listed).
fn finalized(r: &ApiVersionsResponse, name: &str) -> i16 {
    r.finalized_features
        .iter()
        .find(|f| f.name.as_str() == name)
        .map(|f| {
            assert_eq!(f.min_version_level, f.max_version_level, "{name}");
            f.max_version_level
        })
        .unwrap_or(0)
}

fn advertises(r: &ApiVersionsResponse, key: ApiKey) -> Option<(i16, i16)> {
    r.api_keys
        .iter()
        .find(|k| k.api_key == key as i16)
        .map(|k| (k.min_version, k.max_version))
}

fn results(r: &UpdateFeaturesResponse) -> Vec<(String, i16, Option<String>)> {
    r.results
        .iter()
        .map(|x| {
            (
                x.feature.to_string(),
                x.error_code,
                x.error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_update_is_the_top_level_error_and_changes_nothing() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    let before = api_versions(&mut c).await?;
    assert_eq!(advertises(&before, ApiKey::UpdateFeatures), Some((0, 2)));
    assert_eq!(finalized(&before, "transaction.version"), 2);
    assert_eq!(finalized(&before, "metadata.version"), 27);

    let r = c
        .call(1, &update("transaction.version", 3, UPGRADE))
        .await?;
    assert_eq!(r.error_code, INVALID_UPDATE_VERSION);
    assert_eq!(
        r.error_message.as_deref(),
        Some(
            "The update failed for all features since the following feature had an error: \
             Invalid update version 3 for feature transaction.version. Local controller 1 only \
             supports versions 0-2"
        )
    );
    assert!(r.results.is_empty());

    // A downgrade asked as an upgrade, at v0 too (whose allow_downgrade Kafka 4.1.2 ignores).
    let mut v0 = update("transaction.version", 1, UPGRADE);
    v0.feature_updates[0].allow_downgrade = true;
    let r = c.call(0, &v0).await?;
    assert_eq!(r.error_code, INVALID_UPDATE_VERSION);
    assert!(r.error_message.as_deref().is_some_and(
        |m| m.ends_with("without setting the upgrade type to either safe or unsafe downgrade.")
    ));

    // validate_only: accepted, not applied.
    let r = c
        .call(
            1,
            &update("transaction.version", 1, SAFE_DOWNGRADE).with_validate_only(true),
        )
        .await?;
    assert_eq!((r.error_code, r.error_message.clone()), (0, None));
    assert_eq!(
        results(&r),
        vec![("transaction.version".into(), 0, Some("NONE".into()))]
    );
    let after = api_versions(&mut c).await?;
    assert_eq!(finalized(&after, "transaction.version"), 2);
    assert_eq!(
        after.finalized_features_epoch,
        before.finalized_features_epoch
    );
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accepted_change_is_in_the_next_api_versions_and_survives_a_restart(
) -> anyhow::Result<()> {
    let mut broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    let before = api_versions(&mut c).await?;

    let r = c
        .call(1, &update("transaction.version", 1, SAFE_DOWNGRADE))
        .await?;
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    assert_eq!(
        results(&r),
        vec![("transaction.version".into(), 0, Some("NONE".into()))]
    );
    let after = api_versions(&mut c).await?;
    assert_eq!(finalized(&after, "transaction.version"), 1);
    assert!(after.finalized_features_epoch > before.finalized_features_epoch);

    // The level is a metadata record: the key, still at its default 2, does not reset it.
    drop(c);
    broker.restart(&[]).await?;
    let mut c = broker.connect().await?;
    let restarted = api_versions(&mut c).await?;
    assert_eq!(finalized(&restarted, "transaction.version"), 1);
    assert_eq!(finalized(&restarted, "metadata.version"), 27);
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn share_version_switches_the_share_group_apis() -> anyhow::Result<()> {
    let broker = TestBroker::start_with(&[("sluice.feature.share.version", Value::Int(0))]).await?;
    let mut c = broker.connect().await?;
    let off = api_versions(&mut c).await?;
    assert_eq!(finalized(&off, "share.version"), 0);
    assert_eq!(advertises(&off, ApiKey::ShareFetch), None);

    // v2 answers carry no per-feature results.
    let r = c.call(2, &update("share.version", 1, UPGRADE)).await?;
    assert_eq!((r.error_code, r.results.len()), (0, 0));
    let on = api_versions(&mut c).await?;
    assert_eq!(finalized(&on, "share.version"), 1);
    assert_eq!(advertises(&on, ApiKey::ShareFetch), Some((1, 2)));
    let heartbeat = ShareGroupHeartbeatRequest::default()
        .with_group_id(StrBytes::from_static_str("features-share").into())
        .with_member_id(StrBytes::from_static_str("m1"))
        .with_member_epoch(0)
        .with_subscribed_topic_names(Some(vec![StrBytes::from_static_str("t").into()]));
    let answer = c.call(1, &heartbeat).await?;
    assert_eq!(answer.error_code, 0, "{:?}", answer.error_message);

    let r = c
        .call(2, &update("share.version", 0, SAFE_DOWNGRADE))
        .await?;
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let off_again = api_versions(&mut c).await?;
    assert_eq!(advertises(&off_again, ApiKey::ShareFetch), None);
    // The share APIs are now unsupported: the broker closes the connection, as Kafka does.
    c.send(1, &heartbeat).await?;
    c.expect_closed().await?;
    broker.shutdown().await;
    Ok(())
}
