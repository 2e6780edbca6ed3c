//! One log segment: `<base>.log` plus its `.index`, `.timeindex` and (once it holds an abort marker)
//! `.txnindex`, named by the 20-digit base offset.
//!
//! Role: append whole batches at the end of the `.log` file with positioned writes (page cache, no
//! fsync), keep the sparse indexes in memory, read whole batches back by offset, truncate, recover.
//!
//! File handles are lazy: the `.log` descriptor lives in the broker-wide [`FileCache`](super::file_cache::FileCache) (bounded,
//! LRU) and is reopened by path when it was evicted; the index files are opened only while being
//! written (roll, flush, recovery). An idle segment holds no descriptor.
//!
//! Invariants:
//! - `size` is the number of valid bytes; the file may be longer only after a failed write (readers use
//!   `size`, the next append overwrites, recovery cuts it).
//! - `[0, size)` is a sequence of whole batches with strictly increasing offsets, all in
//!   `[base_offset, base_offset + i32::MAX]`; `next_offset` is one past the last batch's last offset.
//! - Index entries are added exactly as Kafka adds them: before a batch is tracked, if more than
//!   `index_interval_bytes` were appended since the last entry, the batch (its last offset, its start
//!   position) gets an offset-index entry and the running max timestamp a time-index entry.
//! - Index files are written lazily ([`Segment::persist_indexes`], [`Segment::flush`]); on disk they are
//!   exactly `entries * entry_size` bytes.
//!
//! Thread-safety: `Send + Sync`, but mutation needs `&mut self`; the owning `PartitionLog` (behind the
//! partition's mutex) serialises access. Reads take `&self` and use `pread` only.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use super::batch_io::{read_at, write_parts_at, Cursor};
use super::error::{IoContext, LogError};
use super::file_cache::CachedFile;
use super::index::{OffsetIndex, TimeIndex, TimestampOffset, OFFSET_ENTRY_SIZE, TIME_ENTRY_SIZE};
use super::partition_log::{AppendMeta, LogConfig};
use super::quarantine;
use super::records::{FileRecords, Records, FILE_RECORDS_MIN_BYTES};
use super::txn_index::{AbortedTxn, TxnIndex};
use crate::record::{self, BatchHeader, BATCH_HEADER_LEN};

/// Kafka's "no timestamp" value, the max timestamp of an empty segment.
pub const NO_TIMESTAMP: i64 = -1;
/// Smallest `pread` used when walking batch headers.
const MIN_CHUNK: usize = 64 * 1024;
/// Largest `pread` used when walking batch headers.
const MAX_CHUNK: usize = 4 * 1024 * 1024;
/// Chunk read while validating batches during recovery.
const RECOVERY_CHUNK: usize = 1024 * 1024;
/// Segments larger than this log recovery progress.
const PROGRESS_MIN_BYTES: u64 = 64 * 1024 * 1024;

/// The file name of a segment file: 20-digit zero-padded base offset plus extension.
pub fn file_name(base_offset: i64, ext: &str) -> String {
    format!("{base_offset:020}.{ext}")
}

/// What [`Segment::recover`] cut off the end of the `.log`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    pub bytes: u64,
    /// Where the cut bytes are now (`None` when nothing was cut).
    pub quarantine: Option<PathBuf>,
}

/// One segment of a partition log. See the module doc.
#[derive(Debug)]
pub struct Segment {
    base_offset: i64,
    /// The `.log` file (its path included); the index paths are derived from it.
    log: CachedFile,
    /// Valid bytes in the `.log` file.
    size: u64,
    /// One past the last offset of the last batch (`base_offset` when empty).
    next_offset: i64,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    /// Aborted transactions whose marker is in this segment.
    txn_index: TxnIndex,
    /// Why entries of the `.txnindex` file were cut at open (they must be re-added by replay).
    txn_index_damage: Option<String>,
    /// Largest batch max timestamp and the last offset of that batch (Kafka's "shallow offset").
    max_timestamp: TimestampOffset,
    bytes_since_last_index_entry: u64,
    index_interval_bytes: u64,
    /// Wall-clock time of the first append (or of open, for a non-empty segment): drives `segment.ms`.
    first_append_ms: Option<i64>,
    /// Data or indexes changed since the last flush.
    dirty: bool,
}

