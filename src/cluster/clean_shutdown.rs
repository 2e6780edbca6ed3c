//! Kafka's clean shutdown file (`.kafka_cleanshutdown` in the data directory,
//! `{"version":0,"brokerEpoch":N}`): written after a shutdown that flushed every log, with the
//! broker epoch the broker was registered with; taken (read and removed) at the next start, before
//! anything is loaded, so a crash after that start leaves no file. Its epoch is the
//! `PreviousBrokerEpoch` of the next BrokerRegistration: the controller keeps a cleanly restarted
//! broker eligible to lead (KIP-966) and treats any other restart as unclean.

use std::io::Write;
use std::path::Path;

/// The file's name, as Kafka's `CleanShutdownFileHandler`.
pub const FILE_NAME: &str = ".kafka_cleanshutdown";

/// The broker epoch of the previous clean shutdown, or -1 (no file, unreadable, or not Kafka's
/// format); the file is removed either way. A failure to remove it is logged: the next start
/// would see the file again, so the broker then reports -1 (unclean), the safe answer.
pub fn take(dir: &Path) -> i64 {
    let path = dir.join(FILE_NAME);
    let Ok(bytes) = std::fs::read(&path) else {
        return -1;
    };
    let epoch = parse(&bytes).unwrap_or_else(|| {
        tracing::warn!(
            "{}: not a clean shutdown file; treating the last stop as unclean",
            path.display()
        );
        -1
    });
    if let Err(e) = std::fs::remove_file(&path) {
        tracing::warn!(
            "removing {}: {e}; treating the last stop as unclean",
            path.display()
        );
        return -1;
    }
    epoch
}

/// Writes the file (durably: written, synced, renamed into place, directory synced).
pub fn write(dir: &Path, broker_epoch: i64) -> std::io::Result<()> {
    let tmp = dir.join(format!("{FILE_NAME}.tmp"));
    let body = serde_json::json!({ "version": 0, "brokerEpoch": broker_epoch }).to_string();
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(body.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, dir.join(FILE_NAME))?;
    std::fs::File::open(dir)?.sync_all()
}

/// The epoch in a file's content (`version` 0, a non-negative `brokerEpoch`).
fn parse(bytes: &[u8]) -> Option<i64> {
    let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    if v.get("version")?.as_i64()? != 0 {
        return None;
    }
    v.get("brokerEpoch")?.as_i64().filter(|e| *e >= 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_epoch_is_taken_once() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(take(dir.path()), -1);
        write(dir.path(), 42).unwrap();
        let body = std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
        assert_eq!(body, r#"{"brokerEpoch":42,"version":0}"#);
        assert_eq!(take(dir.path()), 42);
        assert!(!dir.path().join(FILE_NAME).exists());
        assert_eq!(take(dir.path()), -1, "a crash after a start leaves no file");
    }

    #[test]
    fn anything_else_is_an_unclean_stop() {
        let dir = tempfile::tempdir().unwrap();
        for junk in [
            &b"{"[..],
            br#"{"version":1,"brokerEpoch":3}"#,
            br#"{"version":0,"brokerEpoch":-5}"#,
            b"",
        ] {
            std::fs::write(dir.path().join(FILE_NAME), junk).unwrap();
            assert_eq!(take(dir.path()), -1, "{:?}", String::from_utf8_lossy(junk));
            assert!(!dir.path().join(FILE_NAME).exists());
        }
    }
}
