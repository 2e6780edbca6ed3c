//! The broker configuration: one validated [`Config`] built from layers, each overriding the one
//! before: defaults, then a file (`server.properties` or `sluice.toml`), then the environment
//! (`KAFKA_*` as the Kafka images read it), then command-line flags.
//!
//! Keys are Kafka's `server.properties` names. Every key of Kafka 4.1's broker table is accepted:
//! the ones Sluice implements change [`Config`]; the others are listed in [`Config::ignored`] (the
//! binary warns once per key) after their value passed Kafka's own type and range check. A key
//! Kafka does not know stops startup naming the closest known key. Every bad key of one start is
//! reported in one [`ConfigError`]. Sluice's own keys (`listen`, `advertise`, `data.dir`,
//! `ephemeral`, `sluice.*`) sit beside Kafka's.
//!
//! Submodules: [`properties`] (Java properties syntax), [`toml_file`], [`env`] (the images'
//! variable mapping), [`known_keys`] (Kafka's table), [`listeners`] (listener keys), [`value`]
//! (Kafka's value parsing and messages), `load` (the layering). A key's parse lives in
//! [`Config::apply_entry`]: one match arm per implemented key.
//!
//! This module performs no network I/O; it reads at most one file and resolves listener host
//! names.

pub mod env;
mod group_bounds;
pub mod known_keys;
pub mod listeners;
mod load;
pub mod properties;
pub mod quorum;
pub mod toml_file;
pub mod value;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

pub use listeners::Listener;
pub use load::{ConfigFormat, Sources};
pub use value::{format_double, Value};

/// Where Sluice listens when no listener is configured at all: Kafka's port on loopback only (an
/// unauthenticated broker is not put on every interface unasked; the image binds all interfaces,
/// as the apache/kafka image does).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9092";
/// What that default listener advertises: `localhost:9092`, as the apache/kafka image does.
pub const DEFAULT_ADVERTISED_HOST: &str = "localhost";

/// How a topic's record timestamps are set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

impl TimestampType {
    pub fn parse(s: &str) -> Option<TimestampType> {
        match s {
            "CreateTime" => Some(TimestampType::CreateTime),
            "LogAppendTime" => Some(TimestampType::LogAppendTime),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            TimestampType::CreateTime => "CreateTime",
            TimestampType::LogAppendTime => "LogAppendTime",
        }
    }
}

