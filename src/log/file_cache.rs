//! Lazy file handles: a bounded, least-recently-used cache of open `.log` file descriptors shared by
//! every segment of the broker (`sluice.log.open.files.max`).
//!
//! Role: a broker with 10,000 partitions must not hold 10,000+ descriptors. A segment keeps a
//! [`CachedFile`] (path + cache slot id), not a `File`; each read, append, truncate or fsync asks it
//! for the descriptor, which is reopened by path (read-write, never created) when it was evicted.
//! Positioned I/O (`pread`/`pwritev`) carries no file offset, so a reopened descriptor is
//! interchangeable with the evicted one; closing a descriptor loses no page-cache data, and `fsync`
//! through a new descriptor syncs the same inode.
//!
//! Invariants:
//! - At most `capacity` descriptors are held by the cache. A caller holds the `Arc<File>` it was
//!   given only for one operation, except a Fetch read of at least
//!   [`FILE_RECORDS_MIN_BYTES`](super::records::FILE_RECORDS_MIN_BYTES), whose
//!   [`FileRecords`](super::records::FileRecords) keeps it until the response is written. So the
//!   process-wide count of segment descriptors is at most `capacity` plus the operations in flight
//!   (a few, one per runtime thread) plus the file ranges of responses not yet sent (at most one per
//!   partition read of >= 64 KiB; a descriptor evicted meanwhile closes when the last one is sent).
//! - Slots are keyed by a unique id per [`CachedFile`], never by path: a segment replaced under the
//!   same name (compaction's swap) gets a new id, and dropping a `CachedFile` closes its descriptor.
//! - No file is opened or closed while the cache's mutex is held (the syscalls happen outside it).
//!
//! Thread-safety: `FileCache` is a cheap `Arc` clone, `Send + Sync`; one `parking_lot::Mutex` guards
//! the table, held for a hash lookup and an LRU update per operation, never across I/O.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::error::{IoContext, LogError};

/// Default bound on open segment descriptors (`sluice.log.open.files.max`): well below the common
/// soft limit of 1024 so client connections keep room.
pub const DEFAULT_MAX_OPEN_FILES: usize = 512;

/// Counters of a [`FileCache`], for tests and diagnostics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Descriptors held by the cache now.
    pub open: usize,
    /// Files opened since the cache was made (first opens and reopens).
    pub opens: u64,
    /// Descriptors closed to make room.
    pub evictions: u64,
}

/// The shared cache. See the module doc.
#[derive(Clone)]
pub struct FileCache {
    inner: Arc<Inner>,
}

struct Inner {
    capacity: usize,
    next_id: AtomicU64,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    slots: HashMap<u64, Slot>,
    /// Last-use tick -> slot id; the first entry is the least recently used.
    lru: BTreeMap<u64, u64>,
    tick: u64,
    stats: CacheStats,
}

struct Slot {
    file: Arc<File>,
    used: u64,
}

impl State {
    fn touch(&mut self, id: u64) -> Option<Arc<File>> {
        self.tick += 1;
        let tick = self.tick;
        let slot = self.slots.get_mut(&id)?;
        self.lru.remove(&slot.used);
        slot.used = tick;
        self.lru.insert(tick, id);
        Some(slot.file.clone())
    }

    /// Inserts `file` for `id` (or returns the one a concurrent caller inserted first) and returns
    /// the descriptors to close (evicted, or ours if we lost the race), to be dropped unlocked.
    fn insert(&mut self, id: u64, file: File, capacity: usize) -> (Arc<File>, Vec<Arc<File>>) {
        if let Some(existing) = self.touch(id) {
            return (existing, vec![Arc::new(file)]);
        }
        let mut evicted = Vec::new();
        while self.slots.len() >= capacity {
            let Some((_, victim)) = self.lru.pop_first() else {
                break;
            };
            if let Some(slot) = self.slots.remove(&victim) {
                evicted.push(slot.file);
                self.stats.evictions += 1;
            }
        }
        self.tick += 1;
        let file = Arc::new(file);
        self.slots.insert(
            id,
            Slot {
                file: file.clone(),
                used: self.tick,
            },
        );
        self.lru.insert(self.tick, id);
        self.stats.opens += 1;
        (file, evicted)
    }

    fn remove(&mut self, id: u64) -> Option<Arc<File>> {
        let slot = self.slots.remove(&id)?;
        self.lru.remove(&slot.used);
        Some(slot.file)
    }
}

impl FileCache {
    /// A cache holding at most `capacity` descriptors (at least 1).
    pub fn new(capacity: usize) -> FileCache {
        FileCache {
            inner: Arc::new(Inner {
                capacity: capacity.max(1),
                next_id: AtomicU64::new(0),
                state: Mutex::new(State::default()),
            }),
        }
    }

