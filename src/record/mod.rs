//! Record batches (magic 2) as Kafka stores and sends them.
//!
//! This is a leaf module shared by `log` (recovery, index building, timestamp search),
//! `log_validator` and `api` (produce validation). It reads and patches the fixed 61-byte batch
//! header; the one per-record piece is `compression`, the bounded streaming decoder of a batch's
//! compressed record section (gzip, snappy, lz4, zstd); `build` makes compressed batches for tests
//! and benchmarks. Performs no I/O and holds no state.
//!
//! Header layout (big-endian):
//! `baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 | crc u32 | attributes i16 |
//! lastOffsetDelta i32 | baseTimestamp i64 | maxTimestamp i64 | producerId i64 | producerEpoch i16 |
//! baseSequence i32 | recordCount i32`.
//! The CRC-32C covers everything from `attributes` to the end of the batch, so `baseOffset` and
//! `partitionLeaderEpoch` can be rewritten without recomputing it.

pub mod build;
pub mod compression;

/// Size of the fixed batch header.
pub const BATCH_HEADER_LEN: usize = 61;
/// `baseOffset` + `batchLength`: the part of the header that precedes what `batchLength` counts.
pub const LOG_OVERHEAD: usize = 12;

pub const OFFSET_BASE_OFFSET: usize = 0;
pub const OFFSET_BATCH_LENGTH: usize = 8;
pub const OFFSET_LEADER_EPOCH: usize = 12;
pub const OFFSET_MAGIC: usize = 16;
pub const OFFSET_CRC: usize = 17;
pub const OFFSET_ATTRIBUTES: usize = 21;
pub const OFFSET_LAST_OFFSET_DELTA: usize = 23;
pub const OFFSET_BASE_TIMESTAMP: usize = 27;
pub const OFFSET_MAX_TIMESTAMP: usize = 35;
pub const OFFSET_PRODUCER_ID: usize = 43;
pub const OFFSET_PRODUCER_EPOCH: usize = 51;
pub const OFFSET_BASE_SEQUENCE: usize = 53;
pub const OFFSET_RECORD_COUNT: usize = 57;

/// Attribute bits.
pub const ATTR_COMPRESSION_MASK: i16 = 0x07;
pub const ATTR_TIMESTAMP_TYPE_LOG_APPEND: i16 = 0x08;
pub const ATTR_TRANSACTIONAL: i16 = 0x10;
pub const ATTR_CONTROL: i16 = 0x20;

/// Producer id of batches written without idempotence.
pub const NO_PRODUCER_ID: i64 = -1;
/// Sequence of batches written without idempotence.
pub const NO_SEQUENCE: i32 = -1;

/// Why a batch header or batch was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    #[error("batch shorter than its {BATCH_HEADER_LEN}-byte header ({0} bytes)")]
    TooShort(usize),
    #[error("batch length field {0} is invalid")]
    BadLength(i32),
    #[error("batch claims {claimed} bytes but only {available} are present")]
    Truncated { claimed: usize, available: usize },
    #[error("unsupported magic {0}")]
    BadMagic(i8),
    #[error("CRC mismatch: header says {expected:#010x}, computed {actual:#010x}")]
    BadCrc { expected: u32, actual: u32 },
    #[error("lastOffsetDelta {last_offset_delta} does not fit recordCount {record_count}")]
    BadCounts {
        last_offset_delta: i32,
        record_count: i32,
    },
}

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

/// The decoded fixed header of one magic-2 record batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    /// Bytes after the `batchLength` field; the whole batch is `LOG_OVERHEAD + batch_length`.
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

impl BatchHeader {
    /// Parses the header at the start of `bytes` (which may hold more than one batch). Checks only
    /// that the header is present and its length field is sane; see [`validate_batch`] for the rest.
    pub fn parse(bytes: &[u8]) -> Result<BatchHeader, BatchError> {
        if bytes.len() < BATCH_HEADER_LEN {
            return Err(BatchError::TooShort(bytes.len()));
        }
        let batch_length = be_i32(bytes, OFFSET_BATCH_LENGTH);
        if (batch_length as i64) < (BATCH_HEADER_LEN - LOG_OVERHEAD) as i64 {
            return Err(BatchError::BadLength(batch_length));
        }
        Ok(BatchHeader {
            base_offset: be_i64(bytes, OFFSET_BASE_OFFSET),
            batch_length,
            partition_leader_epoch: be_i32(bytes, OFFSET_LEADER_EPOCH),
            magic: bytes[OFFSET_MAGIC] as i8,
            crc: be_u32(bytes, OFFSET_CRC),
            attributes: be_i16(bytes, OFFSET_ATTRIBUTES),
            last_offset_delta: be_i32(bytes, OFFSET_LAST_OFFSET_DELTA),
            base_timestamp: be_i64(bytes, OFFSET_BASE_TIMESTAMP),
            max_timestamp: be_i64(bytes, OFFSET_MAX_TIMESTAMP),
            producer_id: be_i64(bytes, OFFSET_PRODUCER_ID),
            producer_epoch: be_i16(bytes, OFFSET_PRODUCER_EPOCH),
            base_sequence: be_i32(bytes, OFFSET_BASE_SEQUENCE),
            record_count: be_i32(bytes, OFFSET_RECORD_COUNT),
        })
    }

