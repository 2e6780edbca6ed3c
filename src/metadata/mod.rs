//! The cluster's metadata as data: the records of the metadata log (modelled on Kafka's KRaft
//! metadata records, `metadata/src/main/resources/common/metadata/*.json` in Apache Kafka).
//!
//! The controller (`controller`) decides and emits these records; the metadata image applies them;
//! the hosting side (`replica`) reacts to what changed. This module holds no state and does no I/O.

pub mod codec;
pub mod records;

pub use records::{
    BrokerEndpoint, ConfigResourceType, MetadataRecord, PartitionChange, PartitionRecord,
    RegisterBroker, NO_LEADER, NO_LEADER_CHANGE,
};
