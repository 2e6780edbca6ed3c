//! The `sluice` binary refuses bad configuration at startup: one line on stderr naming the key or
//! path, exit code 2, and the data directory untouched (not even created).

use std::path::Path;
use std::process::{Command, Output};

fn sluice(args: &[&str], env: &[(&str, &str)], data_dir: &Path) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env_clear()
        .env("SLUICE_LOG", "info")
        .stdin(std::process::Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn sluice");
    wait_bounded(child)
}

/// Waits for a child that should exit on its own; kills it after 20 s (then the test fails on the
/// exit code).
fn wait_bounded(mut child: std::process::Child) -> Output {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    child.wait_with_output().expect("output")
}

/// Asserts exit code 2, exactly one stderr line containing every `needle`, and no data dir.
fn assert_refused(out: &Output, needles: &[&str], data_dir: &Path) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    let lines: Vec<_> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {stderr}");
    for n in needles {
        assert!(lines[0].contains(n), "`{n}` missing from: {}", lines[0]);
    }
    assert!(
        !data_dir.exists(),
        "data dir created: {}",
        data_dir.display()
    );
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

#[test]
fn typo_and_bad_unit_in_server_properties_are_all_named() {
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("data");
    let file = write(
        t.path(),
        "server.properties",
        "num.partitons=3\nlog.retention.ms=7d\nnode.id=1\n",
    );
    let out = sluice(&[&file], &[], &data);
    assert_refused(
        &out,
        &[
            "num.partitons",
            "did you mean `num.partitions`",
            "log.retention.ms",
            "Not a number of type LONG",
            "server.properties:2",
        ],
        &data,
    );
}

#[test]
fn listener_without_protocol_and_advertised_wildcard_from_the_environment() {
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("data");
    let out = sluice(&[], &[("KAFKA_LISTENERS", "EXTERNAL://127.0.0.1:0")], &data);
    assert_refused(
        &out,
        &[
            "listener.security.protocol.map",
            "No security protocol defined for listener EXTERNAL",
        ],
        &data,
    );
    let out = sluice(
        &["serve"],
        &[
            ("KAFKA_LISTENERS", "PLAINTEXT://0.0.0.0:0"),
            ("KAFKA_ADVERTISED_LISTENERS", "PLAINTEXT://0.0.0.0:9092"),
        ],
        &data,
    );
    assert_refused(
        &out,
        &[
            "advertised.listeners",
            "0.0.0.0",
            "KAFKA_ADVERTISED_LISTENERS",
        ],
        &data,
    );
}

#[test]
fn port_in_use_is_refused_before_the_data_dir_is_touched() {
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("data");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = sluice(&["--listen", &addr], &[], &data);
    assert_refused(&out, &["cannot listen on", &addr], &data);
}

#[test]
fn unusable_data_dir_is_named() {
    let t = tempfile::tempdir().unwrap();
    // A data dir under a regular file cannot be created (root ignores permission bits).
    let file = t.path().join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    let data = file.join("data");
    let out = sluice(&["--listen", "127.0.0.1:0"], &[], &data);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(last.contains(&data.display().to_string()), "{stderr}");
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
}

#[test]
fn ephemeral_with_data_dir_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("data");
    let out = sluice(&["--ephemeral"], &[], &data);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--ephemeral"));
    assert!(!data.exists());
}

/// Starts sluice, collects stderr until the "listening on" line (or 20 s), then stops it.
fn first_log_lines(args: &[&str], env: &[(&str, &str)], data_dir: &Path) -> Vec<String> {
    use std::io::BufRead;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn sluice");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let mut lines = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(line) => {
                let done = line.contains("listening on");
                lines.push(line);
                if done {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    lines
}

#[test]
fn json_logs_without_colour_and_one_warning_per_ignored_key() {
    let t = tempfile::tempdir().unwrap();
    let lines = first_log_lines(
        &["--listen", "127.0.0.1:0", "--log-format", "json"],
        &[
            ("KAFKA_NUM_NETWORK_THREADS", "3"),
            ("KAFKA_LOG_CLEANER_THREADS", "1"),
        ],
        &t.path().join("data"),
    );
    assert!(
        lines.last().is_some_and(|l| l.contains("listening on")),
        "{lines:?}"
    );
    for l in &lines {
        assert!(l.starts_with('{') && l.ends_with('}'), "not JSON: {l}");
        assert!(!l.contains('\u{1b}'), "colour code: {l}");
    }
    let warned: Vec<_> = lines
        .iter()
        .filter(|l| l.contains("\"level\":\"WARN\"") && l.contains("does not implement"))
        .collect();
    assert_eq!(warned.len(), 2, "{lines:?}");
    assert!(warned[0].contains("log.cleaner.threads") && warned[1].contains("num.network.threads"));
    // Text format to a pipe: no colour codes either.
    let lines = first_log_lines(&["--listen", "127.0.0.1:0"], &[], &t.path().join("data2"));
    assert!(
        lines.iter().any(|l| l.contains("listening on")),
        "{lines:?}"
    );
    assert!(lines.iter().all(|l| !l.contains('\u{1b}')), "{lines:?}");
}
