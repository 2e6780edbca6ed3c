//! ReplicaManager: every topic and partition this broker hosts, keyed by name and by topic id.
//!
//! Thread-safe: the topic table sits behind a `parking_lot::RwLock` taken briefly for lookups and
//! for create/delete; partitions are `Arc`s used without the table lock. On disk a topic is its
//! partition directories `<data>/<topic>-<n>/` (each with `partition.metadata` naming the topic id)
//! plus its config overrides in `<data>/topic-configs.json`.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use uuid::Uuid;

use crate::cluster::broker_config::DynamicBrokerConfigs;
use crate::cluster::TopicConfig;
use crate::config::Config;
use crate::log::checkpoint::{
    self, OffsetMap, LOG_START_OFFSET_CHECKPOINT, PARTITION_METADATA, RECOVERY_POINT_CHECKPOINT,
};
use crate::log::{CompactParams, FileCache, Flusher, LogConfig, LogError};
use crate::replica::partition::Partition;

const TOPIC_CONFIGS: &str = "topic-configs.json";
/// Where compaction left off per partition (Kafka's file name and format).
pub const CLEANER_CHECKPOINT: &str = "cleaner-offset-checkpoint";
/// Dynamic broker configs (per-broker and cluster-default layers).
pub const BROKER_CONFIGS: &str = "broker-configs.json";

/// One topic: id, config, partitions in index order. Immutable once built (config changes replace
/// the whole `Topic`).
pub struct Topic {
    pub name: String,
    pub id: Uuid,
    pub config: Arc<TopicConfig>,
    pub partitions: Vec<Arc<Partition>>,
}

#[derive(Default)]
struct Topics {
    by_name: HashMap<String, Arc<Topic>>,
    by_id: HashMap<Uuid, String>,
}

