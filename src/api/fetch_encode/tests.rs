//! Our Fetch encoder against the `kafka-protocol` crate's encoder and decoder.

use super::*;
use crate::log::FileRecords;
use crate::record::build_batch;
use bytes::Bytes;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, EpochEndOffset, FetchResponse, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{BrokerId, ProducerId};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use proptest::prelude::*;
use std::io::Write;
use std::sync::Arc;

/// The bytes the writer would send: byte chunks as they are, file chunks read from their file.
fn concat(chunks: &[Chunk]) -> Vec<u8> {
    let mut out = Vec::new();
    for c in chunks {
        match c {
            Chunk::Bytes(b) => out.extend_from_slice(b),
            Chunk::File(f) => out.extend_from_slice(&f.read().unwrap()),
        }
    }
    out
}

/// The byte chunk `c` (metadata and memory records), or a test failure.
fn bytes_of(c: &Chunk) -> &Bytes {
    match c {
        Chunk::Bytes(b) => b,
        Chunk::File(f) => panic!("expected a byte chunk, got {f:?}"),
    }
}

fn mem(records: &Option<Records>) -> Option<Bytes> {
    records.clone().map(|r| r.into_bytes().unwrap())
}

fn topic_name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

/// The crate's struct carrying the same fields as ours.
fn to_crate(resp: &FetchResponseData) -> FetchResponse {
    let topics = resp
        .responses
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    PartitionData::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(p.error_code)
                        .with_high_watermark(p.high_watermark)
                        .with_last_stable_offset(p.last_stable_offset)
                        .with_log_start_offset(p.log_start_offset)
                        .with_aborted_transactions(p.aborted_transactions.as_ref().map(|v| {
                            v.iter()
                                .map(|&(pid, first)| {
                                    AbortedTransaction::default()
                                        .with_producer_id(ProducerId(pid))
                                        .with_first_offset(first)
                                })
                                .collect()
                        }))
                        .with_preferred_read_replica(BrokerId(p.preferred_read_replica))
                        .with_records(mem(&p.records))
                        .with_diverging_epoch(p.diverging_epoch.map_or_else(
                            Default::default,
                            |(epoch, end_offset)| {
                                EpochEndOffset::default()
                                    .with_epoch(epoch)
                                    .with_end_offset(end_offset)
                            },
                        ))
                })
                .collect();
            FetchableTopicResponse::default()
                .with_topic(t.topic.clone())
                .with_topic_id(t.topic_id)
                .with_partitions(partitions)
        })
        .collect();
    FetchResponse::default()
        .with_throttle_time_ms(resp.throttle_time_ms)
        .with_error_code(resp.error_code)
        .with_session_id(resp.session_id)
        .with_responses(topics)
}

fn crate_encode(resp: &FetchResponseData, version: i16) -> Option<Vec<u8>> {
    let mut buf = BytesMut::new();
    to_crate(resp).encode(&mut buf, version).ok()?;
    Some(buf.to_vec())
}

fn sample_batch(base_offset: i64) -> Bytes {
    Bytes::from(build_batch(
        base_offset,
        1_700_000_000_000,
        (-1, -1, -1),
        &[
            (Some(b"k1".as_slice()), Some(b"hello".as_slice())),
            (None, Some(b"world".as_slice())),
        ],
    ))
}

