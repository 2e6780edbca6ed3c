//! `MetadataLog`: the broker's local metadata log and the image it publishes.
//!
//! On this single node the log lives in memory: at startup it is rebuilt from the data directory
//! (this broker's registration, then one `Topic`/`Partition`/`Config` record set per topic found
//! on disk), and every topic creation, deletion, partition growth or config change commits its
//! records here. A commit applies the records to the current image, lets the hosting side react to
//! the delta (create or delete local logs), and only then appends the records and publishes the
//! new image; if the hosting side fails, nothing is published. The quorum (controller) replaces
//! the in-memory record list later; the image, delta and publication stay.
//!
//! Thread-safe: commits are serialised by one mutex (held across the hosting reaction, which may
//! do blocking I/O: callers run on the blocking pool); readers take the published image from a
//! `watch` without waiting for a commit.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::watch;

use super::delta::MetadataDelta;
use super::image::MetadataImage;
use super::records::MetadataRecord;

/// The local metadata log and its published image.
pub struct MetadataLog {
    /// Every committed record, in order (the image is their application to an empty one).
    records: Mutex<Vec<MetadataRecord>>,
    published: watch::Sender<Arc<MetadataImage>>,
}

impl MetadataLog {
    /// An empty log whose image names `cluster_id` and `controller_id`.
    pub fn new(cluster_id: impl Into<String>, controller_id: i32) -> MetadataLog {
        let (published, _) =
            watch::channel(Arc::new(MetadataImage::empty(cluster_id, controller_id)));
        MetadataLog {
            records: Mutex::new(Vec::new()),
            published,
        }
    }

    /// The current image (a cheap `Arc` clone; never waits for a commit).
    pub fn image(&self) -> Arc<MetadataImage> {
        self.published.borrow().clone()
    }

    /// A receiver woken at every published image.
    pub fn subscribe(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.published.subscribe()
    }

    /// How many records were committed.
    pub fn len(&self) -> usize {
        self.records.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A copy of every committed record (tests, and later: the snapshot).
    pub fn records(&self) -> Vec<MetadataRecord> {
        self.records.lock().clone()
    }

    /// Commits `records`: applies them, runs `host(new image, delta)`, then appends and publishes.
    /// When `host` fails the records are dropped and the published image stays as it was.
    pub fn commit<E>(
        &self,
        records: Vec<MetadataRecord>,
        host: impl FnOnce(&MetadataImage, &MetadataDelta) -> Result<(), E>,
    ) -> Result<Arc<MetadataImage>, E> {
        let mut log = self.records.lock();
        let current = self.image();
        let (next, delta) = current.apply(&records);
        host(&next, &delta)?;
        log.extend(records);
        let next = Arc::new(next);
        self.published.send_replace(next.clone());
        Ok(next)
    }
}