/// Why a topic could not be created or deleted.
#[derive(Debug, thiserror::Error)]
pub enum TopicError {
    #[error("Topic '{0}' already exists.")]
    AlreadyExists(String),
    #[error("This server does not host this topic: {0}")]
    Unknown(String),
    #[error("log error: {0}")]
    Log(#[from] LogError),
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    #[error("{0}")]
    InvalidConfig(String),
    #[error("{0}")]
    InvalidPartitions(String),
    /// Another topic has the same name up to `.`/`_` (Kafka's collision rule).
    #[error("Topic '{name}' collides with existing topic: {existing}")]
    Collides { name: String, existing: String },
}

pub struct ReplicaManager {
    /// The static configuration (defaults, file, command line).
    config: Arc<Config>,
    /// Static plus dynamic broker configs: the defaults topics inherit. Replaced whole.
    effective: RwLock<Arc<Config>>,
    dynamic: RwLock<DynamicBrokerConfigs>,
    data_dir: PathBuf,
    topics: RwLock<Topics>,
    /// First dirty offset per compacted partition (`cleaner-offset-checkpoint`).
    cleaner_offsets: Mutex<OffsetMap>,
    /// Serialises create/delete so two creators of one name cannot both build directories.
    admin: Mutex<()>,
    /// The bounded cache of open segment descriptors every partition's log shares
    /// (`sluice.log.open.files.max`).
    files: FileCache,
    /// The background thread that fsyncs rolled segments and writes their producer snapshots.
    flusher: Flusher,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn log_config(c: &TopicConfig, files: &FileCache, flusher: &Flusher) -> LogConfig {
    LogConfig {
        segment_bytes: c.segment_bytes,
        segment_ms: c.segment_ms,
        index_interval_bytes: c.index_interval_bytes,
        segment_index_bytes: c.segment_index_bytes,
        files: files.clone(),
        flusher: Some(flusher.clone()),
        flush: crate::log::FlushPolicy {
            messages: c.flush_messages,
            ms: c.flush_ms,
        },
    }
}

/// Splits `orders-3` into (`orders`, 3). Topic names may contain '-', the partition is after the last.
fn parse_partition_dir(name: &str) -> Option<(String, i32)> {
    let (topic, part) = name.rsplit_once('-')?;
    let p: i32 = part.parse().ok()?;
    if p < 0 || crate::cluster::validate_topic_name(topic).is_err() {
        return None;
    }
    Some((topic.to_string(), p))
}

fn read_partition_metadata(dir: &Path) -> Option<Uuid> {
    checkpoint::read_partition_metadata(&dir.join(PARTITION_METADATA))
        .ok()
        .flatten()
}

fn write_partition_metadata(dir: &Path, id: Uuid) -> Result<(), LogError> {
    checkpoint::write_partition_metadata(&dir.join(PARTITION_METADATA), id)
}

/// Reads an offset checkpoint; a damaged one is ignored (recovery then starts from offset 0).
fn read_checkpoint(path: &Path) -> OffsetMap {
    checkpoint::read_offset_checkpoint(path).unwrap_or_else(|e| {
        tracing::warn!("ignoring damaged checkpoint: {e}");
        OffsetMap::new()
    })
}

impl ReplicaManager {
    /// Loads every topic found in the data directory, recovering logs as needed.
    pub fn open(config: Arc<Config>) -> Result<ReplicaManager, TopicError> {
        let data_dir = config.data_dir.clone();
        std::fs::create_dir_all(&data_dir)?;
        let recovery = read_checkpoint(&data_dir.join(RECOVERY_POINT_CHECKPOINT));
        let starts = read_checkpoint(&data_dir.join(LOG_START_OFFSET_CHECKPOINT));
        let cleaner_offsets = read_checkpoint(&data_dir.join(CLEANER_CHECKPOINT));
        let overrides: BTreeMap<String, BTreeMap<String, String>> =
            match std::fs::read(data_dir.join(TOPIC_CONFIGS)) {
                Ok(b) => serde_json::from_slice(&b).map_err(|e| {
                    io::Error::new(io::ErrorKind::InvalidData, format!("{TOPIC_CONFIGS}: {e}"))
                })?,
                Err(e) if e.kind() == io::ErrorKind::NotFound => BTreeMap::new(),
                Err(e) => return Err(e.into()),
            };

        let dynamic: DynamicBrokerConfigs = match std::fs::read(data_dir.join(BROKER_CONFIGS)) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| {
                io::Error::new(io::ErrorKind::InvalidData, format!("{BROKER_CONFIGS}: {e}"))
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => DynamicBrokerConfigs::default(),
            Err(e) => return Err(e.into()),
        };
        let effective = Arc::new(dynamic.effective(&config).unwrap_or_else(|e| {
            tracing::warn!("stored dynamic broker configs rejected ({e}); using static ones");
            (*config).clone()
        }));

        let mut found: BTreeMap<String, BTreeMap<i32, PathBuf>> = BTreeMap::new();
        for entry in std::fs::read_dir(&data_dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !entry.file_type()?.is_dir() {
                continue;
            }
            if name.ends_with("-delete") {
                let _ = std::fs::remove_dir_all(entry.path());
                continue;
            }
            if let Some((topic, p)) = parse_partition_dir(&name) {
                found.entry(topic).or_default().insert(p, entry.path());
            }
        }

        let mut topics = Topics::default();
        let files = FileCache::new(config.log_open_files_max);
        let flusher = Flusher::start()?;
        let now = now_ms();
        for (name, parts) in found {
            let expected: Vec<i32> = (0..parts.len() as i32).collect();
            if parts.keys().copied().collect::<Vec<_>>() != expected {
                tracing::warn!(
                    "topic {name}: partition directories are not 0..{}; skipping it",
                    parts.len()
                );
                continue;
            }
            let topic_config = TopicConfig::build(
                &effective,
                overrides.get(&name).cloned().unwrap_or_default(),
            )
            .unwrap_or_else(|e| {
                tracing::warn!("topic {name}: stored config rejected ({e}); using defaults");
                TopicConfig::defaults(&effective)
            });
            let id = parts
                .values()
                .find_map(|d| read_partition_metadata(d))
                .unwrap_or_else(Uuid::new_v4);
            let mut partitions = Vec::with_capacity(parts.len());
            for (p, dir) in &parts {
                let key = (name.clone(), *p);
                let partition = Partition::open(
                    &name,
                    *p,
                    dir,
                    log_config(&topic_config, &files, &flusher),
                    recovery.get(&key).copied().unwrap_or(0),
                    starts.get(&key).copied(),
                    now,
                )?;
                if read_partition_metadata(dir).is_none() {
                    write_partition_metadata(dir, id)?;
                }
                partitions.push(Arc::new(partition));
            }
            topics.by_id.insert(id, name.clone());
            topics.by_name.insert(
                name.clone(),
                Arc::new(Topic {
                    name,
                    id,
                    config: Arc::new(topic_config),
                    partitions,
                }),
            );
        }
        Ok(ReplicaManager {
            config,
            effective: RwLock::new(effective),
            dynamic: RwLock::new(dynamic),
            cleaner_offsets: Mutex::new(cleaner_offsets),
            data_dir,
            topics: RwLock::new(topics),
            admin: Mutex::new(()),
            files,
            flusher,
        })
    }

