//! The hosting side of the replicated metadata log: committed entries (from the controller
//! driver, `controller::driver`) are applied to the published image with the hosting reaction,
//! and topics found on disk that the log does not name are adopted or set aside.
//!
//! Decisions (see ARCHITECTURE.md, invariants):
//! - A committed entry whose hosting reaction fails (a directory that cannot be made) is logged
//!   and the image stays before it: the entry is in the log, so the next start retries it.
//! - A snapshot loaded while running (a follower far behind its leader) replaces the image with
//!   the snapshot's state alone (`MetadataImage::load_snapshot`); the hosting reaction is the
//!   difference from the old image: topics it does not name are removed, partitions that differ
//!   are re-led or followed, config layers that differ are re-applied.
//! - A topic hosted here (its directories exist) that the metadata log does not name: if the
//!   name is free it is **adopted** (its records are written with its on-disk topic id, so an
//!   existing single-node data directory moves to the quorum unchanged); if the log has that name
//!   with another id it is a **stray**: it leaves the hosting table and its directories stay as
//!   they are, with a warning (Kafka deletes strays; we never delete bytes an operator may want).
//!   When the log's topic is then hosted here, each stray directory in its way is renamed
//!   `<topic>-<n>.stray+<id>` (never loaded again, never deleted) before the new log is made.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use uuid::Uuid;

use super::manager::ReplicaManager;
use crate::log::checkpoint;
use crate::metadata::{ConfigResourceType, MetadataRecord, PartitionRecord};

/// The records of topic `name` with partitions `indexes`, each led by `node_id`, its only
/// replica, at epoch 0: how a pre-quorum single-node data directory is adopted.
pub fn topic_records(
    node_id: i32,
    name: &str,
    id: Uuid,
    indexes: impl IntoIterator<Item = i32>,
) -> Vec<MetadataRecord> {
    let mut records = vec![MetadataRecord::Topic {
        name: name.to_string(),
        topic_id: id,
    }];
    records.extend(indexes.into_iter().map(|p| {
        MetadataRecord::Partition(PartitionRecord {
            partition_id: p,
            topic_id: id,
            replicas: vec![node_id],
            isr: vec![node_id],
            removing_replicas: vec![],
            adding_replicas: vec![],
            leader: node_id,
            leader_epoch: 0,
            partition_epoch: 0,
            elr: vec![],
            last_known_elr: vec![],
        })
    }));
    records
}

/// Hosted topics the metadata log does not name.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Unlogged {
    /// Records adopting the topics whose name is free (topic, partitions led here, overrides).
    pub adopt: Vec<MetadataRecord>,
    /// (name, on-disk id, the log's id for that name): kept on disk, not served.
    pub strays: Vec<(String, Uuid, Uuid)>,
}

impl ReplicaManager {
    /// Applies one committed entry's records: the image moves on and hosting reacts.
    pub fn apply_committed(&self, offset: u64, records: Vec<MetadataRecord>) {
        if let Err(e) = self
            .metadata
            .commit(records, |image, delta| self.apply_delta(image, delta))
        {
            tracing::error!(
                "metadata offset {offset}: hosting its records failed ({e}); the published image stays before it"
            );
        }
    }

    /// Loads a snapshot taken at `offset`: the image becomes the snapshot's state alone (what it
    /// no longer names is gone: topics, brokers, configs, quotas), and the hosting side acts on
    /// the difference from the old image.
    pub fn load_committed_snapshot(&self, offset: u64, records: Vec<MetadataRecord>) {
        if let Err(e) = self
            .metadata
            .commit_snapshot(records, |image, delta| self.apply_delta(image, delta))
        {
            tracing::error!(
                "metadata snapshot at offset {offset}: hosting it failed ({e}); the published image stays before it"
            );
        }
    }

