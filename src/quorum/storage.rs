//! `DiskStorage`: the durable raft log, hard state and snapshot of the controller quorum.
//!
//! Role: make durable what `node::QuorumNode` hands out in a `Persist`, before the caller sends
//! the step's messages or applies its committed entries; rebuild the state at start.
//!
//! Layout of the directory (`metadata.log.dir`, by default `<log.dirs>/__cluster_metadata-0`,
//! Kafka's name; the files are Sluice's own format, not Kafka's segments and checkpoints):
//! - `raft.log`: a sequence of records `[u32 length][u32 crc32c(body)][body]` (big endian),
//!   body = `[u8 kind][protobuf]`, kind 1 = raft `Entry`, 2 = `HardState`. The file is a journal
//!   of mutations: an entry at index `i` replaces every entry at or after `i` (raft's conflict
//!   truncation), the last hard state wins. Each `persist` appends and fsyncs once.
//! - `raft.snapshot`: one record of kind 3 (raft `Snapshot`: index, term, voters, the state
//!   machine's bytes), written to `raft.snapshot.tmp`, fsynced, renamed, directory fsynced.
//!   After a snapshot the journal is rewritten the same way with the hard state and the entries
//!   after the snapshot (compaction); a crash between the two leaves entries the snapshot covers,
//!   which recovery skips.
//!
//! Recovery (`open`): a torn or damaged tail of `raft.log` (short record, absurd length, CRC
//! mismatch, undecodable body, index gap) is cut at the last valid record with one warning; a
//! damaged snapshot is an error (it was renamed into place whole, so damage is not a torn write).
//! Not thread-safe: owned by the quorum task.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use protobuf::Message as _;
use raft::prelude::{Entry, HardState, Snapshot};

use super::node::Persist;

/// Largest record accepted when reading (an entry, or a snapshot with its data).
pub const MAX_RECORD_BYTES: usize = 256 * 1024 * 1024;

const KIND_ENTRY: u8 = 1;
const KIND_HARD_STATE: u8 = 2;
const KIND_SNAPSHOT: u8 = 3;
const LOG_FILE: &str = "raft.log";
const SNAPSHOT_FILE: &str = "raft.snapshot";

/// Storage failures; any of them stops the quorum task (a log that cannot be written must not
/// acknowledge anything, as in Kafka, which halts on a metadata log I/O error).
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("metadata log I/O error on {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("metadata log snapshot {path} is damaged: {reason}")]
    DamagedSnapshot { path: PathBuf, reason: String },
    #[error("cannot encode a raft record: {0}")]
    Encode(String),
}

/// What `open` found on disk.
#[derive(Debug, Default)]
pub struct Recovered {
    pub hard_state: HardState,
    pub snapshot: Option<Snapshot>,
    /// Entries after the snapshot, contiguous.
    pub entries: Vec<Entry>,
    /// Bytes cut from a torn or damaged tail of the journal.
    pub truncated_bytes: u64,
}

/// The durable log directory. Not thread-safe; one owner.
#[derive(Debug)]
pub struct DiskStorage {
    dir: PathBuf,
    log: File,
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> StorageError + '_ {
    move |source| StorageError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn encode_record(
    kind: u8,
    msg: &dyn protobuf::Message,
    out: &mut Vec<u8>,
) -> Result<(), StorageError> {
    let mut body = vec![kind];
    msg.write_to_vec(&mut body)
        .map_err(|e| StorageError::Encode(e.to_string()))?;
    if body.len() > MAX_RECORD_BYTES {
        return Err(StorageError::Encode(format!(
            "record of {} bytes exceeds {MAX_RECORD_BYTES}",
            body.len()
        )));
    }
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
    out.extend_from_slice(&body);
    Ok(())
}

/// One decoded record, or why the bytes at `pos` are not one.
enum Next<'a> {
    Record {
        kind: u8,
        body: &'a [u8],
        end: usize,
    },
    End,
    Invalid(&'static str),
}

fn next_record(buf: &[u8], pos: usize) -> Next<'_> {
    let rest = &buf[pos..];
    if rest.is_empty() {
        return Next::End;
    }
    if rest.len() < 8 {
        return Next::Invalid("short record header");
    }
    let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
    let crc = u32::from_be_bytes([rest[4], rest[5], rest[6], rest[7]]);
    if len == 0 || len > MAX_RECORD_BYTES {
        return Next::Invalid("record length out of range");
    }
    if rest.len() - 8 < len {
        return Next::Invalid("short record body");
    }
    let body = &rest[8..8 + len];
    if crc32c::crc32c(body) != crc {
        return Next::Invalid("CRC mismatch");
    }
    Next::Record {
        kind: body[0],
        body: &body[1..],
        end: pos + 8 + len,
    }
}

