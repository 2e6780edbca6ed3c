//! `SimBroker`: a broker as the simulation runs it: it registers with the active controller,
//! heartbeats every `broker.heartbeat.interval.ms` (2000) with the metadata offset it applied,
//! and "fetches" the committed metadata log from the voter it follows into the real
//! `MetadataImage` (Kafka's brokers are observers of the metadata log). Silence (a fault) stops
//! its heartbeats; a restart is a new incarnation that must register again.
//!
//! The image check: whenever the broker has applied exactly as far as the voter it follows,
//! its image must describe the same brokers and partitions as that voter's controller state.
//! No I/O, no clock (time is an argument).

use sluice::controller::{
    BrokerRegistration, ControllerState, HeartbeatRequest, BOOTSTRAP_FEATURES,
};
use sluice::metadata::{BrokerEndpoint, MetadataImage};
use uuid::Uuid;

use crate::check::{entry_records, Checker};
use crate::net::{Addr, Payload, Reply, Request, BROKER_BASE};
use crate::replica::Replicas;
use crate::rng::SimRng;

/// Kafka's `broker.heartbeat.interval.ms` default.
pub const HEARTBEAT_INTERVAL_MS: u64 = 2000;

pub struct SimBroker {
    pub id: i32,
    incarnation: Uuid,
    pub broker_epoch: Option<i64>,
    pub image: MetadataImage,
    /// Index of the last metadata log entry applied to `image`.
    pub applied: u64,
    /// Heartbeats stop until then (global ms).
    pub silent_until: u64,
    /// The voter whose log this broker reads.
    pub follows: i32,
    /// The replica role (partition logs, leaders, followers).
    pub replicas: Replicas,
    controller_hint: Option<i32>,
    next_request: u64,
    /// The request still unanswered (at the next heartbeat it counts as timed out and the
    /// hint is dropped: a crashed or cut-off voter must not silence the broker forever).
    awaiting: Option<u64>,
}

impl SimBroker {
    pub fn new(id: i32, follows: i32, rng: &mut SimRng) -> SimBroker {
        SimBroker {
            id,
            incarnation: Uuid::from_u64_pair(rng.next_u64(), rng.next_u64()),
            broker_epoch: None,
            image: MetadataImage::empty("sim", -1),
            applied: 0,
            silent_until: 0,
            follows,
            replicas: Replicas::new(id),
            controller_hint: None,
            next_request: 0,
            awaiting: None,
        }
    }

    pub fn addr(&self) -> Addr {
        BROKER_BASE + self.id
    }

    /// A restart: a new incarnation (its metadata image survives, as Kafka's on-disk log does).
    pub fn restart(&mut self, rng: &mut SimRng) {
        self.incarnation = Uuid::from_u64_pair(rng.next_u64(), rng.next_u64());
        self.broker_epoch = None;
        self.controller_hint = None;
    }

    /// The active controller as this broker believes it.
    pub fn controller_hint(&self) -> Option<i32> {
        self.controller_hint
    }

    /// Whether the image holds this broker's current registration (it may host partitions).
    pub fn registered_in_image(&self) -> bool {
        self.broker_epoch
            .is_some_and(|e| self.image.broker(self.id).is_some_and(|r| r.epoch == e))
    }

    /// Reads the committed log up to `upto` (the followed voter's applied offset).
    pub fn fetch(&mut self, checker: &Checker, upto: u64) {
        for (index, (_, data)) in checker.committed_range(self.applied, upto) {
            let has_mv = self.image.feature_level("metadata.version").is_some();
            let records = entry_records(has_mv, data);
            if !records.is_empty() {
                self.image = self.image.apply(&records).0;
            }
            self.applied = *index;
        }
        self.applied = self.applied.max(upto);
    }

    /// The image check against the followed voter's state at the same offset.
    pub fn check_image(&self, state: &ControllerState, checker: &mut Checker) {
        let mut problems = Vec::new();
        let topics: Vec<_> = self.image.topics().collect();
        if topics.len() != state.topics.len() {
            problems.push(format!(
                "{} topics, controller {}",
                topics.len(),
                state.topics.len()
            ));
        }
        for t in state.topics.values() {
            let Some(img) = self.image.topic_by_id(t.topic_id) else {
                problems.push(format!("topic {} missing", t.name));
                continue;
            };
            for (i, p) in &t.partitions {
                let same = img.partitions.get(i).is_some_and(|r| {
                    r.leader == p.leader
                        && r.leader_epoch == p.leader_epoch
                        && r.partition_epoch == p.partition_epoch
                        && r.isr == p.isr
                        && r.replicas == p.replicas
                });
                if !same || img.name != t.name {
                    problems.push(format!("partition {}-{i} differs", t.name));
                }
            }
            if img.partitions.len() != t.partitions.len() {
                problems.push(format!("topic {} partition count differs", t.name));
            }
        }
        for b in state.brokers.values() {
            let id = b.registration.broker_id;
            let same = self
                .image
                .broker(id)
                .is_some_and(|r| r.epoch == b.epoch() && r.fenced == b.fenced);
            if !same {
                problems.push(format!("broker {id} differs"));
            }
        }
        if let Some(p) = problems.first() {
            checker.violations.push(format!(
                "broker {}: image at offset {} disagrees with voter {}'s state: {p} ({} problems)",
                self.id,
                self.applied,
                self.follows,
                problems.len()
            ));
        }
    }

    /// The heartbeat (or registration) due now, unless silent: (to, payload).
    pub fn heartbeat(
        &mut self,
        now: u64,
        voters: usize,
        rng: &mut SimRng,
    ) -> Option<(Addr, Payload)> {
        if now < self.silent_until {
            return None;
        }
        if self.awaiting.take().is_some() {
            self.controller_hint = None;
        }
        let to = self
            .controller_hint
            .unwrap_or_else(|| rng.below(voters) as i32);
        self.next_request += 1;
        self.awaiting = Some(self.next_request);
        let request = match self.broker_epoch {
            None => Request::Register(BrokerRegistration {
                broker_id: self.id,
                incarnation_id: self.incarnation,
                listeners: vec![BrokerEndpoint {
                    name: "PLAINTEXT".into(),
                    host: format!("broker-{}", self.id),
                    port: 9092,
                    security_protocol: 0,
                }],
                features: BOOTSTRAP_FEATURES
                    .iter()
                    .map(|(n, l)| (n.to_string(), 0, *l))
                    .collect(),
                rack: None,
                // Every restart in the simulation is a crash (or a power loss).
                previous_broker_epoch: -1,
            }),
            Some(broker_epoch) => Request::Heartbeat(HeartbeatRequest {
                broker_id: self.id,
                broker_epoch,
                current_metadata_offset: self.applied as i64,
                want_fence: false,
                want_shutdown: false,
            }),
        };
        Some((
            to,
            Payload::Request {
                id: self.next_request,
                request,
            },
        ))
    }

    pub fn on_reply(&mut self, from: Addr, id: u64, reply: Reply) {
        if self.awaiting == Some(id) {
            self.awaiting = None;
        }
        match reply {
            Reply::NotController { leader_id } => self.controller_hint = leader_id,
            Reply::Registered { broker_epoch } => {
                self.broker_epoch = Some(broker_epoch);
                self.controller_hint = Some(from);
            }
            Reply::Heartbeat(_) | Reply::Done | Reply::AlterPartition(_) => {
                self.controller_hint = Some(from)
            }
            Reply::Refused { code } => {
                // STALE_BROKER_EPOCH (77): the controller forgot this registration.
                if code == 77 {
                    self.broker_epoch = None;
                }
            }
        }
    }
}
