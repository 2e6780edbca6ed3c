//! The log side of transactions over the wire: transactional Produce, WriteTxnMarkers (commit on
//! one partition, abort on the other), Fetch read_committed vs read_uncommitted (LSO, aborted
//! transactions, records), ListOffsets at both isolation levels, DescribeProducers, a
//! read_committed long-poll woken by a marker, and bad input (old epochs, unknown partitions).

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::describe_producers_response::ProducerState;
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeProducersRequest, FetchRequest, ListOffsetsRequest, ProduceRequest,
    ProducerId, WriteTxnMarkersRequest,
};
use kafka_protocol::protocol::StrBytes;
use protocol_tests::{
    base_offset_of, create_topic, fetch_request, only_partition, produce_request, split_batches,
    topic_name, Client, TestBroker, Uuid,
};
use sluice::config::Value;
use sluice::record;

#[global_allocator]
static ALLOC: sluice::alloc_guard::GuardedAllocator = sluice::alloc_guard::GuardedAllocator;

const TOPIC: &str = "txlog";
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const INVALID_PRODUCER_EPOCH: i16 = 47;
const INVALID_TXN_STATE: i16 = 48;
const TRANSACTION_COORDINATOR_FENCED: i16 = 52;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
const INVALID_TOPIC_EXCEPTION: i16 = 17;
/// These tests drive markers by hand (WriteTxnMarkers), without the transaction coordinator, so
/// its partition verification is off, as in the same check against Kafka.
const NO_VERIFICATION: &[(&str, Value)] = &[(
    "transaction.partition.verification.enable",
    Value::Bool(false),
)];

fn txn_batch(pid: i64, epoch: i16, seq: i32, values: &[&[u8]]) -> Vec<u8> {
    let records: Vec<_> = values.iter().map(|v| (None, Some(*v))).collect();
    record::build_transactional_batch(1_700_000_000_000, (pid, epoch, seq), &records)
}

/// Produces one batch to `topic`/`partition` (v9, acks=1) with `transactional_id`; returns
/// (error code, base offset).
async fn produce_txn(
    c: &mut Client,
    topic: &str,
    partition: i32,
    transactional_id: Option<&str>,
    batch: Vec<u8>,
) -> anyhow::Result<(i16, i64)> {
    let req: ProduceRequest = produce_request(topic, partition, 1, Bytes::from(batch))
        .with_transactional_id(transactional_id.map(|t| StrBytes::from_string(t.into()).into()));
    let r = c.call(9, &req).await?;
    let p = &r.responses[0].partition_responses[0];
    Ok((p.error_code, p.base_offset))
}

fn marker(
    pid: i64,
    epoch: i16,
    coordinator_epoch: i32,
    commit: bool,
    topics: &[(&str, &[i32])],
) -> WritableTxnMarker {
    WritableTxnMarker::default()
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_transaction_result(commit)
        .with_coordinator_epoch(coordinator_epoch)
        .with_topics(
            topics
                .iter()
                .map(|(name, parts)| {
                    WritableTxnMarkerTopic::default()
                        .with_name(topic_name(name))
                        .with_partition_indexes(parts.to_vec())
                })
                .collect(),
        )
}

/// Sends WriteTxnMarkers v1 and returns, per marker, the (topic, partition, error) triples.
async fn write_markers(
    c: &mut Client,
    markers: Vec<WritableTxnMarker>,
) -> anyhow::Result<Vec<Vec<(String, i32, i16)>>> {
    let r = c
        .call(1, &WriteTxnMarkersRequest::default().with_markers(markers))
        .await?;
    Ok(r.markers
        .iter()
        .map(|m| {
            m.topics
                .iter()
                .flat_map(|t| {
                    t.partitions
                        .iter()
                        .map(|p| (t.name.as_str().to_string(), p.partition_index, p.error_code))
                })
                .collect()
        })
        .collect())
}

