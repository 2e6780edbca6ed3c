//! Transport of raft-rs messages between the voters of the controller quorum, over TCP on the
//! CONTROLLER listener (`controller.listener.names`, addresses from `controller.quorum.voters`).
//!
//! Kafka's KRaft RPCs (Vote, BeginQuorumEpoch, Fetch) do not map onto raft-rs's messages, so the
//! voters speak a frame of Sluice's own on that listener:
//! - a connection starts with a 12-byte handshake from the dialing side: the magic
//!   `FF 53 51 31` (`\xffSQ1`), then the sender's and the receiver's node ids (i32, big endian).
//!   Read as a Kafka request size the magic is negative, so a listener that also serves Kafka
//!   requests can tell the two apart from the first four bytes;
//! - then frames `[u32 length][u32 crc32c(body)][body]`, body = one protobuf-encoded raft-rs
//!   `Message`, length at most `MAX_FRAME_BYTES`.
//!
//! Connections are one-way: each voter dials every other voter for its own messages and only
//! reads from the connections it accepts. A bad handshake, a frame over the bound, a CRC
//! mismatch, undecodable bytes or a message whose `from`/`to` contradict the handshake close the
//! connection with one log line. Dialing retries with backoff (20 ms doubling to 1 s); while a
//! peer is down its messages are dropped (raft resends) and the node is told it is unreachable.
//! All tasks live in a `JoinSet` owned by the caller: dropping it stops them and frees the port.
//!
//! Inbound connections come from the member's own listener, or ([`Inlet::Handed`]) from a
//! listener that also serves Kafka requests and hands over each connection that began with
//! [`MAGIC`], together with the bytes it already read (`server::controller_listener`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use protobuf::Message as _;
use raft::prelude::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::node::{raft_id, NodeId};
use super::storage::MAX_RECORD_BYTES;

/// First four bytes of a voter connection.
pub const MAGIC: [u8; 4] = [0xFF, b'S', b'Q', b'1'];
/// Largest frame read (a snapshot travels in one message).
pub const MAX_FRAME_BYTES: usize = MAX_RECORD_BYTES + 64 * 1024;
/// Messages queued per peer before new ones are dropped.
const PEER_QUEUE: usize = 1024;
const BACKOFF_MIN: Duration = Duration::from_millis(20);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// What the transport hands the quorum task.
#[derive(Debug)]
pub enum Inbound {
    Message(Message),
    /// Sending to this voter failed (connection lost or refused), or the voter closed its
    /// connection to this node (it stopped, or it redials).
    Unreachable(NodeId),
}

/// The sending side: one queue per peer. Owned by the quorum task.
#[derive(Debug)]
pub struct Outbound {
    peers: BTreeMap<NodeId, mpsc::Sender<Message>>,
}

impl Outbound {
    /// Queues `msg` for `to`; drops it when the peer's queue is full or unknown (raft resends).
    pub fn send(&self, to: NodeId, msg: Message) {
        if let Some(q) = self.peers.get(&to) {
            let _ = q.try_send(msg);
        }
    }
}

/// A voter connection accepted elsewhere: `prefix` holds the bytes already read from `stream`
/// (the start of the handshake), which the transport reads first.
#[derive(Debug)]
pub struct HandedConnection {
    pub prefix: Vec<u8>,
    pub stream: TcpStream,
    pub remote: SocketAddr,
}

/// Where a member's inbound voter connections come from.
#[derive(Debug)]
pub enum Inlet {
    /// None (a lone voter).
    None,
    /// The member accepts on its own CONTROLLER listener.
    Listener(TcpListener),
    /// Another task accepts and hands the voter connections over.
    Handed(mpsc::Receiver<HandedConnection>),
}

impl From<Option<TcpListener>> for Inlet {
    fn from(listener: Option<TcpListener>) -> Inlet {
        listener.map_or(Inlet::None, Inlet::Listener)
    }
}

