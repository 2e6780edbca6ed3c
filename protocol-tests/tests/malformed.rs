//! Malformed frames (testing.md, "Bad input policy"): every byte sequence ends in a Kafka error or a
//! closed connection; the broker keeps serving other connections, never hangs, never aborts and
//! never allocates without bound. Each bad frame gets its own connection.

use std::time::Duration;

use protocol_tests::{raw_frame, vm_rss_kib, Client, Rng, TestBroker};
use sluice::config::Value;
use sluice::protocol::ADVERTISED;

#[global_allocator]
static ALLOC: sluice::alloc_guard::GuardedAllocator = sluice::alloc_guard::GuardedAllocator;

/// Sends `bytes` on a fresh connection and asserts the broker closes it without answering.
async fn expect_close(broker: &TestBroker, what: &str, bytes: &[u8]) {
    let mut c = broker.connect().await.expect("connect");
    c.send_raw(bytes).await.expect("send");
    if let Err(e) = c.expect_closed().await {
        panic!("{what}: {e}");
    }
}

/// A fresh connection still gets ApiVersions answered.
async fn assert_alive(broker: &TestBroker, after: &str) {
    let mut c = broker.connect().await.expect("connect");
    if let Err(e) = c.api_versions_ok().await {
        panic!("broker not serving after {after}: {e}");
    }
}

fn length_prefixed(len: i32, rest: &[u8]) -> Vec<u8> {
    let mut v = len.to_be_bytes().to_vec();
    v.extend_from_slice(rest);
    v
}

/// Produce v3 body of 12 bytes: null transactional id, acks 1, timeout 5000, topic count i32::MAX.
fn produce_count_bomb() -> Vec<u8> {
    let mut body = vec![0xff, 0xff, 0, 1, 0, 0, 0x13, 0x88];
    body.extend_from_slice(&i32::MAX.to_be_bytes());
    assert_eq!(body.len(), 12);
    raw_frame(0, 3, 1, &body)
}

/// CreateTopics v2: one topic whose name claims 32767 bytes, with three present.
fn create_topics_string_bomb() -> Vec<u8> {
    let mut body = 1i32.to_be_bytes().to_vec();
    body.extend_from_slice(&32767i16.to_be_bytes());
    body.extend_from_slice(b"abc");
    raw_frame(19, 2, 1, &body)
}

/// Metadata v12 (flexible, header v2) whose compact topics array claims u32::MAX - 1 entries.
fn metadata_compact_count_bomb() -> Vec<u8> {
    let mut inner = Vec::new();
    inner.extend_from_slice(&3i16.to_be_bytes());
    inner.extend_from_slice(&12i16.to_be_bytes());
    inner.extend_from_slice(&1i32.to_be_bytes());
    inner.extend_from_slice(&1i16.to_be_bytes());
    inner.push(b't');
    inner.push(0); // header tagged fields
    inner.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]); // varint u32::MAX
    length_prefixed(inner.len() as i32, &inner)
}