/// Validated broker configuration. Immutable once built; shared read-only by every task.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address the primary listener binds (the inter-broker one, else the first client one).
    pub listen: SocketAddr,
    /// Host and port the primary listener advertises in Metadata responses.
    pub advertise: (String, u16),
    /// Every listener to bind, each with its advertised endpoint (`listeners`,
    /// `advertised.listeners`, ...). Empty: one PLAINTEXT listener on `listen` advertising
    /// `advertise` (what in-process tests build by hand).
    pub listeners: Vec<Listener>,
    /// `CLUSTER_ID` from the environment: the cluster id a new data directory is formatted with
    /// (an existing one must match). None: a random one.
    pub cluster_id: Option<String>,
    /// Known Kafka keys that were given but that Sluice does not implement (warned once each).
    pub ignored: Vec<String>,
    /// `KAFKA_*` variables that map to no Kafka key and are close to none (another tool's
    /// variables, e.g. `KAFKA_LIBS`): ignored, warned once each.
    pub unrelated_env: Vec<String>,
    /// `default.replication.factor`: replicas of topics created with replication factor -1.
    pub default_replication_factor: i32,
    /// `offsets.topic.replication.factor` / `transaction.state.log.replication.factor`. Kafka's
    /// default is 3; unset, Sluice's is `min(3, quorum size)` (1 on a lone node; see
    /// `default_internal_replication`). Above the live broker count the internal topic cannot be
    /// created, as in Kafka.
    pub offsets_topic_replication_factor: i16,
    pub transaction_state_log_replication_factor: i16,
    /// `transaction.state.log.min.isr` (2): `__transaction_state`'s `min.insync.replicas`. Its
    /// coordinator writes as acks=all, so with fewer in-sync replicas than `min(this, RF)` a
    /// transaction step answers COORDINATOR_NOT_AVAILABLE (Kafka 4.x's effective minimum).
    pub transaction_state_log_min_isr: i32,
    /// `share.coordinator.state.topic.min.isr` (2): `__share_group_state`'s `min.insync.replicas`.
    pub share_coordinator_state_topic_min_isr: i32,
    /// `share.coordinator.write.timeout.ms` (5000): how long an acknowledgement's answer waits for
    /// its share state records to be committed.
    pub share_coordinator_write_timeout_ms: i64,
    /// Root of the log directory.
    pub data_dir: PathBuf,
    /// Remove `data_dir` on exit (a throwaway broker for test stacks).
    pub ephemeral: bool,
    /// Not a config key: the broker epoch of the previous clean shutdown (`-1`: unclean or first
    /// start), taken from the data directory's clean shutdown file at startup
    /// (`cluster::clean_shutdown`) and sent as BrokerRegistration's `PreviousBrokerEpoch`.
    pub previous_broker_epoch: i64,
    /// `node.id`
    pub node_id: i32,
    /// `socket.request.max.bytes`: frames above this close the connection.
    pub max_request_bytes: usize,
    /// `auto.create.topics.enable`
    pub auto_create_topics: bool,
    /// `num.partitions`: partitions of auto-created topics and of CreateTopics with -1.
    pub num_partitions: i32,
    /// `log.segment.bytes`
    pub segment_bytes: u64,
    /// `log.roll.ms` (or `log.roll.hours`)
    pub segment_ms: i64,
    /// `log.index.interval.bytes`
    pub index_interval_bytes: u32,
    /// `log.index.size.max.bytes`
    pub segment_index_bytes: u32,
    /// `message.max.bytes`: the largest record batch a produce may append.
    pub message_max_bytes: i32,
    /// `log.message.timestamp.type`
    pub message_timestamp_type: TimestampType,
    // validator
    /// `log.message.timestamp.before.max.ms` / `log.message.timestamp.after.max.ms` (KIP-937):
    /// how far before / after the broker's clock a CreateTime record's timestamp may be.
    pub message_timestamp_before_max_ms: i64,
    pub message_timestamp_after_max_ms: i64,
    // validator end
    /// `producer.id.expiration.ms`
    pub producer_id_expiration_ms: i64,
    /// `log.flush.interval.messages`: when 1, produce waits for fsync before acknowledging.
    pub flush_every_message: bool,
    // lock: Kafka's flush policy (see `replica::flush_policy`).
    /// `log.flush.interval.messages`: fsync a partition once this many messages are unflushed
    /// (Long.MAX: never; 1: every append, and acknowledgements wait for it).
    pub flush_interval_messages: i64,
    /// `log.flush.interval.ms`: fsync a partition whose last flush is older than this; `None`
    /// (Kafka's null default) means `log.flush.scheduler.interval.ms`.
    pub flush_interval_ms: Option<i64>,
    /// `log.flush.scheduler.interval.ms`: how often partitions are checked for `flush.ms`
    /// (Long.MAX: never).
    pub flush_scheduler_interval_ms: i64,
    // end lock
    /// `group.initial.rebalance.delay.ms`: how long a new (Empty) classic group waits for more
    /// members before its first rebalance completes. Kafka's default is 3000; `--ephemeral` uses 0.
    pub group_initial_rebalance_delay_ms: i64,
    /// `group.min.session.timeout.ms` / `group.max.session.timeout.ms`: JoinGroup session timeouts
    /// outside this range get INVALID_SESSION_TIMEOUT.
    pub group_min_session_timeout_ms: i32,
    pub group_max_session_timeout_ms: i32,
    /// `group.max.size`: members per classic group.
    pub group_max_size: i32,
    /// `group.consumer.session.timeout.ms`: a KIP-848 member silent this long is removed.
    pub group_consumer_session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms`: how often KIP-848 members are told to heartbeat.
    pub group_consumer_heartbeat_interval_ms: i32,
    /// `group.consumer.migration.policy` (string, default `bidirectional`): which online
    /// conversions between classic and consumer groups are allowed.
    pub group_consumer_migration_policy: crate::group::migration::MigrationPolicy,
    /// `offsets.topic.num.partitions`: partitions of `__consumer_offsets` when it is created.
    pub offsets_topic_num_partitions: i32,
    /// `offset.metadata.max.bytes`: longest OffsetCommit metadata string.
    pub offset_metadata_max_bytes: i32,
    /// `offsets.commit.timeout.ms`: how long a group coordinator's write waits to be committed
    /// (replicated to the ISR of its `__consumer_offsets` partition) before it answers
    /// COORDINATOR_NOT_AVAILABLE.
    pub offsets_commit_timeout_ms: i64,
    /// `offsets.retention.minutes`: committed offsets of an empty group (or of topics nobody
    /// subscribes to) expire after this long.
    pub offsets_retention_minutes: i32,
    /// `offsets.retention.check.interval.ms`: how often expired offsets are removed.
    pub offsets_retention_check_interval_ms: i64,
    /// `transaction.state.log.num.partitions`: partitions of `__transaction_state` when created.
    pub transaction_state_log_num_partitions: i32,
    /// `transaction.state.log.segment.bytes`: segment size of `__transaction_state`.
    pub transaction_state_log_segment_bytes: i32,
    /// `transaction.max.timeout.ms`: longer InitProducerId timeouts get INVALID_TRANSACTION_TIMEOUT.
    pub transaction_max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`: an idle transactional id (no transaction) is forgotten
    /// after this long.
    pub transactional_id_expiration_ms: i32,
    /// `transaction.partition.verification.enable`: transactional Produce batches and TxnOffsetCommit
    /// are checked against the transaction coordinator (the partition must be in the producer's open
    /// transaction). Off only for tests that drive markers by hand, as with Kafka.
    pub transaction_partition_verification_enable: bool,
    /// `sluice.feature.transaction.version` (Sluice's stand-in for `kafka-storage format
    /// --feature`): 0-2, default 2 as Kafka 4. The level a new cluster's metadata log is
    /// bootstrapped with; UpdateFeatures (`kafka-features`) changes it later. Below 2 clients
    /// speak Transactions V1.
    pub feature_transaction_version: i16,
    /// `sluice.feature.share.version` (stand-in for `kafka-storage format --feature
    /// share.version=N`): 0-1, default 1 as Kafka 4.2+ formats it; a new cluster's bootstrap
    /// level, changed later by UpdateFeatures. At 0 the share-group APIs are not advertised.
    pub feature_share_version: i16,
    /// `group.share.session.timeout.ms` (45000): a share member silent this long is removed.
    pub group_share_session_timeout_ms: i32,
    /// `group.share.heartbeat.interval.ms` (5000).
    pub group_share_heartbeat_interval_ms: i32,
    /// `group.share.max.size` (200): members per share group.
    pub group_share_max_size: i32,
    /// `group.share.record.lock.duration.ms` (30000): how long an acquired record stays locked.
    pub group_share_record_lock_duration_ms: i32,
    /// `group.share.delivery.count.limit` (5): deliveries before a record is archived.
    pub group_share_delivery_count_limit: i32,
    /// `group.share.partition.max.record.locks` (2000): in-flight records per share-partition.
    pub group_share_partition_max_record_locks: i32,
    /// `share.coordinator.state.topic.num.partitions` (50): partitions of `__share_group_state`.
    pub share_coordinator_state_topic_num_partitions: i32,
    /// `share.coordinator.state.topic.replication.factor` (Kafka 3; unset, `min(3, quorum size)`
    /// as the other internal topics).
    pub share_coordinator_state_topic_replication_factor: i16,
    /// `share.coordinator.snapshot.update.records.per.snapshot` (500): ShareUpdate records
    /// between two ShareSnapshot records of one share-partition.
    pub share_coordinator_snapshot_update_records_per_snapshot: i32,
    /// `log.retention.ms` (or `.minutes`, `.hours`; ms wins): -1 keeps segments forever.
    pub retention_ms: i64,
    /// `log.retention.bytes`: -1 means no size limit.
    pub retention_bytes: i64,
    /// `log.cleanup.policy`: `delete`, `compact` or both, comma-separated.
    pub cleanup_policy: String,
    /// `log.cleaner.delete.retention.ms`
    pub delete_retention_ms: i64,
    /// `log.cleaner.min.cleanable.ratio`
    pub min_cleanable_dirty_ratio: f64,
    /// `log.cleaner.min.compaction.lag.ms`
    pub min_compaction_lag_ms: i64,
    /// `min.insync.replicas`
    pub min_insync_replicas: i32,
    /// `unclean.leader.election.enable`
    pub unclean_leader_election_enable: bool,
    /// `log.retention.check.interval.ms`: how often the retention pass runs.
    pub retention_check_interval_ms: i64,
    /// `log.cleaner.enable`: run compaction for `cleanup.policy=compact` topics.
    pub cleaner_enable: bool,
    /// `log.cleaner.backoff.ms`: how often the cleaner looks for dirty logs.
    pub cleaner_backoff_ms: i64,
    /// `sluice.log.open.files.max` (Sluice's own key; Kafka has none): the most segment `.log`
    /// descriptors kept open at once, whatever the partition count. Segments reopen their file on
    /// demand (least recently used closed first); index files are opened only while written.
    pub log_open_files_max: usize,
    // conn: connection and request-memory limits (read by `server`).
    /// `max.connections`: connections the broker serves at once; at the limit it stops accepting
    /// until one closes (new connections wait in the listen backlog), as Kafka's acceptor does.
    pub max_connections: i32,
    /// `max.connections.per.ip`: connections from one address; more are closed at accept.
    pub max_connections_per_ip: i32,
    /// `max.connections.per.ip.overrides`: per-address limits (`ip:count,...`, IP literals only).
    pub max_connections_per_ip_overrides: BTreeMap<std::net::IpAddr, i32>,
    /// `connections.max.idle.ms`: a connection with no request and no response traffic this long
    /// is closed (negative: never).
    pub connections_max_idle_ms: i64,
    /// `queued.max.request.bytes`: bytes of request frames being read or handled, broker-wide.
    /// Kafka's -1 means unbounded; here a value <= 0 means [`DEFAULT_QUEUED_MAX_REQUEST_BYTES`].
    pub queued_max_request_bytes: i64,
    /// `sluice.socket.request.read.timeout.ms` (Sluice's own key; Kafka has none): how long a frame
    /// may take to arrive once its first byte has (its memory granted); then the connection closes.
    pub request_read_timeout_ms: i64,
    /// `sluice.connection.queued.response.max.bytes` (Sluice's own key): a connection's reader
    /// stops reading requests while its queued responses hold more than this many bytes of memory
    /// (file ranges count [`crate::server::FILE_CHUNK_COST`] each).
    pub queued_response_max_bytes: usize,
    // end conn
    // quorum: the controller quorum (read by `crate::quorum`).
    /// `controller.quorum.voters`: the voters' CONTROLLER endpoints; empty: this node alone.
    pub quorum_voters: Vec<quorum::QuorumVoter>,
    /// `controller.quorum.bootstrap.servers` (HOST:PORT each): where a broker-only node without
    /// `controller.quorum.voters` first looks for the quorum (KIP-853).
    pub quorum_bootstrap_servers: Vec<String>,
    /// `process.roles` (list, default `broker,controller` in Sluice: a combined node).
    pub process_roles: quorum::ProcessRoles,
    /// `controller.quorum.election.timeout.ms`
    pub quorum_election_timeout_ms: u64,
    /// `controller.quorum.fetch.timeout.ms`
    pub quorum_fetch_timeout_ms: u64,
    /// `controller.quorum.election.backoff.max.ms` (raft-rs's randomized election timeout is
    /// the backoff after a lost election; the key is validated and reported).
    pub quorum_election_backoff_max_ms: u64,
    /// `metadata.log.dir`; `None`: `<log.dirs>/__cluster_metadata-0`.
    pub metadata_log_dir: Option<PathBuf>,
    /// `metadata.log.max.record.bytes.between.snapshots`
    pub metadata_log_max_record_bytes_between_snapshots: u64,
    // end quorum
    // rpc: broker-controller RPCs (read by `crate::controller::remote`).
    /// `broker.rack` (string, default null): the rack in this broker's registration.
    pub broker_rack: Option<String>,
    /// `broker.heartbeat.interval.ms` (int, default 2000): how often the broker heartbeats.
    pub broker_heartbeat_interval_ms: u64,
    /// `broker.session.timeout.ms` (int, default 9000): a broker silent this long is fenced.
    pub broker_session_timeout_ms: u64,
    /// `controlled.shutdown.enable` (boolean, default true): a clean stop first asks the
    /// controller to move this broker's leaderships away (`controller::lifecycle`).
    pub controlled_shutdown_enable: bool,
    // end rpc
    // replication
    /// `replica.lag.time.max.ms` (long, default 30000): a follower not caught up this long leaves
    /// the ISR.
    pub replica_lag_time_max_ms: i64,
    /// `replica.fetch.wait.max.ms` (int, default 500): a follower fetch's max wait.
    pub replica_fetch_wait_max_ms: i32,
    /// `replica.fetch.max.bytes` (int, default 1048576): a follower fetch's per-partition limit.
    pub replica_fetch_max_bytes: i32,
    /// `replica.fetch.response.max.bytes` (int, default 10485760): a follower fetch's total limit.
    pub replica_fetch_response_max_bytes: i32,
    /// `replica.fetch.backoff.ms` (int, default 1000): a follower's pause after a failed fetch.
    pub replica_fetch_backoff_ms: u64,
    /// `replica.high.watermark.checkpoint.interval.ms` (long, default 5000): how often every
    /// partition's high watermark is written to `replication-offset-checkpoint`. At least 1 (Kafka
    /// has no validator; a period of 0 or less would not be a period).
    pub replica_high_watermark_checkpoint_interval_ms: u64,
    // end replication
    // quotas
    /// `quota.window.num` (int, default 11): the samples a client quota's rate is measured over.
    pub quota_window_num: u32,
    /// `quota.window.size.seconds` (int, default 1): the time span of each sample.
    pub quota_window_size_seconds: u32,
    // end quotas
    /// Kafka keys given explicitly in the file, with their raw values (DescribeConfigs' static
    /// broker source).
    pub explicit: BTreeMap<String, String>,
}