/// Starts the accept loop on `inlet` and a dialer per peer (`(id, "host:port")`, this node
/// excluded) inside `tasks`. Messages read go to `inbound`.
pub fn start(
    self_id: NodeId,
    inlet: Inlet,
    peers: &[(NodeId, String)],
    inbound: mpsc::Sender<Inbound>,
    tasks: &mut JoinSet<()>,
) -> Outbound {
    let voters: Vec<NodeId> = peers.iter().map(|(id, _)| *id).collect();
    match inlet {
        Inlet::None => {}
        Inlet::Listener(listener) => {
            tasks.spawn(accept_loop(self_id, listener, voters, inbound.clone()));
        }
        Inlet::Handed(handed) => {
            tasks.spawn(handed_loop(self_id, handed, voters, inbound.clone()));
        }
    }
    let mut queues = BTreeMap::new();
    for (id, addr) in peers {
        let (tx, rx) = mpsc::channel(PEER_QUEUE);
        queues.insert(*id, tx);
        tasks.spawn(dial_loop(self_id, *id, addr.clone(), rx, inbound.clone()));
    }
    Outbound { peers: queues }
}

fn handshake(from: NodeId, to: NodeId) -> [u8; 12] {
    let mut h = [0u8; 12];
    h[..4].copy_from_slice(&MAGIC);
    h[4..8].copy_from_slice(&from.to_be_bytes());
    h[8..].copy_from_slice(&to.to_be_bytes());
    h
}

/// Encodes one frame (see the module doc).
pub fn encode_frame(msg: &Message, out: &mut Vec<u8>) -> Result<(), String> {
    let body = msg.write_to_bytes().map_err(|e| e.to_string())?;
    if body.len() > MAX_FRAME_BYTES {
        return Err(format!(
            "message of {} bytes over {MAX_FRAME_BYTES}",
            body.len()
        ));
    }
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
    out.extend_from_slice(&body);
    Ok(())
}

async fn dial_loop(
    self_id: NodeId,
    peer: NodeId,
    addr: String,
    mut rx: mpsc::Receiver<Message>,
    inbound: mpsc::Sender<Inbound>,
) {
    let mut backoff = BACKOFF_MIN;
    loop {
        let stream = match TcpStream::connect(&addr).await {
            Ok(s) => s,
            Err(_) => {
                // Drop what piled up while the peer is down; raft resends.
                while rx.try_recv().is_ok() {}
                let _ = inbound.try_send(Inbound::Unreachable(peer));
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let mut w = BufWriter::new(stream);
        if w.write_all(&handshake(self_id, peer)).await.is_err() || w.flush().await.is_err() {
            continue;
        }
        backoff = BACKOFF_MIN;
        tracing::debug!(peer, %addr, "quorum: connected to voter");
        let mut buf = Vec::new();
        while let Some(msg) = rx.recv().await {
            buf.clear();
            if let Err(e) = encode_frame(&msg, &mut buf) {
                tracing::warn!(peer, "quorum: not sending a message: {e}");
                continue;
            }
            // Batch whatever else is queued into the same write.
            while let Ok(more) = rx.try_recv() {
                if buf.len() > 1024 * 1024 || encode_frame(&more, &mut buf).is_err() {
                    break;
                }
            }
            if w.write_all(&buf).await.is_err() || w.flush().await.is_err() {
                tracing::info!(peer, %addr, "quorum: connection to voter lost; reconnecting");
                let _ = inbound.try_send(Inbound::Unreachable(peer));
                break;
            }
        }
        if rx.is_closed() {
            return;
        }
    }
}

async fn accept_loop(
    self_id: NodeId,
    listener: TcpListener,
    voters: Vec<NodeId>,
    inbound: mpsc::Sender<Inbound>,
) {
    let mut readers = JoinSet::new();
    loop {
        let (stream, remote) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("quorum: accept failed: {e}");
                tokio::time::sleep(BACKOFF_MIN).await;
                continue;
            }
        };
        while readers.try_join_next().is_some() {}
        let voters = voters.clone();
        let inbound = inbound.clone();
        readers.spawn(async move {
            if let Err(reason) = read_connection(self_id, stream, &voters, &inbound).await {
                tracing::warn!(%remote, "quorum: closing voter connection: {reason}");
            }
        });
    }
}

