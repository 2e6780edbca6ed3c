//! KIP-848 consumer groups ("consumer" rebalance protocol): ConsumerGroupHeartbeat and
//! ConsumerGroupDescribe, member and group epochs, server-side assignment and incremental
//! reconciliation (a member only receives partitions no other member still owns; it revokes first).
//!
//! Pure: `now` and the topic metadata are arguments; no I/O, no clock. Membership is kept in
//! memory only (members rejoin with epoch 0 after a restart); committed offsets persist through
//! the coordinator's `__consumer_offsets` records. Owned by the coordinator task; not thread-safe.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kafka_protocol::messages::consumer_group_describe_response as cgd;
use kafka_protocol::messages::consumer_group_heartbeat_response as cgh;
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, GroupId, TopicName,
};
use uuid::Uuid;

use super::assignor::{self, Assignment, MemberSpec, ASSIGNORS};
use super::classic::{sb, GroupState};
use super::coordinator::Coordinator;
use super::{codes, GroupConfig};

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
            regex: regex::Regex::new(&format!("^(?:{source})$"))?,
        })
    }

    pub fn matches(&self, topic: &str) -> bool {
        self.regex.is_match(topic)
    }
}

impl ConsumerMember {
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

fn error(code: i16, message: &str) -> ConsumerGroupHeartbeatResponse {
    ConsumerGroupHeartbeatResponse::default()
        .with_error_code(code)
        .with_error_message(Some(sb(message)))
}

fn contains(a: &Assignment, topic: &str, p: i32) -> bool {
    a.get(topic).is_some_and(|s| s.contains(&p))
}

fn intersects(a: &Assignment, b: &Assignment) -> bool {
    a.iter()
        .any(|(t, ps)| ps.iter().any(|p| contains(b, t, *p)))
}

fn is_subset(a: &Assignment, of: &Assignment) -> bool {
    a.iter()
        .all(|(t, ps)| ps.iter().all(|p| contains(of, t, *p)))
}

fn insert(a: &mut Assignment, topic: &str, p: i32) {
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
    fn owned_by_others(&self, member_id: &str) -> Assignment {
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
    fn maybe_update_target(&mut self, image: &MetadataImage, mut changed: bool) {
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
    fn reconcile(&mut self, member_id: &str, reported: Option<&Assignment>, now: i64) -> bool {
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

    fn remove_member(&mut self, member_id: &str) {
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

    /// Removes members whose session or revocation time ran out. Returns whether any went.
    fn expire(&mut self, now: i64, image: &MetadataImage) -> bool {
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                m.session_deadline <= now || m.revocation_deadline.is_some_and(|d| d <= now)
            })
            .map(|m| m.member_id.clone())
            .collect();
        for id in &gone {
            tracing::info!("consumer group {}: member {id} expired", self.group_id);
            self.remove_member(id);
        }
        if !gone.is_empty() {
            self.maybe_update_target(image, true);
        }
        !gone.is_empty()
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
        if version < 9 {
            return Err(codes::UNSUPPORTED_VERSION);
        }
        if member_epoch != m.member_epoch {
            return Err(codes::STALE_MEMBER_EPOCH);
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
            return Err(codes::STALE_MEMBER_EPOCH);
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
                            .with_member_type(1)
                    })
                    .collect(),
            )
    }
}

/// Owned partitions as the request reports them (topic ids resolved by the metadata image;
/// unknown ids are ignored).
fn reported_partitions(
    req: &ConsumerGroupHeartbeatRequest,
    image: &MetadataImage,
) -> Option<Assignment> {
    let by_id: HashMap<Uuid, &str> = image.iter().map(|(t, i)| (i.id, t.as_str())).collect();
    req.topic_partitions.as_ref().map(|tps| {
        let mut out = Assignment::new();
        for tp in tps {
            if let Some(t) = by_id.get(&tp.topic_id) {
                for &p in &tp.partitions {
                    insert(&mut out, t, p);
                }
            }
        }
        out
    })
}

/// Kafka's request validation (INVALID_REQUEST / UNSUPPORTED_ASSIGNOR).
fn validate_request(input: &ConsumerHeartbeatInput) -> Result<(), (i16, String)> {
    let req = &input.request;
    let invalid = |m: &str| Err((codes::INVALID_REQUEST, m.to_string()));
    if req.group_id.is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if input.version >= 1 && req.member_id.is_empty() {
        return invalid("MemberId can't be empty.");
    }
    if req.instance_id.as_ref().is_some_and(|i| i.is_empty()) {
        return invalid("InstanceId can't be empty.");
    }
    if req.rack_id.as_ref().is_some_and(|i| i.is_empty()) {
        return invalid("RackId can't be empty.");
    }
    match req.member_epoch {
        0 => {
            if req.rebalance_timeout_ms == -1 {
                return invalid("RebalanceTimeoutMs must be provided in first request.");
            }
            if req.topic_partitions.as_ref().is_none_or(|t| !t.is_empty()) {
                return invalid("TopicPartitions must be empty when (re-)joining.");
            }
            if req.subscribed_topic_names.is_none() && req.subscribed_topic_regex.is_none() {
                return invalid(
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
                );
            }
        }
        LEAVE_GROUP_MEMBER_EPOCH | LEAVE_GROUP_STATIC_MEMBER_EPOCH => {
            if req.member_id.is_empty() {
                return invalid("MemberId can't be empty.");
            }
        }
        e if e < 0 => return invalid(&format!("MemberEpoch {e} is invalid.")),
        _ => {
            if req.member_id.is_empty() {
                return invalid("MemberId can't be empty.");
            }
        }
    }
    if let Some(r) = &req.subscribed_topic_regex {
        if let Err(e) = TopicRegex::new(r.as_str()) {
            return Err((
                codes::INVALID_REGULAR_EXPRESSION,
                format!(
                    "SubscribedTopicRegex `{}` is not a valid regular expression: {e}.",
                    r.as_str()
                ),
            ));
        }
    }
    if let Some(a) = &req.server_assignor {
        if !ASSIGNORS.contains(&a.as_str()) {
            return Err((
                codes::UNSUPPORTED_ASSIGNOR,
                format!("ServerAssignor {} is not supported.", a.as_str()),
            ));
        }
    }
    Ok(())
}

impl Coordinator {
    /// ConsumerGroupHeartbeat: join (epoch 0), heartbeat, leave (-1, static -2).
    pub fn consumer_heartbeat(
        &mut self,
        now: i64,
        input: ConsumerHeartbeatInput,
        image: &MetadataImage,
    ) -> ConsumerGroupHeartbeatResponse {
        self.image = image.clone();
        match self.consumer_heartbeat_inner(now, &input, image) {
            Ok(r) => r,
            Err((code, message)) => error(code, &message),
        }
    }

