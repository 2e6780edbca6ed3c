//! ApiVersions (key 18): every version the broker advertises, and the downgrade dance for a version
//! it does not know.

use bytes::Buf;
use kafka_protocol::messages::ApiVersionsRequest;
use protocol_tests::{api_versions_request, encode_request, TestBroker};
use sluice::protocol::ADVERTISED;

#[global_allocator]
static ALLOC: sluice::alloc_guard::GuardedAllocator = sluice::alloc_guard::GuardedAllocator;

fn advertised_table() -> Vec<(i16, i16, i16)> {
    ADVERTISED
        .iter()
        .map(|a| (a.key as i16, a.min, a.max))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_version_returns_the_advertised_table() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    for version in 0..=4 {
        let req = if version >= 3 {
            api_versions_request()
        } else {
            ApiVersionsRequest::default()
        };
        let r = c.call(version, &req).await?;
        assert_eq!(r.error_code, 0, "v{version}");
        let got: Vec<(i16, i16, i16)> = r
            .api_keys
            .iter()
            .map(|k| (k.api_key, k.min_version, k.max_version))
            .collect();
        assert_eq!(got, advertised_table(), "v{version}");
        assert_eq!(r.throttle_time_ms, 0, "v{version}");
    }
    // The table itself must contain the core APIs at Kafka's ranges.
    let table = advertised_table();
    assert!(table.contains(&(18, 0, 4)));
    assert!(table.contains(&(0, 0, 13)));
    assert!(table.contains(&(1, 4, 18)));
    assert!(table.contains(&(3, 0, 13)));
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_version_gets_v0_error_35_and_the_connection_stays_open() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    // v127 does not exist; the broker must not parse the body at all, so send a few junk bytes.
    let frame = protocol_tests::raw_frame(18, 127, 4242, &[0xde, 0xad, 0xbe, 0xef]);
    c.send_raw(&frame).await?;
    let mut body = c.read_frame().await?;
    assert_eq!(body.get_i32(), 4242, "correlation id");
    assert_eq!(body.get_i16(), 35, "error code UNSUPPORTED_VERSION");
    let n = body.get_i32();
    assert_eq!(n as usize, ADVERTISED.len());
    let mut table = Vec::new();
    for _ in 0..n {
        table.push((body.get_i16(), body.get_i16(), body.get_i16()));
    }
    assert_eq!(table, advertised_table());
    // v0 format: nothing after the table (no throttle time, no tagged fields).
    assert_eq!(body.remaining(), 0, "trailing bytes in the v0 reply");

    // The same connection keeps working: a v3 request right after.
    let r = c.call(3, &api_versions_request()).await?;
    assert_eq!(r.error_code, 0);
    assert_eq!(r.api_keys.len(), ADVERTISED.len());
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v3_request_is_flexible_and_v4_answers_with_header_v0() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    // Hand-check the framing of a v4 answer: header v0 means the body starts right after the
    // correlation id (no tagged-field byte), with the error code first.
    let frame = encode_request(77, 4, &api_versions_request())?;
    c.send_raw(&frame).await?;
    let mut body = c.read_frame().await?;
    assert_eq!(body.get_i32(), 77);
    assert_eq!(
        body.get_i16(),
        0,
        "error code right after the correlation id"
    );
    // Compact array: count + 1 as an unsigned varint (fits in one byte here).
    assert_eq!(body.get_u8() as usize, ADVERTISED.len() + 1);
    broker.shutdown().await;
    Ok(())
}
