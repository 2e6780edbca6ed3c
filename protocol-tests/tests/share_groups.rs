//! KIP-932 share groups over the wire (v1 of ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch,
//! ShareAcknowledge): ApiVersions advertises them with `share.version` finalized at 1; a GROUP
//! config sets `share.auto.offset.reset=earliest`; two members of one group share a partition
//! (records go to one member at a time), a released record is redelivered with its delivery
//! count, a rejected one is never delivered again, a timed-out lock makes its records Available
//! (the waiting fetch is woken by the lock deadline), and share-session epochs are checked.

use anyhow::{ensure, Context, Result};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use protocol_tests::{batch, create_topic, metadata, produce, share, Client, TestBroker, Uuid};
use sluice::config::Value;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

const ACCEPT: i8 = 1;
const RELEASE: i8 = 2;
const REJECT: i8 = 3;

async fn heartbeat(
    c: &mut Client,
    member: &str,
    epoch: i32,
) -> Result<ShareGroupHeartbeatResponse> {
    share::share_heartbeat(c, member, epoch).await
}

fn share_fetch(
    member: &str,
    epoch: i32,
    topic: Uuid,
    acks: &[(i64, i64, i8)],
    max_wait_ms: i32,
) -> ShareFetchRequest {
    share::share_fetch_request(
        member,
        epoch,
        topic,
        acks,
        share::Limits::waiting(max_wait_ms),
    )
}

/// The acquired ranges (first, last, delivery count) of the only partition.
fn acquired(r: &ShareFetchResponse) -> Result<Vec<(i64, i64, i16)>> {
    ensure!(
        r.error_code == 0,
        "share fetch: {} {:?}",
        r.error_code,
        r.error_message
    );
    let p = r
        .responses
        .first()
        .and_then(|t| t.partitions.first())
        .context("no partition")?;
    ensure!(p.error_code == 0, "partition error {}", p.error_code);
    ensure!(
        p.acknowledge_error_code == 0,
        "ack error {}",
        p.acknowledge_error_code
    );
    if !p.acquired_records.is_empty() {
        let records = p.records.as_ref().context("records")?;
        ensure!(!records.is_empty(), "acquired records without record bytes");
    }
    Ok(p.acquired_records
        .iter()
        .map(|a| (a.first_offset, a.last_offset, a.delivery_count))
        .collect())
}

async fn acknowledge(
    c: &mut Client,
    member: &str,
    epoch: i32,
    topic: Uuid,
    acks: &[(i64, i64, i8)],
) -> Result<ShareAcknowledgeResponse> {
    let req = share::share_acknowledge_request(member, epoch, topic, acks);
    c.call(1, &req).await
}

