//! The broker configuration: one validated [`Config`] built from defaults, an optional TOML file and
//! command-line overrides, in that order.
//!
//! File keys are Kafka's `server.properties` names. TOML tables are flattened with dots, so
//! `log.segment.bytes = 1048576` and `"log.segment.bytes" = 1048576` mean the same. Sluice's own keys
//! (`listen`, `advertise`, `data.dir`) sit beside them. An unknown key or a bad value is an error that
//! names the key and the reason. This module performs no network I/O and reads one file at most.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// Default port, like Kafka's.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9092";

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
    /// Address the listener binds.
    pub listen: SocketAddr,
    /// Host and port written into Metadata responses (defaults to `listen`).
    pub advertise: (String, u16),
    /// Root of the log directory.
    pub data_dir: PathBuf,
    /// Remove `data_dir` on exit (a throwaway broker for test stacks).
    pub ephemeral: bool,
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
    /// `offsets.topic.num.partitions`: partitions of `__consumer_offsets` when it is created.
    pub offsets_topic_num_partitions: i32,
    /// `offset.metadata.max.bytes`: longest OffsetCommit metadata string.
    pub offset_metadata_max_bytes: i32,
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
            data_dir: PathBuf::from("sluice-data"),
            ephemeral: false,
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
            group_initial_rebalance_delay_ms: 3000,
            group_min_session_timeout_ms: 6000,
            group_consumer_session_timeout_ms: 45_000,
            group_consumer_heartbeat_interval_ms: 5_000,
            group_max_session_timeout_ms: 1_800_000,
            group_max_size: i32::MAX,
            offsets_topic_num_partitions: 50,
            offset_metadata_max_bytes: 4096,
            offsets_retention_minutes: 10_080,
            offsets_retention_check_interval_ms: 600_000,
            transaction_state_log_num_partitions: 50,
            transaction_state_log_segment_bytes: 104_857_600,
            transaction_max_timeout_ms: 900_000,
            transactional_id_expiration_ms: 604_800_000,
            transaction_partition_verification_enable: true,
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
            explicit: BTreeMap::new(),
        }
    }
}

/// A configuration error: always names the key and says why.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file {path}: {reason}")]
    File { path: String, reason: String },
    #[error("config key `{key}`: {reason}")]
    Key { key: String, reason: String },
}

fn key_err(key: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Key {
        key: key.to_string(),
        reason: reason.into(),
    }
}

/// Command-line overrides, applied after the file.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub listen: Option<String>,
    pub advertise: Option<String>,
    pub data_dir: Option<PathBuf>,
    pub ephemeral: bool,
}

