use super::*;
use crate::record::build::{compress, compress_batch, snappy_raw, with_section, Codec};
use crate::record::{self, compute_crc, KeyValue, OFFSET_ATTRIBUTES, OFFSET_CRC};
use proptest::prelude::*;

const NOW: i64 = 1_700_000_000_000;

fn rules() -> Rules<'static> {
    Rules::defaults("t", NOW)
}

fn check_with(batch: &[u8], rules: &Rules<'_>) -> Result<(), Refusal> {
    let header = record::validate_batch(batch).expect("header and CRC are sound");
    assert_eq!(header.total_size(), batch.len());
    validate(batch, &header, rules)
}

fn check(batch: &[u8]) -> Result<(), Refusal> {
    check_with(batch, &rules())
}

fn put_varlong(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn put_bytes(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        Some(b) => {
            put_varlong(out, b.len() as i64);
            out.extend_from_slice(b);
        }
        None => put_varlong(out, -1),
    }
}

/// One record as a client frames it.
#[derive(Debug, Clone)]
struct Rec {
    ts_delta: i64,
    offset_delta: i32,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

fn rec(offset_delta: i32, key: Option<&[u8]>, value: &[u8]) -> Rec {
    Rec {
        ts_delta: 0,
        offset_delta,
        key: key.map(<[u8]>::to_vec),
        value: Some(value.to_vec()),
        headers: Vec::new(),
    }
}

fn encode(r: &Rec) -> Vec<u8> {
    let mut body = vec![0u8];
    put_varlong(&mut body, r.ts_delta);
    put_varlong(&mut body, r.offset_delta as i64);
    put_bytes(&mut body, r.key.as_deref());
    put_bytes(&mut body, r.value.as_deref());
    put_varlong(&mut body, r.headers.len() as i64);
    for (k, v) in &r.headers {
        put_bytes(&mut body, Some(k));
        put_bytes(&mut body, v.as_deref());
    }
    let mut out = Vec::new();
    put_varlong(&mut out, body.len() as i64);
    out.extend_from_slice(&body);
    out
}

/// A whole batch: `section` as its record bytes, the header claiming `count` records and
/// `last_offset_delta`, base timestamp `NOW`.
fn framed(
    section: &[u8],
    count: i32,
    last_offset_delta: i32,
    producer: (i64, i16, i32),
) -> Vec<u8> {
    let mut b = record::build_batch(0, NOW, producer, &[]);
    b.truncate(record::BATCH_HEADER_LEN);
    b[record::OFFSET_LAST_OFFSET_DELTA..record::OFFSET_LAST_OFFSET_DELTA + 4]
        .copy_from_slice(&last_offset_delta.to_be_bytes());
    b[record::OFFSET_RECORD_COUNT..record::OFFSET_RECORD_COUNT + 4]
        .copy_from_slice(&count.to_be_bytes());
    with_section(&b, 0, section)
}

fn batch_of(recs: &[Rec]) -> Vec<u8> {
    let section: Vec<u8> = recs.iter().flat_map(encode).collect();
    let n = recs.len() as i32;
    framed(&section, n, n - 1, (-1, -1, -1))
}

fn three() -> Vec<Rec> {
    (0..3).map(|i| rec(i, Some(b"k"), b"value")).collect()
}

fn section_of(recs: &[Rec]) -> Vec<u8> {
    recs.iter().flat_map(encode).collect()
}

/// Re-frames `batch` under another codec attribute / section and fixes the CRC.
fn recrc(mut b: Vec<u8>) -> Vec<u8> {
    let crc = compute_crc(&b);
    b[OFFSET_CRC..OFFSET_CRC + 4].copy_from_slice(&crc.to_be_bytes());
    b
}

fn refused(r: Result<(), Refusal>) -> Refusal {
    r.expect_err("the batch must be refused")
}

#[test]
fn accepts_batches_the_broker_and_clients_build() {
    let value = vec![7u8; 300];
    let kvs: Vec<KeyValue<'_>> = vec![
        (Some(b"a"), Some(&value)),
        (None, None),
        (Some(b""), Some(b"")),
    ];
    assert_eq!(
        check(&record::build_batch(0, NOW, (-1, -1, -1), &kvs)),
        Ok(())
    );
    // 300 records: offset deltas and lengths take two-byte varints; headers, null header values,
    // negative and positive timestamp deltas.
    let recs: Vec<Rec> = (0..300)
        .map(|i| Rec {
            ts_delta: (i as i64 - 150) * 1000,
            offset_delta: i,
            key: (i % 3 != 0).then(|| vec![b'k'; i as usize % 70]),
            value: Some(vec![b'v'; i as usize]),
            headers: vec![
                (b"h1".to_vec(), Some(b"x".to_vec())),
                (b"h2".to_vec(), None),
            ],
        })
        .collect();
    assert_eq!(check(&batch_of(&recs)), Ok(()));
    // An idempotent batch carries a sequence.
    let b = record::build_batch(0, NOW, (5, 0, 0), &kvs);
    assert_eq!(check(&b), Ok(()));
}

