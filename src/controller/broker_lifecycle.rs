//! The broker half of a node that registers with a multi-voter quorum (Kafka's
//! `BrokerLifecycleManager`), shared by a combined node (`controller::remote`, following its own
//! voter) and a broker-only node (`controller::broker_only`, following the quorum as an observer).
//! The lifecycle task registers this broker through a [`ControllerChannel`] with the active
//! controller (BrokerRegistration with its incarnation id, client listeners, `broker.rack` and
//! feature ranges), then heartbeats every `broker.heartbeat.interval.ms` with the metadata offset
//! its image holds ([`AppliedOffset`]). The controller unfences a broker once that offset reaches
//! its registration (its broker epoch); while fenced the broker heartbeats again after 100 ms
//! instead of the interval, so it is unfenced soon after it caught up. A STALE_BROKER_EPOCH answer
//! (the controller no longer knows this registration) registers again with the same incarnation
//! id. A broker silent for `broker.session.timeout.ms` is fenced by the controller's tick. A clean
//! stop ([`BrokerLifecycle::controlled_shutdown`], Kafka's `beginControlledShutdown`) makes the
//! task heartbeat at once with WantShutDown=true, then as `controller::lifecycle` schedules, until
//! the controller answers ShouldShutDown (its leaderships moved) or the stop's bound passes.
//! Producer-id blocks (AllocateProducerIds) and the AlterPartition link go to the same controller.
//!
//! The controller is found through a leader watch: the local voter's (combined) or the
//! observer's (broker-only).

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::broker_registration_request::{Feature, Listener};
use kafka_protocol::messages::{
    AllocateProducerIdsRequest, BrokerHeartbeatRequest, BrokerRegistrationRequest,
};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::watch;
use tokio::time::Instant;

use super::channel::{ChannelConfig, ControllerChannel, ControllerEndpoints};
use super::lifecycle::{AfterAnswer, GiveUp, PendingShutdown, Seen, ShutdownBound, Wait};
use super::remote::RemoteError;
use crate::cluster::producer_ids::BlockFeed;
use crate::config::Config;
use crate::quorum::LeaderAndEpoch;

/// The metadata offset this node's image holds (read at every heartbeat).
pub type AppliedOffset = Arc<dyn Fn() -> u64 + Send + Sync>;

/// How soon a fenced broker heartbeats again.
const FENCED_HEARTBEAT: Duration = Duration::from_millis(100);

/// Where this broker stands with the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifecycle {
    /// Not registered yet (or registering again).
    Registering,
    Fenced {
        broker_epoch: i64,
    },
    Unfenced {
        broker_epoch: i64,
    },
    /// A clean stop began: heartbeats ask to shut down (Kafka's PENDING_CONTROLLED_SHUTDOWN).
    PendingControlledShutdown {
        broker_epoch: i64,
    },
    /// The controller said `should_shut_down` (or a stop began before any registration); the
    /// lifecycle task stopped.
    ShutDown,
}

impl Lifecycle {
    /// The broker epoch of the current registration, if registered.
    pub fn broker_epoch(&self) -> Option<i64> {
        match *self {
            Lifecycle::Fenced { broker_epoch }
            | Lifecycle::Unfenced { broker_epoch }
            | Lifecycle::PendingControlledShutdown { broker_epoch } => Some(broker_epoch),
            Lifecycle::Registering | Lifecycle::ShutDown => None,
        }
    }
}

/// The running broker lifecycle: the lifecycle task, the producer-id block fetchers, and what
/// a clean stop needs. Owned by the node; its tasks stop with [`BrokerLifecycle::shutdown`].
pub struct BrokerLifecycle {
    lifecycle: tokio::task::JoinHandle<()>,
    state: watch::Receiver<Lifecycle>,
    /// Set once to begin the controlled shutdown.
    stopping: watch::Sender<bool>,
    broker_id: i32,
    channel_config: ChannelConfig,
    /// The controller the channels follow.
    leader: watch::Receiver<LeaderAndEpoch>,
    /// Producer-id block fetchers.
    fetchers: Vec<tokio::task::JoinHandle<()>>,
}

