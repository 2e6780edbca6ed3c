//! One classic group: its state, generation, members and timers, plus the group-level steps the
//! coordinator composes (add/remove members, prepare a rebalance, complete the join phase, hand
//! out assignments, expire timers).
//!
//! Pure: time arrives as `now` (ms since the epoch); waiting JoinGroup/SyncGroup requests are
//! opaque [`Waiter`] tokens whose answers are pushed into [`Effects`]. No I/O, no clock, no tokio.
//! Owned by the coordinator task; not thread-safe and not meant to be.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use indexmap::IndexMap;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupResponse, SyncGroupResponse};
use kafka_protocol::protocol::StrBytes;

use super::records::{self, CoordinatorRecord, GroupValue, MemberValue};
use super::{codes, Effects, GroupConfig, Waiter};

/// How long a new member may wait in a JoinGroup before it is dropped (Kafka's
/// `group.classic.new.member.join.timeout.ms`), so defunct joiners cannot stall a rebalance.
pub const NEW_MEMBER_JOIN_TIMEOUT_MS: i64 = 300_000;

pub(crate) fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// Kafka's classic group states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// The name DescribeGroups and ListGroups report.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

/// One member of a classic group.
#[derive(Debug, Clone)]
pub struct Member {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub protocol_type: String,
    /// (protocol name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    /// A JoinGroup waiting for the join phase to complete.
    pub awaiting_join: Option<Waiter>,
    /// A SyncGroup waiting for the leader's assignment.
    pub awaiting_sync: Option<Waiter>,
    /// When the member is removed unless it heartbeats (None: no expectation scheduled).
    pub heartbeat_deadline: Option<i64>,
    /// Joined during the current rebalance and has not yet received a JoinGroup answer.
    pub is_new: bool,
}

impl Member {
    pub fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    /// Whether the member's protocols (names and metadata) equal `protocols`.
    pub fn matches(&self, protocols: &[(String, Bytes)]) -> bool {
        self.protocols == protocols
    }

    /// A member parked in a rebalance counts as alive; new members do not, so a joiner that went
    /// away cannot stall the group forever.
    fn has_satisfied_heartbeat(&self) -> bool {
        !self.is_new && (self.awaiting_join.is_some() || self.awaiting_sync.is_some())
    }
}

/// What a join-phase timer does when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinTimer {
    /// The first rebalance of an Empty group: wait `group.initial.rebalance.delay.ms`, extended
    /// while new members keep arriving, up to the rebalance timeout.
    Initial { delay: i64, remaining: i64 },
    /// Any other rebalance: complete with whoever rejoined.
    Rebalance,
}

#[derive(Debug, Clone)]
pub struct ClassicGroup {
    pub group_id: String,
    pub state: GroupState,
    pub previous_state: GroupState,
    pub state_timestamp: i64,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader_id: Option<String>,
    /// Members in join order (the first one becomes leader when the leader leaves).
    pub members: IndexMap<String, Member>,
    /// group.instance.id -> member id.
    pub static_members: HashMap<String, String>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, and when they expire.
    pub pending_members: HashMap<String, i64>,
    /// Members that got a JoinGroup answer this generation but have not sent SyncGroup.
    pub pending_sync: HashSet<String>,
    pub join_timer: Option<(i64, JoinTimer)>,
    /// (deadline, generation) for members to send SyncGroup.
    pub sync_timer: Option<(i64, i32)>,
    pub new_member_added: bool,
}

impl ClassicGroup {
    pub fn new(group_id: &str, now: i64) -> ClassicGroup {
        ClassicGroup {
            group_id: group_id.to_string(),
            state: GroupState::Empty,
            previous_state: GroupState::Empty,
            state_timestamp: now,
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader_id: None,
            members: IndexMap::new(),
            static_members: HashMap::new(),
            pending_members: HashMap::new(),
            pending_sync: HashSet::new(),
            join_timer: None,
            sync_timer: None,
            new_member_added: false,
        }
    }

