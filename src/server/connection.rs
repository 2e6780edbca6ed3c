//! One client connection: a reader that frames and handles requests in order, and a writer that
//! sends the responses strictly in request order.
//!
//! Reader: `framing::FrameReader` splits each complete frame off its read buffer without copying
//! and checks the length prefix (`0 < len <= socket.request.max.bytes`); the frame goes to
//! `api::handle`.
//! Appends therefore happen in request order on this task. Each reply (ready, or a future for
//! long-polls) goes into a bounded queue, which also bounds pipelining.
//!
//! Memory (see `limits`): before reading a frame's body the reader acquires the frame's length
//! from the broker-wide pool and holds it until the request is handled. Before reading a next
//! request it waits while the connection's queued responses hold more than
//! `sluice.connection.queued.response.max.bytes` (the [`Outbox`] count: byte chunks by length,
//! file ranges `FILE_CHUNK_COST` each), as Kafka mutes a channel until its response is sent; so a
//! client that never reads holds at most that bound plus one response. A frame that does not
//! arrive within `sluice.socket.request.read.timeout.ms` closes the connection; so does
//! `connections.max.idle.ms` with no request, no response being sent and no write progress.
//!
//! Writer: awaits replies in queue order, gathers the ones that are ready, and writes their chunks
//! in order: runs of byte chunks (headers, small record reads) with vectored writes, file ranges
//! (large Fetch reads) with `sendfile` from the page cache, driven by the socket's write readiness.
//! A gathered batch that mixes the two is sent with `TCP_CORK` on, so small header writes do not
//! leave as segments of their own; uncorking at the end of the batch pushes the rest out.
//!
//! Client quotas (KIP-219): a reply over the client's quota comes back as `Reply::Throttled`
//! (the reader sees it at once) or a `Reply::LaterThrottled` that decides its throttle when it
//! completes (the writer sees it). Either sets the [`Outbox`]'s throttle deadline, and the reader
//! neither reads nor handles a request before it: Kafka mutes the channel for the throttle time
//! after answering at once. Only this connection waits; a stop (shutdown) ends the wait at once,
//! and a throttle outlasting `connections.max.idle.ms` without writes closes the connection as
//! idle, as Kafka's idle expiry closes a muted channel.
//!
//! A protocol violation closes this connection with one log line; nothing else is affected. So does
//! a file range that ends early (its log file was truncated after the read): the response's size
//! prefix is already on the wire and nothing else can be sent in its place.

use std::fs::File;
use std::io::IoSlice;
use std::net::SocketAddr;
use std::os::unix::io::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Buf;
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch, Notify};
use tokio::time::Instant;

use super::framing::{FrameEnd, FrameLimits, FrameReader};
use super::limits::{Network, FILE_CHUNK_COST};
use super::quotas::ConnectionSlot;
use crate::api::{self, Chunk, Reply};
use crate::broker::Broker;
use crate::log::FileRecords;

/// Requests a client may have in flight before the reader stops reading.
const MAX_IN_FLIGHT: usize = 64;
/// Most slices passed to one vectored write (below Linux's IOV_MAX of 1024).
const MAX_IOV: usize = 512;
/// Most bytes asked of one `sendfile` call (Linux transfers at most 0x7ffff000 per call anyway).
const MAX_SENDFILE: usize = 1 << 30;

