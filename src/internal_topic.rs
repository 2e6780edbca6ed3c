//! The coordinators' internal topics (`__consumer_offsets`, `__transaction_state`): created on first
//! use with fixed overrides, written with batches the broker builds itself (coordinator origin,
//! so no client sequence checks), and replayed record by record at startup. Shared by the group
//! and transaction coordinator drivers.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;

use bytes::Bytes;

use crate::broker::Broker;
use crate::cluster::TopicConfig;
use crate::record::{BatchHeader, ControlType, KeyValue};
use crate::replica::manager::Topic;
use crate::replica::partition::{AppendError, AppendOrigin, AppendSettings};
use crate::replica::replication::acks::{DelayedProduce, DelayedProduceOutcome};
use crate::replica::Partition;

/// An internal topic as its coordinator creates it.
pub struct InternalTopic {
    pub name: &'static str,
    pub partitions: i32,
    /// Kafka's `offsets.topic.replication.factor` / `transaction.state.log.replication.factor`.
    pub replication_factor: i16,
    /// Overrides on top of the broker's defaults.
    pub overrides: Vec<(&'static str, String)>,
}

/// What creating an internal topic needs.
enum Prepared {
    Exists(Arc<Topic>),
    Create(crate::controller::CreatableTopic),
    Refused,
}

fn prepare(broker: &Broker, spec: &InternalTopic) -> Prepared {
    if let Some(t) = broker.replicas.topic(spec.name) {
        return Prepared::Exists(t);
    }
    let overrides: BTreeMap<String, String> = spec
        .overrides
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let config = match TopicConfig::build(&broker.config, overrides) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("{} config: {e}", spec.name);
            return Prepared::Refused;
        }
    };
    let mut wanted = crate::api::topics::creatable(spec.name, spec.partitions, &config.overrides);
    // The controller refuses a factor above the live brokers (INVALID_REPLICATION_FACTOR), as
    // Kafka's does: the coordinator stays unavailable until the factor is lowered.
    wanted.replication_factor = spec.replication_factor;
    Prepared::Create(wanted)
}

fn created(
    broker: &Broker,
    name: &str,
    mut decided: crate::api::topics::Decided,
) -> Option<Arc<Topic>> {
    match decided.remove(name) {
        Some(Ok(_)) => {}
        // Created meanwhile by another request: the image has it.
        Some(Err((code, _))) if code == crate::api::error::TOPIC_ALREADY_EXISTS => {}
        Some(Err((code, message))) => {
            tracing::debug!("cannot create {name}: error {code}: {message}");
            return None;
        }
        None => return None,
    }
    broker.replicas.topic(name)
}

/// Returns the internal topic, creating it through the controller if it does not exist yet.
/// None (with one log line) when it cannot be created.
pub async fn ensure(broker: &Broker, spec: InternalTopic) -> Option<Arc<Topic>> {
    match prepare(broker, &spec) {
        Prepared::Exists(t) => Some(t),
        Prepared::Refused => None,
        Prepared::Create(wanted) => {
            let decided = crate::api::topics::create_in_controller(broker, vec![wanted]).await;
            created(broker, spec.name, decided)
        }
    }
}

/// [`ensure`] for a caller on tokio's blocking pool (Metadata auto-creation): never call it on
/// a runtime worker.
pub fn ensure_blocking(broker: &Broker, spec: InternalTopic) -> Option<Arc<Topic>> {
    match prepare(broker, &spec) {
        Prepared::Exists(t) => Some(t),
        Prepared::Refused => None,
        Prepared::Create(wanted) => {
            let decided = crate::api::topics::create_in_controller_blocking(broker, vec![wanted]);
            created(broker, spec.name, decided)
        }
    }
}

