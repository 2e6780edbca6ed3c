//! The bounded tail of applied metadata entries a voter serves to observers (broker-only
//! nodes, `controller::observer`) as Fetch answers on `__cluster_metadata`. Pure: no I/O, no
//! clock, no lock (the driver owns it behind a mutex, `controller::metadata_fetch::SharedTail`).
//!
//! Offsets are raft indexes (from 1), the offsets the brokers' heartbeats report. A fetch
//! offset is the next offset the observer wants (its applied offset + 1). The tail covers the
//! offsets `(base, applied]`: every entry there is held as one record batch (its records as
//! the driver applied them, after the Bootstrap filter), except entries applied as nothing
//! (a Bootstrap entry of a log that has its features), which are absent; a read that ends at
//! the log end says so (`upto` = applied), so the observer moves past them too.
//!
//! Invariants: entries are in ascending offset order, all above `base` and at most `applied`;
//! the held bytes stay at most `max_bytes` (older entries go first, moving `base`); a snapshot
//! taken at offset `o` drops the entries up to `o` (Kafka serves the log after its latest
//! snapshot; an observer further behind loads the snapshot).

use std::collections::VecDeque;

use bytes::Bytes;

/// See the module doc.
#[derive(Debug, Clone)]
pub struct MetadataTail {
    /// The offset of the last applied entry (0: none yet).
    applied: u64,
    /// Every offset above this (up to `applied`) is held (or was applied as nothing).
    base: u64,
    entries: VecDeque<(u64, Bytes)>,
    bytes: usize,
    max_bytes: usize,
}

/// What a fetch at some offset finds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TailRead {
    /// `batches` (offset, batch), in order, and the last offset the answer covers: the
    /// observer's next fetch offset is `upto + 1` (`upto` may lie past the last batch: entries
    /// applied as nothing).
    Entries {
        batches: Vec<(u64, Bytes)>,
        upto: u64,
    },
    /// Nothing past the fetch offset yet (the observer is at the log end).
    UpToDate,
    /// The fetch offset lies at or below `base`: those entries are gone; load a snapshot.
    SnapshotNeeded,
    /// The fetch offset lies past the log end + 1 (an observer of another log, or this voter
    /// lost entries it had served: it cannot answer that position).
    AheadOfLog,
}

impl MetadataTail {
    /// An empty tail holding at most `max_bytes` of batches (always at least the newest one).
    pub fn new(max_bytes: usize) -> MetadataTail {
        MetadataTail {
            applied: 0,
            base: 0,
            entries: VecDeque::new(),
            bytes: 0,
            max_bytes,
        }
    }

    /// The offset of the last applied entry.
    pub fn applied(&self) -> u64 {
        self.applied
    }

    /// Offsets above this are served (Kafka's log start offset is `base + 1`).
    pub fn base(&self) -> u64 {
        self.base
    }

    /// The entry at `offset` was applied: `batch` holds its records, `None` when it applied
    /// nothing. Offsets at or below the applied one are ignored.
    pub fn push(&mut self, offset: u64, batch: Option<Bytes>) {
        if offset <= self.applied {
            return;
        }
        self.applied = offset;
        if let Some(batch) = batch {
            self.bytes += batch.len();
            self.entries.push_back((offset, batch));
        }
        while self.bytes > self.max_bytes && self.entries.len() > 1 {
            if let Some((o, b)) = self.entries.pop_front() {
                self.bytes -= b.len();
                self.base = o;
            }
        }
    }

    /// A snapshot at `offset` replaced the applied state (a voter's start, or a leader's
    /// snapshot install): nothing before it is held.
    pub fn reset(&mut self, offset: u64) {
        self.entries.clear();
        self.bytes = 0;
        self.base = offset;
        self.applied = offset;
    }

    /// A snapshot of the state at `offset` was taken: entries up to it are dropped.
    pub fn trim_to(&mut self, offset: u64) {
        let offset = offset.min(self.applied);
        while let Some((o, b)) = self.entries.front() {
            if *o > offset {
                break;
            }
            self.bytes -= b.len();
            self.entries.pop_front();
        }
        self.base = self.base.max(offset);
    }

