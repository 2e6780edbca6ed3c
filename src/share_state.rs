//! The persister of share-partition state (Kafka's `DefaultStatePersister` and the share
//! coordinator's log, for the keys whose `__share_group_state` partition this broker hosts):
//! a share-partition's first use reads its state (`initial_snapshot`), every `StateChange` of an
//! acknowledgement, a lock timeout or a log-start move is written (`persist`) as a ShareUpdate or
//! ShareSnapshot record, and a ShareFetch / ShareAcknowledge answer reporting acknowledgements goes
//! out once those records are committed (`api::share_ack_wait`: the state partition's high
//! watermark passed them, so its in-sync replicas have them), so accepted records stay accepted
//! across a restart and kill -9, and an acknowledged change is on every in-sync replica of its
//! state partition (a new leader of that partition does not reload it yet: see Not done).
//!
//! `Broker::share_state` (the `share::coordinator::ShareCoordinator`) is loaded from
//! `__share_group_state` on first use (`internal_topic::replay`); the topic is created on the
//! first ShareGroupHeartbeat (`ensure_topic`). Lock order: `Broker::shares`, then
//! `Broker::share_state`; the append runs under both (a page-cache write; under the flush policy
//! it also fsyncs there), so the records of one share-partition are appended in the order its
//! changes were made.
//!
//! Leadership: the state is loaded once from every partition hosted here, and the keys of a
//! partition this broker gains are reloaded from its log (`follow_leadership`), since the records
//! its previous leader wrote reached this replica's log but not this coordinator's memory. The
//! share-state RPCs (`api::share_state_rpc`) serve the keys of the partitions led here.
//!
//! Not done: a key whose state partition another broker leads is not persisted: its change
//! stays in this broker's memory (Kafka sends WriteShareGroupState to that share coordinator). Coordinator appends refuse a
//! follower replica (`internal_topic::AppendFailure::NotLeader`): before, such a write went into
//! the local follower's log, which then diverged from its leader's and truncated at every fetch
//! (a cluster's share acknowledgements timed out waiting for a high watermark that never came).
//! A failed write leaves the in-memory
//! change in place (Kafka's `SharePartition` rolls it back) and answers the partition's error;
//! releases of a closed session are not written (they come back Available after a restart
//! anyway, as every acquired record does).

use crate::broker::Broker;
use crate::internal_topic::{
    append_by_key, replay_where, AppendFailure, InternalTopic, Replayed, Written,
};
use crate::share::coordinator::{ShareCoordinator, WriteState};
use crate::share::partition::StateChange;
use crate::share::persist::ShareSnapshot;
use crate::share::registry::ShareKey;
use crate::share::state_records::{coordinator_key, SHARE_STATE_TOPIC};

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
/// `onElection`): when this broker gains some, their keys are reloaded from their logs (once
/// their high watermark reaches the log end, `committed_to_log_end`), since the records another
/// leader wrote reached this broker's replica but not its coordinator's memory. Meanwhile the
/// share-state RPCs of those keys answer COORDINATOR_LOAD_IN_PROGRESS. Ends when `stop` changes.
pub async fn follow_leadership(
    broker: std::sync::Arc<Broker>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    use crate::group::shard::{committed_to_log_end, LeadershipWatch, GAINED_SHARD_WAIT};
    let mut leadership = LeadershipWatch::new(
        broker.replicas.metadata().subscribe(),
        broker.identity.node_id,
        SHARE_STATE_TOPIC,
    );
    loop {
        let (gained, _lost) = tokio::select! {
            _ = stop.changed() => return,
            changed = leadership.changed() => changed,
        };
        if gained.is_empty() {
            continue;
        }
        broker
            .share_state
            .lock()
            .loading
            .extend(gained.iter().copied());
        committed_to_log_end(
            &broker.replicas,
            SHARE_STATE_TOPIC,
            &gained,
            GAINED_SHARD_WAIT,
        )
        .await;
        reload(&broker, &gained, crate::broker::now_ms());
    }
}

/// Rebuilds the state of the keys of the `gained` partitions from those partitions' logs.
pub fn reload(broker: &Broker, gained: &std::collections::BTreeSet<i32>, now: i64) {
    let mut c = broker.share_state.lock();
    if c.loaded {
        let count = crate::group::shard::partition_count(&broker.image(), SHARE_STATE_TOPIC).max(1);
        c.forget(|k| {
            gained.contains(&crate::group::records::partition_for(
                &coordinator_key(k),
                count,
            ))
        });
        tracing::info!(
            "share coordinator gained {SHARE_STATE_TOPIC} partitions {gained:?}: reloading"
        );
        replay_into(broker, &mut c, |p| gained.contains(&p), now);
    } else {
        load(broker, &mut c, now);
    }
    for p in gained {
        c.loading.remove(p);
    }
}

/// The persisted state of `key` (ReadShareGroupState on first use), if any.
pub fn initial_snapshot(broker: &Broker, key: &ShareKey, now: i64) -> Option<ShareSnapshot> {
    let mut c = broker.share_state.lock();
    load(broker, &mut c, now);
    c.read(key).cloned()
}

