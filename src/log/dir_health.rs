//! The log directory's health after a failed fsync (Kafka's `LogDirFailureChannel`).
//!
//! A failed `fsync` cannot be retried: the kernel may already have dropped the dirty pages it
//! could not write and marked them clean, so a second `fsync` succeeds without the bytes being on
//! disk ("fsyncgate"). Answering KAFKA_STORAGE_ERROR and letting the producer retry would then
//! acknowledge records that a crash loses. So, as Kafka marks a log directory offline on an
//! I/O error and halts the broker when its only directory is offline, the first failed fsync of
//! partition data (a `.log`, an index, a `.txnindex` or the partition directory) makes the data
//! directory offline for the rest of the process:
//! - every later fsync through [`LogDirHealth::sync_data`] / [`LogDirHealth::check`] fails at once
//!   with the first failure's reason, so nothing written after it is ever reported durable;
//! - the handler the server installs ([`LogDirHealth::on_offline`]) runs once: the broker logs one
//!   line naming the file and the error and halts (exit code 1, no shutdown: Kafka's
//!   `Exit.halt(1)` for "all log dirs have failed"); recovery at the next start re-reads the
//!   segments above the recovery point and keeps only whole, valid batches.
//!
//! Without a handler (the log layer's own tests) only the first rule holds. Clones share the state.

use std::fmt;
use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

/// What the server runs when the directory goes offline: given the failure's description.
pub type OfflineHandler = Box<dyn Fn(&str) + Send + Sync>;

#[derive(Default)]
struct Inner {
    /// The first failure, once there was one.
    failed: OnceLock<String>,
    handler: Mutex<Option<OfflineHandler>>,
    /// Tests: the next fsync through `sync_data` fails with EIO without touching the disk.
    #[cfg(test)]
    fail_next: std::sync::atomic::AtomicBool,
}

/// Shared health of the data directory's partition logs.
#[derive(Clone, Default)]
pub struct LogDirHealth {
    inner: Arc<Inner>,
}

impl LogDirHealth {
    /// Installs what runs when the directory goes offline (replaces an earlier handler). If it
    /// already is offline, the handler runs now.
    pub fn on_offline(&self, handler: OfflineHandler) {
        if let Some(why) = self.inner.failed.get() {
            handler(why);
        }
        *self.lock_handler() = Some(handler);
    }

    /// The first failure's description, once the directory is offline.
    pub fn offline_reason(&self) -> Option<&str> {
        self.inner.failed.get().map(String::as_str)
    }

    /// `Ok` while the directory is healthy; afterwards the first failure, as an I/O error.
    pub fn check(&self) -> io::Result<()> {
        match self.inner.failed.get() {
            None => Ok(()),
            Some(why) => Err(offline_error(why)),
        }
    }

    /// `fsync`s `file`'s data; a failure takes the directory offline.
    pub fn sync_data(&self, file: &File, path: &Path) -> io::Result<()> {
        self.check()?;
        #[cfg(test)]
        if self
            .inner
            .fail_next
            .swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            let e = io::Error::from_raw_os_error(5);
            return Err(self.failed(path, e));
        }
        file.sync_data().map_err(|e| self.failed(path, e))
    }

    /// Records a failed fsync of `path` (the first one takes the directory offline and runs the
    /// handler); returns the error to hand on. A file that no longer exists (a deleted topic's)
    /// is not a directory failure.
    pub fn failed(&self, path: &Path, e: io::Error) -> io::Error {
        if e.kind() == io::ErrorKind::NotFound {
            return e;
        }
        let why = format!("fsync of {} failed: {e}", path.display());
        if self.inner.failed.set(why.clone()).is_ok() {
            if let Some(handler) = self.lock_handler().as_ref() {
                handler(&why);
            }
            return io::Error::new(e.kind(), why);
        }
        offline_error(self.inner.failed.get().map_or(why.as_str(), String::as_str))
    }

    /// Tests: the next [`Self::sync_data`] fails with EIO.
    #[cfg(test)]
    pub fn fail_next_fsync(&self) {
        self.inner
            .fail_next
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    fn lock_handler(&self) -> std::sync::MutexGuard<'_, Option<OfflineHandler>> {
        self.inner
            .handler
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn offline_error(why: &str) -> io::Error {
    io::Error::other(format!("log directory offline since: {why}"))
}

impl fmt::Debug for LogDirHealth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.offline_reason() {
            None => f.write_str("LogDirHealth(online)"),
            Some(why) => write!(f, "LogDirHealth(offline: {why})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn after_one_failed_fsync_every_later_one_fails_and_the_handler_ran_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.log");
        let file = File::create(&path).unwrap();
        let health = LogDirHealth::default();
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        health.on_offline(Box::new(move |why| {
            assert!(why.contains("00000000000000000000.log"), "{why}");
            seen.fetch_add(1, Ordering::SeqCst);
        }));

        health.sync_data(&file, &path).unwrap();
        assert_eq!(health.offline_reason(), None);

        health.fail_next_fsync();
        let first = health.sync_data(&file, &path).unwrap_err();
        assert!(first.to_string().contains("fsync of"), "{first}");
        // The disk works again, but the pages the failed fsync dropped are gone: no later fsync
        // may report success.
        let again = health.sync_data(&file, &path).unwrap_err();
        assert!(
            again.to_string().contains("log directory offline"),
            "{again}"
        );
        assert!(health.check().is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert!(health
            .offline_reason()
            .is_some_and(|why| why.contains("Input/output error")));
    }

    #[test]
    fn a_file_gone_is_not_a_directory_failure() {
        let health = LogDirHealth::default();
        let gone = io::Error::from(io::ErrorKind::NotFound);
        let e = health.failed(Path::new("deleted-topic-0/x.log"), gone);
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(health.check().is_ok());
    }

    #[test]
    fn a_handler_installed_after_the_failure_runs_at_once() {
        let health = LogDirHealth::default();
        health.failed(Path::new("t-0"), io::Error::from_raw_os_error(5));
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        health.on_offline(Box::new(move |_| {
            seen.fetch_add(1, Ordering::SeqCst);
        }));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }
}
