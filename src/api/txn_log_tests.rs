use bytes::Buf;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{ApiKey, TopicName};
use kafka_protocol::protocol::{Decodable, StrBytes};

use super::*;
use crate::config::Config;
use crate::replica::partition::testing::lead_below_min_isr;
use crate::txn::TRANSACTION_STATE_TOPIC;

const VERSION: i16 = 1;

/// WriteTxnMarkers for one Commit marker of producer 7 on `topic`-0: the partition's error code.
async fn commit_marker(broker: &Arc<Broker>, topic: &str) -> i16 {
    let ctx = RequestContext {
        api_key: ApiKey::WriteTxnMarkers,
        api_version: VERSION,
        correlation_id: 1,
        client_id: None,
        peer: None,
        listener: None,
        forwarded: false,
    };
    let request =
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(ProducerId(7))
            .with_producer_epoch(0)
            .with_transaction_result(true)
            .with_coordinator_epoch(0)
            .with_topics(vec![WritableTxnMarkerTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.into())))
                .with_partition_indexes(vec![0])])]);
    let Reply::Later(answer) = write_txn_markers(broker, ctx, request) else {
        panic!("WriteTxnMarkers answers later");
    };
    let frame = answer.await.expect("a response");
    let mut bytes: Vec<u8> = Vec::new();
    for chunk in frame {
        match chunk {
            super::super::Chunk::Bytes(b) => bytes.extend_from_slice(&b),
            super::super::Chunk::File(_) => panic!("no file ranges in this response"),
        }
    }
    let mut buf = bytes::Bytes::from(bytes);
    buf.advance(4); // the size
    buf.advance(4); // the correlation id
    buf.advance(1); // the header's empty tagged fields (flexible)
    let response = WriteTxnMarkersResponse::decode(&mut buf, VERSION).expect("decodes");
    response.markers[0].topics[0].partitions[0].error_code
}

/// A marker is appended as acks=all (Kafka's coordinator-origin append): a leader whose ISR is
/// below the effective min.insync.replicas answers NOT_ENOUGH_REPLICAS and writes nothing.
#[tokio::test]
async fn a_marker_below_the_min_isr_answers_not_enough_replicas() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        data_dir: dir.path().to_path_buf(),
        transaction_state_log_num_partitions: 1,
        ..Config::default()
    };
    let b = crate::broker::open_started(config).await;
    let topic = crate::txn::driver::ensure_transaction_topic(&b)
        .await
        .expect("created");
    let p = topic.partition(0).expect("hosted").clone();
    // Alone in the ISR of an RF 1 partition (the effective minimum is 1): written.
    assert_eq!(
        commit_marker(&b, TRANSACTION_STATE_TOPIC).await,
        error::NONE
    );
    let end = p.offsets().log_end_offset;
    assert!(end > 0);
    lead_below_min_isr(&p, b.identity.node_id);
    assert_eq!(
        commit_marker(&b, TRANSACTION_STATE_TOPIC).await,
        error::NOT_ENOUGH_REPLICAS
    );
    assert_eq!(p.offsets().log_end_offset, end, "written below the min ISR");
}
