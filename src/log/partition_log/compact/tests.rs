//! Compaction of a `PartitionLog`: the record rules against a model (proptest), and recovery from a
//! crash at every step of the segment swap.

use std::path::Path;

use proptest::prelude::*;

use crate::log::partition_log::{AppendMeta, CompactParams, LogConfig, PartitionLog};
use crate::log::segment::file_name;
use crate::record::{build_batch, set_base_offset, validate_batch};

fn small(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes: 200,
        ..LogConfig::default()
    }
}

/// A one-record batch with `key` and `value` (None: tombstone) at the log end.
fn push_kv(log: &mut PartitionLog, key: &str, value: Option<&str>, ts: i64) {
    let mut b = build_batch(
        0,
        ts,
        (-1, -1, -1),
        &[(Some(key.as_bytes()), value.map(str::as_bytes))],
    );
    set_base_offset(&mut b, log.log_end_offset());
    let meta = AppendMeta::from_header(&validate_batch(&b).unwrap());
    log.append(&[&b], &meta, 0).unwrap();
}

/// (offset, key, value) of every record from `from` to the log end, via the cleaner's reader.
fn all_records(log: &PartitionLog, from: i64) -> Vec<(i64, String, Option<String>)> {
    let mut out = Vec::new();
    let mut next = from;
    while next < log.log_end_offset() {
        let slice = log.read(next, 1 << 24, i64::MAX).unwrap();
        let bytes = &slice.bytes[..];
        if bytes.is_empty() {
            break;
        }
        let mut pos = 0;
        while pos < bytes.len() {
            let h = validate_batch(&bytes[pos..]).expect("every batch valid after compaction");
            let batch = &bytes[pos..pos + h.total_size()];
            for r in crate::log::cleaner::records(batch, &h).unwrap() {
                // Values are two bytes, followed by the header count (one byte).
                let raw = r.bytes;
                let value = (!r.is_tombstone).then(|| {
                    String::from_utf8_lossy(&raw[raw.len() - 3..raw.len() - 1]).into_owned()
                });
                out.push((
                    r.offset,
                    String::from_utf8_lossy(r.key.unwrap()).into_owned(),
                    value,
                ));
            }
            next = h.last_offset() + 1;
            pos += h.total_size();
        }
    }
    out
}

#[test]
fn compaction_keeps_the_latest_value_per_key_and_the_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = PartitionLog::open(dir.path(), small(300), 0, None, 0).unwrap();
    // Keys a, b, c rewritten in rounds; values are two characters ("a0", "b1", ...).
    for round in 0..4 {
        for k in ["a", "b", "c"] {
            push_kv(&mut log, k, Some(&format!("{k}{round}")), 1000);
        }
    }
    push_kv(&mut log, "b", None, 1000); // tombstone for b at offset 12
    for _ in 0..5 {
        push_kv(&mut log, "z", Some("z9"), 1000); // offsets 13..17: the tombstone's segment rolls
    }
    let segments_before = log.segment_base_offsets();
    assert!(segments_before.len() >= 4, "{segments_before:?}");
    let params = CompactParams {
        now_ms: 10_000,
        first_dirty_offset: 0,
        min_cleanable_ratio: 0.5,
        min_compaction_lag_ms: 0,
        delete_retention_ms: 1_000_000,
    };
    let out = log.compact(&params).unwrap().expect("a pass ran");
    assert!(out.segments_rewritten > 0);
    assert!(out.bytes_after < out.bytes_before);
    assert_eq!(
        log.segment_base_offsets(),
        segments_before,
        "segments keep their base offsets"
    );
    let recs = all_records(&log, 0);
    let active_base = *segments_before.last().unwrap();
    assert!(active_base > 12, "the tombstone is in an inactive segment");
    let cleaned: Vec<_> = recs.iter().filter(|r| r.0 < active_base).cloned().collect();
    // a3 (9) and c3 (11) are latest; b's latest is the tombstone (12), still young: kept.
    assert!(
        cleaned.contains(&(9, "a".into(), Some("a3".into()))),
        "{cleaned:?}"
    );
    assert!(
        cleaned.contains(&(11, "c".into(), Some("c3".into()))),
        "{cleaned:?}"
    );
    assert!(recs.iter().any(|r| r.0 == 12 && r.2.is_none()), "{recs:?}");
    let mut keys: Vec<_> = cleaned.iter().map(|r| r.1.clone()).collect();
    keys.dedup();
    assert_eq!(
        keys.len(),
        cleaned.len(),
        "one record per key in cleaned segments: {cleaned:?}"
    );
    assert_eq!(log.log_end_offset(), 18);
    assert_eq!(
        log.read(0, 1 << 20, i64::MAX)
            .unwrap()
            .first_batch_base_offset,
        9
    );
    // Nothing dirty left: the next pass is a no-op.
    let again = CompactParams {
        first_dirty_offset: out.first_dirty_offset,
        ..params
    };
    assert_eq!(log.compact(&again).unwrap(), None);
    // Old tombstones go once their segment is older than delete.retention.ms.
    let late = CompactParams {
        now_ms: 10_000_000,
        first_dirty_offset: 0,
        min_cleanable_ratio: 0.0,
        ..params
    };
    assert!(log.compact(&late).unwrap().is_some());
    assert!(
        !all_records(&log, 0).iter().any(|r| r.0 == 12),
        "tombstone removed"
    );
    // Reopening finds the same log.
    let before = all_records(&log, 0);
    drop(log);
    let (log, report) = PartitionLog::open(dir.path(), small(300), 0, None, 0).unwrap();
    assert_eq!(report.truncated_bytes, 0);
    assert_eq!(all_records(&log, 0), before);
    assert_eq!(log.log_end_offset(), 18);
}

