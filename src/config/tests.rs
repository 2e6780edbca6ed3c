use std::path::Path;

use super::*;

fn load(text: &str) -> Result<Config, ConfigError> {
    Config::from_entries(&toml_file::parse(text).map_err(|r| key_err("file", r))?)
}

fn props(text: &str) -> Result<Config, ConfigError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.properties");
    std::fs::write(&path, text).unwrap();
    Config::load(&Sources {
        file: Some(&path),
        ..Sources::default()
    })
}

fn with_env(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
    Config::load(&Sources {
        env: vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Sources::default()
    })
}

#[test]
fn known_key_table_is_sorted_and_complete_for_common_keys() {
    let names: Vec<_> = known_keys::KAFKA_BROKER_KEYS
        .iter()
        .map(|k| k.name)
        .collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted);
    for k in [
        "log.cleaner.threads",
        "num.network.threads",
        "offsets.topic.replication.factor",
        "log.flush.interval.ms",
        "compression.type",
        "delete.topic.enable",
    ] {
        assert!(known_keys::lookup(k).is_some(), "{k}");
    }
    assert!(known_keys::is_known(
        "listener.name.internal.ssl.keystore.location"
    ));
    assert!(!known_keys::is_known("listener.name.internal.bogus"));
}

#[test]
fn nested_and_quoted_dotted_keys_are_the_same_key() {
    let a = load("log.segment.bytes = 2097152\n").unwrap();
    let b = load("\"log.segment.bytes\" = 2097152\n").unwrap();
    assert_eq!(a.segment_bytes, 2_097_152);
    assert_eq!(b.segment_bytes, 2_097_152);
}

#[test]
fn a_key_under_a_toml_table_header_is_named_with_the_fix() {
    let e = load("[log]\nsegment.bytes = 2097152\nnum.partitions = 3\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`log.num.partitions`") && e.contains("put `num.partitions` above"),
        "{e}"
    );
}

#[test]
fn group_keys_have_kafka_defaults_and_ephemeral_forms_groups_at_once() {
    let c = load("").unwrap();
    assert_eq!(c.group_initial_rebalance_delay_ms, 3000);
    assert_eq!(c.offsets_topic_num_partitions, 50);
    let c =
        load("group.initial.rebalance.delay.ms = 250\noffsets.topic.num.partitions = 3\n").unwrap();
    assert_eq!(c.group_initial_rebalance_delay_ms, 250);
    assert_eq!(c.offsets_topic_num_partitions, 3);
    let eph = Sources {
        overrides: Overrides {
            ephemeral: true,
            ..Overrides::default()
        },
        ..Sources::default()
    };
    assert_eq!(
        Config::load(&eph).unwrap().group_initial_rebalance_delay_ms,
        0
    );
    let e = load("group.max.size = 0\n").unwrap_err().to_string();
    assert!(e.contains("group.max.size"), "{e}");
}

