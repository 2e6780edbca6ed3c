//! Fetch reads large enough to be sent with `sendfile` (file ranges) and small ones (bytes in
//! memory) return exactly the bytes the log holds: a consumer loop at several `partition_max_bytes`
//! (below and above `FILE_RECORDS_MIN_BYTES`), Fetch v4/v11/v12/v13/v18, read_uncommitted and
//! read_committed (an aborted transaction and one still open), over several 1 MiB segments, with
//! small and large batches mixed. The expected bytes are the segment files themselves, and the data
//! batches are compared with what was produced.

use bytes::Bytes;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{FetchRequest, ProduceRequest, ProducerId, WriteTxnMarkersRequest};
use kafka_protocol::protocol::StrBytes;
use protocol_tests::{
    base_offset_of, create_topic, fetch_request, metadata, only_partition, produce_request,
    split_batches, topic_name, Client, TestBroker,
};
use sluice::config::Value;
use sluice::log::{Records, FILE_RECORDS_MIN_BYTES};
use sluice::record;

#[global_allocator]
static ALLOC: sluice::alloc_guard::GuardedAllocator = sluice::alloc_guard::GuardedAllocator;

const TOPIC: &str = "zero-copy";

/// Markers are written by hand (WriteTxnMarkers), so the coordinator's verification is off.
const NO_VERIFICATION: &[(&str, Value)] = &[(
    "transaction.partition.verification.enable",
    Value::Bool(false),
)];

/// Produces one batch (v9, acks=1); returns its base offset.
async fn produce(c: &mut Client, txn_id: Option<&str>, batch: Vec<u8>) -> anyhow::Result<i64> {
    let req: ProduceRequest = produce_request(TOPIC, 0, 1, Bytes::from(batch))
        .with_transactional_id(txn_id.map(|t| StrBytes::from_string(t.into()).into()));
    let r = c.call(9, &req).await?;
    let p = &r.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 0);
    Ok(p.base_offset)
}

/// `n` records of `len` bytes each, every byte depending on (seed, record, position).
fn values(seed: usize, n: usize, len: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|r| {
            (0..len)
                .map(|i| ((seed * 131 + r * 17 + i * 7) % 251) as u8)
                .collect()
        })
        .collect()
}

fn plain(seed: usize, n: usize, len: usize) -> Vec<u8> {
    let v = values(seed, n, len);
    let records: Vec<_> = v.iter().map(|v| (None, Some(&v[..]))).collect();
    record::build_batch(0, 1_700_000_000_000, (-1, -1, -1), &records)
}

fn transactional(pid: i64, seq: i32, seed: usize, n: usize, len: usize) -> Vec<u8> {
    let v = values(seed, n, len);
    let records: Vec<_> = v.iter().map(|v| (None, Some(&v[..]))).collect();
    record::build_transactional_batch(1_700_000_000_000, (pid, 0, seq), &records)
}

/// The partition's segment files concatenated: every batch the log holds, as stored.
fn log_bytes(broker: &TestBroker) -> anyhow::Result<Vec<u8>> {
    let dir = broker.dir.path().join(format!("{TOPIC}-0"));
    let mut logs: Vec<_> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    assert!(logs.len() >= 3, "several segments: {logs:?}");
    let mut out = Vec::new();
    for p in logs {
        out.extend_from_slice(&std::fs::read(p)?);
    }
    Ok(out)
}

