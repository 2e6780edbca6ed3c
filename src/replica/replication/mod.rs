//! Replication in Kafka's ISR model, as pure decision logic (issue 17, first slice): nothing here is
//! wired into the fetch or produce paths yet.
//!
//! - [`epoch_cache`]: the leader epoch cache (`LeaderEpochFileCache`): which leader epoch began at
//!   which offset, OffsetForLeaderEpoch answers, truncation of the cache with the log.
//! - [`epoch_checkpoint`]: Kafka's `leader-epoch-checkpoint` file (the only module that does I/O).
//! - [`leader`]: the leader's view of one partition (`PartitionLeader`): each follower's log end
//!   offset and last caught-up time, the ISR with its in-flight AlterPartition change, the high
//!   watermark.
//! - [`initial_hw`]: the high watermark a replica opens with (its `replication-offset-checkpoint`
//!   entry bounded to the log).
//! - [`acks`]: acks=all decisions: may a produce append (NOT_ENOUGH_REPLICAS), and when a waiting
//!   (delayed) produce completes, fails or times out.
//! - [`truncation`]: the follower's truncation point from the leader's epoch answer, and the
//!   leader's OffsetForLeaderEpoch answer and diverging-epoch check on a follower fetch.
//!
//! Invariants: no module but `epoch_checkpoint` performs I/O; none reads a clock (time arrives as
//! `now_ms` arguments) or spawns anything. Outputs are values (`Effect`s, outcomes) that a driver
//! performs: persisting the epoch cache, sending AlterPartition, waking waiters at a new high
//! watermark. Every type is plain data owned by its caller (no interior locking).
//!
//! The rules are Kafka 4.1's (`LeaderEpochFileCache`, `Partition`, `Replica`, `DelayedProduce`,
//! `AbstractFetcherThread`); where we deliberately differ, the item's doc says so.

pub mod acks;
pub mod epoch_cache;
pub mod epoch_checkpoint;
pub mod initial_hw;
pub mod leader;
pub mod truncation;

#[cfg(test)]
mod scenario_tests;

pub use epoch_cache::{EpochEndOffset, EpochEntry, LeaderEpochCache};
pub use leader::PartitionLeader;

/// A broker id (Kafka's `int32` replica id).
pub type BrokerId = i32;

/// Kafka's `UNDEFINED_EPOCH` (OffsetsForLeaderEpochResponse): no leader epoch known.
pub const UNDEFINED_EPOCH: i32 = -1;
/// Kafka's `UNDEFINED_EPOCH_OFFSET`: no end offset known for the requested epoch.
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;
/// Kafka's `UnifiedLog.UnknownOffset`: a follower offset the leader has not heard yet.
pub const UNKNOWN_OFFSET: i64 = -1;
