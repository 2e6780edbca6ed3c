use super::*;
use crate::log::segment::file_name;
use crate::record::{build_batch, set_base_offset, validate_batch};
use proptest::prelude::*;

mod contradicting_checkpoints;

fn small(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes: 200,
        ..LogConfig::default()
    }
}

/// A batch of `n` records with `value_len`-byte values and timestamp `ts`, stamped at `base`.
fn batch(base: i64, n: usize, ts: i64, value_len: usize) -> Vec<u8> {
    let v = vec![b'v'; value_len];
    let recs: Vec<_> = (0..n).map(|_| (None::<&[u8]>, Some(&v[..]))).collect();
    let mut b = build_batch(0, ts, (-1, -1, -1), &recs);
    set_base_offset(&mut b, base);
    b
}

/// Appends a batch at the log end offset and returns its bytes.
fn push(log: &mut PartitionLog, n: usize, ts: i64, value_len: usize, now: i64) -> Vec<u8> {
    let b = batch(log.log_end_offset(), n, ts, value_len);
    let meta = AppendMeta::from_header(&validate_batch(&b).unwrap());
    log.append(&[&b], &meta, now).unwrap();
    b
}

fn open(dir: &Path, config: LogConfig, recovery_point: i64) -> (PartitionLog, RecoveryReport) {
    PartitionLog::open(dir, config, recovery_point, None, 0).unwrap()
}

#[test]
fn open_creates_directory_and_empty_segment() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("orders-0");
    let (log, report) = PartitionLog::open(&dir, LogConfig::default(), 0, Some(5), 0).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (5, 5));
    assert_eq!(report.recovered_segments, 0);
    assert!(dir.join(file_name(5, "log")).exists());
    assert!(dir.join(file_name(5, "index")).exists());
    assert!(dir.join(file_name(5, "timeindex")).exists());
    assert_eq!(log.read(5, 100, i64::MAX).unwrap().bytes.len(), 0);
}

#[test]
fn append_rejects_wrong_base_offset_and_bad_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), LogConfig::default(), 0);
    let b = batch(1, 1, 0, 10);
    let meta = AppendMeta::from_header(&validate_batch(&b).unwrap());
    assert!(matches!(
        log.append(&[&b], &meta, 0),
        Err(LogError::NonMonotonicAppend { .. })
    ));
    let b = batch(0, 1, 0, 10);
    let meta = AppendMeta::from_header(&validate_batch(&b).unwrap());
    assert!(log.append(&[&b[..10]], &meta, 0).is_err());
    log.append(&[&b], &meta, 0).unwrap();
    assert_eq!(log.log_end_offset(), 1);
}

#[test]
fn rolls_by_size() {
    let dir = tempfile::tempdir().unwrap();
    let one = batch(0, 1, 0, 100).len() as u64;
    let (mut log, _) = open(dir.path(), small(one * 3), 0);
    for _ in 0..7 {
        push(&mut log, 1, 0, 100, 0);
    }
    assert_eq!(log.segment_base_offsets(), vec![0, 3, 6]);
    // An inactive segment's files hold exactly their entries (no preallocation).
    let idx = std::fs::metadata(dir.path().join(file_name(0, "timeindex")))
        .unwrap()
        .len();
    assert_eq!(idx % 12, 0);
    assert!(
        idx >= 12,
        "the final max timestamp entry is written on roll"
    );
}

#[test]
fn rolls_by_time_since_first_append() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_ms: 1000,
        ..LogConfig::default()
    };
    let (mut log, _) = open(dir.path(), config, 0);
    push(&mut log, 1, 0, 10, 10_000);
    push(&mut log, 1, 0, 10, 11_000);
    assert_eq!(log.segment_base_offsets(), vec![0]);
    push(&mut log, 1, 0, 10, 11_001);
    assert_eq!(log.segment_base_offsets(), vec![0, 2]);
}

#[test]
fn rolls_when_offset_index_is_full() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        index_interval_bytes: 1,
        segment_index_bytes: 24, // 3 offset entries, 2 time entries
        ..LogConfig::default()
    };
    let (mut log, _) = open(dir.path(), config, 0);
    for i in 0..8 {
        push(&mut log, 1, i, 10, 0);
    }
    // Entries are added from the second batch on; the time index (2 entries) fills first.
    assert_eq!(log.segment_base_offsets(), vec![0, 3, 6]);
}

