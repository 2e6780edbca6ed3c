//! Produce (key 0), Fetch (key 1), ListOffsets (key 2) and InitProducerId (key 22) at their lowest
//! usable and highest advertised versions.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    FetchRequest, InitProducerIdRequest, ProduceRequest, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use protocol_tests::{
    api_versions_request, base_offset_of, batch, create_topic, fetch_request, list_offsets,
    only_partition, produce, produce_request, split_batches, Client, TestBroker, Uuid,
};
use sluice::record;

#[global_allocator]
static ALLOC: sluice::alloc_guard::GuardedAllocator = sluice::alloc_guard::GuardedAllocator;

const OFFSET_OUT_OF_RANGE: i16 = 1;
const CORRUPT_MESSAGE: i16 = 2;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const MESSAGE_TOO_LARGE: i16 = 10;
const INVALID_RECORD: i16 = 87;
const UNKNOWN_TOPIC_ID: i16 = 100;

fn batch_at(ts: i64, values: &[&[u8]]) -> Vec<u8> {
    let records: Vec<_> = values.iter().map(|v| (None, Some(*v))).collect();
    record::build_batch(0, ts, (-1, -1, -1), &records)
}

/// Produce v13 addresses the topic by id.
fn produce_by_id(topic_id: Uuid, partition: i32, acks: i16, batch: Vec<u8>) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_topic_id(topic_id)
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(Bytes::from(batch)))])])
}

async fn latest(c: &mut Client, topic: &str) -> anyhow::Result<i64> {
    let r = list_offsets(c, 7, topic, 0, -1).await?;
    assert_eq!(r.error_code, 0);
    Ok(r.offset)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_v3_and_v13_assign_consecutive_offsets() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    let t = create_topic(&mut c, "p", 1, &[]).await?;
    // v3 by name: three single-record batches, then one of three records.
    for expected in 0..3 {
        let r = produce(&mut c, 3, "p", 0, batch(&[b"x"])).await?;
        assert_eq!(r.index, 0);
        assert_eq!(r.error_code, 0);
        assert_eq!(r.base_offset, expected);
    }
    let r = produce(&mut c, 3, "p", 0, batch(&[b"a", b"b", b"c"])).await?;
    assert_eq!(r.base_offset, 3);
    // v13 by topic id.
    let resp = c
        .call(13, &produce_by_id(t.topic_id, 0, 1, batch(&[b"d"])))
        .await?;
    assert_eq!(resp.responses.len(), 1);
    assert_eq!(resp.responses[0].topic_id, t.topic_id);
    let p = &resp.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 0);
    assert_eq!(p.base_offset, 6);
    assert_eq!(p.log_append_time_ms, -1, "CreateTime topic");
    assert_eq!(p.log_start_offset, 0);
    assert_eq!(latest(&mut c, "p").await?, 7);
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_v0_to_v2_are_advertised_but_close_the_connection() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    for version in 0..=2i16 {
        let mut c = broker.connect().await?;
        // A v0-2 body would differ; the broker must refuse by version before parsing it.
        let frame = protocol_tests::raw_frame(0, version, 1, &[0, 1, 0, 0, 0x13, 0x88, 0, 0, 0, 0]);
        c.send_raw(&frame).await?;
        c.expect_closed().await?;
    }
    broker.connect().await?.api_versions_ok().await?;
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_zero_gets_no_response_but_is_appended() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    create_topic(&mut c, "acks0", 1, &[]).await?;
    for version in [3i16, 9] {
        let acks0 = c
            .send(
                version,
                &produce_request("acks0", 0, 0, Bytes::from(batch(&[b"q"]))),
            )
            .await?;
        let av = c.send(3, &api_versions_request()).await?;
        assert_ne!(acks0, av);
        // The very next frame must be the ApiVersions answer.
        let r = c
            .recv::<kafka_protocol::messages::ApiVersionsRequest>(3, av)
            .await?;
        assert_eq!(r.error_code, 0);
    }
    assert_eq!(latest(&mut c, "acks0").await?, 2);
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_errors_are_per_partition_and_append_nothing() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    let t = create_topic(&mut c, "perr", 1, &[]).await?;
    create_topic(&mut c, "small", 1, &[("max.message.bytes", "200")]).await?;

    for version in [3i16, 12] {
        let mut bad_crc = batch(&[b"hello"]);
        let n = bad_crc.len();
        bad_crc[n - 1] ^= 0xff;
        let r = produce(&mut c, version, "perr", 0, bad_crc).await?;
        assert_eq!(r.error_code, CORRUPT_MESSAGE, "v{version} bad crc");
        assert_eq!(r.base_offset, -1);

        let mut two = batch(&[b"a"]);
        two.extend_from_slice(&batch(&[b"b"]));
        let r = produce(&mut c, version, "perr", 0, two).await?;
        assert_eq!(r.error_code, INVALID_RECORD, "v{version} two batches");

        let mut offset = batch(&[b"a"]);
        record::set_base_offset(&mut offset, 7);
        let r = produce(&mut c, version, "perr", 0, offset).await?;
        assert_eq!(r.error_code, INVALID_RECORD, "v{version} base offset 7");

        let big = vec![b'z'; 400];
        let r = produce(&mut c, version, "small", 0, batch(&[&big])).await?;
        assert_eq!(r.error_code, MESSAGE_TOO_LARGE, "v{version} too large");
        // A batch under the limit is fine on the same topic.
        let r = produce(&mut c, version, "small", 0, batch(&[b"ok"])).await?;
        assert_eq!(r.error_code, 0, "v{version} small batch");

        let r = produce(&mut c, version, "no-such-topic", 0, batch(&[b"a"])).await?;
        assert_eq!(
            r.error_code, UNKNOWN_TOPIC_OR_PARTITION,
            "v{version} unknown topic"
        );
        let r = produce(&mut c, version, "perr", 5, batch(&[b"a"])).await?;
        assert_eq!(
            r.error_code, UNKNOWN_TOPIC_OR_PARTITION,
            "v{version} unknown partition"
        );
        if version >= 8 {
            assert!(r.error_message.is_none() || r.error_code != 0);
        }
    }
    // v13: unknown topic id.
    let r = c
        .call(13, &produce_by_id(Uuid::from_u128(9), 0, 1, batch(&[b"a"])))
        .await?;
    assert_eq!(
        r.responses[0].partition_responses[0].error_code,
        UNKNOWN_TOPIC_ID
    );
    // Nothing was appended by any of the failures; the topic id path still works.
    assert_eq!(latest(&mut c, "perr").await?, 0);
    assert_eq!(latest(&mut c, "small").await?, 2);
    let r = c
        .call(13, &produce_by_id(t.topic_id, 0, 1, batch(&[b"a"])))
        .await?;
    assert_eq!(r.responses[0].partition_responses[0].base_offset, 0);
    broker.shutdown().await;
    Ok(())
}