async fn fetch(
    c: &mut Client,
    version: i16,
    partition: i32,
    offset: i64,
    isolation: i8,
) -> anyhow::Result<PartitionData> {
    let req: FetchRequest = fetch_request(version, TOPIC, Uuid::nil(), partition, offset, 0, 1)
        .with_isolation_level(isolation);
    only_partition(c.call(version, &req).await?)
}

fn batch_offsets(p: &PartitionData) -> Vec<i64> {
    let bytes = p.records.clone().unwrap_or_default();
    split_batches(&bytes)
        .unwrap()
        .into_iter()
        .map(base_offset_of)
        .collect()
}

fn aborted(p: &PartitionData) -> Option<Vec<(i64, i64)>> {
    p.aborted_transactions.as_ref().map(|a| {
        a.iter()
            .map(|t| (t.producer_id.0, t.first_offset))
            .collect()
    })
}

async fn list_latest(c: &mut Client, partition: i32, isolation: i8) -> anyhow::Result<i64> {
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic_name(TOPIC))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_current_leader_epoch(-1)
                .with_timestamp(-1)])]);
    let r = c.call(7, &req).await?;
    let p = &r.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    Ok(p.offset)
}

async fn describe_producers(
    c: &mut Client,
    partitions: &[i32],
) -> anyhow::Result<Vec<(i32, i16, Vec<ProducerState>)>> {
    let req = DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
        .with_name(topic_name(TOPIC))
        .with_partition_indexes(partitions.to_vec())]);
    let r = c.call(0, &req).await?;
    Ok(r.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.error_code, p.active_producers.clone()))
        .collect())
}

fn producer_state(
    pid: i64,
    epoch: i32,
    last_seq: i32,
    coord: i32,
    txn: i64,
) -> (i64, i32, i32, i32, i64) {
    (pid, epoch, last_seq, coord, txn)
}