/// Why a coordinator batch was not appended.
#[derive(Debug, thiserror::Error)]
pub enum AppendFailure {
    #[error("built an invalid batch: {0}")]
    Invalid(String),
    /// The partition the key maps to is not hosted here (its log is elsewhere).
    #[error("partition {0} is not hosted on this broker")]
    NotHosted(i32),
    /// The partition is hosted here as a follower: its leader is another broker, and a record
    /// written here would diverge from the leader's log (the follower truncates it at its next
    /// fetch). Kafka's NOT_LEADER_OR_FOLLOWER, which its coordinators answer as NOT_COORDINATOR.
    #[error("partition {0} is led by broker {1}, not this one")]
    NotLeader(i32, i32),
    /// Fewer in-sync replicas than the topic's effective `min.insync.replicas`: coordinators
    /// write as acks=all, so the append is refused before it happens (Kafka's
    /// NOT_ENOUGH_REPLICAS, which its coordinators answer as COORDINATOR_NOT_AVAILABLE).
    #[error("the ISR ({isr_size}) is below min.insync.replicas ({min_isr})")]
    NotEnoughReplicas { isr_size: usize, min_isr: usize },
    #[error(transparent)]
    Append(#[from] AppendError),
}

/// A coordinator batch in its partition's log, committed once the partition's high watermark
/// passes `last_offset` (replicated to the ISR; at once on a partition without followers).
#[derive(Clone)]
pub struct Written {
    pub partition: Arc<Partition>,
    pub last_offset: i64,
}

/// Why a coordinator write was not committed: the wait timed out (Kafka's coordinators answer
/// COORDINATOR_NOT_AVAILABLE), or this broker stopped leading the partition (NOT_COORDINATOR).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotCommitted {
    TimedOut,
    NotLeader,
}

/// Whether every batch of `written` is committed already (no wait needed).
pub fn all_committed(written: &[Written]) -> bool {
    written
        .iter()
        .all(|w| w.partition.committed_through(w.last_offset))
}

/// Waits until every batch of `written` is committed, at most `timeout_ms` from now. As Kafka's
/// coordinators: a write completes when the high watermark passes it, whatever the ISR's size (a
/// committed record survives the leader's loss; `min.insync.replicas` is not checked after the
/// append).
pub async fn committed(written: &[Written], timeout_ms: i64) -> Result<(), NotCommitted> {
    let deadline = crate::broker::now_ms() + timeout_ms;
    for w in written {
        let delayed = DelayedProduce {
            required_offset: w.last_offset + 1,
            deadline_ms: deadline,
        };
        match w.partition.wait_replicated(delayed).await {
            DelayedProduceOutcome::Completed
            | DelayedProduceOutcome::NotEnoughReplicasAfterAppend => {}
            DelayedProduceOutcome::RequestTimedOut => return Err(NotCommitted::TimedOut),
            DelayedProduceOutcome::NotLeaderOrFollower | DelayedProduceOutcome::Pending => {
                return Err(NotCommitted::NotLeader)
            }
        }
    }
    Ok(())
}

