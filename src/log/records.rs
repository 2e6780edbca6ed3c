//! Record batches handed to a reader: either bytes in memory or a byte range of a segment file that
//! the connection writer sends from the page cache with `sendfile` (Kafka's `MemoryRecords` and
//! `FileRecords` slices, its `TransferableRecords`).
//!
//! Invariants:
//! - Both forms hold whole batches exactly as the log stored them; a [`FileRecords`] range was
//!   walked batch by batch (every header parsed) under the partition's lock, like a memory read.
//! - A [`FileRecords`] holds its `Arc<File>` past the read: the descriptor stays open (even if the
//!   [`FileCache`](super::file_cache::FileCache) evicts it, or the segment is deleted or swapped by
//!   compaction, both of which keep the old inode readable) until the response is written. Only
//!   truncation of the same inode can shorten it; the writer then sees the file end early and must
//!   close the connection (its size prefix is already on the wire).
//!
//! Thread-safety: plain data, `Send + Sync`, cheap to clone (`Bytes` / `Arc`).

use std::fmt;
use std::fs::File;
use std::sync::Arc;

use bytes::Bytes;

use super::batch_io::read_at;
use super::error::LogError;

/// Smallest read returned as [`Records::File`]; smaller ranges are `pread` into memory.
///
/// Each file range pins one descriptor until its response is written. With this floor a response
/// pins at most `max_bytes / 64 KiB` descriptors (one per partition of at least 64 KiB; Kafka's
/// default `fetch.max.bytes` of 50 MiB gives at most 800), so a Fetch over 10,000 small
/// partitions pins none. Below 64 KiB the copy costs little next to the syscalls and the
/// descriptor it saves, and the response goes out in one vectored write.
pub const FILE_RECORDS_MIN_BYTES: usize = 64 * 1024;

/// A byte range of an open segment file, read later by whoever sends it. See the module doc.
#[derive(Clone)]
pub struct FileRecords {
    file: Arc<File>,
    position: u64,
    len: usize,
}

impl FileRecords {
    /// `len` bytes of `file` from `position`; the caller vouches that they are whole batches.
    pub fn new(file: Arc<File>, position: u64, len: usize) -> FileRecords {
        FileRecords {
            file,
            position,
            len,
        }
    }

    /// The open file (shared with the file cache and other in-flight responses).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Byte position of the first batch in the file.
    pub fn position(&self) -> u64 {
        self.position
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Drops the first `n` bytes (`n <= len`): what a partial send leaves to send.
    pub fn advance(&mut self, n: usize) {
        let n = n.min(self.len);
        self.position += n as u64;
        self.len -= n;
    }

    /// The bytes themselves (one `pread`). For tests and callers that need them; the fetch path
    /// never calls this.
    pub fn read(&self) -> Result<Bytes, LogError> {
        let path = std::path::Path::new("<file records>");
        read_at(&self.file, path, self.position, self.len).map(Bytes::from)
    }
}

/// Equal when they name the same range of the same open file.
impl PartialEq for FileRecords {
    fn eq(&self, other: &FileRecords) -> bool {
        Arc::ptr_eq(&self.file, &other.file)
            && self.position == other.position
            && self.len == other.len
    }
}
impl Eq for FileRecords {}

impl fmt::Debug for FileRecords {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileRecords")
            .field("position", &self.position)
            .field("len", &self.len)
            .finish()
    }
}

/// Whole batches for a reader. See the module doc.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Records {
    /// Bytes already in memory (small ranges, or ranges the header walk had read anyway).
    Memory(Bytes),
    /// A range of a segment file, to be sent without copying it into the broker.
    File(FileRecords),
}

impl Records {
    pub fn empty() -> Records {
        Records::Memory(Bytes::new())
    }

    pub fn len(&self) -> usize {
        match self {
            Records::Memory(b) => b.len(),
            Records::File(f) => f.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes (a `pread` for a file range).
    pub fn into_bytes(self) -> Result<Bytes, LogError> {
        match self {
            Records::Memory(b) => Ok(b),
            Records::File(f) => f.read(),
        }
    }
}

impl From<Bytes> for Records {
    fn from(b: Bytes) -> Records {
        Records::Memory(b)
    }
}
