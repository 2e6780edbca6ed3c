//! Low-level reads and writes of `.log` files: exact `pread`s, vectored `pwritev` appends, and a
//! cursor that walks batch headers from a chunked in-memory buffer (one `pread` per chunk rather than
//! per batch). A *sparse* cursor (for reads whose bodies go out with `sendfile`) reads only a small
//! window at each header that follows a large batch, so the bodies are not copied.
//!
//! Invariant: the cursor never reads at or past the `size` it was given, so bytes of a failed or
//! concurrent append beyond the segment's valid end are never seen. Holds no state beyond one walk;
//! a `Cursor` borrows the file and lives for one call.

use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::path::Path;

use bytes::Bytes;

use super::error::LogError;
use crate::record::{BatchHeader, BATCH_HEADER_LEN};

/// Reads exactly `len` bytes at `pos`.
pub(crate) fn read_at(file: &File, path: &Path, pos: u64, len: usize) -> Result<Vec<u8>, LogError> {
    // Read straight into uninitialised capacity: zero-filling a buffer that pread overwrites
    // anyway cost as much as the copy itself on the fetch path.
    let mut buf: Vec<u8> = Vec::with_capacity(len);
    while buf.len() < len {
        let done = buf.len();
        // SAFETY: pread writes at most `len - done` bytes into the spare capacity starting at
        // `done`; only the bytes it reports written become part of the vector.
        let n = unsafe {
            libc::pread(
                file.as_raw_fd(),
                buf.as_mut_ptr().add(done) as *mut libc::c_void,
                len - done,
                (pos + done as u64) as libc::off_t,
            )
        };
        if n < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(LogError::io(path, err));
        }
        if n == 0 {
            return Err(LogError::io(path, std::io::ErrorKind::UnexpectedEof.into()));
        }
        // SAFETY: the first `done + n` bytes are initialised (by earlier reads and this one).
        unsafe { buf.set_len(done + n as usize) };
    }
    Ok(buf)
}

/// Writes all parts contiguously at `pos` with `pwritev`, retrying on short writes.
pub(crate) fn write_parts_at(file: &File, parts: &[&[u8]], pos: u64) -> std::io::Result<()> {
    let mut parts: Vec<&[u8]> = parts.iter().copied().filter(|p| !p.is_empty()).collect();
    let mut pos = pos;
    let mut first = 0;
    while first < parts.len() {
        let iov: Vec<libc::iovec> = parts[first..]
            .iter()
            .take(libc::UIO_MAXIOV as usize)
            .map(|p| libc::iovec {
                iov_base: p.as_ptr() as *mut libc::c_void,
                iov_len: p.len(),
            })
            .collect();
        // SAFETY: every iovec points into a live borrowed slice of the stated length, and the fd is
        // owned by `file` for the duration of the call.
        let n = unsafe {
            libc::pwritev(
                file.as_raw_fd(),
                iov.as_ptr(),
                iov.len() as libc::c_int,
                pos as libc::off_t,
            )
        };
        if n < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        let mut n = n as usize;
        pos += n as u64;
        while n > 0 {
            let p = parts[first];
            if n >= p.len() {
                n -= p.len();
                first += 1;
            } else {
                parts[first] = &p[n..];
                n = 0;
            }
        }
    }
    Ok(())
}

/// Walks batch headers of a segment from a position, reading the file in chunks so that most headers
/// are found in memory. Stops with `Corrupt` on a header that does not parse or runs past `size`.
pub(crate) struct Cursor<'a> {
    file: &'a File,
    path: &'a Path,
    /// Valid bytes of the file; nothing at or past this is read.
    size: u64,
    buf: Vec<u8>,
    buf_start: u64,
    pos: u64,
    chunk: usize,
    /// Sparse walk: after a batch of at least [`SPARSE_MIN_BATCH`] bytes, refill with a
    /// [`HEADER_WINDOW`] read at the next header instead of a `chunk`.
    sparse: bool,
    /// Total size of the last batch walked (0 before the first).
    last_batch: u64,
}

