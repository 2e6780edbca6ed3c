//! The coordinator state machine: every classic group and committed offset this node owns, and the
//! membership APIs (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) plus timers and replay.
//! Offsets live in `offsets.rs`, transactional offsets in `txn_offsets.rs`, the admin views in
//! `admin.rs` (all `impl Coordinator`).
//!
//! Pure: `now` is an argument; parked requests are [`Waiter`]s answered through [`Effects`].
//! Owned by one task (the driver); not thread-safe.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, SyncGroupRequest, SyncGroupResponse,
};

use super::classic::NEW_MEMBER_JOIN_TIMEOUT_MS;
use super::classic::{join_error, sb, sync_error, ClassicGroup, GroupState, Member};
use super::consumer::{ConsumerGroup, MetadataImage};
use super::pending::PendingTxnOffsets;
use super::records::{self, OffsetValue, RecordKey};
use super::{codes, Effects, GroupConfig, Waiter};

/// A JoinGroup with the request-header facts the coordinator needs.
#[derive(Debug, Clone)]
pub struct JoinInput {
    pub version: i16,
    pub client_id: String,
    pub client_host: String,
    pub request: JoinGroupRequest,
}

/// All groups and their committed offsets.
#[derive(Debug, Default)]
pub struct Coordinator {
    pub config: GroupConfig,
    pub groups: BTreeMap<String, ClassicGroup>,
    /// group -> (topic, partition) -> committed offset.
    pub offsets: HashMap<String, BTreeMap<(String, i32), OffsetValue>>,
    /// KIP-848 groups (in memory only; a group id is in `groups` or here, not both).
    pub consumer_groups: BTreeMap<String, ConsumerGroup>,
    /// The topic metadata of the last consumer heartbeat (timers reassign with it).
    pub image: MetadataImage,
    /// Transactional offsets whose transaction has not ended yet (invisible to OffsetFetch).
    pub pending: PendingTxnOffsets,
    /// Write order of each committed offset's record (Kafka's `recordOffset`), keyed like
    /// `offsets`: a committing transaction's offset replaces only an older one.
    pub(super) committed_order: HashMap<(String, String, i32), u64>,
    /// The next write-order number; every offset record written or replayed takes one.
    pub(super) next_order: u64,
    /// When offset expiration runs next (None until `start_offset_expiry`).
    pub next_offset_expiry: Option<i64>,
    /// Per-group config overrides (GROUP config resources), read-only here: KIP-848 session
    /// timeout and heartbeat interval win over `config` for their group.
    pub group_configs: Option<std::sync::Arc<crate::cluster::group_config::GroupConfigStore>>,
    /// KIP-932 share groups (`share.rs`; persisted as `share_records`).
    pub share_groups: BTreeMap<String, crate::share::group::ShareGroup>,
    /// Share-group records replayed at load, turned into `share_groups` by `finish_share_load`.
    pub share_loading: BTreeMap<String, super::share_records::ShareGroupLoad>,
    /// The broker's `group.share.*` settings.
    pub share: super::share::ShareSettings,
}

impl Coordinator {
    pub fn new(config: GroupConfig) -> Coordinator {
        Coordinator {
            config,
            groups: BTreeMap::new(),
            offsets: HashMap::new(),
            consumer_groups: BTreeMap::new(),
            image: MetadataImage::new(),
            pending: PendingTxnOffsets::default(),
            committed_order: HashMap::new(),
            next_order: 0,
            next_offset_expiry: None,
            group_configs: None,
            share_groups: BTreeMap::new(),
            share_loading: BTreeMap::new(),
            share: super::share::ShareSettings::default(),
        }
    }

    /// `config` with `group`'s overrides of the KIP-848 session timeout and heartbeat interval.
    pub(super) fn consumer_config(&self, group: &str) -> GroupConfig {
        let mut cfg = self.config.clone();
        if let Some(store) = &self.group_configs {
            let (session, heartbeat) = store.consumer_timeouts(group);
            cfg.consumer_session_timeout_ms = session.unwrap_or(cfg.consumer_session_timeout_ms);
            cfg.consumer_heartbeat_interval_ms =
                heartbeat.unwrap_or(cfg.consumer_heartbeat_interval_ms);
        }
        cfg
    }

    /// The next number in the write order of offset records.
    pub(super) fn take_order(&mut self) -> u64 {
        self.next_order += 1;
        self.next_order
    }

