//! acks=all needs `min.insync.replicas` in-sync replicas (Kafka's leader check before the append):
//! on one node the ISR is the broker alone, so a topic with `min.insync.replicas = 2` answers
//! NOT_ENOUGH_REPLICAS to acks=all and appends nothing, while acks=1 is still accepted.

use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::ProduceRequest;
use protocol_tests::{batch, create_topic, list_offsets, topic_name, TestBroker};

const NOT_ENOUGH_REPLICAS: i16 = 19;

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
async fn acks_all_below_min_insync_replicas_is_refused_before_the_append() -> anyhow::Result<()> {
    let broker = TestBroker::start().await?;
    let mut c = broker.connect().await?;
    create_topic(&mut c, "misr", 1, &[("min.insync.replicas", "2")]).await?;
    create_topic(&mut c, "one", 1, &[]).await?;

    let r = c.call(9, &request(-1, "misr")).await?;
    let p = &r.responses[0].partition_responses[0];
    assert_eq!(p.error_code, NOT_ENOUGH_REPLICAS);
    let msg = p.error_message.as_deref().unwrap_or_default().to_string();
    assert!(msg.contains("min.isr requirement of 2"), "{msg}");
    assert_eq!(list_offsets(&mut c, 7, "misr", 0, -1).await?.offset, 0);

    // acks=1 does not wait for the ISR: accepted, as in Kafka.
    let r = c.call(9, &request(1, "misr")).await?;
    let p = &r.responses[0].partition_responses[0];
    assert_eq!((p.error_code, p.base_offset), (0, 0));

    // The default (1) lets acks=all through.
    let r = c.call(9, &request(-1, "one")).await?;
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    broker.shutdown().await;
    Ok(())
}
