//! Zero-copy encoder for ShareFetch v1 and v2 response bodies (API key 78; v2 writes the same
//! bytes as v1, see `protocol::share_v2`), as `fetch_encode` is for
//! Fetch: the metadata is written into one growing `BytesMut`, each partition's record bytes are
//! spliced in as their own chunk (a clone of the log's `Bytes`, never copied).
//!
//! Invariant: the concatenation of the chunks is byte-for-byte what the `kafka-protocol` crate's
//! `ShareFetchResponse` encoder writes for the same value at v1 (the tests compare them). Unknown
//! tagged fields are never written (a count of 0 after every struct). No I/O, no state.
//!
//! Wire layout (v1, flexible: compact lengths as unsigned varint N+1, 0 = null):
//! ```text
//! throttle_time_ms i32 | error_code i16 | error_message string? | acquisition_lock_timeout_ms i32
//!   | [topic: topic_id uuid | [partition] | tags] | [node_endpoint] | tags
//! partition: partition_index i32 | error_code i16 | error_message string?
//!   | acknowledge_error_code i16 | acknowledge_error_message string?
//!   | current_leader (leader_id i32 | leader_epoch i32 | tags) | records bytes?
//!   | [acquired (first_offset i64 | last_offset i64 | delivery_count i16 | tags)] | tags
//! ```

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::ShareFetchResponse;
use kafka_protocol::protocol::{Encodable, StrBytes};

use super::Chunk;

/// The version whose layout this encoder writes (and the crate encodes the nested structs at).
pub const VERSION: i16 = 1;
/// The newest version written: the same bytes as [`VERSION`].
pub const MAX_VERSION: i16 = 2;