/// Why the writer stopped before sending everything.
#[derive(Debug)]
enum WriteError {
    Io(std::io::Error),
    /// A file chunk's file ended before its promised length: it was truncated after the read.
    FileShort {
        position: u64,
        promised: usize,
        sent: usize,
    },
    /// A deferred reply could not be built: the client must not be left waiting for it.
    Deferred,
    /// A broker bug (not the client's): one line at error level.
    Bug(&'static str),
}

impl From<std::io::Error> for WriteError {
    fn from(e: std::io::Error) -> WriteError {
        WriteError::Io(e)
    }
}

/// Why the reader stopped.
#[derive(Debug)]
enum ReadEnd {
    /// No next frame (end of stream, stop, read error, bad length prefix, read timeout).
    Frame(FrameEnd),
    Close(api::CloseReason),
    /// `connections.max.idle.ms` passed with nothing read, queued or written.
    Idle,
}

/// The replies between a connection's reader and its writer: how much memory they hold, how
/// many there are, and when the writer last made progress. Shared by the two tasks; the reader
/// adds, the writer subtracts once a reply's bytes are on the wire and wakes the reader.
#[derive(Debug)]
pub(crate) struct Outbox {
    /// Memory of queued replies: byte chunks by length, file chunks `FILE_CHUNK_COST` each.
    bytes: AtomicUsize,
    /// Replies queued or being written.
    replies: AtomicUsize,
    /// Milliseconds since `epoch` of the writer's last successful write.
    last_write_ms: AtomicU64,
    epoch: Instant,
    /// Set when the writer has stopped: nothing queued will drain any more.
    closed: AtomicBool,
    drained: Notify,
    /// Milliseconds since `epoch` until which the client is throttled by a quota (0: never was).
    throttled_until_ms: AtomicU64,
}

impl Outbox {
    pub(crate) fn new() -> Arc<Outbox> {
        Arc::new(Outbox {
            bytes: AtomicUsize::new(0),
            replies: AtomicUsize::new(0),
            last_write_ms: AtomicU64::new(0),
            epoch: Instant::now(),
            closed: AtomicBool::new(false),
            drained: Notify::new(),
            throttled_until_ms: AtomicU64::new(0),
        })
    }

    /// A client quota throttles this connection for `throttle` from now (a later deadline
    /// already set stays).
    fn throttle(&self, throttle: Duration) {
        let until = self.epoch.elapsed().saturating_add(throttle).as_millis();
        let until = u64::try_from(until).unwrap_or(u64::MAX);
        self.throttled_until_ms.fetch_max(until, Ordering::Relaxed);
    }

    /// How much of a quota throttle is left, if any.
    fn throttle_left(&self) -> Option<Duration> {
        let until = Duration::from_millis(self.throttled_until_ms.load(Ordering::Relaxed));
        let left = until.saturating_sub(self.epoch.elapsed());
        (!left.is_zero()).then_some(left)
    }

    /// Counts `cost` bytes queued; returns the new total.
    fn add(&self, cost: usize) -> usize {
        self.bytes.fetch_add(cost, Ordering::Relaxed) + cost
    }

    /// `cost` bytes of `replies` replies are on the wire (or gone).
    fn sent(&self, cost: usize, replies: usize) {
        self.bytes.fetch_sub(cost, Ordering::Relaxed);
        self.replies.fetch_sub(replies, Ordering::Relaxed);
        self.drained.notify_one();
    }

    fn wrote(&self) {
        let ms = self.epoch.elapsed().as_millis() as u64;
        self.last_write_ms.store(ms, Ordering::Relaxed);
    }