/// ApiVersions v3 (flexible body) whose compact client_software_name claims ~4 GiB.
fn api_versions_compact_string_bomb() -> Vec<u8> {
    let mut inner = Vec::new();
    inner.extend_from_slice(&18i16.to_be_bytes());
    inner.extend_from_slice(&3i16.to_be_bytes());
    inner.extend_from_slice(&1i32.to_be_bytes());
    inner.extend_from_slice(&1i16.to_be_bytes());
    inner.push(b't');
    inner.push(0);
    inner.extend_from_slice(&[0xfe, 0xff, 0xff, 0xff, 0x0f]);
    inner.extend_from_slice(b"x");
    length_prefixed(inner.len() as i32, &inner)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_lengths_close_the_connection() -> anyhow::Result<()> {
    let broker =
        TestBroker::start_with(&[("socket.request.max.bytes", Value::Int(1 << 20))]).await?;
    expect_close(&broker, "length 0", &length_prefixed(0, &[])).await;
    assert_alive(&broker, "length 0").await;
    expect_close(&broker, "length -1", &length_prefixed(-1, &[0; 16])).await;
    expect_close(&broker, "length i32::MIN", &length_prefixed(i32::MIN, &[])).await;
    assert_alive(&broker, "negative length").await;
    // Over socket.request.max.bytes (1 MiB): only the 4-byte header is sent.
    expect_close(&broker, "length 2 MiB", &length_prefixed(2 << 20, &[])).await;
    expect_close(&broker, "length i32::MAX", &length_prefixed(i32::MAX, &[])).await;
    assert_alive(&broker, "oversized length").await;
    // Exactly at the limit is not refused by length: the broker waits for the bytes.
    let mut c = broker.connect().await?;
    c.send_raw(&length_prefixed(1 << 20, &[0, 18, 0, 3]))
        .await?;
    assert_alive(&broker, "a pending frame at the limit").await;
    c.shutdown_write().await?;
    c.expect_closed().await?;
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_body_does_not_block_other_connections() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    let mut partial = length_prefixed(100, &[0, 18, 0, 3, 0, 0, 0, 1]);
    partial.extend_from_slice(&[0u8; 12]);
    assert_eq!(partial.len(), 24);
    c.send_raw(&partial).await?;
    // While that connection waits for 80 more bytes, others are served.
    for _ in 0..3 {
        assert_alive(&broker, "a truncated frame on another connection").await;
    }
    // Closing our write side ends it: the broker closes without answering.
    c.shutdown_write().await?;
    c.expect_closed().await?;
    assert_alive(&broker, "truncated body").await;
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_headers_unknown_keys_and_versions_close_the_connection() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    // Headers shorter than key + version + correlation id.
    for n in 1..8 {
        let bytes = vec![0u8; n];
        expect_close(
            &broker,
            &format!("{n}-byte header"),
            &length_prefixed(n as i32, &bytes),
        )
        .await;
    }
    assert_alive(&broker, "short headers").await;
    // Client id longer than the frame, and a negative client id length other than -1.
    let mut h = vec![0, 3, 0, 1, 0, 0, 0, 1];
    h.extend_from_slice(&200i16.to_be_bytes());
    h.extend_from_slice(b"abc");
    expect_close(
        &broker,
        "client id past the end",
        &length_prefixed(h.len() as i32, &h),
    )
    .await;
    let mut h = vec![0, 3, 0, 1, 0, 0, 0, 1];
    h.extend_from_slice(&(-2i16).to_be_bytes());
    expect_close(
        &broker,
        "client id length -2",
        &length_prefixed(h.len() as i32, &h),
    )
    .await;
    // Unknown API keys, known-but-unadvertised keys, unsupported versions.
    expect_close(&broker, "api key 9999", &raw_frame(9999, 0, 1, &[])).await;
    expect_close(&broker, "api key -1", &raw_frame(-1, 0, 1, &[])).await;
    // A key the decoder knows but the broker does not advertise.
    let unadvertised = kafka_protocol::messages::ApiKey::iter()
        .find(|k| ADVERTISED.iter().all(|a| a.key != *k))
        .expect("some API is not advertised");
    expect_close(
        &broker,
        &format!("{unadvertised:?} (not advertised)"),
        &raw_frame(unadvertised as i16, 0, 1, &[0; 32]),
    )
    .await;
    expect_close(&broker, "Metadata v99", &raw_frame(3, 99, 1, &[0, 0, 0, 0])).await;
    expect_close(&broker, "Metadata v-1", &raw_frame(3, -1, 1, &[0, 0, 0, 0])).await;
    expect_close(
        &broker,
        "Fetch v3 (below advertised)",
        &raw_frame(1, 3, 1, &[0; 32]),
    )
    .await;
    // ApiVersions is the exception (answered in v0 with error 35; see api_versions.rs).
    for a in ADVERTISED
        .iter()
        .filter(|a| a.key != kafka_protocol::messages::ApiKey::ApiVersions)
    {
        expect_close(
            &broker,
            &format!("{:?} v{}", a.key, a.max + 1),
            &raw_frame(a.key as i16, a.max + 1, 1, &[0; 16]),
        )
        .await;
    }
    assert_alive(&broker, "unsupported keys and versions").await;
    // A truncated body of a valid header: Metadata v1 whose topic array stops early.
    let mut body = 2i32.to_be_bytes().to_vec();
    body.extend_from_slice(&5i16.to_be_bytes());
    body.extend_from_slice(b"ab");
    expect_close(&broker, "Metadata v1 cut short", &raw_frame(3, 1, 1, &body)).await;
    assert_alive(&broker, "short bodies").await;
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decoder_hazards_close_the_connection_with_bounded_memory() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    // A connection opened before the hazards must keep working after them.
    let mut bystander = broker.connect().await?;
    bystander.api_versions_ok().await?;

    let hazards: [(&str, Vec<u8>); 4] = [
        ("Produce v3 topic count i32::MAX", produce_count_bomb()),
        (
            "CreateTopics v2 name length 32767",
            create_topics_string_bomb(),
        ),
        (
            "Metadata v12 compact count u32::MAX",
            metadata_compact_count_bomb(),
        ),
        (
            "ApiVersions v3 compact string ~4 GiB",
            api_versions_compact_string_bomb(),
        ),
    ];
    let rss_before = vm_rss_kib()?;
    for round in 0..10 {
        for (what, bytes) in &hazards {
            expect_close(&broker, &format!("{what} (round {round})"), bytes).await;
        }
    }
    let rss_after = vm_rss_kib()?;
    let growth_mib = rss_after.saturating_sub(rss_before) / 1024;
    assert!(
        growth_mib < 200,
        "RSS grew by {growth_mib} MiB ({rss_before} -> {rss_after} KiB)"
    );
    bystander.api_versions_ok().await?;
    assert_alive(&broker, "decoder hazards").await;
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_garbage_frames_never_take_the_broker_down() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut bystander = broker.connect().await?;
    let rss_before = vm_rss_kib()?;
    let mut rng = Rng::new(0x5eed_5111_ce00_0001);
    let mut answered = 0;
    for i in 0..200 {
        let (key, version) = match rng.below(4) {
            // Advertised keys at usable versions: exercises the real decoders.
            0 | 1 => {
                let a = ADVERTISED[rng.below(ADVERTISED.len() as u64) as usize];
                let lo = sluice::protocol::versions::usable_min(a.key).unwrap_or(a.min);
                let v = lo + rng.below((a.max - lo + 1) as u64) as i16;
                (a.key as i16, v)
            }
            2 => (rng.below(100) as i16, rng.below(20) as i16),
            _ => (rng.next_u64() as i16, rng.next_u64() as i16),
        };
        let body_len = rng.below(160) as usize;
        let mut body = rng.bytes(body_len);
        // Bias towards small array counts and string lengths now and then, so decoding gets deep.
        if body_len > 8 && rng.below(2) == 0 {
            body[0] = 0;
            body[1] = 0;
        }
        let frame = raw_frame(key, version, i, &body);
        let mut c = Client::connect(broker.addr).await?;
        c.send_raw(&frame).await?;
        c.shutdown_write().await?;
        let got = tokio::time::timeout(Duration::from_secs(15), c.read_until_closed())
            .await
            .map_err(|_| anyhow::anyhow!("frame {i} (key {key} v{version}): no close"))?
            .map_err(|e| anyhow::anyhow!("frame {i} (key {key} v{version}): {e}"))?;
        if !got.is_empty() {
            answered += 1;
            // Whatever came back is whole frames carrying our correlation id.
            assert!(got.len() >= 8, "frame {i}: short answer {got:?}");
            let len = i32::from_be_bytes([got[0], got[1], got[2], got[3]]) as usize;
            assert_eq!(
                len + 4,
                got.len(),
                "frame {i}: partial or extra response bytes"
            );
            assert_eq!(i32::from_be_bytes([got[4], got[5], got[6], got[7]]), i);
        }
        if i % 50 == 49 {
            bystander.api_versions_ok().await?;
        }
    }
    let rss_after = vm_rss_kib()?;
    let growth_mib = rss_after.saturating_sub(rss_before) / 1024;
    assert!(growth_mib < 200, "RSS grew by {growth_mib} MiB");
    eprintln!("random frames answered with a response: {answered} of 200");
    bystander.api_versions_ok().await?;
    assert_alive(&broker, "random garbage").await;
    broker.shutdown().await;
    Ok(())
}

/// Every advertised API at every usable version gets random bodies (biased towards small counts
/// and lengths so the decoders go deep and some requests reach the handlers): each frame is
/// either answered with one whole response carrying its correlation id or closes its own
/// connection, and the broker keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_bodies_for_every_api_and_version_never_take_the_broker_down() -> anyhow::Result<()>
{
    let broker = TestBroker::start().await?;
    // FUZZ_SEED / FUZZ_ROUNDS widen an exploratory run; the default is fixed and small.
    let seed = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_0a11_a915_0002u64);
    let rounds: u32 = std::env::var("FUZZ_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16);
    let mut rng = Rng::new(seed);
    let (mut sent, mut answered) = (0, 0);
    for a in ADVERTISED {
        let lo = sluice::protocol::versions::usable_min(a.key).unwrap_or(a.min);
        for version in lo..=a.max {
            for _ in 0..rounds {
                let body_len = rng.below(96) as usize;
                let mut body = rng.bytes(body_len);
                // Small array counts, string lengths and compact varints in the first fields.
                for b in body.iter_mut().take(12) {
                    if rng.below(3) > 0 {
                        *b = (rng.below(3)) as u8;
                    }
                }
                sent += 1;
                let id = sent;
                let frame = raw_frame(a.key as i16, version, id, &body);
                let mut c = Client::connect(broker.addr).await?;
                c.send_raw(&frame).await?;
                c.shutdown_write().await?;
                let what = format!("{:?} v{version}", a.key);
                let got = tokio::time::timeout(Duration::from_secs(15), c.read_until_closed())
                    .await
                    .map_err(|_| anyhow::anyhow!("{what}: neither answered nor closed"))?
                    .map_err(|e| anyhow::anyhow!("{what}: {e}"))?;
                if !got.is_empty() {
                    answered += 1;
                    assert!(got.len() >= 8, "{what}: short answer {got:?}");
                    let len = i32::from_be_bytes([got[0], got[1], got[2], got[3]]) as usize;
                    assert_eq!(len + 4, got.len(), "{what}: partial or extra bytes");
                    assert_eq!(i32::from_be_bytes([got[4], got[5], got[6], got[7]]), id);
                }
            }
        }
    }
    eprintln!("random bodies answered: {answered} of {sent}");
    assert!(sent > 500, "only {sent} frames sent");
    assert_alive(&broker, "random bodies for every API").await;
    broker.shutdown().await;
    Ok(())
}
