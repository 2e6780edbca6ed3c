//! Several named listeners on one broker (Kafka's `listeners` / `advertised.listeners`): each is
//! bound, and Metadata, FindCoordinator and DescribeCluster answer every client with the
//! advertised endpoint of the listener it connected through. The controller listener is bound, not
//! advertised, and answers like the inter-broker listener. Also `sluice health` against a live
//! broker and a closed port.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, Result};
use kafka_protocol::messages::{DescribeClusterRequest, FindCoordinatorRequest};
use kafka_protocol::protocol::StrBytes;
use protocol_tests::{metadata_request, Client};
use sluice::config::{Config, Value};

async fn start_three_listeners(dir: &std::path::Path) -> Result<sluice::server::RunningBroker> {
    let mut e = BTreeMap::new();
    let mut set = |k: &str, v: &str| {
        e.insert(k.to_string(), Value::Str(v.to_string()));
    };
    set("data.dir", &dir.display().to_string());
    set(
        "listeners",
        "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0,PLAINTEXT_HOST://127.0.0.2:0",
    );
    set(
        "advertised.listeners",
        "PLAINTEXT://kafka:9092,PLAINTEXT_HOST://localhost:29092",
    );
    set(
        "listener.security.protocol.map",
        "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,PLAINTEXT_HOST:PLAINTEXT",
    );
    set("controller.listener.names", "CONTROLLER");
    set("inter.broker.listener.name", "PLAINTEXT");
    set("process.roles", "broker,controller");
    set("controller.quorum.voters", "1@kafka:9093");
    set("node.id", "1");
    let config = Config::from_entries(&e)?;
    Ok(sluice::server::start(config).await?)
}

/// (host, port) of the one broker in Metadata, FindCoordinator (v4 and v3) and DescribeCluster.
async fn endpoints_seen(c: &mut Client) -> Result<Vec<(String, i32)>> {
    let mut seen = Vec::new();
    let m = c.call(12, &metadata_request(&[], false)).await?;
    let b = m.brokers.first().context("no broker")?;
    seen.push((b.host.to_string(), b.port));
    let f = c
        .call(
            4,
            &FindCoordinatorRequest::default()
                .with_key_type(0)
                .with_coordinator_keys(vec![StrBytes::from_static_str("g")]),
        )
        .await?;
    let co = f.coordinators.first().context("no coordinator")?;
    seen.push((co.host.to_string(), co.port));
    let f = c
        .call(
            3,
            &FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("g")),
        )
        .await?;
    seen.push((f.host.to_string(), f.port));
    let d = c.call(1, &DescribeClusterRequest::default()).await?;
    let b = d.brokers.first().context("no broker")?;
    seen.push((b.host.to_string(), b.port));
    Ok(seen)
}

#[tokio::test]
async fn each_listener_advertises_its_own_endpoint() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let running = start_three_listeners(dir.path()).await?;
    let names: Vec<_> = running.listeners.iter().map(|l| l.name.clone()).collect();
    assert_eq!(names, ["PLAINTEXT", "CONTROLLER", "PLAINTEXT_HOST"]);
    let expect = [
        ("PLAINTEXT", ("kafka", 9092)),
        // The controller listener is not advertised: it answers with the inter-broker endpoint.
        ("CONTROLLER", ("kafka", 9092)),
        ("PLAINTEXT_HOST", ("localhost", 29092)),
    ];
    for (name, (host, port)) in expect {
        let l = running
            .listeners
            .iter()
            .find(|l| l.name == name)
            .context("listener")?;
        assert_ne!(l.bind.port(), 0, "{name} bound a real port");
        let mut c = Client::connect(l.bind).await?;
        let seen = endpoints_seen(&mut c).await?;
        assert_eq!(seen, vec![(host.to_string(), port); 4], "through {name}");
    }
    assert_eq!(running.listeners[2].bind.ip().to_string(), "127.0.0.2");
    running.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn health_check_passes_on_a_broker_and_fails_on_a_closed_port() -> Result<()> {
    let broker = protocol_tests::TestBroker::start().await?;
    let addr = broker.addr.to_string();
    let report =
        tokio::task::spawn_blocking(move || sluice::health::check(&addr, Duration::from_secs(5)))
            .await??;
    assert!(report.starts_with("healthy:"), "{report}");
    assert!(
        report.contains(&format!("1@127.0.0.1:{}", broker.addr.port())),
        "{report}"
    );
    // `--min-brokers`: one broker is enough for 1, not for 2.
    let addr = broker.addr.to_string();
    let (one, two) = tokio::task::spawn_blocking(move || {
        let t = Duration::from_secs(5);
        (
            sluice::health::check_brokers(&addr, t, 1),
            sluice::health::check_brokers(&addr, t, 2),
        )
    })
    .await?;
    assert!(one?.starts_with("healthy:"));
    let err = two.expect_err("a single node is not two brokers");
    assert!(
        matches!(
            err,
            sluice::health::HealthError::TooFewBrokers { have: 1, want: 2 }
        ),
        "{err}"
    );
    broker.shutdown().await;

    // A port nobody listens on: bind, note the port, close.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let err = tokio::task::spawn_blocking(move || {
        sluice::health::check(&closed.to_string(), Duration::from_secs(2))
    })
    .await?
    .expect_err("closed port");
    assert!(err.to_string().contains("cannot connect"), "{err}");

    // A socket that accepts but never answers: the deadline ends the check.
    let silent = std::net::TcpListener::bind("127.0.0.1:0")?;
    let silent_addr = silent.local_addr()?;
    let err = tokio::task::spawn_blocking(move || {
        sluice::health::check(&silent_addr.to_string(), Duration::from_millis(300))
    })
    .await?
    .expect_err("silent peer");
    assert!(err.to_string().contains("timed out"), "{err}");
    drop(silent);
    Ok(())
}
