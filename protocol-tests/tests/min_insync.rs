//! acks=all needs the effective minimum of in-sync replicas, `min(min.insync.replicas,
//! replication factor)` (Kafka 4.x's leader check before the append): on one node a topic has
//! replication factor 1, so a topic with `min.insync.replicas = 2` still takes acks=all, as Kafka
//! 4.1.2 does. The refusal (NOT_ENOUGH_REPLICAS) is tested on three brokers
//! (`tests/replication.rs` in the sluice crate).

use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::ProduceRequest;
use protocol_tests::{batch, create_topic, list_offsets, topic_name, TestBroker};

fn request(acks: i16, topic: &str) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(Bytes::from(batch(&[b"r"]))))])])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_all_with_min_insync_replicas_above_the_replication_factor_is_accepted(
) -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    create_topic(&mut c, "misr", 1, &[("min.insync.replicas", "2")]).await?;
    create_topic(&mut c, "one", 1, &[]).await?;

    let r = c.call(9, &request(-1, "misr")).await?;
    let p = &r.responses[0].partition_responses[0];
    assert_eq!(
        (p.error_code, p.base_offset),
        (0, 0),
        "RF 1: the effective minimum is 1"
    );
    assert_eq!(list_offsets(&mut c, 7, "misr", 0, -1).await?.offset, 1);

    // acks=1 does not wait for the ISR: accepted, as in Kafka.
    let r = c.call(9, &request(1, "misr")).await?;
    let p = &r.responses[0].partition_responses[0];
    assert_eq!((p.error_code, p.base_offset), (0, 1));

    // The default (1) lets acks=all through.
    let r = c.call(9, &request(-1, "one")).await?;
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    broker.shutdown().await;
    Ok(())
}
