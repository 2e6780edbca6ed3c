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
    let mut buf = Vec::new();
    read_at_into(&mut buf, file, path, pos, len)?;
    Ok(buf)
}

/// Reads exactly `len` bytes at `pos` into `buf` (replacing its contents, reusing its capacity).
fn read_at_into(
    buf: &mut Vec<u8>,
    file: &File,
    path: &Path,
    pos: u64,
    len: usize,
) -> Result<(), LogError> {
    // Read straight into uninitialised capacity: zero-filling a buffer that pread overwrites
    // anyway cost as much as the copy itself on the fetch path.
    buf.clear();
    buf.reserve_exact(len);
    while buf.len() < len {
        let done = buf.len();
        // SAFETY: pread writes at most `len - done` bytes into the spare capacity starting at
        // `done` (reserved above); only the bytes it reports written become part of the vector.
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
    Ok(())
}

/// Most slices handed to one `pwritev` by [`write_parts_at`] (an append passes two: the rewritten
/// header and the body).
const WRITE_IOV: usize = 16;

/// Writes all parts contiguously at `pos` with `pwritev`, retrying on short writes. Allocates
/// nothing: the iovecs live on the stack, `WRITE_IOV` at a time.
pub(crate) fn write_parts_at(file: &File, parts: &[&[u8]], pos: u64) -> std::io::Result<()> {
    let mut pos = pos;
    // The next byte to write is `parts[first][skip]`.
    let mut first = 0;
    let mut skip = 0;
    loop {
        while first < parts.len() && skip == parts[first].len() {
            first += 1;
            skip = 0;
        }
        if first == parts.len() {
            return Ok(());
        }
        let empty = libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        };
        let mut iov = [empty; WRITE_IOV];
        let mut count = 0;
        for (k, p) in parts[first..].iter().enumerate() {
            let p = if k == 0 { &p[skip..] } else { p };
            if p.is_empty() {
                continue;
            }
            if count == WRITE_IOV {
                break;
            }
            iov[count] = libc::iovec {
                iov_base: p.as_ptr() as *mut libc::c_void,
                iov_len: p.len(),
            };
            count += 1;
        }
        // SAFETY: the first `count` iovecs point into live borrowed slices of the stated lengths,
        // and the fd is owned by `file` for the duration of the call.
        let n = unsafe {
            libc::pwritev(
                file.as_raw_fd(),
                iov.as_ptr(),
                count as libc::c_int,
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
            let left = parts[first].len() - skip;
            if n >= left {
                n -= left;
                first += 1;
                skip = 0;
            } else {
                skip += n;
                n = 0;
            }
        }
    }
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
            read_at_into(&mut self.buf, self.file, path, self.pos, len)?;
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

    /// Position of the next header to walk (where a failed [`Self::next`] stopped).
    pub(crate) fn position(&self) -> u64 {
        self.pos
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_parts_at_writes_many_and_empty_parts_contiguously() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("parts");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        // 3 * WRITE_IOV + 5 parts of varied sizes, every fourth one empty: several pwritev rounds
        let owned: Vec<Vec<u8>> = (0..3 * WRITE_IOV + 5)
            .map(|i| vec![i as u8; if i % 4 == 3 { 0 } else { 1 + i * 37 % 500 }])
            .collect();
        let parts: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
        write_parts_at(&file, &parts, 10).unwrap();
        let want = owned.concat();
        assert_eq!(read_at(&file, &path, 10, want.len()).unwrap(), want);
        assert_eq!(file.metadata().unwrap().len(), 10 + want.len() as u64);
        // nothing at all to write is a no-op
        write_parts_at(&file, &[&[], &[]], 0).unwrap();
        assert_eq!(read_at(&file, &path, 0, 10).unwrap(), vec![0u8; 10]);
    }

    #[test]
    fn read_at_into_reuses_the_buffer_and_replaces_its_contents() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r");
        let data: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let file = File::open(&path).unwrap();
        let mut buf = Vec::new();
        read_at_into(&mut buf, &file, &path, 0, 1000).unwrap();
        assert_eq!(buf, data[..1000]);
        let at = buf.as_ptr();
        read_at_into(&mut buf, &file, &path, 3000, 512).unwrap();
        assert_eq!(buf, data[3000..3512]);
        assert_eq!(buf.as_ptr(), at, "a smaller read reuses the allocation");
        assert!(
            read_at_into(&mut buf, &file, &path, 4000, 200).is_err(),
            "past the end"
        );
    }
}
