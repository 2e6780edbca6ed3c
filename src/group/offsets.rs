//! Committed offsets: OffsetCommit (with Kafka's generation/member checks), OffsetFetch and
//! OffsetDelete. Part of the pure coordinator state machine (no I/O; records go out as effects).

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponsePartitions, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse, TopicName,
};

use super::classic::{sb, ClassicGroup, GroupState};
use super::coordinator::Coordinator;
use super::records::{self, CoordinatorRecord, OffsetValue};
use super::{codes, Effects};

/// Kafka's OffsetCommit checks against a classic group.
fn validate_commit(
    group: &ClassicGroup,
    member_id: &str,
    instance_id: Option<&str>,
    generation_id: i32,
) -> Result<(), i16> {
    if group.state == GroupState::Dead {
        return Err(codes::COORDINATOR_NOT_AVAILABLE);
    }
    if generation_id < 0 && group.state == GroupState::Empty {
        // An admin client or a consumer without group management: allowed on an empty group.
        return Ok(());
    }
    if generation_id >= 0 || !member_id.is_empty() || instance_id.is_some() {
        group.validate_member(member_id, instance_id)?;
        if generation_id != group.generation_id {
            return Err(codes::ILLEGAL_GENERATION);
        }
    } else if group.state != GroupState::Empty {
        return Err(codes::UNKNOWN_MEMBER_ID);
    }
    if group.state == GroupState::CompletingRebalance {
        return Err(codes::REBALANCE_IN_PROGRESS);
    }
    Ok(())
}

/// A committed-offset change a step's records carry, applied once they are written.
#[derive(Debug, Clone)]
pub enum OffsetChange {
    /// An OffsetCommit's offset (its simple group is created with it if none exists).
    Commit {
        group_id: String,
        topic: String,
        partition: i32,
        value: OffsetValue,
    },
    /// An OffsetDelete's tombstone: the committed offset and any pending transactional ones go.
    Delete {
        group_id: String,
        topic: String,
        partition: i32,
    },
    /// A DeleteGroups of an empty group: the group, its offsets and its pending transactional
    /// offsets go.
    DeleteGroup { group_id: String },
}

/// One group's slice of an OffsetFetch: `None` topics means every committed offset.
pub struct FetchQuery {
    pub group_id: String,
    pub topics: Option<Vec<(String, Vec<i32>)>>,
    /// OffsetFetch v9: the asking member (None and -1 for admin clients).
    pub member_id: Option<String>,
    pub member_epoch: i32,
    /// OffsetFetch v7+: partitions with pending transactional offsets answer
    /// UNSTABLE_OFFSET_COMMIT instead of their committed offset.
    pub require_stable: bool,
}

