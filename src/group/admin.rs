//! Admin views of the coordinator: DescribeGroups, ListGroups and DeleteGroups. Part of the pure
//! state machine (no I/O; deletions go out as tombstone records).

use std::collections::BTreeSet;

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::GroupId;

use super::classic::{sb, GroupState};
use super::coordinator::Coordinator;
use super::offsets::OffsetChange;
use super::records::{self, CoordinatorRecord};
use super::{codes, Effects};

use crate::cluster::acl::{authorized, GROUP_OPERATIONS, OPERATIONS_OMITTED};

impl Coordinator {
    /// One group's description. Unknown groups: GROUP_ID_NOT_FOUND from v6, else state "Dead".
    pub fn describe(
        &self,
        group_id: &str,
        version: i16,
        include_authorized_operations: bool,
    ) -> DescribedGroup {
        let mut d = DescribedGroup::default().with_group_id(GroupId(sb(group_id)));
        if version >= 3 {
            d.authorized_operations = authorized(include_authorized_operations, GROUP_OPERATIONS);
        }
        let Some(group) = self.groups.get(group_id) else {
            d.group_state = sb(GroupState::Dead.name());
            if version >= 6 {
                // Kafka answers an error without the operations.
                d.authorized_operations = OPERATIONS_OMITTED;
                d.error_code = codes::GROUP_ID_NOT_FOUND;
                d.error_message = Some(sb(&if self.share_groups.contains_key(group_id) {
                    format!("Group {group_id} is not a classic group.")
                } else {
                    format!("Group {group_id} not found.")
                }));
            }
            return d;
        };
        d.group_state = sb(group.state.name());
        d.protocol_type = sb(group.protocol_type.as_deref().unwrap_or(""));
        let stable = group.state == GroupState::Stable;
        if stable {
            d.protocol_data = sb(group.protocol_name.as_deref().unwrap_or(""));
        }
        let protocol = group.protocol_name.clone().unwrap_or_default();
        d.members = group
            .members
            .values()
            .map(|m| {
                let mut dm = DescribedGroupMember::default()
                    .with_member_id(sb(&m.member_id))
                    .with_client_id(sb(&m.client_id))
                    .with_client_host(sb(&m.client_host));
                if version >= 4 {
                    dm.group_instance_id = m.group_instance_id.as_deref().map(sb);
                }
                if stable {
                    dm.member_metadata = m.metadata(&protocol);
                    dm.member_assignment = m.assignment.clone();
                }
                dm
            })
            .collect();
        d
    }

    /// Every group, filtered by state names and types (case-insensitive; empty = all).
    pub fn list(&self, states: &[String], types: &[String]) -> Vec<ListedGroup> {
        let wants_state = |s: GroupState| {
            states.is_empty() || states.iter().any(|f| f.eq_ignore_ascii_case(s.name()))
        };
        let wants_type =
            |ty: &str| types.is_empty() || types.iter().any(|t| t.eq_ignore_ascii_case(ty));
        let consumer: Vec<ListedGroup> = self
            .consumer_groups
            .values()
            .filter(|_| wants_type("consumer"))
            .filter(|g| {
                let s = g.state().name();
                states.is_empty() || states.iter().any(|f| f.eq_ignore_ascii_case(s))
            })
            .map(|g| {
                ListedGroup::default()
                    .with_group_id(GroupId(sb(&g.group_id)))
                    .with_protocol_type(sb("consumer"))
                    .with_group_state(sb(g.state().name()))
                    .with_group_type(sb("consumer"))
            })
            .collect();
        let mut consumer = consumer;
        consumer.extend(self.share_list(states, types));
        if !wants_type("classic") {
            return consumer;
        }
        self.groups
            .values()
            .filter(|g| g.state != GroupState::Dead && wants_state(g.state))
            .map(|g| {
                ListedGroup::default()
                    .with_group_id(GroupId(sb(&g.group_id)))
                    .with_protocol_type(sb(g.protocol_type.as_deref().unwrap_or("")))
                    .with_group_state(sb(g.state.name()))
                    .with_group_type(sb("classic"))
            })
            .chain(consumer)
            .collect()
    }

    /// Deletes Empty groups with their offsets and pending transactional offsets (tombstones for
    /// each); others are refused. Open transactions do not block deletion (as in Kafka).
    pub fn delete_groups(&mut self, group_ids: &[String]) -> (Vec<DeletableGroupResult>, Effects) {
        let mut fx = Effects::default();
        let mut results = Vec::with_capacity(group_ids.len());
        // Deleted by this request (applied only once written): a repeated id is not found again.
        let mut deleted = BTreeSet::new();
        for id in group_ids {
            if let Some(code) = self.share_delete(id, &mut fx) {
                if code == codes::NONE {
                    fx.share_groups_deleted.push(id.clone());
                }
                results.push(
                    DeletableGroupResult::default()
                        .with_group_id(GroupId(sb(id)))
                        .with_error_code(code),
                );
                continue;
            }
            let consumer = self
                .consumer_groups
                .get(id.as_str())
                .map(|g| g.members.is_empty());
            let state = match consumer {
                Some(true) => Some(GroupState::Empty),
                Some(false) => Some(GroupState::Stable),
                None => self.groups.get(id.as_str()).map(|g| g.state),
            };
            let code = match state {
                _ if id.is_empty() => codes::INVALID_GROUP_ID,
                None | Some(GroupState::Dead) => codes::GROUP_ID_NOT_FOUND,
                Some(GroupState::Empty) if deleted.contains(id) => codes::GROUP_ID_NOT_FOUND,
                Some(GroupState::Empty) => {
                    // As Kafka's `deleteAllOffsets`: a tombstone for every committed offset and
                    // for every partition that only has a pending transactional offset.
                    let mut partitions: BTreeSet<(String, i32)> = self
                        .offsets
                        .get(id)
                        .into_iter()
                        .flat_map(|o| o.keys().cloned())
                        .collect();
                    partitions.extend(self.pending.partitions_of(id));
                    for (topic, partition) in partitions {
                        fx.records.push(CoordinatorRecord {
                            group_id: id.clone(),
                            key: records::offset_key(id, &topic, partition),
                            value: None,
                        });
                    }
                    fx.records.push(CoordinatorRecord {
                        group_id: id.clone(),
                        key: records::group_key(id),
                        value: None,
                    });
                    // Applied once the tombstones are written (`apply_written`).
                    deleted.insert(id.clone());
                    fx.offsets.push(OffsetChange::DeleteGroup {
                        group_id: id.clone(),
                    });
                    codes::NONE
                }
                Some(_) => codes::NON_EMPTY_GROUP,
            };
            results.push(
                DeletableGroupResult::default()
                    .with_group_id(GroupId(sb(id)))
                    .with_error_code(code),
            );
        }
        (results, fx)
    }
}