#[test]
fn rolls_before_relative_offset_overflows() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), LogConfig::default(), 0);
    push(&mut log, 1, 0, 10, 0);
    let b = batch(1, 1, 0, 10);
    let mut meta = AppendMeta::from_header(&validate_batch(&b).unwrap());
    // A batch whose last offset lies beyond base 0 + i32::MAX must start a new segment.
    meta.last_offset = 1 + i32::MAX as i64;
    log.append(&[&b], &meta, 0).unwrap();
    assert_eq!(log.segment_base_offsets(), vec![0, 1]);
    assert_eq!(log.log_end_offset(), 2 + i32::MAX as i64);
}

#[test]
fn reads_across_segments_and_checks_range() {
    let dir = tempfile::tempdir().unwrap();
    let one = batch(0, 2, 0, 100).len();
    let (mut log, _) = open(dir.path(), small(one as u64 * 2), 0);
    let batches: Vec<Vec<u8>> = (0..6).map(|_| push(&mut log, 2, 0, 100, 0)).collect();
    assert_eq!(log.segment_base_offsets(), vec![0, 4, 8]);
    let r = log.read(5, one * 10, i64::MAX).unwrap();
    // A read stays within one segment: batch [4..5] then stop at the segment end.
    assert_eq!(r.first_batch_base_offset, 4);
    assert_eq!(
        &r.bytes[..],
        &[&batches[2][..], &batches[3][..]].concat()[..]
    );
    assert!(matches!(
        log.read(13, 10, i64::MAX),
        Err(LogError::OffsetOutOfRange {
            offset: 13,
            log_start: 0,
            log_end: 12
        })
    ));
    let r = log.read(12, 10, i64::MAX).unwrap();
    assert!(r.bytes.is_empty());
    assert_eq!(r.first_batch_base_offset, 12);
    assert!(log.read(6, 10, 6).unwrap().bytes.is_empty());
}

#[test]
fn offset_for_timestamp_and_max_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let one = batch(0, 2, 0, 100).len();
    let (mut log, _) = open(dir.path(), small(one as u64 * 3), 0);
    assert_eq!(log.max_timestamp_entry(), None);
    for ts in [100, 300, 200, 500, 400, 500, 600] {
        push(&mut log, 2, ts, 100, 0);
    }
    assert_eq!(log.offset_for_timestamp(50).unwrap(), Some((0, 100)));
    assert_eq!(log.offset_for_timestamp(250).unwrap(), Some((2, 300)));
    assert_eq!(log.offset_for_timestamp(450).unwrap(), Some((6, 500)));
    assert_eq!(log.offset_for_timestamp(600).unwrap(), Some((12, 600)));
    assert_eq!(log.offset_for_timestamp(601).unwrap(), None);
    assert_eq!(log.max_timestamp_entry(), Some((12, 600)));
    log.truncate_to(12).unwrap();
    assert_eq!(log.max_timestamp_entry(), Some((6, 500)));
    let (log, _) = open(dir.path(), small(one as u64 * 3), 0);
    assert_eq!(log.max_timestamp_entry(), Some((6, 500)));
    assert_eq!(log.offset_for_timestamp(450).unwrap(), Some((6, 500)));
}

#[test]
fn truncate_mid_batch_goes_to_batch_start() {
    let dir = tempfile::tempdir().unwrap();
    let one = batch(0, 3, 0, 50).len();
    let (mut log, _) = open(dir.path(), small(one as u64 * 2), 0);
    for _ in 0..5 {
        push(&mut log, 3, 0, 50, 0);
    }
    assert_eq!(log.segment_base_offsets(), vec![0, 6, 12]);
    log.flush().unwrap();
    log.truncate_to(7).unwrap();
    assert_eq!(log.log_end_offset(), 6);
    assert_eq!(log.recovery_point(), 6);
    // Segment 6 lost its only batch but stays (empty) as the active segment, as in Kafka.
    assert_eq!(log.segment_base_offsets(), vec![0, 6]);
    assert!(!dir.path().join(file_name(12, "log")).exists());
    push(&mut log, 1, 0, 50, 0);
    assert_eq!(log.log_end_offset(), 7);
    // Truncating below everything restarts the log there.
    log.truncate_to(0).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));
}

