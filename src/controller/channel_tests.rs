//! The channel against fake controllers on 127.0.0.1: NOT_CONTROLLER moves to the next voter,
//! a dropped connection is retried, a wrong correlation id is not taken as the answer, the leader
//! hint is followed, and the deadline ends it all as data.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{BrokerHeartbeatRequest, BrokerHeartbeatResponse};
use kafka_protocol::protocol::{Encodable, HeaderVersion};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

/// How a fake controller answers each request.
#[derive(Clone, Copy)]
enum Fake {
    /// A heartbeat response with this error code (0: unfenced).
    Answer(i16),
    /// Closes the connection without answering.
    Hang,
    /// Answers with another correlation id.
    WrongCorrelation,
}

/// Starts a fake controller; returns its address and a counter of requests it read.
async fn fake(mode: Fake) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let seen = Arc::new(AtomicUsize::new(0));
    let count = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let count = count.clone();
            tokio::spawn(async move {
                loop {
                    let Ok(size) = s.read_i32().await else { return };
                    let mut body = vec![0u8; size as usize];
                    if s.read_exact(&mut body).await.is_err() {
                        return;
                    }
                    count.fetch_add(1, Ordering::SeqCst);
                    let mut b = Bytes::from(body);
                    let (_key, version, corr) = (b.get_i16(), b.get_i16(), b.get_i32());
                    let (code, corr) = match mode {
                        Fake::Hang => return,
                        Fake::Answer(code) => (code, corr),
                        Fake::WrongCorrelation => (0, corr + 1),
                    };
                    let mut out = BytesMut::new();
                    out.put_i32(0);
                    out.put_i32(corr);
                    if BrokerHeartbeatResponse::header_version(version) >= 1 {
                        out.put_u8(0);
                    }
                    BrokerHeartbeatResponse::default()
                        .with_error_code(code)
                        .with_is_fenced(code != 0)
                        .encode(&mut out, version)
                        .expect("encode");
                    let len = (out.len() - 4) as i32;
                    out[..4].copy_from_slice(&len.to_be_bytes());
                    if s.write_all(&out).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, seen)
}

fn channel(
    voters: Vec<(i32, String)>,
    hint: Option<watch::Receiver<LeaderAndEpoch>>,
) -> ControllerChannel {
    ControllerChannel::new(
        ChannelConfig {
            voters: voters.into(),
            request_timeout: Duration::from_millis(500),
            client_id: "test".into(),
        },
        hint,
    )
}

fn heartbeat() -> BrokerHeartbeatRequest {
    BrokerHeartbeatRequest::default()
        .with_broker_id(1.into())
        .with_broker_epoch(5)
}

fn within(ms: u64) -> Instant {
    Instant::now() + Duration::from_millis(ms)
}

#[tokio::test]
async fn not_controller_and_failures_move_on_to_the_voter_that_answers() {
    let (refusing, refused) = fake(Fake::Answer(41)).await;
    let (hanging, hung) = fake(Fake::Hang).await;
    let (wrong, wronged) = fake(Fake::WrongCorrelation).await;
    let (active, answered) = fake(Fake::Answer(0)).await;
    let mut c = channel(
        vec![(1, refusing), (2, hanging), (3, wrong), (4, active)],
        None,
    );
    let r = c
        .send(&heartbeat(), 1, within(10_000))
        .await
        .expect("answered");
    assert_eq!((r.error_code, r.is_fenced), (0, false));
    assert_eq!(c.connected_to(), Some(4));
    for (who, n) in [
        ("refusing", &refused),
        ("hanging", &hung),
        ("wrong", &wronged),
    ] {
        assert_eq!(n.load(Ordering::SeqCst), 1, "{who} asked once");
    }
    // The connection is kept: the next request goes straight to voter 4.
    let r = c
        .send(&heartbeat(), 0, within(2_000))
        .await
        .expect("answered");
    assert_eq!(r.error_code, 0);
    assert_eq!(answered.load(Ordering::SeqCst), 2);
    assert_eq!(refused.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn the_leader_hint_is_followed_and_the_deadline_ends_retries() {
    let (refusing, _) = fake(Fake::Answer(41)).await;
    let (active, answered) = fake(Fake::Answer(0)).await;
    let (tx, rx) = watch::channel(LeaderAndEpoch {
        leader_id: Some(2),
        epoch: 3,
    });
    let mut c = channel(vec![(1, refusing.clone()), (2, active)], Some(rx));
    let r = c
        .send(&heartbeat(), 1, within(2_000))
        .await
        .expect("answered");
    assert_eq!(r.error_code, 0);
    assert_eq!(answered.load(Ordering::SeqCst), 1);
    // The hint moves to a voter that refuses: the deadline ends it with the last reason.
    tx.send(LeaderAndEpoch {
        leader_id: Some(1),
        epoch: 4,
    })
    .expect("hint");
    let started = Instant::now();
    let e = c
        .send(&heartbeat(), 1, within(700))
        .await
        .expect_err("only refusals");
    assert!(
        matches!(&e, ChannelError::Timeout { last } if last.contains("NOT_CONTROLLER")),
        "{e:?}"
    );
    assert!(started.elapsed() < Duration::from_millis(1500));
    // No voters at all.
    let mut none = channel(vec![], None);
    assert_eq!(
        none.send(&heartbeat(), 1, within(100))
            .await
            .expect_err("none"),
        ChannelError::NoVoters
    );
}

#[test]
fn endpoints_learned_from_answers_are_shared_by_every_clone() {
    let endpoints = ControllerEndpoints::bootstrap(&["a:1".to_string(), "b:2".to_string()]);
    let other = endpoints.clone();
    assert_eq!(endpoints.address_of(2), None);
    assert!(endpoints.learn(2, "b:2".to_string()));
    assert!(!endpoints.learn(2, "b:2".to_string()), "nothing new");
    assert!(
        !endpoints.learn(-1, "x:9".to_string()),
        "placeholder ids are not learned"
    );
    assert_eq!(other.address_of(2).as_deref(), Some("b:2"));
    assert!(
        other.learn(2, "c:3".to_string()),
        "a moved endpoint replaces the old one"
    );
    assert_eq!(endpoints.describe(), "-1@a:1,-2@b:2,2@c:3");
    assert_eq!(endpoints.nth(4), Some((-2, "b:2".to_string())));
}