    fn consumer_heartbeat_inner(
        &mut self,
        now: i64,
        input: &ConsumerHeartbeatInput,
        image: &MetadataImage,
    ) -> Result<ConsumerGroupHeartbeatResponse, (i16, String)> {
        validate_request(input)?;
        let cfg: GroupConfig = self.config.clone();
        let req = &input.request;
        let group_id = req.group_id.as_str();
        let epoch = req.member_epoch;
        let unknown = |what: &str| (codes::UNKNOWN_MEMBER_ID, what.to_string());

        // A classic group with members keeps its id; an empty one is replaced.
        if let Some(classic) = self.groups.get(group_id) {
            if classic.state != GroupState::Empty && classic.state != GroupState::Dead {
                return Err((
                    codes::GROUP_ID_NOT_FOUND,
                    format!("Group {group_id} is not a consumer group."),
                ));
            }
            if epoch == 0 {
                self.groups.remove(group_id);
            }
        }
        let member_id = if req.member_id.is_empty() {
            Uuid::new_v4().to_string()
        } else {
            req.member_id.as_str().to_string()
        };

        if epoch == LEAVE_GROUP_MEMBER_EPOCH || epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
            let group = self
                .consumer_groups
                .get_mut(group_id)
                .ok_or_else(|| unknown(&format!("Group {group_id} not found.")))?;
            if !group.members.contains_key(&member_id) {
                return Err(unknown(&format!(
                    "Member {member_id} is not a member of group {group_id}."
                )));
            }
            let is_static = group.members[&member_id].instance_id.is_some();
            if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH && is_static {
                // Keeps its assignment until it rejoins or its session expires.
                if let Some(m) = group.members.get_mut(&member_id) {
                    // The epoch to resume at is kept in `previous_member_epoch`.
                    m.previous_member_epoch = m.member_epoch.max(0);
                    m.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH;
                    m.revocation_deadline = None;
                }
            } else {
                group.remove_member(&member_id);
                group.maybe_update_target(image, true);
            }
            return Ok(ConsumerGroupHeartbeatResponse::default()
                .with_member_id(Some(sb(&member_id)))
                .with_member_epoch(epoch)
                .with_heartbeat_interval_ms(0));
        }

