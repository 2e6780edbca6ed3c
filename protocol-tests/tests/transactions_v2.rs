//! Transactions V2 (KIP-890) over the wire, beside V1:
//! - ApiVersions advertises `transaction.version` as Kafka 4.1.2 does (supported 0-2 from v4,
//!   finalized 2 by default, not listed when the broker is finalized at 0);
//! - a transactional Produce v12 adds its partition implicitly, TxnOffsetCommit v5 the group's;
//! - EndTxn v5 bumps the epoch and answers the new producer id and epoch, its retry gets the same
//!   answer, the old epoch is fenced in Produce;
//! - the V1 path (Produce v11, EndTxn v4) is unchanged: no implicit add, no bump.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::describe_transactions_response::TransactionState as Described;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    DescribeTransactionsRequest, EndTxnRequest, EndTxnResponse, FetchRequest, GroupId,
    InitProducerIdRequest, ProducerId, TransactionalId, TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::StrBytes;
use protocol_tests::{
    api_versions_request, create_topic, fetch_request, only_partition, produce_request,
    split_batches, topic_name, Client, TestBroker, Uuid,
};
use sluice::config::Value;

#[global_allocator]
static ALLOC: sluice::alloc_guard::GuardedAllocator = sluice::alloc_guard::GuardedAllocator;

const INVALID_PRODUCER_EPOCH: i16 = 47;
const INVALID_TXN_STATE: i16 = 48;
const NOT_ENOUGH_REPLICAS: i16 = 19;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn tid(v: &str) -> TransactionalId {
    TransactionalId(s(v))
}

async fn start(extra: &[(&str, Value)]) -> anyhow::Result<TestBroker> {
    let mut config = vec![
        ("transaction.state.log.num.partitions", Value::Int(3)),
        ("offsets.topic.num.partitions", Value::Int(3)),
    ];
    config.extend(extra.iter().cloned());
    TestBroker::start_with(&config).await
}

/// (name, min, max) of the supported features, (name, min level, max level) of the finalized;
/// only `transaction.version` (share.version is checked in share_groups.rs).
type Features = (Vec<(String, i16, i16)>, i64, Vec<(String, i16, i16)>);

async fn features(c: &mut Client, version: i16) -> anyhow::Result<Features> {
    let r = c.call(version, &api_versions_request()).await?;
    let supported = r
        .supported_features
        .iter()
        .filter(|f| f.name.as_str() == "transaction.version")
        .map(|f| (f.name.to_string(), f.min_version, f.max_version))
        .collect();
    let finalized = r
        .finalized_features
        .iter()
        .filter(|f| f.name.as_str() == "transaction.version")
        .map(|f| (f.name.to_string(), f.min_version_level, f.max_version_level))
        .collect();
    Ok((supported, r.finalized_features_epoch, finalized))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_versions_advertises_the_transaction_version_as_kafka() -> anyhow::Result<()> {
    let tv = |lo, hi| vec![("transaction.version".to_string(), lo, hi)];
    let broker = start(&[]).await?;
    let mut c = broker.connect().await?;
    // Kafka 4.1.2 leaves features with a minimum of 0 out of v3 answers. The epoch is the
    // metadata offset the levels were read at (the bootstrap records and the registration
    // are before it).
    let (supported, epoch, finalized) = features(&mut c, 3).await?;
    assert_eq!((supported, finalized), (vec![], tv(2, 2)));
    assert!(epoch >= 4, "epoch {epoch}");
    assert_eq!(features(&mut c, 4).await?, (tv(0, 2), epoch, tv(2, 2)));
    broker.shutdown().await;

    // Finalized at 0 (Transactions V1 only): Kafka lists no finalized level 0.
    let v1 = start(&[("sluice.feature.transaction.version", Value::Int(0))]).await?;
    let mut c = v1.connect().await?;
    let (supported, _, finalized) = features(&mut c, 4).await?;
    assert_eq!((supported, finalized), (tv(0, 2), vec![]));
    v1.shutdown().await;
    Ok(())
}

async fn init(c: &mut Client, id: &str) -> anyhow::Result<(i64, i16)> {
    let r = c
        .call(
            5,
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(tid(id)))
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        )
        .await?;
    assert_eq!(r.error_code, 0);
    Ok((r.producer_id.0, r.producer_epoch))
}

