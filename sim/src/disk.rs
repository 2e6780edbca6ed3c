//! `SimDisk`: a voter's `raft.snapshot` and `raft.log` journal kept in memory, written and
//! recovered with the real record format and recovery code of `sluice::quorum::storage`
//! (`journal_bytes`, `compacted_journal_bytes`, `recover_journal`), so a crash mid-write leaves
//! exactly the torn tail a real file would.
//!
//! Model: `persist` is the fsynced append of one step. A crash during a write keeps a random
//! prefix of that write (a torn tail) or all of it (written, but the step's messages never left);
//! recovery cuts a torn tail at the last whole record, as on disk. A step with a snapshot is
//! `DiskStorage::persist`'s two atomic file replacements (temp file, fsync, rename): the snapshot,
//! then the journal rewritten to the entries after it (compaction); a crash or a failed write
//! leaves the old snapshot and journal, the new snapshot beside the old journal (whose entries
//! the snapshot covers are skipped at recovery), or both new: never a torn snapshot.
//! `terms` mirrors the entry terms durably in the journal after the snapshot (index `i` at
//! `terms[i - first]`), for the invariant checks; indexes the snapshot covers are
//! `snapshot_index()`'s.
//!
//! Disk faults (`DiskFault`, armed by the world): EIO on the next write (a random prefix of it
//! reached the file, all of it when only the fsync failed), a full disk (every write fails with
//! ENOSPC after the prefix that fit, until space is freed), a slow disk (every write stalls the
//! voter). A failed write is `persist`'s error, as `DiskStorage::persist` returns it; the real
//! quorum stops on it (`Quorum::drain`), and so does the simulated voter.
//! No I/O, no clock (time is an argument).

use std::collections::VecDeque;

use raft::prelude::Snapshot;
use sluice::quorum::node::Persist;
use sluice::quorum::storage::{
    compacted_journal_bytes, journal_bytes, recover_journal, Recovered, StorageError,
};

use crate::rng::SimRng;

/// How a crash during the next write ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TornWrite {
    /// A random prefix of the write reached the disk (the unsynced tail is lost).
    Torn,
    /// The whole write reached the disk, but the process died before sending anything.
    Kept,
}

/// A fault of a voter's disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskFault {
    /// The next write fails with EIO.
    Eio,
    /// Every write until `until` (simulated ms) fails with ENOSPC.
    Full { until: u64 },
    /// Every write until `until` takes `ms` (the fsync stalls; the write succeeds).
    Slow { until: u64, ms: u64 },
}

/// What a write did: how long it stalled the voter (ms).
pub type Stall = u64;

/// Writes a lying disk loses at a crash (`LyingFsync`).
const LYING_WRITES: usize = 16;

/// How far a step with a snapshot got before a crash or a failed write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SnapshotStage {
    /// Neither file replaced.
    Nothing,
    /// `raft.snapshot` replaced, the journal not yet rewritten.
    Snapshot,
    /// Both replaced.
    Both,
}

#[derive(Debug, Default, Clone)]
pub struct SimDisk {
    /// `raft.snapshot` (replaced whole, never torn).
    snapshot: Option<Snapshot>,
    journal: Vec<u8>,
    /// Terms of the journal's entries after the snapshot, from index `first_index()`.
    terms: Vec<u64>,
    /// Lengths of the latest writes (newest last), for the `LyingFsync` mutation.
    recent_writes: VecDeque<usize>,
    /// The armed fault (`None`: a healthy disk).
    pub fault: Option<DiskFault>,
    /// Snapshots made durable (compactions and installs).
    pub snapshots_written: u64,
}

impl SimDisk {
    /// Index of the durable snapshot (0: none).
    pub fn snapshot_index(&self) -> u64 {
        self.snapshot.as_ref().map_or(0, |s| s.get_metadata().index)
    }

    fn first_index(&self) -> u64 {
        self.snapshot_index() + 1
    }

    /// The fsynced append of one step (`DiskStorage::persist`).
    pub fn persist(&mut self, p: &Persist) -> Result<(), StorageError> {
        if p.snapshot.is_some() {
            return self.persist_snapshot(p, SnapshotStage::Both);
        }
        let bytes = journal_bytes(p)?;
        self.journal.extend_from_slice(&bytes);
        self.note_write(bytes.len());
        let first = self.first_index();
        for e in &p.entries {
            if e.index < first {
                continue;
            }
            self.terms.truncate((e.index - first) as usize);
            self.terms.push(e.term);
        }
        Ok(())
    }

