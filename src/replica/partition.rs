//! One partition replica: its log, producer state, leader epoch, high watermark and last stable
//! offset.
//!
//! Thread-safe: the mutable state sits behind a `parking_lot::RwLock` held only for one append or
//! one read (never across `.await`). Appends take the write lock, reads the read lock. Waiters
//! (fetch long-poll) subscribe to [`Partition::subscribe`], a watch of the high watermark, so they
//! are woken by appends instead of polling.
//!
//! A replica opens with the high watermark of its `replication-offset-checkpoint` entry, bounded to
//! the log. On a single node the broker leads every partition and the ISR is itself, so the high
//! watermark reaches the log end as soon as it leads and equals it after every append (under
//! `flush.messages = 1`: once it is fsynced; see `log::flush_policy`). The last stable offset (LSO) is the first offset
//! of the oldest open transaction (never below the log start offset), else the high watermark; a
//! transaction marker is an append, so it moves the high-watermark watch and wakes waiters whose
//! read_committed view it changed.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use tokio::sync::watch;

use crate::config::TimestampType;
use crate::log::error::IoContext;
use crate::log::flusher::{self, Continuation, FlushJob};
use crate::log::{
    AppendMeta, CompactOutcome, CompactParams, LogConfig, LogError, PartitionLog, ReadLimits,
    ReadSlice, Records,
};
use crate::record::{self, BatchHeader, BATCH_HEADER_LEN};
pub use crate::replica::producer_state::AppendOrigin;
use crate::replica::producer_state::{
    end_txn_marker, remove_snapshots_below, write_snapshot_bytes, ProducerCheck, ProducerError,
    ProducerStateEntry, ProducerStateManager,
};
use crate::replica::read_damage::{DamageLog, ReadDamage};
use crate::replica::replication::initial_hw::initial_high_watermark;
use crate::replica::replication::LeaderEpochCache;
use replication::Role;

/// Offsets a reader needs alongside data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionOffsets {
    pub log_start_offset: i64,
    pub high_watermark: i64,
    pub log_end_offset: i64,
    /// Where read_committed reads stop: the oldest open transaction's first offset, else the high
    /// watermark.
    pub last_stable_offset: i64,
}

/// A read_committed read: whole batches below the last stable offset, the partition's offsets,
/// and the `(producer_id, first_offset)` of the aborted transactions overlapping the batches
/// returned (Kafka's `collectAbortedTxns(fetchOffset, upperBound)`), in marker order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedRead {
    pub slice: ReadSlice,
    pub offsets: PartitionOffsets,
    pub aborted_transactions: Vec<(i64, i64)>,
}

/// A read for the Fetch path ([`Partition::fetch_records`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchRead {
    pub records: Records,
    pub first_batch_base_offset: i64,
    pub offsets: PartitionOffsets,
    /// As in [`CommittedRead`]; always empty for read_uncommitted.
    pub aborted_transactions: Vec<(i64, i64)>,
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
    /// The log end offset the last flush-policy fsync was requested through (by an append that
    /// crossed `flush.messages`, or the time check): later appenders count from here, so one
    /// fsync is asked for per `flush.messages` messages, not one per appender while it runs.
    flush_requested: i64,
    /// Which leader epoch began where (`leader-epoch-checkpoint`).
    epochs: LeaderEpochCache,
    /// Leader, follower, or not placed by the image yet (see `replication.rs`).
    role: Role,
}

impl State {
    /// Raises the high watermark to `hw` (never lowers it); the producer state forgets the
    /// transactions whose markers it passed.
    fn raise_high_watermark(&mut self, hw: i64) {
        if hw > self.high_watermark {
            self.high_watermark = hw;
            self.producers.on_high_watermark(hw);
        }
    }

    fn offsets(&self) -> PartitionOffsets {
        let log_start_offset = self.log.log_start_offset();
        let high_watermark = self.high_watermark;
        let last_stable_offset = self
            .producers
            .last_stable_offset(log_start_offset, high_watermark);
        PartitionOffsets {
            log_start_offset,
            high_watermark,
            log_end_offset: self.log.log_end_offset(),
            last_stable_offset,
        }
    }
}

