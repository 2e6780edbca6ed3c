//! The share coordinator's RPCs, v0 (KIP-932; what a share-partition leader sends to the leader
//! of its key's `__share_group_state` partition, found with FindCoordinator key type 2):
//! InitializeShareGroupState (83), ReadShareGroupState (84), WriteShareGroupState (85),
//! DeleteShareGroupState (86), ReadShareGroupStateSummary (87). Served from `Broker::share_state`
//! (the pure `share::coordinator::ShareCoordinator`) as Kafka 4.1.2's share coordinator serves
//! them:
//! - an empty group id or topic list, or (except Initialize, which leaves such a topic out) a
//!   topic without partitions, answers no results;
//! - per partition, first where the key is coordinated: NOT_COORDINATOR when this broker does not
//!   lead its state partition (its keys are first reloaded once per leader epoch,
//!   `share_state::ensure_fresh`; COORDINATOR_LOAD_IN_PROGRESS if it was gained meanwhile); then a negative partition is INVALID_REQUEST, then the
//!   operation's own checks (Read and Write of a key without state: INVALID_REQUEST; an older
//!   leader epoch: FENCED_LEADER_EPOCH; an older state epoch: FENCED_STATE_EPOCH), then a topic
//!   id or partition the image does not have is UNKNOWN_TOPIC_OR_PARTITION;
//! - a change (and a Read with a newer leader epoch) is appended to the state partition as
//!   acks=all and answered once committed (`share.coordinator.write.timeout.ms`, then
//!   COORDINATOR_NOT_AVAILABLE; leadership lost meanwhile: NOT_COORDINATOR).
//!
//! A Write carries at most [`MAX_STATE_BATCHES`] batches per partition (INVALID_REQUEST above:
//! Kafka has no such bound; it keeps the fold's cost bounded under the coordinator's lock).
//! Duplicate partitions in one request are answered once, with the last one's outcome.

use std::sync::Arc;

use kafka_protocol::messages::{
    delete_share_group_state_response as dr, initialize_share_group_state_response as ir,
    read_share_group_state_response as rr, read_share_group_state_summary_response as sr,
    write_share_group_state_response as wr, DeleteShareGroupStateRequest,
    DeleteShareGroupStateResponse, InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse, ReadShareGroupStateRequest, ReadShareGroupStateResponse,
    ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse,
    WriteShareGroupStateRequest, WriteShareGroupStateResponse,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::group::later;
use super::{Reply, RequestContext};
use crate::broker::Broker;
use crate::group::codes;
use crate::internal_topic::{committed, NotCommitted, Written};
use crate::share::coordinator::{StateRecord, WriteState, FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH};
use crate::share::persist::{PersisterStateBatch, ShareSnapshot};
use crate::share::registry::ShareKey;
use crate::share::state_records::{coordinator_key, SHARE_STATE_TOPIC};
use crate::share_state;

/// The most state batches one partition of a WriteShareGroupState may carry.
pub const MAX_STATE_BATCHES: usize = 10_000;

const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;

/// What one partition of a request asks.
#[derive(Debug, Clone)]
enum Op {
    Initialize { state_epoch: i32, start_offset: i64 },
    Read { leader_epoch: i32 },
    Write(WriteState),
    Delete,
    Summary,
}

impl Op {
    /// The prefix of Kafka's message for a coordinator-level error of this operation.
    fn verb(&self) -> &'static str {
        match self {
            Op::Initialize { .. } => "initialize share group state",
            Op::Read { .. } => "read share group state",
            Op::Write(_) => "write share group state",
            Op::Delete => "delete share group state",
            Op::Summary => "read share group state summary",
        }
    }
}

/// One partition's answer: its error (code and message), or the state it reads (`None`: the
/// key has none, or the operation answers none).
#[derive(Debug, Clone, PartialEq, Default)]
struct Outcome {
    code: i16,
    message: Option<String>,
    state: Option<ShareSnapshot>,
}

