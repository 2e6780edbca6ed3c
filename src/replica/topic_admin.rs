//! Topic admin on this node: creation, deletion, partition growth and topic config overrides,
//! each decided against the metadata image and written as metadata records (Kafka's
//! `TopicRecord`, `PartitionRecord`, `RemoveTopicRecord`, `ConfigRecord`) to the local metadata
//! log. Nothing here touches a directory: the log's commit hands the delta to
//! [`ReplicaManager::apply_delta`] (`hosting.rs`), which creates or deletes the local logs, and
//! publishes the image only once that succeeded.
//!
//! Until the controller (quorum) decides placement, this single node is the only replica and the
//! leader of every partition it creates, at leader epoch 0.

use std::collections::BTreeMap;
use std::sync::Arc;

use uuid::Uuid;

use super::manager::{ReplicaManager, Topic, TopicError};
use crate::cluster::TopicConfig;
use crate::log::checkpoint;
use crate::metadata::{ConfigResourceType, MetadataImage, MetadataRecord, PartitionRecord};

/// The records of a new topic `name` with partitions `indexes`, each led by `node_id`, its only
/// replica.
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
    records.extend(partition_records(node_id, id, indexes));
    records
}

/// One `PartitionRecord` per index: `node_id` the only replica, in sync and leader, epoch 0.
fn partition_records(
    node_id: i32,
    id: Uuid,
    indexes: impl IntoIterator<Item = i32>,
) -> impl Iterator<Item = MetadataRecord> {
    indexes.into_iter().map(move |p| {
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
        })
    })
}

/// `ConfigRecord`s taking topic `name`'s overrides from `old` to `new` (set what differs, delete
/// what is gone).
fn config_records(
    name: &str,
    old: &BTreeMap<String, String>,
    new: &BTreeMap<String, String>,
) -> Vec<MetadataRecord> {
    let record = |key: &str, value: Option<&String>| MetadataRecord::Config {
        resource_type: ConfigResourceType::Topic,
        resource_name: name.to_string(),
        name: key.to_string(),
        value: value.cloned(),
    };
    let mut records: Vec<_> = new
        .iter()
        .filter(|(k, v)| old.get(*k) != Some(*v))
        .map(|(k, v)| record(k, Some(v)))
        .collect();
    records.extend(
        old.keys()
            .filter(|k| !new.contains_key(*k))
            .map(|k| record(k, None)),
    );
    records
}

impl ReplicaManager {
    /// Commits `records` to the metadata log; the hosting side applies their delta first.
    fn commit(&self, records: Vec<MetadataRecord>) -> Result<Arc<MetadataImage>, TopicError> {
        self.metadata
            .commit(records, |image, delta| self.apply_delta(image, delta))
    }

    /// Another existing topic whose name equals `name` once `.` and `_` are unified (Kafka's
    /// collision rule); `name` itself does not count.
    pub fn colliding_topic(&self, name: &str) -> Option<String> {
        if !name.contains(['.', '_']) {
            return None;
        }
        let unified = crate::cluster::unify_collision_chars(name);
        self.image()
            .topics()
            .map(|t| &t.name)
            .find(|t| t.as_str() != name && crate::cluster::unify_collision_chars(t) == unified)
            .cloned()
    }

    /// Creates a topic with `partitions` partitions and a validated config (its overrides become
    /// `ConfigRecord`s). The caller has checked the name and counts. Returns the hosted topic.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        config: TopicConfig,
    ) -> Result<Arc<Topic>, TopicError> {
        let _guard = self.admin.lock();
        if self.image().topic(name).is_some() {
            return Err(TopicError::AlreadyExists(name.to_string()));
        }
        if let Some(existing) = self.colliding_topic(name) {
            return Err(TopicError::Collides {
                name: name.to_string(),
                existing,
            });
        }
        let id = Uuid::new_v4();
        let mut records = topic_records(self.node_id, name, id, 0..partitions);
        records.extend(config_records(name, &BTreeMap::new(), &config.overrides));
        self.commit(records)?;
        tracing::info!(
            "created topic {name} with {partitions} partition(s), id {}",
            checkpoint::uuid_to_kafka_string(id)
        );
        self.topic(name)
            .ok_or_else(|| TopicError::Unknown(name.to_string()))
    }

    /// Removes a topic (`RemoveTopicRecord`): its local partitions leave service at once; their
    /// directories are renamed `*-delete` and removed in the background (and at the next startup
    /// if that did not finish).
    pub fn delete_topic(&self, name: &str) -> Result<Uuid, TopicError> {
        let _guard = self.admin.lock();
        let id = self
            .image()
            .topic(name)
            .map(|t| t.id)
            .ok_or_else(|| TopicError::Unknown(name.to_string()))?;
        self.commit(vec![MetadataRecord::RemoveTopic { topic_id: id }])?;
        tracing::info!("deleted topic {name}");
        Ok(id)
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
        let image = self.image();
        if image.topic(name).is_none() {
            return Err(TopicError::Unknown(name.to_string()));
        }
        let config = TopicConfig::build(&self.effective_config(), overrides)
            .map_err(|e| TopicError::InvalidConfig(e.to_string()))?;
        if validate_only {
            return Ok(());
        }
        let old = image.configs(ConfigResourceType::Topic, name);
        let records = config_records(name, &old, &config.overrides);
        if !records.is_empty() {
            self.commit(records)?;
        }
        tracing::info!(
            "topic {name}: config overrides now {:?}",
            self.image().configs(ConfigResourceType::Topic, name)
        );
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
        let image = self.image();
        let topic = image
            .topic(name)
            .ok_or_else(|| TopicError::Unknown(name.to_string()))?;
        let current = topic.partition_count();
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
        self.commit(partition_records(self.node_id, topic.id, current..count).collect())?;
        tracing::info!("topic {name}: partitions {current} -> {count}");
        Ok(())
    }
}
