//! Pipelining: many requests written back to back before any response is read must be answered
//! strictly in request order, including acks=1 produces and zero-wait fetches.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, FetchRequest, MetadataRequest, ProduceRequest,
};
use protocol_tests::{
    api_versions_request, batch, create_topic, decode_response, encode_request, fetch_request,
    metadata_request, only_partition, produce_request, TestBroker,
};

#[global_allocator]
static ALLOC: sluice::alloc_guard::GuardedAllocator = sluice::alloc_guard::GuardedAllocator;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_mixed_requests_are_answered_in_order() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    let t = create_topic(&mut c, "pipe", 1, &[]).await?;

    let mut all = BytesMut::new();
    let mut kinds = Vec::new();
    for i in 0..50i32 {
        // Correlation ids that are not simply increasing, so order is checked, not arithmetic.
        let id = 1000 + (i * 7919) % 500;
        let frame = match i % 4 {
            0 => encode_request(id, 3, &api_versions_request())?,
            1 => encode_request(id, 12, &metadata_request(&["pipe"], false))?,
            2 => encode_request(
                id,
                9,
                &produce_request("pipe", 0, 1, Bytes::from(batch(&[b"pipelined"]))),
            )?,
            _ => encode_request(id, 12, &fetch_request(12, "pipe", t.topic_id, 0, 0, 0, 1))?,
        };
        all.extend_from_slice(&frame);
        kinds.push((i % 4, id));
    }
    c.send_raw(&all).await?;

    let mut produced = 0i64;
    for (kind, id) in kinds {
        let mut frame = c.read_frame().await?;
        match kind {
            0 => {
                let r =
                    decode_response::<ApiVersionsRequest>(ApiKey::ApiVersions, 3, id, &mut frame)?;
                assert_eq!(r.error_code, 0);
            }
            1 => {
                let r = decode_response::<MetadataRequest>(ApiKey::Metadata, 12, id, &mut frame)?;
                assert_eq!(r.topics[0].error_code, 0);
            }
            2 => {
                let r = decode_response::<ProduceRequest>(ApiKey::Produce, 9, id, &mut frame)?;
                let p = &r.responses[0].partition_responses[0];
                assert_eq!(p.error_code, 0);
                assert_eq!(p.base_offset, produced, "produces applied in request order");
                produced += 1;
            }
            _ => {
                let r = decode_response::<FetchRequest>(ApiKey::Fetch, 12, id, &mut frame)?;
                let p = only_partition(r)?;
                assert_eq!(p.error_code, 0);
                // Every produce sent before this fetch is visible to it.
                assert_eq!(p.high_watermark, produced, "fetch sees earlier produces");
            }
        }
    }
    assert_eq!(produced, 12);
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_holds_back_later_responses_on_its_connection() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    let t = create_topic(&mut c, "hold", 1, &[]).await?;
    // Fetch with 300 ms wait on an empty partition, then an ApiVersions right behind it: the
    // ApiVersions answer must come second.
    let f = c
        .send(12, &fetch_request(12, "hold", t.topic_id, 0, 0, 300, 1))
        .await?;
    let a = c.send(3, &api_versions_request()).await?;
    let p = only_partition(c.recv::<FetchRequest>(12, f).await?)?;
    assert_eq!(p.error_code, 0);
    let r = c.recv::<ApiVersionsRequest>(3, a).await?;
    assert_eq!(r.error_code, 0);
    broker.shutdown().await;
    Ok(())
}
