//! The network edge: the listener accepts connections and runs one [`connection`] per socket.
//! Also the broker lifecycle used by `main` and by in-process tests: [`start`] returns a
//! [`RunningBroker`] whose `shutdown` stops accepting, flushes logs and writes checkpoints.

pub mod connection;
mod framing;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::broker::{Broker, StartupError};
use crate::config::Config;

/// How often recovery points and log start offsets are checkpointed while running.
const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(60);

/// A broker serving on a socket. Dropping it does not stop it; call [`RunningBroker::shutdown`].
pub struct RunningBroker {
    pub broker: Arc<Broker>,
    /// The bound address of the primary listener (`config.listen`).
    pub local_addr: SocketAddr,
    /// Every bound listener, ports resolved (a configured port 0 is the port actually bound).
    pub listeners: Vec<crate::config::Listener>,
    stop: watch::Sender<bool>,
    accept_task: JoinHandle<()>,
    housekeeping: JoinHandle<()>,
    group_coordinator: JoinHandle<()>,
    txn_coordinator: JoinHandle<()>,
}

/// Why the broker could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Startup(#[from] StartupError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Binds every listener, opens the data directory and starts serving. Must run inside a tokio
/// runtime. Listeners are bound first, so a port in use stops startup before the data directory
/// is touched.
pub async fn start(mut config: Config) -> Result<RunningBroker, ServeError> {
    let mut listeners = config.effective_listeners();
    let mut sockets = Vec::with_capacity(listeners.len());
    let mut local_addr = None;
    for l in &mut listeners {
        let addr = l.bind;
        let socket = TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Bind { addr, source })?;
        let bound = socket
            .local_addr()
            .map_err(|source| ServeError::Bind { addr, source })?;
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
        sockets.push(socket);
    }
    let local_addr = local_addr.unwrap_or(listeners[0].bind);
    if !config.listeners.is_empty() {
        config.listeners = listeners.clone();
    }
    let broker = Broker::open(config)?;
    let (stop, stop_rx) = watch::channel(false);
    let accept_tasks: Vec<JoinHandle<()>> = sockets
        .into_iter()
        .map(|socket| tokio::spawn(accept_loop(socket, broker.clone(), stop_rx.clone())))
        .collect();
    let accept_task = tokio::spawn(async move {
        for t in accept_tasks {
            let _ = t.await;
        }
    });
    let group_coordinator = {
        let coordinator = crate::group::driver::load(
            &broker,
            crate::group::GroupConfig::from_config(&broker.config),
        );
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
    let housekeeping = tokio::spawn(housekeeping(broker.clone(), stop_rx));
    Ok(RunningBroker {
        broker,
        local_addr,
        listeners,
        stop,
        accept_task,
        housekeeping,
        group_coordinator,
        txn_coordinator,
    })
}

impl RunningBroker {
    /// Stops accepting and serving, flushes every partition and writes the checkpoints.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let _ = self.accept_task.await;
        let _ = self.housekeeping.await;
        let _ = self.group_coordinator.await;
        let _ = self.txn_coordinator.await;
        let broker = self.broker.clone();
        let result = tokio::task::spawn_blocking(move || broker.replicas.checkpoint(true)).await;
        match result {
            Ok(Ok(())) => tracing::info!("logs flushed and checkpoints written"),
            Ok(Err(e)) => tracing::error!("writing checkpoints at shutdown failed: {e}"),
            Err(e) => tracing::error!("shutdown flush task failed: {e}"),
        }
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

async fn accept_loop(listener: TcpListener, broker: Arc<Broker>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            accepted = listener.accept() => match accepted {
                Ok((socket, peer)) => {
                    let _ = socket.set_nodelay(true);
                    set_send_buffer(&socket, SEND_BUFFER_BYTES);
                    tokio::spawn(connection::serve(socket, peer, broker.clone(), stop.clone()));
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
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = cleaner.tick(), if broker.config.cleaner_enable => {
                let b = broker.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    b.replicas.run_cleaner(crate::broker::now_ms())
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
