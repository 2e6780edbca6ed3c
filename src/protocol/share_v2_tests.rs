//! Golden bytes of Kafka 4.4.0's clients (`ShareFetchRequestData` & co. written with
//! `MessageUtil.toByteBufferAccessor` from kafka-clients 4.4.0), decoded and re-encoded by the v2
//! codec; hostile bodies refused without a panic.

use bytes::Bytes;
use kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch as AckBatch,
};
use kafka_protocol::messages::share_acknowledge_response::{
    LeaderIdAndEpoch, NodeEndpoint, PartitionData, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::messages::share_fetch_request::{
    AcknowledgementBatch, FetchPartition, FetchTopic, ForgottenTopic,
};
use kafka_protocol::messages::{BrokerId, GroupId};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::*;

const TOPIC: Uuid = Uuid::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10);

/// group "g", member "m", epoch 3, max wait 500, min bytes 1, max bytes 1 MiB, max records 10,
/// batch size 10, record-limit mode, no renew; partition 0 acknowledges 0-4 ACCEPT; partition 2
/// forgotten.
const FETCH_V2: &str = "0267026d00000003000001f400000001001000000000000a0000000a0100020102030405\
060708090a0b0c0d0e0f10020000000002000000000000000000000000000000040201000000020102030405060708090a\
0b0c0d0e0f1002000000020000";
/// The same at v1 (batch-optimized).
const FETCH_V1: &str = "0267026d00000003000001f400000001001000000000000a0000000a02010203040506\
0708090a0b0c0d0e0f10020000000002000000000000000000000000000000040201000000020102030405060708090a0b\
0c0d0e0f1002000000020000";
/// A renew ShareFetch: epoch 4, every fetch limit 0, IsRenewAck; partition 1 acknowledges 7 RENEW,
/// 8 ACCEPT.
const FETCH_RENEW_V2: &str =
    "0267026d0000000400000000000000000000000000000000000000000001020102030405\
060708090a0b0c0d0e0f10020000000102000000000000000700000000000000080304010000000100";
/// ShareAcknowledge: epoch 5, IsRenewAck; partition 0 acknowledges 10-12 RENEW.
const ACK_V2: &str = "0267026d0000000501020102030405060708090a0b0c0d0e0f10020000000002000000000000\
000a000000000000000c020400000000";
/// ShareAcknowledge response: lock timeout 15000, partition 0 error 124 "bad", leader 1 epoch 5,
/// node 1 at h:9092.
const ACK_RESPONSE_V2: &str =
    "0000000000000000003a98020102030405060708090a0b0c0d0e0f100200000000007c04\
62616400000001000000050000000200000001026800002384000000";
const ACK_RESPONSE_V1: &str =
    "00000000000000020102030405060708090a0b0c0d0e0f100200000000007c04626164\
00000001000000050000000200000001026800002384000000";

fn bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

fn s(v: &'static str) -> StrBytes {
    StrBytes::from_static_str(v)
}

fn fetch_request() -> ShareFetchRequest {
    ShareFetchRequest::default()
        .with_group_id(Some(GroupId(s("g"))))
        .with_member_id(Some(s("m")))
        .with_share_session_epoch(3)
        .with_max_wait_ms(500)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_max_records(10)
        .with_batch_size(10)
        .with_topics(vec![FetchTopic::default()
            .with_topic_id(TOPIC)
            .with_partitions(vec![FetchPartition::default()
                .with_partition_index(0)
                .with_acknowledgement_batches(vec![
                    AcknowledgementBatch::default()
                        .with_first_offset(0)
                        .with_last_offset(4)
                        .with_acknowledge_types(vec![1]),
                ])])])
        .with_forgotten_topics_data(vec![ForgottenTopic::default()
            .with_topic_id(TOPIC)
            .with_partitions(vec![2])])
}

#[test]
fn share_fetch_v2_matches_kafka_4_4_0s_bytes() {
    let mut frame = Bytes::from(bytes(FETCH_V2));
    let got = decode_share_fetch(&mut frame, 2).expect("decode");
    assert!(frame.is_empty(), "the whole body is read");
    let want = ShareFetch {
        request: fetch_request(),
        share_acquire_mode: RECORD_LIMIT,
        is_renew_ack: false,
    };
    assert_eq!(got, want);
    assert_eq!(
        encode_share_fetch(&want, 2).expect("encode"),
        bytes(FETCH_V2)
    );
}

#[test]
fn share_fetch_v1_still_goes_through_the_crate() {
    let mut frame = Bytes::from(bytes(FETCH_V1));
    let got = decode_share_fetch(&mut frame, 1).expect("decode");
    assert_eq!(got.request, fetch_request());
    assert_eq!(got.share_acquire_mode, BATCH_OPTIMIZED);
    assert!(!got.is_renew_ack);
    let v1 = ShareFetch {
        share_acquire_mode: BATCH_OPTIMIZED,
        ..got
    };
    assert_eq!(encode_share_fetch(&v1, 1).expect("encode"), bytes(FETCH_V1));
    let record_limit = ShareFetch {
        share_acquire_mode: RECORD_LIMIT,
        ..v1
    };
    assert!(encode_share_fetch(&record_limit, 1).is_err());
}

