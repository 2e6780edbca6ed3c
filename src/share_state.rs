//! The persister of share-partition state (Kafka's `DefaultStatePersister`, and the share
//! coordinator's log for the `__share_group_state` partitions this broker leads): a
//! share-partition's first use reads its state (`initial_snapshot`, or `remote` through
//! `api::share_preload`), every `StateChange` of an acknowledgement, a lock timeout or a
//! log-start move is written (`persist`) as a ShareUpdate or ShareSnapshot record, and a
//! ShareFetch / ShareAcknowledge answer reporting acknowledgements goes out once those records
//! are committed (`api::share_ack_wait`: the state partition's high watermark passed them, so its
//! in-sync replicas have them), so accepted records stay accepted across a restart, a kill -9 and
//! a failover of the state partition.
//!
//! Routing (`route`): a key whose state partition this broker leads is read and written here;
//! one led by another broker (or by nobody, or not reloaded here yet, or with jobs still queued)
//! goes through that partition's queue (`remote`: Read/Initialize/WriteShareGroupState to the
//! leader, in order, retried until `share.coordinator.write.timeout.ms`).
//!
//! `Broker::share_state` (the `share::coordinator::ShareCoordinator`) is loaded from
//! `__share_group_state` on first use (`internal_topic::replay`); the topic is created on the
//! first ShareGroupHeartbeat (`ensure_topic`). Lock order: `Broker::shares`, then
//! `Broker::share_state`; the append runs under both (a page-cache write; under the flush policy
//! it also fsyncs there), so the records of one share-partition are appended in the order its
//! changes were made.
//!
//! Leadership: the state is loaded once from every partition hosted here, and the keys of a
//! partition led here are reloaded from its log once per leader epoch before they are served
//! (`ensure_fresh`; at once when it is gained, `follow_leadership`), since the records its
//! previous leader wrote reached this replica's log but not this coordinator's memory. The
//! share-state RPCs (`api::share_state_rpc`) serve the keys of the partitions led here.
//! Coordinator appends refuse a follower replica (`internal_topic::AppendFailure::NotLeader`).
//!
//! Not done: DeleteGroups deletes only the keys whose state partition this broker leads (the
//! group coordinator's broker; Kafka sends DeleteShareGroupState to each key's coordinator); a failed write leaves the in-memory change in place (Kafka's
//! `SharePartition` rolls it back) and answers the partition's error; releases of a closed
//! session are not written (they come back Available after a restart anyway, as every acquired
//! record does).

use crate::broker::Broker;
use crate::group::codes;
use crate::internal_topic::{
    append_by_key, replay_where, AppendFailure, InternalTopic, Replayed, Written,
};
use crate::share::coordinator::{ShareCoordinator, StateRecord, WriteState};
use crate::share::partition::StateChange;
use crate::share::persist::ShareSnapshot;
use crate::share::registry::ShareKey;
use crate::share::state_records::{coordinator_key, SHARE_STATE_TOPIC};

#[path = "share_state_remote.rs"]
pub mod remote;

/// `__share_group_state` as the share coordinator creates it: deleted by time never (Kafka prunes
/// records before the last snapshot with DeleteRecords; not done here, so it only grows), never
/// compacted (a compacted update would lose its delta).
pub fn state_topic(broker: &Broker) -> InternalTopic {
    InternalTopic {
        name: SHARE_STATE_TOPIC,
        partitions: broker.config.share_coordinator_state_topic_num_partitions,
        replication_factor: broker
            .config
            .share_coordinator_state_topic_replication_factor,
        overrides: vec![
            ("cleanup.policy", "delete".to_string()),
            ("retention.ms", "-1".to_string()),
            ("segment.bytes", "104857600".to_string()),
            (
                "min.insync.replicas",
                broker
                    .config
                    .share_coordinator_state_topic_min_isr
                    .to_string(),
            ),
        ],
    }
}

/// Creates `__share_group_state` through the controller if it does not exist yet.
pub async fn ensure_topic(broker: &Broker) {
    if broker.replicas.topic(SHARE_STATE_TOPIC).is_none() {
        let _ = crate::internal_topic::ensure(broker, state_topic(broker)).await;
    }
}

/// Replays `__share_group_state` into `c` once (every hosted partition: a follower replica's
/// records are the best this broker has of keys led elsewhere).
fn load(broker: &Broker, c: &mut ShareCoordinator, now: i64) {
    if c.loaded {
        return;
    }
    c.loaded = true;
    replay_into(broker, c, |_| true, now);
}

