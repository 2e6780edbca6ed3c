//! The leader epoch cache of one partition replica (Kafka's `LeaderEpochFileCache`): for each
//! leader epoch that wrote to this log, the offset of its first record.
//!
//! Followers use it to find where their log diverges from a new leader's (OffsetForLeaderEpoch, or
//! the diverging epoch of Fetch v12+); leaders answer those questions from it.
//!
//! Invariants (kept by every method): entries are strictly increasing in both epoch and start
//! offset; epochs and start offsets are never negative. The cache performs no I/O: methods that
//! change it return whether they did, and the caller persists `entries()` with
//! `epoch_checkpoint` (Kafka writes synchronously after `assign`, in the background after a
//! truncation). Plain data, owned by the partition that holds it; not internally synchronised.

use std::collections::BTreeMap;

use super::{UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET};

#[cfg(test)]
mod tests;

/// One cache entry: `epoch` began at `start_offset` (Kafka's `EpochEntry`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

/// An OffsetForLeaderEpoch answer (Kafka's `EpochEndOffset`, also the `DivergingEpoch` of a Fetch
/// response): the largest epoch <= the requested one, and the offset where it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEndOffset {
    pub leader_epoch: i32,
    pub end_offset: i64,
}

impl EpochEndOffset {
    /// `(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)`: nothing known for the requested epoch.
    pub const UNDEFINED: EpochEndOffset = EpochEndOffset {
        leader_epoch: UNDEFINED_EPOCH,
        end_offset: UNDEFINED_EPOCH_OFFSET,
    };
}

/// An entry Kafka refuses (`IllegalArgumentException` in `assign`): negative epoch or offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("invalid leader epoch entry: epoch {epoch}, start offset {start_offset}")]
pub struct InvalidEpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

/// The epoch -> start offset map of one replica. See the module doc for its invariants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaderEpochCache {
    /// epoch -> start offset, strictly increasing in both.
    epochs: BTreeMap<i32, i64>,
}

impl LeaderEpochCache {
    /// An empty cache.
    pub fn new() -> LeaderEpochCache {
        LeaderEpochCache::default()
    }

    /// A cache built by assigning `entries` in order, as Kafka builds one from its checkpoint
    /// file: an entry that breaks monotonicity removes the later conflicting ones before it.
    pub fn from_entries(
        entries: impl IntoIterator<Item = EpochEntry>,
    ) -> Result<LeaderEpochCache, InvalidEpochEntry> {
        let mut cache = LeaderEpochCache::new();
        for e in entries {
            cache.assign(e.epoch, e.start_offset)?;
        }
        Ok(cache)
    }

    /// The entries, oldest first (what the checkpoint file holds).
    pub fn entries(&self) -> Vec<EpochEntry> {
        self.epochs
            .iter()
            .map(|(&epoch, &start_offset)| EpochEntry {
                epoch,
                start_offset,
            })
            .collect()
    }

    /// Whether the cache holds no entry.
    pub fn is_empty(&self) -> bool {
        self.epochs.is_empty()
    }

