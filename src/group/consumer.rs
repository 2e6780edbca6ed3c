//! KIP-848 consumer groups ("consumer" rebalance protocol): the group and its members, member and
//! group epochs, server-side assignment and incremental reconciliation (a member only receives
//! partitions no other member still owns; it revokes first), commit/fetch epoch checks, describe.
//! The API entry points (heartbeat, describe, timers) are in `consumer_heartbeat.rs`.
//!
//! Pure: `now` and the topic metadata are arguments; no I/O, no clock. Membership is kept in
//! memory only (members rejoin with epoch 0 after a restart); committed offsets persist through
//! the coordinator's `__consumer_offsets` records. Owned by the coordinator task; not thread-safe.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kafka_protocol::messages::consumer_group_describe_response as cgd;
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, GroupId, TopicName,
};
use uuid::Uuid;

use super::assignor::{self, Assignment, MemberSpec, ASSIGNORS};
use super::classic::sb;
use super::codes;

/// A topic as the assignor sees it: id and partition count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicImage {
    pub id: Uuid,
    pub partitions: i32,
}

/// Every topic by name (the driver snapshots the replica manager before each heartbeat).
pub type MetadataImage = BTreeMap<String, TopicImage>;

/// Member epoch of a static member that left temporarily (it keeps its assignment until its
/// session expires or it rejoins).
pub const LEAVE_GROUP_STATIC_MEMBER_EPOCH: i32 = -2;
pub const LEAVE_GROUP_MEMBER_EPOCH: i32 = -1;

/// Kafka's reconciliation states of a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// The member has its target assignment at the group's assignment epoch.
    Stable,
    /// The member must give up `pending_revocation` before it moves to the next epoch.
    UnrevokedPartitions,
    /// The member is at the target epoch but waits for partitions other members still own.
    UnreleasedPartitions,
}

/// One KIP-848 member.
#[derive(Debug, Clone)]
pub struct ConsumerMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    pub rebalance_timeout_ms: i32,
    /// The effective subscription: `subscribed_names` plus the topics `subscribed_regex` matches.
    pub subscribed: BTreeSet<String>,
    pub subscribed_names: BTreeSet<String>,
    pub subscribed_regex: Option<TopicRegex>,
    pub server_assignor: Option<String>,
    /// Partitions the member owns now (what it was last told).
    pub assigned: Assignment,
    /// Partitions the member still owns but must revoke.
    pub pending_revocation: Assignment,
    pub session_deadline: i64,
    /// Set while revoking: past it, the member is fenced (rebalance timeout).
    pub revocation_deadline: Option<i64>,
    /// Set for a member speaking the classic protocol (JoinGroup/SyncGroup/Heartbeat) in this
    /// group, after an online upgrade or a classic join (see `migration.rs`).
    pub classic: Option<super::migration::ClassicMemberMeta>,
}

/// A `subscribed_topic_regex` (RE2J syntax in Kafka; Rust's `regex` is close for the usual
/// patterns). It must match a whole topic name. Like Kafka, internal topics are not excluded.
#[derive(Debug, Clone)]
pub struct TopicRegex {
    pub source: String,
    regex: regex::Regex,
}

impl TopicRegex {
    pub fn new(source: &str) -> Result<TopicRegex, regex::Error> {
        Ok(TopicRegex {
            source: source.to_string(),
            regex: crate::cluster::java_regex::full_match(source)?,
        })
    }

    pub fn matches(&self, topic: &str) -> bool {
        self.regex.is_match(topic)
    }
}

impl ConsumerMember {
    /// A member joining at epoch 0: no subscription or assignment yet, Stable, its session
    /// deadline `now` (the caller sets the real one with what the request carries).
    pub fn joining(
        member_id: String,
        instance_id: Option<String>,
        client_id: String,
        client_host: String,
        rebalance_timeout_ms: i32,
        now: i64,
    ) -> ConsumerMember {
        ConsumerMember {
            member_id,
            instance_id,
            rack_id: None,
            client_id,
            client_host,
            member_epoch: 0,
            previous_member_epoch: 0,
            state: MemberState::Stable,
            rebalance_timeout_ms,
            subscribed: BTreeSet::new(),
            subscribed_names: BTreeSet::new(),
            subscribed_regex: None,
            server_assignor: None,
            assigned: Assignment::new(),
            pending_revocation: Assignment::new(),
            session_deadline: now,
            revocation_deadline: None,
            classic: None,
        }
    }