        if epoch != 0 && !self.consumer_groups.contains_key(group_id) {
            return Err(unknown(&format!("Group {group_id} not found.")));
        }
        let group = self
            .consumer_groups
            .entry(group_id.to_string())
            .or_insert_with(|| ConsumerGroup::new(group_id));
        let reported = reported_partitions(req, image);
        let instance_id = req.instance_id.as_ref().map(|s| s.as_str().to_string());
        let mut changed = false;
        let mut bump = false;

        if epoch == 0 {
            // A static member rejoining under a new member id takes the old member's place.
            let old_static = instance_id
                .as_ref()
                .and_then(|i| group.static_members.get(i).cloned())
                .filter(|old| *old != member_id);
            if let Some(old_id) = old_static {
                let old = group.members.get(&old_id).cloned();
                match old {
                    Some(old) if old.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH => {
                        return Err((
                            codes::UNRELEASED_INSTANCE_ID,
                            format!(
                                "Static member {old_id} with instance id {} is not released yet.",
                                instance_id.as_deref().unwrap_or("")
                            ),
                        ));
                    }
                    Some(old) => {
                        group.members.remove(&old_id);
                        let target = group.target.remove(&old_id).unwrap_or_default();
                        group.target.insert(member_id.clone(), target);
                        let mut m = old;
                        m.member_id = member_id.clone();
                        m.member_epoch = m.previous_member_epoch.max(0);
                        group.members.insert(member_id.clone(), m);
                        changed = true;
                    }
                    None => {}
                }
            }
            match group.members.get_mut(&member_id) {
                Some(m) if !changed => {
                    // A rejoin (after fencing, or a retry): the member owns nothing now.
                    m.previous_member_epoch = m.member_epoch.max(0);
                    m.member_epoch = 0;
                    m.assigned.clear();
                    m.pending_revocation.clear();
                    m.revocation_deadline = None;
                    m.state = MemberState::Stable;
                    changed = true;
                }
                Some(_) => {}
                None => {
                    group.members.insert(
                        member_id.clone(),
                        ConsumerMember {
                            member_id: member_id.clone(),
                            instance_id: instance_id.clone(),
                            rack_id: None,
                            client_id: input.client_id.clone(),
                            client_host: input.client_host.clone(),
                            member_epoch: 0,
                            previous_member_epoch: 0,
                            state: MemberState::Stable,
                            rebalance_timeout_ms: req.rebalance_timeout_ms,
                            subscribed: BTreeSet::new(),
                            subscribed_names: BTreeSet::new(),
                            subscribed_regex: None,
                            server_assignor: None,
                            assigned: Assignment::new(),
                            pending_revocation: Assignment::new(),
                            session_deadline: now,
                            revocation_deadline: None,
                        },
                    );
                    bump = true;
                    changed = true;
                }
            }
            if let Some(i) = &instance_id {
                group.static_members.insert(i.clone(), member_id.clone());
            }
        } else {
            let m = group.members.get(&member_id).ok_or_else(|| {
                unknown(&format!(
                    "Member {member_id} is not a member of group {group_id}."
                ))
            })?;
            // Kafka's throwIfMemberEpochIsInvalid.
            let fenced = epoch > m.member_epoch
                || (epoch < m.member_epoch
                    && (epoch != m.previous_member_epoch
                        || reported
                            .as_ref()
                            .is_some_and(|r| !is_subset(r, &m.assigned))));
            if fenced {
                return Err((
                    codes::FENCED_MEMBER_EPOCH,
                    format!(
                        "The consumer group member has a smaller or larger member epoch ({epoch}) \
                         than the one known by the group coordinator ({}).",
                        m.member_epoch
                    ),
                ));
            }
        }