fn key(s: &ProducerState) -> (i64, i32, i32, i32, i64) {
    (
        s.producer_id.0,
        s.producer_epoch,
        s.last_sequence,
        s.coordinator_epoch,
        s.current_txn_start_offset,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_and_abort_seen_through_both_isolation_levels() -> anyhow::Result<()> {
    let broker = TestBroker::start_with(NO_VERIFICATION).await?;
    let mut c = broker.connect().await?;
    create_topic(&mut c, TOPIC, 2, &[]).await?;
    let pid = c.init_idempotent_producer().await?;

    // Partition 0: a plain batch at 0, then a transaction at 1..=2. Partition 1: a transaction at 0..=1.
    let plain = protocol_tests::batch(&[b"plain"]);
    assert_eq!(produce_txn(&mut c, TOPIC, 0, None, plain).await?, (0, 0));
    let t0 = txn_batch(pid, 0, 0, &[b"c1", b"c2"]);
    assert_eq!(
        produce_txn(&mut c, TOPIC, 0, Some("tx-1"), t0).await?,
        (0, 1)
    );
    let t1 = txn_batch(pid, 0, 0, &[b"a1", b"a2"]);
    assert_eq!(
        produce_txn(&mut c, TOPIC, 1, Some("tx-1"), t1).await?,
        (0, 0)
    );
    // Transactional records without a transactional id: Kafka refuses the request.
    let orphan = txn_batch(pid, 0, 2, &[b"x"]);
    assert_eq!(
        produce_txn(&mut c, TOPIC, 0, None, orphan).await?,
        (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1)
    );
    // A non-transactional batch from the producer inside its transaction.
    let idem = record::build_batch(0, 1, (pid, 0, 2), &[(None, Some(b"i"))]);
    assert_eq!(
        produce_txn(&mut c, TOPIC, 0, None, idem).await?,
        (INVALID_TXN_STATE, -1)
    );
    // Clients cannot write the transaction log.
    create_topic(&mut c, "__transaction_state", 1, &[]).await?;
    let plain = protocol_tests::batch(&[b"p"]);
    assert_eq!(
        produce_txn(&mut c, "__transaction_state", 0, None, plain)
            .await?
            .0,
        INVALID_TOPIC_EXCEPTION
    );

    // Both transactions open: read_committed stops at the LSO.
    for version in [4i16, 12] {
        let p = fetch(&mut c, version, 0, 0, 1).await?;
        assert_eq!(
            (p.error_code, p.high_watermark, p.last_stable_offset),
            (0, 3, 1)
        );
        assert_eq!(batch_offsets(&p), vec![0], "v{version}");
        assert_eq!(aborted(&p), Some(vec![]), "v{version}");
        let p = fetch(&mut c, version, 0, 0, 0).await?;
        assert_eq!((p.high_watermark, p.last_stable_offset), (3, 1));
        assert_eq!(batch_offsets(&p), vec![0, 1]);
        assert_eq!(aborted(&p), None);
    }
    assert_eq!(list_latest(&mut c, 0, 1).await?, 1);
    assert_eq!(list_latest(&mut c, 0, 0).await?, 3);
    assert_eq!(list_latest(&mut c, 1, 1).await?, 0);
    let described = describe_producers(&mut c, &[0, 1, 7]).await?;
    assert_eq!(described.len(), 3);
    assert_eq!((described[0].0, described[0].1), (0, 0));
    let states: Vec<_> = described[0].2.iter().map(key).collect();
    assert_eq!(states, vec![producer_state(pid, 0, 1, -1, 1)]);
    let states: Vec<_> = described[1].2.iter().map(key).collect();
    assert_eq!(states, vec![producer_state(pid, 0, 1, -1, 0)]);
    assert_eq!(
        (described[2].0, described[2].1, described[2].2.len()),
        (7, UNKNOWN_TOPIC_OR_PARTITION, 0)
    );

    // Commit on partition 0, abort on partition 1; an unknown partition and topic get code 3.
    // Kafka keys results by producer id: both markers share one entry, the topic one topic entry.
    let results = write_markers(
        &mut c,
        vec![
            marker(
                pid,
                0,
                0,
                true,
                &[(TOPIC, &[0, 9]), ("no-such-topic", &[0])],
            ),
            marker(pid, 0, 0, false, &[(TOPIC, &[1])]),
        ],
    )
    .await?;
    assert_eq!(
        results,
        vec![vec![
            (TOPIC.to_string(), 0, 0),
            (TOPIC.to_string(), 9, UNKNOWN_TOPIC_OR_PARTITION),
            (TOPIC.to_string(), 1, 0),
            ("no-such-topic".to_string(), 0, UNKNOWN_TOPIC_OR_PARTITION),
        ]]
    );

    // Partition 0 committed: everything visible, marker at 3, no aborted transactions.
    let p = fetch(&mut c, 12, 0, 0, 1).await?;
    assert_eq!((p.high_watermark, p.last_stable_offset), (4, 4));
    assert_eq!(batch_offsets(&p), vec![0, 1, 3]);
    assert_eq!(aborted(&p), Some(vec![]));
    // Partition 1 aborted: data and marker returned with the aborted transaction listed.
    let p = fetch(&mut c, 12, 1, 0, 1).await?;
    assert_eq!((p.high_watermark, p.last_stable_offset), (3, 3));
    assert_eq!(batch_offsets(&p), vec![0, 2]);
    assert_eq!(aborted(&p), Some(vec![(pid, 0)]));
    let p = fetch(&mut c, 12, 1, 0, 0).await?;
    assert_eq!(p.last_stable_offset, 3);
    assert_eq!(aborted(&p), None);
    assert_eq!(list_latest(&mut c, 0, 1).await?, 4);
    assert_eq!(list_latest(&mut c, 1, 1).await?, 3);
    let described = describe_producers(&mut c, &[0, 1]).await?;
    let states: Vec<Vec<_>> = described
        .iter()
        .map(|d| d.2.iter().map(key).collect())
        .collect();
    assert_eq!(
        states,
        vec![
            vec![producer_state(pid, 0, 1, 0, -1)],
            vec![producer_state(pid, 0, 1, 0, -1)],
        ]
    );

    // Fencing: a marker at a newer coordinator epoch and producer epoch, then older ones.
    let bump = write_markers(&mut c, vec![marker(pid, 1, 3, false, &[(TOPIC, &[1])])]).await?;
    assert_eq!(bump, vec![vec![(TOPIC.to_string(), 1, 0)]]);
    let old_epoch = write_markers(&mut c, vec![marker(pid, 0, 3, true, &[(TOPIC, &[1])])]).await?;
    assert_eq!(
        old_epoch,
        vec![vec![(TOPIC.to_string(), 1, INVALID_PRODUCER_EPOCH)]]
    );
    let fenced = write_markers(&mut c, vec![marker(pid, 1, 2, true, &[(TOPIC, &[1])])]).await?;
    assert_eq!(
        fenced,
        vec![vec![(TOPIC.to_string(), 1, TRANSACTION_COORDINATOR_FENCED)]]
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_committed_long_poll_waits_for_the_marker() -> anyhow::Result<()> {
    let broker = TestBroker::start_with(NO_VERIFICATION).await?;
    let mut c = broker.connect().await?;
    create_topic(&mut c, TOPIC, 1, &[]).await?;
    let pid = c.init_idempotent_producer().await?;
    let mut waiter = broker.connect().await?;
    let req: FetchRequest =
        fetch_request(12, TOPIC, Uuid::nil(), 0, 0, 10_000, 1).with_isolation_level(1);
    let id = waiter.send(12, &req).await?;
    // Transactional data does not satisfy a read_committed long-poll: the LSO stays at 0.
    let t = txn_batch(pid, 0, 0, &[b"v"]);
    assert_eq!(produce_txn(&mut c, TOPIC, 0, Some("tx"), t).await?, (0, 0));
    let early = tokio::time::timeout(
        Duration::from_millis(300),
        waiter.recv::<FetchRequest>(12, id),
    )
    .await;
    assert!(early.is_err(), "answered before the transaction ended");
    let results = write_markers(&mut c, vec![marker(pid, 0, 0, true, &[(TOPIC, &[0])])]).await?;
    assert_eq!(results, vec![vec![(TOPIC.to_string(), 0, 0)]]);
    let p = only_partition(waiter.recv::<FetchRequest>(12, id).await?)?;
    assert_eq!((p.high_watermark, p.last_stable_offset), (2, 2));
    assert_eq!(batch_offsets(&p), vec![0, 1]);
    assert_eq!(aborted(&p), Some(vec![]));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_transactions_and_aborts_survive_a_restart() -> anyhow::Result<()> {
    let mut broker = TestBroker::start_with(NO_VERIFICATION).await?;
    let mut c = broker.connect().await?;
    create_topic(&mut c, TOPIC, 1, &[]).await?;
    let pid = c.init_idempotent_producer().await?;
    let t = txn_batch(pid, 0, 0, &[b"a"]);
    assert_eq!(produce_txn(&mut c, TOPIC, 0, Some("tx"), t).await?, (0, 0));
    write_markers(&mut c, vec![marker(pid, 0, 0, false, &[(TOPIC, &[0])])]).await?;
    let t = txn_batch(pid, 0, 1, &[b"b"]);
    assert_eq!(produce_txn(&mut c, TOPIC, 0, Some("tx"), t).await?, (0, 2));
    drop(c);
    broker.restart(NO_VERIFICATION).await?;
    let mut c = broker.connect().await?;
    let p = fetch(&mut c, 12, 0, 0, 1).await?;
    assert_eq!((p.high_watermark, p.last_stable_offset), (3, 2));
    assert_eq!(batch_offsets(&p), vec![0, 1]);
    assert_eq!(aborted(&p), Some(vec![(pid, 0)]));
    let described = describe_producers(&mut c, &[0]).await?;
    let states: Vec<_> = described[0].2.iter().map(key).collect();
    assert_eq!(states, vec![producer_state(pid, 0, 1, 0, 2)]);
    Ok(())
}