    /// Stores a committed offset written at write-order position `order`.
    pub(super) fn put_committed(
        &mut self,
        group: &str,
        topic: &str,
        partition: i32,
        value: OffsetValue,
        order: u64,
    ) {
        self.offsets
            .entry(group.to_string())
            .or_default()
            .insert((topic.to_string(), partition), value);
        self.committed_order
            .insert((group.to_string(), topic.to_string(), partition), order);
    }

    /// Removes a committed offset; returns it if there was one.
    pub(super) fn remove_committed(
        &mut self,
        group: &str,
        topic: &str,
        partition: i32,
    ) -> Option<OffsetValue> {
        let key = (topic.to_string(), partition);
        self.committed_order
            .remove(&(group.to_string(), key.0.clone(), partition));
        let offsets = self.offsets.get_mut(group)?;
        let removed = offsets.remove(&key);
        if offsets.is_empty() {
            self.offsets.remove(group);
        }
        removed
    }

    pub fn group(&self, group_id: &str) -> Option<&ClassicGroup> {
        self.groups.get(group_id)
    }

    /// JoinGroup. The answer for `waiter` is in the returned effects now or in a later step's.
    pub fn join(&mut self, now: i64, input: JoinInput, waiter: Waiter) -> Effects {
        let mut fx = Effects::default();
        let req = &input.request;
        let group_id = req.group_id.as_str().to_string();
        let member_id = req.member_id.as_str().to_string();
        let cfg = self.config.clone();
        let fail = |fx: &mut Effects, code| fx.joins.push((waiter, join_error(code, &member_id)));
        if group_id.is_empty() {
            fail(&mut fx, codes::INVALID_GROUP_ID);
            return fx;
        }
        if req.session_timeout_ms < cfg.min_session_timeout_ms
            || req.session_timeout_ms > cfg.max_session_timeout_ms
        {
            fail(&mut fx, codes::INVALID_SESSION_TIMEOUT);
            return fx;
        }
        if let Some(cg) = self.consumer_groups.get(&group_id) {
            if !cg.members.is_empty() {
                // A classic member of a consumer group (see `migration.rs`).
                self.classic_join_to_consumer_group(now, &input, waiter, &mut fx);
                return fx;
            }
            self.consumer_groups.remove(&group_id);
        }
        if self.share_groups.contains_key(&group_id) {
            // The id names a share group: Kafka's classicGroupJoin answers UNKNOWN_MEMBER_ID.
            fail(&mut fx, codes::UNKNOWN_MEMBER_ID);
            return fx;
        }
        if !member_id.is_empty() && !self.groups.contains_key(&group_id) {
            fail(&mut fx, codes::UNKNOWN_MEMBER_ID);
            return fx;
        }
        let group = self
            .groups
            .entry(group_id.clone())
            .or_insert_with(|| ClassicGroup::new(&group_id, now));
        let accept = match group.state {
            GroupState::Empty | GroupState::Dead => true,
            GroupState::PreparingRebalance => {
                group
                    .members
                    .get(&member_id)
                    .is_some_and(|m| m.awaiting_join.is_some())
                    || group.awaiting_join_count() < cfg.max_size
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                group.members.contains_key(&member_id) || group.members.len() < cfg.max_size
            }
        };
        if !accept {
            fail(&mut fx, codes::GROUP_MAX_SIZE_REACHED);
            return fx;
        }
        let protocols: Vec<(String, Bytes)> = req
            .protocols
            .iter()
            .map(|p| (p.name.as_str().to_string(), p.metadata.clone()))
            .collect();
        let protocol_type = req.protocol_type.as_str().to_string();
        if group.state == GroupState::Dead {
            fail(&mut fx, codes::COORDINATOR_NOT_AVAILABLE);
            return fx;
        }
        if !group.supports_protocols(&protocol_type, &protocols) {
            fail(&mut fx, codes::INCONSISTENT_GROUP_PROTOCOL);
            return fx;
        }
        let rebalance_timeout_ms = if input.version == 0 {
            req.session_timeout_ms
        } else {
            req.rebalance_timeout_ms
        };
        let instance_id = req
            .group_instance_id
            .as_ref()
            .map(|s| s.as_str().to_string());
        let params = MemberParams {
            client_id: input.client_id.clone(),
            client_host: input.client_host.clone(),
            rebalance_timeout_ms,
            session_timeout_ms: req.session_timeout_ms,
            protocol_type,
            protocols,
            instance_id,
        };

        if member_id.is_empty() {
            let new_id = format!("{}-{}", input.client_id, uuid::Uuid::new_v4());
            match params.instance_id.clone() {
                Some(instance) => match group.static_members.get(&instance).cloned() {
                    Some(old_id) => update_static_member(
                        group,
                        &cfg,
                        now,
                        &instance,
                        &old_id,
                        &new_id,
                        params,
                        input.version,
                        waiter,
                        &mut fx,
                    ),
                    None => add_member(group, &cfg, now, &new_id, params, waiter, &mut fx),
                },
                None if input.version >= 4 => {
                    group
                        .pending_members
                        .insert(new_id.clone(), now + req.session_timeout_ms as i64);
                    fx.joins
                        .push((waiter, join_error(codes::MEMBER_ID_REQUIRED, &new_id)));
                }
                None => add_member(group, &cfg, now, &new_id, params, waiter, &mut fx),
            }
            return fx;
        }

        if group.pending_members.contains_key(&member_id) {
            if params.instance_id.is_some() {
                // A pending id is never static; treat the mismatch as an unknown member.
                fail(&mut fx, codes::UNKNOWN_MEMBER_ID);
                return fx;
            }
            add_member(group, &cfg, now, &member_id, params, waiter, &mut fx);
            return fx;
        }
        if let Err(code) = group.validate_member(&member_id, params.instance_id.as_deref()) {
            fail(&mut fx, code);
            return fx;
        }
        let same_protocols = group.members[&member_id].matches(&params.protocols);
        match group.state {
            GroupState::PreparingRebalance => {
                update_member(group, &cfg, now, &member_id, params, waiter, &mut fx)
            }
            GroupState::CompletingRebalance => {
                if same_protocols {
                    // A retry of a JoinGroup whose answer was lost: answer with this generation.
                    let leader = group.is_leader(&member_id);
                    fx.joins
                        .push((waiter, group.join_response(&member_id, leader)));
                } else {
                    update_member(group, &cfg, now, &member_id, params, waiter, &mut fx)
                }
            }
            GroupState::Stable => {
                if group.is_leader(&member_id) || !same_protocols {
                    update_member(group, &cfg, now, &member_id, params, waiter, &mut fx)
                } else {
                    fx.joins
                        .push((waiter, group.join_response(&member_id, false)));
                }
            }
            GroupState::Empty | GroupState::Dead => fail(&mut fx, codes::UNKNOWN_MEMBER_ID),
        }
        fx
    }

