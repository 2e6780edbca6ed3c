//! The `sluice` binary. With no arguments: a single-node broker on 127.0.0.1:9092 (advertised as
//! localhost:9092) with its data in ./sluice-data. `sluice serve --help` lists the options;
//! `sluice health --bootstrap HOST:PORT` checks a running broker; `sluice format -t ID -c FILE`
//! and `sluice random-uuid` are `kafka-storage.sh format` / `random-uuid`.
//!
//! Exit codes: 0 clean shutdown; 2 the broker could not start (bad configuration, a port in use,
//! an unusable data directory), reported as one line on stderr; 1 anything else.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sluice::config::{Config, Overrides, Sources};

#[global_allocator]
static ALLOC: sluice::alloc_guard::GuardedAllocator = sluice::alloc_guard::GuardedAllocator;

const PRECEDENCE: &str = "\
Configuration precedence: command-line flag > environment > file > default.
  File: Kafka's server.properties (Java properties) or sluice.toml; keys are Kafka's names.
  Environment: KAFKA_<KEY> as the apache/kafka and confluent images read it (`_` -> `.`,
  `__` -> `-`, `___` -> `_`; KAFKA_LISTENERS -> listeners), bitnami's KAFKA_CFG_<KEY>, CLUSTER_ID.
  Kafka keys Sluice does not implement are accepted and warned about; unknown keys stop startup.
Logging: SLUICE_LOG (filter, default info), SLUICE_LOG_FORMAT or --log-format (text|json).";

#[derive(Parser)]
#[command(
    name = "sluice",
    version,
    about = "A Kafka-wire-compatible message broker",
    args_conflicts_with_subcommands = true,
    after_help = PRECEDENCE
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// `sluice [OPTIONS]` is `sluice serve [OPTIONS]`.
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Run the broker (the default).
    #[command(after_help = PRECEDENCE)]
    Serve(ServeArgs),
    /// Check that a broker answers ApiVersions and Metadata: exit 0 if so, else 1 with the reason.
    Health(HealthArgs),
    /// N brokers (each broker + controller) in one process on consecutive ports, for test stacks.
    DevCluster(DevClusterArgs),
    /// Format the log directory (`meta.properties`), as `kafka-storage.sh format`.
    Format(FormatArgs),
    /// Print a new random Kafka UUID (for `format --cluster-id`), as `kafka-storage.sh random-uuid`.
    RandomUuid,
}

#[derive(clap::Args)]
struct FormatArgs {
    /// The cluster id (a Kafka UUID, e.g. from `sluice random-uuid`).
    #[arg(short = 't', long)]
    cluster_id: String,
    /// The node's config file (server.properties or sluice.toml): node.id, log.dirs, roles.
    #[arg(short = 'c', long)]
    config: PathBuf,
    /// Skip an already formatted directory instead of failing.
    #[arg(short = 'g', long)]
    ignore_formatted: bool,
    /// This controller is the only initial voter (KIP-853; controller.quorum.voters unset).
    #[arg(short = 's', long, conflicts_with = "initial_controllers")]
    standalone: bool,
    /// The initial voters of a dynamic quorum (KIP-853): not implemented, refused.
    #[arg(short = 'I', long)]
    initial_controllers: Option<String>,
}

#[derive(clap::Args)]
struct DevClusterArgs {
    /// How many brokers (each also a controller voter).
    #[arg(long, default_value_t = 3)]
    brokers: u16,
    /// Address every node listens on and advertises.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Node 1's client port; node i listens on PORT + i - 1.
    #[arg(long, default_value_t = 9092)]
    port: u16,
    /// Node 1's controller port; node i's is CONTROLLER_PORT + i - 1 (default PORT + 10000).
    #[arg(long)]
    controller_port: Option<u16>,
    /// Parent of the nodes' data directories (node-1, node-2, ...).
    #[arg(long, default_value = "sluice-dev-cluster")]
    data_dir: PathBuf,
    /// Config file applied to every node (Kafka's server.properties or a sluice.toml).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Log line format: text or json (default: SLUICE_LOG_FORMAT, else text).
    #[arg(long, value_parser = ["text", "json"])]
    log_format: Option<String>,
}