    /// The shared cache of open segment descriptors: its bound and counters.
    pub fn file_cache(&self) -> &FileCache {
        &self.files
    }

    /// The background flusher of rolled segments (tests wait on it with `wait_idle`).
    pub fn flusher(&self) -> &Flusher {
        &self.flusher
    }

    pub fn topic(&self, name: &str) -> Option<Arc<Topic>> {
        self.topics.read().by_name.get(name).cloned()
    }

    pub fn topic_by_id(&self, id: Uuid) -> Option<Arc<Topic>> {
        let t = self.topics.read();
        t.by_id.get(&id).and_then(|n| t.by_name.get(n)).cloned()
    }

    pub fn partition(&self, topic: &str, index: i32) -> Option<Arc<Partition>> {
        let t = self.topics.read();
        let topic = t.by_name.get(topic)?;
        usize::try_from(index)
            .ok()
            .and_then(|i| topic.partitions.get(i))
            .cloned()
    }

    /// All topics, sorted by name.
    pub fn topics(&self) -> Vec<Arc<Topic>> {
        let mut v: Vec<_> = self.topics.read().by_name.values().cloned().collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// Creates a topic with `partitions` partitions and a validated config. The caller has checked
    /// the name and counts.
    /// Another existing topic whose name equals `name` once `.` and `_` are unified (Kafka's
    /// collision rule); `name` itself does not count.
    pub fn colliding_topic(&self, name: &str) -> Option<String> {
        if !name.contains(['.', '_']) {
            return None;
        }
        let unified = crate::cluster::unify_collision_chars(name);
        self.topics
            .read()
            .by_name
            .keys()
            .find(|t| t.as_str() != name && crate::cluster::unify_collision_chars(t) == unified)
            .cloned()
    }

    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        config: TopicConfig,
    ) -> Result<Arc<Topic>, TopicError> {
        let _guard = self.admin.lock();
        if self.topics.read().by_name.contains_key(name) {
            return Err(TopicError::AlreadyExists(name.to_string()));
        }
        if let Some(existing) = self.colliding_topic(name) {
            return Err(TopicError::Collides {
                name: name.to_string(),
                existing,
            });
        }
        let id = Uuid::new_v4();
        let now = now_ms();
        let mut parts = Vec::with_capacity(partitions.max(0) as usize);
        for p in 0..partitions {
            let dir = self.data_dir.join(format!("{name}-{p}"));
            let partition = Partition::open(
                name,
                p,
                &dir,
                log_config(&config, &self.files, &self.flusher),
                0,
                None,
                now,
            )?;
            write_partition_metadata(&dir, id)?;
            parts.push(Arc::new(partition));
        }
        let topic = Arc::new(Topic {
            name: name.to_string(),
            id,
            config: Arc::new(config),
            partitions: parts,
        });
        {
            let mut t = self.topics.write();
            t.by_id.insert(id, name.to_string());
            t.by_name.insert(name.to_string(), topic.clone());
        }
        self.persist_configs()?;
        tracing::info!(
            "created topic {name} with {partitions} partition(s), id {}",
            checkpoint::uuid_to_kafka_string(id)
        );
        Ok(topic)
    }

