//! `MetadataImage`: the cluster's metadata as of one offset of the metadata log, immutable.
//!
//! Built by applying [`MetadataRecord`]s in log order ([`MetadataImage::apply`], which also returns
//! the [`MetadataDelta`] of what changed); read by every handler through a cheap `Arc` snapshot
//! (see `metadata::log`). Invariants: an image never changes once built (applying returns a new
//! one that shares unchanged parts by `Arc`); a record naming an unknown topic or broker is
//! ignored, never a panic; every partition of a topic is present once its `PartitionRecord` was
//! applied. This module performs no I/O and reads no clock.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use uuid::Uuid;

use super::delta::MetadataDelta;
use super::quotas::ClientQuotas;
use super::records::{
    BrokerEndpoint, ConfigResourceType, MetadataRecord, PartitionChange, PartitionRecord,
    RegisterBroker, NO_LEADER, NO_LEADER_CHANGE,
};

/// A registered broker as the image knows it (Kafka's `BrokerRegistration`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerRegistration {
    pub id: i32,
    pub incarnation_id: Uuid,
    pub epoch: i64,
    /// One endpoint per listener name, in registration order.
    pub endpoints: Vec<BrokerEndpoint>,
    pub rack: Option<String>,
    pub fenced: bool,
    pub in_controlled_shutdown: bool,
}

impl BrokerRegistration {
    /// The endpoint of listener `name` (case as registered, Kafka's upper-case names).
    pub fn endpoint(&self, name: &str) -> Option<&BrokerEndpoint> {
        self.endpoints.iter().find(|e| e.name == name)
    }
}

/// One partition's registration (Kafka's `PartitionRegistration`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionRegistration {
    /// Assigned replicas in preference order (the first is the preferred leader).
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub removing_replicas: Vec<i32>,
    pub adding_replicas: Vec<i32>,
    /// The leader's broker id, or [`NO_LEADER`].
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    /// Eligible leader replicas (KIP-966).
    pub elr: Vec<i32>,
    /// The last known ELR.
    pub last_known_elr: Vec<i32>,
}

impl PartitionRegistration {
    fn from_record(r: &PartitionRecord) -> PartitionRegistration {
        PartitionRegistration {
            replicas: r.replicas.clone(),
            isr: r.isr.clone(),
            removing_replicas: r.removing_replicas.clone(),
            adding_replicas: r.adding_replicas.clone(),
            leader: r.leader,
            leader_epoch: r.leader_epoch,
            partition_epoch: r.partition_epoch,
            elr: r.elr.clone(),
            last_known_elr: r.last_known_elr.clone(),
        }
    }

    /// This registration after `change` (Kafka's `PartitionRegistration.merge`): every change
    /// bumps the partition epoch; a leader field other than NO_LEADER_CHANGE bumps the leader
    /// epoch, even when it names the current leader (as `ControllerState` does).
    fn merge(&self, change: &PartitionChange) -> PartitionRegistration {
        let mut next = self.clone();
        if let Some(isr) = &change.isr {
            next.isr = isr.clone();
        }
        if let Some(replicas) = &change.replicas {
            next.replicas = replicas.clone();
        }
        if let Some(r) = &change.removing_replicas {
            next.removing_replicas = r.clone();
        }
        if let Some(a) = &change.adding_replicas {
            next.adding_replicas = a.clone();
        }
        if let Some(e) = &change.elr {
            next.elr = e.clone();
        }
        if let Some(e) = &change.last_known_elr {
            next.last_known_elr = e.clone();
        }
        if change.leader != NO_LEADER_CHANGE {
            next.leader = change.leader;
            next.leader_epoch = self.leader_epoch.saturating_add(1);
        }
        next.partition_epoch = self.partition_epoch.saturating_add(1);
        next
    }

    /// Whether `broker` is an assigned replica.
    pub fn has_replica(&self, broker: i32) -> bool {
        self.replicas.contains(&broker)
    }
}

/// One topic: name, id and its partitions by index (a sparse map is never expected, but an index
/// is looked up, never assumed dense).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicImage {
    pub name: String,
    pub id: Uuid,
    pub partitions: BTreeMap<i32, PartitionRegistration>,
}

