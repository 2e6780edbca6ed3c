//! `ControllerState`: the controller's view of the cluster, exactly what the committed metadata
//! records say (brokers, topics, partitions, configs, client quotas, the next producer id, finalized features).
//!
//! Invariants: the state is a pure function of the records applied, in order (`apply` never fails:
//! a record naming an unknown broker, topic or partition, or a stale broker epoch, is ignored, as
//! a well-formed log never holds one); `snapshot()` lists records whose replay builds an equal
//! state. No I/O, no clock.

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::metadata::quotas::ClientQuotas;
use crate::metadata::records::{
    ConfigResourceType, MetadataRecord, PartitionChange, PartitionRecord, RegisterBroker,
    NO_LEADER_CHANGE,
};

/// One registered broker: its latest registration and its fencing state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerState {
    /// The registration record (id, incarnation, epoch, endpoints, features, rack); its
    /// `fenced` / `in_controlled_shutdown` are kept equal to the fields below.
    pub registration: RegisterBroker,
    pub fenced: bool,
    pub in_controlled_shutdown: bool,
}

impl BrokerState {
    /// The broker epoch (Kafka: the offset of its RegisterBroker record).
    pub fn epoch(&self) -> i64 {
        self.registration.broker_epoch
    }
    fn set_flags(&mut self, fenced: Option<bool>, in_controlled_shutdown: Option<bool>) {
        if let Some(f) = fenced {
            self.fenced = f;
            self.registration.fenced = f;
        }
        if let Some(c) = in_controlled_shutdown {
            self.in_controlled_shutdown = c;
            self.registration.in_controlled_shutdown = c;
        }
    }
    /// Kafka's `isActive`: may lead and be added to ISRs.
    pub fn is_active(&self) -> bool {
        !self.fenced && !self.in_controlled_shutdown
    }
}

/// One partition's replica set and leadership (PartitionRegistration in Kafka).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionState {
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub removing_replicas: Vec<i32>,
    pub adding_replicas: Vec<i32>,
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    /// Eligible leader replicas (KIP-966).
    pub elr: Vec<i32>,
    /// The last known ELR (here: the last leader of a partition left without ISR and ELR).
    pub last_known_elr: Vec<i32>,
}

impl PartitionState {
    /// The state after `change` (Kafka's `PartitionRegistration.merge`): a leader field other
    /// than NO_LEADER_CHANGE bumps the leader epoch; every change bumps the partition epoch.
    pub fn merged(&self, change: &PartitionChange) -> PartitionState {
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
}

/// One topic: its name and partitions by index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicState {
    pub name: String,
    pub topic_id: Uuid,
    pub partitions: BTreeMap<i32, PartitionState>,
}

/// The key of a config resource: Kafka's resource type id and the resource name.
pub type ConfigResource = (i8, String);

/// The controller's replicated state, rebuilt by replaying the metadata log.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ControllerState {
    pub brokers: BTreeMap<i32, BrokerState>,
    pub topics: BTreeMap<Uuid, TopicState>,
    pub topic_ids: BTreeMap<String, Uuid>,
    /// Dynamic configs per resource (`(type id, name)`; broker `""` is the cluster default).
    pub configs: BTreeMap<ConfigResource, BTreeMap<String, String>>,
    /// The first producer id of the next block handed out.
    pub next_producer_id: i64,
    /// Finalized feature levels (a level of 0 is "not enabled" and is not kept).
    pub features: BTreeMap<String, i16>,
    /// Client quotas by entity (ClientQuotaRecord).
    pub quotas: ClientQuotas,
}

