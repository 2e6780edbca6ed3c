//! Recovery tests of `DiskStorage`: round trip, raft's overwrite semantics, torn tails, CRC
//! damage at every byte of a record, compaction after a snapshot.

use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom, Write};

use raft::prelude::{Entry, HardState, Snapshot};

use super::*;

fn entry(index: u64, term: u64, data: &str) -> Entry {
    Entry {
        index,
        term,
        data: bytes::Bytes::copy_from_slice(data.as_bytes()),
        ..Entry::default()
    }
}

fn hs(term: u64, vote: u64, commit: u64) -> HardState {
    HardState {
        term,
        vote,
        commit,
        ..HardState::default()
    }
}

fn append(disk: &mut DiskStorage, entries: Vec<Entry>, h: Option<HardState>) {
    disk.persist(&Persist {
        snapshot: None,
        entries,
        hard_state: h,
    })
    .expect("persist");
}

fn indexes(rec: &Recovered) -> Vec<(u64, u64)> {
    rec.entries.iter().map(|e| (e.index, e.term)).collect()
}

#[test]
fn entries_and_hard_state_round_trip_with_raft_overwrites() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut disk, rec) = DiskStorage::open(dir.path()).expect("open");
    assert!(rec.entries.is_empty() && rec.snapshot.is_none());
    append(
        &mut disk,
        vec![entry(1, 1, "a"), entry(2, 1, "b"), entry(3, 1, "c")],
        Some(hs(1, 1, 1)),
    );
    // A new leader overwrites index 2 onwards.
    append(&mut disk, vec![entry(2, 2, "B")], Some(hs(2, 2, 2)));
    drop(disk);
    let (_, rec) = DiskStorage::open(dir.path()).expect("reopen");
    assert_eq!(indexes(&rec), vec![(1, 1), (2, 2)]);
    assert_eq!(&rec.entries[1].data[..], b"B");
    assert_eq!(rec.hard_state, hs(2, 2, 2));
    assert_eq!(rec.truncated_bytes, 0);
}

#[test]
fn a_torn_tail_is_cut_at_the_last_whole_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut disk, _) = DiskStorage::open(dir.path()).expect("open");
    append(&mut disk, vec![entry(1, 1, "a")], Some(hs(1, 1, 1)));
    let good = disk.log_bytes();
    append(&mut disk, vec![entry(2, 1, "bbbbbbbb")], None);
    let mid = disk.log_bytes();
    append(&mut disk, Vec::new(), Some(hs(1, 1, 2)));
    let full = disk.log_bytes();
    drop(disk);
    let bytes = std::fs::read(dir.path().join("raft.log")).expect("read");
    for cut in good + 1..full {
        let copy = tempfile::tempdir().expect("tempdir");
        std::fs::write(copy.path().join("raft.log"), &bytes[..cut as usize]).expect("write");
        let (disk, rec) = DiskStorage::open(copy.path()).expect("open torn");
        // The last whole record before the cut survives, nothing after it.
        let (want, valid) = if cut < mid {
            (vec![(1, 1)], good)
        } else {
            (vec![(1, 1), (2, 1)], mid)
        };
        assert_eq!(indexes(&rec), want, "cut at {cut}");
        assert_eq!(rec.hard_state, hs(1, 1, 1), "cut at {cut}");
        assert_eq!(rec.truncated_bytes, cut - valid, "cut at {cut}");
        assert_eq!(disk.log_bytes(), valid, "file truncated, cut at {cut}");
    }
}

