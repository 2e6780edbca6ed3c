//! Timestamp lookups at record granularity, as Kafka's `LogSegment.findOffsetByTimestamp` and
//! `FileRecords.searchForTimestamp`: the time index and the offset index give a starting position,
//! batches are walked by header, and inside the first batch whose max timestamp is >= the target
//! the records are read for the first one at or after it.
//!
//! Record timestamps: CreateTime batches store `baseTimestamp + timestampDelta` per record;
//! LogAppendTime batches give every record the batch's max timestamp (as Kafka's
//! `DefaultRecordBatch` does). Compressed batches are streamed through `record::compression`
//! (the produce validator's decoder, bounded by [`MAX_DECOMPRESSED`] here);
//! a batch whose records cannot be read answers at batch level (its first offset at or after the
//! start, with the batch's max timestamp).
//!
//! Reads only (`pread`); holds no state.

use std::io::{BufReader, Read};

use super::*;
use crate::record::{compression, ATTR_TIMESTAMP_TYPE_LOG_APPEND};

/// Most decompressed bytes read from one batch; past it the batch answers at batch level.
pub const MAX_DECOMPRESSED: u64 = 256 * 1024 * 1024;

/// What [`search_batch`] found in one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchSearch {
    /// `(offset, timestamp)` of the first record at or after the target and the start offset.
    Found(i64, i64),
    /// No record of the batch qualifies (all at or after the target are below the start offset).
    NotFound,
}

/// Searches the records of one whole batch (`batch`, its parsed header `h`) for the first record
/// with timestamp >= `target` and offset >= `min_offset`. Pure. Compressed records are streamed
/// through their codec (`record::compression`: gzip, snappy raw or xerial-framed, LZ4 frame,
/// zstd), at most [`MAX_DECOMPRESSED`] bytes, record bodies skipped rather than kept.
///
/// A batch whose records cannot be read (unknown codec, bad framing, over the bound) is answered
/// at batch level: its first offset at or after `min_offset` with the batch's max timestamp
/// (`NotFound` if the batch cannot qualify).
pub fn search_batch(batch: &[u8], h: &BatchHeader, target: i64, min_offset: i64) -> BatchSearch {
    let batch_level = if h.max_timestamp >= target && h.last_offset() >= min_offset {
        BatchSearch::Found(h.base_offset.max(min_offset), h.max_timestamp)
    } else {
        BatchSearch::NotFound
    };
    if batch.len() < h.total_size() {
        return batch_level;
    }
    let records = &batch[BATCH_HEADER_LEN..h.total_size()];
    let found = match h.compression() {
        0 => search_records(records, h, target, min_offset),
        codec => compression::decompress(codec, records, MAX_DECOMPRESSED)
            .ok()
            .and_then(|r| search_records(BufReader::new(r), h, target, min_offset)),
    };
    found.unwrap_or(batch_level)
}

/// Walks the records of `r`; `None` when they do not parse.
fn search_records(
    mut r: impl Read,
    h: &BatchHeader,
    target: i64,
    min_offset: i64,
) -> Option<BatchSearch> {
    let log_append_time = h.attributes & ATTR_TIMESTAMP_TYPE_LOG_APPEND != 0;
    for _ in 0..h.record_count.max(0) {
        let len = u64::try_from(read_varlong(&mut r)?.0).ok()?;
        let mut attributes = [0u8; 1];
        r.read_exact(&mut attributes).ok()?;
        let (timestamp_delta, n1) = read_varlong(&mut r)?;
        let (offset_delta, n2) = read_varlong(&mut r)?;
        let rest = len.checked_sub(1 + n1 + n2)?;
        let skipped = std::io::copy(&mut (&mut r).take(rest), &mut std::io::sink()).ok()?;
        if skipped != rest {
            return None;
        }
        let offset = h.base_offset + offset_delta;
        let timestamp = if log_append_time {
            h.max_timestamp
        } else {
            h.base_timestamp.wrapping_add(timestamp_delta)
        };
        if timestamp >= target && offset >= min_offset {
            return Some(BatchSearch::Found(offset, timestamp));
        }
    }
    Some(BatchSearch::NotFound)
}

/// A zigzag varlong and the bytes it took.
fn read_varlong(r: &mut impl Read) -> Option<(i64, u64)> {
    let mut z: u64 = 0;
    for i in 0..10u64 {
        let mut b = [0u8; 1];
        r.read_exact(&mut b).ok()?;
        z |= u64::from(b[0] & 0x7f) << (7 * i);
        if b[0] & 0x80 == 0 {
            return Some((((z >> 1) as i64) ^ -((z & 1) as i64), i + 1));
        }
    }
    None
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
mod tests {
    use super::*;
    use crate::record::build::{
        batch_with_timestamps, compress_batch, snappy_raw, with_section, Codec,
    };
    use crate::record::BatchHeader;

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
        // a gzip attribute over bytes that are not gzip: batch level
        let mut h = h;
        h.attributes = 1;
        assert_eq!(search_batch(&b, &h, 8, 0), BatchSearch::Found(10, 50));
        // records that do not parse: batch level
        let mut cut = b.clone();
        cut[BATCH_HEADER_LEN] = 0x7f; // first record claims 63 bytes more than there are
        let h = BatchHeader::parse(&cut).unwrap();
        assert_eq!(search_batch(&cut, &h, 8, 0), BatchSearch::Found(10, 50));
    }

    /// `b` with its records compressed by `codec` (22: snappy as one raw block).
    fn compressed(b: &[u8], codec: i16) -> Vec<u8> {
        match codec {
            1 => compress_batch(b, Codec::Gzip),
            2 => with_section(b, 2, &snappy_raw(&b[BATCH_HEADER_LEN..])),
            22 => compress_batch(b, Codec::Snappy),
            3 => compress_batch(b, Codec::Lz4),
            4 => compress_batch(b, Codec::Zstd),
            _ => unreachable!(),
        }
    }

    #[test]
    fn compressed_batches_are_searched_record_by_record() {
        let plain = batch_with_timestamps(10, &[5, 50, 7, 60], 0);
        for codec in [1, 2, 22, 3, 4] {
            let b = compressed(&plain, codec);
            let h = BatchHeader::parse(&b).unwrap();
            assert_ne!(h.compression(), 0);
            assert_eq!(
                search_batch(&b, &h, 8, 0),
                BatchSearch::Found(11, 50),
                "codec {codec}"
            );
            assert_eq!(
                search_batch(&b, &h, 55, 0),
                BatchSearch::Found(13, 60),
                "codec {codec}"
            );
            assert_eq!(
                search_batch(&b, &h, 6, 12),
                BatchSearch::Found(12, 7),
                "codec {codec}"
            );
            assert_eq!(
                search_batch(&b, &h, 61, 0),
                BatchSearch::NotFound,
                "codec {codec}"
            );
            // damaged compressed bytes: batch level
            let mut bad = b.clone();
            for x in &mut bad[BATCH_HEADER_LEN..] {
                *x ^= 0x5a;
            }
            assert_eq!(
                search_batch(&bad, &h, 8, 0),
                BatchSearch::Found(10, 60),
                "codec {codec}"
            );
        }
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
