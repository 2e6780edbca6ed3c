//! The transaction coordinator over the wire: FindCoordinator type 1, InitProducerId with a
//! transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn (markers land in the logs),
//! DescribeTransactions, ListTransactions, fencing, timeouts and a restart.
//!
//! The last test sends transactional data through the whole path: Produce is verified against the
//! coordinator (a partition not added is INVALID_TXN_STATE), EndTxn writes the markers, and
//! read_committed Fetch sees committed data and lists the aborted transaction.
//!
//! These are Transactions V1 conversations on a broker finalized at `transaction.version` 0 (as
//! Kafka formatted with `--feature transaction.version=0`), whose own aborts bump the epoch once;
//! V2 is in `transactions_v2.rs`.

use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::describe_transactions_response::TransactionState as Described;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
    DescribeTransactionsRequest, EndTxnRequest, FindCoordinatorRequest, GroupId,
    InitProducerIdRequest, ListTransactionsRequest, MetadataRequest, ProducerId, TransactionalId,
};
use kafka_protocol::messages::{FetchRequest, OffsetFetchRequest, TxnOffsetCommitRequest};
use kafka_protocol::protocol::StrBytes;
use protocol_tests::{
    create_topic, fetch_request, list_offsets, only_partition, produce_request, split_batches,
    topic_name, Client, TestBroker, Uuid,
};
use sluice::config::Value;

#[global_allocator]
static ALLOC: sluice::alloc_guard::GuardedAllocator = sluice::alloc_guard::GuardedAllocator;

const INVALID_PRODUCER_EPOCH: i16 = 47;
const INVALID_TXN_STATE: i16 = 48;
const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
const OPERATION_NOT_ATTEMPTED: i16 = 55;
const PRODUCER_FENCED: i16 = 90;
const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn tid(v: &str) -> TransactionalId {
    TransactionalId(s(v))
}

fn running(b: &TestBroker) -> &sluice::broker::Broker {
    &b.running.as_ref().expect("running").broker
}

async fn start() -> anyhow::Result<TestBroker> {
    TestBroker::start_with(&[
        ("transaction.state.log.num.partitions", Value::Int(3)),
        ("offsets.topic.num.partitions", Value::Int(3)),
        ("sluice.feature.transaction.version", Value::Int(0)),
    ])
    .await
}

async fn init(
    c: &mut Client,
    version: i16,
    id: &str,
    timeout_ms: i32,
) -> anyhow::Result<(i16, i64, i16)> {
    let r = c
        .call(
            version,
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(tid(id)))
                .with_transaction_timeout_ms(timeout_ms)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        )
        .await?;
    Ok((r.error_code, r.producer_id.0, r.producer_epoch))
}

/// AddPartitionsToTxn v3 (the client form): the per-partition codes in request order.
async fn add_partitions(
    c: &mut Client,
    version: i16,
    id: &str,
    (pid, epoch): (i64, i16),
    topic: &str,
    partitions: &[i32],
) -> anyhow::Result<Vec<i16>> {
    let r: AddPartitionsToTxnResponse = c
        .call(
            version,
            &AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(tid(id))
                .with_v3_and_below_producer_id(ProducerId(pid))
                .with_v3_and_below_producer_epoch(epoch)
                .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                    .with_name(topic_name(topic))
                    .with_partitions(partitions.to_vec())]),
        )
        .await?;
    Ok(r.results_by_topic_v3_and_below
        .iter()
        .flat_map(|t| {
            t.results_by_partition
                .iter()
                .map(|p| p.partition_error_code)
        })
        .collect())
}

async fn end_txn(
    c: &mut Client,
    version: i16,
    id: &str,
    (pid, epoch): (i64, i16),
    commit: bool,
) -> anyhow::Result<i16> {
    let r = c
        .call(
            version,
            &EndTxnRequest::default()
                .with_transactional_id(tid(id))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_committed(commit),
        )
        .await?;
    Ok(r.error_code)
}

async fn describe(c: &mut Client, id: &str) -> anyhow::Result<Described> {
    let r = c
        .call(
            0,
            &DescribeTransactionsRequest::default().with_transactional_ids(vec![tid(id)]),
        )
        .await?;
    r.transaction_states
        .into_iter()
        .next()
        .context("one transaction state")
}