// ---------------------------------------------------------------- model-based property test

/// (offset, key, value) of one record; value `None`: a tombstone.
type Rec = (i64, String, Option<String>);

/// Appends one batch of keyed records (values: the record's offset mod 100, two digits; `None`:
/// tombstone) at the log end and returns the records as written.
fn push_batch(log: &mut PartitionLog, recs: &[(u8, bool)], ts: i64) -> Vec<Rec> {
    let base = log.log_end_offset();
    let written: Vec<Rec> = recs
        .iter()
        .enumerate()
        .map(|(i, &(k, tomb))| {
            let offset = base + i as i64;
            let value = (!tomb).then(|| format!("{:02}", offset % 100));
            (offset, format!("k{k}"), value)
        })
        .collect();
    let kvs: Vec<_> = written
        .iter()
        .map(|(_, k, v)| (Some(k.as_bytes()), v.as_deref().map(str::as_bytes)))
        .collect();
    let mut b = build_batch(0, ts, (-1, -1, -1), &kvs);
    set_base_offset(&mut b, base);
    let meta = AppendMeta::from_header(&validate_batch(&b).unwrap());
    log.append(&[&b], &meta, 0).unwrap();
    written
}

/// What compaction must leave: in the cleanable range (below `active_base`) the latest record of
/// every key, minus tombstones when `drop_tombstones`; everything from `active_base` on.
fn model_compact(all: &[Rec], active_base: i64, drop_tombstones: bool) -> Vec<Rec> {
    let mut latest = std::collections::HashMap::new();
    for r in all.iter().filter(|r| r.0 < active_base) {
        latest.insert(r.1.clone(), r.0);
    }
    all.iter()
        .filter(|r| {
            r.0 >= active_base || (latest[&r.1] == r.0 && !(drop_tombstones && r.2.is_none()))
        })
        .cloned()
        .collect()
}

/// Checks the log against `expected`: offsets in order, reads from every third offset, the log end.
fn assert_log_is(log: &PartitionLog, expected: &[Rec], log_end: i64) -> Result<(), TestCaseError> {
    prop_assert_eq!(log.log_end_offset(), log_end);
    let got = all_records(log, 0);
    prop_assert!(
        got.windows(2).all(|w| w[0].0 < w[1].0),
        "offsets in order: {:?}",
        got
    );
    prop_assert_eq!(&got, expected);
    // A fetch from any offset starts at the batch holding it (or the next surviving one).
    for from in (0..log_end).step_by(3) {
        let tail: Vec<_> = all_records(log, from)
            .into_iter()
            .filter(|r| r.0 >= from)
            .collect();
        let want: Vec<_> = expected.iter().filter(|r| r.0 >= from).cloned().collect();
        prop_assert_eq!(tail, want, "read from {}", from);
    }
    Ok(())
}

