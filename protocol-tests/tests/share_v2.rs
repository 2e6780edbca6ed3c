//! ShareFetch / ShareAcknowledge v2 over the wire (KIP-1206, KIP-1222): advertised at 1-2;
//! record-limit mode acquires exactly MaxRecords from a larger batch; RENEW needs IsRenewAck
//! (else INVALID_REQUEST for the partition), is answered with the lock duration and keeps the
//! records locked past their first deadline; a renewing ShareFetch with a fetch limit set is
//! INVALID_REQUEST, with every limit 0 it only acknowledges.

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use bytes::{Buf, Bytes};
use kafka_protocol::messages::incremental_alter_configs_request as iac;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, StrBytes};
use protocol_tests::{
    batch, create_topic, metadata, produce, raw_frame, share, topic_name, Client, TestBroker, Uuid,
};
use sluice::config::Value;
use sluice::protocol::schema::Reader;
use sluice::protocol::share_v2::{self, ShareAcknowledge, ShareFetch};

const LOCK_MS: i64 = 2_000;
const ACCEPT: i8 = 1;
const RENEW: i8 = 4;
const INVALID_REQUEST: i16 = 42;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// Sends a v2 body (request header v2: client id "t", no tagged fields) and returns the response
/// body after its header (v1: correlation id, no tagged fields).
async fn call_v2(c: &mut Client, key: ApiKey, body: &[u8]) -> Result<Bytes> {
    let mut with_tags = vec![0u8];
    with_tags.extend_from_slice(body);
    c.send_raw(&raw_frame(key as i16, 2, 77, &with_tags))
        .await?;
    let mut frame = c.read_frame().await?;
    ensure!(frame.get_i32() == 77, "correlation id");
    ensure!(frame.get_u8() == 0, "response header tagged fields");
    Ok(frame)
}

fn fetch_request(member: &str, epoch: i32, topic: Uuid, max_records: i32) -> ShareFetchRequest {
    let limits = share::Limits {
        max_records,
        max_bytes: 1 << 20,
        max_wait_ms: 0,
    };
    // MinBytes 0: a renewing fetch must not wait for bytes (Kafka refuses it otherwise).
    share::share_fetch_request(member, epoch, topic, &[], limits).with_min_bytes(0)
}

fn with_acks(mut r: ShareFetchRequest, first: i64, last: i64, ty: i8) -> ShareFetchRequest {
    r.topics[0].partitions[0].acknowledgement_batches =
        share::fetch_ack_batches(&[(first, last, ty)]);
    r
}

async fn share_fetch(c: &mut Client, fetch: ShareFetch) -> Result<ShareFetchResponse> {
    let body = share_v2::encode_share_fetch(&fetch, 2)?;
    let mut resp = call_v2(c, ApiKey::ShareFetch, &body).await?;
    // ShareFetch response v2 has v1's layout.
    let r = ShareFetchResponse::decode(&mut resp, 1)?;
    ensure!(resp.is_empty(), "trailing bytes");
    Ok(r)
}

fn acquired(r: &ShareFetchResponse) -> Vec<(i64, i64, i16)> {
    r.responses
        .iter()
        .flat_map(|t| &t.partitions)
        .flat_map(|p| &p.acquired_records)
        .map(|a| (a.first_offset, a.last_offset, a.delivery_count))
        .collect()
}

/// A v2 ShareAcknowledge of `[first, last]` with one type; the response and its
/// AcquisitionLockTimeoutMs.
async fn acknowledge(
    c: &mut Client,
    (member, epoch, topic): (&str, i32, Uuid),
    (first, last, ty): (i64, i64, i8),
    is_renew_ack: bool,
) -> Result<(ShareAcknowledgeResponse, i32)> {
    let request = share::share_acknowledge_request(member, epoch, topic, &[(first, last, ty)]);
    let ack = ShareAcknowledge {
        request,
        is_renew_ack,
    };
    let body = share_v2::encode_share_acknowledge(&ack, 2)?;
    let resp = call_v2(c, ApiKey::ShareAcknowledge, &body).await?;
    // v2 = v1 with AcquisitionLockTimeoutMs after ErrorMessage.
    let mut r = Reader::new(&resp);
    r.set_flexible(true);
    r.i32()?;
    r.i16()?;
    r.nullable_string()?;
    let at = resp.len() - r.remaining();
    let lock = r.i32()?;
    let mut v1 = resp[..at].to_vec();
    v1.extend_from_slice(&resp[at + 4..]);
    let mut v1 = Bytes::from(v1);
    Ok((ShareAcknowledgeResponse::decode(&mut v1, 1)?, lock))
}

fn partition_code(r: &ShareAcknowledgeResponse) -> Result<i16> {
    ensure!(r.error_code == 0, "top-level error {}", r.error_code);
    r.responses
        .first()
        .and_then(|t| t.partitions.first())
        .map(|p| p.error_code)
        .context("no partition")
}