    fn note_write(&mut self, len: usize) {
        self.recent_writes.push_back(len);
        if self.recent_writes.len() > LYING_WRITES {
            self.recent_writes.pop_front();
        }
    }

    /// A step with a snapshot, as far as `stage`: the snapshot file replaced, then the journal
    /// rewritten (each atomically).
    fn persist_snapshot(&mut self, p: &Persist, stage: SnapshotStage) -> Result<(), StorageError> {
        let Some(snap) = &p.snapshot else {
            return Ok(());
        };
        let bytes = compacted_journal_bytes(p)?;
        if stage == SnapshotStage::Nothing {
            return Ok(());
        }
        let old_first = self.first_index();
        self.snapshot = Some(snap.clone());
        self.snapshots_written += 1;
        let first = self.first_index();
        if stage == SnapshotStage::Snapshot {
            // The old journal stays: what it holds after the snapshot still counts.
            let skip = (first - old_first.min(first)) as usize;
            self.terms.drain(..skip.min(self.terms.len()));
            return Ok(());
        }
        self.journal = bytes;
        self.recent_writes.clear();
        self.note_write(self.journal.len());
        self.terms = p
            .entries
            .iter()
            .filter(|e| e.index >= first)
            .map(|e| e.term)
            .collect();
        Ok(())
    }

    fn snapshot_stage(how: TornWrite, rng: &mut SimRng) -> SnapshotStage {
        match how {
            TornWrite::Kept => SnapshotStage::Both,
            TornWrite::Torn => match rng.below(3) {
                0 => SnapshotStage::Nothing,
                1 => SnapshotStage::Snapshot,
                _ => SnapshotStage::Both,
            },
        }
    }

    /// The write of one step on a disk that may be faulty (the armed `fault`) at `now`: a failed
    /// write leaves a prefix of its bytes in the journal (the torn tail recovery cuts).
    pub fn write(
        &mut self,
        p: &Persist,
        now: u64,
        rng: &mut SimRng,
    ) -> Result<Stall, StorageError> {
        let fail = |errno: &str| StorageError::Io {
            path: "raft.log".into(),
            source: std::io::Error::other(format!("{errno} (simulated disk fault)")),
        };
        match self.fault {
            Some(DiskFault::Eio) => {
                self.fault = None;
                let how = if rng.chance(0.5) {
                    TornWrite::Torn
                } else {
                    TornWrite::Kept
                };
                self.crash_during(p, how, rng);
                Err(fail("EIO"))
            }
            Some(DiskFault::Full { until }) if now < until => {
                if p.snapshot.is_some() {
                    // A temp file did not fit: the snapshot, or the rewritten journal, is missing.
                    let stage = if rng.chance(0.5) {
                        SnapshotStage::Nothing
                    } else {
                        SnapshotStage::Snapshot
                    };
                    let _ = self.persist_snapshot(p, stage);
                    return Err(fail("ENOSPC"));
                }
                let Ok(bytes) = journal_bytes(p) else {
                    return Err(fail("ENOSPC"));
                };
                // What fit: strictly less than the whole write.
                let keep = rng.below(bytes.len());
                self.journal.extend_from_slice(&bytes[..keep]);
                Err(fail("ENOSPC"))
            }
            Some(DiskFault::Slow { until, ms }) if now < until => self.persist(p).map(|()| ms),
            Some(_) => {
                self.fault = None;
                self.persist(p).map(|()| 0)
            }
            None => self.persist(p).map(|()| 0),
        }
    }

    /// A crash during the write of `p`: what reaches the disk.
    pub fn crash_during(&mut self, p: &Persist, how: TornWrite, rng: &mut SimRng) {
        if p.snapshot.is_some() {
            let stage = Self::snapshot_stage(how, rng);
            let _ = self.persist_snapshot(p, stage);
            return;
        }
        let Ok(bytes) = journal_bytes(p) else {
            return;
        };
        let keep = match how {
            TornWrite::Kept => bytes.len(),
            TornWrite::Torn => rng.below(bytes.len() + 1),
        };
        self.journal.extend_from_slice(&bytes[..keep]);
    }

    /// The mutation `LyingFsync`: the latest writes "fsynced" never reached the disk.
    pub fn lose_recent_writes(&mut self) {
        let lost: usize = self.recent_writes.drain(..).sum();
        let keep = self.journal.len().saturating_sub(lost);
        self.journal.truncate(keep);
    }