async fn log_end(c: &mut Client, topic: &str, partition: i32) -> anyhow::Result<i64> {
    let r = list_offsets(c, 7, topic, partition, -1).await?;
    assert_eq!(r.error_code, 0);
    Ok(r.offset)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_and_abort_write_markers_and_fence_old_epochs() -> anyhow::Result<()> {
    let broker = start().await?;
    let mut c = broker.connect().await?;
    create_topic(&mut c, "orders", 2, &[]).await?;

    // FindCoordinator type 1 (v3 single key): this node; `__transaction_state` now exists.
    let r = c
        .call(
            3,
            &FindCoordinatorRequest::default()
                .with_key(s("wire-tx"))
                .with_key_type(1),
        )
        .await?;
    let port = running(&broker).identity.advertised_port;
    assert_eq!((r.error_code, r.node_id.0, r.port), (0, 1, port));
    let md = c
        .call(12, &MetadataRequest::default().with_topics(None))
        .await?;
    let internal = md
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.as_str()) == Some("__transaction_state"))
        .context("__transaction_state listed")?;
    assert!(internal.is_internal);
    assert_eq!(internal.partitions.len(), 3);

    // InitProducerId: a producer id at epoch 0; a timeout over the maximum is refused.
    assert_eq!(
        init(&mut c, 4, "wire-tx", 900_001).await?.0,
        INVALID_TRANSACTION_TIMEOUT
    );
    let (code, pid, epoch) = init(&mut c, 4, "wire-tx", 60_000).await?;
    assert_eq!((code, epoch), (0, 0));
    assert!(pid >= 0);
    let me = (pid, epoch);

    // EndTxn before any partition was added.
    assert_eq!(
        end_txn(&mut c, 3, "wire-tx", me, true).await?,
        INVALID_TXN_STATE
    );
    // An unknown partition: nothing is attempted.
    assert_eq!(
        add_partitions(&mut c, 3, "wire-tx", me, "orders", &[0, 9]).await?,
        vec![OPERATION_NOT_ATTEMPTED, UNKNOWN_TOPIC_OR_PARTITION]
    );
    assert_eq!(
        add_partitions(&mut c, 3, "wire-tx", (pid + 1, 0), "orders", &[0]).await?,
        vec![INVALID_PRODUCER_ID_MAPPING]
    );
    assert_eq!(
        add_partitions(&mut c, 3, "wire-tx", me, "orders", &[0, 1]).await?,
        vec![0, 0]
    );
    assert!(running(&broker).txn.verify(pid, 0, "orders", 1).is_ok());
    assert_eq!(
        running(&broker).txn.verify(pid, 0, "orders", 2),
        Err(INVALID_TXN_STATE)
    );

    let d = describe(&mut c, "wire-tx").await?;
    assert_eq!(d.error_code, 0);
    assert_eq!(d.transaction_state.as_str(), "Ongoing");
    assert_eq!((d.producer_id.0, d.producer_epoch), (pid, 0));
    assert_eq!(d.transaction_timeout_ms, 60_000);
    assert!(d.transaction_start_time_ms > 0);
    assert_eq!(d.topics.len(), 1);
    assert_eq!(d.topics[0].partitions, vec![0, 1]);
    assert_eq!(
        describe(&mut c, "nobody").await?.error_code,
        TRANSACTIONAL_ID_NOT_FOUND
    );
    let list = c
        .call(
            1,
            &ListTransactionsRequest::default()
                .with_state_filters(vec![s("Ongoing"), s("Nope")])
                .with_duration_filter(-1),
        )
        .await?;
    assert_eq!(list.error_code, 0);
    assert_eq!(list.unknown_state_filters, vec![s("Nope")]);
    assert_eq!(list.transaction_states.len(), 1);
    assert_eq!(
        list.transaction_states[0].transactional_id.as_str(),
        "wire-tx"
    );
    assert_eq!(list.transaction_states[0].producer_id.0, pid);

    // Commit: one marker per partition, then CompleteCommit.
    assert_eq!(log_end(&mut c, "orders", 0).await?, 0);
    assert_eq!(end_txn(&mut c, 3, "wire-tx", me, true).await?, 0);
    // The coordinator serves requests in order, so this answer comes after the markers.
    let d = describe(&mut c, "wire-tx").await?;
    assert_eq!(d.transaction_state.as_str(), "CompleteCommit");
    assert!(d.topics.is_empty());
    assert_eq!(log_end(&mut c, "orders", 0).await?, 1);
    assert_eq!(log_end(&mut c, "orders", 1).await?, 1);
    // A retried commit succeeds; an abort now is an invalid transition.
    assert_eq!(end_txn(&mut c, 3, "wire-tx", me, true).await?, 0);
    assert_eq!(
        end_txn(&mut c, 3, "wire-tx", me, false).await?,
        INVALID_TXN_STATE
    );

    // Offsets join through the group's __consumer_offsets partition; abort writes markers there.
    let r = c
        .call(
            3,
            &AddOffsetsToTxnRequest::default()
                .with_transactional_id(tid("wire-tx"))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(0)
                .with_group_id(GroupId(s("wire-group"))),
        )
        .await?;
    assert_eq!(r.error_code, 0);
    let offsets_partition = sluice::group::records::partition_for("wire-group", 3);
    let d = describe(&mut c, "wire-tx").await?;
    assert_eq!(d.topics[0].topic.as_str(), "__consumer_offsets");
    assert_eq!(d.topics[0].partitions, vec![offsets_partition]);
    let before = log_end(&mut c, "__consumer_offsets", offsets_partition).await?;
    assert_eq!(end_txn(&mut c, 3, "wire-tx", me, false).await?, 0);
    let d = describe(&mut c, "wire-tx").await?;
    assert_eq!(d.transaction_state.as_str(), "CompleteAbort");
    assert_eq!(
        log_end(&mut c, "__consumer_offsets", offsets_partition).await?,
        before + 1
    );

    // A new instance bumps the epoch; the old one is fenced (INVALID_PRODUCER_EPOCH before v2).
    let (code, pid2, epoch2) = init(&mut c, 4, "wire-tx", 60_000).await?;
    assert_eq!((code, pid2, epoch2), (0, pid, 1));
    assert_eq!(
        add_partitions(&mut c, 3, "wire-tx", me, "orders", &[0]).await?,
        vec![PRODUCER_FENCED]
    );
    assert_eq!(
        add_partitions(&mut c, 1, "wire-tx", me, "orders", &[0]).await?,
        vec![INVALID_PRODUCER_EPOCH]
    );
    assert_eq!(
        end_txn(&mut c, 1, "wire-tx", me, true).await?,
        INVALID_PRODUCER_EPOCH
    );
    assert_eq!(
        end_txn(&mut c, 4, "wire-tx", me, true).await?,
        PRODUCER_FENCED
    );

    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_instance_aborts_the_open_transaction_and_state_survives_a_restart(
) -> anyhow::Result<()> {
    let mut broker = start().await?;
    let mut c = broker.connect().await?;
    create_topic(&mut c, "events", 1, &[]).await?;
    let (_, pid, epoch) = init(&mut c, 5, "app-1", 60_000).await?;
    assert_eq!(
        add_partitions(&mut c, 3, "app-1", (pid, epoch), "events", &[0]).await?,
        vec![0]
    );
    // The second instance: the open transaction is aborted with a bumped epoch first.
    assert_eq!(init(&mut c, 5, "app-1", 60_000).await?.0, 51);
    let d = describe(&mut c, "app-1").await?;
    assert_eq!(d.transaction_state.as_str(), "CompleteAbort");
    assert_eq!(d.producer_epoch, epoch + 1);
    assert_eq!(log_end(&mut c, "events", 0).await?, 1);
    let (code, pid2, epoch2) = init(&mut c, 5, "app-1", 60_000).await?;
    assert_eq!((code, pid2, epoch2), (0, pid, epoch + 2));

    // Restart: the coordinator reloads __transaction_state.
    drop(c);
    broker
        .restart(&[("transaction.state.log.num.partitions", Value::Int(3))])
        .await?;
    let mut c = broker.connect().await?;
    let d = describe(&mut c, "app-1").await?;
    assert_eq!(d.transaction_state.as_str(), "Empty");
    assert_eq!((d.producer_id.0, d.producer_epoch), (pid, epoch + 2));
    let (code, pid3, epoch3) = init(&mut c, 5, "app-1", 60_000).await?;
    assert_eq!((code, pid3, epoch3), (0, pid, epoch + 3));
    let list = c
        .call(
            2,
            &ListTransactionsRequest::default()
                .with_duration_filter(-1)
                .with_transactional_id_pattern(Some(s("app-.*"))),
        )
        .await?;
    assert_eq!(list.transaction_states.len(), 1);
    assert_eq!(
        list.transaction_states[0].transaction_state.as_str(),
        "Empty"
    );
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_past_its_timeout_is_aborted() -> anyhow::Result<()> {
    let broker = start().await?;
    let mut c = broker.connect().await?;
    create_topic(&mut c, "slow", 1, &[]).await?;
    let (_, pid, epoch) = init(&mut c, 4, "slow-tx", 200).await?;
    assert_eq!(
        add_partitions(&mut c, 3, "slow-tx", (pid, epoch), "slow", &[0]).await?,
        vec![0]
    );
    let mut state = String::new();
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        state = describe(&mut c, "slow-tx")
            .await?
            .transaction_state
            .to_string();
        if state == "CompleteAbort" {
            break;
        }
    }
    assert_eq!(state, "CompleteAbort");
    assert_eq!(describe(&mut c, "slow-tx").await?.producer_epoch, epoch + 1);
    assert_eq!(log_end(&mut c, "slow", 0).await?, 1);
    assert_eq!(
        end_txn(&mut c, 3, "slow-tx", (pid, epoch), true).await?,
        PRODUCER_FENCED
    );
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_add_partitions_verifies_without_adding() -> anyhow::Result<()> {
    let broker = start().await?;
    let mut c = broker.connect().await?;
    create_topic(&mut c, "v", 2, &[]).await?;
    let (_, pid, epoch) = init(&mut c, 4, "batch-tx", 60_000).await?;
    let txn = |verify_only: bool, partitions: Vec<i32>| {
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(tid("batch-tx"))
            .with_producer_id(ProducerId(pid))
            .with_producer_epoch(epoch)
            .with_verify_only(verify_only)
            .with_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(topic_name("v"))
                .with_partitions(partitions)])
    };
    let codes = |r: &AddPartitionsToTxnResponse| -> Vec<i16> {
        r.results_by_transaction
            .iter()
            .flat_map(|t| t.topic_results.iter())
            .flat_map(|t| {
                t.results_by_partition
                    .iter()
                    .map(|p| p.partition_error_code)
            })
            .collect()
    };
    let r = c
        .call(
            5,
            &AddPartitionsToTxnRequest::default().with_transactions(vec![txn(false, vec![0])]),
        )
        .await?;
    assert_eq!((r.error_code, codes(&r)), (0, vec![0]));
    assert_eq!(
        r.results_by_transaction[0].transactional_id.as_str(),
        "batch-tx"
    );
    let r = c
        .call(
            4,
            &AddPartitionsToTxnRequest::default().with_transactions(vec![txn(true, vec![0, 1])]),
        )
        .await?;
    assert_eq!(codes(&r), vec![0, INVALID_TXN_STATE]);
    let d = describe(&mut c, "batch-tx").await?;
    assert_eq!(d.topics[0].partitions, vec![0], "verify_only adds nothing");
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepared_commit_gets_its_markers_after_a_restart() -> anyhow::Result<()> {
    use sluice::txn::{records, TxnRecord};
    let mut broker = start().await?;
    let mut c = broker.connect().await?;
    create_topic(&mut c, "resume", 1, &[]).await?;
    // The broker stopped right after persisting PrepareCommit, before any marker.
    let prepared = records::TxnLogValue {
        producer_id: 4242,
        previous_producer_id: 4242,
        next_producer_id: -1,
        producer_epoch: 3,
        next_producer_epoch: -1,
        timeout_ms: 60_000,
        status: sluice::txn::TxnState::PrepareCommit.id(),
        partitions: [("resume".to_string(), 0)].into_iter().collect(),
        last_update_timestamp_ms: 1_700_000_000_000,
        start_timestamp_ms: 1_700_000_000_000,
        client_transaction_version: 0,
    };
    let record = TxnRecord {
        transactional_id: "resume-tx".into(),
        key: records::key("resume-tx"),
        value: Some(records::value(&prepared)),
    };
    // The coordinator creates its topic (through the controller) before its first write.
    sluice::txn::driver::ensure_transaction_topic(running(&broker))
        .await
        .ok_or_else(|| anyhow::anyhow!("__transaction_state not created"))?;
    sluice::txn::driver::persist(running(&broker), &[record], 1_700_000_000_000)
        .map_err(|code| anyhow::anyhow!("persist: {code}"))?;
    assert_eq!(log_end(&mut c, "resume", 0).await?, 0);
    drop(c);

    broker
        .restart(&[("transaction.state.log.num.partitions", Value::Int(3))])
        .await?;
    let mut c = broker.connect().await?;
    let d = describe(&mut c, "resume-tx").await?;
    assert_eq!(d.transaction_state.as_str(), "CompleteCommit");
    assert_eq!((d.producer_id.0, d.producer_epoch), (4242, 3));
    assert_eq!(log_end(&mut c, "resume", 0).await?, 1);
    let r = c
        .call(
            12,
            &protocol_tests::fetch_request(12, "resume", protocol_tests::Uuid::nil(), 0, 0, 0, 1),
        )
        .await?;
    let p = protocol_tests::only_partition(r)?;
    let bytes = p.records.context("marker bytes")?;
    assert_eq!(
        sluice::record::control_type(&bytes),
        Some(sluice::record::ControlType::Commit)
    );
    broker.shutdown().await;
    Ok(())
}

