//! Producer state of one partition: which producer ids wrote here, at which epoch, the
//! sequence/offset metadata of their last few batches, and their open transactions.
//!
//! The produce path asks [`ProducerStateManager::check`] before appending a data batch (fresh
//! append, duplicate of a recent batch, or a Kafka error) and reports the batch with
//! [`ProducerStateManager::on_append`] once it sits at its final offsets. Transaction markers go
//! through [`ProducerStateManager::check_marker`] and [`ProducerStateManager::on_marker`], which
//! completes the producer's open transaction ([`CompletedTxn`]). Recovery replays the log's batches
//! through the same two `on_*` calls, starting from the offset of the latest snapshot (see
//! `snapshot`).
//!
//! Invariants:
//! - The logic performs no I/O and reads no clock: time arrives as arguments. Only the snapshot
//!   functions touch the file system, and they take the directory explicitly.
//! - Per producer id we keep at most [`NUM_BATCHES_TO_RETAIN`] batches, all of the entry's current epoch
//!   (a new epoch clears them), ordered oldest first.
//! - `ongoing_txns` holds exactly the `(current_txn_first_offset, producer id)` of every entry with an
//!   open transaction; its smallest key is the first undecided offset that bounds the last stable
//!   offset. An entry with an open transaction never expires.
//! - A transaction whose marker is in the log but not yet below the high watermark is still
//!   unstable (Kafka's `unreplicatedTxns`): a leader change could truncate the marker and the
//!   next coordinator abort the transaction, so a read_committed fetch must not pass its first
//!   offset until the marker is replicated. [`ProducerStateManager::on_high_watermark`] forgets
//!   the ones the high watermark passed.
//!
//! The rules are Kafka 4.x's (`ProducerAppendInfo`, `ProducerStateEntry`, `ProducerStateManager`,
//! `UnifiedLog`'s duplicate lookup in `storage/.../internals/log`), for transactions V1 markers
//! (marker epoch >= producer epoch); where we deliberately differ, the item's doc says so.

use std::collections::{BTreeMap, VecDeque};

use crate::record::{BatchHeader, ControlType, NO_SEQUENCE};

mod snapshot;
mod txn;
pub use snapshot::{
    remove_snapshots_below, snapshot_path, write_snapshot_bytes, CorruptSnapshot, LoadedSnapshot,
};
pub use txn::{end_txn_marker, CompletedTxn, TxnMarker};
#[cfg(test)]
mod tests;

/// How many recent batches per producer are remembered for duplicate detection. Kafka's clients cap
/// `max.in.flight.requests.per.connection` at this value when idempotence is on.
pub const NUM_BATCHES_TO_RETAIN: usize = 5;

/// Epoch of a producer that has no known state (Kafka's `RecordBatch.NO_PRODUCER_EPOCH`).
pub const NO_PRODUCER_EPOCH: i16 = -1;

/// Who is appending (Kafka's `AppendOrigin`). Client batches get every producer check; batches the
/// broker's own coordinators build (transactional offset commits, markers) carry no sequence numbers
/// and skip the duplicate and sequence checks, but still obey the epoch and transaction rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOrigin {
    Client,
    Coordinator,
}

/// What the broker should do with a batch that passed the producer-state check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProducerCheck {
    /// Append the batch normally.
    Append,
    /// The batch is a retry of one already in the log: append nothing and answer success with the
    /// offsets the original batch got.
    Duplicate { base_offset: i64, last_offset: i64 },
}

/// Why a batch is refused. Each variant is a per-partition produce error, not a connection error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProducerError {
    /// The batch's epoch is older than the producer's current one: a zombie or fenced producer.
    #[error(
        "producer {producer_id}: epoch {batch_epoch} is older than current epoch {current_epoch}"
    )]
    InvalidProducerEpoch {
        producer_id: i64,
        batch_epoch: i16,
        current_epoch: i16,
    },
    /// The batch does not continue the producer's sequence (gap, reorder, or an old batch no longer
    /// cached), or opens a new epoch at a sequence other than 0.
    #[error(
        "producer {producer_id} epoch {batch_epoch}: sequence {base_sequence} does not follow {last_sequence}"
    )]
    OutOfOrderSequence {
        producer_id: i64,
        batch_epoch: i16,
        base_sequence: i32,
        /// Last sequence appended by this producer at its current epoch (-1 if none).
        last_sequence: i32,
    },
    /// A batch carries a producer id but no sequence. Kafka rejects this in `LogValidator` with
    /// INVALID_RECORD; we repeat the check here because `record::validate_batch` does not make it.
    #[error("producer {producer_id}: batch has no base sequence")]
    MissingSequence { producer_id: i64 },
    /// A non-transactional batch from a producer with an open transaction (Kafka's
    /// `InvalidTxnStateException`).
    #[error("producer {producer_id}: non-transactional batch while a transaction is open")]
    InvalidTxnState { producer_id: i64 },
    /// A marker from an older transaction coordinator than the last one that wrote a marker for
    /// this producer (Kafka's `TransactionCoordinatorFencedException`).
    #[error(
        "producer {producer_id}: coordinator epoch {marker_epoch} is older than {current_epoch}"
    )]
    CoordinatorFenced {
        producer_id: i64,
        marker_epoch: i32,
        current_epoch: i32,
    },
    /// A control batch that is not a readable end-transaction marker.
    #[error("control batch is not a transaction marker")]
    InvalidMarker,
}

