//! The writer on real loopback sockets: byte and file chunks in order, and a file range that ends
//! early (truncated after the read) closing only its own connection.

use std::io::Write;
use std::sync::Arc;

use bytes::Bytes;
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;

use super::*;

/// A connected (client, server) pair on loopback.
async fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (server, _) = listener.accept().await.unwrap();
    (client, server)
}

/// A temp file holding `len` bytes of a position-dependent pattern.
fn pattern_file(dir: &std::path::Path, name: &str, len: usize) -> (Arc<File>, Vec<u8>) {
    let bytes: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
    let path = dir.join(name);
    File::create(&path).unwrap().write_all(&bytes).unwrap();
    (Arc::new(File::open(&path).unwrap()), bytes)
}

/// Starts a writer on `server`; returns its reply queue and task.
fn writer(server: TcpStream) -> (mpsc::Sender<Reply>, tokio::task::JoinHandle<()>) {
    let peer = server.peer_addr().unwrap();
    let (_rd, wr) = server.into_split();
    let (tx, rx) = mpsc::channel(8);
    let network = Network::from_config(&crate::config::Config::default());
    (
        tx,
        tokio::spawn(write_loop(wr, rx, peer, Outbox::new(), network)),
    )
}

#[tokio::test]
async fn byte_and_file_chunks_arrive_in_order_and_complete() {
    let dir = tempfile::tempdir().unwrap();
    // Larger than the default socket buffers, so sendfile hits EAGAIN and partial sends.
    let (file, content) = pattern_file(dir.path(), "big.log", 8 << 20);
    let (mut client, server) = pair().await;
    let (tx, task) = writer(server);
    let head = Bytes::from_static(b"head");
    let frame1 = vec![
        Chunk::Bytes(head.clone()),
        Chunk::File(FileRecords::new(file.clone(), 100, 5 << 20)),
        Chunk::Bytes(Bytes::from_static(b"mid")),
        Chunk::File(FileRecords::new(file.clone(), 7, 10)),
    ];
    let frame2 = vec![Chunk::File(FileRecords::new(file.clone(), 0, 3 << 20))];
    tx.send(Reply::Now(Some(frame1))).await.unwrap();
    tx.send(Reply::Now(Some(frame2))).await.unwrap();
    drop(tx);
    let mut got = Vec::new();
    client.read_to_end(&mut got).await.unwrap();
    task.await.unwrap();
    let mut want = b"head".to_vec();
    want.extend_from_slice(&content[100..100 + (5 << 20)]);
    want.extend_from_slice(b"mid");
    want.extend_from_slice(&content[7..17]);
    want.extend_from_slice(&content[..3 << 20]);
    assert_eq!(got.len(), want.len());
    assert!(got == want, "bytes differ from what was promised");
}

#[tokio::test]
async fn a_truncated_file_closes_only_its_connection() {
    let dir = tempfile::tempdir().unwrap();
    let (file, content) = pattern_file(dir.path(), "seg.log", 300_000);
    // Connection 1: the range was read when the file had 300,000 bytes; then it was cut to 1,000.
    let (mut client1, server1) = pair().await;
    let (tx1, task1) = writer(server1);
    let (mut client2, server2) = pair().await;
    let (tx2, task2) = writer(server2);
    let promised = FileRecords::new(file.clone(), 0, 300_000);
    std::fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join("seg.log"))
        .unwrap()
        .set_len(1_000)
        .unwrap();
    tx1.send(Reply::Now(Some(vec![
        Chunk::Bytes(Bytes::from_static(b"prefix")),
        Chunk::File(promised),
    ])))
    .await
    .unwrap();
    // A later reply on the same connection must not be sent after the short one.
    tx1.send(Reply::Now(Some(vec![Chunk::Bytes(Bytes::from_static(
        b"after",
    ))])))
    .await
    .ok();
    let mut got1 = Vec::new();
    client1.read_to_end(&mut got1).await.unwrap();
    let mut want1 = b"prefix".to_vec();
    want1.extend_from_slice(&content[..1_000]);
    assert_eq!(got1, want1, "only what the file still had, then EOF");
    task1.await.unwrap();

    // Connection 2 keeps working with what the file holds now.
    tx2.send(Reply::Now(Some(vec![
        Chunk::Bytes(Bytes::from_static(b"ok")),
        Chunk::File(FileRecords::new(file.clone(), 500, 500)),
    ])))
    .await
    .unwrap();
    let mut buf = vec![0u8; 502];
    client2.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf[..2], b"ok");
    assert_eq!(&buf[2..], &content[500..1_000]);
    drop(tx2);
    let mut rest = Vec::new();
    client2.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty());
    task2.await.unwrap();
}
