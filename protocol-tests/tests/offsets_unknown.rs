//! Offset requests naming partitions the broker does not have: OffsetCommit (every advertised
//! version, as the admin client's AlterConsumerGroupOffsets sends it too) and OffsetDelete answer
//! UNKNOWN_TOPIC_OR_PARTITION for a missing topic and for a partition index past the topic's
//! count, commit the rest, and never store an offset for the missing ones; an OffsetCommit with
//! only missing partitions is answered before any group check. Checked against Kafka 4.1.2:
//! set `SLUICE_REFERENCE_BOOTSTRAP=host:port` (a broker from `scripts/kafka-reference start`) and
//! the same scenario also runs against it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use protocol_tests::{create_topic, topic_name, Client, TestBroker};
use sluice::config::Value;

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn commit(group: &str, generation: i32, topics: &[(&str, &[i32])]) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(s(""))
        .with_retention_time_ms(-1)
        .with_topics(
            topics
                .iter()
                .map(|(name, ps)| {
                    OffsetCommitRequestTopic::default()
                        .with_name(topic_name(name))
                        .with_partitions(
                            ps.iter()
                                .map(|p| {
                                    OffsetCommitRequestPartition::default()
                                        .with_partition_index(*p)
                                        .with_committed_offset(100 + *p as i64)
                                        .with_committed_leader_epoch(-1)
                                        .with_committed_metadata(Some(s("")))
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}

/// (topic, partition) -> error code of an OffsetCommit answer.
fn commit_codes(r: &OffsetCommitResponse) -> BTreeMap<(String, i32), i16> {
    r.topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| ((t.name.to_string(), p.partition_index), p.error_code))
        })
        .collect()
}

fn codes(entries: &[(&str, i32, i16)]) -> BTreeMap<(String, i32), i16> {
    entries
        .iter()
        .map(|(t, p, c)| ((t.to_string(), *p), *c))
        .collect()
}

/// Waits until the broker coordinates `group` (Kafka creates `__consumer_offsets` first).
async fn find_coordinator(c: &mut Client, group: &str) -> Result<()> {
    for _ in 0..100 {
        let r = c
            .call(3, &FindCoordinatorRequest::default().with_key(s(group)))
            .await?;
        if r.error_code == 0 {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("no coordinator for {group}")
}

/// Every committed offset of `group` (OffsetFetch v8, all topics): (topic, partition) -> offset.
async fn committed(c: &mut Client, group: &str) -> Result<BTreeMap<(String, i32), i64>> {
    let r = c
        .call(
            8,
            &OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(s(group)))
                .with_topics(None)]),
        )
        .await?;
    let g = r.groups.first().context("one group")?;
    ensure!(g.error_code == 0, "OffsetFetch error {}", g.error_code);
    Ok(g.topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .filter(|p| p.committed_offset >= 0)
                .map(move |p| ((t.name.to_string(), p.partition_index), p.committed_offset))
        })
        .collect())
}

async fn offset_fetch_one(c: &mut Client, group: &str, topic: &str, p: i32) -> Result<i64> {
    let r = c
        .call(
            8,
            &OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(s(group)))
                .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                    .with_name(topic_name(topic))
                    .with_partition_indexes(vec![p])]))]),
        )
        .await?;
    Ok(r.groups[0].topics[0].partitions[0].committed_offset)
}