impl ProducerError {
    /// The Kafka error code to put in the partition's produce response.
    pub fn code(&self) -> i16 {
        match self {
            ProducerError::InvalidProducerEpoch { .. } => 47,
            ProducerError::OutOfOrderSequence { .. } => 45,
            ProducerError::MissingSequence { .. } => 87,
            ProducerError::InvalidTxnState { .. } => 48,
            ProducerError::CoordinatorFenced { .. } => 52,
            ProducerError::InvalidMarker => 87,
        }
    }
}

/// Where one appended batch landed and which sequences it covered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    pub first_seq: i32,
    pub last_seq: i32,
    pub base_offset: i64,
    pub last_offset: i64,
    /// The batch's max timestamp, kept like Kafka's `BatchMetadata.timestamp` (informational).
    pub max_timestamp: i64,
}

/// The state of one producer id on this partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerStateEntry {
    producer_epoch: i16,
    /// Oldest first; at most [`NUM_BATCHES_TO_RETAIN`]; all written at `producer_epoch`.
    batches: VecDeque<BatchMetadata>,
    /// Broker time of the last append, the clock producer-id expiry runs on. Kafka uses the batch's
    /// max timestamp (a client clock); we use the append time so a skewed client clock cannot expire
    /// a producer early or keep it forever. When replaying old batches, callers pass the batch's max
    /// timestamp, which is what Kafka would have stored.
    last_timestamp: i64,
    /// Epoch of the last transaction coordinator that wrote a marker (-1: none); an older
    /// coordinator's marker is fenced.
    coordinator_epoch: i32,
    /// First offset of this producer's open transaction; an entry with an open transaction never
    /// expires.
    current_txn_first_offset: Option<i64>,
}

impl ProducerStateEntry {
    fn empty() -> Self {
        ProducerStateEntry {
            producer_epoch: NO_PRODUCER_EPOCH,
            batches: VecDeque::with_capacity(NUM_BATCHES_TO_RETAIN),
            last_timestamp: -1,
            coordinator_epoch: -1,
            current_txn_first_offset: None,
        }
    }

    pub fn producer_epoch(&self) -> i16 {
        self.producer_epoch
    }

    /// Last sequence written at the current epoch, or -1 if no batch is cached.
    pub fn last_sequence(&self) -> i32 {
        self.batches.back().map_or(NO_SEQUENCE, |b| b.last_seq)
    }

    pub fn last_timestamp(&self) -> i64 {
        self.last_timestamp
    }

    pub fn coordinator_epoch(&self) -> i32 {
        self.coordinator_epoch
    }

    pub fn current_txn_first_offset(&self) -> Option<i64> {
        self.current_txn_first_offset
    }

    /// The cached batches, oldest first.
    pub fn batches(&self) -> impl Iterator<Item = &BatchMetadata> {
        self.batches.iter()
    }

    /// A cached batch with exactly this epoch and sequence range, as Kafka's `findDuplicateBatch`.
    fn find_duplicate(&self, epoch: i16, first_seq: i32, last_seq: i32) -> Option<&BatchMetadata> {
        if epoch != self.producer_epoch {
            return None;
        }
        self.batches
            .iter()
            .find(|b| b.first_seq == first_seq && b.last_seq == last_seq)
    }

    /// Kafka's `maybeUpdateProducerEpoch`: a new epoch forgets the cached batches.
    fn set_epoch(&mut self, epoch: i16) {
        if epoch != self.producer_epoch {
            self.batches.clear();
            self.producer_epoch = epoch;
        }
    }

