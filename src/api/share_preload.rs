//! A ShareFetch's first use of a share-partition whose state another broker's share coordinator
//! holds (the key's `__share_group_state` partition is led elsewhere): its state is read there
//! (ReadShareGroupState at the partition's leader epoch, `share_state::remote`) before the fetch
//! runs, and the share-partition is built from it; without state it starts where
//! `share.auto.offset.reset` says and that start is initialized at the coordinator
//! (InitializeShareGroupState, queued ahead of its first write). A read that fails leaves the
//! share-partition unbuilt and its fetch partition answers LEADER_NOT_AVAILABLE (retriable;
//! FENCED_LEADER_EPOCH: NOT_LEADER_OR_FOLLOWER, a newer leader holds it), as Kafka's
//! `SharePartition` initialization does. Local keys are built on first use as before.

use std::collections::HashMap;
use std::sync::Arc;

use super::share_fetch::{init_from, resolve};
use crate::broker::Broker;
use crate::protocol::share_v2::ShareFetch;
use crate::replica::partition::Partition;
use crate::share::registry::ShareKey;
use crate::share::session::{TopicIdPartition, FINAL_EPOCH, INITIAL_EPOCH};
use crate::share_state::{remote, route, Route};

const NOT_LEADER_OR_FOLLOWER: i16 = 6;

/// A share-partition to build from remote state.
pub struct Load {
    tp: TopicIdPartition,
    key: ShareKey,
    partition: Arc<Partition>,
    /// Its key's `__share_group_state` partition.
    state_partition: i32,
}

/// The share-partitions `fetch` adds that are not built yet and whose state is not served here.
/// None for a closing or renewing fetch (they only acknowledge) or one without a group id.
pub fn needed(broker: &Broker, fetch: &ShareFetch) -> Vec<Load> {
    let request = &fetch.request;
    let group = request.group_id.as_ref().map_or("", |g| g.as_str());
    if group.is_empty() || fetch.is_renew_ack || request.share_session_epoch == FINAL_EPOCH {
        return Vec::new();
    }
    let member = request.member_id.as_ref().map_or("", |m| m.as_str());
    let mut reg = broker.shares.lock();
    // The request's partitions, and, in a continuing session, the session's (a share-partition
    // dropped since, e.g. fenced by AlterShareGroupOffsets, is read again too).
    let mut tps: Vec<TopicIdPartition> = request
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.topic_id, p.partition_index)))
        .collect();
    if request.share_session_epoch != INITIAL_EPOCH {
        tps.extend(reg.sessions.partitions_of(group, member));
    }
    let mut loads = Vec::new();
    for tp in tps {
        let key = ShareKey::new(group, tp);
        if reg.partition(&key).is_some() || loads.iter().any(|l: &Load| l.tp == tp) {
            continue;
        }
        let Route::Queue(state_partition) = route(broker, &key) else {
            continue;
        };
        // A partition not led here answers its own error in the fetch.
        if let Ok(partition) = resolve(broker, tp) {
            loads.push(Load {
                tp,
                key,
                partition,
                state_partition,
            });
        }
    }
    loads
}

/// Reads and builds every share-partition of `loads`; the ones whose state could not be read,
/// with the fetch partition's error code.
pub async fn load(broker: &Arc<Broker>, loads: Vec<Load>) -> HashMap<TopicIdPartition, i16> {
    let reads = loads.into_iter().map(|l| async move {
        let epoch = l.partition.leader_epoch();
        let state = remote::read(broker, l.state_partition, &l.key, epoch).await;
        (l, state)
    });
    let read = futures_util::future::join_all(reads).await;
    let now = crate::broker::now_ms();
    let mut unavailable = HashMap::new();
    let mut reg = broker.shares.lock();
    for (l, state) in read {
        let snapshot = match state {
            Ok(s) => s,
            Err(code) => {
                tracing::warn!(
                    "share-partition {:?}: its state could not be read (error {code})",
                    l.key
                );
                let answer = if code == crate::share::coordinator::FENCED_LEADER_EPOCH {
                    NOT_LEADER_OR_FOLLOWER
                } else {
                    super::error::LEADER_NOT_AVAILABLE
                };
                unavailable.insert(l.tp, answer);
                continue;
            }
        };
        let fresh = snapshot.is_none();
        let sp = reg.get_or_init(&l.key, || {
            init_from(broker, &l.key, &l.partition, snapshot, now)
        });
        if fresh {
            let job = remote::Job::Initialize {
                key: l.key.clone(),
                state_epoch: sp.state_epoch(),
                start_offset: sp.start_offset(),
            };
            if let Err(code) = broker.share_remote.submit(l.state_partition, job) {
                tracing::warn!(
                    "share-partition {:?}: not initialized (error {code})",
                    l.key
                );
            }
        }
    }
    unavailable
}
