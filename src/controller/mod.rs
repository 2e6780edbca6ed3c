//! The controller: the cluster's decisions as a pure state machine over metadata records
//! (Kafka's `QuorumController` managers: cluster, replication, producer ids, configs, client
//! quotas, features).
//!
//! Shape: [`ControllerState`] is what the committed records say; [`Controller`] adds the
//! soft state Kafka keeps outside the log (each broker's last heartbeat, the metadata offset it
//! reported, where its controlled shutdown was written) and the settings. Every
//! command handler reads the state and returns an [`Outcome`]: the records to append plus the
//! answer (refusals are [`ControllerError`]s carrying Kafka's error code and message). Handlers
//! never change the replicated state; [`Controller::apply`] does, record by record.
//!
//! Contract for the driver (a Raft apply loop): apply a command's records before handling the
//! next command (Kafka's controller applies at append time and reverts on a failed append), so no
//! two commands decide on the same state; after a failover, call [`Controller::activate`] so
//! every broker's session starts at the new controller's clock. Time (`now_ms`), broker epochs
//! (the offset the RegisterBroker record will get) and randomness (a seed for placement and new
//! topic ids) are arguments. No I/O, no clock, no randomness of its own.

mod alter_partition;
pub mod broker_lifecycle;
pub mod broker_only;
mod brokers;
pub mod channel;
pub mod combined;
mod configs;
pub mod dedicated;
pub mod driver;
pub mod error;
pub mod features;
pub mod lifecycle;
pub mod local;
pub mod metadata_fetch;
pub mod observer;
pub mod partition_change;
pub mod placement;
mod quotas;
mod reassignment;
pub mod remote;
pub mod rpc;
pub mod state;
pub mod tail;
mod topics;

use std::collections::BTreeMap;

use uuid::Uuid;

pub use alter_partition::{
    AlterPartitionAnswer, AlterPartitionAnswers, AlterPartitionItem, AlterPartitionRequest,
    IsrMember, LEADER_RECOVERED, LEADER_RECOVERING, UNKNOWN_BROKER_EPOCH,
};
pub use brokers::{BrokerRegistration, HeartbeatAnswer, HeartbeatRequest, ProducerIdBlock};
pub use configs::{bootstrap_records, ConfigAlteration, BOOTSTRAP_FEATURES};
pub use error::ControllerError;
pub use features::{bootstrap_features, FeatureUpdate, UpgradeType, SUPPORTED_FEATURES};
pub use partition_change::Election;
pub use quotas::{entity_string, QuotaAlteration, QuotaAnswers};
pub use reassignment::OngoingReassignment;
pub use state::{BrokerState, ControllerState, PartitionState, TopicState};
pub use topics::{CreatableTopic, CreatePartitionsTopic, CreatedTopic, TopicPartition};

use crate::metadata::records::{ConfigResourceType, MetadataRecord, PartitionChange};
use partition_change::{without, ChangeBuilder, ElrRules};
use placement::UsableBroker;

/// Records to append and the answer to give once they are committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome<T> {
    pub records: Vec<MetadataRecord>,
    pub answer: T,
}

/// The broker/controller keys the controller decides with (Kafka's names and defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerSettings {
    /// `broker.session.timeout.ms` (9000): a broker silent this long is fenced.
    pub session_timeout_ms: i64,
    /// `default.replication.factor` (1): CreateTopics replication factor -1.
    pub default_replication_factor: i16,
    /// `num.partitions` (1): CreateTopics partitions -1.
    pub default_num_partitions: i32,
    /// `unclean.leader.election.enable` (false): the cluster default; a topic config overrides.
    pub unclean_leader_election_enable: bool,
    /// `min.insync.replicas` (1): the cluster default; a topic config overrides. The controller
    /// needs it for eligible leader replicas (KIP-966).
    pub min_insync_replicas: i32,
}

impl Default for ControllerSettings {
    fn default() -> Self {
        ControllerSettings {
            session_timeout_ms: 9000,
            default_replication_factor: 1,
            default_num_partitions: 1,
            unclean_leader_election_enable: false,
            min_insync_replicas: 1,
        }
    }
}

/// Kafka's feature of eligible leader replicas (KIP-966).
pub const ELR_FEATURE: &str = "eligible.leader.replicas.version";