impl Outcome {
    fn error(code: i16, message: impl Into<String>) -> Outcome {
        Outcome {
            code,
            message: Some(message.into()),
            state: None,
        }
    }

    /// A coordinator-level error, worded as Kafka's share coordinator service words it.
    fn coordinator(op: &Op, code: i16) -> Outcome {
        let reason = match code {
            codes::NOT_COORDINATOR => "This is not the correct coordinator.",
            COORDINATOR_LOAD_IN_PROGRESS => {
                "The coordinator is loading and hence can't process requests."
            }
            _ => "The coordinator is not available.",
        };
        Outcome::error(code, format!("Unable to {}: {reason}", op.verb()))
    }
}

/// A request in one shape: group id, then per topic id its partitions' operations.
type Asked = (String, Vec<(Uuid, Vec<(i32, Op)>)>);
/// The answers, in the order the topics and partitions were first asked.
type Answered = Vec<(Uuid, Vec<(i32, Outcome)>)>;

/// The first checks of one partition (no state changed): where its key is coordinated, then
/// its partition index. Ok: the key.
fn locate(
    broker: &Broker,
    c: &crate::share::coordinator::ShareCoordinator,
    group: &str,
    topic_id: Uuid,
    partition: i32,
    op: &Op,
) -> Result<ShareKey, Outcome> {
    let key = ShareKey {
        group_id: group.to_string(),
        topic_id,
        partition,
    };
    let me = broker.identity.node_id;
    let image = broker.image();
    let shard = crate::group::shard::coordinator_shard(
        &image,
        me,
        SHARE_STATE_TOPIC,
        &coordinator_key(&key),
    )
    .map_err(|_| Outcome::coordinator(op, codes::NOT_COORDINATOR))?;
    // Reloaded before the request took the lock (`serve`); led here since: not yet.
    if !crate::share_state::is_fresh_in(broker, c, shard) {
        return Err(Outcome::coordinator(op, COORDINATOR_LOAD_IN_PROGRESS));
    }
    if partition < 0 {
        return Err(Outcome::error(
            codes::INVALID_REQUEST,
            "The partition id cannot be a negative number.",
        ));
    }
    Ok(key)
}

/// Whether the image has `key`'s topic-partition (checked after the operation's own checks).
fn known(broker: &Broker, key: &ShareKey) -> Result<(), Outcome> {
    let image = broker.image();
    let known = image
        .topic_by_id(key.topic_id)
        .is_some_and(|t| t.partitions.contains_key(&key.partition));
    if known {
        Ok(())
    } else {
        Err(Outcome::error(
            codes::UNKNOWN_TOPIC_OR_PARTITION,
            "This server does not host this topic-partition.",
        ))
    }
}

fn epoch_error(code: i16) -> Outcome {
    let message = match code {
        FENCED_LEADER_EPOCH => "The leader epoch in the request is older than the epoch on the broker.",
        FENCED_STATE_EPOCH => {
            "The share coordinator rejected the request because the share-group state epoch did not match."
        }
        _ => "The request attempted to perform an operation on an invalid resource.",
    };
    Outcome::error(code, message)
}

