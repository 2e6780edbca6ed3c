//! Share groups (KIP-932, "queues for Kafka"): the pure core.
//!
//! Role: the decision logic of share groups as pure state machines, ready to be driven by
//! the ShareGroupHeartbeat / ShareFetch / ShareAcknowledge handlers (not wired yet):
//!
//! - `partition` — `SharePartition`, the per-(group, topic-partition) state on the partition
//!   leader: share-partition start offset (SPSO), in-flight records with their state
//!   (Available, Acquired, Acknowledged, Archived), delivery counts and acquisition locks.
//! - `persist` — the share state as Kafka persists it (`ShareSnapshot` / `ShareUpdate` record
//!   contents of `__share_group_state`) and how an update folds into a snapshot.
//! - `reset` — `share.auto.offset.reset` (latest / earliest / by_duration) for the initial SPSO.
//! - `read_committed` — `share.isolation.level=read_committed`: which fetched batches are data
//!   of aborted transactions (archived, never acquired).
//! - `coordinator` — the share coordinator's per-key state (`ShareCoordinator`: the folded
//!   snapshot of each share-partition, ShareSnapshot every N ShareUpdates, state/leader epoch
//!   fencing); `state_records` encodes its `__share_group_state` records.
//! - `group` — `ShareGroup`, the share-group coordinator state: ShareGroupHeartbeat membership,
//!   epochs, session timeouts, ShareGroupDescribe data; `assignor` is Kafka's `simple` assignor.
//!
//! Invariants: no I/O, no clock (time arrives as `now_ms`), no tokio; every failure a client can
//! cause is a value carrying Kafka's error code, never a panic.

pub mod assignor;
pub mod coordinator;
pub mod group;
mod in_flight;
pub mod partition;
pub mod persist;
pub mod read_committed;
pub mod registry;
pub mod reset;
pub mod session;
pub mod state_records;

#[cfg(test)]
mod group_tests;
#[cfg(test)]
mod partition_props;
#[cfg(test)]
mod partition_tests;
#[cfg(test)]
mod partition_v2_tests;

/// Share-group error codes by Kafka's names (the ones the core answers).
pub mod codes {
    pub const NONE: i16 = 0;
    pub const UNKNOWN_MEMBER_ID: i16 = 25;
    pub const INVALID_REQUEST: i16 = 42;
    pub const GROUP_MAX_SIZE_REACHED: i16 = 81;
    pub const FENCED_MEMBER_EPOCH: i16 = 110;
    pub const INVALID_RECORD_STATE: i16 = 121;
}