/// Builds one uncompressed batch of `records` (transactional when `producer` is given: its id and
/// epoch, base sequence -1) and appends it with coordinator origin, as acks=all: refused when the
/// ISR is below the topic's effective `min.insync.replicas`.
pub fn append(
    broker: &Broker,
    partition: &Arc<Partition>,
    records: &[KeyValue<'_>],
    producer: Option<(i64, i16)>,
    now: i64,
) -> Result<Written, AppendFailure> {
    let batch = Bytes::from(match producer {
        None => crate::record::build_batch(0, now, (-1, -1, -1), records),
        Some((id, epoch)) => {
            crate::record::build_transactional_batch(now, (id, epoch, -1), records)
        }
    });
    let header =
        crate::record::validate_batch(&batch).map_err(|e| AppendFailure::Invalid(e.to_string()))?;
    if let Some(leader) = partition.follower_of() {
        return Err(AppendFailure::NotLeader(partition.index, leader));
    }
    partition
        .check_acks_all_append()
        .map_err(|e| AppendFailure::NotEnoughReplicas {
            isr_size: e.isr_size,
            min_isr: e.min_isr,
        })?;
    let settings = AppendSettings {
        timestamp_type: crate::config::TimestampType::CreateTime,
        flush: broker.config.flush_every_message,
        origin: AppendOrigin::Coordinator,
    };
    let outcome = partition.append(&batch, &header, settings, now)?;
    Ok(Written {
        partition: partition.clone(),
        last_offset: outcome.base_offset + i64::from(header.last_offset_delta),
    })
}

/// The number of partitions of `topic` as the metadata image has it (what keys hash over; this
/// broker may host fewer).
pub fn partition_count(broker: &Broker, topic: &Topic) -> i32 {
    broker
        .image()
        .topic(&topic.name)
        .map_or(topic.partitions.len() as i32, |t| t.partition_count())
}

/// What [`append_by_key`] did: the batches in the log and the partitions that failed.
#[derive(Default)]
pub struct Appended {
    pub written: Vec<Written>,
    pub failures: Vec<AppendFailure>,
}

/// Appends `records` (partition key, record) to `topic` as one plain batch per partition, each
/// record in the partition its key hashes to (Java's string hash, as Kafka). Every failure is
/// logged once with its partition.
pub fn append_by_key<'a>(
    broker: &Broker,
    topic: &Topic,
    records: impl IntoIterator<Item = (&'a str, KeyValue<'a>)>,
    now: i64,
) -> Appended {
    let n = partition_count(broker, topic);
    let mut by_partition: HashMap<i32, Vec<KeyValue<'a>>> = HashMap::new();
    for (partition_key, record) in records {
        by_partition
            .entry(crate::group::records::partition_for(partition_key, n))
            .or_default()
            .push(record);
    }
    let mut appended = Appended::default();
    for (p, kvs) in by_partition {
        let result = match topic.partition(p) {
            Some(partition) => append(broker, partition, &kvs, None, now),
            None => Err(AppendFailure::NotHosted(p)),
        };
        match result {
            Ok(w) => appended.written.push(w),
            Err(e) => {
                // Not led here: the caller's answer (NOT_COORDINATOR) or routing says so.
                if matches!(
                    e,
                    AppendFailure::NotHosted(_) | AppendFailure::NotLeader(..)
                ) {
                    tracing::debug!("appending to {}-{p}: {e}", topic.name);
                } else {
                    tracing::error!("appending to {}-{p}: {e}", topic.name);
                }
                appended.failures.push(e);
            }
        }
    }
    appended
}

/// One item of an internal topic's log, as [`replay`] hands it over.
pub enum Replayed<'a> {
    /// A keyed record of an uncompressed data batch (records without a key are skipped).
    Record {
        key: &'a [u8],
        value: Option<&'a [u8]>,
    },
    /// A control batch (a transaction marker); None when its control record cannot be read.
    Marker(Option<ControlType>),
}