/// Produces one transactional batch (v9, acks=-1) as `id`; returns (error code, base offset).
async fn produce_txn(
    c: &mut Client,
    id: &str,
    (pid, epoch): (i64, i16),
    partition: i32,
    seq: i32,
    values: &[&[u8]],
) -> anyhow::Result<(i16, i64)> {
    let records: Vec<_> = values.iter().map(|v| (None, Some(*v))).collect();
    let batch =
        sluice::record::build_transactional_batch(1_700_000_000_000, (pid, epoch, seq), &records);
    let req = produce_request("orders", partition, -1, Bytes::from(batch))
        .with_transactional_id(Some(tid(id)));
    let r = c.call(9, &req).await?;
    let p = &r.responses[0].partition_responses[0];
    Ok((p.error_code, p.base_offset))
}

/// read_committed Fetch v12 of `orders`-`partition` from 0: (LSO, batch base offsets, aborted).
async fn read_committed(
    c: &mut Client,
    partition: i32,
) -> anyhow::Result<(i64, Vec<i64>, Vec<(i64, i64)>)> {
    let mut req: FetchRequest =
        fetch_request(12, "orders", Uuid::nil(), partition, 0, 0, 1).with_isolation_level(1);
    req.max_wait_ms = 0;
    let p = only_partition(c.call(12, &req).await?)?;
    let bytes = p.records.clone().unwrap_or_default();
    let offsets = split_batches(&bytes)?
        .iter()
        .map(|b| sluice::record::BatchHeader::parse(b).map(|h| h.base_offset))
        .collect::<Result<Vec<_>, _>>()?;
    let aborted = p
        .aborted_transactions
        .unwrap_or_default()
        .iter()
        .map(|a| (a.producer_id.0, a.first_offset))
        .collect();
    Ok((p.last_stable_offset, offsets, aborted))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactional_data_is_verified_committed_and_aborted_end_to_end() -> anyhow::Result<()> {
    let broker = start().await?;
    let mut c = broker.connect().await?;
    create_topic(&mut c, "orders", 2, &[]).await?;
    let (code, pid, epoch) = init(&mut c, 4, "etl", 60_000).await?;
    assert_eq!((code, epoch), (0, 0));
    let who = (pid, epoch);

    // Not added yet: Produce refuses the batch, nothing is written.
    assert_eq!(
        produce_txn(&mut c, "etl", who, 0, 0, &[b"early"]).await?,
        (INVALID_TXN_STATE, -1)
    );
    assert_eq!(log_end(&mut c, "orders", 0).await?, 0);

    // Transaction 1 on partition 0, committed.
    assert_eq!(
        add_partitions(&mut c, 3, "etl", who, "orders", &[0]).await?,
        vec![0]
    );
    assert_eq!(
        produce_txn(&mut c, "etl", who, 0, 0, &[b"c1", b"c2"]).await?,
        (0, 0)
    );
    // Partition 1 is not part of this transaction.
    assert_eq!(
        produce_txn(&mut c, "etl", who, 1, 0, &[b"x"]).await?,
        (INVALID_TXN_STATE, -1)
    );
    assert_eq!(read_committed(&mut c, 0).await?, (0, vec![], vec![]));
    assert_eq!(end_txn(&mut c, 3, "etl", who, true).await?, 0);
    // The marker lands asynchronously after the answer; wait for it (bounded).
    let mut committed = (0, vec![], vec![]);
    for _ in 0..500 {
        committed = read_committed(&mut c, 0).await?;
        if committed.0 == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(committed, (3, vec![0, 2], vec![]));
    // After the commit the producer is outside any transaction again.
    assert_eq!(
        produce_txn(&mut c, "etl", who, 0, 2, &[b"late"]).await?,
        (INVALID_TXN_STATE, -1)
    );

    // Transaction 2 on partition 1, aborted: read_committed lists it as aborted.
    let mut added = vec![];
    for _ in 0..500 {
        added = add_partitions(&mut c, 3, "etl", who, "orders", &[1]).await?;
        if added != vec![51] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(added, vec![0]);
    assert_eq!(
        produce_txn(&mut c, "etl", who, 1, 0, &[b"a1"]).await?,
        (0, 0)
    );
    assert_eq!(end_txn(&mut c, 3, "etl", who, false).await?, 0);
    let mut aborted = (0, vec![], vec![]);
    for _ in 0..500 {
        aborted = read_committed(&mut c, 1).await?;
        if aborted.0 == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(aborted, (2, vec![0, 1], vec![(pid, 0)]));

    // Transaction 3: offsets. TxnOffsetCommit before AddOffsetsToTxn is INVALID_TXN_STATE (Kafka's
    // verification); after it the offsets wait for the commit marker.
    assert_eq!(
        txn_offset_commit(&mut c, "etl", who, 7).await?,
        vec![INVALID_TXN_STATE]
    );
    let mut code = 51;
    for _ in 0..500 {
        code = add_offsets(&mut c, "etl", who, "etl-group").await?;
        if code != 51 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(code, 0);
    assert_eq!(txn_offset_commit(&mut c, "etl", who, 7).await?, vec![0]);
    assert_eq!(committed_offset(&mut c, "etl-group").await?, -1);
    assert_eq!(end_txn(&mut c, 3, "etl", who, true).await?, 0);
    let mut offset = -1;
    for _ in 0..500 {
        offset = committed_offset(&mut c, "etl-group").await?;
        if offset != -1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(offset, 7);
    Ok(())
}

async fn add_offsets(
    c: &mut Client,
    id: &str,
    (pid, epoch): (i64, i16),
    group: &str,
) -> anyhow::Result<i16> {
    let r = c
        .call(
            3,
            &AddOffsetsToTxnRequest::default()
                .with_transactional_id(tid(id))
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch)
                .with_group_id(GroupId(s(group))),
        )
        .await?;
    Ok(r.error_code)
}

/// TxnOffsetCommit v3 of `orders`-0 at `offset` for group `etl-group`: per-partition codes.
async fn txn_offset_commit(
    c: &mut Client,
    id: &str,
    (pid, epoch): (i64, i16),
    offset: i64,
) -> anyhow::Result<Vec<i16>> {
    let req = TxnOffsetCommitRequest::default()
        .with_transactional_id(tid(id))
        .with_group_id(GroupId(s("etl-group")))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_generation_id(-1)
        .with_member_id(s(""))
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(topic_name("orders"))
            .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)])]);
    let r = c.call(3, &req).await?;
    Ok(r.topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect())
}

/// The committed offset of `orders`-0 for `group` (OffsetFetch v7, require_stable off).
async fn committed_offset(c: &mut Client, group: &str) -> anyhow::Result<i64> {
    let r = c
        .call(
            7,
            &OffsetFetchRequest::default()
                .with_group_id(GroupId(s(group)))
                .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                    .with_name(topic_name("orders"))
                    .with_partition_indexes(vec![0])])),
        )
        .await?;
    Ok(r.topics[0].partitions[0].committed_offset)
}
