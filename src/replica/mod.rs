//! Partition replicas: `Partition` (log, producer state, leader epoch, high watermark) and the
//! `ReplicaManager` that hosts the partitions this broker is a replica of, reacting to metadata
//! image deltas (`hosting`); topic admin writes metadata records (`topic_admin`).

mod hosting;
pub mod manager;
pub mod metadata_host;
pub mod partition;
pub mod producer_state;
pub mod read_damage;
pub mod replication;
pub mod topic_admin;

pub use manager::ReplicaManager;
pub use partition::Partition;
