//! Deterministic controller tests: records are "committed" by applying them at consecutive
//! offsets; time is an argument. Topic and placement tests are in `tests/topics.rs`.

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use super::*;
use crate::metadata::records::{BrokerEndpoint, NO_LEADER, NO_LEADER_CHANGE};

mod alter_partition;
mod elr;
mod invariants;
mod reassignment;
mod shutdown;
mod topics;

/// A controller plus the metadata log's next offset.
pub(super) struct Harness {
    pub c: Controller,
    pub offset: i64,
}

impl Harness {
    pub fn new() -> Harness {
        let mut h = Harness {
            c: Controller::new(ControllerSettings::default()),
            offset: 0,
        };
        h.commit(bootstrap_records(BOOTSTRAP_FEATURES));
        h
    }

    pub fn commit(&mut self, records: Vec<MetadataRecord>) {
        for r in &records {
            self.c.apply(r);
            self.offset += 1;
        }
    }

    pub fn registration(id: i32, rack: Option<&str>, incarnation: u128) -> BrokerRegistration {
        BrokerRegistration {
            broker_id: id,
            incarnation_id: Uuid::from_u128(incarnation),
            listeners: vec![BrokerEndpoint {
                name: "PLAINTEXT".into(),
                host: format!("127.0.0.{id}"),
                port: 9092,
                security_protocol: 0,
            }],
            features: BOOTSTRAP_FEATURES
                .iter()
                .map(|(n, level)| (n.to_string(), 1, *level))
                .collect(),
            rack: rack.map(str::to_string),
            previous_broker_epoch: -1,
        }
    }

    /// Registers broker `id` at `now`; returns its epoch.
    pub fn register(&mut self, id: i32, rack: Option<&str>, now: i64) -> i64 {
        let out = self
            .c
            .register_broker(&Self::registration(id, rack, id as u128), now, self.offset)
            .expect("registration");
        let epoch = out.answer;
        self.commit(out.records);
        epoch
    }

    pub fn heartbeat(&mut self, id: i32, now: i64) -> Result<HeartbeatAnswer, ControllerError> {
        self.heartbeat_with(id, now, false)
    }

    pub fn heartbeat_with(
        &mut self,
        id: i32,
        now: i64,
        want_shutdown: bool,
    ) -> Result<HeartbeatAnswer, ControllerError> {
        let epoch = self.c.state().brokers[&id].epoch();
        let out = self.c.heartbeat(
            &HeartbeatRequest {
                broker_id: id,
                broker_epoch: epoch,
                current_metadata_offset: self.offset,
                want_fence: false,
                want_shutdown,
            },
            now,
            self.offset,
        )?;
        self.commit(out.records);
        Ok(out.answer)
    }

    /// Registers and unfences brokers `ids` (with racks) at time `now`.
    pub fn brokers(&mut self, brokers: &[(i32, Option<&str>)], now: i64) {
        for (id, rack) in brokers {
            self.register(*id, *rack, now);
        }
        for (id, _) in brokers {
            let answer = self.heartbeat(*id, now).expect("heartbeat");
            assert!(!answer.is_fenced, "broker {id} unfenced");
        }
    }

    /// Creates a topic with a manual assignment; returns its id.
    pub fn topic_with(&mut self, name: &str, assignment: &[&[i32]]) -> Uuid {
        let topic = CreatableTopic {
            name: name.into(),
            num_partitions: -1,
            replication_factor: -1,
            assignments: assignment
                .iter()
                .enumerate()
                .map(|(i, r)| (i as i32, r.to_vec()))
                .collect(),
            configs: vec![],
        };
        let out = self.c.create_topics(&[topic], 7);
        let id = out.answer[0].1.as_ref().expect("created").topic_id;
        self.commit(out.records);
        id
    }

    pub fn partition(&self, topic_id: Uuid, p: i32) -> PartitionState {
        self.c
            .state()
            .partition(topic_id, p)
            .expect("partition")
            .clone()
    }
}