#[test]
fn reopen_after_clean_close_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let one = batch(0, 2, 0, 300).len();
    let config = small(one as u64 * 5);
    let (mut log, _) = open(dir.path(), config.clone(), 0);
    let batches: Vec<Vec<u8>> = (0..12).map(|i| push(&mut log, 2, i, 300, 0)).collect();
    log.flush().unwrap();
    assert_eq!(log.recovery_point(), 24);
    let before = log.read(0, usize::MAX, i64::MAX).unwrap();
    drop(log);
    let (log, report) = open(dir.path(), config, 24);
    assert_eq!(report.recovered_segments, 0);
    assert_eq!(report.log_end_offset, 24);
    assert_eq!(log.log_end_offset(), 24);
    assert_eq!(log.read(0, usize::MAX, i64::MAX).unwrap(), before);
    for (i, b) in batches.iter().enumerate() {
        let r = log.read(2 * i as i64 + 1, 1, i64::MAX).unwrap();
        assert_eq!(&r.bytes[..], &b[..]);
    }
    let mut headers = Vec::new();
    log.scan_batches(13, &mut |h| headers.push(h.base_offset))
        .unwrap();
    assert_eq!(headers, vec![12, 14, 16, 18, 20, 22]);
}

#[test]
fn missing_or_bad_index_files_are_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let config = small(1 << 20);
    let (mut log, _) = open(dir.path(), config.clone(), 0);
    for i in 0..20 {
        push(&mut log, 2, i, 100, 0);
    }
    log.flush().unwrap();
    let index = dir.path().join(file_name(0, "index"));
    let good = std::fs::read(&index).unwrap();
    assert!(good.len() >= 16);
    std::fs::remove_file(&index).unwrap();
    std::fs::write(dir.path().join(file_name(0, "timeindex")), [1, 2, 3]).unwrap();
    let (log, report) = open(dir.path(), config.clone(), 40);
    assert_eq!(report.recovered_segments, 1);
    assert_eq!(report.truncated_bytes, 0);
    assert_eq!(std::fs::read(&index).unwrap(), good);
    assert_eq!(log.log_end_offset(), 40);
    drop(log);
    // Kafka's preallocated, zero-filled index after a crash.
    let mut padded = good.clone();
    padded.resize(good.len() + 800, 0);
    std::fs::write(&index, &padded).unwrap();
    let (_, report) = open(dir.path(), config, 40);
    assert_eq!(report.recovered_segments, 1);
    assert_eq!(std::fs::read(&index).unwrap(), good);
}

#[test]
fn leftovers_and_orphan_indexes_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), LogConfig::default(), 0);
    push(&mut log, 1, 0, 10, 0);
    log.flush().unwrap();
    drop(log);
    for name in [
        "00000000000000000000.log.deleted",
        "00000000000000000000.log.cleaned",
        "00000000000000000000.log.swap",
        "00000000000000000099.index",
        "partition.metadata",
    ] {
        std::fs::write(dir.path().join(name), b"x").unwrap();
    }
    let (log, _) = open(dir.path(), LogConfig::default(), 1);
    assert_eq!(log.log_end_offset(), 1);
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        vec![
            "00000000000000000000.index",
            "00000000000000000000.log",
            "00000000000000000000.timeindex",
            "partition.metadata"
        ]
    );
}