/// Kafka's cap on the records one user operation may produce (`MAX_RECORDS_PER_USER_OP`).
pub const MAX_RECORDS_PER_USER_OP: usize = 10_000;

/// The controller: replicated state, broker sessions, settings. Owned by one task; not shared.
#[derive(Debug, Clone)]
pub struct Controller {
    state: ControllerState,
    /// Broker id -> last heartbeat (ms); not replicated, as in Kafka's BrokerHeartbeatManager.
    last_contact_ms: BTreeMap<i32, i64>,
    /// Broker id -> the metadata offset its last heartbeat reported (soft state, as Kafka's).
    metadata_offsets: BTreeMap<i32, i64>,
    /// Broker id -> the offset its controlled shutdown's records were written at: it may shut
    /// down once every active broker has applied that far (soft state, as Kafka's).
    controlled_shutdown_offsets: BTreeMap<i32, i64>,
    settings: ControllerSettings,
}

impl Controller {
    pub fn new(settings: ControllerSettings) -> Controller {
        Controller::with_state(settings, ControllerState::default())
    }

    /// A controller whose state is `state` (loaded from a snapshot and the log after it).
    pub fn with_state(settings: ControllerSettings, state: ControllerState) -> Controller {
        Controller {
            state,
            last_contact_ms: BTreeMap::new(),
            metadata_offsets: BTreeMap::new(),
            controlled_shutdown_offsets: BTreeMap::new(),
            settings,
        }
    }

    pub fn state(&self) -> &ControllerState {
        &self.state
    }

    pub fn settings(&self) -> &ControllerSettings {
        &self.settings
    }

    /// Applies one committed record.
    pub fn apply(&mut self, record: &MetadataRecord) {
        self.state.apply(record);
        if let MetadataRecord::UnregisterBroker { broker_id, .. } = record {
            if !self.state.brokers.contains_key(broker_id) {
                self.last_contact_ms.remove(broker_id);
                self.metadata_offsets.remove(broker_id);
                self.controlled_shutdown_offsets.remove(broker_id);
            }
        }
    }

    /// Becoming the active controller: every registered broker counts as heard from at `now_ms`
    /// (Kafka resets its heartbeat tracker the same way), so none is fenced for the failover gap;
    /// the brokers' metadata offsets are unknown until they heartbeat here.
    pub fn activate(&mut self, now_ms: i64) {
        self.last_contact_ms = self.state.brokers.keys().map(|id| (*id, now_ms)).collect();
        self.metadata_offsets.clear();
        self.controlled_shutdown_offsets.clear();
    }

    /// Ends broker `id`'s session (soft state only, no record). A combined node calls it for its
    /// own broker when it starts: that broker's previous incarnation died with the previous
    /// process (the data directory lock proves it), so its session must not make the new
    /// registration a DUPLICATE_BROKER_REGISTRATION until `broker.session.timeout.ms` passes.
    pub fn expire_session(&mut self, id: i32) {
        self.last_contact_ms.remove(&id);
    }

    /// The records that rebuild the replicated state.
    pub fn snapshot(&self) -> Vec<MetadataRecord> {
        self.state.snapshot()
    }

    /// Brokers placement may use: registered and not in controlled shutdown (fenced ones only as
    /// followers).
    fn usable_brokers(&self) -> Vec<UsableBroker> {
        self.state
            .brokers
            .values()
            .filter(|b| !b.in_controlled_shutdown)
            .map(|b| UsableBroker {
                id: b.registration.broker_id,
                rack: b.registration.rack.clone(),
                fenced: b.fenced,
            })
            .collect()
    }

    /// The election a topic's partitions get when their leader is lost.
    fn election_for(&self, topic_name: &str) -> Election {
        let key = "unclean.leader.election.enable";
        let unclean = self
            .state
            .config(ConfigResourceType::Topic, topic_name, key)
            .or_else(|| self.state.config(ConfigResourceType::Broker, "", key))
            .map(|v| v.trim().eq_ignore_ascii_case("true"))
            .unwrap_or(self.settings.unclean_leader_election_enable);
        if unclean {
            Election::Unclean
        } else {
            Election::Online
        }
    }