/// What a read may return ([`Segment::read_records`], `PartitionLog::read_with`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimits {
    /// Bytes at most (whole batches only), except for the first batch with `min_one_batch`.
    pub max_bytes: usize,
    /// No batch whose base offset is >= this (the high watermark or the last stable offset).
    pub max_offset: i64,
    /// A range of at least [`FILE_RECORDS_MIN_BYTES`] (whatever `max_bytes` asked for) comes back
    /// as [`Records::File`] and the walk skips the bodies of large batches.
    pub zero_copy: bool,
    /// The first batch is returned whole even when it is larger than `max_bytes` (Kafka's
    /// `minOneMessage`: true until a Fetch has read from a non-empty partition). Without it a
    /// first batch over `max_bytes` gives an empty read.
    pub min_one_batch: bool,
}

/// Whole batches read by [`Segment::read_records`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentRead {
    /// The batches; empty when the first candidate starts at or beyond `max_offset`.
    pub records: Records,
    /// Base offset of the first batch (of the first candidate when `records` is empty).
    pub base_offset: i64,
    /// One past the last offset of the last batch returned (`base_offset` when empty).
    pub next_offset: i64,
}

/// What [`Segment::open`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadState {
    /// Indexes decoded and the tail walk reached the end of the file cleanly.
    Clean,
    /// Something did not add up; the segment needs [`Segment::recover`]. The reason is for the log.
    NeedsRecovery(String),
}

/// Creates `path` if absent (emptied when `truncate`); the descriptor is closed at once.
fn touch(path: &Path, truncate: bool) -> Result<(), LogError> {
    File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(truncate)
        .open(path)
        .map(drop)
        .at(path)
}

impl Segment {
    fn with_files(
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        truncate: bool,
    ) -> Result<Segment, LogError> {
        let log_path = dir.join(file_name(base_offset, "log"));
        touch(&dir.join(file_name(base_offset, "index")), truncate)?;
        touch(&dir.join(file_name(base_offset, "timeindex")), truncate)?;
        let log = CachedFile::open(&config.files, log_path, truncate)?;
        let size = log.get()?.metadata().at(log.path())?.len();
        let txn_path = dir.join(file_name(base_offset, "txnindex"));
        let txn_index = if truncate {
            TxnIndex::create(txn_path)?
        } else {
            TxnIndex::empty(txn_path)
        };
        Ok(Segment {
            base_offset,
            log,
            size,
            next_offset: base_offset,
            offset_index: OffsetIndex::new(base_offset, config.max_offset_index_entries()),
            time_index: TimeIndex::new(base_offset, config.max_time_index_entries()),
            txn_index,
            txn_index_damage: None,
            max_timestamp: TimestampOffset {
                timestamp: NO_TIMESTAMP,
                offset: base_offset,
            },
            bytes_since_last_index_entry: 0,
            index_interval_bytes: config.index_interval_bytes as u64,
            first_append_ms: None,
            dirty: false,
        })
    }

    /// Creates a new, empty segment (replacing any files of that name).
    pub fn create(dir: &Path, base_offset: i64, config: &LogConfig) -> Result<Segment, LogError> {
        let mut seg = Segment::with_files(dir, base_offset, config, true)?;
        seg.dirty = true;
        Ok(seg)
    }