    fn push(&mut self, epoch: i16, batch: BatchMetadata, timestamp: i64) {
        self.set_epoch(epoch);
        if self.batches.len() == NUM_BATCHES_TO_RETAIN {
            self.batches.pop_front();
        }
        self.batches.push_back(batch);
        self.last_timestamp = timestamp;
    }
}

/// Kafka's rule in `appendDataBatch`: while a transaction is open every batch must be transactional.
fn check_txn_state(entry: &ProducerStateEntry, batch: &BatchHeader) -> Result<(), ProducerError> {
    if entry.current_txn_first_offset.is_some() && !batch.is_transactional() {
        return Err(ProducerError::InvalidTxnState {
            producer_id: batch.producer_id,
        });
    }
    Ok(())
}

/// `next` directly follows `last`, with sequences wrapping from `i32::MAX` to 0.
fn in_sequence(last: i32, next: i32) -> bool {
    next as i64 == last as i64 + 1 || (next == 0 && last == i32::MAX)
}

/// Producer state of one partition.
///
/// Not thread-safe: owned by the `Partition`, behind the same mutex that serialises appends, so that
/// `check` and the following `on_append` see no interleaved batch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProducerStateManager {
    /// Ordered so snapshots are deterministic.
    producers: BTreeMap<i64, ProducerStateEntry>,
    /// Open transactions: first offset -> producer id (Kafka's `ongoingTxns`).
    ongoing_txns: BTreeMap<i64, i64>,
    /// Completed transactions whose marker the high watermark has not passed yet: first offset ->
    /// the marker's offset (Kafka's `unreplicatedTxns`). Not in snapshots, as in Kafka: a replay
    /// from a snapshot re-adds the markers it meets.
    unreplicated_txns: BTreeMap<i64, i64>,
}

impl ProducerStateManager {
    pub fn new() -> Self {
        Self::default()
    }

    /// Decides what to do with a validated data batch before it is appended. Pure: changes nothing.
    ///
    /// Batches without a producer id, and control batches (see [`Self::check_marker`]), always get
    /// `Append`. For the rest, in Kafka's order: (client origin) an exact (epoch, first seq, last
    /// seq) match with a cached batch is a `Duplicate`; an older epoch is `InvalidProducerEpoch`;
    /// (client origin) a newer epoch must start at sequence 0 and the same epoch must continue at
    /// last sequence + 1; a non-transactional batch while the producer has an open transaction is
    /// `InvalidTxnState`. A producer id we hold no state for (new, or expired, or truncated away) is
    /// accepted at any sequence, as Kafka does since KIP-360 instead of answering
    /// UNKNOWN_PRODUCER_ID.
    pub fn check(
        &self,
        batch: &BatchHeader,
        origin: AppendOrigin,
    ) -> Result<ProducerCheck, ProducerError> {
        if !batch.has_producer_id() || batch.is_control() {
            return Ok(ProducerCheck::Append);
        }
        let producer_id = batch.producer_id;
        if origin == AppendOrigin::Coordinator {
            return self
                .check_coordinator_batch(batch)
                .map(|()| ProducerCheck::Append);
        }
        if batch.base_sequence < 0 {
            return Err(ProducerError::MissingSequence { producer_id });
        }
        let empty;
        let entry = match self.producers.get(&producer_id) {
            Some(entry) => entry,
            None => {
                empty = ProducerStateEntry::empty();
                &empty
            }
        };
        let epoch = batch.producer_epoch;
        if let Some(dup) = entry.find_duplicate(epoch, batch.base_sequence, batch.last_sequence()) {
            return Ok(ProducerCheck::Duplicate {
                base_offset: dup.base_offset,
                last_offset: dup.last_offset,
            });
        }
        if epoch < entry.producer_epoch {
            return Err(ProducerError::InvalidProducerEpoch {
                producer_id,
                batch_epoch: epoch,
                current_epoch: entry.producer_epoch,
            });
        }
        // With no known epoch (new producer, or an entry whose data is gone) any sequence is accepted.
        let known = entry.producer_epoch != NO_PRODUCER_EPOCH;
        let in_order = if epoch != entry.producer_epoch {
            batch.base_sequence == 0 || !known
        } else {
            !known || in_sequence(entry.last_sequence(), batch.base_sequence)
        };
        if !in_order {
            return Err(ProducerError::OutOfOrderSequence {
                producer_id,
                batch_epoch: epoch,
                base_sequence: batch.base_sequence,
                last_sequence: if epoch == entry.producer_epoch {
                    entry.last_sequence()
                } else {
                    NO_SEQUENCE
                },
            });
        }
        check_txn_state(entry, batch)?;
        Ok(ProducerCheck::Append)
    }

