//! Controlled shutdown (Kafka's `BrokerHeartbeatManager` CONTROLLED_SHUTDOWN / SHUTDOWN_NOW and
//! `ReplicationControlManager.handleBrokerInControlledShutdown`).

use super::*;

fn harness(features: &[(&str, i16)]) -> Harness {
    let mut h = Harness {
        c: Controller::new(ControllerSettings::default()),
        offset: 0,
    };
    h.commit(bootstrap_records(features));
    h
}

#[test]
fn a_broker_leading_nothing_is_let_go_at_once() {
    let mut h = Harness::new();
    h.brokers(&[(1, None), (2, None)], 0);
    let t = h.topic_with("t", &[&[2, 1]]);
    let epoch = h.c.state().brokers[&1].epoch();
    let out =
        h.c.heartbeat(
            &HeartbeatRequest {
                broker_id: 1,
                broker_epoch: epoch,
                current_metadata_offset: h.offset,
                want_fence: false,
                want_shutdown: true,
            },
            100,
            h.offset,
        )
        .unwrap();
    assert_eq!(
        out.answer,
        HeartbeatAnswer {
            is_caught_up: true,
            is_fenced: true,
            should_shut_down: true
        }
    );
    assert_eq!(
        out.records.first(),
        Some(&MetadataRecord::FenceBroker { id: 1, epoch })
    );
    h.commit(out.records);
    assert!(!h.c.state().brokers[&1].in_controlled_shutdown);
    assert_eq!(h.partition(t, 0).isr, vec![2]);
}

#[test]
fn want_fence_with_want_shutdown_is_an_immediate_shutdown() {
    let mut h = Harness::new();
    h.brokers(&[(1, None)], 0);
    h.topic_with("t", &[&[1]]);
    let epoch = h.c.state().brokers[&1].epoch();
    let out =
        h.c.heartbeat(
            &HeartbeatRequest {
                broker_id: 1,
                broker_epoch: epoch,
                current_metadata_offset: h.offset,
                want_fence: true,
                want_shutdown: true,
            },
            100,
            h.offset,
        )
        .unwrap();
    assert!(out.answer.should_shut_down && out.answer.is_fenced);
    assert_eq!(
        out.records.first(),
        Some(&MetadataRecord::FenceBroker { id: 1, epoch })
    );
}

/// A lone broker (the single node) leading RF 1 partitions: Kafka elects no one else, the
/// partitions go leaderless and the broker is let go on its next heartbeat (no active broker
/// is left to wait for). Without ELR the ISR keeps its last member.
#[test]
fn the_last_replica_leaves_its_partitions_leaderless_and_goes() {
    let mut h = harness(&without_elr());
    h.brokers(&[(1, None)], 0);
    let t = h.topic_with("t", &[&[1], &[1]]);
    let first = h.heartbeat_with(1, 100, true).unwrap();
    assert!(!first.should_shut_down && !first.is_fenced);
    for p in 0..2 {
        let p = h.partition(t, p);
        assert_eq!(
            (p.leader, p.isr.clone(), p.leader_epoch),
            (NO_LEADER, vec![1], 1)
        );
    }
    let second = h.heartbeat_with(1, 150, true).unwrap();
    assert!(second.should_shut_down && second.is_fenced);
    assert!(h.c.state().brokers[&1].fenced);
}

/// With ELR (Kafka 4.1's default) the last member leaves the ISR for the ELR; a clean restart
/// adds nothing before the RegisterBroker record and the unfencing elects it again: two leader
/// epochs per stop and start, as before controlled shutdown.
#[test]
fn a_clean_restart_after_controlled_shutdown_changes_no_partition_until_unfenced() {
    let mut h = Harness::new();
    h.brokers(&[(1, None)], 0);
    let t = h.topic_with("t", &[&[1]]);
    h.heartbeat_with(1, 100, true).unwrap();
    let p = h.partition(t, 0);
    assert_eq!(
        (p.leader, p.isr.clone(), p.elr.clone()),
        (NO_LEADER, vec![], vec![1])
    );
    assert!(h.heartbeat_with(1, 150, true).unwrap().should_shut_down);
    let epoch = h.c.state().brokers[&1].epoch();

    let mut r = Harness::registration(1, None, 2);
    r.previous_broker_epoch = epoch;
    let out = h.c.register_broker(&r, 10_000, h.offset).unwrap();
    assert!(
        matches!(out.records.as_slice(), [MetadataRecord::RegisterBroker(_)]),
        "{:?}",
        out.records
    );
    h.commit(out.records);
    assert!(!h.heartbeat(1, 10_100).unwrap().is_fenced);
    let p = h.partition(t, 0);
    assert_eq!((p.leader, p.isr.clone(), p.leader_epoch), (1, vec![1], 2));
}

/// The broker waits until every active broker reported the offset of its controlled shutdown's
/// records, so the new leaders know they lead before the old one stops.
#[test]
fn shutdown_waits_for_every_active_broker_to_apply_the_move() {
    let mut h = Harness::new();
    h.brokers(&[(1, None), (2, None), (3, None)], 0);
    let t = h.topic_with("t", &[&[1, 2, 3]]);
    let shutdown_offset = h.offset;
    h.heartbeat_with(1, 100, true).unwrap();
    assert_eq!(h.partition(t, 0).leader, 2);
    // Broker 2 applied the move, broker 3 reports an offset below it.
    h.heartbeat(2, 110).unwrap();
    let epoch3 = h.c.state().brokers[&3].epoch();
    h.c.heartbeat(
        &HeartbeatRequest {
            broker_id: 3,
            broker_epoch: epoch3,
            current_metadata_offset: shutdown_offset - 1,
            want_fence: false,
            want_shutdown: false,
        },
        120,
        h.offset,
    )
    .unwrap();
    assert!(!h.heartbeat_with(1, 150, true).unwrap().should_shut_down);
    h.heartbeat(3, 160).unwrap();
    assert!(h.heartbeat_with(1, 200, true).unwrap().should_shut_down);
}

/// A controller that took over knows no offsets: it waits for the active brokers' heartbeats
/// at its applied offset, then lets the broker go.
#[test]
fn a_new_controller_lets_a_broker_in_controlled_shutdown_go_once_others_heartbeat() {
    let mut h = Harness::new();
    h.brokers(&[(1, None), (2, None)], 0);
    h.topic_with("t", &[&[1, 2]]);
    h.heartbeat_with(1, 100, true).unwrap();
    assert!(h.c.state().brokers[&1].in_controlled_shutdown);
    h.c = Controller::with_state(ControllerSettings::default(), h.c.state().clone());
    h.c.activate(1_000);
    assert!(!h.heartbeat_with(1, 1_100, true).unwrap().should_shut_down);
    h.heartbeat(2, 1_200).unwrap();
    assert!(h.heartbeat_with(1, 1_300, true).unwrap().should_shut_down);
}