#[tokio::test]
async fn share_groups_acquire_release_reject_and_time_out() -> Result<()> {
    // A 1 s lock needs its minimum lowered too (Kafka's bounds, 15 s by default).
    let broker = TestBroker::start_with(&[
        ("group.share.min.record.lock.duration.ms", Value::Int(1000)),
        ("group.share.record.lock.duration.ms", Value::Int(1000)),
    ])
    .await?;
    let mut c = broker.connect().await?;

    // Advertised (ShareFetch / ShareAcknowledge up to v2) with share.version finalized at 1.
    let versions: ApiVersionsResponse = c.call(4, &protocol_tests::api_versions_request()).await?;
    for key in [
        ApiKey::ShareGroupHeartbeat,
        ApiKey::ShareGroupDescribe,
        ApiKey::ShareFetch,
        ApiKey::ShareAcknowledge,
    ] {
        let k = versions
            .api_keys
            .iter()
            .find(|k| k.api_key == key as i16)
            .context("share API advertised")?;
        let max = if matches!(key, ApiKey::ShareFetch | ApiKey::ShareAcknowledge) {
            2
        } else {
            1
        };
        assert_eq!((k.min_version, k.max_version), (1, max), "{key:?}");
    }
    let share = versions
        .finalized_features
        .iter()
        .find(|f| f.name.as_str() == "share.version")
        .context("share.version finalized")?;
    assert_eq!(share.max_version_level, 1);

    create_topic(&mut c, "t", 1, &[]).await?;
    let topic = metadata(&mut c, "t").await?.topics[0].topic_id;
    // Two batches before the group exists: only `earliest` makes the group see them.
    produce(&mut c, 9, "t", 0, batch(&[b"a", b"b"])).await?;
    produce(&mut c, 9, "t", 0, batch(&[b"c", b"d"])).await?;
    produce(&mut c, 9, "t", 0, batch(&[b"e", b"f"])).await?;
    share::set_group_config(&mut c, "share.auto.offset.reset", "earliest").await?;

    // Two members, both assigned the partition (share groups share partitions).
    let a = heartbeat(&mut c, "member-a", 0).await?;
    assert_eq!(a.member_epoch, 1);
    let b = heartbeat(&mut c, "member-b", 0).await?;
    assert_eq!(b.member_epoch, 2);
    let describe: ShareGroupDescribeResponse = c
        .call(
            1,
            &ShareGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("sg"))]),
        )
        .await?;
    let g = &describe.groups[0];
    assert_eq!((g.error_code, g.group_state.as_str()), (0, "Stable"));
    assert_eq!(g.members.len(), 2);
    let listed: ListGroupsResponse = c
        .call(
            5,
            &ListGroupsRequest::default().with_types_filter(vec![s("share")]),
        )
        .await?;
    assert_eq!(listed.groups.len(), 1);
    assert_eq!(listed.groups[0].group_type.as_str(), "share");

    // A takes all six records; B, fetching at the same time, gets none (after its wait).
    let r: ShareFetchResponse = c
        .call(1, &share_fetch("member-a", 0, topic, &[], 0))
        .await?;
    assert_eq!(acquired(&r)?, vec![(0, 5, 1)]);
    assert_eq!(r.acquisition_lock_timeout_ms, 1000);
    let r: ShareFetchResponse = c
        .call(1, &share_fetch("member-b", 0, topic, &[], 50))
        .await?;
    assert_eq!(acquired(&r)?, vec![]);

    // A accepts 0-1, releases 2-3, rejects 4-5: B gets 2-3 on their second delivery.
    let ack = acknowledge(
        &mut c,
        "member-a",
        1,
        topic,
        &[(0, 1, ACCEPT), (2, 3, RELEASE), (4, 5, REJECT)],
    )
    .await?;
    assert_eq!(ack.error_code, 0);
    assert_eq!(ack.responses[0].partitions[0].error_code, 0);
    let r: ShareFetchResponse = c
        .call(1, &share_fetch("member-b", 1, topic, &[], 0))
        .await?;
    assert_eq!(acquired(&r)?, vec![(2, 3, 2)]);
    // A acknowledging B's records is refused, and changes nothing.
    let ack = acknowledge(&mut c, "member-a", 2, topic, &[(2, 3, ACCEPT)]).await?;
    assert_eq!(ack.responses[0].partitions[0].error_code, 121);

    // B never acknowledges: after the 1 s lock A's waiting fetch is woken and gets them (third
    // delivery). The rejected 4-5 never come back.
    let started = std::time::Instant::now();
    let r: ShareFetchResponse = c
        .call(1, &share_fetch("member-a", 3, topic, &[], 5000))
        .await?;
    assert_eq!(acquired(&r)?, vec![(2, 3, 3)]);
    assert!(started.elapsed() < std::time::Duration::from_millis(4000));

    // Piggy-backed accept, then a new record goes to whoever fetches next.
    produce(&mut c, 9, "t", 0, batch(&[b"g"])).await?;
    let r: ShareFetchResponse = c
        .call(1, &share_fetch("member-a", 4, topic, &[(2, 3, ACCEPT)], 0))
        .await?;
    assert_eq!(acquired(&r)?, vec![(6, 6, 1)]);

    // Session epochs: a wrong one, an unknown session, acknowledgements in an initial fetch.
    let r: ShareFetchResponse = c
        .call(1, &share_fetch("member-a", 9, topic, &[], 0))
        .await?;
    assert_eq!(r.error_code, 123);
    let r: ShareFetchResponse = c
        .call(1, &share_fetch("member-x", 1, topic, &[], 0))
        .await?;
    assert_eq!(r.error_code, 122);
    let r: ShareFetchResponse = c
        .call(1, &share_fetch("member-x", 0, topic, &[(0, 0, ACCEPT)], 0))
        .await?;
    assert_eq!(r.error_code, 42);
    let ack = acknowledge(&mut c, "member-b", 0, topic, &[]).await?;
    assert_eq!(ack.error_code, 123);

    // A closes its session (epoch -1) without acknowledging 6: it is released at once and B
    // gets it on its second delivery.
    let ack = acknowledge(&mut c, "member-a", -1, topic, &[]).await?;
    assert_eq!(ack.error_code, 0);
    let r: ShareFetchResponse = c
        .call(1, &share_fetch("member-b", 0, topic, &[], 0))
        .await?;
    assert_eq!(acquired(&r)?, vec![(6, 6, 2)]);

    // B leaves the group: its share session closes and 6 is released at once (third delivery).
    let left = heartbeat(&mut c, "member-b", -1).await?;
    assert_eq!(left.member_epoch, -1);
    let r: ShareFetchResponse = c
        .call(1, &share_fetch("member-a", 0, topic, &[], 0))
        .await?;
    assert_eq!(acquired(&r)?, vec![(6, 6, 3)]);
    let r: ShareFetchResponse = c
        .call(1, &share_fetch("member-b", 1, topic, &[], 0))
        .await?;
    assert_eq!(r.error_code, 122);
    Ok(())
}