    /// SyncGroup: the leader's assignments are stored and handed to everyone; followers wait.
    pub fn sync(&mut self, now: i64, req: SyncGroupRequest, waiter: Waiter) -> Effects {
        let mut fx = Effects::default();
        if self.consumer_groups.contains_key(req.group_id.as_str()) {
            let response = self.classic_sync_to_consumer_group(now, &req);
            fx.syncs.push((waiter, response));
            return fx;
        }
        let member_id = req.member_id.as_str();
        let Some(group) = self.groups.get_mut(req.group_id.as_str()) else {
            fx.syncs
                .push((waiter, sync_error(codes::UNKNOWN_MEMBER_ID)));
            return fx;
        };
        let instance_id = req.group_instance_id.as_ref().map(|s| s.as_str());
        let inconsistent = |asked: &Option<kafka_protocol::protocol::StrBytes>,
                            actual: &Option<String>| {
            matches!((asked, actual), (Some(a), Some(b)) if a.as_str() != b)
        };
        let error = if group.state == GroupState::Dead {
            Some(codes::COORDINATOR_NOT_AVAILABLE)
        } else if let Err(code) = group.validate_member(member_id, instance_id) {
            Some(code)
        } else if req.generation_id != group.generation_id {
            Some(codes::ILLEGAL_GENERATION)
        } else if inconsistent(&req.protocol_type, &group.protocol_type)
            || inconsistent(&req.protocol_name, &group.protocol_name)
        {
            Some(codes::INCONSISTENT_GROUP_PROTOCOL)
        } else {
            None
        };
        if let Some(code) = error {
            fx.syncs.push((waiter, sync_error(code)));
            return fx;
        }
        match group.state {
            GroupState::Empty | GroupState::Dead => fx
                .syncs
                .push((waiter, sync_error(codes::UNKNOWN_MEMBER_ID))),
            GroupState::PreparingRebalance => fx
                .syncs
                .push((waiter, sync_error(codes::REBALANCE_IN_PROGRESS))),
            GroupState::CompletingRebalance => {
                let member = group.members.get_mut(member_id).expect("validated");
                if let Some(old) = member.awaiting_sync.replace(waiter) {
                    fx.syncs
                        .push((old, sync_error(codes::REBALANCE_IN_PROGRESS)));
                }
                group.pending_sync.remove(member_id);
                if group.pending_sync.is_empty() {
                    group.sync_timer = None;
                }
                if group.is_leader(member_id) {
                    let assignment: HashMap<String, Bytes> = req
                        .assignments
                        .iter()
                        .map(|a| (a.member_id.as_str().to_string(), a.assignment.clone()))
                        .collect();
                    for m in group.members.values_mut() {
                        m.assignment = assignment.get(&m.member_id).cloned().unwrap_or_default();
                    }
                    fx.records.push(group.metadata_record(now));
                    group.set_and_propagate_assignment(&assignment, now, &mut fx);
                    group.transition(GroupState::Stable, now);
                }
            }
            GroupState::Stable => {
                group.pending_sync.remove(member_id);
                if group.pending_sync.is_empty() {
                    group.sync_timer = None;
                }
                let member = &group.members[member_id];
                fx.syncs.push((
                    waiter,
                    SyncGroupResponse::default()
                        .with_protocol_type(group.protocol_type.as_deref().map(sb))
                        .with_protocol_name(group.protocol_name.as_deref().map(sb))
                        .with_assignment(member.assignment.clone()),
                ));
            }
        }
        fx
    }