/// What a controlled shutdown's wait reads besides the lifecycle (see
/// `controller::lifecycle::Seen`).
pub trait ShutdownView {
    /// Whether another broker is registered, unfenced and not shutting down.
    fn others_active(&self) -> bool;
    /// Whether this node knows a majority of the voters gone (a voter's view; an observer
    /// cannot tell and says false).
    fn quorum_lost(&self)
        -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send + '_>>;
}

impl BrokerLifecycle {
    /// Starts registering (see the module doc) with the controller `leader` names (the
    /// endpoints of `voters` in turn while it names none or its address is not known). Must be called inside a tokio
    /// runtime.
    pub fn start(
        config: &Config,
        voters: ControllerEndpoints,
        cluster_id: &str,
        leader: watch::Receiver<LeaderAndEpoch>,
        applied: AppliedOffset,
    ) -> BrokerLifecycle {
        let interval = Duration::from_millis(config.broker_heartbeat_interval_ms.max(1));
        let channel_config = ChannelConfig {
            voters,
            request_timeout: interval.max(Duration::from_secs(1)),
            client_id: format!("sluice-broker-{}-to-controller", config.node_id),
        };
        let channel = ControllerChannel::new(channel_config.clone(), Some(leader.clone()));
        let (state_tx, state) = watch::channel(Lifecycle::Registering);
        let (stopping, stop_rx) = watch::channel(false);
        let lifecycle = tokio::spawn(run_lifecycle(LifecycleTask {
            channel,
            applied,
            registration: registration_request(config, cluster_id),
            interval,
            state: state_tx,
            stopping: stop_rx,
        }));
        BrokerLifecycle {
            lifecycle,
            state,
            stopping,
            broker_id: config.node_id,
            channel_config,
            leader,
            fetchers: Vec::new(),
        }
    }

    /// This broker's id.
    pub fn broker_id(&self) -> i32 {
        self.broker_id
    }

    /// This broker's lifecycle as the controller last answered.
    pub fn lifecycle(&self) -> watch::Receiver<Lifecycle> {
        self.state.clone()
    }

    /// Waits until the controller unfenced this broker; returns its broker epoch.
    pub async fn wait_unfenced(&self, limit: Duration) -> Result<i64, RemoteError> {
        let mut state = self.state.clone();
        let s = tokio::time::timeout(
            limit,
            state.wait_for(|s| matches!(s, Lifecycle::Unfenced { .. } | Lifecycle::ShutDown)),
        )
        .await
        .map_err(|_| RemoteError::NotUnfenced(limit))?
        .map_err(|_| RemoteError::Stopped)?;
        match *s {
            Lifecycle::Unfenced { broker_epoch } => Ok(broker_epoch),
            _ => Err(RemoteError::Stopped),
        }
    }

    /// A producer-id allocator fed with blocks of 1000 from the active controller
    /// (AllocateProducerIds with this broker's current epoch, the next block asked for once 90%
    /// of the current one is used). The fetching task stops with [`BrokerLifecycle::shutdown`].
    pub fn producer_ids(&mut self) -> crate::cluster::ProducerIdAllocator {
        let feed = Arc::new(BlockFeed::default());
        self.feed_producer_ids(feed.clone());
        crate::cluster::ProducerIdAllocator::from_controller(feed)
    }

    /// Starts fetching controller blocks into `feed` (for an allocator made before this node
    /// started, with `ProducerIdAllocator::from_controller`).
    pub fn feed_producer_ids(&mut self, feed: Arc<BlockFeed>) {
        let channel =
            ControllerChannel::new(self.channel_config.clone(), Some(self.leader.clone()));
        self.fetchers.push(tokio::spawn(fetch_blocks(
            feed,
            channel,
            self.broker_id,
            self.state.clone(),
        )));
    }

