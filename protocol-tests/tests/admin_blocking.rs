//! Topic creation's file work (directories, segment and index files) runs on tokio's blocking
//! pool, not on the connection's reader task: CreateTopics, CreatePartitions and Metadata
//! auto-creation answer as `Reply::Barrier`, which the reader awaits before it reads the next
//! request, so a client that pipelines "create, then produce" still finds the topic.

mod admin_support;

use admin_support::*;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, StrBytes};
use sluice::api::Reply;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn tn(v: &str) -> TopicName {
    TopicName(StrBytes::from_string(v.to_string()))
}

fn create_topics(name: &str) -> CreateTopicsRequest {
    CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(tn(name))
            .with_num_partitions(3)
            .with_replication_factor(-1)])
        .with_timeout_ms(5000)
}

fn metadata(name: &str) -> MetadataRequest {
    MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(tn(name)))
        ]))
        .with_allow_auto_topic_creation(true)
}

fn kind(reply: &Reply) -> &'static str {
    match reply {
        Reply::Now(_) => "now",
        Reply::Later(_) => "later",
        Reply::Barrier(_) => "barrier",
        Reply::Throttled(..) => "throttled",
        Reply::LaterThrottled(_) => "later, throttled",
    }
}

/// Awaits a barrier reply down to its frame bytes.
async fn resolve(reply: Reply) -> Vec<u8> {
    let Reply::Barrier(done) = reply else {
        panic!("a barrier");
    };
    match done.await.expect("answered") {
        Reply::Now(Some(chunks)) => chunks
            .into_iter()
            .flat_map(|c| match c {
                sluice::api::Chunk::Bytes(b) => b.to_vec(),
                other => panic!("unexpected chunk {other:?}"),
            })
            .collect(),
        _ => panic!("a ready answer"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_creation_is_deferred_to_the_blocking_pool() {
    let b = TestBroker::start(&[]).await;
    let broker = b.broker();
    let frame = request_frame(ApiKey::CreateTopics, 7, 1, &create_topics("made"));
    let reply = sluice::api::handle(&broker, frame).unwrap();
    assert_eq!(kind(&reply), "barrier");
    assert!(
        broker.replicas.topic("made").is_none(),
        "nothing done before it runs"
    );
    let bytes = resolve(reply).await;
    assert!(bytes.len() > 8);
    assert_eq!(
        broker.replicas.topic("made").map(|t| t.partitions.len()),
        Some(3)
    );

    let grow = CreatePartitionsRequest::default()
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(tn("made"))
            .with_count(5)
            .with_assignments(None)])
        .with_timeout_ms(5000);
    let reply = sluice::api::handle(
        &broker,
        request_frame(ApiKey::CreatePartitions, 3, 2, &grow),
    )
    .unwrap();
    assert_eq!(kind(&reply), "barrier");
    resolve(reply).await;
    assert_eq!(
        broker.replicas.topic("made").map(|t| t.partitions.len()),
        Some(5)
    );

    // Metadata that may auto-create goes to the pool; one of existing topics is answered at once.
    let reply = sluice::api::handle(
        &broker,
        request_frame(ApiKey::Metadata, 12, 3, &metadata("auto")),
    )
    .unwrap();
    assert_eq!(kind(&reply), "barrier");
    resolve(reply).await;
    assert!(broker.replicas.topic("auto").is_some());
    let reply = sluice::api::handle(
        &broker,
        request_frame(ApiKey::Metadata, 12, 4, &metadata("made")),
    )
    .unwrap();
    assert_eq!(kind(&reply), "now");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipelined_produce_after_create_topics_finds_the_topic() {
    let b = TestBroker::start(&[]).await;
    let batch = sluice::record::build_batch(0, now_ms(), (-1, -1, -1), &[(None, Some(b"v"))]);
    let produce = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(tn("piped"))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(2)
                .with_records(Some(Bytes::from(batch)))])]);
    let mut wire = BytesMut::new();
    for f in [
        request_frame(ApiKey::CreateTopics, 7, 1, &create_topics("piped")),
        request_frame(ApiKey::Produce, 9, 2, &produce),
    ] {
        wire.put_i32(f.len() as i32);
        wire.extend_from_slice(&f);
    }
    let mut stream = tokio::net::TcpStream::connect(b.addr).await.unwrap();
    stream.write_all(&wire).await.unwrap(); // both requests in one write
    let mut answers = Vec::new();
    for (correlation_id, key, version) in [(1, ApiKey::CreateTopics, 7), (2, ApiKey::Produce, 9)] {
        let mut len = [0u8; 4];
        tokio::time::timeout(
            std::time::Duration::from_secs(15),
            stream.read_exact(&mut len),
        )
        .await
        .expect("in time")
        .unwrap();
        let mut buf = vec![0u8; i32::from_be_bytes(len) as usize];
        stream.read_exact(&mut buf).await.unwrap();
        let mut bytes = Bytes::from(buf);
        let h = ResponseHeader::decode(&mut bytes, key.response_header_version(version)).unwrap();
        assert_eq!(h.correlation_id, correlation_id, "answers in request order");
        answers.push(bytes);
    }
    let created = CreateTopicsResponse::decode(&mut answers[0], 7).unwrap();
    assert_eq!(created.topics[0].error_code, 0);
    let produced = ProduceResponse::decode(&mut answers[1], 9).unwrap();
    let p = &produced.responses[0].partition_responses[0];
    assert_eq!(
        (p.error_code, p.base_offset),
        (0, 0),
        "the topic existed for the produce"
    );
    assert_eq!(answers[1].remaining(), 0);
}