    pub fn heartbeat(&mut self, now: i64, req: &HeartbeatRequest) -> HeartbeatResponse {
        if self.consumer_groups.contains_key(req.group_id.as_str()) {
            return self.classic_heartbeat_to_consumer_group(now, req);
        }
        let code = match self.groups.get_mut(req.group_id.as_str()) {
            None => codes::UNKNOWN_MEMBER_ID,
            Some(group) => {
                let member_id = req.member_id.as_str();
                let instance = req.group_instance_id.as_ref().map(|s| s.as_str());
                if group.state == GroupState::Dead {
                    codes::COORDINATOR_NOT_AVAILABLE
                } else if let Err(code) = group.validate_member(member_id, instance) {
                    code
                } else if req.generation_id != group.generation_id {
                    codes::ILLEGAL_GENERATION
                } else {
                    match group.state {
                        GroupState::Empty | GroupState::Dead => codes::UNKNOWN_MEMBER_ID,
                        GroupState::PreparingRebalance => {
                            group.reschedule_heartbeat(member_id, now);
                            codes::REBALANCE_IN_PROGRESS
                        }
                        GroupState::CompletingRebalance | GroupState::Stable => {
                            group.reschedule_heartbeat(member_id, now);
                            codes::NONE
                        }
                    }
                }
            }
        };
        HeartbeatResponse::default().with_error_code(code)
    }