/// What a sparse cursor reads at a header: the 61-byte header with room to spare, so a following
/// small batch's header is often in the same read.
pub(crate) const HEADER_WINDOW: usize = 512;
/// A batch at least this large is skipped by a sparse cursor (one `pread` of [`HEADER_WINDOW`] at the
/// next header): one syscall costs about what copying a few KiB does, so smaller batches are read
/// in `chunk`s as usual.
pub(crate) const SPARSE_MIN_BATCH: u64 = 8 * 1024;

impl<'a> Cursor<'a> {
    pub(crate) fn new(
        file: &'a File,
        path: &'a Path,
        size: u64,
        pos: u64,
        chunk: usize,
    ) -> Cursor<'a> {
        Cursor {
            file,
            path,
            size,
            buf: Vec::new(),
            buf_start: pos,
            pos,
            chunk,
            sparse: false,
            last_batch: 0,
        }
    }

    /// With `on`, the cursor does not read the bodies of large batches (see [`SPARSE_MIN_BATCH`]).
    /// It walks and checks exactly the same headers either way.
    pub(crate) fn sparse(self, on: bool) -> Cursor<'a> {
        Cursor { sparse: on, ..self }
    }

    fn covers(&self, pos: u64, len: u64) -> bool {
        pos >= self.buf_start && pos + len <= self.buf_start + self.buf.len() as u64
    }

    pub(crate) fn next(&mut self) -> Result<Option<(u64, BatchHeader)>, LogError> {
        let size = self.size;
        if self.pos >= size {
            return Ok(None);
        }
        let path = self.path;
        if size - self.pos < BATCH_HEADER_LEN as u64 {
            return Err(LogError::corrupt(
                path,
                format!("partial batch header at {}", self.pos),
            ));
        }
        if !self.covers(self.pos, BATCH_HEADER_LEN as u64) {
            let skip = self.sparse && (self.last_batch == 0 || self.last_batch >= SPARSE_MIN_BATCH);
            let chunk = if skip { HEADER_WINDOW } else { self.chunk };
            let len = (chunk as u64).min(size - self.pos) as usize;
            self.buf = read_at(self.file, path, self.pos, len)?;
            self.buf_start = self.pos;
        }
        let off = (self.pos - self.buf_start) as usize;
        let h = BatchHeader::parse(&self.buf[off..])
            .map_err(|e| LogError::corrupt(path, format!("batch at {}: {e}", self.pos)))?;
        if h.magic != 2 || h.last_offset_delta < 0 {
            let why = format!(
                "batch at {}: magic {}, lastOffsetDelta {}",
                self.pos, h.magic, h.last_offset_delta
            );
            return Err(LogError::corrupt(path, why));
        }
        let total = h.total_size() as u64;
        if self.pos + total > size {
            return Err(LogError::corrupt(
                path,
                format!("batch at {} runs past the end", self.pos),
            ));
        }
        let at = self.pos;
        self.pos += total;
        self.last_batch = total;
        Ok(Some((at, h)))
    }

    /// Whether the buffer holds `[start, end)` (so [`Self::take_range`] needs no I/O).
    pub(crate) fn holds(&self, start: u64, end: u64) -> bool {
        self.covers(start, end - start)
    }

    /// The bytes `[start, end)`: a slice of the buffer if it holds them, else one `pread`.
    pub(crate) fn take_range(self, start: u64, end: u64) -> Result<Bytes, LogError> {
        if self.covers(start, end - start) {
            let from = (start - self.buf_start) as usize;
            let to = (end - self.buf_start) as usize;
            return Ok(Bytes::from(self.buf).slice(from..to));
        }
        let buf = read_at(self.file, self.path, start, (end - start) as usize)?;
        Ok(Bytes::from(buf))
    }
}
