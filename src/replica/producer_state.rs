//! Idempotent-producer state of one partition: which producer ids wrote here, at which epoch, and the
//! sequence/offset metadata of their last few batches.
//!
//! The produce path asks [`ProducerStateManager::check`] before appending a batch (fresh append,
//! duplicate of a recent batch, or a Kafka error) and reports the batch with
//! [`ProducerStateManager::on_append`] once it sits at its final offsets. Recovery replays the log's batch
//! headers through `on_append`, starting from the offset of the latest snapshot (see `snapshot`).
//!
//! Invariants:
//! - The logic performs no I/O and reads no clock: time arrives as arguments. Only the snapshot
//!   functions touch the file system, and they take the directory explicitly.
//! - Per producer id we keep at most [`NUM_BATCHES_TO_RETAIN`] batches, all of the entry's current epoch
//!   (a new epoch clears them), ordered oldest first.
//!
//! The rules are Kafka 4.x's (`ProducerAppendInfo`, `ProducerStateEntry`, `UnifiedLog`'s duplicate
//! lookup in `storage/.../internals/log`); where we deliberately differ, the item's doc says so.

use std::collections::{BTreeMap, VecDeque};

use crate::record::{BatchHeader, NO_SEQUENCE};

mod snapshot;
pub use snapshot::{remove_snapshots_below, snapshot_path, CorruptSnapshot, LoadedSnapshot};
#[cfg(test)]
mod tests;

/// How many recent batches per producer are remembered for duplicate detection. Kafka's clients cap
/// `max.in.flight.requests.per.connection` at this value when idempotence is on.
pub const NUM_BATCHES_TO_RETAIN: usize = 5;

/// Epoch of a producer that has no known state (Kafka's `RecordBatch.NO_PRODUCER_EPOCH`).
pub const NO_PRODUCER_EPOCH: i16 = -1;

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
}

impl ProducerError {
    /// The Kafka error code to put in the partition's produce response.
    pub fn code(&self) -> i16 {
        match self {
            ProducerError::InvalidProducerEpoch { .. } => 47,
            ProducerError::OutOfOrderSequence { .. } => 45,
            ProducerError::MissingSequence { .. } => 87,
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
    /// Epoch of the last transaction coordinator that wrote a marker (-1: none). Kept for the
    /// transactions work and persisted in snapshots; not interpreted yet.
    coordinator_epoch: i32,
    /// First offset of this producer's open transaction. Always `None` until transactions land;
    /// an entry with an open transaction never expires.
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

    fn push(&mut self, epoch: i16, batch: BatchMetadata, timestamp: i64) {
        if epoch != self.producer_epoch {
            self.batches.clear();
            self.producer_epoch = epoch;
        }
        if self.batches.len() == NUM_BATCHES_TO_RETAIN {
            self.batches.pop_front();
        }
        self.batches.push_back(batch);
        self.last_timestamp = timestamp;
    }
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
}

impl ProducerStateManager {
    pub fn new() -> Self {
        Self::default()
    }

    /// Decides what to do with a validated batch before it is appended. Pure: changes nothing.
    ///
    /// Batches without a producer id, and control batches, always get `Append`. For the rest, in
    /// Kafka's order: an exact (epoch, first seq, last seq) match with a cached batch is a
    /// `Duplicate`; an older epoch is `InvalidProducerEpoch`; a newer epoch must start at sequence 0;
    /// the same epoch must continue at last sequence + 1. A producer id we hold no state for (new, or
    /// expired, or truncated away) is accepted at any sequence, as Kafka does since KIP-360 instead of
    /// answering UNKNOWN_PRODUCER_ID.
    pub fn check(&self, batch: &BatchHeader) -> Result<ProducerCheck, ProducerError> {
        if !batch.has_producer_id() || batch.is_control() {
            return Ok(ProducerCheck::Append);
        }
        let producer_id = batch.producer_id;
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
        Ok(ProducerCheck::Append)
    }

    /// Records a batch that now sits in the log at its final offsets (`batch.base_offset` is the
    /// assigned one). Also the replay step of recovery: feed every batch header from the snapshot
    /// offset onward. Does not re-check the rules: replicated and replayed batches are trusted, as in
    /// Kafka. Batches without a producer id and control batches are ignored (transaction markers are
    /// a later issue).
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
        self.producers
            .entry(batch.producer_id)
            .or_insert_with(ProducerStateEntry::empty)
            .push(batch.producer_epoch, meta, append_time_ms);
    }

    /// Forgets every batch that ends at or after `offset` (the new log end offset).
    ///
    /// This is the in-memory approximation: cached batches past the cut are dropped, and a producer
    /// left with no cached batch is removed entirely, because the 5-batch window cannot tell what it
    /// wrote before. Such a producer then counts as unknown (any sequence accepted), so the
    /// approximation never invents an OUT_OF_ORDER_SEQUENCE, it can only miss a duplicate. The exact
    /// rebuild is Kafka's: `load_latest_snapshot(dir, offset)` and replay the log from that snapshot.
    /// Entries that never had a batch (loaded from a snapshot without one) are kept.
    pub fn truncate_to(&mut self, offset: i64) {
        self.producers.retain(|_, entry| {
            if entry.batches.is_empty() {
                return true;
            }
            entry.batches.retain(|b| b.last_offset < offset);
            !entry.batches.is_empty()
        });
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
