//! Dynamic broker configs are metadata records (issue 16): in `sluice dev-cluster --brokers 3`
//! (three combined nodes, one quorum), a cluster default set through any broker
//! (`kafka-configs --entity-type brokers --entity-default`) is described by every broker as a
//! DYNAMIC_DEFAULT_BROKER_CONFIG; a per-broker value reaches only that broker; another broker's id
//! is refused by the receiving broker (INVALID_REQUEST, as Kafka); a deletion reaches every broker.
//! Requests go to each broker in turn, so the non-leading nodes forward theirs.

mod common;
use common::free_ports;
use std::process::Child;
use std::time::{Duration, Instant};

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    DescribeConfigsRequest, DescribeConfigsResponse, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;
use sluice::replica::fetcher::BrokerConnection;

const CALL: Duration = Duration::from_secs(15);
const KEY: &str = "log.cleaner.threads";
/// `ConfigSource` of a cluster-wide dynamic default and of a per-broker dynamic value.
const DYNAMIC_DEFAULT: i8 = 3;
const DYNAMIC_BROKER: i8 = 2;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

struct DevCluster(Child);

impl Drop for DevCluster {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn connect(port: u16) -> Option<BrokerConnection> {
    BrokerConnection::connect(
        &format!("127.0.0.1:{port}"),
        "broker-configs-test",
        1 << 20,
        CALL,
    )
    .await
    .ok()
}

/// IncrementalAlterConfigs v1 of one broker resource: SET (0) with a value, DELETE (1) without.
async fn alter(port: u16, resource: &str, value: Option<&str>) -> (i16, Option<String>) {
    alter_config(port, (4, resource), KEY, value).await
}

/// IncrementalAlterConfigs v1 of `key` of one (resource type, name).
async fn alter_config(
    port: u16,
    (resource_type, resource): (i8, &str),
    key: &str,
    value: Option<&str>,
) -> (i16, Option<String>) {
    let mut c = connect(port).await.expect("connect");
    let config = AlterableConfig::default()
        .with_name(s(key))
        .with_config_operation(if value.is_some() { 0 } else { 1 })
        .with_value(value.map(s));
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(s(resource))
            .with_configs(vec![config]),
    ]);
    let r: IncrementalAlterConfigsResponse = c.call(1, &req, CALL).await.expect("alter");
    let a = &r.responses[0];
    (
        a.error_code,
        a.error_message.as_ref().map(|m| m.to_string()),
    )
}

/// `KEY`'s (value, source) as broker `id` (client port `port`) describes itself.
async fn describe(port: u16, id: i32) -> Option<(String, i8)> {
    describe_config(port, (4, &id.to_string()), KEY).await
}

/// `key`'s (value, source) of one (resource type, name), as the broker on `port` describes it.
async fn describe_config(
    port: u16,
    (resource_type, resource): (i8, &str),
    key: &str,
) -> Option<(String, i8)> {
    let mut c = connect(port).await?;
    let req =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(s(resource))
            .with_configuration_keys(Some(vec![s(key)]))]);
    let r: DescribeConfigsResponse = c.call(4, &req, CALL).await.ok()?;
    let e = r.results.first()?.configs.first()?;
    Some((e.value.as_ref()?.to_string(), e.config_source))
}

