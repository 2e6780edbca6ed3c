//! Fetch answers compared with Kafka 4.1 where clients look at the bytes: the records field of a
//! partition with an error (empty, never null, at every version), the response- and
//! partition-level byte limits (KIP-74), file ranges for large first batches under small limits,
//! and a damaged batch in a sealed segment.
//!
//! The responses are decoded by a raw reader (`RawPartition`), not the crate, which maps a null
//! records field and an empty one to the same value.
//!
//! Set `SLUICE_REFERENCE_KAFKA=127.0.0.1:PORT` (a broker from `scripts/kafka-reference start`) to
//! run the wire checks against the real Kafka as well: the same assertions must hold there.

use anyhow::{ensure, Context, Result};
use bytes::{Buf, Bytes};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest};
use protocol_tests::{
    api_versions_request, create_topic, encode_request, metadata, produce, split_batches,
    topic_name, Client, TestBroker, Uuid,
};
use sluice::record;

#[global_allocator]
static ALLOC: sluice::alloc_guard::GuardedAllocator = sluice::alloc_guard::GuardedAllocator;

/// The brokers to check: Sluice (in-process) and, when configured, the reference Kafka.
async fn brokers() -> Result<(TestBroker, Option<std::net::SocketAddr>)> {
    let sluice = TestBroker::start().await?;
    let reference = match std::env::var("SLUICE_REFERENCE_KAFKA") {
        Ok(a) if !a.is_empty() => Some(a.parse().context("SLUICE_REFERENCE_KAFKA")?),
        _ => None,
    };
    Ok((sluice, reference))
}

/// A topic name unique per run, so a long-lived reference broker can be reused.
fn unique(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{name}-{}", nanos % 1_000_000_000)
}

/// One partition of a Fetch response as it is on the wire.
#[derive(Debug)]
struct RawPartition {
    index: i32,
    error: i16,
    high_watermark: i64,
    last_stable_offset: i64,
    log_start_offset: i64,
    /// `None` for a null records field.
    records: Option<Bytes>,
}

struct Reader {
    buf: Bytes,
    flexible: bool,
}

impl Reader {
    fn need(&self, n: usize) -> Result<()> {
        ensure!(self.buf.remaining() >= n, "response ends early");
        Ok(())
    }
    fn i16(&mut self) -> Result<i16> {
        self.need(2)?;
        Ok(self.buf.get_i16())
    }
    fn i32(&mut self) -> Result<i32> {
        self.need(4)?;
        Ok(self.buf.get_i32())
    }
    fn i64(&mut self) -> Result<i64> {
        self.need(8)?;
        Ok(self.buf.get_i64())
    }
    fn uvarint(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for shift in (0..35).step_by(7) {
            self.need(1)?;
            let b = self.buf.get_u8();
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        anyhow::bail!("varint too long")
    }
    fn skip(&mut self, n: usize) -> Result<()> {
        self.need(n)?;
        self.buf.advance(n);
        Ok(())
    }
    /// Array or bytes length; `None` for null.
    fn len(&mut self) -> Result<Option<usize>> {
        if self.flexible {
            let n = self.uvarint()?;
            Ok(n.checked_sub(1).map(|n| n as usize))
        } else {
            let n = self.i32()?;
            Ok(usize::try_from(n).ok())
        }
    }
    fn tagged_fields(&mut self) -> Result<()> {
        if self.flexible {
            for _ in 0..self.uvarint()? {
                self.uvarint()?;
                let size = self.uvarint()? as usize;
                self.skip(size)?;
            }
        }
        Ok(())
    }
}

/// Decodes a whole Fetch response frame (after its size prefix) into its partitions, in order.
/// Also returns the top-level error code.
fn decode_fetch(version: i16, frame: Bytes) -> Result<(i16, Vec<RawPartition>)> {
    let flexible = version >= 12;
    let mut r = Reader {
        buf: frame,
        flexible,
    };
    r.i32()?; // correlation id
    r.tagged_fields()?; // response header v1
    r.i32()?; // throttle
    let top_error = if version >= 7 {
        let e = r.i16()?;
        r.i32()?;
        e
    } else {
        0
    };
    let mut out = Vec::new();
    for _ in 0..r.len()?.context("null topics")? {
        if version >= 13 {
            r.skip(16)?;
        } else {
            let n = if flexible {
                r.len()?.context("null name")?
            } else {
                r.i16()? as usize
            };
            r.skip(n)?;
        }
        for _ in 0..r.len()?.context("null partitions")? {
            let index = r.i32()?;
            let error = r.i16()?;
            let high_watermark = r.i64()?;
            let last_stable_offset = r.i64()?;
            let log_start_offset = if version >= 5 { r.i64()? } else { -1 };
            if let Some(n) = r.len()? {
                for _ in 0..n {
                    r.skip(16)?;
                    r.tagged_fields()?;
                }
            }
            if version >= 11 {
                r.i32()?;
            }
            let records = match r.len()? {
                None => None,
                Some(n) => {
                    r.need(n)?;
                    Some(r.buf.split_to(n))
                }
            };
            r.tagged_fields()?;
            out.push(RawPartition {
                index,
                error,
                high_watermark,
                last_stable_offset,
                log_start_offset,
                records,
            });
        }
        r.tagged_fields()?;
    }
    r.tagged_fields()?;
    ensure!(!r.buf.has_remaining(), "{} bytes left", r.buf.remaining());
    Ok((top_error, out))
}

/// Fetch versions the broker advertises.
async fn fetch_versions(c: &mut Client) -> Result<(i16, i16)> {
    let r = c.call(3, &api_versions_request()).await?;
    let k = r
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::Fetch as i16)
        .context("no Fetch in ApiVersions")?;
    Ok((k.min_version, k.max_version))
}