impl Default for Config {
    fn default() -> Self {
        let listen: SocketAddr = DEFAULT_LISTEN.parse().expect("constant address");
        Config {
            listen,
            advertise: (listen.ip().to_string(), listen.port()),
            listeners: Vec::new(),
            cluster_id: None,
            ignored: Vec::new(),
            unrelated_env: Vec::new(),
            default_replication_factor: 1,
            offsets_topic_replication_factor: 1,
            transaction_state_log_replication_factor: 1,
            transaction_state_log_min_isr: 2,
            share_coordinator_state_topic_min_isr: 2,
            share_coordinator_write_timeout_ms: 5000,
            data_dir: PathBuf::from("sluice-data"),
            ephemeral: false,
            previous_broker_epoch: -1,
            node_id: 1,
            max_request_bytes: 100 * 1024 * 1024,
            auto_create_topics: true,
            num_partitions: 1,
            segment_bytes: 1024 * 1024 * 1024,
            segment_ms: 7 * 24 * 3600 * 1000,
            index_interval_bytes: 4096,
            segment_index_bytes: 10 * 1024 * 1024,
            message_max_bytes: 1024 * 1024 + 12,
            message_timestamp_type: TimestampType::CreateTime,
            // validator
            message_timestamp_before_max_ms: i64::MAX,
            message_timestamp_after_max_ms: 3_600_000,
            // validator end
            producer_id_expiration_ms: 86_400_000,
            flush_every_message: false,
            // lock
            flush_interval_messages: i64::MAX,
            flush_interval_ms: None,
            flush_scheduler_interval_ms: i64::MAX,
            // end lock
            group_initial_rebalance_delay_ms: 3000,
            group_min_session_timeout_ms: 6000,
            group_consumer_session_timeout_ms: 45_000,
            group_consumer_heartbeat_interval_ms: 5_000,
            group_consumer_migration_policy:
                crate::group::migration::MigrationPolicy::Bidirectional,
            group_max_session_timeout_ms: 1_800_000,
            group_max_size: i32::MAX,
            offsets_topic_num_partitions: 50,
            offset_metadata_max_bytes: 4096,
            offsets_commit_timeout_ms: 5000,
            offsets_retention_minutes: 10_080,
            offsets_retention_check_interval_ms: 600_000,
            transaction_state_log_num_partitions: 50,
            transaction_state_log_segment_bytes: 104_857_600,
            transaction_max_timeout_ms: 900_000,
            transactional_id_expiration_ms: 604_800_000,
            transaction_partition_verification_enable: true,
            feature_transaction_version: 2,
            feature_share_version: 1,
            group_share_session_timeout_ms: 45_000,
            group_share_heartbeat_interval_ms: 5_000,
            group_share_max_size: 200,
            group_share_record_lock_duration_ms: 30_000,
            group_share_delivery_count_limit: 5,
            group_share_partition_max_record_locks: 2_000,
            share_coordinator_state_topic_num_partitions: 50,
            share_coordinator_state_topic_replication_factor: 1,
            share_coordinator_snapshot_update_records_per_snapshot: 500,
            retention_ms: 7 * 24 * 3600 * 1000,
            retention_bytes: -1,
            cleanup_policy: "delete".to_string(),
            delete_retention_ms: 86_400_000,
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            min_insync_replicas: 1,
            unclean_leader_election_enable: false,
            retention_check_interval_ms: 300_000,
            cleaner_enable: true,
            cleaner_backoff_ms: 15_000,
            log_open_files_max: crate::log::DEFAULT_MAX_OPEN_FILES,
            // conn
            max_connections: i32::MAX,
            max_connections_per_ip: i32::MAX,
            max_connections_per_ip_overrides: BTreeMap::new(),
            connections_max_idle_ms: 600_000,
            queued_max_request_bytes: -1,
            request_read_timeout_ms: 30_000,
            queued_response_max_bytes: 1024 * 1024,
            // end conn
            // quorum
            quorum_voters: Vec::new(),
            quorum_bootstrap_servers: Vec::new(),
            process_roles: quorum::ProcessRoles::Combined,
            quorum_election_timeout_ms: 1000,
            quorum_fetch_timeout_ms: 2000,
            quorum_election_backoff_max_ms: 1000,
            metadata_log_dir: None,
            metadata_log_max_record_bytes_between_snapshots: 20 * 1024 * 1024,
            // end quorum
            // rpc
            broker_rack: None,
            broker_heartbeat_interval_ms: 2000,
            broker_session_timeout_ms: 9000,
            controlled_shutdown_enable: true,
            // end rpc
            // replication
            replica_lag_time_max_ms: 30_000,
            replica_fetch_wait_max_ms: 500,
            replica_fetch_max_bytes: 1_048_576,
            replica_fetch_response_max_bytes: 10_485_760,
            replica_fetch_backoff_ms: 1000,
            replica_high_watermark_checkpoint_interval_ms: 5000,
            // end replication
            // quotas
            quota_window_num: 11,
            quota_window_size_seconds: 1,
            // end quotas
            explicit: BTreeMap::new(),
        }
    }
}

