//! Produce refuses batches Kafka's LogValidator refuses (issue 13, item 2): per partition, with
//! INVALID_RECORD / INVALID_TIMESTAMP, `error_message` and `record_errors` (v8+), and nothing of a
//! refused batch reaches the log: the log end offset stays and Fetch returns exactly the good
//! batches produced before.

use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::ProduceRequest;
use protocol_tests::{
    batch, create_topic, fetch_request, list_offsets, only_partition, produce, split_batches,
    topic_name, Client, TestBroker,
};
use sluice::record::build::{compress_batch, with_section, Codec};
use sluice::record::{self, compute_crc};

#[global_allocator]
static ALLOC: sluice::alloc_guard::GuardedAllocator = sluice::alloc_guard::GuardedAllocator;

const INVALID_TIMESTAMP: i16 = 32;
const INVALID_RECORD: i16 = 87;

/// `b` with its header's record count and lastOffsetDelta replaced (CRC recomputed).
fn claiming(mut b: Vec<u8>, count: i32, last_offset_delta: i32) -> Vec<u8> {
    b[record::OFFSET_RECORD_COUNT..record::OFFSET_RECORD_COUNT + 4]
        .copy_from_slice(&count.to_be_bytes());
    b[record::OFFSET_LAST_OFFSET_DELTA..record::OFFSET_LAST_OFFSET_DELTA + 4]
        .copy_from_slice(&last_offset_delta.to_be_bytes());
    let crc = compute_crc(&b);
    b[record::OFFSET_CRC..record::OFFSET_CRC + 4].copy_from_slice(&crc.to_be_bytes());
    b
}

