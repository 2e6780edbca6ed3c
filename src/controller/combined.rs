//! The metadata side of a combined node (broker + controller, Kafka's default `process.roles`),
//! chosen by the voter set: a lone voter (`controller.quorum.voters` unset or naming only this
//! node) runs everything in process (`controller::local`); a member of a multi-voter quorum
//! (`controller::remote`) serves its CONTROLLER listener (quorum traffic and the controller RPCs,
//! plus the admin requests other brokers forward to it), registers with the active controller
//! over BrokerRegistration and is unfenced before the broker accepts clients.
//!
//! Either way the broker's image follows the committed metadata log on this node's own voter,
//! and `ControllerHandle::run` decides commands here while this node leads; a multi-voter node
//! that does not lead forwards them (`api::forward`).

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use super::broker_only::BrokerOnlyNode;
use super::dedicated::ControllerNode;
use super::driver::{Clock, ControllerHandle};
use super::lifecycle::ShutdownBound;
use super::local::{LocalError, LocalNode};
use super::remote::{RemoteError, RemoteNode};
use super::rpc::AdminDelegate;
use crate::cluster::producer_ids::BlockFeed;
use crate::config::Config;
use crate::quorum::resign::GaveUp;
use crate::quorum::Resignation;
use crate::replica::ReplicaManager;

/// Kafka's `initial.broker.registration.timeout.ms` default: how long a starting broker waits
/// to be registered and unfenced.
pub const REGISTRATION_TIMEOUT: Duration = Duration::from_millis(60_000);

/// Whether `config` makes this node one voter of several.
pub fn is_multi_voter(config: &Config) -> bool {
    config
        .effective_quorum_voters()
        .iter()
        .any(|v| v.id != config.node_id)
}

/// Why the metadata side did not come up.
#[derive(Debug, thiserror::Error)]
pub enum MetadataStartError {
    #[error(transparent)]
    Local(#[from] LocalError),
    #[error("metadata quorum member: {0}")]
    Remote(#[from] RemoteError),
    #[error(
        "controller.quorum.voters names other voters, but no CONTROLLER listener is bound \
         (listeners / controller.listener.names)"
    )]
    NoControllerListener,
}

/// The running metadata side.
pub enum MetadataNode {
    Local(LocalNode),
    Remote(RemoteNode),
    /// `process.roles=controller`: a voter and no broker (`controller::dedicated`).
    Controller(ControllerNode),
    /// `process.roles=broker`: an observer of the quorum and a broker (`controller::broker_only`).
    BrokerOnly(BrokerOnlyNode),
}

impl MetadataNode {
    /// This node's controller (None on a broker-only node: it has no voter).
    pub fn handle(&self) -> Option<&ControllerHandle> {
        match self {
            MetadataNode::Local(n) => Some(&n.controller.handle),
            MetadataNode::Remote(n) => Some(&n.controller.handle),
            MetadataNode::Controller(n) => Some(&n.controller.handle),
            MetadataNode::BrokerOnly(_) => None,
        }
    }

    /// A broker-only node's controller endpoints (what its observer learnt), None otherwise.
    pub fn controllers(&self) -> Option<super::channel::ControllerEndpoints> {
        match self {
            MetadataNode::BrokerOnly(n) => Some(n.controllers()),
            _ => None,
        }
    }

    /// The quorum leader as this node knows it: its voter's, or the observer's.
    pub fn leader(&self) -> tokio::sync::watch::Receiver<crate::quorum::LeaderAndEpoch> {
        match self {
            MetadataNode::BrokerOnly(n) => n.leader(),
            MetadataNode::Local(n) => n.controller.handle.leader(),
            MetadataNode::Remote(n) => n.controller.handle.leader(),
            MetadataNode::Controller(n) => n.controller.handle.leader(),
        }
    }

    /// A started AlterPartition client for this node (`replica::alter_partition`): over the
    /// wire to the active controller, or on the lone voter's own controller. Must be called
    /// inside a tokio runtime; the task ends when every clone of the client is dropped.
    pub fn alter_partition_client(
        &self,
    ) -> (
        crate::replica::alter_partition::AlterPartitionClient,
        tokio::task::JoinHandle<()>,
    ) {
        let link = match self {
            MetadataNode::Local(n) => n.alter_partition_link(),
            MetadataNode::Remote(n) => n.alter_partition_link(),
            MetadataNode::BrokerOnly(n) => n.alter_partition_link(),
            // No partition is ever led here; the link is never used.
            MetadataNode::Controller(n) => crate::replica::alter_partition::ControllerLink::Local {
                handle: n.controller.handle.clone(),
                broker_id: -1,
                broker_epoch: -1,
            },
        };
        crate::replica::alter_partition::AlterPartitionClient::start(link)
    }

    /// The broker epoch of this broker's current registration, if registered.
    pub fn broker_epoch(&self) -> Option<i64> {
        match self {
            MetadataNode::Local(n) => Some(n.broker_epoch),
            MetadataNode::Remote(n) => n.lifecycle().borrow().broker_epoch(),
            MetadataNode::BrokerOnly(n) => n.lifecycle().borrow().broker_epoch(),
            MetadataNode::Controller(_) => None,
        }
    }