    /// Removes a topic from service at once; its directories are renamed `*-delete` and removed in
    /// the background (and at the next startup if that did not finish).
    pub fn delete_topic(&self, name: &str) -> Result<Uuid, TopicError> {
        let _guard = self.admin.lock();
        let topic = {
            let mut t = self.topics.write();
            let topic = t
                .by_name
                .remove(name)
                .ok_or_else(|| TopicError::Unknown(name.to_string()))?;
            t.by_id.remove(&topic.id);
            topic
        };
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        let mut doomed = Vec::new();
        for p in &topic.partitions {
            let target = self
                .data_dir
                .join(format!("{}-{}.{suffix}-delete", name, p.index));
            match std::fs::rename(&p.dir, &target) {
                Ok(()) => doomed.push(target),
                Err(e) => tracing::warn!(
                    "delete topic {name}: renaming {} failed: {e}",
                    p.dir.display()
                ),
            }
        }
        self.persist_configs()?;
        std::thread::spawn(move || {
            for d in doomed {
                let _ = std::fs::remove_dir_all(d);
            }
        });
        tracing::info!("deleted topic {name}");
        Ok(topic.id)
    }

    /// Static plus dynamic broker configuration (what topics inherit).
    pub fn effective_config(&self) -> Arc<Config> {
        self.effective.read().clone()
    }

    /// The dynamic broker config layers.
    pub fn dynamic_broker_configs(&self) -> DynamicBrokerConfigs {
        self.dynamic.read().clone()
    }

    /// A topic config with no overrides (auto-created topics).
    pub fn default_topic_config(&self) -> TopicConfig {
        TopicConfig::defaults(&self.effective_config())
    }