#[test]
fn retention_deletes_whole_inactive_segments() {
    let dir = tempfile::tempdir().unwrap();
    let one = batch(0, 1, 0, 100).len();
    let (mut log, _) = open(dir.path(), small(one as u64 * 2), 0);
    for _ in 0..7 {
        push(&mut log, 1, 0, 100, 0);
    }
    assert_eq!(log.segment_base_offsets(), vec![0, 2, 4, 6]);
    assert_eq!(log.delete_segments_before(3).unwrap(), 1);
    assert_eq!(log.log_start_offset(), 2);
    log.advance_log_start_offset(5).unwrap();
    assert_eq!(log.segment_base_offsets(), vec![4, 6]);
    assert_eq!(log.log_start_offset(), 5);
    assert!(matches!(
        log.read(4, 10, i64::MAX),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    assert_eq!(
        log.read(5, 10, i64::MAX).unwrap().first_batch_base_offset,
        5
    );
    assert_eq!(log.delete_segments_before(i64::MAX).unwrap(), 1);
    assert_eq!(log.segment_base_offsets(), vec![6]);
    // The checkpointed log start offset survives a reopen.
    log.flush().unwrap();
    let (log, _) = PartitionLog::open(dir.path(), small(one as u64 * 2), 7, Some(6), 0).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (6, 7));
}

/// Expected result of a read against the in-memory model.
fn model_read(
    model: &[(i64, Vec<u8>)],
    seg_of: &dyn Fn(i64) -> i64,
    fetch: i64,
    max_bytes: usize,
    hw: i64,
) -> Vec<u8> {
    if fetch >= hw {
        return Vec::new();
    }
    let Some(i) = model.iter().position(|(_, b)| {
        let last = validate_batch(b).unwrap().last_offset();
        fetch <= last
    }) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (j, (base, b)) in model[i..].iter().enumerate() {
        if *base >= hw
            || (j > 0 && out.len() + b.len() > max_bytes)
            || seg_of(*base) != seg_of(model[i].0)
        {
            break;
        }
        out.extend_from_slice(b);
    }
    out
}

#[derive(Debug, Clone)]
enum Op {
    Append {
        records: usize,
        value_len: usize,
    },
    Read {
        at: usize,
        max_bytes: usize,
        hw_back: i64,
    },
    Truncate {
        at: usize,
    },
    Reopen {
        flush: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1usize..5, 0usize..300).prop_map(|(records, value_len)| Op::Append { records, value_len }),
        3 => (0usize..1000, 1usize..2000, 0i64..4).prop_map(|(at, max_bytes, hw_back)| Op::Read { at, max_bytes, hw_back }),
        1 => (0usize..1000).prop_map(|at| Op::Truncate { at }),
        1 => any::<bool>().prop_map(|flush| Op::Reopen { flush }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn log_matches_model(ops in proptest::collection::vec(op(), 1..60)) {
        let dir = tempfile::tempdir().unwrap();
        let config = small(700);
        let (mut log, _) = open(dir.path(), config.clone(), 0);
        let mut model: Vec<(i64, Vec<u8>)> = Vec::new();
        let mut ts = 0;
        for op in ops {
            match op {
                Op::Append { records, value_len } => {
                    ts += 1;
                    let b = push(&mut log, records, ts, value_len, 0);
                    model.push((validate_batch(&b).unwrap().base_offset, b));
                }
                Op::Read { at, max_bytes, hw_back } => {
                    let leo = log.log_end_offset();
                    let fetch = (at as i64) % (leo + 1);
                    let hw = leo - hw_back;
                    let bases = log.segment_base_offsets();
                    let seg_of = |o: i64| bases[bases.partition_point(|&b| b <= o).saturating_sub(1)];
                    let got = log.read(fetch, max_bytes, hw).unwrap();
                    let want = model_read(&model, &seg_of, fetch, max_bytes, hw);
                    prop_assert_eq!(&got.bytes[..], &want[..], "fetch {} max {} hw {}", fetch, max_bytes, hw);
                }
                Op::Truncate { at } => {
                    let leo = log.log_end_offset();
                    let to = (at as i64) % (leo + 1);
                    log.truncate_to(to).unwrap();
                    model.retain(|(_, b)| validate_batch(b).unwrap().last_offset() < to);
                    let want_leo = model.last().map_or(0, |(_, b)| validate_batch(b).unwrap().last_offset() + 1);
                    prop_assert_eq!(log.log_end_offset(), want_leo);
                }
                Op::Reopen { flush } => {
                    let rp = if flush { log.flush().unwrap(); log.recovery_point() } else { log.recovery_point() };
                    drop(log);
                    log = open(dir.path(), config.clone(), rp).0;
                }
            }
            let want_leo = model.last().map_or(0, |(_, b)| validate_batch(b).unwrap().last_offset() + 1);
            prop_assert_eq!(log.log_end_offset(), want_leo);
            let want_max = model.iter().fold(None, |m: Option<(i64, i64)>, (base, b)| {
                let t = validate_batch(b).unwrap().max_timestamp;
                if m.is_none_or(|(_, mt)| t > mt) { Some((*base, t)) } else { m }
            });
            prop_assert_eq!(log.max_timestamp_entry(), want_max);
        }
        // Everything reads back byte-identical, batch by batch.
        for (base, b) in &model {
            let r = log.read(*base, 1, i64::MAX).unwrap();
            prop_assert_eq!(&r.bytes[..], &b[..]);
        }
    }

    #[test]
    fn recovery_cuts_at_first_damage(
        batch_count in 1usize..25,
        damage_at in any::<prop::sample::Index>(),
        garbage in proptest::collection::vec(any::<u8>(), 0..200),
        cut_instead in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let config = small(2000);
        let (mut log, _) = open(dir.path(), config.clone(), 0);
        let batches: Vec<Vec<u8>> = (0..batch_count).map(|i| push(&mut log, 1 + i % 3, i as i64, 10 + 37 * (i % 5), 0)).collect();
        log.flush().unwrap();
        let active = *log.segment_base_offsets().last().unwrap();
        drop(log);
        // Damage the active segment's file at a random byte.
        let path = dir.path().join(file_name(active, "log"));
        let mut data = std::fs::read(&path).unwrap();
        let at = if data.is_empty() { 0 } else { damage_at.index(data.len() + 1) };
        if cut_instead {
            data.truncate(at);
        } else {
            for (i, g) in garbage.iter().enumerate() {
                if at + i < data.len() { data[at + i] = *g } else { data.push(*g) }
            }
        }
        // The CRC does not cover baseOffset and partitionLeaderEpoch (Kafka rewrites them), so damage
        // there is undetectable by design: keep those fields of the original batches intact.
        let original = std::fs::read(&path).unwrap();
        let mut p = 0;
        for b in batches.iter().filter(|b| validate_batch(b).unwrap().base_offset >= active) {
            for k in (p..p + 8).chain(p + 12..p + 16) {
                if k < data.len() {
                    data[k] = original[k];
                }
            }
            p += b.len();
        }
        std::fs::write(&path, &data).unwrap();
        // The expected end: the last batch that still validates intact before the damage.
        let in_active: Vec<&Vec<u8>> = batches.iter().filter(|b| validate_batch(b).unwrap().base_offset >= active).collect();
        let mut pos = 0;
        let mut want_leo = active;
        for b in &in_active {
            if pos + b.len() <= data.len() && data[pos..pos + b.len()] == b[..] {
                pos += b.len();
                want_leo = validate_batch(b).unwrap().last_offset() + 1;
            } else {
                break;
            }
        }
        let (mut log, report) = open(dir.path(), config, 0);
        // Garbage may by chance form a valid batch only with negligible probability (CRC); accept
        // exactly the byte-identical prefix.
        prop_assert_eq!(log.log_end_offset(), want_leo);
        prop_assert_eq!(report.log_end_offset, want_leo);
        prop_assert_eq!(std::fs::metadata(&path).unwrap().len(), pos as u64);
        // Nothing destroyed: what was cut is in the quarantine file, byte for byte.
        if pos < data.len() {
            prop_assert_eq!(report.quarantined.len(), 1);
            let q = &report.quarantined[0];
            prop_assert_eq!(&q.file, &dir.path().join(format!("{}.quarantine-{pos}", file_name(active, "log"))));
            prop_assert_eq!((q.from_offset, q.bytes), (want_leo, (data.len() - pos) as u64));
            prop_assert_eq!(&std::fs::read(&q.file).unwrap()[..], &data[pos..]);
        } else {
            prop_assert!(report.quarantined.is_empty());
        }
        for b in batches.iter().filter(|b| validate_batch(b).unwrap().last_offset() < want_leo) {
            let h = validate_batch(b).unwrap();
            let r = log.read(h.base_offset, 1, i64::MAX).unwrap();
            prop_assert_eq!(&r.bytes[..], &b[..]);
        }
        let next = push(&mut log, 2, 999, 20, 0);
        prop_assert_eq!(validate_batch(&next).unwrap().base_offset, want_leo);
        prop_assert_eq!(&log.read(want_leo, 1, i64::MAX).unwrap().bytes[..], &next[..]);
    }
}

#[test]
fn damage_in_a_middle_segment_drops_the_segments_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let one = batch(0, 2, 0, 100).len();
    let config = small(one as u64 * 3);
    let (mut log, _) = open(dir.path(), config.clone(), 0);
    for i in 0..8 {
        push(&mut log, 2, i, 100, 0);
    }
    log.flush().unwrap();
    assert_eq!(log.segment_base_offsets(), vec![0, 6, 12]);
    drop(log);
    // Flip a byte inside the second batch of segment 6 (offsets 8..9).
    let path = dir.path().join(file_name(6, "log"));
    let mut data = std::fs::read(&path).unwrap();
    data[one + 40] ^= 0xff;
    std::fs::write(&path, &data).unwrap();
    let last_size = std::fs::metadata(dir.path().join(file_name(12, "log")))
        .unwrap()
        .len();
    // Recovery point 6: segment 0 is trusted, segment 6 onwards re-validated.
    let (log, report) = open(dir.path(), config, 6);
    assert_eq!(log.log_end_offset(), 8);
    assert_eq!(log.segment_base_offsets(), vec![0, 6]);
    assert_eq!(report.truncated_bytes, 2 * one as u64 + last_size);
    assert_eq!(report.recovered_segments, 1);
    assert!(!dir.path().join(file_name(12, "log")).exists());
    assert!(!dir.path().join(file_name(12, "index")).exists());
    // Nothing destroyed: the damaged tail of segment 6 and all of segment 12 are quarantined.
    let tail = dir
        .path()
        .join(format!("{}.quarantine-{one}", file_name(6, "log")));
    let rest = dir
        .path()
        .join(format!("{}.quarantine-0", file_name(12, "log")));
    assert_eq!(
        report.quarantined,
        vec![
            Quarantined {
                file: tail.clone(),
                from_offset: 8,
                to_offset: None,
                bytes: 2 * one as u64,
            },
            Quarantined {
                file: rest.clone(),
                from_offset: 12,
                to_offset: Some(16),
                bytes: last_size,
            },
        ]
    );
    assert_eq!(std::fs::read(&tail).unwrap(), &data[one..]);
    assert_eq!(std::fs::metadata(&rest).unwrap().len(), last_size);
    let line = quarantine::summary(dir.path(), &report.quarantined, 8);
    assert!(
        line.contains("00000000000000000006.log.quarantine-"),
        "{line}"
    );
    assert!(line.contains("offsets 12..16"), "{line}");
    // The loader ignores quarantine files: a reopen finds the same log and moves nothing again.
    drop(log);
    let (log, report) = open(dir.path(), small(one as u64 * 3), 0);
    assert_eq!(log.log_end_offset(), 8);
    assert_eq!(log.segment_base_offsets(), vec![0, 6]);
    assert!(report.quarantined.is_empty());
    assert!(tail.exists() && rest.exists());
}

#[test]
fn offset_for_timestamp_respects_log_start_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), LogConfig::default(), 0);
    for ts in [10, 20, 30] {
        push(&mut log, 2, ts, 10, 0);
    }
    log.advance_log_start_offset(3).unwrap();
    assert_eq!(log.log_start_offset(), 3);
    // Batch [2..3] is the first one at or after the log start; its base is raised to the log start.
    assert_eq!(log.offset_for_timestamp(0).unwrap(), Some((3, 20)));
    assert_eq!(log.offset_for_timestamp(25).unwrap(), Some((4, 30)));
}

