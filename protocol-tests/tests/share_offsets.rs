//! The share-group offsets admin APIs over the wire (DescribeShareGroupOffsets,
//! AlterShareGroupOffsets, DeleteShareGroupOffsets v0): ApiVersions advertises them with
//! `share.version` 1; a share consumer's acknowledgements move the start offset describe
//! reports; alter and delete are refused while the group has a member; an alter of the empty
//! group sets the start offset, the next ShareFetch delivers from there, and the altered state
//! survives a restart; a delete removes the topic's state (describe -1, also after a restart).

use anyhow::{ensure, Context, Result};
use kafka_protocol::messages::alter_share_group_offsets_request as asq;
use kafka_protocol::messages::delete_share_group_offsets_request as dsq;
use kafka_protocol::messages::describe_share_group_offsets_request as dsoq;
use kafka_protocol::messages::incremental_alter_configs_request as iac;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use protocol_tests::{
    api_versions_request, batch, create_topic, metadata, produce, share, topic_name, Client,
    TestBroker, Uuid,
};

const NON_EMPTY_GROUP: i16 = 68;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

async fn heartbeat(c: &mut Client, member: &str, epoch: i32) -> Result<i32> {
    Ok(share::share_heartbeat(c, member, epoch).await?.member_epoch)
}

/// One ShareFetch of partition 0; the acquired ranges (first, last, delivery count).
async fn fetch(
    c: &mut Client,
    member: &str,
    epoch: i32,
    topic: Uuid,
) -> Result<Vec<(i64, i64, i16)>> {
    let req = share::share_fetch_request(member, epoch, topic, &[], share::Limits::waiting(0));
    let r: ShareFetchResponse = c.call(1, &req).await?;
    ensure!(r.error_code == 0, "share fetch: {}", r.error_code);
    Ok(r.responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .flat_map(|p| p.acquired_records.iter())
        .map(|a| (a.first_offset, a.last_offset, a.delivery_count))
        .collect())
}

async fn accept(
    c: &mut Client,
    member: &str,
    epoch: i32,
    topic: Uuid,
    first: i64,
    last: i64,
) -> Result<()> {
    let req = share::share_acknowledge_request(member, epoch, topic, &[(first, last, 1)]);
    let r: ShareAcknowledgeResponse = c.call(1, &req).await?;
    ensure!(r.error_code == 0, "acknowledge: {}", r.error_code);
    ensure!(
        r.responses[0].partitions[0].error_code == 0,
        "acknowledge partition error"
    );
    Ok(())
}

/// A member leaves: its share session closes, then it leaves the group.
async fn leave(c: &mut Client, member: &str, topic: Uuid) -> Result<()> {
    fetch(c, member, -1, topic).await?;
    ensure!(heartbeat(c, member, -1).await? == -1, "left");
    Ok(())
}

/// DescribeShareGroupOffsets of group "sg": per (topic, partition) the start offset and leader
/// epoch; `named` false asks for every initialized partition.
async fn describe(c: &mut Client, named: bool) -> Result<Vec<(String, i32, i64)>> {
    let topics = named.then(|| {
        vec![dsoq::DescribeShareGroupOffsetsRequestTopic::default()
            .with_topic_name(topic_name("t"))
            .with_partitions(vec![0])]
    });
    let req = DescribeShareGroupOffsetsRequest::default().with_groups(vec![
        dsoq::DescribeShareGroupOffsetsRequestGroup::default()
            .with_group_id(GroupId(s("sg")))
            .with_topics(topics),
    ]);
    let r: DescribeShareGroupOffsetsResponse = c.call(0, &req).await?;
    let g = r.groups.first().context("no group")?;
    ensure!(
        g.error_code == 0,
        "describe: {} {:?}",
        g.error_code,
        g.error_message
    );
    Ok(g.topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.topic_name.to_string(), p.partition_index, p.start_offset))
        })
        .collect())
}

async fn alter(
    c: &mut Client,
    partitions: &[(i32, i64)],
) -> Result<AlterShareGroupOffsetsResponse> {
    let req = AlterShareGroupOffsetsRequest::default()
        .with_group_id(GroupId(s("sg")))
        .with_topics(vec![asq::AlterShareGroupOffsetsRequestTopic::default()
            .with_topic_name(topic_name("t"))
            .with_partitions(
                partitions
                    .iter()
                    .map(|(p, o)| {
                        asq::AlterShareGroupOffsetsRequestPartition::default()
                            .with_partition_index(*p)
                            .with_start_offset(*o)
                    })
                    .collect(),
            )]);
    c.call(0, &req).await
}

