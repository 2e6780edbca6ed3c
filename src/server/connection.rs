//! One client connection: a reader that frames and handles requests in order, and a writer that
//! sends the responses strictly in request order.
//!
//! Reader: reads into one `BytesMut`, splits each complete frame off without copying, checks the
//! length prefix (`0 < len <= socket.request.max.bytes`), and hands the frame to `api::handle`.
//! Appends therefore happen in request order on this task. Each reply (ready, or a future for
//! long-polls) goes into a bounded queue, which also bounds pipelining.
//!
//! Writer: awaits replies in queue order, gathers the ones that are ready, and writes their chunks
//! (header bytes plus the log's own record `Bytes`) with vectored writes.
//!
//! A protocol violation closes this connection with one log line; nothing else is affected.

use std::io::IoSlice;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

use crate::api::{self, Reply};
use crate::broker::Broker;

/// Requests a client may have in flight before the reader stops reading.
const MAX_IN_FLIGHT: usize = 64;
/// Read-buffer growth step; also the most a client can make us reserve before sending data.
const READ_CHUNK: usize = 64 * 1024;
/// Frames up to this size get their whole buffer at once; larger ones grow as bytes arrive, so a
/// client announcing a huge frame and sending nothing costs little.
const EAGER_RESERVE: usize = 1024 * 1024;
/// Most slices passed to one vectored write (below Linux's IOV_MAX of 1024).
const MAX_IOV: usize = 512;

/// Why the reader stopped.
#[derive(Debug)]
enum ReadEnd {
    Eof,
    Stopped,
    Io(std::io::Error),
    BadLength(i32),
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
        ReadEnd::Eof | ReadEnd::Stopped => {}
        ReadEnd::Io(e) => tracing::debug!("connection {peer}: read error: {e}"),
        ReadEnd::BadLength(n) => tracing::warn!(
            "closing connection {peer}: frame length {n} outside 1..={}",
            broker.config.max_request_bytes
        ),
        ReadEnd::Close(reason) => tracing::warn!("closing connection {peer}: {reason}"),
    }
    let _ = writer.await;
}

async fn read_loop(
    mut rd: OwnedReadHalf,
    tx: mpsc::Sender<Reply>,
    broker: &Arc<Broker>,
    mut stop: watch::Receiver<bool>,
    peer: SocketAddr,
) -> ReadEnd {
    let max = broker.config.max_request_bytes;
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    loop {
        if buf.len() < 4 {
            match fill(&mut rd, &mut buf, 4, &mut stop).await {
                Ok(()) => {}
                Err(end) => return end,
            }
        }
        let len = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
        if len <= 0 || len as usize > max {
            return ReadEnd::BadLength(len);
        }
        let need = 4 + len as usize;
        if buf.len() < need {
            if need <= EAGER_RESERVE {
                buf.reserve(need - buf.len());
            }
            if let Err(end) = fill(&mut rd, &mut buf, need, &mut stop).await {
                return end;
            }
        }
        let mut frame: Bytes = buf.split_to(need).freeze();
        frame.advance(4);
        match api::handle_from(broker, frame, Some(peer)) {
            Ok(reply) => {
                if tx.send(reply).await.is_err() {
                    return ReadEnd::Eof;
                }
            }
            Err(reason) => return ReadEnd::Close(reason),
        }
    }
}

/// Reads until `buf` holds at least `want` bytes.
async fn fill(
    rd: &mut OwnedReadHalf,
    buf: &mut BytesMut,
    want: usize,
    stop: &mut watch::Receiver<bool>,
) -> Result<(), ReadEnd> {
    while buf.len() < want {
        if buf.capacity() == buf.len() {
            buf.reserve(READ_CHUNK.min(want - buf.len()).max(4096));
        }
        tokio::select! {
            _ = stop.changed() => return Err(ReadEnd::Stopped),
            n = rd.read_buf(buf) => match n {
                Ok(0) => return Err(ReadEnd::Eof),
                Ok(_) => {}
                Err(e) => return Err(ReadEnd::Io(e)),
            }
        }
    }
    Ok(())
}

async fn write_loop(mut wr: OwnedWriteHalf, mut rx: mpsc::Receiver<Reply>, peer: SocketAddr) {
    let mut pending: Vec<Bytes> = Vec::new();
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
                        tracing::debug!("connection {peer}: write error: {e}");
                        return;
                    }
                    continue;
                }
            }
        };
        let frame = match reply {
            Reply::Now(f) => f,
            Reply::Later(fut) => {
                // Keep order: what is gathered so far goes out before we wait.
                if !pending.is_empty() {
                    if let Err(e) = write_chunks(&mut wr, &mut pending).await {
                        tracing::debug!("connection {peer}: write error: {e}");
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
        let _ = write_chunks(&mut wr, &mut pending).await;
    }
    let _ = wr.shutdown().await;
}

/// Writes every chunk with vectored writes, handling partial writes; leaves `chunks` empty.
async fn write_chunks(wr: &mut OwnedWriteHalf, chunks: &mut Vec<Bytes>) -> std::io::Result<()> {
    let mut start = 0;
    while start < chunks.len() {
        let end = (start + MAX_IOV).min(chunks.len());
        let slices: Vec<IoSlice<'_>> = chunks[start..end].iter().map(|c| IoSlice::new(c)).collect();
        let mut written = wr.write_vectored(&slices).await?;
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        drop(slices);
        while written > 0 {
            let first = &mut chunks[start];
            if written >= first.len() {
                written -= first.len();
                start += 1;
            } else {
                first.advance(written);
                written = 0;
            }
        }
    }
    chunks.clear();
    Ok(())
}
