//! Transactions at the partition level: LSO, read_committed reads, aborted transactions, the
//! `.txnindex` on disk, and what survives a clean restart and a crash.

use std::fs;
use std::path::Path;

use super::*;
use crate::log::AbortedTxn;
use crate::record::{build_batch, build_transactional_batch, ControlType};

const T: i64 = 1_700_000_000_000;

/// Opens the partition as a single node does after a restart: loaded (no high watermark
/// checkpointed), then led with an ISR of itself, which makes its high watermark its log end.
fn open(dir: &Path, recovery_point: i64) -> Partition {
    let checkpointed = Checkpointed {
        recovery_point,
        ..Checkpointed::default()
    };
    let p = Partition::open("t", 0, dir, LogConfig::default(), checkpointed, T).unwrap();
    let alone = crate::replica::replication::leader::LeaderAndIsr {
        leader_epoch: 0,
        partition_epoch: 0,
        replicas: vec![1],
        isr: vec![1],
    };
    let config = crate::replica::replication::leader::LeaderConfig {
        replica_lag_time_max_ms: 30_000,
        min_insync_replicas: 1,
    };
    assert!(p
        .make_leader(1, config, &alone, Default::default(), T)
        .is_empty());
    p
}

fn settings(origin: AppendOrigin) -> AppendSettings {
    AppendSettings {
        timestamp_type: TimestampType::CreateTime,
        flush: false,
        origin,
    }
}

/// Appends `n` records: transactional from `(pid, epoch, seq)`, or plain without a producer id.
fn produce(p: &Partition, txn: Option<(i64, i16, i32)>, n: usize) -> Result<i64, AppendError> {
    let recs: Vec<record::KeyValue<'_>> = vec![(None, Some(b"v")); n];
    let bytes = Bytes::from(match txn {
        Some(producer) => build_transactional_batch(T, producer, &recs),
        None => build_batch(0, T, (-1, -1, -1), &recs),
    });
    let header = record::validate_batch(&bytes).unwrap();
    p.append(&bytes, &header, settings(AppendOrigin::Client), T)
        .map(|o| o.base_offset)
}

fn marker(p: &Partition, pid: i64, epoch: i16, control: ControlType) -> i64 {
    p.write_txn_marker(pid, epoch, 0, control, false, T)
        .unwrap()
}

/// Base offsets of the batches a read returned.
fn base_offsets(bytes: &[u8]) -> Vec<i64> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let h = BatchHeader::parse(&bytes[pos..]).unwrap();
        out.push(h.base_offset);
        pos += h.total_size();
    }
    out
}

/// Offsets 0 plain; 1-2 txn of producer 1; 3 plain; 4 txn of producer 2; 5 txn of producer 3;
/// 6 abort producer 1; 7 commit producer 2. Producer 3 stays open: LSO 5.
fn scenario(p: &Partition) {
    assert_eq!(produce(p, None, 1).unwrap(), 0);
    assert_eq!(produce(p, Some((1, 0, 0)), 2).unwrap(), 1);
    assert_eq!(produce(p, None, 1).unwrap(), 3);
    assert_eq!(p.offsets().last_stable_offset, 1);
    assert_eq!(produce(p, Some((2, 0, 0)), 1).unwrap(), 4);
    assert_eq!(produce(p, Some((3, 0, 0)), 1).unwrap(), 5);
    assert_eq!(marker(p, 1, 0, ControlType::Abort), 6);
    assert_eq!(p.offsets().last_stable_offset, 4);
    assert_eq!(marker(p, 2, 0, ControlType::Commit), 7);
}

fn assert_scenario_state(p: &Partition) {
    let o = p.offsets();
    assert_eq!(
        (o.high_watermark, o.last_stable_offset, o.log_end_offset),
        (8, 5, 8)
    );
    let read = p.read_committed(0, 1 << 20).unwrap();
    assert_eq!(base_offsets(&read.slice.bytes), vec![0, 1, 3, 4]);
    assert_eq!(read.offsets, o);
    assert_eq!(read.aborted_transactions, vec![(1, 1)]);
    // From offset 4 the aborted transaction (offsets 1..=6) still spans the range [4, 5): Kafka's
    // overlap rule (last offset >= fetch offset, first offset < upper bound) lists it.
    let read = p.read_committed(4, 1 << 20).unwrap();
    assert_eq!(base_offsets(&read.slice.bytes), vec![4]);
    assert_eq!(read.aborted_transactions, vec![(1, 1)]);
    // From offset 7 (past the marker) it is gone.
    let read = p.read_committed(7, 1 << 20).unwrap();
    assert!(read.slice.bytes.is_empty());
    assert_eq!(read.aborted_transactions, vec![]);
    // At the LSO a read_committed read is empty; read_uncommitted still sees everything.
    assert!(p.read_committed(5, 1 << 20).unwrap().slice.bytes.is_empty());
    let (all, _) = p.read(0, 1 << 20).unwrap();
    assert_eq!(base_offsets(&all.bytes), vec![0, 1, 3, 4, 5, 6, 7]);
    let producers = p.active_producers();
    let open: Vec<(i64, Option<i64>)> = producers
        .iter()
        .map(|(id, e)| (*id, e.current_txn_first_offset()))
        .collect();
    assert_eq!(open, vec![(1, None), (2, None), (3, Some(5))]);
}