    /// Replaces a topic's config overrides (validated first). With `validate_only` nothing changes.
    /// Appends see the new settings at once; the overrides persist in `topic-configs.json`.
    pub fn set_topic_overrides(
        &self,
        name: &str,
        overrides: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<(), TopicError> {
        let _guard = self.admin.lock();
        let topic = self
            .topic(name)
            .ok_or_else(|| TopicError::Unknown(name.to_string()))?;
        let config = TopicConfig::build(&self.effective_config(), overrides)
            .map_err(|e| TopicError::InvalidConfig(e.to_string()))?;
        if validate_only {
            return Ok(());
        }
        self.replace_topic(&topic, Arc::new(config), topic.partitions.clone());
        self.persist_configs()?;
        tracing::info!(
            "topic {name}: config overrides now {:?}",
            topic_overrides(&self.topic(name))
        );
        Ok(())
    }

    /// Replaces the dynamic broker config layers (validated first); every topic's inherited
    /// settings follow at once. Persists in `broker-configs.json`.
    pub fn set_dynamic_broker_configs(
        &self,
        dynamic: DynamicBrokerConfigs,
        validate_only: bool,
    ) -> Result<(), TopicError> {
        let _guard = self.admin.lock();
        let effective = Arc::new(
            dynamic
                .effective(&self.config)
                .map_err(TopicError::InvalidConfig)?,
        );
        let mut rebuilt = Vec::new();
        for t in self.topics() {
            let c = TopicConfig::build(&effective, t.config.overrides.clone())
                .map_err(|e| TopicError::InvalidConfig(e.to_string()))?;
            rebuilt.push((t, c));
        }
        if validate_only {
            return Ok(());
        }
        let bytes = serde_json::to_vec_pretty(&dynamic).map_err(io::Error::other)?;
        checkpoint::write_atomically(&self.data_dir.join(BROKER_CONFIGS), &bytes)?;
        *self.dynamic.write() = dynamic;
        *self.effective.write() = effective;
        for (t, c) in rebuilt {
            self.replace_topic(&t, Arc::new(c), t.partitions.clone());
        }
        tracing::info!("dynamic broker configs updated");
        Ok(())
    }

    /// Grows a topic to `count` partitions (Kafka only increases). With `validate_only` nothing
    /// changes. Errors carry Kafka's messages.
    pub fn create_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
    ) -> Result<(), TopicError> {
        let _guard = self.admin.lock();
        let topic = self
            .topic(name)
            .ok_or_else(|| TopicError::Unknown(name.to_string()))?;
        let current = topic.partitions.len() as i32;
        if count < current {
            return Err(TopicError::InvalidPartitions(format!(
                "The topic {name} currently has {current} partition(s); {count} would not be an increase."
            )));
        }
        if count == current {
            return Err(TopicError::InvalidPartitions(format!(
                "Topic already has {current} partition(s)."
            )));
        }
        if count > crate::api::topics::MAX_PARTITIONS_PER_TOPIC {
            return Err(TopicError::InvalidPartitions(format!(
                "Number of partitions was set to an invalid value {count}; it must be at most {}.",
                crate::api::topics::MAX_PARTITIONS_PER_TOPIC
            )));
        }
        if validate_only {
            return Ok(());
        }
        let now = now_ms();
        let mut parts = topic.partitions.clone();
        for p in current..count {
            let dir = self.data_dir.join(format!("{name}-{p}"));
            let partition = Partition::open(
                name,
                p,
                &dir,
                log_config(&topic.config, &self.files, &self.flusher),
                0,
                None,
                now,
            )?;
            write_partition_metadata(&dir, topic.id)?;
            parts.push(Arc::new(partition));
        }
        self.replace_topic(&topic, topic.config.clone(), parts);
        tracing::info!("topic {name}: partitions {current} -> {count}");
        Ok(())
    }

    /// Swaps in a new `Topic` with the same name and id, pushing the log settings to every
    /// partition. Caller holds `admin`.
    fn replace_topic(
        &self,
        old: &Arc<Topic>,
        config: Arc<TopicConfig>,
        partitions: Vec<Arc<Partition>>,
    ) {
        for p in &partitions {
            p.set_log_config(log_config(&config, &self.files, &self.flusher));
        }
        let topic = Arc::new(Topic {
            name: old.name.clone(),
            id: old.id,
            config,
            partitions,
        });
        self.topics.write().by_name.insert(old.name.clone(), topic);
    }

    /// One retention pass over every partition whose topic's `cleanup.policy` includes `delete`.
    /// Returns the number of segments deleted; log start offsets are checkpointed when any moved.
    pub fn enforce_retention(&self, now_ms: i64) -> usize {
        let mut deleted = 0;
        for t in self.topics() {
            if !t.config.cleanup_delete {
                continue;
            }
            for p in &t.partitions {
                match p.enforce_retention(now_ms, t.config.retention_ms, t.config.retention_bytes) {
                    Ok(n) => deleted += n,
                    Err(e) => tracing::warn!("{}-{}: retention failed: {e}", p.topic, p.index),
                }
            }
        }
        if deleted > 0 {
            if let Err(e) = self.checkpoint(false) {
                tracing::warn!("checkpoint after retention failed: {e}");
            }
        }
        deleted
    }

