//! A broker-only node (`process.roles=broker`, Kafka's usual layout of N brokers beside 3
//! controllers): no voter, no controller state machine, no CONTROLLER listener. Its metadata
//! side is an observer of the quorum (`controller::observer`: Fetch / FetchSnapshot of
//! `__cluster_metadata` from the quorum leader, replayed into the broker's `MetadataApplier`)
//! plus the broker lifecycle every registered broker runs (`controller::broker_lifecycle`:
//! BrokerRegistration, heartbeats with the observer's applied offset, controlled shutdown,
//! producer-id blocks, AlterPartition), both following the leader the observer learnt. Admin
//! requests are always forwarded (`api::forward`, with the observer's leader watch).
//!
//! [`start`] returns at once; `MetadataNode` waits for the unfencing as for a combined node.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::broker_lifecycle::{BrokerLifecycle, Lifecycle, ShutdownView};
use super::channel::ControllerEndpoints;
use super::driver::MetadataApplier;
use super::lifecycle::{GiveUp, ShutdownBound};
use super::observer::{Observer, ObserverConfig};
use super::remote::RemoteError;
use crate::cluster::producer_ids::BlockFeed;
use crate::config::Config;
use crate::metadata::MetadataLog;
use crate::quorum::LeaderAndEpoch;

/// The running metadata side of a broker-only node.
pub struct BrokerOnlyNode {
    observer: Observer,
    broker: BrokerLifecycle,
    metadata: Arc<MetadataLog>,
    /// Shared by the observer, the lifecycle's channels and the broker's Forwarder.
    voters: ControllerEndpoints,
}

/// The observer's view for the controlled shutdown's wait: other brokers from the image; the
/// quorum's health is not visible from here (the wait gives up on a leaderless quorum instead).
struct ObserverView<'a> {
    metadata: &'a MetadataLog,
    me: i32,
}

impl ShutdownView for ObserverView<'_> {
    fn others_active(&self) -> bool {
        self.metadata
            .image()
            .brokers()
            .any(|b| b.id != self.me && !b.fenced && !b.in_controlled_shutdown)
    }

    fn quorum_lost(
        &self,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send + '_>> {
        Box::pin(async { false })
    }
}

impl BrokerOnlyNode {
    /// The controllers' endpoints this node's channels share.
    pub fn controllers(&self) -> ControllerEndpoints {
        self.voters.clone()
    }

    /// The quorum leader as the observer last learnt it.
    pub fn leader(&self) -> watch::Receiver<LeaderAndEpoch> {
        self.observer.leader()
    }

    /// The offset of the last metadata entry this broker's image holds.
    pub fn applied_offset(&self) -> u64 {
        *self.observer.applied().borrow()
    }

    /// This broker's lifecycle as the controller last answered.
    pub fn lifecycle(&self) -> watch::Receiver<Lifecycle> {
        self.broker.lifecycle()
    }

    /// Waits until the controller unfenced this broker; returns its broker epoch.
    pub async fn wait_unfenced(&self, limit: Duration) -> Result<i64, RemoteError> {
        self.broker.wait_unfenced(limit).await
    }

    /// Starts fetching controller blocks into `feed`.
    pub fn feed_producer_ids(&mut self, feed: Arc<BlockFeed>) {
        self.broker.feed_producer_ids(feed);
    }

    /// The link an AlterPartition client sends through.
    pub fn alter_partition_link(&self) -> crate::replica::alter_partition::ControllerLink {
        self.broker.alter_partition_link()
    }

    /// Kafka's controlled shutdown (`BrokerLifecycle::controlled_shutdown`).
    pub async fn controlled_shutdown(&self, bound: ShutdownBound) -> Result<Duration, GiveUp> {
        let view = ObserverView {
            metadata: &self.metadata,
            me: self.broker.broker_id(),
        };
        self.broker.controlled_shutdown(bound, &view).await
    }

    /// Stops the lifecycle, then the observer.
    pub async fn shutdown(self) {
        self.broker.shutdown().await;
        self.observer.shutdown().await;
    }
}

/// Starts the observer into `applier` (whose image `metadata` publishes) and the broker
/// lifecycle. Must be called inside a tokio runtime.
pub fn start(
    config: &Config,
    applier: Arc<dyn MetadataApplier>,
    metadata: Arc<MetadataLog>,
    cluster_id: String,
) -> BrokerOnlyNode {
    let voters = ControllerEndpoints::of_config(config);
    tracing::info!(
        "broker {} started (process.roles=broker): observing the controller quorum {}{}",
        config.node_id,
        voters.describe(),
        if config.quorum_voters.is_empty() {
            " (controller.quorum.bootstrap.servers: node ids learned from their answers)"
        } else {
            ""
        }
    );
    let observer = Observer::start(
        ObserverConfig {
            node_id: config.node_id,
            cluster_id: cluster_id.clone(),
            voters: voters.clone(),
        },
        applier,
    );
    let applied = observer.applied();
    let endpoints = voters.clone();
    let broker = BrokerLifecycle::start(
        config,
        voters,
        &cluster_id,
        observer.leader(),
        Arc::new(move || *applied.borrow()),
    );
    BrokerOnlyNode {
        observer,
        broker,
        metadata,
        voters: endpoints,
    }
}