/// 2 topics x 2 partitions: records, null records, an error with aborted transactions, and one
/// more record set. Fields that some versions cannot carry are set only where they can.
fn sample(version: i16) -> FetchResponseData {
    let partition = |index: i32| FetchPartitionData {
        partition_index: index,
        error_code: 0,
        high_watermark: 42,
        last_stable_offset: 40,
        log_start_offset: 3,
        aborted_transactions: None,
        preferred_read_replica: -1,
        records: None,
        diverging_epoch: None,
    };
    FetchResponseData {
        throttle_time_ms: 17,
        error_code: 0,
        session_id: if version >= 7 { 123_456 } else { 0 },
        responses: vec![
            FetchTopicData {
                topic: topic_name("orders"),
                topic_id: Uuid::from_u128(0x0123_4567_89ab_cdef_0011_2233_4455_6677),
                partitions: vec![
                    FetchPartitionData {
                        records: Some(sample_batch(10).into()),
                        preferred_read_replica: if version >= 11 { 2 } else { -1 },
                        ..partition(0)
                    },
                    FetchPartitionData {
                        records: None,
                        diverging_epoch: (version >= 12).then_some((4, 1234)),
                        ..partition(1)
                    },
                ],
            },
            FetchTopicData {
                topic: topic_name("payments-eu"),
                topic_id: Uuid::from_u128(0xfeed_beef_0000_0000_0000_0000_0000_0001),
                partitions: vec![
                    FetchPartitionData {
                        error_code: 1, // OFFSET_OUT_OF_RANGE
                        high_watermark: 100,
                        last_stable_offset: 90,
                        log_start_offset: 50,
                        aborted_transactions: Some(vec![(7, 55), (9, 80)]),
                        records: None,
                        ..partition(3)
                    },
                    FetchPartitionData {
                        aborted_transactions: Some(vec![]),
                        records: Some(sample_batch(200).into()),
                        ..partition(4)
                    },
                ],
            },
        ],
    }
}

fn encode(resp: &FetchResponseData, version: i16) -> Result<(Vec<Chunk>, usize), EncodeError> {
    let mut out = Vec::new();
    let len = encode_fetch_response(resp, version, &mut out)?;
    Ok((out, len))
}

#[test]
fn every_version_matches_crate_bytes_and_decodes() {
    for version in MIN_VERSION..=MAX_VERSION {
        let resp = sample(version);
        let (chunks, len) = encode(&resp, version).unwrap();
        let ours = concat(&chunks);
        assert_eq!(len, ours.len(), "v{version}");
        assert_eq!(total_len(&chunks), len, "v{version}");
        assert!(chunks.iter().all(|c| !c.is_empty()), "v{version}");
        // meta, records, meta, records, then trailing tagged-field counts in flexible versions.
        let expected_chunks = if version >= 12 { 5 } else { 4 };
        assert_eq!(chunks.len(), expected_chunks, "v{version}");
        let expected = crate_encode(&resp, version).expect("crate encodes the sample");
        assert_eq!(
            ours, expected,
            "v{version}: bytes differ from the crate's encoder"
        );

        let mut buf = Bytes::from(ours);
        let decoded = FetchResponse::decode(&mut buf, version).unwrap();
        assert!(buf.is_empty(), "v{version}: trailing bytes");
        assert_eq!(decoded.throttle_time_ms, 17);
        assert_eq!(decoded.error_code, 0);
        assert_eq!(decoded.session_id, if version >= 7 { 123_456 } else { 0 });
        assert!(decoded.node_endpoints.is_empty());
        assert_eq!(decoded.responses.len(), 2);
        for (got, want) in decoded.responses.iter().zip(&resp.responses) {
            if version >= 13 {
                assert_eq!(got.topic_id, want.topic_id, "v{version}");
                assert_eq!(got.topic.as_str(), "", "v{version}: name not sent");
            } else {
                assert_eq!(got.topic, want.topic, "v{version}");
                assert_eq!(got.topic_id, Uuid::nil(), "v{version}: id not sent");
            }
            assert_eq!(got.partitions.len(), 2);
            for (gp, wp) in got.partitions.iter().zip(&want.partitions) {
                assert_eq!(gp.partition_index, wp.partition_index);
                assert_eq!(gp.error_code, wp.error_code);
                assert_eq!(gp.high_watermark, wp.high_watermark);
                assert_eq!(gp.last_stable_offset, wp.last_stable_offset);
                let lso = if version >= 5 {
                    wp.log_start_offset
                } else {
                    -1
                };
                assert_eq!(gp.log_start_offset, lso, "v{version}");
                let aborted = gp.aborted_transactions.as_ref().map(|v| {
                    v.iter()
                        .map(|a| (a.producer_id.0, a.first_offset))
                        .collect()
                });
                assert_eq!(aborted, wp.aborted_transactions, "v{version}");
                assert_eq!(gp.preferred_read_replica.0, wp.preferred_read_replica);
                assert_eq!(gp.records, mem(&wp.records), "v{version}");
                let diverging = (gp.diverging_epoch.epoch != -1)
                    .then_some((gp.diverging_epoch.epoch, gp.diverging_epoch.end_offset));
                assert_eq!(diverging, wp.diverging_epoch, "v{version}");
            }
        }
        let p0 = &decoded.responses[0].partitions[0];
        assert_eq!(p0.records.as_ref().unwrap()[..8], 10i64.to_be_bytes());
        assert_eq!(p0.records.as_ref().unwrap().len(), sample_batch(0).len());
        assert_eq!(decoded.responses[0].partitions[1].records, None);
        assert_eq!(decoded.responses[1].partitions[0].error_code, 1);
        assert_eq!(
            decoded.responses[1].partitions[0]
                .aborted_transactions
                .as_ref()
                .unwrap()
                .len(),
            2
        );
    }
}

