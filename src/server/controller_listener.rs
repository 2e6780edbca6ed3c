//! The CONTROLLER listener of a voter: one port, two protocols. A connection whose first four
//! bytes are the quorum's handshake magic (`quorum::transport::MAGIC`, negative as a Kafka
//! request size) is handed to the quorum transport with those bytes; any other connection is a
//! Kafka connection served by the controller's RPC handlers (`controller::rpc`), which accept
//! only the controller's APIs, as Kafka's controller listener does.
//!
//! Invariants: requests of one Kafka connection are handled one at a time, in order; a frame
//! size that is negative (and not the magic), below a request header or over
//! [`MAX_REQUEST_BYTES`], a malformed request or an API the controller does not serve closes the
//! connection with one log line; nothing a peer sends panics or allocates more than the bound.
//! A connection idle for 10 minutes, or whose started request is not whole within 30 s, is closed.
//! Connection tasks live in a `JoinSet` owned by the accept loop: aborting [`serve`] closes them.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::controller::rpc::ControllerApis;
use crate::quorum::transport::{HandedConnection, MAGIC};

/// Largest Kafka request read on the controller listener (its requests are small; Kafka bounds
/// them by `socket.request.max.bytes`, 100 MiB, which no controller request comes near).
pub const MAX_REQUEST_BYTES: usize = 8 * 1024 * 1024;
/// A started request must be whole within this (Sluice's `sluice.socket.request.read.timeout.ms`
/// default).
const REQUEST_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// A connection silent this long is closed (Kafka's `connections.max.idle.ms` default).
const IDLE_TIMEOUT: Duration = Duration::from_secs(600);

/// What a connection's first four bytes say it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionKind {
    /// A quorum voter (the handshake magic).
    Voter,
    /// A Kafka request of this many bytes.
    Kafka(usize),
    /// Neither: the connection is closed.
    Invalid(i32),
}

/// Classifies a connection by its first four bytes (pure).
pub fn classify(first: [u8; 4]) -> ConnectionKind {
    if first == MAGIC {
        return ConnectionKind::Voter;
    }
    let size = i32::from_be_bytes(first);
    match usize::try_from(size) {
        Ok(n) if (8..=MAX_REQUEST_BYTES).contains(&n) => ConnectionKind::Kafka(n),
        _ => ConnectionKind::Invalid(size),
    }
}

/// Accepts on `listener` until aborted: voter connections go to `voters`, Kafka connections
/// are served by `apis`.
pub async fn serve(
    listener: TcpListener,
    voters: mpsc::Sender<HandedConnection>,
    apis: ControllerApis,
) {
    let mut connections = JoinSet::new();
    loop {
        let (stream, remote) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("controller listener: accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                continue;
            }
        };
        while connections.try_join_next().is_some() {}
        let _ = stream.set_nodelay(true);
        let voters = voters.clone();
        let apis = apis.clone();
        connections.spawn(async move {
            if let Err(reason) = serve_connection(stream, remote, &voters, &apis).await {
                tracing::warn!(%remote, "controller listener: closing connection: {reason}");
            }
        });
    }
}

/// Serves one accepted connection: reads its first four bytes and dispatches. `Err` is the one
/// reason the connection was closed for.
pub async fn serve_connection(
    mut stream: TcpStream,
    remote: SocketAddr,
    voters: &mpsc::Sender<HandedConnection>,
    apis: &ControllerApis,
) -> Result<(), String> {
    let mut first = [0u8; 4];
    match tokio::time::timeout(IDLE_TIMEOUT, stream.read_exact(&mut first)).await {
        Ok(Ok(_)) => {}
        // Closed before a byte of substance: nothing to say.
        Ok(Err(_)) => return Ok(()),
        Err(_) => return Err(format!("idle for {IDLE_TIMEOUT:?}")),
    }
    match classify(first) {
        ConnectionKind::Voter => {
            let handed = HandedConnection {
                prefix: first.to_vec(),
                stream,
                remote,
            };
            voters
                .send(handed)
                .await
                .map_err(|_| "the quorum is not running".to_string())
        }
        ConnectionKind::Kafka(size) => serve_kafka(stream, size, apis).await,
        ConnectionKind::Invalid(size) => Err(format!(
            "invalid request size {size} (at most {MAX_REQUEST_BYTES})"
        )),
    }
}

/// Serves Kafka requests on `stream`, whose first request's size (`first_size`) was already read.
pub async fn serve_kafka<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    first_size: usize,
    apis: &ControllerApis,
) -> Result<(), String> {
    let mut size = first_size;
    loop {
        let mut body = vec![0u8; size];
        tokio::time::timeout(REQUEST_READ_TIMEOUT, stream.read_exact(&mut body))
            .await
            .map_err(|_| {
                format!("request of {size} bytes not whole within {REQUEST_READ_TIMEOUT:?}")
            })?
            .map_err(|e| format!("truncated request: {e}"))?;
        let response = apis
            .handle(Bytes::from(body))
            .await
            .map_err(|e| e.to_string())?;
        stream
            .write_all(&response)
            .await
            .map_err(|e| format!("write failed: {e}"))?;
        let mut next = [0u8; 4];
        match tokio::time::timeout(IDLE_TIMEOUT, stream.read_exact(&mut next)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Ok(Err(e)) => return Err(format!("read failed: {e}")),
            Err(_) => return Err(format!("idle for {IDLE_TIMEOUT:?}")),
        }
        size = match classify(next) {
            ConnectionKind::Kafka(n) => n,
            ConnectionKind::Voter | ConnectionKind::Invalid(_) => {
                return Err(format!(
                    "invalid request size {} (at most {MAX_REQUEST_BYTES})",
                    i32::from_be_bytes(next)
                ))
            }
        };
    }
}

#[cfg(test)]
mod tests;
