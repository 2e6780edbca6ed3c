//! The share-group offsets admin APIs on the group coordinator (Kafka 4.1's
//! `GroupMetadataManager` part of DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and
//! DeleteShareGroupOffsets (92)): which share-partitions a request names, the group checks
//! (a share group, empty for alter and delete), the per-topic and per-partition errors and the
//! change of the group's initialized partitions (ShareGroupStatePartitionMetadata). The
//! share-partition state itself (the start offset) lives in the share coordinator
//! (`share::coordinator`); the driver changes it once these steps' records are written. Pure:
//! no I/O, no clock.

use kafka_protocol::messages::alter_share_group_offsets_response as asr;
use kafka_protocol::messages::delete_share_group_offsets_response as dsr;
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse, TopicName,
};
use uuid::Uuid;

use super::classic::sb;
use super::codes;
use super::consumer::MetadataImage;
use super::coordinator::Coordinator;
use super::records::CoordinatorRecord;
use super::share_records;
use crate::share::group::ShareGroup;
use crate::share::registry::ShareKey;

/// Kafka's `Errors.UNKNOWN_TOPIC_OR_PARTITION` message.
pub const UNKNOWN_TOPIC_MESSAGE: &str = "This server does not host this topic-partition.";

/// An AlterShareGroupOffsets step: the answer (per-partition errors filled in; the driver adds
/// the state write's), the start offsets to initialize once `records` are written, and the
/// group's records.
#[derive(Debug, Default)]
pub struct ShareOffsetsAlter {
    pub response: AlterShareGroupOffsetsResponse,
    /// (share-partition, new start offset).
    pub initialize: Vec<(ShareKey, i64)>,
    pub records: Vec<CoordinatorRecord>,
}

/// A DeleteShareGroupOffsets step: the answer, the topics whose share state goes once `records`
/// are written, and the group's records.
#[derive(Debug, Default)]
pub struct ShareOffsetsDelete {
    pub response: DeleteShareGroupOffsetsResponse,
    pub delete_topics: Vec<Uuid>,
    pub records: Vec<CoordinatorRecord>,
}

/// A topic a DescribeShareGroupOffsets names, with its partitions.
pub type NamedPartitions = (String, Vec<i32>);

/// One topic of a DescribeShareGroupOffsets answer: its id when the metadata knows it (`None`:
/// every partition answers start offset -1) and the partitions to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribeTarget {
    pub topic_name: String,
    pub topic_id: Option<Uuid>,
    pub partitions: Vec<i32>,
}

fn alter_error(code: i16, message: String) -> AlterShareGroupOffsetsResponse {
    AlterShareGroupOffsetsResponse::default()
        .with_error_code(code)
        .with_error_message(Some(sb(&message)))
}

fn delete_error(code: i16, message: String) -> DeleteShareGroupOffsetsResponse {
    DeleteShareGroupOffsetsResponse::default()
        .with_error_code(code)
        .with_error_message(Some(sb(&message)))
}

impl Coordinator {
    /// The share group `group_id` as an admin request finds it: `Ok(None)` when no group has the
    /// id, GROUP_ID_NOT_FOUND when a classic or consumer group has it.
    fn share_group_for_admin(&self, group_id: &str) -> Result<Option<&ShareGroup>, (i16, String)> {
        if let Some(g) = self.share_groups.get(group_id) {
            return Ok(Some(g));
        }
        let other = self.consumer_groups.contains_key(group_id)
            || self
                .groups
                .get(group_id)
                .is_some_and(|g| g.state != super::GroupState::Dead);
        if other {
            return Err((
                codes::GROUP_ID_NOT_FOUND,
                format!("Group {group_id} is not a share group."),
            ));
        }
        Ok(None)
    }

    /// DescribeShareGroupOffsets of one group: the share-partitions to read. `topics` `None`
    /// asks for every initialized partition of the group (GROUP_ID_NOT_FOUND for an unknown
    /// group); named topics are answered whether or not the group exists, a topic the metadata
    /// does not know with start offset -1.
    pub fn share_offsets_describe(
        &self,
        group_id: &str,
        topics: Option<&[NamedPartitions]>,
        image: &MetadataImage,
    ) -> Result<Vec<DescribeTarget>, (i16, String)> {
        if group_id.is_empty() {
            return Err((codes::INVALID_GROUP_ID, "The group id is empty.".into()));
        }
        let Some(topics) = topics else {
            // An unknown group has no initialized partitions (Kafka 4.1.2 answers no topics).
            let Some(group) = self.share_group_for_admin(group_id)? else {
                return Ok(Vec::new());
            };
            return Ok(group
                .initialized()
                .iter()
                .filter(|(id, t)| image.get(&t.topic_name).is_some_and(|i| i.id == **id))
                .map(|(id, t)| DescribeTarget {
                    topic_name: t.topic_name.clone(),
                    topic_id: Some(*id),
                    partitions: t.partitions.iter().copied().collect(),
                })
                .collect());
        };
        Ok(topics
            .iter()
            .map(|(name, partitions)| DescribeTarget {
                topic_name: name.clone(),
                topic_id: image.get(name).map(|t| t.id),
                partitions: partitions.clone(),
            })
            .collect())
    }

