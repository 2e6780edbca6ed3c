//! AlterPartitionReassignments / ListPartitionReassignments: reorder-only completes at once, a
//! data-moving target waits for the ISR (completed by AlterPartition), the leader leaves with
//! its replica, cancel reverts, bad targets are refused.

use super::alter_partition::isr;
use super::*;

fn tp(partition: i32) -> TopicPartition {
    TopicPartition {
        topic: "t".into(),
        partition,
    }
}

fn reassign(
    h: &mut Harness,
    partition: i32,
    target: Option<Vec<i32>>,
) -> Result<(), ResponseError> {
    let out =
        h.c.alter_partition_reassignments(&[(tp(partition), target)]);
    let result = out.answer[0].1.clone().map_err(|e| e.error);
    h.commit(out.records);
    result
}

#[test]
fn a_reorder_only_target_completes_at_once_and_keeps_the_leader() {
    let mut h = Harness::new();
    h.brokers(&[(1, None), (2, None), (3, None)], 0);
    let t = h.topic_with("t", &[&[1, 2, 3]]);
    assert_eq!(reassign(&mut h, 0, Some(vec![3, 2, 1])), Ok(()));
    let p = h.partition(t, 0);
    assert_eq!(
        (
            p.replicas.clone(),
            p.leader,
            p.leader_epoch,
            p.partition_epoch
        ),
        (vec![3, 2, 1], 1, 0, 1)
    );
    assert!(p.adding_replicas.is_empty() && p.removing_replicas.is_empty());
    assert!(h.c.list_partition_reassignments(None).is_empty());
    // A preferred election then moves leadership to the new first replica.
    let out = h.c.elect_leaders(Election::Preferred, Some(&[tp(0)]));
    assert_eq!(out.answer[0].1, Ok(()));
    h.commit(out.records);
    assert_eq!(h.partition(t, 0).leader, 3);
}

#[test]
fn a_moving_target_completes_when_the_isr_holds_it_and_a_removed_leader_is_replaced() {
    let mut h = Harness::new();
    h.brokers(&[(1, None), (2, None), (3, None), (4, None)], 0);
    let t = h.topic_with("t", &[&[1, 2, 3]]);
    // Move from [1, 2, 3] to [4, 2, 3]: 4 is added, 1 (the leader) removed.
    assert_eq!(reassign(&mut h, 0, Some(vec![4, 2, 3])), Ok(()));
    let p = h.partition(t, 0);
    assert_eq!(p.replicas, vec![4, 2, 3, 1]);
    assert_eq!(
        (p.adding_replicas.clone(), p.removing_replicas.clone()),
        (vec![4], vec![1])
    );
    assert_eq!((p.leader, p.isr.clone()), (1, vec![1, 2, 3]));
    // Every old replica is still assigned (1 as removing): no leader epoch bump yet.
    assert_eq!((p.leader_epoch, p.partition_epoch), (0, 1));
    let listed = h.c.list_partition_reassignments(None);
    assert_eq!(
        listed,
        vec![OngoingReassignment {
            partition: tp(0),
            replicas: vec![4, 2, 3, 1],
            adding: vec![4],
            removing: vec![1],
        }]
    );
    assert_eq!(
        h.c.list_partition_reassignments(Some(&[tp(0), tp(7)]))
            .len(),
        1
    );
    // The leader adds 4 to the ISR: the reassignment completes, 1 leaves, 4 (the first in-sync
    // replica in target order) leads, and the old leader is told NEW_LEADER_ELECTED.
    let out =
        h.c.alter_partition(&AlterPartitionRequest {
            broker_id: 1,
            broker_epoch: h.c.state().brokers[&1].epoch(),
            topic_id: t,
            partition: 0,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            new_isr: isr(&[1, 2, 3, 4]),
            leader_recovery_state: LEADER_RECOVERED,
        })
        .unwrap();
    assert_eq!(out.answer.error, Some(ResponseError::NewLeaderElected));
    h.commit(out.records);
    let p = h.partition(t, 0);
    assert_eq!(p.replicas, vec![4, 2, 3]);
    assert_eq!(p.isr, vec![2, 3, 4]);
    assert_eq!((p.leader, p.leader_epoch), (4, 1));
    assert!(p.adding_replicas.is_empty() && p.removing_replicas.is_empty());
    assert!(h.c.list_partition_reassignments(None).is_empty());
}

#[test]
fn cancel_reverts_and_bad_targets_are_refused() {
    let mut h = Harness::new();
    h.brokers(&[(1, None), (2, None), (3, None), (4, None)], 0);
    let t = h.topic_with("t", &[&[1, 2, 3]]);
    assert_eq!(
        reassign(&mut h, 0, None),
        Err(ResponseError::NoReassignmentInProgress)
    );
    assert_eq!(
        reassign(&mut h, 0, Some(vec![])),
        Err(ResponseError::InvalidReplicaAssignment)
    );
    assert_eq!(
        reassign(&mut h, 0, Some(vec![1, 1, 2])),
        Err(ResponseError::InvalidReplicaAssignment)
    );
    assert_eq!(
        reassign(&mut h, 0, Some(vec![1, 2, 9])),
        Err(ResponseError::InvalidReplicaAssignment)
    );
    assert_eq!(
        reassign(&mut h, 5, Some(vec![1])),
        Err(ResponseError::UnknownTopicOrPartition)
    );
    assert_eq!(reassign(&mut h, 0, Some(vec![1, 2, 4])), Ok(()));
    assert_eq!(h.partition(t, 0).replicas, vec![1, 2, 4, 3]);
    assert_eq!(reassign(&mut h, 0, None), Ok(()));
    let p = h.partition(t, 0);
    assert_eq!(
        (p.replicas.clone(), p.isr.clone(), p.leader),
        (vec![1, 2, 3], vec![1, 2, 3], 1)
    );
    assert!(p.adding_replicas.is_empty() && p.removing_replicas.is_empty());
    // Removing only, with the rest in sync: completes at once.
    assert_eq!(reassign(&mut h, 0, Some(vec![2, 3])), Ok(()));
    let p = h.partition(t, 0);
    assert_eq!(
        (p.replicas.clone(), p.isr.clone(), p.leader),
        (vec![2, 3], vec![2, 3], 2)
    );
}