#[test]
fn record_bytes_are_spliced_not_copied() {
    for version in MIN_VERSION..=MAX_VERSION {
        let resp = sample(version);
        let (chunks, _) = encode(&resp, version).unwrap();
        let own = |t: usize, p: usize| match &resp.responses[t].partitions[p].records {
            Some(Records::Memory(b)) => b.clone(),
            other => panic!("sample records are in memory: {other:?}"),
        };
        let (own0, own1) = (own(0, 0), own(1, 1));
        assert_eq!(bytes_of(&chunks[1]).as_ptr(), own0.as_ptr(), "v{version}");
        assert_eq!(chunks[1].len(), own0.len(), "v{version}");
        assert_eq!(bytes_of(&chunks[3]).as_ptr(), own1.as_ptr(), "v{version}");
        assert_eq!(chunks[3].len(), own1.len(), "v{version}");
        // No metadata chunk lies inside a record allocation.
        for meta in chunks.iter().step_by(2) {
            assert_ne!(bytes_of(meta).as_ptr(), own0.as_ptr());
            assert_ne!(bytes_of(meta).as_ptr(), own1.as_ptr());
        }
        // The metadata pieces are split off one buffer: the second follows the first.
        let meta0_end = bytes_of(&chunks[0]).as_ptr() as usize + chunks[0].len();
        assert_eq!(
            bytes_of(&chunks[2]).as_ptr() as usize,
            meta0_end,
            "v{version}"
        );
    }
}

#[test]
fn null_and_empty_records_encode_distinctly() {
    for version in MIN_VERSION..=MAX_VERSION {
        let mut resp = sample(version);
        resp.responses.truncate(1);
        resp.responses[0].partitions.truncate(1);
        let tail_len = if version >= 12 { 2 } else { 4 }; // records length (+ tagged count)
        let outer_tags = if version >= 12 { 2 } else { 0 }; // topic + top-level tagged counts

        resp.responses[0].partitions[0].records = None;
        let (chunks, len) = encode(&resp, version).unwrap();
        assert_eq!(chunks.len(), 1, "null records add no chunk");
        let body = concat(&chunks);
        let at = len - outer_tags - tail_len;
        let null = if version >= 12 {
            vec![0u8, 0]
        } else {
            (-1i32).to_be_bytes().to_vec()
        };
        assert_eq!(body[at..at + tail_len], null[..], "v{version}");
        assert_eq!(Some(body), crate_encode(&resp, version));

        resp.responses[0].partitions[0].records = Some(Records::empty());
        let (chunks, len) = encode(&resp, version).unwrap();
        assert_eq!(chunks.len(), 1, "empty records add no chunk");
        let body = concat(&chunks);
        let at = len - outer_tags - tail_len;
        let empty = if version >= 12 {
            vec![1u8, 0]
        } else {
            0i32.to_be_bytes().to_vec()
        };
        assert_eq!(body[at..at + tail_len], empty[..], "v{version}");
        assert_eq!(Some(body), crate_encode(&resp, version));
    }
}

