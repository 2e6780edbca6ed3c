//! Client quotas enforced on the wire, as Kafka enforces them (KIP-13, KIP-55, KIP-219):
//! `producer_byte_rate` and `consumer_byte_rate` set with AlterClientQuotas throttle the client
//! id they name (or every client, on the user `ANONYMOUS`, Kafka's principal for PLAINTEXT),
//! the response carries `throttle_time_ms`, and the broker reads nothing more from that
//! connection for that long, while other connections go on.
//!
//! The brokers run with `quota.window.num=2` and `quota.window.size.seconds=1`, so a rate is
//! measured over 1 to 2 s and a test sees its steady state within seconds (Kafka's 11 one-second
//! windows allow a 10 s burst first; `client_quota::manager`'s unit tests cover those). Timing
//! assertions are bounds with wide margins: a request held by a mute can only take longer on a
//! loaded machine, never shorter.

use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use bytes::Bytes;
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use protocol_tests::{
    api_versions_request, base_offset_of, batch, create_topic, encode_request_as, fetch_request,
    produce_request, split_batches, Client, TestBroker, Uuid,
};
use sluice::config::Value;

const TOPIC: &str = "quota";

async fn start() -> Result<TestBroker> {
    TestBroker::start_with(&[
        ("quota.window.num", Value::Int(2)),
        ("quota.window.size.seconds", Value::Int(1)),
    ])
    .await
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// Sets (or with `None` removes) `key` of the entity `(entity_type, name)` (`None`: `<default>`).
async fn set_quota(
    admin: &mut Client,
    entity_type: &str,
    name: Option<&str>,
    key: &str,
    value: Option<f64>,
) -> Result<()> {
    let entry = EntryData::default()
        .with_entity(vec![EntityData::default()
            .with_entity_type(s(entity_type))
            .with_entity_name(name.map(s))])
        .with_ops(vec![OpData::default()
            .with_key(s(key))
            .with_value(value.unwrap_or(0.0))
            .with_remove(value.is_none())]);
    let r = admin
        .call(
            1,
            &AlterClientQuotasRequest::default().with_entries(vec![entry]),
        )
        .await?;
    ensure!(
        r.entries.iter().all(|e| e.error_code == 0),
        "AlterClientQuotas: {:?}",
        r.entries
    );
    Ok(())
}

/// A Produce v9 of one batch holding one record of `value_len` bytes, with `acks`.
fn produce_of(value_len: usize, acks: i16) -> ProduceRequest {
    let value = vec![b'v'; value_len];
    produce_request(TOPIC, 0, acks, Bytes::from(batch(&[&value])))
}

/// The bytes Kafka charges a request: its frame without the length prefix.
fn request_size(client_id: &str, request: &ProduceRequest) -> Result<usize> {
    Ok(encode_request_as(Some(client_id), 0, 9, request)?.len() - 4)
}

/// Produces one `value_len` record (acks=1): the throttle time answered and the bytes charged.
async fn produce_one(c: &mut Client, client_id: &str, value_len: usize) -> Result<(i32, usize)> {
    let request = produce_of(value_len, 1);
    let size = request_size(client_id, &request)?;
    let r = c.call(9, &request).await?;
    let p = &r.responses[0].partition_responses[0];
    ensure!(p.error_code == 0, "produce error {}", p.error_code);
    Ok((r.throttle_time_ms, size))
}

/// How long ApiVersions takes on `c`: at least what is left of a throttle.
async fn api_versions_time(c: &mut Client) -> Result<Duration> {
    let start = Instant::now();
    c.call(3, &api_versions_request()).await?;
    Ok(start.elapsed())
}

/// Produces `value_len` records back to back for `period`: (bytes charged, requests, throttled
/// answers, seconds taken).
async fn produce_for(
    c: &mut Client,
    client_id: &str,
    value_len: usize,
    period: Duration,
) -> Result<(usize, usize, usize, f64)> {
    let start = Instant::now();
    let (mut bytes, mut requests, mut throttled) = (0, 0, 0);
    while start.elapsed() < period {
        let (t, n) = produce_one(c, client_id, value_len).await?;
        bytes += n;
        requests += 1;
        throttled += usize::from(t > 0);
    }
    Ok((bytes, requests, throttled, start.elapsed().as_secs_f64()))
}

#[tokio::test]
async fn produce_over_its_quota_is_throttled_muted_and_held_near_it_while_others_are_not(
) -> Result<()> {
    const QUOTA: f64 = 262_144.0;
    let b = start().await?;
    let mut admin = b.connect().await?;
    create_topic(&mut admin, TOPIC, 1, &[]).await?;
    set_quota(
        &mut admin,
        "client-id",
        Some("slow"),
        "producer_byte_rate",
        Some(QUOTA),
    )
    .await?;
    let mut slow = b.connect().await?.with_client_id(Some("slow"));
    let mut fast = b.connect().await?.with_client_id(Some("fast"));

    // A new rate is measured over at least one window (1 s): the first QUOTA bytes pass, and
    // the request that takes the sum over it is the first throttled (the window is under 2 s).
    let (mut sent, mut first_throttle) = (0usize, 0);
    while first_throttle == 0 {
        let (t, n) = produce_one(&mut slow, "slow", 32 * 1024).await?;
        ensure!(
            t == 0 || sent as f64 <= 2.0 * QUOTA,
            "throttled only after {sent} bytes"
        );
        sent += n;
        first_throttle = t;
        ensure!(
            sent as f64 <= 4.0 * QUOTA,
            "never throttled: {sent} bytes sent"
        );
    }
    assert!(
        sent as f64 > QUOTA,
        "throttled at {sent} bytes, within the quota"
    );
    // The broker reads nothing more from this connection until the throttle time is over.
    let waited = api_versions_time(&mut slow).await?;
    assert!(
        waited + Duration::from_millis(50) >= Duration::from_millis(first_throttle as u64),
        "answered after {waited:?} of a {first_throttle} ms throttle"
    );

    let period = Duration::from_secs(4);
    let (slow_run, fast_run) = tokio::join!(
        produce_for(&mut slow, "slow", 32 * 1024, period),
        produce_for(&mut fast, "fast", 32 * 1024, period),
    );
    let (bytes, requests, throttled, secs) = slow_run?;
    let rate = bytes as f64 / secs / QUOTA;
    eprintln!("slow: {bytes} bytes in {requests} requests ({throttled} throttled) over {secs:.2} s: {rate:.2} x quota");
    assert!(throttled > 0, "the slow client was never throttled again");
    assert!(rate <= 1.6, "{rate:.2} x the quota over {secs:.2} s");
    assert!(
        rate >= 0.4,
        "{rate:.2} x the quota over {secs:.2} s: held far below it"
    );
    let (bytes, requests, throttled, secs) = fast_run?;
    let rate = bytes as f64 / secs / QUOTA;
    eprintln!("fast: {bytes} bytes in {requests} requests ({throttled} throttled) over {secs:.2} s: {rate:.2} x quota");
    assert_eq!(
        throttled, 0,
        "a client id without a quota is never throttled"
    );
    assert!(
        rate > 1.0,
        "the unthrottled client got only {rate:.2} x the other's quota"
    );
    b.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn acks_0_over_the_quota_gets_no_answer_and_a_muted_connection() -> Result<()> {
    const QUOTA: f64 = 16_384.0;
    let b = start().await?;
    let mut admin = b.connect().await?;
    create_topic(&mut admin, TOPIC, 1, &[]).await?;
    set_quota(
        &mut admin,
        "client-id",
        Some("quiet"),
        "producer_byte_rate",
        Some(QUOTA),
    )
    .await?;
    let mut quiet = b.connect().await?.with_client_id(Some("quiet"));
    let request = produce_of(64 * 1024, 0);
    let size = request_size("quiet", &request)? as f64;
    // A new rate over one 1 s window: Kafka's throttle is (size - quota) / quota * 1000 ms.
    let expected = ((size - QUOTA) / QUOTA * 1000.0).round() as u64;
    quiet.send(9, &request).await?;
    // No Produce answer (acks=0): the next frame read is ApiVersions', after the throttle.
    let waited = api_versions_time(&mut quiet).await?;
    assert!(
        waited + Duration::from_millis(50) >= Duration::from_millis(expected),
        "answered after {waited:?}, the throttle was {expected} ms"
    );
    assert!(
        b.network()?
            .stats
            .throttles
            .load(std::sync::atomic::Ordering::Relaxed)
            >= 1
    );
    b.shutdown().await;
    Ok(())
}

/// Fetch v12 of partition 0 from `offset` with `max_wait_ms`: the response.
async fn fetch(c: &mut Client, offset: i64, max_wait_ms: i32) -> Result<FetchResponse> {
    c.call(
        12,
        &fetch_request(12, TOPIC, Uuid::nil(), 0, offset, max_wait_ms, 1),
    )
    .await
}

fn records(r: &FetchResponse) -> Bytes {
    r.responses
        .first()
        .and_then(|t| t.partitions.first())
        .and_then(|p| p.records.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn fetch_over_consumer_byte_rate_answers_empty_with_the_throttle_time() -> Result<()> {
    const QUOTA: f64 = 16_384.0;
    let b = start().await?;
    let mut admin = b.connect().await?;
    create_topic(&mut admin, TOPIC, 1, &[]).await?;
    for _ in 0..10 {
        produce_one(&mut admin, protocol_tests::CLIENT_ID, 6_000).await?;
    }
    set_quota(
        &mut admin,
        "client-id",
        Some("reader"),
        "consumer_byte_rate",
        Some(QUOTA),
    )
    .await?;
    let mut reader = b.connect().await?.with_client_id(Some("reader"));

    // At most the quota over the windows is fetched at once (Kafka's maxQuotaWindowBytes:
    // 16 KiB x (2 - 1) x 1 s): two of the six ~6 KB batches.
    let r = fetch(&mut reader, 0, 0).await?;
    assert_eq!(r.throttle_time_ms, 0);
    let got = records(&r);
    let batches = split_batches(&got)?.len();
    assert_eq!(batches, 2, "{} bytes fetched", got.len());
    assert!(got.len() as f64 <= QUOTA);

    // The next two batches take the rate over the quota (unless this machine took half a second
    // between the two fetches: then the two after them): an empty answer with the throttle time,
    // no partitions, no error.
    let mut next = 2;
    let r = loop {
        let r = fetch(&mut reader, next, 0).await?;
        if r.throttle_time_ms > 0 {
            break r;
        }
        next += split_batches(&records(&r))?.len() as i64;
        ensure!(next < 8, "never throttled up to offset {next}");
    };
    assert_eq!(r.error_code, 0);
    assert!(
        r.responses.is_empty(),
        "a throttled fetch carries no partitions"
    );
    let waited = api_versions_time(&mut reader).await?;
    assert!(
        waited + Duration::from_millis(50) >= Duration::from_millis(r.throttle_time_ms as u64),
        "answered after {waited:?} of a {} ms throttle",
        r.throttle_time_ms
    );
    // The throttled answer's bytes were not charged: the consumer goes on where it was.
    let mut attempts = 0;
    let resumed = loop {
        let r = fetch(&mut reader, next, 0).await?;
        let got = records(&r);
        if !got.is_empty() {
            break got;
        }
        attempts += 1;
        ensure!(attempts < 20, "no data after {attempts} throttled fetches");
    };
    assert_eq!(base_offset_of(split_batches(&resumed)?[0]), next);

    // A long poll answered when a 40 kB batch arrives: over the quota whatever was charged
    // before, so it answers empty with the throttle time, and the mute starts with it.
    let end = 10;
    let poll = tokio::spawn(async move {
        let r = fetch(&mut reader, end, 10_000).await;
        (reader, r)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    produce_one(&mut admin, protocol_tests::CLIENT_ID, 40_000).await?;
    let (mut reader, r) = poll.await?;
    let r = r?;
    assert!(
        r.throttle_time_ms > 0,
        "the long poll's answer was not throttled"
    );
    assert!(r.responses.is_empty());
    let waited = api_versions_time(&mut reader).await?;
    assert!(
        waited + Duration::from_millis(50) >= Duration::from_millis(r.throttle_time_ms as u64),
        "answered after {waited:?} of a {} ms throttle",
        r.throttle_time_ms
    );
    b.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn quota_changes_apply_from_the_next_request_and_user_quotas_cover_every_client() -> Result<()>
{
    let b = start().await?;
    let mut admin = b.connect().await?;
    create_topic(&mut admin, TOPIC, 1, &[]).await?;
    let mut c = b.connect().await?.with_client_id(Some("later"));
    assert_eq!(
        produce_one(&mut c, "later", 64 * 1024).await?.0,
        0,
        "no quota yet"
    );
    set_quota(
        &mut admin,
        "client-id",
        Some("later"),
        "producer_byte_rate",
        Some(32_768.0),
    )
    .await?;
    let (t, _) = produce_one(&mut c, "later", 64 * 1024).await?;
    assert!(t > 0, "the new quota did not apply to the next request");
    set_quota(
        &mut admin,
        "client-id",
        Some("later"),
        "producer_byte_rate",
        None,
    )
    .await?;
    assert_eq!(
        produce_one(&mut c, "later", 64 * 1024).await?.0,
        0,
        "quota removed"
    );

    // A quota on the user ANONYMOUS (every PLAINTEXT client, as in Kafka) puts all client ids
    // on one rate: each of two 50 kB requests is within 64 kB/s, together they are not.
    set_quota(
        &mut admin,
        "user",
        Some("ANONYMOUS"),
        "producer_byte_rate",
        Some(65_536.0),
    )
    .await?;
    let mut a = b.connect().await?.with_client_id(Some("a"));
    let mut other = b.connect().await?.with_client_id(Some("b"));
    assert_eq!(produce_one(&mut a, "a", 50_000).await?.0, 0);
    let (t, _) = produce_one(&mut other, "b", 50_000).await?;
    assert!(
        t > 0,
        "the user's quota did not count client a's bytes for client b"
    );
    // A client-id quota of b does not beat the user's (user > client-id in Kafka's order).
    set_quota(
        &mut admin,
        "client-id",
        Some("b"),
        "producer_byte_rate",
        Some(1e9),
    )
    .await?;
    let (t, _) = produce_one(&mut other, "b", 50_000).await?;
    assert!(t > 0, "the client-id quota took precedence over the user's");
    b.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_throttled_connection_blocks_no_one_and_is_closed_by_shutdown() -> Result<()> {
    let b = start().await?;
    let mut admin = b.connect().await?;
    create_topic(&mut admin, TOPIC, 1, &[]).await?;
    set_quota(
        &mut admin,
        "client-id",
        Some("stuck"),
        "producer_byte_rate",
        Some(1_024.0),
    )
    .await?;
    let mut stuck = b.connect().await?.with_client_id(Some("stuck"));
    let (t, _) = produce_one(&mut stuck, "stuck", 100 * 1024).await?;
    assert!(t > 60_000, "a {t} ms throttle");
    let network = b.network()?;
    protocol_tests::wait_until("the connection waits out its throttle", || {
        network
            .stats
            .throttled_connections
            .load(std::sync::atomic::Ordering::Relaxed)
            == 1
    })
    .await?;
    // Other connections are served meanwhile.
    let mut other = b.connect().await?;
    assert!(api_versions_time(&mut other).await? < Duration::from_secs(5));
    stuck.send(3, &api_versions_request()).await?;
    let start = Instant::now();
    b.shutdown().await;
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "shutdown took {:?} with a connection throttled for {t} ms",
        start.elapsed()
    );
    stuck.expect_closed().await?;
    Ok(())
}