fn batches() -> impl Strategy<Value = Vec<Vec<(u8, bool)>>> {
    // Six keys, one tombstone in five records, one to four records a batch.
    let rec = (0u8..6, prop::bool::weighted(0.2));
    proptest::collection::vec(proptest::collection::vec(rec, 1..5), 4..40)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// Random keyed writes and tombstones over several small segments, compacted in two rounds
    /// (the second starting at the first's dirty offset), then once more after
    /// `delete.retention.ms`: the log always equals the model, offsets and segment bases never
    /// move, and a reopen (full recovery) reads the same log and keeps appending.
    #[test]
    fn compaction_matches_the_model(
        first in batches(),
        second in batches(),
        segment_bytes in 150u64..400,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = PartitionLog::open(dir.path(), small(segment_bytes), 0, None, 0).unwrap();
        let mut all = Vec::new();
        for b in &first {
            all.extend(push_batch(&mut log, b, 1_000));
        }
        let keep_tombstones = CompactParams {
            now_ms: 10_000,
            first_dirty_offset: 0,
            min_cleanable_ratio: 0.0,
            min_compaction_lag_ms: 0,
            delete_retention_ms: 1_000_000,
        };
        let bases = log.segment_base_offsets();
        let out = log.compact(&keep_tombstones).unwrap();
        prop_assert_eq!(log.segment_base_offsets(), bases.clone());
        let expected = model_compact(&all, *bases.last().unwrap(), false);
        assert_log_is(&log, &expected, all.len() as i64)?;

        // Second round: more writes, a pass from where the first one stopped.
        for b in &second {
            all.extend(push_batch(&mut log, b, 2_000));
        }
        let bases = log.segment_base_offsets();
        let dirty_from = out.map_or(0, |o| o.first_dirty_offset);
        log.compact(&CompactParams { first_dirty_offset: dirty_from, ..keep_tombstones }).unwrap();
        prop_assert_eq!(log.segment_base_offsets(), bases.clone());
        let active_base = *bases.last().unwrap();
        let expected = model_compact(&all, active_base, false);
        assert_log_is(&log, &expected, all.len() as i64)?;

        // Past delete.retention.ms: the tombstones of the cleanable segments go, nothing else.
        let late = CompactParams { now_ms: 10_000_000, delete_retention_ms: 1_000, ..keep_tombstones };
        log.compact(&late).unwrap();
        prop_assert_eq!(log.segment_base_offsets(), bases);
        let mut expected = model_compact(&all, active_base, true);
        assert_log_is(&log, &expected, all.len() as i64)?;

        // Recovery from offset 0 reads the compacted log back; appends continue at the same end.
        drop(log);
        let (mut log, report) =
            PartitionLog::open(dir.path(), small(segment_bytes), 0, None, 0).unwrap();
        prop_assert_eq!(report.truncated_bytes, 0);
        assert_log_is(&log, &expected, all.len() as i64)?;
        expected.extend(push_batch(&mut log, &[(0, false)], 3_000));
        assert_log_is(&log, &expected, all.len() as i64 + 1)?;
    }
}

// ---------------------------------------------------------------- crash during the swap

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// A crash state of the swap of segment `base`, built from the directory before (`old`) and
/// after (`new`) a compaction pass. `new_before`: segments below `base` were already swapped.
#[derive(Debug, Clone, Copy)]
enum CrashAt {
    /// `.cleaned` being written (torn): old segment intact.
    CleanedTorn,
    /// `.cleaned` complete and synced, not yet renamed.
    CleanedWritten,
    /// Indexes removed, `.cleaned` not yet renamed over the `.log`.
    IndexesRemoved,
    /// Renamed, the segment not reopened: new `.log`, no indexes.
    Renamed,
    /// The rename reached the disk but the index removals did not: new `.log`, stale indexes.
    RenamedStaleIndexes,
    /// A `.swap` file (Kafka's name for a swap in progress) beside the old segment.
    SwapFile,
}