    /// The hosted topics the published image does not name (call after the log was replayed).
    pub fn unlogged_topics(&self) -> Unlogged {
        let image = self.image();
        let hosted: BTreeMap<String, _> = self
            .topics
            .read()
            .by_name
            .iter()
            .map(|(n, t)| (n.clone(), t.clone()))
            .collect();
        let mut out = Unlogged::default();
        for (name, topic) in hosted {
            if image.topic_by_id(topic.id).is_some() {
                continue;
            }
            if let Some(logged) = image.topic(&name) {
                out.strays.push((name, topic.id, logged.id));
                continue;
            }
            out.adopt.extend(topic_records(
                self.node_id,
                &name,
                topic.id,
                topic.partitions.keys().copied(),
            ));
            for (key, value) in &topic.config.overrides {
                out.adopt.push(MetadataRecord::Config {
                    resource_type: ConfigResourceType::Topic,
                    resource_name: name.clone(),
                    name: key.clone(),
                    value: Some(value.clone()),
                });
            }
        }
        out
    }

    /// Takes strays out of the hosting table without touching their directories.
    pub fn set_aside_strays(&self, strays: &[(String, Uuid, Uuid)]) {
        let mut topics = self.topics.write();
        for (name, disk_id, logged_id) in strays {
            if topics.by_name.get(name).is_some_and(|t| t.id == *disk_id) {
                topics.by_name.remove(name);
                topics.by_id.remove(disk_id);
                tracing::warn!(
                    "topic {name}: its directories hold topic id {} but the metadata log names {}; \
                     they are kept untouched and not served (move them away to reuse the name)",
                    checkpoint::uuid_to_kafka_string(*disk_id),
                    checkpoint::uuid_to_kafka_string(*logged_id)
                );
            }
        }
    }
}

/// Renames partition directory `dir` (holding topic `id`) to `<dir>.stray+<id hex>`, a name
/// the loader never takes for a partition (`+` is not a topic name character), and warns.
pub(super) fn rename_stray_dir(dir: &Path, id: Uuid) -> std::io::Result<PathBuf> {
    let mut aside = dir.as_os_str().to_owned();
    aside.push(format!(".stray+{}", id.simple()));
    let aside = PathBuf::from(aside);
    std::fs::rename(dir, &aside)?;
    tracing::warn!(
        "{} held topic id {} which the metadata log does not name for it; kept as {}",
        dir.display(),
        checkpoint::uuid_to_kafka_string(id),
        aside.display()
    );
    Ok(aside)
}

impl crate::controller::driver::MetadataApplier for ReplicaManager {
    fn apply(&self, offset: u64, records: Vec<MetadataRecord>) {
        self.apply_committed(offset, records);
    }
    fn load_snapshot(&self, offset: u64, records: Vec<MetadataRecord>) {
        self.load_committed_snapshot(offset, records);
    }
}

#[cfg(test)]
impl ReplicaManager {
    /// Tests: [`open_unlogged`](Self::open_unlogged), then the topics on disk adopted (what a
    /// start does through the controller).
    pub(crate) fn open_adopted(
        config: std::sync::Arc<crate::config::Config>,
        metadata: std::sync::Arc<crate::metadata::MetadataLog>,
    ) -> Result<ReplicaManager, super::manager::TopicError> {
        let rm = ReplicaManager::open_unlogged(config, metadata)?;
        let unlogged = rm.unlogged_topics();
        if !unlogged.adopt.is_empty() {
            rm.apply_committed(0, unlogged.adopt);
        }
        Ok(rm)
    }

    /// Tests: commits a new topic led here with `overrides`, as the controller would decide it.
    pub(crate) fn create_topic_for_test(
        &self,
        name: &str,
        partitions: i32,
        overrides: &[(&str, &str)],
    ) -> std::sync::Arc<super::manager::Topic> {
        let mut records = topic_records(self.node_id, name, Uuid::new_v4(), 0..partitions);
        records.extend(overrides.iter().map(|(k, v)| MetadataRecord::Config {
            resource_type: ConfigResourceType::Topic,
            resource_name: name.to_string(),
            name: k.to_string(),
            value: Some(v.to_string()),
        }));
        self.apply_committed(0, records);
        self.topic(name).expect("the committed topic is hosted")
    }
}

#[cfg(test)]
mod tests;
