//! Log compaction (`cleanup.policy=compact`), the record-level part: read the records of an
//! uncompressed batch, remember the last offset of every key, and rebuild a batch keeping only the
//! records that are still the latest for their key (plus tombstones younger than
//! `delete.retention.ms`).
//!
//! Conservative by design: compressed, transactional and control batches are kept whole and their
//! records neither count as "latest" nor get removed, so compaction never drops a record that is the
//! newest readable value of its key. Surviving records keep their bytes and offsets; a rebuilt batch
//! keeps its base offset and `lastOffsetDelta` (as Kafka does) with a new length, count and CRC.
//! Pure: no I/O; `PartitionLog::compact` drives it.

use std::collections::HashMap;

use crate::record::{
    self, BatchHeader, ATTR_COMPRESSION_MASK, ATTR_CONTROL, ATTR_TRANSACTIONAL, BATCH_HEADER_LEN,
    OFFSET_BATCH_LENGTH, OFFSET_CRC, OFFSET_RECORD_COUNT,
};

/// One record inside a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordRef<'a> {
    pub offset: i64,
    /// `None` for a null key.
    pub key: Option<&'a [u8]>,
    /// A null value: a tombstone.
    pub is_tombstone: bool,
    /// The record's bytes (length prefix included) within the batch.
    pub bytes: &'a [u8],
}

/// Whether compaction may look inside a batch.
pub fn is_cleanable(h: &BatchHeader) -> bool {
    h.attributes & (ATTR_COMPRESSION_MASK | ATTR_TRANSACTIONAL | ATTR_CONTROL) == 0
}

/// Reads a zig-zag varint (Kafka's `ByteUtils.readVarlong`); returns the value and bytes used.
fn varlong(b: &[u8]) -> Option<(i64, usize)> {
    let mut raw: u64 = 0;
    for (i, &byte) in b.iter().enumerate().take(10) {
        raw |= ((byte & 0x7f) as u64) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((((raw >> 1) as i64) ^ -((raw & 1) as i64), i + 1));
        }
    }
    None
}

/// The records of one whole uncompressed batch (`batch` is exactly the batch).
pub fn records<'a>(batch: &'a [u8], h: &BatchHeader) -> Result<Vec<RecordRef<'a>>, String> {
    let mut out = Vec::with_capacity(h.record_count.max(0) as usize);
    let mut pos = BATCH_HEADER_LEN;
    let err = |what: &str| format!("batch at offset {}: {what}", h.base_offset);
    for _ in 0..h.record_count.max(0) {
        let (len, n) = varlong(&batch[pos..]).ok_or_else(|| err("bad record length"))?;
        let start = pos;
        let body_start = pos + n;
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| body_start.checked_add(l))
            .filter(|&e| e <= batch.len())
            .ok_or_else(|| err("record overruns the batch"))?;
        let body = &batch[body_start..end];
        let mut p = 1; // attributes
        let field = |p: &mut usize| -> Result<i64, String> {
            let (v, n) = varlong(body.get(*p..).unwrap_or(&[])).ok_or_else(|| err("bad varint"))?;
            *p += n;
            Ok(v)
        };
        field(&mut p)?; // timestamp delta
        let offset_delta = field(&mut p)?;
        let key_len = field(&mut p)?;
        let key = if key_len < 0 {
            None
        } else {
            let k = body
                .get(p..p + key_len as usize)
                .ok_or_else(|| err("key overruns the record"))?;
            p += key_len as usize;
            Some(k)
        };
        let value_len = field(&mut p)?;
        out.push(RecordRef {
            offset: h.base_offset + offset_delta,
            key,
            is_tombstone: value_len < 0,
            bytes: &batch[start..end],
        });
        pos = end;
    }
    if pos != batch.len() {
        return Err(err("bytes left after the last record"));
    }
    Ok(out)
}

/// Last offset of every key seen, bounded in size.
#[derive(Debug, Default)]
pub struct OffsetMap {
    map: HashMap<Vec<u8>, i64>,
}

impl OffsetMap {
    pub fn new() -> OffsetMap {
        OffsetMap::default()
    }
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    /// Records every keyed record of a cleanable batch.
    pub fn add_batch(&mut self, batch: &[u8], h: &BatchHeader) -> Result<(), String> {
        if !is_cleanable(h) {
            return Ok(());
        }
        for r in records(batch, h)? {
            if let Some(k) = r.key {
                let e = self.map.entry(k.to_vec()).or_insert(r.offset);
                *e = (*e).max(r.offset);
            }
        }
        Ok(())
    }
    pub fn latest(&self, key: &[u8]) -> Option<i64> {
        self.map.get(key).copied()
    }
}

/// What happens to one batch.
#[derive(Debug, PartialEq, Eq)]
pub enum Filtered {
    /// Every record stays: keep the bytes as they are.
    Unchanged,
    /// Some records stay: the rebuilt batch.
    Rebuilt(Vec<u8>),
    /// No record stays.
    Dropped,
}

