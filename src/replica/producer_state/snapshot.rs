//! Producer-state snapshot files, byte-compatible with Kafka's (`ProducerStateManager`, version 1), so
//! Kafka's tools can read ours and we can read a partition directory Kafka wrote.
//!
//! File name: the 20-digit zero-padded offset plus `.snapshot` (`00000000000000001234.snapshot`); the
//! offset is the log end offset the snapshot describes, so recovery replays the log from it.
//!
//! Layout (big-endian): `version i16 (= 1) | crc u32 | count i32 | count x entry`, where an entry is
//! `producer_id i64 | epoch i16 | last_sequence i32 | last_offset i64 | offset_delta i32 |
//! timestamp i64 | coordinator_epoch i32 | current_txn_first_offset i64` (46 bytes). The CRC-32C
//! covers everything after the `crc` field. `offset_delta` is last offset - first offset of the last
//! batch (equal to its sequence span), and `last_offset = -1` means "no batch". Only the producer's
//! last batch survives a snapshot, exactly as in Kafka: older duplicates are detectable again only
//! for batches replayed from the log after the snapshot offset.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::{BatchMetadata, ProducerStateEntry, ProducerStateManager};
use crate::record::NO_SEQUENCE;

const SNAPSHOT_VERSION: i16 = 1;
const SNAPSHOT_SUFFIX: &str = ".snapshot";
const TMP_SUFFIX: &str = ".snapshot.tmp";
/// `version` + `crc`: the CRC covers what follows.
const CRC_END: usize = 6;
const HEADER_LEN: usize = 10;
const ENTRY_LEN: usize = 46;

/// A loaded state and the offset of the snapshot it came from (where log replay starts).
pub type LoadedSnapshot = (ProducerStateManager, i64);

/// Why a snapshot file's contents were rejected. The file is deleted, never trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CorruptSnapshot {
    #[error("snapshot is {0} bytes, too short")]
    TooShort(usize),
    #[error("unknown snapshot version {0}")]
    Version(i16),
    #[error("CRC mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Crc { stored: u32, computed: u32 },
    #[error("entry count {count} does not fit a {len}-byte file")]
    Count { count: i32, len: usize },
    #[error("producer {0}: negative offset delta")]
    OffsetDelta(i64),
}

/// Path of the snapshot for `offset` in `dir`, named like Kafka's.
pub fn snapshot_path(dir: &Path, offset: i64) -> PathBuf {
    dir.join(format!("{offset:020}{SNAPSHOT_SUFFIX}"))
}

/// The offset a file name encodes, if it is a snapshot name (exactly 20 digits + `.snapshot`).
fn snapshot_offset(name: &str) -> Option<i64> {
    let digits = name.strip_suffix(SNAPSHOT_SUFFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Deletes every snapshot in `dir` older than `offset` (the newest one written supersedes them).
/// Returns how many were removed; files that are not snapshots are left alone.
pub fn remove_snapshots_below(dir: &Path, offset: i64) -> io::Result<usize> {
    let mut removed = 0;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if let Some(o) = name.to_str().and_then(snapshot_offset) {
            if o < offset {
                fs::remove_file(entry.path())?;
                removed += 1;
            }
        }
    }
    Ok(removed)
}

/// `seq - delta`, wrapping below 0 to `i32::MAX` like Kafka's `decrementSequence`.
fn decrement_sequence(seq: i32, delta: i32) -> i32 {
    if seq < 0 {
        return NO_SEQUENCE;
    }
    let first = seq as i64 - delta as i64;
    if first < 0 {
        (first + i32::MAX as i64 + 1) as i32
    } else {
        first as i32
    }
}

fn rd_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
fn rd_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn rd_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

/// Serialises the state in Kafka's version-1 layout.
pub(super) fn encode(state: &ProducerStateManager) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + ENTRY_LEN * state.producers.len());
    out.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
    out.extend_from_slice(&0u32.to_be_bytes()); // CRC, filled in below
    out.extend_from_slice(&(state.producers.len() as i32).to_be_bytes());
    for (producer_id, entry) in &state.producers {
        let last = entry.batches.back();
        out.extend_from_slice(&producer_id.to_be_bytes());
        out.extend_from_slice(&entry.producer_epoch.to_be_bytes());
        out.extend_from_slice(&last.map_or(NO_SEQUENCE, |b| b.last_seq).to_be_bytes());
        out.extend_from_slice(&last.map_or(-1i64, |b| b.last_offset).to_be_bytes());
        let delta = last.map_or(0i32, |b| (b.last_offset - b.base_offset) as i32);
        out.extend_from_slice(&delta.to_be_bytes());
        out.extend_from_slice(&entry.last_timestamp.to_be_bytes());
        out.extend_from_slice(&entry.coordinator_epoch.to_be_bytes());
        out.extend_from_slice(&entry.current_txn_first_offset.unwrap_or(-1).to_be_bytes());
    }
    let crc = crc32c::crc32c(&out[CRC_END..]);
    out[2..CRC_END].copy_from_slice(&crc.to_be_bytes());
    out
}

