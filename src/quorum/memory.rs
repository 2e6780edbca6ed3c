//! `MemoryLog`: the raft log as `RawNode` reads it (raft-rs's `Storage` trait), held in memory.
//!
//! Role: the in-memory mirror of what `storage::DiskStorage` has made durable: the hard state,
//! the latest snapshot (metadata and the state machine's bytes) and the entries after it. The
//! driver (`node::QuorumNode`) updates it in the same step as it hands the same data to the
//! caller to persist, so `RawNode` never reads an entry the caller was not asked to write.
//!
//! Invariants: `entries[0].index == snapshot.index + 1` when entries exist; indexes are
//! contiguous. Performs no I/O; owned by one `QuorumNode` (not shared, not thread-safe).

use raft::prelude::{ConfState, Entry, HardState, Snapshot};
use raft::{GetEntriesContext, RaftState, StorageError};

/// The raft log, hard state and latest snapshot in memory.
#[derive(Debug, Default, Clone)]
pub struct MemoryLog {
    hard_state: HardState,
    conf_state: ConfState,
    snapshot: Snapshot,
    entries: Vec<Entry>,
}

impl MemoryLog {
    /// An empty log for a fixed voter set (no entries, term 0).
    pub fn new(voters: &[u64]) -> MemoryLog {
        let conf_state = ConfState::from((voters.to_vec(), Vec::new()));
        let mut snapshot = Snapshot::default();
        snapshot.mut_metadata().set_conf_state(conf_state.clone());
        MemoryLog {
            conf_state,
            snapshot,
            ..MemoryLog::default()
        }
    }

    pub fn hard_state(&self) -> &HardState {
        &self.hard_state
    }

    pub fn set_hard_state(&mut self, hs: HardState) {
        self.hard_state = hs;
    }

    /// The latest snapshot (index 0 when there is none).
    pub fn snapshot_ref(&self) -> &Snapshot {
        &self.snapshot
    }

    pub fn snapshot_index(&self) -> u64 {
        self.snapshot.get_metadata().index
    }

    fn first(&self) -> u64 {
        self.snapshot_index() + 1
    }

    fn last(&self) -> u64 {
        match self.entries.last() {
            Some(e) => e.index,
            None => self.snapshot_index(),
        }
    }

    /// Appends entries, dropping every entry at or after `ents[0].index` first (raft's conflict
    /// truncation). Entries at or below the snapshot index are skipped; a gap is an error.
    pub fn append(&mut self, ents: &[Entry]) -> Result<(), StorageError> {
        let ents: Vec<&Entry> = ents
            .iter()
            .filter(|e| e.index > self.snapshot_index())
            .collect();
        let Some(first) = ents.first() else {
            return Ok(());
        };
        if first.index > self.last() + 1 {
            return Err(StorageError::Unavailable);
        }
        let keep = (first.index - self.first()) as usize;
        self.entries.truncate(keep);
        self.entries.extend(ents.into_iter().cloned());
        Ok(())
    }

    /// Installs a snapshot: entries up to its index are dropped, later ones kept only when the
    /// snapshot's (index, term) matches the log (own snapshot); otherwise the log is emptied.
    pub fn apply_snapshot(&mut self, snap: Snapshot) {
        let meta = snap.get_metadata();
        let (index, term) = (meta.index, meta.term);
        let matches = self.term_of(index) == Some(term);
        if matches {
            self.entries.retain(|e| e.index > index);
        } else {
            self.entries.clear();
        }
        if self.hard_state.commit < index {
            self.hard_state.commit = index;
        }
        if self.hard_state.term < term {
            self.hard_state.term = term;
        }
        self.conf_state = meta.get_conf_state().clone();
        self.snapshot = snap;
    }

    /// The term of entry `index`, if it is the snapshot's or in the log.
    pub fn term_of(&self, index: u64) -> Option<u64> {
        if index == self.snapshot_index() {
            return Some(self.snapshot.get_metadata().term);
        }
        if index < self.first() || index > self.last() {
            return None;
        }
        Some(self.entries[(index - self.first()) as usize].term)
    }

    /// Entries after the snapshot (for rewriting the durable log after a compaction).
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub fn last_index(&self) -> u64 {
        self.last()
    }
}

impl raft::Storage for MemoryLog {
    fn initial_state(&self) -> raft::Result<RaftState> {
        Ok(RaftState::new(
            self.hard_state.clone(),
            self.conf_state.clone(),
        ))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        if low < self.first() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if high > self.last() + 1 || low > high {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        let lo = (low - self.first()) as usize;
        let hi = (high - self.first()) as usize;
        let mut out = self.entries[lo..hi].to_vec();
        raft::util::limit_size(&mut out, max_size.into());
        Ok(out)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        if idx < self.snapshot_index() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        self.term_of(idx)
            .ok_or(raft::Error::Store(StorageError::Unavailable))
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.first())
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.last())
    }

    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        if self.snapshot_index() < request_index {
            return Err(raft::Error::Store(
                StorageError::SnapshotTemporarilyUnavailable,
            ));
        }
        Ok(self.snapshot.clone())
    }
}
