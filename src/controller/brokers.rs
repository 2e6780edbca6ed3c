//! Broker lifecycle (Kafka's ClusterControlManager and BrokerHeartbeatManager): registration,
//! heartbeats (unfence when caught up, controlled shutdown, requested fencing), fencing of
//! brokers silent for `broker.session.timeout.ms`, and producer-id blocks
//! (ProducerIdControlManager).
//!
//! Broker control states, as Kafka's: FENCED (registered, or fenced later), UNFENCED,
//! CONTROLLED_SHUTDOWN (leaderships moved away, ISR memberships dropped; kept until it leads
//! nothing and every active broker applied the move), SHUTDOWN_NOW (told to stop; fenced).

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use super::error::{err, ControllerError};
use super::{Controller, Outcome, PartitionState};
use crate::metadata::records::{BrokerEndpoint, MetadataRecord, RegisterBroker};

/// A BrokerRegistration request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerRegistration {
    pub broker_id: i32,
    pub incarnation_id: Uuid,
    pub listeners: Vec<BrokerEndpoint>,
    /// Supported feature ranges (name, min, max).
    pub features: Vec<(String, i16, i16)>,
    pub rack: Option<String>,
    /// The broker epoch its previous incarnation shut down cleanly with (Kafka's clean shutdown
    /// file), or -1 after a crash, a power loss or on first start (v3+ `PreviousBrokerEpoch`).
    pub previous_broker_epoch: i64,
}

/// A BrokerHeartbeat request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatRequest {
    pub broker_id: i32,
    pub broker_epoch: i64,
    /// The highest metadata offset the broker has applied.
    pub current_metadata_offset: i64,
    pub want_fence: bool,
    pub want_shutdown: bool,
}

/// A BrokerHeartbeat response's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatAnswer {
    pub is_caught_up: bool,
    pub is_fenced: bool,
    pub should_shut_down: bool,
}

/// An AllocateProducerIds answer: ids `first..first + len` belong to the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerIdBlock {
    pub first_producer_id: i64,
    pub len: i32,
}

/// Kafka's producer-id block size.
pub const PRODUCER_ID_BLOCK_LEN: i32 = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ControlState {
    Fenced,
    Unfenced,
    ControlledShutdown,
    ShutdownNow,
}

impl Controller {
    fn session_active(&self, id: i32, now_ms: i64) -> bool {
        self.last_contact_ms
            .get(&id)
            .is_some_and(|t| now_ms.saturating_sub(*t) < self.settings.session_timeout_ms)
    }

    /// Kafka's `checkBrokerEpoch`.
    pub(super) fn check_broker_epoch(&self, id: i32, epoch: i64) -> Result<(), ControllerError> {
        match self.state.brokers.get(&id) {
            None => Err(err(
                ResponseError::StaleBrokerEpoch,
                format!("No broker registration found for broker id {id}"),
            )),
            Some(b) if b.epoch() != epoch => Err(err(
                ResponseError::StaleBrokerEpoch,
                format!(
                    "Expected broker epoch {}, but got broker epoch {epoch}",
                    b.epoch()
                ),
            )),
            Some(_) => Ok(()),
        }
    }

