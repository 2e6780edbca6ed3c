//! The group and transaction coordinators follow partition leadership in the metadata image.
//!
//! A broker's image is made to name another broker (id 2) as the leader of some internal-topic
//! partitions, by committing RegisterBroker/PartitionChange records into its metadata log as the
//! controller would. Then:
//! - every group and transaction API about a key on a shard led by 2 answers NOT_COORDINATOR, on
//!   an offline shard COORDINATOR_NOT_AVAILABLE, each where Kafka puts it, and the List APIs
//!   show only the local shards;
//! - with a second real broker as that id 2, a transaction committed on broker 1 over a
//!   partition led by 2 gets its marker written there with WriteTxnMarkers (read_committed on
//!   broker 2 sees the data), and only then does broker 1 complete the transaction.

use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic,
};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest, DeleteGroupsRequest, DescribeGroupsRequest,
    DescribeTransactionsRequest, EndTxnRequest, FetchRequest, FindCoordinatorRequest, GroupId,
    HeartbeatRequest, InitProducerIdRequest, JoinGroupRequest, LeaveGroupRequest,
    ListGroupsRequest, ListTransactionsRequest, OffsetCommitRequest, OffsetDeleteRequest,
    OffsetFetchRequest, ProducerId, SyncGroupRequest, TransactionalId, TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::StrBytes;
use protocol_tests::{
    create_topic, fetch_request, only_partition, produce_request, topic_name, Client, TestBroker,
    Uuid,
};
use sluice::config::Value;
use sluice::metadata::{BrokerEndpoint, MetadataRecord, PartitionChange, RegisterBroker};

#[global_allocator]
static ALLOC: sluice::alloc_guard::GuardedAllocator = sluice::alloc_guard::GuardedAllocator;

const NOT_COORDINATOR: i16 = 16;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const OFFSETS: &str = "__consumer_offsets";
const TXNS: &str = "__transaction_state";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn gid(v: &str) -> GroupId {
    GroupId(s(v))
}

fn tid(v: &str) -> TransactionalId {
    TransactionalId(s(v))
}

/// A key whose shard is partition `p` of 3.
fn key_on(prefix: &str, p: i32) -> String {
    (0..)
        .map(|i| format!("{prefix}{i}"))
        .find(|k| sluice::group::records::partition_for(k, 3) == p)
        .unwrap_or_default()
}

async fn start(extra: &[(&str, Value)]) -> anyhow::Result<TestBroker> {
    let mut entries = vec![
        ("transaction.state.log.num.partitions", Value::Int(3)),
        ("offsets.topic.num.partitions", Value::Int(3)),
        ("sluice.feature.transaction.version", Value::Int(0)),
    ];
    entries.extend(extra.iter().cloned());
    TestBroker::start_with(&entries).await
}

/// Broker 2 registered in `b`'s image at `port`, as the controller would record it.
fn register_broker_2(port: u16) -> MetadataRecord {
    MetadataRecord::RegisterBroker(RegisterBroker {
        broker_id: 2,
        incarnation_id: Uuid::from_u128(2),
        broker_epoch: 1,
        endpoints: vec![BrokerEndpoint {
            name: "PLAINTEXT".into(),
            host: "127.0.0.1".into(),
            port,
            security_protocol: 0,
        }],
        features: vec![],
        rack: None,
        fenced: false,
        in_controlled_shutdown: false,
    })
}

/// `topic`-`p` led by `leader` from now on.
fn lead(b: &TestBroker, topic: &str, p: i32, leader: i32) -> anyhow::Result<MetadataRecord> {
    let broker = b.broker()?;
    let id = broker
        .image()
        .topic(topic)
        .with_context(|| format!("{topic} exists"))?
        .id;
    Ok(MetadataRecord::PartitionChange(PartitionChange {
        partition_id: p,
        topic_id: id,
        isr: Some(vec![leader.max(1)]),
        leader,
        replicas: None,
        removing_replicas: None,
        adding_replicas: None,
        elr: None,
        last_known_elr: None,
    }))
}

