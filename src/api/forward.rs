//! Forwarding of controller-decided requests from a broker to the active controller (Kafka's
//! `ForwardingManager`, without the Envelope: the request is sent as the client sent it). On a
//! node of a multi-voter quorum that does not lead it, CreateTopics, DeleteTopics,
//! CreatePartitions, topic AlterConfigs / IncrementalAlterConfigs, ElectLeaders and DescribeQuorum
//! go, byte for byte, to the leader's CONTROLLER listener, and its answer goes back to the client
//! unchanged (same correlation id, same version). The controller listener runs the admin APIs
//! through the same broker handlers (`handle_forwarded`: a forwarded request is never forwarded
//! again), deciding them on its own controller.
//!
//! Invariants: a request is sent to one controller at a time and at most once per connection
//! attempt; a connection failure before the answer tries the current leader again until the
//! deadline (the request may have been applied: Kafka's forwarding has the same at-least-once
//! retry, and the admin APIs answer a repeat with TOPIC_ALREADY_EXISTS and the like); an answer
//! above [`MAX_RESPONSE_BYTES`] closes that connection; nothing blocks a runtime worker.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::quorum::LeaderAndEpoch;

/// The APIs a non-leading node forwards (topic configs only: see [`forwards_configs`]).
pub const FORWARDED_APIS: &[ApiKey] = &[
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::CreatePartitions,
    ApiKey::AlterConfigs,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::ElectLeaders,
    ApiKey::DescribeQuorum,
];

/// Largest answer relayed (admin answers are small; a bound keeps a bad peer from costing memory).
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// How long a forwarded request may take (Kafka's `request.timeout.ms` for forwarding is 30 s).
pub const FORWARD_TIMEOUT: Duration = Duration::from_secs(30);

const BACKOFF: Duration = Duration::from_millis(100);

/// Why a forwarded request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    #[error("no controller answered within {0:?} (last: {1})")]
    Timeout(Duration, String),
}

/// Config resource types (AlterConfigs) that are decided by the controller: only TOPIC (2).
/// Broker (4) and group (32) configs are this broker's own and stay local.
pub fn forwards_configs(resource_types: impl IntoIterator<Item = i8>) -> bool {
    let mut any = false;
    for t in resource_types {
        if t != 2 {
            return false;
        }
        any = true;
    }
    any
}

/// The broker side of forwarding: where the voters' CONTROLLER listeners are, who leads, and
/// idle connections to reuse. Thread-safe.
pub struct Forwarder {
    me: i32,
    /// Voter id -> "host:port" of its CONTROLLER listener.
    voters: BTreeMap<i32, String>,
    leader: watch::Receiver<LeaderAndEpoch>,
    idle: parking_lot::Mutex<Vec<(i32, TcpStream)>>,
}

impl Forwarder {
    pub fn new(
        me: i32,
        voters: BTreeMap<i32, String>,
        leader: watch::Receiver<LeaderAndEpoch>,
    ) -> Forwarder {
        Forwarder {
            me,
            voters,
            leader,
            idle: parking_lot::Mutex::new(Vec::new()),
        }
    }

    /// Whether this node's own controller leads the quorum now (then nothing is forwarded).
    pub fn leads_here(&self) -> bool {
        self.leader.borrow().leader_id == Some(self.me)
    }

    /// The leader named by the quorum, if it is another voter.
    fn remote_leader(&self) -> Option<(i32, String)> {
        let id = self.leader.borrow().leader_id?;
        if id == self.me {
            return None;
        }
        self.voters.get(&id).map(|a| (id, a.clone()))
    }

    /// Sends the request `frame` (header and body, no length prefix) to the active controller
    /// and returns its whole answer (length prefix included). When this node becomes the leader
    /// meanwhile, `Ok(None)`: the caller handles the request itself.
    pub async fn forward(&self, frame: Bytes) -> Result<Option<Bytes>, ForwardError> {
        let deadline = tokio::time::Instant::now() + FORWARD_TIMEOUT;
        let mut leader = self.leader.clone();
        let mut last = String::from("no leader known");
        loop {
            if self.leads_here() {
                return Ok(None);
            }
            if let Some((id, addr)) = self.remote_leader() {
                match self.attempt(id, &addr, &frame, deadline).await {
                    Ok(answer) => return Ok(Some(answer)),
                    Err(e) => last = format!("controller {id} at {addr}: {e}"),
                }
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Err(ForwardError::Timeout(FORWARD_TIMEOUT, last));
            }
            // Wait for a leader change or a short backoff, whichever comes first.
            let wait = BACKOFF.min(deadline - now);
            let _ = tokio::time::timeout(wait, leader.changed()).await;
        }
    }