    /// LeaveGroup (v0-2 name one member in `member_id`; v3+ a batch in `members`).
    pub fn leave(
        &mut self,
        now: i64,
        version: i16,
        req: &LeaveGroupRequest,
    ) -> (LeaveGroupResponse, Effects) {
        let mut fx = Effects::default();
        let cfg = self.config.clone();
        let identities: Vec<(String, Option<String>)> = if version >= 3 {
            req.members
                .iter()
                .map(|m| {
                    (
                        m.member_id.as_str().to_string(),
                        m.group_instance_id.as_ref().map(|s| s.as_str().to_string()),
                    )
                })
                .collect()
        } else {
            vec![(req.member_id.as_str().to_string(), None)]
        };
        if self.consumer_groups.contains_key(req.group_id.as_str()) {
            let response =
                self.classic_leave_to_consumer_group(req.group_id.as_str(), version, identities);
            return (response, fx);
        }
        let Some(group) = self.groups.get_mut(req.group_id.as_str()) else {
            return (
                LeaveGroupResponse::default().with_error_code(codes::UNKNOWN_MEMBER_ID),
                fx,
            );
        };
        if group.state == GroupState::Dead {
            return (
                LeaveGroupResponse::default().with_error_code(codes::COORDINATOR_NOT_AVAILABLE),
                fx,
            );
        }
        let mut responses = Vec::new();
        let mut removed_any = false;
        for (member_id, instance) in identities {
            let code = if member_id.is_empty() {
                match instance
                    .as_ref()
                    .and_then(|i| group.static_members.get(i).cloned())
                {
                    Some(id) => {
                        group.remove(&id, &mut fx);
                        removed_any = true;
                        codes::NONE
                    }
                    None => codes::UNKNOWN_MEMBER_ID,
                }
            } else if group.pending_members.remove(&member_id).is_some() {
                codes::NONE
            } else {
                match group.validate_member(&member_id, instance.as_deref()) {
                    Ok(()) => {
                        group.remove(&member_id, &mut fx);
                        removed_any = true;
                        codes::NONE
                    }
                    Err(code) => code,
                }
            };
            responses.push(
                MemberResponse::default()
                    .with_member_id(sb(&member_id))
                    .with_group_instance_id(instance.as_deref().map(sb))
                    .with_error_code(code),
            );
        }
        if removed_any {
            match group.state {
                GroupState::Stable | GroupState::CompletingRebalance => {
                    group.maybe_prepare_rebalance_or_complete_join(&cfg, now, &mut fx)
                }
                GroupState::PreparingRebalance => {
                    group.maybe_complete_join_phase(&cfg, now, &mut fx)
                }
                _ => {}
            }
        }
        let mut response = LeaveGroupResponse::default();
        if version < 3 {
            response.error_code = responses.first().map_or(codes::NONE, |r| r.error_code);
        } else {
            response.members = responses;
        }
        (response, fx)
    }

    /// The earliest deadline of any group.
    pub fn next_deadline(&self) -> Option<i64> {
        self.groups
            .values()
            .filter_map(ClassicGroup::next_deadline)
            .chain(self.consumer_next_deadline())
            .chain(self.share_next_deadline())
            .chain(self.next_offset_expiry)
            .min()
    }

    /// Fires every timer due at `now`.
    pub fn tick(&mut self, now: i64) -> Effects {
        let mut fx = Effects::default();
        let cfg = self.config.clone();
        for group in self.groups.values_mut() {
            if group.next_deadline().is_some_and(|d| d <= now) {
                group.fire_timers(&cfg, now, &mut fx);
            }
        }
        self.consumer_tick(now, &mut fx);
        self.share_tick(now, &mut fx);
        if self.next_offset_expiry.is_some_and(|at| at <= now) {
            let expired = self.expire_offsets(now);
            fx.records.extend(expired.records);
            fx.offsets.extend(expired.offsets);
            self.start_offset_expiry(now);
        }
        fx
    }

    /// Applies one stored record of a non-transactional batch (startup load). Later records win;
    /// a null value deletes (and drops pending transactional offsets of that partition, as
    /// Kafka's replay of an offset tombstone does).
    pub fn replay(&mut self, key: &[u8], value: Option<&[u8]>, now: i64) {
        let key = match records::decode_key(key) {
            Ok(k) => k,
            Err(e) => {
                tracing::warn!("{}: skipping a record: {e}", records::OFFSETS_TOPIC);
                return;
            }
        };
        match key {
            RecordKey::Offset {
                group,
                topic,
                partition,
            } => match value.map(records::decode_offset_value) {
                None => {
                    self.remove_committed(&group, &topic, partition);
                    self.pending.remove_partition(&group, &topic, partition);
                }
                Some(Ok(v)) => {
                    self.groups
                        .entry(group.clone())
                        .or_insert_with(|| ClassicGroup::new(&group, now));
                    let order = self.take_order();
                    self.put_committed(&group, &topic, partition, v, order);
                }
                Some(Err(e)) => tracing::warn!("offset record of group {group}: {e}"),
            },
            RecordKey::Group { group } => match value.map(records::decode_group_value) {
                None => {
                    self.groups.remove(&group);
                    let has_offsets = self.offsets.get(&group).is_some_and(|o| !o.is_empty());
                    if has_offsets || self.pending.has_group(&group) {
                        self.groups
                            .insert(group.clone(), ClassicGroup::new(&group, now));
                    }
                }
                Some(Ok(v)) => {
                    let g = ClassicGroup::from_record(&group, v, now);
                    self.groups.insert(group, g);
                }
                Some(Err(e)) => tracing::warn!("group record of {group}: {e}"),
            },
            RecordKey::Share { group, key } => {
                let load = self.share_loading.entry(group.clone()).or_default();
                if let Err(e) = load.apply(key, value) {
                    tracing::warn!("share group record of {group}: {e}");
                }
            }
        }
    }
}

