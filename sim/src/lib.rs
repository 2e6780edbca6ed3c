//! Sluice's deterministic simulation of the controller quorum and partition replication
//! (issue 18).
//!
//! N controller voters (3 or 5) and brokers run in one process on simulated time, driven by a
//! seeded event loop; the production code under test is the real `quorum::node::QuorumNode`
//! (raft-rs), the real journal format and recovery of `quorum::storage` over an in-memory disk,
//! the real `Controller` on every voter, the real `MetadataImage` on every broker, and the real
//! replication core (`replica::replication`: `PartitionLeader`, `DelayedProduce`, truncation, the
//! epoch cache) on every partition replica.
//!
//! Modules:
//! - `rng`    — `SimRng`, the only randomness (seeded).
//! - `net`    — addresses, payloads, link faults and weather.
//! - `disk`   — `SimDisk`, the journal in memory with torn writes.
//! - `voter`  — `SimVoter`: quorum node + controller + the driver's contract, synchronously.
//! - `broker` — `SimBroker`: registration, heartbeats, metadata image, its replica role.
//! - `replica` — `Replicas`: a broker's partition logs, the real `PartitionLeader` on leaders,
//!   follower fetching and truncation, acks=all produces.
//! - `check`  — `Checker`, the invariants; `repl_check` — `ReplChecker`, replication's.
//! - `world`  — `World`, the event loop, faults and workload; `run_seed`.
//!
//! Invariant of the whole crate: nothing here (nor in the production modules it runs, see
//! `tests/no_wall_clock.rs`) reads a wall clock or OS randomness; a seed is one schedule.

pub mod broker;
pub mod check;
pub mod disk;
pub mod group_check;
pub mod net;
pub mod repl_check;
pub mod replica;
pub mod rng;
pub mod txn_check;
pub mod voter;
pub mod world;

pub use world::{run_seed, Mutation, Schedule, SeedReport, SimConfig, QUIET_MS};