    /// A clean stop's first step (Kafka's `BrokerServer.shutdown` with
    /// `controlled.shutdown.enable`): ask the controller to move this broker's leaderships away
    /// and wait until it lets the broker go, within `broker.session.timeout.ms` (and, in a
    /// multi-voter quorum, while this node's quorum member knows a leader: see
    /// `controller::lifecycle`). Logs one line either way; the stop goes on regardless.
    pub async fn controlled_shutdown(&mut self, config: &Config) {
        let id = config.node_id;
        let limit = Duration::from_millis(config.broker_session_timeout_ms);
        let result = match self {
            MetadataNode::Local(n) => {
                let bound = ShutdownBound {
                    limit,
                    leaderless_limit: None,
                };
                n.controlled_shutdown(bound).await
            }
            MetadataNode::Remote(n) => {
                let bound = ShutdownBound {
                    limit,
                    leaderless_limit: Some(Duration::from_millis(
                        config.quorum_election_timeout_ms.max(1),
                    )),
                };
                n.controlled_shutdown(bound).await
            }
            MetadataNode::BrokerOnly(n) => {
                let bound = ShutdownBound {
                    limit,
                    leaderless_limit: Some(Duration::from_millis(
                        config.quorum_election_timeout_ms.max(1),
                    )),
                };
                n.controlled_shutdown(bound).await
            }
            // Not a broker: no leaderships to move.
            MetadataNode::Controller(_) => return,
        };
        match result {
            Ok(took) => tracing::info!(
                "controlled shutdown of broker {id} completed in {} ms: the controller moved its leaderships",
                took.as_millis()
            ),
            Err(why) => tracing::warn!(
                "controlled shutdown of broker {id} abandoned: {why}; stopping without it (the \
                 controller fences this broker after broker.session.timeout.ms)"
            ),
        }
    }

    /// A clean stop's second step, after the controlled shutdown (which still needs the
    /// quorum): if this node's voter leads the quorum, it hands leadership to a caught-up voter
    /// and waits for it, at most `controller.quorum.election.timeout.ms`, so the other nodes have
    /// a leader at once instead of after an election timeout (Kafka's EndQuorumEpoch). Logs one
    /// line when it leads; the stop goes on regardless.
    pub async fn resign(&self, config: &Config) {
        let id = config.node_id;
        let limit = Duration::from_millis(config.quorum_election_timeout_ms.max(1));
        let Some(handle) = self.handle() else {
            return; // not a voter
        };
        match handle.resign_quorum(limit).await {
            Resignation::Handed { to, leader, took } => tracing::info!(
                "quorum leader {id} resigned: node {leader} leads after {} ms (handed to node {to})",
                took.as_millis()
            ),
            Resignation::NoTransferee => tracing::info!(
                "quorum leader {id} stops without handing over: no other voter is reachable \
                 (stopped, or silent for controller.quorum.election.timeout.ms)"
            ),
            Resignation::GaveUp { to, why } => tracing::warn!(
                "quorum leader {id} stops without a successor: node {to} did not take over ({})",
                match why {
                    GaveUp::NoCampaign(d) => format!("no campaign within {} ms", d.as_millis()),
                    GaveUp::NoLeader(d) => format!("no new leader within {} ms", d.as_millis()),
                }
            ),
            Resignation::NotLeader | Resignation::Alone | Resignation::Stopped => {}
        }
    }

    /// Stops heartbeating, the listener, the driver and the quorum.
    pub async fn shutdown(self) {
        match self {
            MetadataNode::Local(n) => n.shutdown().await,
            MetadataNode::Remote(n) => n.shutdown().await,
            MetadataNode::Controller(n) => n.shutdown().await,
            MetadataNode::BrokerOnly(n) => n.shutdown().await,
        }
    }
}

/// What a multi-voter node needs beyond the config.
pub struct MemberParts {
    /// This node's bound CONTROLLER listener.
    pub listener: TcpListener,
    pub cluster_id: String,
    /// Runs forwarded admin requests through this broker's handlers.
    pub admin: AdminDelegate,
    /// Producer-id blocks for the broker's allocator.
    pub producer_ids: Arc<BlockFeed>,
}

/// Starts a broker-only node's metadata side (the observer and the lifecycle), returned once
/// the broker is unfenced.
pub async fn start_broker_only(
    config: &Config,
    replicas: Arc<ReplicaManager>,
    metadata: Arc<crate::metadata::MetadataLog>,
    cluster_id: String,
    producer_ids: Arc<BlockFeed>,
) -> Result<MetadataNode, MetadataStartError> {
    let mut node = super::broker_only::start(config, replicas, metadata, cluster_id);
    node.feed_producer_ids(producer_ids);
    match node.wait_unfenced(REGISTRATION_TIMEOUT).await {
        Ok(epoch) => {
            tracing::info!(
                "broker {} registered with the controller quorum and unfenced (broker epoch \
                 {epoch}, metadata offset {})",
                config.node_id,
                node.applied_offset()
            );
            Ok(MetadataNode::BrokerOnly(node))
        }
        Err(e) => {
            node.shutdown().await;
            Err(e.into())
        }
    }
}

/// Starts the metadata side: the lone voter when `member` is `None`, else this node's member of
/// the multi-voter quorum, returned once the broker is unfenced.
pub async fn start(
    config: &Config,
    replicas: Arc<ReplicaManager>,
    member: Option<MemberParts>,
    clock: Clock,
) -> Result<MetadataNode, MetadataStartError> {
    let Some(parts) = member else {
        return Ok(MetadataNode::Local(
            super::local::start(config, replicas, None, clock).await?,
        ));
    };
    let mut node = super::remote::start(
        config,
        replicas,
        parts.listener,
        parts.cluster_id,
        clock,
        Some(parts.admin),
    )?;
    node.feed_producer_ids(parts.producer_ids);
    match node.wait_unfenced(REGISTRATION_TIMEOUT).await {
        Ok(epoch) => {
            tracing::info!(
                "broker {} registered with the controller quorum and unfenced (broker epoch {epoch})",
                config.node_id
            );
            Ok(MetadataNode::Remote(node))
        }
        Err(e) => {
            node.shutdown().await;
            Err(e.into())
        }
    }
}
