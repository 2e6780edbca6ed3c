//! ConsumerGroupHeartbeat and ConsumerGroupDescribe on the coordinator: request validation, join
//! (epoch 0), heartbeat with epoch fencing, leave (-1, static -2), timers. The group and member
//! rules they apply live in `consumer.rs`.
//!
//! Pure: `now` and the topic metadata are arguments; no I/O. Owned by the coordinator task.

use std::collections::{BTreeSet, HashMap};

use kafka_protocol::messages::consumer_group_describe_response as cgd;
use kafka_protocol::messages::consumer_group_heartbeat_response as cgh;
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, GroupId,
};
use uuid::Uuid;

use super::assignor::{Assignment, ASSIGNORS};
use super::classic::{sb, GroupState};
use super::consumer::{
    error, insert, is_subset, ConsumerGroup, ConsumerHeartbeatInput, ConsumerMember, MemberState,
    MetadataImage, TopicRegex, LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH,
};
use super::coordinator::Coordinator;
use super::{codes, Effects, GroupConfig};

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
    /// The answer plus the step's effects: an online upgrade answers the classic group's parked
    /// requests and tombstones its record; a downgrade writes the classic group's record.
    pub fn consumer_heartbeat_step(
        &mut self,
        now: i64,
        input: ConsumerHeartbeatInput,
        image: &MetadataImage,
    ) -> (ConsumerGroupHeartbeatResponse, Effects) {
        self.image = image.clone();
        let mut fx = Effects::default();
        let response = match self.consumer_heartbeat_inner(now, &input, image, &mut fx) {
            Ok(r) => r,
            Err((code, message)) => error(code, &message),
        };
        (response, fx)
    }

    /// [`Self::consumer_heartbeat_step`] without its effects (tests of the state machine).
    #[cfg(test)]
    pub fn consumer_heartbeat(
        &mut self,
        now: i64,
        input: ConsumerHeartbeatInput,
        image: &MetadataImage,
    ) -> ConsumerGroupHeartbeatResponse {
        self.consumer_heartbeat_step(now, input, image).0
    }

    fn consumer_heartbeat_inner(
        &mut self,
        now: i64,
        input: &ConsumerHeartbeatInput,
        image: &MetadataImage,
        fx: &mut Effects,
    ) -> Result<ConsumerGroupHeartbeatResponse, (i16, String)> {
        validate_request(input)?;
        let cfg: GroupConfig = self.consumer_config(input.request.group_id.as_str());
        let req = &input.request;
        let group_id = req.group_id.as_str();
        let epoch = req.member_epoch;
        let unknown = |what: &str| (codes::UNKNOWN_MEMBER_ID, what.to_string());

        if self.share_groups.contains_key(group_id) {
            return Err((
                codes::GROUP_ID_NOT_FOUND,
                format!("Group {group_id} is not a consumer group."),
            ));
        }
        // An empty classic group is replaced; a non-empty one is upgraded in place when a member
        // joins and the migration policy allows it (see `migration.rs`).
        if let Some(classic) = self.groups.get(group_id) {
            let empty = classic.state == GroupState::Empty || classic.state == GroupState::Dead;
            match (empty, epoch == 0) {
                (true, true) => {
                    self.groups.remove(group_id);
                }
                (true, false) => {}
                (false, true) => self.upgrade_to_consumer_group(group_id, now, image, fx)?,
                (false, false) => {
                    return Err((
                        codes::GROUP_ID_NOT_FOUND,
                        format!("Group {group_id} is not a consumer group."),
                    ))
                }
            }
        }
        let member_id = if req.member_id.is_empty() {
            Uuid::new_v4().to_string()
        } else {
            req.member_id.as_str().to_string()
        };

        if epoch == LEAVE_GROUP_MEMBER_EPOCH || epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
            let leaves = self.consumer_groups.get(group_id).is_some_and(|g| {
                g.members.get(&member_id).is_some_and(|m| {
                    m.classic.is_none()
                        && (epoch == LEAVE_GROUP_MEMBER_EPOCH || m.instance_id.is_none())
                })
            });
            if leaves {
                self.remove_consumer_member(group_id, &member_id, now, image, fx);
                return Ok(ConsumerGroupHeartbeatResponse::default()
                    .with_member_id(Some(sb(&member_id)))
                    .with_member_epoch(epoch)
                    .with_heartbeat_interval_ms(0));
            }
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
                        ConsumerMember::joining(
                            member_id.clone(),
                            instance_id.clone(),
                            input.client_id.clone(),
                            input.client_host.clone(),
                            req.rebalance_timeout_ms,
                            now,
                        ),
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