/// Waits until broker `id` describes `KEY` as `want`.
async fn eventually(port: u16, id: i32, want: (&str, i8)) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = describe(port, id).await;
        if got.as_ref().map(|(v, src)| (v.as_str(), *src)) == Some(want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "broker {id}: {got:?}, wanted {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Starts `sluice dev-cluster --brokers 3`; returns it and each broker's (client port, id) once
/// every broker lists all three.
async fn three_brokers(dir: &std::path::Path) -> (DevCluster, Vec<(u16, i32)>) {
    let port = free_ports(3);
    let controller_port = free_ports(3);
    let cluster = DevCluster(common::spawn_dev_cluster(dir, port, controller_port));
    let ports: Vec<(u16, i32)> = (0..3).map(|i| (port + i as u16, i + 1)).collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    for &(p, _) in &ports {
        while sluice::health::check_brokers(&format!("127.0.0.1:{p}"), Duration::from_secs(2), 3)
            .is_err()
        {
            assert!(
                Instant::now() < deadline,
                "broker on {p} never listed 3 brokers"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    (cluster, ports)
}

/// Group configs are ConfigRecords too (Kafka's GROUP resources): a share group's
/// `share.auto.offset.reset` set through one broker is what every broker describes (and what the
/// share-partition leader, wherever it is, starts from); a deletion reaches every broker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_configs_set_through_one_broker_reach_every_broker() {
    const GROUP_CONFIG: i8 = 8;
    let dir = tempfile::tempdir().unwrap();
    let (_cluster, ports) = three_brokers(dir.path()).await;
    let group = (32, "share-g");
    let key = "share.auto.offset.reset";
    assert_eq!(
        alter_config(ports[1].0, group, key, Some("earliest")).await,
        (0, None)
    );
    for &(p, id) in &ports {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let got = describe_config(p, group, key).await;
            if got == Some(("earliest".to_string(), GROUP_CONFIG)) {
                break;
            }
            assert!(Instant::now() < deadline, "broker {id}: {got:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    // A bad value is refused with Kafka's INVALID_CONFIG and changes nothing.
    let (code, _) = alter_config(ports[0].0, group, key, Some("sideways")).await;
    assert_eq!(code, 40);
    assert_eq!(alter_config(ports[2].0, group, key, None).await, (0, None));
    for &(p, id) in &ports {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let got = describe_config(p, group, key).await;
            if got.as_ref().map(|(_, src)| *src) != Some(GROUP_CONFIG) {
                assert_eq!(
                    got.map(|(v, _)| v),
                    Some("latest".to_string()),
                    "broker {id}"
                );
                break;
            }
            assert!(
                Instant::now() < deadline,
                "broker {id} kept the deleted value"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_configs_set_through_any_broker_reach_the_brokers_they_name() {
    let dir = tempfile::tempdir().unwrap();
    let (_cluster, ports) = three_brokers(dir.path()).await;
    let port = ports[0].0;
    // The default is 1 (static).
    let (_, static_source) = describe(port, 1).await.expect("describe");
    assert_ne!(static_source, DYNAMIC_DEFAULT);
    // A cluster default set through each broker in turn reaches all three.
    for (round, &(via, _)) in ports.iter().enumerate() {
        let value = (round + 2).to_string();
        assert_eq!(alter(via, "", Some(&value)).await, (0, None), "via {via}");
        for &(p, id) in &ports {
            eventually(p, id, (&value, DYNAMIC_DEFAULT)).await;
        }
    }
    // Broker 2's own value, sent to broker 2: only broker 2 has it.
    let (p2, id2) = ports[1];
    assert_eq!(alter(p2, "2", Some("7")).await, (0, None));
    eventually(p2, id2, ("7", DYNAMIC_BROKER)).await;
    for &(p, id) in [ports[0], ports[2]].iter() {
        eventually(p, id, ("4", DYNAMIC_DEFAULT)).await;
    }
    // Broker 3's id sent to broker 1: refused there, as Kafka's receiving broker does.
    let (code, message) = alter(ports[0].0, "3", Some("5")).await;
    assert_eq!(code, 42, "{message:?}");
    assert!(message.unwrap_or_default().contains("Unexpected broker id"));
    // Deleting the default (through broker 3) leaves broker 2's own value only.
    assert_eq!(alter(ports[2].0, "", None).await, (0, None));
    eventually(p2, id2, ("7", DYNAMIC_BROKER)).await;
    for &(p, id) in [ports[0], ports[2]].iter() {
        let deadline = Instant::now() + Duration::from_secs(20);
        while describe(p, id).await.map(|(_, src)| src) == Some(DYNAMIC_DEFAULT) {
            assert!(
                Instant::now() < deadline,
                "broker {id} kept the deleted default"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(describe(p, id).await.map(|(v, _)| v), Some("1".to_string()));
    }
}
