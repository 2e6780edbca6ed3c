//! Timestamp lookups at record granularity, as Kafka's `LogSegment.findOffsetByTimestamp` and
//! `FileRecords.searchForTimestamp`: the time index and the offset index give a starting position,
//! batches are walked by header, and inside the first batch whose max timestamp is >= the target
//! the records are read for the first one at or after it.
//!
//! Record timestamps: CreateTime batches store `baseTimestamp + timestampDelta` per record;
//! LogAppendTime batches give every record the batch's max timestamp (as Kafka's
//! `DefaultRecordBatch` does). Compressed batches are answered at batch level (their first offset
//! at or after the start, with the batch's max timestamp) until the decompressors of the produce
//! validator are shared here: the one place to change is [`search_batch`]'s compressed arm.
//!
//! Reads only (`pread`); holds no state.

use super::*;
use crate::record::{get_varlong, ATTR_TIMESTAMP_TYPE_LOG_APPEND};

/// What [`search_batch`] found in one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchSearch {
    /// `(offset, timestamp)` of the first record at or after the target and the start offset.
    Found(i64, i64),
    /// No record of the batch qualifies (all at or after the target are below the start offset).
    NotFound,
}

/// Searches the records of one whole batch (`batch`, its parsed header `h`) for the first record
/// with timestamp >= `target` and offset >= `min_offset`. Pure.
///
/// A compressed batch, or one whose records do not parse, is answered at batch level: its first
/// offset at or after `min_offset` with the batch's max timestamp (`NotFound` if the batch
/// cannot qualify).
pub fn search_batch(batch: &[u8], h: &BatchHeader, target: i64, min_offset: i64) -> BatchSearch {
    let batch_level = if h.max_timestamp >= target && h.last_offset() >= min_offset {
        BatchSearch::Found(h.base_offset.max(min_offset), h.max_timestamp)
    } else {
        BatchSearch::NotFound
    };
    if h.compression() != 0 || batch.len() < h.total_size() {
        return batch_level;
    }
    let log_append_time = h.attributes & ATTR_TIMESTAMP_TYPE_LOG_APPEND != 0;
    let mut rest = &batch[BATCH_HEADER_LEN..h.total_size()];
    for _ in 0..h.record_count.max(0) {
        let Some(record) = next_record(&mut rest) else {
            return batch_level;
        };
        let Some((timestamp_delta, offset_delta)) = record else {
            return batch_level;
        };
        let offset = h.base_offset + offset_delta;
        let timestamp = if log_append_time {
            h.max_timestamp
        } else {
            h.base_timestamp.wrapping_add(timestamp_delta)
        };
        if timestamp >= target && offset >= min_offset {
            return BatchSearch::Found(offset, timestamp);
        }
    }
    BatchSearch::NotFound
}

/// Splits the next record off `rest`: `Some(Some((timestamp_delta, offset_delta)))`, or
/// `Some(None)` / `None` when it does not parse.
fn next_record(rest: &mut &[u8]) -> Option<Option<(i64, i64)>> {
    let len = usize::try_from(get_varlong(rest)?).ok()?;
    if len > rest.len() {
        return None;
    }
    let (record, tail) = rest.split_at(len);
    *rest = tail;
    let mut fields = record.get(1..)?; // attributes
    let timestamp_delta = get_varlong(&mut fields);
    let offset_delta = get_varlong(&mut fields);
    Some(timestamp_delta.zip(offset_delta))
}

