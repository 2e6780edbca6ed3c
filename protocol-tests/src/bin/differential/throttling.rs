//! Client quota enforcement in the differential corpus: a `producer_byte_rate` and a
//! `consumer_byte_rate` of 1000 bytes/s on the user `ANONYMOUS` with the client id
//! `diff-throttled` (the most specific entity, so the quotas the corpus set before do not apply),
//! then that client id's requests, each on a fresh connection (a throttled connection is muted):
//!
//! - a Produce of exactly 10,300 bytes: a new rate is measured over Kafka's 10 whole windows, so
//!   the throttle time is the same on both brokers to the millisecond, (10,300 / 10 - 1000) / 1000
//!   x 10,000 = 300 ms, compared exactly; and the connection answers nothing for that long;
//! - a Fetch of a ~6 kB batch, within the quota: answered, not throttled;
//! - once a second ~6 kB batch is there, a Fetch of it, which takes the rate over the quota:
//!   answered empty with a throttle time (its value depends on the milliseconds between the two
//!   fetches, so only its presence is compared).
//!
//! No fetch here reaches the quota's cap on fetch size (1000 x 10 s = 10,000 bytes): Kafka fills
//! a capped read to the byte, cutting the next batch (see KNOWN), so such a fetch is over the
//! quota on Kafka and not on Sluice, which sends whole batches only.

use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use bytes::Bytes;
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::{AlterClientQuotasRequest, FetchResponse, ProduceRequest};
use kafka_protocol::protocol::StrBytes;
use protocol_tests::{
    api_versions_request, batch, create_topics_request, encode_request_as, fetch_request,
    produce_request, Client, Uuid,
};

/// The fetched topic; the Produce goes to its own.
const TOPIC: &str = "diff-quota";
const PRODUCE_TOPIC: &str = "diff-quota-produce";
const CLIENT_ID: &str = "diff-throttled";
const QUOTA: f64 = 1000.0;
/// The Produce's size: 3% over the quota's 10 windows.
const PRODUCE_BYTES: usize = 10_300;

#[derive(Clone, Copy)]
pub enum ThrottleCase {
    SetQuotas,
    ProduceOverQuota,
    FetchWithinQuota,
    FetchOverQuota,
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

async fn throttled_client(c: &Client) -> Result<Client> {
    Ok(Client::connect(c.peer_addr()?)
        .await?
        .with_client_id(Some(CLIENT_ID)))
}

/// The Produce (acks=1, one record) whose frame without its length prefix is `PRODUCE_BYTES`.
fn sized_produce() -> Result<ProduceRequest> {
    let size = |r: &ProduceRequest| -> Result<usize> {
        Ok(encode_request_as(Some(CLIENT_ID), 0, 9, r)?.len() - 4)
    };
    for value_len in (9_000..PRODUCE_BYTES).rev() {
        let value = vec![b'q'; value_len];
        let r = produce_request(PRODUCE_TOPIC, 0, 1, Bytes::from(batch(&[&value])));
        if size(&r)? == PRODUCE_BYTES {
            return Ok(r);
        }
    }
    anyhow::bail!("no record size makes a {PRODUCE_BYTES}-byte Produce")
}

/// Appends a batch of one 6,000-byte record to the fetched topic (as the corpus' own client):
/// its error code.
async fn produce_6kb(c: &mut Client) -> Result<i16> {
    let value = vec![b'f'; 6_000];
    let r = produce_request(TOPIC, 0, 1, Bytes::from(batch(&[&value])));
    let p = c.call(9, &r).await?;
    Ok(p.responses[0].partition_responses[0].error_code)
}

fn fetch_summary(r: &FetchResponse) -> String {
    format!(
        "throttled: {}\nerror_code: {}\npartitions answered: {}\n{r:#?}",
        r.throttle_time_ms > 0,
        r.error_code,
        r.responses
            .iter()
            .map(|t| t.partitions.len())
            .sum::<usize>()
    )
}

/// Sends `case`'s requests and renders the answers.
pub async fn exchange(c: &mut Client, case: ThrottleCase) -> Result<String> {
    Ok(match case {
        ThrottleCase::SetQuotas => {
            let entry = EntryData::default()
                .with_entity(vec![
                    EntityData::default()
                        .with_entity_type(s("user"))
                        .with_entity_name(Some(s("ANONYMOUS"))),
                    EntityData::default()
                        .with_entity_type(s("client-id"))
                        .with_entity_name(Some(s(CLIENT_ID))),
                ])
                .with_ops(vec![
                    OpData::default()
                        .with_key(s("producer_byte_rate"))
                        .with_value(QUOTA),
                    OpData::default()
                        .with_key(s("consumer_byte_rate"))
                        .with_value(QUOTA),
                ]);
            let alter = AlterClientQuotasRequest::default().with_entries(vec![entry]);
            let altered = c.call(1, &alter).await?;
            let mut created = Vec::new();
            for topic in [TOPIC, PRODUCE_TOPIC] {
                let r = c.call(7, &create_topics_request(topic, 1, 1, &[])).await?;
                created.push(r.topics[0].error_code);
            }
            let produced = vec![produce_6kb(c).await?];
            // Kafka's broker applies the quota records a moment after the controller answers.
            tokio::time::sleep(Duration::from_millis(300)).await;
            format!(
                "alter errors: {:?}\ncreate errors: {created:?}\nproduce errors: {produced:?}",
                altered
                    .entries
                    .iter()
                    .map(|e| e.error_code)
                    .collect::<Vec<_>>(),
            )
        }
        ThrottleCase::ProduceOverQuota => {
            let mut t = throttled_client(c).await?;
            let r = t.call(9, &sized_produce()?).await?;
            let throttle = Duration::from_millis(u64::try_from(r.throttle_time_ms).unwrap_or(0));
            let start = Instant::now();
            t.call(3, &api_versions_request()).await?;
            let muted = start.elapsed() + Duration::from_millis(50) >= throttle;
            format!(
                "exact_throttle_time_ms: {}\nnext request held for the throttle: {muted}\n{r:#?}",
                r.throttle_time_ms
            )
        }
        ThrottleCase::FetchWithinQuota => {
            let mut t = throttled_client(c).await?;
            let r = t
                .call(12, &fetch_request(12, TOPIC, Uuid::nil(), 0, 0, 0, 1))
                .await?;
            ensure!(r.responses.len() == 1, "{} topics", r.responses.len());
            fetch_summary(&r)
        }
        ThrottleCase::FetchOverQuota => {
            let produced = produce_6kb(c).await?;
            let mut t = throttled_client(c).await?;
            let r = t
                .call(12, &fetch_request(12, TOPIC, Uuid::nil(), 0, 1, 0, 1))
                .await?;
            format!("produce error: {produced}\n{}", fetch_summary(&r))
        }
    })
}
