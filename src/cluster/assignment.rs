//! Manual replica assignments (CreateTopics `assignments`, CreatePartitions `assignments`) checked
//! as Kafka 4.1's controller checks them (`ReplicationControlManager`), with its messages: every
//! replica list non-empty, its brokers registered and named once (in ascending id order, so the
//! message names the smallest offender), all lists of one length, CreateTopics partitions `0..n`.
//!
//! Pure: the registered brokers are an argument (on this single node, only this node's id).

use std::collections::BTreeMap;

/// A refused assignment: Kafka's error class and its message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssignmentError {
    /// INVALID_REQUEST (42).
    #[error("{0}")]
    InvalidRequest(String),
    /// INVALID_REPLICA_ASSIGNMENT (39).
    #[error("{0}")]
    InvalidReplicaAssignment(String),
}

use AssignmentError::{InvalidReplicaAssignment, InvalidRequest};

/// Kafka's `validateManualPartitionAssignment` on one partition's replicas. `replication_factor`
/// is the replica count the list must have (earlier partitions', or the topic's), if known.
pub fn validate_replicas(
    replicas: &[i32],
    registered: &[i32],
    replication_factor: Option<usize>,
) -> Result<(), AssignmentError> {
    if replicas.is_empty() {
        return Err(InvalidReplicaAssignment(
            "The manual partition assignment includes an empty replica list.".into(),
        ));
    }
    let mut sorted = replicas.to_vec();
    sorted.sort_unstable();
    let mut previous = None;
    for id in sorted {
        if !registered.contains(&id) {
            return Err(InvalidReplicaAssignment(format!(
                "The manual partition assignment includes broker {id}, but no such broker is registered."
            )));
        }
        if previous == Some(id) {
            return Err(InvalidReplicaAssignment(format!(
                "The manual partition assignment includes the broker {id} more than once."
            )));
        }
        previous = Some(id);
    }
    match replication_factor {
        Some(rf) if rf != replicas.len() => Err(InvalidReplicaAssignment(format!(
            "The manual partition assignment includes a partition with {} replica(s), but this is not consistent with previous partitions, which have {rf} replica(s).",
            replicas.len()
        ))),
        _ => Ok(()),
    }
}

/// CreateTopics with `assignments` (partition index, replicas): numPartitions and the replication
/// factor must be -1; returns the replica lists in partition order.
pub fn create_topic_assignment(
    num_partitions: i32,
    replication_factor: i16,
    assignments: &[(i32, Vec<i32>)],
    registered: &[i32],
) -> Result<Vec<Vec<i32>>, AssignmentError> {
    if replication_factor != -1 {
        return Err(InvalidRequest(
            "A manual partition assignment was specified, but replication factor was not set to -1."
                .into(),
        ));
    }
    if num_partitions != -1 {
        return Err(InvalidRequest(
            "A manual partition assignment was specified, but numPartitions was not set to -1."
                .into(),
        ));
    }
    let mut by_partition: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    let mut rf = None;
    for (partition, replicas) in assignments {
        if by_partition.contains_key(partition) {
            return Err(InvalidReplicaAssignment(format!(
                "Found multiple manual partition assignments for partition {partition}"
            )));
        }
        validate_replicas(replicas, registered, rf)?;
        rf = Some(replicas.len());
        by_partition.insert(*partition, replicas.clone());
    }
    let consecutive = by_partition
        .keys()
        .enumerate()
        .all(|(i, &p)| i64::from(p) == i as i64);
    if !consecutive {
        return Err(InvalidReplicaAssignment(
            "partitions should be a consecutive 0-based integer sequence".into(),
        ));
    }
    Ok(by_partition.into_values().collect())
}