    /// The link an AlterPartition client sends through: a channel of its own to the active
    /// controller, with this broker's id and the lifecycle's current broker epoch (see
    /// `replica::alter_partition`).
    pub fn alter_partition_link(&self) -> crate::replica::alter_partition::ControllerLink {
        crate::replica::alter_partition::ControllerLink::Remote {
            channel: ControllerChannel::new(self.channel_config.clone(), Some(self.leader.clone())),
            broker_id: self.broker_id,
            lifecycle: self.state.clone(),
        }
    }

    /// Stops registering and heartbeating (the controller fences this broker after
    /// `broker.session.timeout.ms`).
    pub fn stop_heartbeats(&self) {
        self.lifecycle.abort();
    }

    /// Stops every task at once, as a crash would.
    pub fn abort(&self) {
        self.fetchers.iter().for_each(|f| f.abort());
        self.lifecycle.abort();
    }

    /// Kafka's controlled shutdown: the lifecycle task heartbeats with WantShutDown=true until
    /// the controller answers ShouldShutDown (this broker leads nothing any more and the other
    /// brokers applied that), or `bound` gives up (see `controller::lifecycle`; `view` tells it
    /// whether other brokers are active and whether the quorum is lost). The broker keeps
    /// running meanwhile. Returns how long it took.
    pub async fn controlled_shutdown(
        &self,
        bound: ShutdownBound,
        view: &dyn ShutdownView,
    ) -> Result<Duration, GiveUp> {
        let started = Instant::now();
        let _ = self.stopping.send(true);
        let mut state = self.state.clone();
        let mut leader = self.leader.clone();
        let mut leaderless_since = None;
        loop {
            if *state.borrow_and_update() == Lifecycle::ShutDown {
                return Ok(started.elapsed());
            }
            let elapsed = started.elapsed();
            if leader.borrow_and_update().leader_id.is_none() {
                leaderless_since.get_or_insert(elapsed);
            } else {
                leaderless_since = None;
            }
            let seen = Seen {
                leaderless_since,
                others_active: view.others_active(),
                quorum_lost: view.quorum_lost().await,
            };
            let wait = match bound.check(elapsed, seen) {
                Wait::GiveUp(why) => return Err(why),
                // Also woken to re-read the quorum's view (`quorum_lost` has no watch).
                Wait::Until(d) => d.min(super::lifecycle::QUORUM_CHECK_INTERVAL),
            };
            tokio::select! {
                changed = state.changed() => {
                    if changed.is_err() {
                        // The task ended: it stopped after ShouldShutDown, or was aborted.
                        return Ok(started.elapsed());
                    }
                }
                _ = leader.changed() => {}
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Stops the fetchers and the lifecycle task and waits for the latter.
    pub async fn shutdown(self) {
        for f in &self.fetchers {
            f.abort();
        }
        self.lifecycle.abort();
        let _ = self.lifecycle.await;
    }
}

/// This broker's BrokerRegistration (v4): a new incarnation id per process, its client
/// listeners, `broker.rack`, the feature ranges it supports.
pub fn registration_request(config: &Config, cluster_id: &str) -> BrokerRegistrationRequest {
    let r = super::local::registration(config);
    BrokerRegistrationRequest::default()
        .with_broker_id(r.broker_id.into())
        .with_cluster_id(StrBytes::from_string(cluster_id.to_string()))
        .with_incarnation_id(r.incarnation_id)
        .with_listeners(
            r.listeners
                .iter()
                .map(|l| {
                    Listener::default()
                        .with_name(StrBytes::from_string(l.name.clone()))
                        .with_host(StrBytes::from_string(l.host.clone()))
                        .with_port(l.port)
                        .with_security_protocol(l.security_protocol)
                })
                .collect(),
        )
        .with_features(
            r.features
                .iter()
                .map(|(name, min, max)| {
                    Feature::default()
                        .with_name(StrBytes::from_string(name.clone()))
                        .with_min_supported_version(*min)
                        .with_max_supported_version(*max)
                })
                .collect(),
        )
        .with_rack(config.broker_rack.clone().map(StrBytes::from_string))
        .with_previous_broker_epoch(r.previous_broker_epoch)
}

/// Fetches a producer-id block from the controller whenever `feed` wants one, with the broker
/// epoch of the current registration (waits for one).
async fn fetch_blocks(
    feed: Arc<BlockFeed>,
    mut channel: ControllerChannel,
    broker_id: i32,
    mut lifecycle: watch::Receiver<Lifecycle>,
) {
    loop {
        let wanted = {
            let mut b = feed.blocks.lock();
            let wanted = b.wants_block();
            if wanted {
                b.start_fetch();
            }
            wanted
        };
        if !wanted {
            feed.wake.notified().await;
            continue;
        }
        let epoch = lifecycle
            .wait_for(|s| s.broker_epoch().is_some() || *s == Lifecycle::ShutDown)
            .await
            .ok()
            .and_then(|s| s.broker_epoch());
        let Some(broker_epoch) = epoch else {
            return; // the lifecycle ended
        };
        let request = AllocateProducerIdsRequest::default()
            .with_broker_id(broker_id.into())
            .with_broker_epoch(broker_epoch);
        let deadline = Instant::now() + Duration::from_secs(5);
        match channel.send(&request, 0, deadline).await {
            Ok(r) if r.error_code == 0 => {
                feed.blocks
                    .lock()
                    .add_block(r.producer_id_start.0, r.producer_id_len);
                continue;
            }
            Ok(r) => tracing::warn!(
                "AllocateProducerIds refused: {:?}",
                ResponseError::try_from_code(r.error_code)
            ),
            Err(e) => tracing::warn!("AllocateProducerIds: {e}"),
        }
        feed.blocks.lock().fetch_failed();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The lifecycle task's state.
struct LifecycleTask {
    channel: ControllerChannel,
    /// The metadata offset this broker's image holds (the heartbeats' `current_metadata_offset`).
    applied: AppliedOffset,
    registration: BrokerRegistrationRequest,
    interval: Duration,
    state: watch::Sender<Lifecycle>,
    /// Becomes true when a clean stop begins.
    stopping: watch::Receiver<bool>,
}

impl LifecycleTask {
    fn publish(&self, now: Lifecycle) {
        if *self.state.borrow() != now {
            tracing::info!(
                broker = self.registration.broker_id.0,
                "broker lifecycle: {now:?}"
            );
            let _ = self.state.send(now);
        }
    }

    /// Sleeps until `until`, or until a clean stop begins (`pending`: it has begun already).
    async fn sleep_until(&mut self, until: Instant, pending: bool) {
        if pending {
            return tokio::time::sleep_until(until).await;
        }
        tokio::select! {
            _ = tokio::time::sleep_until(until) => {}
            gone = async { self.stopping.wait_for(|s| *s).await.is_err() } => {
                if gone {
                    // The node was dropped without a stop: no clean stop will begin.
                    tokio::time::sleep_until(until).await;
                }
            }
        }
    }
}

async fn run_lifecycle(mut l: LifecycleTask) {
    let broker_id = l.registration.broker_id;
    let mut epoch: Option<i64> = None;
    // Some once a clean stop began (Kafka's PENDING_CONTROLLED_SHUTDOWN).
    let mut pending: Option<PendingShutdown> = None;
    loop {
        if pending.is_none() && *l.stopping.borrow() {
            if epoch.is_none() {
                // Kafka: "Skipping controlled shutdown because we are in state STARTING".
                l.publish(Lifecycle::ShutDown);
                return;
            }
            tracing::info!(broker = broker_id.0, "beginning controlled shutdown");
            pending = Some(PendingShutdown::new(
                l.interval,
                super::lifecycle::FIRST_PENDING_RETRY,
            ));
        }
        let started = Instant::now();
        let deadline = started + l.interval;
        let Some(broker_epoch) = epoch else {
            match l.channel.send(&l.registration, 4, deadline).await {
                Ok(r) if r.error_code == 0 => {
                    tracing::info!(
                        broker = broker_id.0,
                        epoch = r.broker_epoch,
                        "broker registered"
                    );
                    epoch = Some(r.broker_epoch);
                    let _ = l.state.send(Lifecycle::Fenced {
                        broker_epoch: r.broker_epoch,
                    });
                    continue; // heartbeat at once
                }
                Ok(r) => tracing::warn!(
                    broker = broker_id.0,
                    "broker registration refused: {:?}",
                    ResponseError::try_from_code(r.error_code)
                ),
                Err(e) => tracing::warn!(broker = broker_id.0, "broker registration: {e}"),
            }
            l.sleep_until(deadline, false).await;
            continue;
        };
        let request = heartbeat_request(broker_id, broker_epoch, (l.applied)(), pending.is_some());
        let mut next = deadline;
        match l.channel.send(&request, 1, deadline).await {
            Ok(r) if r.error_code == 0 => {
                let now = if let Some(p) = &mut pending {
                    match p.on_answer(r.should_shut_down) {
                        AfterAnswer::ShutDown => Lifecycle::ShutDown,
                        AfterAnswer::HeartbeatIn(d) => {
                            next = Instant::now() + d;
                            Lifecycle::PendingControlledShutdown { broker_epoch }
                        }
                    }
                } else if r.should_shut_down {
                    Lifecycle::ShutDown
                } else if r.is_fenced {
                    next = started + FENCED_HEARTBEAT;
                    Lifecycle::Fenced { broker_epoch }
                } else {
                    Lifecycle::Unfenced { broker_epoch }
                };
                l.publish(now);
                if now == Lifecycle::ShutDown {
                    return;
                }
            }
            Ok(r) if r.error_code == ResponseError::StaleBrokerEpoch.code() => {
                if pending.is_some() {
                    // The controller no longer knows this registration: nothing left to move.
                    tracing::warn!(
                        broker = broker_id.0,
                        "controlled shutdown: STALE_BROKER_EPOCH for epoch {broker_epoch}; stopping"
                    );
                    l.publish(Lifecycle::ShutDown);
                    return;
                }
                tracing::warn!(
                    broker = broker_id.0,
                    "broker heartbeat: STALE_BROKER_EPOCH for epoch {broker_epoch}; registering again"
                );
                epoch = None;
                let _ = l.state.send(Lifecycle::Registering);
                continue;
            }
            Ok(r) => tracing::warn!(
                broker = broker_id.0,
                "broker heartbeat refused: {:?}",
                ResponseError::try_from_code(r.error_code)
            ),
            Err(e) => tracing::warn!(broker = broker_id.0, "broker heartbeat: {e}"),
        }
        if let Some(p) = &pending {
            if next == deadline {
                next = started + p.on_failure();
            }
        }
        l.sleep_until(next, pending.is_some()).await;
    }
}

/// A BrokerHeartbeat (v1) of registration `broker_epoch` with this node's applied metadata
/// offset; `want_shut_down` while a controlled shutdown is pending. Never asks to be fenced.
pub fn heartbeat_request(
    broker_id: kafka_protocol::messages::BrokerId,
    broker_epoch: i64,
    applied_offset: u64,
    want_shut_down: bool,
) -> BrokerHeartbeatRequest {
    BrokerHeartbeatRequest::default()
        .with_broker_id(broker_id)
        .with_broker_epoch(broker_epoch)
        .with_current_metadata_offset(i64::try_from(applied_offset).unwrap_or(i64::MAX))
        .with_want_fence(false)
        .with_want_shut_down(want_shut_down)
}
