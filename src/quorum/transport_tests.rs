//! The voter frame: round trip, and every kind of bad input ends the connection with a reason
//! (no panic, no allocation beyond the bound).

use raft::prelude::{Message, MessageType};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use super::*;

const VOTERS: [NodeId; 3] = [0, 1, 2];

fn heartbeat(from: NodeId, to: NodeId) -> Message {
    let mut m = Message::default();
    m.set_msg_type(MessageType::MsgHeartbeat);
    m.from = raft_id(from);
    m.to = raft_id(to);
    m.term = 3;
    m
}

/// Feeds `bytes` to a reader for node 1 and returns its verdict and the messages it passed on.
async fn read(bytes: Vec<u8>) -> (Result<(), String>, Vec<Message>) {
    let (verdict, got, _) = read_all(bytes).await;
    (verdict, got)
}

/// [`read`], and the voters it reported unreachable.
async fn read_all(bytes: Vec<u8>) -> (Result<(), String>, Vec<Message>, Vec<NodeId>) {
    let (mut client, server) = tokio::io::duplex(1 << 16);
    let (tx, mut rx) = mpsc::channel(16);
    let reader = tokio::spawn(async move { read_connection(1, server, &VOTERS, &tx).await });
    client.write_all(&bytes).await.expect("write");
    drop(client);
    let verdict = reader.await.expect("reader task");
    let (mut got, mut gone) = (Vec::new(), Vec::new());
    while let Ok(item) = rx.try_recv() {
        match item {
            Inbound::Message(m) => got.push(m),
            Inbound::Unreachable(peer) => gone.push(peer),
        }
    }
    (verdict, got, gone)
}

fn framed(from: NodeId, to: NodeId, msgs: &[Message]) -> Vec<u8> {
    let mut out = handshake(from, to).to_vec();
    for m in msgs {
        encode_frame(m, &mut out).expect("encode");
    }
    out
}

#[tokio::test]
async fn frames_round_trip_and_a_clean_close_is_ok() {
    let msgs = [heartbeat(0, 1), heartbeat(0, 1)];
    let (verdict, got, gone) = read_all(framed(0, 1, &msgs)).await;
    assert_eq!(verdict, Ok(()));
    assert_eq!(got, msgs.to_vec());
    // The sender closed its connection: it is reported gone (a stopping voter).
    assert_eq!(gone, vec![0]);
    // A connection that ends before its handshake names nobody.
    let (verdict, got, gone) = read_all(handshake(0, 1)[..6].to_vec()).await;
    assert_eq!((verdict, got.len(), gone.len()), (Ok(()), 0, 0));
}

#[tokio::test]
async fn bad_input_closes_the_connection_with_a_reason() {
    let good = framed(0, 1, &[heartbeat(0, 1)]);
    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        // A Kafka request on the voter port: its size is not the magic.
        (
            "magic",
            [0, 0, 0, 20].iter().chain(&[0u8; 20]).copied().collect(),
        ),
        ("addressed to node 2", framed(0, 2, &[])),
        ("not another voter", framed(7, 1, &[])),
        ("not another voter", framed(1, 1, &[])),
    ];
    let mut huge = handshake(0, 1).to_vec();
    huge.extend_from_slice(&u32::MAX.to_be_bytes());
    huge.extend_from_slice(&[0; 4]);
    cases.push(("over", huge));
    let mut crc = good.clone();
    let last = crc.len() - 1;
    crc[last] ^= 1;
    cases.push(("CRC", crc));
    cases.push(("truncated", good[..good.len() - 2].to_vec()));
    // A valid frame whose message claims another sender than the handshake.
    cases.push((
        "on the connection of node 2",
        framed(2, 1, &[heartbeat(0, 1)]),
    ));
    let mut garbage = handshake(0, 1).to_vec();
    let body = [0xFFu8; 9];
    garbage.extend_from_slice(&(body.len() as u32).to_be_bytes());
    garbage.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
    garbage.extend_from_slice(&body);
    cases.push(("undecodable", garbage));
    for (want, bytes) in cases {
        let (verdict, got) = read(bytes).await;
        let reason = verdict.expect_err(want);
        assert!(reason.contains(want), "want `{want}`, got `{reason}`");
        assert!(
            got.is_empty() || want == "truncated" || want == "CRC",
            "{want}: {got:?}"
        );
    }
}