pub struct Partition {
    pub topic: String,
    pub index: i32,
    pub dir: PathBuf,
    state: RwLock<State>,
    high_watermark_tx: watch::Sender<i64>,
    /// Moves with the log end offset: follower fetches long-poll on it (they read past the HW).
    log_end_tx: watch::Sender<i64>,
    /// The offset below which background flushes after rolls made everything durable (data, indexes
    /// and the producer snapshot there); the checkpointed recovery point is the larger of this and
    /// the log's own.
    flushed_in_background: Arc<AtomicI64>,
    /// Offsets below this are fsynced by the flush policy ([`Self::sync_through`]).
    synced: AtomicI64,
    /// One flush-policy fsync at a time; waiters then find their data covered (group commit).
    sync_turn: Mutex<()>,
    syncs: AtomicU64,
    /// When a flush-policy fsync was last asked for (Kafka's `lastFlushTime`; `flush.ms`).
    last_flush_ms: AtomicI64,
    /// Damaged batches met by reads (counted; logged once per position).
    read_damage: ReadDamage,
}

/// What the data directory's offset checkpoints hold for a partition being opened (absent entries:
/// `None`, or 0 for the recovery point).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Checkpointed {
    /// `recovery-point-offset-checkpoint`: recovery validates the log from here.
    pub recovery_point: i64,
    /// `log-start-offset-checkpoint`.
    pub log_start_offset: Option<i64>,
    /// `replication-offset-checkpoint`: the high watermark to open with (Kafka's rule when absent).
    pub high_watermark: Option<i64>,
}

/// Settings an append needs from the topic config.
#[derive(Debug, Clone, Copy)]
pub struct AppendSettings {
    pub timestamp_type: TimestampType,
    /// fsync before acknowledging, whatever the log's flush policy (`LogConfig::flush`, which
    /// applies in any case): the N = 1 behaviour for this append.
    pub flush: bool,
    pub origin: AppendOrigin,
}

impl Partition {
    /// Opens (recovering if needed) the partition in `dir` and rebuilds its producer state from
    /// the latest snapshot plus the batches after it. The replay also re-adds `.txnindex` entries
    /// for aborts after the snapshot (entries below it were fsynced before it was written); when a
    /// `.txnindex` was damaged, the whole log is replayed from a fresh state instead.
    /// The high watermark starts at `checkpointed.high_watermark` bounded to the log
    /// (`replication::initial_hw`); the image's role then moves it (a lone leader: to its log end).
    pub fn open(
        topic: &str,
        index: i32,
        dir: &Path,
        log_config: LogConfig,
        checkpointed: Checkpointed,
        now_ms: i64,
    ) -> Result<Partition, LogError> {
        let (log, report) = PartitionLog::open(
            dir,
            log_config,
            checkpointed.recovery_point,
            checkpointed.log_start_offset,
            now_ms,
        )?;
        let mut log = log;
        let leo = log.log_end_offset();
        let snapshot = match ProducerStateManager::load_latest_snapshot(dir, leo) {
            Ok(Some(loaded)) if report.damaged_txn_indexes == 0 => Some(loaded),
            _ => None,
        };
        let (mut producers, from) =
            snapshot.unwrap_or_else(|| (ProducerStateManager::new(), log.log_start_offset()));
        if from < leo {
            replay(&mut log, &mut producers, from)?;
        }
        let epochs = replication::load_epochs(&log)?;
        let high_watermark =
            initial_high_watermark(checkpointed.high_watermark, log.log_start_offset(), leo);
        producers.on_high_watermark(high_watermark);
        let (high_watermark_tx, _) = watch::channel(high_watermark);
        let (log_end_tx, _) = watch::channel(leo);
        let recovery_point_after_open = log.recovery_point();
        let flushed_in_background = Arc::new(AtomicI64::new(recovery_point_after_open));
        Ok(Partition {
            topic: topic.to_string(),
            index,
            dir: dir.to_path_buf(),
            state: RwLock::new(State {
                log,
                producers,
                leader_epoch: 0,
                high_watermark,
                flush_requested: leo,
                epochs,
                role: Role::Unplaced,
            }),
            high_watermark_tx,
            log_end_tx,
            flushed_in_background,
            synced: AtomicI64::new(recovery_point_after_open),
            sync_turn: Mutex::new(()),
            syncs: AtomicU64::new(0),
            last_flush_ms: AtomicI64::new(now_ms),
            read_damage: ReadDamage::new(),
        })
    }