/// The bootstrap features without eligible leader replicas (a metadata log from before KIP-966).
fn without_elr() -> Vec<(&'static str, i16)> {
    BOOTSTRAP_FEATURES
        .iter()
        .copied()
        .filter(|(name, _)| *name != ELR_FEATURE)
        .collect()
}

#[test]
fn a_broker_registers_fenced_and_unfences_once_caught_up() {
    let mut h = Harness::new();
    let offset_before = h.offset;
    let out =
        h.c.register_broker(&Harness::registration(1, Some("r1"), 11), 0, h.offset)
            .unwrap();
    assert_eq!(out.answer, offset_before);
    let [MetadataRecord::RegisterBroker(r)] = out.records.as_slice() else {
        panic!("one RegisterBroker, got {:?}", out.records);
    };
    assert!(r.fenced);
    assert_eq!(
        (r.broker_id, r.broker_epoch, r.rack.as_deref()),
        (1, offset_before, Some("r1"))
    );
    h.commit(out.records);
    assert!(h.c.state().brokers[&1].fenced);

    // Not yet caught up to its registration record: stays fenced, no records.
    let behind = HeartbeatRequest {
        broker_id: 1,
        broker_epoch: offset_before,
        current_metadata_offset: offset_before - 1,
        want_fence: false,
        want_shutdown: false,
    };
    let out = h.c.heartbeat(&behind, 100, h.offset).unwrap();
    assert!(out.records.is_empty());
    assert_eq!(
        out.answer,
        HeartbeatAnswer {
            is_caught_up: false,
            is_fenced: true,
            should_shut_down: false
        }
    );
    let caught_up = HeartbeatRequest {
        current_metadata_offset: offset_before,
        ..behind
    };
    let out = h.c.heartbeat(&caught_up, 200, h.offset).unwrap();
    assert_eq!(
        out.records,
        vec![MetadataRecord::UnfenceBroker {
            id: 1,
            epoch: offset_before
        }]
    );
    assert!(out.answer.is_caught_up && !out.answer.is_fenced);
    h.commit(out.records);
    assert!(h.c.state().is_active(1));
}

#[test]
fn a_new_incarnation_is_refused_while_the_old_session_lives() {
    let mut h = Harness::new();
    h.brokers(&[(1, None)], 0);
    let other = Harness::registration(1, None, 99);
    let e = h.c.register_broker(&other, 8_999, h.offset).unwrap_err();
    assert_eq!(e.error, ResponseError::DuplicateBrokerRegistration);
    assert_eq!(e.code(), 101);
    // The same incarnation re-registers (a retry) and gets a new epoch.
    let same = Harness::registration(1, None, 1);
    let out = h.c.clone().register_broker(&same, 8_999, h.offset).unwrap();
    assert_eq!(out.answer, h.offset);
    // An expired session (the combined node restarting its own broker) lets it in at once.
    let mut restarted = h.c.clone();
    restarted.expire_session(1);
    assert!(restarted.register_broker(&other, 100, h.offset).is_ok());
    // Once the session expired, a new incarnation may take the id.
    let out = h.c.register_broker(&other, 9_000, h.offset).unwrap();
    h.commit(out.records);
    let b = &h.c.state().brokers[&1];
    assert_eq!(b.registration.incarnation_id, Uuid::from_u128(99));
    assert!(b.fenced);
}

#[test]
fn registration_needs_the_finalized_feature_levels() {
    let mut h = Harness::new();
    let mut old = Harness::registration(1, None, 1);
    old.features[0] = ("metadata.version".into(), 1, 21);
    let e = h.c.register_broker(&old, 0, h.offset).unwrap_err();
    assert_eq!(e.error, ResponseError::UnsupportedVersion);
    assert!(
        e.message
            .contains("finalized version 27 of metadata.version"),
        "{}",
        e.message
    );
    let e =
        h.c.register_broker(&Harness::registration(-1, None, 1), 0, h.offset)
            .unwrap_err();
    assert_eq!(e.error, ResponseError::InvalidRequest);
    h.register(1, None, 0);
}

