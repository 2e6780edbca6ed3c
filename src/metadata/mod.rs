//! The cluster's metadata as data: the records of the metadata log (modelled on Kafka's KRaft
//! metadata records, `metadata/src/main/resources/common/metadata/*.json` in Apache Kafka), the
//! immutable image they build, the delta between two images, and the local metadata log that
//! publishes the image to handlers.
//!
//! The controller (`controller`) decides and emits these records; the metadata image applies them;
//! the hosting side (`replica`) reacts to what changed. `records`, `image` and `delta` hold no
//! shared state and do no I/O; `log` holds the published image.

pub mod codec;
pub mod delta;
pub mod entry;
pub mod image;
pub mod log;
pub mod quotas;
pub mod records;

pub use delta::{LocalChanges, LocalPartition, MetadataDelta};
pub use image::{
    BrokerRegistration, MetadataImage, PartitionLeader, PartitionRegistration, TopicImage,
};
pub use log::MetadataLog;
pub use records::{
    BrokerEndpoint, ConfigResourceType, MetadataRecord, PartitionChange, PartitionRecord,
    RegisterBroker, NO_LEADER, NO_LEADER_CHANGE,
};
