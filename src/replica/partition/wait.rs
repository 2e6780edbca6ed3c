//! Waiting for the high watermark: what answers at acks=all (`api::produce_wait`) and a
//! coordinator's internal-topic write (`internal_topic::committed`) await. The decision is the pure
//! [`DelayedProduce::check`]; this only re-checks it whenever the partition's high-watermark watch
//! moves, or at the deadline (never a sleep loop).

use std::time::Duration;

use super::Partition;
use crate::replica::isr::now_ms;
use crate::replica::replication::acks::{DelayedProduce, DelayedProduceOutcome};

impl Partition {
    /// Waits until `delayed` is decided on this partition: the high watermark passed its offset
    /// (Completed, or NotEnoughReplicasAfterAppend when the ISR is below the minimum), its
    /// deadline passed (RequestTimedOut), or this broker no longer leads the partition
    /// (NotLeaderOrFollower; also when the partition is deleted meanwhile).
    pub async fn wait_replicated(&self, delayed: DelayedProduce) -> DelayedProduceOutcome {
        // Subscribed before the first check, so no move between the check and the wait is missed.
        let mut watch = self.subscribe();
        loop {
            let outcome = delayed.check(self.replication_view().as_ref(), now_ms());
            if outcome != DelayedProduceOutcome::Pending {
                return outcome;
            }
            let left = (delayed.deadline_ms - now_ms()).max(0) as u64;
            match tokio::time::timeout(Duration::from_millis(left), watch.changed()).await {
                Ok(Ok(())) | Err(_) => {}
                Ok(Err(_)) => return DelayedProduceOutcome::NotLeaderOrFollower,
            }
        }
    }

    /// Whether the high watermark of this partition, led here, already passed `last_offset`.
    pub fn committed_through(&self, last_offset: i64) -> bool {
        self.replication_view()
            .is_some_and(|v| v.high_watermark > last_offset)
    }
}

/// For coordinator tests: a hosted partition made a replicated leader whose follower lags.
#[cfg(test)]
pub mod testing {
    use super::Partition;
    use crate::replica::isr::now_ms;
    use crate::replica::replication::leader::{FollowerFetch, LeaderAndIsr, LeaderConfig};

    /// The follower's broker id.
    pub const FOLLOWER: i32 = 99;

    /// Makes broker `me` lead `p` in a new epoch with [`FOLLOWER`] in the ISR, which has fetched
    /// nothing yet: the high watermark stays where it is until it fetches.
    pub fn lead_with_a_lagging_follower(p: &Partition, me: i32) {
        let registration = LeaderAndIsr {
            leader_epoch: p.leader_epoch() + 1,
            partition_epoch: 1,
            replicas: vec![me, FOLLOWER],
            isr: vec![me, FOLLOWER],
        };
        let config = LeaderConfig {
            replica_lag_time_max_ms: 60_000,
            min_insync_replicas: 2,
        };
        p.make_leader(me, config, &registration, Default::default(), now_ms());
    }

    /// Makes broker `me` lead `p` in a new epoch of replicas `[me, FOLLOWER]` with only itself
    /// in the ISR, under `min.insync.replicas` 2: acks=all appends are refused.
    pub fn lead_below_min_isr(p: &Partition, me: i32) {
        let registration = LeaderAndIsr {
            leader_epoch: p.leader_epoch() + 1,
            partition_epoch: 1,
            replicas: vec![me, FOLLOWER],
            isr: vec![me],
        };
        let config = LeaderConfig {
            replica_lag_time_max_ms: 60_000,
            min_insync_replicas: 2,
        };
        p.make_leader(me, config, &registration, Default::default(), now_ms());
    }

    /// The follower fetches up to the leader's log end: the high watermark reaches it.
    pub fn follower_catches_up(p: &Partition) {
        let fetch = FollowerFetch {
            replica_id: FOLLOWER,
            current_leader_epoch: Some(p.leader_epoch()),
            fetch_offset: p.offsets().log_end_offset,
            log_start_offset: 0,
        };
        p.on_replica_fetch(fetch, now_ms());
    }
}