/// Replays `__share_group_state` into `c` unless it was (the share-state RPCs' first use).
pub fn ensure_loaded(broker: &Broker, c: &mut ShareCoordinator, now: i64) {
    load(broker, c, now);
}

/// Replays the partitions of `__share_group_state` that `only` selects into `c`.
fn replay_into(broker: &Broker, c: &mut ShareCoordinator, only: impl Fn(i32) -> bool, now: i64) {
    let mut bad = 0usize;
    let count = replay_where(
        broker,
        SHARE_STATE_TOPIC,
        only,
        |partition, h, item| match item {
            Replayed::Record { key, value } => {
                if let Err(e) = c.replay(key, value, now) {
                    bad += 1;
                    tracing::warn!(
                        "{SHARE_STATE_TOPIC}-{partition}: skipping a record at batch {}: {e}",
                        h.base_offset
                    );
                }
            }
            Replayed::Marker(_) => {}
        },
    );
    if count > 0 {
        tracing::info!("loaded {count} records from {SHARE_STATE_TOPIC} ({bad} unreadable)");
    }
}

/// The `__share_group_state` partition of `key` (over the image's partition count).
pub fn state_partition_of(broker: &Broker, key: &ShareKey) -> i32 {
    let count = crate::group::shard::partition_count(&broker.image(), SHARE_STATE_TOPIC).max(1);
    crate::group::records::partition_for(&coordinator_key(key), count)
}

/// Follows leadership of the `__share_group_state` partitions (Kafka's share coordinator
/// `onElection`): a partition this broker gains is reloaded at once ([`ensure_fresh`]) rather
/// than on its keys' next use. Ends when `stop` changes.
pub async fn follow_leadership(
    broker: std::sync::Arc<Broker>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut leadership = crate::group::shard::LeadershipWatch::new(
        broker.replicas.metadata().subscribe(),
        broker.identity.node_id,
        SHARE_STATE_TOPIC,
    );
    loop {
        let (gained, _lost) = tokio::select! {
            _ = stop.changed() => return,
            changed = leadership.changed() => changed,
        };
        for shard in gained.into_keys() {
            ensure_fresh(&broker, shard).await;
        }
    }
}

/// The leader epoch of `__share_group_state`-`shard` in the image when this broker leads it.
fn led_epoch(broker: &Broker, shard: i32) -> Option<i32> {
    let image = broker.image();
    let p = image.partition(SHARE_STATE_TOPIC, shard)?;
    (p.leader == broker.identity.node_id).then_some(p.leader_epoch)
}

/// Whether the keys of `shard`, led here, were reloaded at its current leader epoch.
pub fn is_fresh(broker: &Broker, shard: i32) -> bool {
    is_fresh_in(broker, &broker.share_state.lock(), shard)
}

/// [`is_fresh`] for a caller holding `Broker::share_state`.
pub fn is_fresh_in(broker: &Broker, c: &ShareCoordinator, shard: i32) -> bool {
    led_epoch(broker, shard).is_some_and(|e| c.loaded_epochs.get(&shard) == Some(&e))
}

/// Makes the coordinator's memory of `shard`'s keys what its log holds, once per leader epoch of
/// that partition led here: the records another leader wrote reached this replica's log but not
/// this coordinator's memory. Waits for the partition's high watermark to reach its log end first
/// (at most `group::shard::GAINED_SHARD_WAIT`), since the replay reads committed records only.
/// Nothing when this broker does not lead `shard`.
pub async fn ensure_fresh(broker: &Broker, shard: i32) {
    let Some(epoch) = led_epoch(broker, shard) else {
        return;
    };
    if broker.share_state.lock().loaded_epochs.get(&shard) == Some(&epoch) {
        return;
    }
    let only = std::collections::BTreeSet::from([shard]);
    crate::group::shard::committed_to_log_end(
        &broker.replicas,
        SHARE_STATE_TOPIC,
        &only,
        crate::group::shard::GAINED_SHARD_WAIT,
    )
    .await;
    let now = crate::broker::now_ms();
    let mut c = broker.share_state.lock();
    if c.loaded_epochs.get(&shard) == Some(&epoch) {
        return;
    }
    load(broker, &mut c, now);
    let count = crate::group::shard::partition_count(&broker.image(), SHARE_STATE_TOPIC).max(1);
    c.forget(|k| crate::group::records::partition_for(&coordinator_key(k), count) == shard);
    tracing::info!(
        "share coordinator leads {SHARE_STATE_TOPIC}-{shard} at epoch {epoch}: reloading"
    );
    replay_into(broker, &mut c, |p| p == shard, now);
    c.loaded_epochs.insert(shard, epoch);
}