/// A transactional batch to `orders`-`partition` at Produce `version`: (code, base offset).
async fn produce_txn(
    c: &mut Client,
    version: i16,
    id: &str,
    (pid, epoch, seq): (i64, i16, i32),
    partition: i32,
) -> anyhow::Result<(i16, i64)> {
    let batch = sluice::record::build_transactional_batch(
        1_700_000_000_000,
        (pid, epoch, seq),
        &[(None, Some(b"v".as_slice()))],
    );
    let req = produce_request("orders", partition, -1, Bytes::from(batch))
        .with_transactional_id(Some(tid(id)));
    let r = c.call(version, &req).await?;
    let p = &r.responses[0].partition_responses[0];
    Ok((p.error_code, p.base_offset))
}

async fn end_txn(
    c: &mut Client,
    version: i16,
    id: &str,
    (pid, epoch): (i64, i16),
    commit: bool,
) -> anyhow::Result<EndTxnResponse> {
    c.call(
        version,
        &EndTxnRequest::default()
            .with_transactional_id(tid(id))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_committed(commit),
    )
    .await
}

async fn describe(c: &mut Client, id: &str) -> anyhow::Result<Described> {
    let r = c
        .call(
            0,
            &DescribeTransactionsRequest::default().with_transactional_ids(vec![tid(id)]),
        )
        .await?;
    Ok(r.transaction_states.into_iter().next().expect("one answer"))
}

/// Waits (bounded) until the transaction reaches `state`; its epoch then.
async fn wait_for(c: &mut Client, id: &str, state: &str) -> anyhow::Result<i16> {
    for _ in 0..500 {
        let d = describe(c, id).await?;
        if d.transaction_state.as_str() == state {
            return Ok(d.producer_epoch);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    anyhow::bail!("{id} never reached {state}")
}

/// read_committed Fetch of `orders`-`partition`: (LSO, batch base offsets).
async fn read_committed(c: &mut Client, partition: i32) -> anyhow::Result<(i64, Vec<i64>)> {
    let mut req: FetchRequest =
        fetch_request(12, "orders", Uuid::nil(), partition, 0, 0, 1).with_isolation_level(1);
    req.max_wait_ms = 0;
    let p = only_partition(c.call(12, &req).await?)?;
    let bytes = p.records.clone().unwrap_or_default();
    let offsets = split_batches(&bytes)?
        .iter()
        .map(|b| sluice::record::BatchHeader::parse(b).map(|h| h.base_offset))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((p.last_stable_offset, offsets))
}

/// TxnOffsetCommit of `orders`-0 at offset 5 for `group`: per-partition codes.
async fn txn_offset_commit(
    c: &mut Client,
    version: i16,
    id: &str,
    (pid, epoch): (i64, i16),
    group: &str,
) -> anyhow::Result<Vec<i16>> {
    let req = TxnOffsetCommitRequest::default()
        .with_transactional_id(tid(id))
        .with_group_id(GroupId(s(group)))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_generation_id(-1)
        .with_member_id(s(""))
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(topic_name("orders"))
            .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(5)])]);
    let r = c.call(version, &req).await?;
    Ok(r.topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect())
}

