//! Errors of the log layer.
//!
//! One enum for everything under `log`. Variants are the cases a caller acts on: `OffsetOutOfRange`
//! becomes Kafka's OFFSET_OUT_OF_RANGE, `NonMonotonicAppend` is a bug in the caller, `Io` and
//! `Corrupt` mean the log directory is unusable (Kafka would mark it offline). Holds no state.

use std::io;
use std::path::{Path, PathBuf};

/// What went wrong in the log layer.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// An operating-system I/O error, with the file it happened on.
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A fetch or lookup asked for an offset outside `[log_start, log_end]`.
    #[error("offset {offset} is out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        offset: i64,
        log_start: i64,
        log_end: i64,
    },
    /// An append whose base offset is not the log end offset, or whose metadata is inconsistent.
    #[error(
        "append at base offset {base_offset} does not continue the log at {log_end}: {reason}"
    )]
    NonMonotonicAppend {
        base_offset: i64,
        log_end: i64,
        reason: &'static str,
    },
    /// On-disk data that is not what the format promises (outside recovery, which repairs it).
    #[error("corrupt data in {path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    /// A read met a batch header that does not parse at `position` of the segment `path` (the
    /// fetch path answers CORRUPT_MESSAGE for it; batches before it are still readable).
    #[error("damaged batch at position {position} of {path}: {reason}")]
    DamagedBatch {
        path: PathBuf,
        position: u64,
        reason: String,
    },
    /// A checkpoint or properties file that does not parse.
    #[error("malformed file {path}: {reason}")]
    Malformed { path: PathBuf, reason: String },
}

impl LogError {
    /// Wraps an `io::Error` with the path it concerns.
    pub fn io(path: &Path, source: io::Error) -> LogError {
        LogError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    pub(crate) fn corrupt(path: &Path, reason: impl Into<String>) -> LogError {
        LogError::Corrupt {
            path: path.to_path_buf(),
            reason: reason.into(),
        }
    }

    pub(crate) fn malformed(path: &Path, reason: impl Into<String>) -> LogError {
        LogError::Malformed {
            path: path.to_path_buf(),
            reason: reason.into(),
        }
    }
}

/// Adds a path to an `io::Result`.
pub(crate) trait IoContext<T> {
    fn at(self, path: &Path) -> Result<T, LogError>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn at(self, path: &Path) -> Result<T, LogError> {
        self.map_err(|e| LogError::io(path, e))
    }
}
