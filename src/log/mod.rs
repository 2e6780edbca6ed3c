//! Kafka's on-disk log format: segments, sparse indexes, recovery and checkpoints.
//!
//! Layering: `log` uses `record` (batch headers) and nothing above it; it never sees a request type.
//! It appends record-batch bytes whose offsets the caller assigned and returns whole batches.
//!
//! - [`index`]: `.index` / `.timeindex` entries, in memory and in Kafka's file layout.
//! - [`segment`]: one `.log` file plus its indexes; append, read, truncate, recover.
//! - [`file_cache`]: lazy file handles: the bounded LRU cache of open `.log` descriptors.
//! - [`flush_policy`]: `flush.messages` / `flush.ms` decisions (pure).
//! - [`flusher`]: the background thread that fsyncs rolled segments, then writes their snapshot.
//! - [`records`]: what a read hands out: bytes in memory or a file range sent with `sendfile`.
//! - [`partition_log`]: the segments of one partition directory; roll, read, truncate, flush, open.
//! - [`quarantine`]: where recovery moves the bytes it takes out of a log (never deleted).
//! - `batch_io` (private): `pread`/`pwritev` helpers and the chunked batch-header cursor.
//! - [`cleaner`]: compaction's record rules (latest value per key, tombstones); pure.
//! - [`txn_index`]: `.txnindex`, the aborted transactions of a segment (Kafka's `AbortedTxn` format).
//! - [`retention`]: which whole segments time/size retention removes (pure).
//! - [`checkpoint`]: `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
//!   `meta.properties`, `partition.metadata`.
//! - [`dir_health`]: the data directory goes offline after a failed fsync (Kafka's log dir failure).
//! - [`dir_lock`]: the data directory's exclusive `.lock` (`flock`), taken before anything else.
//! - [`error`]: the [`LogError`] enum.
//!
//! Files are written with positioned writes on `std::fs::File` (page cache); durability comes from
//! explicit `flush` calls, as in Kafka's default configuration.

mod batch_io;
pub mod checkpoint;
pub mod cleaner;
pub mod dir_health;
pub mod dir_lock;
pub mod error;
pub mod file_cache;
pub mod flush_policy;
pub mod flusher;
pub mod index;
pub mod partition_log;
pub mod quarantine;
pub mod records;
pub mod retention;
pub mod segment;
pub mod txn_index;

pub use dir_health::LogDirHealth;
pub use error::LogError;
pub use file_cache::{FileCache, DEFAULT_MAX_OPEN_FILES};
pub use flush_policy::FlushPolicy;
pub use flusher::{FlushJob, Flusher};
pub use partition_log::{
    AppendMeta, CompactOutcome, CompactParams, LogConfig, PartitionLog, ReadSlice, RecordsSlice,
    RecoveryReport,
};
pub use records::{FileRecords, Records, FILE_RECORDS_MIN_BYTES};
pub use segment::ReadLimits;
pub use txn_index::AbortedTxn;