/// Runs one partition's operation under the coordinator's lock: the record to append (if any)
/// and the answer once it is committed.
fn decide(
    c: &crate::share::coordinator::ShareCoordinator,
    key: &ShareKey,
    op: &Op,
    now: i64,
) -> Result<(Option<StateRecord>, Outcome), Outcome> {
    let ok = |state| Outcome {
        code: codes::NONE,
        message: None,
        state,
    };
    match op {
        Op::Initialize {
            state_epoch,
            start_offset,
        } => c
            .initialize(key, *state_epoch, *start_offset, now)
            .map(|r| (Some(r), ok(None)))
            .map_err(epoch_error),
        Op::Read { leader_epoch } => match c.read_as_leader(key, *leader_epoch, now) {
            Ok((state, record)) => Ok((record, ok(Some(state)))),
            Err(FENCED_LEADER_EPOCH) => Err(epoch_error(FENCED_LEADER_EPOCH)),
            Err(_) => Err(Outcome::error(
                codes::INVALID_REQUEST,
                "Read operation on uninitialized share partition not allowed.",
            )),
        },
        Op::Write(w) => {
            if c.read(key).is_none() {
                return Err(Outcome::error(
                    codes::INVALID_REQUEST,
                    "Write operation on uninitialized share partition not allowed.",
                ));
            }
            if w.state_batches.len() > MAX_STATE_BATCHES {
                return Err(Outcome::error(
                    codes::INVALID_REQUEST,
                    format!("A write carries at most {MAX_STATE_BATCHES} state batches."),
                ));
            }
            c.write(key, w, now)
                .map(|r| (Some(r), ok(None)))
                .map_err(epoch_error)
        }
        // A key without state: nothing to write, success (Kafka logs a warning).
        Op::Delete => Ok((c.delete(key), ok(None))),
        Op::Summary => Ok((None, ok(c.read(key).cloned()))),
    }
}

/// Serves every partition of `asked`: decided and appended under the coordinator's lock, then
/// answered once the appended batches are committed.
async fn serve(broker: Arc<Broker>, asked: Asked) -> Answered {
    let (group, topics) = asked;
    let now = crate::broker::now_ms();
    let mut answered: Answered = Vec::new();
    let mut pending: Vec<(usize, usize, Op, Vec<Written>)> = Vec::new();
    // The state partitions led here are reloaded at their leader epoch first.
    let image = broker.image();
    let me = broker.identity.node_id;
    let mut shards: Vec<i32> = topics
        .iter()
        .flat_map(|(id, ps)| ps.iter().map(|(p, _)| ShareKey::new(&group, (*id, *p))))
        .filter_map(|key| {
            let key = coordinator_key(&key);
            crate::group::shard::coordinator_shard(&image, me, SHARE_STATE_TOPIC, &key).ok()
        })
        .collect();
    shards.sort_unstable();
    shards.dedup();
    for shard in shards {
        crate::share_state::ensure_fresh(&broker, shard).await;
    }
    {
        let topic = broker.replicas.topic(SHARE_STATE_TOPIC);
        let mut c = broker.share_state.lock();
        crate::share_state::ensure_loaded(&broker, &mut c, now);
        for (topic_id, partitions) in topics {
            let t = match answered.iter().position(|(id, _)| *id == topic_id) {
                Some(t) => t,
                None => {
                    answered.push((topic_id, Vec::new()));
                    answered.len() - 1
                }
            };
            for (partition, op) in partitions {
                let outcome =
                    locate(&broker, &c, &group, topic_id, partition, &op).and_then(|key| {
                        let (record, answer) = decide(&c, &key, &op, now)?;
                        known(&broker, &key)?;
                        let Some(record) = record else {
                            return Ok((answer, Vec::new()));
                        };
                        let topic = topic
                            .as_ref()
                            .ok_or_else(|| Outcome::coordinator(&op, codes::NOT_COORDINATOR))?;
                        // Applied once appended; a failed append is NOT_COORDINATOR (not led
                        // here after all) or COORDINATOR_NOT_AVAILABLE (the ISR below its
                        // minimum, a storage error), as Kafka's coordinator maps them.
                        let written =
                            share_state::append_record(&broker, topic, &mut c, &record, now, false)
                                .map_err(|code| Outcome::coordinator(&op, code))?;
                        Ok((answer, written))
                    });
                let (outcome, written) = match outcome {
                    Ok((answer, written)) => (answer, written),
                    Err(refused) => (refused, Vec::new()),
                };
                let slots = &mut answered[t].1;
                let p = match slots.iter().position(|(q, _)| *q == partition) {
                    Some(p) => {
                        slots[p].1 = outcome;
                        p
                    }
                    None => {
                        slots.push((partition, outcome));
                        slots.len() - 1
                    }
                };
                pending.retain(|(pt, pp, _, _)| (*pt, *pp) != (t, p));
                if !written.is_empty() {
                    pending.push((t, p, op, written));
                }
            }
        }
    }
    let timeout = broker.config.share_coordinator_write_timeout_ms;
    for (t, p, op, written) in pending {
        let code = match committed(&written, timeout).await {
            Ok(()) => continue,
            Err(NotCommitted::TimedOut) => codes::COORDINATOR_NOT_AVAILABLE,
            Err(NotCommitted::NotLeader) => codes::NOT_COORDINATOR,
        };
        answered[t].1[p].1 = Outcome::coordinator(&op, code);
    }
    answered
}