    fn since_last_write(&self) -> Duration {
        let last = Duration::from_millis(self.last_write_ms.load(Ordering::Relaxed));
        self.epoch.elapsed().saturating_sub(last)
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        self.drained.notify_one();
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Whether the writer has work or wrote within `idle`: the connection is not idle then.
    fn busy_within(&self, idle: Duration) -> bool {
        self.replies.load(Ordering::Relaxed) > 0 || self.since_last_write() < idle
    }
}

/// The memory a reply holds while queued (a deferred reply counts once its frame exists).
fn frame_cost(frame: &[Chunk]) -> usize {
    frame
        .iter()
        .map(|c| match c {
            Chunk::Bytes(b) => b.len(),
            Chunk::File(_) => FILE_CHUNK_COST,
        })
        .sum()
}

fn reply_cost(reply: &Reply) -> usize {
    match reply {
        Reply::Now(Some(frame)) => frame_cost(frame),
        Reply::Throttled(_, inner) => reply_cost(inner),
        Reply::Now(None) | Reply::Later(_) | Reply::LaterThrottled(_) | Reply::Barrier(_) => 0,
    }
}

pub async fn serve(
    socket: TcpStream,
    peer: SocketAddr,
    broker: Arc<Broker>,
    network: Arc<Network>,
    slot: ConnectionSlot,
    stop: watch::Receiver<bool>,
) {
    let (rd, wr) = socket.into_split();
    let (tx, rx) = mpsc::channel(MAX_IN_FLIGHT);
    let outbox = Outbox::new();
    let writer = tokio::spawn(write_loop(wr, rx, peer, outbox.clone(), network.clone()));
    let end = read_loop(rd, tx, &broker, &network, &outbox, stop, peer).await;
    let limits = &network.limits;
    let abandon = match end {
        ReadEnd::Frame(FrameEnd::Eof | FrameEnd::Stopped) => false,
        ReadEnd::Frame(FrameEnd::Io(e)) => {
            tracing::debug!("connection {peer}: read error: {e}");
            false
        }
        ReadEnd::Frame(FrameEnd::BadLength(n)) => {
            tracing::warn!(
                "closing connection {peer}: frame length {n} outside 1..={}",
                limits.max_request_bytes
            );
            false
        }
        ReadEnd::Frame(FrameEnd::ReadTimeout { received, declared }) => {
            network.stats.read_timeouts.fetch_add(1, Ordering::Relaxed);
            let of = declared.map_or("of its 4-byte length prefix".to_string(), |d| {
                format!("of its {d}-byte body")
            });
            if let Some(n) = network.timeout_log.check(Instant::now()) {
                tracing::warn!(
                    "closing connection {peer}: a request frame did not arrive within {:?} \
                     (sluice.socket.request.read.timeout.ms): {received} bytes {of} received{}",
                    limits.read_timeout.unwrap_or_default(),
                    super::limits::suppressed_note(n)
                );
            }
            true
        }
        // The reader reports `Idle` only after checking the writer; kept for completeness.
        ReadEnd::Frame(FrameEnd::Idle) | ReadEnd::Idle => {
            network.stats.idle_closed.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(
                "closing connection {peer}: idle for {:?} (connections.max.idle.ms)",
                limits.idle.unwrap_or_default()
            );
            true
        }
        ReadEnd::Close(reason) => {
            tracing::warn!("closing connection {peer}: {reason}");
            false
        }
    };
    if abandon {
        writer.abort();
    }
    drain_writer(writer, &outbox, limits.idle, peer).await;
    drop(slot);
}

/// Lets the writer send what is queued, unless it makes no progress for the idle time (a client
/// that stopped reading must not keep the connection and its memory forever).
async fn drain_writer(
    mut writer: tokio::task::JoinHandle<()>,
    outbox: &Outbox,
    idle: Option<Duration>,
    peer: SocketAddr,
) {
    let Some(idle) = idle else {
        let _ = writer.await;
        return;
    };
    loop {
        tokio::select! {
            _ = &mut writer => return,
            _ = tokio::time::sleep(idle) => {
                if outbox.since_last_write() >= idle {
                    tracing::debug!("connection {peer}: closed with unsent responses (client not reading)");
                    writer.abort();
                    let _ = writer.await;
                    return;
                }
            }
        }
    }
}

async fn read_loop(
    rd: OwnedReadHalf,
    tx: mpsc::Sender<Reply>,
    broker: &Arc<Broker>,
    network: &Network,
    outbox: &Outbox,
    mut stop: watch::Receiver<bool>,
    peer: SocketAddr,
) -> ReadEnd {
    let local = rd.local_addr().ok(); // names the listener (config)
    let limits = network.limits;
    let mut frames = FrameReader::with_limits(
        rd,
        limits.max_request_bytes,
        FrameLimits {
            pool: Some(network.pool.clone()),
            idle: limits.idle,
            read_timeout: limits.read_timeout,
        },
    );
    loop {
        if let Err(end) = wait_unmuted(outbox, network, &mut stop).await {
            return end;
        }
        if let Err(end) = wait_unthrottled(outbox, network, &mut stop).await {
            return end;
        }
        let frame = loop {
            match frames.next(&mut stop).await {
                Err(FrameEnd::Idle) => match limits.idle {
                    Some(idle) if !outbox.busy_within(idle) => return ReadEnd::Idle,
                    _ => continue,
                },
                Ok(frame) => break frame,
                Err(end) => return ReadEnd::Frame(end),
            }
        };
        // A throttle the writer set (a deferred Fetch answer) while this frame arrived: the
        // request waits it out before it is handled.
        if let Err(end) = wait_unthrottled(outbox, network, &mut stop).await {
            return end;
        }
        let reply = settle(
            api::handle_on(broker, frame.body, Some(peer), local),
            outbox,
            network,
        )
        .await;
        // Handled: the frame's pool memory goes back (what a deferred reply keeps is its own).
        drop(frame.memory);
        match reply {
            Ok(reply) => {
                let queued = outbox.add(reply_cost(&reply));
                outbox.replies.fetch_add(1, Ordering::Relaxed);
                network
                    .stats
                    .peak_queued_response_bytes
                    .fetch_max(queued, Ordering::Relaxed);
                let permit = match reserve_slot(&tx, outbox, limits.idle).await {
                    Ok(permit) => permit,
                    Err(end) => return end,
                };
                permit.send(reply);
            }
            Err(reason) => return ReadEnd::Close(reason),
        }
    }
}

/// Resolves what the reader must before reading on: barriers are awaited (flush policy: the
/// produce's fsync runs on the blocking pool), throttles start (the reply goes out at once, the
/// next request waits).
async fn settle(
    mut reply: Result<Reply, api::CloseReason>,
    outbox: &Outbox,
    network: &Network,
) -> Result<Reply, api::CloseReason> {
    loop {
        reply = match reply {
            Ok(Reply::Barrier(done)) => done.await,
            Ok(Reply::Throttled(throttle, inner)) => {
                start_throttle(outbox, network, throttle);
                Ok(*inner)
            }
            other => return other,
        };
    }
}

fn start_throttle(outbox: &Outbox, network: &Network, throttle: Duration) {
    if !throttle.is_zero() {
        network.stats.throttles.fetch_add(1, Ordering::Relaxed);
        outbox.throttle(throttle);
    }
}

/// Waits while a client quota throttles the connection (KIP-219's muted channel). Ends the
/// connection if the writer stopped, on `stop`, or when the throttle has lasted
/// `connections.max.idle.ms` with no write progress either (Kafka's idle expiry).
async fn wait_unthrottled(
    outbox: &Outbox,
    network: &Network,
    stop: &mut watch::Receiver<bool>,
) -> Result<(), ReadEnd> {
    if outbox.throttle_left().is_none() {
        return Ok(());
    }
    let throttled = &network.stats.throttled_connections;
    throttled.fetch_add(1, Ordering::Relaxed);
    let started = Instant::now();
    let idle = network.limits.idle;
    let result = async {
        loop {
            if *stop.borrow() {
                return Err(ReadEnd::Frame(FrameEnd::Stopped));
            }
            if outbox.closed.load(Ordering::Relaxed) {
                return Err(ReadEnd::Frame(FrameEnd::Eof));
            }
            let Some(left) = outbox.throttle_left() else {
                return Ok(());
            };
            if let Some(idle) = idle {
                if started.elapsed() >= idle && outbox.since_last_write() >= idle {
                    return Err(ReadEnd::Idle);
                }
            }
            let nap = idle.map_or(left, |idle| left.min(idle));
            tokio::select! {
                _ = tokio::time::sleep(nap) => {}
                _ = stop.changed() => return Err(ReadEnd::Frame(FrameEnd::Stopped)),
                _ = outbox.drained.notified() => {}
            }
        }
    }
    .await;
    throttled.fetch_sub(1, Ordering::Relaxed);
    result
}

/// A place in the reply queue (at most `MAX_IN_FLIGHT` replies). Ends the connection if the
/// writer is gone, or made no progress for `connections.max.idle.ms` (a client that stopped
/// reading small answers).
async fn reserve_slot<'a>(
    tx: &'a mpsc::Sender<Reply>,
    outbox: &Outbox,
    idle: Option<Duration>,
) -> Result<mpsc::Permit<'a, Reply>, ReadEnd> {
    loop {
        tokio::select! {
            permit = tx.reserve() => return permit.map_err(|_| ReadEnd::Frame(FrameEnd::Eof)),
            _ = tokio::time::sleep(idle.unwrap_or(Duration::MAX)), if idle.is_some() => {
                if idle.is_some_and(|idle| outbox.since_last_write() >= idle) {
                    return Err(ReadEnd::Idle);
                }
            }
        }
    }
}

