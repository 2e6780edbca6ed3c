//! `ShareGroup`: the share-group coordinator state of one group (Kafka's `ShareGroup` and the
//! share part of `GroupMetadataManager`), driven by ShareGroupHeartbeat.
//!
//! Membership: a member joins with member epoch 0 (its member id is chosen by the client),
//! heartbeats with its current epoch and leaves with -1. Every change of the membership, of a
//! subscription or of a subscribed topic's partition count bumps the group epoch and recomputes
//! the target assignment (the `simple` assignor), whose epoch is the group epoch. Share groups
//! have no revocation: a member moves straight to its target assignment and the assignment epoch
//! on its next heartbeat. Members that miss `group.share.session.timeout.ms` are removed by
//! `expire`. Time is an argument; no I/O (persisting the group records is the driver's job).
//!
//! Invariants: `assignment_epoch == group_epoch` after every call; a member's epoch is at most
//! the assignment epoch; the group never holds more than `max_size` members.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::assignor::{self, Assignment, TopicPartitions};
use super::codes;

/// Broker (or group-config) settings for share groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareGroupConfig {
    /// `group.share.session.timeout.ms` (default 45000).
    pub session_timeout_ms: i64,
    /// `group.share.heartbeat.interval.ms` (default 5000).
    pub heartbeat_interval_ms: i32,
    /// `group.share.max.size` (default 200).
    pub max_size: usize,
}

impl Default for ShareGroupConfig {
    fn default() -> Self {
        ShareGroupConfig {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            max_size: 200,
        }
    }
}

/// A decoded ShareGroupHeartbeat request (v1).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HeartbeatRequest {
    pub member_id: String,
    /// 0 to join, -1 to leave, else the member's current epoch.
    pub member_epoch: i32,
    /// `None` when unchanged since the last heartbeat.
    pub rack_id: Option<String>,
    /// `None` when unchanged since the last heartbeat; required when joining.
    pub subscribed_topic_names: Option<Vec<String>>,
    pub client_id: String,
    pub client_host: String,
}

/// The answer to a successful heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatResponse {
    pub member_id: String,
    /// -1 after a leave.
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// The member's full assignment when it joined or it changed; `None` otherwise.
    pub assignment: Option<Assignment>,
}

/// Why a heartbeat was refused (the group did not change).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShareGroupError {
    #[error("invalid request: {0}")]
    InvalidRequest(&'static str),
    #[error("unknown member id")]
    UnknownMemberId,
    #[error("fenced member epoch")]
    FencedMemberEpoch,
    #[error("the share group reached its maximum size")]
    GroupMaxSizeReached,
}

impl ShareGroupError {
    pub fn error_code(&self) -> i16 {
        match self {
            ShareGroupError::InvalidRequest(_) => codes::INVALID_REQUEST,
            ShareGroupError::UnknownMemberId => codes::UNKNOWN_MEMBER_ID,
            ShareGroupError::FencedMemberEpoch => codes::FENCED_MEMBER_EPOCH,
            ShareGroupError::GroupMaxSizeReached => codes::GROUP_MAX_SIZE_REACHED,
        }
    }
}

/// Share-group states as ShareGroupDescribe and ListGroups name them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareGroupState {
    Empty,
    Stable,
}

impl ShareGroupState {
    pub fn name(self) -> &'static str {
        match self {
            ShareGroupState::Empty => "Empty",
            ShareGroupState::Stable => "Stable",
        }
    }
}

/// One member of a share group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareMember {
    pub member_id: String,
    pub member_epoch: i32,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: BTreeSet<String>,
    /// The assignment last handed to the member.
    pub assignment: Assignment,
    /// The member is removed when no heartbeat arrives before this time.
    pub session_deadline_ms: i64,
}

/// ShareGroupDescribe's view of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareGroupDescription {
    pub group_id: String,
    pub state: ShareGroupState,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor_name: &'static str,
    pub members: Vec<ShareMember>,
}

/// A topic whose share-partitions the group has used (ShareGroupStatePartitionMetadata's
/// `InitializedTopics`): every partition ever assigned, so deleting the group knows which share
/// state to delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitializedTopic {
    pub topic_name: String,
    pub partitions: BTreeSet<i32>,
}