#[test]
fn heartbeats_with_a_stale_or_unknown_epoch_are_refused() {
    let mut h = Harness::new();
    let epoch = h.register(1, None, 0);
    let mut req = HeartbeatRequest {
        broker_id: 1,
        broker_epoch: epoch + 5,
        current_metadata_offset: h.offset,
        want_fence: false,
        want_shutdown: false,
    };
    let e = h.c.heartbeat(&req, 1, h.offset).unwrap_err();
    assert_eq!(e.code(), 77);
    assert_eq!(
        e.message,
        format!(
            "Expected broker epoch {epoch}, but got broker epoch {}",
            epoch + 5
        )
    );
    req.broker_id = 4;
    assert_eq!(
        h.c.heartbeat(&req, 1, h.offset).unwrap_err().error,
        ResponseError::StaleBrokerEpoch
    );
    assert_eq!(
        h.c.allocate_producer_ids(1, epoch + 1).unwrap_err().error,
        ResponseError::StaleBrokerEpoch
    );
}

#[test]
fn a_silent_broker_is_fenced_after_the_session_timeout_and_loses_its_leaderships() {
    let mut h = Harness::new();
    h.brokers(&[(1, None), (2, None), (3, None)], 0);
    let t = h.topic_with("t", &[&[1, 2, 3], &[2, 1, 3], &[3, 1, 2]]);
    h.heartbeat(2, 5_000).unwrap();
    h.heartbeat(3, 5_000).unwrap();
    assert!(h.c.tick(8_999).is_empty());
    let records = h.c.tick(9_000);
    let epoch1 = h.c.state().brokers[&1].epoch();
    assert_eq!(
        records[0],
        MetadataRecord::FenceBroker {
            id: 1,
            epoch: epoch1
        }
    );
    let changes: Vec<_> = partition_changes(&records).cloned().collect();
    // p0: leader 1 -> first live ISR member in replica order (2); p1, p2: 1 leaves the ISR only.
    assert_eq!(changes.len(), 3);
    assert_eq!((changes[0].partition_id, changes[0].leader), (0, 2));
    assert_eq!(changes[0].isr, Some(vec![2, 3]));
    assert_eq!(
        (changes[1].leader, changes[1].isr.clone()),
        (NO_LEADER_CHANGE, Some(vec![2, 3]))
    );
    assert_eq!(
        (changes[2].leader, changes[2].isr.clone()),
        (NO_LEADER_CHANGE, Some(vec![3, 2]))
    );
    h.commit(records);
    let p0 = h.partition(t, 0);
    assert_eq!((p0.leader, p0.leader_epoch, p0.partition_epoch), (2, 1, 1));
    let p1 = h.partition(t, 1);
    assert_eq!((p1.leader, p1.leader_epoch, p1.partition_epoch), (2, 0, 1));
    // Fenced already: the next tick has nothing to do until 2 and 3 go silent.
    assert!(h.c.tick(13_999).is_empty());
    assert!(matches!(
        h.c.tick(14_000).first(),
        Some(MetadataRecord::FenceBroker { id: 2, .. })
    ));
}

#[test]
fn an_rf1_partition_goes_offline_with_its_broker_and_comes_back_with_it() {
    let mut h = Harness::new();
    h.brokers(&[(1, None), (2, None)], 0);
    let t = h.topic_with("solo", &[&[2]]);
    h.heartbeat(1, 9_000).unwrap();
    let records = h.c.tick(9_000);
    let [_, MetadataRecord::PartitionChange(c)] = records.as_slice() else {
        panic!("fence and one change: {records:?}");
    };
    // With ELR (Kafka 4.1's default) the ISR empties and its last member, fenced cleanly, is
    // eligible: leader -1, ISR [], ELR [2], last known leader 2.
    assert_eq!(
        (
            c.leader,
            c.isr.clone(),
            c.elr.clone(),
            c.last_known_elr.clone()
        ),
        (NO_LEADER, Some(vec![]), Some(vec![2]), Some(vec![2]))
    );
    h.commit(records);
    let p = h.partition(t, 0);
    assert_eq!(
        (p.leader, p.isr.clone(), p.leader_epoch),
        (NO_LEADER, vec![], 1)
    );

    // Broker 2 heartbeats again, caught up: unfenced and leader again, from the ELR.
    let answer = h.heartbeat(2, 9_500).unwrap();
    assert!(!answer.is_fenced);
    let p = h.partition(t, 0);
    assert_eq!(
        (p.leader, p.isr.clone(), p.leader_epoch, p.partition_epoch),
        (2, vec![2], 2, 2)
    );
    assert_eq!((p.elr.clone(), p.last_known_elr.clone()), (vec![], vec![]));
}

