//! AlterPartition: Kafka's order of checks, per-partition and top-level errors, KIP-903 broker
//! epochs, the answer after the change.

use super::*;

/// An ISR without broker epochs (AlterPartition v2).
pub(super) fn isr(ids: &[i32]) -> Vec<IsrMember> {
    ids.iter().copied().map(IsrMember::unchecked).collect()
}

fn code(h: &Harness, r: &AlterPartitionRequest) -> ResponseError {
    h.c.alter_partition(r).unwrap_err().error
}

/// Brokers 1-3 active, 4 registered but fenced; topic "t" with replicas [1, 2, 3, 4].
fn setup() -> (Harness, Uuid, AlterPartitionRequest) {
    let mut h = Harness::new();
    h.brokers(&[(1, None), (2, None), (3, None)], 0);
    h.register(4, None, 0);
    let t = h.topic_with("t", &[&[1, 2, 3, 4]]);
    assert_eq!(h.partition(t, 0).isr, vec![1, 2, 3]);
    let base = AlterPartitionRequest {
        broker_id: 1,
        broker_epoch: h.c.state().brokers[&1].epoch(),
        topic_id: t,
        partition: 0,
        leader_epoch: 0,
        partition_epoch: 0,
        new_isr: isr(&[1, 2]),
        leader_recovery_state: LEADER_RECOVERED,
    };
    (h, t, base)
}

#[test]
fn alter_partition_checks_epochs_and_eligibility() {
    let (mut h, t, base) = setup();
    // Shrink: partition epoch bumps, leader epoch does not.
    let out = h.c.alter_partition(&base).unwrap();
    assert_eq!(
        out.answer,
        AlterPartitionAnswer {
            leader: 1,
            leader_epoch: 0,
            isr: vec![1, 2],
            partition_epoch: 1,
            error: None
        }
    );
    h.commit(out.records);
    assert_eq!(h.partition(t, 0).isr, vec![1, 2]);
    assert_eq!(code(&h, &base), ResponseError::InvalidUpdateVersion);
    let current = AlterPartitionRequest {
        partition_epoch: 1,
        ..base.clone()
    };
    let cases = [
        (
            AlterPartitionRequest {
                leader_epoch: -1,
                ..current.clone()
            },
            ResponseError::FencedLeaderEpoch,
        ),
        (
            AlterPartitionRequest {
                partition_epoch: 2,
                ..current.clone()
            },
            ResponseError::NotController,
        ),
        (
            AlterPartitionRequest {
                leader_epoch: 1,
                ..current.clone()
            },
            ResponseError::NotController,
        ),
        (
            AlterPartitionRequest {
                new_isr: isr(&[1, 4]),
                ..current.clone()
            },
            ResponseError::IneligibleReplica,
        ),
        (
            AlterPartitionRequest {
                new_isr: isr(&[1, 7]),
                ..current.clone()
            },
            ResponseError::InvalidRequest,
        ),
        (
            AlterPartitionRequest {
                new_isr: isr(&[1, 2, 2]),
                ..current.clone()
            },
            ResponseError::InvalidRequest,
        ),
        // Kafka refuses an ISR without the leader rather than electing another.
        (
            AlterPartitionRequest {
                new_isr: isr(&[2, 3]),
                ..current.clone()
            },
            ResponseError::InvalidRequest,
        ),
        (
            AlterPartitionRequest {
                new_isr: isr(&[1, 2]),
                leader_recovery_state: LEADER_RECOVERING,
                ..current.clone()
            },
            ResponseError::InvalidRequest,
        ),
        (
            AlterPartitionRequest {
                broker_id: 2,
                broker_epoch: h.c.state().brokers[&2].epoch(),
                ..current.clone()
            },
            ResponseError::InvalidRequest,
        ),
        (
            AlterPartitionRequest {
                broker_epoch: 999,
                ..current.clone()
            },
            ResponseError::StaleBrokerEpoch,
        ),
        (
            AlterPartitionRequest {
                topic_id: Uuid::from_u128(5),
                ..current.clone()
            },
            ResponseError::UnknownTopicId,
        ),
        (
            AlterPartitionRequest {
                partition: 9,
                ..current.clone()
            },
            ResponseError::UnknownTopicOrPartition,
        ),
    ];
    for (request, expected) in &cases {
        assert_eq!(code(&h, request), *expected, "{request:?}");
    }
    // Kafka checks the leader epoch before who the leader is: a stale leader epoch from another
    // broker is FENCED_LEADER_EPOCH, not INVALID_REQUEST.
    let other_stale = AlterPartitionRequest {
        broker_id: 2,
        broker_epoch: h.c.state().brokers[&2].epoch(),
        leader_epoch: -1,
        ..current.clone()
    };
    assert_eq!(code(&h, &other_stale), ResponseError::FencedLeaderEpoch);
    // An unchanged ISR writes nothing and answers the current state.
    let same = h.c.alter_partition(&current).unwrap();
    assert!(same.records.is_empty());
    assert_eq!(
        (same.answer.isr, same.answer.partition_epoch),
        (vec![1, 2], 1)
    );
    // Expanding back.
    let out =
        h.c.alter_partition(&AlterPartitionRequest {
            new_isr: isr(&[1, 2, 3]),
            ..current
        })
        .unwrap();
    assert_eq!(out.answer.error, None);
    assert_eq!(
        (
            out.answer.leader,
            out.answer.leader_epoch,
            out.answer.partition_epoch
        ),
        (1, 0, 2)
    );
    h.commit(out.records);
    assert_eq!(h.partition(t, 0).isr, vec![1, 2, 3]);
}