/// Durable share state (`__share_group_state`) and share groups (`__consumer_offsets`): records
/// accepted before a restart are never delivered again, released ones come back with their
/// delivery count, and the member carries on with its epoch.
#[tokio::test]
async fn share_state_and_group_survive_a_restart() -> Result<()> {
    let mut broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    create_topic(&mut c, "t", 1, &[]).await?;
    let topic = metadata(&mut c, "t").await?.topics[0].topic_id;
    for pair in [[b"a", b"b"], [b"c", b"d"], [b"e", b"f"]] {
        produce(&mut c, 9, "t", 0, batch(&[pair[0], pair[1]])).await?;
    }
    share::set_group_config(&mut c, "share.auto.offset.reset", "earliest").await?;
    let a = heartbeat(&mut c, "member-a", 0).await?;
    assert_eq!(a.member_epoch, 1);
    let r: ShareFetchResponse = c
        .call(1, &share_fetch("member-a", 0, topic, &[], 0))
        .await?;
    assert_eq!(acquired(&r)?, vec![(0, 5, 1)]);
    // Accept 0-1, release 2-3, leave 4-5 acquired.
    let r = acknowledge(
        &mut c,
        "member-a",
        1,
        topic,
        &[(0, 1, ACCEPT), (2, 3, RELEASE)],
    )
    .await?;
    assert_eq!(r.error_code, 0);
    assert_eq!(r.responses[0].partitions[0].error_code, 0);
    drop(c);

    broker.restart(&[]).await?;
    let mut c = broker.connect().await?;
    // The member is still known with its epoch (no UNKNOWN_MEMBER_ID, no new epoch).
    let a = heartbeat(&mut c, "member-a", 1).await?;
    assert_eq!(a.member_epoch, 1);
    let r: ShareFetchResponse = c
        .call(1, &share_fetch("member-a", 0, topic, &[], 0))
        .await?;
    // 0-1 stay accepted; 2-3 come back on their second delivery; 4-5 (acquired, never
    // acknowledged) are delivered again.
    let got = acquired(&r)?;
    let offsets: Vec<i64> = got.iter().flat_map(|(f, l, _)| *f..=*l).collect();
    assert_eq!(offsets, vec![2, 3, 4, 5], "{got:?}");
    assert_eq!(got[0], (2, 3, 2));

    // Deleting the (empty) group deletes its share state.
    let sessions_closed = share_fetch("member-a", -1, topic, &[], 0);
    let _: ShareFetchResponse = c.call(1, &sessions_closed).await?;
    let left = heartbeat(&mut c, "member-a", -1).await?;
    assert_eq!(left.member_epoch, -1);
    let state = broker.broker()?;
    assert_eq!(state.share_state.lock().keys_of("sg").count(), 1);
    let r: DeleteGroupsResponse = c
        .call(
            2,
            &DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s("sg"))]),
        )
        .await?;
    assert_eq!(r.results[0].error_code, 0);
    assert_eq!(state.share_state.lock().keys_of("sg").count(), 0);
    broker.shutdown().await;
    Ok(())
}