fn offset_delete(group: &str, topics: &[(&str, &[i32])]) -> OffsetDeleteRequest {
    OffsetDeleteRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(
            topics
                .iter()
                .map(|(name, ps)| {
                    OffsetDeleteRequestTopic::default()
                        .with_name(topic_name(name))
                        .with_partitions(
                            ps.iter()
                                .map(|p| {
                                    OffsetDeleteRequestPartition::default().with_partition_index(*p)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}

/// The scenario, against any broker at `addr`; `tag` keeps names unique per run.
async fn scenario(addr: SocketAddr, tag: &str) -> Result<()> {
    let mut c = Client::connect(addr).await?;
    let known = format!("known-{tag}");
    let missing = format!("missing-{tag}");
    create_topic(&mut c, &known, 2, &[]).await?;
    let group = format!("simple-{tag}");
    find_coordinator(&mut c, &group).await?;

    // Every advertised OffsetCommit version: the missing topic and partition 9 of a 2-partition
    // topic are refused per partition, the existing partitions are committed.
    for v in 2..=9 {
        let r = c
            .call(
                v,
                &commit(
                    &group,
                    -1,
                    &[(&missing, &[0]), (&known, &[1, 9, 0]), (&missing, &[])],
                ),
            )
            .await?;
        let want = codes(&[
            (&missing, 0, UNKNOWN_TOPIC_OR_PARTITION),
            (&known, 0, 0),
            (&known, 1, 0),
            (&known, 9, UNKNOWN_TOPIC_OR_PARTITION),
        ]);
        assert_eq!(commit_codes(&r), want, "OffsetCommit v{v}");
    }
    let stored = committed(&mut c, &group).await?;
    assert_eq!(
        stored,
        [((known.clone(), 0), 100), ((known.clone(), 1), 101)]
            .into_iter()
            .collect(),
        "only the existing partitions were committed"
    );
    assert_eq!(offset_fetch_one(&mut c, &group, &missing, 0).await?, -1);

    // Only missing partitions: refused before the group is looked at (a generation that would
    // be ILLEGAL_GENERATION for an unknown group does not matter).
    let lone = format!("lone-{tag}");
    let r = c
        .call(8, &commit(&lone, 5, &[(&missing, &[0, 1]), (&known, &[2])]))
        .await?;
    assert_eq!(
        commit_codes(&r),
        codes(&[
            (&missing, 0, UNKNOWN_TOPIC_OR_PARTITION),
            (&missing, 1, UNKNOWN_TOPIC_OR_PARTITION),
            (&known, 2, UNKNOWN_TOPIC_OR_PARTITION),
        ])
    );
    // Mixed with an existing partition, the group check applies to that one only.
    let r = c
        .call(8, &commit(&lone, 5, &[(&missing, &[0]), (&known, &[0])]))
        .await?;
    let got = commit_codes(&r);
    assert_eq!(got[&(missing.clone(), 0)], UNKNOWN_TOPIC_OR_PARTITION);
    assert_ne!(got[&(known.clone(), 0)], 0, "ILLEGAL_GENERATION or similar");

    // OffsetDelete: per partition too; the existing one loses its offset.
    let r = c
        .call(
            0,
            &offset_delete(&group, &[(&missing, &[0]), (&known, &[0, 7])]),
        )
        .await?;
    assert_eq!(r.error_code, 0);
    let got: BTreeMap<(String, i32), i16> = r
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| ((t.name.to_string(), p.partition_index), p.error_code))
        })
        .collect();
    assert_eq!(
        got,
        codes(&[
            (&missing, 0, UNKNOWN_TOPIC_OR_PARTITION),
            (&known, 0, 0),
            (&known, 7, UNKNOWN_TOPIC_OR_PARTITION),
        ])
    );
    assert_eq!(
        committed(&mut c, &group).await?,
        [((known.clone(), 1), 101)].into_iter().collect()
    );
    // A group-level error is the whole answer.
    let r = c
        .call(
            0,
            &offset_delete(&format!("nobody-{tag}"), &[(&missing, &[0])]),
        )
        .await?;
    assert_eq!(
        (r.error_code, r.topics.len()),
        (69, 0),
        "GROUP_ID_NOT_FOUND"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_requests_refuse_partitions_that_do_not_exist() -> Result<()> {
    let broker = TestBroker::start_with(&[("offsets.topic.num.partitions", Value::Int(5))]).await?;
    scenario(broker.addr, "s").await?;
    broker.shutdown().await;
    if let Ok(reference) = std::env::var("SLUICE_REFERENCE_BOOTSTRAP") {
        let tag = format!(
            "{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_millis()
        );
        scenario(reference.parse()?, &tag)
            .await
            .context("against the reference Kafka")?;
    }
    Ok(())
}
