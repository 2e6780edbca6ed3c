//! Replication-factor keys on one node behave as in Kafka with one live broker:
//! `default.replication.factor` above 1 makes CreateTopics with factor -1 fail with
//! INVALID_REPLICATION_FACTOR; `offsets.topic.replication.factor` /
//! `transaction.state.log.replication.factor` above 1 leave the internal topic uncreatable, so
//! FindCoordinator answers COORDINATOR_NOT_AVAILABLE (15). At 1 (the compose setting) all work.

use anyhow::{Context, Result};
use kafka_protocol::messages::FindCoordinatorRequest;
use kafka_protocol::protocol::StrBytes;
use protocol_tests::{create_topics_request, TestBroker};
use sluice::config::Value;

const INVALID_REPLICATION_FACTOR: i16 = 38;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;

async fn coordinator_error(b: &TestBroker, key_type: i8) -> Result<i16> {
    let mut c = b.connect().await?;
    let r = c
        .call(
            4,
            &FindCoordinatorRequest::default()
                .with_key_type(key_type)
                .with_coordinator_keys(vec![StrBytes::from_static_str("k")]),
        )
        .await?;
    Ok(r.coordinators.first().context("coordinator")?.error_code)
}

async fn create_error(b: &TestBroker, name: &str, rf: i16) -> Result<i16> {
    let mut c = b.connect().await?;
    let r = c.call(7, &create_topics_request(name, 1, rf, &[])).await?;
    Ok(r.topics.first().context("topic")?.error_code)
}

#[tokio::test]
async fn factors_above_the_live_broker_count_fail_as_in_kafka() -> Result<()> {
    let b = TestBroker::start_with(&[
        ("default.replication.factor", Value::Int(3)),
        ("offsets.topic.replication.factor", Value::Int(3)),
        ("transaction.state.log.replication.factor", Value::Int(2)),
    ])
    .await?;
    assert_eq!(
        create_error(&b, "rf-default", -1).await?,
        INVALID_REPLICATION_FACTOR
    );
    assert_eq!(create_error(&b, "rf-one", 1).await?, 0);
    assert_eq!(coordinator_error(&b, 0).await?, COORDINATOR_NOT_AVAILABLE);
    assert_eq!(coordinator_error(&b, 1).await?, COORDINATOR_NOT_AVAILABLE);
    b.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn factor_one_is_the_single_node_setting() -> Result<()> {
    let b = TestBroker::start_with(&[
        ("default.replication.factor", Value::Int(1)),
        ("offsets.topic.replication.factor", Value::Int(1)),
        ("transaction.state.log.replication.factor", Value::Int(1)),
    ])
    .await?;
    assert_eq!(create_error(&b, "rf-default", -1).await?, 0);
    assert_eq!(coordinator_error(&b, 0).await?, 0);
    assert_eq!(coordinator_error(&b, 1).await?, 0);
    b.shutdown().await;
    Ok(())
}