fn build_crash_state(old: &Path, new: &Path, to: &Path, base: i64, at: CrashAt, new_before: bool) {
    copy_dir(old, to);
    if new_before {
        for e in std::fs::read_dir(new).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            let seg_base: i64 = name[..20].parse().unwrap();
            if seg_base < base && !name.ends_with(".snapshot") {
                std::fs::copy(new.join(&name), to.join(&name)).unwrap();
            }
        }
    }
    let log = file_name(base, "log");
    let new_log = std::fs::read(new.join(&log)).unwrap();
    let cleaned = to.join(format!("{log}.cleaned"));
    let rm_indexes = || {
        std::fs::remove_file(to.join(file_name(base, "index"))).unwrap();
        std::fs::remove_file(to.join(file_name(base, "timeindex"))).unwrap();
    };
    match at {
        CrashAt::CleanedTorn => std::fs::write(&cleaned, &new_log[..new_log.len() / 2]).unwrap(),
        CrashAt::CleanedWritten => std::fs::write(&cleaned, &new_log).unwrap(),
        CrashAt::IndexesRemoved => {
            std::fs::write(&cleaned, &new_log).unwrap();
            rm_indexes();
        }
        CrashAt::Renamed => {
            std::fs::write(to.join(&log), &new_log).unwrap();
            rm_indexes();
        }
        CrashAt::RenamedStaleIndexes => std::fs::write(to.join(&log), &new_log).unwrap(),
        CrashAt::SwapFile => std::fs::write(to.join(format!("{log}.swap")), &new_log).unwrap(),
    }
}

/// Records of `recs` in `[from, to)`.
fn range(recs: &[Rec], from: i64, to: i64) -> Vec<Rec> {
    recs.iter()
        .filter(|r| r.0 >= from && r.0 < to)
        .cloned()
        .collect()
}

#[test]
fn crash_during_the_swap_leaves_the_old_or_the_new_segment() {
    let work = tempfile::tempdir().unwrap();
    let (old, new) = (work.path().join("old"), work.path().join("new"));
    let (mut log, _) = PartitionLog::open(&old, small(250), 0, None, 0).unwrap();
    let mut all = Vec::new();
    for i in 0..40u8 {
        let recs: Vec<_> = (0..1 + i % 3)
            .map(|j| ((i + j) % 5, (i + j) % 7 == 6))
            .collect();
        all.extend(push_batch(&mut log, &recs, 1_000));
    }
    let bases = log.segment_base_offsets();
    let log_end = log.log_end_offset();
    assert!(bases.len() >= 5, "{bases:?}");
    log.flush().unwrap();
    drop(log);
    copy_dir(&old, &new);
    let (mut log, _) = PartitionLog::open(&new, small(250), log_end, None, 0).unwrap();
    let params = CompactParams {
        now_ms: 10_000_000,
        first_dirty_offset: 0,
        min_cleanable_ratio: 0.0,
        min_compaction_lag_ms: 0,
        delete_retention_ms: 1_000,
    };
    assert!(log.compact(&params).unwrap().unwrap().segments_rewritten >= 2);
    let compacted = all_records(&log, 0);
    drop(log);
    let mut latest = std::collections::BTreeMap::new();
    for r in &all {
        latest.insert(r.1.clone(), r.clone());
    }

    let states = [
        CrashAt::CleanedTorn,
        CrashAt::CleanedWritten,
        CrashAt::IndexesRemoved,
        CrashAt::Renamed,
        CrashAt::RenamedStaleIndexes,
        CrashAt::SwapFile,
    ];
    let mut case = 0;
    // The first, a middle and the last inactive segment (each case copies and fsyncs a log).
    let inactive = &bases[..bases.len() - 1];
    for base in [
        inactive[0],
        inactive[inactive.len() / 2],
        inactive[inactive.len() - 1],
    ] {
        for at in states {
            for new_before in [false, true] {
                for recovery_point in [0, log_end] {
                    case += 1;
                    let dir = work.path().join(format!("case{case}"));
                    build_crash_state(&old, &new, &dir, base, at, new_before);
                    let what = format!(
                        "segment {base} {at:?} new_before={new_before} rp={recovery_point}"
                    );
                    let (mut log, _) =
                        PartitionLog::open(&dir, small(250), recovery_point, None, 0)
                            .unwrap_or_else(|e| panic!("{what}: open failed: {e}"));
                    let leftovers: Vec<_> = std::fs::read_dir(&dir)
                        .unwrap()
                        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                        .filter(|n| n.ends_with(".cleaned") || n.ends_with(".swap"))
                        .collect();
                    assert!(leftovers.is_empty(), "{what}: {leftovers:?}");
                    assert_eq!(log.segment_base_offsets(), bases, "{what}");
                    assert_eq!(log.log_end_offset(), log_end, "{what}");
                    let got = all_records(&log, 0);
                    // Every segment reads back whole, either as it was or as compacted.
                    for (i, &b) in bases.iter().enumerate() {
                        let end = bases.get(i + 1).copied().unwrap_or(log_end);
                        let seg = range(&got, b, end);
                        assert!(
                            seg == range(&all, b, end) || seg == range(&compacted, b, end),
                            "{what}: segment {b} is neither old nor compacted: {seg:?}"
                        );
                    }
                    for r in latest.values() {
                        assert!(
                            got.contains(r) || r.2.is_none(),
                            "{what}: latest {r:?} lost"
                        );
                    }
                    // Appends continue, and survive another reopen.
                    let more = push_batch(&mut log, &[(1, false), (2, false)], 5_000);
                    drop(log);
                    let (log, report) = PartitionLog::open(&dir, small(250), 0, None, 0).unwrap();
                    assert_eq!(report.truncated_bytes, 0, "{what}");
                    let mut want = got.clone();
                    want.extend(more);
                    assert_eq!(all_records(&log, 0), want, "{what}");
                }
            }
        }
    }
}

