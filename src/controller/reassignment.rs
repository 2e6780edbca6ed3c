//! AlterPartitionReassignments / ListPartitionReassignments (Kafka's
//! `ReplicationControlManager.alterPartitionReassignments` and `listPartitionReassignments`).
//!
//! - A target is a new replica list: non-empty, no duplicates, registered brokers only
//!   (INVALID_REPLICA_ASSIGNMENT otherwise). From the current replicas (which include the
//!   removing ones of an ongoing reassignment) it becomes replicas = target + removing, with
//!   `removing_replicas` / `adding_replicas` (`TargetAssignment::between`). A reorder-only target
//!   (same set) changes the replica order at once; one that only removes in-sync-covered replicas
//!   completes at once too; otherwise the reassignment completes when an AlterPartition (or any
//!   later change) brings every target replica into the ISR (`partition_change`): replicas =
//!   target, the removing replicas leave the ISR, and a new leader is elected from the target if
//!   the leader was removed.
//! - A null target cancels: NO_REASSIGNMENT_IN_PROGRESS when none is; else the replicas and ISR
//!   without the adding replicas; if no ISR member remains, the revert needs an unclean election
//!   (refused with INVALID_REPLICA_ASSIGNMENT unless `unclean.leader.election.enable`).
//! - List: every partition with adding or removing replicas (or the requested ones that have
//!   one; unknown topics and partitions are left out, as Kafka does).
//!
//! Pure: reads the state, returns records and answers.

use kafka_protocol::error::ResponseError;

use super::error::{err, ControllerError};
use super::partition_change::{ChangeBuilder, Election, TargetAssignment};
use super::{Controller, Outcome, TopicPartition};
use crate::metadata::records::MetadataRecord;

/// One ongoing reassignment (ListPartitionReassignments' fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OngoingReassignment {
    pub partition: TopicPartition,
    pub replicas: Vec<i32>,
    pub adding: Vec<i32>,
    pub removing: Vec<i32>,
}

impl Controller {
    /// AlterPartitionReassignments: `(partition, target)` pairs, `None` cancelling. Answers per
    /// partition in request order.
    pub fn alter_partition_reassignments(
        &self,
        requests: &[(TopicPartition, Option<Vec<i32>>)],
    ) -> Outcome<Vec<(TopicPartition, Result<(), ControllerError>)>> {
        let mut records = Vec::new();
        let answer = requests
            .iter()
            .map(|(tp, target)| {
                let result = self.reassign_one(tp, target.as_deref());
                let result = result.map(|record| {
                    records.extend(record.map(MetadataRecord::PartitionChange));
                });
                (tp.clone(), result)
            })
            .collect();
        Outcome { records, answer }
    }

    fn reassign_one(
        &self,
        tp: &TopicPartition,
        target: Option<&[i32]>,
    ) -> Result<Option<crate::metadata::records::PartitionChange>, ControllerError> {
        let unknown = |m: String| err(ResponseError::UnknownTopicOrPartition, m);
        let topic = self
            .state
            .topic_by_name(&tp.topic)
            .ok_or_else(|| unknown(format!("Unable to find a topic named {}.", tp.topic)))?;
        let p = topic.partitions.get(&tp.partition).ok_or_else(|| {
            unknown(format!(
                "Unable to find partition {}:{}.",
                tp.topic, tp.partition
            ))
        })?;
        let election = self.election_for(&topic.name);
        let Some(target) = target else {
            if p.adding_replicas.is_empty() && p.removing_replicas.is_empty() {
                // Kafka answers this one without a message.
                return Err(err(ResponseError::NoReassignmentInProgress, ""));
            }
            let keep = |r: &i32| !p.adding_replicas.contains(r);
            let replicas: Vec<i32> = p.replicas.iter().copied().filter(keep).collect();
            let mut isr: Vec<i32> = p.isr.iter().copied().filter(keep).collect();
            if isr.is_empty() {
                if election != Election::Unclean {
                    return Err(err(
                        ResponseError::InvalidReplicaAssignment,
                        format!(
                            "Unable to revert partition assignment for {}:{} because it would require an unclean leader election.",
                            tp.topic, tp.partition
                        ),
                    ));
                }
                isr = replicas.clone();
            }
            let builder = ChangeBuilder {
                topic_id: topic.topic_id,
                partition_id: tp.partition,
                partition: p,
                target_isr: isr,
                election,
                assignment: Some(TargetAssignment {
                    replicas,
                    removing: vec![],
                    adding: vec![],
                }),
                elr: self.elr_rules(&topic.name, p, None),
            };
            return Ok(builder.build(&|r| self.state.is_active(r)));
        };
        self.validate_target(target)?;
        let builder = ChangeBuilder {
            topic_id: topic.topic_id,
            partition_id: tp.partition,
            partition: p,
            target_isr: p.isr.clone(),
            election,
            assignment: Some(TargetAssignment::between(&p.replicas, target)),
            elr: self.elr_rules(&topic.name, p, None),
        };
        Ok(builder.build(&|r| self.state.is_active(r)))
    }

    /// Kafka's `validateManualPartitionAssignment` for a reassignment target.
    fn validate_target(&self, target: &[i32]) -> Result<(), ControllerError> {
        let invalid = |m: String| Err(err(ResponseError::InvalidReplicaAssignment, m));
        if target.is_empty() {
            return invalid(
                "The manual partition assignment includes an empty replica list.".to_string(),
            );
        }
        let mut seen = std::collections::BTreeSet::new();
        for r in target {
            if !seen.insert(*r) {
                return invalid(format!(
                    "The manual partition assignment includes the broker {r} more than once."
                ));
            }
            if !self.state.brokers.contains_key(r) {
                return invalid(format!(
                    "The manual partition assignment includes broker {r}, but no such broker is registered."
                ));
            }
        }
        Ok(())
    }

    /// ListPartitionReassignments: the ongoing reassignments, of `partitions` when given.
    pub fn list_partition_reassignments(
        &self,
        partitions: Option<&[TopicPartition]>,
    ) -> Vec<OngoingReassignment> {
        let ongoing = |tp: TopicPartition| -> Option<OngoingReassignment> {
            let p = self
                .state
                .topic_by_name(&tp.topic)?
                .partitions
                .get(&tp.partition)?;
            (!p.adding_replicas.is_empty() || !p.removing_replicas.is_empty()).then(|| {
                OngoingReassignment {
                    partition: tp,
                    replicas: p.replicas.clone(),
                    adding: p.adding_replicas.clone(),
                    removing: p.removing_replicas.clone(),
                }
            })
        };
        match partitions {
            Some(list) => list.iter().cloned().filter_map(ongoing).collect(),
            None => {
                let mut topics: Vec<_> = self.state.topics.values().collect();
                topics.sort_by(|a, b| a.name.cmp(&b.name));
                topics
                    .into_iter()
                    .flat_map(|t| {
                        t.partitions.keys().map(|i| TopicPartition {
                            topic: t.name.clone(),
                            partition: *i,
                        })
                    })
                    .filter_map(ongoing)
                    .collect()
            }
        }
    }
}
