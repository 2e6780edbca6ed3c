//! `sluice dev-cluster --brokers N`: N combined brokers (broker + controller, one voter each) in
//! one process, for client test stacks that want several brokers (sarama's functional tests want
//! five, librdkafka's some three). Node i (1-based) serves clients on `host:port + i - 1` and its
//! controller listener on `host:controller_port + i - 1`, keeps its data in `data_dir/node-i`, and
//! every node shares one cluster id (the data directories' own, else `CLUSTER_ID`, else a new one).
//!
//! Each node is configured exactly as a separate `sluice` process would be, through the same
//! Kafka keys (`node.id`, `listeners`, `controller.quorum.voters`, ...) given as `KAFKA_*`
//! environment entries on top of the process environment, so the dev cluster exercises the same
//! configuration, quorum and RPC paths as a cluster of processes; only the process boundary
//! differs. The user's own `KAFKA_*` settings apply to every node, except the keys set here.

use std::path::{Path, PathBuf};

use crate::config::{Config, ConfigError, Overrides, Sources};

/// What `sluice dev-cluster` was asked for.
#[derive(Debug, Clone)]
pub struct DevCluster {
    pub brokers: u16,
    pub host: String,
    /// Node 1's client port; node i's is `port + i - 1`.
    pub port: u16,
    /// Node 1's controller port; node i's is `controller_port + i - 1`.
    pub controller_port: u16,
    pub data_dir: PathBuf,
}

/// Why the nodes' configurations could not be built.
#[derive(Debug, thiserror::Error)]
pub enum DevClusterError {
    #[error("--brokers must be between 1 and 32, not {0}")]
    Brokers(u16),
    #[error("ports {first}..{last} leave the port range")]
    Ports { first: u16, last: u32 },
    #[error("the client ports {0}.. and the controller ports {1}.. overlap")]
    Overlap(u16, u16),
    #[error("node {node}: {source}")]
    Config { node: u16, source: ConfigError },
}