    pub fn capacity(&self) -> usize {
        self.inner.capacity
    }

    pub fn stats(&self) -> CacheStats {
        let st = self.inner.state.lock();
        CacheStats {
            open: st.slots.len(),
            ..st.stats
        }
    }

    fn insert(&self, id: u64, file: File) -> Arc<File> {
        let (file, to_close) = self
            .inner
            .state
            .lock()
            .insert(id, file, self.inner.capacity);
        drop(to_close);
        file
    }
}

impl Default for FileCache {
    fn default() -> FileCache {
        FileCache::new(DEFAULT_MAX_OPEN_FILES)
    }
}

/// Two handles are equal when they share one cache.
impl PartialEq for FileCache {
    fn eq(&self, other: &FileCache) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}
impl Eq for FileCache {}

impl fmt::Debug for FileCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileCache")
            .field("capacity", &self.inner.capacity)
            .field("stats", &self.stats())
            .finish()
    }
}

/// One file reached through a [`FileCache`]: opened on demand, closed when evicted or dropped.
pub struct CachedFile {
    id: u64,
    path: PathBuf,
    cache: FileCache,
}

impl CachedFile {
    /// Opens `path` read-write (created if absent; emptied when `truncate`) and caches the
    /// descriptor, which is the likely next user.
    pub fn open(cache: &FileCache, path: PathBuf, truncate: bool) -> Result<CachedFile, LogError> {
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(truncate)
            .open(&path)
            .at(&path)?;
        let id = cache.inner.next_id.fetch_add(1, Ordering::Relaxed);
        cache.insert(id, file);
        Ok(CachedFile {
            id,
            path,
            cache: cache.clone(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The descriptor, reopened (read-write, not created: a vanished file is an error) if the
    /// cache had evicted it. Hold it for one operation only.
    pub fn get(&self) -> Result<Arc<File>, LogError> {
        if let Some(file) = self.cache.inner.state.lock().touch(self.id) {
            return Ok(file);
        }
        let file = File::options()
            .read(true)
            .write(true)
            .open(&self.path)
            .at(&self.path)?;
        Ok(self.cache.insert(self.id, file))
    }

    /// Whether the cache holds this file's descriptor now.
    pub fn is_open(&self) -> bool {
        self.cache.inner.state.lock().slots.contains_key(&self.id)
    }
}

impl Drop for CachedFile {
    fn drop(&mut self) {
        let file = self.cache.inner.state.lock().remove(self.id);
        drop(file);
    }
}

impl fmt::Debug for CachedFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedFile")
            .field("path", &self.path)
            .finish()
    }
}

/// Open descriptors of this process whose target lies under `dir` (Linux `/proc/self/fd`), for
/// tests that assert the bound without counting other tests' files.
#[cfg(test)]
pub(crate) fn open_fds_under(dir: &Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .filter(|target| target.starts_with(dir))
                .count()
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    #[test]
    fn evicts_the_least_recently_used_and_reopens_on_demand() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FileCache::new(2);
        let files: Vec<CachedFile> = (0..3)
            .map(|i| CachedFile::open(&cache, dir.path().join(format!("{i}.log")), true).unwrap())
            .collect();
        // Opening the third evicted the first.
        assert_eq!(
            files.iter().map(CachedFile::is_open).collect::<Vec<_>>(),
            [false, true, true]
        );
        assert_eq!(open_fds_under(dir.path()), 2);
        // Using file 1 makes file 2 the least recently used; reopening 0 evicts 2.
        files[1].get().unwrap().write_all_at(b"one", 0).unwrap();
        files[0].get().unwrap().write_all_at(b"zero", 0).unwrap();
        assert_eq!(
            files.iter().map(CachedFile::is_open).collect::<Vec<_>>(),
            [true, true, false]
        );
        let mut buf = [0u8; 3];
        files[1].get().unwrap().read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"one");
        let stats = cache.stats();
        assert_eq!((stats.open, stats.opens, stats.evictions), (2, 4, 2));
        assert_eq!(open_fds_under(dir.path()), 2);
        drop(files);
        assert_eq!(cache.stats().open, 0);
        assert_eq!(open_fds_under(dir.path()), 0);
    }

    #[test]
    fn a_vanished_file_is_an_error_not_a_new_file() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FileCache::new(1);
        let a = CachedFile::open(&cache, dir.path().join("a.log"), true).unwrap();
        let _b = CachedFile::open(&cache, dir.path().join("b.log"), true).unwrap();
        std::fs::remove_file(dir.path().join("a.log")).unwrap();
        match a.get() {
            Err(LogError::Io { path, source }) => {
                assert_eq!(path, dir.path().join("a.log"));
                assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
            }
            other => panic!("expected NotFound, got {other:?}"),
        }
        assert!(!dir.path().join("a.log").exists());
    }
}