    /// Opens an existing segment: decodes its index files and walks the batches after the last offset
    /// index entry to find `next_offset` and the max timestamp. Never fails on bad contents; those are
    /// reported as [`LoadState::NeedsRecovery`].
    pub fn open(
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        now_ms: i64,
    ) -> Result<(Segment, LoadState), LogError> {
        let index_missing = !dir.join(file_name(base_offset, "index")).exists()
            || !dir.join(file_name(base_offset, "timeindex")).exists();
        let mut seg = Segment::with_files(dir, base_offset, config, false)?;
        let (txn_index, damage) =
            TxnIndex::open(dir.join(file_name(base_offset, "txnindex")), base_offset)?;
        seg.txn_index = txn_index;
        seg.txn_index_damage = damage;
        if seg.size > 0 {
            seg.first_append_ms = Some(now_ms);
        }
        if index_missing {
            return Ok((seg, LoadState::NeedsRecovery("index file missing".into())));
        }
        let (index_path, time_index_path) = (seg.index_path(), seg.time_index_path());
        let index_bytes = fs::read(&index_path).at(&index_path)?;
        let time_bytes = fs::read(&time_index_path).at(&time_index_path)?;
        let max_off = config.max_offset_index_entries();
        let max_time = config.max_time_index_entries();
        match OffsetIndex::decode(base_offset, max_off, &index_bytes, seg.size) {
            Ok(i) => seg.offset_index = i,
            Err(why) => {
                return Ok((
                    seg,
                    LoadState::NeedsRecovery(format!("offset index: {why}")),
                ))
            }
        }
        match TimeIndex::decode(base_offset, max_time, &time_bytes) {
            Ok(i) => seg.time_index = i,
            Err(why) => return Ok((seg, LoadState::NeedsRecovery(format!("time index: {why}")))),
        }
        if let Err(e) = seg.rebuild_tail() {
            return Ok((seg, LoadState::NeedsRecovery(format!("tail walk: {e}"))));
        }
        if let Some(last) = seg.time_index.last() {
            if last.offset >= seg.next_offset {
                let why = format!(
                    "time index offset {} beyond log end {}",
                    last.offset, seg.next_offset
                );
                return Ok((seg, LoadState::NeedsRecovery(why)));
            }
        }
        seg.txn_index.truncate_to(seg.next_offset)?;
        Ok((seg, LoadState::Clean))
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }
    pub fn size(&self) -> u64 {
        self.size
    }
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }
    pub fn is_dirty(&self) -> bool {
        self.dirty
    }
    pub fn log_path(&self) -> &Path {
        self.log.path()
    }
    fn index_path(&self) -> PathBuf {
        self.log.path().with_extension("index")
    }
    fn time_index_path(&self) -> PathBuf {
        self.log.path().with_extension("timeindex")
    }
    /// The `.log` descriptor for one operation (reopened if the cache evicted it).
    pub(crate) fn log_file(&self) -> Result<Arc<File>, LogError> {
        self.log.get()
    }
    /// Largest batch max timestamp and the last offset of that batch; timestamp -1 when none.
    pub fn max_timestamp(&self) -> TimestampOffset {
        self.max_timestamp
    }
    pub fn first_append_ms(&self) -> Option<i64> {
        self.first_append_ms
    }
    /// Either index has no room left: the segment must roll.
    pub fn indexes_full(&self) -> bool {
        self.offset_index.is_full() || self.time_index.is_full()
    }
    pub fn offset_index(&self) -> &OffsetIndex {
        &self.offset_index
    }
    pub fn time_index(&self) -> &TimeIndex {
        &self.time_index
    }
    pub fn txn_index(&self) -> &TxnIndex {
        &self.txn_index
    }
    /// Why entries of the `.txnindex` were dropped at open, if any were.
    pub fn txn_index_damage(&self) -> Option<&str> {
        self.txn_index_damage.as_deref()
    }

    /// Records an aborted transaction whose marker (`txn.last_offset`) is in this segment.
    pub fn append_aborted_txn(&mut self, txn: AbortedTxn) -> Result<(), LogError> {
        self.dirty = true;
        self.txn_index.append(txn)
    }

    /// Recovery replay: adds `txn` unless the index has it. Returns whether it was added.
    pub fn ensure_aborted_txn(&mut self, txn: AbortedTxn) -> Result<bool, LogError> {
        let added = self.txn_index.ensure(txn)?;
        self.dirty |= added;
        Ok(added)
    }

    /// Updates the in-memory state for a batch that now sits at `position` (Kafka's order: max timestamp
    /// first, then maybe an index entry, then the byte count).
    fn track_batch(&mut self, position: u64, last_offset: i64, max_timestamp: i64, size: u64) {
        if max_timestamp > self.max_timestamp.timestamp {
            self.max_timestamp = TimestampOffset {
                timestamp: max_timestamp,
                offset: last_offset,
            };
        }
        if self.bytes_since_last_index_entry > self.index_interval_bytes {
            self.offset_index.append(last_offset, position as u32);
            let m = self.max_timestamp;
            self.time_index.maybe_append(m.timestamp, m.offset, false);
            self.bytes_since_last_index_entry = 0;
        }
        self.bytes_since_last_index_entry += size;
        self.next_offset = last_offset + 1;
    }

    /// Appends one batch given as byte parts; `meta` describes it. The caller checked offsets and
    /// sizes against the log; the segment trusts them.
    pub fn append(
        &mut self,
        parts: &[&[u8]],
        meta: &AppendMeta,
        now_ms: i64,
    ) -> Result<(), LogError> {
        let position = self.size;
        let file = self.log_file()?;
        if let Err(e) = write_parts_at(&file, parts, position) {
            // Drop whatever part of the batch reached the file; ignore a second failure, the next
            // append overwrites and recovery cuts at `size` anyway.
            let _ = file.set_len(position);
            return Err(LogError::io(self.log.path(), e));
        }
        drop(file);
        if self.first_append_ms.is_none() {
            self.first_append_ms = Some(now_ms);
        }
        self.size += meta.size as u64;
        self.dirty = true;
        self.track_batch(
            position,
            meta.last_offset,
            meta.max_timestamp,
            meta.size as u64,
        );
        Ok(())
    }

    /// Resets the tail state to the last offset-index entry and walks the batch headers from there to
    /// `size`, recomputing `next_offset`, the max timestamp and the bytes since the last entry.
    fn rebuild_tail(&mut self) -> Result<(), LogError> {
        let (start, expect_last) = match self.offset_index.last() {
            Some(e) => (e.position as u64, Some(e.offset)),
            None => (0, None),
        };
        self.max_timestamp = self.time_index.last().unwrap_or(TimestampOffset {
            timestamp: NO_TIMESTAMP,
            offset: self.base_offset,
        });
        self.bytes_since_last_index_entry = 0;
        self.next_offset = self.base_offset;
        let file = self.log_file()?;
        let log_path = self.log.path();
        let mut cursor = Cursor::new(&file, log_path, self.size, start, MIN_CHUNK);
        let mut seen = Vec::new();
        let mut prev_last = self.base_offset - 1;
        while let Some((pos, h)) = cursor.next()? {
            if h.base_offset <= prev_last || h.last_offset() - self.base_offset > i32::MAX as i64 {
                return Err(LogError::corrupt(
                    log_path,
                    "batch offsets out of order or range",
                ));
            }
            if pos == start {
                if let Some(want) = expect_last {
                    if h.last_offset() != want {
                        return Err(LogError::corrupt(
                            log_path,
                            "index entry does not match batch",
                        ));
                    }
                }
            }
            prev_last = h.last_offset();
            seen.push((pos, h.last_offset(), h.max_timestamp, h.total_size() as u64));
        }
        drop(cursor);
        drop(file);
        let entries = (self.offset_index.len(), self.time_index.len());
        for (pos, last, ts, size) in seen {
            self.track_batch(pos, last, ts, size);
        }
        if entries != (self.offset_index.len(), self.time_index.len()) {
            // The walk added entries the files lack (a sparser index written by someone else).
            self.dirty = true;
        }
        Ok(())
    }

    /// Re-validates every batch (header, CRC, increasing offsets), cuts the file at the first invalid
    /// byte and rebuilds both indexes. The bytes cut are first copied into a quarantine file
    /// (`log::quarantine`); returns how many and where.
    pub fn recover(&mut self) -> Result<Cut, LogError> {
        let file = self.log_file()?;
        let log_path = self.log.path().to_path_buf();
        let file_len = file.metadata().at(&log_path)?.len();
        self.offset_index.clear();
        self.time_index.clear();
        self.max_timestamp = TimestampOffset {
            timestamp: NO_TIMESTAMP,
            offset: self.base_offset,
        };
        self.bytes_since_last_index_entry = 0;
        self.next_offset = self.base_offset;
        let progress_step = (file_len / 20).max(1);
        let mut next_report = progress_step;
        let mut pos = 0u64;
        let mut buf: Vec<u8> = Vec::new();
        let mut buf_start = 0u64;
        loop {
            let remaining = file_len - pos;
            if remaining < BATCH_HEADER_LEN as u64 {
                break;
            }
            // Make sure the header is buffered, then the whole batch.
            let in_buf =
                |p: u64, n: u64, start: u64, len: usize| p >= start && p + n <= start + len as u64;
            if !in_buf(pos, BATCH_HEADER_LEN as u64, buf_start, buf.len()) {
                buf = read_at(
                    &file,
                    &log_path,
                    pos,
                    RECOVERY_CHUNK.min(remaining as usize),
                )?;
                buf_start = pos;
            }
            let off = (pos - buf_start) as usize;
            let header = match BatchHeader::parse(&buf[off..]) {
                Ok(h) => h,
                Err(_) => break,
            };
            let total = header.total_size() as u64;
            if total > remaining {
                break;
            }
            if !in_buf(pos, total, buf_start, buf.len()) {
                let len = (RECOVERY_CHUNK as u64).max(total).min(remaining) as usize;
                buf = read_at(&file, &log_path, pos, len)?;
                buf_start = pos;
            }
            let off = (pos - buf_start) as usize;
            let h = match record::validate_batch(&buf[off..off + total as usize]) {
                Ok(h) => h,
                Err(_) => break,
            };
            // Offsets must increase and fit the indexes' 32-bit relative offsets and positions.
            if h.base_offset < self.next_offset
                || h.last_offset() - self.base_offset > i32::MAX as i64
                || pos + total > i32::MAX as u64
            {
                break;
            }
            self.track_batch(pos, h.last_offset(), h.max_timestamp, total);
            pos += total;
            if file_len > PROGRESS_MIN_BYTES && pos >= next_report {
                tracing::info!(
                    segment = %log_path.display(),
                    "recovery {}% ({pos} of {file_len} bytes)",
                    pos * 100 / file_len
                );
                next_report += progress_step;
            }
        }
        let cut = file_len - pos;
        let quarantine = if cut > 0 {
            // Never destroy: the cut bytes go to a quarantine file (fsynced) before the cut.
            let moved = quarantine::copy_tail(&file, &log_path, pos, cut)?;
            file.set_len(pos).at(&log_path)?;
            Some(moved)
        } else {
            None
        };
        drop(file);
        self.size = pos;
        self.dirty = true;
        self.txn_index.truncate_to(self.next_offset)?;
        self.persist_indexes()?;
        Ok(Cut {
            bytes: cut,
            quarantine,
        })
    }

    /// The first batch whose last offset is >= `offset`, with its position.
    pub fn find_batch(&self, offset: i64) -> Result<Option<(u64, BatchHeader)>, LogError> {
        let start = self.offset_index.lookup(offset).position as u64;
        let file = self.log_file()?;
        let mut cursor = Cursor::new(&file, self.log.path(), self.size, start, MIN_CHUNK);
        while let Some((pos, h)) = cursor.next()? {
            if h.last_offset() >= offset {
                return Ok(Some((pos, h)));
            }
        }
        Ok(None)
    }

    /// Reads whole batches starting with the one containing `offset` (or the first one after it):
    /// at most `max_bytes` except that the first batch is always whole, and no batch whose base offset
    /// is >= `max_offset`. `None` when this segment has no batch ending at or after `offset`;
    /// `Some` with empty bytes when the first candidate starts at or beyond `max_offset`.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
    ) -> Result<Option<(Bytes, i64)>, LogError> {
        let limits = ReadLimits {
            max_bytes,
            max_offset,
            zero_copy: false,
            min_one_batch: true,
        };
        match self.read_records(offset, &limits)? {
            None => Ok(None),
            Some(r) => Ok(Some((r.records.into_bytes()?, r.base_offset))),
        }
    }

    /// [`Self::read`] under `limits` (see [`ReadLimits`]): with `zero_copy`, a range of at least
    /// [`FILE_RECORDS_MIN_BYTES`] comes back as [`Records::File`], decided by the bytes to send
    /// (a large first batch under a small limit is a file range too), and the walk skips the
    /// bodies of large batches (it parses and checks the same headers either way).
    ///
    /// A batch header that does not parse (a damaged segment) ends the read before it: the
    /// intact batches before it are returned; when the damage is where the read starts (or
    /// before the first batch to return) the answer is [`LogError::DamagedBatch`] with its position.
    pub fn read_records(
        &self,
        offset: i64,
        limits: &ReadLimits,
    ) -> Result<Option<SegmentRead>, LogError> {
        let ReadLimits {
            max_bytes,
            max_offset,
            zero_copy,
            min_one_batch,
        } = *limits;
        let start = self.offset_index.lookup(offset).position as u64;
        let chunk = max_bytes
            .saturating_add(2 * self.index_interval_bytes as usize)
            .clamp(MIN_CHUNK, MAX_CHUNK);
        let file = self.log_file()?;
        let path = self.log.path();
        let sparse = zero_copy && max_bytes >= FILE_RECORDS_MIN_BYTES;
        let mut cursor = Cursor::new(&file, path, self.size, start, chunk).sparse(sparse);
        let (first_pos, first) = loop {
            match cursor.next().map_err(|e| damaged(e, cursor.position()))? {
                None => return Ok(None),
                Some((pos, h)) if h.last_offset() >= offset => break (pos, h),
                Some(_) => {}
            }
        };
        let too_big = !min_one_batch && first.total_size() > max_bytes;
        if first.base_offset >= max_offset || too_big {
            return Ok(Some(SegmentRead {
                records: Records::empty(),
                base_offset: first.base_offset,
                next_offset: first.base_offset,
            }));
        }
        let mut end = first_pos + first.total_size() as u64;
        let mut next_offset = first.last_offset() + 1;
        // No batch fits once the limit is reached: stop without reading the next header.
        while end - first_pos < max_bytes as u64 {
            let (pos, h) = match cursor.next() {
                Ok(Some(b)) => b,
                Ok(None) => break,
                // Damage after intact batches: send those; the next read starts at the damage.
                Err(LogError::Corrupt { .. }) => break,
                Err(e) => return Err(e),
            };
            let batch_end = pos + h.total_size() as u64;
            if h.base_offset >= max_offset || batch_end - first_pos > max_bytes as u64 {
                break;
            }
            end = batch_end;
            next_offset = h.last_offset() + 1;
        }
        let len = (end - first_pos) as usize;
        let records = if zero_copy && len >= FILE_RECORDS_MIN_BYTES && !cursor.holds(first_pos, end)
        {
            drop(cursor);
            Records::File(FileRecords::new(file, first_pos, len))
        } else {
            Records::Memory(cursor.take_range(first_pos, end)?)
        };
        Ok(Some(SegmentRead {
            records,
            base_offset: first.base_offset,
            next_offset,
        }))
    }

    /// The first batch with `max_timestamp >= timestamp` and last offset >= `min_offset`.
    pub fn find_by_timestamp(
        &self,
        timestamp: i64,
        min_offset: i64,
    ) -> Result<Option<BatchHeader>, LogError> {
        let by_time = match self.time_index.lookup(timestamp) {
            Some(e) => self.offset_index.lookup(e.offset).position,
            None => 0,
        };
        let by_offset = self.offset_index.lookup(min_offset).position;
        let file = self.log_file()?;
        let mut cursor = Cursor::new(
            &file,
            self.log.path(),
            self.size,
            by_time.max(by_offset) as u64,
            MIN_CHUNK,
        );
        while let Some((_, h)) = cursor.next()? {
            if h.max_timestamp >= timestamp && h.last_offset() >= min_offset {
                return Ok(Some(h));
            }
        }
        Ok(None)
    }

    /// Calls `f` for every batch header from the batch containing `from_offset` to the end.
    pub fn scan(&self, from_offset: i64, f: &mut dyn FnMut(&BatchHeader)) -> Result<(), LogError> {
        self.scan_positions(from_offset, &mut |_, h| f(h))
    }

    /// [`Self::scan`] with each batch's file position.
    pub fn scan_positions(
        &self,
        from_offset: i64,
        f: &mut dyn FnMut(u64, &BatchHeader),
    ) -> Result<(), LogError> {
        let start = self.offset_index.lookup(from_offset).position as u64;
        let file = self.log_file()?;
        let mut cursor = Cursor::new(&file, self.log.path(), self.size, start, MAX_CHUNK);
        while let Some((pos, h)) = cursor.next()? {
            if h.last_offset() >= from_offset {
                f(pos, &h);
            }
        }
        Ok(())
    }

    /// `len` bytes of the `.log` at `position` (one `pread`).
    pub fn read_bytes(&self, position: u64, len: usize) -> Result<Vec<u8>, LogError> {
        let file = self.log_file()?;
        read_at(&file, self.log.path(), position, len)
    }

    /// Drops every batch from the one containing `offset` on. Returns the bytes removed.
    pub fn truncate_to(&mut self, offset: i64) -> Result<u64, LogError> {
        if offset >= self.next_offset {
            return Ok(0);
        }
        let Some((cut, h)) = self.find_batch(offset)? else {
            return Ok(0);
        };
        let removed = self.size - cut;
        self.log_file()?.set_len(cut).at(self.log.path())?;
        self.size = cut;
        self.offset_index.truncate_to_position(cut as u32);
        self.time_index.truncate_to_offset(h.base_offset);
        self.txn_index.truncate_to(h.base_offset)?;
        self.dirty = true;
        self.rebuild_tail()?;
        if self.size == 0 {
            self.first_append_ms = None;
        }
        Ok(removed)
    }

    /// Called when a newer segment takes over: records the final max timestamp in the time index
    /// (as Kafka does) and writes both index files (no fsync; the next flush does that).
    pub fn on_become_inactive(&mut self) -> Result<(), LogError> {
        let m = self.max_timestamp;
        if m.timestamp != NO_TIMESTAMP {
            self.time_index.maybe_append(m.timestamp, m.offset, true);
        }
        self.persist_indexes()
    }

    /// Writes the in-memory index entries to their files (no fsync).
    pub fn persist_indexes(&mut self) -> Result<(), LogError> {
        self.write_indexes(false)
    }

    /// Writes new index entries and, if `sync`, fsyncs the index files (each opened only if it
    /// has something to write or sync, and closed again).
    fn write_indexes(&mut self, sync: bool) -> Result<(), LogError> {
        let (index_path, time_index_path) = (self.index_path(), self.time_index_path());
        self.offset_index.persist(&index_path, sync)?;
        self.time_index.persist(&time_index_path, sync)
    }

    /// A sealed segment handed to a background flush: if it changed since the last flush, its files
    /// (`.log`, both indexes, `.txnindex`; the indexes already written by [`Self::on_become_inactive`]),
    /// and it counts as clean from now on.
    pub fn take_unflushed(&mut self) -> Vec<PathBuf> {
        if !self.dirty {
            return Vec::new();
        }
        self.dirty = false;
        vec![
            self.log_path().to_path_buf(),
            self.index_path(),
            self.time_index_path(),
            self.txn_index.path().to_path_buf(),
        ]
    }

    /// fsyncs the `.log` and writes and fsyncs both indexes, if anything changed.
    pub fn flush(&mut self) -> Result<(), LogError> {
        if !self.dirty {
            return Ok(());
        }
        self.log_file()?.sync_data().at(self.log.path())?;
        self.write_indexes(true)?;
        self.txn_index.flush()?;
        self.dirty = false;
        Ok(())
    }

    /// Takes the whole segment out of its log without destroying it: the `.log` is renamed to
    /// its quarantine name (`log::quarantine`), the indexes (caches of it) are removed.
    pub fn move_to_quarantine(self) -> Result<PathBuf, LogError> {
        let indexes = [
            self.index_path(),
            self.time_index_path(),
            self.txn_index.path().to_path_buf(),
        ];
        quarantine::move_segment(self.log.path(), &indexes)
    }

    /// Removes the segment's files, the `.txnindex` included.
    pub fn delete(self) -> Result<(), LogError> {
        let txn = self.txn_index.path().to_path_buf();
        for path in [
            self.log.path(),
            &self.index_path(),
            &self.time_index_path(),
            &txn,
        ] {
            match fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(LogError::io(path, e)),
            }
        }
        Ok(())
    }

    /// Expected on-disk sizes of the index files (for tests and diagnostics).
    pub fn index_file_sizes(&self) -> (usize, usize) {
        (
            self.offset_index.len() * OFFSET_ENTRY_SIZE,
            self.time_index.len() * TIME_ENTRY_SIZE,
        )
    }
}

/// A header walk's `Corrupt` at `position` as the read path reports it.
fn damaged(e: LogError, position: u64) -> LogError {
    match e {
        LogError::Corrupt { path, reason } => LogError::DamagedBatch {
            path,
            position,
            reason,
        },
        e => e,
    }
}

mod timestamps;
pub use timestamps::{search_batch, BatchSearch};

#[cfg(test)]
mod read_tests;
#[cfg(test)]
mod tests;
