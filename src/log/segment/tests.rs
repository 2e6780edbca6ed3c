use super::*;
use crate::record::{build_batch, set_base_offset, validate_batch};

fn config(index_interval_bytes: u32) -> LogConfig {
    LogConfig {
        index_interval_bytes,
        ..LogConfig::default()
    }
}

/// A batch of `n` records with `value_len`-byte values, stamped at `base`.
fn batch(base: i64, n: usize, ts: i64, value_len: usize) -> Vec<u8> {
    let v = vec![b'v'; value_len];
    let recs: Vec<_> = (0..n).map(|_| (None::<&[u8]>, Some(&v[..]))).collect();
    let mut b = build_batch(0, ts, (-1, -1, -1), &recs);
    set_base_offset(&mut b, base);
    b
}

fn append(seg: &mut Segment, b: &[u8]) {
    let meta = AppendMeta::from_header(&validate_batch(b).unwrap());
    seg.append(&[b], &meta, 0).unwrap();
}

/// Segment at base 100 holding batches of 3 records: [100..102], [103..105], ... (`count` batches).
fn filled(dir: &Path, count: usize, value_len: usize) -> (Segment, Vec<Vec<u8>>) {
    let mut seg = Segment::create(dir, 100, &config(100)).unwrap();
    let mut batches = Vec::new();
    for i in 0..count {
        let b = batch(100 + 3 * i as i64, 3, 1000 + i as i64, value_len);
        append(&mut seg, &b);
        batches.push(b);
    }
    (seg, batches)
}

#[test]
fn files_are_named_by_twenty_digit_base_offset() {
    assert_eq!(file_name(0, "log"), "00000000000000000000.log");
    assert_eq!(
        file_name(1234, "timeindex"),
        "00000000000000001234.timeindex"
    );
}

#[test]
fn read_starts_at_batch_containing_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (seg, batches) = filled(dir.path(), 20, 50);
    assert!(
        seg.offset_index().len() > 3,
        "interval 100 must produce entries"
    );
    assert_eq!(seg.next_offset(), 160);
    for target in [100, 104, 131, 159] {
        let i = ((target - 100) / 3) as usize;
        let (bytes, base) = seg
            .read(target, batches[i].len(), i64::MAX)
            .unwrap()
            .unwrap();
        assert_eq!(base, 100 + 3 * i as i64);
        assert_eq!(&bytes[..], &batches[i][..], "target {target}");
    }
    assert_eq!(seg.read(160, 1000, i64::MAX).unwrap(), None);
}

#[test]
fn read_returns_whole_batches_up_to_max_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (seg, batches) = filled(dir.path(), 10, 50);
    let len = batches[0].len();
    // Room for two and a half batches: exactly two come back.
    let (bytes, _) = seg.read(103, len * 5 / 2, i64::MAX).unwrap().unwrap();
    assert_eq!(&bytes[..], &[&batches[1][..], &batches[2][..]].concat()[..]);
    // max_bytes smaller than one batch: the first batch still comes back whole.
    let (bytes, base) = seg.read(106, 1, i64::MAX).unwrap().unwrap();
    assert_eq!((bytes.len(), base), (len, 106));
}

#[test]
fn read_stops_before_max_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (seg, batches) = filled(dir.path(), 10, 50);
    // High watermark 108 falls inside batch [106..108]: that batch starts below it and is returned.
    let (bytes, _) = seg.read(100, 1 << 20, 108).unwrap().unwrap();
    assert_eq!(bytes.len(), 3 * batches[0].len());
    // High watermark at a batch's base offset excludes that batch.
    let (bytes, _) = seg.read(100, 1 << 20, 106).unwrap().unwrap();
    assert_eq!(bytes.len(), 2 * batches[0].len());
    let (bytes, base) = seg.read(106, 1 << 20, 106).unwrap().unwrap();
    assert!(bytes.is_empty());
    assert_eq!(base, 106);
}

#[test]
fn large_batches_are_read_beyond_the_first_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let (seg, batches) = filled(dir.path(), 6, 40_000);
    let (bytes, base) = seg.read(112, 300_000, i64::MAX).unwrap().unwrap();
    assert_eq!(base, 112);
    assert_eq!(&bytes[..], &[&batches[4][..], &batches[5][..]].concat()[..]);
}

