//! Where a follower's log diverges from its leader's (Kafka's `AbstractFetcherThread`
//! `getOffsetTruncationState`, and the leader's diverging-epoch check in `Partition.fetchRecords`).
//!
//! A follower that becomes follower (or gets a diverging epoch in a Fetch v12+ answer) asks the
//! leader for the end of its own latest epoch ([`truncation_request`]), then truncates to
//! [`offset_truncation_state`] of the answer. When the leader's epoch is unknown to the follower the
//! truncation is intermediate: the follower truncates, then asks again with its now-latest epoch.
//! The caller truncates the log and the epoch cache (`truncate_from_end`) to the returned offset.
//! The leader side answers with [`answer_offset_for_leader_epoch`] (OffsetForLeaderEpoch) and
//! [`diverging_epoch`] (Fetch v12+).
//!
//! Pure functions over an epoch cache and offsets: no I/O, no clock.

use super::epoch_cache::{EpochEndOffset, LeaderEpochCache};
use super::{UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET};

#[cfg(test)]
mod tests;

/// How a follower starts its truncation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TruncationRequest {
    /// Ask the leader (OffsetForLeaderEpoch, or Fetch v12+ with `LastFetchedEpoch`) for the end of
    /// this epoch: the follower's latest.
    AskLeader { leader_epoch: i32 },
    /// No epochs known (a new or pre-epoch log): truncate to the high watermark.
    TruncateToHighWatermark(i64),
}

/// The follower's first step: ask the leader about its latest epoch, or fall back to the HW.
pub fn truncation_request(follower: &LeaderEpochCache, high_watermark: i64) -> TruncationRequest {
    match follower.latest_epoch() {
        Some(leader_epoch) => TruncationRequest::AskLeader { leader_epoch },
        None => TruncationRequest::TruncateToHighWatermark(high_watermark),
    }
}

/// Where to truncate (Kafka's `OffsetTruncationState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetTruncationState {
    /// Truncate the log (and epoch cache) to end here.
    pub offset: i64,
    /// `false`: after truncating, ask the leader again with the follower's new latest epoch.
    pub truncation_completed: bool,
}

/// The truncation point for the leader's answer `leader` about the epoch the follower asked for.
///
/// Kafka's cases: an undefined end offset -> the fetch offset (`fetch_offset`, the follower's HW
/// when it became follower); an undefined epoch with an end offset (pre-epoch leader) -> that end
/// offset; an epoch the follower knows -> the smaller of both ends of that epoch; an epoch the
/// follower does not know -> the end of the follower's largest epoch below it, not completed; an
/// epoch below every follower epoch -> the leader's end offset. Never above the follower's log end.
pub fn offset_truncation_state(
    follower: &LeaderEpochCache,
    follower_log_end_offset: i64,
    fetch_offset: i64,
    leader: EpochEndOffset,
) -> OffsetTruncationState {
    if leader.end_offset == UNDEFINED_EPOCH_OFFSET {
        return OffsetTruncationState {
            offset: fetch_offset,
            truncation_completed: true,
        };
    }
    if leader.leader_epoch == UNDEFINED_EPOCH {
        return OffsetTruncationState {
            offset: leader.end_offset.min(follower_log_end_offset),
            truncation_completed: true,
        };
    }
    let own = follower.end_offset_for(leader.leader_epoch, follower_log_end_offset);
    if own.end_offset == UNDEFINED_EPOCH_OFFSET {
        return OffsetTruncationState {
            offset: leader.end_offset.min(follower_log_end_offset),
            truncation_completed: true,
        };
    }
    if own.leader_epoch != leader.leader_epoch {
        OffsetTruncationState {
            offset: own.end_offset.min(follower_log_end_offset),
            truncation_completed: false,
        }
    } else {
        OffsetTruncationState {
            offset: own
                .end_offset
                .min(leader.end_offset)
                .min(follower_log_end_offset),
            truncation_completed: true,
        }
    }
}

/// A follower fetch the leader cannot place in its log: OFFSET_OUT_OF_RANGE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no epoch end offset for last fetched epoch {last_fetched_epoch} at fetch offset {fetch_offset}")]
pub struct FetchOffsetOutOfRange {
    pub fetch_offset: i64,
    pub last_fetched_epoch: i32,
}

/// The leader's check of a Fetch v12+ from a follower: where the follower's last fetched epoch
/// ends in the leader's log. `Some` is the `DivergingEpoch` to answer (with no records) when that
/// epoch is unknown to the leader or ended before `fetch_offset`; `None` means the fetch continues
/// the leader's log.
pub fn diverging_epoch(
    leader: &LeaderEpochCache,
    leader_log_end_offset: i64,
    fetch_offset: i64,
    last_fetched_epoch: i32,
) -> Result<Option<EpochEndOffset>, FetchOffsetOutOfRange> {
    let end = leader.end_offset_for(last_fetched_epoch, leader_log_end_offset);
    if end.end_offset == UNDEFINED_EPOCH_OFFSET || end.leader_epoch == UNDEFINED_EPOCH {
        return Err(FetchOffsetOutOfRange {
            fetch_offset,
            last_fetched_epoch,
        });
    }
    if end.leader_epoch < last_fetched_epoch || end.end_offset < fetch_offset {
        Ok(Some(end))
    } else {
        Ok(None)
    }
}

/// A request's `CurrentLeaderEpoch` that is not the partition's (Kafka's `getLocalLog` check).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LeaderEpochMismatch {
    /// Older than the partition's: FENCED_LEADER_EPOCH.
    #[error("leader epoch {requested} is older than the current {current}")]
    Fenced { requested: i32, current: i32 },
    /// Newer than this broker knows: UNKNOWN_LEADER_EPOCH.
    #[error("leader epoch {requested} is newer than the current {current}")]
    Unknown { requested: i32, current: i32 },
}

/// Checks a request's `CurrentLeaderEpoch` (`None` or -1: not given, always accepted).
pub fn check_current_leader_epoch(
    requested: Option<i32>,
    current: i32,
) -> Result<(), LeaderEpochMismatch> {
    match requested.filter(|&e| e >= 0) {
        Some(requested) if requested < current => {
            Err(LeaderEpochMismatch::Fenced { requested, current })
        }
        Some(requested) if requested > current => {
            Err(LeaderEpochMismatch::Unknown { requested, current })
        }
        _ => Ok(()),
    }
}

/// The OffsetForLeaderEpoch answer for one partition (Kafka's `Partition.lastOffsetForLeaderEpoch`):
/// the request's current leader epoch checked against `partition_leader_epoch`, then the epoch
/// cache's end offset for `requested_epoch` on a log ending at `log_end_offset`.
pub fn answer_offset_for_leader_epoch(
    cache: &LeaderEpochCache,
    log_end_offset: i64,
    current_leader_epoch: Option<i32>,
    partition_leader_epoch: i32,
    requested_epoch: i32,
) -> Result<EpochEndOffset, LeaderEpochMismatch> {
    check_current_leader_epoch(current_leader_epoch, partition_leader_epoch)?;
    Ok(cache.end_offset_for(requested_epoch, log_end_offset))
}