#[test]
fn renew_share_fetch_v2_matches_kafka_4_4_0s_bytes() {
    let mut frame = Bytes::from(bytes(FETCH_RENEW_V2));
    let got = decode_share_fetch(&mut frame, 2).expect("decode");
    assert!(got.is_renew_ack);
    assert_eq!(got.share_acquire_mode, BATCH_OPTIMIZED);
    let r = &got.request;
    assert_eq!(
        (
            r.share_session_epoch,
            r.max_wait_ms,
            r.min_bytes,
            r.max_bytes
        ),
        (4, 0, 0, 0)
    );
    assert_eq!((r.max_records, r.batch_size), (0, 0));
    let batch = &r.topics[0].partitions[0].acknowledgement_batches[0];
    assert_eq!(r.topics[0].partitions[0].partition_index, 1);
    assert_eq!((batch.first_offset, batch.last_offset), (7, 8));
    assert_eq!(batch.acknowledge_types, vec![4, 1]);
    assert_eq!(
        encode_share_fetch(&got, 2).expect("encode"),
        bytes(FETCH_RENEW_V2)
    );
}

#[test]
fn share_acknowledge_v2_matches_kafka_4_4_0s_bytes() {
    let want = ShareAcknowledge {
        request: ShareAcknowledgeRequest::default()
            .with_group_id(Some(GroupId(s("g"))))
            .with_member_id(Some(s("m")))
            .with_share_session_epoch(5)
            .with_topics(vec![AcknowledgeTopic::default()
                .with_topic_id(TOPIC)
                .with_partitions(vec![AcknowledgePartition::default()
                    .with_partition_index(0)
                    .with_acknowledgement_batches(vec![AckBatch::default()
                        .with_first_offset(10)
                        .with_last_offset(12)
                        .with_acknowledge_types(vec![4])])])]),
        is_renew_ack: true,
    };
    let mut frame = Bytes::from(bytes(ACK_V2));
    assert_eq!(
        decode_share_acknowledge(&mut frame, 2).expect("decode"),
        want
    );
    assert!(frame.is_empty());
    assert_eq!(
        encode_share_acknowledge(&want, 2).expect("encode"),
        bytes(ACK_V2)
    );
    assert!(
        encode_share_acknowledge(&want, 1).is_err(),
        "v1 cannot renew"
    );
}

#[test]
fn share_acknowledge_response_v2_carries_the_lock_timeout() {
    let response = ShareAcknowledgeResponse::default()
        .with_responses(vec![ShareAcknowledgeTopicResponse::default()
            .with_topic_id(TOPIC)
            .with_partitions(vec![PartitionData::default()
                .with_partition_index(0)
                .with_error_code(124)
                .with_error_message(Some(s("bad")))
                .with_current_leader(
                    LeaderIdAndEpoch::default()
                        .with_leader_id(1)
                        .with_leader_epoch(5),
                )])])
        .with_node_endpoints(vec![NodeEndpoint::default()
            .with_node_id(BrokerId(1))
            .with_host(s("h"))
            .with_port(9092)]);
    let mut v2 = BytesMut::new();
    encode_share_acknowledge_response(&response, 2, 15_000, &mut v2).expect("v2");
    assert_eq!(v2.to_vec(), bytes(ACK_RESPONSE_V2));
    let mut v1 = BytesMut::new();
    encode_share_acknowledge_response(&response, 1, 15_000, &mut v1).expect("v1");
    assert_eq!(v1.to_vec(), bytes(ACK_RESPONSE_V1));
}

#[test]
fn hostile_v2_bodies_are_errors_not_panics() {
    let whole = bytes(FETCH_V2);
    // Every truncation of a valid body is refused.
    for cut in 0..whole.len() {
        let mut frame = Bytes::copy_from_slice(&whole[..cut]);
        assert!(decode_share_fetch(&mut frame, 2).is_err(), "cut at {cut}");
    }
    let ack = bytes(ACK_V2);
    for cut in 0..ack.len() {
        let mut frame = Bytes::copy_from_slice(&ack[..cut]);
        assert!(
            decode_share_acknowledge(&mut frame, 2).is_err(),
            "cut at {cut}"
        );
    }
    // A group id claiming far more bytes than there are.
    let mut frame = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x0f, 0]);
    assert!(decode_share_fetch(&mut frame, 2).is_err());
    // A topic count of 2^28 after a valid prefix: refused before any allocation.
    let mut body = whole[..bytes(FETCH_V2).len()].to_vec();
    let at = prefix_len(&body, FETCH_INT32S).expect("prefix") + 2;
    body.truncate(at);
    body.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x01]);
    let mut frame = Bytes::from(body);
    assert!(decode_share_fetch(&mut frame, 2).is_err());
}