    /// What a fetch from `fetch_offset` (0 is read as 1) gets: whole batches while they fit in
    /// `max_bytes`, at least one (Kafka's minOneMessage).
    pub fn read(&self, fetch_offset: u64, max_bytes: usize) -> TailRead {
        let fetch_offset = fetch_offset.max(1);
        if fetch_offset > self.applied + 1 {
            return TailRead::AheadOfLog;
        }
        if fetch_offset <= self.base {
            return TailRead::SnapshotNeeded;
        }
        if fetch_offset == self.applied + 1 {
            return TailRead::UpToDate;
        }
        let first = self.entries.partition_point(|(o, _)| *o < fetch_offset);
        let mut batches = Vec::new();
        let mut used = 0usize;
        let mut cut = false;
        for (o, b) in self.entries.iter().skip(first) {
            if !batches.is_empty() && used + b.len() > max_bytes {
                cut = true;
                break;
            }
            used += b.len();
            batches.push((*o, b.clone()));
        }
        let upto = match (cut, batches.last()) {
            (true, Some((o, _))) => *o,
            _ => self.applied,
        };
        TailRead::Entries { batches, upto }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(n: usize) -> Option<Bytes> {
        Some(Bytes::from(vec![7u8; n]))
    }

    fn offsets(read: &TailRead) -> (Vec<u64>, u64) {
        match read {
            TailRead::Entries { batches, upto } => {
                (batches.iter().map(|(o, _)| *o).collect(), *upto)
            }
            other => panic!("expected entries, got {other:?}"),
        }
    }

    #[test]
    fn a_read_returns_the_entries_from_the_fetch_offset_and_covers_empty_ones() {
        let mut t = MetadataTail::new(1 << 20);
        t.push(1, b(10));
        t.push(2, None); // a Bootstrap entry applied as nothing
        t.push(3, b(10));
        t.push(4, None);
        assert_eq!(offsets(&t.read(1, 1 << 20)), (vec![1, 3], 4));
        assert_eq!(offsets(&t.read(0, 1 << 20)), (vec![1, 3], 4), "0 is 1");
        assert_eq!(offsets(&t.read(2, 1 << 20)), (vec![3], 4));
        assert_eq!(
            offsets(&t.read(4, 1 << 20)),
            (vec![], 4),
            "only an empty entry left: the answer still moves the observer past it"
        );
        assert_eq!(t.read(5, 1 << 20), TailRead::UpToDate);
        assert_eq!(t.read(6, 1 << 20), TailRead::AheadOfLog);
        assert_eq!(t.applied(), 4);
    }

    #[test]
    fn a_read_stops_at_the_byte_limit_but_returns_at_least_one_batch() {
        let mut t = MetadataTail::new(1 << 20);
        t.push(1, b(100));
        t.push(2, b(100));
        t.push(3, b(100));
        t.push(4, None);
        assert_eq!(
            offsets(&t.read(1, 250)),
            (vec![1, 2], 2),
            "cut: the next fetch starts at 3"
        );
        assert_eq!(
            offsets(&t.read(1, 10)),
            (vec![1], 1),
            "one batch over the limit"
        );
        assert_eq!(
            offsets(&t.read(3, 100)),
            (vec![3], 4),
            "uncut: up to the log end"
        );
    }

    #[test]
    fn the_oldest_entries_go_past_the_byte_bound_and_older_fetches_need_a_snapshot() {
        let mut t = MetadataTail::new(250);
        for o in 1..=5 {
            t.push(o, b(100));
        }
        assert_eq!(t.base(), 3, "entries 1..=3 went: 4 and 5 hold 200 bytes");
        assert_eq!(t.read(3, 1 << 20), TailRead::SnapshotNeeded);
        assert_eq!(t.read(1, 1 << 20), TailRead::SnapshotNeeded);
        assert_eq!(offsets(&t.read(4, 1 << 20)), (vec![4, 5], 5));
        // One batch larger than the bound is still held.
        t.push(6, b(1000));
        assert_eq!(t.base(), 5);
        assert_eq!(offsets(&t.read(6, 1 << 20)), (vec![6], 6));
    }

    #[test]
    fn a_snapshot_trims_the_tail_and_a_loaded_snapshot_resets_it() {
        let mut t = MetadataTail::new(1 << 20);
        for o in 1..=4 {
            t.push(o, b(10));
        }
        t.trim_to(2);
        assert_eq!(t.base(), 2);
        assert_eq!(t.read(2, 1 << 20), TailRead::SnapshotNeeded);
        assert_eq!(offsets(&t.read(3, 1 << 20)), (vec![3, 4], 4));
        t.trim_to(99);
        assert_eq!(t.base(), 4, "never past the applied offset");
        assert_eq!(t.read(5, 1 << 20), TailRead::UpToDate);
        t.reset(10);
        assert_eq!((t.base(), t.applied()), (10, 10));
        assert_eq!(t.read(10, 1 << 20), TailRead::SnapshotNeeded);
        assert_eq!(t.read(11, 1 << 20), TailRead::UpToDate);
        t.push(9, b(10));
        assert_eq!(t.applied(), 10, "an offset already applied is ignored");
        t.push(11, b(10));
        assert_eq!(offsets(&t.read(11, 1 << 20)), (vec![11], 11));
    }
}