/// Waits while the queued responses hold more than the bound (the connection is muted: its
/// requests stay in the socket). Ends the connection if the writer stopped, on `stop`, or when
/// the writer made no progress for `connections.max.idle.ms`.
async fn wait_unmuted(
    outbox: &Outbox,
    network: &Network,
    stop: &mut watch::Receiver<bool>,
) -> Result<(), ReadEnd> {
    let bound = network.limits.queued_response_max_bytes;
    if outbox.bytes() <= bound {
        return Ok(());
    }
    network.stats.mutes.fetch_add(1, Ordering::Relaxed);
    let muted = &network.stats.muted_connections;
    muted.fetch_add(1, Ordering::Relaxed);
    let result = async {
        loop {
            if outbox.closed.load(Ordering::Relaxed) {
                return Err(ReadEnd::Frame(FrameEnd::Eof));
            }
            if outbox.bytes() <= bound {
                return Ok(());
            }
            let check = network.limits.idle.unwrap_or(Duration::MAX);
            tokio::select! {
                _ = outbox.drained.notified() => {}
                _ = stop.changed() => return Err(ReadEnd::Frame(FrameEnd::Stopped)),
                _ = tokio::time::sleep(check), if network.limits.idle.is_some() => {
                    if outbox.since_last_write() >= check {
                        return Err(ReadEnd::Idle);
                    }
                }
            }
        }
    }
    .await;
    muted.fetch_sub(1, Ordering::Relaxed);
    result
}

