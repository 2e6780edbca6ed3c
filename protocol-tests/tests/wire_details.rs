//! Answer details the differential test (`scripts/differential`) found different from Kafka
//! 4.1.2, each pinned here at the field the crate decodes:
//! - Fetch of a partition the broker does not have: `aborted_transactions` is an empty list (Kafka
//!   answers it before reading, from its metadata), where a read error leaves it null.
//! - FindCoordinator of a known group: `error_message` is "" in v4's per-key answers and "NONE"
//!   in v1-v3's (Kafka's `Errors.NONE` message), never null.

use anyhow::{ensure, Context, Result};
use kafka_protocol::messages::FindCoordinatorRequest;
use kafka_protocol::protocol::StrBytes;
use protocol_tests::{batch, create_topic, fetch_request, produce, Client, TestBroker, Uuid};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_of_an_unknown_partition_carries_an_empty_aborted_transactions_list() -> Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    create_topic(&mut c, "wire-f", 1, &[]).await?;
    produce(&mut c, 11, "wire-f", 0, batch(&[b"x"])).await?;
    for version in [4, 12] {
        let unknown = c
            .call(
                version,
                &fetch_request(version, "wire-f", Uuid::nil(), 7, 0, 0, 1),
            )
            .await?;
        let p = &unknown.responses[0].partitions[0];
        ensure!(p.error_code == 3, "v{version}: error {}", p.error_code);
        ensure!(
            p.aborted_transactions.as_deref() == Some(&[][..]),
            "v{version}: unknown partition aborted_transactions {:?}, want Some([])",
            p.aborted_transactions
        );
        // a read error (offset out of range) keeps it null, as Kafka's read path does
        let out_of_range = c
            .call(
                version,
                &fetch_request(version, "wire-f", Uuid::nil(), 0, 1000, 0, 1),
            )
            .await?;
        let p = &out_of_range.responses[0].partitions[0];
        ensure!(p.error_code == 1, "v{version}: error {}", p.error_code);
        ensure!(
            p.aborted_transactions.is_none(),
            "v{version}: out-of-range aborted_transactions {:?}, want None",
            p.aborted_transactions
        );
    }
    broker.shutdown().await;
    Ok(())
}

async fn coordinator_message(c: &mut Client, version: i16) -> Result<Option<String>> {
    let mut request = FindCoordinatorRequest::default().with_key_type(0);
    if version >= 4 {
        request = request.with_coordinator_keys(vec![StrBytes::from_static_str("wire-g")]);
    } else {
        request = request.with_key(StrBytes::from_static_str("wire-g"));
    }
    let r = c.call(version, &request).await?;
    Ok(if version >= 4 {
        let k = r.coordinators.first().context("no coordinator")?;
        ensure!(k.error_code == 0, "v{version}: error {}", k.error_code);
        k.error_message.as_ref().map(|m| m.to_string())
    } else {
        ensure!(r.error_code == 0, "v{version}: error {}", r.error_code);
        r.error_message.as_ref().map(|m| m.to_string())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_coordinator_error_message_is_kafkas_none_message() -> Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    for (version, want) in [(1, "NONE"), (3, "NONE"), (4, ""), (6, "")] {
        let got = coordinator_message(&mut c, version).await?;
        ensure!(
            got.as_deref() == Some(want),
            "FindCoordinator v{version}: error_message {got:?}, want Some({want:?})"
        );
    }
    broker.shutdown().await;
    Ok(())
}
