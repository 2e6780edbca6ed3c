//! The two sparse per-segment indexes, in Kafka's exact file format.
//!
//! - [`OffsetIndex`] (`.index`): 8-byte entries `relativeOffset u32 BE | position u32 BE`. An entry maps
//!   the *last* offset of a batch to the file position where that batch starts (as Kafka writes it).
//! - [`TimeIndex`] (`.timeindex`): 12-byte entries `timestamp i64 BE | relativeOffset u32 BE`, mapping
//!   the largest timestamp seen so far to the last offset of the batch that carried it.
//!
//! Invariants: entries are kept in memory in a `Vec`, strictly increasing by offset (offset index) or by
//! timestamp (time index, offsets non-decreasing). The `Vec` grows with the entries: nothing is
//! preallocated at `segment.index.bytes`, which only bounds the count (so an idle partition's index
//! costs a few bytes). The files hold exactly `entries * entry_size` bytes:
//! no preallocation, so Kafka's DumpLogSegments reads them; they are opened only while being
//! persisted, so an index holds no file descriptor. Indexes are caches of the `.log` file:
//! any file that fails [`OffsetIndex::decode`]/[`TimeIndex::decode`] is rebuilt by the caller.
//!
//! Thread-safety: plain data, `Send + Sync`, no interior mutability; the owning segment serialises access.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::error::{IoContext, LogError};

/// Size of one `.index` entry.
pub const OFFSET_ENTRY_SIZE: usize = 8;
/// Size of one `.timeindex` entry.
pub const TIME_ENTRY_SIZE: usize = 12;

/// One offset-index entry (absolute offset, file position).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetPosition {
    pub offset: i64,
    pub position: u32,
}

/// One time-index entry (timestamp, absolute offset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimestampOffset {
    pub timestamp: i64,
    pub offset: i64,
}

/// Tracks how many entries of an in-memory index are already in its file, so persisting writes only
/// the new tail (or shrinks the file after a truncation). The file is opened only when there is
/// something to write or sync, and closed again: an index holds no descriptor between persists.
#[derive(Debug, Default, Clone, Copy)]
struct Persisted {
    entries: usize,
    /// True when the file may hold entries beyond the in-memory ones (after truncation).
    needs_shrink: bool,
    /// Written since the last fsync.
    unsynced: bool,
}

impl Persisted {
    /// The in-memory entries were cut to `keep`: file entries from `keep` on are stale even if new
    /// entries take their places before the next write, so they must all be rewritten.
    fn truncated(&mut self, keep: usize) {
        self.entries = self.entries.min(keep);
        self.needs_shrink = true;
    }

    fn write(
        &mut self,
        path: &Path,
        len: usize,
        size: usize,
        sync: bool,
        encode: impl Fn(usize, &mut Vec<u8>),
    ) -> Result<(), LogError> {
        let changed = self.needs_shrink || self.entries != len;
        if !(changed || (sync && self.unsynced)) {
            return Ok(());
        }
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .at(path)?;
        if changed {
            // A file that is not what we last wrote (replaced or cut behind our back) is rewritten.
            if file.metadata().at(path)?.len() != (self.entries * size) as u64 {
                self.entries = 0;
                self.needs_shrink = true;
            }
            if self.needs_shrink || self.entries > len {
                file.set_len((len * size) as u64).at(path)?;
                self.entries = self.entries.min(len);
                self.needs_shrink = false;
            }
            if self.entries < len {
                let mut buf = Vec::with_capacity((len - self.entries) * size);
                for i in self.entries..len {
                    encode(i, &mut buf);
                }
                file.write_all_at(&buf, (self.entries * size) as u64)
                    .at(path)?;
                self.entries = len;
            }
            self.unsynced = true;
        }
        if sync {
            file.sync_data().at(path)?;
            self.unsynced = false;
        }
        Ok(())
    }
}

/// Sparse offset -> position index of one segment.
#[derive(Debug, Clone)]
pub struct OffsetIndex {
    base_offset: i64,
    /// (relative offset, position), strictly increasing in both.
    entries: Vec<(u32, u32)>,
    max_entries: usize,
    persisted: Persisted,
}

