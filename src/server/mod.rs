//! The network edge: the listener accepts connections and runs one [`connection`] per socket.
//! Also the broker lifecycle used by `main` and by in-process tests: [`start`] returns a
//! [`RunningBroker`] whose `shutdown` runs the controlled shutdown, stops accepting, flushes logs
//! and writes checkpoints.
//! The broker holds its data directory's lock (`log::dir_lock`) from before it touches anything
//! there until the end of `shutdown`, and listens only once the logs are recovered.

pub mod connection;
pub mod controller_listener;
mod framing;
pub mod limits;
pub mod pool;
pub mod quotas;

pub use limits::{Network, FILE_CHUNK_COST};

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::broker::{Broker, StartupError};
use crate::config::Config;
use crate::log::dir_lock::DirLock;

/// A `log.flush.scheduler.interval.ms` at or above this (a year) never checks `flush.ms`.
const FLUSH_CHECK_NEVER_MS: i64 = 365 * 24 * 3600 * 1000;

/// How often recovery points and log start offsets are checkpointed while running.
const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(60);

/// A broker serving on a socket. Dropping it does not stop it; call [`RunningBroker::shutdown`].
pub struct RunningBroker {
    pub broker: Arc<Broker>,
    /// The bound address of the primary listener (`config.listen`).
    pub local_addr: SocketAddr,
    /// The network edge's limits and counters (memory pool, connection quotas).
    pub network: Arc<Network>,
    /// Every bound listener, ports resolved (a configured port 0 is the port actually bound).
    pub listeners: Vec<crate::config::Listener>,
    stop: watch::Sender<bool>,
    accept_task: JoinHandle<()>,
    housekeeping: JoinHandle<()>,
    group_coordinator: JoinHandle<()>,
    txn_coordinator: JoinHandle<()>,
    /// Reloads share state when this broker gains `__share_group_state` partitions.
    share_coordinator: JoinHandle<()>,
    /// The metadata side (quorum, controller driver, this broker's heartbeats).
    metadata: crate::controller::combined::MetadataNode,
    /// The data directory's `.lock`, released after the final flush of `shutdown`.
    dir_lock: DirLock,
    /// Whether [`RunningBroker::controlled_shutdown`] ran.
    controlled_shutdown_done: bool,
    /// The broker epoch the clean shutdown file records (taken when the stop began).
    broker_epoch: Option<i64>,
}

