//! The data directory as a whole: its lock (a second broker on one directory refuses to start and
//! changes nothing there) and checkpoints that contradict the log (they never destroy data).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{ensure, Context, Result};
use bytes::Bytes;
use protocol_tests::{
    batch, create_topic, fetch_request, list_offsets, only_partition, produce, produce_request,
    split_batches, start_broker, TestBroker,
};
use sluice::broker::StartupError;
use sluice::server::ServeError;

#[global_allocator]
static ALLOC: sluice::alloc_guard::GuardedAllocator = sluice::alloc_guard::GuardedAllocator;

/// Every file under `dir`: its bytes and modification time.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                let bytes = std::fs::read(entry.path()).unwrap();
                out.insert(entry.path(), (bytes, meta.modified().unwrap()));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_broker_on_a_locked_data_dir_refuses_to_start_and_changes_nothing() -> Result<()> {
    let first = TestBroker::start().await?;
    let mut c = first.connect().await?;
    create_topic(&mut c, "locked", 1, &[]).await?;
    let r = produce(&mut c, 9, "locked", 0, batch(&[b"one", b"two"])).await?;
    assert_eq!((r.error_code, r.base_offset), (0, 0));
    let before = snapshot(first.dir.path());
    assert!(before.contains_key(&first.dir.path().join(".lock")));

    let err = match start_broker(first.dir.path(), &[]).await {
        Ok(_) => anyhow::bail!("a second broker started on a locked data directory"),
        Err(e) => e,
    };
    let serve = err.downcast_ref::<ServeError>().context("a ServeError")?;
    assert!(
        matches!(serve, ServeError::Startup(StartupError::DataDirLocked(_))),
        "{serve:?}"
    );
    let line = serve.to_string();
    let dir = first.dir.path().display().to_string();
    assert!(line.contains(&dir), "{line}");
    assert!(
        line.contains(&format!("pid {}", std::process::id())),
        "{line}"
    );
    assert_eq!(line.lines().count(), 1, "{line}");
    // Not one file of the directory was created, changed or touched.
    assert_eq!(snapshot(first.dir.path()), before);

    // The first broker goes on serving.
    let r = produce(&mut c, 9, "locked", 0, batch(&[b"three"])).await?;
    assert_eq!((r.error_code, r.base_offset), (0, 2));
    let fetched = only_partition(
        c.call(
            12,
            &fetch_request(12, "locked", Default::default(), 0, 0, 0, 1),
        )
        .await?,
    )?;
    assert_eq!(fetched.high_watermark, 3);
    first.shutdown().await;
    Ok(())
}

/// Records in a Fetch answer's batches (each header's record count).
fn record_count(records: &[u8]) -> Result<i64> {
    let mut n = 0;
    for b in split_batches(records)? {
        ensure!(b.len() >= 61, "short batch");
        n += i32::from_be_bytes(b[57..61].try_into()?) as i64;
    }
    Ok(n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_start_checkpoint_beyond_the_log_end_keeps_every_record() -> Result<()> {
    let mut b = TestBroker::start().await?;
    let mut c = b.connect().await?;
    create_topic(&mut c, "kept", 1, &[]).await?;
    let values: Vec<Vec<u8>> = (0..1000).map(|i| format!("v{i}").into_bytes()).collect();
    let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
    for i in 0..30 {
        let r = c
            .call(9, &produce_request("kept", 0, 1, Bytes::from(batch(&refs))))
            .await?;
        let p = &r.responses[0].partition_responses[0];
        assert_eq!((p.error_code, p.base_offset), (0, i * 1000));
    }
    drop(c);
    let running = b.running.take().context("running")?;
    running.shutdown().await;
    // A checkpoint claiming everything below offset 1,000,000 was deleted.
    std::fs::write(
        b.dir.path().join("log-start-offset-checkpoint"),
        "0\n1\nkept 0 1000000\n",
    )?;
    b.restart(&[]).await?;
    let mut c = b.connect().await?;
    let earliest = list_offsets(&mut c, 7, "kept", 0, -2).await?;
    assert_eq!((earliest.error_code, earliest.offset), (0, 0));
    let latest = list_offsets(&mut c, 7, "kept", 0, -1).await?;
    assert_eq!(latest.offset, 30_000);
    let mut offset = 0;
    let mut records = 0;
    while offset < 30_000 {
        let p = only_partition(
            c.call(
                12,
                &fetch_request(12, "kept", Default::default(), 0, offset, 0, 1),
            )
            .await?,
        )?;
        assert_eq!(p.error_code, 0, "fetch at {offset}");
        let bytes = p.records.context("records")?;
        let got = record_count(&bytes)?;
        ensure!(got > 0, "no records at {offset}");
        records += got;
        offset += got;
    }
    assert_eq!(records, 30_000);
    b.shutdown().await;
    Ok(())
}