    /// Records that `epoch` starts at `start_offset`. Returns whether the cache changed (the
    /// caller then writes the checkpoint).
    ///
    /// As Kafka: nothing changes when `epoch` is the latest epoch and `start_offset` is not below
    /// its start (a later batch of the same epoch). Otherwise every entry at the end whose epoch is
    /// `>= epoch` or whose start offset is `>= start_offset` is removed first, then the entry is
    /// added: so a smaller epoch or a smaller offset replaces the entries it contradicts.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> Result<bool, InvalidEpochEntry> {
        if epoch < 0 || start_offset < 0 {
            return Err(InvalidEpochEntry {
                epoch,
                start_offset,
            });
        }
        if let Some(latest) = self.latest_entry() {
            if latest.epoch == epoch && start_offset >= latest.start_offset {
                return Ok(false);
            }
        }
        while let Some((&e, &o)) = self.epochs.last_key_value() {
            if e >= epoch || o >= start_offset {
                self.epochs.remove(&e);
            } else {
                break;
            }
        }
        self.epochs.insert(epoch, start_offset);
        Ok(true)
    }

    /// The newest entry.
    pub fn latest_entry(&self) -> Option<EpochEntry> {
        self.epochs
            .last_key_value()
            .map(|(&epoch, &start_offset)| EpochEntry {
                epoch,
                start_offset,
            })
    }

    /// The oldest entry.
    pub fn earliest_entry(&self) -> Option<EpochEntry> {
        self.epochs
            .first_key_value()
            .map(|(&epoch, &start_offset)| EpochEntry {
                epoch,
                start_offset,
            })
    }

    /// The newest epoch that has records in this log (the follower's `lastFetchedEpoch`).
    pub fn latest_epoch(&self) -> Option<i32> {
        self.epochs.last_key_value().map(|(&e, _)| e)
    }

    /// The largest cached epoch below `epoch`.
    pub fn previous_epoch(&self, epoch: i32) -> Option<i32> {
        self.epochs.range(..epoch).next_back().map(|(&e, _)| e)
    }

    /// The smallest cached epoch above `epoch`.
    pub fn next_epoch(&self, epoch: i32) -> Option<i32> {
        self.epochs
            .range(epoch.saturating_add(1)..)
            .next()
            .map(|(&e, _)| e)
            .filter(|&e| e > epoch)
    }

    /// OffsetForLeaderEpoch for `requested_epoch` on a log ending at `log_end_offset`, with
    /// Kafka's cases:
    /// - `UNDEFINED_EPOCH` requested, or an epoch above every cached one: `UNDEFINED`;
    /// - the latest epoch: `(latest, log_end_offset)`;
    /// - an epoch below every cached one: `(requested, start of the first epoch)` (that data is
    ///   gone; the follower replicates from the leader's start);
    /// - otherwise: the largest cached epoch `<= requested`, ending where the next cached epoch
    ///   starts.
    pub fn end_offset_for(&self, requested_epoch: i32, log_end_offset: i64) -> EpochEndOffset {
        if requested_epoch == UNDEFINED_EPOCH {
            return EpochEndOffset::UNDEFINED;
        }
        if self.latest_epoch() == Some(requested_epoch) {
            return EpochEndOffset {
                leader_epoch: requested_epoch,
                end_offset: log_end_offset,
            };
        }
        let higher = self
            .epochs
            .range((
                std::ops::Bound::Excluded(requested_epoch),
                std::ops::Bound::Unbounded,
            ))
            .next();
        let Some((_, &higher_start)) = higher else {
            return EpochEndOffset::UNDEFINED;
        };
        match self.epochs.range(..=requested_epoch).next_back() {
            None => EpochEndOffset {
                leader_epoch: requested_epoch,
                end_offset: higher_start,
            },
            Some((&floor_epoch, _)) => EpochEndOffset {
                leader_epoch: floor_epoch,
                end_offset: higher_start,
            },
        }
    }

    /// Removes every entry starting at or after `end_offset` (the log was truncated to end
    /// there). A negative `end_offset` changes nothing, as in Kafka. Returns whether anything was
    /// removed.
    pub fn truncate_from_end(&mut self, end_offset: i64) -> bool {
        if end_offset < 0 {
            return false;
        }
        let mut removed = false;
        while let Some((&e, &o)) = self.epochs.last_key_value() {
            if o >= end_offset {
                self.epochs.remove(&e);
                removed = true;
            } else {
                break;
            }
        }
        removed
    }

    /// Drops the entries wholly before `start_offset` (the log start moved there): every entry
    /// starting at or before it is removed and the newest of them comes back starting at
    /// `start_offset` (so `truncate_from_start(6)` keeps an epoch covering offset 6). Returns
    /// whether anything changed.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> bool {
        let mut last_removed = None;
        while let Some((&e, &o)) = self.epochs.first_key_value() {
            if o <= start_offset {
                self.epochs.remove(&e);
                last_removed = Some(e);
            } else {
                break;
            }
        }
        match last_removed {
            Some(epoch) => {
                self.epochs.insert(epoch, start_offset);
                true
            }
            None => false,
        }
    }

    /// The epoch of the record at `offset`: the epoch starting exactly there, else the newest one
    /// starting before it; `None` when `offset` is before every entry.
    pub fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        let mut previous = None;
        for (&epoch, &start) in &self.epochs {
            if start == offset {
                return Some(epoch);
            }
            if start > offset {
                return previous;
            }
            previous = Some(epoch);
        }
        previous
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.epochs.clear();
    }
}