    /// Total size of the batch on the wire and on disk.
    pub fn total_size(&self) -> usize {
        LOG_OVERHEAD + self.batch_length as usize
    }
    pub fn last_offset(&self) -> i64 {
        self.base_offset + self.last_offset_delta as i64
    }
    pub fn compression(&self) -> i16 {
        self.attributes & ATTR_COMPRESSION_MASK
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }
    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }
    /// Sequence of the last record, wrapping at `i32::MAX` like Kafka.
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence < 0 {
            return NO_SEQUENCE;
        }
        let last = self.base_sequence as i64 + self.last_offset_delta as i64;
        if last > i32::MAX as i64 {
            (last - i32::MAX as i64 - 1) as i32
        } else {
            last as i32
        }
    }
}

/// CRC-32C of the covered part of a whole batch (`attributes` to the end).
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(&batch[OFFSET_ATTRIBUTES..])
}

/// Parses and fully validates the single batch that spans all of `batch` (magic, length, counts,
/// CRC). Returns the header. Cost: one CRC pass over the bytes, no per-record decoding.
pub fn validate_batch(batch: &[u8]) -> Result<BatchHeader, BatchError> {
    let header = BatchHeader::parse(batch)?;
    if header.magic != 2 {
        return Err(BatchError::BadMagic(header.magic));
    }
    let total = header.total_size();
    if total > batch.len() {
        return Err(BatchError::Truncated {
            claimed: total,
            available: batch.len(),
        });
    }
    if header.last_offset_delta < 0
        || header.record_count < 0
        || (header.record_count > 0 && header.last_offset_delta < header.record_count - 1)
    {
        return Err(BatchError::BadCounts {
            last_offset_delta: header.last_offset_delta,
            record_count: header.record_count,
        });
    }
    let actual = compute_crc(&batch[..total]);
    if actual != header.crc {
        return Err(BatchError::BadCrc {
            expected: header.crc,
            actual,
        });
    }
    Ok(header)
}

/// Rewrites `baseOffset` in place (outside the CRC).
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) {
    batch[OFFSET_BASE_OFFSET..OFFSET_BASE_OFFSET + 8].copy_from_slice(&base_offset.to_be_bytes());
}

/// Rewrites `partitionLeaderEpoch` in place (outside the CRC).
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[OFFSET_LEADER_EPOCH..OFFSET_LEADER_EPOCH + 4].copy_from_slice(&epoch.to_be_bytes());
}

