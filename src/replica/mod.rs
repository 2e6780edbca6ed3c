//! Partition replicas: `Partition` (log, producer state, leader epoch, high watermark) and the
//! `ReplicaManager` that hosts the partitions this broker is a replica of, reacting to metadata
//! image deltas (`hosting`) of the committed metadata log (`metadata_host`). Topic admin is the
//! controller's (`controller::topics`); nothing here decides what exists.

pub mod alter_partition;
pub mod fetcher;
mod hosting;
pub mod isr;
pub mod manager;
pub mod metadata_host;
pub mod partition;
pub mod producer_state;
pub mod read_damage;
pub mod replication;

pub use manager::ReplicaManager;
pub use partition::Partition;
