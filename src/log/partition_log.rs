//! The log of one partition: the ordered segments of `<data>/<topic>-<partition>/`.
//!
//! Role: assign nothing, decide nothing about replication; append batches whose offsets the caller
//! assigned, roll segments, read whole batches back, answer timestamp lookups, truncate, flush, and
//! recover after an unclean stop (the equivalent of Kafka's `LocalLog` + `LogLoader`).
//!
//! Invariants:
//! - `segments` is never empty, sorted by base offset; only the last one (the active segment) is
//!   appended to, and each segment's offsets lie below the next segment's base offset.
//! - `log_start_offset <= log_end_offset`; `log_start_offset >= segments[0].base_offset()`.
//! - `recovery_point <= log_end_offset`; everything below it is fsynced (data and indexes).
//!
//! Thread-safety: not thread-safe (`&mut self` for every change). The owner (`replica::Partition`)
//! keeps it in a mutex and holds the lock only for the duration of one call. Reads are `pread`s.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use super::error::{IoContext, LogError};
use super::file_cache::FileCache;
use super::flush_policy::FlushPolicy;
use super::flusher::Flusher;
use super::quarantine::{self, Quarantined};
use super::records::Records;
use super::retention::{self, SegmentStat};
use super::segment::{LoadState, ReadLimits, Segment, NO_TIMESTAMP};
use super::txn_index::AbortedTxn;
use crate::record;

/// Per-log settings, named after Kafka's topic configs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    /// `segment.bytes`: roll before a segment would grow past this (capped at 2 GiB - 1 because index
    /// positions are 32-bit, as in Kafka).
    pub segment_bytes: u64,
    /// `segment.ms`: roll when the active segment's first append is older than this.
    pub segment_ms: i64,
    /// `index.interval.bytes`: bytes appended between two index entries.
    pub index_interval_bytes: u32,
    /// `segment.index.bytes`: capacity of each index; a full index forces a roll.
    pub segment_index_bytes: u32,
    /// Where segments keep their `.log` descriptors: the broker-wide bounded cache
    /// (`sluice.log.open.files.max`). Not a topic config; equal when shared.
    pub files: FileCache,
    /// The broker's background flusher for rolled segments; `None` flushes on the appending thread.
    /// Not a topic config; equal when shared.
    pub flusher: Option<Flusher>,
    /// `flush.messages` / `flush.ms` (applied by `replica::Partition`).
    pub flush: FlushPolicy,
}

impl Default for LogConfig {
    fn default() -> LogConfig {
        LogConfig {
            segment_bytes: 1024 * 1024 * 1024,
            segment_ms: 604_800_000,
            index_interval_bytes: 4096,
            segment_index_bytes: 10 * 1024 * 1024,
            files: FileCache::default(),
            flusher: None,
            flush: FlushPolicy::default(),
        }
    }
}

impl LogConfig {
    pub(crate) fn max_offset_index_entries(&self) -> usize {
        (self.segment_index_bytes as usize / super::index::OFFSET_ENTRY_SIZE).max(1)
    }
    pub(crate) fn max_time_index_entries(&self) -> usize {
        (self.segment_index_bytes as usize / super::index::TIME_ENTRY_SIZE).max(1)
    }
    fn effective_segment_bytes(&self) -> u64 {
        self.segment_bytes.min(i32::MAX as u64)
    }
}

/// What the caller knows about the one batch it appends (from the validated header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendMeta {
    pub base_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
    /// Total batch size in bytes (the sum of the parts).
    pub size: usize,
}

impl AppendMeta {
    /// Metadata of a whole batch from its header.
    pub fn from_header(h: &record::BatchHeader) -> AppendMeta {
        AppendMeta {
            base_offset: h.base_offset,
            last_offset: h.last_offset(),
            max_timestamp: h.max_timestamp,
            size: h.total_size(),
        }
    }
}