/// The persisted state of `key` (ReadShareGroupState on first use), if any.
pub fn initial_snapshot(broker: &Broker, key: &ShareKey, now: i64) -> Option<ShareSnapshot> {
    let mut c = broker.share_state.lock();
    load(broker, &mut c, now);
    c.read(key).cloned()
}

/// Where a persisted change went: appended here (committed once the state partition's high
/// watermark passes the batches, `internal_topic::committed`), or queued for the share
/// coordinator that leads the key's state partition (`remote`: the code it answered, once
/// committed there).
pub enum Persisted {
    Local(Vec<Written>),
    Remote(tokio::sync::oneshot::Receiver<i16>),
}

impl Persisted {
    pub fn nothing() -> Persisted {
        Persisted::Local(Vec::new())
    }
}

/// Writes `change` of `key` (WriteShareGroupState): appended here when this broker leads the
/// key's `__share_group_state` partition and nothing for that partition is still queued, else
/// queued in order for the leader of that partition (`remote`). Err: the partition error code
/// for the answer.
pub fn persist(
    broker: &Broker,
    key: &ShareKey,
    state_epoch: i32,
    leader_epoch: i32,
    change: &StateChange,
    now: i64,
) -> Result<Persisted, i16> {
    if change.is_empty() || broker.replicas.topic(SHARE_STATE_TOPIC).is_none() {
        return Ok(Persisted::nothing());
    }
    let write = WriteState {
        state_epoch,
        leader_epoch,
        start_offset: change.start_offset,
        state_batches: change.state_batches.clone(),
    };
    let partition = match route(broker, key) {
        Route::Here => match write_here(broker, key, &write, now) {
            // Led elsewhere after all (the image is ahead of this replica): queued instead.
            Err(crate::group::codes::NOT_COORDINATOR) => state_partition_of(broker, key),
            done => return done.map(Persisted::Local),
        },
        Route::Queue(partition) => partition,
    };
    let (reply, answer) = tokio::sync::oneshot::channel();
    let job = remote::Job::Write {
        key: key.clone(),
        write,
        reply,
    };
    broker.share_remote.submit(partition, job)?;
    Ok(Persisted::Remote(answer))
}

/// Where the state of a key is read and written.
pub enum Route {
    /// This broker leads its state partition (or the topic does not exist yet: nothing to write).
    Here,
    /// Through the queue of that state partition (led elsewhere, by nobody, not reloaded at
    /// its leader epoch yet, or still busy with queued jobs that must go first).
    Queue(i32),
}

/// The route of `key`'s state now.
pub fn route(broker: &Broker, key: &ShareKey) -> Route {
    use crate::group::shard::{coordinator_shard, NotHere};
    let image = broker.image();
    let me = broker.identity.node_id;
    match coordinator_shard(&image, me, SHARE_STATE_TOPIC, &coordinator_key(key)) {
        // Queued jobs go first; a partition not reloaded at its epoch yet is reloaded by the
        // queue's worker (an await) before the job runs.
        Ok(p) if broker.share_remote.busy(p) || !is_fresh(broker, p) => Route::Queue(p),
        Ok(_) | Err(NotHere::NoTopic) => Route::Here,
        Err(NotHere::Remote { .. } | NotHere::NoLeader) => {
            Route::Queue(state_partition_of(broker, key))
        }
    }
}

/// Appends `write` of `key` to its state partition led here and applies it to the coordinator
/// once appended. Ok: the batches written. Err: the partition error code.
pub fn write_here(
    broker: &Broker,
    key: &ShareKey,
    write: &WriteState,
    now: i64,
) -> Result<Vec<Written>, i16> {
    append_here(broker, now, |c| c.write(key, write, now).map(Some))
}