impl OffsetIndex {
    /// An empty index for the segment starting at `base_offset`, full at `max_entries`.
    pub fn new(base_offset: i64, max_entries: usize) -> OffsetIndex {
        OffsetIndex {
            base_offset,
            entries: Vec::new(),
            max_entries: max_entries.max(1),
            persisted: Persisted::default(),
        }
    }

    /// Parses a `.index` file's bytes. Fails (so the caller rebuilds) if the size is not a multiple of
    /// 8, entries are not strictly increasing, or a position lies beyond `log_size`.
    pub fn decode(
        base_offset: i64,
        max_entries: usize,
        bytes: &[u8],
        log_size: u64,
    ) -> Result<OffsetIndex, String> {
        if !bytes.len().is_multiple_of(OFFSET_ENTRY_SIZE) {
            return Err(format!("size {} is not a multiple of 8", bytes.len()));
        }
        let mut index = OffsetIndex::new(base_offset, max_entries);
        for chunk in bytes.chunks_exact(OFFSET_ENTRY_SIZE) {
            let rel = u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
            let pos = u32::from_be_bytes([chunk[4], chunk[5], chunk[6], chunk[7]]);
            if rel > i32::MAX as u32 {
                return Err(format!("relative offset {rel} overflows"));
            }
            if let Some(&(last_rel, last_pos)) = index.entries.last() {
                if rel <= last_rel || pos <= last_pos {
                    return Err(format!("entry ({rel}, {pos}) does not increase"));
                }
            }
            if pos as u64 >= log_size {
                return Err(format!("position {pos} beyond log size {log_size}"));
            }
            index.entries.push((rel, pos));
        }
        index.persisted.entries = index.entries.len();
        Ok(index)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// True when no further entry may be added: the segment must roll.
    pub fn is_full(&self) -> bool {
        self.entries.len() >= self.max_entries
    }

    /// Adds an entry for the batch ending at `offset` and starting at `position`. Entries that would not
    /// increase the index, or that do not fit, are ignored (an index is only a hint).
    pub fn append(&mut self, offset: i64, position: u32) {
        let rel = offset - self.base_offset;
        if !(0..=i32::MAX as i64).contains(&rel) || self.is_full() {
            return;
        }
        let rel = rel as u32;
        if let Some(&(last_rel, last_pos)) = self.entries.last() {
            if rel <= last_rel || position <= last_pos {
                return;
            }
        }
        self.entries.push((rel, position));
    }

    /// The last entry whose offset is <= `target`, or (base offset, position 0) when there is none.
    pub fn lookup(&self, target: i64) -> OffsetPosition {
        let rel = target - self.base_offset;
        let n = if rel < 0 {
            0
        } else {
            let rel = rel.min(u32::MAX as i64) as u32;
            self.entries.partition_point(|&(r, _)| r <= rel)
        };
        match n {
            0 => OffsetPosition {
                offset: self.base_offset,
                position: 0,
            },
            n => self.entry(n - 1),
        }
    }

    /// The last entry, if any.
    pub fn last(&self) -> Option<OffsetPosition> {
        (!self.entries.is_empty()).then(|| self.entry(self.entries.len() - 1))
    }

    fn entry(&self, i: usize) -> OffsetPosition {
        let (rel, position) = self.entries[i];
        OffsetPosition {
            offset: self.base_offset + rel as i64,
            position,
        }
    }

    /// Drops every entry pointing at or after `position` (the log is being cut there).
    pub fn truncate_to_position(&mut self, position: u32) {
        let keep = self.entries.partition_point(|&(_, p)| p < position);
        if keep < self.entries.len() {
            self.entries.truncate(keep);
            self.persisted.truncated(keep);
        }
    }

    /// Drops every entry.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.persisted.truncated(0);
    }

