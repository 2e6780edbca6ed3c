//! The start sequence: no connection is accepted before the logs are recovered.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

use super::*;

fn mkfifo(path: &Path) {
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// Opens the FIFO for writing without blocking: fails (ENXIO) until someone opens it to read.
fn open_writer(path: &Path) -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .ok()
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_refused_until_the_logs_are_recovered() {
    let tmp = tempfile::tempdir().unwrap();
    // A partition whose recovery blocks on reading its offset index (a FIFO) until we let it go.
    let part = tmp.path().join("t-0");
    std::fs::create_dir_all(&part).unwrap();
    std::fs::write(part.join("00000000000000000000.log"), b"").unwrap();
    std::fs::write(part.join("00000000000000000000.timeindex"), b"").unwrap();
    let fifo = part.join("00000000000000000000.index");
    mkfifo(&fifo);

    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let config = Config {
        listen: addr,
        data_dir: tmp.path().to_path_buf(),
        ..Config::default()
    };
    let starting = tokio::spawn(start(config));
    // Wait until recovery is reading the index (the FIFO then has a reader).
    let mut writer = None;
    for _ in 0..1000 {
        writer = open_writer(&fifo);
        if writer.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let writer = writer.expect("recovery never opened the index");
    // Recovery is under way: the port refuses connections.
    let refused = tokio::net::TcpStream::connect(addr).await;
    assert!(
        refused.is_err(),
        "a connection was accepted while logs were being recovered"
    );
    // Let recovery finish (an empty index), then the broker listens.
    drop(writer);
    let running = tokio::time::timeout(Duration::from_secs(30), starting)
        .await
        .expect("start finished")
        .unwrap()
        .unwrap();
    assert_eq!(running.local_addr, addr);
    assert!(running.broker.replicas.partition("t", 0).is_some());
    assert!(tokio::net::TcpStream::connect(addr).await.is_ok());
    running.shutdown().await;
}