/// InitializeShareGroupState of `key` led here (a share-partition's first use found no state):
/// a fresh snapshot at `start_offset`. Ok: the batches written.
pub fn initialize_here(
    broker: &Broker,
    key: &ShareKey,
    state_epoch: i32,
    start_offset: i64,
    now: i64,
) -> Result<Vec<Written>, i16> {
    append_here(broker, now, |c| {
        c.initialize(key, state_epoch, start_offset, now).map(Some)
    })
}

/// The record `decide` returns for the coordinator's state (none: nothing to write), appended
/// to its state partition led here and applied. Ok: the batches written. Err: `decide`'s code,
/// or NOT_COORDINATOR when the partition is not led here after all.
pub fn append_here(
    broker: &Broker,
    now: i64,
    decide: impl FnOnce(&ShareCoordinator) -> Result<Option<StateRecord>, i16>,
) -> Result<Vec<Written>, i16> {
    let Some(topic) = broker.replicas.topic(SHARE_STATE_TOPIC) else {
        return Ok(Vec::new());
    };
    let mut c = broker.share_state.lock();
    load(broker, &mut c, now);
    match decide(&c)? {
        Some(record) => append_record(broker, &topic, &mut c, &record, now, false),
        None => Ok(Vec::new()),
    }
}

/// DeleteShareGroupState of every share-partition of `group` (the group was deleted): tombstones
/// of their keys, applied once appended. Returns how many keys were deleted.
pub fn delete_group(broker: &Broker, group: &str, now: i64) -> usize {
    let Some(topic) = broker.replicas.topic(SHARE_STATE_TOPIC) else {
        return 0;
    };
    let mut c = broker.share_state.lock();
    load(broker, &mut c, now);
    let keys: Vec<ShareKey> = c.keys_of(group).cloned().collect();
    let mut deleted = 0;
    for key in keys {
        let Some(record) = c.delete(&key) else {
            continue;
        };
        if write_record(broker, &topic, &mut c, &record, now).is_ok() {
            deleted += 1;
        }
    }
    deleted
}

/// The start offset and leader epoch of `key` (ReadShareGroupStateSummary), `None` when it has
/// no state (DescribeShareGroupOffsets answers start offset -1).
pub fn summary(broker: &Broker, key: &ShareKey, now: i64) -> Option<(i64, i32)> {
    summary_with_epoch(broker, key, now).map(|(start, leader, _)| (start, leader))
}

/// [`summary`] with the state epoch.
pub fn summary_with_epoch(broker: &Broker, key: &ShareKey, now: i64) -> Option<(i64, i32, i32)> {
    let mut c = broker.share_state.lock();
    load(broker, &mut c, now);
    c.read(key)
        .map(|s| (s.start_offset, s.leader_epoch, s.state_epoch))
}

/// [`summary`] from the share coordinator of `key` wherever it is (ReadShareGroupStateSummary
/// through the key's state-partition queue when another broker leads it). Err: its error code.
pub async fn summary_anywhere(broker: &Broker, key: &ShareKey) -> Result<Option<(i64, i32)>, i16> {
    match route(broker, key) {
        Route::Here => Ok(summary(broker, key, crate::broker::now_ms())),
        Route::Queue(partition) => remote::summary(broker, partition, key).await,
    }
}

/// Appends `record` to `__share_group_state` and applies it once appended. Ok: the batches
/// written (none when another broker's share coordinator holds the key). Err: the error code.
fn write_record(
    broker: &Broker,
    topic: &crate::replica::manager::Topic,
    c: &mut ShareCoordinator,
    record: &crate::share::coordinator::StateRecord,
    now: i64,
) -> Result<Vec<Written>, i16> {
    append_record(broker, topic, c, record, now, true)
}

/// [`write_record`]; with `memory_fallback` false a state partition not led here after all is
/// NOT_COORDINATOR (the caller sends the write to its leader instead).
pub fn append_record(
    broker: &Broker,
    topic: &crate::replica::manager::Topic,
    c: &mut ShareCoordinator,
    record: &crate::share::coordinator::StateRecord,
    now: i64,
    memory_fallback: bool,
) -> Result<Vec<Written>, i16> {
    let partition_key = coordinator_key(record.key());
    let encoded = record.encode();
    let records = encoded
        .iter()
        .map(|(k, v)| (partition_key.as_str(), (Some(k.as_slice()), v.as_deref())));
    let mut appended = append_by_key(broker, topic, records, now);
    match appended.failures.pop() {
        None => {
            c.apply(record, now);
            Ok(appended.written)
        }
        // The image lags this replica's role, or an admin path's key led elsewhere: in this
        // broker's memory only.
        Some(AppendFailure::NotHosted(_) | AppendFailure::NotLeader(..)) if memory_fallback => {
            c.apply(record, now);
            Ok(Vec::new())
        }
        Some(AppendFailure::NotHosted(_) | AppendFailure::NotLeader(..)) => {
            Err(crate::group::codes::NOT_COORDINATOR)
        }
        Some(_) => Err(crate::group::codes::COORDINATOR_NOT_AVAILABLE),
    }
}