#[derive(clap::Args, Default)]
struct ServeArgs {
    /// Config file: Kafka's server.properties or a sluice.toml (chosen by extension, else content).
    #[arg(value_name = "CONFIG_FILE")]
    config_file: Option<PathBuf>,
    /// Config file (the same as the positional CONFIG_FILE).
    #[arg(long, conflicts_with = "config_file")]
    config: Option<PathBuf>,
    /// Address to listen on, HOST:PORT: one PLAINTEXT listener replacing `listeners`
    /// (default 127.0.0.1:9092).
    #[arg(long)]
    listen: Option<String>,
    /// Address given to clients in Metadata, HOST:PORT (default: the listen address).
    #[arg(long)]
    advertise: Option<String>,
    /// Log directory (default ./sluice-data; Kafka's `log.dirs`).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Use a fresh temporary data directory, removed on exit (refused with --data-dir).
    #[arg(long, conflicts_with = "data_dir")]
    ephemeral: bool,
    /// Log line format: text or json (default: SLUICE_LOG_FORMAT, else text).
    #[arg(long, value_parser = ["text", "json"])]
    log_format: Option<String>,
}

#[derive(clap::Args)]
struct HealthArgs {
    /// Broker to check, HOST:PORT (default: this environment's own primary listener, as
    /// `sluice serve` would bind it, on loopback when it binds every interface).
    #[arg(long)]
    bootstrap: Option<String>,
    /// Give up after this many milliseconds.
    #[arg(long, default_value_t = 5000)]
    timeout_ms: u64,
    /// Unhealthy unless Metadata lists at least this many brokers (a whole cluster is up).
    #[arg(long, default_value_t = 0)]
    min_brokers: usize,
}

fn init_logging(format: Option<&str>) {
    let filter =
        tracing_subscriber::EnvFilter::try_from_env("SLUICE_LOG").unwrap_or_else(|_| "info".into());
    let env_format = std::env::var("SLUICE_LOG_FORMAT").ok();
    let json = format.or(env_format.as_deref()) == Some("json");
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        // Colour codes only for a terminal, never into a log file or a pipe.
        builder.with_ansi(std::io::stderr().is_terminal()).init();
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let args = match cli.command {
        Some(Command::Health(h)) => return health(&h),
        Some(Command::DevCluster(d)) => return dev_cluster(d),
        Some(Command::Format(f)) => return format(&f),
        Some(Command::RandomUuid) => {
            println!("{}", sluice::storage_tool::random_uuid());
            return ExitCode::SUCCESS;
        }
        Some(Command::Serve(a)) => a,
        None => cli.serve,
    };
    init_logging(args.log_format.as_deref());
    let file = args.config.or(args.config_file);
    let sources = Sources {
        file: file.as_deref(),
        env: std::env::vars().collect(),
        overrides: Overrides {
            listen: args.listen,
            advertise: args.advertise,
            data_dir: args.data_dir,
            ephemeral: args.ephemeral,
        },
    };
    let mut config = match Config::load(&sources) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sluice: {e}");
            return ExitCode::from(2);
        }
    };
    for key in &config.ignored {
        tracing::warn!("config key `{key}` is a Kafka setting Sluice does not implement; ignored");
    }
    for var in &config.unrelated_env {
        tracing::warn!("environment variable {var} names no Kafka config key; ignored");
    }
    for (key, rf) in [
        (
            "offsets.topic.replication.factor",
            config.offsets_topic_replication_factor,
        ),
        (
            "transaction.state.log.replication.factor",
            config.transaction_state_log_replication_factor,
        ),
    ] {
        if rf > 1 && !sluice::controller::combined::is_multi_voter(&config) {
            tracing::warn!(
                "{key} = {rf} exceeds the 1 live broker: as in Kafka, the internal topic cannot be \
                 created and its coordinator answers COORDINATOR_NOT_AVAILABLE; set it to 1"
            );
        }
    }
    // Ephemeral brokers always get a fresh temporary directory (never a directory the user named,
    // since it is deleted on exit; `--ephemeral --data-dir` is refused by the parser).
    let ephemeral_dir = if config.ephemeral {
        match tempfile_dir() {
            Ok(d) => {
                config.data_dir = d.clone();
                Some(d)
            }
            Err(e) => {
                eprintln!("sluice: cannot create a temporary data directory: {e}");
                return ExitCode::from(2);
            }
        }
    } else {
        None
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("sluice: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let code = runtime.block_on(run(config));
    drop(runtime);
    if let Some(dir) = ephemeral_dir {
        let _ = std::fs::remove_dir_all(dir);
    }
    code
}

fn health(args: &HealthArgs) -> ExitCode {
    let timeout = std::time::Duration::from_millis(args.timeout_ms.max(1));
    let bootstrap = args.bootstrap.clone().unwrap_or_else(|| {
        let sources = Sources {
            env: std::env::vars().collect(),
            ..Sources::default()
        };
        match Config::load(&sources) {
            Ok(c) => sluice::health::loopback_for(c.listen).to_string(),
            Err(_) => sluice::config::DEFAULT_LISTEN.to_string(),
        }
    });
    match sluice::health::check_brokers(&bootstrap, timeout, args.min_brokers) {
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sluice health: {bootstrap}: {e}");
            ExitCode::from(1)
        }
    }
}

