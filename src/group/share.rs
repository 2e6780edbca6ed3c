//! KIP-932 share groups on the group coordinator: ShareGroupHeartbeat (76) and
//! ShareGroupDescribe (77) steps driving `share::group::ShareGroup` (membership, epochs, the
//! `simple` assignor, session timeouts), plus the share groups' part of ListGroups,
//! DescribeGroups and DeleteGroups. Part of the pure coordinator state machine (`now` is an
//! argument; no I/O).
//!
//! State: every step that changes a group returns the ShareGroup* records of the change
//! (`share_records::diff` of the group's image before and after), which the driver appends to
//! `__consumer_offsets` before answering (undoing the step when that fails); `finish_share_load`
//! rebuilds the groups from the replayed records, with every member's session restarted.
//!
//! Invariants: a group id names a classic, a consumer or a share group, never two (a heartbeat
//! for an id of another type answers GROUP_ID_NOT_FOUND, as Kafka's "is not a share group").

use std::collections::BTreeMap;

use kafka_protocol::messages::share_group_describe_response as sgd;
use kafka_protocol::messages::share_group_heartbeat_response as sgh;
use kafka_protocol::messages::{
    GroupId, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse, TopicName,
};

use super::classic::sb;
use super::codes;
use super::consumer::MetadataImage;
use super::coordinator::Coordinator;
use super::records::CoordinatorRecord;
use super::share_records;
use crate::share::assignor::{Assignment, TopicPartitions};
use crate::share::group::{HeartbeatRequest, ShareGroup, ShareGroupConfig};

/// A ShareGroupHeartbeat with the request-header facts the coordinator needs.
#[derive(Debug, Clone)]
pub struct ShareHeartbeatInput {
    pub client_id: String,
    pub client_host: String,
    pub request: ShareGroupHeartbeatRequest,
}

/// The share-group settings of the broker (`group.share.*`), overridden per group by the
/// `share.session.timeout.ms` / `share.heartbeat.interval.ms` group configs.
#[derive(Debug, Clone, Copy, Default)]
pub struct ShareSettings {
    pub group: ShareGroupConfig,
}

impl ShareSettings {
    pub fn from_config(c: &crate::config::Config) -> ShareSettings {
        ShareSettings {
            group: ShareGroupConfig {
                session_timeout_ms: i64::from(c.group_share_session_timeout_ms),
                heartbeat_interval_ms: c.group_share_heartbeat_interval_ms,
                max_size: c.group_share_max_size.max(1) as usize,
            },
        }
    }
}

fn topics_of(image: &MetadataImage) -> BTreeMap<String, TopicPartitions> {
    image
        .iter()
        .map(|(name, t)| {
            (
                name.clone(),
                TopicPartitions {
                    topic_id: t.id,
                    partitions: t.partitions,
                },
            )
        })
        .collect()
}

fn heartbeat_error(code: i16, message: Option<String>) -> ShareGroupHeartbeatResponse {
    ShareGroupHeartbeatResponse::default()
        .with_error_code(code)
        .with_error_message(message.map(|m| sb(&m)))
        .with_member_epoch(-1)
}

fn assignment_of(a: &Assignment) -> sgh::Assignment {
    sgh::Assignment::default().with_topic_partitions(
        a.iter()
            .map(|(id, ps)| {
                sgh::TopicPartitions::default()
                    .with_topic_id(*id)
                    .with_partitions(ps.iter().copied().collect())
            })
            .collect(),
    )
}

/// A share group and the share-partitions (topic id, partition) whose state goes before it.
pub type ShareStateToDelete = (String, Vec<(uuid::Uuid, i32)>);

impl Coordinator {
    /// The share-group config of `group`: the broker's, with the group's overrides.
    pub(super) fn share_config(&self, group: &str) -> ShareGroupConfig {
        let mut cfg = self.share.group;
        if let Some(store) = &self.group_configs {
            let o = store.get(group);
            let int = |k: &str| o.get(k).and_then(|v| v.trim().parse::<i64>().ok());
            if let Some(v) = int("share.session.timeout.ms") {
                cfg.session_timeout_ms = v;
            }
            if let Some(v) = int("share.heartbeat.interval.ms").and_then(|v| i32::try_from(v).ok())
            {
                cfg.heartbeat_interval_ms = v;
            }
        }
        cfg
    }

    /// Whether `group_id` names a classic or consumer group.
    fn is_other_group_type(&self, group_id: &str) -> bool {
        self.consumer_groups.contains_key(group_id)
            || self
                .groups
                .get(group_id)
                .is_some_and(|g| g.state != super::GroupState::Dead)
    }

