//! `SharePartition`: the share-group state of one topic-partition on its leader (Kafka's
//! `SharePartition`).
//!
//! It decides which records a member may acquire (ShareFetch), what an acknowledgement does
//! (ShareAcknowledge, or acknowledgements piggy-backed on ShareFetch), when acquisition locks
//! expire, and where the share-partition start offset (SPSO) stands. It never reads the log
//! (the caller passes the batch boundaries it fetched) and never writes the share state (it
//! returns the `StateChange` to persist). Time is an argument.
//!
//! Invariants:
//! - The in-flight cache is contiguous: the first batch starts at the SPSO, each next batch
//!   starts right after the previous one ends.
//! - Every offset before the SPSO is Acknowledged or Archived (or was never in flight); the
//!   SPSO moves only past such records.
//! - A record is Acquired by at most one member; its delivery count grows by one per
//!   acquisition and a record released or timed out at `delivery_count_limit` is Archived.
//! - Acknowledgements are all-or-nothing per call: on an error nothing changes.
//! - A record before the log start offset is never made Available again.

use std::collections::BTreeMap;

use super::codes;
use super::in_flight::{InFlightBatch, InFlightState};
use super::persist::{PersisterStateBatch, ShareSnapshot};

/// Delivery state of a record (Kafka's `RecordState`; ids as persisted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordState {
    Available,
    Acquired,
    Acknowledged,
    Archived,
}

impl RecordState {
    pub fn id(self) -> i8 {
        match self {
            RecordState::Available => 0,
            RecordState::Acquired => 1,
            RecordState::Acknowledged => 2,
            RecordState::Archived => 4,
        }
    }

    pub fn from_id(id: i8) -> Option<Self> {
        match id {
            0 => Some(RecordState::Available),
            1 => Some(RecordState::Acquired),
            2 => Some(RecordState::Acknowledged),
            4 => Some(RecordState::Archived),
            _ => None,
        }
    }

    /// Acknowledged and Archived records are done: the SPSO may move past them.
    pub fn is_terminal(self) -> bool {
        matches!(self, RecordState::Acknowledged | RecordState::Archived)
    }
}

/// Acknowledge types of ShareFetch/ShareAcknowledge (`AcknowledgeTypes` entries; Renew from v2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcknowledgeType {
    /// An offset with no record (compaction, control batch): archived.
    Gap,
    /// Processed: Acknowledged.
    Accept,
    /// Give back for redelivery: Available (Archived at the delivery count limit).
    Release,
    /// Unprocessable: Archived.
    Reject,
    /// Still processing (KIP-1222, v2 with IsRenewAck): the acquisition lock restarts, the
    /// record stays Acquired with its delivery count; nothing to persist.
    Renew,
}

impl AcknowledgeType {
    pub fn from_code(code: i8) -> Option<Self> {
        match code {
            0 => Some(AcknowledgeType::Gap),
            1 => Some(AcknowledgeType::Accept),
            2 => Some(AcknowledgeType::Release),
            3 => Some(AcknowledgeType::Reject),
            4 => Some(AcknowledgeType::Renew),
            _ => None,
        }
    }
}

/// The share settings of one share-partition (group configs over broker defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharePartitionConfig {
    /// `group.share.record.lock.duration.ms` (default 30000).
    pub record_lock_duration_ms: i64,
    /// `group.share.delivery.count.limit` (default 5).
    pub delivery_count_limit: i16,
    /// `group.share.partition.max.record.locks` (default 2000): new records are acquired only
    /// while fewer records than this are in flight between SPSO and SPEO.
    pub max_record_locks: u32,
}

impl Default for SharePartitionConfig {
    fn default() -> Self {
        SharePartitionConfig {
            record_lock_duration_ms: 30_000,
            delivery_count_limit: 5,
            max_record_locks: 2000,
        }
    }
}

/// How a ShareFetch counts `MaxRecords` (KIP-1206 `ShareAcquireMode`, ShareFetch v2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AcquireMode {
    /// Whole log batches: the last batch may take the count past `MaxRecords` (v1's only mode).
    #[default]
    BatchOptimized,
    /// Never more than `MaxRecords`: a new batch is acquired up to the limit, its other records
    /// stay for the next fetch.
    RecordLimit,
}