#[test]
fn retention_deletes_expired_and_oversized_segments_and_moves_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = open(dir.path(), small(1000), 0);
    // Six batches of ~600 bytes: each fills a segment; timestamps 1000..6000.
    for i in 0..6 {
        push(&mut log, 1, (i + 1) * 1000, 500, 0);
    }
    assert_eq!(log.segment_base_offsets(), vec![0, 1, 2, 3, 4, 5]);
    // Time: at now=4500 with retention 2000, segments with largest ts < 2500 go (ts 1000, 2000).
    assert_eq!(log.delete_old_segments(4500, 2000, -1).unwrap(), 2);
    assert_eq!(log.segment_base_offsets(), vec![2, 3, 4, 5]);
    assert_eq!(log.log_start_offset(), 2);
    assert!(matches!(
        log.read(1, 1 << 20, i64::MAX),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    // Size: keep at most two segments' worth.
    let seg = log.size_bytes() / 4;
    assert_eq!(
        log.delete_old_segments(4500, -1, (2 * seg) as i64).unwrap(),
        2
    );
    assert_eq!(log.segment_base_offsets(), vec![4, 5]);
    assert_eq!(log.log_start_offset(), 4);
    // Everything expired: the active segment stays.
    assert_eq!(log.delete_old_segments(i64::MAX, 0, 0).unwrap(), 1);
    assert_eq!(log.segment_base_offsets(), vec![5]);
    assert_eq!(
        log.read(5, 1 << 20, i64::MAX)
            .unwrap()
            .first_batch_base_offset,
        5
    );
    // The start survives a reopen with the checkpointed value.
    drop(log);
    let (log, _) = PartitionLog::open(dir.path(), small(1000), 6, Some(5), 0).unwrap();
    assert_eq!(log.log_start_offset(), 5);
    assert_eq!(log.log_end_offset(), 6);
}

/// Lazy file handles: 200 partition logs (several segments each) sharing a cache of 50 descriptors
/// never hold more than 50 files open under their directory, and appends, reads, truncation,
/// flush and reopen stay correct while descriptors are evicted and reopened.
#[test]
fn many_logs_share_a_bounded_descriptor_cache() {
    use crate::log::file_cache::open_fds_under;
    let root = tempfile::tempdir().unwrap();
    let files = FileCache::new(50);
    let config = LogConfig {
        segment_bytes: 600,
        index_interval_bytes: 100,
        files: files.clone(),
        ..LogConfig::default()
    };
    assert_eq!(open_fds_under(root.path()), 0);
    let mut logs: Vec<PartitionLog> = (0..200)
        .map(|p| open(&root.path().join(format!("t-{p}")), config.clone(), 0).0)
        .collect();
    assert_eq!(open_fds_under(root.path()), 50);
    // Round-robin appends: every append touches a file the cache evicted long ago.
    let mut expected: Vec<Vec<Vec<u8>>> = vec![Vec::new(); logs.len()];
    for round in 0..6 {
        for (p, log) in logs.iter_mut().enumerate() {
            expected[p].push(push(log, 2, round, 100, 0));
        }
        assert!(open_fds_under(root.path()) <= 50);
    }
    let stats = files.stats();
    assert_eq!(stats.open, 50);
    assert!(stats.evictions > 1000, "{stats:?}");
    for (p, log) in logs.iter().enumerate() {
        assert!(
            log.segment_base_offsets().len() >= 3,
            "partition {p} rolled"
        );
        assert_eq!(log.log_end_offset(), 12);
        // Every batch reads back byte for byte, from every segment.
        for (i, want) in expected[p].iter().enumerate() {
            let got = log.read(2 * i as i64, want.len(), i64::MAX).unwrap();
            assert_eq!(&got.bytes[..], &want[..], "partition {p} batch {i}");
        }
    }
    assert_eq!(open_fds_under(root.path()), 50);
    // Truncate and flush through reopened descriptors, then reopen everything from disk.
    for log in logs.iter_mut().step_by(7) {
        log.truncate_to(5).unwrap();
        assert_eq!(log.log_end_offset(), 4);
    }
    for log in &mut logs {
        log.flush().unwrap();
    }
    assert!(open_fds_under(root.path()) <= 50);
    drop(logs);
    assert_eq!(open_fds_under(root.path()), 0);
    assert_eq!(files.stats().open, 0);
    for (p, batches) in expected.iter().enumerate() {
        let end = if p % 7 == 0 { 4 } else { 12 };
        let (log, report) = open(&root.path().join(format!("t-{p}")), config.clone(), end);
        assert_eq!(
            report.recovered_segments, 0,
            "partition {p}: indexes were written"
        );
        assert_eq!(log.log_end_offset(), end);
        let last = &batches[end as usize / 2 - 1];
        let got = log.read(end - 2, last.len(), i64::MAX).unwrap();
        assert_eq!(&got.bytes[..], &last[..]);
    }
    assert!(open_fds_under(root.path()) <= 50);
}

/// The fetch path's reads (`read_records` with `zero_copy`) against plain reads: same batches, same
/// first base offset, `next_offset` one past the last batch; a file range only from
/// `FILE_RECORDS_MIN_BYTES` on. Batches mix small ones (read in chunks by the header walk) and
/// ones above `SPARSE_MIN_BATCH` (skipped by it), over several segments.
mod zero_copy {
    use super::*;
    use crate::log::records::{Records, FILE_RECORDS_MIN_BYTES};

    fn sizes() -> impl Strategy<Value = Vec<(usize, usize)>> {
        proptest::collection::vec(
            prop_oneof![
                2 => (1usize..5, 0usize..300),
                1 => (1usize..3, 9_000usize..40_000),
            ],
            1..80,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        #[test]
        fn file_and_memory_reads_agree(
            batches in sizes(),
            reads in proptest::collection::vec((0usize..2000, 1usize..400_000, 0i64..4), 1..20),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let (mut log, _) = open(dir.path(), small(300_000), 0);
            for (i, (n, len)) in batches.iter().enumerate() {
                push(&mut log, *n, i as i64, *len, 0);
            }
            let leo = log.log_end_offset();
            for (at, max_bytes, hw_back) in reads {
                let fetch = (at as i64) % (leo + 1);
                let hw = leo - hw_back;
                let plain = log.read(fetch, max_bytes, hw).unwrap();
                let got = log.read_records(fetch, max_bytes, hw, true).unwrap();
                prop_assert_eq!(got.first_batch_base_offset, plain.first_batch_base_offset);
                if got.records.len() < FILE_RECORDS_MIN_BYTES {
                    prop_assert!(matches!(got.records, Records::Memory(_)));
                }
                let bytes = got.records.into_bytes().unwrap();
                prop_assert_eq!(&bytes[..], &plain.bytes[..], "fetch {} max {} hw {}", fetch, max_bytes, hw);
                let mut last = None;
                let mut pos = 0;
                while pos < bytes.len() {
                    let h = crate::record::BatchHeader::parse(&bytes[pos..]).unwrap();
                    last = Some(h.last_offset() + 1);
                    pos += h.total_size();
                }
                prop_assert_eq!(got.next_offset, last);
            }
        }
    }

    #[test]
    fn a_large_range_of_large_batches_is_a_file_range() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = open(dir.path(), LogConfig::default(), 0);
        let batches: Vec<Vec<u8>> = (0..10).map(|i| push(&mut log, 2, i, 10_000, 0)).collect();
        let got = log.read_records(0, 1 << 20, i64::MAX, true).unwrap();
        let Records::File(f) = &got.records else {
            panic!("expected a file range, got {:?}", got.records);
        };
        assert_eq!((f.position(), f.len()), (0, batches.concat().len()));
        assert_eq!(&f.read().unwrap()[..], &batches.concat()[..]);
        assert_eq!(got.next_offset, Some(20));
        // Without zero_copy, or below the floor, the same bytes come in memory.
        let mem = log.read_records(0, 1 << 20, i64::MAX, false).unwrap();
        assert!(matches!(mem.records, Records::Memory(_)));
        let small = log
            .read_records(0, FILE_RECORDS_MIN_BYTES - 1, i64::MAX, true)
            .unwrap();
        assert!(matches!(small.records, Records::Memory(_)));
        assert_eq!(small.records.len(), 3 * batches[0].len());
    }
}