    /// AlterShareGroupOffsets: an empty (or new) share group's partitions get `start_offset`
    /// each; a topic or partition the metadata does not have answers UNKNOWN_TOPIC_OR_PARTITION.
    /// The group (created when missing) records the partitions as initialized.
    pub fn share_offsets_alter(
        &mut self,
        request: &AlterShareGroupOffsetsRequest,
        image: &MetadataImage,
    ) -> ShareOffsetsAlter {
        let group_id = request.group_id.as_str();
        if group_id.is_empty() {
            return ShareOffsetsAlter {
                response: alter_error(codes::INVALID_GROUP_ID, "The group id is empty.".into()),
                ..ShareOffsetsAlter::default()
            };
        }
        let existing = match self.share_group_for_admin(group_id) {
            Ok(g) => g,
            Err((code, message)) => {
                return ShareOffsetsAlter {
                    response: alter_error(code, message),
                    ..ShareOffsetsAlter::default()
                }
            }
        };
        if existing.is_some_and(|g| !g.describe().members.is_empty()) {
            let message = "The group is not empty.".to_string();
            return ShareOffsetsAlter {
                response: alter_error(codes::NON_EMPTY_GROUP, message),
                ..ShareOffsetsAlter::default()
            };
        }
        let before = existing.map(ShareGroup::image);
        let config = self.share_config(group_id);
        let group = self
            .share_groups
            .entry(group_id.to_string())
            .or_insert_with(|| ShareGroup::new(group_id, config));
        let mut step = ShareOffsetsAlter::default();
        for topic in &request.topics {
            let name = topic.topic_name.as_str();
            let known = image.get(name);
            let mut partitions = Vec::new();
            let mut initialized = Vec::new();
            for p in &topic.partitions {
                let exists = known
                    .is_some_and(|t| p.partition_index >= 0 && p.partition_index < t.partitions);
                let mut answer = asr::AlterShareGroupOffsetsResponsePartition::default()
                    .with_partition_index(p.partition_index);
                match known.filter(|_| exists) {
                    Some(t) => {
                        let key = ShareKey::new(group_id, (t.id, p.partition_index));
                        step.initialize.push((key, p.start_offset));
                        initialized.push(p.partition_index);
                    }
                    None => {
                        answer = answer
                            .with_error_code(codes::UNKNOWN_TOPIC_OR_PARTITION)
                            .with_error_message(Some(sb(UNKNOWN_TOPIC_MESSAGE)));
                    }
                }
                partitions.push(answer);
            }
            if let Some(t) = known {
                group.mark_initialized(t.id, name, &initialized);
            }
            step.response.responses.push(
                asr::AlterShareGroupOffsetsResponseTopic::default()
                    .with_topic_name(TopicName(sb(name)))
                    .with_topic_id(known.map_or(Uuid::nil(), |t| t.id))
                    .with_partitions(partitions),
            );
        }
        let after = group.image();
        step.records = share_records::diff(group_id, before.as_ref(), Some(&after));
        step
    }

    /// DeleteShareGroupOffsets: an empty share group's state of the named topics goes (the
    /// topics leave its initialized partitions); a topic the metadata does not know answers
    /// UNKNOWN_TOPIC_OR_PARTITION.
    pub fn share_offsets_delete(
        &mut self,
        request: &DeleteShareGroupOffsetsRequest,
        image: &MetadataImage,
    ) -> ShareOffsetsDelete {
        let group_id = request.group_id.as_str();
        let fail = |code, message| ShareOffsetsDelete {
            response: delete_error(code, message),
            ..ShareOffsetsDelete::default()
        };
        if group_id.is_empty() {
            return fail(codes::INVALID_GROUP_ID, "The group id is empty.".into());
        }
        let group = match self.share_group_for_admin(group_id) {
            Ok(Some(g)) => g,
            Ok(None) => {
                return fail(
                    codes::GROUP_ID_NOT_FOUND,
                    format!("Group {group_id} not found."),
                )
            }
            Err((code, message)) => return fail(code, message),
        };
        if !group.describe().members.is_empty() {
            return fail(
                codes::NON_EMPTY_GROUP,
                "The group is not empty.".to_string(),
            );
        }
        let before = group.image();
        let mut step = ShareOffsetsDelete::default();
        let Some(group) = self.share_groups.get_mut(group_id) else {
            return step;
        };
        for topic in &request.topics {
            let name = topic.topic_name.as_str();
            let answer = dsr::DeleteShareGroupOffsetsResponseTopic::default()
                .with_topic_name(TopicName(sb(name)));
            let answer = match image.get(name) {
                Some(t) => {
                    group.forget_topic(t.id);
                    step.delete_topics.push(t.id);
                    answer.with_topic_id(t.id)
                }
                None => answer
                    .with_error_code(codes::UNKNOWN_TOPIC_OR_PARTITION)
                    .with_error_message(Some(sb(UNKNOWN_TOPIC_MESSAGE))),
            };
            step.response.responses.push(answer);
        }
        let after = group.image();
        step.records = share_records::diff(group_id, Some(&before), Some(&after));
        step
    }
}

#[cfg(test)]
#[path = "share_offsets_tests.rs"]
mod tests;