/// What a share group persists in `__consumer_offsets` (the ShareGroup* records) and gets back
/// at load: everything but the session deadlines, which restart at load.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShareGroupImage {
    pub group_epoch: i32,
    /// A hash of the subscribed topics' ids and partition counts when the group epoch was
    /// bumped (ShareGroupMetadataValue's `MetadataHash`; ours, not Kafka's murmur3 hash).
    pub metadata_hash: i64,
    pub assignment_epoch: i32,
    /// Members with their subscriptions, epochs and current assignments.
    pub members: Vec<ShareMember>,
    /// The target assignment per member.
    pub target: BTreeMap<String, Assignment>,
    pub initialized: BTreeMap<Uuid, InitializedTopic>,
}

/// The state of one share group. Owned by the group coordinator task; not thread-safe.
#[derive(Debug, Clone)]
pub struct ShareGroup {
    group_id: String,
    config: ShareGroupConfig,
    group_epoch: i32,
    assignment_epoch: i32,
    members: BTreeMap<String, ShareMember>,
    /// The target assignment computed at `assignment_epoch`.
    target: BTreeMap<String, Assignment>,
    /// The subscribed topics as last seen in the metadata (name -> id, partitions); empty after
    /// a restore until the next heartbeat brings the metadata.
    subscribed_metadata: BTreeMap<String, TopicPartitions>,
    /// `metadata_hash(subscribed_metadata)` at the last epoch bump (persisted, so a restore does
    /// not bump the epoch when nothing changed).
    metadata_hash: i64,
    initialized: BTreeMap<Uuid, InitializedTopic>,
}

/// A deterministic hash of the subscribed topics (FNV-1a over name, id and partition count).
pub fn metadata_hash(topics: &BTreeMap<String, TopicPartitions>) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for (name, t) in topics {
        eat(name.as_bytes());
        eat(t.topic_id.as_bytes());
        eat(&t.partitions.to_be_bytes());
    }
    h as i64
}

impl ShareGroup {
    pub fn new(group_id: &str, config: ShareGroupConfig) -> Self {
        ShareGroup {
            group_id: group_id.to_string(),
            config,
            group_epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            target: BTreeMap::new(),
            subscribed_metadata: BTreeMap::new(),
            metadata_hash: metadata_hash(&BTreeMap::new()),
            initialized: BTreeMap::new(),
        }
    }

    /// The group as a restart finds it in `__consumer_offsets`: every member's session restarts
    /// at `now_ms` (as Kafka re-arms sessions when it loads a group).
    pub fn restore(
        group_id: &str,
        config: ShareGroupConfig,
        image: ShareGroupImage,
        now_ms: i64,
    ) -> Self {
        let deadline = now_ms.saturating_add(config.session_timeout_ms);
        ShareGroup {
            group_id: group_id.to_string(),
            config,
            group_epoch: image.group_epoch,
            assignment_epoch: image.assignment_epoch,
            members: image
                .members
                .into_iter()
                .map(|mut m| {
                    m.session_deadline_ms = deadline;
                    (m.member_id.clone(), m)
                })
                .collect(),
            target: image.target,
            subscribed_metadata: BTreeMap::new(),
            metadata_hash: image.metadata_hash,
            initialized: image.initialized,
        }
    }

    /// What the group persists (see [`ShareGroupImage`]).
    pub fn image(&self) -> ShareGroupImage {
        ShareGroupImage {
            group_epoch: self.group_epoch,
            metadata_hash: self.metadata_hash,
            assignment_epoch: self.assignment_epoch,
            members: self.members.values().cloned().collect(),
            target: self.target.clone(),
            initialized: self.initialized.clone(),
        }
    }

    /// The topics whose share-partitions the group has used (topic id -> name, partitions).
    pub fn initialized(&self) -> &BTreeMap<Uuid, InitializedTopic> {
        &self.initialized
    }