impl Config {
    /// Builds the configuration: defaults, then the file (if any), then the overrides.
    pub fn load(file: Option<&Path>, overrides: &Overrides) -> Result<Config, ConfigError> {
        let mut entries = BTreeMap::new();
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|e| ConfigError::File {
                path: path.display().to_string(),
                reason: e.to_string(),
            })?;
            entries = parse_toml(&text).map_err(|reason| ConfigError::File {
                path: path.display().to_string(),
                reason,
            })?;
        }
        if let Some(v) = &overrides.listen {
            entries.insert("listen".into(), Value::Str(v.clone()));
        }
        if let Some(v) = &overrides.advertise {
            entries.insert("advertise".into(), Value::Str(v.clone()));
        }
        if let Some(v) = &overrides.data_dir {
            entries.insert("data.dir".into(), Value::Str(v.display().to_string()));
        }
        let mut config = Config::from_entries(&entries)?;
        if overrides.ephemeral {
            config.ephemeral = true;
            // Throwaway test stacks want groups to form at once, unless the file says otherwise.
            if !entries.contains_key("group.initial.rebalance.delay.ms") {
                config.group_initial_rebalance_delay_ms = 0;
            }
        }
        Ok(config)
    }

    /// Builds a configuration from flattened `key -> value` entries.
    pub fn from_entries(entries: &BTreeMap<String, Value>) -> Result<Config, ConfigError> {
        let mut c = Config::default();
        let mut advertise: Option<String> = None;
        for (key, value) in entries {
            c.apply_entry(key, value, &mut advertise)?;
        }
        c.advertise = match advertise {
            Some(a) => parse_host_port("advertise", &a)?,
            None => (c.listen.ip().to_string(), c.listen.port()),
        };
        if c.advertise.0 == "0.0.0.0" || c.advertise.0 == "::" {
            return Err(key_err(
                "advertise",
                "the listener binds a wildcard address; set `advertise` to a host clients can reach",
            ));
        }
        Ok(c)
    }

    /// Applies one flattened entry (file key or dynamic broker config) to `self`.
    fn apply_entry(
        &mut self,
        key: &str,
        value: &Value,
        advertise: &mut Option<String>,
    ) -> Result<(), ConfigError> {
        let k = key;
        match k {
            "listen" | "listeners" => {
                let s = value.as_str(k)?;
                let s = s.strip_prefix("PLAINTEXT://").unwrap_or(s);
                self.listen = parse_addr(k, s)?;
            }
            "advertise" | "advertised.listeners" => {
                let s = value.as_str(k)?;
                *advertise = Some(s.strip_prefix("PLAINTEXT://").unwrap_or(s).to_string());
            }
            "data.dir" | "data_dir" | "log.dirs" | "log.dir" => {
                let s = value.as_str(k)?;
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
                self.flush_every_message = value.as_int(k, 1, i64::MAX)? == 1
            }
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
            _ => return Err(key_err(k, "unknown key")),
        }
        // Sluice's own keys are not Kafka configs: DescribeConfigs never lists them.
        if !matches!(
            k,
            "listen"
                | "advertise"
                | "data.dir"
                | "data_dir"
                | "ephemeral"
                | "sluice.log.open.files.max"
        ) {
            self.explicit.insert(k.to_string(), value.to_raw());
        }
        Ok(())
    }

    /// This configuration with dynamic broker configs (Kafka key -> value) applied over it.
    pub fn with_dynamic(&self, entries: &BTreeMap<String, String>) -> Result<Config, ConfigError> {
        let mut c = self.clone();
        let mut advertise = None;
        for (k, v) in entries {
            c.apply_entry(k, &Value::Str(v.clone()), &mut advertise)?;
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
            // validator
            "log.message.timestamp.before.max.ms" => {
                self.message_timestamp_before_max_ms.to_string()
            }
            "log.message.timestamp.after.max.ms" => self.message_timestamp_after_max_ms.to_string(),
            // validator end
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

/// Renders a double like Java's `Double.toString` for the values configs use (0.5, 1.0).
pub fn format_double(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e7 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}

/// A flattened configuration value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
    Bool(bool),
}

impl Value {
    fn as_str(&self, key: &str) -> Result<&str, ConfigError> {
        match self {
            Value::Str(s) => Ok(s),
            _ => Err(key_err(key, "must be a string")),
        }
    }
    fn as_bool(&self, key: &str) -> Result<bool, ConfigError> {
        match self {
            Value::Bool(b) => Ok(*b),
            Value::Str(s) if s == "true" => Ok(true),
            Value::Str(s) if s == "false" => Ok(false),
            _ => Err(key_err(key, "must be true or false")),
        }
    }
    fn to_raw(&self) -> String {
        match self {
            Value::Str(s) => s.clone(),
            Value::Int(i) => i.to_string(),
            Value::Bool(b) => b.to_string(),
        }
    }
    fn as_f64(&self, key: &str) -> Result<f64, ConfigError> {
        match self {
            Value::Int(i) => Ok(*i as f64),
            Value::Str(s) => s
                .trim()
                .parse()
                .map_err(|_| key_err(key, format!("`{s}` is not a number"))),
            Value::Bool(_) => Err(key_err(key, "must be a number")),
        }
    }
    fn as_int(&self, key: &str, min: i64, max: i64) -> Result<i64, ConfigError> {
        let v = match self {
            Value::Int(i) => *i,
            Value::Str(s) => s
                .trim()
                .parse()
                .map_err(|_| key_err(key, format!("`{s}` is not an integer")))?,
            Value::Bool(_) => return Err(key_err(key, "must be an integer")),
        };
        if v < min || v > max {
            return Err(key_err(key, format!("{v} is outside {min}..={max}")));
        }
        Ok(v)
    }
}

/// Parses TOML text into flattened dotted keys.
pub fn parse_toml(text: &str) -> Result<BTreeMap<String, Value>, String> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| e.to_string())?;
    let mut out = BTreeMap::new();
    flatten("", &table, &mut out)?;
    Ok(out)
}