    /// One compaction pass over every partition of `cleanup.policy=compact` topics. Returns the
    /// segments rewritten; the cleaner positions are checkpointed.
    pub fn run_cleaner(&self, now_ms: i64) -> usize {
        let mut rewritten = 0;
        let mut offsets = self.cleaner_offsets.lock();
        let before = offsets.clone();
        let mut live = OffsetMap::new();
        for t in self.topics() {
            if !t.config.cleanup_compact {
                continue;
            }
            for p in &t.partitions {
                let key = (t.name.clone(), p.index);
                let params = CompactParams {
                    now_ms,
                    first_dirty_offset: offsets.get(&key).copied().unwrap_or(0),
                    min_cleanable_ratio: t.config.min_cleanable_dirty_ratio,
                    min_compaction_lag_ms: t.config.min_compaction_lag_ms,
                    delete_retention_ms: t.config.delete_retention_ms,
                };
                match p.compact(&params) {
                    Ok(Some(out)) => {
                        rewritten += out.segments_rewritten;
                        tracing::info!(
                            "{}-{}: compacted {} segment(s), {} -> {} bytes",
                            t.name,
                            p.index,
                            out.segments_rewritten,
                            out.bytes_before,
                            out.bytes_after
                        );
                        live.insert(key, out.first_dirty_offset);
                    }
                    Ok(None) => {
                        if let Some(&o) = offsets.get(&key) {
                            live.insert(key, o);
                        }
                    }
                    Err(e) => tracing::warn!("{}-{}: compaction failed: {e}", t.name, p.index),
                }
            }
        }
        *offsets = live;
        if *offsets != before {
            if let Err(e) = checkpoint::write_offset_checkpoint(
                &self.data_dir.join(CLEANER_CHECKPOINT),
                &offsets,
            ) {
                tracing::warn!("writing {CLEANER_CHECKPOINT} failed: {e}");
            }
        }
        rewritten
    }

    fn persist_configs(&self) -> Result<(), TopicError> {
        let map: BTreeMap<String, BTreeMap<String, String>> = self
            .topics
            .read()
            .by_name
            .values()
            .filter(|t| !t.config.overrides.is_empty())
            .map(|t| (t.name.clone(), t.config.overrides.clone()))
            .collect();
        let bytes = serde_json::to_vec_pretty(&map).map_err(io::Error::other)?;
        Ok(checkpoint::write_atomically(
            &self.data_dir.join(TOPIC_CONFIGS),
            &bytes,
        )?)
    }

    /// Writes the recovery-point and log-start checkpoints; with `flush`, flushes every partition
    /// first (graceful shutdown) so the recovery points reach the log end.
    pub fn checkpoint(&self, flush: bool) -> Result<(), LogError> {
        if flush {
            // Rolled segments still being flushed finish first, so their snapshots are not written
            // after (and beside) the final ones.
            self.flusher.wait_idle();
        }
        let mut recovery = OffsetMap::new();
        let mut starts = OffsetMap::new();
        for topic in self.topics() {
            for p in &topic.partitions {
                let (rp, ls) = if flush {
                    match p.flush_and_snapshot() {
                        Ok(v) => v,
                        Err(e) => {
                            tracing::error!("flush of {}-{} failed: {e}", p.topic, p.index);
                            p.checkpoint_offsets()
                        }
                    }
                } else {
                    p.checkpoint_offsets()
                };
                recovery.insert((topic.name.clone(), p.index), rp);
                starts.insert((topic.name.clone(), p.index), ls);
            }
        }
        checkpoint::write_offset_checkpoint(
            &self.data_dir.join(RECOVERY_POINT_CHECKPOINT),
            &recovery,
        )?;
        checkpoint::write_offset_checkpoint(
            &self.data_dir.join(LOG_START_OFFSET_CHECKPOINT),
            &starts,
        )?;
        Ok(())
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Expires idle producer ids in every partition.
    /// `flush.ms`: fsyncs every partition whose last flush is at least its `flush.ms` old and
    /// that holds unflushed messages (Kafka's `LogManager.flushDirtyLogs`, run every
    /// `log.flush.scheduler.interval.ms`). Returns how many were flushed; a failure is logged
    /// and the rest go on.
    pub fn flush_dirty_logs(&self, now_ms: i64) -> usize {
        let mut flushed = 0;
        for t in self.topics() {
            for p in &t.partitions {
                match p.flush_if_due(now_ms) {
                    Ok(true) => flushed += 1,
                    Ok(false) => {}
                    Err(e) => tracing::error!("flush of {}-{} failed: {e}", p.topic, p.index),
                }
            }
        }
        flushed
    }

    pub fn remove_expired_producers(&self) {
        let now = now_ms();
        // A dynamic broker config may have changed the expiration.
        let expiration_ms = self.effective_config().producer_id_expiration_ms;
        for t in self.topics() {
            for p in &t.partitions {
                p.remove_expired_producers(now, expiration_ms);
            }
        }
    }
}

fn topic_overrides(t: &Option<Arc<Topic>>) -> BTreeMap<String, String> {
    t.as_ref()
        .map(|t| t.config.overrides.clone())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_dir_names_split_at_the_last_dash() {
        assert_eq!(
            parse_partition_dir("my-topic-12"),
            Some(("my-topic".into(), 12))
        );
        assert_eq!(parse_partition_dir("t-0"), Some(("t".into(), 0)));
        assert_eq!(parse_partition_dir("t-x"), None);
        assert_eq!(parse_partition_dir("nodash"), None);
        assert_eq!(parse_partition_dir("t-0.abc-delete"), None);
    }

    /// Open descriptors of this process under `dir` (Linux `/proc/self/fd`).
    fn fds_under(dir: &Path) -> usize {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|target| target.starts_with(dir))
            .count()
    }