impl Coordinator {
    pub fn commit(
        &mut self,
        now: i64,
        version: i16,
        req: &OffsetCommitRequest,
    ) -> (OffsetCommitResponse, Effects) {
        let mut fx = Effects::default();
        let group_id = req.group_id.as_str();
        let generation = req.generation_id_or_member_epoch;
        let member_id = req.member_id.as_str();
        let instance = req.group_instance_id.as_ref().map(|s| s.as_str());
        let group_error = if group_id.is_empty() {
            Err(codes::INVALID_GROUP_ID)
        } else {
            match (
                self.consumer_groups.get(group_id),
                self.groups.get(group_id),
            ) {
                (Some(g), _) => g.validate_commit(member_id, generation, version),
                (None, Some(g)) => validate_commit(g, member_id, instance, generation),
                // A "simple" group: offsets without membership (created once the commit is
                // written, by `apply_written`).
                (None, None) if generation < 0 => Ok(()),
                (None, None) if version >= 9 => Err(codes::GROUP_ID_NOT_FOUND),
                (None, None) => Err(codes::ILLEGAL_GENERATION),
            }
        };
        let max_metadata = self.config.offset_metadata_max_bytes;
        let mut topics = Vec::with_capacity(req.topics.len());
        for t in &req.topics {
            let topic = t.name.as_str();
            let mut partitions = Vec::with_capacity(t.partitions.len());
            for p in &t.partitions {
                let metadata = p
                    .committed_metadata
                    .as_ref()
                    .map(|m| m.as_str())
                    .unwrap_or("");
                let code = match group_error {
                    Err(code) => code,
                    Ok(()) if metadata.len() > max_metadata => codes::OFFSET_METADATA_TOO_LARGE,
                    Ok(()) => {
                        let value = OffsetValue {
                            offset: p.committed_offset,
                            leader_epoch: p.committed_leader_epoch,
                            metadata: metadata.to_string(),
                            commit_timestamp: now,
                        };
                        fx.records.push(CoordinatorRecord {
                            group_id: group_id.to_string(),
                            key: records::offset_key(group_id, topic, p.partition_index),
                            value: Some(records::offset_value(&value)),
                        });
                        fx.offsets.push(OffsetChange::Commit {
                            group_id: group_id.to_string(),
                            topic: topic.to_string(),
                            partition: p.partition_index,
                            value,
                        });
                        codes::NONE
                    }
                };
                partitions.push(
                    OffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code),
                );
            }
            topics.push(
                OffsetCommitResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_partitions(partitions),
            );
        }
        (OffsetCommitResponse::default().with_topics(topics), fx)
    }

    /// Applies the offset changes of a step whose records were written (see [`Effects`]).
    pub fn apply_written(&mut self, changes: Vec<OffsetChange>, now: i64) {
        for change in changes {
            match change {
                OffsetChange::Commit {
                    group_id,
                    topic,
                    partition,
                    value,
                } => {
                    if !self.consumer_groups.contains_key(&group_id) {
                        self.groups
                            .entry(group_id.clone())
                            .or_insert_with(|| ClassicGroup::new(&group_id, now));
                    }
                    let order = self.take_order();
                    self.put_committed(&group_id, &topic, partition, value, order);
                }
                OffsetChange::Delete {
                    group_id,
                    topic,
                    partition,
                } => {
                    self.remove_committed(&group_id, &topic, partition);
                    self.pending.remove_partition(&group_id, &topic, partition);
                }
                OffsetChange::DeleteGroup { group_id } => {
                    self.offsets.remove(&group_id);
                    self.committed_order.retain(|(g, _, _), _| *g != group_id);
                    self.pending.remove_group(&group_id);
                    self.consumer_groups.remove(&group_id);
                    self.groups.remove(&group_id);
                }
            }
        }
    }

    /// [`Self::commit`] whose records were written (tests of the pure state machine).
    #[cfg(test)]
    pub fn commit_written(
        &mut self,
        now: i64,
        version: i16,
        req: &OffsetCommitRequest,
    ) -> (OffsetCommitResponse, Effects) {
        let (resp, fx) = self.commit(now, version, req);
        self.apply_written(fx.offsets.clone(), now);
        (resp, fx)
    }

    /// [`Self::offset_delete`] whose records were written (tests of the pure state machine).
    #[cfg(test)]
    pub fn offset_delete_written(
        &mut self,
        req: &OffsetDeleteRequest,
    ) -> (OffsetDeleteResponse, Effects) {
        let (resp, fx) = self.offset_delete(req);
        self.apply_written(fx.offsets.clone(), 0);
        (resp, fx)
    }

    /// [`Self::tick`] whose records were written (tests of the pure state machine).
    #[cfg(test)]
    pub fn tick_written(&mut self, now: i64) -> Effects {
        let fx = self.tick(now);
        self.apply_written(fx.offsets.clone(), now);
        fx
    }

    /// [`Self::delete_groups`] whose records were written (tests of the pure state machine).
    #[cfg(test)]
    pub fn delete_groups_written(
        &mut self,
        group_ids: &[String],
    ) -> (
        Vec<kafka_protocol::messages::delete_groups_response::DeletableGroupResult>,
        Effects,
    ) {
        let (resp, fx) = self.delete_groups(group_ids);
        self.apply_written(fx.offsets.clone(), 0);
        (resp, fx)
    }

    /// The group-level error of an OffsetFetch (v9 member checks of consumer groups).
    pub fn fetch_error(&self, query: &FetchQuery) -> i16 {
        match self.consumer_groups.get(&query.group_id) {
            Some(g) => g
                .validate_fetch(query.member_id.as_deref(), query.member_epoch)
                .err()
                .unwrap_or(codes::NONE),
            None => codes::NONE,
        }
    }

    /// Committed offsets of one group. Partitions without a commit answer offset -1; an unknown
    /// group answers like a group without commits. Pending transactional offsets are never
    /// returned; with `require_stable` their partitions answer UNSTABLE_OFFSET_COMMIT (Kafka
    /// decides per partition; an all-topics fetch lists committed partitions only, as Kafka's).
    pub fn fetch(&self, query: &FetchQuery) -> Vec<OffsetFetchResponseTopics> {
        let committed = self.offsets.get(&query.group_id);
        let entry = |topic: &str, partition: i32| {
            if query.require_stable && self.pending.contains(&query.group_id, topic, partition) {
                return OffsetFetchResponsePartitions::default()
                    .with_partition_index(partition)
                    .with_committed_offset(-1)
                    .with_committed_leader_epoch(-1)
                    .with_metadata(Some(sb("")))
                    .with_error_code(codes::UNSTABLE_OFFSET_COMMIT);
            }
            let v = committed.and_then(|c| c.get(&(topic.to_string(), partition)));
            OffsetFetchResponsePartitions::default()
                .with_partition_index(partition)
                .with_committed_offset(v.map_or(-1, |v| v.offset))
                .with_committed_leader_epoch(v.map_or(-1, |v| v.leader_epoch))
                .with_metadata(Some(sb(v.map_or("", |v| v.metadata.as_str()))))
        };
        match &query.topics {
            Some(topics) => topics
                .iter()
                .map(|(name, partitions)| {
                    OffsetFetchResponseTopics::default()
                        .with_name(TopicName(sb(name)))
                        .with_partitions(partitions.iter().map(|p| entry(name, *p)).collect())
                })
                .collect(),
            None => {
                let mut out: Vec<OffsetFetchResponseTopics> = Vec::new();
                for (topic, partition) in committed.into_iter().flat_map(|c| c.keys()) {
                    if out.last().is_none_or(|t| t.name.as_str() != topic) {
                        out.push(
                            OffsetFetchResponseTopics::default().with_name(TopicName(sb(topic))),
                        );
                    }
                    if let Some(t) = out.last_mut() {
                        t.partitions.push(entry(topic, *partition));
                    }
                }
                out
            }
        }
    }

    /// OffsetDelete: removes committed offsets of topics the group does not subscribe to. As in
    /// Kafka, a partition with only a pending transactional offset gets a tombstone too, and the
    /// tombstone drops the pending offsets of every open transaction for it.
    pub fn offset_delete(&mut self, req: &OffsetDeleteRequest) -> (OffsetDeleteResponse, Effects) {
        let mut fx = Effects::default();
        let group_id = req.group_id.as_str();
        // Consumer (KIP-848) groups always know their subscriptions; classic ones only with the
        // "consumer" protocol type.
        let subscribed_topics: Vec<String> = if let Some(cg) = self.consumer_groups.get(group_id) {
            req.topics
                .iter()
                .map(|t| t.name.as_str().to_string())
                .filter(|t| cg.is_subscribed_to(t))
                .collect()
        } else {
            let Some(group) = self.groups.get(group_id) else {
                return (
                    OffsetDeleteResponse::default().with_error_code(codes::GROUP_ID_NOT_FOUND),
                    fx,
                );
            };
            let top = match group.state {
                GroupState::Dead => codes::GROUP_ID_NOT_FOUND,
                GroupState::Empty => codes::NONE,
                _ if group.protocol_type.as_deref() != Some("consumer") => codes::NON_EMPTY_GROUP,
                _ => codes::NONE,
            };
            if top != codes::NONE {
                return (OffsetDeleteResponse::default().with_error_code(top), fx);
            }
            req.topics
                .iter()
                .map(|t| t.name.as_str().to_string())
                .filter(|t| group.is_subscribed_to(t))
                .collect()
        };
        let mut topics = Vec::new();
        for t in &req.topics {
            let topic = t.name.as_str();
            let subscribed = subscribed_topics.iter().any(|s| s == topic);
            let mut partitions = Vec::new();
            for p in &t.partitions {
                let code = if subscribed {
                    codes::GROUP_SUBSCRIBED_TO_TOPIC
                } else {
                    let committed = self
                        .offsets
                        .get(group_id)
                        .is_some_and(|o| o.contains_key(&(topic.to_string(), p.partition_index)));
                    if committed || self.pending.contains(group_id, topic, p.partition_index) {
                        fx.records.push(CoordinatorRecord {
                            group_id: group_id.to_string(),
                            key: records::offset_key(group_id, topic, p.partition_index),
                            value: None,
                        });
                        fx.offsets.push(OffsetChange::Delete {
                            group_id: group_id.to_string(),
                            topic: topic.to_string(),
                            partition: p.partition_index,
                        });
                    }
                    codes::NONE
                };
                partitions.push(
                    OffsetDeleteResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code),
                );
            }
            topics.push(
                OffsetDeleteResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_partitions(partitions),
            );
        }
        (OffsetDeleteResponse::default().with_topics(topics), fx)
    }
}
