//! `PartitionLog::compact`: one compaction pass over the inactive segments (see `log::cleaner` for
//! the record rules). Segments are rewritten one at a time into `<base>.log.cleaned`, then swapped
//! in: indexes removed, the cleaned file renamed over the `.log`, the segment reopened and its
//! indexes rebuilt. A crash at any point leaves either the old or the new `.log` (a leftover
//! `.cleaned` file is removed at open and missing indexes are rebuilt), never a mix.
//! A swap step that fails at run time leaves the old segment in the log, still serving reads.

use std::fs;
use std::io::Write;
use std::path::Path;

use super::{largest_timestamp, remove_if_exists, PartitionLog};
use crate::log::cleaner::{filter_batch, Filtered, OffsetMap};
use crate::log::error::{IoContext, LogError};
use crate::log::segment::{file_name, LoadState, Segment};
use crate::record::BatchHeader;

/// Bytes read per step while walking a segment.
const READ_CHUNK: usize = 4 * 1024 * 1024;

/// Settings of one compaction pass (the topic's configs plus the cleaner's position).
#[derive(Debug, Clone, Copy)]
pub struct CompactParams {
    pub now_ms: i64,
    /// Offsets below this were compacted before (Kafka's `cleaner-offset-checkpoint`).
    pub first_dirty_offset: i64,
    /// `min.cleanable.dirty.ratio`
    pub min_cleanable_ratio: f64,
    /// `min.compaction.lag.ms`: younger segments wait.
    pub min_compaction_lag_ms: i64,
    /// `delete.retention.ms`: tombstones in segments older than this go.
    pub delete_retention_ms: i64,
}

/// What a pass did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactOutcome {
    /// Where the next pass starts looking for dirty data.
    pub first_dirty_offset: i64,
    pub segments_rewritten: usize,
    pub bytes_before: u64,
    pub bytes_after: u64,
}

/// A visitor of whole batches (bytes and parsed header).
type BatchVisitor<'a> = &'a mut dyn FnMut(&[u8], &BatchHeader) -> Result<(), LogError>;

/// Calls `f` with every whole batch of `seg`, in order.
fn for_each_batch(seg: &Segment, f: BatchVisitor) -> Result<(), LogError> {
    let mut offset = seg.base_offset();
    while offset < seg.next_offset() {
        let Some((bytes, _)) = seg.read(offset, READ_CHUNK, i64::MAX)? else {
            break;
        };
        if bytes.is_empty() {
            break;
        }
        let mut pos = 0;
        while pos < bytes.len() {
            let h = BatchHeader::parse(&bytes[pos..]).map_err(|e| LogError::Corrupt {
                path: seg.log_path().to_path_buf(),
                reason: e.to_string(),
            })?;
            let end = pos + h.total_size();
            f(&bytes[pos..end], &h)?;
            offset = h.last_offset() + 1;
            pos = end;
        }
    }
    Ok(())
}

fn corrupt(seg: &Segment, reason: String) -> LogError {
    LogError::Corrupt {
        path: seg.log_path().to_path_buf(),
        reason,
    }
}

impl PartitionLog {
    /// One compaction pass: when the dirty share of the cleanable segments (inactive, older than
    /// `min.compaction.lag.ms`) reaches `min.cleanable.dirty.ratio`, keeps only the latest record of
    /// every key there. Offsets never change; the active segment is never touched. `None` when
    /// there was nothing to do.
    pub fn compact(&mut self, p: &CompactParams) -> Result<Option<CompactOutcome>, LogError> {
        let last = self.segments.len() - 1;
        let mut end = 0;
        // An empty (fully cleaned) segment has no timestamp to wait for.
        while end < last
            && (self.segments[end].is_empty()
                || p.now_ms
                    .saturating_sub(largest_timestamp(&self.segments[end]))
                    >= p.min_compaction_lag_ms)
        {
            end += 1;
        }
        if end == 0 {
            return Ok(None);
        }
        let first_dirty = p.first_dirty_offset.max(self.log_start_offset);
        let total: u64 = self.segments[..end].iter().map(Segment::size).sum();
        let dirty: u64 = self.segments[..end]
            .iter()
            .filter(|s| s.next_offset() > first_dirty)
            .map(Segment::size)
            .sum();
        if dirty == 0 || (dirty as f64) < p.min_cleanable_ratio * total as f64 {
            return Ok(None);
        }
        let mut map = OffsetMap::new();
        for seg in self.segments[..end]
            .iter()
            .filter(|s| s.next_offset() > first_dirty)
        {
            for_each_batch(seg, &mut |batch, h| {
                if h.last_offset() >= first_dirty {
                    map.add_batch(batch, h).map_err(|e| corrupt(seg, e))?;
                }
                Ok(())
            })?;
        }
        let mut rewritten = 0;
        for i in 0..end {
            if self.rewrite_segment(i, &map, p)? {
                rewritten += 1;
            }
        }
        if rewritten > 0 {
            super::fsync_dir(&self.dir)?;
            self.refresh_max_timestamp_entry()?;
        }
        let after: u64 = self.segments[..end].iter().map(Segment::size).sum();
        Ok(Some(CompactOutcome {
            first_dirty_offset: self.segments[end].base_offset(),
            segments_rewritten: rewritten,
            bytes_before: total,
            bytes_after: after,
        }))
    }

