//! `<base>.txnindex`: the aborted transactions whose abort marker sits in one segment, in Kafka's
//! format (`TransactionIndex` / `AbortedTxn`), so Kafka's tools read ours and we read Kafka's.
//!
//! Layout: a plain sequence of 34-byte entries, big-endian:
//! `version i16 (= 0) | producer_id i64 | first_offset i64 | last_offset i64 | last_stable_offset i64`.
//! `first_offset` is the transaction's first data offset, `last_offset` the abort marker's offset and
//! `last_stable_offset` the partition's LSO right after the marker (the first offset of the oldest
//! transaction still open then, else `last_offset + 1`). Entries are in increasing `last_offset`.
//! The file exists only once a segment holds an abort marker (Kafka creates it lazily too).
//!
//! Role: answer read_committed fetches ("which aborted transactions overlap offsets [a, b)?") without
//! reading the log. Like the other indexes it is a cache of the `.log`: truncation cuts it, recovery
//! replay re-adds missing entries ([`TxnIndex::ensure`]).
//!
//! Thread-safety: not thread-safe; owned by its `Segment`, mutated through `&mut self` only.
//! Entries are kept in memory (aborts are rare); the file is opened only for a write (positioned,
//! page cache) or for the fsync of [`TxnIndex::flush`], then closed: it holds no descriptor.

use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::error::{IoContext, LogError};

/// Size of one entry on disk (Kafka's `AbortedTxn.TOTAL_SIZE`).
pub const ABORTED_TXN_SIZE: usize = 34;
/// The only entry version Kafka writes (`AbortedTxn.CURRENT_VERSION`).
const ABORTED_TXN_VERSION: i16 = 0;