#[test]
fn empty_response_is_one_small_chunk() {
    let resp = FetchResponseData {
        throttle_time_ms: 0,
        error_code: 0,
        session_id: 0,
        responses: vec![],
    };
    let (chunks, len) = encode(&resp, 4).unwrap();
    assert_eq!(concat(&chunks), [0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(len, 8);
    // throttle, error, session, compact array 0+1, tagged fields 0
    let (chunks, len) = encode(&resp, 18).unwrap();
    assert_eq!(concat(&chunks), [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0]);
    assert_eq!(len, 12);
}

#[test]
fn unsupported_versions_and_fields_are_refused_and_out_is_untouched() {
    let marker = Chunk::Bytes(Bytes::from_static(b"earlier response"));
    let mut out = vec![marker.clone()];
    let resp = sample(MAX_VERSION);
    for version in [-1, 0, 3, 19, i16::MAX] {
        assert_eq!(
            encode_fetch_response(&resp, version, &mut out),
            Err(EncodeError::UnsupportedVersion(version))
        );
    }
    // session_id needs v7, preferred_read_replica v11; the error comes after record chunks
    // were pushed, and `out` must be rolled back.
    assert_eq!(
        encode_fetch_response(&resp, 6, &mut out),
        Err(EncodeError::FieldNotSupported {
            field: "session_id",
            version: 6
        })
    );
    let mut no_session = resp.clone();
    no_session.session_id = 0;
    assert_eq!(
        encode_fetch_response(&no_session, 10, &mut out),
        Err(EncodeError::FieldNotSupported {
            field: "preferred_read_replica",
            version: 10
        })
    );
    let mut late = no_session.clone();
    late.responses[0].partitions[0].preferred_read_replica = -1;
    late.responses[1].partitions[1].preferred_read_replica = 5;
    assert!(encode_fetch_response(&late, 10, &mut out).is_err());
    assert_eq!(out, vec![marker.clone()]);
    assert!(
        crate_encode(&late, 10).is_none(),
        "the crate refuses it too"
    );

    // Appends after existing chunks and reports only its own length.
    let len = encode_fetch_response(&resp, 18, &mut out).unwrap();
    assert_eq!(out[0], marker);
    assert_eq!(total_len(&out[1..]), len);
}

#[test]
fn long_topic_name_is_refused_before_v12() {
    let mut resp = sample(MAX_VERSION);
    resp.session_id = 0;
    resp.responses[0].partitions[0].preferred_read_replica = -1;
    resp.responses[0].topic = topic_name(&"x".repeat(i16::MAX as usize + 1));
    assert_eq!(
        encode(&resp, 11).unwrap_err(),
        EncodeError::TooLong {
            what: "topic name",
            len: i16::MAX as usize + 1
        }
    );
    assert!(crate_encode(&resp, 11).is_none());
    // Compact strings and topic ids have no such limit.
    let (chunks, _) = encode(&resp, 12).unwrap();
    assert_eq!(Some(concat(&chunks)), crate_encode(&resp, 12));
    let (chunks, _) = encode(&resp, 13).unwrap();
    assert_eq!(Some(concat(&chunks)), crate_encode(&resp, 13));
}

#[test]
fn varint_lengths_cross_byte_boundaries() {
    // 127 and 128 records bytes: compact length N+1 = 128 / 129 needs two varint bytes.
    for n in [126usize, 127, 128, 300, 16_383, 16_384] {
        let mut resp = sample(MAX_VERSION);
        resp.responses[0].partitions[0].records = Some(Bytes::from(vec![0xab; n]).into());
        resp.responses[1].partitions[0].aborted_transactions = Some(vec![(1, 2); n % 200]);
        let (chunks, _) = encode(&resp, 18).unwrap();
        assert_eq!(Some(concat(&chunks)), crate_encode(&resp, 18), "n={n}");
    }
}

fn arb_partition() -> impl Strategy<Value = FetchPartitionData> {
    (
        any::<i32>(),
        any::<i16>(),
        any::<i64>(),
        any::<i64>(),
        any::<i64>(),
        proptest::option::of(proptest::collection::vec(any::<(i64, i64)>(), 0..4)),
        prop_oneof![3 => Just(-1i32), 1 => any::<i32>()],
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..300)),
    )
        .prop_map(
            |(pi, ec, hw, lso, ls, aborted, prr, records)| FetchPartitionData {
                partition_index: pi,
                error_code: ec,
                high_watermark: hw,
                last_stable_offset: lso,
                log_start_offset: ls,
                aborted_transactions: aborted,
                preferred_read_replica: prr,
                records: records.map(|r| Bytes::from(r).into()),
                diverging_epoch: None,
            },
        )
}

