//! ReplicaManager: the hosting side. It holds the partitions this broker is a replica of (by
//! topic and partition index, any subset of a topic's partitions), and nothing about the cluster:
//! which partitions exist, who leads them and at which epoch is the metadata image's
//! (`metadata::MetadataImage`). Local logs are created, given a leader epoch and deleted by
//! applying an image delta (`hosting.rs`) of a committed metadata entry (`metadata_host.rs`);
//! the controller decides what exists.
//!
//! Thread-safe: the topic table sits behind a `parking_lot::RwLock` taken briefly for lookups and
//! for create/delete; partitions are `Arc`s used without the table lock. On disk a topic is its
//! partition directories `<data>/<topic>-<n>/` (each with `partition.metadata` naming the topic id)
//! plus its config overrides in `<data>/topic-configs.json`. At startup every partition directory
//! found is loaded (a follower's `t-1`, `t-4` as well as a whole topic); the image then comes
//! from the metadata log, and topics it does not name are adopted (`metadata_host.rs`).

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
    REPLICATION_OFFSET_CHECKPOINT,
};
use crate::log::{CompactParams, FileCache, Flusher, LogConfig, LogError};
use crate::metadata::{MetadataImage, MetadataLog};
use crate::replica::fetcher::{FetcherManager, FetcherSettings};
use crate::replica::isr::IsrDriver;
use crate::replica::partition::{Checkpointed, Partition};
use crate::replica::replication::leader::AlterPartitionProposal;

pub(super) const TOPIC_CONFIGS: &str = "topic-configs.json";
/// Where compaction left off per partition (Kafka's file name and format).
pub const CLEANER_CHECKPOINT: &str = "cleaner-offset-checkpoint";
/// Dynamic broker configs (per-broker and cluster-default layers).
pub const BROKER_CONFIGS: &str = "broker-configs.json";

/// One topic as hosted here: id, config and the partitions this broker holds, by index (any
/// subset of the topic's partitions; the topic's partition count is the metadata image's).
/// Immutable once built (config changes and hosting changes replace the whole `Topic`).
pub struct Topic {
    pub name: String,
    pub id: Uuid,
    pub config: Arc<TopicConfig>,
    pub partitions: BTreeMap<i32, Arc<Partition>>,
}

impl Topic {
    /// The hosted partition `index`, if this broker holds it.
    pub fn partition(&self, index: i32) -> Option<&Arc<Partition>> {
        self.partitions.get(&index)
    }
}

