use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{MetadataRequest, ProduceRequest, TopicName};
use kafka_protocol::protocol::{Encodable, StrBytes};

use super::*;

fn produce(timeout_ms: i32) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(timeout_ms)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(3)
                .with_records(Some(Bytes::from_static(b"0123456789")))])])
}

fn encoded(r: &impl Encodable, version: i16) -> Bytes {
    let mut b = BytesMut::new();
    r.encode(&mut b, version).unwrap();
    b.freeze()
}

#[test]
fn valid_bodies_decode_as_the_crate_decodes_them() {
    // timeout 30,000 > body: classic versions read it bounded, then decode again for real
    for (version, flexible) in [(3, false), (8, false), (9, true), (12, true)] {
        for timeout in [5, 30_000, i32::MAX] {
            let mut frame = encoded(&produce(timeout), version);
            frame.put_slice_after(b"rest");
            let r: ProduceRequest = decode(&mut frame, version, flexible).unwrap();
            assert_eq!(r, produce(timeout), "v{version} timeout {timeout}");
            assert_eq!(&frame[..], b"rest", "v{version}: frame left after the body");
        }
    }
}

/// Appends bytes to a frozen buffer (test helper).
trait PutAfter {
    fn put_slice_after(&mut self, tail: &[u8]);
}
impl PutAfter for Bytes {
    fn put_slice_after(&mut self, tail: &[u8]) {
        let mut b = BytesMut::from(&self[..]);
        b.put_slice(tail);
        *self = b.freeze();
    }
}

/// A Produce body (classic v3 or flexible v9) claiming `count` topics, padded to 100 bytes.
fn produce_claiming(version: i16, count: u32) -> Bytes {
    let mut b = BytesMut::new();
    if version >= 9 {
        b.put_u8(0); // null compact transactional id
    } else {
        b.put_i16(-1);
    }
    b.put_i16(1);
    b.put_i32(30_000);
    if version >= 9 {
        let mut v = count as u64 + 1;
        while v >= 0x80 {
            b.put_u8((v as u8) | 0x80);
            v >>= 7;
        }
        b.put_u8(v as u8);
    } else {
        b.put_i32(count as i32);
    }
    b.resize(100, 0);
    b.freeze()
}

#[test]
fn counts_larger_than_the_frame_are_refused() {
    for (version, flexible) in [(3, false), (8, false), (9, true), (13, true)] {
        let mut frame = produce_claiming(version, i32::MAX as u32);
        let err = decode::<ProduceRequest>(&mut frame, version, flexible).unwrap_err();
        assert_eq!(frame.len(), 100, "v{version}: frame untouched on error");
        if flexible {
            assert!(err.to_string().contains("exceeds the"), "v{version}: {err}");
        }
    }
}

#[test]
fn the_bound_reaches_nested_arrays_and_bytes() {
    // one topic whose partition array claims 2^31-1 entries (flexible v9)
    let mut b = BytesMut::new();
    b.put_u8(0);
    b.put_i16(1);
    b.put_i32(1000);
    b.put_u8(2); // one topic
    b.put_u8(2); // name "t"
    b.put_u8(b't');
    b.put_slice(&[0xff, 0xff, 0xff, 0xff, 0x07]); // varint 2^31 - 1: 2^31 - 2 partitions
    b.resize(100, 0);
    let err = decode::<ProduceRequest>(&mut b.freeze(), 9, true).unwrap_err();
    assert!(err.to_string().contains("2147483647"), "{err}");
}

#[test]
fn small_counts_and_tags_pass_whatever_is_left() {
    // Metadata v9 with 3 topics claimed in a 1-byte remainder: 3 <= SMALL, the crate fails on
    // the missing topics (no refusal), a plain decode error
    let mut frame = Bytes::from_static(&[4, 0]);
    let err = decode::<MetadataRequest>(&mut frame, 9, true).unwrap_err();
    assert!(!err.to_string().contains("exceeds the"), "{err}");
    // a request that decodes plainly decodes here too
    let m = MetadataRequest::default().with_allow_auto_topic_creation(true);
    let mut frame = encoded(&m, 12);
    assert_eq!(decode::<MetadataRequest>(&mut frame, 12, true).unwrap(), m);
}

/// Found by the `decode` fuzz target: Fetch v12 whose topic count is a 5-byte varint with the
/// continuation bit still set on its fifth byte (the crate stops there and allocated 2^32-2
/// topics: 0x5fffffff40 bytes), which a tracker waiting for the varint's last byte missed.
#[test]
fn regression_fetch_topics_five_byte_varint_without_end() {
    // the body after the request header, as the fuzzer wrote it
    let hex = "ffff0100 00000000 00000000 00ffffff ff 00000000 00fd0000 \
               ffffffffffffffffffffffff 000a0000 00000101 00";
    let body: Vec<u8> = hex
        .split_whitespace()
        .flat_map(|w| {
            (0..w.len())
                .step_by(2)
                .map(move |i| u8::from_str_radix(&w[i..i + 2], 16).unwrap())
        })
        .collect();
    let mut frame = Bytes::from(body);
    let err = decode::<kafka_protocol::messages::FetchRequest>(&mut frame, 12, true).unwrap_err();
    assert!(err.to_string().contains("exceeds the"), "{err}");
}

#[test]
fn varints_are_read_as_the_crate_reads_them() {
    assert_eq!(varint_at(&[0x05, 0xff]), Some((5, 1)));
    assert_eq!(varint_at(&[0x81, 0x01]), Some((129, 2)));
    assert_eq!(
        varint_at(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
        Some((u32::MAX as u64, 5))
    );
    assert_eq!(varint_at(&[0x81, 0x81]), None);
}
