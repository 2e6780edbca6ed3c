//! One partition replica: its log, producer state, leader epoch and high watermark.
//!
//! Thread-safe: the mutable state sits behind a `parking_lot::RwLock` held only for one append or
//! one read (never across `.await`). Appends take the write lock, reads the read lock. Waiters
//! (fetch long-poll) subscribe to [`Partition::subscribe`], a watch of the high watermark, so they
//! are woken by appends instead of polling.
//!
//! On this single node the broker leads every partition, the ISR is itself, and the high watermark
//! equals the log end offset after every append.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use parking_lot::RwLock;
use tokio::sync::watch;

use crate::config::TimestampType;
use crate::log::{
    AppendMeta, CompactOutcome, CompactParams, LogConfig, LogError, PartitionLog, ReadSlice,
};
use crate::record::{self, BatchHeader, BATCH_HEADER_LEN};
use crate::replica::producer_state::{
    remove_snapshots_below, ProducerCheck, ProducerError, ProducerStateManager,
};

/// Offsets a reader needs alongside data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionOffsets {
    pub log_start_offset: i64,
    pub high_watermark: i64,
    pub log_end_offset: i64,
}

/// The result of a successful append (or of a recognised duplicate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendOutcome {
    pub base_offset: i64,
    /// -1 unless the topic uses LogAppendTime.
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
}

/// Why an append failed; each maps to one Kafka error code.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    #[error(transparent)]
    Producer(#[from] ProducerError),
    #[error(transparent)]
    Log(#[from] LogError),
}

struct State {
    log: PartitionLog,
    producers: ProducerStateManager,
    leader_epoch: i32,
    high_watermark: i64,
}

pub struct Partition {
    pub topic: String,
    pub index: i32,
    pub dir: PathBuf,
    state: RwLock<State>,
    high_watermark_tx: watch::Sender<i64>,
}

/// Who is appending (Kafka's `AppendOrigin`): client batches get the full producer checks;
/// batches the broker's own coordinators build carry no sequence numbers and skip them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOrigin {
    Client,
    Coordinator,
}

/// Settings an append needs from the topic config.
#[derive(Debug, Clone, Copy)]
pub struct AppendSettings {
    pub timestamp_type: TimestampType,
    /// fsync before acknowledging.
    pub flush: bool,
    pub origin: AppendOrigin,
}

impl Partition {
    /// Opens (recovering if needed) the partition in `dir` and rebuilds its producer state from
    /// the latest snapshot plus the batches after it.
    pub fn open(
        topic: &str,
        index: i32,
        dir: &Path,
        log_config: LogConfig,
        recovery_point: i64,
        log_start_offset: Option<i64>,
        now_ms: i64,
    ) -> Result<Partition, LogError> {
        let (log, report) =
            PartitionLog::open(dir, log_config, recovery_point, log_start_offset, now_ms)?;
        if report.truncated_bytes > 0 {
            tracing::warn!(
                "{topic}-{index}: recovery truncated {} bytes of invalid data; log end offset {}",
                report.truncated_bytes,
                report.log_end_offset
            );
        }
        let leo = log.log_end_offset();
        let (mut producers, from) = match ProducerStateManager::load_latest_snapshot(dir, leo) {
            Ok(Some((p, off))) => (p, off),
            _ => (ProducerStateManager::new(), log.log_start_offset()),
        };
        if from < leo {
            log.scan_batches(from, &mut |h: &BatchHeader| {
                if h.base_offset >= from {
                    producers.on_append(h, h.max_timestamp)
                }
            })?;
        }
        let (high_watermark_tx, _) = watch::channel(leo);
        Ok(Partition {
            topic: topic.to_string(),
            index,
            dir: dir.to_path_buf(),
            state: RwLock::new(State {
                log,
                producers,
                leader_epoch: 0,
                high_watermark: leo,
            }),
            high_watermark_tx,
        })
    }

    pub fn leader_epoch(&self) -> i32 {
        self.state.read().leader_epoch
    }