fn flatten(
    prefix: &str,
    table: &toml::Table,
    out: &mut BTreeMap<String, Value>,
) -> Result<(), String> {
    for (k, v) in table {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            toml::Value::Table(t) => flatten(&key, t, out)?,
            toml::Value::String(s) => {
                out.insert(key, Value::Str(s.clone()));
            }
            toml::Value::Integer(i) => {
                out.insert(key, Value::Int(*i));
            }
            toml::Value::Boolean(b) => {
                out.insert(key, Value::Bool(*b));
            }
            _ => return Err(format!("key `{key}`: unsupported value type")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Config, ConfigError> {
        Config::from_entries(&parse_toml(text).map_err(|r| key_err("file", r))?)
    }

    #[test]
    fn nested_and_quoted_dotted_keys_are_the_same_key() {
        let a = load("log.segment.bytes = 2048\n").unwrap();
        let b = load("\"log.segment.bytes\" = 2048\n").unwrap();
        assert_eq!(a.segment_bytes, 2048);
        assert_eq!(b.segment_bytes, 2048);
    }

    #[test]
    fn group_keys_have_kafka_defaults_and_ephemeral_forms_groups_at_once() {
        let c = load("").unwrap();
        assert_eq!(c.group_initial_rebalance_delay_ms, 3000);
        assert_eq!(c.offsets_topic_num_partitions, 50);
        let c = load("group.initial.rebalance.delay.ms = 250\noffsets.topic.num.partitions = 3\n")
            .unwrap();
        assert_eq!(c.group_initial_rebalance_delay_ms, 250);
        assert_eq!(c.offsets_topic_num_partitions, 3);
        let eph = Overrides {
            ephemeral: true,
            ..Overrides::default()
        };
        assert_eq!(
            Config::load(None, &eph)
                .unwrap()
                .group_initial_rebalance_delay_ms,
            0
        );
        let e = load("group.max.size = 0\n").unwrap_err().to_string();
        assert!(e.contains("group.max.size"), "{e}");
    }

    #[test]
    fn open_files_bound_is_sluices_own_key_and_not_described() {
        assert_eq!(
            load("").unwrap().log_open_files_max,
            crate::log::DEFAULT_MAX_OPEN_FILES
        );
        let c = load("sluice.log.open.files.max = 50\n").unwrap();
        assert_eq!(c.log_open_files_max, 50);
        assert!(!c.explicit.contains_key("sluice.log.open.files.max"));
        let e = load("sluice.log.open.files.max = 0\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("sluice.log.open.files.max"), "{e}");
    }

    #[test]
    fn unknown_key_is_named() {
        let e = load("log.segmnt.bytes = 5\n").unwrap_err().to_string();
        assert!(e.contains("log.segmnt.bytes"), "{e}");
        assert!(e.contains("unknown key"), "{e}");
    }

    #[test]
    fn out_of_range_and_wrong_type_are_named() {
        let e = load("num.partitions = 0\n").unwrap_err().to_string();
        assert!(e.contains("num.partitions") && e.contains("outside"), "{e}");
        let e = load("auto.create.topics.enable = 3\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("auto.create.topics.enable"), "{e}");
        let e = load("listen = \"nohost\"\n").unwrap_err().to_string();
        assert!(e.contains("listen"), "{e}");
    }

    #[test]
    fn advertise_defaults_to_listen_and_can_be_set() {
        let c = load("listen = \"127.0.0.1:19092\"\n").unwrap();
        assert_eq!(c.advertise, ("127.0.0.1".to_string(), 19092));
        let c = load("listen = \"0.0.0.0:9092\"\nadvertise = \"kafka:9092\"\n").unwrap();
        assert_eq!(c.advertise, ("kafka".to_string(), 9092));
        assert!(load("listen = \"0.0.0.0:9092\"\n").is_err());
    }

    #[test]
    fn kafka_listener_syntax_is_accepted() {
        let c = load("listeners = \"PLAINTEXT://127.0.0.1:9093\"\n").unwrap();
        assert_eq!(c.listen.port(), 9093);
        let c = load("log.message.timestamp.type = \"LogAppendTime\"\n").unwrap();
        assert_eq!(c.message_timestamp_type, TimestampType::LogAppendTime);
    }
}