// conn
/// Sluice's bound for `queued.max.request.bytes` when the key is unset or <= 0 (Kafka's -1 means
/// unbounded; 16 connections each holding a 100 MiB frame then hold 1.6 GB).
pub const DEFAULT_QUEUED_MAX_REQUEST_BYTES: i64 = 256 * 1024 * 1024;

impl Config {
    /// The broker-wide bound on request bytes being read or handled (`queued.max.request.bytes`).
    pub fn effective_queued_max_request_bytes(&self) -> usize {
        let v = if self.queued_max_request_bytes > 0 {
            self.queued_max_request_bytes
        } else {
            DEFAULT_QUEUED_MAX_REQUEST_BYTES
        };
        usize::try_from(v).unwrap_or(usize::MAX)
    }
}

/// Parses `max.connections.per.ip.overrides`: `ip:count` entries separated by commas (IPv6 in
/// brackets or bare; the count is what follows the last colon).
fn parse_ip_overrides(key: &str, s: &str) -> Result<BTreeMap<std::net::IpAddr, i32>, ConfigError> {
    let mut out = BTreeMap::new();
    for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (host, count) = entry
            .rsplit_once(':')
            .ok_or_else(|| key_err(key, format!("`{entry}` is not host:count")))?;
        let host = host.trim().trim_start_matches('[').trim_end_matches(']');
        let ip: std::net::IpAddr = host.parse().map_err(|_| {
            key_err(
                key,
                format!("`{host}` is not an IP address (host names are not resolved)"),
            )
        })?;
        let count: i32 = count
            .trim()
            .parse()
            .ok()
            .filter(|c| *c >= 0)
            .ok_or_else(|| key_err(key, format!("`{count}` is not a connection count >= 0")))?;
        out.insert(ip, count);
    }
    Ok(out)
}
// end conn

/// A configuration error: always names the key (or file) and says why.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file {path}: {reason}")]
    File { path: String, reason: String },
    /// `origin` says where the key came from (" (from KAFKA_NODE_ID)"), or is empty.
    #[error("config key `{key}`{origin}: {reason}")]
    Key {
        key: String,
        origin: String,
        reason: String,
    },
    /// Every error of one start, in key order.
    #[error("{}", .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; "))]
    Several(Vec<ConfigError>),
}

fn key_err(key: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Key {
        key: key.to_string(),
        origin: String::new(),
        reason: reason.into(),
    }
}

/// Command-line overrides, applied after the file and the environment.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub listen: Option<String>,
    pub advertise: Option<String>,
    pub data_dir: Option<PathBuf>,
    pub ephemeral: bool,
}

/// Keys that are Sluice's own, not Kafka configs: never in DescribeConfigs.
const SLUICE_KEYS: &[&str] = &["listen", "advertise", "data.dir", "data_dir", "ephemeral"];

fn is_sluice_key(key: &str) -> bool {
    SLUICE_KEYS.contains(&key) || key.starts_with("sluice.")
}

/// Values of interdependent keys, collected while entries are applied and checked together at
/// the end (listeners, roles, voters).
#[derive(Debug, Default)]
pub(crate) struct Pending {
    listen: Option<String>,
    advertise: Option<String>,
    listener_keys: listeners::ListenerKeys,
    process_roles: Option<String>,
    quorum_voters: Option<String>,
    quorum_bootstrap_servers: Option<String>,
}