    pub fn offsets(&self) -> PartitionOffsets {
        let st = self.state.read();
        PartitionOffsets {
            log_start_offset: st.log.log_start_offset(),
            high_watermark: st.high_watermark,
            log_end_offset: st.log.log_end_offset(),
        }
    }

    /// A receiver that changes whenever the high watermark moves.
    pub fn subscribe(&self) -> watch::Receiver<i64> {
        self.high_watermark_tx.subscribe()
    }

    /// Appends one validated batch (`batch` is exactly one whole batch, `header` its parsed header).
    /// Record bytes are not copied: only the 61-byte header is rewritten (base offset, leader epoch,
    /// and for LogAppendTime the max timestamp and CRC) and written ahead of the untouched body.
    pub fn append(
        &self,
        batch: &Bytes,
        header: &BatchHeader,
        settings: AppendSettings,
        now_ms: i64,
    ) -> Result<AppendOutcome, AppendError> {
        let mut st = self.state.write();
        let log_start_offset = st.log.log_start_offset();
        let check = match settings.origin {
            AppendOrigin::Client => st.producers.check(header)?,
            AppendOrigin::Coordinator => ProducerCheck::Append,
        };
        if let ProducerCheck::Duplicate { base_offset, .. } = check {
            return Ok(AppendOutcome {
                base_offset,
                log_append_time_ms: -1,
                log_start_offset,
            });
        }
        let base_offset = st.log.log_end_offset();
        let mut head = [0u8; BATCH_HEADER_LEN];
        head.copy_from_slice(&batch[..BATCH_HEADER_LEN]);
        record::set_base_offset(&mut head, base_offset);
        record::set_partition_leader_epoch(&mut head, st.leader_epoch);
        let body = &batch[BATCH_HEADER_LEN..header.total_size()];
        let (max_timestamp, log_append_time_ms) = match settings.timestamp_type {
            TimestampType::CreateTime => (header.max_timestamp, -1),
            TimestampType::LogAppendTime => {
                record::set_log_append_time_parts(&mut head, body, now_ms);
                (now_ms, now_ms)
            }
        };
        let meta = AppendMeta {
            base_offset,
            last_offset: base_offset + header.last_offset_delta as i64,
            max_timestamp,
            size: header.total_size(),
        };
        st.log.append(&[&head, body], &meta, now_ms)?;
        if settings.flush {
            st.log.flush()?;
        }
        let mut stamped = *header;
        stamped.base_offset = base_offset;
        stamped.max_timestamp = max_timestamp;
        st.producers.on_append(&stamped, now_ms);
        st.high_watermark = st.log.log_end_offset();
        let hw = st.high_watermark;
        drop(st);
        self.high_watermark_tx.send_replace(hw);
        Ok(AppendOutcome {
            base_offset,
            log_append_time_ms,
            log_start_offset,
        })
    }

