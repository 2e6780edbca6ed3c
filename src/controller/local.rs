//! A combined-mode node (the default: broker and controller in one process) wired to its own
//! controller in process: the quorum replays into the hosting side, then the broker registers
//! (BrokerRegistration with its advertised listeners), heartbeats once to be unfenced, adopts
//! the topics its data directory holds that the log does not name (`replica::metadata_host`),
//! and keeps heartbeating every `broker.heartbeat.interval.ms` (Kafka's default 2000) as in-process
//! calls. A clean stop runs Kafka's controlled shutdown as in-process heartbeats too
//! ([`LocalNode::controlled_shutdown`]): two calls, a few ms. `server::start` starts it (`Broker::start_metadata`) before the coordinators load and
//! the listeners accept; the network RPCs between separate brokers and controllers end in the
//! same calls.
//!
//! The cluster id stays in `meta.properties` (`cluster::identity`), as in Kafka: the metadata
//! log does not carry it.

use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use super::driver::{self, lift, Clock, DriverConfig, DriverError, RunningController};
use super::lifecycle::{AfterAnswer, GiveUp, PendingShutdown, ShutdownBound};
use super::{
    bootstrap_features, bootstrap_records, BrokerRegistration, ControllerError, ControllerSettings,
    HeartbeatAnswer, HeartbeatRequest, Outcome, SUPPORTED_FEATURES,
};
use crate::config::Config;
use crate::quorum::{QuorumConfig, QuorumError};
use crate::replica::ReplicaManager;

/// Kafka's `broker.heartbeat.interval.ms` default.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(2000);