fn txn_index_bytes(dir: &Path) -> Vec<u8> {
    fs::read(dir.join("00000000000000000000.txnindex")).unwrap_or_default()
}

#[test]
fn read_committed_stops_at_the_lso_and_lists_aborted_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let p = open(dir.path(), 0);
    scenario(&p);
    assert_scenario_state(&p);
    // The abort of producer 1 (data 1..2, marker 6) with the LSO right after it (producer 2's
    // transaction at 4 was still open): exactly Kafka's 34 bytes.
    let entry = AbortedTxn {
        producer_id: 1,
        first_offset: 1,
        last_offset: 6,
        last_stable_offset: 4,
    };
    assert_eq!(txn_index_bytes(dir.path()), entry.encode().to_vec());
    // Committing producer 3 frees the LSO.
    assert_eq!(marker(&p, 3, 0, ControlType::Commit), 8);
    assert_eq!(p.offsets().last_stable_offset, 9);
    let read = p.read_committed(0, 1 << 20).unwrap();
    assert_eq!(
        base_offsets(&read.slice.bytes),
        vec![0, 1, 3, 4, 5, 6, 7, 8]
    );
    assert_eq!(read.aborted_transactions, vec![(1, 1)]);
}

#[test]
fn transaction_rules_surface_as_kafka_errors() {
    let dir = tempfile::tempdir().unwrap();
    let p = open(dir.path(), 0);
    produce(&p, Some((1, 2, 0)), 1).unwrap();
    // A non-transactional batch from the producer inside its transaction.
    let bytes = Bytes::from(build_batch(0, T, (1, 2, 1), &[(None, Some(b"v"))]));
    let header = record::validate_batch(&bytes).unwrap();
    let err = p
        .append(&bytes, &header, settings(AppendOrigin::Client), T)
        .unwrap_err();
    assert!(matches!(err, AppendError::Producer(e) if e.code() == 48));
    // Markers: an older producer epoch, then an older coordinator epoch.
    let old = p
        .write_txn_marker(1, 1, 0, ControlType::Commit, false, T)
        .unwrap_err();
    assert!(matches!(old, AppendError::Producer(e) if e.code() == 47));
    p.write_txn_marker(1, 2, 5, ControlType::Commit, false, T)
        .unwrap();
    let fenced = p
        .write_txn_marker(1, 2, 4, ControlType::Abort, false, T)
        .unwrap_err();
    assert!(matches!(fenced, AppendError::Producer(e) if e.code() == 52));
    assert_eq!(p.offsets().log_end_offset, 2);
}

#[test]
fn a_clean_restart_keeps_open_transactions_lso_and_aborted_index() {
    let dir = tempfile::tempdir().unwrap();
    let p = open(dir.path(), 0);
    scenario(&p);
    let (recovery_point, _) = p.flush_and_snapshot().unwrap();
    drop(p);
    let p = open(dir.path(), recovery_point);
    assert_scenario_state(&p);
    // The open transaction of producer 3 can still be ended, and its abort is indexed.
    assert_eq!(marker(&p, 3, 0, ControlType::Abort), 8);
    let read = p.read_committed(0, 1 << 20).unwrap();
    assert_eq!(read.aborted_transactions, vec![(1, 1), (3, 5)]);
    assert_eq!(txn_index_bytes(dir.path()).len(), 68);
}

#[test]
fn a_crash_is_recovered_by_replay_and_the_txn_index_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let p = open(dir.path(), 0);
    scenario(&p);
    let index_before = txn_index_bytes(dir.path());
    // No flush, no snapshot: as after kill -9. The index write is lost too.
    drop(p);
    fs::remove_file(dir.path().join("00000000000000000000.txnindex")).unwrap();
    let p = open(dir.path(), 0);
    assert_scenario_state(&p);
    assert_eq!(txn_index_bytes(dir.path()), index_before);
    // A damaged index (garbage version) is cut and rebuilt by a full replay, even with a snapshot.
    let (recovery_point, _) = p.flush_and_snapshot().unwrap();
    drop(p);
    let mut bad = index_before.clone();
    bad[1] = 7;
    fs::write(dir.path().join("00000000000000000000.txnindex"), &bad).unwrap();
    let p = open(dir.path(), recovery_point);
    assert_scenario_state(&p);
    assert_eq!(txn_index_bytes(dir.path()), index_before);
}