/// DeleteShareGroupState of `key` led here: its tombstones. Ok: the batches written (none when
/// it has no state).
pub fn delete_here(broker: &Broker, key: &ShareKey, now: i64) -> Result<Vec<Written>, i16> {
    append_here(broker, now, |c| Ok(c.delete(key)))
}

/// What [`initialize`] did: the batches written here (committed once the state partition's high
/// watermark passes them), the keys refused here with their error code, and the keys queued for
/// another broker's share coordinator with the code it will answer.
#[derive(Default)]
pub struct Initialized {
    pub written: Vec<Written>,
    pub failed: Vec<(ShareKey, i16)>,
    pub remote: Vec<(ShareKey, tokio::sync::oneshot::Receiver<i16>)>,
}

/// InitializeShareGroupState of AlterShareGroupOffsets: each share-partition starts afresh at
/// its start offset (nothing in flight; state epoch one past the previous one, so a writer of
/// the old state is fenced), and its in-memory share-partition here goes so that the next
/// ShareFetch reads the new state (a share-partition leader elsewhere is fenced at its next
/// write and drops its own). Keys whose state partition another broker leads are initialized
/// there (`remote::Job::Reinitialize`).
pub fn initialize(broker: &Broker, keys: &[(ShareKey, i64)], now: i64) -> Initialized {
    let mut out = Initialized::default();
    if keys.is_empty() {
        return out;
    }
    let Some(topic) = broker.replicas.topic(SHARE_STATE_TOPIC) else {
        let code = crate::group::codes::COORDINATOR_NOT_AVAILABLE;
        out.failed = keys.iter().map(|(k, _)| (k.clone(), code)).collect();
        return out;
    };
    let mut here = Vec::new();
    for (key, start_offset) in keys {
        match route(broker, key) {
            Route::Here => here.push((key, *start_offset)),
            Route::Queue(partition) => {
                let (reply, answer) = tokio::sync::oneshot::channel();
                let job = remote::Job::Reinitialize {
                    key: key.clone(),
                    start_offset: *start_offset,
                    reply,
                };
                match broker.share_remote.submit(partition, job) {
                    Ok(()) => out.remote.push((key.clone(), answer)),
                    Err(code) => out.failed.push((key.clone(), code)),
                }
            }
        }
    }
    let mut shares = broker.shares.lock();
    for (key, _) in keys {
        shares.remove(key);
    }
    let mut c = broker.share_state.lock();
    load(broker, &mut c, now);
    for (key, start_offset) in here {
        let epoch = c.read(key).map_or(0, |s| s.state_epoch.saturating_add(1));
        let result = c
            .initialize(key, epoch, start_offset, now)
            .and_then(|record| write_record(broker, &topic, &mut c, &record, now));
        match result {
            Ok(w) => out.written.extend(w),
            Err(code) => out.failed.push((key.clone(), code)),
        }
    }
    out
}

