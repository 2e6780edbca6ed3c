//! The flush policy (`log.flush.interval.messages = 1`): a produce is answered once its batch is
//! fsynced, and the fsync runs on the runtime's blocking pool while the connection waits for it
//! before reading its next request. So requests pipelined after a produce on the same connection
//! (fetches, acks=0 produces, more produces) see every earlier produce durable and visible, as with
//! Kafka, and other connections are served meanwhile.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, FetchRequest, ProduceRequest};
use protocol_tests::{
    batch, create_topic, decode_response, encode_request, fetch_request, only_partition,
    produce_request, TestBroker,
};
use sluice::config::Value;

#[global_allocator]
static ALLOC: sluice::alloc_guard::GuardedAllocator = sluice::alloc_guard::GuardedAllocator;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_after_a_flushed_produce_see_it() -> anyhow::Result<()> {
    let broker = TestBroker::start_with(&[("log.flush.interval.messages", Value::Int(1))]).await?;
    let mut c = broker.connect().await?;
    let mut other = broker.connect().await?;
    let t = create_topic(&mut c, "flushed", 1, &[]).await?;

    // 30 requests back to back: produce acks=1, produce acks=0, fetch (zero wait), repeated.
    let mut all = BytesMut::new();
    let mut kinds = Vec::new();
    for i in 0..30i32 {
        let id = 500 + i;
        let frame = match i % 3 {
            0 => encode_request(
                id,
                9,
                &produce_request("flushed", 0, 1, Bytes::from(batch(&[b"a1"]))),
            )?,
            1 => encode_request(
                id,
                9,
                &produce_request("flushed", 0, 0, Bytes::from(batch(&[b"a0"]))),
            )?,
            _ => encode_request(
                id,
                12,
                &fetch_request(12, "flushed", t.topic_id, 0, 0, 0, 1),
            )?,
        };
        all.extend_from_slice(&frame);
        kinds.push((i % 3, id));
    }
    c.send_raw(&all).await?;

    let mut produced = 0i64;
    for (kind, id) in kinds {
        match kind {
            0 => {
                let mut frame = c.read_frame().await?;
                let r = decode_response::<ProduceRequest>(ApiKey::Produce, 9, id, &mut frame)?;
                let p = &r.responses[0].partition_responses[0];
                assert_eq!(p.error_code, 0);
                assert_eq!(p.base_offset, produced, "produces applied in request order");
                produced += 1;
            }
            // acks=0: no response, but the record is there for the fetch that follows
            1 => produced += 1,
            _ => {
                let mut frame = c.read_frame().await?;
                let r = decode_response::<FetchRequest>(ApiKey::Fetch, 12, id, &mut frame)?;
                let p = only_partition(r)?;
                assert_eq!(p.error_code, 0);
                assert_eq!(
                    p.high_watermark, produced,
                    "a fetch sees every produce before it"
                );
            }
        }
    }
    assert_eq!(produced, 20);

    // Another connection sees the same, durable, log.
    let id = 900;
    other
        .send_raw(&encode_request(
            id,
            12,
            &fetch_request(12, "flushed", t.topic_id, 0, 0, 0, 1),
        )?)
        .await?;
    let mut frame = other.read_frame().await?;
    let p = only_partition(decode_response::<FetchRequest>(
        ApiKey::Fetch,
        12,
        id,
        &mut frame,
    )?)?;
    assert_eq!(p.high_watermark, 20);
    broker.shutdown().await;
    Ok(())
}

/// `flush.messages = 3` (the topic's, or the broker's `log.flush.interval.messages`): every third
/// message is fsynced before its produce is answered, the others are answered without an fsync.
/// Observed through the partition's fsync counter, not timing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flush_messages_3_fsyncs_on_the_third_message() -> anyhow::Result<()> {
    let broker = TestBroker::start_with(&[("log.flush.interval.messages", Value::Int(3))]).await?;
    let mut c = broker.connect().await?;
    create_topic(&mut c, "by-broker", 1, &[]).await?;
    create_topic(&mut c, "by-topic", 1, &[("flush.messages", "2")]).await?;
    let b = broker.broker()?;
    for (topic, every) in [("by-broker", 3u64), ("by-topic", 2)] {
        let p = b.replicas.partition(topic, 0).expect("partition");
        for i in 0..6u64 {
            let r = protocol_tests::produce(&mut c, 9, topic, 0, batch(&[b"m"])).await?;
            assert_eq!((r.error_code, r.base_offset), (0, i as i64));
            // Answered after the fsync its message made due.
            assert_eq!(p.flush_policy_syncs(), (i + 1) / every, "{topic} after {i}");
        }
        assert_eq!(p.durable_offset(), 6, "{topic}");
        assert_eq!(p.offsets().high_watermark, 6);
    }
    broker.shutdown().await;
    Ok(())
}

/// `flush.ms`: the periodic check (`ReplicaManager::flush_dirty_logs`, given the time) fsyncs a
/// partition whose last flush is that old, and leaves the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flush_ms_flushes_old_enough_partitions_when_checked() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    create_topic(&mut c, "timed", 1, &[("flush.ms", "60000")]).await?;
    create_topic(&mut c, "untimed", 1, &[]).await?;
    for topic in ["timed", "untimed"] {
        let r = protocol_tests::produce(&mut c, 9, topic, 0, batch(&[b"m"])).await?;
        assert_eq!(r.error_code, 0);
    }
    let b = broker.broker()?;
    let now = sluice::broker::now_ms();
    assert_eq!(b.replicas.flush_dirty_logs(now), 0);
    assert_eq!(b.replicas.flush_dirty_logs(now + 61_000), 1);
    let timed = b.replicas.partition("timed", 0).expect("partition");
    let untimed = b.replicas.partition("untimed", 0).expect("partition");
    assert_eq!((timed.flush_policy_syncs(), timed.durable_offset()), (1, 1));
    assert_eq!(untimed.flush_policy_syncs(), 0);
    broker.shutdown().await;
    Ok(())
}
