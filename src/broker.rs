//! The broker's shared state, built once at startup and shared by every connection as `Arc<Broker>`.
//! Thread-safe: every field is either immutable or internally synchronised.

use std::sync::Arc;

use crate::cluster::{identity, ClusterIdentity, ProducerIdAllocator};
use crate::config::Config;
use crate::group::driver::Inbox;
use crate::group::GroupHandle;
use crate::metadata::{MetadataImage, MetadataLog, MetadataRecord};
use crate::replica::ReplicaManager;
use crate::txn::TxnHandle;

pub struct Broker {
    pub config: Arc<Config>,
    pub identity: ClusterIdentity,
    /// Shared (`Arc`) so the controller driver can hold it as its `MetadataApplier`.
    pub replicas: Arc<ReplicaManager>,
    /// The local metadata log; its published image is what every metadata answer reads.
    pub metadata: Arc<MetadataLog>,
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
}

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
        let producer_ids = ProducerIdAllocator::open(&dir).map_err(data_err)?;
        // The local metadata log: this broker's registration, then the topics found on disk.
        // A single node is its own controller.
        let metadata = Arc::new(MetadataLog::new(cluster_id.clone(), config.node_id));
        let registration = identity::registration(&config, 0);
        if let Err(never) = metadata.commit::<std::convert::Infallible>(
            vec![MetadataRecord::RegisterBroker(registration)],
            |_, _| Ok(()),
        ) {
            match never {}
        }
        let replicas = Arc::new(ReplicaManager::open(config.clone(), metadata.clone())?);
        let group_configs =
            Arc::new(crate::cluster::group_config::GroupConfigStore::open(&dir).map_err(data_err)?);
        let identity = ClusterIdentity {
            cluster_id,
            node_id: config.node_id,
            advertised_host: config.advertise.0.clone(),
            advertised_port: config.advertise.1 as i32,
        };
        let (groups, inbox) = GroupHandle::new();
        let (txn, txn_inbox) = TxnHandle::new();
        Ok(Arc::new(Broker {
            config,
            identity,
            replicas,
            metadata,
            producer_ids,
            group_configs,
            groups,
            group_inbox: parking_lot::Mutex::new(Some(inbox)),
            txn,
            txn_inbox: parking_lot::Mutex::new(Some(txn_inbox)),
        }))
    }
}

impl Broker {
    /// The published metadata image (cheap: an `Arc` clone).
    pub fn image(&self) -> Arc<MetadataImage> {
        self.metadata.image()
    }
}

/// Wall-clock milliseconds since the epoch (the only clock the request path reads).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