    /// Brings the file at `path` in line with the in-memory entries, then fsyncs it if `sync`
    /// (opening it only if there is something to do).
    pub fn persist(&mut self, path: &Path, sync: bool) -> Result<(), LogError> {
        let entries = &self.entries;
        self.persisted
            .write(path, entries.len(), OFFSET_ENTRY_SIZE, sync, |i, buf| {
                buf.extend_from_slice(&entries[i].0.to_be_bytes());
                buf.extend_from_slice(&entries[i].1.to_be_bytes());
            })
    }
}

/// Sparse timestamp -> offset index of one segment.
#[derive(Debug, Clone)]
pub struct TimeIndex {
    base_offset: i64,
    /// (timestamp, relative offset): timestamps strictly increasing, offsets non-decreasing.
    entries: Vec<(i64, u32)>,
    max_entries: usize,
    persisted: Persisted,
}

impl TimeIndex {
    /// An empty index for the segment starting at `base_offset`, full at `max_entries`.
    pub fn new(base_offset: i64, max_entries: usize) -> TimeIndex {
        TimeIndex {
            base_offset,
            entries: Vec::new(),
            max_entries: max_entries.max(1),
            persisted: Persisted::default(),
        }
    }

    /// Parses a `.timeindex` file's bytes; fails if the size is not a multiple of 12 or entries do
    /// not increase.
    pub fn decode(base_offset: i64, max_entries: usize, bytes: &[u8]) -> Result<TimeIndex, String> {
        if !bytes.len().is_multiple_of(TIME_ENTRY_SIZE) {
            return Err(format!("size {} is not a multiple of 12", bytes.len()));
        }
        let mut index = TimeIndex::new(base_offset, max_entries);
        for chunk in bytes.chunks_exact(TIME_ENTRY_SIZE) {
            let mut ts = [0u8; 8];
            ts.copy_from_slice(&chunk[..8]);
            let ts = i64::from_be_bytes(ts);
            let rel = u32::from_be_bytes([chunk[8], chunk[9], chunk[10], chunk[11]]);
            if rel > i32::MAX as u32 {
                return Err(format!("relative offset {rel} overflows"));
            }
            if let Some(&(last_ts, last_rel)) = index.entries.last() {
                if ts <= last_ts || rel < last_rel {
                    return Err(format!("entry ({ts}, {rel}) does not increase"));
                }
            }
            index.entries.push((ts, rel));
        }
        index.persisted.entries = index.entries.len();
        Ok(index)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// True when no further entry may be added: the segment must roll.
    pub fn is_full(&self) -> bool {
        self.entries.len() >= self.max_entries
    }

    /// Adds `(timestamp, offset)` if the timestamp grows past the last entry (Kafka's `maybeAppend`).
    /// `force` ignores the capacity, as Kafka does for the final entry of an inactive segment.
    pub fn maybe_append(&mut self, timestamp: i64, offset: i64, force: bool) {
        let rel = offset - self.base_offset;
        if !(0..=i32::MAX as i64).contains(&rel) || (!force && self.is_full()) {
            return;
        }
        let rel = rel as u32;
        if let Some(&(last_ts, last_rel)) = self.entries.last() {
            if timestamp <= last_ts || rel < last_rel {
                return;
            }
        }
        self.entries.push((timestamp, rel));
    }

    /// The last entry whose timestamp is <= `target`, or `None` when every entry is later (or the
    /// index is empty): then a search starts at the segment's beginning.
    pub fn lookup(&self, target: i64) -> Option<TimestampOffset> {
        let n = self.entries.partition_point(|&(ts, _)| ts <= target);
        (n > 0).then(|| self.entry(n - 1))
    }

    /// The last entry: the largest timestamp indexed so far.
    pub fn last(&self) -> Option<TimestampOffset> {
        (!self.entries.is_empty()).then(|| self.entry(self.entries.len() - 1))
    }

    fn entry(&self, i: usize) -> TimestampOffset {
        let (timestamp, rel) = self.entries[i];
        TimestampOffset {
            timestamp,
            offset: self.base_offset + rel as i64,
        }
    }

    /// Drops every entry whose offset is >= `offset`.
    pub fn truncate_to_offset(&mut self, offset: i64) {
        let keep = self
            .entries
            .partition_point(|&(_, r)| self.base_offset + (r as i64) < offset);
        if keep < self.entries.len() {
            self.entries.truncate(keep);
            self.persisted.truncated(keep);
        }
    }

    /// Drops every entry.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.persisted.truncated(0);
    }