    /// BrokerRegistration. `broker_epoch` is the offset the RegisterBroker record will have (the
    /// driver knows it; Kafka uses exactly that). The broker registers fenced. The answer is the
    /// broker epoch. Starts the broker's session at `now_ms`. A broker registering again after an
    /// unclean shutdown (its previous broker epoch is not the registered one) first leaves every
    /// ISR and ELR it was in and loses its leaderships (Kafka's `handleBrokerUncleanShutdown`):
    /// it may have lost unflushed records. A clean restart (or any restart without ELR) leaves the
    /// ISRs as a fencing does: a no-op after a completed controlled shutdown, the safety net
    /// after one cut short.
    pub fn register_broker(
        &mut self,
        request: &BrokerRegistration,
        now_ms: i64,
        broker_epoch: i64,
    ) -> Result<Outcome<i64>, ControllerError> {
        let id = request.broker_id;
        if id < 0 {
            return Err(err(
                ResponseError::InvalidRequest,
                format!("Invalid broker id {id}"),
            ));
        }
        if let Some(existing) = self.state.brokers.get(&id) {
            if existing.registration.incarnation_id != request.incarnation_id
                && self.session_active(id, now_ms)
            {
                return Err(err(
                    ResponseError::DuplicateBrokerRegistration,
                    "Another broker is registered with that broker id.",
                ));
            }
        }
        for (name, level) in &self.state.features {
            let (min, max) = request
                .features
                .iter()
                .find(|(n, _, _)| n == name)
                .map(|(_, min, max)| (*min, *max))
                .unwrap_or((0, 0));
            if *level < min || *level > max {
                return Err(err(
                    ResponseError::UnsupportedVersion,
                    format!(
                        "Unable to register because the broker does not support finalized version {level} of {name}. The broker wants a version between {min} and {max}, inclusive."
                    ),
                ));
            }
        }
        self.last_contact_ms.insert(id, now_ms);
        self.metadata_offsets.remove(&id);
        self.controlled_shutdown_offsets.remove(&id);
        let mut records = match self.state.brokers.get(&id) {
            None => Vec::new(),
            // A clean restart leaves the ISRs as a fencing does, eligible, with its logs intact.
            // After a completed controlled shutdown that changes nothing (the broker leads
            // nothing and is in no ISR but one it was the last member of); it matters when the
            // stop's controlled shutdown was cut short (no controller within the bound), so the
            // stopped broker may still lead. Kafka adds no records for a clean restart.
            Some(existing)
                if self.elr_enabled() && request.previous_broker_epoch != existing.epoch() =>
            {
                self.unclean_shutdown_records(id)
            }
            Some(_) => self.remove_from_isrs(id),
        };
        records.push(MetadataRecord::RegisterBroker(RegisterBroker {
            broker_id: id,
            incarnation_id: request.incarnation_id,
            broker_epoch,
            endpoints: request.listeners.clone(),
            features: request.features.clone(),
            rack: request.rack.clone(),
            fenced: true,
            in_controlled_shutdown: false,
        }));
        Ok(Outcome {
            records,
            answer: broker_epoch,
        })
    }