    /// Rebuilds the share groups from the records `replay` gathered (startup load).
    pub fn finish_share_load(&mut self, now: i64) {
        for (group_id, load) in std::mem::take(&mut self.share_loading) {
            if let Some(image) = load.into_image() {
                let config = self.share_config(&group_id);
                let group = ShareGroup::restore(&group_id, config, image, now);
                self.share_groups.insert(group_id, group);
            }
        }
    }

    /// One ShareGroupHeartbeat, without its records (tests).
    #[cfg(test)]
    pub fn share_heartbeat(
        &mut self,
        now: i64,
        input: ShareHeartbeatInput,
        image: &MetadataImage,
    ) -> ShareGroupHeartbeatResponse {
        self.share_heartbeat_step(now, input, image).0
    }

    /// One ShareGroupHeartbeat and the records it changed. `image` is the current topic metadata.
    pub fn share_heartbeat_step(
        &mut self,
        now: i64,
        input: ShareHeartbeatInput,
        image: &MetadataImage,
    ) -> (ShareGroupHeartbeatResponse, Vec<CoordinatorRecord>) {
        let group_id = input.request.group_id.as_str().to_string();
        let before = self.share_groups.get(&group_id).map(ShareGroup::image);
        let response = self.share_heartbeat_inner(now, input, image);
        let after = self.share_groups.get(&group_id).map(ShareGroup::image);
        let records = share_records::diff(&group_id, before.as_ref(), after.as_ref());
        (response, records)
    }

    fn share_heartbeat_inner(
        &mut self,
        now: i64,
        input: ShareHeartbeatInput,
        image: &MetadataImage,
    ) -> ShareGroupHeartbeatResponse {
        let req = &input.request;
        let group_id = req.group_id.as_str().to_string();
        if group_id.is_empty() {
            return heartbeat_error(
                codes::INVALID_REQUEST,
                Some("GroupId can't be empty.".into()),
            );
        }
        if self.is_other_group_type(&group_id) {
            let msg = format!("Group {group_id} is not a share group.");
            return heartbeat_error(codes::GROUP_ID_NOT_FOUND, Some(msg));
        }
        let config = self.share_config(&group_id);
        let group = self
            .share_groups
            .entry(group_id.clone())
            .or_insert_with(|| ShareGroup::new(&group_id, config));
        let hb = HeartbeatRequest {
            member_id: req.member_id.as_str().to_string(),
            member_epoch: req.member_epoch,
            rack_id: req.rack_id.as_ref().map(|r| r.as_str().to_string()),
            subscribed_topic_names: req
                .subscribed_topic_names
                .as_ref()
                .map(|ns| ns.iter().map(|n| n.as_str().to_string()).collect()),
            client_id: input.client_id.clone(),
            client_host: input.client_host.clone(),
        };
        let topics = topics_of(image);
        let result = group.heartbeat(&hb, &topics, now);
        // A group created by a refused first heartbeat is not kept.
        if group.describe().members.is_empty() && group.group_epoch() == 0 {
            self.share_groups.remove(&group_id);
        }
        match result {
            Ok(r) => ShareGroupHeartbeatResponse::default()
                .with_member_id(Some(sb(&r.member_id)))
                .with_member_epoch(r.member_epoch)
                .with_heartbeat_interval_ms(r.heartbeat_interval_ms)
                .with_assignment(r.assignment.as_ref().map(assignment_of)),
            Err(e) => heartbeat_error(e.error_code(), Some(e.to_string())),
        }
    }

    /// ShareGroupDescribe of one group id.
    pub fn share_describe(&self, group_id: &str, image: &MetadataImage) -> sgd::DescribedGroup {
        let Some(group) = self.share_groups.get(group_id) else {
            let message = if self.is_other_group_type(group_id) {
                format!("Group {group_id} is not a share group.")
            } else {
                format!("Group {group_id} not found.")
            };
            return sgd::DescribedGroup::default()
                .with_group_id(GroupId(sb(group_id)))
                .with_group_state(sb("Dead"))
                .with_error_code(codes::GROUP_ID_NOT_FOUND)
                .with_error_message(Some(sb(&message)));
        };
        let names: BTreeMap<uuid::Uuid, &String> =
            image.iter().map(|(name, t)| (t.id, name)).collect();
        let d = group.describe();
        let members = d
            .members
            .iter()
            .map(|m| {
                let assignment = sgd::Assignment::default().with_topic_partitions(
                    m.assignment
                        .iter()
                        .map(|(id, ps)| {
                            let name = names.get(id).map(|n| n.as_str()).unwrap_or("");
                            sgd::TopicPartitions::default()
                                .with_topic_id(*id)
                                .with_topic_name(TopicName(sb(name)))
                                .with_partitions(ps.iter().copied().collect())
                        })
                        .collect(),
                );
                sgd::Member::default()
                    .with_member_id(sb(&m.member_id))
                    .with_rack_id(m.rack_id.as_deref().map(sb))
                    .with_member_epoch(m.member_epoch)
                    .with_client_id(sb(&m.client_id))
                    .with_client_host(sb(&m.client_host))
                    .with_subscribed_topic_names(
                        m.subscribed_topic_names
                            .iter()
                            .map(|n| TopicName(sb(n)))
                            .collect(),
                    )
                    .with_assignment(assignment)
            })
            .collect();
        sgd::DescribedGroup::default()
            .with_group_id(GroupId(sb(group_id)))
            .with_group_state(sb(d.state.name()))
            .with_group_epoch(d.group_epoch)
            .with_assignment_epoch(d.assignment_epoch)
            .with_assignor_name(sb(d.assignor_name))
            .with_members(members)
    }

