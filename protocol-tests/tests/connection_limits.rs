//! Bounded memory and connections at the network edge (issue 13, items 3 and 8): a client that
//! never reads is muted once its queued response bytes pass the bound; request frames draw from
//! a broker-wide pool and wait for it rather than fail; stalled partial frames and idle
//! connections are closed; `max.connections` pauses accepting; `max.connections.per.ip` closes.
//!
//! Time: timeouts are configured tiny and the tests wait for the resulting event (a close, a
//! counter) with a generous bound; nothing asserts that something was fast.

use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{ensure, Result};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, FetchRequest, ProduceRequest};
use protocol_tests::{
    batch, create_topic, decode_response, encode_request, fetch_request, only_partition, produce,
    produce_request, wait_until, Client, TestBroker,
};
use sluice::config::Value;

#[global_allocator]
static ALLOC: sluice::alloc_guard::GuardedAllocator = sluice::alloc_guard::GuardedAllocator;

fn int(v: i64) -> Value {
    Value::Int(v)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_is_muted_at_the_response_byte_bound() -> Result<()> {
    const BOUND: usize = 256 * 1024;
    let broker = TestBroker::start_with(&[(
        "sluice.connection.queued.response.max.bytes",
        int(BOUND as i64),
    )])
    .await?;
    let network = broker.network()?;
    let mut admin = broker.connect().await?;
    let t = create_topic(&mut admin, "slow", 1, &[]).await?;
    // One 40 KiB batch: every fetch answer carries it as bytes (a read under 64 KiB).
    let value = vec![7u8; 40 * 1024];
    produce(&mut admin, 9, "slow", 0, batch(&[&value])).await?;
    let fetch = fetch_request(12, "slow", t.topic_id, 0, 0, 0, 1);
    let one = encode_request(0, 12, &fetch)?;
    admin.send_raw(&one).await?;
    let answer = admin.read_frame().await?.len() + 4;
    ensure!(answer > 40 * 1024, "fetch answer of {answer} bytes");

    // 600 fetches written at once, never read: far more than kernel buffers and the bound hold.
    let mut slow = broker.connect().await?;
    let mut all = BytesMut::new();
    for id in 0..600 {
        all.extend_from_slice(&encode_request(id, 12, &fetch)?);
    }
    slow.send_raw(&all).await?;
    let peak = || {
        network
            .stats
            .peak_queued_response_bytes
            .load(Ordering::Relaxed)
    };
    // The queue reaches the bound (with or without muting); give the broker time to go past it
    // if it would, then check it did not.
    wait_until("responses to queue up to the bound", || peak() > BOUND).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let peak = peak();
    // The bound, the last answer queued past it, and a long-poll answer the writer resolved.
    ensure!(
        peak <= BOUND + 2 * answer,
        "queued response bytes reached {peak}, bound {BOUND} + 2 x {answer}"
    );

    wait_until("the non-reading connection to be muted", || {
        network.stats.mutes.load(Ordering::Relaxed) >= 1
    })
    .await?;

    // Another connection is served meanwhile.
    let mut other = broker.connect().await?;
    other.api_versions_ok().await?;
    let p = only_partition(other.call(12, &fetch).await?)?;
    assert_eq!(p.high_watermark, 1);

    // Once the client reads, every answer arrives, in order: muting lost nothing.
    for id in 0..600 {
        let mut frame = slow.read_frame().await?;
        let r = decode_response::<FetchRequest>(ApiKey::Fetch, 12, id, &mut frame)?;
        assert_eq!(only_partition(r)?.high_watermark, 1);
    }
    wait_until("the connection to be unmuted", || {
        network.stats.muted_connections.load(Ordering::Relaxed) == 0
    })
    .await?;
    let peak = network
        .stats
        .peak_queued_response_bytes
        .load(Ordering::Relaxed);
    ensure!(peak <= BOUND + 2 * answer, "peak {peak} after draining");
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_partial_frame_is_closed_after_the_read_timeout() -> Result<()> {
    let broker =
        TestBroker::start_with(&[("sluice.socket.request.read.timeout.ms", int(200))]).await?;
    let network = broker.network()?;
    // A 100 MiB frame announced, 10 bytes sent, then nothing: its pool grant is held until the
    // timeout closes the connection.
    let mut stalled = broker.connect().await?;
    let mut bytes = (100 * 1024 * 1024i32).to_be_bytes().to_vec();
    bytes.extend_from_slice(&[0u8; 10]);
    stalled.send_raw(&bytes).await?;
    // Half a length prefix also counts as a started frame.
    let mut half = broker.connect().await?;
    half.send_raw(&[0, 0]).await?;
    stalled.expect_closed().await?;
    half.expect_closed().await?;
    assert_eq!(network.stats.read_timeouts.load(Ordering::Relaxed), 2);
    wait_until("the stalled frame's memory to return", || {
        network.pool.in_use() == 0
    })
    .await?;
    assert_eq!(network.pool.peak(), 100 * 1024 * 1024);
    // Other connections were never affected.
    broker.connect().await?.api_versions_ok().await?;
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_is_closed_after_connections_max_idle_ms() -> Result<()> {
    let broker = TestBroker::start_with(&[("connections.max.idle.ms", int(2000))]).await?;
    let network = broker.network()?;
    // A connection that keeps sending requests (one every 100 ms, far inside 2 s) stays open.
    let mut busy = broker.connect().await?;
    for _ in 0..10 {
        busy.api_versions_ok().await?;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    busy.api_versions_ok().await?;
    drop(busy);
    // One that goes quiet is closed.
    let mut quiet = broker.connect().await?;
    quiet.api_versions_ok().await?;
    quiet.expect_closed_within(Duration::from_secs(20)).await?;
    assert_eq!(network.stats.idle_closed.load(Ordering::Relaxed), 1);
    // One that sends many small requests and never reads fills its socket and the reply queue
    // (64 small answers, far under the byte bound): no write progress for the idle time closes it.
    let mut stuck = broker.connect().await?;
    let one = encode_request(1, 3, &protocol_tests::api_versions_request())?;
    let many: Vec<u8> = one
        .iter()
        .copied()
        .cycle()
        .take(one.len() * 100_000)
        .collect();
    let writing = tokio::spawn(async move {
        // The broker stops reading, so this write may never finish; it ends with the close.
        let _ = stuck.send_raw(&many).await;
        stuck
    });
    wait_until("the non-reading connection to be closed as idle", || {
        network.stats.idle_closed.load(Ordering::Relaxed) >= 2
    })
    .await?;
    let mut stuck = tokio::time::timeout(Duration::from_secs(20), writing)
        .await
        .map_err(|_| anyhow::anyhow!("the broker neither read nor closed the connection"))??;
    let answered = stuck.read_until_closed().await?;
    let mut frames = 0;
    let mut rest = &answered[..];
    while rest.len() >= 4 {
        let len = i32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        if rest.len() < 4 + len {
            break;
        }
        frames += 1;
        rest = &rest[4 + len..];
    }
    ensure!(
        (1..100_000).contains(&frames),
        "{frames} of 100000 requests answered before the idle close"
    );
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_max_connections_new_connections_wait_until_one_closes() -> Result<()> {
    let broker = TestBroker::start_with(&[("max.connections", int(2))]).await?;
    let network = broker.network()?;
    let mut c1 = broker.connect().await?;
    let mut c2 = broker.connect().await?;
    c1.api_versions_ok().await?;
    c2.api_versions_ok().await?;
    // The third connects at the TCP level (listen backlog) but is not served while two are open.
    let mut c3 = broker.connect().await?;
    let id = c3.send(3, &protocol_tests::api_versions_request()).await?;
    let early = tokio::time::timeout(Duration::from_millis(500), c3.read_frame()).await;
    ensure!(
        early.is_err(),
        "a third connection was served at max.connections = 2"
    );
    assert_eq!(network.quotas.total(), 2);
    drop(c1);
    let r = c3
        .recv::<kafka_protocol::messages::ApiVersionsRequest>(3, id)
        .await?;
    assert_eq!(r.error_code, 0);
    assert_eq!(network.quotas.total(), 2);
    c2.api_versions_ok().await?;
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_max_connections_per_ip_are_closed() -> Result<()> {
    let broker = TestBroker::start_with(&[
        ("max.connections.per.ip", int(1)),
        (
            "max.connections.per.ip.overrides",
            Value::Str("127.0.0.3:2".into()),
        ),
    ])
    .await?;
    let network = broker.network()?;
    let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
    let mut a1 = Client::connect_from(broker.addr, ip("127.0.0.2")).await?;
    a1.api_versions_ok().await?;
    let mut a2 = Client::connect_from(broker.addr, ip("127.0.0.2")).await?;
    a2.expect_closed().await?;
    assert_eq!(network.stats.refused_per_ip.load(Ordering::Relaxed), 1);
    // Another address has its own count; the override lets 127.0.0.3 have two.
    let mut b1 = Client::connect_from(broker.addr, ip("127.0.0.3")).await?;
    let mut b2 = Client::connect_from(broker.addr, ip("127.0.0.3")).await?;
    b1.api_versions_ok().await?;
    b2.api_versions_ok().await?;
    let mut b3 = Client::connect_from(broker.addr, ip("127.0.0.3")).await?;
    b3.expect_closed().await?;
    assert_eq!(network.stats.refused_per_ip.load(Ordering::Relaxed), 2);
    // Once the first connection of 127.0.0.2 closes, that address may connect again.
    drop(a1);
    wait_until("the closed connection to be uncounted", || {
        network.quotas.total() == 2
    })
    .await?;
    let mut a3 = Client::connect_from(broker.addr, ip("127.0.0.2")).await?;
    a3.api_versions_ok().await?;
    broker.shutdown().await;
    Ok(())
}

/// A Produce v9 frame (length prefix included) of one batch holding one `size`-byte value.
fn big_produce(id: i32, size: usize) -> Result<Bytes> {
    let value = vec![(id % 251) as u8; size];
    encode_request(
        id,
        9,
        &produce_request("pool", 0, 1, Bytes::from(batch(&[&value]))),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_frames_wait_for_the_broker_wide_pool_and_never_exceed_it() -> Result<()> {
    const POOL: usize = 1024 * 1024;
    const FRAME: usize = 700 * 1024;
    let broker = TestBroker::start_with(&[("queued.max.request.bytes", int(POOL as i64))]).await?;
    let network = broker.network()?;
    let mut admin = broker.connect().await?;
    create_topic(&mut admin, "pool", 1, &[]).await?;

    // One connection sends the first 1000 bytes of its ~700 KiB produce and holds the rest.
    let first = big_produce(100, FRAME)?;
    let mut holder = broker.connect().await?;
    holder.send_raw(&first[..1000]).await?;
    wait_until("the first frame's grant", || network.pool.in_use() >= FRAME).await?;

    // Four more send whole frames: none fits beside the first, so they wait (not fail).
    let mut senders = Vec::new();
    for i in 0..4 {
        let frame = big_produce(i, FRAME)?;
        let mut c = broker.connect().await?;
        senders.push(tokio::spawn(async move {
            c.send_raw(&frame).await?;
            let mut answer = c.read_frame().await?;
            let r = decode_response::<ProduceRequest>(ApiKey::Produce, 9, i, &mut answer)?;
            Ok::<i16, anyhow::Error>(r.responses[0].partition_responses[0].error_code)
        }));
    }
    wait_until("readers waiting for pool memory", || {
        network.pool.waiting() >= 1
    })
    .await?;
    ensure!(
        network.pool.in_use() <= POOL,
        "in use {}",
        network.pool.in_use()
    );
    // The held frame completes; everyone is answered in turn.
    holder.send_raw(&first[1000..]).await?;
    let mut answer = holder.read_frame().await?;
    let r = decode_response::<ProduceRequest>(ApiKey::Produce, 9, 100, &mut answer)?;
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    for s in senders {
        assert_eq!(s.await??, 0, "a waiting produce succeeded");
    }
    ensure!(
        network.pool.peak() <= POOL,
        "the pool granted {} of {POOL} bytes",
        network.pool.peak()
    );
    ensure!(network.pool.peak() >= FRAME);
    wait_until("all memory back", || network.pool.in_use() == 0).await?;
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_stalled_100_mib_frames_hold_at_most_the_default_pool() -> Result<()> {
    let broker = TestBroker::start().await?;
    let network = broker.network()?;
    let pool = network.pool.capacity();
    assert_eq!(pool, 256 * 1024 * 1024, "Sluice's default bound");
    let mut clients = Vec::new();
    for _ in 0..16 {
        let mut c = broker.connect().await?;
        let mut bytes = (100 * 1024 * 1024i32).to_be_bytes().to_vec();
        bytes.push(0);
        c.send_raw(&bytes).await?;
        clients.push(c);
    }
    // Two grants of 100 MiB fit in 256 MiB; the other fourteen wait.
    wait_until("fourteen readers waiting", || network.pool.waiting() == 14).await?;
    assert_eq!(network.pool.in_use(), 200 * 1024 * 1024);
    // Small requests do not draw from the pool: they are served meanwhile.
    let mut small = broker.connect().await?;
    small.api_versions_ok().await?;
    assert_eq!(network.pool.waiting(), 14);
    // Closing the stalled clients gives everything back.
    drop(clients);
    wait_until("all memory back", || {
        network.pool.in_use() == 0 && network.pool.waiting() == 0
    })
    .await?;
    ensure!(network.pool.peak() <= pool);
    broker.connect().await?.api_versions_ok().await?;
    broker.shutdown().await;
    Ok(())
}
