//! Helpers shared by the integration tests that start real `sluice` processes.

pub mod wire;

/// A port free on 127.0.0.1 with the next `n - 1` ports free too (consecutive node ports).
pub fn free_ports(n: u16) -> u16 {
    loop {
        let first = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if first > 60000 {
            continue;
        }
        if (0..n).all(|i| std::net::TcpListener::bind(("127.0.0.1", first + i)).is_ok()) {
            return first;
        }
    }
}

/// `sluice dev-cluster --brokers 3` on client ports `port..port + 3` and controller ports
/// `controller_port..`, data under `dir`, quiet. (Not every test file that includes this module
/// starts one.)
#[allow(dead_code)]
pub fn spawn_dev_cluster(
    dir: &std::path::Path,
    port: u16,
    controller_port: u16,
) -> std::process::Child {
    use std::process::{Command, Stdio};
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["dev-cluster", "--brokers", "3", "--port"])
        .arg(port.to_string())
        .arg("--controller-port")
        .arg(controller_port.to_string())
        .arg("--data-dir")
        .arg(dir)
        .env_clear()
        .env("SLUICE_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn sluice dev-cluster")
}

/// Three combined nodes started in this process (`dev_cluster::start`) on free ports, data under
/// `dir`, with `env` as their `KAFKA_*` settings: the layout, each node's configuration (to
/// restart one) and the running nodes (node i at index i - 1).
#[allow(dead_code)]
pub async fn three_nodes(
    dir: &std::path::Path,
    env: &[(&str, &str)],
) -> (
    sluice::dev_cluster::DevCluster,
    Vec<sluice::config::Config>,
    Vec<Option<sluice::server::RunningBroker>>,
) {
    use sluice::dev_cluster::{self, DevCluster};
    let dev = DevCluster {
        brokers: 3,
        host: "127.0.0.1".into(),
        port: free_ports(3),
        controller_port: free_ports(3),
        data_dir: dir.to_path_buf(),
    };
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let cluster_id = dev_cluster::cluster_id(&dev, &env);
    let configs = dev.configs(&env, None, &cluster_id).expect("configs");
    let nodes = dev_cluster::start(configs.clone())
        .await
        .map_err(|(id, e)| format!("node {id}: {e}"))
        .expect("cluster starts")
        .into_iter()
        .map(Some)
        .collect();
    (dev, configs, nodes)
}