    pub fn journal_len(&self) -> usize {
        self.journal.len()
    }

    /// Recovery at restart (`DiskStorage::open`): the torn tail is cut off the journal.
    pub fn recover(&mut self) -> Recovered {
        let (rec, valid) = recover_journal(self.snapshot.clone(), &self.journal);
        self.journal.truncate(valid);
        self.terms = rec.entries.iter().map(|e| e.term).collect();
        rec
    }

    /// Term of the durable entry at `index` (1-based): an entry of the journal after the
    /// snapshot, or the snapshot's own index and term; `None` below the snapshot (covered, its
    /// terms are not kept) or past the log.
    pub fn term_at(&self, index: u64) -> Option<u64> {
        let snap = self.snapshot.as_ref().map(|s| s.get_metadata());
        if let Some(m) = snap.filter(|m| m.index == index) {
            return Some(m.term);
        }
        index
            .checked_sub(self.first_index())
            .and_then(|i| self.terms.get(i as usize))
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raft::prelude::{Entry, HardState};
    use std::collections::BTreeSet;

    fn step(index: u64, term: u64) -> Persist {
        let e = Entry {
            index,
            term,
            data: vec![index as u8; 40].into(),
            ..Default::default()
        };
        let hs = HardState {
            term,
            commit: index.saturating_sub(1),
            ..Default::default()
        };
        Persist {
            snapshot: None,
            entries: vec![e],
            hard_state: Some(hs),
        }
    }

    #[test]
    fn disk_faults_fail_writes_as_the_real_storage_does() {
        let mut rng = SimRng::new(9);
        let mut disk = SimDisk::default();
        assert_eq!(disk.write(&step(1, 1), 0, &mut rng).unwrap(), 0);
        let synced = disk.journal_len();
        // EIO: one write fails (a prefix or all of it reached the file), the next succeeds.
        disk.fault = Some(DiskFault::Eio);
        let e = disk.write(&step(2, 1), 10, &mut rng).unwrap_err();
        assert!(e.to_string().contains("EIO"), "{e}");
        assert_eq!(disk.fault, None);
        assert!(disk.journal_len() >= synced);
        let mut after_eio = disk.clone();
        let rec = after_eio.recover();
        assert!(matches!(rec.entries.len(), 1 | 2), "{}", rec.entries.len());
        // A full disk: every write fails until space is freed, then the fault is gone.
        let mut disk = after_eio;
        let whole = disk.clone().recover().entries.len();
        let len = disk.journal_len();
        disk.fault = Some(DiskFault::Full { until: 100 });
        for now in [20, 50, 99] {
            let e = disk.write(&step(3, 1), now, &mut rng).unwrap_err();
            assert!(e.to_string().contains("ENOSPC"), "{e}");
        }
        let torn = disk.journal_len() > len;
        assert!(torn, "the failed writes left part of their bytes");
        assert_eq!(disk.write(&step(3, 1), 100, &mut rng).unwrap(), 0);
        assert_eq!(disk.fault, None);
        // A slow disk: writes succeed, each stalls the voter, until the fault ends.
        disk.fault = Some(DiskFault::Slow {
            until: 200,
            ms: 700,
        });
        assert_eq!(disk.write(&step(4, 1), 150, &mut rng).unwrap(), 700);
        assert_eq!(disk.write(&step(5, 1), 200, &mut rng).unwrap(), 0);
        // Recovery cuts at the first torn record: what a voter wrote after a failed write is
        // lost, which is why a failed write stops the voter (the real quorum's rule).
        let rec = disk.clone().recover();
        assert_eq!(rec.entries.len(), whole);
    }

    /// A compaction at `index` (the state machine's bytes `data`) keeping the entries after it.
    fn compaction(index: u64, term: u64, after: &[Persist], data: u8) -> Persist {
        let mut snap = Snapshot::default();
        snap.set_data(vec![data; 30].into());
        snap.mut_metadata().index = index;
        snap.mut_metadata().term = term;
        Persist {
            snapshot: Some(snap),
            entries: after.iter().flat_map(|p| p.entries.clone()).collect(),
            hard_state: after.last().and_then(|p| p.hard_state.clone()),
        }
    }

    #[test]
    fn a_snapshot_replaces_the_old_one_whole_and_compacts_the_journal() {
        let mut disk = SimDisk::default();
        let steps: Vec<Persist> = (1..=6).map(|i| step(i, 1 + i / 4)).collect();
        for p in &steps {
            disk.persist(p).unwrap();
        }
        let before = disk.journal_len();
        disk.persist(&compaction(3, 1, &steps[3..], 7)).unwrap();
        assert!(disk.journal_len() < before, "the journal was rewritten");
        assert_eq!(disk.snapshot_index(), 3);
        assert_eq!(disk.snapshots_written, 1);
        // Compacted indexes: the snapshot's own term, none below it, the journal's above.
        assert_eq!(disk.term_at(3), Some(1));
        assert_eq!(disk.term_at(2), None);
        assert_eq!(disk.term_at(4), Some(2));
        assert_eq!(disk.term_at(6), Some(2));
        assert_eq!(disk.term_at(7), None);
        let rec = disk.clone().recover();
        assert_eq!(
            rec.snapshot.as_ref().map(|s| s.get_metadata().index),
            Some(3)
        );
        let idx: Vec<u64> = rec.entries.iter().map(|e| e.index).collect();
        assert_eq!(idx, vec![4, 5, 6]);
        assert_eq!(rec.hard_state.commit, 5);
        // A crash during the next compaction leaves the old snapshot or the new one, whole, with
        // the old journal (entries the new snapshot covers are skipped) or the rewritten one.
        let next = step(7, 2);
        disk.persist(&next).unwrap();
        let mut rng = SimRng::new(5);
        let mut seen = BTreeSet::new();
        for _ in 0..40 {
            let mut d = disk.clone();
            d.crash_during(
                &compaction(6, 2, std::slice::from_ref(&next), 9),
                TornWrite::Torn,
                &mut rng,
            );
            let old_journal = d.journal_len() == disk.journal_len();
            let rec = d.recover();
            let snap = rec.snapshot.as_ref().map(|s| s.get_metadata().index);
            let data = rec.snapshot.as_ref().map(|s| s.data[0]);
            let idx: Vec<u64> = rec.entries.iter().map(|e| e.index).collect();
            match snap {
                Some(3) => assert_eq!((data, idx), (Some(7), vec![4, 5, 6, 7])),
                Some(6) => assert_eq!((data, idx), (Some(9), vec![7])),
                other => panic!("snapshot {other:?}"),
            }
            assert_eq!(d.term_at(7), Some(2));
            assert_eq!(d.term_at(6), Some(2));
            seen.insert((snap, old_journal));
        }
        let all: BTreeSet<_> = [(Some(3), true), (Some(6), true), (Some(6), false)].into();
        assert_eq!(
            seen, all,
            "old, new beside the old journal, new and compacted"
        );
        // A full disk refuses the compaction: the journal is never torn by it.
        let mut d = disk.clone();
        d.fault = Some(DiskFault::Full { until: 100 });
        let c = compaction(6, 2, std::slice::from_ref(&next), 9);
        assert!(d.write(&c, 10, &mut rng).is_err());
        assert_eq!(d.journal_len(), disk.journal_len());
        assert_eq!(d.clone().recover().entries.last().map(|e| e.index), Some(7));
    }

    #[test]
    fn torn_write_is_cut_at_the_last_whole_record() {
        let mut disk = SimDisk::default();
        disk.persist(&step(1, 1)).unwrap();
        disk.persist(&step(2, 1)).unwrap();
        let synced = disk.journal_len();
        let mut rng = SimRng::new(3);
        let mut cut_seen = false;
        for _ in 0..20 {
            let mut d = disk.clone();
            d.crash_during(&step(3, 2), TornWrite::Torn, &mut rng);
            let rec = d.recover();
            assert!(d.journal_len() >= synced);
            let last = rec.entries.last().map(|e| e.index);
            assert!(last == Some(2) || last == Some(3), "{last:?}");
            cut_seen |= last == Some(2);
            assert_eq!(d.term_at(2), Some(1));
        }
        assert!(cut_seen, "some torn writes lose the entry");
        let mut kept = disk.clone();
        kept.crash_during(&step(3, 2), TornWrite::Kept, &mut rng);
        let rec = kept.recover();
        assert_eq!(rec.entries.len(), 3);
        assert_eq!(rec.hard_state.term, 2);
        assert_eq!(kept.term_at(3), Some(2));
    }
}