#[derive(Default)]
pub(super) struct Topics {
    pub(super) by_name: HashMap<String, Arc<Topic>>,
    pub(super) by_id: HashMap<Uuid, String>,
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

/// Owned by `Broker`; thread-safe (see the module doc).
pub struct ReplicaManager {
    /// The static configuration (defaults, file, command line).
    pub(super) config: Arc<Config>,
    /// This broker's id: the replica id the image's assignments name.
    pub(super) node_id: i32,
    /// The local metadata log whose image says what exists; shared with `Broker`.
    pub(super) metadata: Arc<MetadataLog>,
    /// Static plus dynamic broker configs: the defaults topics inherit. Replaced whole.
    effective: RwLock<Arc<Config>>,
    dynamic: RwLock<DynamicBrokerConfigs>,
    pub(super) data_dir: PathBuf,
    pub(super) topics: RwLock<Topics>,
    /// First dirty offset per compacted partition (`cleaner-offset-checkpoint`).
    cleaner_offsets: Mutex<OffsetMap>,
    /// Serialises create/delete so two creators of one name cannot both build directories.
    pub(super) admin: Mutex<()>,
    /// The bounded cache of open segment descriptors every partition's log shares
    /// (`sluice.log.open.files.max`).
    pub(super) files: FileCache,
    /// The background thread that fsyncs rolled segments and writes their producer snapshots.
    pub(super) flusher: Flusher,
    /// Follower fetching: one task per source broker (`fetcher`).
    pub(super) fetchers: FetcherManager,
    /// AlterPartition proposals of the partitions this broker leads (`isr`).
    pub(super) isr: IsrDriver,
    /// Set when a clean stop's controlled shutdown begins (Kafka's `isInControlledShutdown`):
    /// follower replicas that lose their leader or this broker's ISR membership stop fetching.
    pub(super) in_controlled_shutdown: std::sync::atomic::AtomicBool,
}

pub(super) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

pub(super) fn log_config(c: &TopicConfig, files: &FileCache, flusher: &Flusher) -> LogConfig {
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

pub(super) fn read_partition_metadata(dir: &Path) -> Option<Uuid> {
    checkpoint::read_partition_metadata(&dir.join(PARTITION_METADATA))
        .ok()
        .flatten()
}

pub(super) fn write_partition_metadata(dir: &Path, id: Uuid) -> Result<(), LogError> {
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
    /// Loads every partition found in the data directory, recovering logs as needed, and commits
    /// nothing: the metadata log (the quorum) replays what exists, and topics it does not know
    /// stay hosted but invisible until adopted (`metadata_host.rs`).
    pub fn open_unlogged(
        config: Arc<Config>,
        metadata: Arc<MetadataLog>,
    ) -> Result<ReplicaManager, TopicError> {
        Ok(Self::load(config, metadata)?.0)
    }

    /// Loads the data directory; returns the manager and the stored topic config overrides.
    #[allow(clippy::type_complexity)]
    fn load(
        config: Arc<Config>,
        metadata: Arc<MetadataLog>,
    ) -> Result<(ReplicaManager, BTreeMap<String, BTreeMap<String, String>>), TopicError> {
        let data_dir = config.data_dir.clone();
        std::fs::create_dir_all(&data_dir)?;
        let recovery = read_checkpoint(&data_dir.join(RECOVERY_POINT_CHECKPOINT));
        let starts = read_checkpoint(&data_dir.join(LOG_START_OFFSET_CHECKPOINT));
        let high_watermarks = read_checkpoint(&data_dir.join(REPLICATION_OFFSET_CHECKPOINT));
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
            if name == crate::config::quorum::METADATA_LOG_DIR_NAME
                || entry.path() == config.effective_metadata_log_dir()
            {
                continue; // the quorum's log, not a partition
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
            let mut partitions = BTreeMap::new();
            for (p, dir) in &parts {
                let key = (name.clone(), *p);
                let partition = Partition::open(
                    &name,
                    *p,
                    dir,
                    log_config(&topic_config, &files, &flusher),
                    Checkpointed {
                        recovery_point: recovery.get(&key).copied().unwrap_or(0),
                        log_start_offset: starts.get(&key).copied(),
                        high_watermark: high_watermarks.get(&key).copied(),
                    },
                    now,
                )?;
                if read_partition_metadata(dir).is_none() {
                    write_partition_metadata(dir, id)?;
                }
                partitions.insert(*p, Arc::new(partition));
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
        let manager = ReplicaManager {
            node_id: config.node_id,
            fetchers: FetcherManager::new(metadata.clone()),
            isr: IsrDriver::default(),
            in_controlled_shutdown: std::sync::atomic::AtomicBool::new(false),
            metadata,
            config,
            effective: RwLock::new(effective),
            dynamic: RwLock::new(dynamic),
            cleaner_offsets: Mutex::new(cleaner_offsets),
            data_dir,
            topics: RwLock::new(topics),
            admin: Mutex::new(()),
            files,
            flusher,
        };
        manager.fetchers.configure(FetcherSettings {
            local_id: manager.node_id,
            listener: crate::txn::marker_channel::inter_broker_listener(&manager.config),
            max_wait_ms: manager.config.replica_fetch_wait_max_ms,
            max_bytes: manager.config.replica_fetch_response_max_bytes,
            partition_max_bytes: manager.config.replica_fetch_max_bytes,
            backoff: std::time::Duration::from_millis(manager.config.replica_fetch_backoff_ms),
        });
        Ok((manager, overrides))
    }

    /// A clean stop began its controlled shutdown (Kafka's `beginControlledShutdown`): from now
    /// on a follower replica whose partition has no leader, or whose ISR left this broker,
    /// stops fetching when the image says so (the controller will not take it back into an ISR
    /// before it restarts); leaders keep serving, followers in an ISR keep fetching.
    pub fn begin_controlled_shutdown(&self) {
        self.in_controlled_shutdown
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Follower fetching (configured once the broker joins a multi-broker cluster).
    pub fn fetchers(&self) -> &FetcherManager {
        &self.fetchers
    }

    /// The ISR driver: where AlterPartition proposals go.
    pub fn isr(&self) -> &IsrDriver {
        &self.isr
    }

    /// Sends `proposals` of a partition this broker leads (the topic id from the hosted topic).
    pub fn submit_alter_partitions(
        &self,
        partition: &Arc<Partition>,
        proposals: Vec<AlterPartitionProposal>,
    ) {
        if proposals.is_empty() {
            return;
        }
        if let Some(topic) = self.topic(&partition.topic) {
            self.isr.submit(topic.id, partition, proposals);
        }
    }

    /// The periodic ISR check on every partition led here (Kafka's `isr-expiration` task, every
    /// `replica.lag.time.max.ms / 2`): lagging followers are proposed for removal.
    pub fn maybe_shrink_isrs(&self, now_ms: i64) {
        for topic in self.topics() {
            for partition in topic.partitions.values() {
                let proposals = partition.maybe_shrink_isr(now_ms);
                if !proposals.is_empty() {
                    self.isr.submit(topic.id, partition, proposals);
                }
            }
        }
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

    /// The hosted partition `topic`-`index`.
    pub fn partition(&self, topic: &str, index: i32) -> Option<Arc<Partition>> {
        let t = self.topics.read();
        t.by_name.get(topic)?.partition(index).cloned()
    }

    /// The published metadata image (what exists in the cluster, who leads it).
    pub fn image(&self) -> Arc<MetadataImage> {
        self.metadata.image()
    }

    /// The local metadata log this manager commits topic changes to.
    pub fn metadata(&self) -> &Arc<MetadataLog> {
        &self.metadata
    }

    /// All hosted topics, sorted by name.
    pub fn topics(&self) -> Vec<Arc<Topic>> {
        let mut v: Vec<_> = self.topics.read().by_name.values().cloned().collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
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

    /// Swaps in a new `Topic` with the same name and id, pushing the log settings to every
    /// partition. Caller holds `admin`.
    pub(super) fn replace_topic(
        &self,
        old: &Arc<Topic>,
        config: Arc<TopicConfig>,
        partitions: BTreeMap<i32, Arc<Partition>>,
    ) {
        for p in partitions.values() {
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
            for p in t.partitions.values() {
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
            for p in t.partitions.values() {
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

    pub(super) fn persist_configs(&self) -> Result<(), TopicError> {
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
            for p in topic.partitions.values() {
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

    /// Writes `replication-offset-checkpoint`: every hosted partition's current high watermark
    /// (Kafka's `ReplicaManager.checkpointHighWatermarks`, every
    /// `replica.high.watermark.checkpoint.interval.ms` and at a clean shutdown). A replica opens
    /// with it, so after a restart it serves and reports only what was committed.
    pub fn checkpoint_high_watermarks(&self) -> Result<(), LogError> {
        let mut high_watermarks = OffsetMap::new();
        for topic in self.topics() {
            for p in topic.partitions.values() {
                high_watermarks.insert((topic.name.clone(), p.index), p.offsets().high_watermark);
            }
        }
        checkpoint::write_offset_checkpoint(
            &self.data_dir.join(REPLICATION_OFFSET_CHECKPOINT),
            &high_watermarks,
        )
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
            for p in t.partitions.values() {
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
            for p in t.partitions.values() {
                p.remove_expired_producers(now, expiration_ms);
            }
        }
    }
}

#[cfg(test)]
#[path = "manager_tests.rs"]
mod tests;
