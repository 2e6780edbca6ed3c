//! acks=all decisions (Kafka's `Partition.appendRecordsToLeader` check, `checkEnoughReplicasReachOffset`
//! and `DelayedProduce`).
//!
//! - Before the append: with acks=all the leader refuses (NOT_ENOUGH_REPLICAS) when the committed
//!   ISR is smaller than the effective minimum `min(min.insync.replicas, replication factor)`; an
//!   RF 1 topic with `min.insync.replicas=2` still takes acks=all (Kafka 4.x).
//! - After the append, a waiting produce whose last offset is `O` needs the high watermark past `O`
//!   (`required_offset = O + 1`). Once it is, it succeeds if the maximal ISR still has the minimum,
//!   else it fails with NOT_ENOUGH_REPLICAS_AFTER_APPEND (the records are in the leader's log but
//!   fewer replicas than promised hold them). At its deadline it fails with REQUEST_TIMED_OUT; if
//!   this broker stopped leading, NOT_LEADER_OR_FOLLOWER. While the ISR is under the minimum the
//!   leader does not advance the high watermark (Kafka 4.x), so such a produce waits and times out.
//!
//! Pure functions over numbers; no I/O, no clock. The api layer maps the outcomes to error codes.

#[cfg(test)]
mod tests;

/// `min(min.insync.replicas, replication factor)`, at least 1.
pub fn effective_min_isr(min_insync_replicas: i32, replication_factor: usize) -> usize {
    let configured = usize::try_from(min_insync_replicas.max(1)).unwrap_or(1);
    configured.min(replication_factor.max(1))
}

/// An acks=all produce refused before the append: NOT_ENOUGH_REPLICAS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the in-sync replicas ({isr_size}) are fewer than the required minimum {min_isr}")]
pub struct NotEnoughReplicas {
    pub isr_size: usize,
    pub min_isr: usize,
}

/// Whether an acks=all produce may append with a committed ISR of `isr_size`.
pub fn check_acks_all_append(
    isr_size: usize,
    replication_factor: usize,
    min_insync_replicas: i32,
) -> Result<(), NotEnoughReplicas> {
    let min_isr = effective_min_isr(min_insync_replicas, replication_factor);
    if isr_size < min_isr {
        Err(NotEnoughReplicas { isr_size, min_isr })
    } else {
        Ok(())
    }
}

/// What a waiting produce reads from its partition's leader state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicationView {
    pub high_watermark: i64,
    /// The committed ISR plus an in-flight addition.
    pub maximal_isr_size: usize,
    pub effective_min_isr: usize,
}

/// Where a waiting produce stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DelayedProduceOutcome {
    /// Keep waiting.
    Pending,
    /// Replicated to the ISR: answer NONE.
    Completed,
    /// The high watermark passed the batch but the ISR is below the minimum.
    NotEnoughReplicasAfterAppend,
    /// The request's timeout passed first.
    RequestTimedOut,
    /// This broker no longer leads the partition.
    NotLeaderOrFollower,
}

/// One partition's part of a produce waiting for acks=all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DelayedProduce {
    /// The high watermark that completes it: the batch's last offset + 1.
    pub required_offset: i64,
    /// When it times out (arrival + the request's `timeout_ms`).
    pub deadline_ms: i64,
}

impl DelayedProduce {
    /// A produce whose appended batch ended at `last_offset`, arriving at `now_ms` with the
    /// request's `timeout_ms`.
    pub fn new(last_offset: i64, now_ms: i64, timeout_ms: i32) -> DelayedProduce {
        DelayedProduce {
            required_offset: last_offset.saturating_add(1),
            deadline_ms: now_ms.saturating_add(i64::from(timeout_ms.max(0))),
        }
    }

    /// Decides the produce at `now_ms` given the leader's state (`None`: no longer leader). A
    /// satisfied produce completes even at its deadline; an unsatisfied one times out there.
    pub fn check(&self, leader: Option<&ReplicationView>, now_ms: i64) -> DelayedProduceOutcome {
        let Some(view) = leader else {
            return DelayedProduceOutcome::NotLeaderOrFollower;
        };
        if view.high_watermark >= self.required_offset {
            if view.maximal_isr_size >= view.effective_min_isr {
                DelayedProduceOutcome::Completed
            } else {
                DelayedProduceOutcome::NotEnoughReplicasAfterAppend
            }
        } else if now_ms >= self.deadline_ms {
            DelayedProduceOutcome::RequestTimedOut
        } else {
            DelayedProduceOutcome::Pending
        }
    }
}