    fn holds(bytes: &[u8], value: &[u8]) -> bool {
        bytes.windows(value.len()).any(|w| w == value)
    }

    /// `sluice.log.open.files.max` bounds the descriptors of a broker's partitions, when a topic is
    /// created, while every partition is appended to and read, at the final flush and at reload.
    #[test]
    fn partitions_share_the_configured_descriptor_bound() {
        use crate::config::TimestampType;
        use crate::record::{build_batch, validate_batch};
        use crate::replica::partition::{AppendOrigin, AppendSettings};
        use bytes::Bytes;

        let dir = tempfile::tempdir().unwrap();
        let config = Arc::new(Config {
            data_dir: dir.path().to_path_buf(),
            log_open_files_max: 50,
            ..Config::default()
        });
        let rm = ReplicaManager::open(config.clone()).unwrap();
        assert_eq!(rm.file_cache().capacity(), 50);
        rm.create_topic("t", 200, TopicConfig::defaults(&config))
            .unwrap();
        assert_eq!(fds_under(dir.path()), 50);
        let settings = || AppendSettings {
            timestamp_type: TimestampType::CreateTime,
            flush: false,
            origin: AppendOrigin::Client,
        };
        for round in 0..3i64 {
            for p in 0..200 {
                let value = format!("{p}-{round}");
                let bytes = Bytes::from(build_batch(
                    0,
                    1,
                    (-1, -1, -1),
                    &[(None, Some(value.as_bytes()))],
                ));
                let header = validate_batch(&bytes).unwrap();
                let partition = rm.partition("t", p).unwrap();
                let out = partition.append(&bytes, &header, settings(), 1).unwrap();
                assert_eq!(out.base_offset, round);
            }
            assert!(fds_under(dir.path()) <= 50);
        }
        for p in 0..200 {
            let (slice, _) = rm.partition("t", p).unwrap().read(2, 1 << 20).unwrap();
            let want = format!("{p}-2");
            assert!(holds(&slice.bytes, want.as_bytes()), "partition {p}");
        }
        rm.checkpoint(true).unwrap();
        assert!(fds_under(dir.path()) <= 50);
        drop(rm);
        assert_eq!(fds_under(dir.path()), 0);
        let rm = ReplicaManager::open(config).unwrap();
        assert!(fds_under(dir.path()) <= 50);
        assert_eq!(rm.topic("t").unwrap().partitions.len(), 200);
        let (slice, offsets) = rm.partition("t", 199).unwrap().read(0, 1 << 20).unwrap();
        assert_eq!(offsets.high_watermark, 3);
        assert!(holds(&slice.bytes, b"199-0") && holds(&slice.bytes, b"199-2"));
    }
}
