//! The classic group coordinator: JoinGroup/SyncGroup/Heartbeat/LeaveGroup, committed offsets,
//! transactional offsets (TxnOffsetCommit, pending until the transaction's marker) and the admin
//! views (describe, list, delete), with state kept in `__consumer_offsets`. KIP-848 consumer
//! groups live beside the classic ones (`consumer*.rs`); `migration.rs` converts a group between
//! the two kinds online, under `group.consumer.migration.policy`.
//!
//! Two halves:
//! - a pure state machine ([`Coordinator`], one [`classic::ClassicGroup`] per group): every input
//!   carries `now` (ms since the epoch) and returns responses plus [`Effects`] (answers for parked
//!   requests, records to persist). No I/O, no clock, no tokio; tested with simulated time.
//! - a thin async [`driver`]: one task owns the coordinator, receives requests over an mpsc
//!   channel (answers go back on oneshots), appends the records to `__consumer_offsets`, and
//!   sleeps until the earliest group deadline (session, rebalance, sync) — never polls.

pub mod admin;
pub mod assignor;
pub mod classic;
pub mod consumer;
pub mod consumer_heartbeat;
pub mod consumer_protocol;
pub mod coordinator;
pub mod driver;
pub mod expiry;
pub mod migration;
pub mod offsets;
pub mod pending;
pub mod records;
pub mod shard;
pub mod share;
pub mod share_offsets;
pub mod share_records;
pub mod txn_offsets;

#[cfg(test)]
mod consumer_tests;
#[cfg(test)]
mod expiry_tests;
#[cfg(test)]
mod migration_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod txn_tests;

use kafka_protocol::messages::{JoinGroupResponse, SyncGroupResponse};

pub use classic::{ClassicGroup, GroupState};
pub use coordinator::Coordinator;
pub use driver::GroupHandle;
pub use records::{CoordinatorRecord, OFFSETS_TOPIC};

/// A parked JoinGroup or SyncGroup, named by the driver; its answer comes back in [`Effects`].
pub type Waiter = u64;

/// What a coordinator step asks the driver to do.
#[derive(Debug, Default)]
pub struct Effects {
    /// Answers for parked JoinGroup requests.
    pub joins: Vec<(Waiter, JoinGroupResponse)>,
    /// Answers for parked SyncGroup requests.
    pub syncs: Vec<(Waiter, SyncGroupResponse)>,
    /// Records to append to `__consumer_offsets` (before the answers are sent).
    pub records: Vec<CoordinatorRecord>,
    /// The committed-offset changes those records carry, applied by
    /// [`Coordinator::apply_written`] only once the records are written (Kafka applies a record
    /// when its write commits): a failed write leaves the offsets as they were.
    pub offsets: Vec<offsets::OffsetChange>,
    /// Share-group members that left or timed out (group, member): the driver closes their
    /// share sessions (`share::registry::ShareRegistry::close_member`).
    pub share_members_gone: Vec<(String, String)>,
    /// Share groups deleted: the driver drops their share-partitions.
    pub share_groups_deleted: Vec<String>,
}

/// The broker settings the coordinator obeys.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    pub initial_rebalance_delay_ms: i64,
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub max_size: usize,
    pub offset_metadata_max_bytes: usize,
    /// `offsets.commit.timeout.ms`: how long an answer waits for its records to be committed.
    pub offsets_commit_timeout_ms: i64,
    /// KIP-848 groups: `group.consumer.session.timeout.ms`.
    pub consumer_session_timeout_ms: i32,
    /// KIP-848 groups: `group.consumer.heartbeat.interval.ms`.
    pub consumer_heartbeat_interval_ms: i32,
    /// `offsets.retention.minutes` in ms: committed offsets expire after this (see `expiry`).
    pub offsets_retention_ms: i64,
    /// `offsets.retention.check.interval.ms`: how often expiration runs.
    pub offsets_retention_check_interval_ms: i64,
    /// `group.consumer.migration.policy`: online classic <-> consumer group conversions.
    pub migration_policy: migration::MigrationPolicy,
}

impl GroupConfig {
    pub fn from_config(c: &crate::config::Config) -> GroupConfig {
        GroupConfig {
            initial_rebalance_delay_ms: c.group_initial_rebalance_delay_ms,
            min_session_timeout_ms: c.group_min_session_timeout_ms,
            max_session_timeout_ms: c.group_max_session_timeout_ms,
            max_size: c.group_max_size.max(1) as usize,
            offset_metadata_max_bytes: c.offset_metadata_max_bytes.max(0) as usize,
            offsets_commit_timeout_ms: c.offsets_commit_timeout_ms,
            consumer_session_timeout_ms: c.group_consumer_session_timeout_ms,
            consumer_heartbeat_interval_ms: c.group_consumer_heartbeat_interval_ms,
            offsets_retention_ms: c.offsets_retention_minutes as i64 * 60_000,
            offsets_retention_check_interval_ms: c.offsets_retention_check_interval_ms,
            migration_policy: c.group_consumer_migration_policy,
        }
    }
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig::from_config(&crate::config::Config::default())
    }
}

/// Group error codes by Kafka's names.
pub mod codes {
    pub const NONE: i16 = 0;
    pub const OFFSET_METADATA_TOO_LARGE: i16 = 12;
    pub const UNKNOWN_SERVER_ERROR: i16 = -1;
    pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    pub const NOT_COORDINATOR: i16 = 16;
    pub const ILLEGAL_GENERATION: i16 = 22;
    pub const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
    pub const INVALID_GROUP_ID: i16 = 24;
    pub const UNKNOWN_MEMBER_ID: i16 = 25;
    pub const INVALID_SESSION_TIMEOUT: i16 = 26;
    pub const REBALANCE_IN_PROGRESS: i16 = 27;
    pub const INVALID_COMMIT_OFFSET_SIZE: i16 = 28;
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    pub const NON_EMPTY_GROUP: i16 = 68;
    pub const GROUP_ID_NOT_FOUND: i16 = 69;
    pub const GROUP_MAX_SIZE_REACHED: i16 = 81;
    pub const MEMBER_ID_REQUIRED: i16 = 79;
    pub const FENCED_INSTANCE_ID: i16 = 82;
    pub const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;
    pub const UNSUPPORTED_VERSION: i16 = 35;
    pub const INVALID_REQUEST: i16 = 42;
    pub const FENCED_MEMBER_EPOCH: i16 = 110;
    pub const UNRELEASED_INSTANCE_ID: i16 = 111;
    pub const UNSUPPORTED_ASSIGNOR: i16 = 112;
    pub const STALE_MEMBER_EPOCH: i16 = 113;
    pub const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
    pub const UNSTABLE_OFFSET_COMMIT: i16 = 88;
    pub const INVALID_REGULAR_EXPRESSION: i16 = 128;
}