    /// A coordinator-built data batch: no sequences, only the epoch and transaction-state rules.
    fn check_coordinator_batch(&self, batch: &BatchHeader) -> Result<(), ProducerError> {
        let Some(entry) = self.producers.get(&batch.producer_id) else {
            return Ok(());
        };
        if batch.producer_epoch < entry.producer_epoch {
            return Err(ProducerError::InvalidProducerEpoch {
                producer_id: batch.producer_id,
                batch_epoch: batch.producer_epoch,
                current_epoch: entry.producer_epoch,
            });
        }
        check_txn_state(entry, batch)
    }

    /// Kafka's marker checks for transactions V1: the marker's producer epoch must not be older
    /// than the producer's (INVALID_PRODUCER_EPOCH), nor its coordinator epoch older than the last
    /// marker's (TRANSACTION_COORDINATOR_FENCED). A producer we hold no state for passes. Pure.
    pub fn check_marker(&self, marker: &TxnMarker) -> Result<(), ProducerError> {
        let Some(entry) = self.producers.get(&marker.producer_id) else {
            return Ok(());
        };
        if marker.producer_epoch < entry.producer_epoch {
            return Err(ProducerError::InvalidProducerEpoch {
                producer_id: marker.producer_id,
                batch_epoch: marker.producer_epoch,
                current_epoch: entry.producer_epoch,
            });
        }
        if marker.coordinator_epoch < entry.coordinator_epoch {
            return Err(ProducerError::CoordinatorFenced {
                producer_id: marker.producer_id,
                marker_epoch: marker.coordinator_epoch,
                current_epoch: entry.coordinator_epoch,
            });
        }
        Ok(())
    }

    /// Records a marker now in the log at `marker.offset` (also the replay step). The marker's
    /// epoch becomes the producer's (a newer one forgets the cached batches), its coordinator epoch
    /// the entry's, and the producer's open transaction, if any, is completed: the returned
    /// [`CompletedTxn`] carries the last stable offset Kafka writes into the `.txnindex`. A marker
    /// for a producer without an open transaction completes nothing (Kafka emits no `CompletedTxn`
    /// for it) but still creates or updates the entry.
    pub fn on_marker(&mut self, marker: &TxnMarker, append_time_ms: i64) -> Option<CompletedTxn> {
        let entry = self
            .producers
            .entry(marker.producer_id)
            .or_insert_with(ProducerStateEntry::empty);
        let first_offset = entry.current_txn_first_offset.take();
        entry.set_epoch(marker.producer_epoch);
        entry.coordinator_epoch = marker.coordinator_epoch;
        entry.last_timestamp = append_time_ms;
        let first_offset = first_offset?;
        self.ongoing_txns.remove(&first_offset);
        self.unreplicated_txns.insert(first_offset, marker.offset);
        // Kafka's `lastStableOffset(completedTxn)`: the oldest other open transaction, else just
        // past the marker.
        let last_stable_offset = self.first_undecided_offset().unwrap_or(marker.offset + 1);
        Some(CompletedTxn {
            producer_id: marker.producer_id,
            first_offset,
            last_offset: marker.offset,
            aborted: marker.control == ControlType::Abort,
            last_stable_offset,
        })
    }

    /// First offset of the oldest open transaction (Kafka's `firstUndecidedOffset`).
    pub fn first_undecided_offset(&self) -> Option<i64> {
        self.ongoing_txns.keys().next().copied()
    }

