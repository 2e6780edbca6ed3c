//! A controller-only node (`process.roles=controller`, Kafka's dedicated controller): a voter of
//! the controller quorum and nothing else. It runs the quorum member, the controller driver (the
//! state machine on the committed log) and its CONTROLLER listener: quorum frames, the controller
//! RPCs (`controller::rpc`: BrokerRegistration, BrokerHeartbeat, AllocateProducerIds,
//! AlterPartition, DescribeQuorum, ApiVersions) and the admin requests brokers forward to the
//! active controller (`api::forward::ADMIN_APIS`).
//!
//! It is not a broker: it never registers (so no Metadata or DescribeCluster lists it, placement
//! never names it and no partition is ever assigned to it: the controller validates every
//! assignment against the registered brokers), hosts no partition log, runs no group,
//! transaction or share coordinator and accepts no client connection. Its metadata image still
//! follows the committed log (the same `MetadataApplier` a combined node uses, which hosts
//! nothing here because no partition names this node), because the forwarded admin requests are
//! answered by the broker handlers, which decide on the controller and answer once the image
//! shows the outcome, as Kafka's controller answers once its own image has the records.
//!
//! A clean stop has no controlled shutdown (there is no broker to move leaderships from); the
//! quorum leader resigns (`MetadataNode::resign`) as a combined voter does.

use std::sync::Arc;

use tokio::net::TcpListener;

use super::driver::{Clock, MetadataApplier, RunningController};
use super::remote::{start_member, Member, RemoteError};
use super::rpc::AdminDelegate;
use crate::config::Config;

/// The running controller-only node.
pub struct ControllerNode {
    pub controller: RunningController,
    listener: tokio::task::JoinHandle<()>,
}

impl ControllerNode {
    /// Stops serving the CONTROLLER listener, then the driver and the quorum (in that order).
    pub async fn shutdown(self) {
        self.listener.abort();
        let _ = self.listener.await;
        self.controller.shutdown().await;
    }
}

/// Starts the node on `listener`, its bound CONTROLLER listener (also for a lone voter: a
/// controller-only node has no other way to be reached). Returns at once: the quorum elects and
/// the driver replays in the background. Must be called inside a tokio runtime.
pub fn start(
    config: &Config,
    applier: Arc<dyn MetadataApplier>,
    listener: TcpListener,
    cluster_id: String,
    clock: Clock,
    admin: AdminDelegate,
) -> Result<ControllerNode, RemoteError> {
    let Member {
        controller,
        listener,
    } = start_member(config, applier, listener, cluster_id, clock, Some(admin))?;
    tracing::info!(
        "controller {} started (process.roles=controller): a voter of {} serving only its \
         CONTROLLER listener",
        config.node_id,
        config
            .effective_quorum_voters()
            .iter()
            .map(|v| format!("{}@{}", v.id, v.address()))
            .collect::<Vec<_>>()
            .join(",")
    );
    Ok(ControllerNode {
        controller,
        listener,
    })
}