    /// BrokerHeartbeat at `now_ms`: refreshes the session and moves the broker between control
    /// states (Kafka's `BrokerHeartbeatManager.calculateNextBrokerState`), with the records that
    /// follow (unfence and re-elect leaderless partitions it is in the ISR of; fence, or enter
    /// controlled shutdown: leave every ISR and move its leaderships away). `next_offset` is at or
    /// below the offset the records will be written at (the driver's `CommandContext`), the same
    /// approximation as the broker epoch.
    ///
    /// A broker asking to shut down while it leads nothing is fenced and told to shut down at
    /// once; one that leads enters controlled shutdown and is told to shut down once it leads
    /// nothing (a partition with no other acceptable leader goes leaderless, leader -1, as in
    /// Kafka) and every active broker (unfenced, not shutting down) has reported a metadata
    /// offset at or above the controlled shutdown's records: its partitions' new leaders know
    /// they lead before it stops.
    pub fn heartbeat(
        &mut self,
        request: &HeartbeatRequest,
        now_ms: i64,
        next_offset: i64,
    ) -> Result<Outcome<HeartbeatAnswer>, ControllerError> {
        let id = request.broker_id;
        self.check_broker_epoch(id, request.broker_epoch)?;
        self.last_contact_ms.insert(id, now_ms);
        self.metadata_offsets
            .insert(id, request.current_metadata_offset);
        let Some(broker) = self.state.brokers.get(&id) else {
            return Err(err(ResponseError::StaleBrokerEpoch, "unregistered"));
        };
        let epoch = broker.epoch();
        let caught_up = request.current_metadata_offset >= epoch;
        let current = if broker.fenced {
            ControlState::Fenced
        } else if broker.in_controlled_shutdown {
            ControlState::ControlledShutdown
        } else {
            ControlState::Unfenced
        };
        let leads = self.leader_count(id) > 0;
        let next = match current {
            ControlState::Fenced if request.want_shutdown => ControlState::ShutdownNow,
            // Only a new registration leaves controlled shutdown (Kafka has no record for it).
            ControlState::Fenced
                if !request.want_fence && caught_up && !broker.in_controlled_shutdown =>
            {
                ControlState::Unfenced
            }
            ControlState::Fenced => ControlState::Fenced,
            ControlState::Unfenced if request.want_fence && request.want_shutdown => {
                ControlState::ShutdownNow
            }
            ControlState::Unfenced if request.want_fence => ControlState::Fenced,
            ControlState::Unfenced if request.want_shutdown && leads => {
                ControlState::ControlledShutdown
            }
            ControlState::Unfenced if request.want_shutdown => ControlState::ShutdownNow,
            ControlState::Unfenced => ControlState::Unfenced,
            ControlState::ControlledShutdown if leads => ControlState::ControlledShutdown,
            ControlState::ControlledShutdown => {
                // A controller that took over meanwhile has no offset: everything it applied.
                let shutdown_offset = *self
                    .controlled_shutdown_offsets
                    .entry(id)
                    .or_insert(next_offset.saturating_sub(1));
                if shutdown_offset <= self.lowest_active_offset() {
                    ControlState::ShutdownNow
                } else {
                    ControlState::ControlledShutdown
                }
            }
            other => other,
        };
        let mut records = Vec::new();
        if next != current {
            match next {
                ControlState::Unfenced => {
                    records.push(MetadataRecord::UnfenceBroker { id, epoch });
                    let state = &self.state;
                    records.extend(self.leader_and_isr_updates(
                        None,
                        &|p: &PartitionState| {
                            p.leader < 0
                                && (p.isr.contains(&id)
                                    || p.elr.contains(&id)
                                    || p.last_known_elr.contains(&id))
                        },
                        &|r| r == id || state.is_active(r),
                    ));
                }
                ControlState::Fenced | ControlState::ShutdownNow => {
                    if !broker.fenced {
                        records.extend(self.fence_records(id, epoch));
                    }
                }
                ControlState::ControlledShutdown => {
                    records.push(MetadataRecord::BrokerRegistrationChange {
                        broker_id: id,
                        broker_epoch: epoch,
                        fenced: None,
                        in_controlled_shutdown: Some(true),
                    });
                    records.extend(self.remove_from_isrs(id));
                    self.controlled_shutdown_offsets.insert(id, next_offset);
                }
            }
        }
        if matches!(next, ControlState::Fenced | ControlState::ShutdownNow) {
            // A fenced broker leaves controlled shutdown (Kafka's `touch`).
            self.controlled_shutdown_offsets.remove(&id);
        }
        Ok(Outcome {
            records,
            answer: HeartbeatAnswer {
                is_caught_up: caught_up,
                is_fenced: matches!(next, ControlState::Fenced | ControlState::ShutdownNow),
                should_shut_down: next == ControlState::ShutdownNow,
            },
        })
    }

    /// The lowest metadata offset an active broker (unfenced, not in controlled shutdown)
    /// reported to this controller; -1 for one not heard from since it became active here,
    /// `i64::MAX` with no active broker (Kafka's `lowestActiveOffset`).
    fn lowest_active_offset(&self) -> i64 {
        self.state
            .brokers
            .values()
            .filter(|b| b.is_active())
            .map(|b| {
                let id = b.registration.broker_id;
                self.metadata_offsets.get(&id).copied().unwrap_or(-1)
            })
            .min()
            .unwrap_or(i64::MAX)
    }