    /// Writes the surviving batches of segment `i` to `<base>.log.cleaned` and swaps it in if
    /// anything was removed. Returns whether the segment changed.
    fn rewrite_segment(
        &mut self,
        i: usize,
        map: &OffsetMap,
        p: &CompactParams,
    ) -> Result<bool, LogError> {
        let seg = &self.segments[i];
        let base = seg.base_offset();
        let drop_tombstones =
            p.now_ms.saturating_sub(largest_timestamp(seg)) > p.delete_retention_ms;
        let cleaned = self.dir.join(format!("{}.cleaned", file_name(base, "log")));
        let file = fs::File::create(&cleaned).at(&cleaned)?;
        let mut out = std::io::BufWriter::new(file);
        let mut changed = false;
        for_each_batch(seg, &mut |batch, h| {
            let kept = filter_batch(batch, h, map, drop_tombstones).map_err(|e| corrupt(seg, e))?;
            match kept {
                Filtered::Unchanged => out.write_all(batch).at(&cleaned)?,
                Filtered::Rebuilt(b) => {
                    changed = true;
                    out.write_all(&b).at(&cleaned)?
                }
                Filtered::Dropped => changed = true,
            }
            Ok(())
        })?;
        let file = out
            .into_inner()
            .map_err(|e| LogError::io(&cleaned, e.into_error()))?;
        if !changed {
            drop(file);
            remove_if_exists(&cleaned)?;
            return Ok(false);
        }
        file.sync_all().at(&cleaned)?;
        drop(file);
        // Swap: drop the old indexes, move the cleaned data in, reopen. The old segment stays in
        // `segments` until the new one is open, so a failed step before the rename leaves the log
        // serving the old data; a restart finds either `.log` and rebuilds missing indexes. (With
        // lazy file handles the old segment reopens by path: after a failed step past the rename it
        // would read the cleaned file through stale index positions, so reads may fail as corrupt
        // until the partition is reopened; the data on disk is the cleaned, valid `.log`.)
        let log_path = seg.log_path().to_path_buf();
        self.dir_dirty = true;
        let swapped = self.swap_in(base, &cleaned, &log_path, p.now_ms);
        if swapped.is_err() {
            let _ = remove_if_exists(&cleaned);
        }
        // Dropping the old segment closes its (now unlinked or replaced) files.
        self.segments[i] = swapped?;
        Ok(true)
    }

    /// The swap's file steps: indexes of `base` removed, `cleaned` renamed over `log_path`, the
    /// new segment opened with its indexes rebuilt.
    fn swap_in(
        &self,
        base: i64,
        cleaned: &Path,
        log_path: &Path,
        now_ms: i64,
    ) -> Result<Segment, LogError> {
        remove_if_exists(&self.dir.join(file_name(base, "index")))?;
        remove_if_exists(&self.dir.join(file_name(base, "timeindex")))?;
        fs::rename(cleaned, log_path).at(log_path)?;
        let (mut seg, state) = Segment::open(&self.dir, base, &self.config, now_ms)?;
        if let LoadState::NeedsRecovery(_) = state {
            let cut = seg.recover()?;
            if let Some(moved) = cut.quarantine {
                tracing::error!(segment = %log_path.display(), cut = cut.bytes, quarantine = %moved.display(), "cleaned segment failed validation");
            }
        }
        seg.flush()?;
        Ok(seg)
    }
}

#[cfg(test)]
mod tests;