impl Config {
    /// Builds a configuration from flattened `key -> value` entries over the defaults (no
    /// environment, no file). Every bad entry is reported, in one error.
    pub fn from_entries(entries: &BTreeMap<String, Value>) -> Result<Config, ConfigError> {
        let mut c = Config::default();
        let mut pending = Pending::default();
        let mut errors = Vec::new();
        for (key, value) in entries {
            if let Err(e) = c.apply_key(key, value, &mut pending) {
                errors.push(e);
            }
        }
        errors.extend(c.finish(pending));
        match errors.len() {
            0 => Ok(c),
            1 => Err(errors.remove(0)),
            _ => Err(ConfigError::Several(errors)),
        }
    }

    /// Checks one key against Kafka's table, applies it if Sluice implements it, else records it
    /// as ignored; unknown keys are an error naming the closest known key.
    fn apply_key(
        &mut self,
        key: &str,
        value: &Value,
        pending: &mut Pending,
    ) -> Result<(), ConfigError> {
        let known = known_keys::lookup(key);
        if let Some(k) = known {
            value::check_known(k, value)?;
        }
        if !self.apply_entry(key, value, pending)? {
            if known.is_none() && !known_keys::is_known(key) {
                return Err(unknown_key(key));
            }
            self.ignored.push(key.to_string());
        }
        if !is_sluice_key(key) {
            self.explicit.insert(key.to_string(), value.to_raw());
        }
        Ok(())
    }

    /// Cross-key checks once every entry is applied: listeners, roles, voters, cluster id.
    fn finish(&mut self, mut pending: Pending) -> Vec<ConfigError> {
        let mut errors = Vec::new();
        let roles = match pending.process_roles.as_deref() {
            Some(text) => match quorum::ProcessRoles::parse(text) {
                Ok(r) => r,
                Err(e) => {
                    errors.push(e);
                    quorum::ProcessRoles::Combined
                }
            },
            None => quorum::ProcessRoles::Combined,
        };
        self.process_roles = roles;
        pending.listener_keys.broker_only = roles == quorum::ProcessRoles::Broker;
        pending.listener_keys.controller_only = roles == quorum::ProcessRoles::Controller;
        if let Err(e) = self.resolve_listeners(&pending) {
            errors.extend(e);
        }
        if let Some(voters) = &pending.quorum_voters {
            match quorum::parse_voters(voters, self.node_id, roles.is_controller()) {
                Ok(v) => self.quorum_voters = v,
                Err(e) => errors.push(e),
            }
        }
        if let Some(list) = &pending.quorum_bootstrap_servers {
            self.quorum_bootstrap_servers = value::split_list(list)
                .into_iter()
                .map(str::to_string)
                .collect();
        }
        errors.extend(quorum::check_roles(
            self,
            pending.quorum_voters.is_some(),
            pending.quorum_bootstrap_servers.as_deref(),
            pending.listener_keys.controller_names.as_deref(),
            pending.listener_keys.inter_broker.as_deref(),
        ));
        let quorum_size = match &pending.quorum_bootstrap_servers {
            Some(list) if self.quorum_voters.is_empty() => value::split_list(list).len(),
            _ => self.effective_quorum_voters().len(),
        };
        self.default_internal_replication(quorum_size);
        errors.extend(group_bounds::check(&self.explicit));
        errors
    }

    /// Kafka's default replication factor of the internal topics is 3; unset here, it is
    /// `min(3, quorum size)`, so a lone node works with no config (Kafka's own single-node
    /// quickstart sets them to 1) while a cluster of three or more combined nodes gets Kafka's 3.
    /// A value that is set is kept as given: above the live broker count the topic cannot be
    /// created, as in Kafka.
    fn default_internal_replication(&mut self, quorum_size: usize) {
        let rf = quorum_size.clamp(1, 3) as i16;
        for (key, field) in [
            (
                "offsets.topic.replication.factor",
                &mut self.offsets_topic_replication_factor,
            ),
            (
                "transaction.state.log.replication.factor",
                &mut self.transaction_state_log_replication_factor,
            ),
            (
                "share.coordinator.state.topic.replication.factor",
                &mut self.share_coordinator_state_topic_replication_factor,
            ),
        ] {
            if !self.explicit.contains_key(key) {
                *field = rf;
            }
        }
    }

    fn resolve_listeners(&mut self, p: &Pending) -> Result<(), Vec<ConfigError>> {
        let k = &p.listener_keys;
        let kafka_keys_given = k.listeners.is_some() || k.advertised.is_some();
        if p.listen.is_some() || !kafka_keys_given {
            // Sluice's own `listen`/`advertise` (or nothing at all): one PLAINTEXT listener.
            let listen_text = p.listen.as_deref().unwrap_or(DEFAULT_LISTEN);
            let listen = parse_addr("listen", listen_text).map_err(|e| vec![e])?;
            let advertise = match &p.advertise {
                Some(a) => parse_host_port("advertise", a).map_err(|e| vec![e])?,
                None if p.listen.is_none() => (DEFAULT_ADVERTISED_HOST.to_string(), listen.port()),
                None => (listen.ip().to_string(), listen.port()),
            };
            if advertise.0 == "0.0.0.0" || advertise.0 == "::" {
                return Err(vec![key_err(
                    "advertise",
                    "the listener binds a wildcard address; set `advertise` to a host clients can reach",
                )]);
            }
            self.listen = listen;
            self.advertise = advertise.clone();
            self.listeners = vec![Listener {
                name: "PLAINTEXT".into(),
                bind: listen,
                advertised: Some(advertise),
                controller: false,
            }];
            return Ok(());
        }
        let resolved = listeners::resolve(k, &listeners::local_hostname()).map_err(|errs| {
            errs.into_iter()
                .map(|(key, reason)| key_err(key, reason))
                .collect::<Vec<_>>()
        })?;
        let inter = k
            .inter_broker
            .as_deref()
            .map(|n| n.trim().to_ascii_uppercase());
        let primary = resolved
            .iter()
            .find(|l| Some(&l.name) == inter.as_ref())
            .or_else(|| resolved.iter().find(|l| l.advertised.is_some()))
            .cloned();
        if let Some(Listener {
            bind,
            advertised: Some(mut advertised),
            ..
        }) = primary
        {
            if let Some(a) = &p.advertise {
                advertised = parse_host_port("advertise", a).map_err(|e| vec![e])?;
            }
            self.listen = bind;
            self.advertise = advertised;
        }
        self.listeners = resolved;
        Ok(())
    }