    /// Appends a transaction marker (commit or abort control batch) for `producer_id` and returns
    /// its offset. Called by the transaction coordinator's driver, never by clients.
    pub fn write_txn_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
        control: record::ControlType,
        flush: bool,
        now_ms: i64,
    ) -> Result<i64, AppendError> {
        let batch = Bytes::from(record::build_control_batch(
            producer_id,
            producer_epoch,
            coordinator_epoch,
            control,
            now_ms,
        ));
        let header = record::validate_batch(&batch)
            .map_err(|e| LogError::corrupt(&self.dir, format!("built an invalid marker: {e}")))?;
        let settings = AppendSettings {
            timestamp_type: crate::config::TimestampType::CreateTime,
            flush,
            origin: AppendOrigin::Coordinator,
        };
        Ok(self.append(&batch, &header, settings, now_ms)?.base_offset)
    }

    /// Reads whole batches from `fetch_offset`, at most `max_bytes` (the first batch always whole),
    /// never past the high watermark.
    pub fn read(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
    ) -> Result<(ReadSlice, PartitionOffsets), LogError> {
        let st = self.state.read();
        let offsets = PartitionOffsets {
            log_start_offset: st.log.log_start_offset(),
            high_watermark: st.high_watermark,
            log_end_offset: st.log.log_end_offset(),
        };
        let slice = st.log.read(fetch_offset, max_bytes, st.high_watermark)?;
        Ok((slice, offsets))
    }

    /// The first offset whose batch timestamp is >= `timestamp`, with that timestamp.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<(i64, i64)>, LogError> {
        self.state.read().log.offset_for_timestamp(timestamp)
    }

    /// (offset, timestamp) of the batch with the largest timestamp.
    pub fn max_timestamp_entry(&self) -> Option<(i64, i64)> {
        self.state.read().log.max_timestamp_entry()
    }

    /// Flushes data and indexes, then snapshots producer state at the log end offset. Returns the
    /// new recovery point and the log start offset for the checkpoint files.
    pub fn flush_and_snapshot(&self) -> Result<(i64, i64), LogError> {
        let mut st = self.state.write();
        st.log.flush()?;
        let leo = st.log.log_end_offset();
        match st.producers.write_snapshot(&self.dir, leo) {
            Ok(()) => {
                if let Err(e) = remove_snapshots_below(&self.dir, leo) {
                    tracing::warn!(
                        "{}-{}: removing old producer snapshots failed: {e}",
                        self.topic,
                        self.index
                    );
                }
            }
            Err(e) => tracing::warn!(
                "{}-{}: producer snapshot failed: {e}",
                self.topic,
                self.index
            ),
        }
        Ok((st.log.recovery_point(), st.log.log_start_offset()))
    }

    /// Offsets for the checkpoint files without flushing.
    pub fn checkpoint_offsets(&self) -> (i64, i64) {
        let st = self.state.read();
        (st.log.recovery_point(), st.log.log_start_offset())
    }

    /// Uses `config` for appends from now on (a dynamic topic config change).
    pub fn set_log_config(&self, config: LogConfig) {
        self.state.write().log.set_config(config);
    }

    /// Total bytes of the partition's segments.
    pub fn size_bytes(&self) -> u64 {
        self.state.read().log.size_bytes()
    }

    /// DeleteRecords: moves the log start offset to `offset` (-1 means the high watermark).
    /// Returns the new low watermark (log start offset).
    pub fn delete_records_before(&self, offset: i64) -> Result<i64, DeleteRecordsError> {
        let mut st = self.state.write();
        let hw = st.high_watermark;
        let target = if offset == -1 { hw } else { offset };
        if target < 0 || target > hw {
            return Err(DeleteRecordsError::OffsetOutOfRange);
        }
        st.log.advance_log_start_offset(target)?;
        Ok(st.log.log_start_offset())
    }

    /// Time and size retention: deletes expired whole segments (never the active one). Returns
    /// how many went.
    pub fn enforce_retention(
        &self,
        now_ms: i64,
        retention_ms: i64,
        retention_bytes: i64,
    ) -> Result<usize, LogError> {
        self.state
            .write()
            .log
            .delete_old_segments(now_ms, retention_ms, retention_bytes)
    }

    /// One compaction pass (see `PartitionLog::compact`). Holds the partition's write lock for the
    /// whole pass, so appends to this partition wait for it.
    pub fn compact(&self, params: &CompactParams) -> Result<Option<CompactOutcome>, LogError> {
        self.state.write().log.compact(params)
    }

    /// Expires idle producer ids.
    pub fn remove_expired_producers(&self, now_ms: i64, expiration_ms: i64) {
        self.state
            .write()
            .producers
            .remove_expired(now_ms, expiration_ms);
    }
}

/// Why DeleteRecords failed for a partition.
#[derive(Debug, thiserror::Error)]
pub enum DeleteRecordsError {
    #[error("offset beyond the high watermark")]
    OffsetOutOfRange,
    #[error(transparent)]
    Log(#[from] LogError),
}

/// Maps a producer-state error to its Kafka error code.
pub fn producer_error_code(e: &ProducerError) -> i16 {
    e.code()
}