/// Consumes from offset 0 until `end` with Fetch `version`; returns the record bytes received and
/// the aborted transactions reported (deduplicated, in order).
async fn consume(
    c: &mut Client,
    version: i16,
    isolation: i8,
    partition_max_bytes: i32,
    end: i64,
) -> anyhow::Result<(Vec<u8>, Vec<(i64, i64)>)> {
    let topic_id = metadata(c, TOPIC).await?.topics[0].topic_id;
    let mut got = Vec::new();
    let mut aborted: Vec<(i64, i64)> = Vec::new();
    let mut offset = 0;
    while offset < end {
        let mut req: FetchRequest = fetch_request(version, TOPIC, topic_id, 0, offset, 0, 1)
            .with_isolation_level(isolation);
        req.topics[0].partitions[0].partition_max_bytes = partition_max_bytes;
        let p = only_partition(c.call(version, &req).await?)?;
        assert_eq!(p.error_code, 0, "v{version} at {offset}");
        if isolation == 1 {
            for t in p.aborted_transactions.as_deref().unwrap_or_default() {
                let t = (t.producer_id.0, t.first_offset);
                if !aborted.contains(&t) {
                    aborted.push(t);
                }
            }
        } else {
            assert!(p.aborted_transactions.is_none());
        }
        let records = p.records.unwrap_or_default();
        let batches = split_batches(&records)?;
        assert!(!batches.is_empty(), "v{version}: no progress at {offset}");
        let last = batches[batches.len() - 1];
        let h = record::BatchHeader::parse(last)?;
        offset = h.last_offset() + 1;
        got.extend_from_slice(&records);
    }
    Ok((got, aborted))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_and_small_fetches_return_the_log_bytes_exactly() -> anyhow::Result<()> {
    let broker = TestBroker::start_with(NO_VERIFICATION).await?;
    let mut c = broker.connect().await?;
    create_topic(&mut c, TOPIC, 1, &[("segment.bytes", "1048576")]).await?;
    let pid_aborted = c.init_idempotent_producer().await?;
    let pid_open = c.init_idempotent_producer().await?;

    // ~3.4 MiB: runs of ~30 KiB batches (skipped by the header walk) and of small batches (read
    // in chunks), an aborted ~30 KiB transaction in the middle, an open transaction at the end.
    let mut data: Vec<Vec<u8>> = Vec::new();
    let mut aborted_first = -1;
    let mut seed = 0;
    for round in 0..3 {
        for _ in 0..30 {
            seed += 1;
            let b = plain(seed, 30, 1000);
            produce(&mut c, None, b.clone()).await?;
            data.push(b);
        }
        for _ in 0..60 {
            seed += 1;
            let b = plain(seed, 3, 40);
            produce(&mut c, None, b.clone()).await?;
            data.push(b);
        }
        if round == 1 {
            let b = transactional(pid_aborted, 0, 999, 30, 1000);
            aborted_first = produce(&mut c, Some("tx-a"), b.clone()).await?;
            data.push(b);
            let marker = WritableTxnMarker::default()
                .with_producer_id(ProducerId(pid_aborted))
                .with_producer_epoch(0)
                .with_transaction_result(false)
                .with_coordinator_epoch(0)
                .with_topics(vec![WritableTxnMarkerTopic::default()
                    .with_name(topic_name(TOPIC))
                    .with_partition_indexes(vec![0])]);
            let r = c
                .call(
                    1,
                    &WriteTxnMarkersRequest::default().with_markers(vec![marker]),
                )
                .await?;
            assert_eq!(r.markers[0].topics[0].partitions[0].error_code, 0);
        }
    }
    let open = transactional(pid_open, 0, 7, 30, 1000);
    let open_first = produce(&mut c, Some("tx-o"), open.clone()).await?;
    data.push(open);
    for _ in 0..10 {
        seed += 1;
        let b = plain(seed, 30, 1000);
        produce(&mut c, None, b.clone()).await?;
        data.push(b);
    }

    let stored = log_bytes(&broker)?;
    let batches = split_batches(&stored)?;
    let last = record::BatchHeader::parse(batches[batches.len() - 1])?;
    let high_watermark = last.last_offset() + 1;
    // The data batches as stored are the produced ones (base offset and leader epoch stamped).
    let stored_data: Vec<&[u8]> = batches
        .iter()
        .copied()
        .filter(|b| record::BatchHeader::parse(b).is_ok_and(|h| !h.is_control()))
        .collect();
    assert_eq!(stored_data.len(), data.len());
    assert_eq!(aborted_first, 2 * (30 * 30 + 60 * 3));
    for (s, p) in stored_data.iter().zip(&data) {
        assert_eq!(s[8..12], p[8..12]);
        assert_eq!(s[16..], p[16..]);
    }
    // Below the open transaction's first offset (the LSO).
    let committed_len: usize = batches
        .iter()
        .take_while(|b| base_offset_of(b) < open_first)
        .map(|b| b.len())
        .sum();
    let committed = &stored[..committed_len];

    // The fetch path really hands out both kinds.
    let partition = broker
        .broker()?
        .replicas
        .partition(TOPIC, 0)
        .expect("partition");
    let big = partition.fetch_records(0, 10 << 20, false, true)?;
    assert!(matches!(big.records, Records::File(_)), "{:?}", big.records);
    let small = partition.fetch_records(0, FILE_RECORDS_MIN_BYTES - 1, false, true)?;
    assert!(matches!(small.records, Records::Memory(_)));

    for version in [4i16, 11, 12, 13, 18] {
        for max in [1, 20_000, 100_000, 10 << 20] {
            let (got, aborted) = consume(&mut c, version, 0, max, high_watermark).await?;
            assert!(aborted.is_empty());
            assert_eq!(got.len(), stored.len(), "v{version} max {max}");
            assert!(got == stored, "v{version} max {max}: bytes differ");

            let (got, aborted) = consume(&mut c, version, 1, max, open_first).await?;
            assert_eq!(got.len(), committed.len(), "v{version} max {max} committed");
            assert!(
                got == committed,
                "v{version} max {max}: committed bytes differ"
            );
            assert_eq!(
                aborted,
                vec![(pid_aborted, aborted_first)],
                "v{version} max {max}"
            );
        }
    }

    // From the middle of a large batch: that batch comes back whole, from its start.
    let topic_id = metadata(&mut c, TOPIC).await?.topics[0].topic_id;
    let r = c
        .call(18, &fetch_request(18, TOPIC, topic_id, 0, 45, 0, 1))
        .await?;
    let records = only_partition(r)?.records.unwrap_or_default();
    let first = split_batches(&records)?[0];
    assert_eq!(base_offset_of(first), 30);
    assert_eq!(first, batches[1]);
    broker.shutdown().await;
    Ok(())
}