impl ControllerState {
    /// The state a list of records builds, from empty.
    pub fn replay<'a>(records: impl IntoIterator<Item = &'a MetadataRecord>) -> ControllerState {
        let mut state = ControllerState::default();
        for r in records {
            state.apply(r);
        }
        state
    }

    /// The topic named `name`.
    pub fn topic_by_name(&self, name: &str) -> Option<&TopicState> {
        self.topic_ids.get(name).and_then(|id| self.topics.get(id))
    }

    /// The partition `partition` of topic `topic_id`.
    pub fn partition(&self, topic_id: Uuid, partition: i32) -> Option<&PartitionState> {
        self.topics.get(&topic_id)?.partitions.get(&partition)
    }

    /// Whether broker `id` is registered, unfenced and not shutting down.
    pub fn is_active(&self, id: i32) -> bool {
        self.brokers.get(&id).is_some_and(BrokerState::is_active)
    }

    /// A dynamic config value of a resource.
    pub fn config(&self, kind: ConfigResourceType, name: &str, key: &str) -> Option<&str> {
        self.configs
            .get(&(kind.id(), name.to_string()))?
            .get(key)
            .map(String::as_str)
    }

    fn broker_with_epoch(&mut self, id: i32, epoch: i64) -> Option<&mut BrokerState> {
        self.brokers.get_mut(&id).filter(|b| b.epoch() == epoch)
    }

    /// Applies one committed record.
    pub fn apply(&mut self, record: &MetadataRecord) {
        match record {
            MetadataRecord::RegisterBroker(r) => {
                self.brokers.insert(
                    r.broker_id,
                    BrokerState {
                        registration: r.clone(),
                        fenced: r.fenced,
                        in_controlled_shutdown: r.in_controlled_shutdown,
                    },
                );
            }
            MetadataRecord::UnregisterBroker {
                broker_id,
                broker_epoch,
            } => {
                if self.broker_with_epoch(*broker_id, *broker_epoch).is_some() {
                    self.brokers.remove(broker_id);
                }
            }
            MetadataRecord::FenceBroker { id, epoch } => {
                if let Some(b) = self.broker_with_epoch(*id, *epoch) {
                    b.set_flags(Some(true), None);
                }
            }
            MetadataRecord::UnfenceBroker { id, epoch } => {
                if let Some(b) = self.broker_with_epoch(*id, *epoch) {
                    b.set_flags(Some(false), None);
                }
            }
            MetadataRecord::BrokerRegistrationChange {
                broker_id,
                broker_epoch,
                fenced,
                in_controlled_shutdown,
            } => {
                if let Some(b) = self.broker_with_epoch(*broker_id, *broker_epoch) {
                    b.set_flags(*fenced, *in_controlled_shutdown);
                }
            }
            MetadataRecord::Topic { name, topic_id } => {
                self.topic_ids.insert(name.clone(), *topic_id);
                self.topics.insert(
                    *topic_id,
                    TopicState {
                        name: name.clone(),
                        topic_id: *topic_id,
                        partitions: BTreeMap::new(),
                    },
                );
            }
            MetadataRecord::Partition(p) => {
                if let Some(t) = self.topics.get_mut(&p.topic_id) {
                    t.partitions.insert(
                        p.partition_id,
                        PartitionState {
                            replicas: p.replicas.clone(),
                            isr: p.isr.clone(),
                            removing_replicas: p.removing_replicas.clone(),
                            adding_replicas: p.adding_replicas.clone(),
                            leader: p.leader,
                            leader_epoch: p.leader_epoch,
                            partition_epoch: p.partition_epoch,
                            elr: p.elr.clone(),
                            last_known_elr: p.last_known_elr.clone(),
                        },
                    );
                }
            }
            MetadataRecord::PartitionChange(c) => {
                if let Some(p) = self
                    .topics
                    .get_mut(&c.topic_id)
                    .and_then(|t| t.partitions.get_mut(&c.partition_id))
                {
                    *p = p.merged(c);
                }
            }
            MetadataRecord::RemoveTopic { topic_id } => {
                if let Some(t) = self.topics.remove(topic_id) {
                    self.topic_ids.remove(&t.name);
                    self.configs
                        .remove(&(ConfigResourceType::Topic.id(), t.name));
                }
            }
            MetadataRecord::Config {
                resource_type,
                resource_name,
                name,
                value,
            } => {
                let key = (resource_type.id(), resource_name.clone());
                match value {
                    Some(v) => {
                        self.configs
                            .entry(key)
                            .or_default()
                            .insert(name.clone(), v.clone());
                    }
                    None => {
                        if let Some(m) = self.configs.get_mut(&key) {
                            m.remove(name);
                            if m.is_empty() {
                                self.configs.remove(&key);
                            }
                        }
                    }
                }
            }
            MetadataRecord::ProducerIds {
                next_producer_id, ..
            } => self.next_producer_id = *next_producer_id,
            MetadataRecord::FeatureLevel {
                name,
                feature_level,
            } => {
                if *feature_level == 0 {
                    self.features.remove(name);
                } else {
                    self.features.insert(name.clone(), *feature_level);
                }
            }
            MetadataRecord::ClientQuota(q) => self.quotas.apply(q),
        }
    }

    /// Records that rebuild this state from empty: features (`metadata.version` first, as
    /// Kafka's snapshots begin), brokers, topics with their partitions, configs, client quotas,
    /// producer ids.
    pub fn snapshot(&self) -> Vec<MetadataRecord> {
        let mut out = Vec::new();
        let mut features: Vec<_> = self.features.iter().collect();
        features.sort_by_key(|(name, _)| name.as_str() != "metadata.version");
        for (name, level) in features {
            out.push(MetadataRecord::FeatureLevel {
                name: name.clone(),
                feature_level: *level,
            });
        }
        for b in self.brokers.values() {
            out.push(MetadataRecord::RegisterBroker(b.registration.clone()));
        }
        for t in self.topics.values() {
            out.push(MetadataRecord::Topic {
                name: t.name.clone(),
                topic_id: t.topic_id,
            });
            for (id, p) in &t.partitions {
                out.push(MetadataRecord::Partition(PartitionRecord {
                    partition_id: *id,
                    topic_id: t.topic_id,
                    replicas: p.replicas.clone(),
                    isr: p.isr.clone(),
                    removing_replicas: p.removing_replicas.clone(),
                    adding_replicas: p.adding_replicas.clone(),
                    leader: p.leader,
                    leader_epoch: p.leader_epoch,
                    partition_epoch: p.partition_epoch,
                    elr: p.elr.clone(),
                    last_known_elr: p.last_known_elr.clone(),
                }));
            }
        }
        for ((type_id, resource_name), entries) in &self.configs {
            let Some(resource_type) = resource_type_from_id(*type_id) else {
                continue;
            };
            for (name, value) in entries {
                out.push(MetadataRecord::Config {
                    resource_type,
                    resource_name: resource_name.clone(),
                    name: name.clone(),
                    value: Some(value.clone()),
                });
            }
        }
        out.extend(
            self.quotas
                .records()
                .into_iter()
                .map(MetadataRecord::ClientQuota),
        );
        if self.next_producer_id != 0 {
            out.push(MetadataRecord::ProducerIds {
                broker_id: -1,
                broker_epoch: -1,
                next_producer_id: self.next_producer_id,
            });
        }
        out
    }
}

/// The config resource type of Kafka's id.
pub fn resource_type_from_id(id: i8) -> Option<ConfigResourceType> {
    [
        ConfigResourceType::Topic,
        ConfigResourceType::Broker,
        ConfigResourceType::Group,
    ]
    .into_iter()
    .find(|t| t.id() == id)
}