/// Why the metadata side did not come up.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("metadata quorum: {0}")]
    Quorum(#[from] QuorumError),
    #[error("metadata quorum: this node did not become the leader within {0:?}")]
    NoLeader(Duration),
    #[error("controller: {0}")]
    Driver(#[from] DriverError),
    #[error("controller refused: {}", .0.message)]
    Refused(ControllerError),
}

/// The running metadata side of a combined node.
pub struct LocalNode {
    pub controller: RunningController,
    /// This broker's epoch (from its registration).
    pub broker_epoch: i64,
    /// This broker's id (`node.id`).
    pub broker_id: i32,
    /// The periodic heartbeats; taken by a controlled shutdown.
    heartbeats: Option<tokio::task::JoinHandle<()>>,
}

impl LocalNode {
    /// The AlterPartition client of the lone voter: the command runs on this process's
    /// controller with this broker's id and epoch (see `replica::alter_partition`).
    pub fn alter_partition_link(&self) -> crate::replica::alter_partition::ControllerLink {
        crate::replica::alter_partition::ControllerLink::Local {
            handle: self.controller.handle.clone(),
            broker_id: self.broker_id,
            broker_epoch: self.broker_epoch,
        }
    }

    /// Kafka's controlled shutdown on the lone voter: the periodic heartbeats stop and this
    /// broker heartbeats its own controller with WantShutDown=true, asking again at once after
    /// the first answer (the controller moves nothing elsewhere: with no other broker its
    /// partitions go leaderless, and it answers ShouldShutDown on the next heartbeat), within
    /// `bound`. Returns how long it took.
    pub async fn controlled_shutdown(&mut self, bound: ShutdownBound) -> Result<Duration, GiveUp> {
        let started = tokio::time::Instant::now();
        self.stop_heartbeats().await;
        let mut pending = PendingShutdown::new(HEARTBEAT_INTERVAL, Duration::ZERO);
        let handle = self.controller.handle.clone();
        let (me, epoch) = (self.broker_id, self.broker_epoch);
        let asking = async {
            loop {
                let delay = match heartbeat(&handle, me, epoch, true).await {
                    Ok(answer) => match pending.on_answer(answer.should_shut_down) {
                        AfterAnswer::ShutDown => return,
                        AfterAnswer::HeartbeatIn(d) => d,
                    },
                    Err(e) => {
                        tracing::warn!("controlled shutdown heartbeat: {e}");
                        pending.on_failure()
                    }
                };
                tokio::time::sleep(delay).await;
            }
        };
        match tokio::time::timeout(bound.limit, asking).await {
            Ok(()) => Ok(started.elapsed()),
            Err(_) => Err(GiveUp::TimedOut(bound.limit)),
        }
    }

    async fn stop_heartbeats(&mut self) {
        if let Some(h) = self.heartbeats.take() {
            h.abort();
            let _ = h.await;
        }
    }

    /// Stops heartbeating, the driver and the quorum (in that order).
    pub async fn shutdown(mut self) {
        self.stop_heartbeats().await;
        self.controller.shutdown().await;
    }
}

/// The controller settings of a broker configuration (Kafka's keys).
pub fn settings(config: &Config) -> ControllerSettings {
    ControllerSettings {
        default_replication_factor: i16::try_from(config.default_replication_factor).unwrap_or(1),
        default_num_partitions: config.num_partitions,
        unclean_leader_election_enable: config.unclean_leader_election_enable,
        min_insync_replicas: config.min_insync_replicas,
        ..ControllerSettings::default()
    }
}

/// The feature levels a new cluster starts with: Kafka 4.1's, with `transaction.version` and
/// `share.version` at their `sluice.feature.*` keys.
pub fn bootstrap_for(config: &Config) -> Vec<(&'static str, i16)> {
    bootstrap_features(
        config.feature_transaction_version,
        config.feature_share_version,
    )
}

/// This broker's registration request (it supports [`SUPPORTED_FEATURES`]).
pub fn registration(config: &Config) -> BrokerRegistration {
    let record = crate::cluster::identity::registration(config, 0);
    BrokerRegistration {
        broker_id: record.broker_id,
        incarnation_id: Uuid::new_v4(),
        listeners: record.endpoints,
        features: SUPPORTED_FEATURES
            .iter()
            .map(|(name, min, max)| (name.to_string(), *min, *max))
            .collect(),
        rack: record.rack,
        previous_broker_epoch: config.previous_broker_epoch,
    }
}

/// Starts the quorum (a lone voter when `controller.quorum.voters` is unset; with other voters
/// `listener` must be this node's bound CONTROLLER listener) and the driver over `replicas`
/// (opened with `ReplicaManager::open_unlogged`), waits until this node leads, registers this
/// broker and adopts the unlogged topics. Must run inside a tokio runtime. Waiting for
/// leadership is what a single node needs; a broker of a multi-node quorum that is not the
/// leader must instead register over the network (not built yet).
pub async fn start(
    config: &Config,
    replicas: Arc<ReplicaManager>,
    listener: Option<tokio::net::TcpListener>,
    clock: Clock,
) -> Result<LocalNode, LocalError> {
    let driver_config = DriverConfig {
        settings: settings(config),
        bootstrap: bootstrap_records(&bootstrap_for(config)),
        tick_interval: Duration::from_millis(1000),
        seed: rand_seed(),
        clock,
    };
    let controller = driver::start(
        driver_config,
        QuorumConfig::from_config(config),
        listener,
        replicas.clone(),
    )?;
    let handle = controller.handle.clone();
    let me = config.node_id;
    let limit = Duration::from_millis(config.quorum_election_timeout_ms.saturating_mul(5));
    let mut leader = handle.leader();
    tokio::time::timeout(limit, leader.wait_for(|l| l.leader_id == Some(me)))
        .await
        .map_err(|_| LocalError::NoLeader(limit))?
        .map_err(|_| DriverError::Stopped)?;
    // Everything before this no-op (the replayed log, the bootstrap entry) is applied after it.
    handle
        .run(|_, _| Outcome {
            records: vec![],
            answer: (),
        })
        .await?;
    let request = registration(config);
    let broker_epoch = handle
        .run(move |c, ctx| {
            c.expire_session(request.broker_id);
            lift(c.register_broker(&request, ctx.now_ms, ctx.next_offset))
        })
        .await?
        .map_err(LocalError::Refused)?;
    heartbeat(&controller.handle, me, broker_epoch, false).await?;
    let unlogged = {
        let replicas = replicas.clone();
        tokio::task::spawn_blocking(move || replicas.unlogged_topics())
            .await
            .map_err(|_| DriverError::Stopped)?
    };
    replicas.set_aside_strays(&unlogged.strays);
    if !unlogged.adopt.is_empty() {
        let records = unlogged.adopt;
        tracing::info!(
            "adopting {} metadata record(s) for topics found on disk",
            records.len()
        );
        handle
            .run(move |_, _| Outcome {
                records,
                answer: (),
            })
            .await?;
    }
    let beat = controller.handle.clone();
    let heartbeats = tokio::spawn(async move {
        let mut every = tokio::time::interval(HEARTBEAT_INTERVAL);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            if let Err(e) = heartbeat(&beat, me, broker_epoch, false).await {
                tracing::warn!("broker heartbeat: {e}");
            }
        }
    });
    Ok(LocalNode {
        controller,
        broker_epoch,
        broker_id: me,
        heartbeats: Some(heartbeats),
    })
}

/// One BrokerHeartbeat with the applied offset as the broker's metadata offset; WantShutDown
/// when `want_shutdown`.
async fn heartbeat(
    handle: &driver::ControllerHandle,
    broker_id: i32,
    broker_epoch: i64,
    want_shutdown: bool,
) -> Result<HeartbeatAnswer, LocalError> {
    let request = HeartbeatRequest {
        broker_id,
        broker_epoch,
        current_metadata_offset: i64::try_from(handle.applied_offset()).unwrap_or(i64::MAX),
        want_fence: false,
        want_shutdown,
    };
    handle
        .run(move |c, ctx| lift(c.heartbeat(&request, ctx.now_ms, ctx.next_offset)))
        .await?
        .map_err(LocalError::Refused)
}

fn rand_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

#[cfg(test)]
mod tests;