    /// Whether eligible leader replicas (KIP-966) are on: `eligible.leader.replicas.version` is
    /// finalized at 1 or more (a new cluster's bootstrap level, as Kafka 4.1's).
    pub fn elr_enabled(&self) -> bool {
        self.state
            .features
            .get(ELR_FEATURE)
            .is_some_and(|level| *level >= 1)
    }

    /// KIP-966's inputs for a partition of `topic_name`, or None while ELR is off: the effective
    /// min ISR is min(`min.insync.replicas` of the topic, else the cluster default, the
    /// replication factor), at least 1.
    fn elr_rules(
        &self,
        topic_name: &str,
        p: &PartitionState,
        unclean_shutdown: Option<i32>,
    ) -> Option<ElrRules> {
        if !self.elr_enabled() {
            return None;
        }
        let key = "min.insync.replicas";
        let configured = self
            .state
            .config(ConfigResourceType::Topic, topic_name, key)
            .or_else(|| self.state.config(ConfigResourceType::Broker, "", key))
            .and_then(|v| v.trim().parse::<i64>().ok())
            .unwrap_or(i64::from(self.settings.min_insync_replicas));
        let configured = usize::try_from(configured.max(1)).unwrap_or(usize::MAX);
        Some(ElrRules {
            min_isr: configured.min(p.replicas.len()).max(1),
            unclean_shutdown,
        })
    }

    /// Kafka's `generateLeaderAndIsrUpdates`: for each partition matched by `select`, remove
    /// `remove` from the ISR (never emptying it unless ELR is on) and elect with `acceptable`.
    fn leader_and_isr_updates(
        &self,
        remove: Option<i32>,
        select: &dyn Fn(&PartitionState) -> bool,
        acceptable: &dyn Fn(i32) -> bool,
    ) -> Vec<MetadataRecord> {
        self.leader_and_isr_updates_with(remove, false, select, acceptable)
    }

    /// [`Self::leader_and_isr_updates`]; `unclean_shutdown`: `remove` restarted after an
    /// unclean shutdown, so it also leaves the ELR.
    fn leader_and_isr_updates_with(
        &self,
        remove: Option<i32>,
        unclean_shutdown: bool,
        select: &dyn Fn(&PartitionState) -> bool,
        acceptable: &dyn Fn(i32) -> bool,
    ) -> Vec<MetadataRecord> {
        let mut out = Vec::new();
        for topic in self.state.topics.values() {
            let election = self.election_for(&topic.name);
            for (id, p) in &topic.partitions {
                if !select(p) {
                    continue;
                }
                let target_isr = match remove {
                    Some(b) => without(&p.isr, b),
                    None => p.isr.clone(),
                };
                let builder = ChangeBuilder {
                    topic_id: topic.topic_id,
                    partition_id: *id,
                    partition: p,
                    target_isr,
                    election,
                    assignment: None,
                    elr: self.elr_rules(&topic.name, p, remove.filter(|_| unclean_shutdown)),
                };
                if let Some(change) = builder.build(acceptable) {
                    out.push(MetadataRecord::PartitionChange(change));
                }
            }
        }
        out
    }

    /// The partitions broker `id` leads.
    pub fn leader_count(&self, id: i32) -> usize {
        self.state
            .topics
            .values()
            .flat_map(|t| t.partitions.values())
            .filter(|p| p.leader == id)
            .count()
    }

    /// A fresh topic id not in use (Kafka also refuses the all-zero and the metadata topic id).
    fn new_topic_id(&self, rng: &mut placement::Rng) -> Uuid {
        loop {
            let hi = rng.next_u64();
            let lo = rng.next_u64();
            let id = uuid::Builder::from_random_bytes(
                ((u128::from(hi) << 64) | u128::from(lo)).to_be_bytes(),
            )
            .into_uuid();
            if !self.state.topics.contains_key(&id) {
                return id;
            }
        }
    }
}

/// The PartitionChange records among `records`.
pub fn partition_changes(records: &[MetadataRecord]) -> impl Iterator<Item = &PartitionChange> {
    records.iter().filter_map(|r| match r {
        MetadataRecord::PartitionChange(c) => Some(c),
        _ => None,
    })
}

#[cfg(test)]
mod tests;