#[test]
fn count_claiming_more_records_than_present_is_refused() {
    let section = section_of(&three());
    let r = refused(check(&framed(&section, 1000, 999, (-1, -1, -1))));
    assert_eq!(r.reason, Reason::InvalidRecord);
    assert!(r.record_errors.is_empty());
    assert_eq!(
        r.message,
        "Incorrect declared batch size, premature EOF reached in topic partition t-0"
    );
    // 2^31-1 claimed with 3 present: refused by the section size, before any record is read.
    let r = refused(check(&framed(
        &section,
        i32::MAX,
        i32::MAX - 1,
        (-1, -1, -1),
    )));
    assert_eq!(r.reason, Reason::InvalidRecord);
    assert!(r
        .message
        .starts_with("Incorrect declared batch size, premature EOF"));
    // Fewer claimed than present: bytes are left over.
    let r = refused(check(&framed(&section, 2, 1, (-1, -1, -1))));
    assert_eq!(
        r.message,
        "Incorrect declared batch size, records still remaining in file in topic partition t-0"
    );
}

#[test]
fn last_offset_delta_must_be_count_minus_one() {
    let section = section_of(&three());
    for last in [3, 5, i32::MAX - 1] {
        let r = refused(check(&framed(&section, 3, last, (-1, -1, -1))));
        assert_eq!(r.reason, Reason::InvalidRecord);
        assert_eq!(
            r.message,
            format!("Inconsistent batch offset range [0, {last}] and count of records 3 in topic partition t-0")
        );
    }
    assert_eq!(check(&framed(&section, 3, 2, (-1, -1, -1))), Ok(()));
}

#[test]
fn idempotent_batch_without_sequence_is_refused() {
    let b = record::build_batch(0, NOW, (9, 0, -1), &[(None, Some(b"v"))]);
    let r = refused(check(&b));
    assert_eq!(
        r.message,
        "Invalid sequence number -1 in record batch with producerId 9 in topic partition t-0"
    );
}

#[test]
fn framing_faults_are_refused() {
    let good = encode(&rec(0, None, b"v"));
    // A record whose length says one byte more than its fields take.
    let mut long = good.clone();
    long[0] += 2; // zig-zag: +1
    long.push(0);
    let r = refused(check(&framed(&long, 1, 0, (-1, -1, -1))));
    assert!(
        r.message
            .starts_with("Invalid record size: expected to read"),
        "{}",
        r.message
    );
    // Length past the section's end.
    let mut over = good.clone();
    over[0] += 20;
    let r = refused(check(&framed(&over, 1, 0, (-1, -1, -1))));
    assert!(
        r.message
            .starts_with("Invalid record size: expected 17 bytes"),
        "{}",
        r.message
    );
    // A value length running past the record.
    let mut value = good.clone();
    let at = value.len() - 3; // value length (1), value (1), header count (1)
    value[at] = 40;
    let r = refused(check(&framed(&value, 1, 0, (-1, -1, -1))));
    assert!(
        r.message.starts_with("Found invalid record structure"),
        "{}",
        r.message
    );
    // Negative header count, negative header key length, an over-long varint.
    let mut headers = good.clone();
    *headers.last_mut().unwrap() = 1; // -1
    let r = refused(check(&framed(&headers, 1, 0, (-1, -1, -1))));
    assert!(r
        .message
        .starts_with("Found invalid number of record headers -1"));
    let mut hk = encode(&Rec {
        headers: vec![(b"h".to_vec(), None)],
        ..rec(0, None, b"v")
    });
    let at = hk.len() - 3; // header key length, key, value length
    hk[at] = 3; // -2
    let r = refused(check(&framed(&hk, 1, 0, (-1, -1, -1))));
    assert!(
        r.message.starts_with("Invalid negative header key size -2"),
        "{}",
        r.message
    );
    let varint = [6u8, 0, 0xff, 0xff, 0xff, 0xff, 0x7f];
    let r = refused(check(&framed(&varint, 1, 0, (-1, -1, -1))));
    assert!(
        r.message.starts_with("Found invalid record structure"),
        "{}",
        r.message
    );
}

