//! The `sluice` binary. With no arguments: a single-node broker on 127.0.0.1:9092 with its data in
//! ./sluice-data. `sluice serve --help` lists the options.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sluice::config::{Config, Overrides};

#[global_allocator]
static ALLOC: sluice::alloc_guard::GuardedAllocator = sluice::alloc_guard::GuardedAllocator;

#[derive(Parser)]
#[command(
    name = "sluice",
    version,
    about = "A Kafka-wire-compatible message broker"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the broker (the default).
    Serve(ServeArgs),
}

#[derive(clap::Args, Default)]
struct ServeArgs {
    /// TOML config file; keys are Kafka's server.properties names (see README).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Address to listen on, HOST:PORT (default 127.0.0.1:9092).
    #[arg(long)]
    listen: Option<String>,
    /// Address given to clients in Metadata, HOST:PORT (default: the listen address).
    #[arg(long)]
    advertise: Option<String>,
    /// Log directory (default ./sluice-data).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Use a fresh temporary data directory (not --data-dir), removed on exit.
    #[arg(long)]
    ephemeral: bool,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SLUICE_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_target(false)
        .init();
    let cli = Cli::parse();
    let args = match cli.command {
        Some(Command::Serve(a)) => a,
        None => ServeArgs::default(),
    };
    let overrides = Overrides {
        listen: args.listen,
        advertise: args.advertise,
        data_dir: args.data_dir,
        ephemeral: args.ephemeral,
    };
    let mut config = match Config::load(args.config.as_deref(), &overrides) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sluice: {e}");
            return ExitCode::from(2);
        }
    };
    // Ephemeral brokers always get a fresh temporary directory (never a directory the user named,
    // since it is deleted on exit).
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
            tracing::error!("sluice: {e}");
            return ExitCode::from(1);
        }
    };
    tracing::info!(
        "sluice {} listening on {} (advertised as {}:{}), cluster id {}, data in {}",
        env!("CARGO_PKG_VERSION"),
        running.local_addr,
        running.broker.identity.advertised_host,
        running.broker.identity.advertised_port,
        running.broker.identity.cluster_id,
        data_dir.display()
    );
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