impl TopicImage {
    /// The number of partitions (indexes are 0..count once the controller created them).
    pub fn partition_count(&self) -> i32 {
        i32::try_from(self.partitions.len()).unwrap_or(i32::MAX)
    }
}

/// Who answers for a partition, as a handler of Produce/Fetch/ListOffsets asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionLeader {
    /// This broker leads it, at this leader epoch.
    Local { leader_epoch: i32 },
    /// Another broker leads it (NOT_LEADER_OR_FOLLOWER here).
    Remote { leader: i32, leader_epoch: i32 },
    /// No leader right now (LEADER_NOT_AVAILABLE / NOT_LEADER_OR_FOLLOWER, by API).
    None,
    /// No such topic or partition (UNKNOWN_TOPIC_OR_PARTITION).
    Unknown,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct TopicsImage {
    by_name: BTreeMap<String, Arc<TopicImage>>,
    by_id: HashMap<Uuid, String>,
}

/// Config overrides by resource (a broker resource named "" is the cluster-wide default).
pub type ConfigsImage = BTreeMap<(ConfigResourceType, String), BTreeMap<String, String>>;

/// The metadata of the cluster as of [`MetadataImage::offset`]. Cheap to clone (shared parts are
/// `Arc`s); immutable, so any number of threads read one without locks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataImage {
    /// How many records have been applied (the next record's offset in the metadata log).
    pub offset: u64,
    /// The cluster id (from `meta.properties` / `CLUSTER_ID`, not a record).
    pub cluster_id: String,
    /// The active controller's node id, -1 while unknown (from the quorum, not a record).
    pub controller_id: i32,
    brokers: Arc<BTreeMap<i32, BrokerRegistration>>,
    topics: Arc<TopicsImage>,
    configs: Arc<ConfigsImage>,
    features: Arc<BTreeMap<String, i16>>,
    quotas: Arc<ClientQuotas>,
    /// The next producer id the controller hands out (ProducerIdsRecord), -1 before any.
    pub next_producer_id: i64,
}

impl MetadataImage {
    /// An image with no records applied.
    pub fn empty(cluster_id: impl Into<String>, controller_id: i32) -> MetadataImage {
        MetadataImage {
            offset: 0,
            cluster_id: cluster_id.into(),
            controller_id,
            brokers: Arc::default(),
            topics: Arc::default(),
            configs: Arc::default(),
            features: Arc::default(),
            quotas: Arc::default(),
            next_producer_id: -1,
        }
    }

    /// This image with another active controller (a quorum leader change).
    pub fn with_controller(&self, controller_id: i32) -> MetadataImage {
        MetadataImage {
            controller_id,
            ..self.clone()
        }
    }

    pub fn broker(&self, id: i32) -> Option<&BrokerRegistration> {
        self.brokers.get(&id)
    }

    /// Every registered broker, by id.
    pub fn brokers(&self) -> impl Iterator<Item = &BrokerRegistration> {
        self.brokers.values()
    }

    /// Registered brokers that are not fenced (what Metadata lists to clients), by id.
    pub fn live_brokers(&self) -> impl Iterator<Item = &BrokerRegistration> {
        self.brokers.values().filter(|b| !b.fenced)
    }

    pub fn topic(&self, name: &str) -> Option<&Arc<TopicImage>> {
        self.topics.by_name.get(name)
    }

    pub fn topic_by_id(&self, id: Uuid) -> Option<&Arc<TopicImage>> {
        self.topics
            .by_id
            .get(&id)
            .and_then(|n| self.topics.by_name.get(n))
    }

    /// Every topic, sorted by name.
    pub fn topics(&self) -> impl Iterator<Item = &Arc<TopicImage>> {
        self.topics.by_name.values()
    }

    pub fn partition(&self, topic: &str, index: i32) -> Option<&PartitionRegistration> {
        self.topic(topic)?.partitions.get(&index)
    }