async fn handed_loop(
    self_id: NodeId,
    mut handed: mpsc::Receiver<HandedConnection>,
    voters: Vec<NodeId>,
    inbound: mpsc::Sender<Inbound>,
) {
    let mut readers = JoinSet::new();
    while let Some(c) = handed.recv().await {
        while readers.try_join_next().is_some() {}
        let voters = voters.clone();
        let inbound = inbound.clone();
        readers.spawn(async move {
            let stream = std::io::Cursor::new(c.prefix).chain(c.stream);
            if let Err(reason) = read_connection(self_id, stream, &voters, &inbound).await {
                tracing::warn!(remote = %c.remote, "quorum: closing voter connection: {reason}");
            }
        });
    }
}

/// Reads one accepted connection until it closes (`Ok`) or misbehaves (`Err(reason)`). The end
/// of a handshaken connection other than by misbehaviour (end of stream, read error) is passed
/// on as `Unreachable`: a stopping voter's connections close at once, so a resigning leader
/// does not hand over to it (`quorum::resign`).
pub async fn read_connection<S: tokio::io::AsyncRead + Unpin>(
    self_id: NodeId,
    mut stream: S,
    voters: &[NodeId],
    inbound: &mpsc::Sender<Inbound>,
) -> Result<(), String> {
    let mut h = [0u8; 12];
    if stream.read_exact(&mut h).await.is_err() {
        return Ok(());
    }
    if h[..4] != MAGIC {
        return Err(format!("bad handshake magic {:02x?}", &h[..4]));
    }
    let from = NodeId::from_be_bytes([h[4], h[5], h[6], h[7]]);
    let to = NodeId::from_be_bytes([h[8], h[9], h[10], h[11]]);
    if to != self_id {
        return Err(format!(
            "handshake addressed to node {to}, this is node {self_id}"
        ));
    }
    if from == self_id || !voters.contains(&from) {
        return Err(format!("handshake from node {from}, not another voter"));
    }
    let mut head = [0u8; 8];
    let mut body = Vec::new();
    loop {
        match stream.read_exact(&mut head).await {
            Ok(_) => {}
            Err(e) => {
                let _ = inbound.try_send(Inbound::Unreachable(from));
                if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    return Ok(());
                }
                return Err(format!("read error: {e}"));
            }
        }
        let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let crc = u32::from_be_bytes([head[4], head[5], head[6], head[7]]);
        if len > MAX_FRAME_BYTES {
            return Err(format!("frame of {len} bytes over {MAX_FRAME_BYTES}"));
        }
        body.resize(len, 0);
        stream
            .read_exact(&mut body)
            .await
            .map_err(|e| format!("truncated frame: {e}"))?;
        if crc32c::crc32c(&body) != crc {
            return Err("frame CRC mismatch".into());
        }
        let msg =
            Message::parse_from_bytes(&body).map_err(|e| format!("undecodable frame: {e}"))?;
        if msg.from != raft_id(from) || msg.to != raft_id(self_id) {
            return Err(format!(
                "message from raft id {} to {} on the connection of node {from}",
                msg.from, msg.to
            ));
        }
        if body.capacity() > 4 * 1024 * 1024 {
            body = Vec::new(); // a snapshot-sized buffer is not kept for heartbeats
        }
        if inbound.send(Inbound::Message(msg)).await.is_err() {
            return Ok(());
        }
    }
}

#[cfg(test)]
#[path = "transport_tests.rs"]
mod tests;