/// Sends `req` at `version` and decodes the answer with the raw reader.
async fn raw_fetch(
    c: &mut Client,
    version: i16,
    req: &FetchRequest,
) -> Result<(i16, Vec<RawPartition>)> {
    let frame = encode_request(1000 + i32::from(version), version, req)?;
    c.send_raw(&frame).await?;
    let body = c.read_frame().await?;
    decode_fetch(version, body)
}

/// A Fetch of several partitions of one topic: `(partition, offset, partition_max_bytes)`.
fn fetch_of(
    version: i16,
    topic: &str,
    id: Uuid,
    max_bytes: i32,
    parts: &[(i32, i64, i32)],
) -> FetchRequest {
    let t = if version >= 13 {
        FetchTopic::default().with_topic_id(id)
    } else {
        FetchTopic::default().with_topic(topic_name(topic))
    };
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(max_bytes)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(vec![t.with_partitions(
            parts
                .iter()
                .map(|&(p, offset, max)| {
                    FetchPartition::default()
                        .with_partition(p)
                        .with_current_leader_epoch(-1)
                        .with_fetch_offset(offset)
                        .with_log_start_offset(-1)
                        .with_partition_max_bytes(max)
                })
                .collect(),
        )])
}

/// `n` records of `len` bytes in one batch, bytes depending on `seed`.
fn batch_of(seed: usize, n: usize, len: usize) -> Vec<u8> {
    let values: Vec<Vec<u8>> = (0..n)
        .map(|r| {
            (0..len)
                .map(|i| ((seed * 31 + r * 7 + i) % 251) as u8)
                .collect()
        })
        .collect();
    let records: Vec<_> = values.iter().map(|v| (None, Some(&v[..]))).collect();
    record::build_batch(0, 1_700_000_000_000, (-1, -1, -1), &records)
}

/// Produces one batch (v9, acks=1), retrying while a new topic's leader is not elected yet (Kafka
/// answers NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION for a moment after CreateTopics).
async fn produce_batch(c: &mut Client, topic: &str, partition: i32, batch: Vec<u8>) -> Result<i64> {
    for _ in 0..100 {
        let p = produce(c, 9, topic, partition, batch.clone()).await?;
        match p.error_code {
            0 => return Ok(p.base_offset),
            3 | 6 => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
            e => anyhow::bail!("produce to {topic}-{partition}: error {e}"),
        }
    }
    anyhow::bail!("produce to {topic}-{partition}: no leader")
}

