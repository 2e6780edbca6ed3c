//! AlterPartition (Kafka's `ReplicationControlManager.alterPartition`): a partition leader
//! proposes a new ISR; the controller checks it and writes a `PartitionChange`.
//!
//! Rules, in Kafka 4.1's order:
//! - the requesting broker's epoch must be its registration's (top-level STALE_BROKER_EPOCH);
//! - per partition: unknown topic id (UNKNOWN_TOPIC_ID) or partition (UNKNOWN_TOPIC_OR_PARTITION);
//!   a leader or partition epoch above the controller's (NOT_CONTROLLER: this controller is
//!   behind, the leader looks for the new one); an older leader epoch (FENCED_LEADER_EPOCH); a
//!   requester that is not the leader (INVALID_REQUEST); an older partition epoch
//!   (INVALID_UPDATE_VERSION); an ISR with a non-replica or a duplicate, or without the leader
//!   (INVALID_REQUEST); a leader recovery state of RECOVERING with more than the leader, or going
//!   back from RECOVERED to RECOVERING (INVALID_REQUEST: Sluice's partitions are always
//!   RECOVERED); a new ISR member that is not registered, fenced, in controlled shutdown or (v3,
//!   KIP-903) whose broker epoch is not its registration's (INELIGIBLE_REPLICA);
//! - otherwise the `ChangeBuilder` decides (it may complete a reassignment); when that moves
//!   leadership away from the requester the change is written and the answer is
//!   NEW_LEADER_ELECTED; else the answer is the partition after the change (leader, epochs, ISR).
//!
//! Pure: reads the controller state, returns records and answers. Where Sluice differs: a
//! partition named twice in one request is refused (INVALID_REQUEST) the second time (Kafka
//! would write two changes from the same state).

use std::collections::BTreeSet;

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use super::error::{err, ControllerError};
use super::partition_change::ChangeBuilder;
use super::state::PartitionState;
use super::{Controller, Outcome};
use crate::metadata::records::MetadataRecord;

/// Kafka's "no broker epoch given" (AlterPartition v3's `BrokerEpoch` default): not checked.
pub const UNKNOWN_BROKER_EPOCH: i64 = -1;

/// Kafka's `LeaderRecoveryState.RECOVERED` (the only state Sluice's partitions are in).
pub const LEADER_RECOVERED: i8 = 0;
/// Kafka's `LeaderRecoveryState.RECOVERING` (after an unclean election, with KIP-704).
pub const LEADER_RECOVERING: i8 = 1;

/// One new ISR member and, with AlterPartition v3 (KIP-903), the broker epoch the leader saw it
/// fetch with (`UNKNOWN_BROKER_EPOCH`: not checked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IsrMember {
    pub broker_id: i32,
    pub broker_epoch: i64,
}

impl IsrMember {
    /// A member without a broker epoch (AlterPartition v2).
    pub fn unchecked(broker_id: i32) -> IsrMember {
        IsrMember {
            broker_id,
            broker_epoch: UNKNOWN_BROKER_EPOCH,
        }
    }
}

/// One partition of an AlterPartition request, from its leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterPartitionRequest {
    pub broker_id: i32,
    pub broker_epoch: i64,
    pub topic_id: Uuid,
    pub partition: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub new_isr: Vec<IsrMember>,
    /// `LEADER_RECOVERED` or `LEADER_RECOVERING`.
    pub leader_recovery_state: i8,
}

/// One partition of a whole AlterPartition request (the broker id and epoch are the request's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterPartitionItem {
    pub topic_id: Uuid,
    pub partition: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub new_isr: Vec<IsrMember>,
    pub leader_recovery_state: i8,
}

/// The partition after an AlterPartition (the response's fields). `error` is NEW_LEADER_ELECTED
/// when the change was written but took leadership away from the requester.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterPartitionAnswer {
    pub leader: i32,
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
    pub partition_epoch: i32,
    pub error: Option<ResponseError>,
}

/// A whole request's answers, one per item in request order; `Err` is the top-level error
/// (STALE_BROKER_EPOCH) with nothing decided.
pub type AlterPartitionAnswers =
    Result<Vec<Result<AlterPartitionAnswer, ControllerError>>, ControllerError>;

impl Controller {
    /// A whole AlterPartition request from broker `broker_id` at `broker_epoch`: the broker epoch
    /// first (top-level STALE_BROKER_EPOCH), then each partition against the state before the
    /// request (their records are independent: one change per partition).
    pub fn alter_partitions(
        &self,
        broker_id: i32,
        broker_epoch: i64,
        items: &[AlterPartitionItem],
    ) -> Outcome<AlterPartitionAnswers> {
        if let Err(e) = self.check_broker_epoch(broker_id, broker_epoch) {
            return Outcome {
                records: Vec::new(),
                answer: Err(e),
            };
        }
        let mut records = Vec::new();
        let mut seen = BTreeSet::new();
        let answers = items
            .iter()
            .map(|item| {
                if !seen.insert((item.topic_id, item.partition)) {
                    return Err(err(
                        ResponseError::InvalidRequest,
                        "The partition is named more than once in the request.",
                    ));
                }
                let request = AlterPartitionRequest {
                    broker_id,
                    broker_epoch,
                    topic_id: item.topic_id,
                    partition: item.partition,
                    leader_epoch: item.leader_epoch,
                    partition_epoch: item.partition_epoch,
                    new_isr: item.new_isr.clone(),
                    leader_recovery_state: item.leader_recovery_state,
                };
                let out = self.alter_partition_one(&request)?;
                records.extend(out.records);
                Ok(out.answer)
            })
            .collect();
        Outcome {
            records,
            answer: Ok(answers),
        }
    }

