//! Helpers for `admin.rs`: an in-process broker with a temporary data directory and a minimal
//! typed client (request header + body out, response header + body in, every read timed out).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use sluice::config::{Config, Value};
use sluice::server::RunningBroker;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const READ_TIMEOUT: Duration = Duration::from_secs(15);

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A broker running in this process on 127.0.0.1:0 over a temporary directory.
pub struct TestBroker {
    running: Option<RunningBroker>,
    pub addr: SocketAddr,
    tmp: tempfile::TempDir,
    extra: Vec<(String, Value)>,
}

async fn start_in(dir: &std::path::Path, extra: &[(String, Value)]) -> RunningBroker {
    let mut entries = BTreeMap::new();
    entries.insert("listen".to_string(), Value::Str("127.0.0.1:0".into()));
    entries.insert(
        "data.dir".to_string(),
        Value::Str(dir.join("data").display().to_string()),
    );
    for (k, v) in extra {
        entries.insert(k.clone(), v.clone());
    }
    let config = Config::from_entries(&entries).expect("test config");
    sluice::server::start(config).await.expect("broker starts")
}

impl TestBroker {
    pub async fn start(extra: &[(&str, Value)]) -> TestBroker {
        let tmp = tempfile::tempdir().unwrap();
        let extra: Vec<_> = extra
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        let running = start_in(tmp.path(), &extra).await;
        TestBroker {
            addr: running.local_addr,
            running: Some(running),
            tmp,
            extra,
        }
    }

    /// The broker's data directory.
    pub fn dir(&self) -> PathBuf {
        self.tmp.path().join("data")
    }

    pub fn cluster_id(&self) -> String {
        self.running
            .as_ref()
            .unwrap()
            .broker
            .identity
            .cluster_id
            .clone()
    }

    /// The running broker's shared state (for calling `sluice::api::handle` directly).
    pub fn broker(&self) -> std::sync::Arc<sluice::broker::Broker> {
        self.running.as_ref().unwrap().broker.clone()
    }

    pub fn advertised_port(&self) -> i32 {
        self.running
            .as_ref()
            .unwrap()
            .broker
            .identity
            .advertised_port
    }

    pub async fn client(&self) -> Client {
        Client::connect(self.addr).await
    }

    /// Graceful shutdown, then a new broker on the same data directory (extra configs merged).
    pub async fn restart(&mut self, extra: &[(&str, Value)]) {
        if let Some(r) = self.running.take() {
            r.shutdown().await;
        }
        for (k, v) in extra {
            self.extra.push((k.to_string(), v.clone()));
        }
        let running = start_in(self.tmp.path(), &self.extra).await;
        self.addr = running.local_addr;
        self.running = Some(running);
    }

    pub async fn stop(mut self) {
        if let Some(r) = self.running.take() {
            r.shutdown().await;
        }
    }
}

/// One connection speaking typed requests.
pub struct Client {
    stream: TcpStream,
    correlation_id: i32,
}

impl Client {
    /// A connection to any Kafka-compatible broker at `addr` (also the reference Kafka).
    pub async fn connect(addr: SocketAddr) -> Client {
        Client {
            stream: TcpStream::connect(addr).await.unwrap(),
            correlation_id: 0,
        }
    }

    /// Sends `request` as `key` v`version` and decodes the response, checking the correlation id
    /// and that the body has no trailing bytes.
    pub async fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Req,
    ) -> Resp {
        self.correlation_id += 1;
        let header = RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation_id)
            .with_client_id(Some(StrBytes::from_static_str("admin-tests")));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, key.request_header_version(version))
            .unwrap();
        request.encode(&mut body, version).unwrap();
        let mut frame = BytesMut::new();
        frame.put_i32(body.len() as i32);
        frame.extend_from_slice(&body);
        self.stream.write_all(&frame).await.unwrap();
        let mut len = [0u8; 4];
        tokio::time::timeout(READ_TIMEOUT, self.stream.read_exact(&mut len))
            .await
            .expect("response in time")
            .expect("response length");
        let mut buf = vec![0u8; i32::from_be_bytes(len) as usize];
        tokio::time::timeout(READ_TIMEOUT, self.stream.read_exact(&mut buf))
            .await
            .expect("response in time")
            .expect("response body");
        let mut bytes = Bytes::from(buf);
        let h = ResponseHeader::decode(&mut bytes, key.response_header_version(version)).unwrap();
        assert_eq!(h.correlation_id, self.correlation_id);
        let resp = Resp::decode(&mut bytes, version).unwrap();
        assert_eq!(bytes.remaining(), 0, "{key:?} v{version}: trailing bytes");
        resp
    }
}

