//! A combined node's metadata side end to end, without sockets: topics decided by the controller
//! are hosted on disk, and a restart replays the metadata log: topics, partition counts and
//! configs survive with the same topic ids; a topic from a data directory that predates the log
//! is adopted once with its id.

use std::path::Path;

use super::*;
use crate::controller::{CreatableTopic, CreatePartitionsTopic};
use crate::metadata::{ConfigResourceType, MetadataLog};

fn config_in(dir: &Path) -> Config {
    Config {
        data_dir: dir.to_path_buf(),
        ..Config::default()
    }
}

async fn boot(config: &Config) -> (LocalNode, Arc<ReplicaManager>) {
    let replicas = Arc::new(
        ReplicaManager::open_unlogged(
            Arc::new(config.clone()),
            Arc::new(MetadataLog::new("cid", config.node_id)),
        )
        .expect("logs load"),
    );
    let node = start(
        config,
        replicas.clone(),
        None,
        Arc::new(crate::broker::now_ms),
    )
    .await
    .expect("metadata side starts");
    (node, replicas)
}

async fn halt(node: LocalNode, replicas: Arc<ReplicaManager>) {
    node.shutdown().await;
    replicas.checkpoint(true).expect("checkpoint");
}

#[tokio::test]
async fn a_restart_replays_topics_partition_counts_and_configs_with_the_same_ids() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = config_in(dir.path());
    // A data directory from before the metadata log: topic `old`.
    let old_id = {
        let rm = ReplicaManager::open_adopted(
            Arc::new(config.clone()),
            Arc::new(MetadataLog::new("cid", 1)),
        )
        .expect("open");
        let t = rm.create_topic_for_test("old", 2, &[]);
        rm.checkpoint(true).expect("checkpoint");
        t.id
    };

    let (node, replicas) = boot(&config).await;
    let handle = node.controller.handle.clone();
    assert_eq!(
        replicas.image().topic("old").map(|t| t.id),
        Some(old_id),
        "adopted"
    );
    assert!(
        handle.read(|c| c.state().is_active(1)),
        "registered and unfenced"
    );
    let first_epoch = node.broker_epoch;
    let created = handle
        .run(|c, ctx| {
            let topic = CreatableTopic {
                name: "t".into(),
                num_partitions: 3,
                replication_factor: -1,
                assignments: vec![],
                configs: vec![("retention.ms".into(), Some("1234".into()))],
            };
            c.create_topics(&[topic], ctx.seed)
        })
        .await
        .expect("committed");
    let t_id = created[0].1.as_ref().expect("created").topic_id;
    let grown = handle
        .run(|c, ctx| {
            let grow = CreatePartitionsTopic {
                name: "t".into(),
                count: 5,
                assignments: None,
            };
            c.create_partitions(&[grow], ctx.seed)
        })
        .await
        .expect("committed");
    assert_eq!(grown[0].1, Ok(()));
    for p in 0..5 {
        assert!(replicas.partition("t", p).is_some(), "t-{p} hosted");
        assert!(dir.path().join(format!("t-{p}")).is_dir());
    }
    drop(handle);
    halt(node, replicas).await;

    let (node, replicas) = boot(&config).await;
    let image = replicas.image();
    assert_eq!(image.topic("old").map(|t| t.id), Some(old_id));
    let t = image.topic("t").expect("replayed");
    assert_eq!((t.id, t.partition_count()), (t_id, 5));
    assert_eq!(
        image
            .configs(ConfigResourceType::Topic, "t")
            .get("retention.ms")
            .map(String::as_str),
        Some("1234")
    );
    assert_eq!(
        replicas
            .topic("t")
            .map(|t| t.config.overrides.get("retention.ms").cloned()),
        Some(Some("1234".to_string())),
        "the hosted log has the replayed config"
    );
    let handle = node.controller.handle.clone();
    assert_eq!(handle.read(|c| c.state().topics.len()), 2, "adopted once");
    assert!(node.broker_epoch > first_epoch, "a new registration");
    assert!(handle.read(|c| c.state().is_active(1)));
    drop(handle);
    halt(node, replicas).await;
}