#[test]
fn controlled_shutdown_moves_leaders_then_lets_the_broker_go() {
    let mut h = Harness::new();
    h.brokers(&[(1, None), (2, None)], 0);
    let t = h.topic_with("t", &[&[1, 2], &[2, 1]]);
    let answer = h.heartbeat_with(1, 100, true).unwrap();
    assert_eq!(
        answer,
        HeartbeatAnswer {
            is_caught_up: true,
            is_fenced: false,
            should_shut_down: false
        }
    );
    assert!(h.c.state().brokers[&1].in_controlled_shutdown);
    assert_eq!(h.partition(t, 0).leader, 2);
    assert_eq!(h.partition(t, 0).isr, vec![2]);
    assert_eq!(h.partition(t, 1).isr, vec![2]);
    assert_eq!(h.c.leader_count(1), 0);
    // Broker 2 has not reported the move yet (Kafka's lowest active offset): not yet.
    let answer = h.heartbeat_with(1, 150, true).unwrap();
    assert!(!answer.should_shut_down && !answer.is_fenced);
    h.heartbeat(2, 180).unwrap();
    let answer = h.heartbeat_with(1, 200, true).unwrap();
    assert!(answer.should_shut_down && answer.is_fenced);
    assert!(h.c.state().brokers[&1].fenced);
}

#[test]
fn a_broker_asking_to_be_fenced_is_fenced() {
    let mut h = Harness::new();
    h.brokers(&[(1, None)], 0);
    let epoch = h.c.state().brokers[&1].epoch();
    let out =
        h.c.heartbeat(
            &HeartbeatRequest {
                broker_id: 1,
                broker_epoch: epoch,
                current_metadata_offset: h.offset,
                want_fence: true,
                want_shutdown: false,
            },
            10,
            h.offset,
        )
        .unwrap();
    assert_eq!(
        out.records,
        vec![MetadataRecord::FenceBroker { id: 1, epoch }]
    );
    assert!(out.answer.is_fenced);
}

#[test]
fn a_restarted_broker_leaves_its_isrs_until_it_is_back() {
    let mut h = Harness::new();
    h.brokers(&[(1, None), (2, None)], 0);
    let t = h.topic_with("t", &[&[1, 2]]);
    let solo = h.topic_with("solo", &[&[1]]);
    let epoch = h.register(1, None, 100);
    assert!(h.c.state().brokers[&1].fenced);
    let p0 = h.partition(t, 0);
    assert_eq!(
        (p0.leader, p0.isr.clone(), p0.leader_epoch),
        (2, vec![2], 1)
    );
    // Its RF 1 partition empties (an unclean restart is not eligible) and remembers it as the
    // last known leader.
    let p1 = h.partition(solo, 0);
    assert_eq!(
        (
            p1.leader,
            p1.isr.clone(),
            p1.elr.clone(),
            p1.last_known_elr.clone()
        ),
        (NO_LEADER, vec![], vec![], vec![1])
    );
    h.heartbeat(1, 200).unwrap();
    assert_eq!(h.c.state().brokers[&1].epoch(), epoch);
    assert!(h.c.state().is_active(1));
    assert_eq!(h.partition(solo, 0).leader, 1);
    assert_eq!(h.partition(t, 0).leader, 2);
}

#[test]
fn a_fenced_broker_in_controlled_shutdown_stays_fenced() {
    let mut h = Harness::new();
    h.brokers(&[(1, None)], 0);
    h.topic_with("t", &[&[1]]);
    h.heartbeat_with(1, 10, true).unwrap();
    assert!(h.c.state().brokers[&1].in_controlled_shutdown);
    let answer = h.heartbeat_with(1, 20, true).unwrap();
    assert!(answer.should_shut_down);
    let answer = h.heartbeat(1, 30).unwrap();
    assert!(answer.is_fenced && !answer.should_shut_down);
    assert!(h.c.state().brokers[&1].fenced);
}