/// The offset range of one record batch the caller read from the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchedBatch {
    pub base_offset: i64,
    pub last_offset: i64,
    /// Data of an aborted transaction read by a read_committed share group
    /// (`super::read_committed`): archived, never acquired.
    pub aborted: bool,
}

impl FetchedBatch {
    /// A batch to acquire.
    pub fn new(base_offset: i64, last_offset: i64) -> Self {
        FetchedBatch {
            base_offset,
            last_offset,
            aborted: false,
        }
    }
}

/// Records acquired by one ShareFetch (Kafka's `AcquiredRecords`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquiredRecords {
    pub first_offset: i64,
    pub last_offset: i64,
    pub delivery_count: i16,
}

/// One `AcknowledgementBatches` entry: one type for the range, or one per offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcknowledgementBatch {
    pub first_offset: i64,
    pub last_offset: i64,
    pub acknowledge_types: Vec<i8>,
}

/// Why an acknowledgement was refused; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AcknowledgeError {
    #[error("invalid acknowledgement: {0}")]
    InvalidRequest(&'static str),
    #[error("invalid record state: {0}")]
    InvalidRecordState(&'static str),
}

impl AcknowledgeError {
    pub fn error_code(&self) -> i16 {
        match self {
            AcknowledgeError::InvalidRequest(_) => codes::INVALID_REQUEST,
            AcknowledgeError::InvalidRecordState(_) => codes::INVALID_RECORD_STATE,
        }
    }
}

/// What must be written to the share state (a `ShareUpdate`'s content) after a change.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StateChange {
    pub start_offset: i64,
    pub state_batches: Vec<PersisterStateBatch>,
}

impl StateChange {
    pub fn is_empty(&self) -> bool {
        self.state_batches.is_empty()
    }
}

/// The share state of one topic-partition for one share group. Owned by the partition's
/// share-fetch driver; not thread-safe (one owner mutates it).
#[derive(Debug, Clone)]
pub struct SharePartition {
    config: SharePartitionConfig,
    /// The share-partition start offset (SPSO).
    start_offset: i64,
    state_epoch: i32,
    /// The log start offset last reported: a record before it that is released or times out
    /// is Archived (its data is gone).
    log_start_offset: i64,
    /// In-flight batches by first offset; contiguous from `start_offset`.
    cached: BTreeMap<i64, InFlightBatch>,
}

impl SharePartition {
    /// A share-partition with nothing in flight, starting at `start_offset` (the offset chosen
    /// by `share.auto.offset.reset`, see `reset`).
    pub fn new(config: SharePartitionConfig, start_offset: i64, state_epoch: i32) -> Self {
        SharePartition {
            config,
            start_offset: start_offset.max(0),
            state_epoch,
            log_start_offset: 0,
            cached: BTreeMap::new(),
        }
    }

    /// Rebuilds the state from a persisted snapshot. Acquired records come back Available
    /// (their locks died with the previous leader); offsets between persisted batches come
    /// back Available with delivery count 0; batches before the start offset, overlapping
    /// parts and unknown states are ignored.
    pub fn from_snapshot(config: SharePartitionConfig, snapshot: &ShareSnapshot) -> Self {
        let mut sp = SharePartition::new(config, snapshot.start_offset, snapshot.state_epoch);
        let mut batches = snapshot.state_batches.clone();
        batches.sort_by_key(|b| b.first_offset);
        for b in batches {
            let next = sp.next_new_offset();
            let first = b.first_offset.max(next);
            // `i64::MAX` is no offset a log reaches; refusing it keeps `last + 1` in range.
            if b.last_offset < first || b.last_offset == i64::MAX {
                continue;
            }
            let state = match RecordState::from_id(b.delivery_state) {
                Some(RecordState::Acquired) | None => RecordState::Available,
                Some(s) => s,
            };
            if first > next {
                sp.insert(InFlightBatch::new(
                    next,
                    first - 1,
                    InFlightState::available(0),
                ));
            }
            let mut s = InFlightState::available(b.delivery_count.max(0));
            s.state = state;
            sp.insert(InFlightBatch::new(first, b.last_offset, s));
        }
        sp.advance_start_offset();
        sp
    }