/// Filters one whole batch: a record stays unless a newer record of its key is in `map`, and a
/// tombstone also goes when `drop_tombstones` (its segment is older than `delete.retention.ms`).
pub fn filter_batch(
    batch: &[u8],
    h: &BatchHeader,
    map: &OffsetMap,
    drop_tombstones: bool,
) -> Result<Filtered, String> {
    if !is_cleanable(h) {
        return Ok(Filtered::Unchanged);
    }
    let recs = records(batch, h)?;
    let keep: Vec<&RecordRef> = recs
        .iter()
        .filter(|r| match r.key {
            None => true,
            Some(k) => {
                let newest = map.latest(k).is_none_or(|latest| r.offset >= latest);
                newest && !(r.is_tombstone && drop_tombstones)
            }
        })
        .collect();
    if keep.len() == recs.len() {
        return Ok(Filtered::Unchanged);
    }
    if keep.is_empty() {
        return Ok(Filtered::Dropped);
    }
    let body_len: usize = keep.iter().map(|r| r.bytes.len()).sum();
    let mut out = Vec::with_capacity(BATCH_HEADER_LEN + body_len);
    out.extend_from_slice(&batch[..BATCH_HEADER_LEN]);
    for r in &keep {
        out.extend_from_slice(r.bytes);
    }
    let batch_length = (out.len() - record::LOG_OVERHEAD) as i32;
    out[OFFSET_BATCH_LENGTH..OFFSET_BATCH_LENGTH + 4].copy_from_slice(&batch_length.to_be_bytes());
    out[OFFSET_RECORD_COUNT..OFFSET_RECORD_COUNT + 4]
        .copy_from_slice(&(keep.len() as i32).to_be_bytes());
    let crc = record::compute_crc(&out);
    out[OFFSET_CRC..OFFSET_CRC + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(Filtered::Rebuilt(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{build_batch, set_base_offset, validate_batch};

    fn batch(base: i64, recs: &[(Option<&str>, Option<&str>)]) -> Vec<u8> {
        let kv: Vec<_> = recs
            .iter()
            .map(|(k, v)| (k.map(str::as_bytes), v.map(str::as_bytes)))
            .collect();
        let mut b = build_batch(0, 1000, (-1, -1, -1), &kv);
        set_base_offset(&mut b, base);
        b
    }

    #[test]
    fn records_are_read_with_offsets_keys_and_tombstones() {
        let b = batch(
            10,
            &[
                (Some("a"), Some("1")),
                (None, Some("2")),
                (Some("bb"), None),
            ],
        );
        let h = validate_batch(&b).unwrap();
        let r = records(&b, &h).unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(
            (r[0].offset, r[0].key, r[0].is_tombstone),
            (10, Some(&b"a"[..]), false)
        );
        assert_eq!((r[1].offset, r[1].key), (11, None));
        assert_eq!(
            (r[2].offset, r[2].key, r[2].is_tombstone),
            (12, Some(&b"bb"[..]), true)
        );
        assert_eq!(
            r.iter().map(|r| r.bytes.len()).sum::<usize>(),
            b.len() - BATCH_HEADER_LEN
        );
    }

    #[test]
    fn filter_keeps_only_the_latest_per_key_with_a_valid_crc() {
        let old = batch(
            0,
            &[
                (Some("a"), Some("1")),
                (Some("b"), Some("1")),
                (None, Some("x")),
            ],
        );
        let new = batch(3, &[(Some("a"), Some("2")), (Some("c"), None)]);
        let (ho, hn) = (validate_batch(&old).unwrap(), validate_batch(&new).unwrap());
        let mut map = OffsetMap::new();
        map.add_batch(&old, &ho).unwrap();
        map.add_batch(&new, &hn).unwrap();
        assert_eq!(
            (map.latest(b"a"), map.latest(b"b"), map.latest(b"c")),
            (Some(3), Some(1), Some(4))
        );
        let Filtered::Rebuilt(out) = filter_batch(&old, &ho, &map, false).unwrap() else {
            panic!("old batch must be rebuilt");
        };
        let h = validate_batch(&out).expect("valid CRC and length");
        assert_eq!(
            (h.base_offset, h.record_count, h.last_offset_delta),
            (0, 2, 2)
        );
        let kept: Vec<_> = records(&out, &h)
            .unwrap()
            .iter()
            .map(|r| (r.offset, r.key))
            .collect();
        assert_eq!(kept, vec![(1, Some(&b"b"[..])), (2, None)]);
        assert_eq!(
            filter_batch(&new, &hn, &map, false).unwrap(),
            Filtered::Unchanged
        );
        // Old enough tombstones go too.
        let Filtered::Rebuilt(out) = filter_batch(&new, &hn, &map, true).unwrap() else {
            panic!("tombstone must go");
        };
        assert_eq!(validate_batch(&out).unwrap().record_count, 1);
        let superseded = batch(0, &[(Some("a"), Some("1"))]);
        let hs = validate_batch(&superseded).unwrap();
        assert_eq!(
            filter_batch(&superseded, &hs, &map, false).unwrap(),
            Filtered::Dropped
        );
    }

    #[test]
    fn compressed_and_transactional_batches_are_left_alone() {
        let mut b = batch(0, &[(Some("a"), Some("1"))]);
        let mut h = validate_batch(&b).unwrap();
        h.attributes |= ATTR_TRANSACTIONAL;
        let mut map = OffsetMap::new();
        map.add_batch(&b, &h).unwrap();
        assert!(
            map.is_empty(),
            "transactional records never count as latest"
        );
        let newer = batch(5, &[(Some("a"), Some("2"))]);
        map.add_batch(&newer, &validate_batch(&newer).unwrap())
            .unwrap();
        assert_eq!(
            filter_batch(&b, &h, &map, true).unwrap(),
            Filtered::Unchanged
        );
        b[22] |= 0x04; // lz4 in the low attribute byte
        h.attributes = 0x04;
        assert_eq!(
            filter_batch(&b, &h, &map, true).unwrap(),
            Filtered::Unchanged
        );
    }

    #[test]
    fn damaged_records_are_errors_not_panics() {
        let b = batch(0, &[(Some("key"), Some("value"))]);
        let h = validate_batch(&b).unwrap();
        for cut in BATCH_HEADER_LEN..b.len() {
            assert!(records(&b[..cut], &h).is_err(), "cut at {cut}");
        }
        let mut garbage = b.clone();
        garbage[BATCH_HEADER_LEN] = 0xff; // absurd record length
        assert!(records(&garbage, &h).is_err());
    }
}