#[test]
fn log_truncation_cuts_the_txn_index() {
    let dir = tempfile::tempdir().unwrap();
    let p = open(dir.path(), 0);
    scenario(&p);
    drop(p);
    // Cut the log inside the abort marker's batch: recovery drops it and the index entry.
    let log = dir.path().join("00000000000000000000.log");
    let bytes = fs::read(&log).unwrap();
    // The markers at 6 and 7 are the last two batches, of equal size.
    let marker_len = record::build_control_batch(1, 0, 0, ControlType::Abort, T).len();
    let marker_pos = bytes.len() - marker_len * 2;
    fs::write(&log, &bytes[..marker_pos + 10]).unwrap();
    let p = open(dir.path(), 0);
    assert_eq!(p.offsets().log_end_offset, 6);
    assert!(txn_index_bytes(dir.path()).is_empty());
    // Producer 1's transaction is open again (its marker is gone): LSO back at 1.
    assert_eq!(p.offsets().last_stable_offset, 1);
}

#[test]
fn segment_deletion_takes_its_txn_index_along() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 100, // every batch rolls a new segment
        ..LogConfig::default()
    };
    let p = Partition::open("t", 0, dir.path(), config, Checkpointed::default(), T).unwrap();
    assert_eq!(produce(&p, Some((1, 0, 0)), 1).unwrap(), 0);
    assert_eq!(marker(&p, 1, 0, ControlType::Abort), 1);
    assert_eq!(produce(&p, None, 1).unwrap(), 2);
    let txn_index = dir.path().join("00000000000000000001.txnindex");
    assert_eq!(fs::read(&txn_index).unwrap().len(), 34);
    assert_eq!(
        p.read_committed(0, 1 << 20).unwrap().aborted_transactions,
        vec![(1, 0)]
    );
    // DeleteRecords up to 2 removes the segments at 0 and 1, the abort's index with them.
    assert_eq!(p.delete_records_before(2).unwrap(), 2);
    assert!(!txn_index.exists());
    let read = p.read_committed(2, 1 << 20).unwrap();
    assert_eq!(base_offsets(&read.slice.bytes), vec![2]);
    assert_eq!(read.aborted_transactions, vec![]);
}

/// Snapshot files (their offsets) in `dir`, sorted.
pub(super) fn snapshot_offsets(dir: &Path) -> Vec<i64> {
    let mut v: Vec<i64> = fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            name.strip_suffix(".snapshot").and_then(|n| n.parse().ok())
        })
        .collect();
    v.sort();
    v
}

#[test]
fn a_segment_roll_snapshots_producer_state_for_crash_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 400,
        ..LogConfig::default()
    };
    let p = Partition::open(
        "t",
        0,
        dir.path(),
        config.clone(),
        Checkpointed::default(),
        T,
    )
    .unwrap();
    // Idempotent batches of producer 7 (about 130 bytes each): several rolls.
    let value = [b'x'; 60];
    let mut sent = Vec::new();
    for seq in 0..8 {
        let recs: Vec<record::KeyValue<'_>> = vec![(None, Some(&value[..]))];
        let bytes = Bytes::from(build_batch(0, T, (7, 0, seq), &recs));
        let header = record::validate_batch(&bytes).unwrap();
        let o = p
            .append(&bytes, &header, settings(AppendOrigin::Client), T)
            .unwrap();
        sent.push((bytes, header, o.base_offset));
    }
    // Kept: snapshots at the two newest segment bases (the active one's is the newest).
    let snaps = snapshot_offsets(dir.path());
    assert_eq!(snaps.len(), 2, "{snaps:?}");
    assert!(snaps[1] > 0 && snaps[1] <= 7);
    // A snapshot holds the state before its offset: the batch at that offset is not in it.
    let loaded = ProducerStateManager::load_latest_snapshot(dir.path(), 100)
        .unwrap()
        .unwrap();
    assert_eq!(loaded.1, snaps[1]);
    assert_eq!(
        loaded.0.last_offset_for(7),
        Some(snaps[1] - 1),
        "state up to the offset before the roll"
    );
    // Crash (no clean shutdown, recovery point 0) and reopen: the retried last batch is still
    // recognised as a duplicate with its original offset, and the next sequence is accepted.
    drop(p);
    let p = Partition::open("t", 0, dir.path(), config, Checkpointed::default(), T).unwrap();
    let (bytes, header, offset) = &sent[7];
    let again = p
        .append(bytes, header, settings(AppendOrigin::Client), T)
        .unwrap();
    assert_eq!(again.base_offset, *offset);
    assert_eq!(p.offsets().log_end_offset, 8);
    let recs: Vec<record::KeyValue<'_>> = vec![(None, Some(&value[..]))];
    let next = Bytes::from(build_batch(0, T, (7, 0, 8), &recs));
    let h = record::validate_batch(&next).unwrap();
    assert_eq!(
        p.append(&next, &h, settings(AppendOrigin::Client), T)
            .unwrap()
            .base_offset,
        8
    );
}