async fn topic_id(c: &mut Client, topic: &str) -> Result<Uuid> {
    Ok(metadata(c, topic).await?.topics[0].topic_id)
}

/// Item 14.1: an errored partition carries an EMPTY records field (length 0: i32 0 below v12,
/// compact length 1 from v12), never null, at every advertised version. OFFSET_OUT_OF_RANGE, an
/// unknown partition and (v13+) an unknown topic id all carry Kafka's -1 offsets.
async fn error_partitions_carry_empty_records(addr: std::net::SocketAddr) -> Result<()> {
    let mut c = Client::connect(addr).await?;
    let topic = unique("fetch-error-records");
    create_topic(&mut c, &topic, 1, &[]).await?;
    produce_batch(&mut c, &topic, 0, batch_of(1, 3, 10)).await?;
    let id = topic_id(&mut c, &topic).await?;
    let (min, max) = fetch_versions(&mut c).await?;
    ensure!(min <= 4 && max >= 12, "Fetch {min}..={max}");
    for version in 4..=max {
        // partition 0 out of range, partition 7 unknown
        let mut req = fetch_of(
            version,
            &topic,
            id,
            1 << 20,
            &[(0, 100, 1 << 20), (7, 0, 1 << 20)],
        );
        let mut want = vec![1i16, 3];
        if version >= 13 {
            // a topic id the broker does not know
            let other = fetch_of(version, "", Uuid::from_u128(7), 1 << 20, &[(0, 0, 1 << 20)]);
            req.topics.extend(other.topics);
            want.push(100);
        }
        let (top, mut parts) = raw_fetch(&mut c, version, &req).await?;
        ensure!(top == 0, "v{version}: top-level error {top}");
        ensure!(parts.len() == want.len(), "v{version}: {parts:?}");
        // A leader epoch newer than the broker's: UNKNOWN_LEADER_EPOCH (v9+ carries the epoch).
        if version >= 9 {
            let mut req = fetch_of(version, &topic, id, 1 << 20, &[(0, 0, 1 << 20)]);
            req.topics[0].partitions[0].current_leader_epoch = 5;
            let (_, epoch_parts) = raw_fetch(&mut c, version, &req).await?;
            ensure!(
                epoch_parts.len() == 1 && epoch_parts[0].error == 75,
                "v{version}: {epoch_parts:?}"
            );
            parts.extend(epoch_parts);
        }
        // Kafka may regroup errored partitions (an unknown topic id's come between a known topic's),
        // so compare the set of (partition, error) pairs.
        let mut got: Vec<(i32, i16)> = parts.iter().map(|p| (p.index, p.error)).collect();
        got.sort_unstable();
        got.retain(|&(_, e)| e != 75);
        let mut want_pairs: Vec<(i32, i16)> = [0, 7, 0].into_iter().zip(want).collect();
        want_pairs.sort_unstable();
        ensure!(
            got == want_pairs,
            "v{version}: errors {got:?}, want {want_pairs:?}"
        );
        for p in &parts {
            let records = p
                .records
                .as_ref()
                .with_context(|| format!("v{version} partition {}: null records field", p.index))?;
            ensure!(
                records.is_empty(),
                "v{version}: {} record bytes",
                records.len()
            );
            ensure!(
                (p.high_watermark, p.last_stable_offset, p.log_start_offset) == (-1, -1, -1),
                "v{version} partition {}: offsets {:?}",
                p.index,
                (p.high_watermark, p.last_stable_offset, p.log_start_offset)
            );
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_partitions_carry_an_empty_records_field() -> Result<()> {
    let (sluice, reference) = brokers().await?;
    if let Some(addr) = reference {
        error_partitions_carry_empty_records(addr)
            .await
            .context("reference Kafka")?;
    }
    error_partitions_carry_empty_records(sluice.addr).await?;
    sluice.shutdown().await;
    Ok(())
}

/// Whole batches at the start of `records` and the bytes of a partial batch after them (Kafka may
/// end a read with a partial batch, which clients drop; Sluice never sends one).
fn whole_batches(records: &[u8]) -> (usize, usize) {
    let mut at = 0;
    let mut n = 0;
    while records.len() - at >= 12 {
        let len = i32::from_be_bytes([
            records[at + 8],
            records[at + 9],
            records[at + 10],
            records[at + 11],
        ]);
        let total = 12 + len.max(0) as usize;
        if at + total > records.len() {
            break;
        }
        at += total;
        n += 1;
    }
    (n, records.len() - at)
}

const LIMIT_PARTITIONS: i32 = 6;
const LIMIT_BATCHES: usize = 4;
/// ~100 KB per batch, ~400 KB per partition.
const LIMIT_RECORDS: usize = 10;
const LIMIT_VALUE: usize = 10_000;

/// `(whole batches, partial bytes)` of each partition of the answer to `req`.
async fn batches_per_partition(
    c: &mut Client,
    version: i16,
    req: FetchRequest,
) -> Result<Vec<(usize, usize)>> {
    let (top, parts) = raw_fetch(c, version, &req).await?;
    ensure!(top == 0, "top-level error {top}");
    let mut out = Vec::new();
    for p in parts {
        ensure!(p.error == 0, "partition {} error {}", p.index, p.error);
        out.push(whole_batches(&p.records.unwrap_or_default()));
    }
    Ok(out)
}

/// Item 14.2 (KIP-74): `max_bytes` and `partition_max_bytes` are honoured in request order; the
/// first batch of the first non-empty partition is returned whole even when larger than both.
async fn fetch_honours_byte_limits(addr: std::net::SocketAddr, is_sluice: bool) -> Result<()> {
    let mut c = Client::connect(addr).await?;
    let topic = unique("fetch-limits");
    create_topic(&mut c, &topic, LIMIT_PARTITIONS, &[]).await?;
    let mut batch_len = 0;
    for p in 0..LIMIT_PARTITIONS {
        for b in 0..LIMIT_BATCHES {
            let batch = batch_of(p as usize * 10 + b, LIMIT_RECORDS, LIMIT_VALUE);
            batch_len = batch.len();
            produce_batch(&mut c, &topic, p, batch).await?;
        }
    }
    let id = topic_id(&mut c, &topic).await?;
    let end = (LIMIT_BATCHES * LIMIT_RECORDS) as i64;
    let all = |offset: &dyn Fn(i32) -> i64, max: i32| -> Vec<(i32, i64, i32)> {
        (0..LIMIT_PARTITIONS).map(|p| (p, offset(p), max)).collect()
    };
    for version in [4i16, 11, 12, 16] {
        let fetch = |max_bytes: i32, parts: Vec<(i32, i64, i32)>| {
            fetch_of(version, &topic, id, max_bytes, &parts)
        };
        let bytes = |got: &[(usize, usize)]| -> usize {
            got.iter()
                .map(|&(n, partial)| n * batch_len + partial)
                .sum()
        };

        // max_bytes 1,000,000 over 6 x ~400 KB: the first two partitions whole, the third what
        // fits (whole batches from Sluice), the rest nothing.
        let got =
            batches_per_partition(&mut c, version, fetch(1_000_000, all(&|_| 0, 1 << 20))).await?;
        ensure!(
            bytes(&got) <= 1_000_000,
            "v{version}: {} bytes {got:?}",
            bytes(&got)
        );
        ensure!(
            got[0].0 == LIMIT_BATCHES && got[1].0 == LIMIT_BATCHES,
            "v{version}: {got:?}"
        );
        ensure!(got[2].0 == 1, "v{version}: {got:?}");
        ensure!(got[3..].iter().all(|&g| g == (0, 0)), "v{version}: {got:?}");
        if is_sluice {
            ensure!(
                got.iter().all(|&(_, partial)| partial == 0),
                "v{version}: {got:?}"
            );
        }

        // max_bytes below the first batch: exactly that batch, nothing else.
        let got =
            batches_per_partition(&mut c, version, fetch(50_000, all(&|_| 0, 1 << 20))).await?;
        ensure!(got[0] == (1, 0), "v{version}: {got:?}");
        ensure!(got[1..].iter().all(|&g| g == (0, 0)), "v{version}: {got:?}");

        // partition_max_bytes 150,000: one batch per partition (plus, from Kafka, a partial one).
        let got =
            batches_per_partition(&mut c, version, fetch(1_000_000, all(&|_| 0, 150_000))).await?;
        for (p, &(n, partial)) in got.iter().enumerate() {
            ensure!(n == 1, "v{version} partition {p}: {got:?}");
            ensure!(n * batch_len + partial <= 150_000, "v{version}: {got:?}");
            if is_sluice {
                ensure!(partial == 0, "v{version}: {got:?}");
            }
        }

        // partition_max_bytes below the first batch: each partition's first batch is whole only
        // for the first non-empty partition (partition 0 is read at its end here: empty).
        let at_end = |p: i32| if p == 0 { end } else { 0 };
        let got =
            batches_per_partition(&mut c, version, fetch(1 << 20, all(&at_end, 50_000))).await?;
        ensure!(got[0] == (0, 0) && got[1] == (1, 0), "v{version}: {got:?}");
        for (p, &(n, partial)) in got.iter().enumerate().skip(2) {
            ensure!(n == 0, "v{version} partition {p}: {got:?}");
            ensure!(partial <= 50_000, "v{version}: {got:?}");
            if is_sluice {
                ensure!(partial == 0, "v{version}: {got:?}");
            }
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_honours_max_bytes_and_partition_max_bytes() -> Result<()> {
    let (sluice, reference) = brokers().await?;
    if let Some(addr) = reference {
        fetch_honours_byte_limits(addr, false)
            .await
            .context("reference Kafka")?;
    }
    fetch_honours_byte_limits(sluice.addr, true).await?;
    sluice.shutdown().await;
    Ok(())
}

/// Item 13.4: a damaged batch in a sealed segment. The intact batches before it are served as
/// usual, a fetch at it answers CORRUPT_MESSAGE (Kafka's answer; the broker keeps serving), every
/// such read is counted and the damage is remembered once, and what follows the damage is
/// readable where the offset index points past it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_batch_in_a_sealed_segment_is_served_up_to_the_damage() -> Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    let topic = "damaged";
    create_topic(&mut c, topic, 1, &[("segment.bytes", "1048576")]).await?;
    // 14 batches of ~100 KB: the first segment (sealed) holds 10 of them
    let mut batches = Vec::new();
    for b in 0..14 {
        let batch = batch_of(b, LIMIT_RECORDS, LIMIT_VALUE);
        produce_batch(&mut c, topic, 0, batch.clone()).await?;
        batches.push(batch);
    }
    let seg = broker
        .dir
        .path()
        .join(format!("{topic}-0"))
        .join("00000000000000000000.log");
    let sealed_len = std::fs::metadata(&seg)?.len() as usize;
    let len = batches[0].len();
    ensure!(
        sealed_len >= 10 * len && sealed_len < 11 * len,
        "{sealed_len}"
    );
    // batch 5 (offsets 50..59): its length field becomes 5, shorter than a header
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(&seg)?;
        f.write_all_at(&5i32.to_be_bytes(), (5 * len + 8) as u64)?;
    }
    let id = topic_id(&mut c, topic).await?;
    let per_batch = LIMIT_RECORDS as i64;

    // From the start: batches 0..5 come back, whole, then the fetch at the damage answers 2.
    let mut offset = 0;
    let mut got = Vec::new();
    loop {
        let req = fetch_of(12, topic, id, 1 << 20, &[(0, offset, 150_000)]);
        let (_, parts) = raw_fetch(&mut c, 12, &req).await?;
        let p = &parts[0];
        if p.error != 0 {
            ensure!(p.error == 2, "error {} at {offset}", p.error);
            ensure!(p.records.as_ref().is_some_and(|r| r.is_empty()), "{p:?}");
            break;
        }
        let records = p.records.clone().unwrap_or_default();
        ensure!(!records.is_empty(), "no progress at {offset}");
        let n = split_batches(&records)?.len() as i64;
        got.extend_from_slice(&records);
        offset += n * per_batch;
    }
    ensure!(offset == 5 * per_batch, "stopped at {offset}");
    let stored = std::fs::read(&seg)?;
    ensure!(got == stored[..5 * len], "intact batches as stored");

    let partition = broker
        .broker()?
        .replicas
        .partition(topic, 0)
        .context("partition")?;
    let before = partition.read_damage().reads();
    for at in [50, 55, 59, 50, 50] {
        let req = fetch_of(16, topic, id, 1 << 20, &[(0, at, 1 << 20)]);
        let (_, parts) = raw_fetch(&mut c, 16, &req).await?;
        ensure!(parts[0].error == 2, "at {at}: {:?}", parts[0]);
    }
    ensure!(partition.read_damage().reads() == before + 5);
    ensure!(
        partition.read_damage().distinct() == 1,
        "one damage, remembered once"
    );

    // Past the damage (the index has an entry at batch 6's last offset), the rest is readable.
    let req = fetch_of(12, topic, id, 1 << 20, &[(0, 69, 1 << 20)]);
    let (_, parts) = raw_fetch(&mut c, 12, &req).await?;
    ensure!(parts[0].error == 0, "{:?}", parts[0].error);
    let records = parts[0].records.clone().unwrap_or_default();
    ensure!(
        records[..] == stored[6 * len..],
        "rest of the sealed segment"
    );
    // The connection and the broker are fine.
    c.api_versions_ok().await?;
    broker.shutdown().await;
    Ok(())
}

/// What Kafka answers at a damaged batch of a sealed segment (item 13.4's reference): needs the
/// reference broker's data directory in `SLUICE_REFERENCE_KAFKA_DATA` (`<dir>/data` of
/// `scripts/kafka-reference start --dir <dir>`) besides `SLUICE_REFERENCE_KAFKA`; skipped without.
/// Kafka answers CORRUPT_MESSAGE at the damage (and keeps serving), the data before and after it
/// stays readable: the same answers as Sluice's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_kafka_answers_corrupt_message_at_a_damaged_batch() -> Result<()> {
    let (Ok(addr), Ok(data)) = (
        std::env::var("SLUICE_REFERENCE_KAFKA"),
        std::env::var("SLUICE_REFERENCE_KAFKA_DATA"),
    ) else {
        return Ok(());
    };
    let mut c = Client::connect(addr.parse()?).await?;
    let topic = unique("damaged");
    create_topic(&mut c, &topic, 1, &[("segment.bytes", "1048576")]).await?;
    let mut len = 0;
    for b in 0..14 {
        let batch = batch_of(b, LIMIT_RECORDS, LIMIT_VALUE);
        len = batch.len();
        produce_batch(&mut c, &topic, 0, batch).await?;
    }
    let seg = std::path::Path::new(&data)
        .join(format!("{topic}-0"))
        .join("00000000000000000000.log");
    let sealed_len = std::fs::metadata(&seg)?.len() as usize;
    ensure!(
        sealed_len >= 10 * len && sealed_len < 11 * len,
        "{sealed_len}"
    );
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(&seg)?;
        f.write_all_at(&5i32.to_be_bytes(), (5 * len + 8) as u64)?;
    }
    let id = topic_id(&mut c, &topic).await?;
    for (at, want) in [(0, 0), (40, 0), (50, 2), (55, 2), (50, 2), (69, 0)] {
        let req = fetch_of(12, &topic, id, 1 << 20, &[(0, at, 150_000)]);
        let (_, parts) = raw_fetch(&mut c, 12, &req).await?;
        ensure!(parts[0].error == want, "Kafka at {at}: {:?}", parts[0]);
        let records = parts[0].records.clone().unwrap_or_default();
        ensure!(
            (want == 0) != records.is_empty(),
            "Kafka at {at}: {:?}",
            parts[0]
        );
    }
    c.api_versions_ok().await?;
    Ok(())
}