/// Kafka's exit codes: 0 formatted (or every directory already was, with --ignore-formatted),
/// 1 an error, one line on stderr.
fn format(args: &FormatArgs) -> ExitCode {
    use sluice::storage_tool::{FormatOptions, Formatted};
    let sources = Sources {
        file: Some(&args.config),
        ..Sources::default()
    };
    let config = match Config::load(&sources) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sluice format: {e}");
            return ExitCode::from(1);
        }
    };
    let options = FormatOptions {
        cluster_id: args.cluster_id.clone(),
        ignore_formatted: args.ignore_formatted,
        standalone: args.standalone,
        initial_controllers: args.initial_controllers.clone(),
    };
    match sluice::storage_tool::format(&config, &options) {
        Ok(done) => {
            let mut written = 0;
            for d in &done {
                if let Formatted::Written { dir, .. } = d {
                    written += 1;
                    println!(
                        "Formatting data directory {} with cluster id {} for node {}.",
                        dir.display(),
                        options.cluster_id.trim(),
                        config.node_id
                    );
                }
            }
            if written == 0 {
                println!("All of the log directories are already formatted.");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(1)
        }
    }
}

fn dev_cluster(args: DevClusterArgs) -> ExitCode {
    init_logging(args.log_format.as_deref());
    let dev = sluice::dev_cluster::DevCluster {
        brokers: args.brokers,
        host: args.host,
        port: args.port,
        controller_port: args
            .controller_port
            .unwrap_or_else(|| args.port.saturating_add(10000)),
        data_dir: args.data_dir,
    };
    let env: Vec<(String, String)> = std::env::vars().collect();
    let cluster_id = sluice::dev_cluster::cluster_id(&dev, &env);
    let configs = match dev.configs(&env, args.config.as_deref(), &cluster_id) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sluice dev-cluster: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("sluice: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(async {
        let nodes = match sluice::dev_cluster::start(configs).await {
            Ok(n) => n,
            Err((node, e)) => {
                eprintln!("sluice dev-cluster: node {node}: {e}");
                return ExitCode::from(2);
            }
        };
        let bootstrap: Vec<String> = nodes.iter().map(|n| n.local_addr.to_string()).collect();
        tracing::info!(
            "sluice dev-cluster: {} brokers, cluster id {cluster_id}, bootstrap {}",
            nodes.len(),
            bootstrap.join(",")
        );
        wait_for_signal().await;
        tracing::info!("shutting down");
        sluice::dev_cluster::shutdown(nodes).await;
        ExitCode::SUCCESS
    })
}

fn tempfile_dir() -> std::io::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "sluice-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

async fn run(config: Config) -> ExitCode {
    let data_dir = config.data_dir.clone();
    let running = match sluice::server::start(config).await {
        Ok(r) => r,
        Err(e) => {
            // One line on stderr (the log may be JSON or filtered away).
            eprintln!("sluice: {e}");
            return ExitCode::from(2);
        }
    };
    for l in &running.listeners {
        match &l.advertised {
            Some((host, port)) => tracing::info!(
                "listener {} on {} (advertised as {host}:{port})",
                l.name,
                l.bind
            ),
            None => tracing::info!(
                "listener {} on {} (controller, not advertised)",
                l.name,
                l.bind
            ),
        }
    }
    if running.broker.config.process_roles.is_broker() {
        tracing::info!(
            "sluice {} listening on {} (advertised as {}:{}), cluster id {}, data in {}",
            env!("CARGO_PKG_VERSION"),
            running.local_addr,
            running.broker.identity.advertised_host,
            running.broker.identity.advertised_port,
            running.broker.identity.cluster_id,
            data_dir.display()
        );
    } else {
        tracing::info!(
            "sluice {} controller {} listening on {} (process.roles=controller), cluster id {}, \
             data in {}",
            env!("CARGO_PKG_VERSION"),
            running.broker.config.node_id,
            running.local_addr,
            running.broker.identity.cluster_id,
            data_dir.display()
        );
    }
    wait_for_signal().await;
    tracing::info!("shutting down");
    running.shutdown().await;
    ExitCode::SUCCESS
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