fn commit_metadata(b: &TestBroker, records: Vec<MetadataRecord>) -> anyhow::Result<()> {
    b.broker()?
        .metadata
        .commit::<()>(records, |_, _| Ok(()))
        .map_err(|_| anyhow::anyhow!("metadata commit failed"))?;
    Ok(())
}

/// Creates both internal topics (FindCoordinator does, as in Kafka).
async fn find_coordinators(c: &mut Client, group: &str, txn: &str) -> anyhow::Result<()> {
    for (key, key_type) in [(group, 0), (txn, 1)] {
        let r = c
            .call(
                3,
                &FindCoordinatorRequest::default()
                    .with_key(s(key))
                    .with_key_type(key_type),
            )
            .await?;
        anyhow::ensure!(r.error_code == 0, "FindCoordinator {key}: {}", r.error_code);
    }
    Ok(())
}

async fn commit_offset(c: &mut Client, group: &str) -> anyhow::Result<Vec<i16>> {
    let r = c
        .call(
            8,
            &OffsetCommitRequest::default()
                .with_group_id(gid(group))
                .with_generation_id_or_member_epoch(-1)
                .with_member_id(s(""))
                .with_topics(vec![OffsetCommitRequestTopic::default()
                    .with_name(topic_name("t"))
                    .with_partitions(vec![
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(1),
                        // Unknown: refused before the coordinator check, as Kafka.
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(9)
                            .with_committed_offset(1),
                    ])]),
        )
        .await?;
    Ok(r.topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect())
}

async fn init_producer(c: &mut Client, id: &str) -> anyhow::Result<(i16, i64, i16)> {
    let r = c
        .call(
            4,
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(tid(id)))
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        )
        .await?;
    Ok((r.error_code, r.producer_id.0, r.producer_epoch))
}

async fn add_partition(c: &mut Client, id: &str, (pid, epoch): (i64, i16)) -> anyhow::Result<i16> {
    let r = c
        .call(
            3,
            &AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(tid(id))
                .with_v3_and_below_producer_id(ProducerId(pid))
                .with_v3_and_below_producer_epoch(epoch)
                .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                    .with_name(topic_name("t"))
                    .with_partitions(vec![0])]),
        )
        .await?;
    r.results_by_topic_v3_and_below
        .first()
        .and_then(|t| t.results_by_partition.first())
        .map(|p| p.partition_error_code)
        .context("one partition result")
}

async fn end_txn(c: &mut Client, id: &str, (pid, epoch): (i64, i16)) -> anyhow::Result<i16> {
    let r = c
        .call(
            3,
            &EndTxnRequest::default()
                .with_transactional_id(tid(id))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_committed(true),
        )
        .await?;
    Ok(r.error_code)
}

