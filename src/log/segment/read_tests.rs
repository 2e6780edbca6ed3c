//! Fetch-path reads of a segment: `ReadLimits` (minOneMessage, file ranges decided by the bytes
//! sent) and reads that meet a damaged batch.

use std::os::unix::fs::FileExt;

use super::*;
use crate::record::{build_batch, set_base_offset, validate_batch};

fn config() -> LogConfig {
    LogConfig {
        // every batch gets an offset-index entry
        index_interval_bytes: 1,
        ..LogConfig::default()
    }
}

/// Segment at base 0 whose batches hold 3 records of `value_lens[i]` bytes: [0..2], [3..5], ...
fn segment(dir: &Path, value_lens: &[usize]) -> (Segment, Vec<Vec<u8>>) {
    let mut seg = Segment::create(dir, 0, &config()).unwrap();
    let mut batches = Vec::new();
    for (i, &len) in value_lens.iter().enumerate() {
        let v = vec![i as u8; len];
        let recs: Vec<_> = (0..3).map(|_| (None::<&[u8]>, Some(&v[..]))).collect();
        let mut b = build_batch(0, 1000 + i as i64, (-1, -1, -1), &recs);
        set_base_offset(&mut b, 3 * i as i64);
        let meta = AppendMeta::from_header(&validate_batch(&b).unwrap());
        seg.append(&[&b], &meta, 0).unwrap();
        batches.push(b);
    }
    (seg, batches)
}

fn limits(max_bytes: usize, zero_copy: bool, min_one_batch: bool) -> ReadLimits {
    ReadLimits {
        max_bytes,
        max_offset: i64::MAX,
        zero_copy,
        min_one_batch,
    }
}

fn bytes_of(r: &SegmentRead) -> Vec<u8> {
    r.records.clone().into_bytes().unwrap().to_vec()
}

#[test]
fn a_large_first_batch_under_a_small_limit_is_a_file_range() {
    let dir = tempfile::tempdir().unwrap();
    // a ~300 KB first batch, then small ones
    let (seg, batches) = segment(dir.path(), &[100_000, 10, 10]);
    let r = seg
        .read_records(0, &limits(1000, true, true))
        .unwrap()
        .unwrap();
    let Records::File(f) = &r.records else {
        panic!("expected a file range, got {:?}", r.records);
    };
    assert_eq!((f.position(), f.len()), (0, batches[0].len()));
    assert_eq!(bytes_of(&r), batches[0]);
    assert_eq!(r.next_offset, 3);
    // Without zero_copy the same batch comes in memory.
    let r = seg
        .read_records(0, &limits(1000, false, true))
        .unwrap()
        .unwrap();
    assert!(matches!(r.records, Records::Memory(_)));
    assert_eq!(bytes_of(&r), batches[0]);
    // Small batches under a large limit stay in memory.
    let r = seg
        .read_records(3, &limits(1 << 20, true, true))
        .unwrap()
        .unwrap();
    assert!(matches!(r.records, Records::Memory(_)));
    assert_eq!(bytes_of(&r), [&batches[1][..], &batches[2][..]].concat());
}

#[test]
fn without_min_one_batch_a_first_batch_over_the_limit_is_not_sent() {
    let dir = tempfile::tempdir().unwrap();
    let (seg, batches) = segment(dir.path(), &[1000, 1000, 1000]);
    let len = batches[0].len();
    for zero_copy in [false, true] {
        let r = seg
            .read_records(0, &limits(len - 1, zero_copy, false))
            .unwrap()
            .unwrap();
        assert!(r.records.is_empty());
        assert_eq!((r.base_offset, r.next_offset), (0, 0));
        // exactly one batch fits
        let r = seg
            .read_records(0, &limits(len, zero_copy, false))
            .unwrap()
            .unwrap();
        assert_eq!(bytes_of(&r), batches[0]);
        // with min_one_batch the first batch comes whole
        let r = seg
            .read_records(0, &limits(1, zero_copy, true))
            .unwrap()
            .unwrap();
        assert_eq!(bytes_of(&r), batches[0]);
    }
}

/// Overwrites the batch-length field of the batch at `position` with 5 (shorter than a header).
fn damage_at(seg: &Segment, position: u64) {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(seg.log_path())
        .unwrap();
    f.write_all_at(&5i32.to_be_bytes(), position + 8).unwrap();
}

#[test]
fn a_read_stops_before_a_damaged_batch_and_a_read_at_it_names_its_position() {
    let dir = tempfile::tempdir().unwrap();
    let (seg, batches) = segment(dir.path(), &[500; 6]);
    let len = batches[0].len() as u64;
    // batch 3 ([9..11]) is damaged
    damage_at(&seg, 3 * len);
    for zero_copy in [false, true] {
        let r = seg
            .read_records(0, &limits(1 << 20, zero_copy, true))
            .unwrap()
            .unwrap();
        assert_eq!(bytes_of(&r), batches[..3].concat(), "intact batches first");
        assert_eq!(r.next_offset, 9);
        for at in [9, 10, 11] {
            match seg.read_records(at, &limits(1 << 20, zero_copy, true)) {
                Err(LogError::DamagedBatch { position, path, .. }) => {
                    assert_eq!(position, 3 * len);
                    assert_eq!(path, seg.log_path());
                }
                other => panic!("read at {at}: {other:?}"),
            }
        }
        // Where the offset index points past the damage (its entries are by last offset: 14 is
        // batch 4's), what follows is readable.
        let r = seg
            .read_records(14, &limits(1 << 20, zero_copy, true))
            .unwrap()
            .unwrap();
        assert_eq!(bytes_of(&r), batches[4..].concat());
    }
}