    /// Kafka's `firstUnstableOffset`: the first offset of the oldest transaction that is open, or
    /// completed by a marker at or above `high_watermark` (not replicated yet).
    pub fn first_unstable_offset(&self, high_watermark: i64) -> Option<i64> {
        let unreplicated = self
            .unreplicated_txns
            .iter()
            .find(|(_, &marker)| marker >= high_watermark)
            .map(|(&first, _)| first);
        match (self.first_undecided_offset(), unreplicated) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Kafka's `onHighWatermarkUpdated`: forgets the completed transactions whose marker is below
    /// `high_watermark` (they are stable now).
    pub fn on_high_watermark(&mut self, high_watermark: i64) {
        self.unreplicated_txns
            .retain(|_, &mut marker| marker >= high_watermark);
    }

    /// Kafka's `lastStableOffset`: the first unstable offset, raised to `log_start_offset`
    /// (DeleteRecords may have removed the transaction's start), capped at `high_watermark`;
    /// the high watermark when no transaction is unstable. A read_committed fetch reads below it.
    pub fn last_stable_offset(&self, log_start_offset: i64, high_watermark: i64) -> i64 {
        self.first_unstable_offset(high_watermark)
            .map_or(high_watermark, |o| {
                o.max(log_start_offset).min(high_watermark)
            })
    }

    /// Every producer id with its state, ordered by producer id (DescribeProducers).
    pub fn active_producers(&self) -> impl Iterator<Item = (i64, &ProducerStateEntry)> {
        self.producers.iter().map(|(id, e)| (*id, e))
    }

    /// Rebuilds `ongoing_txns` from the entries (after loading a snapshot).
    fn rebuild_ongoing_txns(&mut self) {
        self.ongoing_txns = self
            .producers
            .iter()
            .filter_map(|(id, e)| e.current_txn_first_offset.map(|o| (o, *id)))
            .collect();
    }

    /// Records a data batch that now sits in the log at its final offsets (`batch.base_offset` is
    /// the assigned one). Also the replay step of recovery: feed every data batch header from the
    /// snapshot offset onward. Does not re-check the rules: replicated and replayed batches are
    /// trusted, as in Kafka. A transactional batch from a producer without an open transaction opens
    /// one at its base offset. Batches without a producer id and control batches (see
    /// [`Self::on_marker`]) are ignored.
    pub fn on_append(&mut self, batch: &BatchHeader, append_time_ms: i64) {
        if !batch.has_producer_id() || batch.is_control() {
            return;
        }
        let meta = BatchMetadata {
            first_seq: batch.base_sequence,
            last_seq: batch.last_sequence(),
            base_offset: batch.base_offset,
            last_offset: batch.last_offset(),
            max_timestamp: batch.max_timestamp,
        };
        let entry = self
            .producers
            .entry(batch.producer_id)
            .or_insert_with(ProducerStateEntry::empty);
        entry.push(batch.producer_epoch, meta, append_time_ms);
        if batch.is_transactional() && entry.current_txn_first_offset.is_none() {
            entry.current_txn_first_offset = Some(batch.base_offset);
            self.ongoing_txns
                .insert(batch.base_offset, batch.producer_id);
        }
    }

    /// Forgets every batch that ends at or after `offset` (the new log end offset).
    ///
    /// This is the in-memory approximation: cached batches past the cut are dropped, and a producer
    /// left with no cached batch is removed entirely, because the 5-batch window cannot tell what it
    /// wrote before. Such a producer then counts as unknown (any sequence accepted), so the
    /// approximation never invents an OUT_OF_ORDER_SEQUENCE, it can only miss a duplicate. The exact
    /// rebuild is Kafka's: `load_latest_snapshot(dir, offset)` and replay the log from that snapshot.
    /// Entries that never had a batch (loaded from a snapshot without one) are kept. Open
    /// transactions that started at or after `offset` are forgotten.
    pub fn truncate_to(&mut self, offset: i64) {
        for entry in self.producers.values_mut() {
            if entry.current_txn_first_offset.is_some_and(|o| o >= offset) {
                entry.current_txn_first_offset = None;
            }
        }
        self.producers.retain(|_, entry| {
            let had_batches = !entry.batches.is_empty();
            entry.batches.retain(|b| b.last_offset < offset);
            !had_batches || !entry.batches.is_empty() || entry.current_txn_first_offset.is_some()
        });
        self.rebuild_ongoing_txns();
        self.unreplicated_txns
            .retain(|&first, &mut marker| first < offset && marker < offset);
    }

    /// Drops producers idle for at least `producer_id_expiration_ms` (Kafka's
    /// `producer.id.expiration.ms`), unless they have an open transaction.
    pub fn remove_expired(&mut self, now_ms: i64, producer_id_expiration_ms: i64) {
        self.producers.retain(|_, entry| {
            entry.current_txn_first_offset.is_some()
                || now_ms.saturating_sub(entry.last_timestamp) < producer_id_expiration_ms
        });
    }

    /// Offset of the last batch cached for `producer_id`.
    pub fn last_offset_for(&self, producer_id: i64) -> Option<i64> {
        self.producers
            .get(&producer_id)
            .and_then(|e| e.batches.back())
            .map(|b| b.last_offset)
    }

    pub fn entry(&self, producer_id: i64) -> Option<&ProducerStateEntry> {
        self.producers.get(&producer_id)
    }

    pub fn producer_count(&self) -> usize {
        self.producers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }
}

#[cfg(test)]
mod txn_tests;