async fn heartbeat(c: &mut Client, member: &str) -> Result<()> {
    let req = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("sg")))
        .with_member_id(s(member))
        .with_member_epoch(0)
        .with_subscribed_topic_names(Some(vec![topic_name("t")]));
    let r: ShareGroupHeartbeatResponse = c.call(1, &req).await?;
    ensure!(r.error_code == 0, "heartbeat {}", r.error_code);
    Ok(())
}

#[tokio::test]
async fn v2_record_limit_and_renew() -> Result<()> {
    let lock = ("group.share.record.lock.duration.ms", Value::Int(LOCK_MS));
    let min = ("group.share.min.record.lock.duration.ms", Value::Int(1000));
    let broker = TestBroker::start_with(&[min, lock]).await?;
    let mut c = broker.connect().await?;

    let versions: ApiVersionsResponse = c.call(4, &protocol_tests::api_versions_request()).await?;
    for key in [ApiKey::ShareFetch, ApiKey::ShareAcknowledge] {
        let k = versions
            .api_keys
            .iter()
            .find(|k| k.api_key == key as i16)
            .context("advertised")?;
        assert_eq!((k.min_version, k.max_version), (1, 2), "{key:?}");
    }

    create_topic(&mut c, "t", 1, &[]).await?;
    let topic = metadata(&mut c, "t").await?.topics[0].topic_id;
    let values: Vec<&[u8]> = vec![b"r"; 10];
    produce(&mut c, 9, "t", 0, batch(&values)).await?;
    let alter = IncrementalAlterConfigsRequest::default().with_resources(vec![
        iac::AlterConfigsResource::default()
            .with_resource_type(32)
            .with_resource_name(s("sg"))
            .with_configs(vec![iac::AlterableConfig::default()
                .with_name(s("share.auto.offset.reset"))
                .with_config_operation(0)
                .with_value(Some(s("earliest")))]),
    ]);
    let r: IncrementalAlterConfigsResponse = c.call(1, &alter).await?;
    assert_eq!(r.responses[0].error_code, 0);
    heartbeat(&mut c, "member-a").await?;
    heartbeat(&mut c, "member-b").await?;

    // Record-limit: 3 of the 10-record batch, never the whole batch.
    let fetch = |request, mode, renew| ShareFetch {
        request,
        share_acquire_mode: mode,
        is_renew_ack: renew,
    };
    let t0 = Instant::now();
    let r = share_fetch(
        &mut c,
        fetch(
            fetch_request("member-a", 0, topic, 3),
            share_v2::RECORD_LIMIT,
            false,
        ),
    )
    .await?;
    assert_eq!(acquired(&r), vec![(0, 2, 1)]);
    assert_eq!(r.acquisition_lock_timeout_ms, LOCK_MS as i32);

    // A renewing ShareFetch with a fetch limit set: INVALID_REQUEST, the session does not move.
    let bad = with_acks(fetch_request("member-a", 1, topic, 3), 0, 2, RENEW);
    let r = share_fetch(&mut c, fetch(bad, share_v2::BATCH_OPTIMIZED, true)).await?;
    assert_eq!(r.error_code, INVALID_REQUEST, "{:?}", r.error_message);

    // RENEW without IsRenewAck: INVALID_REQUEST for the partition (the session moves to 2).
    let (r, lock) = acknowledge(&mut c, ("member-a", 1, topic), (0, 2, RENEW), false).await?;
    assert_eq!(partition_code(&r)?, INVALID_REQUEST);
    assert_eq!(lock, LOCK_MS as i32);

    // Renewed about 1.2 s in: the records stay member-a's past their first deadline (2 s).
    tokio::time::sleep(Duration::from_millis(1_200).saturating_sub(t0.elapsed())).await;
    let (r, lock) = acknowledge(&mut c, ("member-a", 2, topic), (0, 2, RENEW), true).await?;
    assert_eq!(partition_code(&r)?, 0, "{r:?}");
    assert_eq!(lock, LOCK_MS as i32);
    tokio::time::sleep(Duration::from_millis(2_500).saturating_sub(t0.elapsed())).await;
    let r = share_fetch(
        &mut c,
        fetch(
            fetch_request("member-b", 0, topic, 100),
            share_v2::RECORD_LIMIT,
            false,
        ),
    )
    .await?;
    ensure!(
        t0.elapsed() < Duration::from_millis(3_000),
        "too slow to tell a renewed lock from an expired one"
    );
    assert_eq!(acquired(&r), vec![(3, 9, 1)], "0-2 are still locked");

    // A renewing ShareFetch with every limit 0 only acknowledges: no records.
    let mut renew = with_acks(fetch_request("member-a", 3, topic, 0), 0, 2, RENEW);
    renew.max_bytes = 0;
    let r = share_fetch(&mut c, fetch(renew, share_v2::BATCH_OPTIMIZED, true)).await?;
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.acknowledge_error_code, 0);
    assert!(p.acquired_records.is_empty());

    // Still member-a's: its ACCEPT succeeds.
    let (r, _) = acknowledge(&mut c, ("member-a", 4, topic), (0, 2, ACCEPT), false).await?;
    assert_eq!(partition_code(&r)?, 0);
    broker.shutdown().await;
    Ok(())
}
