//! Partition replicas: `Partition` (log, producer state, leader epoch, high watermark) and the
//! `ReplicaManager` that hosts them all. On this single node every partition is led here.

pub mod manager;
pub mod partition;
pub mod producer_state;
pub mod read_damage;

pub use manager::ReplicaManager;
pub use partition::Partition;