    /// The earliest share-member session deadline.
    pub fn share_next_deadline(&self) -> Option<i64> {
        self.share_groups
            .values()
            .filter_map(ShareGroup::next_deadline)
            .min()
    }

    /// Removes the share members whose session expired at `now` (their share sessions are
    /// closed by the driver, `Effects::share_members_gone`).
    pub fn share_tick(&mut self, now: i64, fx: &mut super::Effects) {
        for (group_id, group) in self.share_groups.iter_mut() {
            if group.next_deadline().is_some_and(|d| d <= now) {
                let before = group.image();
                for id in group.expire(now) {
                    tracing::info!("share group {group_id}: member {id} expired");
                    fx.share_members_gone.push((group_id.clone(), id));
                }
                let after = group.image();
                fx.records
                    .extend(share_records::diff(group_id, Some(&before), Some(&after)));
            }
        }
    }

    /// The share groups' ListGroups entries (`type` "share", protocol type "share").
    pub fn share_list(
        &self,
        states: &[String],
        types: &[String],
    ) -> Vec<kafka_protocol::messages::list_groups_response::ListedGroup> {
        let wants_type = types.is_empty() || types.iter().any(|t| t.eq_ignore_ascii_case("share"));
        if !wants_type {
            return Vec::new();
        }
        self.share_groups
            .values()
            .filter(|g| {
                let s = g.state().name();
                states.is_empty() || states.iter().any(|f| f.eq_ignore_ascii_case(s))
            })
            .map(|g| {
                kafka_protocol::messages::list_groups_response::ListedGroup::default()
                    .with_group_id(GroupId(sb(g.group_id())))
                    .with_protocol_type(sb("share"))
                    .with_group_state(sb(g.state().name()))
                    .with_group_type(sb("share"))
            })
            .collect()
    }

    /// The share-partitions whose state DeleteGroups deletes before the groups go (Kafka's
    /// `sharePartitionDeleteRequests`): per Empty share group of `group_ids`, once each, every
    /// partition it has initialized. Groups with members, or not share groups, are left to
    /// [`Self::delete_groups`], which refuses or deletes them.
    pub fn share_state_to_delete(&self, group_ids: &[String]) -> Vec<ShareStateToDelete> {
        let mut out: Vec<ShareStateToDelete> = Vec::new();
        for id in group_ids {
            if out.iter().any(|(g, _)| g == id) {
                continue;
            }
            let Some(group) = self.share_groups.get(id.as_str()) else {
                continue;
            };
            if !group.describe().members.is_empty() {
                continue;
            }
            let partitions = group
                .initialized()
                .iter()
                .flat_map(|(topic_id, t)| t.partitions.iter().map(|p| (*topic_id, *p)))
                .collect();
            out.push((id.clone(), partitions));
        }
        out
    }

    /// DeleteGroups of a share group: `Some(code)` when `group_id` is one (an Empty group is
    /// removed, its records' tombstones added to `fx`; NON_EMPTY_GROUP otherwise); `None` when
    /// it is not a share group.
    pub fn share_delete(&mut self, group_id: &str, fx: &mut super::Effects) -> Option<i16> {
        let group = self.share_groups.get(group_id)?;
        if !group.describe().members.is_empty() {
            return Some(codes::NON_EMPTY_GROUP);
        }
        let before = group.image();
        fx.records
            .extend(share_records::diff(group_id, Some(&before), None));
        self.share_groups.remove(group_id);
        Some(codes::NONE)
    }
}

#[cfg(test)]
#[path = "share_tests.rs"]
mod tests;
