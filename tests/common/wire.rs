//! Kafka requests the multi-process role tests send (`roles.rs`, `broker_roles.rs`): one
//! connection per call, answers reduced to what the tests compare.
#![allow(dead_code)] // each test binary uses its own subset

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    BrokerId, CreateTopicsRequest, CreateTopicsResponse, DescribeQuorumRequest,
    DescribeQuorumResponse, FetchRequest, FetchResponse, MetadataRequest, MetadataResponse,
    ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use sluice::replica::fetcher::BrokerConnection;

pub const CALL: Duration = Duration::from_secs(15);

pub fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

pub async fn connect(port: u16) -> Option<BrokerConnection> {
    BrokerConnection::connect(&format!("127.0.0.1:{port}"), "roles-test", 64 << 20, CALL)
        .await
        .ok()
}

pub async fn wait_for<T>(what: &str, secs: u64, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The broker ids broker `port`'s Metadata lists, sorted.
pub async fn metadata_brokers(port: u16) -> Option<Vec<i32>> {
    let mut c = connect(port).await?;
    let r: MetadataResponse = c
        .call(
            12,
            &MetadataRequest::default().with_topics(Some(vec![])),
            CALL,
        )
        .await
        .ok()?;
    let mut ids: Vec<i32> = r.brokers.iter().map(|b| b.node_id.0).collect();
    ids.sort_unstable();
    Some(ids)
}

/// DescribeQuorum v2 for the metadata partition, sent to `port` (a broker forwards it).
pub async fn describe_quorum(port: u16) -> Option<(i32, Vec<i32>, Vec<i32>)> {
    let mut c = connect(port).await?;
    let req = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(name("__cluster_metadata"))
        .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
    let r: DescribeQuorumResponse = c.call(2, &req, CALL).await.ok()?;
    let p = r.topics.first()?.partitions.first()?;
    if r.error_code != 0 || p.error_code != 0 || p.leader_id.0 < 0 {
        return None;
    }
    let mut voters: Vec<i32> = p.current_voters.iter().map(|v| v.replica_id.0).collect();
    voters.sort_unstable();
    let mut nodes: Vec<i32> = r.nodes.iter().map(|n| n.node_id.0).collect();
    nodes.sort_unstable();
    Some((p.leader_id.0, voters, nodes))
}

pub async fn create_topic(
    port: u16,
    topic: &str,
    partitions: i32,
    rf: i16,
) -> (i16, Option<String>) {
    let mut c = connect(port).await.expect("connect");
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(partitions)
            .with_replication_factor(rf)]);
    let r: CreateTopicsResponse = c.call(7, &req, CALL).await.expect("create topics");
    let t = &r.topics[0];
    (
        t.error_code,
        t.error_message.as_ref().map(|m| m.to_string()),
    )
}

/// (leader, sorted replicas, ISR size) of every partition of `topic` on broker `port`.
pub async fn partitions(port: u16, topic: &str) -> Option<Vec<(i32, Vec<i32>, usize)>> {
    let mut c = connect(port).await?;
    let req = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(name(topic)))
    ]));
    let r: MetadataResponse = c.call(12, &req, CALL).await.ok()?;
    let t = r.topics.first()?;
    if t.error_code != 0 || t.partitions.is_empty() {
        return None;
    }
    let mut out: Vec<_> = t
        .partitions
        .iter()
        .map(|p| {
            let mut replicas: Vec<i32> = p.replica_nodes.iter().map(|b| b.0).collect();
            replicas.sort_unstable();
            (
                p.partition_index,
                p.leader_id.0,
                replicas,
                p.isr_nodes.len(),
            )
        })
        .collect();
    out.sort_unstable();
    Some(out.into_iter().map(|(_, l, r, i)| (l, r, i)).collect())
}

pub fn batch(n: u32) -> Bytes {
    let values: Vec<Vec<u8>> = (0..n).map(|i| format!("record-{i}").into_bytes()).collect();
    let refs: Vec<sluice::record::KeyValue<'_>> =
        values.iter().map(|v| (None, Some(&v[..]))).collect();
    Bytes::from(sluice::record::build_batch(
        0,
        1_700_000_000_000,
        (-1, -1, -1),
        &refs,
    ))
}

/// Produces `n` records with acks=all to `topic`-`partition` on broker `port`: the base offset.
pub async fn produce(port: u16, topic: &str, partition: i32, n: u32) -> (i16, i64) {
    let mut c = connect(port).await.expect("connect");
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(batch(n)))])]);
    let r: ProduceResponse = c.call(9, &req, CALL).await.expect("produce");
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// Fetches `topic`-`partition` from offset 0 on broker `port`: (error, high watermark, bytes).
pub async fn fetch(port: u16, topic: &str, partition: i32) -> (i16, i64, usize) {
    let mut c = connect(port).await.expect("connect");
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(500)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(partition)
                .with_current_leader_epoch(-1)
                .with_fetch_offset(0)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(1 << 20)])]);
    let f: FetchResponse = c.call(12, &req, CALL).await.expect("fetch");
    let p = &f.responses[0].partitions[0];
    (
        p.error_code,
        p.high_watermark,
        p.records.as_ref().map_or(0, |r| r.len()),
    )
}
