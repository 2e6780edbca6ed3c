//! The data directory's lock: an exclusive `flock` on `<data dir>/.lock`, as Kafka's `LogManager`
//! takes on every log directory, so two brokers can never share one directory.
//!
//! Invariants:
//! - The lock is taken before anything else in the directory is read or written (recovery,
//!   `meta.properties`, checkpoints); a broker that cannot take it changes nothing there: it opens
//!   `.lock` without truncating, reads the holder's pid, and gives up.
//! - Once locked, the file holds the holder's pid (one decimal line), for the next broker's error.
//! - Held as long as the [`DirLock`] lives (the broker keeps it for the process lifetime); the
//!   kernel releases it when the process dies, so a crash never leaves a stale lock. The file
//!   itself stays (as Kafka's does).
//!
//! Thread-safety: `DirLock` is an owned file; nothing to share.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// The lock file's name inside the data directory (Kafka's `LogManager.LockFileName`).
pub const LOCK_FILE: &str = ".lock";

/// Why the data directory could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum DirLockError {
    /// Another process (or another broker in this process) holds the lock.
    #[error("data directory {} is in use by another broker{}: cannot lock {}", dir.display(), holder(*pid), dir.join(LOCK_FILE).display())]
    Locked { dir: PathBuf, pid: Option<u32> },
    /// The directory or its lock file could not be created or opened.
    #[error("data directory {}: cannot lock {}: {source}", dir.display(), dir.join(LOCK_FILE).display())]
    Io {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn holder(pid: Option<u32>) -> String {
    pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
}

/// The held lock on one data directory. Dropping it releases the lock.
#[derive(Debug)]
pub struct DirLock {
    /// Kept open: the `flock` lives on this open file description.
    _file: File,
    dir: PathBuf,
}

impl DirLock {
    /// Creates `dir` if needed, then takes the exclusive lock on `dir/.lock` without waiting
    /// and writes this process's pid into it.
    pub fn acquire(dir: &Path) -> Result<DirLock, DirLockError> {
        let io = |source| DirLockError::Io {
            dir: dir.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let path = dir.join(LOCK_FILE);
        // No truncate: the file may be the current holder's, with its pid in it.
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        // SAFETY: the descriptor belongs to `file`, open for the duration of the call.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let mut text = String::new();
                let pid = file
                    .read_to_string(&mut text)
                    .ok()
                    .and_then(|_| text.trim().parse().ok());
                return Err(DirLockError::Locked {
                    dir: dir.to_path_buf(),
                    pid,
                });
            }
            return Err(io(err));
        }
        let pid = format!("{}\n", std::process::id());
        file.set_len(0).map_err(io)?;
        file.write_all_at(pid.as_bytes(), 0).map_err(io)?;
        file.flush().map_err(io)?;
        Ok(DirLock {
            _file: file,
            dir: dir.to_path_buf(),
        })
    }

    /// The locked directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_one_directory_is_refused_with_the_holders_pid() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let first = DirLock::acquire(&dir).unwrap();
        assert_eq!(first.dir(), dir.as_path());
        let pid = std::fs::read_to_string(dir.join(LOCK_FILE)).unwrap();
        assert_eq!(pid.trim(), std::process::id().to_string());
        let err = DirLock::acquire(&dir).unwrap_err();
        match &err {
            DirLockError::Locked { dir: d, pid } => {
                assert_eq!(d, &dir);
                assert_eq!(*pid, Some(std::process::id()));
            }
            other => panic!("expected Locked, got {other:?}"),
        }
        let line = err.to_string();
        assert!(line.contains(&dir.display().to_string()), "{line}");
        assert!(
            line.contains(&format!("pid {}", std::process::id())),
            "{line}"
        );
        // The refused attempt left the holder's file as it was.
        assert_eq!(
            std::fs::read_to_string(dir.join(LOCK_FILE)).unwrap(),
            format!("{}\n", std::process::id())
        );
        drop(first);
        // Released: the next one gets it.
        let again = DirLock::acquire(&dir).unwrap();
        drop(again);
    }
}
