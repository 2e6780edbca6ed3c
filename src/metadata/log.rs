//! `MetadataLog`: the broker's published metadata image and the one way it moves on.
//!
//! The records themselves live in the controller quorum's log (`quorum`, `metadata.log.dir`);
//! the controller driver hands every committed entry, in log order, to the hosting side
//! (`replica::metadata_host`), which commits it here. A commit applies the records to the current
//! image, lets the hosting side react to the delta (create or delete local logs), and only then
//! publishes the new image; if the hosting side fails, nothing is published (the entry stays in
//! the quorum's log, so the next start applies it again).
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

/// The published metadata image and its commit path.
pub struct MetadataLog {
    /// Serialises commits: each applies to the image the previous one published.
    commits: Mutex<()>,
    published: watch::Sender<Arc<MetadataImage>>,
}

impl MetadataLog {
    /// An empty image naming `cluster_id` and `controller_id`.
    pub fn new(cluster_id: impl Into<String>, controller_id: i32) -> MetadataLog {
        let (published, _) =
            watch::channel(Arc::new(MetadataImage::empty(cluster_id, controller_id)));
        MetadataLog {
            commits: Mutex::new(()),
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

    /// Commits `records`: applies them, runs `host(new image, delta)`, then publishes.
    /// When `host` fails the published image stays as it was.
    pub fn commit<E>(
        &self,
        records: Vec<MetadataRecord>,
        host: impl FnOnce(&MetadataImage, &MetadataDelta) -> Result<(), E>,
    ) -> Result<Arc<MetadataImage>, E> {
        self.publish(|image| image.apply(&records), host)
    }

    /// As [`Self::commit`] for a snapshot: the published image is replaced by the snapshot's
    /// state ([`MetadataImage::load_snapshot`]), the host sees what differs from the old one.
    pub fn commit_snapshot<E>(
        &self,
        records: Vec<MetadataRecord>,
        host: impl FnOnce(&MetadataImage, &MetadataDelta) -> Result<(), E>,
    ) -> Result<Arc<MetadataImage>, E> {
        self.publish(|image| image.load_snapshot(&records), host)
    }

    /// One commit, serialized with the others: the next image from the current one, the host's
    /// reaction to it, then publication (none if the host fails).
    fn publish<E>(
        &self,
        next: impl FnOnce(&MetadataImage) -> (MetadataImage, MetadataDelta),
        host: impl FnOnce(&MetadataImage, &MetadataDelta) -> Result<(), E>,
    ) -> Result<Arc<MetadataImage>, E> {
        let _serial = self.commits.lock();
        let (next, delta) = next(&self.image());
        host(&next, &delta)?;
        let next = Arc::new(next);
        self.published.send_replace(next.clone());
        Ok(next)
    }
}