/// A request's topics as (topic id, [(partition, what the partition asks)]).
macro_rules! asked_topics {
    ($topics:expr, |$p:ident| $what:expr) => {
        $topics
            .into_iter()
            .map(|t| {
                let ps = t.partitions.into_iter();
                (t.topic_id, ps.map(|$p| ($p.partition, $what)).collect())
            })
            .collect()
    };
}

/// The answer of an API whose partitions carry only an error (Initialize, Write, Delete).
macro_rules! errors_only {
    ($answered:expr, $response:ty, $result:ty, $partition:ty) => {{
        let results = $answered.into_iter().map(|(id, ps)| {
            let partitions = ps.into_iter().map(|(p, o)| {
                <$partition>::default()
                    .with_partition(p)
                    .with_error_code(o.code)
                    .with_error_message(o.message.map(sb))
            });
            <$result>::default()
                .with_topic_id(id)
                .with_partitions(partitions.collect())
        });
        <$response>::default().with_results(results.collect())
    }};
}

fn sb(s: String) -> StrBytes {
    StrBytes::from_string(s)
}

/// Kafka's empty answer: no group id, no topics, or a topic without partitions (Initialize
/// leaves such a topic out instead).
fn shaped<T>(
    group: &StrBytes,
    topics: Vec<(Uuid, Vec<(i32, T)>)>,
    skip_empty_topics: bool,
    op: impl Fn(T) -> Op,
) -> Option<Asked> {
    if group.is_empty() || topics.is_empty() {
        return None;
    }
    if !skip_empty_topics && topics.iter().any(|(_, p)| p.is_empty()) {
        return None;
    }
    let topics = topics
        .into_iter()
        .filter(|(_, p)| !p.is_empty())
        .map(|(id, ps)| (id, ps.into_iter().map(|(p, x)| (p, op(x))).collect()))
        .collect();
    Some((group.to_string(), topics))
}

/// Answers `asked` (nothing when Kafka answers no results) through `encode`.
fn answer<T, F>(broker: &Arc<Broker>, ctx: RequestContext, asked: Option<Asked>, encode: F) -> Reply
where
    T: kafka_protocol::protocol::Encodable + Send + 'static,
    F: FnOnce(Answered) -> T + Send + 'static,
{
    let broker = broker.clone();
    later(ctx, async move {
        let answered = match asked {
            Some(asked) => serve(broker, asked).await,
            None => Vec::new(),
        };
        encode(answered)
    })
}

pub fn initialize(
    broker: &Arc<Broker>,
    ctx: RequestContext,
    r: InitializeShareGroupStateRequest,
) -> Reply {
    let topics = asked_topics!(r.topics, |p| (p.state_epoch, p.start_offset));
    let asked = shaped(&r.group_id, topics, true, |(state_epoch, start_offset)| {
        Op::Initialize {
            state_epoch,
            start_offset,
        }
    });
    answer(broker, ctx, asked, |answered| {
        errors_only!(
            answered,
            InitializeShareGroupStateResponse,
            ir::InitializeStateResult,
            ir::PartitionResult
        )
    })
}