/// Why the broker could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Startup(#[from] StartupError),
    #[error(transparent)]
    Metadata(#[from] crate::controller::combined::MetadataStartError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Starts a broker. Must run inside a tokio runtime. The order matters:
/// 1. bind every listener without listening (a port in use fails here, before the data
///    directory is touched; a listener on port 0 learns its port, which is then advertised);
/// 2. lock the data directory (`log::dir_lock`): a second broker on it fails here, before it
///    reads or writes anything there;
/// 3. open the data directory: identity, every log recovered;
/// 4. start the metadata side (`controller::local`): the quorum's log replayed into the image,
///    this broker registered and unfenced, unlogged topics on disk adopted;
/// 5. the coordinators' state replayed (they see the adopted internal topics);
/// 6. listen and accept: no connection is accepted (the kernel refuses them) until the logs
///    and the coordinators are loaded.
pub async fn start(mut config: Config) -> Result<RunningBroker, ServeError> {
    let mut listeners = config.effective_listeners();
    let mut sockets = Vec::with_capacity(listeners.len());
    let mut local_addr = None;
    for l in &mut listeners {
        let addr = l.bind;
        let bind_err = |source| ServeError::Bind { addr, source };
        let socket = bind_unlistened(addr).map_err(bind_err)?;
        let bound = socket.local_addr().map_err(bind_err)?;
        if l.bind == config.listen && local_addr.is_none() {
            local_addr = Some(bound);
            if config.advertise.1 == 0 {
                // Port 0 picks a free port: advertise the one actually bound, as Kafka does.
                config.advertise.1 = bound.port();
            }
        }
        l.bind = bound;
        if let Some(a) = &mut l.advertised {
            if a.1 == 0 {
                a.1 = bound.port();
            }
        }
        sockets.push((addr, socket));
    }
    let local_addr = local_addr.unwrap_or(listeners[0].bind);
    let dir_lock = DirLock::acquire(&config.data_dir).map_err(StartupError::from)?;
    config.previous_broker_epoch = crate::cluster::clean_shutdown::take(&config.data_dir);
    if !config.listeners.is_empty() {
        config.listeners = listeners.clone();
    }
    // A member of a multi-voter quorum serves its CONTROLLER listener itself (quorum traffic
    // and the controller RPCs); a lone voter serves it as a broker listener, as before.
    // A controller-only node serves nothing else (`controller::dedicated`).
    let controller_only = !config.process_roles.is_broker();
    let mut controller_listener = None;
    if crate::controller::combined::is_multi_voter(&config) || controller_only {
        if let Some(i) = listeners.iter().position(|l| l.controller) {
            let (addr, socket) = sockets.remove(i);
            let listener = socket
                .listen(LISTEN_BACKLOG)
                .map_err(|source| ServeError::Bind { addr, source })?;
            controller_listener = Some(listener);
        }
    }
    if controller_only && !sockets.is_empty() {
        // Kafka's controller serves every listener of controller.listener.names; Sluice serves
        // the first (the voters' and brokers' address) and leaves the others unlistened.
        tracing::warn!(
            "process.roles=controller: only the first controller listener is served; {} other \
             listener(s) stay closed",
            sockets.len()
        );
        sockets.clear();
    }
    let broker = Broker::open(config)?;
    halt_when_the_data_directory_fails(&broker);
    let started = std::time::Instant::now();
    let metadata = broker.start_metadata(controller_listener).await?;
    if controller_only {
        let (stop, _) = watch::channel(false);
        let idle = || tokio::spawn(async {});
        let network = Network::from_config(&broker.config);
        return Ok(RunningBroker {
            broker,
            local_addr,
            network,
            listeners,
            stop,
            accept_task: idle(),
            housekeeping: idle(),
            group_coordinator: idle(),
            txn_coordinator: idle(),
            share_coordinator: idle(),
            metadata,
            dir_lock,
            controlled_shutdown_done: false,
            broker_epoch: None,
        });
    }
    tracing::info!(
        "metadata quorum replayed and broker {} registered in {} ms",
        broker.config.node_id,
        started.elapsed().as_millis()
    );
    // The partition leaders' ISR changes go to the controller (AlterPartition); the client's task
    // ends when the broker (the only holder of the client) is dropped.
    let (alter_partition, _alter_task) = metadata.alter_partition_client();
    broker
        .replicas
        .isr()
        .set_transport(Arc::new(alter_partition));
    let (stop, stop_rx) = watch::channel(false);
    let network = Network::from_config(&broker.config);
    let group_coordinator = {
        let mut coordinator = crate::group::driver::load(
            &broker,
            crate::group::GroupConfig::from_config(&broker.config),
        );
        coordinator.group_configs = Some(broker.group_configs.clone()); // admin: per-group configs
        let inbox = broker.group_inbox.lock().take();
        match inbox {
            Some(inbox) => tokio::spawn(crate::group::driver::run(
                broker.clone(),
                coordinator,
                inbox,
                stop_rx.clone(),
            )),
            None => tokio::spawn(async {}),
        }
    };
    let txn_coordinator = {
        let coordinator =
            crate::txn::driver::load(&broker, crate::txn::TxnConfig::from_config(&broker.config));
        let inbox = broker.txn_inbox.lock().take();
        match inbox {
            Some(inbox) => tokio::spawn(crate::txn::driver::run(
                broker.clone(),
                coordinator,
                broker.txn.view(),
                inbox,
                stop_rx.clone(),
            )),
            None => tokio::spawn(async {}),
        }
    };
    let share_coordinator = tokio::spawn(crate::share_state::follow_leadership(
        broker.clone(),
        stop_rx.clone(),
    ));
    let housekeeping = tokio::spawn(housekeeping(broker.clone(), stop_rx.clone()));
    let mut accept_tasks = Vec::with_capacity(sockets.len());
    for (addr, socket) in sockets {
        let listener = socket
            .listen(LISTEN_BACKLOG)
            .map_err(|source| ServeError::Bind { addr, source })?;
        accept_tasks.push(tokio::spawn(accept_loop(
            listener,
            broker.clone(),
            network.clone(),
            stop_rx.clone(),
        )));
    }
    let accept_task = tokio::spawn(async move {
        for t in accept_tasks {
            let _ = t.await;
        }
    });
    Ok(RunningBroker {
        broker,
        local_addr,
        network,
        listeners,
        stop,
        accept_task,
        housekeeping,
        group_coordinator,
        txn_coordinator,
        share_coordinator,
        metadata,
        dir_lock,
        controlled_shutdown_done: false,
        broker_epoch: None,
    })
}

/// Pending connections the kernel queues before the accept loop takes them.
const LISTEN_BACKLOG: u32 = 1024;

/// A socket bound to `addr` (with `SO_REUSEADDR`, as `TcpListener::bind` sets) but not yet
/// listening: connections to it are refused until [`TcpSocket::listen`].
fn bind_unlistened(addr: SocketAddr) -> std::io::Result<TcpSocket> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    Ok(socket)
}

