//! KIP-848 consumer groups over the wire: ApiVersions advertises ConsumerGroupHeartbeat and
//! ConsumerGroupDescribe 0-1; two members on a 4-partition topic reconcile (revocation first, topic
//! ids from Metadata); ConsumerGroupDescribe and ListGroups v5 show the group as type "consumer";
//! OffsetCommit/OffsetFetch v9 check the member epoch; a member leaves with epoch -1.

use anyhow::{Context, Result};
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use protocol_tests::{create_topic, metadata, topic_name, Client, TestBroker, Uuid};

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn heartbeat(
    member: &str,
    epoch: i32,
    owned: Option<(Uuid, Vec<i32>)>,
) -> ConsumerGroupHeartbeatRequest {
    let mut r = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("cg")))
        .with_member_id(s(member))
        .with_member_epoch(epoch)
        .with_rebalance_timeout_ms(if epoch == 0 { 30_000 } else { -1 });
    if epoch == 0 {
        r.subscribed_topic_names = Some(vec![topic_name("t")]);
        r.topic_partitions = Some(Vec::new());
    }
    if let Some((id, ps)) = owned {
        r.topic_partitions = Some(vec![TopicPartitions::default()
            .with_topic_id(id)
            .with_partitions(ps)]);
    }
    r
}

fn assigned(r: &ConsumerGroupHeartbeatResponse) -> Option<Vec<(Uuid, Vec<i32>)>> {
    r.assignment.as_ref().map(|a| {
        a.topic_partitions
            .iter()
            .map(|t| (t.topic_id, t.partitions.clone()))
            .collect()
    })
}

async fn hb(
    c: &mut Client,
    req: ConsumerGroupHeartbeatRequest,
) -> Result<ConsumerGroupHeartbeatResponse> {
    let r: ConsumerGroupHeartbeatResponse = c.call(1, &req).await?;
    anyhow::ensure!(
        r.error_code == 0,
        "heartbeat error {} {:?}",
        r.error_code,
        r.error_message
    );
    Ok(r)
}

#[tokio::test]
async fn two_members_reconcile_and_commit_with_member_epochs() -> Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    let versions: ApiVersionsResponse = c.call(3, &protocol_tests::api_versions_request()).await?;
    for key in [
        ApiKey::ConsumerGroupHeartbeat,
        ApiKey::ConsumerGroupDescribe,
    ] {
        let k = versions
            .api_keys
            .iter()
            .find(|k| k.api_key == key as i16)
            .context("advertised")?;
        assert_eq!((k.min_version, k.max_version), (0, 1), "{key:?}");
    }
    create_topic(&mut c, "t", 4, &[]).await?;
    let md = metadata(&mut c, "t").await?;
    let topic_id = md.topics[0].topic_id;

    // "a" joins alone and gets all 4 partitions (by topic id) at epoch 1.
    let r = hb(&mut c, heartbeat("a", 0, None)).await?;
    assert_eq!(r.member_epoch, 1);
    assert_eq!(r.heartbeat_interval_ms, 5000);
    assert_eq!(assigned(&r), Some(vec![(topic_id, vec![0, 1, 2, 3])]));

    // "b" joins at epoch 2 but gets nothing "a" still owns.
    let r = hb(&mut c, heartbeat("b", 0, None)).await?;
    assert_eq!(r.member_epoch, 2);
    assert_eq!(assigned(&r), Some(vec![]));

    // "a" must revoke two partitions first (its epoch stays 1), then acks and moves to 2.
    let r = hb(
        &mut c,
        heartbeat("a", 1, Some((topic_id, vec![0, 1, 2, 3]))),
    )
    .await?;
    assert_eq!(r.member_epoch, 1);
    let kept = assigned(&r).context("a new assignment")?;
    assert_eq!(kept[0].1.len(), 2);
    let r = hb(&mut c, heartbeat("a", 1, Some(kept[0].clone()))).await?;
    assert_eq!(r.member_epoch, 2);

    // Now "b" gets the released partitions.
    let r = hb(&mut c, heartbeat("b", 2, None)).await?;
    let got = assigned(&r).context("b's assignment")?;
    let mut all: Vec<i32> = got[0].1.iter().chain(kept[0].1.iter()).copied().collect();
    all.sort();
    assert_eq!(all, vec![0, 1, 2, 3]);

    let d: ConsumerGroupDescribeResponse = c
        .call(
            1,
            &ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("cg"))]),
        )
        .await?;
    let g = &d.groups[0];
    assert_eq!((g.error_code, g.group_state.as_str()), (0, "Stable"));
    assert_eq!(
        (g.group_epoch, g.assignment_epoch, g.members.len()),
        (2, 2, 2)
    );
    assert_eq!(g.assignor_name.as_str(), "uniform");

    let l: ListGroupsResponse = c.call(5, &ListGroupsRequest::default()).await?;
    let listed = l
        .groups
        .iter()
        .find(|g| g.group_id.as_str() == "cg")
        .context("listed")?;
    assert_eq!(listed.group_type.as_str(), "consumer");
    assert_eq!(listed.protocol_type.as_str(), "consumer");

    // OffsetCommit v9: a stale member epoch is refused, the current one accepted.
    let commit = |epoch: i32| {
        OffsetCommitRequest::default()
            .with_group_id(GroupId(s("cg")))
            .with_member_id(s("b"))
            .with_generation_id_or_member_epoch(epoch)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(topic_name("t"))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(got[0].1[0])
                    .with_committed_offset(7)])])
    };
    let r: OffsetCommitResponse = c.call(9, &commit(1)).await?;
    assert_eq!(
        r.topics[0].partitions[0].error_code, 113,
        "STALE_MEMBER_EPOCH"
    );
    let r: OffsetCommitResponse = c.call(9, &commit(2)).await?;
    assert_eq!(r.topics[0].partitions[0].error_code, 0);

    let fetch = |member: Option<&str>, epoch: i32| {
        OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(s("cg")))
            .with_member_id(member.map(s))
            .with_member_epoch(epoch)
            .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                .with_name(topic_name("t"))
                .with_partition_indexes(vec![got[0].1[0]])]))])
    };
    let r: OffsetFetchResponse = c.call(9, &fetch(Some("b"), 2)).await?;
    assert_eq!(r.groups[0].error_code, 0);
    assert_eq!(r.groups[0].topics[0].partitions[0].committed_offset, 7);
    let r: OffsetFetchResponse = c.call(9, &fetch(Some("b"), 1)).await?;
    assert_eq!(r.groups[0].error_code, 113);
    let r: OffsetFetchResponse = c.call(9, &fetch(None, -1)).await?;
    assert_eq!(r.groups[0].error_code, 0, "admin fetch");

    // "a" leaves; a heartbeat at an unknown epoch is fenced.
    let r = hb(&mut c, heartbeat("a", -1, None)).await?;
    assert_eq!(r.member_epoch, -1);
    let r: ConsumerGroupHeartbeatResponse = c.call(1, &heartbeat("b", 9, None)).await?;
    assert_eq!(r.error_code, 110, "FENCED_MEMBER_EPOCH");
    broker.shutdown().await;
    Ok(())
}