    /// AlterShareGroupOffsets set the state of `partitions` of `topic_id` (`topic_name`): they
    /// join the initialized partitions.
    pub fn mark_initialized(&mut self, topic_id: Uuid, topic_name: &str, partitions: &[i32]) {
        if partitions.is_empty() {
            return;
        }
        let entry = self
            .initialized
            .entry(topic_id)
            .or_insert_with(|| InitializedTopic {
                topic_name: topic_name.to_string(),
                partitions: BTreeSet::new(),
            });
        entry.partitions.extend(partitions.iter().copied());
    }

    /// DeleteShareGroupOffsets removed the share state of `topic_id`: it is no longer
    /// initialized. Returns what it was.
    pub fn forget_topic(&mut self, topic_id: Uuid) -> Option<InitializedTopic> {
        self.initialized.remove(&topic_id)
    }

    pub fn group_id(&self) -> &str {
        &self.group_id
    }

    pub fn group_epoch(&self) -> i32 {
        self.group_epoch
    }

    pub fn state(&self) -> ShareGroupState {
        if self.members.is_empty() {
            ShareGroupState::Empty
        } else {
            ShareGroupState::Stable
        }
    }

    pub fn member(&self, member_id: &str) -> Option<&ShareMember> {
        self.members.get(member_id)
    }

    /// Handles one ShareGroupHeartbeat. `topics` is the current metadata (topic name -> id and
    /// partition count).
    pub fn heartbeat(
        &mut self,
        req: &HeartbeatRequest,
        topics: &BTreeMap<String, TopicPartitions>,
        now_ms: i64,
    ) -> Result<HeartbeatResponse, ShareGroupError> {
        validate(&self.group_id, req)?;
        if req.member_epoch == -1 {
            if self.members.remove(&req.member_id).is_none() {
                return Err(ShareGroupError::UnknownMemberId);
            }
            self.bump_and_assign(topics);
            return Ok(HeartbeatResponse {
                member_id: req.member_id.clone(),
                member_epoch: -1,
                heartbeat_interval_ms: self.config.heartbeat_interval_ms,
                assignment: None,
            });
        }
        let mut changed = false;
        match self.members.get(&req.member_id) {
            None if req.member_epoch != 0 => return Err(ShareGroupError::UnknownMemberId),
            None => {
                if self.members.len() >= self.config.max_size {
                    return Err(ShareGroupError::GroupMaxSizeReached);
                }
                self.members.insert(
                    req.member_id.clone(),
                    ShareMember {
                        member_id: req.member_id.clone(),
                        member_epoch: 0,
                        rack_id: None,
                        client_id: String::new(),
                        client_host: String::new(),
                        subscribed_topic_names: BTreeSet::new(),
                        assignment: Assignment::new(),
                        session_deadline_ms: 0,
                    },
                );
                changed = true;
            }
            Some(m) if req.member_epoch != 0 && req.member_epoch != m.member_epoch => {
                return Err(ShareGroupError::FencedMemberEpoch);
            }
            Some(_) => {}
        }
        let Some(member) = self.members.get_mut(&req.member_id) else {
            return Err(ShareGroupError::UnknownMemberId);
        };
        member.session_deadline_ms = now_ms.saturating_add(self.config.session_timeout_ms);
        member.client_id.clone_from(&req.client_id);
        member.client_host.clone_from(&req.client_host);
        if let Some(rack) = &req.rack_id {
            member.rack_id = Some(rack.clone());
        }
        if let Some(names) = &req.subscribed_topic_names {
            let names: BTreeSet<String> = names.iter().cloned().collect();
            if names != member.subscribed_topic_names {
                member.subscribed_topic_names = names;
                changed = true;
            }
        }
        if changed || self.metadata_changed(topics) {
            self.bump_and_assign(topics);
        } else {
            // Equal hash, equal view: refreshes the view a restore left empty.
            self.subscribed_metadata = self.subscribed_view(topics);
        }
        let target = self.target.get(&req.member_id).cloned().unwrap_or_default();
        let epoch = self.assignment_epoch;
        let Some(member) = self.members.get_mut(&req.member_id) else {
            return Err(ShareGroupError::UnknownMemberId);
        };
        let send =
            req.member_epoch == 0 || member.member_epoch != epoch || member.assignment != target;
        member.member_epoch = epoch;
        member.assignment = target.clone();
        Ok(HeartbeatResponse {
            member_id: req.member_id.clone(),
            member_epoch: epoch,
            heartbeat_interval_ms: self.config.heartbeat_interval_ms,
            assignment: send.then_some(target),
        })
    }