    pub fn config(&self) -> &SharePartitionConfig {
        &self.config
    }

    /// The share-partition start offset (SPSO).
    pub fn start_offset(&self) -> i64 {
        self.start_offset
    }

    /// The share-partition end offset (SPEO) as Kafka reports it: the last in-flight offset,
    /// or the SPSO when nothing is in flight.
    pub fn end_offset(&self) -> i64 {
        self.cached
            .values()
            .next_back()
            .map_or(self.start_offset, |b| b.last_offset)
    }

    pub fn state_epoch(&self) -> i32 {
        self.state_epoch
    }

    /// The first offset never in flight.
    fn next_new_offset(&self) -> i64 {
        self.cached
            .values()
            .next_back()
            .map_or(self.start_offset, |b| b.last_offset + 1)
    }

    /// Where the next ShareFetch should read the log: the first Available in-flight record, else
    /// the first offset never in flight.
    pub fn next_fetch_offset(&self) -> i64 {
        for b in self.cached.values() {
            for offset in b.first_offset..=b.last_offset {
                if b.state_at(offset).state == RecordState::Available {
                    return offset;
                }
                if let super::in_flight::Offsets::Whole(_) = b.offsets {
                    break;
                }
            }
        }
        self.next_new_offset()
    }

    /// Records between the SPSO and the SPEO (Kafka's in-flight count).
    pub fn in_flight_records(&self) -> u64 {
        (self.next_new_offset() - self.start_offset) as u64
    }

    /// Whether a record at or after `offset` could be acquired now: one in flight may be
    /// Available, a new one only while fewer than `max_record_locks` records are in flight.
    pub fn can_acquire_from(&self, offset: i64) -> bool {
        offset < self.next_new_offset()
            || self.in_flight_records() < u64::from(self.config.max_record_locks)
    }

    /// The state, delivery count and lock holder of `offset` while in flight.
    pub fn record_state(&self, offset: i64) -> Option<(RecordState, i16, Option<&str>)> {
        let (_, b) = self.cached.range(..=offset).next_back()?;
        if offset > b.last_offset {
            return None;
        }
        let s = b.state_at(offset);
        Some((s.state, s.delivery_count, s.member_id.as_deref()))
    }

    /// The earliest acquisition-lock deadline: the driver calls `expire_locks` then.
    pub fn next_lock_deadline(&self) -> Option<i64> {
        self.cached
            .values()
            .flat_map(|b| match &b.offsets {
                super::in_flight::Offsets::Whole(s) => {
                    s.lock_deadline_ms.into_iter().collect::<Vec<_>>()
                }
                super::in_flight::Offsets::PerOffset(v) => {
                    v.iter().filter_map(|s| s.lock_deadline_ms).collect()
                }
            })
            .min()
    }

    /// Acquires for `member_id` the Available records among `fetched` (batch ranges read from
    /// the log at `next_fetch_offset()`), at most `max_records` of them except that a batch is
    /// taken whole (Kafka's batch alignment), and new records only while fewer than
    /// `max_record_locks` are in flight. Each acquired record gets one more delivery and a lock
    /// until `now_ms + record_lock_duration_ms`. Acquisition is not persisted.
    pub fn acquire(
        &mut self,
        member_id: &str,
        fetched: &[FetchedBatch],
        max_records: u32,
        now_ms: i64,
    ) -> Vec<AcquiredRecords> {
        let mode = AcquireMode::BatchOptimized;
        self.acquire_in_mode(member_id, fetched, max_records, mode, now_ms)
    }