impl RunningBroker {
    /// A clean stop's first step, Kafka's controlled shutdown (with `controlled.shutdown.enable`,
    /// the default): the controller moves this broker's leaderships away while it still serves
    /// clients and followers (`controller::lifecycle`; bounded, one log line). Runs once;
    /// [`RunningBroker::shutdown`] runs it if it has not run. Several brokers of one process
    /// (`dev_cluster::shutdown`) run it together, while every quorum member still runs.
    pub async fn controlled_shutdown(&mut self) {
        if self.controlled_shutdown_done {
            return;
        }
        self.controlled_shutdown_done = true;
        // The registration's epoch, for the clean shutdown file (the lifecycle forgets it once
        // the controller lets the broker go).
        self.broker_epoch = self.metadata.broker_epoch();
        if self.broker.config.controlled_shutdown_enable
            && self.broker.config.process_roles.is_broker()
        {
            self.broker.replicas.begin_controlled_shutdown();
            self.metadata.controlled_shutdown(&self.broker.config).await;
        }
    }

    /// Stops cleanly: the controlled shutdown (above), the quorum leader's resignation
    /// (`MetadataNode::resign`), then it stops accepting and serving, flushes every partition
    /// and writes the checkpoints (recovery points, log starts, high watermarks) and the clean
    /// shutdown file.
    pub async fn shutdown(mut self) {
        self.controlled_shutdown().await;
        // While it still serves: the quorum leader hands over before its voter goes.
        self.metadata.resign(&self.broker.config).await;
        let broker_epoch = self.broker_epoch;
        let _ = self.stop.send(true);
        let _ = self.accept_task.await;
        let _ = self.housekeeping.await;
        let _ = self.group_coordinator.await;
        let _ = self.txn_coordinator.await;
        let _ = self.share_coordinator.await;
        self.broker.replicas.fetchers().shutdown();
        self.broker.replicas.isr().clear_transport();
        self.broker.detach_controller();
        self.metadata.shutdown().await;
        if !self.broker.config.process_roles.is_broker() {
            // A controller-only node hosts no log: nothing to flush or checkpoint.
            drop(self.dir_lock);
            return;
        }
        let broker = self.broker.clone();
        let result = tokio::task::spawn_blocking(move || {
            let logs = broker.replicas.checkpoint(true);
            let high_watermarks = broker.replicas.checkpoint_high_watermarks();
            logs.and(high_watermarks)
        })
        .await;
        match result {
            Ok(Ok(())) => {
                tracing::info!("logs flushed and checkpoints written");
                if let Some(epoch) = broker_epoch {
                    let dir = &self.broker.config.data_dir;
                    if let Err(e) = crate::cluster::clean_shutdown::write(dir, epoch) {
                        tracing::error!("writing the clean shutdown file failed: {e}");
                    }
                }
            }
            Ok(Err(e)) => tracing::error!("writing checkpoints at shutdown failed: {e}"),
            Err(e) => tracing::error!("shutdown flush task failed: {e}"),
        }
        drop(self.dir_lock);
    }
}