    pub fn leader_epoch(&self) -> i32 {
        self.state.read().leader_epoch
    }

    /// Takes the leader epoch the metadata image gives this partition (become leader or
    /// follower): later appends stamp their batches with it. Never lowers it.
    pub fn set_leader_epoch(&self, epoch: i32) {
        let mut st = self.state.write();
        st.leader_epoch = st.leader_epoch.max(epoch);
    }

    pub fn offsets(&self) -> PartitionOffsets {
        self.state.read().offsets()
    }

    /// A receiver that changes whenever the high watermark moves.
    pub fn subscribe(&self) -> watch::Receiver<i64> {
        self.high_watermark_tx.subscribe()
    }

    /// Appends one validated batch (`batch` is exactly one whole batch, `header` its parsed header).
    /// Record bytes are not copied: only the 61-byte header is rewritten (base offset, leader epoch,
    /// and for LogAppendTime the max timestamp and CRC) and written ahead of the untouched body.
    /// Data batches pass the producer-state check for their origin first; a control batch must be
    /// an end-transaction marker and passes the marker checks (see [`Self::write_txn_marker`]).
    ///
    /// With `settings.flush` (the flush policy) it returns only once the batch is fsynced, blocking
    /// the calling thread: [`Self::append_unsynced`] is the form that leaves the fsync to the caller.
    pub fn append(
        &self,
        batch: &Bytes,
        header: &BatchHeader,
        settings: AppendSettings,
        now_ms: i64,
    ) -> Result<AppendOutcome, AppendError> {
        let (outcome, sync) = self.append_unsynced(batch, header, settings, now_ms)?;
        if let Some(end) = sync {
            self.sync_and_publish(end)?;
        }
        Ok(outcome)
    }