#[test]
fn alter_partition_checks_kip_903_broker_epochs_when_given() {
    let (h, _, base) = setup();
    let epoch2 = h.c.state().brokers[&2].epoch();
    let with = |e: i64| AlterPartitionRequest {
        new_isr: vec![
            IsrMember {
                broker_id: 1,
                broker_epoch: base.broker_epoch,
            },
            IsrMember {
                broker_id: 2,
                broker_epoch: e,
            },
        ],
        ..base.clone()
    };
    let e = h.c.alter_partition(&with(epoch2 + 100)).unwrap_err();
    assert_eq!(e.error, ResponseError::IneligibleReplica);
    assert!(e.message.contains("broker epoch mismatch"), "{}", e.message);
    assert_eq!(
        h.c.alter_partition(&with(epoch2)).unwrap().answer.isr,
        vec![1, 2]
    );
    assert_eq!(
        h.c.alter_partition(&with(UNKNOWN_BROKER_EPOCH))
            .unwrap()
            .answer
            .isr,
        vec![1, 2]
    );
}

#[test]
fn a_whole_request_answers_per_partition_and_stale_broker_epoch_at_the_top() {
    let mut h = Harness::new();
    h.brokers(&[(1, None), (2, None), (3, None)], 0);
    let t = h.topic_with("t", &[&[1, 2, 3], &[1, 3, 2]]);
    let epoch1 = h.c.state().brokers[&1].epoch();
    let item = |partition: i32, partition_epoch: i32, new_isr: &[i32]| AlterPartitionItem {
        topic_id: t,
        partition,
        leader_epoch: 0,
        partition_epoch,
        new_isr: isr(new_isr),
        leader_recovery_state: LEADER_RECOVERED,
    };
    let items = [item(0, 0, &[1, 2]), item(1, 5, &[1, 3]), item(0, 0, &[1])];
    let stale = h.c.alter_partitions(1, epoch1 + 7, &items);
    assert!(stale.records.is_empty());
    assert_eq!(
        stale.answer.unwrap_err().error,
        ResponseError::StaleBrokerEpoch
    );
    let out = h.c.alter_partitions(1, epoch1, &items);
    let answers = out.answer.unwrap();
    let codes: Vec<_> = answers
        .iter()
        .map(|a| a.as_ref().err().map(|e| e.error))
        .collect();
    assert_eq!(
        codes,
        vec![
            None,
            Some(ResponseError::NotController),
            Some(ResponseError::InvalidRequest),
        ]
    );
    assert_eq!(out.records.len(), 1);
    h.commit(out.records);
    assert_eq!(h.partition(t, 0).isr, vec![1, 2]);
    assert_eq!(h.partition(t, 1).isr, vec![1, 3, 2]);
    assert_eq!(h.partition(t, 1).partition_epoch, 0);
}
