//! ListOffsets by timestamp at record granularity, as Kafka 4.1: a timestamp T answers the first
//! record whose timestamp is >= T (not its batch's base offset), -3 (MAX_TIMESTAMP) the first
//! record with the largest timestamp, -4 (EARLIEST_LOCAL) the log start offset and -5
//! (LATEST_TIERED) offset -1 without tiered storage; compressed batches (gzip, lz4) too.
//!
//! Set `SLUICE_REFERENCE_KAFKA=127.0.0.1:PORT` (a broker from `scripts/kafka-reference start`) to
//! send the same requests to the real Kafka: its answers must equal Sluice's field by field.

use anyhow::{ensure, Context, Result};
use protocol_tests::{create_topic, list_offsets, produce, Client, TestBroker};
use sluice::record::build::{batch_with_timestamps, compress_batch, Codec};

#[global_allocator]
static ALLOC: sluice::alloc_guard::GuardedAllocator = sluice::alloc_guard::GuardedAllocator;

/// A CreateTime batch whose records carry `timestamps`, compressed with `codec` (0 none, 1 gzip,
/// 3 lz4), with a valid CRC.
fn batch_compressed(timestamps: &[i64], codec: i16) -> Vec<u8> {
    let plain = batch_with_timestamps(0, timestamps, 0);
    match codec {
        0 => plain,
        1 => compress_batch(&plain, Codec::Gzip),
        3 => compress_batch(&plain, Codec::Lz4),
        c => panic!("codec {c}"),
    }
}

/// `(timestamp asked, expected (error, offset, timestamp))`: two batches, [1234, 999999999999]
/// at offsets 0-1 and [5000, 6000] at 2-3.
const CASES: &[(i64, (i16, i64, i64))] = &[
    (999_999_999_999, (0, 1, 999_999_999_999)),
    (1235, (0, 1, 999_999_999_999)),
    (1234, (0, 0, 1234)),
    (0, (0, 0, 1234)),
    // the first batch whose max timestamp reaches 5500 is the first one: its record at offset 1
    (5500, (0, 1, 999_999_999_999)),
    (1_000_000_000_000, (0, -1, -1)),
    (-1, (0, 4, -1)),
    (-2, (0, 0, -1)),
    (-3, (0, 1, 999_999_999_999)),
    (-4, (0, 0, -1)),
    (-5, (0, -1, -1)),
];

/// Compressed batches: gzip [7000, 9000, 8000] at offsets 0-2, lz4 [100, 20000] at 3-4.
const COMPRESSED_CASES: &[(i64, (i16, i64, i64))] = &[
    (8500, (0, 1, 9000)),
    (8000, (0, 1, 9000)),
    (7000, (0, 0, 7000)),
    (9001, (0, 4, 20000)),
    (-3, (0, 4, 20000)),
    (20001, (0, -1, -1)),
];

/// Every case's `(error, offset, timestamp, leader_epoch)` at ListOffsets `version`, over a fresh
/// topic holding `batches` (`(timestamps, codec)`).
async fn answers(
    addr: std::net::SocketAddr,
    version: i16,
    batches: &[(&[i64], i16)],
    cases: &[(i64, (i16, i64, i64))],
) -> Result<Vec<(i16, i64, i64, i32)>> {
    let mut c = Client::connect(addr).await?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let topic = format!("list-offsets-time-{}", nanos % 1_000_000_000);
    create_topic(&mut c, &topic, 1, &[]).await?;
    for &(timestamps, codec) in batches {
        let mut tries = 0;
        loop {
            let p = produce(&mut c, 9, &topic, 0, batch_compressed(timestamps, codec)).await?;
            match p.error_code {
                0 => break,
                // a new topic's leader is not elected yet on Kafka
                3 | 6 if tries < 100 => {
                    tries += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                e => anyhow::bail!("produce error {e}"),
            }
        }
    }
    let mut out = Vec::new();
    for &(ts, _) in cases {
        let p = list_offsets(&mut c, version, &topic, 0, ts).await?;
        out.push((p.error_code, p.offset, p.timestamp, p.leader_epoch));
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamps_find_records_not_batches() -> Result<()> {
    let broker = TestBroker::start().await?;
    let reference = match std::env::var("SLUICE_REFERENCE_KAFKA") {
        Ok(a) if !a.is_empty() => Some(a.parse().context("SLUICE_REFERENCE_KAFKA")?),
        _ => None,
    };
    let plain: &[(&[i64], i16)] = &[(&[1234, 999_999_999_999], 0), (&[5000, 6000], 0)];
    let compressed: &[(&[i64], i16)] = &[(&[7000, 9000, 8000], 1), (&[100, 20000], 3)];
    for version in [9i16, 10] {
        for (batches, cases) in [(plain, CASES), (compressed, COMPRESSED_CASES)] {
            let got = answers(broker.addr, version, batches, cases).await?;
            for (&(ts, want), &(error, offset, timestamp, _)) in cases.iter().zip(&got) {
                ensure!(
                    (error, offset, timestamp) == want,
                    "v{version} timestamp {ts}: got {:?}, want {want:?}",
                    (error, offset, timestamp)
                );
            }
            if let Some(addr) = reference {
                let kafka = answers(addr, version, batches, cases)
                    .await
                    .context("reference Kafka")?;
                for ((&(ts, _), s), k) in cases.iter().zip(&got).zip(&kafka) {
                    ensure!(
                        s == k,
                        "v{version} timestamp {ts}: Sluice {s:?}, Kafka {k:?}"
                    );
                }
            }
        }
    }
    broker.shutdown().await;
    Ok(())
}