    /// [`Self::append`] up to the flush policy's fsync: with `settings.flush` it also returns the
    /// offset everything below which must be durable before the batch may be acknowledged (for a
    /// duplicate too: its original may still be waiting for its fsync). The caller then runs
    /// [`Self::sync_and_publish`] with it, off the runtime's workers; until then the high
    /// watermark does not cover the batch. `None` without the flush policy: the batch is visible
    /// and may be acknowledged at once.
    pub fn append_unsynced(
        &self,
        batch: &Bytes,
        header: &BatchHeader,
        settings: AppendSettings,
        now_ms: i64,
    ) -> Result<(AppendOutcome, Option<i64>), AppendError> {
        let mut st = self.state.write();
        let log_start_offset = st.log.log_start_offset();
        let policy = st.log.config().flush;
        let wait_for_fsync = settings.flush || policy.every_message();
        let marker = if header.is_control() {
            let marker = end_txn_marker(batch).ok_or(ProducerError::InvalidMarker)?;
            st.producers.check_marker(&marker)?;
            Some(marker)
        } else {
            None
        };
        if marker.is_none() {
            let check = st.producers.check(header, settings.origin)?;
            if let ProducerCheck::Duplicate { base_offset, .. } = check {
                // The original may still be waiting for its fsync: answer once it is durable.
                let sync = wait_for_fsync.then(|| st.log.log_end_offset());
                let outcome = AppendOutcome {
                    base_offset,
                    log_append_time_ms: -1,
                    log_start_offset,
                };
                return Ok((outcome, sync));
            }
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
        let active_before = st.log.active_base_offset();
        st.log.append(&[&head, body], &meta, now_ms)?;
        if st.log.active_base_offset() != active_before {
            self.snapshot_at_roll(&mut st, base_offset, active_before);
        }
        let epoch = st.leader_epoch;
        self.note_epoch(&mut st, epoch, base_offset);
        if let Some(mut marker) = marker {
            marker.offset = base_offset;
            let completed = st.producers.on_marker(&marker, now_ms);
            if let Some(aborted) = completed.and_then(|c| c.aborted_txn()) {
                st.log.append_aborted_txn(aborted)?;
            }
        } else {
            let mut stamped = *header;
            stamped.base_offset = base_offset;
            stamped.max_timestamp = max_timestamp;
            st.producers.on_append(&stamped, now_ms);
        }
        let outcome = AppendOutcome {
            base_offset,
            log_append_time_ms,
            log_start_offset,
        };
        let log_end = st.log.log_end_offset();
        if wait_for_fsync {
            // Group commit, off the partition lock: readers and other appenders go on while the
            // fsync runs, and one fsync covers every append written before it started. Consumers
            // see the batch (high watermark) only once it is durable (`log::flush_policy`).
            st.flush_requested = log_end;
            self.last_flush_ms.store(now_ms, Ordering::Relaxed);
            drop(st);
            self.log_end_tx.send_replace(log_end);
            return Ok((outcome, Some(log_end)));
        }
        // `flush.messages` > 1: visible at once; the append crossing the count fsyncs.
        let covered = self.synced.load(Ordering::SeqCst).max(st.flush_requested);
        let sync = policy.due_by_messages(log_end - covered).then(|| {
            st.flush_requested = log_end;
            self.last_flush_ms.store(now_ms, Ordering::Relaxed);
            log_end
        });
        let hw = self.on_local_end(&mut st, log_end, now_ms);
        drop(st);
        self.log_end_tx.send_replace(log_end);
        self.high_watermark_tx.send_replace(hw);
        Ok((outcome, sync))
    }

    /// The flush policy's step after [`Self::append_unsynced`]: returns once every offset below
    /// `end` is durable ([`Self::sync_through`]), with the high watermark raised to the durable
    /// part of the log and long-polling fetches woken. Blocks the calling thread for the fsync.
    pub fn sync_and_publish(&self, end: i64) -> Result<(), LogError> {
        self.sync_through(end)?;
        let hw = {
            let mut st = self.state.write();
            let durable = self.synced.load(Ordering::SeqCst);
            let visible = st.log.log_end_offset().min(durable);
            self.on_local_end(&mut st, visible, replication::wall_clock_ms())
        };
        self.high_watermark_tx.send_replace(hw);
        Ok(())
    }

    /// The log just rolled a segment at `offset` (the batch there is not yet in the producer state):
    /// as Kafka, snapshot the producer state at the new segment's base offset, so recovery after a
    /// crash replays only the active segment instead of the whole log. Everything is fsynced first:
    /// recovery trusts the data and `.txnindex` entries below a snapshot. The snapshots of the two
    /// newest segments are kept (an older one serves when a crash truncates below the newest).
    /// With the broker's flusher (`LogConfig::flusher`) the fsyncs and the snapshot file happen on
    /// its thread, off this lock: only the snapshot's bytes are taken here, at the roll.
    /// A failure only costs recovery time, so it is logged, not returned.
    fn snapshot_at_roll(&self, st: &mut State, offset: i64, sealed_base: i64) {
        let snapshot = self.snapshot_writer(st.producers.snapshot_bytes(), offset, sealed_base);
        if let Some(background) = st.log.config().flusher.clone() {
            let job = FlushJob {
                label: format!("{}-{}", self.topic, self.index),
                files: st.log.take_sealed_unflushed(),
                dir: self.dir.clone(),
                then: snapshot,
            };
            if let Err(job) = background.submit(job) {
                let label = job.label.clone();
                if let Err(e) = flusher::execute(job, background.health()) {
                    tracing::warn!("{label}: flush at segment roll {offset} failed: {e}");
                }
            }
            return;
        }
        let written = st
            .log
            .flush()
            .map_err(|e| e.to_string())
            .and_then(|()| snapshot().map_err(|e| e.to_string()));
        if let Err(e) = written {
            tracing::warn!(
                "{}-{}: producer snapshot at segment roll {offset} failed: {e}",
                self.topic,
                self.index
            );
        }
    }

    /// The flush policy's fsync (`flush.messages`, `flush.ms`): returns once every offset below
    /// `end` is durable. Callers queue on `sync_turn`; the one holding it fsyncs the `.log` files
    /// of every segment from the last synced offset up to the log end *at that moment*, so
    /// appenders that wrote meanwhile find their data covered and return without an fsync of
    /// their own (group commit). Data only: indexes and the recovery point follow at the next full
    /// flush (a roll's, or shutdown's); recovery revalidates above the recovery point and keeps
    /// every valid batch, so nothing acknowledged is lost. A failed fsync takes the data directory
    /// offline (`log::LogDirHealth`): no later one succeeds, so a retried produce is never
    /// acknowledged over pages the kernel dropped.
    fn sync_through(&self, end: i64) -> Result<(), LogError> {
        let _turn = self.sync_turn.lock();
        let from = self.synced.load(Ordering::SeqCst);
        if from >= end {
            return Ok(());
        }
        let (files, target, health) = {
            let st = self.state.read();
            let health = st.log.config().flusher.as_ref().map(|f| f.health().clone());
            (
                st.log.log_files_from(from)?,
                st.log.log_end_offset(),
                health,
            )
        };
        for (file, path) in &files {
            match &health {
                Some(health) => health.sync_data(file, path).at(path)?,
                None => file.sync_data().at(path)?,
            }
        }
        self.synced.fetch_max(target, Ordering::SeqCst);
        self.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// `flush.ms`: fsyncs the log (as [`Self::sync_and_publish`]) when it holds unflushed
    /// messages and the last flush was asked for at least `flush.ms` before `now_ms`. Returns
    /// whether it did. Called by the periodic check every `log.flush.scheduler.interval.ms`;
    /// blocks the calling thread for the fsync.
    pub fn flush_if_due(&self, now_ms: i64) -> Result<bool, LogError> {
        let end = {
            let mut st = self.state.write();
            let log_end = st.log.log_end_offset();
            let unflushed = log_end - self.synced.load(Ordering::SeqCst);
            let last = self.last_flush_ms.load(Ordering::Relaxed);
            if !st.log.config().flush.due_by_time(unflushed, now_ms, last) {
                return Ok(false);
            }
            st.flush_requested = st.flush_requested.max(log_end);
            self.last_flush_ms.store(now_ms, Ordering::Relaxed);
            log_end
        };
        self.sync_and_publish(end)?;
        Ok(true)
    }

    /// Everything below this offset is fsynced by the flush policy or was at open.
    pub fn durable_offset(&self) -> i64 {
        self.synced.load(Ordering::SeqCst)
    }

    /// How many flush-policy fsyncs ran (tests: group commit).
    pub fn flush_policy_syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    /// Writes the producer snapshot `bytes` at `offset` once everything below it is durable (the
    /// continuation of a roll's background flush, or called right after a flush): then removes
    /// the snapshots below `keep_from` (a failure there is only logged) and raises the durable
    /// offset.
    fn snapshot_writer(&self, bytes: Vec<u8>, offset: i64, keep_from: i64) -> Continuation {
        let dir = self.dir.clone();
        let label = format!("{}-{}", self.topic, self.index);
        let durable = self.flushed_in_background.clone();
        Box::new(move || {
            write_snapshot_bytes(&dir, offset, &bytes)?;
            if let Err(e) = remove_snapshots_below(&dir, keep_from) {
                tracing::warn!("{label}: removing old producer snapshots failed: {e}");
            }
            durable.fetch_max(offset, Ordering::SeqCst);
            Ok(())
        })
    }

    /// Appends a transaction marker (commit or abort control batch) for `producer_id` and returns
    /// its offset. Called by WriteTxnMarkers and the transaction coordinator's driver, never by
    /// clients. Kafka's rules: a producer epoch older than the producer's is
    /// INVALID_PRODUCER_EPOCH, a coordinator epoch older than the last marker's is
    /// TRANSACTION_COORDINATOR_FENCED; the marker's epoch becomes the producer's and its open
    /// transaction (if any) completes, an abort adding an entry to the segment's `.txnindex`.
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
        let offsets = st.offsets();
        let slice = st.log.read(fetch_offset, max_bytes, st.high_watermark)?;
        Ok((slice, offsets))
    }

    /// [`Self::read`] up to the log end offset instead of the high watermark (a coordinator
    /// loading a partition it leads, `internal_topic::replay_led`).
    pub fn read_to_log_end(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
    ) -> Result<(ReadSlice, PartitionOffsets), LogError> {
        let st = self.state.read();
        let offsets = st.offsets();
        let slice = st
            .log
            .read(fetch_offset, max_bytes, offsets.log_end_offset)?;
        Ok((slice, offsets))
    }

    /// A read_committed read (see [`CommittedRead`]): like [`Self::read`] but never a batch at or
    /// past the last stable offset. The aborted transactions are those overlapping
    /// `[fetch_offset, end of the last batch returned)`; an empty read has none.
    pub fn read_committed(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
    ) -> Result<CommittedRead, LogError> {
        let read = self.read_inner(fetch_offset, max_bytes, ReadUpTo::LastStable, false, true)?;
        Ok(CommittedRead {
            slice: ReadSlice {
                bytes: read.records.into_bytes()?,
                first_batch_base_offset: read.first_batch_base_offset,
            },
            offsets: read.offsets,
            aborted_transactions: read.aborted_transactions,
        })
    }

    /// The Fetch path's read: [`Self::read`] (or [`Self::read_committed`] when `read_committed`)
    /// with the same batches, offsets and aborted transactions, but a large range comes back as a
    /// file range to be sent with `sendfile` ([`Records::File`]). `aborted_transactions` is
    /// empty for read_uncommitted. Without `min_one_batch` a first batch over `max_bytes` gives
    /// an empty read (a Fetch after a non-empty partition, Kafka's `minOneMessage`).
    ///
    /// A damaged batch ends the read before it; met where the read starts it is
    /// [`LogError::DamagedBatch`], counted in [`Self::read_damage`] and logged once per position.
    pub fn fetch_records(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
        read_committed: bool,
        min_one_batch: bool,
    ) -> Result<FetchRead, LogError> {
        let upper = if read_committed {
            ReadUpTo::LastStable
        } else {
            ReadUpTo::HighWatermark
        };
        self.read_inner(fetch_offset, max_bytes, upper, true, min_one_batch)
    }

    /// A follower's read (Kafka's `FetchIsolation.LOG_END`): [`Self::fetch_records`] up to the log
    /// end offset instead of the high watermark; no aborted-transaction list.
    pub fn fetch_records_for_replica(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<FetchRead, LogError> {
        self.read_inner(
            fetch_offset,
            max_bytes,
            ReadUpTo::LogEnd,
            true,
            min_one_batch,
        )
    }

    /// Damaged batches met by reads: [`ReadDamage::reads`] counts the reads answered
    /// [`LogError::DamagedBatch`] since the broker started (metric-ready).
    pub fn read_damage(&self) -> &ReadDamage {
        &self.read_damage
    }

    fn read_inner(
        &self,
        fetch_offset: i64,
        max_bytes: usize,
        upper: ReadUpTo,
        zero_copy: bool,
        min_one_batch: bool,
    ) -> Result<FetchRead, LogError> {
        let st = self.state.read();
        let offsets = st.offsets();
        let read_committed = upper == ReadUpTo::LastStable;
        let limits = ReadLimits {
            max_bytes,
            max_offset: match upper {
                ReadUpTo::LastStable => offsets.last_stable_offset,
                ReadUpTo::HighWatermark => st.high_watermark,
                ReadUpTo::LogEnd => offsets.log_end_offset,
            },
            zero_copy,
            min_one_batch,
        };
        let slice = match st.log.read_with(fetch_offset, &limits) {
            Ok(slice) => slice,
            Err(e) => {
                if let LogError::DamagedBatch { path, position, .. } = &e {
                    self.note_damage(path, *position, &e);
                }
                return Err(e);
            }
        };
        let aborted_transactions = match slice.next_offset {
            Some(upper_bound) if read_committed => st
                .log
                .collect_aborted_txns(fetch_offset, upper_bound)
                .into_iter()
                .map(|t| (t.producer_id, t.first_offset))
                .collect(),
            _ => Vec::new(),
        };
        Ok(FetchRead {
            records: slice.records,
            first_batch_base_offset: slice.first_batch_base_offset,
            offsets,
            aborted_transactions,
        })
    }

    fn note_damage(&self, segment: &Path, position: u64, e: &LogError) {
        match self.read_damage.record(segment, position) {
            DamageLog::First => tracing::error!(
                "{}-{}: {e}; reads there answer CORRUPT_MESSAGE (logged once per position, \
                 every read counted)",
                self.topic,
                self.index
            ),
            DamageLog::Untracked => tracing::debug!("{}-{}: {e}", self.topic, self.index),
            DamageLog::Repeat => {}
        }
    }

    /// Every producer id with state here, ordered by id (DescribeProducers).
    pub fn active_producers(&self) -> Vec<(i64, ProducerStateEntry)> {
        self.state
            .read()
            .producers
            .active_producers()
            .map(|(id, e)| (id, e.clone()))
            .collect()
    }

    /// The first record whose timestamp is >= `timestamp`: its offset and timestamp.
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<(i64, i64)>, LogError> {
        self.state.read().log.offset_for_timestamp(timestamp)
    }

    /// (offset, timestamp) of the first record with the largest timestamp.
    pub fn max_timestamp_record(&self) -> Result<Option<(i64, i64)>, LogError> {
        self.state.read().log.max_timestamp_record()
    }

    /// Flushes data and indexes, then snapshots producer state at the log end offset. Returns the
    /// new recovery point and the log start offset for the checkpoint files.
    pub fn flush_and_snapshot(&self) -> Result<(i64, i64), LogError> {
        let mut st = self.state.write();
        st.log.flush()?;
        let leo = st.log.log_end_offset();
        if let Err(e) = self.snapshot_writer(st.producers.snapshot_bytes(), leo, leo)() {
            tracing::warn!(
                "{}-{}: producer snapshot failed: {e}",
                self.topic,
                self.index
            );
        }
        Ok((st.log.recovery_point(), st.log.log_start_offset()))
    }

    /// Offsets for the checkpoint files without flushing.
    pub fn checkpoint_offsets(&self) -> (i64, i64) {
        let st = self.state.read();
        let background = self
            .flushed_in_background
            .load(Ordering::SeqCst)
            .min(st.log.log_end_offset());
        (
            st.log.recovery_point().max(background),
            st.log.log_start_offset(),
        )
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

/// Where a read stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReadUpTo {
    /// read_committed: the last stable offset.
    LastStable,
    /// read_uncommitted consumers: the high watermark.
    HighWatermark,
    /// Followers: the log end offset.
    LogEnd,
}

/// Why DeleteRecords failed for a partition.
#[derive(Debug, thiserror::Error)]
pub enum DeleteRecordsError {
    #[error("offset beyond the high watermark")]
    OffsetOutOfRange,
    #[error(transparent)]
    Log(#[from] LogError),
}

/// Recovery replay: feeds every batch from `from` on through the producer state (data batches
/// by header, markers by their record) and re-adds the `.txnindex` entry of every abort replayed.
fn replay(
    log: &mut PartitionLog,
    producers: &mut ProducerStateManager,
    from: i64,
) -> Result<(), LogError> {
    let mut aborted = Vec::new();
    log.scan_batches_with_control(from, &mut |h, control_batch| {
        if h.base_offset < from {
            return;
        }
        match control_batch {
            None => producers.on_append(h, h.max_timestamp),
            Some(batch) => {
                if let Some(marker) = end_txn_marker(batch) {
                    let completed = producers.on_marker(&marker, h.max_timestamp);
                    aborted.extend(completed.and_then(|c| c.aborted_txn()));
                }
            }
        }
    })?;
    for txn in aborted {
        if log.ensure_aborted_txn(txn)? {
            tracing::info!(
                dir = %log.dir().display(),
                producer_id = txn.producer_id,
                marker_offset = txn.last_offset,
                "re-added aborted transaction to the transaction index"
            );
        }
    }
    Ok(())
}

/// Maps a producer-state error to its Kafka error code.
pub fn producer_error_code(e: &ProducerError) -> i16 {
    e.code()
}

mod replication;
mod wait;
pub use replication::{FetchedFrom, FollowerAppend, ReplicaFetchCheck};
#[cfg(test)]
pub use wait::testing;

#[cfg(test)]
mod flush_tests;
#[cfg(test)]
mod txn_tests;