/// CreatePartitions with `assignments`: one list per added partition, each valid with the
/// topic's replication factor.
pub fn create_partitions_assignment(
    adding: i32,
    assignments: &[Vec<i32>],
    registered: &[i32],
    replication_factor: usize,
) -> Result<(), AssignmentError> {
    if assignments.len() as i64 != i64::from(adding) {
        return Err(InvalidReplicaAssignment(format!(
            "Attempted to add {adding} additional partition(s), but only {} assignment(s) were specified.",
            assignments.len()
        )));
    }
    for replicas in assignments {
        validate_replicas(replicas, registered, Some(replication_factor))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(r: Result<impl std::fmt::Debug, AssignmentError>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn replica_lists_are_checked_in_broker_id_order() {
        let reg = [1, 2];
        assert!(validate_replicas(&[2, 1], &reg, Some(2)).is_ok());
        assert_eq!(
            msg(validate_replicas(&[9, 1, 7], &reg, None)),
            "The manual partition assignment includes broker 7, but no such broker is registered."
        );
        assert_eq!(
            msg(validate_replicas(&[2, 1, 2], &reg, None)),
            "The manual partition assignment includes the broker 2 more than once."
        );
        assert_eq!(
            msg(validate_replicas(&[1], &reg, Some(2))),
            "The manual partition assignment includes a partition with 1 replica(s), but this is not consistent with previous partitions, which have 2 replica(s)."
        );
        assert_eq!(
            msg(validate_replicas(&[], &reg, None)),
            "The manual partition assignment includes an empty replica list."
        );
    }

    #[test]
    fn create_topic_assignments_follow_kafkas_order_of_checks() {
        let reg = [1, 2];
        let a = |v: &[(i32, &[i32])]| -> Vec<(i32, Vec<i32>)> {
            v.iter().map(|(p, r)| (*p, r.to_vec())).collect()
        };
        assert_eq!(
            create_topic_assignment(-1, -1, &a(&[(1, &[2]), (0, &[1])]), &reg),
            Ok(vec![vec![1], vec![2]])
        );
        assert!(matches!(
            create_topic_assignment(-1, 1, &a(&[(0, &[1])]), &reg),
            Err(InvalidRequest(m)) if m.contains("replication factor was not set to -1")
        ));
        assert!(matches!(
            create_topic_assignment(2, 1, &a(&[(0, &[1])]), &reg),
            Err(InvalidRequest(m)) if m.contains("replication factor")
        ));
        assert!(matches!(
            create_topic_assignment(2, -1, &a(&[(0, &[1])]), &reg),
            Err(InvalidRequest(m)) if m.contains("numPartitions was not set to -1")
        ));
        assert_eq!(
            msg(create_topic_assignment(
                -1,
                -1,
                &a(&[(0, &[1]), (0, &[1])]),
                &reg
            )),
            "Found multiple manual partition assignments for partition 0"
        );
        assert_eq!(
            msg(create_topic_assignment(-1, -1, &a(&[(0, &[1, 2]), (1, &[1])]), &reg)),
            "The manual partition assignment includes a partition with 1 replica(s), but this is not consistent with previous partitions, which have 2 replica(s)."
        );
        for gap in [
            &a(&[(0, &[1]), (2, &[1])]),
            &a(&[(1, &[1])]),
            &a(&[(-1, &[1])]),
        ] {
            assert_eq!(
                msg(create_topic_assignment(-1, -1, gap, &reg)),
                "partitions should be a consecutive 0-based integer sequence"
            );
        }
    }

    #[test]
    fn create_partitions_needs_one_list_per_new_partition() {
        let reg = [1];
        assert!(create_partitions_assignment(2, &[vec![1], vec![1]], &reg, 1).is_ok());
        assert_eq!(
            msg(create_partitions_assignment(2, &[vec![1]], &reg, 1)),
            "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."
        );
        assert_eq!(
            msg(create_partitions_assignment(1, &[vec![1, 1]], &reg, 1)),
            "The manual partition assignment includes the broker 1 more than once."
        );
        assert_eq!(
            msg(create_partitions_assignment(1, &[vec![1, 2]], &reg, 1)),
            "The manual partition assignment includes broker 2, but no such broker is registered."
        );
    }
}
