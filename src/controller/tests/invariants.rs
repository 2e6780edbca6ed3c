//! Random schedules of broker and topic commands against the controller; after every step the
//! partitions obey Kafka's invariants, every record survives the wire format, and replaying the
//! snapshot rebuilds the state.

use proptest::prelude::*;

use super::*;
use crate::metadata::codec;

#[derive(Debug, Clone)]
enum Op {
    Register(i32, bool),
    Heartbeat(i32, bool),
    Advance(i64),
    Create(i32, i16, u64),
    ElectPreferred,
    ShrinkIsr(usize),
    ExpandIsr(usize),
    Unregister(i32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => (1i32..=4, any::<bool>()).prop_map(|(id, new)| Op::Register(id, new)),
        4 => (1i32..=4, prop::bool::weighted(0.1)).prop_map(|(id, s)| Op::Heartbeat(id, s)),
        1 => (0i64..12_000).prop_map(Op::Advance),
        1 => (1i32..6, 1i16..4, any::<u64>()).prop_map(|(p, rf, seed)| Op::Create(p, rf, seed)),
        1 => Just(Op::ElectPreferred),
        1 => any::<usize>().prop_map(Op::ShrinkIsr),
        1 => any::<usize>().prop_map(Op::ExpandIsr),
        1 => (1i32..=4).prop_map(Op::Unregister),
    ]
}

fn check(h: &Harness) -> Result<(), TestCaseError> {
    let state = h.c.state();
    for t in state.topics.values() {
        for (id, p) in &t.partitions {
            let at = format!("{}-{id}: {p:?}", t.name);
            let mut replicas = p.replicas.clone();
            replicas.sort_unstable();
            replicas.dedup();
            prop_assert!(
                !p.replicas.is_empty() && replicas.len() == p.replicas.len(),
                "{}",
                at
            );
            // With ELR (KIP-966, on by default) the ISR may empty, leaving the partition
            // offline; its last members are then in the ELR or the last known leader.
            prop_assert!(
                !p.isr.is_empty() || (h.c.elr_enabled() && p.leader == NO_LEADER),
                "the ISR empties only with ELR, offline: {}",
                at
            );
            prop_assert!(p.isr.iter().all(|r| p.replicas.contains(r)), "{}", at);
            prop_assert!(p.elr.iter().all(|r| p.replicas.contains(r)), "{}", at);
            prop_assert!(
                p.elr.iter().all(|r| !p.isr.contains(r)),
                "ELR outside the ISR: {}",
                at
            );
            // min.insync.replicas is 1 here: a non-empty ISR is at the minimum.
            prop_assert!(
                p.isr.is_empty() || p.elr.is_empty(),
                "ELR only below min ISR: {}",
                at
            );
            if p.leader == NO_LEADER && p.isr.is_empty() {
                prop_assert!(
                    p.elr.iter().all(|r| !state.is_active(*r)),
                    "offline only without a live ELR member: {}",
                    at
                );
            }
            if p.leader != NO_LEADER {
                prop_assert!(p.isr.contains(&p.leader), "leader in ISR: {}", at);
                prop_assert!(state.is_active(p.leader), "leader active: {}", at);
            } else {
                prop_assert!(
                    p.isr.iter().all(|r| !state.is_active(*r)),
                    "offline only without a live ISR member: {}",
                    at
                );
            }
            prop_assert!(p.partition_epoch >= p.leader_epoch, "{}", at);
        }
    }
    prop_assert_eq!(&ControllerState::replay(&h.c.snapshot()), state);
    Ok(())
}

fn commit_checked(h: &mut Harness, records: Vec<MetadataRecord>) -> Result<(), TestCaseError> {
    for r in &records {
        let decoded = codec::decode(&codec::encode(r));
        prop_assert_eq!(decoded.as_ref(), Ok(r));
    }
    h.commit(records);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn random_schedules_keep_partitions_consistent(ops in proptest::collection::vec(op(), 1..60)) {
        let mut h = Harness::new();
        let mut now = 0i64;
        let mut incarnation = 100u128;
        let mut topics = 0;
        for op in ops {
            match op {
                Op::Register(id, new) => {
                    if new {
                        incarnation += 1;
                    }
                    let reg = Harness::registration(id, Some(if id % 2 == 0 { "a" } else { "b" }), if new { incarnation } else { id as u128 });
                    if let Ok(out) = h.c.register_broker(&reg, now, h.offset) {
                        commit_checked(&mut h, out.records)?;
                    }
                }
                Op::Heartbeat(id, shutdown) => {
                    if h.c.state().brokers.contains_key(&id) {
                        if let Ok(answer) = h.heartbeat_with(id, now, shutdown) {
                            prop_assert!(!answer.should_shut_down || h.c.leader_count(id) == 0);
                        }
                    }
                }
                Op::Advance(ms) => {
                    now += ms;
                    loop {
                        let records = h.c.tick(now);
                        if records.is_empty() {
                            break;
                        }
                        commit_checked(&mut h, records)?;
                    }
                }
                Op::Create(partitions, rf, seed) => {
                    topics += 1;
                    let out = h.c.create_topics(&[CreatableTopic {
                        name: format!("t{topics}"),
                        num_partitions: partitions,
                        replication_factor: rf,
                        assignments: vec![],
                        configs: vec![],
                    }], seed);
                    commit_checked(&mut h, out.records)?;
                }
                Op::ElectPreferred => {
                    let out = h.c.elect_leaders(Election::Preferred, None);
                    commit_checked(&mut h, out.records)?;
                }
                Op::ShrinkIsr(pick) | Op::ExpandIsr(pick) => {
                    let shrink = matches!(op, Op::ShrinkIsr(_));
                    let all: Vec<(Uuid, i32, PartitionState)> = h.c.state().topics.values()
                        .flat_map(|t| t.partitions.iter().map(|(i, p)| (t.topic_id, *i, p.clone())))
                        .filter(|(_, _, p)| p.leader >= 0)
                        .collect();
                    if all.is_empty() {
                        continue;
                    }
                    let (topic_id, partition, p) = all[pick % all.len()].clone();
                    let new_isr: Vec<i32> = if shrink {
                        vec![p.leader]
                    } else {
                        p.replicas.iter().copied().filter(|r| h.c.state().is_active(*r)).collect()
                    };
                    let request = AlterPartitionRequest {
                        broker_id: p.leader,
                        broker_epoch: h.c.state().brokers[&p.leader].epoch(),
                        topic_id,
                        partition,
                        leader_epoch: p.leader_epoch,
                        partition_epoch: p.partition_epoch,
                        new_isr: new_isr.iter().map(|r| IsrMember::unchecked(*r)).collect(),
                        leader_recovery_state: LEADER_RECOVERED,
                    };
                    let out = h.c.alter_partition(&request);
                    prop_assert!(out.is_ok(), "{:?} -> {:?}", request, out);
                    let out = out.unwrap();
                    prop_assert_eq!(&out.answer.isr, &new_isr);
                    commit_checked(&mut h, out.records)?;
                }
                Op::Unregister(id) => {
                    if let Ok(records) = h.c.unregister_broker(id) {
                        commit_checked(&mut h, records)?;
                    }
                }
            }
            check(&h)?;
        }
    }
}