/// A deterministic xorshift stream.
fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn random_bytes_with_a_valid_crc_are_refused() {
    for seed in 0..500u64 {
        let bytes = noise(seed, 20 + (seed as usize % 200));
        let r = refused(check(&framed(&bytes, 3, 2, (-1, -1, -1))));
        assert_eq!(r.reason, Reason::InvalidRecord, "seed {seed}");
        assert!(r.record_errors.is_empty());
    }
}

#[test]
fn random_bytes_under_each_codec_are_refused() {
    let plain = batch_of(&three());
    for codec in 1..=4i16 {
        for seed in 0..100u64 {
            let b = with_section(&plain, codec, &noise(seed + 77, 10 + seed as usize * 3));
            let r = refused(check(&b));
            assert_eq!(r.reason, Reason::InvalidRecord, "codec {codec} seed {seed}");
        }
        // A sound stream of the codec whose content is not records.
        let codec_enum = Codec::ALL[codec as usize - 1];
        let b = with_section(&plain, codec, &compress(codec_enum, &noise(5, 4000)));
        let r = refused(check(&b));
        assert_eq!(r.reason, Reason::InvalidRecord, "codec {codec}");
        assert!(!r.message.contains("decompress"), "{}", r.message);
        // Truncated compressed records.
        let whole = compress(codec_enum, &section_of(&three()));
        let b = with_section(&plain, codec, &whole[..whole.len() / 2]);
        assert_eq!(refused(check(&b)).reason, Reason::InvalidRecord);
    }
    let garbage = with_section(&plain, 1, b"not gzip at all");
    let r = refused(check(&garbage));
    assert!(
        r.message
            .starts_with("Failed to decompress record stream (gzip)"),
        "{}",
        r.message
    );
}

#[test]
fn compressed_batches_of_every_codec_are_accepted() {
    let value = vec![b'z'; 900];
    let kvs: Vec<KeyValue<'_>> = (0..200)
        .map(|_| (Some(&b"key"[..]), Some(&value[..])))
        .collect();
    let plain = record::build_batch(0, NOW, (3, 0, 10), &kvs);
    for codec in Codec::ALL {
        let b = compress_batch(&plain, codec);
        assert!(b.len() < plain.len() / 4, "{codec:?} compresses");
        assert_eq!(check(&b), Ok(()), "{codec:?}");
    }
    let raw = with_section(&plain, 2, &snappy_raw(&plain[record::BATCH_HEADER_LEN..]));
    assert_eq!(check(&raw), Ok(()));
    // Two gzip members, as Java's GZIPInputStream reads them.
    let section = &plain[record::BATCH_HEADER_LEN..];
    let mut two = compress(Codec::Gzip, &section[..1000]);
    two.extend(compress(Codec::Gzip, &section[1000..]));
    assert_eq!(check(&with_section(&plain, 1, &two)), Ok(()));
}