    /// Removes the members whose session expired at `now_ms`; returns their ids (the driver
    /// releases their acquired records).
    pub fn expire(&mut self, now_ms: i64) -> Vec<String> {
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| m.session_deadline_ms <= now_ms)
            .map(|m| m.member_id.clone())
            .collect();
        if !gone.is_empty() {
            for id in &gone {
                self.members.remove(id);
            }
            let topics = self.subscribed_metadata.clone();
            self.bump_and_assign(&topics);
        }
        gone
    }

    /// The earliest session deadline: the driver calls `expire` then.
    pub fn next_deadline(&self) -> Option<i64> {
        self.members.values().map(|m| m.session_deadline_ms).min()
    }

    pub fn describe(&self) -> ShareGroupDescription {
        ShareGroupDescription {
            group_id: self.group_id.clone(),
            state: self.state(),
            group_epoch: self.group_epoch,
            assignment_epoch: self.assignment_epoch,
            assignor_name: "simple",
            members: self.members.values().cloned().collect(),
        }
    }

    /// Whether the subscribed topics' ids or partition counts differ from the last seen ones.
    fn metadata_changed(&self, topics: &BTreeMap<String, TopicPartitions>) -> bool {
        metadata_hash(&self.subscribed_view(topics)) != self.metadata_hash
    }

    fn subscribed_view(
        &self,
        topics: &BTreeMap<String, TopicPartitions>,
    ) -> BTreeMap<String, TopicPartitions> {
        let names: BTreeSet<&String> = self
            .members
            .values()
            .flat_map(|m| &m.subscribed_topic_names)
            .collect();
        names
            .into_iter()
            .filter_map(|n| topics.get(n).map(|t| (n.clone(), *t)))
            .collect()
    }

    fn bump_and_assign(&mut self, topics: &BTreeMap<String, TopicPartitions>) {
        self.group_epoch = self.group_epoch.saturating_add(1);
        self.subscribed_metadata = self.subscribed_view(topics);
        self.metadata_hash = metadata_hash(&self.subscribed_metadata);
        let subs: BTreeMap<String, BTreeSet<String>> = self
            .members
            .values()
            .map(|m| (m.member_id.clone(), m.subscribed_topic_names.clone()))
            .collect();
        self.target = assignor::assign(&subs, &self.subscribed_metadata);
        self.assignment_epoch = self.group_epoch;
        for (name, t) in &self.subscribed_metadata {
            let assigned: BTreeSet<i32> = self
                .target
                .values()
                .filter_map(|a| a.get(&t.topic_id))
                .flatten()
                .copied()
                .collect();
            if assigned.is_empty() {
                continue;
            }
            let entry = self
                .initialized
                .entry(t.topic_id)
                .or_insert_with(|| InitializedTopic {
                    topic_name: name.clone(),
                    partitions: BTreeSet::new(),
                });
            entry.partitions.extend(assigned);
        }
    }
}

/// Kafka's request checks (`throwIfShareGroupHeartbeatRequestIsInvalid`).
fn validate(group_id: &str, req: &HeartbeatRequest) -> Result<(), ShareGroupError> {
    if group_id.is_empty() {
        return Err(ShareGroupError::InvalidRequest("GroupId can't be empty."));
    }
    if req.member_id.trim().is_empty() {
        return Err(ShareGroupError::InvalidRequest("MemberId can't be empty."));
    }
    if req.member_epoch < -1 {
        return Err(ShareGroupError::InvalidRequest("MemberEpoch is invalid."));
    }
    if req.rack_id.as_deref().is_some_and(|r| r.trim().is_empty()) {
        return Err(ShareGroupError::InvalidRequest("RackId can't be empty."));
    }
    if req.member_epoch == 0
        && req
            .subscribed_topic_names
            .as_ref()
            .is_none_or(|s| s.is_empty())
    {
        return Err(ShareGroupError::InvalidRequest(
            "SubscribedTopicNames must be set in first request.",
        ));
    }
    Ok(())
}