    /// FenceBroker plus the ISR removals and elections it causes (Kafka's `handleBrokerFenced`).
    fn fence_records(&self, id: i32, epoch: i64) -> Vec<MetadataRecord> {
        let mut records = vec![MetadataRecord::FenceBroker { id, epoch }];
        records.extend(self.remove_from_isrs(id));
        records
    }

    /// Drops `id` from every ISR it is in (never emptying one unless ELR is on) and re-elects
    /// where it led.
    fn remove_from_isrs(&self, id: i32) -> Vec<MetadataRecord> {
        let state = &self.state;
        self.leader_and_isr_updates(
            Some(id),
            &|p: &PartitionState| p.isr.contains(&id) || p.leader == id,
            &|r| r != id && state.is_active(r),
        )
    }

    /// A broker back after an unclean shutdown leaves every ISR and ELR it is in, and its
    /// leaderships move (Kafka's `handleBrokerUncleanShutdown` with ELR on).
    fn unclean_shutdown_records(&self, id: i32) -> Vec<MetadataRecord> {
        let state = &self.state;
        self.leader_and_isr_updates_with(
            Some(id),
            true,
            &|p: &PartitionState| p.isr.contains(&id) || p.elr.contains(&id) || p.leader == id,
            &|r| r != id && state.is_active(r),
        )
    }

    /// The periodic check at `now_ms`: fences the unfenced broker whose session expired longest
    /// ago (one per call, as Kafka's `maybeFenceOneStaleBroker`; call again while it returns
    /// records). A broker without a session yet gets one starting now.
    pub fn tick(&mut self, now_ms: i64) -> Vec<MetadataRecord> {
        for id in self.state.brokers.keys() {
            self.last_contact_ms.entry(*id).or_insert(now_ms);
        }
        let timeout = self.settings.session_timeout_ms;
        let stale = self
            .state
            .brokers
            .values()
            .filter(|b| !b.fenced)
            .filter_map(|b| {
                let id = b.registration.broker_id;
                let last = *self.last_contact_ms.get(&id)?;
                (now_ms.saturating_sub(last) >= timeout).then_some((last, id, b.epoch()))
            })
            .min();
        match stale {
            Some((_, id, epoch)) => self.fence_records(id, epoch),
            None => Vec::new(),
        }
    }

    /// UnregisterBroker (an operator removing a broker for good): its ISR memberships and
    /// leaderships go first, then the UnregisterBroker record (Kafka's `handleBrokerUnregistered`).
    pub fn unregister_broker(
        &self,
        broker_id: i32,
    ) -> Result<Vec<MetadataRecord>, ControllerError> {
        let Some(broker) = self.state.brokers.get(&broker_id) else {
            return Err(err(
                ResponseError::BrokerIdNotRegistered,
                format!("Broker ID {broker_id} is not currently registered"),
            ));
        };
        let mut records = self.remove_from_isrs(broker_id);
        records.push(MetadataRecord::UnregisterBroker {
            broker_id,
            broker_epoch: broker.epoch(),
        });
        Ok(records)
    }

    /// AllocateProducerIds: the next block of 1000 ids for a registered broker.
    pub fn allocate_producer_ids(
        &self,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<Outcome<ProducerIdBlock>, ControllerError> {
        self.check_broker_epoch(broker_id, broker_epoch)?;
        let first = self.state.next_producer_id;
        let next = first
            .checked_add(i64::from(PRODUCER_ID_BLOCK_LEN))
            .filter(|n| *n < i64::MAX)
            .ok_or_else(|| {
                err(
                    ResponseError::UnknownServerError,
                    "Exhausted all producerIds as the next block's end producerId has exceeded the int64 type limit",
                )
            })?;
        Ok(Outcome {
            records: vec![MetadataRecord::ProducerIds {
                broker_id,
                broker_epoch,
                next_producer_id: next,
            }],
            answer: ProducerIdBlock {
                first_producer_id: first,
                len: PRODUCER_ID_BLOCK_LEN,
            },
        })
    }
}