pub fn read(broker: &Arc<Broker>, ctx: RequestContext, r: ReadShareGroupStateRequest) -> Reply {
    let topics = asked_topics!(r.topics, |p| p.leader_epoch);
    let asked = shaped(&r.group_id, topics, false, |leader_epoch| Op::Read {
        leader_epoch,
    });
    answer(broker, ctx, asked, |answered| {
        let results = answered.into_iter().map(|(id, ps)| {
            let partitions = ps.into_iter().map(|(p, o)| {
                let result = rr::PartitionResult::default()
                    .with_partition(p)
                    .with_error_code(o.code)
                    .with_error_message(o.message.map(sb));
                match o.state {
                    Some(s) => result
                        .with_state_epoch(s.state_epoch)
                        .with_start_offset(s.start_offset)
                        .with_state_batches(s.state_batches.iter().map(read_batch).collect()),
                    None => result,
                }
            });
            rr::ReadStateResult::default()
                .with_topic_id(id)
                .with_partitions(partitions.collect())
        });
        ReadShareGroupStateResponse::default().with_results(results.collect())
    })
}

fn read_batch(b: &PersisterStateBatch) -> rr::StateBatch {
    rr::StateBatch::default()
        .with_first_offset(b.first_offset)
        .with_last_offset(b.last_offset)
        .with_delivery_state(b.delivery_state)
        .with_delivery_count(b.delivery_count)
}

pub fn write(broker: &Arc<Broker>, ctx: RequestContext, r: WriteShareGroupStateRequest) -> Reply {
    let topics = asked_topics!(r.topics, |p| {
        let batches = p.state_batches.iter().map(|b| PersisterStateBatch {
            first_offset: b.first_offset,
            last_offset: b.last_offset,
            delivery_state: b.delivery_state,
            delivery_count: b.delivery_count,
        });
        WriteState {
            state_epoch: p.state_epoch,
            leader_epoch: p.leader_epoch,
            start_offset: p.start_offset,
            state_batches: batches.collect(),
        }
    });
    let asked = shaped(&r.group_id, topics, false, Op::Write);
    answer(broker, ctx, asked, |answered| {
        errors_only!(
            answered,
            WriteShareGroupStateResponse,
            wr::WriteStateResult,
            wr::PartitionResult
        )
    })
}

pub fn delete(broker: &Arc<Broker>, ctx: RequestContext, r: DeleteShareGroupStateRequest) -> Reply {
    let topics = asked_topics!(r.topics, |_p| ());
    let asked = shaped(&r.group_id, topics, false, |()| Op::Delete);
    answer(broker, ctx, asked, |answered| {
        errors_only!(
            answered,
            DeleteShareGroupStateResponse,
            dr::DeleteStateResult,
            dr::PartitionResult
        )
    })
}

pub fn summary(
    broker: &Arc<Broker>,
    ctx: RequestContext,
    r: ReadShareGroupStateSummaryRequest,
) -> Reply {
    let topics = asked_topics!(r.topics, |_p| ());
    let asked = shaped(&r.group_id, topics, false, |()| Op::Summary);
    answer(broker, ctx, asked, |answered| {
        let results = answered.into_iter().map(|(id, ps)| {
            let partitions = ps.into_iter().map(|(p, o)| {
                let result = sr::PartitionResult::default()
                    .with_partition(p)
                    .with_error_code(o.code)
                    .with_error_message(o.message.map(sb));
                match (o.code, o.state) {
                    (_, Some(s)) => result
                        .with_state_epoch(s.state_epoch)
                        .with_leader_epoch(s.leader_epoch)
                        .with_start_offset(s.start_offset),
                    // No state: start offset -1 (epochs 0).
                    (codes::NONE, None) => result.with_start_offset(-1),
                    _ => result,
                }
            });
            sr::ReadStateSummaryResult::default()
                .with_topic_id(id)
                .with_partitions(partitions.collect())
        });
        ReadShareGroupStateSummaryResponse::default().with_results(results.collect())
    })
}

#[cfg(test)]
#[path = "share_state_rpc_tests.rs"]
mod tests;