/// Socket send buffer asked for on every client connection (the kernel caps it at
/// `net.core.wmem_max` and doubles it). A whole Fetch answer (up to ~6 MiB for 6 partitions at the
/// consumer's default 1 MiB each) then fits in the kernel at once: the writer hands it over in one
/// vectored write and the kernel feeds the client as it reads, instead of waking the writer task
/// for every few hundred KiB the client drains.
const SEND_BUFFER_BYTES: libc::c_int = 4 * 1024 * 1024;

fn set_send_buffer(socket: &tokio::net::TcpStream, bytes: libc::c_int) {
    use std::os::unix::io::AsRawFd;
    // SAFETY: the fd is owned by `socket` for the duration of the call, and the option value is a
    // c_int whose size is passed.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            &bytes as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        tracing::debug!(
            "SO_SNDBUF {bytes} refused: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Accepts connections under Kafka's quotas: at `max.connections` it stops accepting until one
/// closes (new ones wait in the listen backlog); an address at `max.connections.per.ip` has its
/// new connection closed. Both log at most one line per `limits::LOG_INTERVAL`.
async fn accept_loop(
    listener: TcpListener,
    broker: Arc<Broker>,
    network: Arc<Network>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        if !network.quotas.has_slot() {
            if let Some(n) = network.full_log.check(tokio::time::Instant::now()) {
                tracing::warn!(
                    "max.connections ({}) reached: not accepting until a connection closes{}",
                    network.quotas.total(),
                    limits::suppressed_note(n)
                );
            }
            tokio::select! {
                _ = stop.changed() => return,
                _ = network.quotas.wait_for_slot() => {}
            }
        }
        tokio::select! {
            _ = stop.changed() => return,
            accepted = listener.accept() => match accepted {
                Ok((socket, peer)) => {
                    let slot = match network.quotas.admit(peer.ip()) {
                        Ok(slot) => slot,
                        Err(refused) => {
                            network.stats.refused_per_ip.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            if let Some(n) = network.refusal_log.check(tokio::time::Instant::now()) {
                                tracing::info!(
                                    "refused connection from {}: the address already has the \
                                     configured maximum of {} connections \
                                     (max.connections.per.ip){}",
                                    refused.ip,
                                    refused.limit,
                                    limits::suppressed_note(n)
                                );
                            }
                            drop(socket);
                            continue;
                        }
                    };
                    let _ = socket.set_nodelay(true);
                    set_send_buffer(&socket, SEND_BUFFER_BYTES);
                    tokio::spawn(connection::serve(
                        socket,
                        peer,
                        broker.clone(),
                        network.clone(),
                        slot,
                        stop.clone(),
                    ));
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
}

async fn housekeeping(broker: Arc<Broker>, mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(CHECKPOINT_INTERVAL);
    tick.tick().await;
    // Retention runs every `log.retention.check.interval.ms` (Kafka's default: 5 minutes).
    let retention_every =
        Duration::from_millis(broker.config.retention_check_interval_ms.max(1) as u64);
    let mut retention = tokio::time::interval(retention_every);
    retention.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    retention.tick().await;
    // The cleaner (compaction) looks for dirty logs every `log.cleaner.backoff.ms`.
    let cleaner_every = Duration::from_millis(broker.config.cleaner_backoff_ms.max(1) as u64);
    let mut cleaner = tokio::time::interval(cleaner_every);
    cleaner.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    cleaner.tick().await;
    // `flush.ms` is checked every `log.flush.scheduler.interval.ms` (Kafka's default, Long.MAX:
    // never, as Kafka's log flusher task).
    let flush_check_ms = broker.config.flush_scheduler_interval_ms;
    let flush_check_enabled = flush_check_ms < FLUSH_CHECK_NEVER_MS;
    let flush_every = Duration::from_millis(flush_check_ms.clamp(1, FLUSH_CHECK_NEVER_MS) as u64);
    let mut flush_check = tokio::time::interval(flush_every);
    flush_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    flush_check.tick().await;
    // Kafka's `isr-expiration` task: every `replica.lag.time.max.ms / 2`, leaders propose removing
    // followers that have not caught up within `replica.lag.time.max.ms`.
    let isr_every =
        Duration::from_millis((broker.config.replica_lag_time_max_ms / 2).max(1) as u64);
    let mut isr_check = tokio::time::interval(isr_every);
    isr_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    isr_check.tick().await;
    // Kafka's `highwatermark-checkpoint` task: every high watermark into
    // `replication-offset-checkpoint` every `replica.high.watermark.checkpoint.interval.ms`.
    let hw_every = Duration::from_millis(
        broker
            .config
            .replica_high_watermark_checkpoint_interval_ms
            .max(1),
    );
    let mut hw_checkpoint = tokio::time::interval(hw_every);
    hw_checkpoint.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    hw_checkpoint.tick().await;
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = hw_checkpoint.tick() => {
                let b = broker.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    if let Err(e) = b.replicas.checkpoint_high_watermarks() {
                        tracing::warn!("high watermark checkpoint failed: {e}");
                    }
                }).await;
            }
            _ = isr_check.tick() => {
                broker.replicas.maybe_shrink_isrs(crate::replica::isr::now_ms());
            }
            _ = cleaner.tick(), if broker.config.cleaner_enable => {
                let b = broker.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    b.replicas.run_cleaner(crate::broker::now_ms())
                }).await;
            }
            _ = flush_check.tick(), if flush_check_enabled => {
                let b = broker.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    b.replicas.flush_dirty_logs(crate::broker::now_ms())
                }).await;
            }
            _ = retention.tick() => {
                let b = broker.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    b.replicas.enforce_retention(crate::broker::now_ms())
                }).await;
            }
            _ = tick.tick() => {
                let b = broker.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    b.replicas.remove_expired_producers();
                    if let Err(e) = b.replicas.checkpoint(false) {
                        tracing::warn!("periodic checkpoint failed: {e}");
                    }
                }).await;
            }
        }
    }
}

#[cfg(test)]
mod tests;

/// Kafka halts a broker whose only log directory failed (`ReplicaManager.handleLogDirFailure`:
/// "Shutdown broker because all log dirs ... have failed", `Exit.halt(1)`); Sluice has one data
/// directory, so its first failed fsync of partition data ends the process the same way: one line
/// on stderr and in the log, exit code 1, no graceful shutdown (which would fsync again). The
/// cluster moves the partitions' leadership to in-sync followers; the next start recovers the
/// logs from their recovery points.
fn halt_when_the_data_directory_fails(broker: &Broker) {
    let dir = broker.config.data_dir.display().to_string();
    broker
        .replicas
        .flusher()
        .health()
        .on_offline(Box::new(move |why| {
            let line = format!(
                "data directory {dir} is offline: {why}; halting the broker (a failed fsync \
                 cannot be retried safely; restart once the disk is repaired)"
            );
            tracing::error!("{line}");
            eprintln!("{line}");
            std::process::exit(1);
        }));
}