/// DeleteShareGroupState of DeleteShareGroupOffsets: the state of `group`'s share-partitions of
/// `topic_ids` goes (tombstones) with their in-memory share-partitions here. Keys whose state
/// partition another broker leads are deleted there, every partition of each topic (a key
/// without state is a success). `written`: the batches written here; `failed`: the topics whose
/// delete failed here, with the error code; `remote`: the codes the other coordinators answer.
pub fn delete_topics(broker: &Broker, group: &str, topic_ids: &[uuid::Uuid], now: i64) -> Deleted {
    let mut out = Deleted::default();
    if broker.replicas.topic(SHARE_STATE_TOPIC).is_none() {
        broker.shares.lock().remove_topic_all(group, topic_ids);
        return out;
    }
    let image = broker.image();
    for id in topic_ids {
        let count = image.topic_by_id(*id).map_or(0, |t| t.partition_count());
        for partition in 0..count {
            let key = ShareKey::new(group, (*id, partition));
            let Route::Queue(state_partition) = route(broker, &key) else {
                continue;
            };
            let (reply, answer) = tokio::sync::oneshot::channel();
            let job = remote::Job::Delete {
                key: key.clone(),
                reply,
            };
            match broker.share_remote.submit(state_partition, job) {
                Ok(()) => out.remote.push((*id, answer)),
                Err(code) => out.failed.push((*id, code)),
            }
        }
    }
    let Some(topic) = broker.replicas.topic(SHARE_STATE_TOPIC) else {
        return out;
    };
    let mut shares = broker.shares.lock();
    shares.remove_topic_all(group, topic_ids);
    let mut c = broker.share_state.lock();
    load(broker, &mut c, now);
    let keys: Vec<ShareKey> = c
        .keys_of(group)
        .filter(|k| topic_ids.contains(&k.topic_id))
        .cloned()
        .collect();
    for key in keys {
        let Some(record) = c.delete(&key) else {
            continue;
        };
        match write_record(broker, &topic, &mut c, &record, now) {
            Ok(w) => out.written.extend(w),
            Err(code) => {
                if !out.failed.iter().any(|(t, _)| *t == key.topic_id) {
                    out.failed.push((key.topic_id, code));
                }
            }
        }
    }
    out
}

/// DeleteShareGroupState of DeleteGroups, before the group goes (Kafka's
/// `deleteShareGroups`): the state of every share-partition of `group` in `partitions` (the
/// group's initialized ones) is deleted at its share coordinator, here or at the broker that
/// leads its state partition, and waited for. NONE when all of it is gone (a key without state
/// included); otherwise the first error, and the group is to be kept.
pub async fn delete_group_state(
    broker: &Broker,
    group: &str,
    partitions: &[(uuid::Uuid, i32)],
) -> i16 {
    let Some(topic) = broker.replicas.topic(SHARE_STATE_TOPIC) else {
        return codes::NONE;
    };
    let timeout_ms = broker.config.share_coordinator_write_timeout_ms;
    let mut here = Vec::new();
    let mut answers = Vec::new();
    for &(topic_id, partition) in partitions {
        let key = ShareKey::new(group, (topic_id, partition));
        match route(broker, &key) {
            Route::Here => here.push(key),
            Route::Queue(state_partition) => {
                let (reply, answer) = tokio::sync::oneshot::channel();
                let job = remote::Job::Delete { key, reply };
                if let Err(code) = broker.share_remote.submit(state_partition, job) {
                    return code;
                }
                answers.push(answer);
            }
        }
    }
    let mut written = Vec::new();
    {
        let now = crate::broker::now_ms();
        let mut c = broker.share_state.lock();
        load(broker, &mut c, now);
        for key in here {
            let Some(record) = c.delete(&key) else {
                continue;
            };
            match write_record(broker, &topic, &mut c, &record, now) {
                Ok(w) => written.extend(w),
                Err(code) => return code,
            }
        }
    }
    for answer in answers {
        let code = remote_code(answer, timeout_ms).await;
        if code != codes::NONE {
            return code;
        }
    }
    match crate::internal_topic::committed(&written, timeout_ms).await {
        Ok(()) => codes::NONE,
        Err(crate::internal_topic::NotCommitted::TimedOut) => codes::COORDINATOR_NOT_AVAILABLE,
        Err(crate::internal_topic::NotCommitted::NotLeader) => codes::NOT_COORDINATOR,
    }
}

/// The code a queued share-state job answered (its queue's jobs each have `timeout_ms`; waited
/// for twice that), COORDINATOR_NOT_AVAILABLE when none came.
pub async fn remote_code(answer: tokio::sync::oneshot::Receiver<i16>, timeout_ms: i64) -> i16 {
    let wait = std::time::Duration::from_millis(timeout_ms.max(0) as u64 * 2);
    match tokio::time::timeout(wait, answer).await {
        Ok(Ok(code)) => code,
        _ => codes::COORDINATOR_NOT_AVAILABLE,
    }
}

/// What [`delete_topics`] did.
#[derive(Default)]
pub struct Deleted {
    pub written: Vec<Written>,
    pub failed: Vec<(uuid::Uuid, i16)>,
    pub remote: Vec<(uuid::Uuid, tokio::sync::oneshot::Receiver<i16>)>,
}