fn fsync_dir(dir: &Path) -> Result<(), StorageError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

/// Writes `bytes` to `dir/name` atomically: temp file, fsync, rename, directory fsync.
fn replace_file(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), StorageError> {
    let tmp = dir.join(format!("{name}.tmp"));
    let path = dir.join(name);
    let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
    f.write_all(bytes).map_err(io_err(&tmp))?;
    f.sync_all().map_err(io_err(&tmp))?;
    fs::rename(&tmp, &path).map_err(io_err(&path))?;
    fsync_dir(dir)
}

fn read_snapshot(path: &Path) -> Result<Option<Snapshot>, StorageError> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(path)(e)),
    };
    let damaged = |reason: &str| StorageError::DamagedSnapshot {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    };
    match next_record(&bytes, 0) {
        Next::Record { kind, body, end } if kind == KIND_SNAPSHOT && end == bytes.len() => {
            Snapshot::parse_from_bytes(body)
                .map(Some)
                .map_err(|e| damaged(&e.to_string()))
        }
        Next::Record { .. } => Err(damaged("unexpected record kind or trailing bytes")),
        Next::End => Err(damaged("empty file")),
        Next::Invalid(why) => Err(damaged(why)),
    }
}

/// Replays the journal over `rec`; returns the length of its valid prefix.
fn replay(buf: &[u8], rec: &mut Recovered) -> (usize, Option<&'static str>) {
    let snap_index = rec.snapshot.as_ref().map_or(0, |s| s.get_metadata().index);
    let mut pos = 0;
    loop {
        let (kind, body, end) = match next_record(buf, pos) {
            Next::End => return (pos, None),
            Next::Invalid(why) => return (pos, Some(why)),
            Next::Record { kind, body, end } => (kind, body, end),
        };
        match kind {
            KIND_ENTRY => {
                let Ok(e) = Entry::parse_from_bytes(body) else {
                    return (pos, Some("undecodable entry"));
                };
                if e.index > snap_index {
                    let first = snap_index + 1;
                    let next = first + rec.entries.len() as u64;
                    if e.index > next {
                        return (pos, Some("gap in entry indexes"));
                    }
                    rec.entries.truncate((e.index - first) as usize);
                    rec.entries.push(e);
                }
            }
            KIND_HARD_STATE => {
                let Ok(hs) = HardState::parse_from_bytes(body) else {
                    return (pos, Some("undecodable hard state"));
                };
                rec.hard_state = hs;
            }
            _ => return (pos, Some("unknown record kind")),
        }
        pos = end;
    }
}

/// What `DiskStorage::open` does after the journal replay: the hard state never says less than
/// the snapshot, and never commits past the recovered log.
fn finish_recovery(rec: &mut Recovered) {
    if let Some(s) = &rec.snapshot {
        let m = s.get_metadata();
        if rec.hard_state.commit < m.index {
            rec.hard_state.commit = m.index;
        }
        if rec.hard_state.term < m.term {
            rec.hard_state.term = m.term;
        }
    }
    let last = rec
        .entries
        .last()
        .map(|e| e.index)
        .or(rec.snapshot.as_ref().map(|s| s.get_metadata().index))
        .unwrap_or(0);
    if rec.hard_state.commit > last {
        tracing::warn!(
            commit = rec.hard_state.commit,
            last_index = last,
            "metadata log: commit index beyond the recovered log; lowering it"
        );
        rec.hard_state.commit = last;
    }
}