    /// Brings the file at `path` in line with the in-memory entries, then fsyncs it if `sync`
    /// (opening it only if there is something to do).
    pub fn persist(&mut self, path: &Path, sync: bool) -> Result<(), LogError> {
        let entries = &self.entries;
        self.persisted
            .write(path, entries.len(), TIME_ENTRY_SIZE, sync, |i, buf| {
                buf.extend_from_slice(&entries[i].0.to_be_bytes());
                buf.extend_from_slice(&entries[i].1.to_be_bytes());
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn offset_lookup_finds_floor_entry() {
        let mut idx = OffsetIndex::new(100, 10);
        idx.append(105, 4096);
        idx.append(120, 9000);
        idx.append(121, 9000); // position does not grow: ignored
        idx.append(119, 9999); // offset does not grow: ignored
        assert_eq!(idx.len(), 2);
        assert_eq!(idx.lookup(99).position, 0);
        assert_eq!(
            idx.lookup(104),
            OffsetPosition {
                offset: 100,
                position: 0
            }
        );
        assert_eq!(
            idx.lookup(105),
            OffsetPosition {
                offset: 105,
                position: 4096
            }
        );
        assert_eq!(idx.lookup(119).position, 4096);
        assert_eq!(idx.lookup(i64::MAX).position, 9000);
    }

    #[test]
    fn entries_replaced_after_a_truncation_are_rewritten_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("0.index");
        let mut idx = OffsetIndex::new(0, 10);
        idx.append(10, 100);
        idx.append(20, 200);
        idx.append(30, 300);
        idx.persist(&path, false).unwrap();
        // Cut back to the first entry, then append different entries before the next persist.
        idx.truncate_to_position(150);
        idx.append(12, 160);
        idx.append(25, 260);
        idx.persist(&path, false).unwrap();
        let on_disk = OffsetIndex::decode(0, 10, &std::fs::read(&path).unwrap(), 1000).unwrap();
        assert_eq!(on_disk.entries, vec![(10, 100), (12, 160), (25, 260)]);

        let tpath = dir.path().join("0.timeindex");
        let mut t = TimeIndex::new(0, 10);
        t.maybe_append(1000, 10, false);
        t.maybe_append(2000, 20, false);
        t.persist(&tpath, false).unwrap();
        t.truncate_to_offset(15);
        t.maybe_append(1500, 16, false);
        t.persist(&tpath, false).unwrap();
        let on_disk = TimeIndex::decode(0, 10, &std::fs::read(&tpath).unwrap()).unwrap();
        assert_eq!(on_disk.entries, vec![(1000, 10), (1500, 16)]);
    }

    #[test]
    fn offset_index_full_and_truncate() {
        let mut idx = OffsetIndex::new(0, 2);
        idx.append(1, 10);
        assert!(!idx.is_full());
        idx.append(2, 20);
        assert!(idx.is_full());
        idx.append(3, 30);
        assert_eq!(idx.len(), 2);
        idx.truncate_to_position(20);
        assert_eq!(idx.len(), 1);
        assert_eq!(
            idx.last(),
            Some(OffsetPosition {
                offset: 1,
                position: 10
            })
        );
    }

    #[test]
    fn time_lookup_and_maybe_append() {
        let mut idx = TimeIndex::new(10, 10);
        idx.maybe_append(1000, 12, false);
        idx.maybe_append(1000, 15, false); // same timestamp: ignored
        idx.maybe_append(2000, 20, false);
        assert_eq!(idx.len(), 2);
        assert_eq!(idx.lookup(999), None);
        assert_eq!(
            idx.lookup(1500),
            Some(TimestampOffset {
                timestamp: 1000,
                offset: 12
            })
        );
        assert_eq!(idx.lookup(5000).map(|e| e.offset), Some(20));
        idx.truncate_to_offset(20);
        assert_eq!(idx.last().map(|e| e.offset), Some(12));
    }

    #[test]
    fn files_round_trip_in_kafka_layout() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.index");
        let mut idx = OffsetIndex::new(50, 100);
        idx.append(60, 4200);
        idx.append(70, 8400);
        idx.persist(&path, false).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(
            bytes,
            [0, 0, 0, 10, 0, 0, 0x10, 0x68, 0, 0, 0, 20, 0, 0, 0x20, 0xd0]
        );
        idx.truncate_to_position(8400);
        idx.persist(&path, false).unwrap();
        assert_eq!(std::fs::read(&path).unwrap().len(), 8);
        let back = OffsetIndex::decode(50, 100, &std::fs::read(&path).unwrap(), 10_000).unwrap();
        assert_eq!(
            back.last(),
            Some(OffsetPosition {
                offset: 60,
                position: 4200
            })
        );

        let tpath = dir.path().join("x.timeindex");
        let mut t = TimeIndex::new(50, 100);
        t.maybe_append(7, 55, false);
        t.persist(&tpath, false).unwrap();
        assert_eq!(
            std::fs::read(&tpath).unwrap(),
            [0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 5]
        );
        let back = TimeIndex::decode(50, 100, &std::fs::read(&tpath).unwrap()).unwrap();
        assert_eq!(
            back.last(),
            Some(TimestampOffset {
                timestamp: 7,
                offset: 55
            })
        );
    }

    #[test]
    fn decode_rejects_bad_files() {
        assert!(OffsetIndex::decode(0, 10, &[0; 7], 100).is_err());
        // Kafka's preallocated zero tail: (0,0) twice does not increase.
        assert!(OffsetIndex::decode(0, 10, &[0; 16], 100).is_err());
        // Position beyond the log.
        assert!(OffsetIndex::decode(0, 10, &[0, 0, 0, 1, 0, 0, 1, 0], 100).is_err());
        assert!(TimeIndex::decode(0, 10, &[0; 13]).is_err());
        assert!(TimeIndex::decode(0, 10, &[0; 24]).is_err());
    }

    proptest! {
        #[test]
        fn offset_lookup_matches_linear_model(
            steps in proptest::collection::vec((1i64..50, 1u32..5000), 0..200),
            targets in proptest::collection::vec(0i64..12_000, 1..50),
        ) {
            let base = 1000;
            let mut idx = OffsetIndex::new(base, 1000);
            let mut model = Vec::new();
            let (mut off, mut pos) = (base, 0u32);
            for (d_off, d_pos) in steps {
                off += d_off;
                pos += d_pos;
                idx.append(off, pos);
                model.push((off, pos));
            }
            for t in targets {
                let t = base - 5 + t;
                let want = model.iter().rev().find(|(o, _)| *o <= t).copied().unwrap_or((base, 0));
                let got = idx.lookup(t);
                prop_assert_eq!((got.offset, got.position), want);
            }
        }

        #[test]
        fn time_lookup_matches_linear_model(
            steps in proptest::collection::vec((0i64..50, 0i64..4), 0..200),
            targets in proptest::collection::vec(-10i64..6000, 1..50),
        ) {
            let mut idx = TimeIndex::new(0, 1000);
            let mut model: Vec<(i64, i64)> = Vec::new();
            let (mut ts, mut off) = (0i64, 0i64);
            for (d_ts, d_off) in steps {
                ts += d_ts;
                off += d_off;
                idx.maybe_append(ts, off, false);
                if model.last().is_none_or(|&(t, _)| ts > t) {
                    model.push((ts, off));
                }
            }
            for t in targets {
                let want = model.iter().rev().find(|(ts, _)| *ts <= t).copied();
                prop_assert_eq!(idx.lookup(t).map(|e| (e.timestamp, e.offset)), want);
            }
        }
    }
}