    /// [`acquire`](Self::acquire) in `mode`: with `RecordLimit` at most `max_records` records
    /// are acquired, a log batch past the limit is acquired only up to it (Kafka's record-limit
    /// mode; the rest is read again by the next fetch, from the offset after the last acquired
    /// one). In-flight batches are cut to the budget in both modes.
    pub fn acquire_in_mode(
        &mut self,
        member_id: &str,
        fetched: &[FetchedBatch],
        max_records: u32,
        mode: AcquireMode,
        now_ms: i64,
    ) -> Vec<AcquiredRecords> {
        let deadline = now_ms.saturating_add(self.config.record_lock_duration_ms);
        let mut remaining = u64::from(max_records);
        let mut out = Vec::new();
        let mut fetched: Vec<FetchedBatch> = fetched
            .iter()
            .copied()
            .filter(|b| {
                b.base_offset <= b.last_offset
                    && b.last_offset >= self.start_offset
                    && b.last_offset < i64::MAX
            })
            .collect();
        fetched.sort_by_key(|b| b.base_offset);
        for fb in fetched {
            if remaining == 0 {
                break;
            }
            let first = fb.base_offset.max(self.start_offset);
            if fb.aborted {
                self.archive_aborted(first, fb.last_offset);
                continue;
            }
            let next_new = self.next_new_offset();
            if first < next_new {
                let last = fb.last_offset.min(next_new - 1);
                self.acquire_cached(member_id, first, last, deadline, &mut remaining, &mut out);
            }
            if remaining == 0 || fb.last_offset < next_new {
                continue;
            }
            // New records, from the first offset never in flight (a gap before the batch, left
            // by compaction, is acquired with it and acknowledged as GAP by the client).
            let in_flight = self.in_flight_records();
            if in_flight >= u64::from(self.config.max_record_locks) {
                break;
            }
            let mut last = fb.last_offset;
            let new_records = (last - next_new + 1) as u64;
            if mode == AcquireMode::RecordLimit && new_records > remaining {
                last = next_new + remaining as i64 - 1;
            }
            let batch = InFlightBatch::new(
                next_new,
                last,
                InFlightState::acquired(member_id, 1, deadline),
            );
            remaining = remaining.saturating_sub(batch.len());
            out.push(AcquiredRecords {
                first_offset: next_new,
                last_offset: last,
                delivery_count: 1,
            });
            self.insert(batch);
        }
        merge_adjacent(out)
    }

    /// Archives `[first, last]`, data of an aborted transaction under read_committed: its
    /// Available in-flight records and its offsets never in flight. Nothing is persisted: the log
    /// decides the same way after a restart, and the SPSO moves past them with the next change.
    fn archive_aborted(&mut self, first: i64, last: i64) {
        let next_new = self.next_new_offset();
        if first < next_new {
            let cached_last = last.min(next_new - 1);
            self.carve(first, cached_last);
            for key in self.overlapping_keys(first, cached_last) {
                if let Some(b) = self.cached.get_mut(&key) {
                    b.update_range(first.max(key), cached_last.min(b.last_offset), |s| {
                        if s.state == RecordState::Available {
                            s.finish(RecordState::Archived);
                        }
                    });
                }
            }
        }
        if last >= next_new {
            let mut archived = InFlightState::available(0);
            archived.finish(RecordState::Archived);
            self.insert(InFlightBatch::new(next_new, last, archived));
        }
    }

    /// Acquires the Available in-flight records of `[first, last]`, at most `remaining`.
    fn acquire_cached(
        &mut self,
        member_id: &str,
        first: i64,
        last: i64,
        deadline: i64,
        remaining: &mut u64,
        out: &mut Vec<AcquiredRecords>,
    ) {
        self.carve(first, last);
        for key in self.overlapping_keys(first, last) {
            if *remaining == 0 {
                return;
            }
            let Some(b) = self.cached.get(&key) else {
                continue;
            };
            if b.is_split() {
                for offset in b.first_offset..=b.last_offset {
                    if *remaining == 0 {
                        return;
                    }
                    let Some(b) = self.cached.get_mut(&key) else {
                        return;
                    };
                    if b.state_at(offset).state != RecordState::Available {
                        continue;
                    }
                    b.update_range(offset, offset, |s| s.acquire(member_id, deadline));
                    *remaining -= 1;
                    out.push(AcquiredRecords {
                        first_offset: offset,
                        last_offset: offset,
                        delivery_count: b.state_at(offset).delivery_count,
                    });
                }
                continue;
            }
            if b.state_at(key).state != RecordState::Available {
                continue;
            }
            // An in-flight batch longer than the budget is cut to it.
            if b.len() > *remaining {
                self.carve(key, key + *remaining as i64 - 1);
            }
            let Some(b) = self.cached.get_mut(&key) else {
                continue;
            };
            b.update_range(key, b.last_offset, |s| s.acquire(member_id, deadline));
            *remaining = remaining.saturating_sub(b.len());
            out.push(AcquiredRecords {
                first_offset: b.first_offset,
                last_offset: b.last_offset,
                delivery_count: b.state_at(key).delivery_count,
            });
        }
    }