#[test]
fn record_rules_apply_inside_compressed_batches() {
    let recs = vec![rec(0, Some(b"k"), b"a"), rec(1, None, b"b")];
    let plain = batch_of(&recs);
    let compacted = Rules {
        compacted: true,
        ..rules()
    };
    for codec in Codec::ALL {
        let r = refused(check_with(&compress_batch(&plain, codec), &compacted));
        assert_eq!(r.record_errors.len(), 1, "{codec:?}");
        assert_eq!(r.record_errors[0].batch_index, 1);
    }
}

#[test]
fn decompressed_size_is_capped() {
    let small = Rules {
        max_decompressed_bytes: 1 << 20,
        ..rules()
    };
    // 4 MiB of one record's value (a bomb of a few KiB compressed).
    let big = vec![0u8; 4 << 20];
    let plain = record::build_batch(0, NOW, (-1, -1, -1), &[(None, Some(&big[..]))]);
    for codec in Codec::ALL {
        let b = compress_batch(&plain, codec);
        assert!(b.len() < 300 << 10, "{codec:?}: {} bytes", b.len());
        let r = refused(check_with(&b, &small));
        assert_eq!(r.reason, Reason::InvalidRecord);
        assert!(
            r.message.contains("1048576"),
            "{codec:?} names the cap: {}",
            r.message
        );
        assert_eq!(check(&b), Ok(()), "{codec:?} under the default cap");
    }
    // A raw snappy block claiming far more than snappy can produce from its size.
    let mut claim = Vec::new();
    let mut z = 1u64 << 40;
    while z >= 0x80 {
        claim.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
    claim.push(z as u8);
    claim.extend_from_slice(&[0; 8]);
    let r = refused(check(&with_section(&plain, 2, &claim)));
    assert!(r.message.contains("snappy"), "{}", r.message);
}

#[test]
fn zstd_window_over_the_limit_is_refused() {
    let data = noise(3, 300 << 10);
    let recs = vec![Rec {
        value: Some(data),
        ..rec(0, None, b"")
    }];
    let plain = batch_of(&recs);
    let mut e = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
    e.set_parameter(zstd::stream::raw::CParameter::WindowLog(27))
        .unwrap();
    e.include_contentsize(false).unwrap();
    std::io::Write::write_all(&mut e, &plain[record::BATCH_HEADER_LEN..]).unwrap();
    let section = e.finish().unwrap();
    let r = refused(check(&with_section(&plain, 4, &section)));
    assert!(
        r.message
            .starts_with("Failed to decompress record stream (zstd)"),
        "{}",
        r.message
    );
}

#[test]
fn offset_deltas_must_count_from_zero() {
    let recs = vec![rec(0, None, b"a"), rec(2, None, b"b"), rec(1, None, b"c")];
    let r = refused(check(&batch_of(&recs)));
    assert_eq!(r.reason, Reason::InvalidRecord);
    let indexes: Vec<i32> = r.record_errors.iter().map(|e| e.batch_index).collect();
    assert_eq!(indexes, vec![1, 2]);
    assert_eq!(
        r.record_errors[0].message,
        "Record at index 1 has offset delta 2, expected 1 in topic partition t-0"
    );
    assert!(r.message.starts_with(
        "One or more records have been rejected due to 2 record errors in total, and only showing the first three errors at most: [RecordError(batchIndex=1, message='Record at index 1"
    ));
}

#[test]
fn compacted_topic_refuses_null_keys_with_kafkas_message() {
    let recs = vec![
        rec(0, Some(b"k"), b"a"),
        rec(1, None, b"b"),
        rec(2, Some(b""), b"c"),
    ];
    let compacted = Rules {
        compacted: true,
        ..rules()
    };
    let r = refused(check_with(&batch_of(&recs), &compacted));
    assert_eq!(r.reason, Reason::InvalidRecord);
    let msg = "Compacted topic cannot accept message without key in topic partition t-0";
    assert_eq!(
        r.record_errors,
        vec![RecordError {
            batch_index: 1,
            message: msg.into()
        }]
    );
    assert_eq!(
        r.message,
        format!("One or more records have been rejected due to 1 record errors in total, and only showing the first three errors at most: [RecordError(batchIndex=1, message='{msg}')]")
    );
    // Not compacted: null keys are fine.
    assert_eq!(check(&batch_of(&recs)), Ok(()));
}

#[test]
fn create_time_timestamps_must_be_in_range() {
    let at = |delta: i64| Rec {
        ts_delta: delta,
        ..rec(0, None, b"v")
    };
    let one = |delta| batch_of(&[at(delta)]);
    assert_eq!(check(&one(3_600_000)), Ok(()));
    let r = refused(check(&one(3_600_001)));
    assert_eq!(r.reason, Reason::InvalidTimestamp);
    assert_eq!(
        r.message,
        "One or more records have been rejected due to invalid timestamp"
    );
    assert_eq!(
        r.record_errors[0].message,
        format!(
            "Timestamp {} of message with offset 0 is out of range. The timestamp should be within [{}, {}]",
            NOW + 3_600_001,
            NOW.wrapping_sub(i64::MAX),
            NOW + 3_600_000
        )
    );
    let strict = Rules {
        timestamp_before_max_ms: 1000,
        ..rules()
    };
    assert_eq!(check_with(&one(-1000), &strict), Ok(()));
    let r = refused(check_with(&one(-1001), &strict));
    assert_eq!(r.record_errors[0].batch_index, 0);
    // A record without a timestamp (-1) is not checked.
    assert_eq!(check_with(&one(-1 - NOW), &strict), Ok(()));
    // One bad record among good ones: only it is named, the batch is INVALID_TIMESTAMP.
    let recs = vec![
        at(0),
        Rec {
            offset_delta: 1,
            ..at(7_200_000)
        },
        Rec {
            offset_delta: 2,
            ..at(5)
        },
    ];
    let r = refused(check(&batch_of(&recs)));
    assert_eq!(r.reason, Reason::InvalidTimestamp);
    assert_eq!(r.record_errors.len(), 1);
    assert_eq!(r.record_errors[0].batch_index, 1);
    // LogAppendTime topics do not check CreateTime ranges.
    let lat = Rules {
        timestamp_type: TimestampType::LogAppendTime,
        ..rules()
    };
    assert_eq!(check_with(&one(i64::MAX / 2), &lat), Ok(()));
}

#[test]
fn clients_may_not_send_log_append_time_batches() {
    let mut b = batch_of(&three());
    b[OFFSET_ATTRIBUTES + 1] |= record::ATTR_TIMESTAMP_TYPE_LOG_APPEND as u8;
    let b = recrc(b);
    let lat = Rules {
        timestamp_type: TimestampType::LogAppendTime,
        ..rules()
    };
    let r = refused(check_with(&b, &lat));
    assert_eq!(r.reason, Reason::InvalidTimestamp);
    assert_eq!(r.record_errors.len(), 3);
    assert!(r.record_errors[0]
        .message
        .ends_with("Producer should not set timestamp type to LogAppendTime."));
    // On a CreateTime topic its max timestamp is the records' timestamp, checked for range.
    assert_eq!(check(&b), Ok(()));
}

#[test]
fn record_errors_are_capped_but_counted() {
    let recs: Vec<Rec> = (0..(MAX_RECORD_ERRORS as i32 + 50))
        .map(|i| rec(i, None, b""))
        .collect();
    let compacted = Rules {
        compacted: true,
        ..rules()
    };
    let r = refused(check_with(&batch_of(&recs), &compacted));
    assert_eq!(r.record_errors.len(), MAX_RECORD_ERRORS);
    assert!(r
        .message
        .contains(&format!("due to {} record errors", MAX_RECORD_ERRORS + 50)));
}

fn arb_rec() -> impl Strategy<Value = Rec> {
    let bytes = || proptest::collection::vec(any::<u8>(), 0..40);
    (
        -3_000_000i64..3_000_000,
        proptest::option::of(bytes()),
        proptest::option::of(bytes()),
        proptest::collection::vec((bytes(), proptest::option::of(bytes())), 0..3),
    )
        .prop_map(|(ts_delta, key, value, headers)| Rec {
            ts_delta,
            offset_delta: 0,
            key,
            value,
            headers,
        })
}

fn numbered(mut recs: Vec<Rec>) -> Vec<Rec> {
    for (i, r) in recs.iter_mut().enumerate() {
        r.offset_delta = i as i32;
    }
    recs
}

proptest! {
    #[test]
    fn valid_batches_always_pass(recs in proptest::collection::vec(arb_rec(), 1..40), codec in 0usize..5) {
        let plain = batch_of(&numbered(recs));
        let b = if codec == 0 { plain } else { compress_batch(&plain, Codec::ALL[codec - 1]) };
        prop_assert_eq!(check(&b), Ok(()));
    }

    /// A mutated record section never panics; whatever passes also parses, record by record.
    #[test]
    fn mutations_never_panic(recs in proptest::collection::vec(arb_rec(), 1..20),
                             at in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let recs = numbered(recs);
        let mut b = batch_of(&recs);
        let i = record::BATCH_HEADER_LEN + at.index(b.len() - record::BATCH_HEADER_LEN);
        b[i] = byte;
        let b = recrc(b);
        // The slice walk and the stream walk agree on every mutation.
        let streamed = compress_batch(&b, Codec::Lz4);
        prop_assert_eq!(check(&b).is_ok(), check(&streamed).is_ok());
        match check(&b) {
            Ok(()) => {
                let parsed = record::uncompressed_records(&b).expect("accepted records parse");
                prop_assert_eq!(parsed.len(), recs.len());
            }
            Err(r) => prop_assert!(r.reason == Reason::InvalidRecord || r.reason == Reason::InvalidTimestamp),
        }
    }

    #[test]
    fn mutated_compressed_sections_never_panic(recs in proptest::collection::vec(arb_rec(), 1..10),
                                               codec in 0usize..4, at in any::<prop::sample::Index>(),
                                               byte in any::<u8>()) {
        let codec = Codec::ALL[codec];
        let plain = batch_of(&numbered(recs));
        let mut section = compress(codec, &plain[record::BATCH_HEADER_LEN..]);
        let i = at.index(section.len());
        section[i] = byte;
        let b = with_section(&plain, codec as i16, &section);
        if let Err(r) = check(&b) {
            prop_assert!(r.reason == Reason::InvalidRecord || r.reason == Reason::InvalidTimestamp);
        }
    }
}

/// Batches librdkafka 2.16 (confluent-kafka) produced (idempotent, 20 records, every fourth key
/// null, headers on every third), as Sluice stored them: one per codec; snappy is a raw block.
const LIBRDKAFKA: [(&str, &[u8]); 5] = [
    ("none", include_bytes!("fixtures/librdkafka-none.bin")),
    ("gzip", include_bytes!("fixtures/librdkafka-gzip.bin")),
    ("snappy", include_bytes!("fixtures/librdkafka-snappy.bin")),
    ("lz4", include_bytes!("fixtures/librdkafka-lz4.bin")),
    ("zstd", include_bytes!("fixtures/librdkafka-zstd.bin")),
];

#[test]
fn real_client_batches_pass_and_compacted_rules_find_their_null_keys() {
    let compacted = Rules {
        compacted: true,
        ..rules()
    };
    for (codec, batch) in LIBRDKAFKA {
        let header = record::validate_batch(batch).expect(codec);
        assert_eq!(header.record_count, 20, "{codec}");
        assert_eq!(check(batch), Ok(()), "{codec}");
        let r = refused(check_with(batch, &compacted));
        let nulls: Vec<i32> = r.record_errors.iter().map(|e| e.batch_index).collect();
        assert_eq!(nulls, vec![0, 4, 8, 12, 16], "{codec}");
        // A few bytes less in the record section (a trailer, an LZ4 end mark): refused whatever
        // the codec.
        for cut in 1..=8 {
            let short = with_section(batch, header.compression(), &batch[61..batch.len() - cut]);
            let r = check(&short).map_err(|r| r.reason);
            assert_eq!(r, Err(Reason::InvalidRecord), "{codec} cut {cut}");
        }
    }
}