/// One aborted transaction (Kafka's `AbortedTxn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    /// First offset of the transaction's data.
    pub first_offset: i64,
    /// Offset of the abort marker.
    pub last_offset: i64,
    /// The last stable offset right after the marker was appended.
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    /// The entry's 34 bytes in Kafka's layout.
    pub fn encode(&self) -> [u8; ABORTED_TXN_SIZE] {
        let mut b = [0u8; ABORTED_TXN_SIZE];
        b[0..2].copy_from_slice(&ABORTED_TXN_VERSION.to_be_bytes());
        b[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        b[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        b[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        b[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        b
    }

    /// Parses one entry; `Err` names what is wrong (unknown version).
    pub fn decode(b: &[u8; ABORTED_TXN_SIZE]) -> Result<AbortedTxn, String> {
        let version = i16::from_be_bytes([b[0], b[1]]);
        if version != ABORTED_TXN_VERSION {
            return Err(format!("unknown aborted transaction version {version}"));
        }
        let at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            i64::from_be_bytes(a)
        };
        Ok(AbortedTxn {
            producer_id: at(2),
            first_offset: at(10),
            last_offset: at(18),
            last_stable_offset: at(26),
        })
    }
}

/// [`TxnIndex::collect`] over `entries` (in increasing `last_offset`): those overlapping
/// `[fetch_offset, upper_bound)` are added to `out`; true once an entry's last stable offset
/// reached `upper_bound` (no later entry can overlap). Pure.
pub fn collect_overlapping(
    entries: &[AbortedTxn],
    fetch_offset: i64,
    upper_bound: i64,
    out: &mut Vec<AbortedTxn>,
) -> bool {
    for e in entries {
        if e.last_offset >= fetch_offset && e.first_offset < upper_bound {
            out.push(*e);
        }
        if e.last_stable_offset >= upper_bound {
            return true;
        }
    }
    false
}

/// The aborted transactions of one segment. See the module doc.
#[derive(Debug)]
pub struct TxnIndex {
    path: PathBuf,
    /// In file order: increasing `last_offset`.
    entries: Vec<AbortedTxn>,
    /// Written since the last fsync.
    dirty: bool,
}

impl TxnIndex {
    /// An empty index for `path` that leaves any file there alone (replaced by [`TxnIndex::open`]).
    pub(crate) fn empty(path: PathBuf) -> TxnIndex {
        TxnIndex {
            path,
            entries: Vec::new(),
            dirty: false,
        }
    }

    /// An empty index for `path`, removing any file there (a new segment).
    pub fn create(path: PathBuf) -> Result<TxnIndex, LogError> {
        remove_if_exists(&path)?;
        Ok(TxnIndex::empty(path))
    }

    /// Loads the index at `path` (missing file: empty index) of a segment starting at
    /// `base_offset`. Keeps the longest valid prefix: entries of an unknown version, out of order,
    /// or below the segment end it, as does a trailing partial entry. The file is cut to that
    /// prefix; the second value says why something was cut (the caller re-adds entries by replay).
    /// Entries beyond the segment's end are the caller's to cut ([`TxnIndex::truncate_to`]).
    pub fn open(path: PathBuf, base_offset: i64) -> Result<(TxnIndex, Option<String>), LogError> {
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok((TxnIndex::empty(path), None))
            }
            Err(e) => return Err(LogError::io(&path, e)),
        };
        let mut entries = Vec::with_capacity(bytes.len() / ABORTED_TXN_SIZE);
        let mut damage = None;
        for raw in bytes.chunks(ABORTED_TXN_SIZE) {
            let Ok(raw) = <&[u8; ABORTED_TXN_SIZE]>::try_from(raw) else {
                damage = Some(format!("{} trailing bytes", raw.len()));
                break;
            };
            match AbortedTxn::decode(raw) {
                Err(why) => {
                    damage = Some(why);
                    break;
                }
                Ok(e) if e.last_offset < base_offset => {
                    damage = Some(format!(
                        "marker offset {} below the segment base offset {base_offset}",
                        e.last_offset
                    ));
                    break;
                }
                Ok(e)
                    if entries
                        .last()
                        .is_some_and(|p: &AbortedTxn| p.last_offset >= e.last_offset) =>
                {
                    damage = Some(format!("marker offset {} out of order", e.last_offset));
                    break;
                }
                Ok(e) => entries.push(e),
            }
        }
        let mut index = TxnIndex {
            path,
            entries,
            dirty: false,
        };
        if damage.is_some() {
            index.rewrite()?;
        }
        Ok((index, damage))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The entries, in increasing marker offset.
    pub fn entries(&self) -> &[AbortedTxn] {
        &self.entries
    }

    /// The file, opened (created if absent) for one write; closed when the caller drops it.
    fn file(&self) -> Result<File, LogError> {
        File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&self.path)
            .at(&self.path)
    }

    /// Appends `entry`, whose marker offset must be above every entry's (Kafka's rule).
    pub fn append(&mut self, entry: AbortedTxn) -> Result<(), LogError> {
        if let Some(last) = self.entries.last() {
            if last.last_offset >= entry.last_offset {
                return Err(LogError::corrupt(
                    &self.path,
                    format!(
                        "aborted transaction at {} does not follow {}",
                        entry.last_offset, last.last_offset
                    ),
                ));
            }
        }
        let pos = (self.entries.len() * ABORTED_TXN_SIZE) as u64;
        self.file()?
            .write_all_at(&entry.encode(), pos)
            .at(&self.path)?;
        self.entries.push(entry);
        self.dirty = true;
        Ok(())
    }

    /// Adds `entry` unless an entry with its marker offset exists (recovery replay: idempotent).
    /// Returns whether it was added.
    pub fn ensure(&mut self, entry: AbortedTxn) -> Result<bool, LogError> {
        match self
            .entries
            .binary_search_by_key(&entry.last_offset, |e| e.last_offset)
        {
            Ok(_) => Ok(false),
            Err(at) if at == self.entries.len() => self.append(entry).map(|()| true),
            Err(at) => {
                self.entries.insert(at, entry);
                self.rewrite()?;
                Ok(true)
            }
        }
    }

    /// Drops every entry whose marker offset is >= `offset` (log truncation).
    pub fn truncate_to(&mut self, offset: i64) -> Result<(), LogError> {
        let keep = self.entries.partition_point(|e| e.last_offset < offset);
        if keep == self.entries.len() {
            return Ok(());
        }
        self.entries.truncate(keep);
        let len = (keep * ABORTED_TXN_SIZE) as u64;
        self.file()?.set_len(len).at(&self.path)?;
        self.dirty = true;
        Ok(())
    }

    /// Writes the whole file from memory (after an out-of-order insert or a cut of bad entries).
    fn rewrite(&mut self) -> Result<(), LogError> {
        let mut bytes = Vec::with_capacity(self.entries.len() * ABORTED_TXN_SIZE);
        for e in &self.entries {
            bytes.extend_from_slice(&e.encode());
        }
        let file = self.file()?;
        file.set_len(0).at(&self.path)?;
        file.write_all_at(&bytes, 0).at(&self.path)?;
        self.dirty = true;
        Ok(())
    }

    /// Kafka's `collectAbortedTxns(fetchOffset, upperBoundOffset)`: entries overlapping
    /// `[fetch_offset, upper_bound)`, and whether the search is complete (an entry's last stable
    /// offset reached `upper_bound`, so no later segment can hold an overlapping transaction).
    pub fn collect(&self, fetch_offset: i64, upper_bound: i64, out: &mut Vec<AbortedTxn>) -> bool {
        collect_overlapping(&self.entries, fetch_offset, upper_bound, out)
    }

    /// fsyncs the file if it changed.
    pub fn flush(&mut self) -> Result<(), LogError> {
        if !self.dirty {
            return Ok(());
        }
        self.file()?.sync_data().at(&self.path)?;
        self.dirty = false;
        Ok(())
    }
}