    /// Who leads `topic`-`index`, seen from broker `me`.
    pub fn leader_for(&self, me: i32, topic: &str, index: i32) -> PartitionLeader {
        match self.partition(topic, index) {
            None => PartitionLeader::Unknown,
            Some(p) if p.leader == NO_LEADER => PartitionLeader::None,
            Some(p) if p.leader == me => PartitionLeader::Local {
                leader_epoch: p.leader_epoch,
            },
            Some(p) => PartitionLeader::Remote {
                leader: p.leader,
                leader_epoch: p.leader_epoch,
            },
        }
    }

    /// The config overrides of a resource (empty when none).
    pub fn configs(&self, kind: ConfigResourceType, name: &str) -> BTreeMap<String, String> {
        self.configs
            .get(&(kind, name.to_string()))
            .cloned()
            .unwrap_or_default()
    }

    /// The names of the resources of `kind` that have config overrides, sorted.
    pub fn config_names(&self, kind: ConfigResourceType) -> impl Iterator<Item = String> + '_ {
        self.configs
            .iter()
            .filter(move |((k, _), c)| *k == kind && !c.is_empty())
            .map(|((_, name), _)| name.clone())
    }

    /// Every feature a FeatureLevelRecord named, with its level (0: disabled), by name.
    pub fn features(&self) -> impl Iterator<Item = (&str, i16)> {
        self.features.iter().map(|(n, l)| (n.as_str(), *l))
    }

    /// A feature's finalized level, 0 (disabled) when no record names it.
    pub fn finalized_level(&self, name: &str) -> i16 {
        self.feature_level(name).unwrap_or(0)
    }

    /// A finalized feature's level (FeatureLevelRecord).
    pub fn feature_level(&self, name: &str) -> Option<i16> {
        self.features.get(name).copied()
    }

    /// Client quotas by entity (what DescribeClientQuotas answers from).
    pub fn client_quotas(&self) -> &ClientQuotas {
        &self.quotas
    }

    /// The client quotas as shared with the images before and after this one: the same `Arc`
    /// until a ClientQuotaRecord changes them (`client_quota` rebuilds its tables on a change).
    pub fn client_quotas_shared(&self) -> &Arc<ClientQuotas> {
        &self.quotas
    }

    /// Applies `records` in order: the new image and what changed.
    pub fn apply(&self, records: &[MetadataRecord]) -> (MetadataImage, MetadataDelta) {
        let mut next = self.clone();
        let mut delta = MetadataDelta::default();
        for r in records {
            next.apply_one(r, &mut delta);
            next.offset += 1;
        }
        (next, delta)
    }

    fn apply_one(&mut self, record: &MetadataRecord, delta: &mut MetadataDelta) {
        match record {
            MetadataRecord::RegisterBroker(r) => self.register(r, delta),
            MetadataRecord::UnregisterBroker { broker_id, .. } => {
                if Arc::make_mut(&mut self.brokers).remove(broker_id).is_some() {
                    delta.note_broker(*broker_id);
                }
            }
            MetadataRecord::FenceBroker { id, epoch } => {
                self.change_broker(*id, *epoch, Some(true), None, delta)
            }
            MetadataRecord::UnfenceBroker { id, epoch } => {
                self.change_broker(*id, *epoch, Some(false), None, delta)
            }
            MetadataRecord::BrokerRegistrationChange {
                broker_id,
                broker_epoch,
                fenced,
                in_controlled_shutdown,
            } => self.change_broker(
                *broker_id,
                *broker_epoch,
                *fenced,
                *in_controlled_shutdown,
                delta,
            ),
            MetadataRecord::Topic { name, topic_id } => {
                let topics = Arc::make_mut(&mut self.topics);
                if topics.by_name.contains_key(name) || topics.by_id.contains_key(topic_id) {
                    return;
                }
                topics.by_id.insert(*topic_id, name.clone());
                topics.by_name.insert(
                    name.clone(),
                    Arc::new(TopicImage {
                        name: name.clone(),
                        id: *topic_id,
                        partitions: BTreeMap::new(),
                    }),
                );
                delta.note_created_topic(*topic_id);
            }
            MetadataRecord::Partition(r) => {
                let registration = PartitionRegistration::from_record(r);
                if self.update_partition(r.topic_id, r.partition_id, |_| Some(registration)) {
                    delta.note_partition(r.topic_id, r.partition_id);
                }
            }
            MetadataRecord::PartitionChange(c) => {
                let changed =
                    self.update_partition(c.topic_id, c.partition_id, |old| Some(old?.merge(c)));
                if changed {
                    delta.note_partition(c.topic_id, c.partition_id);
                }
            }
            MetadataRecord::RemoveTopic { topic_id } => {
                let topics = Arc::make_mut(&mut self.topics);
                let Some(name) = topics.by_id.remove(topic_id) else {
                    return;
                };
                if let Some(t) = topics.by_name.remove(&name) {
                    Arc::make_mut(&mut self.configs)
                        .remove(&(ConfigResourceType::Topic, name.clone()));
                    delta.note_deleted_topic(t);
                }
            }
            MetadataRecord::Config {
                resource_type,
                resource_name,
                name,
                value,
            } => {
                let key = (*resource_type, resource_name.clone());
                let configs = Arc::make_mut(&mut self.configs);
                let entry = configs.entry(key.clone()).or_default();
                match value {
                    Some(v) => {
                        entry.insert(name.clone(), v.clone());
                    }
                    None => {
                        entry.remove(name);
                    }
                }
                if entry.is_empty() {
                    configs.remove(&key);
                }
                delta.note_config(key);
            }
            MetadataRecord::ProducerIds {
                next_producer_id, ..
            } => {
                self.next_producer_id = self.next_producer_id.max(*next_producer_id);
            }
            MetadataRecord::FeatureLevel {
                name,
                feature_level,
            } => {
                Arc::make_mut(&mut self.features).insert(name.clone(), *feature_level);
                delta.note_feature(name);
            }
            MetadataRecord::ClientQuota(q) => Arc::make_mut(&mut self.quotas).apply(q),
        }
    }

    fn register(&mut self, r: &RegisterBroker, delta: &mut MetadataDelta) {
        Arc::make_mut(&mut self.brokers).insert(
            r.broker_id,
            BrokerRegistration {
                id: r.broker_id,
                incarnation_id: r.incarnation_id,
                epoch: r.broker_epoch,
                endpoints: r.endpoints.clone(),
                rack: r.rack.clone(),
                fenced: r.fenced,
                in_controlled_shutdown: r.in_controlled_shutdown,
            },
        );
        delta.note_broker(r.broker_id);
    }

    /// A fencing or shutdown change; a record of another incarnation (epoch) is ignored.
    fn change_broker(
        &mut self,
        id: i32,
        epoch: i64,
        fenced: Option<bool>,
        in_controlled_shutdown: Option<bool>,
        delta: &mut MetadataDelta,
    ) {
        if self.brokers.get(&id).is_none_or(|b| b.epoch != epoch) {
            return;
        }
        let brokers = Arc::make_mut(&mut self.brokers);
        let Some(b) = brokers.get_mut(&id) else {
            return;
        };
        if let Some(f) = fenced {
            b.fenced = f;
        }
        if let Some(s) = in_controlled_shutdown {
            b.in_controlled_shutdown = s;
        }
        delta.note_broker(id);
    }

    /// Replaces one partition's registration by `f(old)`; false when the topic is unknown or `f`
    /// declined (a change for a partition that does not exist).
    fn update_partition(
        &mut self,
        topic_id: Uuid,
        index: i32,
        f: impl FnOnce(Option<&PartitionRegistration>) -> Option<PartitionRegistration>,
    ) -> bool {
        let Some(name) = self.topics.by_id.get(&topic_id).cloned() else {
            return false;
        };
        let topics = Arc::make_mut(&mut self.topics);
        let Some(topic) = topics.by_name.get_mut(&name) else {
            return false;
        };
        let Some(next) = f(topic.partitions.get(&index)) else {
            return false;
        };
        Arc::make_mut(topic).partitions.insert(index, next);
        true
    }
}

#[path = "image_snapshot.rs"]
mod snapshot;

#[cfg(test)]
#[path = "image_tests.rs"]
mod tests;