/// Switches a whole batch to LogAppendTime with `now_ms` as its max timestamp and recomputes the CRC.
pub fn set_log_append_time(batch: &mut [u8], now_ms: i64) {
    let attrs = be_i16(batch, OFFSET_ATTRIBUTES) | ATTR_TIMESTAMP_TYPE_LOG_APPEND;
    batch[OFFSET_ATTRIBUTES..OFFSET_ATTRIBUTES + 2].copy_from_slice(&attrs.to_be_bytes());
    batch[OFFSET_MAX_TIMESTAMP..OFFSET_MAX_TIMESTAMP + 8].copy_from_slice(&now_ms.to_be_bytes());
    let crc = compute_crc(batch);
    batch[OFFSET_CRC..OFFSET_CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Like [`set_log_append_time`] for a batch split into its header (`head`, exactly
/// [`BATCH_HEADER_LEN`] bytes, rewritten in place) and the untouched `body` that follows it, so
/// the record bytes need not be copied into one buffer.
pub fn set_log_append_time_parts(head: &mut [u8], body: &[u8], now_ms: i64) {
    let attrs = be_i16(head, OFFSET_ATTRIBUTES) | ATTR_TIMESTAMP_TYPE_LOG_APPEND;
    head[OFFSET_ATTRIBUTES..OFFSET_ATTRIBUTES + 2].copy_from_slice(&attrs.to_be_bytes());
    head[OFFSET_MAX_TIMESTAMP..OFFSET_MAX_TIMESTAMP + 8].copy_from_slice(&now_ms.to_be_bytes());
    let crc = crc32c::crc32c_append(
        crc32c::crc32c(&head[OFFSET_ATTRIBUTES..BATCH_HEADER_LEN]),
        body,
    );
    head[OFFSET_CRC..OFFSET_CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

/// One record's `(key, value)`; `None` is a null key or value.
pub type KeyValue<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// Builds one uncompressed magic-2 batch from `(key, value)` pairs. Used by tests and tools; the
/// broker itself never builds batches on the produce or fetch path.
pub fn build_batch(
    base_offset: i64,
    base_timestamp: i64,
    producer: (i64, i16, i32),
    records: &[KeyValue<'_>],
) -> Vec<u8> {
    let mut body = Vec::new();
    for (i, (key, value)) in records.iter().enumerate() {
        let mut rec = Vec::new();
        rec.push(0u8); // attributes
        put_varlong(&mut rec, 0); // timestamp delta
        put_varlong(&mut rec, i as i64); // offset delta
        match key {
            Some(k) => {
                put_varlong(&mut rec, k.len() as i64);
                rec.extend_from_slice(k);
            }
            None => put_varlong(&mut rec, -1),
        }
        match value {
            Some(v) => {
                put_varlong(&mut rec, v.len() as i64);
                rec.extend_from_slice(v);
            }
            None => put_varlong(&mut rec, -1),
        }
        put_varlong(&mut rec, 0); // headers
        put_varlong(&mut body, rec.len() as i64);
        body.extend_from_slice(&rec);
    }
    let n = records.len() as i32;
    let mut b = Vec::with_capacity(BATCH_HEADER_LEN + body.len());
    b.extend_from_slice(&base_offset.to_be_bytes());
    b.extend_from_slice(&((BATCH_HEADER_LEN - LOG_OVERHEAD + body.len()) as i32).to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes());
    b.push(2);
    b.extend_from_slice(&0u32.to_be_bytes());
    b.extend_from_slice(&0i16.to_be_bytes());
    b.extend_from_slice(&(n - 1).max(0).to_be_bytes());
    b.extend_from_slice(&base_timestamp.to_be_bytes());
    b.extend_from_slice(&base_timestamp.to_be_bytes());
    b.extend_from_slice(&producer.0.to_be_bytes());
    b.extend_from_slice(&producer.1.to_be_bytes());
    b.extend_from_slice(&producer.2.to_be_bytes());
    b.extend_from_slice(&n.to_be_bytes());
    b.extend_from_slice(&body);
    let crc = compute_crc(&b);
    b[OFFSET_CRC..OFFSET_CRC + 4].copy_from_slice(&crc.to_be_bytes());
    b
}

/// Builds a whole transactional batch at `base_offset` 0: `build_batch` with the transactional
/// attribute set and the CRC recomputed. Coordinators use it for transactional offset commits.
pub fn build_transactional_batch(
    base_timestamp: i64,
    producer: (i64, i16, i32),
    records: &[KeyValue<'_>],
) -> Vec<u8> {
    let mut b = build_batch(0, base_timestamp, producer, records);
    b[OFFSET_ATTRIBUTES..OFFSET_ATTRIBUTES + 2].copy_from_slice(&ATTR_TRANSACTIONAL.to_be_bytes());
    let crc = compute_crc(&b);
    b[OFFSET_CRC..OFFSET_CRC + 4].copy_from_slice(&crc.to_be_bytes());
    b
}

/// Control record type of a transaction marker (Kafka's `ControlRecordType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlType {
    Abort = 0,
    Commit = 1,
}

/// Builds a transaction marker: a control batch (transactional + control attributes) at base offset
/// 0 with one record whose key is `version: i16 = 0, type: i16` and whose value is
/// `version: i16 = 0, coordinator_epoch: i32` (Kafka's `EndTransactionMarker`). The producer
/// sequence is -1, as in Kafka.
pub fn build_control_batch(
    producer_id: i64,
    producer_epoch: i16,
    coordinator_epoch: i32,
    control: ControlType,
    timestamp: i64,
) -> Vec<u8> {
    let mut key = [0u8; 4];
    key[2..4].copy_from_slice(&(control as i16).to_be_bytes());
    let mut value = [0u8; 6];
    value[2..6].copy_from_slice(&coordinator_epoch.to_be_bytes());
    let mut b = build_batch(
        0,
        timestamp,
        (producer_id, producer_epoch, NO_SEQUENCE),
        &[(Some(&key), Some(&value))],
    );
    let attrs = ATTR_TRANSACTIONAL | ATTR_CONTROL;
    b[OFFSET_ATTRIBUTES..OFFSET_ATTRIBUTES + 2].copy_from_slice(&attrs.to_be_bytes());
    let crc = compute_crc(&b);
    b[OFFSET_CRC..OFFSET_CRC + 4].copy_from_slice(&crc.to_be_bytes());
    b
}

/// The marker type of a whole uncompressed control batch (`None` if it is not a readable one).
pub fn control_type(batch: &[u8]) -> Option<ControlType> {
    let header = BatchHeader::parse(batch).ok()?;
    if !header.is_control() {
        return None;
    }
    let records = uncompressed_records(batch)?;
    let key = records.first()?.0.as_ref()?;
    if key.len() < 4 {
        return None;
    }
    match i16::from_be_bytes([key[2], key[3]]) {
        0 => Some(ControlType::Abort),
        1 => Some(ControlType::Commit),
        _ => None,
    }
}

/// An owned record key and value; `None` is null.
pub type OwnedKeyValue = (Option<Vec<u8>>, Option<Vec<u8>>);

/// The `(key, value)` of every record in one whole uncompressed batch (headers are skipped).
/// None when the batch is compressed or its records do not parse. Used to read internal topics.
pub fn uncompressed_records(batch: &[u8]) -> Option<Vec<OwnedKeyValue>> {
    let header = BatchHeader::parse(batch).ok()?;
    if header.compression() != 0 || batch.len() < header.total_size() {
        return None;
    }
    let mut rest = &batch[BATCH_HEADER_LEN..header.total_size()];
    let count = usize::try_from(header.record_count).ok()?;
    let mut out = Vec::with_capacity(count.min(rest.len()));
    for _ in 0..count {
        let len = usize::try_from(get_varlong(&mut rest)?).ok()?;
        if len > rest.len() {
            return None;
        }
        let (mut rec, tail) = rest.split_at(len);
        rest = tail;
        rec = rec.get(1..)?; // attributes
        get_varlong(&mut rec)?; // timestamp delta
        get_varlong(&mut rec)?; // offset delta
        let key = get_nullable_bytes(&mut rec)?;
        let value = get_nullable_bytes(&mut rec)?;
        out.push((key, value));
    }
    Some(out)
}

fn get_varlong(buf: &mut &[u8]) -> Option<i64> {
    let mut z: u64 = 0;
    for shift in (0..70).step_by(7) {
        let (&b, tail) = buf.split_first()?;
        *buf = tail;
        z |= ((b & 0x7f) as u64) << shift;
        if b & 0x80 == 0 {
            return Some(((z >> 1) as i64) ^ -((z & 1) as i64));
        }
    }
    None
}

/// Outer None: malformed; inner None: a null field.
fn get_nullable_bytes(buf: &mut &[u8]) -> Option<Option<Vec<u8>>> {
    let len = get_varlong(buf)?;
    if len < 0 {
        return Some(None);
    }
    let len = usize::try_from(len).ok()?;
    if len > buf.len() {
        return None;
    }
    let (head, tail) = buf.split_at(len);
    *buf = tail;
    Some(Some(head.to_vec()))
}

fn put_varlong(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        if z < 0x80 {
            out.push(z as u8);
            return;
        }
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn control_batch_carries_kafkas_marker_layout() {
        let b = build_control_batch(42, 3, 7, ControlType::Commit, 1_700_000_000_000);
        let h = validate_batch(&b).expect("valid");
        assert!(h.is_control() && h.is_transactional());
        assert_eq!(
            (h.producer_id, h.producer_epoch, h.base_sequence),
            (42, 3, -1)
        );
        assert_eq!(control_type(&b), Some(ControlType::Commit));
        let recs = uncompressed_records(&b).unwrap();
        assert_eq!(recs[0].0.as_deref(), Some(&[0u8, 0, 0, 1][..]));
        assert_eq!(recs[0].1.as_deref(), Some(&[0u8, 0, 0, 0, 0, 7][..]));
        let a = build_control_batch(42, 3, 7, ControlType::Abort, 0);
        assert_eq!(control_type(&a), Some(ControlType::Abort));
        let t = build_transactional_batch(0, (5, 0, 0), &[(Some(b"k"), Some(b"v"))]);
        let th = validate_batch(&t).expect("valid");
        assert!(th.is_transactional() && !th.is_control());
        assert_eq!(control_type(&t), None);
    }

    #[test]
    fn built_batch_validates_and_reports_its_fields() {
        let b = build_batch(
            0,
            1_700_000_000_000,
            (7, 1, 5),
            &[(Some(b"k"), Some(b"v1")), (None, Some(b"v2"))],
        );
        let h = validate_batch(&b).expect("valid");
        assert_eq!(h.record_count, 2);
        assert_eq!(h.last_offset_delta, 1);
        assert_eq!(h.producer_id, 7);
        assert_eq!(h.producer_epoch, 1);
        assert_eq!(h.base_sequence, 5);
        assert_eq!(h.last_sequence(), 6);
        assert_eq!(h.total_size(), b.len());
    }

    #[test]
    fn flipped_byte_in_body_is_a_crc_error() {
        let mut b = build_batch(0, 0, (-1, -1, -1), &[(None, Some(b"hello"))]);
        let last = b.len() - 2;
        b[last] ^= 0xff;
        assert!(matches!(validate_batch(&b), Err(BatchError::BadCrc { .. })));
    }

    #[test]
    fn base_offset_and_epoch_rewrite_keeps_crc_valid() {
        let mut b = build_batch(0, 0, (-1, -1, -1), &[(None, Some(b"x"))]);
        set_base_offset(&mut b, 42);
        set_partition_leader_epoch(&mut b, 3);
        let h = validate_batch(&b).unwrap();
        assert_eq!(h.base_offset, 42);
        assert_eq!(h.partition_leader_epoch, 3);
    }

    #[test]
    fn log_append_time_rewrite_recomputes_crc() {
        let mut b = build_batch(0, 5, (-1, -1, -1), &[(None, Some(b"x"))]);
        set_log_append_time(&mut b, 99);
        let h = validate_batch(&b).unwrap();
        assert_eq!(h.max_timestamp, 99);
        assert_ne!(h.attributes & ATTR_TIMESTAMP_TYPE_LOG_APPEND, 0);
    }

    #[test]
    fn sequence_wraps_at_i32_max() {
        let mut b = build_batch(0, 0, (1, 0, i32::MAX - 1), &[(None, None); 3]);
        let h = validate_batch(&b).unwrap();
        assert_eq!(h.last_sequence(), 0);
        b[OFFSET_BASE_SEQUENCE..OFFSET_BASE_SEQUENCE + 4].copy_from_slice(&(-1i32).to_be_bytes());
        assert_eq!(BatchHeader::parse(&b).unwrap().last_sequence(), NO_SEQUENCE);
    }

    #[test]
    fn log_append_time_on_parts_matches_whole_batch_rewrite() {
        let mut whole = build_batch(0, 5, (-1, -1, -1), &[(None, Some(b"abc")), (None, None)]);
        let mut head = [0u8; BATCH_HEADER_LEN];
        head.copy_from_slice(&whole[..BATCH_HEADER_LEN]);
        set_log_append_time_parts(&mut head, &whole[BATCH_HEADER_LEN..], 1234);
        set_log_append_time(&mut whole, 1234);
        assert_eq!(&head[..], &whole[..BATCH_HEADER_LEN]);
    }

    #[test]
    fn uncompressed_records_read_back_keys_and_values() {
        let b = build_batch(
            0,
            0,
            (-1, -1, -1),
            &[(Some(b"k1"), Some(b"v1")), (Some(b"k2"), None)],
        );
        let recs = uncompressed_records(&b).unwrap();
        assert_eq!(
            recs,
            vec![
                (Some(b"k1".to_vec()), Some(b"v1".to_vec())),
                (Some(b"k2".to_vec()), None)
            ]
        );
        assert_eq!(uncompressed_records(&b[..b.len() - 1]), None);
    }

    proptest! {
        #[test]
        fn validate_never_panics_on_garbage(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = validate_batch(&bytes);
        }

        #[test]
        fn header_round_trips(base in any::<i64>(), ts in any::<i64>(), pid in any::<i64>(),
                              epoch in any::<i16>(), seq in any::<i32>(), n in 1usize..20) {
            let recs: Vec<KeyValue<'_>> = vec![(None, Some(b"abc")); n];
            let b = build_batch(base, ts, (pid, epoch, seq), &recs);
            let h = validate_batch(&b).unwrap();
            prop_assert_eq!(h.base_offset, base);
            prop_assert_eq!(h.base_timestamp, ts);
            prop_assert_eq!(h.producer_id, pid);
            prop_assert_eq!(h.producer_epoch, epoch);
            prop_assert_eq!(h.base_sequence, seq);
            prop_assert_eq!(h.record_count as usize, n);
        }
    }
}
