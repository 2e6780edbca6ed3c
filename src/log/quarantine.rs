//! Quarantine: where recovery puts the bytes it takes out of a log, so that it never destroys any.
//!
//! Recovery cuts a damaged segment at its first invalid byte and takes the segments after it out
//! of the log (their offsets would no longer follow). Instead of deleting, it moves those bytes
//! into quarantine files in the partition directory:
//!
//! - `<20-digit base>.log.quarantine-<position>`: the bytes of segment `<base>.log` from byte
//!   `<position>` to its end, as they were. A whole segment moved aside is position 0 (its `.log`
//!   renamed; its `.index`/`.timeindex`/`.txnindex` are caches of that file and are removed).
//! - When that name is taken (an earlier recovery cut at the same place), `-<n>` is appended.
//!
//! Neither our loader nor Kafka's treats these as segments or indexes (the names end in neither
//! `.log` nor an index suffix), and nothing ever deletes them: an operator inspects them (rename a
//! copy to `.log` for `kafka-dump-log.sh`) and removes them. Recovery lists what it moved in one
//! WARN line ([`summary`]).
//!
//! Performs file I/O only on the paths it is given; holds no state.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::batch_io::read_at;
use super::error::{IoContext, LogError};

/// What the quarantine file names carry after the segment file's name.
pub const SUFFIX: &str = ".quarantine-";

/// Bytes copied per `pread` when moving a segment's tail aside.
const COPY_CHUNK: usize = 1024 * 1024;

/// Whether `name` is a quarantine file (never a segment or an index).
pub fn is_quarantine_file(name: &str) -> bool {
    name.contains(SUFFIX)
}

/// A free quarantine name for the bytes of `log_path` from `position` on.
fn free_path(log_path: &Path, position: u64) -> PathBuf {
    let base = format!("{}{SUFFIX}{position}", log_path.display());
    let mut candidate = PathBuf::from(&base);
    let mut n = 1;
    while candidate.exists() {
        candidate = PathBuf::from(format!("{base}-{n}"));
        n += 1;
    }
    candidate
}

/// Copies `[position, position + len)` of `file` (at `log_path`) into a new quarantine file and
/// fsyncs it; the caller then cuts the segment at `position` and fsyncs the directory.
pub fn copy_tail(
    file: &File,
    log_path: &Path,
    position: u64,
    len: u64,
) -> Result<PathBuf, LogError> {
    let target = free_path(log_path, position);
    let mut out = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&target)
        .at(&target)?;
    let mut done = 0u64;
    while done < len {
        let n = (len - done).min(COPY_CHUNK as u64) as usize;
        let chunk = read_at(file, log_path, position + done, n)?;
        out.write_all(&chunk).at(&target)?;
        done += n as u64;
    }
    out.sync_all().at(&target)?;
    Ok(target)
}

/// Moves a whole segment out of the log: `log_path` renamed to its quarantine name (position 0),
/// the index files beside it (`index_paths`, caches of it) removed. The caller fsyncs the directory.
pub fn move_segment(log_path: &Path, index_paths: &[PathBuf]) -> Result<PathBuf, LogError> {
    let target = free_path(log_path, 0);
    fs::rename(log_path, &target).at(log_path)?;
    for path in index_paths {
        match fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(LogError::io(path, e)),
        }
    }
    Ok(target)
}

/// One piece of a log that recovery moved aside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantined {
    /// The quarantine file.
    pub file: PathBuf,
    /// First offset the bytes would have held (the segment's next offset after the cut, or the
    /// base offset of a whole segment).
    pub from_offset: i64,
    /// One past the last offset they claimed, when known (a whole, readable segment).
    pub to_offset: Option<i64>,
    pub bytes: u64,
}

/// The one WARN line's text for everything one log's recovery moved aside.
pub fn summary(dir: &Path, moved: &[Quarantined], log_end_offset: i64) -> String {
    let parts: Vec<String> = moved
        .iter()
        .map(|q| {
            let name = q.file.file_name().map_or_else(
                || q.file.display().to_string(),
                |n| n.to_string_lossy().into(),
            );
            let offsets = match q.to_offset {
                Some(to) => format!("offsets {}..{}", q.from_offset, to),
                None => format!("from offset {}", q.from_offset),
            };
            format!("{name} ({offsets}, {} bytes)", q.bytes)
        })
        .collect();
    format!(
        "recovery of {} moved {} bytes of data it could not keep in the log into quarantine files \
         (nothing deleted; log end offset now {log_end_offset}): {}",
        dir.display(),
        moved.iter().map(|q| q.bytes).sum::<u64>(),
        parts.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_never_look_like_segments_and_never_collide() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("00000000000000000006.log");
        std::fs::write(&log, b"0123456789").unwrap();
        let file = File::open(&log).unwrap();
        let a = copy_tail(&file, &log, 4, 6).unwrap();
        let b = copy_tail(&file, &log, 4, 6).unwrap();
        assert_eq!(
            a.file_name().unwrap(),
            "00000000000000000006.log.quarantine-4"
        );
        assert_eq!(
            b.file_name().unwrap(),
            "00000000000000000006.log.quarantine-4-1"
        );
        assert_eq!(std::fs::read(&a).unwrap(), b"456789");
        assert_eq!(std::fs::read(&b).unwrap(), b"456789");
        for p in [&a, &b] {
            let name = p.file_name().unwrap().to_string_lossy();
            assert!(is_quarantine_file(&name));
            for ext in [".log", ".index", ".timeindex", ".txnindex", ".snapshot"] {
                assert!(!name.ends_with(ext), "{name}");
            }
        }
        assert!(!is_quarantine_file("00000000000000000006.log"));
    }
}
