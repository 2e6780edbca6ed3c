//! The broker's shared state, built once at startup and shared by every connection as `Arc<Broker>`.
//! Thread-safe: every field is either immutable or internally synchronised.

use std::sync::Arc;

use crate::cluster::{identity, ClusterIdentity, ProducerIdAllocator};
use crate::config::Config;
use crate::controller::driver::{ControllerHandle, DriverError};
use crate::controller::Outcome;
use crate::group::driver::Inbox;
use crate::group::GroupHandle;
use crate::metadata::{MetadataImage, MetadataLog};
use crate::replica::ReplicaManager;
use crate::txn::TxnHandle;

pub struct Broker {
    pub config: Arc<Config>,
    pub identity: ClusterIdentity,
    /// Shared (`Arc`) so the controller driver can hold it as its `MetadataApplier`.
    pub replicas: Arc<ReplicaManager>,
    /// The published metadata image (moved on by the controller driver's applier, the
    /// `ReplicaManager`); what every metadata answer reads.
    pub metadata: Arc<MetadataLog>,
    /// The controller that decides topics, partitions and configs: set by
    /// [`Broker::start_metadata`] (`server::start`) before any request is served, taken away by
    /// [`Broker::detach_controller`] at shutdown (so the driver, whose last handle goes, stops).
    controller: parking_lot::RwLock<Option<ControllerHandle>>,
    /// A member of a multi-voter quorum: where controller-decided requests go while this node's
    /// controller does not lead (`api::forward`). None on a lone voter.
    forwarder: parking_lot::RwLock<Option<Arc<crate::api::forward::Forwarder>>>,
    /// A member of a multi-voter quorum: the producer-id blocks the controller hands out
    /// (AllocateProducerIds), which `producer_ids` draws from.
    producer_id_blocks: Option<Arc<crate::cluster::producer_ids::BlockFeed>>,
    pub producer_ids: ProducerIdAllocator,
    /// Per-group config overrides (GROUP config resources), also read by the group coordinator.
    pub group_configs: Arc<crate::cluster::group_config::GroupConfigStore>,
    /// The group coordinator task's request channel.
    pub groups: GroupHandle,
    /// The coordinator's receiving side until `server::start` hands it to the coordinator task.
    pub group_inbox: parking_lot::Mutex<Option<Inbox>>,
    /// The transaction coordinator task's request channel and the produce-path view.
    pub txn: TxnHandle,
    /// The transaction coordinator's receiving side until `server::start` hands it to its task.
    pub txn_inbox: parking_lot::Mutex<Option<crate::txn::driver::Inbox>>,
    /// The share-partitions this broker leads and the share sessions (KIP-932; ShareFetch /
    /// ShareAcknowledge). One mutex: each request's share changes are atomic.
    pub shares: parking_lot::Mutex<crate::share::registry::ShareRegistry>,
    /// The share coordinator's state of the `__share_group_state` keys hosted here (loaded on
    /// first use; `api::share_state`). Locked after `shares` when both are held.
    pub share_state: parking_lot::Mutex<crate::share::coordinator::ShareCoordinator>,
    /// The share-state reads and writes of keys whose `__share_group_state` partition another
    /// broker leads, queued per state partition (`share_state::remote`).
    pub share_remote: crate::share_state::remote::Outbox,
    /// The client quota managers (`producer_byte_rate`, `consumer_byte_rate`): Produce and
    /// consumer Fetch record here and answer the throttle time (`client_quota`).
    pub quotas: crate::client_quota::QuotaManagers,
}

/// `group.share.max.share.sessions` (Kafka 4.1's default).
const SHARE_MAX_SESSIONS: usize = 2000;