/// Reads every partition of the internal topic `name` (nothing if it does not exist) from its log
/// start, in offset order, and calls `f(partition, batch header, item)` for every keyed record and
/// every control batch. Returns how many records it handed over. A read error ends that partition
/// and an unreadable data batch (compressed or corrupt) is skipped, each with one log line.
pub fn replay(
    broker: &Broker,
    name: &str,
    f: impl FnMut(i32, &BatchHeader, Replayed<'_>),
) -> usize {
    replay_where(broker, name, |_| true, f)
}

/// [`replay`] of the partitions `only` selects (a coordinator that gained leadership of them
/// reloads only those).
pub fn replay_where(
    broker: &Broker,
    name: &str,
    only: impl Fn(i32) -> bool,
    mut f: impl FnMut(i32, &BatchHeader, Replayed<'_>),
) -> usize {
    let Some(topic) = broker.replicas.topic(name) else {
        return 0;
    };
    topic
        .partitions
        .iter()
        .filter(|p| only(p.1.index))
        .map(|p| replay_partition(name, p.1, false, &mut f))
        .sum()
}

/// [`replay`] of the partitions in `led` (the shards a coordinator leads), each read to its log
/// end rather than its high watermark, as Kafka's coordinator loaders read. A new leader's high
/// watermark trails what is committed (it learns the old leader's one fetch late, and cannot
/// advance it while its ISR is below the minimum), and a coordinator that reloads while its own
/// writes wait for their high watermark would drop them from memory although they are answered
/// once committed: loading only below the high watermark lost acknowledged offset commits
/// (simulation seeds 0 and 31 of `Schedule::Third`). A leader never truncates its own log; what
/// it loads beyond the high watermark is what it serves from as leader, and a leadership lost
/// reloads the coordinator anyway.
pub fn replay_led(
    broker: &Broker,
    name: &str,
    led: &std::collections::BTreeSet<i32>,
    mut f: impl FnMut(i32, &BatchHeader, Replayed<'_>),
) -> usize {
    let Some(topic) = broker.replicas.topic(name) else {
        return 0;
    };
    topic
        .partitions
        .iter()
        .filter(|p| led.contains(&p.1.index))
        .map(|p| replay_partition(name, p.1, true, &mut f))
        .sum()
}

/// [`replay`] of one partition, batch by batch (a read of up to 1 MiB at a time), up to its high
/// watermark or (`to_log_end`) its log end.
fn replay_partition(
    name: &str,
    p: &Partition,
    to_log_end: bool,
    f: &mut impl FnMut(i32, &BatchHeader, Replayed<'_>),
) -> usize {
    let mut count = 0;
    let mut offset = p.offsets().log_start_offset;
    loop {
        let read = if to_log_end {
            p.read_to_log_end(offset, 1 << 20)
        } else {
            p.read(offset, 1 << 20)
        };
        let slice = match read {
            Ok((s, _)) => s,
            Err(e) => {
                tracing::error!("{name}-{}: read failed at {offset}: {e}", p.index);
                return count;
            }
        };
        if slice.bytes.is_empty() {
            return count;
        }
        let mut rest: &[u8] = &slice.bytes;
        while let Ok(h) = BatchHeader::parse(rest) {
            let size = h.total_size();
            if size > rest.len() {
                break;
            }
            let batch = &rest[..size];
            if h.is_control() {
                f(
                    p.index,
                    &h,
                    Replayed::Marker(crate::record::control_type(batch)),
                );
            } else {
                match crate::record::uncompressed_records(batch) {
                    Some(records) => {
                        for (key, value) in &records {
                            let Some(key) = key else { continue };
                            let value = value.as_deref();
                            f(p.index, &h, Replayed::Record { key, value });
                            count += 1;
                        }
                    }
                    None => tracing::warn!(
                        "{name}-{}: skipping unreadable batch at {}",
                        p.index,
                        h.base_offset
                    ),
                }
            }
            offset = h.last_offset() + 1;
            rest = &rest[size..];
        }
        if offset <= slice.first_batch_base_offset {
            return count;
        }
    }
}

/// Runs one coordinator step, catching a panic in it: `None` (after one ERROR line naming
/// `coordinator` and the panic message) when it panicked, so the driver can rebuild its state by
/// replaying its internal topic instead of the task dying and every request of its APIs
/// answering COORDINATOR_NOT_AVAILABLE until a restart. Shared by the group and transaction
/// drivers.
pub async fn catch_step<T>(coordinator: &str, step: impl Future<Output = T>) -> Option<T> {
    match AssertUnwindSafe(step).catch_unwind().await {
        Ok(out) => Some(out),
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".to_string());
            tracing::error!("{coordinator}: a step panicked ({message}); reloading its state");
            None
        }
    }
}

/// Runs a coordinator's write (appends plus, under the flush policy, their fsync) on tokio's
/// blocking pool when `flush` says it fsyncs, so no runtime worker waits for the disk; inline
/// otherwise (a page-cache write). The caller awaits it, so records are durable before its
/// answers go out and its steps stay in order. None when the write panicked.
pub async fn off_worker<T: Send + 'static>(
    flush: bool,
    write: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    if !flush {
        return Some(write());
    }
    tokio::task::spawn_blocking(write).await.ok()
}