    /// Recomputes the effective subscription; true when it changed.
    fn resolve_subscription(&mut self, image: &MetadataImage) -> bool {
        let mut subs = self.subscribed_names.clone();
        if let Some(r) = &self.subscribed_regex {
            subs.extend(image.keys().filter(|t| r.matches(t)).cloned());
        }
        if subs != self.subscribed {
            self.subscribed = subs;
            return true;
        }
        false
    }
}

/// Group states as Kafka names them (ListGroups / ConsumerGroupDescribe).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerGroupState {
    Empty,
    Assigning,
    Reconciling,
    Stable,
}

impl ConsumerGroupState {
    pub fn name(self) -> &'static str {
        match self {
            ConsumerGroupState::Empty => "Empty",
            ConsumerGroupState::Assigning => "Assigning",
            ConsumerGroupState::Reconciling => "Reconciling",
            ConsumerGroupState::Stable => "Stable",
        }
    }
}

/// One KIP-848 group.
#[derive(Debug, Clone, Default)]
pub struct ConsumerGroup {
    pub group_id: String,
    /// Bumped on every membership, subscription or subscribed-topic metadata change.
    pub group_epoch: i32,
    /// The group epoch the target assignment was computed for.
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, ConsumerMember>,
    /// Target assignment by member id.
    pub target: BTreeMap<String, Assignment>,
    /// instance id -> member id.
    pub static_members: HashMap<String, String>,
    /// Metadata of the subscribed topics when the group epoch was last bumped for it.
    pub subscribed_image: BTreeMap<String, TopicImage>,
    pub assignor_name: String,
}

/// A ConsumerGroupHeartbeat with the request-header facts the coordinator needs.
#[derive(Debug, Clone)]
pub struct ConsumerHeartbeatInput {
    pub version: i16,
    pub client_id: String,
    pub client_host: String,
    pub request: ConsumerGroupHeartbeatRequest,
}

pub(super) fn error(code: i16, message: &str) -> ConsumerGroupHeartbeatResponse {
    ConsumerGroupHeartbeatResponse::default()
        .with_error_code(code)
        .with_error_message(Some(sb(message)))
}

pub(super) fn contains(a: &Assignment, topic: &str, p: i32) -> bool {
    a.get(topic).is_some_and(|s| s.contains(&p))
}

pub(super) fn intersects(a: &Assignment, b: &Assignment) -> bool {
    a.iter()
        .any(|(t, ps)| ps.iter().any(|p| contains(b, t, *p)))
}

pub(super) fn is_subset(a: &Assignment, of: &Assignment) -> bool {
    a.iter()
        .all(|(t, ps)| ps.iter().all(|p| contains(of, t, *p)))
}

pub(super) fn insert(a: &mut Assignment, topic: &str, p: i32) {
    a.entry(topic.to_string()).or_default().insert(p);
}

impl ConsumerGroup {
    pub fn new(group_id: &str) -> ConsumerGroup {
        ConsumerGroup {
            group_id: group_id.to_string(),
            assignor_name: ASSIGNORS[0].to_string(),
            ..ConsumerGroup::default()
        }
    }

    pub fn state(&self) -> ConsumerGroupState {
        if self.members.is_empty() {
            ConsumerGroupState::Empty
        } else if self.group_epoch > self.assignment_epoch {
            ConsumerGroupState::Assigning
        } else if self
            .members
            .values()
            .any(|m| m.state != MemberState::Stable || m.member_epoch != self.assignment_epoch)
        {
            ConsumerGroupState::Reconciling
        } else {
            ConsumerGroupState::Stable
        }
    }

    pub fn is_subscribed_to(&self, topic: &str) -> bool {
        self.members.values().any(|m| m.subscribed.contains(topic))
    }

    /// Partitions any member other than `member_id` owns (assigned or pending revocation).
    pub(super) fn owned_by_others(&self, member_id: &str) -> Assignment {
        let mut out = Assignment::new();
        for m in self.members.values().filter(|m| m.member_id != member_id) {
            for a in [&m.assigned, &m.pending_revocation] {
                for (t, ps) in a {
                    out.entry(t.clone()).or_default().extend(ps.iter().copied());
                }
            }
        }
        out
    }

    /// Records the metadata of the subscribed topics; true when it changed.
    fn refresh_subscribed_image(&mut self, image: &MetadataImage) -> bool {
        let wanted: BTreeMap<String, TopicImage> = image
            .iter()
            .filter(|(t, _)| self.is_subscribed_to(t))
            .map(|(t, i)| (t.clone(), *i))
            .collect();
        if wanted != self.subscribed_image {
            self.subscribed_image = wanted;
            return true;
        }
        false
    }