    /// AlterPartition for one partition (the broker epoch checked too): see the module doc.
    pub fn alter_partition(
        &self,
        request: &AlterPartitionRequest,
    ) -> Result<Outcome<AlterPartitionAnswer>, ControllerError> {
        self.check_broker_epoch(request.broker_id, request.broker_epoch)?;
        self.alter_partition_one(request)
    }

    fn alter_partition_one(
        &self,
        request: &AlterPartitionRequest,
    ) -> Result<Outcome<AlterPartitionAnswer>, ControllerError> {
        let topic = self.state.topics.get(&request.topic_id).ok_or_else(|| {
            err(
                ResponseError::UnknownTopicId,
                "This server does not host this topic ID.",
            )
        })?;
        let p = topic.partitions.get(&request.partition).ok_or_else(|| {
            err(
                ResponseError::UnknownTopicOrPartition,
                "This server does not host this topic-partition.",
            )
        })?;
        self.validate(request, p)?;
        let builder = ChangeBuilder {
            topic_id: request.topic_id,
            partition_id: request.partition,
            partition: p,
            target_isr: request.new_isr.iter().map(|m| m.broker_id).collect(),
            election: self.election_for(&topic.name),
            assignment: None,
            elr: self.elr_rules(&topic.name, p, None),
        };
        let change = builder.build(&|r| self.state.is_active(r));
        let (after, records, error): (PartitionState, _, _) = match change {
            None => (p.clone(), vec![], None),
            Some(c) => {
                let after = p.merged(&c);
                let error =
                    (after.leader != request.broker_id).then_some(ResponseError::NewLeaderElected);
                (after, vec![MetadataRecord::PartitionChange(c)], error)
            }
        };
        Ok(Outcome {
            records,
            answer: AlterPartitionAnswer {
                leader: after.leader,
                leader_epoch: after.leader_epoch,
                isr: after.isr,
                partition_epoch: after.partition_epoch,
                error,
            },
        })
    }

    /// Kafka's `validateAlterPartitionData` plus the eligibility of the new ISR's members.
    fn validate(
        &self,
        request: &AlterPartitionRequest,
        p: &PartitionState,
    ) -> Result<(), ControllerError> {
        let refuse = |e: ResponseError, m: String| Err(err(e, m));
        // A higher epoch than ours: this controller is likely no longer the active one.
        if request.leader_epoch > p.leader_epoch {
            return refuse(
                ResponseError::NotController,
                format!(
                    "The current leader epoch is {}, lower than the request's {}.",
                    p.leader_epoch, request.leader_epoch
                ),
            );
        }
        if request.partition_epoch > p.partition_epoch {
            return refuse(
                ResponseError::NotController,
                format!(
                    "The current partition epoch is {}, lower than the request's {}.",
                    p.partition_epoch, request.partition_epoch
                ),
            );
        }
        if request.leader_epoch < p.leader_epoch {
            return refuse(
                ResponseError::FencedLeaderEpoch,
                format!(
                    "The current leader epoch is {}, not {}.",
                    p.leader_epoch, request.leader_epoch
                ),
            );
        }
        if p.leader != request.broker_id {
            return refuse(
                ResponseError::InvalidRequest,
                format!(
                    "The current leader is {}, not {}.",
                    p.leader, request.broker_id
                ),
            );
        }
        if request.partition_epoch < p.partition_epoch {
            return refuse(
                ResponseError::InvalidUpdateVersion,
                format!(
                    "The current partition epoch is {}, not {}.",
                    p.partition_epoch, request.partition_epoch
                ),
            );
        }
        let ids: Vec<i32> = request.new_isr.iter().map(|m| m.broker_id).collect();
        let mut seen = BTreeSet::new();
        if !ids
            .iter()
            .all(|r| p.replicas.contains(r) && seen.insert(*r))
        {
            return refuse(
                ResponseError::InvalidRequest,
                format!("Invalid ISR {ids:?}: a member is not a replica or is named twice."),
            );
        }
        if !ids.contains(&p.leader) {
            return refuse(
                ResponseError::InvalidRequest,
                format!(
                    "Invalid ISR {ids:?}: it does not include the leader {}.",
                    p.leader
                ),
            );
        }
        match request.leader_recovery_state {
            LEADER_RECOVERED => {}
            LEADER_RECOVERING if ids.len() > 1 => {
                return refuse(
                    ResponseError::InvalidRequest,
                    format!("ISR {ids:?} has more than the leader while it is recovering."),
                )
            }
            LEADER_RECOVERING => {
                return refuse(
                    ResponseError::InvalidRequest,
                    "The leader recovery state cannot change from RECOVERED to RECOVERING.".into(),
                )
            }
            other => {
                return refuse(
                    ResponseError::InvalidRequest,
                    format!("Unknown leader recovery state {other}."),
                )
            }
        }
        let ineligible: Vec<String> = request
            .new_isr
            .iter()
            .filter_map(|m| {
                let why = match self.state.brokers.get(&m.broker_id) {
                    None => "not registered".to_string(),
                    Some(b) if b.in_controlled_shutdown => "shutting down".to_string(),
                    Some(b) if b.fenced => "fenced".to_string(),
                    Some(b)
                        if m.broker_epoch != UNKNOWN_BROKER_EPOCH
                            && m.broker_epoch != b.epoch() =>
                    {
                        format!(
                            "broker epoch mismatch: requested={} VS expected={}",
                            m.broker_epoch,
                            b.epoch()
                        )
                    }
                    Some(_) => return None,
                };
                Some(format!("{} ({why})", m.broker_id))
            })
            .collect();
        if !ineligible.is_empty() {
            return refuse(
                ResponseError::IneligibleReplica,
                format!(
                    "The new ISR {ids:?} contains ineligible replicas: {}.",
                    ineligible.join(", ")
                ),
            );
        }
        Ok(())
    }
}
