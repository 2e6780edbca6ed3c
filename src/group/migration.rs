//! Online migration between classic and KIP-848 consumer groups (Kafka's
//! `group.consumer.migration.policy`), and the classic APIs (JoinGroup, SyncGroup, Heartbeat,
//! LeaveGroup) served to the classic members of a consumer group.
//!
//! - Upgrade: a ConsumerGroupHeartbeat joining a non-empty classic group of protocol type
//!   `consumer` converts it in place ([`Coordinator::upgrade_to_consumer_group`]): every classic
//!   member becomes a consumer-group member at the classic generation, owning the partitions of its
//!   last assignment, and keeps speaking the classic protocol.
//! - Classic members of a consumer group: JoinGroup is answered at once with the member's epoch as
//!   generation (no leader, no member list); SyncGroup returns the member's current assignment,
//!   encoded in the ConsumerProtocol at the version of its subscription; Heartbeat answers
//!   REBALANCE_IN_PROGRESS while the member must rejoin to move toward its target.
//! - Downgrade: when the last member speaking the consumer protocol leaves (or expires) and the
//!   rest are classic members, the group becomes a classic group at the group epoch, Stable with
//!   the target assignment, then PreparingRebalance so the classic members rejoin.
//!
//! Invariants: a group id is in `Coordinator::groups` or in `consumer_groups`, never both; a
//! conversion never touches committed offsets (they are keyed by group id). Pure: `now` and the
//! topic metadata are arguments, no I/O. Owned by the coordinator task; not thread-safe.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{
    HeartbeatRequest, HeartbeatResponse, JoinGroupResponse, LeaveGroupResponse, SyncGroupRequest,
    SyncGroupResponse,
};
use uuid::Uuid;

use super::assignor::Assignment;
use super::classic::{join_error, sb, sync_error, ClassicGroup, GroupState, Member};
use super::consumer::{ConsumerGroup, ConsumerMember, MemberState, MetadataImage};
use super::consumer_protocol::{
    decode_assignment, decode_subscription, encode_assignment, known, read_version,
};
use super::coordinator::{Coordinator, JoinInput};
use super::records::{self, CoordinatorRecord};
use super::{codes, Effects, Waiter};

/// The embedded protocol type both kinds of group share when they can convert.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// Kafka's `ConsumerGroupMigrationPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrationPolicy {
    Disabled,
    Upgrade,
    Downgrade,
    Bidirectional,
}

impl MigrationPolicy {
    /// Kafka's values, case-insensitive.
    pub fn parse(s: &str) -> Option<MigrationPolicy> {
        match s.trim().to_ascii_lowercase().as_str() {
            "disabled" => Some(MigrationPolicy::Disabled),
            "upgrade" => Some(MigrationPolicy::Upgrade),
            "downgrade" => Some(MigrationPolicy::Downgrade),
            "bidirectional" => Some(MigrationPolicy::Bidirectional),
            _ => None,
        }
    }

    pub fn upgrade_enabled(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Upgrade | MigrationPolicy::Bidirectional
        )
    }

    pub fn downgrade_enabled(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Downgrade | MigrationPolicy::Bidirectional
        )
    }
}

/// What a consumer-group member speaking the classic protocol keeps from its JoinGroup (Kafka's
/// `ClassicMemberMetadata`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicMemberMeta {
    pub session_timeout_ms: i32,
    /// (protocol name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
}

impl ClassicMemberMeta {
    /// The protocol Kafka names in the JoinGroup answer: the member's first.
    pub fn protocol_name(&self) -> &str {
        self.protocols.first().map_or("", |(n, _)| n.as_str())
    }

    /// The ConsumerProtocol version of the member's first subscription (its assignments are
    /// written at that version).
    fn version(&self) -> i16 {
        self.protocols
            .first()
            .and_then(|(_, m)| read_version(m))
            .unwrap_or(0)
    }
}

fn not_consumer_group(group_id: &str) -> (i16, String) {
    (
        codes::GROUP_ID_NOT_FOUND,
        format!("Group {group_id} is not a consumer group."),
    )
}

impl ConsumerGroup {
    /// Kafka's `allMembersUseClassicProtocolExcept`: `member_id` speaks the consumer protocol and
    /// every other member the classic one.
    pub fn all_classic_except(&self, member_id: &str) -> bool {
        self.members
            .get(member_id)
            .is_some_and(|m| m.classic.is_none())
            && self
                .members
                .values()
                .filter(|m| m.member_id != member_id)
                .all(|m| m.classic.is_some())
    }