fn arb_response() -> impl Strategy<Value = FetchResponseData> {
    let topic = (
        "[a-zA-Z0-9._-]{0,40}",
        any::<u128>(),
        proptest::collection::vec(arb_partition(), 0..4),
    )
        .prop_map(|(name, id, partitions)| FetchTopicData {
            topic: topic_name(&name),
            topic_id: Uuid::from_u128(id),
            partitions,
        });
    (
        any::<i32>(),
        any::<i16>(),
        prop_oneof![3 => Just(0i32), 1 => any::<i32>()],
        proptest::collection::vec(topic, 0..4),
    )
        .prop_map(|(throttle, ec, session, responses)| FetchResponseData {
            throttle_time_ms: throttle,
            error_code: ec,
            session_id: session,
            responses,
        })
}

proptest! {
    #[test]
    fn matches_crate_encoder(resp in arb_response(), version in MIN_VERSION..=MAX_VERSION) {
        let expected = crate_encode(&resp, version);
        let mut out = Vec::new();
        match encode_fetch_response(&resp, version, &mut out) {
            Ok(len) => {
                let ours = concat(&out);
                prop_assert_eq!(len, ours.len());
                prop_assert!(out.iter().all(|c| !c.is_empty()));
                prop_assert_eq!(Some(ours.clone()), expected);
                let decoded = FetchResponse::decode(&mut Bytes::from(ours), version);
                prop_assert_eq!(decoded.ok().map(|d| d.responses.len()), Some(resp.responses.len()));
            }
            Err(e) => {
                prop_assert!(out.is_empty());
                prop_assert!(expected.is_none(), "we refused ({}) but the crate encoded", e);
            }
        }
    }
}

#[test]
fn file_records_become_file_chunks_with_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("00000000000000000000.log");
    let (b10, b200) = (sample_batch(10), sample_batch(200));
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(b"junk").unwrap();
    f.write_all(&b10).unwrap();
    f.write_all(&b200).unwrap();
    drop(f);
    let file = Arc::new(std::fs::File::open(&path).unwrap());
    for version in MIN_VERSION..=MAX_VERSION {
        let mut resp = sample(version);
        let in_file = FileRecords::new(file.clone(), 4, b10.len());
        resp.responses[0].partitions[0].records = Some(Records::File(in_file.clone()));
        let (chunks, len) = encode(&resp, version).unwrap();
        assert_eq!(chunks[1], Chunk::File(in_file), "v{version}");
        assert_eq!(total_len(&chunks), len, "v{version}");
        // The same bytes as the crate's encoding of the records in memory.
        resp.responses[0].partitions[0].records = Some(b10.clone().into());
        assert_eq!(
            Some(concat(&chunks)),
            crate_encode(&resp, version),
            "v{version}"
        );
    }
}
