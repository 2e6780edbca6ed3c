//! Kafka's `leader-epoch-checkpoint` file (`LeaderEpochCheckpointFile` on `CheckpointFile`), one
//! per partition directory:
//!
//! ```text
//! 0            <- version
//! 2            <- number of entries
//! 0 0          <- leader_epoch start_offset
//! 3 1200
//! ```
//!
//! Invariants: writes are atomic and durable (temporary file, fsync, rename, fsync of the
//! directory: `log::checkpoint::write_atomically`, which is what Kafka's `CheckpointFile` does), so
//! a crash leaves the old or the new file. Parsing never panics: bad text is an error naming the
//! line (Kafka fails the log load on it). A missing file is an empty list, as in Kafka. Entries
//! read back are loaded through `LeaderEpochCache::from_entries`, which re-applies Kafka's
//! monotonicity rule. Stateless; callers serialise writers of one file.

use std::fs;
use std::path::Path;

use super::epoch_cache::EpochEntry;
use crate::log::checkpoint::write_atomically;
use crate::log::error::LogError;

#[cfg(test)]
mod tests;

/// File name of the checkpoint in a partition directory.
pub const LEADER_EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";

/// The only format version Kafka writes and reads.
const CURRENT_VERSION: &str = "0";

/// Renders the file's text.
pub fn format_leader_epoch_checkpoint(entries: &[EpochEntry]) -> String {
    let mut out = format!("{CURRENT_VERSION}\n{}\n", entries.len());
    for e in entries {
        out.push_str(&format!("{} {}\n", e.epoch, e.start_offset));
    }
    out
}

/// Parses the file's text: version `0`, the count, then exactly that many `epoch offset` lines
/// (fields separated by whitespace, as Kafka's formatter splits them).
pub fn parse_leader_epoch_checkpoint(text: &str) -> Result<Vec<EpochEntry>, String> {
    let mut lines = text.lines();
    match lines.next().map(str::trim) {
        Some(CURRENT_VERSION) => {}
        Some(v) => return Err(format!("unsupported version {v:?}")),
        None => return Err("empty file".into()),
    }
    let count: usize = lines
        .next()
        .ok_or("missing entry count")?
        .trim()
        .parse()
        .map_err(|e| format!("bad entry count: {e}"))?;
    let mut entries = Vec::new();
    for line in lines {
        if entries.len() == count {
            return Err(format!("more than the {count} entries announced"));
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [epoch, offset] = fields[..] else {
            return Err(format!("malformed entry {line:?}"));
        };
        let epoch: i32 = epoch
            .parse()
            .map_err(|e| format!("bad epoch in {line:?}: {e}"))?;
        let start_offset: i64 = offset
            .parse()
            .map_err(|e| format!("bad offset in {line:?}: {e}"))?;
        entries.push(EpochEntry {
            epoch,
            start_offset,
        });
    }
    if entries.len() != count {
        return Err(format!("expected {count} entries, found {}", entries.len()));
    }
    Ok(entries)
}

/// Reads the checkpoint at `path`; a missing file is an empty list.
pub fn read_leader_epoch_checkpoint(path: &Path) -> Result<Vec<EpochEntry>, LogError> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            return Err(LogError::malformed(path, "not UTF-8"))
        }
        Err(e) => return Err(LogError::io(path, e)),
    };
    parse_leader_epoch_checkpoint(&text).map_err(|why| LogError::malformed(path, why))
}

/// Writes the checkpoint at `path` atomically and durably.
pub fn write_leader_epoch_checkpoint(path: &Path, entries: &[EpochEntry]) -> Result<(), LogError> {
    write_atomically(path, format_leader_epoch_checkpoint(entries).as_bytes())
}