/// A startup failure, naming what failed.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    /// Another broker holds the data directory's lock (or it cannot be taken).
    #[error(transparent)]
    DataDirLocked(#[from] crate::log::dir_lock::DirLockError),
    #[error("data directory {dir}: {source}")]
    DataDir { dir: String, source: std::io::Error },
    #[error("data directory identity: {0}")]
    Identity(#[from] crate::cluster::identity::IdentityError),
    #[error("loading logs: {0}")]
    Logs(#[from] crate::replica::manager::TopicError),
}

impl Broker {
    /// Opens the data directory (creating it), loads identity and every log.
    pub fn open(config: Config) -> Result<Arc<Broker>, StartupError> {
        let config = Arc::new(config);
        let dir = config.data_dir.clone();
        let data_err = |source| StartupError::DataDir {
            dir: dir.display().to_string(),
            source,
        };
        std::fs::create_dir_all(&dir).map_err(data_err)?;
        let cluster_id =
            identity::load_or_format(&dir, config.node_id, config.cluster_id.as_deref())?;
        // Several brokers: producer ids come in blocks from the controller, unique cluster-wide.
        // A controller-only node allocates none, but writes no producer-id-block file either.
        let producer_id_blocks = (crate::controller::combined::is_multi_voter(&config)
            || !config.process_roles.is_broker())
        .then(|| Arc::new(crate::cluster::producer_ids::BlockFeed::default()));
        let producer_ids = match &producer_id_blocks {
            Some(feed) => ProducerIdAllocator::from_controller(feed.clone()),
            None => ProducerIdAllocator::open(&dir).map_err(data_err)?,
        };
        // The image starts empty: the quorum's replay (`start_metadata`) fills it, and the
        // topics on disk stay invisible until the log names them or adoption writes them.
        // A single node is its own controller.
        let metadata = Arc::new(MetadataLog::new(cluster_id.clone(), config.node_id));
        let replicas = Arc::new(ReplicaManager::open_unlogged(
            config.clone(),
            metadata.clone(),
        )?);
        let group_configs = Arc::new(
            crate::cluster::group_config::GroupConfigStore::open(&dir, metadata.clone())
                .map_err(data_err)?,
        );
        let identity = ClusterIdentity {
            cluster_id,
            node_id: config.node_id,
            advertised_host: config.advertise.0.clone(),
            advertised_port: config.advertise.1 as i32,
        };
        let (groups, inbox) = GroupHandle::new();
        let (txn, txn_inbox) = TxnHandle::new();
        let quota_window = crate::client_quota::QuotaWindow::new(
            config.quota_window_num,
            config.quota_window_size_seconds,
        );
        let updates_per_snapshot = config
            .share_coordinator_snapshot_update_records_per_snapshot
            .max(0) as u32;
        Ok(Arc::new_cyclic(|me| Broker {
            share_remote: crate::share_state::remote::Outbox::new(me.clone()),
            config,
            identity,
            replicas,
            metadata,
            controller: parking_lot::RwLock::new(None),
            forwarder: parking_lot::RwLock::new(None),
            producer_id_blocks,
            producer_ids,
            group_configs,
            groups,
            group_inbox: parking_lot::Mutex::new(Some(inbox)),
            txn,
            txn_inbox: parking_lot::Mutex::new(Some(txn_inbox)),
            shares: parking_lot::Mutex::new(crate::share::registry::ShareRegistry::new(
                SHARE_MAX_SESSIONS,
            )),
            share_state: parking_lot::Mutex::new(crate::share::coordinator::ShareCoordinator::new(
                updates_per_snapshot,
            )),
            quotas: crate::client_quota::QuotaManagers::new(quota_window),
        }))
    }
}

impl Broker {
    /// The published metadata image (cheap: an `Arc` clone).
    pub fn image(&self) -> Arc<MetadataImage> {
        self.metadata.image()
    }

    /// Starts the metadata side of this combined node (`controller::local::start`: the quorum
    /// replays into hosting, this broker registers and is unfenced, the topics on disk the log
    /// does not name are adopted) and routes this broker's topic admin to it. Call once, after
    /// [`Broker::open`] and before the coordinators load or requests are served.
    /// A member of a multi-voter quorum needs its bound CONTROLLER listener.
    pub async fn start_metadata(
        self: &Arc<Self>,
        controller_listener: Option<tokio::net::TcpListener>,
    ) -> Result<
        crate::controller::combined::MetadataNode,
        crate::controller::combined::MetadataStartError,
    > {
        use crate::controller::combined::{self, MemberParts, MetadataNode, MetadataStartError};
        if !self.config.process_roles.is_broker() {
            // A controller-only node: the voter, its listener and the forwarded admin; no
            // registration, so nothing to wait for.
            let listener = controller_listener.ok_or(MetadataStartError::NoControllerListener)?;
            let node = crate::controller::dedicated::start(
                &self.config,
                self.replicas.clone(),
                listener,
                self.identity.cluster_id.clone(),
                Arc::new(now_ms),
                self.admin_delegate(),
            )?;
            *self.controller.write() = Some(node.controller.handle.clone());
            return Ok(MetadataNode::Controller(node));
        }
        if !self.config.process_roles.is_controller() {
            // A broker-only node: an observer of the quorum; admin always goes to the leader.
            let feed = self.producer_id_blocks.clone().unwrap_or_default();
            let node = combined::start_broker_only(
                &self.config,
                self.replicas.clone(),
                self.metadata.clone(),
                self.identity.cluster_id.clone(),
                feed,
            )
            .await?;
            let controllers = node.controllers().unwrap_or_else(|| {
                crate::controller::channel::ControllerEndpoints::of_config(&self.config)
            });
            *self.forwarder.write() = Some(Arc::new(crate::api::forward::Forwarder::new(
                self.config.node_id,
                controllers,
                node.leader(),
            )));
            return Ok(node);
        }
        let member = if combined::is_multi_voter(&self.config) {
            let listener = controller_listener.ok_or(MetadataStartError::NoControllerListener)?;
            let feed = self.producer_id_blocks.clone().unwrap_or_default();
            Some(MemberParts {
                listener,
                cluster_id: self.identity.cluster_id.clone(),
                admin: self.admin_delegate(),
                producer_ids: feed,
            })
        } else {
            None
        };
        let multi = member.is_some();
        // Admin is routed here once this broker is unfenced; a request forwarded to this node
        // before that fails (`Stopped`) and its client retries, as for a controller starting up.
        let node = combined::start(
            &self.config,
            self.replicas.clone(),
            member,
            Arc::new(now_ms),
        )
        .await?;
        *self.controller.write() = node.handle().cloned();
        if multi {
            *self.forwarder.write() = Some(Arc::new(crate::api::forward::Forwarder::new(
                self.config.node_id,
                crate::controller::channel::ControllerEndpoints::of_config(&self.config),
                node.leader(),
            )));
        }
        Ok(node)
    }

    /// Forwarded admin requests (the CONTROLLER listener's) run through this node's handlers; a
    /// weak reference, so the controller listener does not keep the broker alive.
    fn admin_delegate(self: &Arc<Self>) -> crate::controller::rpc::AdminDelegate {
        let weak = Arc::downgrade(self);
        Arc::new(move |frame| {
            let broker = weak.upgrade();
            Box::pin(async move {
                match broker {
                    Some(b) => crate::api::forward::handle_forwarded(&b, frame).await,
                    None => Err(crate::api::CloseReason::HandlerFailed {
                        key: kafka_protocol::messages::ApiKey::CreateTopics,
                        version: 0,
                        reason: "the broker is shutting down".into(),
                    }),
                }
            })
        })
    }

    /// Where controller-decided requests go when this node's controller does not lead (a
    /// member of a multi-voter quorum only).
    pub fn forwarder(&self) -> Option<Arc<crate::api::forward::Forwarder>> {
        self.forwarder.read().clone()
    }

    /// The local controller's handle, while attached.
    pub fn controller_handle(&self) -> Option<ControllerHandle> {
        self.controller.read().clone()
    }

    /// Stops routing admin to the controller (later commands fail with `Stopped`): call before
    /// `LocalNode::shutdown`, which waits for the driver to see its last handle go.
    pub fn detach_controller(&self) {
        self.forwarder.write().take();
        self.controller.write().take();
    }

    /// Runs one controller command (`ControllerHandle::run`): answered once its records are
    /// committed and this broker's image shows them. Async: never block a runtime worker on it.
    pub async fn controller_run<T: Send + 'static>(
        &self,
        command: impl FnOnce(
                &mut crate::controller::Controller,
                &crate::controller::driver::CommandContext,
            ) -> Outcome<T>
            + Send
            + 'static,
    ) -> Result<T, DriverError> {
        let handle = self.controller.read().clone().ok_or(DriverError::Stopped)?;
        handle.run(command).await
    }

    /// [`Broker::controller_run`] for a caller on tokio's blocking pool (a handler that also
    /// does file I/O, `api::on_blocking_pool`). Never call it on a runtime worker: the driver
    /// could not run (a current-thread runtime would deadlock). Outside a runtime it fails with
    /// `Stopped`.
    pub fn controller_run_blocking<T: Send + 'static>(
        &self,
        command: impl FnOnce(
                &mut crate::controller::Controller,
                &crate::controller::driver::CommandContext,
            ) -> Outcome<T>
            + Send
            + 'static,
    ) -> Result<T, DriverError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| DriverError::Stopped)?;
        runtime.block_on(self.controller_run(command))
    }
}

/// Tests: [`Broker::open`] and [`Broker::start_metadata`]; the metadata side's tasks run until
/// the test's runtime ends.
#[cfg(test)]
pub async fn open_started(config: Config) -> Arc<Broker> {
    let broker = Broker::open(config).expect("broker opens");
    broker
        .start_metadata(None)
        .await
        .expect("metadata side starts");
    broker
}

/// Wall-clock milliseconds since the epoch (the only clock the request path reads).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