async fn write_loop(
    mut wr: OwnedWriteHalf,
    rx: mpsc::Receiver<Reply>,
    peer: SocketAddr,
    outbox: Arc<Outbox>,
    network: Arc<Network>,
) {
    let mut batch = Batch::default();
    if let Err(e) = write_replies(&mut wr, rx, &outbox, &network, &mut batch).await {
        log_write_error(peer, e);
    } else {
        let _ = wr.shutdown().await;
    }
    outbox.close();
}

/// What the writer has gathered and not yet sent.
#[derive(Default)]
struct Batch {
    chunks: Vec<Chunk>,
    cost: usize,
    replies: usize,
}

/// Sends replies in queue order until the queue closes; `Err` ends the connection.
async fn write_replies(
    wr: &mut OwnedWriteHalf,
    mut rx: mpsc::Receiver<Reply>,
    outbox: &Outbox,
    network: &Network,
    batch: &mut Batch,
) -> Result<(), WriteError> {
    loop {
        let reply = if batch.chunks.is_empty() {
            // Nothing to send: replies that sent nothing (acks=0) are done.
            outbox.sent(batch.cost, std::mem::take(&mut batch.replies));
            batch.cost = 0;
            match rx.recv().await {
                Some(r) => r,
                None => return Ok(()),
            }
        } else {
            match rx.try_recv() {
                Ok(r) => r,
                Err(_) => {
                    send_batch(wr, outbox, batch).await?;
                    continue;
                }
            }
        };
        batch.replies += 1;
        let frame = match reply {
            Reply::Now(f) => {
                batch.cost += f.as_deref().map_or(0, frame_cost);
                f
            }
            Reply::Barrier(_) | Reply::Throttled(..) => {
                // The reader resolves these before queueing; one here is a bug, not a client's.
                return Err(WriteError::Bug("unresolved barrier or throttle reply"));
            }
            Reply::Later(fut) => {
                // Keep order: what is gathered so far goes out before we wait.
                if !batch.chunks.is_empty() {
                    send_batch(wr, outbox, batch).await?;
                }
                Some(deferred(fut.await, outbox, network, batch)?)
            }
            Reply::LaterThrottled(fut) => {
                if !batch.chunks.is_empty() {
                    send_batch(wr, outbox, batch).await?;
                }
                let (frame, throttle) = fut.await;
                // Muted before the answer leaves: a client answering it at once waits too.
                start_throttle(outbox, network, throttle);
                Some(deferred(frame, outbox, network, batch)?)
            }
        };
        if let Some(chunks) = frame {
            batch
                .chunks
                .extend(chunks.into_iter().filter(|c| !c.is_empty()));
        }
    }
}

/// A deferred reply's frame, counted in the outbox and the batch; none closes the connection.
fn deferred(
    frame: Option<Vec<Chunk>>,
    outbox: &Outbox,
    network: &Network,
    batch: &mut Batch,
) -> Result<Vec<Chunk>, WriteError> {
    let Some(frame) = frame else {
        return Err(WriteError::Deferred);
    };
    let cost = frame_cost(&frame);
    let queued = outbox.add(cost);
    network
        .stats
        .peak_queued_response_bytes
        .fetch_max(queued, Ordering::Relaxed);
    batch.cost += cost;
    Ok(frame)
}

/// Writes the gathered chunks, then gives their memory back to the outbox.
async fn send_batch(
    wr: &mut OwnedWriteHalf,
    outbox: &Outbox,
    batch: &mut Batch,
) -> Result<(), WriteError> {
    write_chunks(wr, &mut batch.chunks, outbox).await?;
    outbox.sent(batch.cost, batch.replies);
    batch.cost = 0;
    batch.replies = 0;
    Ok(())
}