/// Retries a Produce refused while the previous transaction's markers are written (Kafka's
/// retriable NOT_ENOUGH_REPLICAS for CONCURRENT_TRANSACTIONS).
async fn produce_when_ready(
    c: &mut Client,
    id: &str,
    who: (i64, i16, i32),
    partition: i32,
) -> anyhow::Result<(i16, i64)> {
    let mut answer = (NOT_ENOUGH_REPLICAS, -1);
    for _ in 0..500 {
        answer = produce_txn(c, 12, id, who, partition).await?;
        if answer.0 != NOT_ENOUGH_REPLICAS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(answer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_adds_partitions_implicitly_and_bumps_the_epoch_on_end_txn() -> anyhow::Result<()> {
    let broker = start(&[]).await?;
    let mut c = broker.connect().await?;
    create_topic(&mut c, "orders", 2, &[]).await?;
    let (pid, epoch) = init(&mut c, "v2").await?;
    assert_eq!(epoch, 0);

    // Produce v12 without AddPartitionsToTxn: the partition joins the transaction.
    assert_eq!(produce_txn(&mut c, 12, "v2", (pid, 0, 0), 0).await?, (0, 0));
    let d = describe(&mut c, "v2").await?;
    assert_eq!(d.transaction_state.as_str(), "Ongoing");
    assert_eq!(d.topics.len(), 1);
    assert_eq!(d.topics[0].partitions, vec![0]);
    // TxnOffsetCommit v5 without AddOffsetsToTxn: the group's partition joins too.
    assert_eq!(
        txn_offset_commit(&mut c, 5, "v2", (pid, 0), "v2-group").await?,
        vec![0]
    );
    assert_eq!(describe(&mut c, "v2").await?.topics.len(), 2);

    // EndTxn v5: the bumped epoch comes back; the markers carry it.
    let r = end_txn(&mut c, 5, "v2", (pid, 0), true).await?;
    assert_eq!(
        (r.error_code, r.producer_id.0, r.producer_epoch),
        (0, pid, 1)
    );
    assert_eq!(wait_for(&mut c, "v2", "CompleteCommit").await?, 1);
    assert_eq!(read_committed(&mut c, 0).await?, (2, vec![0, 1]));
    // A retry (the epoch before the bump) gets the same answer.
    let r = end_txn(&mut c, 5, "v2", (pid, 0), true).await?;
    assert_eq!(
        (r.error_code, r.producer_id.0, r.producer_epoch),
        (0, pid, 1)
    );
    // The old epoch is fenced; the new one starts the next transaction at sequence 0.
    assert_eq!(
        produce_txn(&mut c, 12, "v2", (pid, 0, 1), 0).await?,
        (INVALID_PRODUCER_EPOCH, -1)
    );
    assert_eq!(
        produce_when_ready(&mut c, "v2", (pid, 1, 0), 0).await?,
        (0, 2)
    );
    let r = end_txn(&mut c, 5, "v2", (pid, 1), false).await?;
    assert_eq!(
        (r.error_code, r.producer_id.0, r.producer_epoch),
        (0, pid, 2)
    );
    assert_eq!(wait_for(&mut c, "v2", "CompleteAbort").await?, 2);
    // V2 aborts an empty transaction too (bump, no markers).
    let r = end_txn(&mut c, 5, "v2", (pid, 2), false).await?;
    assert_eq!((r.error_code, r.producer_epoch), (0, 3));
    assert_eq!(wait_for(&mut c, "v2", "CompleteAbort").await?, 3);
    assert_eq!(read_committed(&mut c, 0).await?.0, 4);
    broker.shutdown().await;
    Ok(())
}

/// The produce path's view of a transaction may be a step behind the coordinator: here it still
/// shows the previous transaction aborting (as it did while its markers were written) when the
/// coordinator has completed it. A V2 write must then ask the coordinator, which adds the
/// partition, instead of refusing the write on the stale view: looking at the view again later
/// can see the markers landed and answer INVALID_TXN_STATE, fatal to the client (franz-go's
/// TestTxnEtl got it under load).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v2_write_the_view_shows_completing_is_decided_by_the_coordinator() -> anyhow::Result<()>
{
    let broker = start(&[]).await?;
    let mut c = broker.connect().await?;
    create_topic(&mut c, "orders", 2, &[]).await?;
    let (pid, _) = init(&mut c, "stale").await?;
    assert_eq!(
        produce_txn(&mut c, 12, "stale", (pid, 0, 0), 0).await?,
        (0, 0)
    );
    let r = end_txn(&mut c, 5, "stale", (pid, 0), false).await?;
    assert_eq!((r.error_code, r.producer_epoch), (0, 1));
    assert_eq!(wait_for(&mut c, "stale", "CompleteAbort").await?, 1);

    // The view one step behind: the abort at the bumped epoch, its markers still in flight.
    let view = broker.broker()?.txn.view();
    let behind = |state| sluice::txn::TxnMetadata {
        transactional_id: "stale".to_string(),
        producer_id: pid,
        previous_producer_id: pid,
        producer_epoch: 1,
        last_producer_epoch: -1,
        timeout_ms: 60_000,
        state,
        partitions: [("orders".to_string(), 0), ("orders".to_string(), 1)].into(),
        start_timestamp_ms: 0,
        last_update_timestamp_ms: 0,
        next_producer_id: -1,
        client_transaction_version: 2,
    };
    view.publish("stale", Some(&behind(sluice::txn::TxnState::PrepareAbort)));
    // The coordinator knows the abort completed: the partition joins the next transaction.
    assert_eq!(
        produce_txn(&mut c, 12, "stale", (pid, 1, 0), 1).await?,
        (0, 0)
    );
    let d = describe(&mut c, "stale").await?;
    assert_eq!(d.transaction_state.as_str(), "Ongoing");
    assert_eq!(d.topics[0].partitions, vec![1]);

    // The same for the group's partition of a TxnOffsetCommit v5.
    let r = end_txn(&mut c, 5, "stale", (pid, 1), true).await?;
    assert_eq!((r.error_code, r.producer_epoch), (0, 2));
    assert_eq!(wait_for(&mut c, "stale", "CompleteCommit").await?, 2);
    let mut completing = behind(sluice::txn::TxnState::PrepareCommit);
    completing.producer_epoch = 2;
    view.publish("stale", Some(&completing));
    assert_eq!(
        txn_offset_commit(&mut c, 5, "stale", (pid, 2), "stale-group").await?,
        vec![0]
    );
    assert_eq!(
        describe(&mut c, "stale").await?.transaction_state.as_str(),
        "Ongoing"
    );
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_v2_transaction_is_aborted_with_two_bumps() -> anyhow::Result<()> {
    let broker = start(&[]).await?;
    let mut c = broker.connect().await?;
    create_topic(&mut c, "orders", 1, &[]).await?;
    let r = c
        .call(
            5,
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(tid("slow")))
                .with_transaction_timeout_ms(200)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        )
        .await?;
    let pid = r.producer_id.0;
    assert_eq!(
        produce_txn(&mut c, 12, "slow", (pid, 0, 0), 0).await?,
        (0, 0)
    );
    // Kafka's timeout at transaction.version 2: the fence bumps, then the V2 abort bumps again.
    assert_eq!(wait_for(&mut c, "slow", "CompleteAbort").await?, 2);
    let r = end_txn(&mut c, 5, "slow", (pid, 0), true).await?;
    assert_eq!(r.error_code, 90, "PRODUCER_FENCED");
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v1_requests_keep_v1_rules_on_a_v2_broker() -> anyhow::Result<()> {
    let broker = start(&[]).await?;
    let mut c = broker.connect().await?;
    create_topic(&mut c, "orders", 1, &[]).await?;
    let (pid, _) = init(&mut c, "v1").await?;
    // Produce v11 is a V1 client: nothing is added implicitly, nor by TxnOffsetCommit v4.
    assert_eq!(
        produce_txn(&mut c, 11, "v1", (pid, 0, 0), 0).await?,
        (INVALID_TXN_STATE, -1)
    );
    assert_eq!(
        txn_offset_commit(&mut c, 4, "v1", (pid, 0), "v1-group").await?,
        vec![INVALID_TXN_STATE]
    );
    // EndTxn v4 with nothing open is INVALID_TXN_STATE (V1 has no empty abort) ...
    let r = end_txn(&mut c, 4, "v1", (pid, 0), false).await?;
    assert_eq!(r.error_code, INVALID_TXN_STATE);
    // ... and once a V2 Produce opened one, EndTxn v4 ends it without a bump.
    assert_eq!(produce_txn(&mut c, 12, "v1", (pid, 0, 0), 0).await?, (0, 0));
    let r = end_txn(&mut c, 4, "v1", (pid, 0), true).await?;
    assert_eq!(r.error_code, 0);
    assert_eq!(wait_for(&mut c, "v1", "CompleteCommit").await?, 0);
    // The V1 retry after completion is NONE, the other outcome INVALID_TXN_STATE.
    assert_eq!(
        end_txn(&mut c, 4, "v1", (pid, 0), true).await?.error_code,
        0
    );
    assert_eq!(
        end_txn(&mut c, 4, "v1", (pid, 0), false).await?.error_code,
        INVALID_TXN_STATE
    );
    broker.shutdown().await;
    Ok(())
}
