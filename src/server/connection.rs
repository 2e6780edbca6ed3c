//! One client connection: a reader that frames and handles requests in order, and a writer that
//! sends the responses strictly in request order.
//!
//! Reader: `framing::FrameReader` splits each complete frame off its read buffer without copying
//! and checks the length prefix (`0 < len <= socket.request.max.bytes`); the frame goes to
//! `api::handle`.
//! Appends therefore happen in request order on this task. Each reply (ready, or a future for
//! long-polls) goes into a bounded queue, which also bounds pipelining.
//!
//! Writer: awaits replies in queue order, gathers the ones that are ready, and writes their chunks
//! in order: runs of byte chunks (headers, small record reads) with vectored writes, file ranges
//! (large Fetch reads) with `sendfile` from the page cache, driven by the socket's write readiness.
//! A gathered batch that mixes the two is sent with `TCP_CORK` on, so small header writes do not
//! leave as segments of their own; uncorking at the end of the batch pushes the rest out.
//!
//! A protocol violation closes this connection with one log line; nothing else is affected. So does
//! a file range that ends early (its log file was truncated after the read): the response's size
//! prefix is already on the wire and nothing else can be sent in its place.

use std::fs::File;
use std::io::IoSlice;
use std::net::SocketAddr;
use std::os::unix::io::{AsRawFd, RawFd};
use std::sync::Arc;

use bytes::Buf;
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

use super::framing::{FrameEnd, FrameReader};
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
}

impl From<std::io::Error> for WriteError {
    fn from(e: std::io::Error) -> WriteError {
        WriteError::Io(e)
    }
}

/// Why the reader stopped.
#[derive(Debug)]
enum ReadEnd {
    /// No next frame (end of stream, stop, read error, bad length prefix).
    Frame(FrameEnd),
    Close(api::CloseReason),
}

pub async fn serve(
    socket: TcpStream,
    peer: SocketAddr,
    broker: Arc<Broker>,
    stop: watch::Receiver<bool>,
) {
    let (rd, wr) = socket.into_split();
    let (tx, rx) = mpsc::channel(MAX_IN_FLIGHT);
    let writer = tokio::spawn(write_loop(wr, rx, peer));
    let end = read_loop(rd, tx, &broker, stop, peer).await;
    match end {
        ReadEnd::Frame(FrameEnd::Eof | FrameEnd::Stopped) => {}
        ReadEnd::Frame(FrameEnd::Io(e)) => tracing::debug!("connection {peer}: read error: {e}"),
        ReadEnd::Frame(FrameEnd::BadLength(n)) => tracing::warn!(
            "closing connection {peer}: frame length {n} outside 1..={}",
            broker.config.max_request_bytes
        ),
        ReadEnd::Close(reason) => tracing::warn!("closing connection {peer}: {reason}"),
    }
    let _ = writer.await;
}

async fn read_loop(
    rd: OwnedReadHalf,
    tx: mpsc::Sender<Reply>,
    broker: &Arc<Broker>,
    mut stop: watch::Receiver<bool>,
    peer: SocketAddr,
) -> ReadEnd {
    let local = rd.local_addr().ok(); // names the listener (config)
    let mut frames = FrameReader::new(rd, broker.config.max_request_bytes);
    loop {
        let frame = match frames.next(&mut stop).await {
            Ok(frame) => frame,
            Err(end) => return ReadEnd::Frame(end),
        };
        let reply = match api::handle_on(broker, frame, Some(peer), local) {
            // Await before reading on (flush policy: the produce's fsync runs on the blocking pool).
            Ok(Reply::Barrier(done)) => done.await,
            other => other,
        };
        match reply {
            Ok(reply) => {
                if tx.send(reply).await.is_err() {
                    return ReadEnd::Frame(FrameEnd::Eof);
                }
            }
            Err(reason) => return ReadEnd::Close(reason),
        }
    }
}

async fn write_loop(mut wr: OwnedWriteHalf, mut rx: mpsc::Receiver<Reply>, peer: SocketAddr) {
    let mut pending: Vec<Chunk> = Vec::new();
    loop {
        let reply = if pending.is_empty() {
            match rx.recv().await {
                Some(r) => r,
                None => break,
            }
        } else {
            match rx.try_recv() {
                Ok(r) => r,
                Err(_) => {
                    if let Err(e) = write_chunks(&mut wr, &mut pending).await {
                        log_write_error(peer, e);
                        return;
                    }
                    continue;
                }
            }
        };
        let frame = match reply {
            Reply::Now(f) => f,
            Reply::Barrier(_) => {
                // The reader resolves barriers before queueing; one here is a bug, not a client's.
                tracing::error!("connection {peer}: unresolved barrier reply; closing");
                return;
            }
            Reply::Later(fut) => {
                // Keep order: what is gathered so far goes out before we wait.
                if !pending.is_empty() {
                    if let Err(e) = write_chunks(&mut wr, &mut pending).await {
                        log_write_error(peer, e);
                        return;
                    }
                }
                match fut.await {
                    Some(f) => Some(f),
                    None => {
                        tracing::warn!(
                            "closing connection {peer}: a deferred response could not be built"
                        );
                        return;
                    }
                }
            }
        };
        if let Some(chunks) = frame {
            pending.extend(chunks.into_iter().filter(|c| !c.is_empty()));
        }
    }
    if !pending.is_empty() {
        if let Err(e) = write_chunks(&mut wr, &mut pending).await {
            log_write_error(peer, e);
            return;
        }
    }
    let _ = wr.shutdown().await;
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
    }
}

/// Writes every chunk in order, corking the socket around a batch that mixes bytes and file
/// ranges; leaves `chunks` empty.
async fn write_chunks(wr: &mut OwnedWriteHalf, chunks: &mut Vec<Chunk>) -> Result<(), WriteError> {
    let cork = chunks.len() > 1 && chunks.iter().any(|c| matches!(c, Chunk::File(_)));
    if cork {
        set_cork(wr.as_ref(), true);
    }
    let result = write_all_chunks(wr, chunks).await;
    if cork {
        set_cork(wr.as_ref(), false);
    }
    chunks.clear();
    result
}

/// Byte runs with vectored writes (handling partial writes), file ranges with `sendfile`.
async fn write_all_chunks(wr: &mut OwnedWriteHalf, chunks: &mut [Chunk]) -> Result<(), WriteError> {
    let mut start = 0;
    while start < chunks.len() {
        if let Chunk::File(file) = &mut chunks[start] {
            send_file(wr, file).await?;
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
async fn send_file(wr: &OwnedWriteHalf, file: &mut FileRecords) -> Result<(), WriteError> {
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
            Ok(n) => file.advance(n),
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
