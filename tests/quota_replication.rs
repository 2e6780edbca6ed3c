//! Client quotas never throttle replication (Kafka: a follower's Fetch is exempt from the
//! consumer quota): with `consumer_byte_rate` at 1 kB/s for the `<default>` user and the
//! `<default>` client id on three combined nodes, acks=all writes of 2 MB to an RF 3 topic are
//! acknowledged (the followers fetch at full speed), while a consumer fetching the same bytes
//! from the leader is throttled. The quota is altered through one broker and applies on another.

mod common;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, BrokerId, CreateTopicsRequest,
    CreateTopicsResponse, FetchRequest, FetchResponse, MetadataRequest, MetadataResponse,
    ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use sluice::replica::fetcher::BrokerConnection;

const TOPIC: &str = "replicated-under-quota";
const CALL: Duration = Duration::from_secs(15);

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

async fn connect(port: u16) -> BrokerConnection {
    BrokerConnection::connect(&format!("127.0.0.1:{port}"), "quota-test", 64 << 20, CALL)
        .await
        .expect("connect")
}

async fn leader_with_full_isr(port: u16) -> Option<i32> {
    let mut c = BrokerConnection::connect(&format!("127.0.0.1:{port}"), "t", 1 << 20, CALL)
        .await
        .ok()?;
    let req = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(TopicName(s(TOPIC))))
    ]));
    let r: MetadataResponse = c.call(12, &req, CALL).await.ok()?;
    let p = r.topics.first()?.partitions.first()?;
    (p.error_code == 0 && p.isr_nodes.len() == 3).then_some(p.leader_id.0)
}

fn quota_entry(entity_type: &str) -> EntryData {
    EntryData::default()
        .with_entity(vec![EntityData::default()
            .with_entity_type(s(entity_type))
            .with_entity_name(None)])
        .with_ops(vec![OpData::default()
            .with_key(s("consumer_byte_rate"))
            .with_value(1024.0)])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn followers_are_never_throttled_by_client_quotas() {
    let dir = tempfile::tempdir().unwrap();
    let (dev, _configs, nodes) = common::three_nodes(
        dir.path(),
        &[
            ("KAFKA_BROKER_HEARTBEAT_INTERVAL_MS", "300"),
            ("KAFKA_CONTROLLER_QUORUM_ELECTION_TIMEOUT_MS", "1000"),
            ("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "1"),
            ("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "1"),
        ],
    )
    .await;
    let port = |id: i32| dev.port + (id - 1) as u16;
    let mut admin = connect(port(1)).await;
    let create = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(s(TOPIC)))
            .with_num_partitions(1)
            .with_replication_factor(3)
            .with_configs(vec![CreatableTopicConfig::default()
                .with_name(s("min.insync.replicas"))
                .with_value(Some(s("3")))])]);
    let r: CreateTopicsResponse = admin.call(7, &create, CALL).await.expect("create");
    assert_eq!(r.topics[0].error_code, 0, "{:?}", r.topics[0].error_message);
    let quotas = AlterClientQuotasRequest::default()
        .with_entries(vec![quota_entry("user"), quota_entry("client-id")]);
    let r: AlterClientQuotasResponse = admin.call(1, &quotas, CALL).await.expect("quotas");
    assert!(
        r.entries.iter().all(|e| e.error_code == 0),
        "{:?}",
        r.entries
    );

    let mut leader = None;
    for _ in 0..300 {
        leader = leader_with_full_isr(port(1)).await;
        if leader.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let leader = leader.expect("a leader with all three replicas in sync");
    // The quota is in every broker's image before the writes (each applies the log itself).
    for id in 1..=3 {
        let image_has_it = || {
            let b = &nodes[(id - 1) as usize].as_ref().unwrap().broker;
            b.image().client_quotas().iter().count() == 2
        };
        for _ in 0..300 {
            if image_has_it() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(image_has_it(), "broker {id} lacks the quotas");
    }

    // 2 MB with acks=all and min.insync.replicas 3: each answer needs both followers to have
    // fetched the batch. At 1 kB/s that would take half an hour; unthrottled it takes moments.
    let mut producer = connect(port(leader)).await;
    let value = vec![b'r'; 100_000];
    for i in 0..20 {
        let records = Bytes::from(sluice::record::build_batch(
            0,
            1_700_000_000_000,
            (-1, -1, -1),
            &[(None, Some(&value[..]))],
        ));
        let req = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(10_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(s(TOPIC)))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(records))])]);
        let r: ProduceResponse = producer.call(9, &req, CALL).await.expect("produce");
        let p = &r.responses[0].partition_responses[0];
        assert_eq!(p.error_code, 0, "batch {i}: {:?}", p.error_message);
        assert_eq!(r.throttle_time_ms, 0, "no producer quota");
    }

    // A consumer of the same bytes on the leader is held to its quota: a 100 kB batch (sent
    // whole however small the quota's window, 1 kB x 10 s) is 10 kB/s over the windows, so the
    // fetch answers empty with the throttle time.
    let mut consumer = connect(port(leader)).await;
    let fetch = |offset: i64| {
        FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_min_bytes(1)
            .with_max_bytes(50 << 20)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(s(TOPIC)))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(offset)
                    .with_current_leader_epoch(-1)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(10 << 20)])])
    };
    let r: FetchResponse = consumer.call(12, &fetch(0), CALL).await.expect("fetch");
    assert!(r.throttle_time_ms > 0, "the consumer was not throttled");
    assert!(r.responses.is_empty());
}