async fn txn_state(c: &mut Client, id: &str) -> anyhow::Result<(i16, String)> {
    let r = c
        .call(
            0,
            &DescribeTransactionsRequest::default().with_transactional_ids(vec![tid(id)]),
        )
        .await?;
    let t = r.transaction_states.first().context("one state")?;
    Ok((t.error_code, t.transaction_state.to_string()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apis_refuse_keys_whose_shard_is_led_elsewhere() -> anyhow::Result<()> {
    let b = start(&[]).await?;
    let mut c = b.connect().await?;
    // Shard 0 stays here, 1 moves to broker 2, 2 goes offline.
    let (g_here, g_there, g_off) = (key_on("g", 0), key_on("g", 1), key_on("g", 2));
    let (t_here, t_there, t_off) = (key_on("x", 0), key_on("x", 1), key_on("x", 2));
    find_coordinators(&mut c, &g_here, &t_here).await?;
    create_topic(&mut c, "t", 1, &[]).await?;
    // Groups and transactions on every shard while this broker still leads them all.
    for g in [&g_here, &g_there, &g_off] {
        assert_eq!(commit_offset(&mut c, g).await?, vec![3, 0]);
    }
    for t in [&t_here, &t_there, &t_off] {
        assert_eq!(init_producer(&mut c, t).await?.0, 0);
    }
    let port = b.addr.port();
    commit_metadata(
        &b,
        vec![
            register_broker_2(port),
            lead(&b, OFFSETS, 1, 2)?,
            lead(&b, OFFSETS, 2, -1)?,
            lead(&b, TXNS, 1, 2)?,
            lead(&b, TXNS, 2, -1)?,
        ],
    )?;
    // A reload replays only the shards led here.
    let broker = b.broker()?;
    let groups = sluice::group::driver::load(
        &broker,
        sluice::group::GroupConfig::from_config(&broker.config),
    );
    let loaded: Vec<_> = groups.groups.keys().cloned().collect();
    assert_eq!(loaded, vec![g_here.clone()]);
    let txns =
        sluice::txn::driver::load(&broker, sluice::txn::TxnConfig::from_config(&broker.config));
    let loaded: Vec<_> = txns.txns.keys().cloned().collect();
    assert_eq!(loaded, vec![t_here.clone()]);

    // Classic group APIs: the top-level code.
    for (g, code) in [
        (&g_there, NOT_COORDINATOR),
        (&g_off, COORDINATOR_NOT_AVAILABLE),
    ] {
        let join = JoinGroupRequest::default()
            .with_group_id(gid(g))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_member_id(s(""))
            .with_protocol_type(s("consumer"));
        let r = c.call(5, &join).await?;
        assert_eq!((r.error_code, r.protocol_name.as_deref()), (code, Some("")));
        let sync = SyncGroupRequest::default().with_group_id(gid(g));
        assert_eq!(c.call(3, &sync).await?.error_code, code);
        let hb = HeartbeatRequest::default().with_group_id(gid(g));
        assert_eq!(c.call(4, &hb).await?.error_code, code);
        let leave = LeaveGroupRequest::default().with_group_id(gid(g));
        assert_eq!(c.call(5, &leave).await?.error_code, code);
        let del = OffsetDeleteRequest::default().with_group_id(gid(g));
        assert_eq!(c.call(0, &del).await?.error_code, code);
        let cg = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(gid(g))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(10_000)
            .with_subscribed_topic_names(Some(vec![topic_name("t")]));
        assert_eq!(c.call(0, &cg).await?.error_code, code);
        // OffsetCommit: per partition, the unknown partition keeps its own error.
        assert_eq!(commit_offset(&mut c, g).await?, vec![3, code]);
    }
    // Per-group answers, in request order, the local group still served.
    let ids = vec![gid(&g_there), gid(&g_here), gid(&g_off)];
    let r = c
        .call(
            5,
            &DescribeGroupsRequest::default().with_groups(ids.clone()),
        )
        .await?;
    let codes: Vec<_> = r
        .groups
        .iter()
        .map(|g| (g.group_id.to_string(), g.error_code))
        .collect();
    assert_eq!(
        codes,
        vec![
            (g_there.clone(), NOT_COORDINATOR),
            (g_here.clone(), 0),
            (g_off.clone(), COORDINATOR_NOT_AVAILABLE)
        ]
    );
    let r = c
        .call(
            0,
            &ConsumerGroupDescribeRequest::default().with_group_ids(ids.clone()),
        )
        .await?;
    let codes: Vec<_> = r.groups.iter().map(|g| g.error_code).collect();
    // The local one is a classic group: GROUP_ID_NOT_FOUND (69), as Kafka.
    assert_eq!(codes, vec![NOT_COORDINATOR, 69, COORDINATOR_NOT_AVAILABLE]);
    let fetch = OffsetFetchRequest::default().with_groups(
        ids.iter()
            .map(|g| {
                OffsetFetchRequestGroup::default()
                    .with_group_id(g.clone())
                    .with_topics(None)
            })
            .collect(),
    );
    let r = c.call(8, &fetch).await?;
    let codes: Vec<_> = r.groups.iter().map(|g| g.error_code).collect();
    assert_eq!(codes, vec![NOT_COORDINATOR, 0, COORDINATOR_NOT_AVAILABLE]);
    assert_eq!(r.groups[1].topics.len(), 1, "the local group's offsets");
    let old = OffsetFetchRequest::default().with_group_id(gid(&g_there));
    assert_eq!(c.call(7, &old).await?.error_code, NOT_COORDINATOR);
    // v1 has no group-level error: each requested partition carries it.
    let v1 = old.with_topics(Some(vec![OffsetFetchRequestTopic::default()
        .with_name(topic_name("t"))
        .with_partition_indexes(vec![0])]));
    let r = c.call(1, &v1).await?;
    let codes: Vec<_> = r
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (p.partition_index, p.error_code))
        })
        .collect();
    assert_eq!(codes, vec![(0, NOT_COORDINATOR)]);
    let r = c
        .call(2, &DeleteGroupsRequest::default().with_groups_names(ids))
        .await?;
    let codes: Vec<_> = r.results.iter().map(|g| g.error_code).collect();
    assert_eq!(codes, vec![NOT_COORDINATOR, 0, COORDINATOR_NOT_AVAILABLE]);
    // ListGroups: only the local shard's groups (g_here was just deleted: recreate it).
    assert_eq!(commit_offset(&mut c, &g_here).await?, vec![3, 0]);
    let r = c.call(4, &ListGroupsRequest::default()).await?;
    let listed: Vec<_> = r.groups.iter().map(|g| g.group_id.to_string()).collect();
    assert_eq!(listed, vec![g_here.clone()]);
    // FindCoordinator names broker 2 for the moved shard.
    let r = c
        .call(3, &FindCoordinatorRequest::default().with_key(s(&g_there)))
        .await?;
    assert_eq!((r.error_code, r.node_id.0), (0, 2));

    // Transaction APIs.
    for (t, code) in [
        (&t_there, NOT_COORDINATOR),
        (&t_off, COORDINATOR_NOT_AVAILABLE),
    ] {
        assert_eq!(init_producer(&mut c, t).await?.0, code);
        assert_eq!(add_partition(&mut c, t, (5, 0)).await?, code);
        let r = c
            .call(
                3,
                &AddOffsetsToTxnRequest::default()
                    .with_transactional_id(tid(t))
                    .with_group_id(gid(&g_here)),
            )
            .await?;
        assert_eq!(r.error_code, code);
        assert_eq!(end_txn(&mut c, t, (5, 0)).await?, code);
        assert_eq!(txn_state(&mut c, t).await?.0, code);
    }
    assert_eq!(txn_state(&mut c, &t_here).await?, (0, "Empty".to_string()));
    let r = c.call(1, &ListTransactionsRequest::default()).await?;
    let listed: Vec<_> = r
        .transaction_states
        .iter()
        .map(|t| t.transactional_id.to_string())
        .collect();
    assert_eq!(listed, vec![t_here.clone()]);
    // TxnOffsetCommit for a group coordinated elsewhere: per partition.
    let r = c
        .call(
            3,
            &TxnOffsetCommitRequest::default()
                .with_transactional_id(tid(&t_here))
                .with_group_id(gid(&g_there))
                .with_producer_id(ProducerId(5))
                .with_producer_epoch(0)
                .with_generation_id(-1)
                .with_member_id(s(""))
                .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                    .with_name(topic_name("t"))
                    .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(1)])]),
        )
        .await?;
    assert_eq!(r.topics[0].partitions[0].error_code, NOT_COORDINATOR);
    b.shutdown().await;
    Ok(())
}