/// Writes `change` of `key` (WriteShareGroupState) and applies it to the coordinator once
/// appended. Ok: the batches written, committed once the state partition's high watermark passes
/// them (`internal_topic::committed`; an answer that reports the change waits for that). Err: the
/// partition error code for the answer.
pub fn persist(
    broker: &Broker,
    key: &ShareKey,
    state_epoch: i32,
    leader_epoch: i32,
    change: &StateChange,
    now: i64,
) -> Result<Vec<Written>, i16> {
    if change.is_empty() {
        return Ok(Vec::new());
    }
    let Some(topic) = broker.replicas.topic(SHARE_STATE_TOPIC) else {
        return Ok(Vec::new());
    };
    let mut c = broker.share_state.lock();
    load(broker, &mut c, now);
    let write = WriteState {
        state_epoch,
        leader_epoch,
        start_offset: change.start_offset,
        state_batches: change.state_batches.clone(),
    };
    let record = c.write(key, &write, now)?;
    let partition_key = coordinator_key(key);
    let encoded = record.encode();
    let records = encoded
        .iter()
        .map(|(k, v)| (partition_key.as_str(), (Some(k.as_slice()), v.as_deref())));
    let mut appended = append_by_key(broker, &topic, records, now);
    match appended.failures.pop() {
        None => {
            c.apply(&record, now);
            Ok(appended.written)
        }
        // Another broker leads this key's state partition: kept in this broker's memory only
        // (see Not done; a record appended to the follower replica here would diverge from its
        // leader's log and be truncated at the next fetch).
        Some(AppendFailure::NotHosted(_) | AppendFailure::NotLeader(..)) => {
            c.apply(&record, now);
            Ok(Vec::new())
        }
        Some(_) => Err(crate::group::codes::COORDINATOR_NOT_AVAILABLE),
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
    let mut c = broker.share_state.lock();
    load(broker, &mut c, now);
    c.read(key).map(|s| (s.start_offset, s.leader_epoch))
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
        // As in `persist`: in this broker's memory only.
        Some(AppendFailure::NotHosted(_) | AppendFailure::NotLeader(..)) => {
            c.apply(record, now);
            Ok(Vec::new())
        }
        Some(_) => Err(crate::group::codes::COORDINATOR_NOT_AVAILABLE),
    }
}

/// InitializeShareGroupState of AlterShareGroupOffsets: each share-partition starts afresh at
/// its start offset (nothing in flight; state epoch one past the previous one, so a writer of
/// the old state is fenced), and its in-memory share-partition goes so that the next ShareFetch
/// reads the new state. Returns the batches written (committed once the state partition's high
/// watermark passes them) and the keys that failed with their error code.
pub fn initialize(
    broker: &Broker,
    keys: &[(ShareKey, i64)],
    now: i64,
) -> (Vec<Written>, Vec<(ShareKey, i16)>) {
    let (mut written, mut failed) = (Vec::new(), Vec::new());
    if keys.is_empty() {
        return (written, failed);
    }
    let Some(topic) = broker.replicas.topic(SHARE_STATE_TOPIC) else {
        let code = crate::group::codes::COORDINATOR_NOT_AVAILABLE;
        return (
            written,
            keys.iter().map(|(k, _)| (k.clone(), code)).collect(),
        );
    };
    let mut shares = broker.shares.lock();
    let mut c = broker.share_state.lock();
    load(broker, &mut c, now);
    for (key, start_offset) in keys {
        shares.remove(key);
        let epoch = c.read(key).map_or(0, |s| s.state_epoch.saturating_add(1));
        let result = c
            .initialize(key, epoch, *start_offset, now)
            .and_then(|record| write_record(broker, &topic, &mut c, &record, now));
        match result {
            Ok(w) => written.extend(w),
            Err(code) => failed.push((key.clone(), code)),
        }
    }
    (written, failed)
}

/// DeleteShareGroupState of DeleteShareGroupOffsets: the state of `group`'s share-partitions of
/// `topic_ids` goes (tombstones) with their in-memory share-partitions. Ok: the batches written;
/// Err: the topics whose delete failed, with the error code.
pub fn delete_topics(
    broker: &Broker,
    group: &str,
    topic_ids: &[uuid::Uuid],
    now: i64,
) -> (Vec<Written>, Vec<(uuid::Uuid, i16)>) {
    let (mut written, mut failed) = (Vec::new(), Vec::new());
    let mut shares = broker.shares.lock();
    for id in topic_ids {
        shares.remove_topic(group, *id);
    }
    let Some(topic) = broker.replicas.topic(SHARE_STATE_TOPIC) else {
        return (written, failed);
    };
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
            Ok(w) => written.extend(w),
            Err(code) => {
                if !failed.iter().any(|(t, _)| *t == key.topic_id) {
                    failed.push((key.topic_id, code));
                }
            }
        }
    }
    (written, failed)
}