    /// Whether a classic member with `protocols` fits: type `consumer` and one protocol name every
    /// classic member supports (any non-empty list when there is no classic member).
    fn supports_classic_protocols(
        &self,
        protocol_type: &str,
        protocols: &[(String, Bytes)],
    ) -> bool {
        if protocol_type != CONSUMER_PROTOCOL_TYPE || protocols.is_empty() {
            return false;
        }
        protocols.iter().any(|(name, _)| {
            self.members
                .values()
                .filter_map(|m| m.classic.as_ref())
                .all(|c| c.protocols.iter().any(|(n, _)| n == name))
        })
    }

    /// Kafka's `waitingOnUnreleasedPartition`: a target partition the member lacks is still
    /// owned by another member.
    fn waiting_on_unreleased(&self, member: &ConsumerMember) -> bool {
        if member.state != MemberState::UnreleasedPartitions {
            return false;
        }
        let others = self.owned_by_others(&member.member_id);
        self.target.get(&member.member_id).is_some_and(|t| {
            t.iter().any(|(topic, ps)| {
                ps.iter().any(|p| {
                    !super::consumer::contains(&member.assigned, topic, *p)
                        && super::consumer::contains(&others, topic, *p)
                })
            })
        })
    }

    /// Kafka's member lookup of the classic APIs: by instance id when given (a different member
    /// id is fenced), else by member id; a member speaking the consumer protocol is unknown here.
    fn classic_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<&ConsumerMember, i16> {
        let m = match instance_id {
            Some(i) => {
                let id = self.static_members.get(i).ok_or(codes::UNKNOWN_MEMBER_ID)?;
                if id != member_id {
                    return Err(codes::FENCED_INSTANCE_ID);
                }
                self.members.get(id).ok_or(codes::UNKNOWN_MEMBER_ID)?
            }
            None => self
                .members
                .get(member_id)
                .ok_or(codes::UNKNOWN_MEMBER_ID)?,
        };
        if m.classic.is_none() {
            return Err(codes::UNKNOWN_MEMBER_ID);
        }
        Ok(m)
    }
}

/// Builds the consumer group a classic group becomes (Kafka's `ConsumerGroup.fromClassicGroup`).
fn consumer_group_from(
    classic: &ClassicGroup,
    image: &MetadataImage,
    now: i64,
) -> Result<ConsumerGroup, (i16, String)> {
    let group_id = &classic.group_id;
    let malformed = || {
        (
            codes::GROUP_ID_NOT_FOUND,
            format!(
                "Cannot upgrade the classic group {group_id} to consumer group because the \
                 embedded consumer protocol is malformed."
            ),
        )
    };
    let mut group = ConsumerGroup::new(group_id);
    group.group_epoch = classic.generation_id;
    group.assignment_epoch = classic.generation_id;
    for m in classic.members.values() {
        let metadata = match &classic.protocol_name {
            Some(p) => m.metadata(p),
            None => m
                .protocols
                .first()
                .map(|(_, b)| b.clone())
                .unwrap_or_default(),
        };
        let subscription = decode_subscription(&metadata).ok_or_else(malformed)?;
        let assigned = match decode_assignment(&m.assignment) {
            Ok(a) => known(a, image),
            Err(codes::UNSUPPORTED_VERSION) => {
                return Err((
                    codes::UNSUPPORTED_VERSION,
                    "userData from a custom assignor would be lost".to_string(),
                ))
            }
            Err(_) => return Err(malformed()),
        };
        if let Some(i) = &m.group_instance_id {
            group.static_members.insert(i.clone(), m.member_id.clone());
        }
        group.target.insert(m.member_id.clone(), assigned.clone());
        group.members.insert(
            m.member_id.clone(),
            ConsumerMember {
                member_id: m.member_id.clone(),
                instance_id: m.group_instance_id.clone(),
                rack_id: subscription.rack_id,
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                member_epoch: classic.generation_id,
                previous_member_epoch: classic.generation_id,
                state: MemberState::Stable,
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                subscribed: subscription.topics.clone(),
                subscribed_names: subscription.topics,
                subscribed_regex: None,
                server_assignor: None,
                assigned,
                pending_revocation: Assignment::new(),
                session_deadline: now + m.session_timeout_ms as i64,
                revocation_deadline: None,
                classic: Some(ClassicMemberMeta {
                    session_timeout_ms: m.session_timeout_ms,
                    protocols: m.protocols.clone(),
                }),
            },
        );
    }
    Ok(group)
}

