//! Produce of arbitrary record bytes (one partition, acks=1) through `api::handle`, then a Fetch of
//! what was stored. Oracle: no panic; an accepted batch reads back as whole valid batches
//! (header, counts, CRC) starting at the offset the produce answered. With the `strict-records`
//! feature, every stored batch must also decode with kafka-protocol's record decoder, as a
//! consumer would decode it (Kafka's LogValidator guarantees that; issue 13 item 2).
#![no_main]

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, ProduceRequest, ProduceResponse, ResponseHeader,
    TopicName,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use libfuzzer_sys::fuzz_target;
use sluice_fuzz::{check_response, encode, with_harness, Answer, TOPIC};

const PRODUCE_VERSION: i16 = 9;
const FETCH_VERSION: i16 = 12;

fn decode_body<T: Decodable>(key: ApiKey, version: i16, frame: Bytes) -> T {
    let mut buf = frame.slice(4..);
    ResponseHeader::decode(&mut buf, key.response_header_version(version)).expect("header");
    T::decode(&mut buf, version).expect("our own response decodes")
}

fuzz_target!(
    init: sluice_fuzz::seeds_from_env(sluice_fuzz::seeds::batches),
    |data: &[u8]| {
        let topic = TopicName(StrBytes::from_static_str(TOPIC));
        let produce = ProduceRequest::default()
            .with_acks(1)
            .with_timeout_ms(1000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(topic.clone())
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(Bytes::copy_from_slice(data)))])]);
        let frame = encode(ApiKey::Produce, PRODUCE_VERSION, 1, &produce).expect("encode");
        let Some(Answer::Frame(f)) = with_harness(|h| h.handle(&frame)) else {
            panic!("acks=1 produce got no response");
        };
        let bytes = check_response(&f, 1).expect("produce answers bytes");
        let r: ProduceResponse = decode_body(ApiKey::Produce, PRODUCE_VERSION, bytes);
        let p = &r.responses[0].partition_responses[0];
        if p.error_code != 0 {
            return;
        }
        let fetch = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_max_bytes(1 << 20)
            .with_topics(vec![FetchTopic::default().with_topic(topic).with_partitions(vec![
                FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(p.base_offset)
                    .with_partition_max_bytes(60 << 10),
            ])]);
        let frame = encode(ApiKey::Fetch, FETCH_VERSION, 2, &fetch).expect("encode");
        let Some(Answer::Frame(f)) = with_harness(|h| h.handle(&frame)) else {
            panic!("fetch of an accepted produce got no response");
        };
        let Some(bytes) = check_response(&f, 2) else {
            return; // a file range: batches over 64 KiB are beyond this target's inputs
        };
        let r: FetchResponse = decode_body(ApiKey::Fetch, FETCH_VERSION, bytes);
        let part = &r.responses[0].partitions[0];
        assert_eq!(part.error_code, 0, "fetch of an accepted produce");
        let records = part.records.clone().unwrap_or_default();
        assert!(!records.is_empty(), "accepted produce at {} reads back empty", p.base_offset);
        let mut rest = &records[..];
        let mut first = true;
        while !rest.is_empty() {
            let h = sluice::record::validate_batch(rest).expect("stored batch is valid");
            if first {
                assert!(h.base_offset <= p.base_offset && p.base_offset <= h.last_offset());
                first = false;
            }
            rest = &rest[h.total_size()..];
        }
        #[cfg(feature = "strict-records")]
        {
            let mut buf = records.clone();
            while !buf.is_empty() {
                kafka_protocol::records::RecordBatchDecoder::decode(&mut buf)
                    .expect("an accepted batch decodes as a consumer decodes it");
            }
        }
    }
);