impl DevCluster {
    /// The `KAFKA_*` entries that configure node `i` (1-based).
    pub fn node_env(&self, i: u16) -> Vec<(String, String)> {
        let h = &self.host;
        let port = self.port + i - 1;
        let cport = self.controller_port + i - 1;
        let voters: Vec<String> = (1..=self.brokers)
            .map(|n| format!("{n}@{h}:{}", self.controller_port + n - 1))
            .collect();
        [
            ("KAFKA_NODE_ID", i.to_string()),
            ("KAFKA_PROCESS_ROLES", "broker,controller".to_string()),
            (
                "KAFKA_LISTENERS",
                format!("PLAINTEXT://{h}:{port},CONTROLLER://{h}:{cport}"),
            ),
            (
                "KAFKA_ADVERTISED_LISTENERS",
                format!("PLAINTEXT://{h}:{port}"),
            ),
            (
                "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP",
                "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT".to_string(),
            ),
            ("KAFKA_CONTROLLER_LISTENER_NAMES", "CONTROLLER".to_string()),
            ("KAFKA_INTER_BROKER_LISTENER_NAME", "PLAINTEXT".to_string()),
            ("KAFKA_CONTROLLER_QUORUM_VOTERS", voters.join(",")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// Node `i`'s data directory.
    pub fn node_dir(&self, i: u16) -> PathBuf {
        self.data_dir.join(format!("node-{i}"))
    }

    /// Every node's configuration: `env` (the process environment) with the node's own entries
    /// replacing the keys they set, `file` applied to every node.
    pub fn configs(
        &self,
        env: &[(String, String)],
        file: Option<&Path>,
        cluster_id: &str,
    ) -> Result<Vec<Config>, DevClusterError> {
        if self.brokers == 0 || self.brokers > 32 {
            return Err(DevClusterError::Brokers(self.brokers));
        }
        for first in [self.port, self.controller_port] {
            let last = first as u32 + self.brokers as u32 - 1;
            if last > u16::MAX as u32 || first == 0 {
                return Err(DevClusterError::Ports { first, last });
            }
        }
        let (a, b) = (self.port as u32, self.controller_port as u32);
        let n = self.brokers as u32;
        if a < b + n && b < a + n {
            return Err(DevClusterError::Overlap(self.port, self.controller_port));
        }
        (1..=self.brokers)
            .map(|i| {
                let own = self.node_env(i);
                let mut merged: Vec<(String, String)> = env
                    .iter()
                    .filter(|(k, _)| k != "CLUSTER_ID" && !own.iter().any(|(o, _)| o == k))
                    .cloned()
                    .collect();
                merged.extend(own);
                merged.push(("CLUSTER_ID".into(), cluster_id.to_string()));
                let sources = Sources {
                    file,
                    env: merged,
                    overrides: Overrides {
                        data_dir: Some(self.node_dir(i)),
                        ..Overrides::default()
                    },
                };
                Config::load(&sources).map_err(|source| DevClusterError::Config { node: i, source })
            })
            .collect()
    }
}

/// Starts every node at once (a voter's broker side waits for a quorum majority, so starting them
/// one by one could wait forever). On a failure the nodes already up are shut down again.
pub async fn start(
    configs: Vec<Config>,
) -> Result<Vec<crate::server::RunningBroker>, (i32, crate::server::ServeError)> {
    let tasks: Vec<_> = configs
        .into_iter()
        .map(|c| {
            let id = c.node_id;
            tokio::spawn(async move { (id, crate::server::start(c).await) })
        })
        .collect();
    let mut up = Vec::new();
    let mut failed = None;
    for t in tasks {
        match t.await {
            Ok((_, Ok(r))) => up.push(r),
            Ok((id, Err(e))) => failed = failed.or(Some((id, e))),
            Err(join) => {
                let e = crate::server::ServeError::Startup(crate::broker::StartupError::DataDir {
                    dir: String::new(),
                    source: std::io::Error::other(join.to_string()),
                });
                failed = failed.or(Some((-1, e)));
            }
        }
    }
    match failed {
        None => Ok(up),
        Some(f) => {
            shutdown(up).await;
            Err(f)
        }
    }
}

/// Stops every node cleanly: first their controlled shutdowns together, while every quorum
/// member still runs (one by one, the last nodes would find no quorum majority and wait for
/// the bound), then each node's stop (which hands the quorum leadership over first if that
/// node's voter leads, `RunningBroker::shutdown`).
pub async fn shutdown(mut nodes: Vec<crate::server::RunningBroker>) {
    futures_util::future::join_all(nodes.iter_mut().map(|n| n.controlled_shutdown())).await;
    for n in nodes {
        n.shutdown().await;
    }
}

/// The cluster id the nodes share: node 1's data directory's (a restart of the dev cluster),
/// else `CLUSTER_ID` from the environment, else a new random one (Kafka's base64 form).
pub fn cluster_id(dev: &DevCluster, env: &[(String, String)]) -> String {
    if let Some(id) = crate::cluster::identity::read_cluster_id(&dev.node_dir(1)) {
        return id;
    }
    if let Some((_, id)) = env.iter().find(|(k, v)| k == "CLUSTER_ID" && !v.is_empty()) {
        return id.clone();
    }
    crate::cluster::identity::new_cluster_id()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(brokers: u16) -> DevCluster {
        DevCluster {
            brokers,
            host: "127.0.0.1".into(),
            port: 19092,
            controller_port: 19192,
            data_dir: PathBuf::from("/nonexistent/dev"),
        }
    }

    #[test]
    fn every_node_gets_consecutive_ports_one_voter_set_and_its_own_dir() {
        let d = dev(3);
        let id = crate::cluster::identity::new_cluster_id();
        let configs = d.configs(&[], None, &id).unwrap();
        assert_eq!(configs.len(), 3);
        for (i, c) in configs.iter().enumerate() {
            let n = i as u16 + 1;
            assert_eq!(c.node_id, n as i32);
            assert_eq!(c.data_dir, d.node_dir(n));
            assert_eq!(c.cluster_id.as_deref(), Some(id.as_str()));
            let voters: Vec<String> = c
                .effective_quorum_voters()
                .iter()
                .map(|v| format!("{}@{}", v.id, v.address()))
                .collect();
            assert_eq!(
                voters,
                [
                    "1@127.0.0.1:19192",
                    "2@127.0.0.1:19193",
                    "3@127.0.0.1:19194"
                ]
            );
            let client: Vec<_> = c
                .effective_listeners()
                .into_iter()
                .filter(|l| !l.controller)
                .map(|l| (l.bind.port(), l.advertised))
                .collect();
            assert_eq!(
                client,
                vec![(19091 + n, Some(("127.0.0.1".to_string(), 19091 + n)))]
            );
        }
    }

    #[test]
    fn the_users_settings_apply_to_every_node_but_not_over_the_nodes_own_keys() {
        let env = vec![
            ("KAFKA_NUM_PARTITIONS".to_string(), "7".to_string()),
            ("KAFKA_NODE_ID".to_string(), "42".to_string()),
        ];
        let configs = dev(2)
            .configs(&env, None, &crate::cluster::identity::new_cluster_id())
            .unwrap();
        assert_eq!(
            configs.iter().map(|c| c.num_partitions).collect::<Vec<_>>(),
            [7, 7]
        );
        assert_eq!(
            configs.iter().map(|c| c.node_id).collect::<Vec<_>>(),
            [1, 2]
        );
    }

    #[test]
    fn bad_counts_and_overlapping_or_overflowing_ports_are_refused() {
        assert!(matches!(
            dev(0).configs(&[], None, "x"),
            Err(DevClusterError::Brokers(0))
        ));
        let mut d = dev(3);
        d.controller_port = 19094;
        assert!(matches!(
            d.configs(&[], None, "x"),
            Err(DevClusterError::Overlap(19092, 19094))
        ));
        d.controller_port = 19095;
        assert!(d
            .configs(&[], None, &crate::cluster::identity::new_cluster_id())
            .is_ok());
        d.port = 65534;
        assert!(matches!(
            d.configs(&[], None, "x"),
            Err(DevClusterError::Ports { first: 65534, .. })
        ));
    }
}