/// Why a ShareFetch response could not be encoded (a broker bug or an impossible size).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    #[error("ShareFetch version {0} is not {VERSION} to {MAX_VERSION}")]
    UnsupportedVersion(i16),
    #[error("{what} is too long to encode ({len})")]
    TooLong { what: &'static str, len: usize },
    #[error("encoding {what}: {reason}")]
    Struct { what: &'static str, reason: String },
}

fn put_uvarint(buf: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        buf.put_u8((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

/// A compact length (N + 1).
fn put_len(buf: &mut BytesMut, what: &'static str, len: usize) -> Result<(), EncodeError> {
    let n = u32::try_from(len)
        .ok()
        .and_then(|n| n.checked_add(1))
        .ok_or(EncodeError::TooLong { what, len })?;
    put_uvarint(buf, n);
    Ok(())
}

fn put_nullable_string(
    buf: &mut BytesMut,
    what: &'static str,
    s: Option<&StrBytes>,
) -> Result<(), EncodeError> {
    match s {
        None => put_uvarint(buf, 0),
        Some(s) => {
            put_len(buf, what, s.len())?;
            buf.put_slice(s.as_bytes());
        }
    }
    Ok(())
}

fn put_struct(
    buf: &mut BytesMut,
    what: &'static str,
    s: &impl Encodable,
) -> Result<(), EncodeError> {
    s.encode(buf, VERSION).map_err(|e| EncodeError::Struct {
        what,
        reason: e.to_string(),
    })
}

/// Encodes the response BODY (no size prefix, no response header) and appends it to `out` as
/// chunks; returns the body length. Record bytes become their own chunks. On `Err`, `out` is
/// left as it was.
pub fn encode_share_fetch_response(
    resp: &ShareFetchResponse,
    version: i16,
    out: &mut Vec<Chunk>,
) -> Result<usize, EncodeError> {
    if !(VERSION..=MAX_VERSION).contains(&version) {
        return Err(EncodeError::UnsupportedVersion(version));
    }
    let start = out.len();
    let result = encode(resp, out);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

fn encode(resp: &ShareFetchResponse, out: &mut Vec<Chunk>) -> Result<usize, EncodeError> {
    let mut total = 0usize;
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(resp.throttle_time_ms);
    buf.put_i16(resp.error_code);
    put_nullable_string(&mut buf, "error_message", resp.error_message.as_ref())?;
    buf.put_i32(resp.acquisition_lock_timeout_ms);
    put_len(&mut buf, "responses", resp.responses.len())?;
    for t in &resp.responses {
        buf.put_slice(t.topic_id.as_bytes());
        put_len(&mut buf, "partitions", t.partitions.len())?;
        for p in &t.partitions {
            buf.put_i32(p.partition_index);
            buf.put_i16(p.error_code);
            put_nullable_string(&mut buf, "error_message", p.error_message.as_ref())?;
            buf.put_i16(p.acknowledge_error_code);
            put_nullable_string(
                &mut buf,
                "acknowledge_error_message",
                p.acknowledge_error_message.as_ref(),
            )?;
            put_struct(&mut buf, "current_leader", &p.current_leader)?;
            match &p.records {
                None => put_uvarint(&mut buf, 0),
                Some(records) => {
                    put_len(&mut buf, "records", records.len())?;
                    if !records.is_empty() {
                        // The metadata so far, then the records as they came from the log.
                        let head = buf.split().freeze();
                        total += head.len();
                        out.push(Chunk::Bytes(head));
                        total += records.len();
                        out.push(Chunk::Bytes(records.clone()));
                    }
                }
            }
            put_len(&mut buf, "acquired_records", p.acquired_records.len())?;
            for a in &p.acquired_records {
                put_struct(&mut buf, "acquired_records", a)?;
            }
            put_uvarint(&mut buf, 0);
        }
        put_uvarint(&mut buf, 0);
    }
    put_len(&mut buf, "node_endpoints", resp.node_endpoints.len())?;
    for n in &resp.node_endpoints {
        put_struct(&mut buf, "node_endpoints", n)?;
    }
    put_uvarint(&mut buf, 0);
    let tail = buf.freeze();
    total += tail.len();
    out.push(Chunk::Bytes(tail));
    Ok(total)
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use kafka_protocol::messages::share_fetch_response::{
        AcquiredRecords, LeaderIdAndEpoch, NodeEndpoint, PartitionData, ShareFetchableTopicResponse,
    };
    use uuid::Uuid;

    use super::*;

    fn concat(chunks: &[Chunk]) -> Vec<u8> {
        let mut v = Vec::new();
        for c in chunks {
            match c {
                Chunk::Bytes(b) => v.extend_from_slice(b),
                Chunk::File(_) => panic!("no file chunks here"),
            }
        }
        v
    }

    fn sample(records: Bytes) -> ShareFetchResponse {
        let p = |index: i32, records: Option<Bytes>| {
            PartitionData::default()
                .with_partition_index(index)
                .with_error_code(if records.is_none() { 6 } else { 0 })
                .with_error_message(records.is_none().then(|| StrBytes::from_static_str("nope")))
                .with_acknowledge_error_code(121)
                .with_acknowledge_error_message(Some(StrBytes::from_static_str("bad ack")))
                .with_current_leader(
                    LeaderIdAndEpoch::default()
                        .with_leader_id(3)
                        .with_leader_epoch(7),
                )
                .with_records(records)
                .with_acquired_records(vec![
                    AcquiredRecords::default()
                        .with_first_offset(10)
                        .with_last_offset(19)
                        .with_delivery_count(2),
                    AcquiredRecords::default()
                        .with_first_offset(25)
                        .with_last_offset(25)
                        .with_delivery_count(1),
                ])
        };
        ShareFetchResponse::default()
            .with_throttle_time_ms(5)
            .with_error_message(Some(StrBytes::from_static_str("")))
            .with_acquisition_lock_timeout_ms(30_000)
            .with_responses(vec![
                ShareFetchableTopicResponse::default()
                    .with_topic_id(Uuid::from_u128(0x1234))
                    .with_partitions(vec![
                        p(0, Some(records.clone())),
                        p(1, None),
                        p(2, Some(Bytes::new())),
                    ]),
                ShareFetchableTopicResponse::default()
                    .with_topic_id(Uuid::from_u128(0x99))
                    .with_partitions(vec![p(5, Some(records))]),
            ])
            .with_node_endpoints(vec![NodeEndpoint::default()
                .with_node_id(3.into())
                .with_host(StrBytes::from_static_str("localhost"))
                .with_port(9092)
                .with_rack(Some(StrBytes::from_static_str("r1")))])
    }

    #[test]
    fn chunks_match_the_crate_encoder_byte_for_byte() {
        let records = Bytes::from(vec![0xAB; 300]);
        for resp in [sample(records.clone()), ShareFetchResponse::default()] {
            let mut expected = BytesMut::new();
            resp.encode(&mut expected, 1).unwrap();
            let mut chunks = Vec::new();
            let len = encode_share_fetch_response(&resp, 1, &mut chunks).unwrap();
            assert_eq!(len, expected.len());
            assert_eq!(concat(&chunks), expected.to_vec());
        }
    }

    /// Kafka 4.4.0's `ShareFetchResponseData` at v2 (and v1: the same bytes): lock timeout
    /// 30000, one partition 0, leader 1 epoch 2, records 09 08 07 06, acquired 0-3 delivery 1.
    #[test]
    fn v2_matches_kafka_4_4_0s_bytes() {
        const GOLDEN: &str =
            "0000000000000000007530020102030405060708090a0b0c0d0e0f1002000000000000\
000000000000000100000002000509080706020000000000000000000000000000000300010000000100";
        let want: Vec<u8> = (0..GOLDEN.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&GOLDEN[i..i + 2], 16).unwrap())
            .collect();
        let resp = ShareFetchResponse::default()
            .with_acquisition_lock_timeout_ms(30_000)
            .with_responses(vec![ShareFetchableTopicResponse::default()
                .with_topic_id(Uuid::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10))
                .with_partitions(vec![PartitionData::default()
                    .with_current_leader(
                        LeaderIdAndEpoch::default()
                            .with_leader_id(1)
                            .with_leader_epoch(2),
                    )
                    .with_records(Some(Bytes::from_static(&[9, 8, 7, 6])))
                    .with_acquired_records(vec![AcquiredRecords::default()
                        .with_first_offset(0)
                        .with_last_offset(3)
                        .with_delivery_count(1)])])]);
        for version in [1, 2] {
            let mut chunks = Vec::new();
            let len = encode_share_fetch_response(&resp, version, &mut chunks).unwrap();
            assert_eq!(len, want.len());
            assert_eq!(concat(&chunks), want, "v{version}");
        }
    }

    #[test]
    fn records_are_spliced_without_copying() {
        let records = Bytes::from(vec![0x5A; 1000]);
        let mut chunks = Vec::new();
        encode_share_fetch_response(&sample(records.clone()), 1, &mut chunks).unwrap();
        let spliced: Vec<&Bytes> = chunks
            .iter()
            .filter_map(|c| match c {
                Chunk::Bytes(b) if b.as_ptr() == records.as_ptr() => Some(b),
                _ => None,
            })
            .collect();
        // Partitions 0 and 5 carry the records; the empty and the null ones add no chunk.
        assert_eq!(spliced.len(), 2);
        assert!(spliced.iter().all(|b| b.len() == 1000));
    }

    #[test]
    fn other_versions_are_refused_and_leave_out_untouched() {
        let mut chunks = vec![Chunk::Bytes(Bytes::from_static(b"x"))];
        assert_eq!(
            encode_share_fetch_response(&ShareFetchResponse::default(), 3, &mut chunks),
            Err(EncodeError::UnsupportedVersion(3))
        );
        assert_eq!(chunks.len(), 1);
    }
}