/// Whole batches returned by [`PartitionLog::read`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadSlice {
    /// Concatenated whole batches; empty when there is nothing to return.
    pub bytes: Bytes,
    /// Base offset of the first batch in `bytes` (the fetch offset when `bytes` is empty).
    pub first_batch_base_offset: i64,
}

/// Whole batches returned by [`PartitionLog::read_records`], in memory or as a file range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordsSlice {
    /// Concatenated whole batches; empty when there is nothing to return.
    pub records: Records,
    /// Base offset of the first batch (the fetch offset when `records` is empty).
    pub first_batch_base_offset: i64,
    /// One past the last offset of the last batch returned; `None` when empty.
    pub next_offset: Option<i64>,
}

/// What [`PartitionLog::open`] had to repair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Bytes cut from segment tails plus the sizes of segments taken out after a damaged one
    /// (all of them moved to `quarantined`, none deleted).
    pub truncated_bytes: u64,
    /// Segments re-validated (and their indexes rebuilt).
    pub recovered_segments: usize,
    /// Segments whose `.txnindex` had entries cut at open: the caller must replay the whole log
    /// through the producer state to re-add them (see `replica::Partition::open`).
    pub damaged_txn_indexes: usize,
    pub log_end_offset: i64,
    /// The quarantine files recovery moved those bytes into, in segment order.
    pub quarantined: Vec<Quarantined>,
}

/// The log of one partition. See the module doc.
#[derive(Debug)]
pub struct PartitionLog {
    dir: PathBuf,
    config: LogConfig,
    segments: Vec<Segment>,
    log_start_offset: i64,
    recovery_point: i64,
    /// (base offset, max timestamp) of the first batch carrying the largest max timestamp.
    max_timestamp_entry: Option<(i64, i64)>,
    /// Segment files were created or removed since the last directory fsync.
    dir_dirty: bool,
}

/// Extensions of leftovers from interrupted Kafka operations; removed on open.
const LEFTOVER_SUFFIXES: [&str; 3] = [".cleaned", ".swap", ".deleted"];

fn parse_base_offset(stem: &str) -> Option<i64> {
    (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()))
        .then(|| stem.parse().ok())
        .flatten()
}

/// A segment's largest record timestamp, or its file's modification time when it has none (as
/// Kafka does for retention).
fn largest_timestamp(seg: &Segment) -> i64 {
    let ts = seg.max_timestamp().timestamp;
    if ts != NO_TIMESTAMP {
        return ts;
    }
    fs::metadata(seg.log_path())
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as i64)
}

fn fsync_dir(dir: &Path) -> Result<(), LogError> {
    fs::File::open(dir).and_then(|d| d.sync_all()).at(dir)
}

fn remove_if_exists(path: &Path) -> Result<(), LogError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(LogError::io(path, e)),
    }
}

/// Lists segment base offsets in `dir`, removing leftovers and index files without a `.log`.
fn scan_dir(dir: &Path) -> Result<Vec<i64>, LogError> {
    let mut logs = Vec::new();
    let mut indexes = Vec::new();
    for entry in fs::read_dir(dir).at(dir)? {
        let entry = entry.at(dir)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if quarantine::is_quarantine_file(&name) {
            continue;
        }
        if LEFTOVER_SUFFIXES.iter().any(|s| name.ends_with(s)) {
            tracing::info!(file = %path.display(), "removing leftover file");
            remove_if_exists(&path)?;
            continue;
        }
        let Some((stem, ext)) = name.split_once('.') else {
            continue;
        };
        let Some(base) = parse_base_offset(stem) else {
            continue;
        };
        match ext {
            "log" => logs.push(base),
            "index" | "timeindex" | "txnindex" => indexes.push((base, path)),
            _ => {}
        }
    }
    logs.sort_unstable();
    for (base, path) in indexes {
        if logs.binary_search(&base).is_err() {
            tracing::info!(file = %path.display(), "removing index without a log file");
            remove_if_exists(&path)?;
        }
    }
    Ok(logs)
}

