//! The leader side's helpers of the replica role: the HW it serves (the core's, or the
//! `HwFromLeader` mutation's log end), the waiting acks=all produces decided against
//! `PartitionLeader::replication_view`, and the performing of the core's `Effect`s on a replica.
//! No clock, no I/O.

use sluice::replica::replication::acks::{DelayedProduceOutcome, ReplicationView};
use sluice::replica::replication::leader::Effect;
use sluice::replica::replication::PartitionLeader;

use super::{
    Env, LeaderRole, Out, Rec, ReplMsg, ReplicaLog, Role, Tp, Waiting,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT,
};
use crate::net::Payload;
use crate::world::Mutation;

/// The HW the driver serves: the core's, or (mutation) the leader's log end.
pub(super) fn served_hw(l: &PartitionLeader, mutation: Option<Mutation>) -> i64 {
    if mutation == Some(Mutation::HwFromLeader) {
        l.log_end_offset()
    } else {
        l.high_watermark()
    }
}

pub(super) fn view(l: &PartitionLeader, mutation: Option<Mutation>) -> ReplicationView {
    let mut v = l.replication_view();
    v.high_watermark = served_hw(l, mutation);
    v
}

pub(super) fn outcome_code(o: DelayedProduceOutcome) -> Option<i16> {
    match o {
        DelayedProduceOutcome::Pending => None,
        DelayedProduceOutcome::Completed => Some(0),
        DelayedProduceOutcome::NotEnoughReplicasAfterAppend => {
            Some(NOT_ENOUGH_REPLICAS_AFTER_APPEND)
        }
        DelayedProduceOutcome::RequestTimedOut => Some(REQUEST_TIMED_OUT),
        DelayedProduceOutcome::NotLeaderOrFollower => Some(NOT_LEADER_OR_FOLLOWER),
    }
}

pub(super) fn answer(id: u64, code: i16) -> Payload {
    Payload::Repl(ReplMsg::ProduceResponse { id, code })
}

pub(super) fn answer_all(waiting: Vec<Waiting>, code: i16, env: &mut Env, out: &mut Out) {
    for w in waiting {
        if code == NOT_LEADER_OR_FOLLOWER {
            env.stats.not_leader += 1;
        }
        out.push((w.client, answer(w.request, code)));
    }
}

/// Decides the waiting produces of a leader (at a new HW and at every tick).
pub(super) fn complete_waiting(
    me: i32,
    tp: Tp,
    l: &mut LeaderRole,
    log: &[Rec],
    env: &mut Env,
    out: &mut Out,
) {
    let v = view(&l.leader, env.mutation);
    let now = env.now as i64;
    let mut keep = Vec::new();
    for w in std::mem::take(&mut l.waiting) {
        match outcome_code(w.produce.check(Some(&v), now)) {
            None => keep.push(w),
            Some(code) => {
                match code {
                    0 => {
                        let held = log
                            .get(w.base as usize..w.base as usize + w.records.len())
                            .is_some_and(|s| s == w.records.as_slice());
                        if !held {
                            env.check.violation(format!(
                                "broker {me}: acknowledged batch at {}-{} offset {} is not in the leader's log",
                                tp.0, tp.1, w.base
                            ));
                        }
                        env.check
                            .on_acked(tp, l.leader.leader_epoch(), w.base, &w.records);
                        env.stats.acked_batches += 1;
                    }
                    NOT_ENOUGH_REPLICAS_AFTER_APPEND => {
                        env.stats.not_enough_replicas_after_append += 1
                    }
                    REQUEST_TIMED_OUT => env.stats.timed_out += 1,
                    _ => env.stats.not_leader += 1,
                }
                out.push((w.client, answer(w.request, code)));
            }
        }
    }
    l.waiting = keep;
}

/// Performs a leader's effects on its replica.
pub(super) fn perform(
    me: i32,
    tp: Tp,
    r: &mut ReplicaLog,
    effects: Vec<Effect>,
    env: &mut Env,
    out: &mut Out,
) {
    for e in effects {
        match e {
            Effect::AssignEpochStartOffset(entry) => {
                if r.cache.assign(entry.epoch, entry.start_offset).is_err() {
                    env.check.violation(format!(
                        "broker {me}: invalid epoch entry {entry:?} for {}-{}",
                        tp.0, tp.1
                    ));
                }
            }
            Effect::HighWatermarkAdvanced { from, to } => {
                if let Role::Leader(l) = &mut r.role {
                    if to > r.high_watermark {
                        let old = r.high_watermark;
                        r.high_watermark = to;
                        let epoch = l.leader.leader_epoch();
                        env.check.on_high_watermark(me, tp, epoch, &r.log, old, to);
                    }
                    env.check
                        .on_leader_high_watermark(me, tp, l.leader.leader_epoch(), from, to);
                    complete_waiting(me, tp, l, &r.log, env, out);
                }
            }
            Effect::SendAlterPartition(_) => {
                if let Role::Leader(l) = &mut r.role {
                    l.alter_due = true;
                }
            }
            Effect::IsrCommitted { .. } => env.stats.isr_changes += 1,
        }
    }
}