    /// Bumps the group epoch once if `changed` (membership or subscriptions) or the subscribed
    /// topics' metadata changed, and recomputes the target assignment for the new epoch.
    pub(super) fn maybe_update_target(&mut self, image: &MetadataImage, mut changed: bool) {
        for m in self.members.values_mut() {
            changed |= m.resolve_subscription(image);
        }
        if self.refresh_subscribed_image(image) || changed {
            self.group_epoch += 1;
        }
        if self.group_epoch <= self.assignment_epoch {
            return;
        }
        // Kafka picks the assignor most members prefer; the default otherwise.
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = &m.server_assignor {
                *votes.entry(a.as_str()).or_default() += 1;
            }
        }
        self.assignor_name = votes
            .iter()
            .max_by_key(|(name, n)| (**n, std::cmp::Reverse(**name)))
            .map_or(ASSIGNORS[0], |(name, _)| name)
            .to_string();
        let empty = Assignment::new();
        let specs: Vec<MemberSpec<'_>> = self
            .members
            .values()
            .map(|m| MemberSpec {
                member_id: &m.member_id,
                subscribed: &m.subscribed,
                previous: self.target.get(&m.member_id).unwrap_or(&empty),
            })
            .collect();
        let partitions: BTreeMap<String, i32> = image
            .iter()
            .map(|(t, i)| (t.clone(), i.partitions))
            .collect();
        self.target = assignor::assign(&self.assignor_name, &specs, &partitions);
        self.assignment_epoch = self.group_epoch;
    }

    /// Moves `member_id` toward its target (Kafka's CurrentAssignmentBuilder). `reported` is what
    /// the member says it owns (None when the request did not say). Returns whether it changed.
    pub(super) fn reconcile(
        &mut self,
        member_id: &str,
        reported: Option<&Assignment>,
        now: i64,
    ) -> bool {
        let others = self.owned_by_others(member_id);
        let target_epoch = self.assignment_epoch;
        let target = self.target.get(member_id).cloned().unwrap_or_default();
        let Some(m) = self.members.get_mut(member_id) else {
            return false;
        };
        if m.member_epoch < 0 {
            return false;
        }
        let compute = match m.state {
            MemberState::UnrevokedPartitions => {
                reported.is_some_and(|r| !intersects(r, &m.pending_revocation))
            }
            MemberState::Stable => m.member_epoch != target_epoch,
            MemberState::UnreleasedPartitions => true,
        };
        if !compute {
            return false;
        }
        let before = (m.member_epoch, m.state, m.assigned.clone());
        let mut kept = Assignment::new();
        let mut revoking = Assignment::new();
        for (t, ps) in &m.assigned {
            for &p in ps {
                if contains(&target, t, p) {
                    insert(&mut kept, t, p);
                } else {
                    insert(&mut revoking, t, p);
                }
            }
        }
        if !revoking.is_empty() {
            m.assigned = kept;
            m.pending_revocation = revoking;
            m.state = MemberState::UnrevokedPartitions;
            m.revocation_deadline = Some(now + m.rebalance_timeout_ms.max(0) as i64);
        } else {
            let mut unreleased = false;
            for (t, ps) in &target {
                for &p in ps {
                    if contains(&kept, t, p) {
                        continue;
                    }
                    if contains(&others, t, p) {
                        unreleased = true;
                    } else {
                        insert(&mut kept, t, p);
                    }
                }
            }
            m.assigned = kept;
            m.pending_revocation.clear();
            m.revocation_deadline = None;
            if m.member_epoch != target_epoch {
                m.previous_member_epoch = m.member_epoch;
                m.member_epoch = target_epoch;
            }
            m.state = if unreleased {
                MemberState::UnreleasedPartitions
            } else {
                MemberState::Stable
            };
        }
        before != (m.member_epoch, m.state, m.assigned.clone())
    }

    pub(super) fn remove_member(&mut self, member_id: &str) {
        if let Some(m) = self.members.remove(member_id) {
            if let Some(i) = &m.instance_id {
                if self.static_members.get(i).map(String::as_str) == Some(member_id) {
                    self.static_members.remove(i);
                }
            }
            self.target.remove(member_id);
        }
    }

    pub fn next_deadline(&self) -> Option<i64> {
        self.members
            .values()
            .flat_map(|m| [Some(m.session_deadline), m.revocation_deadline])
            .flatten()
            .min()
    }

    /// Members whose session or revocation time ran out at `now`.
    pub(super) fn expired_members(&self, now: i64) -> Vec<String> {
        self.members
            .values()
            .filter(|m| {
                m.session_deadline <= now || m.revocation_deadline.is_some_and(|d| d <= now)
            })
            .map(|m| m.member_id.clone())
            .collect()
    }

    /// Kafka's commit check for consumer groups (OffsetCommit v9 carries the member epoch).
    pub fn validate_commit(
        &self,
        member_id: &str,
        member_epoch: i32,
        version: i16,
    ) -> Result<(), i16> {
        if member_epoch < 0 && self.members.is_empty() {
            return Ok(());
        }
        let m = self
            .members
            .get(member_id)
            .ok_or(codes::UNKNOWN_MEMBER_ID)?;
        // A classic member commits with its generation (the member epoch) at any version.
        if m.classic.is_some() {
            return if member_epoch == m.member_epoch {
                Ok(())
            } else {
                Err(codes::ILLEGAL_GENERATION)
            };
        }
        if version < 9 {
            return Err(codes::UNSUPPORTED_VERSION);
        }
        if member_epoch != m.member_epoch {
            return Err(codes::STALE_MEMBER_EPOCH);
        }
        Ok(())
    }

    /// Kafka's TxnOffsetCommit check: like OffsetCommit's, without the API-version rule, and a
    /// wrong member epoch is ILLEGAL_GENERATION (Kafka maps STALE_MEMBER_EPOCH to it here).
    pub fn validate_txn_commit(&self, member_id: &str, member_epoch: i32) -> Result<(), i16> {
        if member_epoch < 0 && self.members.is_empty() {
            return Ok(());
        }
        let m = self
            .members
            .get(member_id)
            .ok_or(codes::UNKNOWN_MEMBER_ID)?;
        if member_epoch != m.member_epoch {
            return Err(codes::ILLEGAL_GENERATION);
        }
        Ok(())
    }

    /// Kafka's OffsetFetch v9 check: admin fetches (no member id, epoch < 0) always pass.
    pub fn validate_fetch(&self, member_id: Option<&str>, member_epoch: i32) -> Result<(), i16> {
        let Some(member_id) = member_id else {
            return Ok(());
        };
        if member_epoch < 0 {
            return Ok(());
        }
        let m = self
            .members
            .get(member_id)
            .ok_or(codes::UNKNOWN_MEMBER_ID)?;
        if member_epoch != m.member_epoch {
            // A classic member's epoch is its generation.
            return Err(if m.classic.is_some() {
                codes::ILLEGAL_GENERATION
            } else {
                codes::STALE_MEMBER_EPOCH
            });
        }
        Ok(())
    }

    /// ConsumerGroupDescribe's view of the group.
    pub fn describe(&self, image: &MetadataImage) -> cgd::DescribedGroup {
        let to_wire = |a: &Assignment| {
            cgd::Assignment::default().with_topic_partitions(
                a.iter()
                    .filter(|(_, ps)| !ps.is_empty())
                    .map(|(t, ps)| {
                        cgd::TopicPartitions::default()
                            .with_topic_id(image.get(t).map_or(Uuid::nil(), |i| i.id))
                            .with_topic_name(TopicName(sb(t)))
                            .with_partitions(ps.iter().copied().collect())
                    })
                    .collect(),
            )
        };
        let empty = Assignment::new();
        cgd::DescribedGroup::default()
            .with_group_id(GroupId(sb(&self.group_id)))
            .with_group_state(sb(self.state().name()))
            .with_group_epoch(self.group_epoch)
            .with_assignment_epoch(self.assignment_epoch)
            .with_assignor_name(sb(&self.assignor_name))
            .with_authorized_operations(i32::MIN)
            .with_members(
                self.members
                    .values()
                    .map(|m| {
                        cgd::Member::default()
                            .with_member_id(sb(&m.member_id))
                            .with_instance_id(m.instance_id.as_deref().map(sb))
                            .with_rack_id(m.rack_id.as_deref().map(sb))
                            .with_member_epoch(m.member_epoch)
                            .with_client_id(sb(&m.client_id))
                            .with_client_host(sb(&m.client_host))
                            .with_subscribed_topic_names(
                                m.subscribed_names
                                    .iter()
                                    .map(|t| TopicName(sb(t)))
                                    .collect(),
                            )
                            .with_subscribed_topic_regex(
                                m.subscribed_regex.as_ref().map(|r| sb(&r.source)),
                            )
                            .with_assignment(to_wire(&m.assigned))
                            .with_target_assignment(to_wire(
                                self.target.get(&m.member_id).unwrap_or(&empty),
                            ))
                            .with_member_type(if m.classic.is_some() { 0 } else { 1 })
                    })
                    .collect(),
            )
    }
}