fn remove_if_exists(path: &Path) -> Result<(), LogError> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(LogError::io(path, e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(producer_id: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id,
            first_offset: first,
            last_offset: last,
            last_stable_offset: lso,
        }
    }

    #[test]
    fn entry_bytes_are_kafkas_layout() {
        let bytes = txn(0x0102, 5, 9, 10).encode();
        let mut want = Vec::new();
        want.extend_from_slice(&0i16.to_be_bytes());
        want.extend_from_slice(&0x0102i64.to_be_bytes());
        want.extend_from_slice(&5i64.to_be_bytes());
        want.extend_from_slice(&9i64.to_be_bytes());
        want.extend_from_slice(&10i64.to_be_bytes());
        assert_eq!(bytes.len(), 34);
        assert_eq!(&bytes[..], &want[..]);
        assert_eq!(AbortedTxn::decode(&bytes), Ok(txn(0x0102, 5, 9, 10)));
        let mut v1 = bytes;
        v1[1] = 1;
        assert!(AbortedTxn::decode(&v1).is_err());
    }

    #[test]
    fn round_trip_through_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.txnindex");
        let mut idx = TxnIndex::create(path.clone()).unwrap();
        assert!(!path.exists(), "created lazily");
        idx.append(txn(1, 0, 4, 5)).unwrap();
        idx.append(txn(2, 3, 8, 3)).unwrap();
        assert!(
            idx.append(txn(3, 0, 8, 9)).is_err(),
            "marker offsets increase"
        );
        idx.flush().unwrap();
        assert_eq!(fs::read(&path).unwrap().len(), 68);
        let (loaded, damage) = TxnIndex::open(path.clone(), 0).unwrap();
        assert_eq!(damage, None);
        assert_eq!(loaded.entries(), &[txn(1, 0, 4, 5), txn(2, 3, 8, 3)]);
    }

    #[test]
    fn ensure_is_idempotent_and_keeps_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.txnindex");
        let mut idx = TxnIndex::create(path.clone()).unwrap();
        assert!(idx.ensure(txn(1, 0, 10, 11)).unwrap());
        assert!(!idx.ensure(txn(1, 0, 10, 11)).unwrap());
        assert!(idx.ensure(txn(2, 2, 5, 6)).unwrap());
        assert!(idx.ensure(txn(3, 12, 20, 21)).unwrap());
        let lasts: Vec<i64> = idx.entries().iter().map(|e| e.last_offset).collect();
        assert_eq!(lasts, vec![5, 10, 20]);
        let (loaded, _) = TxnIndex::open(path, 0).unwrap();
        assert_eq!(loaded.entries(), idx.entries());
    }

    #[test]
    fn truncate_and_damaged_tails() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000010.txnindex");
        let mut idx = TxnIndex::create(path.clone()).unwrap();
        for (i, last) in [12, 15, 19].into_iter().enumerate() {
            idx.append(txn(i as i64, 10, last, last + 1)).unwrap();
        }
        idx.truncate_to(15).unwrap();
        assert_eq!(idx.entries().len(), 1);
        assert_eq!(fs::read(&path).unwrap().len(), 34);
        // A partial entry is cut at open; so is everything from an entry below the base offset.
        let mut bytes = fs::read(&path).unwrap();
        bytes.extend_from_slice(&[0, 0, 1]);
        fs::write(&path, &bytes).unwrap();
        let (loaded, damage) = TxnIndex::open(path.clone(), 10).unwrap();
        assert_eq!(damage.as_deref(), Some("3 trailing bytes"));
        assert_eq!(loaded.entries(), &[txn(0, 10, 12, 13)]);
        assert_eq!(fs::read(&path).unwrap().len(), 34);
        let mut bytes = fs::read(&path).unwrap();
        bytes.extend_from_slice(&txn(9, 1, 3, 4).encode());
        bytes.extend_from_slice(&txn(9, 10, 18, 19).encode());
        fs::write(&path, &bytes).unwrap();
        let (loaded, damage) = TxnIndex::open(path.clone(), 10).unwrap();
        assert!(damage.unwrap().contains("below the segment base offset"));
        assert_eq!(loaded.entries(), &[txn(0, 10, 12, 13)]);
    }

    #[test]
    fn collect_follows_kafkas_overlap_and_stop_rules() {
        let dir = tempfile::tempdir().unwrap();
        let mut idx = TxnIndex::create(dir.path().join("x.txnindex")).unwrap();
        idx.append(txn(1, 0, 5, 6)).unwrap();
        idx.append(txn(2, 7, 10, 11)).unwrap();
        idx.append(txn(3, 12, 30, 31)).unwrap();
        let mut out = Vec::new();
        // Fetch [6, 11): overlaps producer 2 only; producer 2's LSO 11 reaches the bound: complete.
        assert!(idx.collect(6, 11, &mut out));
        assert_eq!(out, vec![txn(2, 7, 10, 11)]);
        out.clear();
        // Fetch [0, 40): all three, and the search must go on to the next segment.
        assert!(!idx.collect(0, 40, &mut out));
        assert_eq!(out.len(), 3);
    }
}
