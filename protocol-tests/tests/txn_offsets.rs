//! TxnOffsetCommit over the wire: pending offsets invisible to OffsetFetch (UNSTABLE_OFFSET_COMMIT
//! with require_stable), made committed or dropped by transaction markers, and surviving a restart
//! (committed stays, aborted stays gone, open stays pending). There is no wire API yet that writes
//! markers here, so the test ends transactions in-process the way the transaction coordinator
//! will: `Partition::write_txn_marker` on the group's `__consumer_offsets` partition, then
//! `GroupHandle::complete_txn`.

use anyhow::{Context, Result};
use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use protocol_tests::{create_topic, TestBroker};
use sluice::config::Value;
use sluice::record::ControlType;

const GROUP: &str = "txn-group";
/// These tests commit transactional offsets for made-up producers and write the markers by hand,
/// without the transaction coordinator, so its verification is off (as Kafka's
/// `transaction.partition.verification.enable=false`).
const NO_VERIFICATION: (&str, Value) = (
    "transaction.partition.verification.enable",
    Value::Bool(false),
);

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn txn_commit(
    group: &str,
    producer_id: i64,
    offsets: &[(&str, i32, i64)],
) -> TxnOffsetCommitRequest {
    let mut topics: Vec<TxnOffsetCommitRequestTopic> = Vec::new();
    for (topic, partition, offset) in offsets {
        let p = TxnOffsetCommitRequestPartition::default()
            .with_partition_index(*partition)
            .with_committed_offset(*offset)
            .with_committed_metadata(Some(s("txn")));
        match topics.iter_mut().find(|t| t.name.as_str() == *topic) {
            Some(t) => t.partitions.push(p),
            None => topics.push(
                TxnOffsetCommitRequestTopic::default()
                    .with_name(TopicName(s(topic)))
                    .with_partitions(vec![p]),
            ),
        }
    }
    TxnOffsetCommitRequest::default()
        .with_transactional_id(s("tx-1").into())
        .with_group_id(GroupId(s(group)))
        .with_producer_id(producer_id.into())
        .with_producer_epoch(0)
        .with_topics(topics)
}

/// (topic, partition, error) of every partition of a TxnOffsetCommit response.
fn codes(r: &TxnOffsetCommitResponse) -> Vec<(String, i32, i16)> {
    r.topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.to_string(), p.partition_index, p.error_code))
        })
        .collect()
}

/// OffsetFetch v7 of "orders" partitions 0-1: (offset, error) per partition.
async fn fetch_v7(c: &mut protocol_tests::Client, require_stable: bool) -> Result<Vec<(i64, i16)>> {
    let r = c
        .call(
            7,
            &OffsetFetchRequest::default()
                .with_group_id(GroupId(s(GROUP)))
                .with_require_stable(require_stable)
                .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                    .with_name(TopicName(s("orders")))
                    .with_partition_indexes(vec![0, 1])])),
        )
        .await?;
    assert_eq!(r.error_code, 0);
    Ok(r.topics[0]
        .partitions
        .iter()
        .map(|p| (p.committed_offset, p.error_code))
        .collect())
}

/// OffsetFetch v8 (groups array), all topics: (topic, partition, offset, error).
async fn fetch_all_v8(
    c: &mut protocol_tests::Client,
    require_stable: bool,
) -> Result<Vec<(String, i32, i64, i16)>> {
    let r = c
        .call(
            8,
            &OffsetFetchRequest::default()
                .with_require_stable(require_stable)
                .with_groups(vec![OffsetFetchRequestGroup::default()
                    .with_group_id(GroupId(s(GROUP)))
                    .with_topics(None)]),
        )
        .await?;
    let g = &r.groups[0];
    assert_eq!(g.error_code, 0);
    Ok(g.topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    t.name.to_string(),
                    p.partition_index,
                    p.committed_offset,
                    p.error_code,
                )
            })
        })
        .collect())
}