#[test]
fn an_unregistered_broker_leaves_every_isr() {
    let mut h = Harness::new();
    h.brokers(&[(1, None), (2, None)], 0);
    let t = h.topic_with("t", &[&[1, 2]]);
    let records = h.c.unregister_broker(1).unwrap();
    assert!(matches!(
        records.last(),
        Some(MetadataRecord::UnregisterBroker { broker_id: 1, .. })
    ));
    h.commit(records);
    assert!(!h.c.state().brokers.contains_key(&1));
    let p = h.partition(t, 0);
    assert_eq!((p.leader, p.isr.clone()), (2, vec![2]));
    assert_eq!(
        h.c.unregister_broker(1).unwrap_err().error,
        ResponseError::BrokerIdNotRegistered
    );
}

#[test]
fn producer_ids_come_in_blocks_of_1000() {
    let mut h = Harness::new();
    let epoch = h.register(1, None, 0);
    let out = h.c.allocate_producer_ids(1, epoch).unwrap();
    assert_eq!(
        out.answer,
        ProducerIdBlock {
            first_producer_id: 0,
            len: 1000
        }
    );
    assert_eq!(
        out.records,
        vec![MetadataRecord::ProducerIds {
            broker_id: 1,
            broker_epoch: epoch,
            next_producer_id: 1000
        }]
    );
    h.commit(out.records);
    let out = h.c.allocate_producer_ids(1, epoch).unwrap();
    assert_eq!(out.answer.first_producer_id, 1000);
    h.commit(out.records);
    assert_eq!(h.c.state().next_producer_id, 2000);
}

#[test]
fn activation_restarts_every_session() {
    let mut h = Harness::new();
    h.brokers(&[(1, None)], 0);
    let mut fresh = Controller::with_state(ControllerSettings::default(), h.c.state().clone());
    fresh.activate(50_000);
    assert!(fresh.tick(58_999).is_empty());
    assert_eq!(fresh.tick(59_000).len(), 1);
}

#[test]
fn replaying_the_snapshot_rebuilds_the_same_state() {
    let mut h = Harness::new();
    h.brokers(&[(1, Some("a")), (2, Some("b")), (3, None)], 0);
    let t = h.topic_with("t", &[&[1, 2], &[2, 3], &[3, 1]]);
    let out = h.c.alter_configs(&[ConfigAlteration {
        resource_type: ConfigResourceType::Topic,
        resource_name: "t".into(),
        changes: vec![crate::cluster::alter::AlterRequest {
            name: "retention.ms".into(),
            op: crate::cluster::alter::AlterOp::Set,
            value: Some("1000".into()),
        }],
    }]);
    h.commit(out.records);
    let epoch = h.c.state().brokers[&1].epoch();
    let out = h.c.allocate_producer_ids(1, epoch).unwrap();
    h.commit(out.records);
    h.heartbeat(2, 9_000).unwrap();
    h.heartbeat(3, 9_000).unwrap();
    let fence = h.c.tick(9_000);
    assert!(!fence.is_empty());
    h.commit(fence);
    h.heartbeat_with(3, 9_100, true).unwrap();

    let state = h.c.state().clone();
    assert!(state.brokers[&1].fenced && state.brokers[&3].in_controlled_shutdown);
    assert_eq!(state.partition(t, 0).map(|p| p.leader), Some(2));
    let snapshot = h.c.snapshot();
    assert!(
        matches!(&snapshot[0], MetadataRecord::FeatureLevel { name, .. } if name == "metadata.version")
    );
    assert_eq!(ControllerState::replay(&snapshot), state);
    // And through the wire format.
    let decoded: Vec<MetadataRecord> = snapshot
        .iter()
        .map(|r| crate::metadata::codec::decode(&crate::metadata::codec::encode(r)).unwrap())
        .collect();
    assert_eq!(ControllerState::replay(&decoded), state);
}