#[test]
fn parts_are_written_contiguously() {
    let dir = tempfile::tempdir().unwrap();
    let mut seg = Segment::create(dir.path(), 0, &config(4096)).unwrap();
    let b = batch(0, 5, 7, 33);
    let meta = AppendMeta::from_header(&validate_batch(&b).unwrap());
    let (a, rest) = b.split_at(10);
    let (c, d) = rest.split_at(61);
    seg.append(&[a, &[], c, d], &meta, 0).unwrap();
    let (bytes, _) = seg.read(0, 1 << 20, i64::MAX).unwrap().unwrap();
    assert_eq!(&bytes[..], &b[..]);
    assert_eq!(std::fs::read(seg.log_path()).unwrap(), b);
}

#[test]
fn index_entries_point_at_batch_starts() {
    let dir = tempfile::tempdir().unwrap();
    let (seg, batches) = filled(dir.path(), 30, 50);
    let len = batches[0].len() as u32;
    let idx = seg.offset_index();
    assert!(idx.len() >= 5);
    for i in 0..200 {
        let e = idx.lookup(100 + i);
        assert_eq!(e.position % len, 0);
        let batch_no = (e.position / len) as i64;
        if e.position > 0 {
            // Kafka maps the batch's last offset to its start.
            assert_eq!(e.offset, 100 + 3 * batch_no + 2);
        }
    }
}

#[test]
fn truncate_cuts_at_containing_batch_and_rebuilds_tail() {
    let dir = tempfile::tempdir().unwrap();
    let (mut seg, batches) = filled(dir.path(), 20, 50);
    let removed = seg.truncate_to(131).unwrap(); // inside batch [130..132]
    assert_eq!(seg.next_offset(), 130);
    assert_eq!(removed, 10 * batches[0].len() as u64);
    assert_eq!(seg.max_timestamp().timestamp, 1009);
    // Appending continues and the indexes stay consistent with a fresh build.
    let b = batch(130, 3, 5000, 50);
    append(&mut seg, &b);
    let (bytes, _) = seg.read(130, 1, i64::MAX).unwrap().unwrap();
    assert_eq!(&bytes[..], &b[..]);
    let (mut fresh, _) = Segment::open(dir.path(), 100, &config(100), 0).unwrap();
    assert_eq!(fresh.recover().unwrap().bytes, 0);
    assert_eq!(fresh.offset_index().len(), seg.offset_index().len());
    assert_eq!(fresh.max_timestamp(), seg.max_timestamp());
}

#[test]
fn find_by_timestamp_uses_batch_max_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let (seg, _) = filled(dir.path(), 20, 50);
    let h = seg.find_by_timestamp(1007, 0).unwrap().unwrap();
    assert_eq!((h.base_offset, h.max_timestamp), (121, 1007));
    let h = seg.find_by_timestamp(0, 110).unwrap().unwrap();
    assert_eq!(h.base_offset, 109);
    assert_eq!(seg.find_by_timestamp(5000, 0).unwrap(), None);
}

#[test]
fn recover_cuts_partial_batch() {
    let dir = tempfile::tempdir().unwrap();
    let (mut seg, batches) = filled(dir.path(), 5, 50);
    let path = seg.log_path().to_path_buf();
    let mut data = std::fs::read(&path).unwrap();
    let keep = 3 * batches[0].len();
    data.truncate(keep + 20);
    std::fs::write(&path, &data).unwrap();
    let cut = seg.recover().unwrap();
    assert_eq!(cut.bytes, 20);
    assert_eq!(seg.next_offset(), 109);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), keep as u64);
    // The 20 bytes cut are kept, byte for byte, beside the segment.
    let moved = cut.quarantine.unwrap();
    assert_eq!(
        moved,
        path.with_file_name(format!("{}.quarantine-{keep}", file_name(100, "log")))
    );
    assert_eq!(std::fs::read(&moved).unwrap(), &data[keep..]);
}