    /// Cuts in-flight batches so that `first` starts one and `last` ends one.
    fn carve(&mut self, first: i64, last: i64) {
        self.split_before(first);
        self.split_before(last.saturating_add(1));
    }

    /// Cuts the in-flight batch containing `at` so that a batch starts at `at`.
    fn split_before(&mut self, at: i64) {
        let Some((&key, b)) = self.cached.range_mut(..=at).next_back() else {
            return;
        };
        if key == at || b.last_offset < at {
            return;
        }
        let right = b.split_off(at);
        self.insert(right);
    }

    /// Applies `member_id`'s acknowledgements: batches in offset order (else INVALID_REQUEST),
    /// ending inside the in-flight records (past them: INVALID_REQUEST; before the SPSO:
    /// INVALID_RECORD_STATE), every offset from the SPSO on Acquired by that member (else
    /// INVALID_RECORD_STATE). On success returns what to persist; the SPSO moves past finished
    /// records. RENEW (type 4) is an unknown type here (INVALID_REQUEST): see
    /// [`acknowledge_renewing`](Self::acknowledge_renewing).
    pub fn acknowledge(
        &mut self,
        member_id: &str,
        batches: &[AcknowledgementBatch],
    ) -> Result<StateChange, AcknowledgeError> {
        self.acknowledge_inner(member_id, batches, None)
    }

    /// [`acknowledge`](Self::acknowledge) of a v2 request with IsRenewAck: RENEW is accepted too
    /// and restarts the acquisition lock of its records at `now_ms` (until `now_ms +
    /// record_lock_duration_ms`) without changing their state, holder or delivery count; they
    /// are left out of the change to persist (Kafka's `SharePartition` renews the timer only).
    pub fn acknowledge_renewing(
        &mut self,
        member_id: &str,
        batches: &[AcknowledgementBatch],
        now_ms: i64,
    ) -> Result<StateChange, AcknowledgeError> {
        let deadline = now_ms.saturating_add(self.config.record_lock_duration_ms);
        self.acknowledge_inner(member_id, batches, Some(deadline))
    }

    /// `renew_deadline`: RENEW is allowed and locks until then.
    fn acknowledge_inner(
        &mut self,
        member_id: &str,
        batches: &[AcknowledgementBatch],
        renew_deadline: Option<i64>,
    ) -> Result<StateChange, AcknowledgeError> {
        // KafkaApis' checks: well-formed batches in offset order.
        let mut prev_last: Option<i64> = None;
        for b in batches {
            validate_shape(b, renew_deadline.is_some())?;
            if prev_last.is_some_and(|p| b.first_offset <= p) {
                return Err(AcknowledgeError::InvalidRequest(
                    "acknowledgement batches are not in offset order",
                ));
            }
            prev_last = Some(b.last_offset);
        }
        // SharePartition's checks: offsets before the SPSO are finished and skipped; every
        // other offset must be in flight and held by this member.
        let last_in_flight = self.next_new_offset() - 1;
        for b in batches {
            if b.last_offset < self.start_offset {
                return Err(AcknowledgeError::InvalidRecordState(
                    "offsets are not in flight",
                ));
            }
            if b.last_offset > last_in_flight {
                return Err(AcknowledgeError::InvalidRequest(
                    "the last offset is past the acquired records",
                ));
            }
            let first = b.first_offset.max(self.start_offset);
            for key in self.overlapping_keys(first, b.last_offset) {
                let ok = self.cached.get(&key).is_some_and(|ib| {
                    ib.all_in(first, b.last_offset, |s| s.is_acquired_by(member_id))
                });
                if !ok {
                    return Err(AcknowledgeError::InvalidRecordState(
                        "records are not acquired by this member",
                    ));
                }
            }
        }
        let limit = self.config.delivery_count_limit;
        let mut change = Vec::new();
        let renew = renew_deadline.unwrap_or(i64::MAX);
        for b in batches {
            let first = b.first_offset.max(self.start_offset);
            self.carve(first, b.last_offset);
            let renews = b.acknowledge_types.contains(&RENEW);
            if let [code] = b.acknowledge_types[..] {
                self.finish_range(first, b.last_offset, code, limit, renew);
                if code != RENEW {
                    self.persister_batches(first, b.last_offset, &mut change);
                }
                continue;
            }
            for offset in first..=b.last_offset {
                let code = b.acknowledge_types[(offset - b.first_offset) as usize];
                self.carve(offset, offset);
                self.finish_range(offset, offset, code, limit, renew);
                if renews && code != RENEW {
                    self.persister_batches(offset, offset, &mut change);
                }
            }
            if !renews {
                self.persister_batches(first, b.last_offset, &mut change);
            }
        }
        self.advance_start_offset();
        Ok(StateChange {
            start_offset: self.start_offset,
            state_batches: change,
        })
    }