/// Ends a transaction as the transaction coordinator will: the marker goes into the group's
/// `__consumer_offsets` partition, then the group coordinator is told.
async fn end_txn(tb: &TestBroker, producer_id: i64, control: ControlType) -> Result<i64> {
    let broker = tb.broker()?;
    let topic = broker
        .replicas
        .topic("__consumer_offsets")
        .context("offsets topic exists")?;
    let index = sluice::group::records::partition_for(GROUP, topic.partitions.len() as i32);
    let now = sluice::broker::now_ms();
    let offset = topic.partitions[&index]
        .write_txn_marker(producer_id, 0, 0, control, true, now)
        .context("marker")?;
    broker
        .groups
        .complete_txn(index, producer_id, control)
        .await;
    Ok(offset)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn txn_offsets_stay_pending_until_the_marker_and_survive_a_restart() -> Result<()> {
    let mut tb = TestBroker::start_with(&[NO_VERIFICATION]).await?;
    let mut c = tb.connect().await?;
    create_topic(&mut c, "orders", 2, &[]).await?;

    // v0 and v3 both accepted (simple group, no member); unknown topics/partitions refused here.
    let r = c
        .call(0, &txn_commit(GROUP, 1000, &[("orders", 0, 42)]))
        .await?;
    assert_eq!(codes(&r), vec![("orders".into(), 0, 0)]);
    let r = c
        .call(
            3,
            &txn_commit(
                GROUP,
                1000,
                &[("orders", 1, 43), ("orders", 9, 1), ("missing", 0, 1)],
            ),
        )
        .await?;
    // Kafka 4.1.2 answers the same, refused partitions first, one entry per topic.
    assert_eq!(
        codes(&r),
        vec![
            ("orders".into(), 9, 3),
            ("orders".into(), 1, 0),
            ("missing".into(), 0, 3)
        ]
    );
    assert_eq!(r.topics.len(), 2);

    // Not visible; require_stable answers UNSTABLE_OFFSET_COMMIT per partition.
    assert_eq!(fetch_v7(&mut c, false).await?, vec![(-1, 0), (-1, 0)]);
    assert_eq!(fetch_v7(&mut c, true).await?, vec![(-1, 88), (-1, 88)]);

    // Commit: visible and stable.
    end_txn(&tb, 1000, ControlType::Commit).await?;
    assert_eq!(fetch_v7(&mut c, true).await?, vec![(42, 0), (43, 0)]);

    // A second producer's offsets are aborted: the committed ones stay.
    let r = c
        .call(5, &txn_commit(GROUP, 2000, &[("orders", 0, 100)]))
        .await?;
    assert_eq!(codes(&r), vec![("orders".into(), 0, 0)]);
    assert_eq!(
        fetch_all_v8(&mut c, true).await?,
        vec![("orders".into(), 0, -1, 88), ("orders".into(), 1, 43, 0)]
    );
    end_txn(&tb, 2000, ControlType::Abort).await?;
    assert_eq!(fetch_v7(&mut c, true).await?, vec![(42, 0), (43, 0)]);

    // A third transaction is still open when the broker restarts.
    let r = c
        .call(4, &txn_commit(GROUP, 3000, &[("orders", 1, 77)]))
        .await?;
    assert_eq!(codes(&r), vec![("orders".into(), 1, 0)]);

    tb.restart(&[NO_VERIFICATION]).await?;
    let mut c = tb.connect().await?;
    assert_eq!(fetch_v7(&mut c, false).await?, vec![(42, 0), (43, 0)]);
    assert_eq!(fetch_v7(&mut c, true).await?, vec![(42, 0), (-1, 88)]);
    end_txn(&tb, 3000, ControlType::Commit).await?;
    assert_eq!(fetch_v7(&mut c, true).await?, vec![(42, 0), (77, 0)]);

    // Once more from the log alone: every marker replays.
    tb.restart(&[NO_VERIFICATION]).await?;
    let mut c = tb.connect().await?;
    assert_eq!(fetch_v7(&mut c, true).await?, vec![(42, 0), (77, 0)]);
    tb.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_txn_offset_commits_get_kafkas_codes() -> Result<()> {
    let tb = TestBroker::start_with(&[
        ("group.initial.rebalance.delay.ms", Value::Int(0)),
        NO_VERIFICATION,
    ])
    .await?;
    let mut c = tb.connect().await?;
    create_topic(&mut c, "orders", 2, &[]).await?;

    // Unknown group with a generation: ILLEGAL_GENERATION.
    let req = txn_commit("no-such-group", 1, &[("orders", 0, 1)])
        .with_generation_id(4)
        .with_member_id(s("m"));
    let r = c.call(3, &req).await?;
    assert_eq!(codes(&r), vec![("orders".into(), 0, 22)]);
    // Unknown group without a generation: a simple group is created, whatever the member id.
    let req = txn_commit("simple-group", 1, &[("orders", 0, 1)]).with_member_id(s("m"));
    let r = c.call(3, &req).await?;
    assert_eq!(codes(&r), vec![("orders".into(), 0, 0)]);
    // Every version decodes and answers.
    for v in 0..=5 {
        let r = c
            .call(
                v,
                &txn_commit("versions", 10 + v as i64, &[("orders", 1, 5)]),
            )
            .await?;
        assert_eq!(
            codes(&r),
            vec![("orders".into(), 1, 0)],
            "TxnOffsetCommit v{v}"
        );
    }
    // Empty group id: INVALID_GROUP_ID.
    let r = c.call(3, &txn_commit("", 1, &[("orders", 0, 1)])).await?;
    assert_eq!(codes(&r), vec![("orders".into(), 0, 24)]);

    // A real member at generation 1: a wrong generation and an unknown member are refused.
    let join = |member: &str| {
        JoinGroupRequest::default()
            .with_group_id(GroupId(s("members")))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(20_000)
            .with_member_id(s(member))
            .with_protocol_type(s("consumer"))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(s("range"))
                .with_metadata(Bytes::from_static(
                    b"\x00\x00\x00\x00\x00\x01\x00\x06orders",
                ))])
    };
    let r = c.call(9, &join("")).await?;
    assert_eq!(r.error_code, 79);
    let member = r.member_id.to_string();
    let r = c.call(9, &join(&member)).await?;
    assert_eq!((r.error_code, r.generation_id), (0, 1));
    let r = c
        .call(
            5,
            &SyncGroupRequest::default()
                .with_group_id(GroupId(s("members")))
                .with_generation_id(1)
                .with_member_id(s(&member))
                .with_assignments(vec![SyncGroupRequestAssignment::default()
                    .with_member_id(s(&member))
                    .with_assignment(Bytes::from_static(b"a"))]),
        )
        .await?;
    assert_eq!(r.error_code, 0);
    let with = |member: &str, generation: i32| {
        txn_commit("members", 5, &[("orders", 0, 9), ("orders", 1, 9)])
            .with_member_id(s(member))
            .with_generation_id(generation)
    };
    let r = c.call(3, &with(&member, 2)).await?;
    assert_eq!(
        codes(&r),
        vec![("orders".into(), 0, 22), ("orders".into(), 1, 22)]
    );
    let r = c.call(3, &with("stranger", 1)).await?;
    assert_eq!(
        codes(&r),
        vec![("orders".into(), 0, 25), ("orders".into(), 1, 25)]
    );
    let r = c.call(3, &with(&member, 1)).await?;
    assert_eq!(
        codes(&r),
        vec![("orders".into(), 0, 0), ("orders".into(), 1, 0)]
    );

    // Metadata past offset.metadata.max.bytes fails its own partition only.
    let mut req = txn_commit("members", 5, &[("orders", 0, 9), ("orders", 1, 9)])
        .with_member_id(s(&member))
        .with_generation_id(1);
    req.topics[0].partitions[1].committed_metadata = Some(s(&"x".repeat(5000)));
    let r = c.call(3, &req).await?;
    assert_eq!(
        codes(&r),
        vec![("orders".into(), 0, 0), ("orders".into(), 1, 12)]
    );

    // OffsetFetch of a group with pending offsets, require_stable, v9 (groups array).
    let r = c
        .call(
            9,
            &OffsetFetchRequest::default()
                .with_require_stable(true)
                .with_groups(vec![OffsetFetchRequestGroup::default()
                    .with_group_id(GroupId(s("members")))
                    .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                        .with_name(TopicName(s("orders")))
                        .with_partition_indexes(vec![0, 1])]))]),
        )
        .await?;
    let errors: Vec<i16> = r.groups[0].topics[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect();
    assert_eq!(errors, vec![88, 88]);
    tb.shutdown().await;
    Ok(())
}