/// One request frame without its length prefix: header (`correlation_id`) and body.
pub fn request_frame<Req: Encodable>(
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    request: &Req,
) -> Bytes {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("admin-tests")));
    let mut body = BytesMut::new();
    header
        .encode(&mut body, key.request_header_version(version))
        .unwrap();
    request.encode(&mut body, version).unwrap();
    body.freeze()
}

pub async fn create_topic_v(
    c: &mut Client,
    version: i16,
    name: &str,
    partitions: i32,
    configs: &[(&str, &str)],
    validate_only: bool,
) -> CreatableTopicResult {
    let topic = CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_string(name.into())))
        .with_num_partitions(partitions)
        .with_replication_factor(-1)
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    CreatableTopicConfig::default()
                        .with_name(StrBytes::from_string(k.to_string()))
                        .with_value(Some(StrBytes::from_string(v.to_string())))
                })
                .collect(),
        );
    let req = CreateTopicsRequest::default()
        .with_topics(vec![topic])
        .with_timeout_ms(5000)
        .with_validate_only(validate_only);
    let mut r: CreateTopicsResponse = c.call(ApiKey::CreateTopics, version, &req).await;
    assert_eq!(r.topics.len(), 1);
    r.topics.remove(0)
}

pub async fn partition_count(c: &mut Client, topic: &str) -> usize {
    let req = MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(topic.into()))))]));
    let r: MetadataResponse = c.call(ApiKey::Metadata, 12, &req).await;
    r.topics[0].partitions.len()
}

/// Produces one batch (acks=-1) and returns the partition's error code.
async fn produce_batch(c: &mut Client, topic: &str, partition: i32, batch: Vec<u8>) -> i16 {
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(Bytes::from(batch)))])]);
    let r: ProduceResponse = c.call(ApiKey::Produce, 9, &req).await;
    r.responses[0].partition_responses[0].error_code
}

/// One batch of `n` small records stamped now.
pub async fn produce(c: &mut Client, topic: &str, partition: i32, seq: i64, n: usize) -> i16 {
    let value = format!("value-{seq}");
    let recs: Vec<_> = (0..n)
        .map(|_| (None::<&[u8]>, Some(value.as_bytes())))
        .collect();
    let batch = sluice::record::build_batch(0, now_ms(), (-1, -1, -1), &recs);
    produce_batch(c, topic, partition, batch).await
}

/// One record with a `value_len`-byte value stamped `timestamp`.
pub async fn produce_at(
    c: &mut Client,
    topic: &str,
    partition: i32,
    timestamp: i64,
    value_len: usize,
) -> i16 {
    let value = vec![b'x'; value_len];
    let batch = sluice::record::build_batch(0, timestamp, (-1, -1, -1), &[(None, Some(&value))]);
    produce_batch(c, topic, partition, batch).await
}

pub async fn produce_sized(c: &mut Client, topic: &str, partition: i32, value_len: usize) -> i16 {
    produce_at(c, topic, partition, now_ms(), value_len).await
}

/// ListOffsets v7 for partition 0 at `timestamp` (-1 latest, -2 earliest).
pub async fn list_offset(c: &mut Client, topic: &str, timestamp: i64) -> i64 {
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_current_leader_epoch(-1)
                .with_timestamp(timestamp)])]);
    let r: ListOffsetsResponse = c.call(ApiKey::ListOffsets, 7, &req).await;
    let p = &r.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.offset
}

/// Fetch v12 of partition 0 at `offset`; returns the partition error code.
pub async fn fetch_error(c: &mut Client, topic: &str, offset: i64) -> i16 {
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(-1)
                .with_fetch_offset(offset)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(1 << 20)])]);
    let r: FetchResponse = c.call(ApiKey::Fetch, 12, &req).await;
    r.responses[0].partitions[0].error_code
}

/// One keyed record stamped now.
pub async fn produce_kv(c: &mut Client, topic: &str, key: &str, value: &[u8]) -> i16 {
    let batch = sluice::record::build_batch(
        0,
        now_ms(),
        (-1, -1, -1),
        &[(Some(key.as_bytes()), Some(value))],
    );
    produce_batch(c, topic, 0, batch).await
}
