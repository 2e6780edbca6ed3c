//! Sluice: a Kafka-wire-compatible broker.
//!
//! Module map (a module may use the ones below it, never the ones above):
//!
//! - `server`   — listener and connection tasks: framing, pipelining, in-order responses, vectored writes.
//! - `api`      — one file per API family: decode, handle, encode; no sockets, no files.
//! - `protocol` — request-header guards and the table of advertised API versions.
//! - `broker`   — the shared state every connection sees (`Arc<Broker>`).
//! - `client_quota` — client quota enforcement (`producer_byte_rate`, `consumer_byte_rate`):
//!   Kafka's sampled rates and throttle times (pure) and the broker's managers.
//! - `group`    — the classic group coordinator: a pure state machine plus the task that drives it
//!   and keeps its state in `__consumer_offsets`.
//! - `share`    — share groups (KIP-932), the pure core not wired yet: share-partition state
//!   (acquire, acknowledge, locks, SPSO), the share-group coordinator state and assignor.
//! - `txn`      — the transaction coordinator: a pure state machine plus the task that drives it,
//!   writes commit/abort markers and keeps its state in `__transaction_state`.
//! - `controller` — the controller as a pure state machine over metadata records: broker
//!   registration, heartbeats and fencing, placement, leader election, topics, configs.
//! - `cluster`  — identity (cluster id, node id, advertised endpoint), topic rules and configs,
//!   producer-id allocation.
//! - `quorum`   — the controller quorum: the replicated metadata log on raft-rs (driver, durable
//!   journal, voter transport, the `Quorum` task).
//! - `metadata` — metadata log records (Kafka's KRaft record types), shared by controller and image.
//! - `replica`  — `Partition` (leader epoch, high watermark, producer state) and `ReplicaManager`.
//! - `log`      — Kafka's on-disk format: segments, indexes, recovery, checkpoints.
//! - `log_validator` — Kafka's `LogValidator` for client batches: record framing, counts,
//!   compressed sections (streamed, bounded), compacted keys, timestamps; per-record errors.
//! - `record`   — record-batch (magic 2) header parsing, validation and patching, the bounded
//!   decoder of compressed record sections; shared leaf.
//! - `config`   — the validated broker configuration: Kafka's keys from server.properties / TOML,
//!   the `KAFKA_*` environment and flags; listeners.
//! - `storage_tool` — `sluice format` / `random-uuid` (Kafka's `kafka-storage.sh`): a log
//!   directory's `meta.properties` written before the first start.
//! - `health`   — `sluice health`: a blocking ApiVersions + Metadata check (a client, used by `main`).

pub mod alloc_guard;
pub mod api;
pub mod broker;
pub mod client_quota;
pub mod cluster;
pub mod config;
pub mod controller;
pub mod dev_cluster;
pub mod group;
pub mod health;
pub mod internal_topic;
pub mod log;
pub mod log_validator;
pub mod metadata;
pub mod protocol;
pub mod quorum;
pub mod record;
pub mod replica;
pub mod server;
pub mod share;
pub mod share_state;
pub mod storage_tool;
pub mod txn;