#[test]
fn a_damaged_byte_anywhere_in_a_record_drops_it_and_everything_after() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut disk, _) = DiskStorage::open(dir.path()).expect("open");
    append(&mut disk, vec![entry(1, 1, "a")], Some(hs(1, 1, 1)));
    let good = disk.log_bytes();
    append(&mut disk, vec![entry(2, 1, "second")], Some(hs(1, 1, 2)));
    append(&mut disk, vec![entry(3, 1, "third")], None);
    let full = disk.log_bytes();
    drop(disk);
    let original = std::fs::read(dir.path().join("raft.log")).expect("read");
    // Every byte of the second entry's record (header, CRC, body).
    for at in good..good + 20 {
        let copy = tempfile::tempdir().expect("tempdir");
        let mut bytes = original.clone();
        bytes[at as usize] ^= 0x5A;
        std::fs::write(copy.path().join("raft.log"), &bytes).expect("write");
        let (mut disk, rec) = DiskStorage::open(copy.path()).expect("open damaged");
        assert_eq!(indexes(&rec), vec![(1, 1)], "damage at {at}");
        assert_eq!(rec.truncated_bytes, full - good, "damage at {at}");
        // Appending after recovery continues a valid journal.
        append(&mut disk, vec![entry(2, 2, "again")], Some(hs(2, 2, 2)));
        drop(disk);
        let (_, rec) = DiskStorage::open(copy.path()).expect("reopen");
        assert_eq!(indexes(&rec), vec![(1, 1), (2, 2)], "damage at {at}");
        assert_eq!(rec.truncated_bytes, 0);
    }
}

#[test]
fn a_commit_index_beyond_the_recovered_log_is_lowered() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut disk, _) = DiskStorage::open(dir.path()).expect("open");
    append(&mut disk, vec![entry(1, 1, "a")], Some(hs(1, 1, 5)));
    drop(disk);
    let (_, rec) = DiskStorage::open(dir.path()).expect("reopen");
    assert_eq!(rec.hard_state.commit, 1);
}

#[test]
fn a_snapshot_compacts_the_journal_and_recovery_skips_what_it_covers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut disk, _) = DiskStorage::open(dir.path()).expect("open");
    let many: Vec<Entry> = (1..=50).map(|i| entry(i, 1, "0123456789")).collect();
    append(&mut disk, many, Some(hs(1, 1, 50)));
    let before = disk.log_bytes();
    let mut snap = Snapshot::default();
    snap.mut_metadata().index = 48;
    snap.mut_metadata().term = 1;
    snap.set_data(bytes::Bytes::from_static(b"state@48"));
    disk.persist(&Persist {
        snapshot: Some(snap),
        entries: vec![entry(49, 1, "0123456789"), entry(50, 1, "0123456789")],
        hard_state: Some(hs(1, 1, 50)),
    })
    .expect("snapshot");
    assert!(disk.log_bytes() < before / 10, "journal was rewritten");
    append(&mut disk, vec![entry(51, 1, "x")], None);
    drop(disk);
    let (_, rec) = DiskStorage::open(dir.path()).expect("reopen");
    let s = rec.snapshot.as_ref().expect("snapshot");
    assert_eq!(
        (s.get_metadata().index, &s.data[..]),
        (48, &b"state@48"[..])
    );
    assert_eq!(indexes(&rec), vec![(49, 1), (50, 1), (51, 1)]);
    assert_eq!(rec.hard_state.commit, 50);
}

#[test]
fn a_damaged_snapshot_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut disk, _) = DiskStorage::open(dir.path()).expect("open");
    let mut snap = Snapshot::default();
    snap.mut_metadata().index = 1;
    snap.mut_metadata().term = 1;
    disk.persist(&Persist {
        snapshot: Some(snap),
        entries: Vec::new(),
        hard_state: Some(hs(1, 1, 1)),
    })
    .expect("snapshot");
    drop(disk);
    let path = dir.path().join("raft.snapshot");
    let mut f = OpenOptions::new().write(true).open(&path).expect("open");
    f.seek(SeekFrom::Start(9)).expect("seek");
    f.write_all(&[0xEE]).expect("write");
    drop(f);
    let err = DiskStorage::open(dir.path()).expect_err("damaged snapshot");
    assert!(matches!(err, StorageError::DamagedSnapshot { .. }), "{err}");
    assert!(err.to_string().contains("raft.snapshot"), "{err}");
}