    /// Applies acknowledge type `code` to `[first, last]`; a RENEW locks until `renew_deadline`.
    fn finish_range(&mut self, first: i64, last: i64, code: i8, limit: i16, renew_deadline: i64) {
        let Some(kind) = AcknowledgeType::from_code(code) else {
            return;
        };
        let log_start = self.log_start_offset;
        for key in self.overlapping_keys(first, last) {
            if let Some(b) = self.cached.get_mut(&key) {
                let limit = limit_for(b, log_start, limit);
                b.update_range(first, last, |s| match kind {
                    AcknowledgeType::Accept => s.finish(RecordState::Acknowledged),
                    AcknowledgeType::Release => s.release(limit),
                    AcknowledgeType::Reject | AcknowledgeType::Gap => {
                        s.finish(RecordState::Archived)
                    }
                    AcknowledgeType::Renew => s.renew(renew_deadline),
                });
            }
        }
    }

    /// Releases every record `member_id` holds (the member left or its share session closed).
    pub fn release_acquired_records(&mut self, member_id: &str) -> StateChange {
        self.release_where(|s| s.is_acquired_by(member_id))
    }

    /// Releases every record whose acquisition lock expired at `now_ms` (Available again, or
    /// Archived at the delivery count limit).
    pub fn expire_locks(&mut self, now_ms: i64) -> StateChange {
        self.release_where(|s| s.lock_expired(now_ms))
    }

    fn release_where(&mut self, pred: impl Fn(&InFlightState) -> bool) -> StateChange {
        let (config_limit, log_start) = (self.config.delivery_count_limit, self.log_start_offset);
        let mut touched: Vec<(i64, i64)> = Vec::new();
        for b in self.cached.values_mut() {
            let (first, last) = (b.first_offset, b.last_offset);
            let limit = limit_for(b, log_start, config_limit);
            if b.all_in(first, last, &pred) {
                b.update_range(first, last, |s| s.release(limit));
                touched.push((first, last));
                continue;
            }
            if !b.is_split() {
                continue;
            }
            for offset in first..=last {
                if pred(b.state_at(offset)) {
                    b.update_range(offset, offset, |s| s.release(limit));
                    touched.push((offset, offset));
                }
            }
        }
        let mut change = Vec::new();
        for (first, last) in touched {
            self.persister_batches(first, last, &mut change);
        }
        self.advance_start_offset();
        StateChange {
            start_offset: self.start_offset,
            state_batches: change,
        }
    }

    /// The log start offset moved to `log_start_offset` (retention, DeleteRecords): Available
    /// records before it are Archived and the SPSO moves up to it; Acquired ones keep their lock
    /// (and hold the SPSO) until acknowledged, released or timed out, and are Archived then.
    /// Offsets never in flight before it are recorded as Archived.
    pub fn update_log_start_offset(&mut self, log_start_offset: i64) -> StateChange {
        let mut change = Vec::new();
        if log_start_offset > self.log_start_offset && log_start_offset < i64::MAX {
            self.log_start_offset = log_start_offset;
        }
        let lso = self.log_start_offset;
        if lso > self.start_offset {
            let next_new = self.next_new_offset();
            if lso > next_new {
                let mut archived = InFlightState::available(0);
                archived.finish(RecordState::Archived);
                self.insert(InFlightBatch::new(next_new, lso - 1, archived));
            }
            self.carve(self.start_offset, lso - 1);
            for key in self.overlapping_keys(self.start_offset, lso - 1) {
                if let Some(b) = self.cached.get_mut(&key) {
                    let (first, last) = (b.first_offset, b.last_offset);
                    b.update_range(first, last, |s| {
                        if s.state == RecordState::Available {
                            s.finish(RecordState::Archived);
                        }
                    });
                }
            }
            self.persister_batches(self.start_offset, lso - 1, &mut change);
            self.advance_start_offset();
        }
        StateChange {
            start_offset: self.start_offset,
            state_batches: change,
        }
    }