impl PartitionLog {
    /// Opens (creating if absent) the partition directory `dir`. Segments whose data may extend past
    /// `recovery_point`, and segments whose indexes are missing or inconsistent, are re-validated; the
    /// log is cut at the first invalid byte and later segments are taken out of it. Nothing is
    /// deleted: what is cut or taken out goes to quarantine files (`log::quarantine`), listed in one
    /// WARN line. `log_start_offset` is the checkpointed value, if any (raised to the first
    /// segment's base offset). A checkpoint that contradicts the log (a log start offset past its
    /// end, a recovery point past its end) is warned about and never costs data: the log start
    /// offset then falls back to the first segment, the active segment is re-validated.
    /// `now_ms` starts the `segment.ms` clock of a non-empty active segment.
    pub fn open(
        dir: &Path,
        config: LogConfig,
        recovery_point: i64,
        log_start_offset: Option<i64>,
        now_ms: i64,
    ) -> Result<(PartitionLog, RecoveryReport), LogError> {
        fs::create_dir_all(dir).at(dir)?;
        let bases = scan_dir(dir)?;
        let mut report = RecoveryReport {
            truncated_bytes: 0,
            recovered_segments: 0,
            damaged_txn_indexes: 0,
            log_end_offset: 0,
            quarantined: Vec::new(),
        };
        let mut opened = Vec::with_capacity(bases.len());
        for &base in &bases {
            opened.push(Segment::open(dir, base, &config, now_ms)?);
        }
        let mut recovery_point = recovery_point;
        if let Some((last, _)) = opened.last() {
            if recovery_point > last.next_offset() {
                tracing::warn!(
                    dir = %dir.display(),
                    recovery_point,
                    log_end_offset = last.next_offset(),
                    "recovery point checkpoint is beyond the log end: re-validating the active segment"
                );
                recovery_point = last.base_offset();
            }
        }
        let mut segments: Vec<Segment> = Vec::with_capacity(bases.len());
        let mut cut_at: Option<i64> = None;
        for (i, (mut seg, state)) in opened.into_iter().enumerate() {
            if cut_at.is_some() && seg.is_empty() {
                seg.delete()?; // no bytes to keep
                continue;
            }
            if cut_at.is_some() {
                let (from_offset, to_offset, bytes) =
                    (seg.base_offset(), seg.next_offset(), seg.size());
                let file = seg.move_to_quarantine()?;
                report.truncated_bytes += bytes;
                report.quarantined.push(Quarantined {
                    file,
                    from_offset,
                    to_offset: Some(to_offset),
                    bytes,
                });
                continue;
            }
            if let Some(why) = seg.txn_index_damage() {
                tracing::warn!(segment = %seg.log_path().display(), %why, "transaction index cut");
                report.damaged_txn_indexes += 1;
            }
            let overlaps = bases
                .get(i + 1)
                .is_some_and(|&next| seg.next_offset() > next);
            let reason = match state {
                LoadState::NeedsRecovery(why) => Some(why),
                LoadState::Clean if seg.next_offset() > recovery_point => Some(format!(
                    "holds offsets at or after the recovery point {recovery_point}"
                )),
                LoadState::Clean if overlaps => Some("overlaps the next segment".to_string()),
                LoadState::Clean => None,
            };
            if let Some(why) = reason {
                tracing::info!(segment = %seg.log_path().display(), %why, "recovering segment");
                let cut = seg.recover()?;
                seg.flush()?;
                report.recovered_segments += 1;
                report.truncated_bytes += cut.bytes;
                if let Some(file) = cut.quarantine {
                    report.quarantined.push(Quarantined {
                        file,
                        from_offset: seg.next_offset(),
                        to_offset: None,
                        bytes: cut.bytes,
                    });
                }
                let still_overlaps = bases
                    .get(i + 1)
                    .is_some_and(|&next| seg.next_offset() > next);
                if cut.bytes > 0 || still_overlaps {
                    cut_at = Some(seg.next_offset());
                }
            }
            segments.push(seg);
        }
        let mut dir_dirty = cut_at.is_some();
        if segments.is_empty() {
            let base = log_start_offset.unwrap_or(0).max(0);
            segments.push(Segment::create(dir, base, &config)?);
            dir_dirty = true;
        }
        let first_base = segments[0].base_offset();
        let log_end = segments[segments.len() - 1].next_offset();
        let log_start_offset = match log_start_offset {
            Some(start) if start > log_end => {
                // Data was lost after the checkpoint was written, or the checkpoint is wrong:
                // either way the records here are all that is left, so they stay readable.
                tracing::warn!(
                    dir = %dir.display(),
                    checkpoint = start,
                    log_end_offset = log_end,
                    log_start_offset = first_base,
                    "log start offset checkpoint is beyond the log end: ignoring it, keeping the data"
                );
                first_base
            }
            other => other.unwrap_or(first_base).max(first_base),
        };
        let mut log = PartitionLog {
            dir: dir.to_path_buf(),
            config,
            segments,
            log_start_offset,
            recovery_point: 0,
            max_timestamp_entry: None,
            dir_dirty,
        };
        for seg in &mut log.segments {
            seg.flush()?;
        }
        if log.dir_dirty {
            fsync_dir(&log.dir)?;
            log.dir_dirty = false;
        }
        log.recovery_point = log.log_end_offset();
        log.refresh_max_timestamp_entry()?;
        report.log_end_offset = log.log_end_offset();
        if !report.quarantined.is_empty() {
            tracing::warn!(
                "{}",
                quarantine::summary(dir, &report.quarantined, report.log_end_offset)
            );
        }
        Ok((log, report))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn config(&self) -> &LogConfig {
        &self.config
    }
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }
    /// One past the last offset in the log.
    pub fn log_end_offset(&self) -> i64 {
        self.active().next_offset()
    }
    /// Everything below this offset is on disk (fsynced).
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point
    }
    /// Base offset of the active (last) segment.
    pub fn active_base_offset(&self) -> i64 {
        self.active().base_offset()
    }
    pub fn segment_base_offsets(&self) -> Vec<i64> {
        self.segments.iter().map(Segment::base_offset).collect()
    }
    /// Total bytes of all segments.
    pub fn size_bytes(&self) -> u64 {
        self.segments.iter().map(Segment::size).sum()
    }

    fn active(&self) -> &Segment {
        // `segments` is never empty (module invariant).
        &self.segments[self.segments.len() - 1]
    }

    fn active_mut(&mut self) -> &mut Segment {
        let last = self.segments.len() - 1;
        &mut self.segments[last]
    }

    /// Index of the segment that would hold `offset` (the first one if `offset` is below all).
    fn floor_segment(&self, offset: i64) -> usize {
        self.segments
            .partition_point(|s| s.base_offset() <= offset)
            .saturating_sub(1)
    }

    /// Appends one batch, given as byte parts that concatenate to it. `meta.base_offset` must be the
    /// log end offset. Rolls a new segment first when the active one is full by size, age, index
    /// capacity or relative-offset range.
    pub fn append(
        &mut self,
        parts: &[&[u8]],
        meta: &AppendMeta,
        now_ms: i64,
    ) -> Result<(), LogError> {
        self.append_at(parts, meta, now_ms, false)
    }

    /// [`Self::append`] for a follower copying its leader's batches: the base offset may lie past
    /// the log end offset (the leader's log has a gap there, left by compaction), never below it.
    pub fn append_replica(
        &mut self,
        parts: &[&[u8]],
        meta: &AppendMeta,
        now_ms: i64,
    ) -> Result<(), LogError> {
        self.append_at(parts, meta, now_ms, true)
    }

    fn append_at(
        &mut self,
        parts: &[&[u8]],
        meta: &AppendMeta,
        now_ms: i64,
        allow_gap: bool,
    ) -> Result<(), LogError> {
        let log_end = self.log_end_offset();
        let reject = |reason| {
            Err(LogError::NonMonotonicAppend {
                base_offset: meta.base_offset,
                log_end,
                reason,
            })
        };
        if meta.base_offset < log_end || (meta.base_offset > log_end && !allow_gap) {
            return reject("base offset is not the log end offset");
        }
        if meta.last_offset < meta.base_offset
            || meta.last_offset - meta.base_offset > i32::MAX as i64
        {
            return reject("last offset out of range");
        }
        if parts.iter().map(|p| p.len()).sum::<usize>() != meta.size
            || meta.size < record::BATCH_HEADER_LEN
        {
            return reject("parts do not add up to the batch size");
        }
        if self.should_roll(meta, now_ms) {
            self.roll(meta.base_offset)?;
        }
        self.active_mut().append(parts, meta, now_ms)?;
        if meta.max_timestamp > self.max_timestamp_entry.map_or(NO_TIMESTAMP, |e| e.1) {
            self.max_timestamp_entry = Some((meta.base_offset, meta.max_timestamp));
        }
        Ok(())
    }

    fn should_roll(&self, meta: &AppendMeta, now_ms: i64) -> bool {
        let seg = self.active();
        let full_by_size = !seg.is_empty()
            && seg.size() + meta.size as u64 > self.config.effective_segment_bytes();
        let full_by_age = !seg.is_empty()
            && seg
                .first_append_ms()
                .is_some_and(|t| now_ms.saturating_sub(t) > self.config.segment_ms);
        let overflow = meta.last_offset - seg.base_offset() > i32::MAX as i64;
        full_by_size || full_by_age || seg.indexes_full() || overflow
    }

    /// Starts a new active segment at `base_offset` (an empty active segment is replaced instead).
    fn roll(&mut self, base_offset: i64) -> Result<(), LogError> {
        if self.active().is_empty() {
            let old = self.segments.pop().expect("segments is never empty");
            old.delete()?;
        } else {
            self.active_mut().on_become_inactive()?;
        }
        let seg = Segment::create(&self.dir, base_offset, &self.config)?;
        tracing::debug!(segment = %seg.log_path().display(), "rolled new segment");
        self.segments.push(seg);
        self.dir_dirty = true;
        Ok(())
    }

    /// Reads whole batches starting with the one containing `fetch_offset`: up to `max_bytes` (the
    /// first batch always whole), never a batch whose base offset is >= `max_offset` (the high
    /// watermark). `fetch_offset == log_end_offset` gives an empty slice; outside
    /// `[log_start_offset, log_end_offset]` gives `OffsetOutOfRange`.
    pub fn read(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
        max_offset: i64,
    ) -> Result<ReadSlice, LogError> {
        let slice = self.read_records(fetch_offset, max_bytes, max_offset, false)?;
        Ok(ReadSlice {
            bytes: slice.records.into_bytes()?,
            first_batch_base_offset: slice.first_batch_base_offset,
        })
    }

    /// [`Self::read`] for the fetch path: with `zero_copy`, a large range comes back as a file
    /// range ([`Records::File`], see [`FILE_RECORDS_MIN_BYTES`](super::FILE_RECORDS_MIN_BYTES)).
    /// Same batches, same errors.
    pub fn read_records(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
        max_offset: i64,
        zero_copy: bool,
    ) -> Result<RecordsSlice, LogError> {
        let limits = ReadLimits {
            max_bytes,
            max_offset,
            zero_copy,
            min_one_batch: true,
        };
        self.read_with(fetch_offset, &limits)
    }

    /// Whole batches from the one containing `fetch_offset` under `limits` (see [`ReadLimits`]):
    /// `fetch_offset == log_end_offset` gives an empty slice; outside
    /// `[log_start_offset, log_end_offset]` gives `OffsetOutOfRange`; a damaged batch ends the
    /// read before it, or is [`LogError::DamagedBatch`] when nothing intact precedes it.
    pub fn read_with(
        &self,
        fetch_offset: i64,
        limits: &ReadLimits,
    ) -> Result<RecordsSlice, LogError> {
        let log_end = self.log_end_offset();
        if fetch_offset < self.log_start_offset || fetch_offset > log_end {
            return Err(LogError::OffsetOutOfRange {
                offset: fetch_offset,
                log_start: self.log_start_offset,
                log_end,
            });
        }
        let empty = RecordsSlice {
            records: Records::empty(),
            first_batch_base_offset: fetch_offset,
            next_offset: None,
        };
        if fetch_offset == log_end || fetch_offset >= limits.max_offset {
            return Ok(empty);
        }
        for seg in &self.segments[self.floor_segment(fetch_offset)..] {
            match seg.read_records(fetch_offset, limits)? {
                None => continue,
                Some(r) if r.records.is_empty() => return Ok(empty),
                Some(r) => {
                    return Ok(RecordsSlice {
                        records: r.records,
                        first_batch_base_offset: r.base_offset,
                        next_offset: Some(r.next_offset),
                    })
                }
            }
        }
        Ok(empty)
    }

    /// The first record at or after the log start whose timestamp is >= `timestamp`: its offset
    /// and timestamp (Kafka's `searchOffsetInLocalLog`: the first segment whose max timestamp
    /// reaches the target, then the record inside its batch). `None` if every record is older.
    /// Compressed batches are answered at batch level (see `segment::search_batch`).
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<(i64, i64)>, LogError> {
        for seg in &self.segments {
            if seg.max_timestamp().timestamp < timestamp
                || seg.next_offset() <= self.log_start_offset
            {
                continue;
            }
            if let Some(found) = seg.find_record_by_timestamp(timestamp, self.log_start_offset)? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// `(base offset, max timestamp)` of the first batch with the largest max timestamp. Kept in
    /// memory; `None` for an empty log.
    pub fn max_timestamp_entry(&self) -> Option<(i64, i64)> {
        self.max_timestamp_entry
    }

    /// `(offset, timestamp)` of the first record with the largest timestamp (ListOffsets -3, as
    /// Kafka 4.x: the record inside the batch of [`Self::max_timestamp_entry`], not its base).
    pub fn max_timestamp_record(&self) -> Result<Option<(i64, i64)>, LogError> {
        let Some((base, ts)) = self.max_timestamp_entry else {
            return Ok(None);
        };
        // As Kafka, from that batch on, whatever the log start offset.
        let Some(seg) = self.segments.get(self.floor_segment(base)) else {
            return Ok(Some((base, ts)));
        };
        let found = seg.find_record_by_timestamp(ts, base)?;
        Ok(found.or(Some((base, ts))))
    }

    /// Recomputes the cached max-timestamp entry from the segments (one header scan).
    fn refresh_max_timestamp_entry(&mut self) -> Result<(), LogError> {
        self.max_timestamp_entry = None;
        let mut best: Option<&Segment> = None;
        for seg in &self.segments {
            let ts = seg.max_timestamp().timestamp;
            if ts != NO_TIMESTAMP && best.is_none_or(|b| ts > b.max_timestamp().timestamp) {
                best = Some(seg);
            }
        }
        if let Some(seg) = best {
            let m = seg.max_timestamp();
            let base = match seg.find_batch(m.offset)? {
                Some((_, h)) => h.base_offset,
                None => m.offset,
            };
            self.max_timestamp_entry = Some((base, m.timestamp));
        }
        Ok(())
    }

    /// Drops everything at and after `offset`; when `offset` falls inside a batch the whole batch
    /// goes (the log ends on a batch boundary). Segments entirely above are deleted. Truncating below
    /// the first segment empties the log and restarts it at `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> Result<(), LogError> {
        if offset >= self.log_end_offset() {
            return Ok(());
        }
        while self
            .segments
            .last()
            .is_some_and(|s| s.base_offset() >= offset)
        {
            let seg = self.segments.pop().expect("checked non-empty");
            seg.delete()?;
            self.dir_dirty = true;
        }
        if self.segments.is_empty() {
            self.segments
                .push(Segment::create(&self.dir, offset, &self.config)?);
        } else {
            self.active_mut().truncate_to(offset)?;
        }
        let log_end = self.log_end_offset();
        self.log_start_offset = self
            .log_start_offset
            .min(log_end)
            .max(self.segments[0].base_offset());
        self.recovery_point = self.recovery_point.min(log_end);
        self.refresh_max_timestamp_entry()
    }

    /// Drops every segment and restarts the empty log at `offset` (a follower below its leader's
    /// log start: Kafka's `truncateFullyAndStartAt`).
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), LogError> {
        while let Some(seg) = self.segments.pop() {
            seg.delete()?;
        }
        self.segments
            .push(Segment::create(&self.dir, offset, &self.config)?);
        self.dir_dirty = true;
        self.log_start_offset = offset;
        self.recovery_point = offset;
        self.refresh_max_timestamp_entry()
    }

    /// Records an aborted transaction in the `.txnindex` of the segment holding its marker
    /// (`txn.last_offset`, which must be the newest entry there).
    pub fn append_aborted_txn(&mut self, txn: AbortedTxn) -> Result<(), LogError> {
        let i = self.floor_segment(txn.last_offset);
        self.segments[i].append_aborted_txn(txn)
    }

    /// Recovery replay: adds `txn` to its segment's `.txnindex` unless it is there. Returns
    /// whether it was added. Markers below the log's first segment are ignored.
    pub fn ensure_aborted_txn(&mut self, txn: AbortedTxn) -> Result<bool, LogError> {
        if txn.last_offset < self.segments[0].base_offset() {
            return Ok(false);
        }
        let i = self.floor_segment(txn.last_offset);
        self.segments[i].ensure_aborted_txn(txn)
    }

    /// Kafka's `collectAbortedTransactions(startOffset, upperBoundOffset)`: the aborted
    /// transactions overlapping `[fetch_offset, upper_bound)`, searching the `.txnindex` of the
    /// segment holding `fetch_offset` and of the later ones until an entry's last stable offset
    /// reaches `upper_bound`.
    pub fn collect_aborted_txns(&self, fetch_offset: i64, upper_bound: i64) -> Vec<AbortedTxn> {
        let mut out = Vec::new();
        for seg in &self.segments[self.floor_segment(fetch_offset)..] {
            if seg.txn_index().collect(fetch_offset, upper_bound, &mut out) {
                break;
            }
        }
        out
    }

    /// Like [`Self::scan_batches`], but control batches also come with their whole bytes (one
    /// `pread` each): recovery replay reads transaction markers from their records.
    pub fn scan_batches_with_control(
        &self,
        from_offset: i64,
        f: &mut dyn FnMut(&record::BatchHeader, Option<&[u8]>),
    ) -> Result<(), LogError> {
        for seg in &self.segments[self.floor_segment(from_offset)..] {
            let mut failed = None;
            seg.scan_positions(from_offset, &mut |pos, h| {
                if failed.is_some() {
                    return;
                }
                if !h.is_control() {
                    return f(h, None);
                }
                match seg.read_bytes(pos, h.total_size()) {
                    Ok(bytes) => f(h, Some(&bytes)),
                    Err(e) => failed = Some(e),
                }
            })?;
            if let Some(e) = failed {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Calls `f` with the header of every batch from the one containing `from_offset` to the end.
    pub fn scan_batches(
        &self,
        from_offset: i64,
        f: &mut dyn FnMut(&record::BatchHeader),
    ) -> Result<(), LogError> {
        for seg in &self.segments[self.floor_segment(from_offset)..] {
            seg.scan(from_offset, f)?;
        }
        Ok(())
    }

    /// fsyncs every changed segment (data, then indexes) and the directory if segments came or went;
    /// then the recovery point moves to the log end offset.
    /// With the broker's flusher, a failed fsync takes the data directory offline
    /// ([`LogDirHealth`](super::LogDirHealth)) and every later flush fails.
    pub fn flush(&mut self) -> Result<(), LogError> {
        let Some(health) = self.config.flusher.as_ref().map(|f| f.health().clone()) else {
            return self.flush_files();
        };
        health.check().at(&self.dir)?;
        self.flush_files().map_err(|e| match e {
            LogError::Io { path, source } => {
                let source = health.failed(&path, source);
                LogError::Io { path, source }
            }
            other => other,
        })
    }

    fn flush_files(&mut self) -> Result<(), LogError> {
        let log_end = self.log_end_offset();
        for seg in &mut self.segments {
            seg.flush()?;
        }
        if self.dir_dirty {
            fsync_dir(&self.dir)?;
            self.dir_dirty = false;
        }
        self.recovery_point = log_end;
        Ok(())
    }

    /// The `.log` descriptor and path of every segment holding offsets at or above `offset`
    /// (usually just the active one): what a data-only fsync through the log end must cover.
    pub fn log_files_from(&self, offset: i64) -> Result<Vec<(Arc<File>, PathBuf)>, LogError> {
        self.segments
            .iter()
            .filter(|seg| seg.next_offset() > offset)
            .map(|seg| Ok((seg.log_file()?, seg.log_path().to_path_buf())))
            .collect()
    }

    /// For a background flush after a roll: the files of every sealed segment with unflushed
    /// changes, which are then counted as flushed (the caller must fsync them, then this directory).
    /// The recovery point does not move: the caller tracks what its flush made durable.
    pub fn take_sealed_unflushed(&mut self) -> Vec<PathBuf> {
        let sealed = self.segments.len() - 1;
        let mut files = Vec::new();
        for seg in &mut self.segments[..sealed] {
            files.extend(seg.take_unflushed());
        }
        self.dir_dirty = false;
        files
    }

    /// Deletes whole segments whose every offset is below `offset`, never the active segment; the log
    /// start offset rises to the first remaining segment if needed. Returns how many were deleted.
    pub fn delete_segments_before(&mut self, offset: i64) -> Result<usize, LogError> {
        let mut n = 0;
        while self.segments.len() > 1 && self.segments[1].base_offset() <= offset {
            let seg = self.segments.remove(0);
            seg.delete()?;
            n += 1;
        }
        if n > 0 {
            self.dir_dirty = true;
            self.log_start_offset = self.log_start_offset.max(self.segments[0].base_offset());
            self.refresh_max_timestamp_entry()?;
        }
        Ok(n)
    }

    /// Replaces the settings used from the next append on (a dynamic config change).
    pub fn set_config(&mut self, config: LogConfig) {
        self.config = config;
    }

    /// Deletes the leading whole segments that `retention.ms` / `retention.bytes` expire (never the
    /// active segment) and raises the log start offset past them. Returns the segments deleted.
    pub fn delete_old_segments(
        &mut self,
        now_ms: i64,
        retention_ms: i64,
        retention_bytes: i64,
    ) -> Result<usize, LogError> {
        if retention_ms < 0 && retention_bytes < 0 {
            return Ok(0);
        }
        let stats: Vec<SegmentStat> = self
            .segments
            .iter()
            .map(|s| SegmentStat {
                size: s.size(),
                largest_timestamp: largest_timestamp(s),
            })
            .collect();
        let n = retention::plan(&stats, now_ms, retention_ms, retention_bytes).total();
        if n == 0 {
            return Ok(0);
        }
        let next_base = self.segments[n].base_offset();
        tracing::info!(
            dir = %self.dir.display(),
            segments = n,
            log_start_offset = next_base.max(self.log_start_offset),
            "retention deleted segments"
        );
        self.delete_segments_before(next_base)
    }

    /// Moves the log start offset up to `offset` (DeleteRecords), at most to the log end offset, and
    /// deletes the segments that fall entirely below it.
    pub fn advance_log_start_offset(&mut self, offset: i64) -> Result<(), LogError> {
        let target = offset.min(self.log_end_offset());
        if target > self.log_start_offset {
            self.log_start_offset = target;
            self.delete_segments_before(target)?;
        }
        Ok(())
    }
}

mod compact;
pub use compact::{CompactOutcome, CompactParams};

#[cfg(test)]
mod tests;