/// Parses and checks a snapshot's bytes. Never panics on any input.
pub(super) fn decode(bytes: &[u8]) -> Result<ProducerStateManager, CorruptSnapshot> {
    if bytes.len() < HEADER_LEN {
        return Err(CorruptSnapshot::TooShort(bytes.len()));
    }
    let version = rd_i16(bytes, 0);
    if version != SNAPSHOT_VERSION {
        return Err(CorruptSnapshot::Version(version));
    }
    let stored = u32::from_be_bytes([bytes[2], bytes[3], bytes[4], bytes[5]]);
    let computed = crc32c::crc32c(&bytes[CRC_END..]);
    if stored != computed {
        return Err(CorruptSnapshot::Crc { stored, computed });
    }
    let count = rd_i32(bytes, CRC_END);
    let fits = usize::try_from(count)
        .ok()
        .and_then(|n| n.checked_mul(ENTRY_LEN))
        .is_some_and(|n| HEADER_LEN + n == bytes.len());
    if !fits {
        return Err(CorruptSnapshot::Count {
            count,
            len: bytes.len(),
        });
    }
    let mut state = ProducerStateManager::new();
    for raw in bytes[HEADER_LEN..].chunks_exact(ENTRY_LEN) {
        let producer_id = rd_i64(raw, 0);
        let producer_epoch = rd_i16(raw, 8);
        let last_seq = rd_i32(raw, 10);
        let last_offset = rd_i64(raw, 14);
        let offset_delta = rd_i32(raw, 22);
        let timestamp = rd_i64(raw, 26);
        let coordinator_epoch = rd_i32(raw, 34);
        let txn_first = rd_i64(raw, 38);
        if offset_delta < 0 {
            return Err(CorruptSnapshot::OffsetDelta(producer_id));
        }
        let mut entry = ProducerStateEntry::empty();
        entry.producer_epoch = producer_epoch;
        entry.last_timestamp = timestamp;
        entry.coordinator_epoch = coordinator_epoch;
        entry.current_txn_first_offset = (txn_first >= 0).then_some(txn_first);
        if last_offset >= 0 {
            entry.batches.push_back(BatchMetadata {
                first_seq: decrement_sequence(last_seq, offset_delta),
                last_seq,
                base_offset: last_offset - offset_delta as i64,
                last_offset,
                max_timestamp: timestamp,
            });
        }
        state.producers.insert(producer_id, entry);
    }
    state.rebuild_ongoing_txns();
    Ok(state)
}

impl ProducerStateManager {
    /// Writes the snapshot for log end offset `offset` into `dir`: to a temporary file first, fsynced,
    /// then renamed over the final name and the directory fsynced, so a crash leaves either the old
    /// state or the complete new file.
    pub fn write_snapshot(&self, dir: &Path, offset: i64) -> io::Result<()> {
        write_snapshot_bytes(dir, offset, &encode(self))
    }

    /// The snapshot file's bytes for this state, to be written later with
    /// [`write_snapshot_bytes`] (a background flush after a roll).
    pub fn snapshot_bytes(&self) -> Vec<u8> {
        encode(self)
    }

    /// The state a snapshot file's `bytes` hold (what [`Self::load_latest_snapshot`] loads from
    /// one file), checked as there. Pure: the simulator keeps its snapshots in memory.
    pub fn from_snapshot_bytes(bytes: &[u8]) -> Result<ProducerStateManager, CorruptSnapshot> {
        decode(bytes)
    }

    /// Loads the newest valid snapshot in `dir` whose offset is at most `max_offset` (the current log
    /// end offset) and returns it with its offset; the caller then replays the log from that offset.
    ///
    /// Files it deletes, as Kafka does on load and truncation: snapshots above `max_offset` (they
    /// describe log that no longer exists), corrupt snapshots (bad version, CRC or layout; the next
    /// older one is tried), and leftover temporary files. A missing directory means no snapshot.
    pub fn load_latest_snapshot(dir: &Path, max_offset: i64) -> io::Result<Option<LoadedSnapshot>> {
        let listing = match fs::read_dir(dir) {
            Ok(listing) => listing,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut offsets = Vec::new();
        for item in listing {
            let item = item?;
            let name = item.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.ends_with(TMP_SUFFIX) {
                remove_if_exists(&item.path())?;
            } else if let Some(offset) = snapshot_offset(name) {
                offsets.push(offset);
            }
        }
        offsets.sort_unstable_by(|a, b| b.cmp(a));
        for offset in offsets {
            let path = snapshot_path(dir, offset);
            if offset > max_offset {
                remove_if_exists(&path)?;
                continue;
            }
            let bytes = match fs::read(&path) {
                Ok(bytes) => bytes,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            match decode(&bytes) {
                Ok(state) => return Ok(Some((state, offset))),
                Err(why) => {
                    tracing::warn!(path = %path.display(), %why, "deleting corrupt producer snapshot");
                    remove_if_exists(&path)?;
                }
            }
        }
        Ok(None)
    }
}

/// Writes snapshot `bytes` for log end offset `offset` into `dir`: to a temporary file first,
/// fsynced, then renamed over the final name and the directory fsynced.
pub fn write_snapshot_bytes(dir: &Path, offset: i64, bytes: &[u8]) -> io::Result<()> {
    if offset < 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("snapshot offset {offset} is negative"),
        ));
    }
    let path = snapshot_path(dir, offset);
    let tmp = dir.join(format!("{offset:020}{TMP_SUFFIX}"));
    {
        let mut file = fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    fs::rename(&tmp, &path)?;
    fs::File::open(dir)?.sync_all()
}

fn remove_if_exists(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