fn log_write_error(peer: SocketAddr, e: WriteError) {
    match e {
        WriteError::Io(e) => tracing::debug!("connection {peer}: write error: {e}"),
        WriteError::FileShort {
            position,
            promised,
            sent,
        } => tracing::warn!(
            "closing connection {peer}: a log file was truncated while a response was being \
             sent (record range at position {position}: {sent} of {promised} bytes sent)"
        ),
        WriteError::Deferred => {
            tracing::warn!("closing connection {peer}: a deferred response could not be built")
        }
        WriteError::Bug(what) => tracing::error!("connection {peer}: {what}; closing"),
    }
}

/// Writes every chunk in order, corking the socket around a batch that mixes bytes and file
/// ranges; leaves `chunks` empty.
async fn write_chunks(
    wr: &mut OwnedWriteHalf,
    chunks: &mut Vec<Chunk>,
    outbox: &Outbox,
) -> Result<(), WriteError> {
    let cork = chunks.len() > 1 && chunks.iter().any(|c| matches!(c, Chunk::File(_)));
    if cork {
        set_cork(wr.as_ref(), true);
    }
    let result = write_all_chunks(wr, chunks, outbox).await;
    if cork {
        set_cork(wr.as_ref(), false);
    }
    chunks.clear();
    result
}

/// Byte runs with vectored writes (handling partial writes), file ranges with `sendfile`.
async fn write_all_chunks(
    wr: &mut OwnedWriteHalf,
    chunks: &mut [Chunk],
    outbox: &Outbox,
) -> Result<(), WriteError> {
    let mut start = 0;
    while start < chunks.len() {
        if let Chunk::File(file) = &mut chunks[start] {
            send_file(wr, file, outbox).await?;
            start += 1;
            continue;
        }
        let run = chunks[start..]
            .iter()
            .take(MAX_IOV)
            .take_while(|c| matches!(c, Chunk::Bytes(_)))
            .count();
        let slices: Vec<IoSlice<'_>> = chunks[start..start + run]
            .iter()
            .filter_map(|c| match c {
                Chunk::Bytes(b) => Some(IoSlice::new(b)),
                Chunk::File(_) => None,
            })
            .collect();
        let mut written = wr.write_vectored(&slices).await?;
        if written == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::WriteZero).into());
        }
        outbox.wrote();
        drop(slices);
        while written > 0 {
            let Chunk::Bytes(first) = &mut chunks[start] else {
                break;
            };
            if written >= first.len() {
                written -= first.len();
                start += 1;
            } else {
                first.advance(written);
                written = 0;
            }
        }
    }
    Ok(())
}

/// Sends a file range with `sendfile`, waiting for write readiness whenever the socket buffer is
/// full. A file that ends before the range does is [`WriteError::FileShort`].
async fn send_file(
    wr: &OwnedWriteHalf,
    file: &mut FileRecords,
    outbox: &Outbox,
) -> Result<(), WriteError> {
    let stream: &TcpStream = wr.as_ref();
    let (position, promised) = (file.position(), file.len());
    while !file.is_empty() {
        stream.writable().await?;
        let attempt = stream.try_io(Interest::WRITABLE, || {
            sendfile_once(stream.as_raw_fd(), file.file(), file.position(), file.len())
        });
        match attempt {
            Ok(0) => {
                return Err(WriteError::FileShort {
                    position,
                    promised,
                    sent: promised - file.len(),
                })
            }
            Ok(n) => {
                file.advance(n);
                outbox.wrote();
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// One `sendfile` of up to `len` bytes of `file` at `position` to `socket`: the bytes sent (0 at
/// the end of the file).
fn sendfile_once(socket: RawFd, file: &File, position: u64, len: usize) -> std::io::Result<usize> {
    let mut offset = libc::off_t::try_from(position)
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: both descriptors belong to live owners borrowed for the whole call (`file` and the
    // socket's `TcpStream`); `offset` is a local the kernel reads and updates. sendfile does not
    // move `file`'s own position (we pass an offset), so concurrent positioned I/O is unaffected.
    let n = unsafe { libc::sendfile(socket, file.as_raw_fd(), &mut offset, len.min(MAX_SENDFILE)) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Sets or clears `TCP_CORK`. Failure only costs segment packing, so it is ignored.
fn set_cork(stream: &TcpStream, on: bool) {
    let value = libc::c_int::from(on);
    // SAFETY: the descriptor is the live socket of `stream`; the option value points to a c_int
    // that outlives the call, with its exact size passed.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CORK,
            &value as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

#[cfg(test)]
mod tests;