impl Segment {
    /// `(offset, timestamp)` of the first record with timestamp >= `timestamp` and offset >=
    /// `min_offset` in this segment (Kafka's `findOffsetByTimestamp`); `None` if there is none.
    pub fn find_record_by_timestamp(
        &self,
        timestamp: i64,
        min_offset: i64,
    ) -> Result<Option<(i64, i64)>, LogError> {
        let by_time = self
            .time_index
            .lookup(timestamp)
            .map_or(self.base_offset, |e| e.offset);
        let start = self.offset_index.lookup(by_time.max(min_offset)).position as u64;
        let file = self.log_file()?;
        let path = self.log.path();
        let mut cursor = Cursor::new(&file, path, self.size, start, MIN_CHUNK);
        while let Some((pos, h)) = cursor.next()? {
            if h.max_timestamp < timestamp || h.last_offset() < min_offset {
                continue;
            }
            let batch = read_at(&file, path, pos, h.total_size())?;
            if let BatchSearch::Found(offset, ts) = search_batch(&batch, &h, timestamp, min_offset)
            {
                return Ok(Some((offset, ts)));
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::record::{compute_crc, BatchHeader, OFFSET_CRC};

    fn put_varlong(out: &mut Vec<u8>, v: i64) {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        while z >= 0x80 {
            out.push((z as u8 & 0x7f) | 0x80);
            z >>= 7;
        }
        out.push(z as u8);
    }

    /// An uncompressed batch at `base` whose records carry `timestamps` (CreateTime unless
    /// `attributes` says otherwise), with a valid CRC.
    pub(crate) fn batch_with_timestamps(base: i64, timestamps: &[i64], attributes: i16) -> Vec<u8> {
        let base_ts = timestamps[0];
        let max_ts = timestamps.iter().copied().max().unwrap_or(-1);
        let mut body = Vec::new();
        for (i, ts) in timestamps.iter().enumerate() {
            let mut rec = vec![0u8];
            put_varlong(&mut rec, ts - base_ts);
            put_varlong(&mut rec, i as i64);
            put_varlong(&mut rec, -1); // key
            put_varlong(&mut rec, 1);
            rec.push(b'v');
            put_varlong(&mut rec, 0); // headers
            put_varlong(&mut body, rec.len() as i64);
            body.extend_from_slice(&rec);
        }
        let n = timestamps.len() as i32;
        let mut b = Vec::new();
        b.extend_from_slice(&base.to_be_bytes());
        b.extend_from_slice(&((BATCH_HEADER_LEN - 12 + body.len()) as i32).to_be_bytes());
        b.extend_from_slice(&0i32.to_be_bytes()); // leader epoch
        b.push(2);
        b.extend_from_slice(&0u32.to_be_bytes()); // crc, below
        b.extend_from_slice(&attributes.to_be_bytes());
        b.extend_from_slice(&(n - 1).to_be_bytes());
        b.extend_from_slice(&base_ts.to_be_bytes());
        b.extend_from_slice(&max_ts.to_be_bytes());
        b.extend_from_slice(&(-1i64).to_be_bytes());
        b.extend_from_slice(&(-1i16).to_be_bytes());
        b.extend_from_slice(&(-1i32).to_be_bytes());
        b.extend_from_slice(&n.to_be_bytes());
        b.extend_from_slice(&body);
        let crc = compute_crc(&b);
        b[OFFSET_CRC..OFFSET_CRC + 4].copy_from_slice(&crc.to_be_bytes());
        b
    }

    #[test]
    fn the_first_record_at_or_after_the_target_is_found() {
        let b = batch_with_timestamps(10, &[1234, 999_999_999_999], 0);
        let h = crate::record::validate_batch(&b).unwrap();
        assert_eq!(h.max_timestamp, 999_999_999_999);
        let s = |t, min| search_batch(&b, &h, t, min);
        assert_eq!(
            s(999_999_999_999, 0),
            BatchSearch::Found(11, 999_999_999_999)
        );
        assert_eq!(s(1235, 0), BatchSearch::Found(11, 999_999_999_999));
        assert_eq!(s(1234, 0), BatchSearch::Found(10, 1234));
        assert_eq!(s(0, 0), BatchSearch::Found(10, 1234));
        assert_eq!(
            s(0, 11),
            BatchSearch::Found(11, 999_999_999_999),
            "start offset"
        );
        assert_eq!(s(1_000_000_000_000, 0), BatchSearch::NotFound);
        assert_eq!(s(0, 12), BatchSearch::NotFound);
    }

    #[test]
    fn log_append_time_and_compressed_batches_answer_at_batch_level() {
        // LogAppendTime: every record has the batch's max timestamp -> the first record
        let b = batch_with_timestamps(10, &[5, 50, 7], ATTR_TIMESTAMP_TYPE_LOG_APPEND);
        let h = BatchHeader::parse(&b).unwrap();
        assert_eq!(search_batch(&b, &h, 50, 0), BatchSearch::Found(10, 50));
        assert_eq!(search_batch(&b, &h, 50, 12), BatchSearch::Found(12, 50));
        // CreateTime: the record with 50 is offset 11
        let b = batch_with_timestamps(10, &[5, 50, 7], 0);
        let h = BatchHeader::parse(&b).unwrap();
        assert_eq!(search_batch(&b, &h, 8, 0), BatchSearch::Found(11, 50));
        assert_eq!(search_batch(&b, &h, 6, 12), BatchSearch::Found(12, 7));
        // compressed (gzip attribute): batch level
        let mut h = h;
        h.attributes = 1;
        assert_eq!(search_batch(&b, &h, 8, 0), BatchSearch::Found(10, 50));
        // records that do not parse: batch level
        let mut cut = b.clone();
        cut[BATCH_HEADER_LEN] = 0x7f; // first record claims 63 bytes more than there are
        let h = BatchHeader::parse(&cut).unwrap();
        assert_eq!(search_batch(&cut, &h, 8, 0), BatchSearch::Found(10, 50));
    }

    #[test]
    fn a_segment_finds_records_across_batches() {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            index_interval_bytes: 1,
            ..LogConfig::default()
        };
        let mut seg = Segment::create(dir.path(), 0, &config).unwrap();
        for (base, ts) in [
            (0, vec![100, 300, 200]),
            (3, vec![150, 400]),
            (5, vec![500]),
        ] {
            let b = batch_with_timestamps(base, &ts, 0);
            let meta = AppendMeta::from_header(&crate::record::validate_batch(&b).unwrap());
            seg.append(&[&b], &meta, 0).unwrap();
        }
        let f = |t, min| seg.find_record_by_timestamp(t, min).unwrap();
        assert_eq!(f(0, 0), Some((0, 100)));
        assert_eq!(f(250, 0), Some((1, 300)));
        assert_eq!(f(301, 0), Some((4, 400)));
        assert_eq!(f(301, 0), Some((4, 400)));
        assert_eq!(f(450, 0), Some((5, 500)));
        assert_eq!(f(501, 0), None);
        // from offset 2 (inside the first batch): 200 at 2
        assert_eq!(f(150, 2), Some((2, 200)));
        assert_eq!(
            f(250, 2),
            Some((4, 400)),
            "300 is at offset 1, below the start"
        );
    }
}