    /// The whole state as a snapshot's content (start offset, state epoch, batches).
    pub fn snapshot(&self) -> ShareSnapshot {
        let mut batches = Vec::new();
        for b in self.cached.values() {
            b.persister_batches(b.first_offset, b.last_offset, &mut batches);
        }
        ShareSnapshot {
            state_epoch: self.state_epoch,
            start_offset: self.start_offset,
            state_batches: batches,
            ..ShareSnapshot::default()
        }
    }

    fn persister_batches(&self, first: i64, last: i64, out: &mut Vec<PersisterStateBatch>) {
        for key in self.overlapping_keys(first, last) {
            if let Some(b) = self.cached.get(&key) {
                b.persister_batches(first, last, out);
            }
        }
    }

    /// First offsets of the in-flight batches overlapping `[first, last]`, ascending.
    fn overlapping_keys(&self, first: i64, last: i64) -> Vec<i64> {
        let mut keys: Vec<i64> = self
            .cached
            .range(..=last)
            .rev()
            .take_while(|(_, b)| b.last_offset >= first)
            .map(|(k, _)| *k)
            .collect();
        keys.reverse();
        keys
    }

    fn insert(&mut self, batch: InFlightBatch) {
        self.cached.insert(batch.first_offset, batch);
    }

    /// Moves the SPSO past leading Acknowledged/Archived records and drops finished batches.
    fn advance_start_offset(&mut self) {
        while let Some(entry) = self.cached.first_entry() {
            let n = entry.get().leading_terminal();
            if n == entry.get().len() {
                self.start_offset = entry.get().last_offset + 1;
                entry.remove();
                continue;
            }
            if n > 0 {
                let mut b = entry.remove();
                b.trim_front(n);
                self.start_offset = b.first_offset;
                self.insert(b);
            }
            break;
        }
    }
}

/// The delivery count limit for a release in `b`: 0 (archive) once its data is before the log
/// start offset.
fn limit_for(b: &InFlightBatch, log_start_offset: i64, limit: i16) -> i16 {
    if b.last_offset < log_start_offset {
        0
    } else {
        limit
    }
}

/// The RENEW acknowledge type's code.
const RENEW: i8 = 4;

/// KafkaApis' per-batch checks; `renew`: type 4 is allowed (v2 with IsRenewAck).
fn validate_shape(b: &AcknowledgementBatch, renew: bool) -> Result<(), AcknowledgeError> {
    if b.first_offset < 0 || b.first_offset > b.last_offset {
        return Err(AcknowledgeError::InvalidRequest(
            "first offset is after last offset",
        ));
    }
    let len = (b.last_offset - b.first_offset).saturating_add(1);
    let types = b.acknowledge_types.len();
    if types == 0 || (types != 1 && types as i64 != len) {
        return Err(AcknowledgeError::InvalidRequest(
            "acknowledge types must be one for the batch or one per offset",
        ));
    }
    if b.acknowledge_types
        .iter()
        .any(|t| AcknowledgeType::from_code(*t).is_none() || (*t == RENEW && !renew))
    {
        return Err(AcknowledgeError::InvalidRequest("unknown acknowledge type"));
    }
    Ok(())
}

/// Joins adjacent acquired ranges with equal delivery counts.
fn merge_adjacent(ranges: Vec<AcquiredRecords>) -> Vec<AcquiredRecords> {
    let mut out: Vec<AcquiredRecords> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            Some(p)
                if p.last_offset + 1 == r.first_offset && p.delivery_count == r.delivery_count =>
            {
                p.last_offset = r.last_offset;
            }
            _ => out.push(r),
        }
    }
    out
}
