//! `SimDisk`: a voter's `raft.log` journal kept in memory, written and recovered with the real
//! record format and recovery code of `sluice::quorum::storage` (`journal_bytes`,
//! `recover_journal`), so a crash mid-write leaves exactly the torn tail a real file would.
//!
//! Model: `persist` is the fsynced append of one step. A crash during a write keeps a random
//! prefix of that write (a torn tail) or all of it (written, but the step's messages never left);
//! recovery cuts a torn tail at the last whole record, as on disk. `terms` mirrors the entry
//! terms durably in the journal (index `i` at `terms[i - 1]`), for the invariant checks.
//! No snapshots: the simulated voters never compact (`snapshot_after_bytes` is unbounded).
//!
//! Disk faults (`DiskFault`, armed by the world): EIO on the next write (a random prefix of it
//! reached the file, all of it when only the fsync failed), a full disk (every write fails with
//! ENOSPC after the prefix that fit, until space is freed), a slow disk (every write stalls the
//! voter). A failed write is `persist`'s error, as `DiskStorage::persist` returns it; the real
//! quorum stops on it (`Quorum::drain`), and so does the simulated voter.
//! No I/O, no clock (time is an argument).

use std::collections::VecDeque;

use sluice::quorum::node::Persist;
use sluice::quorum::storage::{journal_bytes, recover_journal, Recovered, StorageError};

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

#[derive(Debug, Default, Clone)]
pub struct SimDisk {
    journal: Vec<u8>,
    terms: Vec<u64>,
    /// Lengths of the latest writes (newest last), for the `LyingFsync` mutation.
    recent_writes: VecDeque<usize>,
    /// The armed fault (`None`: a healthy disk).
    pub fault: Option<DiskFault>,
}

impl SimDisk {
    /// The fsynced append of one step (`DiskStorage::persist` without a snapshot).
    pub fn persist(&mut self, p: &Persist) -> Result<(), StorageError> {
        if p.snapshot.is_some() {
            return Err(StorageError::Encode(
                "the simulated disk takes no snapshots".into(),
            ));
        }
        let bytes = journal_bytes(p)?;
        self.journal.extend_from_slice(&bytes);
        self.recent_writes.push_back(bytes.len());
        if self.recent_writes.len() > LYING_WRITES {
            self.recent_writes.pop_front();
        }
        for e in &p.entries {
            self.terms.truncate(e.index.saturating_sub(1) as usize);
            self.terms.push(e.term);
        }
        Ok(())
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
        let (rec, valid) = recover_journal(&self.journal);
        self.journal.truncate(valid);
        self.terms = rec.entries.iter().map(|e| e.term).collect();
        rec
    }

    /// Term of the durable entry at `index` (1-based).
    pub fn term_at(&self, index: u64) -> Option<u64> {
        index
            .checked_sub(1)
            .and_then(|i| self.terms.get(i as usize))
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raft::prelude::{Entry, HardState};

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
