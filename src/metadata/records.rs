//! Metadata records, one variant per Kafka metadata record type this cluster uses. Field names
//! follow Kafka's JSON schemas (RegisterBrokerRecord, TopicRecord, PartitionRecord,
//! PartitionChangeRecord, ...), in Rust spelling. Records are facts already decided by the
//! controller: applying one never fails for a well-formed log (an image ignores a record for an
//! unknown topic or broker rather than panicking).

use uuid::Uuid;

pub use super::quotas::ClientQuotaRecord;

/// `leader` of a partition without one (offline, or being elected).
pub const NO_LEADER: i32 = -1;
/// `PartitionChangeRecord.leader` when the leader does not change (Kafka's NO_LEADER_CHANGE).
pub const NO_LEADER_CHANGE: i32 = -2;

/// One listener a broker serves clients (or controllers) on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerEndpoint {
    /// Listener name (`PLAINTEXT`, `CONTROLLER`, ...).
    pub name: String,
    pub host: String,
    pub port: u16,
    /// Kafka's security protocol id (0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT, 3 SASL_SSL).
    pub security_protocol: i16,
}

/// RegisterBrokerRecord: a broker's registration (a new incarnation gets a new epoch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisterBroker {
    pub broker_id: i32,
    pub incarnation_id: Uuid,
    pub broker_epoch: i64,
    pub endpoints: Vec<BrokerEndpoint>,
    /// Supported feature ranges: (name, min, max).
    pub features: Vec<(String, i16, i16)>,
    pub rack: Option<String>,
    /// A registered broker starts fenced until it has caught up with the metadata log.
    pub fenced: bool,
    pub in_controlled_shutdown: bool,
}

/// PartitionRecord: a partition's full state, written when it is created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionRecord {
    pub partition_id: i32,
    pub topic_id: Uuid,
    /// Assigned replicas (AR) in preference order: the first is the preferred leader.
    pub replicas: Vec<i32>,
    /// In-sync replicas.
    pub isr: Vec<i32>,
    pub removing_replicas: Vec<i32>,
    pub adding_replicas: Vec<i32>,
    /// The leader's broker id, or [`NO_LEADER`].
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    /// Eligible leader replicas (KIP-966): out of the ISR since it fell below the minimum, each
    /// holding every record below the high watermark (PartitionRecord v2 tag 1).
    pub elr: Vec<i32>,
    /// The last known ELR, or the last leader of a partition left without ISR and ELR (tag 2).
    pub last_known_elr: Vec<i32>,
}

/// PartitionChangeRecord: what changed in one partition; `None` (or [`NO_LEADER_CHANGE`] for the
/// leader) means unchanged. Every change bumps the partition epoch; a leader change also bumps the
/// leader epoch (Kafka's rule: a change of leader, or of replicas removing the leader).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionChange {
    pub partition_id: i32,
    pub topic_id: Uuid,
    pub isr: Option<Vec<i32>>,
    pub leader: i32,
    pub replicas: Option<Vec<i32>>,
    pub removing_replicas: Option<Vec<i32>>,
    pub adding_replicas: Option<Vec<i32>>,
    /// The new eligible leader replicas (KIP-966, v2 tag 6).
    pub elr: Option<Vec<i32>>,
    /// The new last known ELR (v2 tag 7).
    pub last_known_elr: Option<Vec<i32>>,
}

impl PartitionChange {
    /// A change of nothing yet: every field unchanged.
    pub fn none(topic_id: Uuid, partition_id: i32) -> PartitionChange {
        PartitionChange {
            partition_id,
            topic_id,
            isr: None,
            leader: NO_LEADER_CHANGE,
            replicas: None,
            removing_replicas: None,
            adding_replicas: None,
            elr: None,
            last_known_elr: None,
        }
    }
}

/// ConfigRecord resource types (Kafka's ConfigResource.Type ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConfigResourceType {
    Topic,
    Broker,
    Group,
}

impl ConfigResourceType {
    /// Kafka's id of the resource type (2 TOPIC, 4 BROKER, 32 GROUP).
    pub fn id(self) -> i8 {
        match self {
            ConfigResourceType::Topic => 2,
            ConfigResourceType::Broker => 4,
            ConfigResourceType::Group => 32,
        }
    }
}

/// A metadata log record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetadataRecord {
    RegisterBroker(RegisterBroker),
    UnregisterBroker {
        broker_id: i32,
        broker_epoch: i64,
    },
    FenceBroker {
        id: i32,
        epoch: i64,
    },
    UnfenceBroker {
        id: i32,
        epoch: i64,
    },
    /// BrokerRegistrationChangeRecord (controlled shutdown, fencing changes of a live broker).
    BrokerRegistrationChange {
        broker_id: i32,
        broker_epoch: i64,
        fenced: Option<bool>,
        in_controlled_shutdown: Option<bool>,
    },
    Topic {
        name: String,
        topic_id: Uuid,
    },
    Partition(PartitionRecord),
    PartitionChange(PartitionChange),
    RemoveTopic {
        topic_id: Uuid,
    },
    /// ConfigRecord: `value` None deletes the key. An empty `resource_name` of a broker resource is
    /// the cluster-wide default.
    Config {
        resource_type: ConfigResourceType,
        resource_name: String,
        name: String,
        value: Option<String>,
    },
    /// ProducerIdsRecord: the block `[.., next_producer_id)` is taken by `broker_id`.
    ProducerIds {
        broker_id: i32,
        broker_epoch: i64,
        next_producer_id: i64,
    },
    FeatureLevel {
        name: String,
        feature_level: i16,
    },
    /// ClientQuotaRecord: one key of one client quota entity set or removed.
    ClientQuota(ClientQuotaRecord),
}