/// The journal bytes `DiskStorage::persist` appends for a step without a snapshot (entries,
/// then the hard state), for a simulated file layer that keeps the journal in memory.
pub fn journal_bytes(p: &Persist) -> Result<Vec<u8>, StorageError> {
    let mut bytes = Vec::new();
    for e in &p.entries {
        encode_record(KIND_ENTRY, e, &mut bytes)?;
    }
    if let Some(hs) = &p.hard_state {
        encode_record(KIND_HARD_STATE, hs, &mut bytes)?;
    }
    Ok(bytes)
}

/// The journal bytes `DiskStorage::persist` writes as the new `raft.log` after a snapshot
/// (compaction: the entries after the snapshot, then the hard state).
pub fn compacted_journal_bytes(p: &Persist) -> Result<Vec<u8>, StorageError> {
    journal_bytes(p)
}

/// Recovery of a journal held in memory after the snapshot beside it (as `DiskStorage::open`
/// recovers `raft.snapshot` and `raft.log`): the state and the length of the valid prefix (a torn
/// or damaged tail is cut there; entries the snapshot covers are skipped).
pub fn recover_journal(snapshot: Option<Snapshot>, buf: &[u8]) -> (Recovered, usize) {
    let mut rec = Recovered {
        snapshot,
        ..Recovered::default()
    };
    let (valid, _) = replay(buf, &mut rec);
    rec.truncated_bytes = (buf.len() - valid) as u64;
    finish_recovery(&mut rec);
    (rec, valid)
}

impl DiskStorage {
    /// Opens (creating if needed) the directory and recovers its state, cutting a bad tail.
    pub fn open(dir: &Path) -> Result<(DiskStorage, Recovered), StorageError> {
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let mut rec = Recovered {
            snapshot: read_snapshot(&dir.join(SNAPSHOT_FILE))?,
            ..Recovered::default()
        };
        let log_path = dir.join(LOG_FILE);
        let mut log = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&log_path)
            .map_err(io_err(&log_path))?;
        let mut buf = Vec::new();
        log.read_to_end(&mut buf).map_err(io_err(&log_path))?;
        let (valid, why) = replay(&buf, &mut rec);
        if let Some(why) = why {
            rec.truncated_bytes = (buf.len() - valid) as u64;
            tracing::warn!(
                path = %log_path.display(),
                valid_bytes = valid,
                cut_bytes = rec.truncated_bytes,
                "metadata log: {why} at byte {valid}; truncating the journal there"
            );
            log.set_len(valid as u64).map_err(io_err(&log_path))?;
            log.sync_all().map_err(io_err(&log_path))?;
        }
        finish_recovery(&mut rec);
        Ok((
            DiskStorage {
                dir: dir.to_path_buf(),
                log,
            },
            rec,
        ))
    }

    /// Makes one step's output durable (see `Persist`): returns once it is fsynced.
    pub fn persist(&mut self, p: &Persist) -> Result<(), StorageError> {
        if let Some(snap) = &p.snapshot {
            let mut bytes = Vec::new();
            encode_record(KIND_SNAPSHOT, snap, &mut bytes)?;
            replace_file(&self.dir, SNAPSHOT_FILE, &bytes)?;
            return self.rewrite_log(p);
        }
        let bytes = journal_bytes(p)?;
        if bytes.is_empty() {
            return Ok(());
        }
        let path = self.dir.join(LOG_FILE);
        self.log.write_all(&bytes).map_err(io_err(&path))?;
        self.log.sync_data().map_err(io_err(&path))
    }

    /// Compaction: the journal becomes the hard state plus the entries after the snapshot.
    fn rewrite_log(&mut self, p: &Persist) -> Result<(), StorageError> {
        let bytes = compacted_journal_bytes(p)?;
        replace_file(&self.dir, LOG_FILE, &bytes)?;
        let path = self.dir.join(LOG_FILE);
        self.log = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(io_err(&path))?;
        Ok(())
    }

    /// Size of the journal on disk (for tests and status).
    pub fn log_bytes(&self) -> u64 {
        self.log.metadata().map(|m| m.len()).unwrap_or(0)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

#[cfg(test)]
#[path = "storage_tests.rs"]
mod tests;