/// The parts of a JoinGroup that describe the member.
struct MemberParams {
    client_id: String,
    client_host: String,
    rebalance_timeout_ms: i32,
    session_timeout_ms: i32,
    protocol_type: String,
    protocols: Vec<(String, Bytes)>,
    instance_id: Option<String>,
}

fn add_member(
    group: &mut ClassicGroup,
    cfg: &GroupConfig,
    now: i64,
    member_id: &str,
    p: MemberParams,
    waiter: Waiter,
    fx: &mut Effects,
) {
    if group.state == GroupState::PreparingRebalance && group.previous_state == GroupState::Empty {
        group.new_member_added = true;
    }
    let member = Member {
        member_id: member_id.to_string(),
        group_instance_id: p.instance_id,
        client_id: p.client_id,
        client_host: p.client_host,
        rebalance_timeout_ms: p.rebalance_timeout_ms,
        session_timeout_ms: p.session_timeout_ms,
        protocol_type: p.protocol_type,
        protocols: p.protocols,
        assignment: Bytes::new(),
        awaiting_join: None,
        awaiting_sync: None,
        heartbeat_deadline: Some(now + NEW_MEMBER_JOIN_TIMEOUT_MS),
        is_new: true,
    };
    group.add(member, waiter);
    group.maybe_prepare_rebalance_or_complete_join(cfg, now, fx);
}

fn update_member(
    group: &mut ClassicGroup,
    cfg: &GroupConfig,
    now: i64,
    member_id: &str,
    p: MemberParams,
    waiter: Waiter,
    fx: &mut Effects,
) {
    let m = group.members.get_mut(member_id).expect("validated member");
    m.protocols = p.protocols;
    m.rebalance_timeout_ms = p.rebalance_timeout_ms;
    m.session_timeout_ms = p.session_timeout_ms;
    if let Some(old) = m.awaiting_join.replace(waiter) {
        fx.joins
            .push((old, join_error(codes::REBALANCE_IN_PROGRESS, member_id)));
    }
    group.maybe_prepare_rebalance_or_complete_join(cfg, now, fx);
}

/// A static member rejoined with an empty member id (a restart): it takes over the old member's
/// place under a new id. In a Stable group whose protocol would not change, no rebalance happens:
/// the member gets the current generation and its old assignment back.
#[allow(clippy::too_many_arguments)]
fn update_static_member(
    group: &mut ClassicGroup,
    cfg: &GroupConfig,
    now: i64,
    instance: &str,
    old_id: &str,
    new_id: &str,
    p: MemberParams,
    version: i16,
    waiter: Waiter,
    fx: &mut Effects,
) {
    group.replace_static_member(instance, old_id, new_id, fx);
    group.reschedule_heartbeat(new_id, now);
    {
        let m = group.members.get_mut(new_id).expect("just replaced");
        m.protocols = p.protocols;
        m.rebalance_timeout_ms = p.rebalance_timeout_ms;
        m.session_timeout_ms = p.session_timeout_ms;
        m.client_id = p.client_id;
        m.client_host = p.client_host;
    }
    match group.state {
        GroupState::Stable => {
            if group.select_protocol() == group.protocol_name {
                fx.records.push(group.metadata_record(now));
                let is_leader = group.is_leader(new_id);
                let response = if version >= 9 {
                    group
                        .join_response(new_id, is_leader)
                        .with_skip_assignment(is_leader)
                } else {
                    group.join_response(new_id, false)
                };
                fx.joins.push((waiter, response));
            } else {
                group
                    .members
                    .get_mut(new_id)
                    .expect("present")
                    .awaiting_join = Some(waiter);
                group.maybe_prepare_rebalance_or_complete_join(cfg, now, fx);
            }
        }
        GroupState::CompletingRebalance => {
            group
                .members
                .get_mut(new_id)
                .expect("present")
                .awaiting_join = Some(waiter);
            group.prepare_rebalance(cfg, now, fx);
        }
        _ => {
            group
                .members
                .get_mut(new_id)
                .expect("present")
                .awaiting_join = Some(waiter);
            group.maybe_complete_join_phase(cfg, now, fx);
        }
    }
}

/// Answers a JoinGroup that failed before reaching a group.
pub fn join_failure(code: i16, member_id: &str) -> JoinGroupResponse {
    join_error(code, member_id)
}