/// A swap step that fails (here: removing an index that has become a directory) leaves the log
/// serving what it served before, and a later pass completes the compaction.
#[test]
fn a_failed_swap_keeps_the_segment_in_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = PartitionLog::open(dir.path(), small(250), 0, None, 0).unwrap();
    let mut all = Vec::new();
    for i in 0..30u8 {
        all.extend(push_batch(&mut log, &[(i % 3, false)], 1_000));
    }
    let bases = log.segment_base_offsets();
    assert!(bases.len() >= 3, "{bases:?}");
    let before = all_records(&log, 0);
    let index = dir.path().join(file_name(bases[0], "index"));
    std::fs::remove_file(&index).unwrap();
    std::fs::create_dir(&index).unwrap();
    let params = CompactParams {
        now_ms: 10_000,
        first_dirty_offset: 0,
        min_cleanable_ratio: 0.0,
        min_compaction_lag_ms: 0,
        delete_retention_ms: 1_000_000,
    };
    assert!(log.compact(&params).is_err(), "removing the index fails");
    assert_eq!(log.segment_base_offsets(), bases);
    assert_eq!(
        all_records(&log, 0),
        before,
        "the log still reads as before"
    );
    let more = push_batch(&mut log, &[(1, false)], 2_000);

    std::fs::remove_dir(&index).unwrap();
    log.compact(&params).unwrap().expect("a pass ran");
    all.extend(more);
    let active_base = *log.segment_base_offsets().last().unwrap();
    let expected = model_compact(&all, active_base, false);
    assert_eq!(all_records(&log, 0), expected);
    drop(log);
    let (log, report) = PartitionLog::open(dir.path(), small(250), 0, None, 0).unwrap();
    assert_eq!(report.truncated_bytes, 0);
    assert_eq!(all_records(&log, 0), expected);
}

#[test]
fn compaction_keeps_the_txn_index_of_a_rewritten_segment() {
    use crate::log::AbortedTxn;
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = PartitionLog::open(dir.path(), small(300), 0, None, 0).unwrap();
    for round in 0..3 {
        push_kv(&mut log, "k", Some(&format!("k{round}")), 1000);
    }
    let txn = AbortedTxn {
        producer_id: 7,
        first_offset: 0,
        last_offset: 2,
        last_stable_offset: 3,
    };
    log.append_aborted_txn(txn).unwrap();
    for _ in 0..6 {
        push_kv(&mut log, "z", Some("z9"), 1000);
    }
    assert!(log.segment_base_offsets().len() > 1);
    let params = CompactParams {
        now_ms: 10_000,
        first_dirty_offset: 0,
        min_cleanable_ratio: 0.0,
        min_compaction_lag_ms: 0,
        delete_retention_ms: 0,
    };
    let outcome = log.compact(&params).unwrap().expect("a pass ran");
    assert!(outcome.segments_rewritten >= 1);
    let txn_path = dir.path().join(file_name(0, "txnindex"));
    assert_eq!(std::fs::read(&txn_path).unwrap(), txn.encode().to_vec());
    assert_eq!(log.collect_aborted_txns(0, 10), vec![txn]);
    drop(log);
    let (log, _) = PartitionLog::open(dir.path(), small(300), 0, None, 0).unwrap();
    assert_eq!(log.collect_aborted_txns(0, 10), vec![txn]);
}