impl Coordinator {
    /// Converts the non-empty classic group `group_id` to a consumer group for a joining
    /// consumer-protocol member (Kafka's `validateOnlineUpgrade` + `convertToConsumerGroup`).
    /// Parked JoinGroup/SyncGroup requests are answered REBALANCE_IN_PROGRESS; the classic
    /// group's record is tombstoned. On refusal the classic group is left as it was.
    pub(super) fn upgrade_to_consumer_group(
        &mut self,
        group_id: &str,
        now: i64,
        image: &MetadataImage,
        fx: &mut Effects,
    ) -> Result<(), (i16, String)> {
        let Some(classic) = self.groups.get(group_id) else {
            return Ok(());
        };
        if !self.config.migration_policy.upgrade_enabled() {
            tracing::info!(
                "Cannot upgrade classic group {group_id} to consumer group because the online \
                 upgrade is disabled."
            );
            return Err(not_consumer_group(group_id));
        }
        if classic.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE) {
            tracing::info!(
                "Cannot upgrade classic group {group_id} to consumer group because the group \
                 does not use the consumer embedded protocol."
            );
            return Err(not_consumer_group(group_id));
        }
        let consumer = consumer_group_from(classic, image, now)?;
        let Some(mut classic) = self.groups.remove(group_id) else {
            return Ok(());
        };
        for m in classic.members.values_mut() {
            if let Some(w) = m.awaiting_join.take() {
                fx.joins
                    .push((w, join_error(codes::REBALANCE_IN_PROGRESS, &m.member_id)));
            }
            if let Some(w) = m.awaiting_sync.take() {
                fx.syncs.push((w, sync_error(codes::REBALANCE_IN_PROGRESS)));
            }
        }
        fx.records.push(CoordinatorRecord {
            group_id: group_id.to_string(),
            key: records::group_key(group_id),
            value: None,
        });
        tracing::info!(
            "upgraded classic group {group_id} (generation {}, {} members) to a consumer group",
            classic.generation_id,
            classic.members.len()
        );
        self.consumer_groups.insert(group_id.to_string(), consumer);
        Ok(())
    }

    /// Kafka's `validateOnlineDowngradeWithFencedMember`: leaving `member_id` is the last member
    /// on the consumer protocol, others remain, the policy allows it and they fit a classic group.
    pub(super) fn downgrade_allowed(&self, group: &ConsumerGroup, member_id: &str) -> bool {
        if !group.all_classic_except(member_id) || group.members.len() <= 1 {
            return false;
        }
        if !self.config.migration_policy.downgrade_enabled() {
            tracing::info!(
                "Cannot downgrade consumer group {} to classic group because the online \
                 downgrade is disabled.",
                group.group_id
            );
            return false;
        }
        if group.members.len() - 1 > self.config.max_size {
            tracing::info!(
                "Cannot downgrade consumer group {} to classic group because its group size is \
                 greater than classic group max size.",
                group.group_id
            );
            return false;
        }
        true
    }

    /// Converts consumer group `group_id` to a classic group without `leaving_id` (Kafka's
    /// `convertToClassicGroup` + `ClassicGroup.fromConsumerGroup`), writes its record and starts a
    /// rebalance so the classic members rejoin.
    pub(super) fn downgrade_to_classic_group(
        &mut self,
        group_id: &str,
        leaving_id: &str,
        now: i64,
        fx: &mut Effects,
    ) {
        let Some(consumer) = self.consumer_groups.remove(group_id) else {
            return;
        };
        let mut classic = ClassicGroup::new(group_id, now);
        classic.state = GroupState::Stable;
        classic.previous_state = GroupState::Stable;
        classic.generation_id = consumer.group_epoch;
        classic.protocol_type = Some(CONSUMER_PROTOCOL_TYPE.to_string());
        for m in consumer.members.values() {
            let Some(meta) = m.classic.as_ref().filter(|_| m.member_id != leaving_id) else {
                continue;
            };
            if let Some(i) = &m.instance_id {
                classic
                    .static_members
                    .insert(i.clone(), m.member_id.clone());
            }
            classic.members.insert(
                m.member_id.clone(),
                Member {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: meta.session_timeout_ms,
                    protocol_type: CONSUMER_PROTOCOL_TYPE.to_string(),
                    protocols: meta.protocols.clone(),
                    assignment: Bytes::new(),
                    awaiting_join: None,
                    awaiting_sync: None,
                    heartbeat_deadline: Some(now + meta.session_timeout_ms as i64),
                    is_new: false,
                },
            );
        }
        classic.leader_id = classic.members.keys().next().cloned();
        classic.protocol_name = classic.select_protocol();
        let protocol = classic.protocol_name.clone().unwrap_or_default();
        let empty = Assignment::new();
        for m in classic.members.values_mut() {
            let version = read_version(&m.metadata(&protocol)).unwrap_or(0);
            let target = consumer.target.get(&m.member_id).unwrap_or(&empty);
            m.assignment = encode_assignment(target, version);
        }
        fx.records.push(classic.metadata_record(now));
        tracing::info!(
            "downgraded consumer group {group_id} (epoch {}) to a classic group of {} members",
            consumer.group_epoch,
            classic.members.len()
        );
        let cfg = self.config.clone();
        classic.prepare_rebalance(&cfg, now, fx);
        self.groups.insert(group_id.to_string(), classic);
    }

    /// Removes `member_id` from consumer group `group_id`, downgrading the group when that is
    /// what Kafka would do, else bumping the group epoch. Returns whether the group downgraded.
    pub(super) fn remove_consumer_member(
        &mut self,
        group_id: &str,
        member_id: &str,
        now: i64,
        image: &MetadataImage,
        fx: &mut Effects,
    ) -> bool {
        let Some(group) = self.consumer_groups.get(group_id) else {
            return false;
        };
        if self.downgrade_allowed(group, member_id) {
            self.downgrade_to_classic_group(group_id, member_id, now, fx);
            return true;
        }
        if let Some(group) = self.consumer_groups.get_mut(group_id) {
            group.remove_member(member_id);
            group.maybe_update_target(image, true);
        }
        false
    }

    /// JoinGroup to a non-empty consumer group (Kafka's `classicGroupJoinToConsumerGroup`): the
    /// member joins or rejoins as a classic member, is reconciled at once and answered now.
    pub(super) fn classic_join_to_consumer_group(
        &mut self,
        now: i64,
        input: &JoinInput,
        waiter: Waiter,
        fx: &mut Effects,
    ) {
        let image = self.image.clone();
        let req = &input.request;
        let group_id = req.group_id.as_str();
        let asked_id = req.member_id.as_str();
        let instance_id = req
            .group_instance_id
            .as_ref()
            .map(|s| s.as_str().to_string());
        let member_id = if asked_id.is_empty() {
            Uuid::new_v4().to_string()
        } else {
            asked_id.to_string()
        };
        let Some(group) = self.consumer_groups.get_mut(group_id) else {
            fx.joins
                .push((waiter, join_error(codes::UNKNOWN_MEMBER_ID, asked_id)));
            return;
        };
        let protocols: Vec<(String, Bytes)> = req
            .protocols
            .iter()
            .map(|p| (p.name.as_str().to_string(), p.metadata.clone()))
            .collect();
        if !group.supports_classic_protocols(req.protocol_type.as_str(), &protocols) {
            fx.joins.push((
                waiter,
                join_error(codes::INCONSISTENT_GROUP_PROTOCOL, asked_id),
            ));
            return;
        }
        if asked_id.is_empty() && instance_id.is_none() && input.version >= 4 {
            fx.joins
                .push((waiter, join_error(codes::MEMBER_ID_REQUIRED, &member_id)));
            return;
        }
        // Kafka reads the first protocol's subscription (all carry the same one); a malformed
        // one is its UNKNOWN_SERVER_ERROR.
        let Some(subscription) = protocols.first().and_then(|(_, m)| decode_subscription(m)) else {
            tracing::info!(
                "group {group_id}: JoinGroup of {member_id} carries a malformed consumer \
                 protocol subscription"
            );
            fx.joins
                .push((waiter, join_error(codes::UNKNOWN_SERVER_ERROR, asked_id)));
            return;
        };
        let mut bump = false;
        if group
            .members
            .get(&member_id)
            .is_some_and(|m| m.classic.is_none())
        {
            // A member on the consumer protocol cannot use JoinGroup.
            fx.joins
                .push((waiter, join_error(codes::UNKNOWN_MEMBER_ID, asked_id)));
            return;
        }
        // A static member restarting with an empty member id takes its old place (and from now
        // on speaks the classic protocol).
        if let Some(i) = &instance_id {
            match group.static_members.get(i).cloned() {
                Some(old) if old != member_id && asked_id.is_empty() => {
                    if let Some(mut m) = group.members.remove(&old) {
                        let target = group.target.remove(&old).unwrap_or_default();
                        group.target.insert(member_id.clone(), target);
                        m.member_id = member_id.clone();
                        group.members.insert(member_id.clone(), m);
                    }
                }
                Some(old) if old != member_id => {
                    fx.joins
                        .push((waiter, join_error(codes::FENCED_INSTANCE_ID, asked_id)));
                    return;
                }
                _ => {}
            }
            group.static_members.insert(i.clone(), member_id.clone());
        }
        let rebalance_timeout_ms = if input.version == 0 {
            req.session_timeout_ms
        } else {
            req.rebalance_timeout_ms
        };
        let m = group.members.entry(member_id.clone()).or_insert_with(|| {
            bump = true;
            ConsumerMember::joining(
                member_id.clone(),
                instance_id.clone(),
                input.client_id.clone(),
                input.client_host.clone(),
                rebalance_timeout_ms,
                now,
            )
        });
        if subscription.topics != m.subscribed_names {
            m.subscribed_names = subscription.topics.clone();
            bump = true;
        }
        if subscription.rack_id.is_some() {
            m.rack_id = subscription.rack_id.clone();
        }
        m.rebalance_timeout_ms = rebalance_timeout_ms;
        m.client_id = input.client_id.clone();
        m.client_host = input.client_host.clone();
        m.session_deadline = now + req.session_timeout_ms as i64;
        m.classic = Some(ClassicMemberMeta {
            session_timeout_ms: req.session_timeout_ms,
            protocols,
        });
        group.maybe_update_target(&image, bump);
        let owned = known(subscription.owned, &image);
        group.reconcile(&member_id, Some(&owned), now);
        let m = &group.members[&member_id];
        let protocol_name = m.classic.as_ref().map_or("", |c| c.protocol_name());
        fx.joins.push((
            waiter,
            JoinGroupResponse::default()
                .with_member_id(sb(&member_id))
                .with_generation_id(m.member_epoch)
                .with_protocol_type(Some(sb(CONSUMER_PROTOCOL_TYPE)))
                .with_protocol_name(Some(sb(protocol_name))),
        ));
    }

    /// SyncGroup of a classic member of a consumer group (Kafka's
    /// `classicGroupSyncToConsumerGroup`): the member's current assignment.
    pub(super) fn classic_sync_to_consumer_group(
        &mut self,
        now: i64,
        req: &SyncGroupRequest,
    ) -> SyncGroupResponse {
        let Some(group) = self.consumer_groups.get_mut(req.group_id.as_str()) else {
            return sync_error(codes::UNKNOWN_MEMBER_ID);
        };
        let instance = req.group_instance_id.as_ref().map(|s| s.as_str());
        let m = match group.classic_member(req.member_id.as_str(), instance) {
            Ok(m) => m,
            Err(code) => return sync_error(code),
        };
        let meta = m.classic.clone().unwrap_or(ClassicMemberMeta {
            session_timeout_ms: 0,
            protocols: Vec::new(),
        });
        if req.generation_id != m.member_epoch {
            return sync_error(codes::ILLEGAL_GENERATION);
        }
        let wrong_type = req
            .protocol_type
            .as_ref()
            .is_some_and(|t| t.as_str() != CONSUMER_PROTOCOL_TYPE);
        let wrong_name = req
            .protocol_name
            .as_ref()
            .is_some_and(|n| n.as_str() != meta.protocol_name());
        if wrong_type || wrong_name {
            return sync_error(codes::INCONSISTENT_GROUP_PROTOCOL);
        }
        if group.group_epoch > m.member_epoch && m.state != MemberState::UnrevokedPartitions {
            return sync_error(codes::REBALANCE_IN_PROGRESS);
        }
        let assignment = encode_assignment(&m.assigned, meta.version());
        let id = m.member_id.clone();
        if let Some(m) = group.members.get_mut(&id) {
            m.session_deadline = now + meta.session_timeout_ms as i64;
        }
        SyncGroupResponse::default()
            .with_protocol_type(req.protocol_type.clone())
            .with_protocol_name(req.protocol_name.clone())
            .with_assignment(assignment)
    }

    /// Heartbeat of a classic member of a consumer group (Kafka's
    /// `classicGroupHeartbeatToConsumerGroup`): REBALANCE_IN_PROGRESS when the member must rejoin
    /// (group epoch moved on, partitions to revoke, or partitions it waits for are free).
    pub(super) fn classic_heartbeat_to_consumer_group(
        &mut self,
        now: i64,
        req: &HeartbeatRequest,
    ) -> HeartbeatResponse {
        let response = |code| HeartbeatResponse::default().with_error_code(code);
        let Some(group) = self.consumer_groups.get_mut(req.group_id.as_str()) else {
            return response(codes::UNKNOWN_MEMBER_ID);
        };
        let instance = req.group_instance_id.as_ref().map(|s| s.as_str());
        let m = match group.classic_member(req.member_id.as_str(), instance) {
            Ok(m) => m,
            Err(code) => return response(code),
        };
        if req.generation_id != m.member_epoch {
            return response(codes::ILLEGAL_GENERATION);
        }
        let rejoin = m.member_epoch < group.group_epoch
            || m.state == MemberState::UnrevokedPartitions
            || (m.state == MemberState::UnreleasedPartitions && !group.waiting_on_unreleased(m));
        let id = m.member_id.clone();
        if let Some(m) = group.members.get_mut(&id) {
            let session = m.classic.as_ref().map_or(0, |c| c.session_timeout_ms);
            m.session_deadline = now + session as i64;
        }
        response(if rejoin {
            codes::REBALANCE_IN_PROGRESS
        } else {
            codes::NONE
        })
    }

    /// LeaveGroup to a consumer group (Kafka's `classicGroupLeaveToConsumerGroup`): only classic
    /// members can leave this way; the group epoch is bumped once if any did.
    pub(super) fn classic_leave_to_consumer_group(
        &mut self,
        group_id: &str,
        version: i16,
        identities: Vec<(String, Option<String>)>,
    ) -> LeaveGroupResponse {
        let image = self.image.clone();
        let Some(group) = self.consumer_groups.get_mut(group_id) else {
            return LeaveGroupResponse::default().with_error_code(codes::UNKNOWN_MEMBER_ID);
        };
        let mut responses = Vec::new();
        let mut removed_any = false;
        for (member_id, instance) in identities {
            let found = match (&instance, member_id.is_empty()) {
                // Administrative removal by instance id alone.
                (Some(i), true) => group
                    .static_members
                    .get(i)
                    .cloned()
                    .ok_or(codes::UNKNOWN_MEMBER_ID)
                    .and_then(|id| {
                        group
                            .classic_member(&id, Some(i))
                            .map(|m| m.member_id.clone())
                    }),
                _ => group
                    .classic_member(&member_id, instance.as_deref())
                    .map(|m| m.member_id.clone()),
            };
            let code = match found {
                Ok(id) => {
                    tracing::info!("consumer group {group_id}: classic member {id} left");
                    group.remove_member(&id);
                    removed_any = true;
                    codes::NONE
                }
                Err(code) => code,
            };
            responses.push(
                MemberResponse::default()
                    .with_member_id(sb(&member_id))
                    .with_group_instance_id(instance.as_deref().map(sb))
                    .with_error_code(code),
            );
        }
        if removed_any {
            group.maybe_update_target(&image, true);
        }
        let mut response = LeaveGroupResponse::default();
        if version < 3 {
            response.error_code = responses.first().map_or(codes::NONE, |r| r.error_code);
        } else {
            response.members = responses;
        }
        response
    }

    /// Fires the session and revocation timers of consumer groups; a consumer-protocol member
    /// expiring may downgrade its group (records and a rebalance go to `fx`).
    pub fn consumer_tick(&mut self, now: i64, fx: &mut Effects) {
        let image = self.image.clone();
        let due: BTreeMap<String, Vec<String>> = self
            .consumer_groups
            .values()
            .filter(|g| g.next_deadline().is_some_and(|d| d <= now))
            .map(|g| (g.group_id.clone(), g.expired_members(now)))
            .collect();
        for (group_id, gone) in due {
            for id in gone {
                tracing::info!("consumer group {group_id}: member {id} expired");
                if self.remove_consumer_member(&group_id, &id, now, &image, fx) {
                    break;
                }
            }
        }
    }
}
