//! A combined-mode node (broker + controller) of a multi-voter quorum, the counterpart of
//! `controller::local` for `controller.quorum.voters` naming other voters. It starts:
//! - the quorum member and the driver, which replays every committed entry into the broker's
//!   `MetadataApplier` on every voter (hosting follows the log whether or not this node leads);
//! - the CONTROLLER listener (`server::controller_listener`): voter connections to the quorum,
//!   Kafka connections to the controller RPCs (`controller::rpc`), answered while this node leads
//!   and NOT_CONTROLLER otherwise;
//! - the broker lifecycle (`controller::broker_lifecycle`: BrokerRegistration, heartbeats with
//!   the offset its local driver applied, controlled shutdown, producer-id blocks), following
//!   the local voter's leader watch.
//!
//! [`start`] does not wait for anything: `server::start` awaits [`RemoteNode::wait_unfenced`]
//! (Kafka's `initial.broker.registration.timeout.ms`, 60 s) before it accepts clients.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

pub use super::broker_lifecycle::{heartbeat_request, registration_request, Lifecycle};
use super::broker_lifecycle::{BrokerLifecycle, ShutdownView};
use super::driver::{
    self, Clock, ControllerHandle, DriverConfig, MetadataApplier, RunningController,
};
use super::lifecycle::{GiveUp, ShutdownBound};
use super::rpc::{ControllerApis, VoterEndpoint};
use super::{bootstrap_records, local};
use crate::cluster::producer_ids::BlockFeed;
use crate::config::Config;
use crate::quorum::transport::Inlet;
use crate::quorum::{QuorumConfig, QuorumError};

/// Why the node did not come up.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("metadata quorum: {0}")]
    Quorum(#[from] QuorumError),
    #[error("the broker was not unfenced within {0:?}")]
    NotUnfenced(Duration),
    #[error("the broker lifecycle stopped")]
    Stopped,
}

/// The running metadata side of a combined node in a multi-voter quorum.
pub struct RemoteNode {
    pub controller: RunningController,
    listener: tokio::task::JoinHandle<()>,
    broker: BrokerLifecycle,
}

/// A voter's view for the controlled shutdown's wait: the applied controller state and the
/// quorum member's.
struct VoterView<'a> {
    handle: &'a ControllerHandle,
    me: i32,
}

impl ShutdownView for VoterView<'_> {
    fn others_active(&self) -> bool {
        let me = self.me;
        self.handle.read(|c| {
            c.state()
                .brokers
                .values()
                .any(|b| b.registration.broker_id != me && b.is_active())
        })
    }

    fn quorum_lost(
        &self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send + '_>> {
        Box::pin(async move {
            self.handle
                .quorum_status()
                .await
                .is_some_and(|s| s.majority_unreachable)
        })
    }
}

impl RemoteNode {
    /// This broker's lifecycle as the controller last answered.
    pub fn lifecycle(&self) -> watch::Receiver<Lifecycle> {
        self.broker.lifecycle()
    }

    /// Waits until the controller unfenced this broker; returns its broker epoch.
    pub async fn wait_unfenced(&self, limit: Duration) -> Result<i64, RemoteError> {
        self.broker.wait_unfenced(limit).await
    }

    /// A producer-id allocator fed with blocks from the active controller (see
    /// `BrokerLifecycle::producer_ids`).
    pub fn producer_ids(&mut self) -> crate::cluster::ProducerIdAllocator {
        self.broker.producer_ids()
    }

    /// Starts fetching controller blocks into `feed`.
    pub fn feed_producer_ids(&mut self, feed: Arc<BlockFeed>) {
        self.broker.feed_producer_ids(feed);
    }

    /// The link an AlterPartition client sends through (see `BrokerLifecycle`).
    pub fn alter_partition_link(&self) -> crate::replica::alter_partition::ControllerLink {
        self.broker.alter_partition_link()
    }

    /// Stops registering and heartbeating (the controller fences this broker after
    /// `broker.session.timeout.ms`); the quorum member and the listener keep running.
    pub fn stop_heartbeats(&self) {
        self.broker.stop_heartbeats();
    }

    /// Stops the lifecycle, the listener, the driver and the quorum at once, as a crash would
    /// (nothing is flushed beyond what the quorum already fsynced).
    pub fn abort(self) {
        self.broker.abort();
        self.listener.abort();
        self.controller.driver.abort();
        self.controller.quorum.abort();
    }