/// read_committed Fetch v12 of `t`-0 on `c`: (LSO, whether records came back).
async fn read_committed(c: &mut Client) -> anyhow::Result<(i64, bool)> {
    let mut req: FetchRequest =
        fetch_request(12, "t", Uuid::nil(), 0, 0, 0, 1).with_isolation_level(1);
    req.max_wait_ms = 0;
    let p = only_partition(c.call(12, &req).await?)?;
    let has_records = p.records.as_ref().is_some_and(|r| !r.is_empty());
    Ok((p.last_stable_offset, has_records))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn markers_for_a_partition_led_elsewhere_go_over_the_wire() -> anyhow::Result<()> {
    let coordinator = start(&[]).await?;
    // Broker 2 leads `t`-0; it verifies nothing itself (its own image knows no coordinator).
    let leader = start(&[
        ("node.id", Value::Int(2)),
        (
            "transaction.partition.verification.enable",
            Value::Bool(false),
        ),
    ])
    .await?;
    let mut c1 = coordinator.connect().await?;
    let mut c2 = leader.connect().await?;
    let id = key_on("x", 0);
    find_coordinators(&mut c1, "g", &id).await?;
    create_topic(&mut c1, "t", 1, &[]).await?;
    create_topic(&mut c2, "t", 1, &[]).await?;
    commit_metadata(
        &coordinator,
        vec![
            register_broker_2(leader.addr.port()),
            lead(&coordinator, "t", 0, 2)?,
        ],
    )?;

    let (code, pid, epoch) = init_producer(&mut c1, &id).await?;
    assert_eq!(code, 0);
    assert_eq!(add_partition(&mut c1, &id, (pid, epoch)).await?, 0);
    let batch = sluice::record::build_transactional_batch(
        1_700_000_000_000,
        (pid, epoch, 0),
        &[(None, Some(b"v".as_slice()))],
    );
    let produce =
        produce_request("t", 0, -1, Bytes::from(batch)).with_transactional_id(Some(tid(&id)));
    let r = c2.call(9, &produce).await?;
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    assert_eq!(
        read_committed(&mut c2).await?,
        (0, false),
        "open transaction"
    );

    assert_eq!(end_txn(&mut c1, &id, (pid, epoch)).await?, 0);
    // The commit marker lands on broker 2 (LSO past it, the record readable), and broker 1
    // completes the transaction.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let seen = read_committed(&mut c2).await?;
        let state = txn_state(&mut c1, &id).await?;
        if seen == (2, true) && state == (0, "CompleteCommit".to_string()) {
            break;
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "marker not delivered: broker 2 read_committed {seen:?}, broker 1 {state:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Nothing was written to broker 1's own (no longer led) copy of `t`-0.
    let local = coordinator
        .broker()?
        .replicas
        .partition("t", 0)
        .context("hosted")?;
    assert_eq!(local.offsets().log_end_offset, 0);
    // And broker 1 refuses a marker for it: only the leader writes one.
    let job = sluice::txn::MarkerJob {
        transactional_id: id.clone(),
        producer_id: pid,
        producer_epoch: epoch,
        coordinator_epoch: 0,
        control: sluice::record::ControlType::Abort,
        partitions: vec![],
    };
    let request = sluice::txn::marker_channel::request(&job, &[("t".to_string(), 0)]);
    let r = c1.call(1, &request).await?;
    assert_eq!(
        sluice::txn::marker_channel::codes(&r),
        vec![(("t".to_string(), 0), NOT_LEADER_OR_FOLLOWER)]
    );
    assert_eq!(local.offsets().log_end_offset, 0);
    leader.shutdown().await;
    coordinator.shutdown().await;
    Ok(())
}

/// Transactions V2 across two brokers: broker 2 leads `t`-0, broker 1 coordinates the
/// transaction. A Produce v12 to broker 2 adds `t`-0 at broker 1 with AddPartitionsToTxn v5
/// (KIP-890, as Kafka's partition leader does), EndTxn v5 at broker 1 sends the marker back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v2_produce_adds_its_partition_at_a_remote_coordinator() -> anyhow::Result<()> {
    let v2 = [
        ("transaction.state.log.num.partitions", Value::Int(3)),
        ("offsets.topic.num.partitions", Value::Int(3)),
    ];
    let coordinator = TestBroker::start_with(&v2).await?;
    let mut with_id = v2.to_vec();
    with_id.push(("node.id", Value::Int(2)));
    let leader = TestBroker::start_with(&with_id).await?;
    let mut c1 = coordinator.connect().await?;
    let mut c2 = leader.connect().await?;
    let id = key_on("x", 0);
    find_coordinators(&mut c1, "g", &id).await?;
    find_coordinators(&mut c2, "g", &id).await?;
    create_topic(&mut c1, "t", 1, &[]).await?;
    create_topic(&mut c2, "t", 1, &[]).await?;
    commit_metadata(
        &coordinator,
        vec![
            register_broker_2(leader.addr.port()),
            lead(&coordinator, "t", 0, 2)?,
        ],
    )?;
    // Broker 2's image: broker 1 leads every `__transaction_state` partition.
    let mut register_1 = register_broker_2(coordinator.addr.port());
    if let MetadataRecord::RegisterBroker(r) = &mut register_1 {
        r.broker_id = 1;
    }
    let mut records = vec![register_1];
    for p in 0..3 {
        records.push(lead(&leader, TXNS, p, 1)?);
    }
    commit_metadata(&leader, records)?;

    let (code, pid, epoch) = init_producer(&mut c1, &id).await?;
    assert_eq!(code, 0);
    let batch = sluice::record::build_transactional_batch(
        1_700_000_000_000,
        (pid, epoch, 0),
        &[(None, Some(b"v".as_slice()))],
    );
    let produce =
        produce_request("t", 0, -1, Bytes::from(batch)).with_transactional_id(Some(tid(&id)));
    let r = c2.call(12, &produce).await?;
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    // Broker 1 now has `t`-0 in the open transaction.
    let r = c1
        .call(
            0,
            &DescribeTransactionsRequest::default().with_transactional_ids(vec![tid(&id)]),
        )
        .await?;
    let t = &r.transaction_states[0];
    assert_eq!(t.transaction_state.as_str(), "Ongoing");
    let topics: Vec<_> = t
        .topics
        .iter()
        .map(|t| (t.topic.to_string(), t.partitions.clone()))
        .collect();
    assert_eq!(topics, vec![("t".to_string(), vec![0])]);
    let r = c1
        .call(
            5,
            &EndTxnRequest::default()
                .with_transactional_id(tid(&id))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_committed(true),
        )
        .await?;
    assert_eq!(r.error_code, 0);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let seen = read_committed(&mut c2).await?;
        if seen == (2, true) {
            break;
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "marker not delivered: broker 2 read_committed {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    leader.shutdown().await;
    coordinator.shutdown().await;
    Ok(())
}

/// A leader that cannot be reached keeps the transaction in PrepareCommit (its marker retried
/// with a backoff); once the image names a reachable endpoint for it, the retry is re-routed
/// there, the marker lands and the transaction completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_leader_gets_its_marker_once_the_image_names_a_live_endpoint(
) -> anyhow::Result<()> {
    let coordinator = start(&[]).await?;
    let leader = start(&[
        ("node.id", Value::Int(2)),
        (
            "transaction.partition.verification.enable",
            Value::Bool(false),
        ),
    ])
    .await?;
    let mut c1 = coordinator.connect().await?;
    let mut c2 = leader.connect().await?;
    let id = key_on("x", 0);
    find_coordinators(&mut c1, "g", &id).await?;
    create_topic(&mut c1, "t", 1, &[]).await?;
    create_topic(&mut c2, "t", 1, &[]).await?;
    // First broker 2 is registered at a port nothing listens on.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    commit_metadata(
        &coordinator,
        vec![register_broker_2(dead), lead(&coordinator, "t", 0, 2)?],
    )?;
    let (code, pid, epoch) = init_producer(&mut c1, &id).await?;
    assert_eq!(code, 0);
    assert_eq!(add_partition(&mut c1, &id, (pid, epoch)).await?, 0);
    let batch = sluice::record::build_transactional_batch(
        1_700_000_000_000,
        (pid, epoch, 0),
        &[(None, Some(b"v".as_slice()))],
    );
    let produce =
        produce_request("t", 0, -1, Bytes::from(batch)).with_transactional_id(Some(tid(&id)));
    let r = c2.call(9, &produce).await?;
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    assert_eq!(end_txn(&mut c1, &id, (pid, epoch)).await?, 0);
    // Past the first retry: still prepared, nothing on broker 2.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        txn_state(&mut c1, &id).await?,
        (0, "PrepareCommit".to_string())
    );
    assert_eq!(read_committed(&mut c2).await?, (0, false));
    commit_metadata(&coordinator, vec![register_broker_2(leader.addr.port())])?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let seen = read_committed(&mut c2).await?;
        let state = txn_state(&mut c1, &id).await?;
        if seen == (2, true) && state == (0, "CompleteCommit".to_string()) {
            break;
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "marker not delivered after the endpoint changed: {seen:?}, {state:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    leader.shutdown().await;
    coordinator.shutdown().await;
    Ok(())
}