        // Update what the request carries.
        let m = group.members.get_mut(&member_id).expect("present");
        m.session_deadline = now + cfg.consumer_session_timeout_ms as i64;
        m.client_id = input.client_id.clone();
        m.client_host = input.client_host.clone();
        if req.rebalance_timeout_ms >= 0 {
            m.rebalance_timeout_ms = req.rebalance_timeout_ms;
        }
        if let Some(r) = &req.rack_id {
            m.rack_id = Some(r.as_str().to_string());
        }
        if let Some(names) = &req.subscribed_topic_names {
            let subs: BTreeSet<String> = names.iter().map(|t| t.as_str().to_string()).collect();
            if subs != m.subscribed_names {
                m.subscribed_names = subs;
                bump = true;
            }
        }
        if let Some(r) = &req.subscribed_topic_regex {
            let same = m.subscribed_regex.as_ref().map(|r| r.source.as_str()) == Some(r.as_str())
                || (r.is_empty() && m.subscribed_regex.is_none());
            if !same {
                // Validated above; "" clears the regex.
                m.subscribed_regex = TopicRegex::new(r.as_str()).ok().filter(|_| !r.is_empty());
                bump = true;
            }
        }
        if let Some(a) = &req.server_assignor {
            let a = Some(a.as_str().to_string());
            if a != m.server_assignor {
                m.server_assignor = a;
                bump = true;
            }
        }
        group.maybe_update_target(image, bump);
        changed |= group.reconcile(&member_id, reported.as_ref(), now);

        let m = &group.members[&member_id];
        let mut response = ConsumerGroupHeartbeatResponse::default()
            .with_member_id(Some(sb(&member_id)))
            .with_member_epoch(m.member_epoch)
            .with_heartbeat_interval_ms(cfg.consumer_heartbeat_interval_ms);
        let full = epoch == 0 || reported.as_ref().is_some_and(|r| *r != m.assigned);
        if changed || full {
            response.assignment = Some(
                cgh::Assignment::default().with_topic_partitions(
                    m.assigned
                        .iter()
                        .filter(|(_, ps)| !ps.is_empty())
                        .filter_map(|(t, ps)| {
                            image.get(t).map(|i| {
                                cgh::TopicPartitions::default()
                                    .with_topic_id(i.id)
                                    .with_partitions(ps.iter().copied().collect())
                            })
                        })
                        .collect(),
                ),
            );
        }
        Ok(response)
    }

    /// Fires the session and revocation timers of consumer groups.
    pub fn consumer_tick(&mut self, now: i64) {
        let image = self.image.clone();
        for g in self.consumer_groups.values_mut() {
            if g.next_deadline().is_some_and(|d| d <= now) {
                g.expire(now, &image);
            }
        }
    }

    pub fn consumer_next_deadline(&self) -> Option<i64> {
        self.consumer_groups
            .values()
            .filter_map(ConsumerGroup::next_deadline)
            .min()
    }

    /// ConsumerGroupDescribe of one group id.
    pub fn consumer_describe(&self, group_id: &str, image: &MetadataImage) -> cgd::DescribedGroup {
        match self.consumer_groups.get(group_id) {
            Some(g) => g.describe(image),
            None => {
                let message = if self.groups.contains_key(group_id) {
                    format!("Group {group_id} is not a consumer group.")
                } else {
                    format!("Group {group_id} not found.")
                };
                cgd::DescribedGroup::default()
                    .with_group_id(GroupId(sb(group_id)))
                    .with_group_state(sb("Dead"))
                    .with_error_code(codes::GROUP_ID_NOT_FOUND)
                    .with_error_message(Some(sb(&message)))
                    .with_authorized_operations(i32::MIN)
            }
        }
    }
}
