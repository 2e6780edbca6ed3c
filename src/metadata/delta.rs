//! `MetadataDelta`: what one batch of metadata records changed, and what that means for the
//! partitions one broker hosts ([`MetadataDelta::local_changes`], Kafka's
//! `TopicsDelta.localChanges`). Pure: built by `MetadataImage::apply`, read by the hosting side
//! (`replica::ReplicaManager`) to become leader or follower, stop or delete local logs.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use uuid::Uuid;

use super::image::{MetadataImage, TopicImage};
use super::records::ConfigResourceType;

/// What changed between two images. Every set is deduplicated; order does not matter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataDelta {
    /// Brokers registered, unregistered, fenced, unfenced or changed.
    pub changed_brokers: BTreeSet<i32>,
    /// Topics created (their partitions are in `changed_partitions`).
    pub created_topics: BTreeSet<Uuid>,
    /// Partitions created or changed: (topic id, partition index). Of topics that still exist.
    pub changed_partitions: BTreeSet<(Uuid, i32)>,
    /// Topics removed, as they were before removal (a topic created and removed in one delta is
    /// listed here and nowhere else).
    pub deleted_topics: HashMap<Uuid, Arc<TopicImage>>,
    /// Config resources whose overrides changed.
    pub changed_configs: BTreeSet<(ConfigResourceType, String)>,
    /// Features whose finalized level changed.
    pub changed_features: BTreeSet<String>,
}

/// One partition a broker starts or goes on hosting after a delta.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalPartition {
    pub topic: String,
    pub topic_id: Uuid,
    pub partition: i32,
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
}

/// The partitions of one broker a delta touches (Kafka's `LocalReplicaChanges`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalChanges {
    /// Partitions this broker now leads (new ones, or a new leader epoch).
    pub leaders: Vec<LocalPartition>,
    /// Partitions this broker now follows.
    pub followers: Vec<LocalPartition>,
    /// Partitions to stop hosting, with their logs deleted: (topic name, topic id, index). Their
    /// topic was removed, or this broker is no longer an assigned replica.
    pub deletes: Vec<(String, Uuid, i32)>,
}

impl LocalChanges {
    pub fn is_empty(&self) -> bool {
        self.leaders.is_empty() && self.followers.is_empty() && self.deletes.is_empty()
    }
}

impl MetadataDelta {
    pub(super) fn note_broker(&mut self, id: i32) {
        self.changed_brokers.insert(id);
    }

    pub(super) fn note_created_topic(&mut self, id: Uuid) {
        self.created_topics.insert(id);
    }

    pub(super) fn note_partition(&mut self, topic_id: Uuid, index: i32) {
        self.changed_partitions.insert((topic_id, index));
    }

    pub(super) fn note_deleted_topic(&mut self, topic: Arc<TopicImage>) {
        let id = topic.id;
        self.changed_partitions.retain(|(t, _)| *t != id);
        if !self.created_topics.remove(&id) {
            self.deleted_topics.insert(id, topic);
        }
    }

    pub(super) fn note_config(&mut self, key: (ConfigResourceType, String)) {
        self.changed_configs.insert(key);
    }

    pub(super) fn note_feature(&mut self, name: &str) {
        self.changed_features.insert(name.to_string());
    }

    pub fn is_empty(&self) -> bool {
        self.changed_brokers.is_empty()
            && self.created_topics.is_empty()
            && self.changed_partitions.is_empty()
            && self.deleted_topics.is_empty()
            && self.changed_configs.is_empty()
            && self.changed_features.is_empty()
    }

    /// Which of broker `me`'s dynamic config layers changed: (its own, the cluster default).
    pub fn changed_broker_configs(&self, me: i32) -> (bool, bool) {
        let own = (ConfigResourceType::Broker, me.to_string());
        let default = (ConfigResourceType::Broker, String::new());
        (
            self.changed_configs.contains(&own),
            self.changed_configs.contains(&default),
        )
    }

    /// Topic names whose config overrides changed.
    pub fn changed_topic_configs(&self) -> impl Iterator<Item = &str> {
        self.changed_configs
            .iter()
            .filter(|(kind, _)| *kind == ConfigResourceType::Topic)
            .map(|(_, name)| name.as_str())
    }

    /// What this delta means for broker `me`'s hosted partitions, given the image it produced.
    /// A partition whose registration changed but keeps `me` in the same role at the same leader
    /// epoch is listed again (applying it is idempotent: the hosting side skips what it has).
    pub fn local_changes(&self, me: i32, image: &MetadataImage) -> LocalChanges {
        let mut out = LocalChanges::default();
        for topic in self.deleted_topics.values() {
            for (&p, reg) in &topic.partitions {
                if reg.has_replica(me) {
                    out.deletes.push((topic.name.clone(), topic.id, p));
                }
            }
        }
        for &(topic_id, index) in &self.changed_partitions {
            let Some(topic) = image.topic_by_id(topic_id) else {
                continue;
            };
            let Some(reg) = topic.partitions.get(&index) else {
                continue;
            };
            if !reg.has_replica(me) {
                out.deletes.push((topic.name.clone(), topic_id, index));
                continue;
            }
            let local = LocalPartition {
                topic: topic.name.clone(),
                topic_id,
                partition: index,
                leader: reg.leader,
                leader_epoch: reg.leader_epoch,
                partition_epoch: reg.partition_epoch,
            };
            if reg.leader == me {
                out.leaders.push(local);
            } else {
                out.followers.push(local);
            }
        }
        out
    }
}
