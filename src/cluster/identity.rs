//! Cluster identity: the cluster id kept in `meta.properties` so it is stable across restarts, the
//! node id, the endpoint advertised to clients, and this broker's registration (the
//! `RegisterBrokerRecord` that puts it, with an endpoint per client listener, into the metadata
//! image: every "this node" answer is read from there).

use std::path::Path;

use crate::log::checkpoint::{self, MetaProperties, META_PROPERTIES};
use crate::log::LogError;
use crate::metadata::{BrokerEndpoint, RegisterBroker};

/// Who this broker is. Immutable after startup.
#[derive(Debug, Clone)]
pub struct ClusterIdentity {
    /// 22-character base64url cluster id, as Kafka formats it.
    pub cluster_id: String,
    pub node_id: i32,
    pub advertised_host: String,
    pub advertised_port: i32,
}

/// Why the data directory's identity could not be used.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error(transparent)]
    Log(#[from] LogError),
    #[error("{path} belongs to node.id {found}, but this broker is node.id {configured} (key `node.id`)")]
    OtherNode {
        path: String,
        found: i32,
        configured: i32,
    },
    #[error("Invalid cluster.id in {path}: expected {configured} (CLUSTER_ID), but read {found}")]
    OtherCluster {
        path: String,
        found: String,
        configured: String,
    },
}

/// Reads `meta.properties` from `data_dir`, or creates it with a new cluster id. A file naming a
/// different node id is an error: the directory belongs to another broker.
pub fn load_or_create(data_dir: &Path, node_id: i32) -> Result<String, IdentityError> {
    load_or_format(data_dir, node_id, None)
}

/// [`load_or_create`], formatting a new directory with `cluster_id` when given (`CLUSTER_ID`, as
/// the Kafka images pass it to `kafka-storage format`); an existing directory must carry it.
pub fn load_or_format(
    data_dir: &Path,
    node_id: i32,
    cluster_id: Option<&str>,
) -> Result<String, IdentityError> {
    let path = data_dir.join(META_PROPERTIES);
    match checkpoint::read_meta_properties(&path)? {
        Some(meta) if cluster_id.is_some_and(|c| c != meta.cluster_id) => {
            Err(IdentityError::OtherCluster {
                path: path.display().to_string(),
                found: meta.cluster_id,
                configured: cluster_id.unwrap_or_default().to_string(),
            })
        }
        Some(meta) if meta.node_id != node_id => Err(IdentityError::OtherNode {
            path: path.display().to_string(),
            found: meta.node_id,
            configured: node_id,
        }),
        Some(meta) => Ok(meta.cluster_id),
        None => {
            let meta = MetaProperties {
                node_id,
                cluster_id: match cluster_id {
                    Some(c) => c.to_string(),
                    None => new_cluster_id(),
                },
                directory_id: Some(checkpoint::uuid_to_kafka_string(
                    checkpoint::random_kafka_uuid(),
                )),
            };
            checkpoint::write_meta_properties(&path, &meta)?;
            Ok(meta.cluster_id)
        }
    }
}

/// The cluster id of `data_dir`'s `meta.properties`, if it has a readable one.
pub fn read_cluster_id(data_dir: &Path) -> Option<String> {
    checkpoint::read_meta_properties(&data_dir.join(META_PROPERTIES))
        .ok()
        .flatten()
        .map(|m| m.cluster_id)
}

/// A new random cluster id in Kafka's form (22 characters of base64url).
pub fn new_cluster_id() -> String {
    checkpoint::uuid_to_kafka_string(checkpoint::random_kafka_uuid())
}

/// This broker's registration: one endpoint per advertised (client) listener, by listener name;
/// unfenced at once (a single node is caught up with its own metadata log by construction).
pub fn registration(config: &crate::config::Config, broker_epoch: i64) -> RegisterBroker {
    let endpoints = config
        .effective_listeners()
        .into_iter()
        .filter(|l| !l.controller)
        .filter_map(|l| {
            let (host, port) = l.advertised?;
            Some(BrokerEndpoint {
                name: l.name,
                host,
                port,
                // Sluice serves PLAINTEXT only.
                security_protocol: 0,
            })
        })
        .collect();
    RegisterBroker {
        broker_id: config.node_id,
        incarnation_id: uuid::Uuid::new_v4(),
        broker_epoch,
        endpoints,
        features: Vec::new(),
        rack: None,
        fenced: false,
        in_controlled_shutdown: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registration_lists_every_client_listener_by_name() {
        use crate::config::{Config, Listener};
        let config = Config {
            node_id: 7,
            listeners: vec![
                Listener {
                    name: "PLAINTEXT".into(),
                    bind: "127.0.0.1:9092".parse().unwrap(),
                    advertised: Some(("a.example".into(), 9092)),
                    controller: false,
                },
                Listener {
                    name: "CONTROLLER".into(),
                    bind: "127.0.0.1:9093".parse().unwrap(),
                    advertised: None,
                    controller: true,
                },
                Listener {
                    name: "INTERNAL".into(),
                    bind: "127.0.0.1:9094".parse().unwrap(),
                    advertised: Some(("b.example".into(), 19094)),
                    controller: false,
                },
            ],
            ..Config::default()
        };
        let r = registration(&config, 3);
        assert_eq!((r.broker_id, r.broker_epoch, r.fenced), (7, 3, false));
        let names: Vec<_> = r
            .endpoints
            .iter()
            .map(|e| (e.name.as_str(), e.host.as_str(), e.port))
            .collect();
        assert_eq!(
            names,
            vec![
                ("PLAINTEXT", "a.example", 9092),
                ("INTERNAL", "b.example", 19094)
            ]
        );
    }

    #[test]
    fn cluster_id_is_stable_across_loads_and_guards_the_node_id() {
        let dir = tempfile::tempdir().unwrap();
        let a = load_or_create(dir.path(), 1).unwrap();
        let b = load_or_create(dir.path(), 1).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.len(), 22);
        assert!(matches!(
            load_or_create(dir.path(), 2),
            Err(IdentityError::OtherNode { found: 1, .. })
        ));
    }

    #[test]
    fn configured_cluster_id_formats_a_new_directory_and_must_match_an_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let id = "MkU3OEVBNTcwNTJENDM2Qg";
        assert_eq!(load_or_format(dir.path(), 1, Some(id)).unwrap(), id);
        assert_eq!(load_or_format(dir.path(), 1, None).unwrap(), id);
        assert!(matches!(
            load_or_format(dir.path(), 1, Some("AAAAAAAAAAAAAAAAAAAAAA")),
            Err(IdentityError::OtherCluster { .. })
        ));
    }
}