    async fn attempt(
        &self,
        id: i32,
        addr: &str,
        frame: &Bytes,
        deadline: tokio::time::Instant,
    ) -> Result<Bytes, String> {
        let pooled = {
            let mut idle = self.idle.lock();
            idle.iter()
                .position(|(i, _)| *i == id)
                .map(|p| idle.swap_remove(p).1)
        };
        let fresh = pooled.is_none();
        let mut stream = match pooled {
            Some(s) => s,
            None => tokio::time::timeout_at(deadline, TcpStream::connect(addr))
                .await
                .map_err(|_| "connect timed out".to_string())?
                .map_err(|e| format!("connect: {e}"))?,
        };
        let _ = stream.set_nodelay(true);
        match tokio::time::timeout_at(deadline, exchange(&mut stream, frame)).await {
            Ok(Ok(answer)) => {
                self.idle.lock().push((id, stream));
                Ok(answer)
            }
            Ok(Err(e)) if !fresh => {
                // A pooled connection the controller closed meanwhile: once more on a new one.
                tracing::debug!("forwarding: pooled connection to {id} failed ({e}); reconnecting");
                Box::pin(self.attempt(id, addr, frame, deadline)).await
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err("no answer before the deadline".to_string()),
        }
    }
}

/// Writes one request frame and reads one whole answer frame (prefix included).
async fn exchange(stream: &mut TcpStream, frame: &Bytes) -> Result<Bytes, String> {
    let mut out = BytesMut::with_capacity(frame.len() + 4);
    out.put_i32(frame.len() as i32);
    out.extend_from_slice(frame);
    stream
        .write_all(&out)
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut size = [0u8; 4];
    stream
        .read_exact(&mut size)
        .await
        .map_err(|e| format!("read: {e}"))?;
    let n = i32::from_be_bytes(size);
    let n = usize::try_from(n)
        .ok()
        .filter(|n| (4..=MAX_RESPONSE_BYTES).contains(n))
        .ok_or_else(|| format!("answer size {n} out of bounds"))?;
    let mut answer = BytesMut::with_capacity(n + 4);
    answer.put_slice(&size);
    answer.resize(n + 4, 0);
    stream
        .read_exact(&mut answer[4..])
        .await
        .map_err(|e| format!("read: {e}"))?;
    Ok(answer.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_topic_config_changes_are_forwarded() {
        assert!(forwards_configs([2, 2]));
        assert!(!forwards_configs([2, 4]), "a broker resource stays local");
        assert!(!forwards_configs([32]), "group configs stay local");
        assert!(!forwards_configs([]), "nothing to forward");
    }

    #[tokio::test]
    async fn a_request_goes_to_the_leader_and_its_answer_comes_back_whole() {
        use tokio::net::TcpListener;
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let server = tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut answers = Vec::new();
            for _ in 0..2 {
                let mut size = [0u8; 4];
                s.read_exact(&mut size).await.unwrap();
                let mut req = vec![0u8; i32::from_be_bytes(size) as usize];
                s.read_exact(&mut req).await.unwrap();
                answers.push(req.clone());
                // Answer: the request's bytes reversed, as a frame.
                req.reverse();
                let mut out = (req.len() as i32).to_be_bytes().to_vec();
                out.extend(req);
                s.write_all(&out).await.unwrap();
            }
            answers
        });
        let (tx, rx) = watch::channel(LeaderAndEpoch {
            leader_id: Some(2),
            epoch: 1,
        });
        let f = Forwarder::new(1, BTreeMap::from([(2, addr)]), rx);
        assert!(!f.leads_here());
        let a = f.forward(Bytes::from_static(b"abcdef")).await.unwrap();
        assert_eq!(a.unwrap(), Bytes::from_static(b"\0\0\0\x06fedcba"));
        // The second request reuses the connection (the server accepts only one).
        let b = f.forward(Bytes::from_static(b"xyz1")).await.unwrap();
        assert_eq!(b.unwrap(), Bytes::from_static(b"\0\0\0\x041zyx"));
        assert_eq!(
            server.await.unwrap(),
            vec![b"abcdef".to_vec(), b"xyz1".to_vec()]
        );
        // Once this node leads, nothing is forwarded.
        tx.send_replace(LeaderAndEpoch {
            leader_id: Some(1),
            epoch: 2,
        });
        assert!(f.leads_here());
        assert!(f.forward(Bytes::from_static(b"q")).await.unwrap().is_none());
    }
}
