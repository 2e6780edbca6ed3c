//! The CONTROLLER listener's demux over real sockets: garbage closes the connection with one
//! reason, the quorum magic is handed over with the bytes read, a Kafka request is answered.

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, Request};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::controller::driver::{self, DriverConfig, MetadataApplier, RunningController};
use crate::controller::rpc::VoterEndpoint;
use crate::controller::{bootstrap_records, ControllerSettings, BOOTSTRAP_FEATURES};
use crate::metadata::MetadataRecord;
use crate::quorum::{NodeConfig, QuorumConfig};

struct Nothing;
impl MetadataApplier for Nothing {
    fn apply(&self, _: u64, _: Vec<MetadataRecord>) {}
    fn load_snapshot(&self, _: u64, _: Vec<MetadataRecord>) {}
}

fn controller(dir: &std::path::Path) -> RunningController {
    let config = DriverConfig {
        settings: ControllerSettings::default(),
        bootstrap: bootstrap_records(BOOTSTRAP_FEATURES),
        tick_interval: Duration::from_millis(100),
        seed: 1,
        clock: Arc::new(crate::broker::now_ms),
    };
    let quorum = QuorumConfig {
        node: NodeConfig::new(1, vec![1]),
        dir: dir.to_path_buf(),
        voters: vec![(1, "127.0.0.1:1".into())],
    };
    driver::start(config, quorum, None, Arc::new(Nothing)).expect("start")
}

fn apis(running: &RunningController) -> ControllerApis {
    ControllerApis {
        handle: running.handle.clone(),
        cluster_id: "c".into(),
        voters: vec![VoterEndpoint {
            id: 1,
            host: "127.0.0.1".into(),
            port: 1,
        }],
        listener_name: "CONTROLLER".into(),
        wall_clock: Arc::new(crate::broker::now_ms),
        admin: None,
    }
}

/// Accepts one connection and serves it; returns the client side and the server's result.
async fn one_connection(
    apis: ControllerApis,
) -> (
    TcpStream,
    tokio::task::JoinHandle<Result<(), String>>,
    mpsc::Receiver<HandedConnection>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (tx, rx) = mpsc::channel(4);
    let server = tokio::spawn(async move {
        let (stream, remote) = listener.accept().await.expect("accept");
        serve_connection(stream, remote, &tx, &apis).await
    });
    let client = TcpStream::connect(addr).await.expect("connect");
    (client, server, rx)
}

#[test]
fn the_first_four_bytes_classify_a_connection() {
    assert_eq!(classify(MAGIC), ConnectionKind::Voter);
    assert_eq!(classify(100i32.to_be_bytes()), ConnectionKind::Kafka(100));
    assert_eq!(classify((-5i32).to_be_bytes()), ConnectionKind::Invalid(-5));
    assert_eq!(classify(4i32.to_be_bytes()), ConnectionKind::Invalid(4));
    assert_eq!(
        classify(*b"GET "),
        ConnectionKind::Invalid(i32::from_be_bytes(*b"GET "))
    );
    let over = (MAX_REQUEST_BYTES as i32 + 1).to_be_bytes();
    assert!(matches!(classify(over), ConnectionKind::Invalid(_)));
}

#[tokio::test]
async fn garbage_closes_the_connection_with_one_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = controller(dir.path());
    let (mut client, server, _rx) = one_connection(apis(&running)).await;
    client
        .write_all(b"GET / HTTP/1.1\r\n\r\n")
        .await
        .expect("write");
    let mut rest = Vec::new();
    let n = tokio::time::timeout(Duration::from_secs(5), client.read_to_end(&mut rest))
        .await
        .expect("closed in time")
        .unwrap_or(0);
    assert_eq!(n, 0, "nothing answered");
    let reason = server
        .await
        .expect("task")
        .expect_err("closed with a reason");
    assert!(reason.contains("invalid request size"), "{reason}");
}

#[tokio::test]
async fn a_request_of_an_api_the_controller_does_not_serve_closes_the_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = controller(dir.path());
    let (mut client, server, _rx) = one_connection(apis(&running)).await;
    // Metadata v12 (key 3): a broker API.
    let mut frame = BytesMut::new();
    frame.put_i32(10);
    frame.put_i16(3);
    frame.put_i16(12);
    frame.put_i32(1);
    frame.put_i16(-1);
    client.write_all(&frame).await.expect("write");
    let mut rest = Vec::new();
    let _ = client.read_to_end(&mut rest).await;
    assert!(rest.is_empty());
    let reason = server.await.expect("task").expect_err("closed");
    assert!(reason.contains("unsupported version"), "{reason}");
}

#[tokio::test]
async fn the_quorum_magic_is_handed_over_with_the_bytes_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = controller(dir.path());
    let (mut client, server, mut rx) = one_connection(apis(&running)).await;
    client.write_all(&MAGIC).await.expect("write");
    client.write_all(&[0, 0, 0, 2]).await.expect("write");
    let handed = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("in time")
        .expect("handed");
    assert_eq!(handed.prefix, MAGIC.to_vec());
    let mut next = [0u8; 4];
    let mut stream = handed.stream;
    stream
        .read_exact(&mut next)
        .await
        .expect("rest of the stream");
    assert_eq!(next, [0, 0, 0, 2]);
    assert_eq!(server.await.expect("task"), Ok(()));
}

#[tokio::test]
async fn kafka_requests_are_answered_in_order_on_one_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = controller(dir.path());
    let (mut client, server, _rx) = one_connection(apis(&running)).await;
    for correlation_id in [5, 6] {
        let mut body = BytesMut::new();
        body.put_i16(ApiVersionsRequest::KEY);
        body.put_i16(3);
        body.put_i32(correlation_id);
        body.put_i16(-1);
        body.put_u8(0);
        ApiVersionsRequest::default()
            .encode(&mut body, 3)
            .expect("encode");
        let mut frame = BytesMut::new();
        frame.put_i32(body.len() as i32);
        frame.extend_from_slice(&body);
        client.write_all(&frame).await.expect("write");
        let size = client.read_i32().await.expect("size");
        let mut response = vec![0u8; size as usize];
        client.read_exact(&mut response).await.expect("body");
        let mut response = bytes::Bytes::from(response);
        let header = ResponseHeader::decode(&mut response, 0).expect("header");
        assert_eq!(header.correlation_id, correlation_id);
        let r = ApiVersionsResponse::decode(&mut response, 3).expect("response");
        assert_eq!(r.error_code, 0);
        assert_eq!(
            r.api_keys.len(),
            crate::controller::rpc::CONTROLLER_APIS.len()
        );
    }
    drop(client);
    assert_eq!(server.await.expect("task"), Ok(()));
}