#[test]
fn open_files_bound_is_sluices_own_key_and_not_described() {
    assert_eq!(
        load("").unwrap().log_open_files_max,
        crate::log::DEFAULT_MAX_OPEN_FILES
    );
    let c = load("sluice.log.open.files.max = 50\n").unwrap();
    assert_eq!(c.log_open_files_max, 50);
    assert!(!c.explicit.contains_key("sluice.log.open.files.max"));
    let e = load("sluice.log.open.files.max = 0\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("sluice.log.open.files.max"), "{e}");
}

#[test]
fn the_transaction_version_feature_level_is_sluices_own_key() {
    assert_eq!(load("").unwrap().feature_transaction_version, 2);
    let c = load("sluice.feature.transaction.version = 0\n").unwrap();
    assert_eq!(c.feature_transaction_version, 0);
    assert!(!c
        .explicit
        .contains_key("sluice.feature.transaction.version"));
    let e = load("sluice.feature.transaction.version = 3\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("sluice.feature.transaction.version"), "{e}");
}

#[test]
fn unknown_key_is_named_with_the_closest_known_key() {
    let e = load("log.segmnt.bytes = 5\n").unwrap_err().to_string();
    assert!(e.contains("log.segmnt.bytes"), "{e}");
    assert!(e.contains("unknown key"), "{e}");
    assert!(e.contains("did you mean `log.segment.bytes`?"), "{e}");
}

#[test]
fn every_bad_key_is_reported_at_once() {
    let e = load("num.partitions = 0\nlog.segmnt.bytes = 5\nauto.create.topics.enable = 3\n")
        .unwrap_err();
    match &e {
        ConfigError::Several(list) => assert_eq!(list.len(), 3, "{e}"),
        other => panic!("expected three errors, got {other}"),
    }
    let text = e.to_string();
    assert!(!text.contains('\n'), "one line: {text}");
}

#[test]
fn out_of_range_and_wrong_type_use_kafkas_messages() {
    let e = load("num.partitions = 0\n").unwrap_err().to_string();
    assert!(
        e.contains("Invalid value 0 for configuration num.partitions: Value must be at least 1"),
        "{e}"
    );
    let e = load("auto.create.topics.enable = 3\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("Expected value to be either true or false"),
        "{e}"
    );
    let e = load("log.retention.ms = \"7d\"\n").unwrap_err().to_string();
    assert!(e.contains("Not a number of type LONG"), "{e}");
    let e = load("listen = \"nohost\"\n").unwrap_err().to_string();
    assert!(e.contains("listen"), "{e}");
    // Kafka 4.1 refuses segments under 1 MiB.
    let e = load("log.segment.bytes = 2048\n").unwrap_err().to_string();
    assert!(e.contains("at least 1048576"), "{e}");
    // Ignored keys are checked too.
    let e = load("num.network.threads = 0\n").unwrap_err().to_string();
    assert!(
        e.contains("num.network.threads") && e.contains("at least 1"),
        "{e}"
    );
    let e = load("compression.type = \"brotli\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("String must be one of"), "{e}");
    // Kafka's validators: min.insync.replicas >= 1; message.max.bytes >= 0.
    let e = load("min.insync.replicas = 0\n").unwrap_err().to_string();
    assert!(e.contains("min.insync.replicas"), "{e}");
    assert_eq!(
        load("message.max.bytes = 0\n").unwrap().message_max_bytes,
        0
    );
}

#[test]
fn known_unimplemented_keys_are_accepted_and_listed_as_ignored() {
    let c = load("num.network.threads = 3\nlog.cleaner.threads = 1\nnum.partitions = 2\n").unwrap();
    assert_eq!(
        c.ignored,
        vec!["log.cleaner.threads", "num.network.threads"]
    );
    assert_eq!(c.num_partitions, 2);
    assert_eq!(
        c.explicit.get("num.network.threads").map(String::as_str),
        Some("3")
    );
}

#[test]
fn sluice_listen_and_advertise() {
    let c = load("listen = \"127.0.0.1:19092\"\n").unwrap();
    assert_eq!(c.advertise, ("127.0.0.1".to_string(), 19092));
    let c = load("listen = \"0.0.0.0:9092\"\nadvertise = \"kafka:9092\"\n").unwrap();
    assert_eq!(c.advertise, ("kafka".to_string(), 9092));
    assert!(load("listen = \"0.0.0.0:9092\"\n").is_err());
    // Nothing configured: loopback, advertised as localhost (the apache/kafka image's address).
    let c = load("").unwrap();
    assert_eq!(c.listen, "127.0.0.1:9092".parse().unwrap());
    assert_eq!(c.advertise, ("localhost".to_string(), 9092));
}

#[test]
fn kafka_listener_syntax_is_accepted() {
    let c = load("listeners = \"PLAINTEXT://127.0.0.1:9093\"\n").unwrap();
    assert_eq!(c.listen.port(), 9093);
    assert_eq!(c.advertise, ("127.0.0.1".to_string(), 9093));
    let c = load("log.message.timestamp.type = \"LogAppendTime\"\n").unwrap();
    assert_eq!(c.message_timestamp_type, TimestampType::LogAppendTime);
    let e = load("advertised.listeners = \"EXTERNAL://127.0.0.1:9095\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("EXTERNAL"), "{e}");
}

#[test]
fn server_properties_file_with_kafka_syntax() {
    let c = props(
        "# Kafka\nprocess.roles=broker,controller\nnode.id=1\n\
         controller.quorum.voters=1@localhost:9093\n\
         listeners=PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093\n\
         advertised.listeners = PLAINTEXT://localhost:19092\n\
         controller.listener.names: CONTROLLER\n\
         listener.security.protocol.map=CONTROLLER:PLAINTEXT,\\\n   PLAINTEXT:PLAINTEXT\n\
         num.network.threads=3\nlog.retention.hours=168\n",
    )
    .unwrap();
    assert_eq!(c.listeners.len(), 2);
    assert_eq!(c.advertise, ("localhost".to_string(), 19092));
    assert_eq!(c.retention_ms, 168 * 3_600_000);
    assert_eq!(c.ignored, vec!["num.network.threads"]);
    let e = props("node.id=1\nnum.partitons=3\nlog.retention.ms=x\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("server.properties:2") && e.contains("num.partitions"),
        "{e}"
    );
    assert!(
        e.contains("server.properties:3") && e.contains("LONG"),
        "{e}"
    );
}

#[test]
fn format_is_chosen_by_extension_then_content() {
    assert_eq!(
        ConfigFormat::detect(Path::new("a.properties"), "a = 1"),
        ConfigFormat::Properties
    );
    assert_eq!(
        ConfigFormat::detect(Path::new("a.toml"), "a=b c"),
        ConfigFormat::Toml
    );
    assert_eq!(
        ConfigFormat::detect(Path::new("cfg"), "log.dirs=/tmp/x\n"),
        ConfigFormat::Properties
    );
    assert_eq!(
        ConfigFormat::detect(Path::new("cfg"), "\"log.dirs\" = \"/tmp/x\"\n"),
        ConfigFormat::Toml
    );
}

#[test]
fn environment_of_a_compose_service() {
    let c = with_env(&[
        ("KAFKA_NODE_ID", "1"),
        ("KAFKA_PROCESS_ROLES", "broker,controller"),
        (
            "KAFKA_LISTENERS",
            "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0,PLAINTEXT_HOST://127.0.0.1:0",
        ),
        (
            "KAFKA_ADVERTISED_LISTENERS",
            "PLAINTEXT://kafka:9092,PLAINTEXT_HOST://localhost:29092",
        ),
        (
            "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP",
            "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,PLAINTEXT_HOST:PLAINTEXT",
        ),
        ("KAFKA_CONTROLLER_QUORUM_VOTERS", "1@kafka:9093"),
        ("KAFKA_CONTROLLER_LISTENER_NAMES", "CONTROLLER"),
        ("KAFKA_INTER_BROKER_LISTENER_NAME", "PLAINTEXT"),
        ("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "1"),
        ("KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS", "0"),
        ("KAFKA_HEAP_OPTS", "-Xmx512m"),
        ("CLUSTER_ID", "MkU3OEVBNTcwNTJENDM2Qg"),
    ])
    .unwrap();
    assert_eq!(c.listeners.len(), 3);
    assert_eq!(c.advertise, ("kafka".to_string(), 9092));
    assert_eq!(c.group_initial_rebalance_delay_ms, 0);
    assert_eq!(c.cluster_id.as_deref(), Some("MkU3OEVBNTcwNTJENDM2Qg"));
    // Another tool's KAFKA_ variable is no typo: ignored and listed.
    let c = with_env(&[("KAFKA_LIBS", "/opt/libs"), ("KAFKA_REFERENCE", "x")]).unwrap();
    assert_eq!(c.unrelated_env, ["KAFKA_LIBS", "KAFKA_REFERENCE"]);
    let e = with_env(&[("KAFKA_NUM_PARTITONS", "3")])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("num.partitons")
            && e.contains("KAFKA_NUM_PARTITONS")
            && e.contains("num.partitions"),
        "{e}"
    );
    let e = with_env(&[("KAFKA_CONTROLLER_QUORUM_VOTERS", "2@a:9093,3@b:9093")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("node id 1 must be included"), "{e}");
    let c = with_env(&[("KAFKA_CONTROLLER_QUORUM_VOTERS", "1@a:9093,2@b:9093")]).unwrap();
    assert_eq!(c.quorum_voters.len(), 2);
    let e = with_env(&[("KAFKA_PROCESS_ROLES", "controller")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("controller.listener.names"), "{e}");
    let e = with_env(&[("CLUSTER_ID", "short")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("CLUSTER_ID"), "{e}");
}

#[test]
fn precedence_is_flag_then_environment_then_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.properties");
    std::fs::write(
        &path,
        "num.partitions=2\nlog.retention.ms=10\nlog.dirs=/from/file\n",
    )
    .unwrap();
    let c = Config::load(&Sources {
        file: Some(&path),
        env: vec![
            ("KAFKA_NUM_PARTITIONS".into(), "3".into()),
            ("KAFKA_LOG_DIRS".into(), "/from/env".into()),
        ],
        overrides: Overrides {
            data_dir: Some("/from/flag".into()),
            ..Overrides::default()
        },
    })
    .unwrap();
    assert_eq!(c.num_partitions, 3);
    assert_eq!(c.retention_ms, 10);
    assert_eq!(c.data_dir, Path::new("/from/flag"));
}

#[test]
fn replication_factor_keys() {
    let c = load("default.replication.factor = 1\noffsets.topic.replication.factor = 1\n").unwrap();
    assert_eq!(
        (
            c.default_replication_factor,
            c.offsets_topic_replication_factor
        ),
        (1, 1)
    );
    let c = load("offsets.topic.replication.factor = 3\n").unwrap();
    assert_eq!(c.offsets_topic_replication_factor, 3);
    assert!(load("offsets.topic.replication.factor = 0\n").is_err());
}

#[test]
fn high_watermark_checkpoint_interval_is_implemented_and_checked() {
    let key = "replica.high.watermark.checkpoint.interval.ms";
    assert_eq!(
        Config::default().replica_high_watermark_checkpoint_interval_ms,
        5000
    );
    let c = load(&format!("{key} = 250\n")).unwrap();
    assert_eq!(c.replica_high_watermark_checkpoint_interval_ms, 250);
    assert!(!c.ignored.iter().any(|k| k == key), "{:?}", c.ignored);
    for bad in ["0", "-5", "\"soon\""] {
        let e = load(&format!("{key} = {bad}\n")).unwrap_err().to_string();
        assert!(e.contains(key), "{bad}: {e}");
    }
}

#[test]
fn a_higher_layer_replaces_aliases_of_lower_layers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sluice.toml");
    std::fs::write(&path, "listen = \"127.0.0.1:1\"\n").unwrap();
    let c = Config::load(&Sources {
        file: Some(&path),
        env: vec![("KAFKA_LISTENERS".into(), "PLAINTEXT://127.0.0.1:2".into())],
        ..Sources::default()
    })
    .unwrap();
    assert_eq!(c.listen.port(), 2);
    let c = Config::load(&Sources {
        file: Some(&path),
        env: vec![("KAFKA_LISTENERS".into(), "PLAINTEXT://127.0.0.1:2".into())],
        overrides: Overrides {
            listen: Some("127.0.0.1:3".into()),
            ..Overrides::default()
        },
    })
    .unwrap();
    assert_eq!(c.listen.port(), 3);
}

#[test]
fn kafka_41_server_properties_loads_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.properties");
    std::fs::write(&path, include_str!("../../compat/dropin/server.properties")).unwrap();
    let c = Config::load(&Sources {
        file: Some(&path),
        ..Sources::default()
    })
    .unwrap();
    let names: Vec<_> = c.listeners.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["PLAINTEXT", "CONTROLLER"]);
    assert_eq!(c.listen, "0.0.0.0:9092".parse().unwrap());
    assert_eq!(c.advertise, ("localhost".to_string(), 9092));
    assert_eq!(c.listeners[1].advertised, None);
    assert_eq!(c.data_dir, Path::new("/tmp/kraft-combined-logs"));
    assert_eq!(
        c.ignored,
        [
            "num.io.threads",
            "num.network.threads",
            "num.recovery.threads.per.data.dir",
            "socket.receive.buffer.bytes",
            "socket.send.buffer.bytes",
        ]
    );
}

/// Kafka's internal topics default to 3 replicas; unset, Sluice caps that at the quorum's size (a
/// lone node works with no config), and a value that is set is kept.
#[test]
fn internal_topic_replication_defaults_to_three_capped_at_the_quorum() {
    let rfs = |c: &Config| {
        (
            c.offsets_topic_replication_factor,
            c.transaction_state_log_replication_factor,
            c.share_coordinator_state_topic_replication_factor,
        )
    };
    assert_eq!(rfs(&load("").unwrap()), (1, 1, 1));
    let voters = |n: usize| {
        let list: Vec<String> = (1..=n).map(|i| format!("{i}@127.0.0.{i}:9093")).collect();
        format!(
            "process.roles=broker,controller\nnode.id=1\ncontroller.listener.names=CONTROLLER\n\
             listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\n\
             controller.quorum.voters={}\n",
            list.join(",")
        )
    };
    assert_eq!(rfs(&props(&voters(2)).unwrap()), (2, 2, 2));
    assert_eq!(rfs(&props(&voters(3)).unwrap()), (3, 3, 3));
    assert_eq!(rfs(&props(&voters(5)).unwrap()), (3, 3, 3));
    let set = format!(
        "{}offsets.topic.replication.factor=1\ntransaction.state.log.replication.factor=2\n",
        voters(3)
    );
    assert_eq!(rfs(&props(&set).unwrap()), (1, 2, 3));
    let c = load("transaction.state.log.min.isr = 1\n").unwrap();
    assert_eq!(c.transaction_state_log_min_isr, 1);
    assert_eq!(load("").unwrap().transaction_state_log_min_isr, 2);
}

/// Kafka 4.1.2's own answers (`kafka.Kafka` started on each file) to the bad role combinations.
#[test]
fn process_roles_combinations_are_checked_with_kafkas_messages() {
    let base = "node.id=1\ncontroller.listener.names=CONTROLLER\n";
    let err = |extra: &str| props(&format!("{base}{extra}")).unwrap_err().to_string();
    // A broker-only node listed as a voter.
    let e = err(
        "process.roles=broker\ncontroller.quorum.voters=1@127.0.0.1:9093\n\
                 listeners=PLAINTEXT://127.0.0.1:9092\n",
    );
    assert!(
        e.contains("the node id 1 must not be included in the set of voters"),
        "{e}"
    );
    // A broker-only node binding the controller listener.
    let e = err(
        "process.roles=broker\ncontroller.quorum.voters=2@127.0.0.1:9093\n\
                 listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\n",
    );
    assert!(
        e.contains("must not contain a value appearing in the 'listeners'"),
        "{e}"
    );
    // A broker-only node without any quorum.
    let e = err("process.roles=broker\nlisteners=PLAINTEXT://127.0.0.1:9092\n");
    assert!(
        e.contains("either controller.quorum.bootstrap.servers must contain"),
        "{e}"
    );
    // A well-formed broker-only node: an observer of the voters.
    let c = props(&format!(
        "{base}process.roles=broker\ncontroller.quorum.voters=2@127.0.0.1:9093\n\
                 listeners=PLAINTEXT://127.0.0.1:9092\n"
    ))
    .unwrap();
    assert_eq!(c.process_roles, quorum::ProcessRoles::Broker);
    assert!(c.process_roles.is_broker() && !c.process_roles.is_controller());
    assert_eq!(c.effective_quorum_voters()[0].address(), "127.0.0.1:9093");
    // A controller-only node without controller.listener.names, or with a client listener.
    let e =
        props("node.id=1\nprocess.roles=controller\ncontroller.quorum.voters=1@127.0.0.1:9093\n")
            .unwrap_err()
            .to_string();
    assert!(
        e.contains("controller.listener.names must contain at least one value"),
        "{e}"
    );
    let e = err(
        "process.roles=controller\ncontroller.quorum.voters=1@127.0.0.1:9093\n\
                 listeners=CONTROLLER://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9092\n",
    );
    assert!(
        e.contains("must only contain KRaft controller listeners"),
        "{e}"
    );
    let e = err(
        "process.roles=controller\ncontroller.quorum.voters=2@127.0.0.1:9093\n\
                 listeners=CONTROLLER://127.0.0.1:9093\n",
    );
    assert!(e.contains("node id 1 must be included"), "{e}");
    assert!(
        !e.contains("advertised"),
        "no broker listener to advertise: {e}"
    );
    // An explicit inter-broker listener that is a controller listener.
    let e = err(
        "process.roles=controller\ncontroller.quorum.voters=1@127.0.0.1:9093\n\
                 listeners=CONTROLLER://127.0.0.1:9093\ninter.broker.listener.name=CONTROLLER\n",
    );
    assert!(
        e.contains("must not contain an explicitly set inter.broker.listener.name"),
        "{e}"
    );
    // Without any quorum.
    let e = err("process.roles=controller\nlisteners=CONTROLLER://127.0.0.1:9093\n");
    assert!(
        e.contains("either controller.quorum.bootstrap.servers must contain"),
        "{e}"
    );
    let e = err("process.roles=\n");
    assert!(e.contains("process.roles"), "{e}");
}

#[test]
fn a_controller_only_node_is_accepted_as_kafka_accepts_it() {
    // Kafka's controller.properties: one CONTROLLER listener, a voter among others.
    let c = props(
        "node.id=1\nprocess.roles=controller\ncontroller.listener.names=CONTROLLER\n\
         listeners=CONTROLLER://127.0.0.1:9093\n\
         controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.2:9093,3@127.0.0.3:9093\n",
    )
    .unwrap();
    assert_eq!(c.process_roles, quorum::ProcessRoles::Controller);
    assert!(!c.process_roles.is_broker() && c.process_roles.is_controller());
    let listeners = c.effective_listeners();
    assert_eq!(listeners.len(), 1);
    assert!(listeners[0].controller && listeners[0].advertised.is_none());
    assert_eq!(c.quorum_voters.len(), 3);
    // The standalone form: the one bootstrap server is its own CONTROLLER port, and the lone
    // voter's address is that listener (not a broker port it does not bind).
    let c = props(
        "node.id=1\nprocess.roles=controller\ncontroller.listener.names=CONTROLLER\n\
         listeners=CONTROLLER://127.0.0.1:9093\ncontroller.quorum.bootstrap.servers=localhost:9093\n\
         inter.broker.listener.name=PLAINTEXT\n",
    )
    .unwrap();
    let voters = c.effective_quorum_voters();
    assert_eq!(voters.len(), 1);
    assert_eq!((voters[0].id, voters[0].port), (1, 9093));
}

#[test]
fn quorum_bootstrap_servers_standalone_is_the_lone_voter_and_others_are_refused() {
    let base = "node.id=1\nprocess.roles=broker,controller\ncontroller.listener.names=CONTROLLER\n\
                listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\n";
    // Kafka 4.1's shipped file: the one bootstrap server is this node's controller listener.
    let c = props(&format!(
        "{base}controller.quorum.bootstrap.servers=localhost:9093\n"
    ))
    .unwrap();
    assert!(c.quorum_voters.is_empty());
    assert!(!c.ignored.iter().any(|k| k.contains("bootstrap")));
    // Several controllers to learn from: refused by name, never ignored.
    let e = props(&format!(
        "{base}controller.quorum.bootstrap.servers=a:9093,b:9093,c:9093\n"
    ))
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("controller.quorum.bootstrap.servers") && e.contains("KIP-853"),
        "{e}"
    );
    // With the voters given, the voters are used.
    let c = props(&format!(
        "{base}controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.2:9093\n\
         controller.quorum.bootstrap.servers=127.0.0.1:9093,127.0.0.2:9093\n"
    ))
    .unwrap();
    assert_eq!(c.quorum_voters.len(), 2);
    let e = props(&format!(
        "{base}controller.quorum.voters=1@127.0.0.1:9093\ncontroller.quorum.bootstrap.servers=nope\n"
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("Failed to parse bootstrap server `nope`"), "{e}");
}

#[test]
fn a_broker_only_node_may_know_only_the_bootstrap_servers() {
    let c = props(
        "node.id=4\nprocess.roles=broker\ncontroller.listener.names=CONTROLLER\n\
         listeners=PLAINTEXT://127.0.0.1:9092\n\
         listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
         controller.quorum.bootstrap.servers=127.0.0.1:9093, 127.0.0.2:9093\n",
    )
    .unwrap();
    assert!(c.quorum_voters.is_empty());
    assert_eq!(
        c.quorum_bootstrap_servers,
        vec!["127.0.0.1:9093".to_string(), "127.0.0.2:9093".to_string()]
    );
    let endpoints = crate::controller::channel::ControllerEndpoints::of_config(&c);
    assert_eq!(endpoints.describe(), "-1@127.0.0.1:9093,-2@127.0.0.2:9093");
}
