//! Sluice: a Kafka-wire-compatible broker.
//!
//! Module map (a module may use the ones below it, never the ones above):
//!
//! - `server`  — listener and connection tasks: framing, pipelining, in-order responses, vectored writes.
//! - `api`     — one file per API family: `handle(&Ctx, request) -> response`; no sockets, no files.
//! - `protocol`— frame guards, request-header decode, ApiVersions table and fallback.
//! - `cluster` — the metadata image: cluster id, topics, partitions, topic ids, topic configs.
//! - `replica` — `Partition` (leader epoch, high watermark, producer state) and `ReplicaManager`.
//! - `log`     — Kafka's on-disk format: segments, indexes, recovery, checkpoints.
//! - `record`  — record-batch (magic 2) header parsing, validation and patching; shared leaf.
//! - `config`  — the validated broker configuration.

pub mod log;
pub mod record;