    /// The listeners to bind: [`Config::listeners`], or the one `listen`/`advertise` describe.
    pub fn effective_listeners(&self) -> Vec<Listener> {
        if self.listeners.is_empty() {
            vec![Listener {
                name: "PLAINTEXT".into(),
                bind: self.listen,
                advertised: Some(self.advertise.clone()),
                controller: false,
            }]
        } else {
            self.listeners.clone()
        }
    }

    /// Applies one entry (file key, environment, flag or dynamic broker config) to `self`: the
    /// one place where an implemented key is parsed. `Ok(false)`: not a key Sluice implements.
    pub(crate) fn apply_entry(
        &mut self,
        key: &str,
        value: &Value,
        pending: &mut Pending,
    ) -> Result<bool, ConfigError> {
        let k = key;
        let text = || value.to_raw().trim().to_string();
        match k {
            "listen" => pending.listen = Some(value.as_str(k)?.trim().to_string()),
            "advertise" => pending.advertise = Some(value.as_str(k)?.trim().to_string()),
            "listeners" => pending.listener_keys.listeners = Some(text()),
            "advertised.listeners" => pending.listener_keys.advertised = Some(text()),
            "listener.security.protocol.map" => pending.listener_keys.protocol_map = Some(text()),
            "inter.broker.listener.name" => pending.listener_keys.inter_broker = Some(text()),
            "controller.listener.names" => pending.listener_keys.controller_names = Some(text()),
            "process.roles" => pending.process_roles = Some(text()),
            "controller.quorum.voters" => pending.quorum_voters = Some(text()),
            "controller.quorum.bootstrap.servers" => {
                pending.quorum_bootstrap_servers = Some(text())
            }
            // quorum
            "controller.quorum.election.timeout.ms" => {
                self.quorum_election_timeout_ms = value.as_int(k, 0, i32::MAX as i64)? as u64
            }
            "controller.quorum.fetch.timeout.ms" => {
                self.quorum_fetch_timeout_ms = value.as_int(k, 0, i32::MAX as i64)? as u64
            }
            "controller.quorum.election.backoff.max.ms" => {
                self.quorum_election_backoff_max_ms = value.as_int(k, 0, i32::MAX as i64)? as u64
            }
            "metadata.log.dir" => {
                let s = value.as_str(k)?.trim();
                self.metadata_log_dir = (!s.is_empty()).then(|| PathBuf::from(s));
            }
            "metadata.log.max.record.bytes.between.snapshots" => {
                self.metadata_log_max_record_bytes_between_snapshots =
                    value.as_int(k, 1, i64::MAX)? as u64
            }
            // end quorum
            // rpc
            "broker.rack" => {
                let s = value.as_str(k)?.trim();
                self.broker_rack = (!s.is_empty()).then(|| s.to_string());
            }
            "replica.lag.time.max.ms" => {
                self.replica_lag_time_max_ms = value.as_int(k, 1, i64::MAX)?
            }
            "replica.fetch.wait.max.ms" => {
                self.replica_fetch_wait_max_ms = value.as_int(k, 0, i32::MAX as i64)? as i32
            }
            "replica.fetch.max.bytes" => {
                self.replica_fetch_max_bytes = value.as_int(k, 0, i32::MAX as i64)? as i32
            }
            "replica.fetch.response.max.bytes" => {
                self.replica_fetch_response_max_bytes = value.as_int(k, 0, i32::MAX as i64)? as i32
            }
            "replica.fetch.backoff.ms" => {
                self.replica_fetch_backoff_ms = value.as_int(k, 0, i32::MAX as i64)? as u64
            }
            "replica.high.watermark.checkpoint.interval.ms" => {
                self.replica_high_watermark_checkpoint_interval_ms =
                    value.as_int(k, 1, i64::MAX)? as u64
            }
            "broker.heartbeat.interval.ms" => {
                self.broker_heartbeat_interval_ms = value.as_int(k, 1, i32::MAX as i64)? as u64
            }
            "broker.session.timeout.ms" => {
                self.broker_session_timeout_ms = value.as_int(k, 1, i32::MAX as i64)? as u64
            }
            "controlled.shutdown.enable" => self.controlled_shutdown_enable = value.as_bool(k)?,
            // end rpc
            // quotas
            "quota.window.num" => {
                self.quota_window_num = value.as_int(k, 1, i32::MAX as i64)? as u32
            }
            "quota.window.size.seconds" => {
                self.quota_window_size_seconds = value.as_int(k, 1, i32::MAX as i64)? as u32
            }
            // end quotas
            "default.replication.factor" => {
                self.default_replication_factor = value.as_int(k, 1, i32::MAX as i64)? as i32
            }
            "offsets.topic.replication.factor" => {
                self.offsets_topic_replication_factor = value.as_int(k, 1, i16::MAX as i64)? as i16
            }
            "transaction.state.log.replication.factor" => {
                self.transaction_state_log_replication_factor =
                    value.as_int(k, 1, i16::MAX as i64)? as i16
            }
            "transaction.state.log.min.isr" => {
                self.transaction_state_log_min_isr = value.as_int(k, 1, i32::MAX as i64)? as i32
            }
            "share.coordinator.write.timeout.ms" => {
                self.share_coordinator_write_timeout_ms = value.as_int(k, 1, i32::MAX as i64)?
            }
            "share.coordinator.state.topic.min.isr" => {
                self.share_coordinator_state_topic_min_isr =
                    value.as_int(k, 1, i32::MAX as i64)? as i32
            }
            "data.dir" | "data_dir" | "log.dirs" | "log.dir" => {
                let s = value.as_str(k)?.trim();
                if s.is_empty() || s.contains(',') {
                    return Err(key_err(k, "must be exactly one directory"));
                }
                self.data_dir = PathBuf::from(s);
            }
            "ephemeral" => self.ephemeral = value.as_bool(k)?,
            "node.id" | "broker.id" => self.node_id = value.as_int(k, 0, i32::MAX as i64)? as i32,
            "socket.request.max.bytes" => {
                self.max_request_bytes = value.as_int(k, 1024, i32::MAX as i64)? as usize
            }
            "auto.create.topics.enable" => self.auto_create_topics = value.as_bool(k)?,
            "num.partitions" => self.num_partitions = value.as_int(k, 1, 100_000)? as i32,
            "log.segment.bytes" => {
                self.segment_bytes = value.as_int(k, 14, i32::MAX as i64)? as u64
            }
            "log.roll.ms" => self.segment_ms = value.as_int(k, 1, i64::MAX)?,
            "log.roll.hours" => {
                self.segment_ms = value.as_int(k, 1, i64::MAX / 3_600_000)? * 3_600_000
            }
            "log.index.interval.bytes" => {
                self.index_interval_bytes = value.as_int(k, 0, i32::MAX as i64)? as u32
            }
            "log.index.size.max.bytes" => {
                self.segment_index_bytes = value.as_int(k, 4096, i32::MAX as i64)? as u32
            }
            "message.max.bytes" => {
                self.message_max_bytes = value.as_int(k, 0, i32::MAX as i64)? as i32
            }
            "log.message.timestamp.type" => {
                let s = value.as_str(k)?;
                self.message_timestamp_type = TimestampType::parse(s)
                    .ok_or_else(|| key_err(k, "must be CreateTime or LogAppendTime"))?;
            }
            // validator
            "log.message.timestamp.before.max.ms" => {
                self.message_timestamp_before_max_ms = value.as_int(k, 0, i64::MAX)?
            }
            "log.message.timestamp.after.max.ms" => {
                self.message_timestamp_after_max_ms = value.as_int(k, 0, i64::MAX)?
            }
            // validator end
            "producer.id.expiration.ms" => {
                self.producer_id_expiration_ms = value.as_int(k, 1, i64::MAX)?
            }
            "log.flush.interval.messages" => {
                // lock: the count itself is the policy; `flush_every_message` is its N = 1 case.
                self.flush_interval_messages = value.as_int(k, 1, i64::MAX)?;
                self.flush_every_message = self.flush_interval_messages == 1
            }
            // lock
            "log.flush.interval.ms" => {
                self.flush_interval_ms = Some(value.as_int(k, 0, i64::MAX)?)
            }
            "log.flush.scheduler.interval.ms" => {
                self.flush_scheduler_interval_ms = value.as_int(k, 0, i64::MAX)?
            }
            // end lock
            "group.initial.rebalance.delay.ms" => {
                self.group_initial_rebalance_delay_ms = value.as_int(k, 0, i32::MAX as i64)?
            }
            "group.consumer.session.timeout.ms" => {
                self.group_consumer_session_timeout_ms = value.as_int(k, 1, i32::MAX as i64)? as i32
            }
            "group.consumer.heartbeat.interval.ms" => {
                self.group_consumer_heartbeat_interval_ms =
                    value.as_int(k, 1, i32::MAX as i64)? as i32
            }
            "group.consumer.migration.policy" => {
                self.group_consumer_migration_policy =
                    crate::group::migration::MigrationPolicy::parse(value.as_str(k)?).ok_or_else(
                        || {
                            key_err(
                                k,
                                "must be one of disabled, upgrade, downgrade, bidirectional",
                            )
                        },
                    )?
            }
            "group.min.session.timeout.ms" => {
                self.group_min_session_timeout_ms = value.as_int(k, 0, i32::MAX as i64)? as i32
            }
            "group.max.session.timeout.ms" => {
                self.group_max_session_timeout_ms = value.as_int(k, 0, i32::MAX as i64)? as i32
            }
            "group.max.size" => self.group_max_size = value.as_int(k, 1, i32::MAX as i64)? as i32,
            "offsets.retention.minutes" => {
                self.offsets_retention_minutes = value.as_int(k, 1, i32::MAX as i64)? as i32
            }
            "offsets.retention.check.interval.ms" => {
                self.offsets_retention_check_interval_ms = value.as_int(k, 1, i64::MAX)?
            }
            "offsets.topic.num.partitions" => {
                self.offsets_topic_num_partitions = value.as_int(k, 1, 100_000)? as i32
            }
            "offset.metadata.max.bytes" => {
                self.offset_metadata_max_bytes = value.as_int(k, 0, i32::MAX as i64)? as i32
            }
            "offsets.commit.timeout.ms" => {
                self.offsets_commit_timeout_ms = value.as_int(k, 1, i32::MAX as i64)?
            }
            "transaction.state.log.num.partitions" => {
                self.transaction_state_log_num_partitions = value.as_int(k, 1, 100_000)? as i32
            }
            "transaction.state.log.segment.bytes" => {
                self.transaction_state_log_segment_bytes =
                    value.as_int(k, 1024 * 1024, i32::MAX as i64)? as i32
            }
            "transaction.max.timeout.ms" => {
                self.transaction_max_timeout_ms = value.as_int(k, 1, i32::MAX as i64)? as i32
            }
            "transaction.partition.verification.enable" => {
                self.transaction_partition_verification_enable = value.as_bool(k)?
            }
            "sluice.feature.transaction.version" => {
                self.feature_transaction_version = value.as_int(k, 0, 2)? as i16
            }
            "share.coordinator.state.topic.num.partitions" => {
                self.share_coordinator_state_topic_num_partitions =
                    value.as_int(k, 1, 100_000)? as i32
            }
            "share.coordinator.state.topic.replication.factor" => {
                self.share_coordinator_state_topic_replication_factor =
                    value.as_int(k, 1, i16::MAX as i64)? as i16
            }
            "share.coordinator.snapshot.update.records.per.snapshot" => {
                self.share_coordinator_snapshot_update_records_per_snapshot =
                    value.as_int(k, 0, i32::MAX as i64)? as i32
            }
            "sluice.feature.share.version" => {
                self.feature_share_version = value.as_int(k, 0, 1)? as i16
            }
            "group.share.session.timeout.ms" => {
                self.group_share_session_timeout_ms = value.as_int(k, 1, i32::MAX as i64)? as i32
            }
            "group.share.heartbeat.interval.ms" => {
                self.group_share_heartbeat_interval_ms = value.as_int(k, 1, i32::MAX as i64)? as i32
            }
            "group.share.max.size" => self.group_share_max_size = value.as_int(k, 1, 1000)? as i32,
            "group.share.record.lock.duration.ms" => {
                self.group_share_record_lock_duration_ms = value.as_int(k, 1000, 3_600_000)? as i32
            }
            "group.share.delivery.count.limit" => {
                self.group_share_delivery_count_limit = value.as_int(k, 2, 10)? as i32
            }
            "group.share.partition.max.record.locks" => {
                self.group_share_partition_max_record_locks = value.as_int(k, 100, 10_000)? as i32
            }
            "transactional.id.expiration.ms" => {
                self.transactional_id_expiration_ms = value.as_int(k, 1, i32::MAX as i64)? as i32
            }
            "log.retention.hours" => {
                self.retention_ms = value
                    .as_int(k, -1, i64::MAX / 3_600_000)?
                    .saturating_mul(3_600_000)
            }
            "log.retention.minutes" => {
                self.retention_ms = value
                    .as_int(k, -1, i64::MAX / 60_000)?
                    .saturating_mul(60_000)
            }
            "log.retention.ms" => self.retention_ms = value.as_int(k, -1, i64::MAX)?,
            "log.retention.bytes" => self.retention_bytes = value.as_int(k, -1, i64::MAX)?,
            "log.cleanup.policy" => {
                let s = value.as_str(k)?;
                if s.split(',')
                    .any(|p| !matches!(p.trim(), "delete" | "compact"))
                {
                    return Err(key_err(k, "must be a list of delete, compact"));
                }
                self.cleanup_policy = s.to_string();
            }
            "log.cleaner.delete.retention.ms" => {
                self.delete_retention_ms = value.as_int(k, 0, i64::MAX)?
            }
            "log.cleaner.min.cleanable.ratio" => {
                let v = value.as_f64(k)?;
                if !(0.0..=1.0).contains(&v) {
                    return Err(key_err(k, "must be between 0 and 1"));
                }
                self.min_cleanable_dirty_ratio = v;
            }
            "log.cleaner.min.compaction.lag.ms" => {
                self.min_compaction_lag_ms = value.as_int(k, 0, i64::MAX)?
            }
            "min.insync.replicas" => {
                self.min_insync_replicas = value.as_int(k, 1, i32::MAX as i64)? as i32
            }
            "unclean.leader.election.enable" => {
                self.unclean_leader_election_enable = value.as_bool(k)?
            }
            "log.retention.check.interval.ms" => {
                self.retention_check_interval_ms = value.as_int(k, 1, i64::MAX)?
            }
            "log.cleaner.enable" => self.cleaner_enable = value.as_bool(k)?,
            "log.cleaner.backoff.ms" => self.cleaner_backoff_ms = value.as_int(k, 1, i64::MAX)?,
            "sluice.log.open.files.max" => {
                self.log_open_files_max = value.as_int(k, 1, 1 << 20)? as usize
            }
            // conn
            "max.connections" => self.max_connections = value.as_int(k, 0, i32::MAX as i64)? as i32,
            "max.connections.per.ip" => {
                self.max_connections_per_ip = value.as_int(k, 0, i32::MAX as i64)? as i32
            }
            "max.connections.per.ip.overrides" => {
                self.max_connections_per_ip_overrides = parse_ip_overrides(k, value.as_str(k)?)?
            }
            "connections.max.idle.ms" => {
                self.connections_max_idle_ms = value.as_int(k, i64::MIN, i64::MAX)?
            }
            "queued.max.request.bytes" => {
                self.queued_max_request_bytes = value.as_int(k, i64::MIN, i64::MAX)?
            }
            "sluice.socket.request.read.timeout.ms" => {
                self.request_read_timeout_ms = value.as_int(k, 1, i64::MAX)?
            }
            "sluice.connection.queued.response.max.bytes" => {
                self.queued_response_max_bytes = value.as_int(k, 0, i64::MAX)? as usize
            }
            // end conn
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// This configuration with dynamic broker configs (Kafka key -> value) applied over it.
    pub fn with_dynamic(&self, entries: &BTreeMap<String, String>) -> Result<Config, ConfigError> {
        let mut c = self.clone();
        let mut pending = Pending::default();
        for (k, v) in entries {
            // Dynamic keys Sluice does not implement change nothing.
            c.apply_entry(k, &Value::Str(v.clone()), &mut pending)?;
        }
        // The dynamic layer is not "explicit in the file".
        c.explicit = self.explicit.clone();
        Ok(c)
    }

    /// The value of a dynamic log-related broker key as Kafka renders it (None: not one of them).
    pub fn log_value(&self, key: &str) -> Option<String> {
        Some(match key {
            "log.segment.bytes" => self.segment_bytes.to_string(),
            "log.roll.ms" => self.segment_ms.to_string(),
            "log.index.interval.bytes" => self.index_interval_bytes.to_string(),
            "log.index.size.max.bytes" => self.segment_index_bytes.to_string(),
            "message.max.bytes" => self.message_max_bytes.to_string(),
            "log.message.timestamp.type" => self.message_timestamp_type.name().to_string(),
            "log.message.timestamp.before.max.ms" => {
                self.message_timestamp_before_max_ms.to_string()
            }
            "log.message.timestamp.after.max.ms" => self.message_timestamp_after_max_ms.to_string(),
            "log.retention.ms" => self.retention_ms.to_string(),
            "log.retention.bytes" => self.retention_bytes.to_string(),
            "log.cleanup.policy" => self.cleanup_policy.clone(),
            "log.cleaner.delete.retention.ms" => self.delete_retention_ms.to_string(),
            "log.cleaner.min.cleanable.ratio" => format_double(self.min_cleanable_dirty_ratio),
            "log.cleaner.min.compaction.lag.ms" => self.min_compaction_lag_ms.to_string(),
            "min.insync.replicas" => self.min_insync_replicas.to_string(),
            "unclean.leader.election.enable" => self.unclean_leader_election_enable.to_string(),
            _ => return None,
        })
    }
}

fn parse_addr(key: &str, s: &str) -> Result<SocketAddr, ConfigError> {
    let (host, port) = parse_host_port(key, s)?;
    let host = if host == "localhost" {
        "127.0.0.1".to_string()
    } else {
        host
    };
    let literal = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    literal
        .parse()
        .map_err(|_| key_err(key, format!("`{s}` is not an IP address and port")))
}

fn parse_host_port(key: &str, s: &str) -> Result<(String, u16), ConfigError> {
    let (host, port) = s
        .rsplit_once(':')
        .ok_or_else(|| key_err(key, format!("`{s}` must be HOST:PORT")))?;
    let port: u16 = port
        .parse()
        .map_err(|_| key_err(key, format!("`{port}` is not a port number")))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(key_err(key, format!("`{s}` has no host")));
    }
    Ok((host.to_string(), port))
}

/// The error for a key neither Kafka nor Sluice knows, naming the closest known key. A key that
/// ends in a known key (`log.num.partitions`) is most likely a key written under a TOML `[table]`
/// header, and the message says so.
fn unknown_key(key: &str) -> ConfigError {
    let mut reason = "unknown key (not a Kafka 4.1 broker config nor a Sluice key)".to_string();
    let under_table = key
        .match_indices('.')
        .map(|(i, _)| &key[i + 1..])
        .find(|rest| known_keys::lookup(rest).is_some() || SLUICE_KEYS.contains(rest));
    if let Some(rest) = under_table {
        reason.push_str(&format!(
            "; `{rest}` is a key: in TOML, keys after a `[table]` header belong to that table, so \
             put `{rest}` above the first header"
        ));
    } else if let Some(close) = known_keys::closest(key, SLUICE_KEYS.iter().copied()) {
        reason.push_str(&format!("; did you mean `{close}`?"));
    }
    key_err(key, reason)
}

/// Whether `s` is a Kafka UUID string: 22 base64url characters encoding 16 bytes.
fn is_kafka_uuid(s: &str) -> bool {
    use base64::Engine;
    s.len() == 22
        && base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(s)
            .is_ok_and(|b| b.len() == 16)
}

#[cfg(test)]
mod tests;