/// Produces three batches (3, 1 and 1 records at timestamps 1000, 2000, 1500) and returns them.
async fn produce_three(c: &mut Client, topic: &str) -> anyhow::Result<Vec<Vec<u8>>> {
    let batches = vec![
        batch_at(1000, &[b"r0", b"r1", b"r2"]),
        batch_at(2000, &[b"r3"]),
        batch_at(1500, &[b"r4"]),
    ];
    let mut expected = 0;
    for b in &batches {
        let r = produce(c, 9, topic, 0, b.clone()).await?;
        assert_eq!(r.error_code, 0);
        assert_eq!(r.base_offset, expected);
        expected += record::BatchHeader::parse(b)?.record_count as i64;
    }
    Ok(batches)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_v4_and_v18_return_the_produced_bytes() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    let t = create_topic(&mut c, "f", 1, &[]).await?;
    let produced = produce_three(&mut c, "f").await?;
    let meta = protocol_tests::metadata(&mut c, "f").await?;
    let epoch = meta.topics[0].partitions[0].leader_epoch;
    // Fetch v13+ addresses the topic by the id Metadata reports.
    let topic_id = meta.topics[0].topic_id;
    assert_eq!(
        topic_id, t.topic_id,
        "Metadata and CreateTopics agree on the id"
    );

    for version in [4i16, 18] {
        let req = fetch_request(version, "f", topic_id, 0, 0, 0, 1);
        let r = c.call(version, &req).await?;
        if version >= 7 {
            assert_eq!(r.session_id, 0);
        }
        if version >= 13 {
            assert_eq!(r.responses[0].topic_id, topic_id);
        } else {
            assert_eq!(r.responses[0].topic.as_str(), "f");
        }
        let p = only_partition(r)?;
        assert_eq!(p.partition_index, 0);
        assert_eq!(p.error_code, 0, "v{version}");
        assert_eq!(p.high_watermark, 5, "v{version}");
        assert_eq!(p.last_stable_offset, 5, "v{version}");
        if version >= 5 {
            assert_eq!(p.log_start_offset, 0, "v{version}");
        }
        let records = p.records.expect("records");
        let fetched = split_batches(&records)?;
        assert_eq!(fetched.len(), 3, "v{version}");
        let bases: Vec<i64> = fetched.iter().map(|b| base_offset_of(b)).collect();
        assert_eq!(bases, vec![0, 3, 4], "v{version} base offsets");
        for (got, sent) in fetched.iter().zip(&produced) {
            assert_eq!(got.len(), sent.len());
            // batchLength is unchanged; the leader epoch is stamped; everything from magic on is
            // byte-identical (the CRC still matches).
            assert_eq!(got[8..12], sent[8..12]);
            let stamped = i32::from_be_bytes([got[12], got[13], got[14], got[15]]);
            assert_eq!(stamped, epoch, "partition leader epoch stamped");
            assert_eq!(got[16..], sent[16..], "v{version} record bytes");
            record::validate_batch(got)?;
        }

        // From the middle of the first batch: the batch containing the offset is returned whole.
        let r = c
            .call(version, &fetch_request(version, "f", topic_id, 0, 1, 0, 1))
            .await?;
        let p = only_partition(r)?;
        let records = p.records.expect("records");
        assert_eq!(base_offset_of(split_batches(&records)?[0]), 0);

        // At the log end: no error, no records.
        let r = c
            .call(version, &fetch_request(version, "f", topic_id, 0, 5, 0, 1))
            .await?;
        let p = only_partition(r)?;
        assert_eq!(p.error_code, 0);
        assert!(p.records.is_none_or(|r| r.is_empty()));

        // Beyond the log end: OFFSET_OUT_OF_RANGE.
        let r = c
            .call(version, &fetch_request(version, "f", topic_id, 0, 6, 0, 1))
            .await?;
        let p = only_partition(r)?;
        assert_eq!(p.error_code, OFFSET_OUT_OF_RANGE, "v{version}");
        assert!(p.records.is_none_or(|r| r.is_empty()));

        // Unknown partition / topic.
        let r = c
            .call(
                version,
                &fetch_request(version, "f", topic_id, 0, 0, 0, 1).with_topics(vec![]),
            )
            .await?;
        assert!(r.responses.is_empty());
        let r = c
            .call(
                version,
                &fetch_request(version, "f", Uuid::from_u128(5), 3, 0, 0, 1),
            )
            .await?;
        let p = only_partition(r)?;
        let want = if version >= 13 {
            UNKNOWN_TOPIC_ID
        } else {
            UNKNOWN_TOPIC_OR_PARTITION
        };
        assert_eq!(p.error_code, want, "v{version}");
    }
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_long_poll_wakes_on_produce_from_another_connection() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut admin = broker.connect().await?;
    let t = create_topic(&mut admin, "lp", 1, &[]).await?;
    for version in [4i16, 18] {
        let offset = latest(&mut admin, "lp").await?;
        let mut consumer = broker.connect().await?;
        let req = fetch_request(version, "lp", t.topic_id, 0, offset, 5000, 1);
        let id = consumer.send(version, &req).await?;
        // Let the fetch park; if the broker never wakes it, it answers empty after 5 s and the
        // assertion on the records below fails.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut producer = broker.connect().await?;
        let r = produce(&mut producer, 9, "lp", 0, batch(&[b"wake up"])).await?;
        assert_eq!(r.error_code, 0);
        let resp = tokio::time::timeout(
            Duration::from_secs(20),
            consumer.recv::<FetchRequest>(version, id),
        )
        .await??;
        let p = only_partition(resp)?;
        assert_eq!(p.error_code, 0);
        assert_eq!(p.high_watermark, offset + 1);
        let records = p.records.expect("records");
        let batches = split_batches(&records)?;
        assert_eq!(
            batches.len(),
            1,
            "v{version}: the long poll returned without the data"
        );
        assert_eq!(base_offset_of(batches[0]), offset);
    }
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_unreachable_min_bytes_waits_max_wait_then_returns() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    let t = create_topic(&mut c, "mb", 1, &[]).await?;
    for version in [4i16, 18] {
        // Empty partition: waits out max_wait, then empty records.
        let start = Instant::now();
        let req = fetch_request(version, "mb", t.topic_id, 0, 0, 200, 1_000_000);
        let p = only_partition(c.call(version, &req).await?)?;
        assert!(
            start.elapsed() >= Duration::from_millis(180),
            "answered before max_wait"
        );
        assert_eq!(p.error_code, 0);
        assert!(p.records.is_none_or(|r| r.is_empty()), "v{version}");
    }
    // Some data, but less than min_bytes: after max_wait the available data comes back.
    produce(&mut c, 9, "mb", 0, batch(&[b"small"])).await?;
    for version in [4i16, 18] {
        let start = Instant::now();
        let req = fetch_request(version, "mb", t.topic_id, 0, 0, 200, 1_000_000);
        let p = only_partition(c.call(version, &req).await?)?;
        assert!(start.elapsed() >= Duration::from_millis(180));
        let records = p.records.expect("records");
        assert_eq!(split_batches(&records)?.len(), 1, "v{version}");
    }
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_offsets_v1_and_v10() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    create_topic(&mut c, "lo", 1, &[]).await?;
    // Empty partition first: latest = earliest = 0.
    for version in [1i16, 10] {
        let r = list_offsets(&mut c, version, "lo", 0, -1).await?;
        assert_eq!((r.error_code, r.offset), (0, 0), "v{version} empty latest");
        let r = list_offsets(&mut c, version, "lo", 0, -2).await?;
        assert_eq!(
            (r.error_code, r.offset),
            (0, 0),
            "v{version} empty earliest"
        );
    }
    produce_three(&mut c, "lo").await?;
    for version in [1i16, 10] {
        let r = list_offsets(&mut c, version, "lo", 0, -1).await?;
        assert_eq!(r.partition_index, 0);
        assert_eq!(
            (r.error_code, r.offset, r.timestamp),
            (0, 5, -1),
            "v{version} latest"
        );
        let r = list_offsets(&mut c, version, "lo", 0, -2).await?;
        assert_eq!(
            (r.error_code, r.offset, r.timestamp),
            (0, 0, -1),
            "v{version} earliest"
        );
        // By timestamp: first offset whose timestamp >= T.
        for (ts, offset, found_ts) in [
            (500, 0, 1000),
            (1000, 0, 1000),
            (1001, 3, 2000),
            (2000, 3, 2000),
            (2001, -1, -1),
        ] {
            let r = list_offsets(&mut c, version, "lo", 0, ts).await?;
            assert_eq!(r.error_code, 0);
            assert_eq!(
                (r.offset, r.timestamp),
                (offset, found_ts),
                "v{version} ts {ts}"
            );
        }
        if version >= 4 {
            let r = list_offsets(&mut c, version, "lo", 0, -1).await?;
            assert!(r.leader_epoch >= 0);
        }
    }
    // Max timestamp (v7+): the record with timestamp 2000 at offset 3.
    let r = list_offsets(&mut c, 10, "lo", 0, -3).await?;
    assert_eq!((r.error_code, r.offset, r.timestamp), (0, 3, 2000));
    // Unknown partition and topic.
    let r = list_offsets(&mut c, 10, "lo", 9, -1).await?;
    assert_eq!(r.error_code, UNKNOWN_TOPIC_OR_PARTITION);
    let r = list_offsets(&mut c, 1, "nope", 0, -1).await?;
    assert_eq!(r.error_code, UNKNOWN_TOPIC_OR_PARTITION);
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_producer_id_v0_and_v5() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    let mut ids = Vec::new();
    for version in [0i16, 5, 0, 5] {
        let req = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let r = c.call(version, &req).await?;
        assert_eq!(r.error_code, 0, "v{version}");
        assert!(r.producer_id.0 >= 0, "v{version}");
        assert_eq!(r.producer_epoch, 0, "v{version}");
        ids.push(r.producer_id.0);
    }
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "producer ids repeat: {ids:?}");

    // A transactional id keeps its producer id; each InitProducerId bumps the epoch.
    let mut txn_ids = Vec::new();
    for (version, epoch) in [(0i16, 0i16), (5, 1)] {
        let req = InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("txn-1"))))
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let r = c.call(version, &req).await?;
        assert_eq!((r.error_code, r.producer_epoch), (0, epoch), "v{version}");
        assert!(!ids.contains(&r.producer_id.0));
        txn_ids.push(r.producer_id.0);
    }
    assert_eq!(txn_ids[0], txn_ids[1]);
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_append_time_topic_restamps_and_recomputes_crc() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    let t = create_topic(
        &mut c,
        "lat",
        1,
        &[("message.timestamp.type", "LogAppendTime")],
    )
    .await?;
    let before = sluice::broker::now_ms();
    let r = produce(&mut c, 9, "lat", 0, batch_at(1000, &[b"a", b"b"])).await?;
    assert_eq!(r.error_code, 0);
    assert!(r.log_append_time_ms >= before, "{}", r.log_append_time_ms);
    let p = only_partition(
        c.call(18, &fetch_request(18, "lat", t.topic_id, 0, 0, 0, 1))
            .await?,
    )?;
    let records = p.records.expect("records");
    let h = record::validate_batch(&records)?;
    assert_ne!(h.attributes & record::ATTR_TIMESTAMP_TYPE_LOG_APPEND, 0);
    assert_eq!(h.max_timestamp, r.log_append_time_ms);
    broker.shutdown().await;
    Ok(())
}