async fn delete(c: &mut Client) -> Result<DeleteShareGroupOffsetsResponse> {
    let req = DeleteShareGroupOffsetsRequest::default()
        .with_group_id(GroupId(s("sg")))
        .with_topics(vec![
            dsq::DeleteShareGroupOffsetsRequestTopic::default().with_topic_name(topic_name("t"))
        ]);
    c.call(0, &req).await
}

#[tokio::test]
async fn share_offsets_described_altered_and_deleted_across_restarts() -> Result<()> {
    let mut broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    let versions: ApiVersionsResponse = c.call(3, &api_versions_request()).await?;
    for key in [90, 91, 92] {
        let k = versions.api_keys.iter().find(|k| k.api_key == key);
        assert_eq!(
            k.map(|k| (k.min_version, k.max_version)),
            Some((0, 0)),
            "api {key}"
        );
    }
    create_topic(&mut c, "t", 1, &[]).await?;
    let topic = metadata(&mut c, "t").await?.topics[0].topic_id;
    for pair in [[b"a", b"b"], [b"c", b"d"], [b"e", b"f"]] {
        produce(&mut c, 9, "t", 0, batch(&[pair[0], pair[1]])).await?;
    }
    let config = IncrementalAlterConfigsRequest::default().with_resources(vec![
        iac::AlterConfigsResource::default()
            .with_resource_type(32)
            .with_resource_name(s("sg"))
            .with_configs(vec![iac::AlterableConfig::default()
                .with_name(s("share.auto.offset.reset"))
                .with_config_operation(0)
                .with_value(Some(s("earliest")))]),
    ]);
    let r: IncrementalAlterConfigsResponse = c.call(1, &config).await?;
    assert_eq!(r.responses[0].error_code, 0);
    // Nothing consumed yet: no state, start offset -1.
    assert_eq!(describe(&mut c, true).await?, vec![("t".into(), 0, -1)]);

    assert_eq!(heartbeat(&mut c, "m1", 0).await?, 1);
    assert_eq!(fetch(&mut c, "m1", 0, topic).await?, vec![(0, 5, 1)]);
    accept(&mut c, "m1", 1, topic, 0, 1).await?;
    assert_eq!(describe(&mut c, true).await?, vec![("t".into(), 0, 2)]);
    assert_eq!(describe(&mut c, false).await?, vec![("t".into(), 0, 2)]);

    // A member holds the group: alter and delete are refused, nothing changes.
    assert_eq!(alter(&mut c, &[(0, 4)]).await?.error_code, NON_EMPTY_GROUP);
    assert_eq!(delete(&mut c).await?.error_code, NON_EMPTY_GROUP);
    assert_eq!(describe(&mut c, true).await?, vec![("t".into(), 0, 2)]);

    leave(&mut c, "m1", topic).await?;
    let r = alter(&mut c, &[(0, 4), (3, 0)]).await?;
    assert_eq!(r.error_code, 0);
    let codes: Vec<(i32, i16)> = r.responses[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.error_code))
        .collect();
    assert_eq!(codes, vec![(0, 0), (3, UNKNOWN_TOPIC_OR_PARTITION)]);
    assert_eq!(describe(&mut c, true).await?, vec![("t".into(), 0, 4)]);
    drop(c);

    broker.restart(&[]).await?;
    let mut c = broker.connect().await?;
    assert_eq!(describe(&mut c, true).await?, vec![("t".into(), 0, 4)]);
    // The next consumer starts at the altered offset: 0-3 are not delivered again.
    assert_eq!(heartbeat(&mut c, "m2", 0).await?, 3);
    assert_eq!(fetch(&mut c, "m2", 0, topic).await?, vec![(4, 5, 1)]);
    leave(&mut c, "m2", topic).await?;

    let r = delete(&mut c).await?;
    assert_eq!(r.error_code, 0);
    assert_eq!(r.responses[0].error_code, 0);
    assert_eq!(r.responses[0].topic_id, topic);
    assert_eq!(describe(&mut c, true).await?, vec![("t".into(), 0, -1)]);
    assert_eq!(describe(&mut c, false).await?, vec![]);
    drop(c);

    broker.restart(&[]).await?;
    let mut c = broker.connect().await?;
    assert_eq!(describe(&mut c, true).await?, vec![("t".into(), 0, -1)]);
    assert_eq!(describe(&mut c, false).await?, vec![]);
    broker.shutdown().await;
    Ok(())
}
