//! Partition-level replica state that sits above the log: producer state today; `Partition` and
//! `ReplicaManager` (leader epoch, high watermark) join it later.

pub mod producer_state;
