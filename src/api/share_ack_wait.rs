//! Acknowledgements answered once their state is committed: a ShareFetch or ShareAcknowledge that
//! carried acknowledgements reports each partition's outcome only after the `__share_group_state`
//! records of its changes are replicated to the state partition's ISR (its high watermark passed
//! them), as Kafka's share coordinator completes a WriteShareGroupState at the high watermark. A
//! record that is not committed within `share.coordinator.write.timeout.ms` turns the partition's
//! acknowledgement result into REQUEST_TIMED_OUT; a state partition no longer led here into
//! COORDINATOR_NOT_AVAILABLE. On a single node, or when every batch is committed already, nothing
//! waits.

use std::collections::HashMap;

use crate::internal_topic::{all_committed, committed, NotCommitted, Written};
use crate::share_state::Persisted;

/// How much longer than the write timeout a queued remote write is waited for (its queue may
/// hold earlier jobs; each has its own timeout).
const REMOTE_GRACE_MS: u64 = 5_000;
use crate::share::session::TopicIdPartition;

/// The state batches written for each acknowledged partition of one request, and the writes
/// queued for another broker's share coordinator (`share_state::remote`).
#[derive(Default)]
pub struct PendingAcks {
    written: Vec<(TopicIdPartition, Vec<Written>)>,
    remote: Vec<(TopicIdPartition, tokio::sync::oneshot::Receiver<i16>)>,
}

/// A partition whose acknowledgement state was not committed: its error code and message.
pub type AckFailure = (TopicIdPartition, i16, String);

impl PendingAcks {
    pub fn push(&mut self, tp: TopicIdPartition, persisted: Persisted) {
        match persisted {
            Persisted::Local(written) if written.is_empty() => {}
            Persisted::Local(written) => self.written.push((tp, written)),
            Persisted::Remote(answer) => self.remote.push((tp, answer)),
        }
    }

    /// Whether every batch is committed already (the answer can go out now).
    pub fn committed(&self) -> bool {
        self.remote.is_empty() && self.written.iter().all(|(_, w)| all_committed(w))
    }

    /// Waits until every batch is committed, at most `timeout_ms` in all; the partitions whose
    /// batches were not.
    pub async fn wait(self, timeout_ms: i64) -> Vec<AckFailure> {
        let deadline = crate::broker::now_ms() + timeout_ms;
        let mut failed = Vec::new();
        for (tp, written) in self.written {
            let left = (deadline - crate::broker::now_ms()).max(0);
            if let Err(e) = committed(&written, left).await {
                failed.push(failure(tp, e));
            }
        }
        // The remote coordinator's own timeout bounds these (it answers REQUEST_TIMED_OUT).
        for (tp, answer) in self.remote {
            let left = (deadline - crate::broker::now_ms()).max(0) as u64;
            let wait = std::time::Duration::from_millis(left + REMOTE_GRACE_MS);
            let code = match tokio::time::timeout(wait, answer).await {
                Ok(Ok(code)) => code,
                Ok(Err(_)) => crate::group::codes::COORDINATOR_NOT_AVAILABLE,
                Err(_) => super::error::REQUEST_TIMED_OUT,
            };
            if code != super::error::NONE {
                let message =
                    format!("the acknowledgement's share state was not written (error {code})");
                failed.push((tp, code, message));
            }
        }
        failed
    }
}

fn failure(tp: TopicIdPartition, e: NotCommitted) -> AckFailure {
    match e {
        NotCommitted::TimedOut => (
            tp,
            super::error::REQUEST_TIMED_OUT,
            "the acknowledgement's share state was not replicated in time".into(),
        ),
        NotCommitted::NotLeader => (
            tp,
            crate::group::codes::COORDINATOR_NOT_AVAILABLE,
            "the share state partition moved before the acknowledgement was replicated".into(),
        ),
    }
}

/// Puts `failed` over the acknowledgement results.
pub fn apply(
    results: &mut HashMap<TopicIdPartition, (i16, Option<String>)>,
    failed: Vec<AckFailure>,
) {
    for (tp, code, message) in failed {
        results.insert(tp, (code, Some(message)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::replica::partition::testing::{follower_catches_up, lead_with_a_lagging_follower};
    use crate::share::state_records::SHARE_STATE_TOPIC;

    #[tokio::test]
    async fn an_acknowledgement_waits_for_its_state_to_be_replicated() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            data_dir: dir.path().to_path_buf(),
            share_coordinator_state_topic_num_partitions: 1,
            ..Config::default()
        };
        let b = crate::broker::open_started(config).await;
        crate::share_state::ensure_topic(&b).await;
        let topic = b.replicas.topic(SHARE_STATE_TOPIC).expect("created");
        let p = topic.partition(0).expect("hosted").clone();
        lead_with_a_lagging_follower(&p, b.identity.node_id);
        let record = [(Some(&b"k"[..]), Some(&b"v"[..]))];
        let write = || crate::internal_topic::append(&b, &p, &record, None, 0).expect("appended");
        let tp = (uuid::Uuid::from_u128(7), 3);

        // Not replicated: REQUEST_TIMED_OUT for that partition after the timeout.
        let mut pending = PendingAcks::default();
        pending.push(tp, Persisted::Local(vec![write()]));
        pending.push((uuid::Uuid::from_u128(8), 0), Persisted::nothing());
        assert!(!pending.committed());
        let failed = pending.wait(50).await;
        assert_eq!(failed.len(), 1);
        assert_eq!(
            (failed[0].0, failed[0].1),
            (tp, crate::api::error::REQUEST_TIMED_OUT)
        );
        let mut results = HashMap::from([(tp, (0, None))]);
        apply(&mut results, failed);
        assert_eq!(results[&tp].0, crate::api::error::REQUEST_TIMED_OUT);

        // Replicated while waiting: no failure.
        let mut pending = PendingAcks::default();
        pending.push(tp, Persisted::Local(vec![write()]));
        let follower = p.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            follower_catches_up(&follower);
        });
        assert!(pending.wait(5_000).await.is_empty());

        // Already committed: nothing waits.
        let mut pending = PendingAcks::default();
        pending.push(tp, Persisted::Local(vec![write()]));
        follower_catches_up(&p);
        assert!(pending.committed());
    }
}