fn noise(n: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

async fn log_end(c: &mut Client, topic: &str) -> anyhow::Result<i64> {
    let r = list_offsets(c, 7, topic, 0, -1).await?;
    assert_eq!(r.error_code, 0);
    Ok(r.offset)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_batches_answer_kafkas_errors_and_append_nothing() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    let t = create_topic(&mut c, "v", 1, &[]).await?;
    create_topic(&mut c, "c", 1, &[("cleanup.policy", "compact")]).await?;

    // Good batches first: three plain records, then three under zstd.
    let good = batch(&[b"a", b"b", b"c"]);
    assert_eq!(
        produce(&mut c, 9, "v", 0, good.clone()).await?.base_offset,
        0
    );
    let zstd = compress_batch(&batch(&[b"d", b"e", b"f"]), Codec::Zstd);
    let r = produce(&mut c, 9, "v", 0, zstd.clone()).await?;
    assert_eq!((r.error_code, r.base_offset), (0, 3));

    let three = batch(&[b"x", b"y", b"z"]);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "1000 claimed, 3 present",
            claiming(three.clone(), 1000, 999),
            "Incorrect declared batch size, premature EOF reached in topic partition v-0",
        ),
        (
            "2^31-1 claimed, 3 present",
            claiming(three.clone(), i32::MAX, i32::MAX - 1),
            "Incorrect declared batch size, premature EOF reached in topic partition v-0",
        ),
        (
            "lastOffsetDelta 2^31-2 for 3 records",
            claiming(three.clone(), 3, i32::MAX - 1),
            "Inconsistent batch offset range [0, 2147483646] and count of records 3 in topic partition v-0",
        ),
        (
            "random bytes with a valid CRC",
            with_section(&three, 0, &noise(120)),
            "",
        ),
        (
            "random bytes under gzip",
            with_section(&three, Codec::Gzip as i16, &noise(120)),
            "Failed to decompress record stream (gzip)",
        ),
        (
            "random bytes under lz4",
            with_section(&three, Codec::Lz4 as i16, &noise(120)),
            "Failed to decompress record stream (lz4)",
        ),
    ];
    for (what, bad, message) in cases {
        let r = produce(&mut c, 11, "v", 0, bad).await?;
        assert_eq!(r.error_code, INVALID_RECORD, "{what}");
        assert_eq!((r.base_offset, r.log_start_offset), (-1, -1), "{what}");
        assert!(r.record_errors.is_empty(), "{what}");
        let got = r.error_message.map(|m| m.to_string()).unwrap_or_default();
        assert!(got.starts_with(message), "{what}: {got}");
        assert!(!got.is_empty(), "{what}: a message is given");
    }

    // Record-level refusals name the records (KIP-467).
    let rec = |k: Option<&'static [u8]>| (k, Some(&b"v"[..]));
    let null_key = record::build_batch(
        0,
        1_700_000_000_000,
        (-1, -1, -1),
        &[rec(Some(b"k")), rec(None), rec(Some(b"k2"))],
    );
    let r = produce(&mut c, 11, "c", 0, null_key.clone()).await?;
    assert_eq!(r.error_code, INVALID_RECORD);
    assert_eq!(r.record_errors.len(), 1);
    assert_eq!(r.record_errors[0].batch_index, 1);
    let msg = "Compacted topic cannot accept message without key in topic partition c-0";
    assert_eq!(
        r.record_errors[0]
            .batch_index_error_message
            .as_ref()
            .map(|m| m.to_string()),
        Some(msg.to_string())
    );
    assert_eq!(
        r.error_message.map(|m| m.to_string()),
        Some(format!("One or more records have been rejected due to 1 record errors in total, and only showing the first three errors at most: [RecordError(batchIndex=1, message='{msg}')]"))
    );
    // Produce v7 has neither field: the code alone.
    let r = produce(&mut c, 7, "c", 0, null_key).await?;
    assert_eq!(r.error_code, INVALID_RECORD);
    assert!(r.record_errors.is_empty() && r.error_message.is_none());

    // A CreateTime timestamp two hours ahead (message.timestamp.after.max.ms is one hour).
    let future = sluice::broker::now_ms() + 2 * 3_600_000;
    let late = record::build_batch(0, future, (-1, -1, -1), &[(None, Some(b"later"))]);
    let r = produce(&mut c, 11, "v", 0, late).await?;
    assert_eq!(r.error_code, INVALID_TIMESTAMP);
    assert_eq!(r.record_errors.len(), 1);
    assert_eq!(r.record_errors[0].batch_index, 0);
    assert_eq!(
        r.error_message.map(|m| m.to_string()).as_deref(),
        Some("One or more records have been rejected due to invalid timestamp")
    );

    // Nothing moved: the log ends at 6 and holds exactly the two good batches.
    assert_eq!(log_end(&mut c, "v").await?, 6);
    assert_eq!(log_end(&mut c, "c").await?, 0);
    let f = only_partition(
        c.call(12, &fetch_request(12, "v", t.topic_id, 0, 0, 0, 1))
            .await?,
    )?;
    assert_eq!(f.error_code, 0);
    assert_eq!(f.high_watermark, 6);
    let records = f.records.unwrap_or_default();
    let batches = split_batches(&records)?;
    assert_eq!(batches.len(), 2);
    let mut expect_zstd = zstd.clone();
    record::set_base_offset(&mut expect_zstd, 3);
    record::set_partition_leader_epoch(&mut expect_zstd, 0);
    let mut expect_good = good;
    record::set_partition_leader_epoch(&mut expect_good, 0);
    assert_eq!(batches[0], &expect_good[..]);
    assert_eq!(batches[1], &expect_zstd[..]);
    // And the partition still takes good batches after the refusals.
    let r = produce(&mut c, 11, "v", 0, batch(&[b"g"])).await?;
    assert_eq!((r.error_code, r.base_offset), (0, 6));
    broker.shutdown().await;
    Ok(())
}

/// One request, two partitions: the refused batch appends nothing, the good one is appended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_partition_does_not_stop_the_others() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    create_topic(&mut c, "m", 2, &[]).await?;
    let part = |index: i32, b: Vec<u8>| {
        PartitionProduceData::default()
            .with_index(index)
            .with_records(Some(Bytes::from(b)))
    };
    let bad = claiming(batch(&[b"x", b"y", b"z"]), 1000, 999);
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name("m"))
            .with_partition_data(vec![part(0, bad), part(1, batch(&[b"ok"]))])]);
    let r = c.call(11, &req).await?;
    let p = &r.responses[0].partition_responses;
    assert_eq!((p[0].index, p[0].error_code), (0, INVALID_RECORD));
    assert_eq!((p[1].index, p[1].error_code, p[1].base_offset), (1, 0, 0));
    for (partition, end) in [(0, 0), (1, 1)] {
        let r = list_offsets(&mut c, 7, "m", partition, -1).await?;
        assert_eq!(r.offset, end, "partition {partition}");
    }
    broker.shutdown().await;
    Ok(())
}