    /// Kafka's controlled shutdown (`BrokerLifecycle::controlled_shutdown`), with this voter's
    /// view of the other brokers and of the quorum. Returns how long it took.
    pub async fn controlled_shutdown(&self, bound: ShutdownBound) -> Result<Duration, GiveUp> {
        let view = VoterView {
            handle: &self.controller.handle,
            me: self.broker.broker_id(),
        };
        self.broker.controlled_shutdown(bound, &view).await
    }

    /// Stops heartbeating and the listener, then the driver and the quorum (in that order).
    pub async fn shutdown(self) {
        self.broker.shutdown().await;
        self.listener.abort();
        let _ = self.listener.await;
        self.controller.shutdown().await;
    }
}

/// The voter half of a node: the quorum member and the controller driver (replaying every
/// committed entry into `applier`), and the task serving the CONTROLLER listener (quorum frames,
/// the controller RPCs, forwarded admin through `admin`). A combined node adds the broker
/// lifecycle ([`start`]); a controller-only node is just this (`controller::dedicated`).
pub struct Member {
    pub controller: RunningController,
    pub listener: tokio::task::JoinHandle<()>,
}

/// Starts a [`Member`] on `listener`, this node's bound CONTROLLER listener. Must be called
/// inside a tokio runtime.
pub fn start_member(
    config: &Config,
    applier: Arc<dyn MetadataApplier>,
    listener: TcpListener,
    cluster_id: String,
    clock: Clock,
    admin: Option<super::rpc::AdminDelegate>,
) -> Result<Member, RemoteError> {
    let session_ms = config.broker_session_timeout_ms;
    let mut settings = local::settings(config);
    settings.session_timeout_ms = i64::try_from(session_ms).unwrap_or(i64::MAX);
    let driver_config = DriverConfig {
        settings,
        bootstrap: bootstrap_records(&local::bootstrap_for(config)),
        // Fencing is checked often enough to land within a quarter session of the expiry.
        tick_interval: Duration::from_millis((session_ms / 4).clamp(50, 1000)),
        seed: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
        clock: clock.clone(),
    };
    let (handed_tx, handed_rx) = mpsc::channel(64);
    let controller = driver::start_with(
        driver_config,
        QuorumConfig::from_config(config),
        Inlet::Handed(handed_rx),
        applier,
    )?;
    let apis = ControllerApis {
        handle: controller.handle.clone(),
        cluster_id,
        voters: config
            .effective_quorum_voters()
            .iter()
            .map(|v| VoterEndpoint {
                id: v.id,
                host: v.host.clone(),
                port: v.port,
            })
            .collect(),
        listener_name: controller_listener_name(config),
        wall_clock: clock,
        admin,
    };
    let listener = tokio::spawn(crate::server::controller_listener::serve(
        listener, handed_tx, apis,
    ));
    Ok(Member {
        controller,
        listener,
    })
}

/// Starts the node (see the module doc) with `listener`, this node's bound CONTROLLER listener.
/// `cluster_id` is this cluster's (`meta.properties`); `clock` gives wall-clock milliseconds.
/// Must be called inside a tokio runtime.
pub fn start(
    config: &Config,
    applier: Arc<dyn MetadataApplier>,
    listener: TcpListener,
    cluster_id: String,
    clock: Clock,
    admin: Option<super::rpc::AdminDelegate>,
) -> Result<RemoteNode, RemoteError> {
    let Member {
        controller,
        listener,
    } = start_member(config, applier, listener, cluster_id.clone(), clock, admin)?;
    let handle = controller.handle.clone();
    let broker = BrokerLifecycle::start(
        config,
        super::channel::ControllerEndpoints::of_config(config),
        &cluster_id,
        controller.handle.leader(),
        Arc::new(move || handle.applied_offset()),
    );
    Ok(RemoteNode {
        controller,
        listener,
        broker,
    })
}

/// The first listener named in `controller.listener.names` (Kafka's default name otherwise).
fn controller_listener_name(config: &Config) -> String {
    config
        .effective_listeners()
        .into_iter()
        .find(|l| l.controller)
        .map_or_else(|| "CONTROLLER".to_string(), |l| l.name)
}
#[cfg(test)]
#[path = "remote_tests.rs"]
mod tests;