    pub fn transition(&mut self, to: GroupState, now: i64) {
        self.previous_state = self.state;
        self.state = to;
        self.state_timestamp = now;
    }

    pub fn is_leader(&self, member_id: &str) -> bool {
        self.leader_id.as_deref() == Some(member_id)
    }

    pub fn can_rebalance(&self) -> bool {
        matches!(
            self.state,
            GroupState::Stable | GroupState::CompletingRebalance | GroupState::Empty
        )
    }

    /// The largest rebalance timeout of the members: how long a rebalance may wait.
    pub fn rebalance_timeout_ms(&self) -> i64 {
        self.members
            .values()
            .map(|m| m.rebalance_timeout_ms as i64)
            .max()
            .unwrap_or(0)
    }

    pub fn has_all_members_joined(&self) -> bool {
        self.pending_members.is_empty() && self.members.values().all(|m| m.awaiting_join.is_some())
    }

    pub fn awaiting_join_count(&self) -> usize {
        self.members
            .values()
            .filter(|m| m.awaiting_join.is_some())
            .count()
    }

    /// Whether a member with `protocol_type` and `protocols` can join: on an Empty group anything
    /// non-empty; otherwise the same type and at least one protocol every member supports.
    pub fn supports_protocols(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.state == GroupState::Empty {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols.iter().any(|(name, _)| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(n, _)| n == name))
            })
    }

    /// Protocols every member supports, in the first member's order of preference.
    fn candidate_protocols(&self) -> Vec<String> {
        let Some(first) = self.members.values().next() else {
            return Vec::new();
        };
        first
            .protocols
            .iter()
            .map(|(n, _)| n.clone())
            .filter(|name| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(n, _)| n == name))
            })
            .collect()
    }

    /// Each member votes for its most preferred candidate; the most votes wins (ties go to the
    /// first member's preference order).
    pub fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols();
        let mut votes: HashMap<&str, usize> = HashMap::new();
        for m in self.members.values() {
            if let Some((name, _)) = m.protocols.iter().find(|(n, _)| candidates.contains(n)) {
                *votes.entry(name.as_str()).or_default() += 1;
            }
        }
        let mut best: Option<(&str, usize)> = None;
        for c in &candidates {
            let n = votes.get(c.as_str()).copied().unwrap_or(0);
            if best.is_none_or(|(_, b)| n > b) {
                best = Some((c.as_str(), n));
            }
        }
        best.map(|(n, _)| n.to_string())
    }

    /// Kafka's member-id check shared by sync, heartbeat, leave and offset commit.
    pub fn validate_member(&self, member_id: &str, instance_id: Option<&str>) -> Result<(), i16> {
        if let Some(instance) = instance_id {
            match self.static_members.get(instance) {
                None => return Err(codes::UNKNOWN_MEMBER_ID),
                Some(existing) if existing != member_id => return Err(codes::FENCED_INSTANCE_ID),
                Some(_) => {}
            }
        }
        if !self.members.contains_key(member_id) {
            return Err(codes::UNKNOWN_MEMBER_ID);
        }
        Ok(())
    }

    pub fn add(&mut self, mut member: Member, waiter: Waiter) {
        if self.members.is_empty() {
            self.protocol_type = Some(member.protocol_type.clone());
        }
        if self.leader_id.is_none() {
            self.leader_id = Some(member.member_id.clone());
        }
        if let Some(instance) = &member.group_instance_id {
            self.static_members
                .insert(instance.clone(), member.member_id.clone());
        }
        self.pending_members.remove(&member.member_id);
        member.awaiting_join = Some(waiter);
        self.members.insert(member.member_id.clone(), member);
    }

    /// Removes a member (or pending member), answering any request it has parked.
    pub fn remove(&mut self, member_id: &str, fx: &mut Effects) -> Option<Member> {
        self.pending_members.remove(member_id);
        self.pending_sync.remove(member_id);
        let member = self.members.shift_remove(member_id)?;
        if let Some(w) = member.awaiting_join {
            fx.joins.push((w, join_error(codes::UNKNOWN_MEMBER_ID, "")));
        }
        if let Some(w) = member.awaiting_sync {
            fx.syncs.push((w, sync_error(codes::UNKNOWN_MEMBER_ID)));
        }
        if let Some(instance) = &member.group_instance_id {
            if self.static_members.get(instance).map(String::as_str) == Some(member_id) {
                self.static_members.remove(instance);
            }
        }
        if self.is_leader(member_id) {
            self.leader_id = self.members.keys().next().cloned();
        }
        Some(member)
    }

    /// Moves a static member to a new member id (a restarted static client); the old id's parked
    /// requests are fenced.
    pub fn replace_static_member(
        &mut self,
        instance_id: &str,
        old_id: &str,
        new_id: &str,
        fx: &mut Effects,
    ) {
        let Some(mut member) = self.members.shift_remove(old_id) else {
            return;
        };
        if let Some(w) = member.awaiting_join.take() {
            fx.joins
                .push((w, join_error(codes::FENCED_INSTANCE_ID, old_id)));
        }
        if let Some(w) = member.awaiting_sync.take() {
            fx.syncs.push((w, sync_error(codes::FENCED_INSTANCE_ID)));
        }
        member.member_id = new_id.to_string();
        if self.pending_sync.remove(old_id) {
            self.pending_sync.insert(new_id.to_string());
        }
        if self.is_leader(old_id) {
            self.leader_id = Some(new_id.to_string());
        }
        self.static_members
            .insert(instance_id.to_string(), new_id.to_string());
        self.members.insert(new_id.to_string(), member);
    }

    /// The members list the leader receives (metadata of the selected protocol).
    pub fn leader_members(&self) -> Vec<JoinGroupResponseMember> {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        self.members
            .values()
            .map(|m| {
                JoinGroupResponseMember::default()
                    .with_member_id(sb(&m.member_id))
                    .with_group_instance_id(m.group_instance_id.as_deref().map(sb))
                    .with_metadata(m.metadata(&protocol))
            })
            .collect()
    }

    /// A successful JoinGroup answer for `member_id` in the current generation.
    pub fn join_response(&self, member_id: &str, with_members: bool) -> JoinGroupResponse {
        JoinGroupResponse::default()
            .with_generation_id(self.generation_id)
            .with_protocol_type(self.protocol_type.as_deref().map(sb))
            .with_protocol_name(self.protocol_name.as_deref().map(sb))
            .with_leader(sb(self.leader_id.as_deref().unwrap_or("")))
            .with_member_id(sb(member_id))
            .with_members(if with_members {
                self.leader_members()
            } else {
                Vec::new()
            })
    }

    pub fn reschedule_heartbeat(&mut self, member_id: &str, now: i64) {
        if let Some(m) = self.members.get_mut(member_id) {
            m.heartbeat_deadline = Some(now + m.session_timeout_ms as i64);
        }
    }

    /// Starts a rebalance (or, when the group cannot rebalance, tries to finish the join phase).
    pub fn maybe_prepare_rebalance_or_complete_join(
        &mut self,
        cfg: &GroupConfig,
        now: i64,
        fx: &mut Effects,
    ) {
        if self.can_rebalance() {
            self.prepare_rebalance(cfg, now, fx);
        } else {
            self.maybe_complete_join_phase(cfg, now, fx);
        }
    }

    pub fn prepare_rebalance(&mut self, cfg: &GroupConfig, now: i64, fx: &mut Effects) {
        if self.state == GroupState::CompletingRebalance {
            self.reset_and_propagate_error(codes::REBALANCE_IN_PROGRESS, now, fx);
        }
        self.pending_sync.clear();
        self.sync_timer = None;
        let initial = self.state == GroupState::Empty;
        if initial {
            let delay = cfg.initial_rebalance_delay_ms;
            let remaining = (self.rebalance_timeout_ms() - delay).max(0);
            self.join_timer = Some((now + delay, JoinTimer::Initial { delay, remaining }));
        }
        self.transition(GroupState::PreparingRebalance, now);
        if !initial {
            if self.has_all_members_joined() {
                self.complete_join(cfg, now, fx);
            } else {
                self.join_timer = Some((now + self.rebalance_timeout_ms(), JoinTimer::Rebalance));
            }
        }
    }

    /// Completes the join phase early when every member is back (not during the initial delay).
    pub fn maybe_complete_join_phase(&mut self, cfg: &GroupConfig, now: i64, fx: &mut Effects) {
        if self.state == GroupState::PreparingRebalance
            && self.has_all_members_joined()
            && self.previous_state != GroupState::Empty
        {
            self.complete_join(cfg, now, fx);
        }
    }

    /// If the leader did not rejoin, picks a member that did. False when nobody rejoined.
    fn maybe_elect_new_joined_leader(&mut self) -> bool {
        let Some(leader) = self.leader_id.clone() else {
            return false;
        };
        if self
            .members
            .get(&leader)
            .is_some_and(|m| m.awaiting_join.is_some())
        {
            return true;
        }
        match self.members.values().find(|m| m.awaiting_join.is_some()) {
            Some(m) => {
                self.leader_id = Some(m.member_id.clone());
                true
            }
            None => false,
        }
    }

    /// Ends the join phase: drops dynamic members that did not rejoin, starts the next generation
    /// and answers every parked JoinGroup (the leader with all members' metadata).
    pub fn complete_join(&mut self, _cfg: &GroupConfig, now: i64, fx: &mut Effects) {
        self.join_timer = None;
        let missing: Vec<String> = self
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none() && m.group_instance_id.is_none())
            .map(|m| m.member_id.clone())
            .collect();
        for id in &missing {
            self.remove(id, fx);
        }
        if self.state == GroupState::Dead {
            return;
        }
        if !self.maybe_elect_new_joined_leader() && !self.members.is_empty() {
            // Only static members that did not rejoin are left: wait another rebalance timeout.
            self.join_timer = Some((now + self.rebalance_timeout_ms(), JoinTimer::Rebalance));
            return;
        }
        self.generation_id += 1;
        self.pending_sync.clear();
        if self.members.is_empty() {
            self.protocol_name = None;
            self.transition(GroupState::Empty, now);
            fx.records.push(self.metadata_record(now));
            return;
        }
        self.protocol_name = self.select_protocol();
        self.transition(GroupState::CompletingRebalance, now);
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let is_leader = self.is_leader(&id);
            let response = self.join_response(&id, is_leader);
            let m = self.members.get_mut(&id).expect("member listed above");
            if let Some(w) = m.awaiting_join.take() {
                fx.joins.push((w, response));
            }
            m.is_new = false;
            m.heartbeat_deadline = Some(now + m.session_timeout_ms as i64);
            self.pending_sync.insert(id);
        }
        self.sync_timer = Some((now + self.rebalance_timeout_ms(), self.generation_id));
    }

    /// Clears assignments and answers parked SyncGroups with `code`.
    pub fn reset_and_propagate_error(&mut self, code: i16, now: i64, fx: &mut Effects) {
        for m in self.members.values_mut() {
            m.assignment = Bytes::new();
        }
        self.propagate_assignment(code, now, fx);
    }

    /// Stores the leader's assignment (members it left out get an empty one) and answers every
    /// parked SyncGroup.
    pub fn set_and_propagate_assignment(
        &mut self,
        assignment: &HashMap<String, Bytes>,
        now: i64,
        fx: &mut Effects,
    ) {
        for m in self.members.values_mut() {
            m.assignment = assignment.get(&m.member_id).cloned().unwrap_or_default();
        }
        self.propagate_assignment(codes::NONE, now, fx);
    }

    fn propagate_assignment(&mut self, code: i16, now: i64, fx: &mut Effects) {
        let ok = code == codes::NONE;
        let protocol_type = if ok {
            self.protocol_type.as_deref().map(sb)
        } else {
            None
        };
        let protocol_name = if ok {
            self.protocol_name.as_deref().map(sb)
        } else {
            None
        };
        for m in self.members.values_mut() {
            if let Some(w) = m.awaiting_sync.take() {
                fx.syncs.push((
                    w,
                    SyncGroupResponse::default()
                        .with_error_code(code)
                        .with_protocol_type(protocol_type.clone())
                        .with_protocol_name(protocol_name.clone())
                        .with_assignment(m.assignment.clone()),
                ));
                m.heartbeat_deadline = Some(now + m.session_timeout_ms as i64);
            }
        }
    }

    /// Removes a member that failed or left and moves the group on.
    pub fn remove_member_and_update(
        &mut self,
        member_id: &str,
        cfg: &GroupConfig,
        now: i64,
        fx: &mut Effects,
    ) {
        self.remove(member_id, fx);
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.maybe_prepare_rebalance_or_complete_join(cfg, now, fx)
            }
            GroupState::PreparingRebalance if self.has_all_members_joined() => {
                self.complete_join(cfg, now, fx)
            }
            _ => {}
        }
    }

    /// The earliest time any timer of this group fires.
    pub fn next_deadline(&self) -> Option<i64> {
        let members = self.members.values().filter_map(|m| m.heartbeat_deadline);
        let pending = self.pending_members.values().copied();
        members
            .chain(pending)
            .chain(self.join_timer.map(|(t, _)| t))
            .chain(self.sync_timer.map(|(t, _)| t))
            .min()
    }

    /// Fires every timer due at `now`: heartbeat expiry, pending-member expiry, the join phase
    /// deadline and the sync deadline.
    pub fn fire_timers(&mut self, cfg: &GroupConfig, now: i64, fx: &mut Effects) {
        // Each step either clears its timer or moves it later, so this terminates.
        for _ in 0..10_000 {
            let due_member = self
                .members
                .values()
                .find(|m| m.heartbeat_deadline.is_some_and(|d| d <= now))
                .map(|m| (m.member_id.clone(), m.has_satisfied_heartbeat()));
            if let Some((id, satisfied)) = due_member {
                if satisfied {
                    // Parked in a rebalance: the next expectation starts when it is answered.
                    if let Some(m) = self.members.get_mut(&id) {
                        m.heartbeat_deadline = None;
                    }
                } else {
                    tracing::info!(
                        "group {}: member {id} failed to heartbeat; removing it",
                        self.group_id
                    );
                    self.remove_member_and_update(&id, cfg, now, fx);
                }
                continue;
            }
            let due_pending = self
                .pending_members
                .iter()
                .find(|(_, d)| **d <= now)
                .map(|(id, _)| id.clone());
            if let Some(id) = due_pending {
                self.pending_members.remove(&id);
                if self.state == GroupState::PreparingRebalance && self.has_all_members_joined() {
                    self.complete_join(cfg, now, fx);
                }
                continue;
            }
            if let Some((at, timer)) = self.join_timer {
                if at <= now {
                    match timer {
                        JoinTimer::Initial { delay, remaining }
                            if self.new_member_added && remaining != 0 =>
                        {
                            self.new_member_added = false;
                            let new_delay = cfg.initial_rebalance_delay_ms.min(remaining);
                            let new_remaining = (remaining - delay).max(0);
                            self.join_timer = Some((
                                now + new_delay,
                                JoinTimer::Initial {
                                    delay: new_delay,
                                    remaining: new_remaining,
                                },
                            ));
                        }
                        _ => self.complete_join(cfg, now, fx),
                    }
                    continue;
                }
            }
            if let Some((at, generation)) = self.sync_timer {
                if at <= now {
                    self.sync_timer = None;
                    self.expire_pending_sync(generation, cfg, now, fx);
                    continue;
                }
            }
            break;
        }
    }

    fn expire_pending_sync(
        &mut self,
        generation: i32,
        cfg: &GroupConfig,
        now: i64,
        fx: &mut Effects,
    ) {
        if generation != self.generation_id
            || !matches!(
                self.state,
                GroupState::CompletingRebalance | GroupState::Stable
            )
            || self.pending_sync.is_empty()
        {
            return;
        }
        let missing: Vec<String> = self.pending_sync.iter().cloned().collect();
        tracing::info!(
            "group {}: members {missing:?} did not send SyncGroup in time; removing them",
            self.group_id
        );
        for id in &missing {
            self.remove(id, fx);
        }
        self.prepare_rebalance(cfg, now, fx);
    }

    /// The GroupMetadata record for the current generation and assignments.
    pub fn metadata_record(&self, now: i64) -> CoordinatorRecord {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        let value = GroupValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation_id,
            protocol: self.protocol_name.clone(),
            leader: self.leader_id.clone(),
            current_state_timestamp: now,
            members: self
                .members
                .values()
                .map(|m| MemberValue {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    subscription: m.metadata(&protocol),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        };
        CoordinatorRecord {
            group_id: self.group_id.clone(),
            key: records::group_key(&self.group_id),
            value: Some(records::group_value(&value)),
        }
    }

    /// Rebuilds a group from its stored record: Empty without members, else Stable with the
    /// stored members (who must heartbeat within their session timeout from `now`).
    pub fn from_record(group_id: &str, v: GroupValue, now: i64) -> ClassicGroup {
        let mut g = ClassicGroup::new(group_id, now);
        g.generation_id = v.generation;
        g.protocol_type = (!v.protocol_type.is_empty()).then_some(v.protocol_type);
        // When the group entered its state (offset expiry of an Empty group counts from it).
        if v.current_state_timestamp >= 0 {
            g.state_timestamp = v.current_state_timestamp;
        }
        if v.members.is_empty() {
            return g;
        }
        g.protocol_name = v.protocol.clone();
        let protocol = v.protocol.unwrap_or_default();
        for m in v.members {
            if let Some(instance) = &m.group_instance_id {
                g.static_members
                    .insert(instance.clone(), m.member_id.clone());
            }
            g.members.insert(
                m.member_id.clone(),
                Member {
                    member_id: m.member_id,
                    group_instance_id: m.group_instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    protocol_type: g.protocol_type.clone().unwrap_or_default(),
                    protocols: vec![(protocol.clone(), m.subscription)],
                    assignment: m.assignment,
                    awaiting_join: None,
                    awaiting_sync: None,
                    heartbeat_deadline: Some(now + m.session_timeout_ms as i64),
                    is_new: false,
                },
            );
        }
        g.leader_id = v
            .leader
            .filter(|l| g.members.contains_key(l))
            .or_else(|| g.members.keys().next().cloned());
        g.state = GroupState::Stable;
        g.previous_state = GroupState::Stable;
        g
    }

    /// Topics the members subscribe to, when the group uses the consumer protocol and every
    /// member's metadata follows its schema.
    pub fn subscribed_topics(&self) -> Option<HashSet<String>> {
        if self.protocol_type.as_deref() != Some("consumer") {
            return None;
        }
        if self.members.is_empty() {
            return Some(HashSet::new());
        }
        let protocol = self.protocol_name.as_deref()?;
        let mut all = HashSet::new();
        for m in self.members.values() {
            all.extend(records::subscription_topics(&m.metadata(protocol))?);
        }
        Some(all)
    }

    /// Kafka's `isSubscribedToTopic`: when the topics are unknown, a consumer group counts as
    /// subscribed (offsets are not deleted under it).
    pub fn is_subscribed_to(&self, topic: &str) -> bool {
        match self.subscribed_topics() {
            Some(t) => t.contains(topic),
            None => self.protocol_type.as_deref() == Some("consumer"),
        }
    }
}

/// A JoinGroup error answer. Its protocol name is null, as Kafka's (JoinGroupResponse's default
/// from v7; `api::group` turns it into "" before v7, where the field is not nullable).
pub fn join_error(code: i16, member_id: &str) -> JoinGroupResponse {
    JoinGroupResponse::default()
        .with_error_code(code)
        .with_generation_id(-1)
        .with_member_id(sb(member_id))
        .with_protocol_name(None)
}

pub fn sync_error(code: i16) -> SyncGroupResponse {
    SyncGroupResponse::default().with_error_code(code)
}
