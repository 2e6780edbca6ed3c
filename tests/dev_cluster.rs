//! `sluice dev-cluster --brokers 3`: three brokers in one process form one cluster (every
//! broker's Metadata lists all three), and SIGTERM shuts them all down cleanly (exit 0).

mod common;
use common::free_ports;
use std::time::{Duration, Instant};

#[test]
fn three_brokers_in_one_process_form_one_cluster_and_stop_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_ports(3);
    let controller_port = free_ports(3);
    let mut child = common::spawn_dev_cluster(dir.path(), port, controller_port);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut listed = vec![String::new(); 3];
    for (i, seen) in listed.iter_mut().enumerate() {
        let addr = format!("127.0.0.1:{}", port + i as u16);
        loop {
            match sluice::health::check_brokers(&addr, Duration::from_secs(2), 3) {
                Ok(report) => {
                    *seen = report;
                    break;
                }
                Err(e) if Instant::now() > deadline => {
                    let _ = child.kill();
                    panic!("broker {addr} never listed 3 brokers: {e}");
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }
    for (i, report) in listed.iter().enumerate() {
        for n in 0..3u16 {
            let want = format!("{}@127.0.0.1:{}", n + 1, port + n);
            assert!(
                report.contains(&want),
                "broker {i}: {want} missing from {report}"
            );
        }
    }
    // SIGTERM: every node shuts down, the process exits 0.
    let rc = unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(rc, 0);
    let stop_deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > stop_deadline {
            let _ = child.kill();
            panic!("dev-cluster did not stop within 30 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0));
    for n in 1..=3 {
        assert!(
            dir.path()
                .join(format!("node-{n}/meta.properties"))
                .exists(),
            "node {n} has its own data directory"
        );
    }
}
