//! Loading a snapshot into an image (Kafka's `MetadataLoader` on a `SnapshotManifest`): the
//! snapshot holds the whole state at its offset, so the new image is built from it alone, never
//! on top of the old one (whatever the snapshot no longer names, a broker unregistered, a
//! config deleted, a quota removed, a topic deleted, is gone), and the delta is the difference
//! between the two images (Kafka's `MetadataDelta` of a snapshot load), so the hosting side stops,
//! starts or re-leads exactly what changed.

use std::collections::{BTreeMap, BTreeSet};

use super::*;

impl MetadataImage {
    /// The image a snapshot of `records` makes, keeping this image's cluster id and controller
    /// id, and what changed from this image. The offset moves on by the records' count, as
    /// [`MetadataImage::apply`] does.
    pub fn load_snapshot(&self, records: &[MetadataRecord]) -> (MetadataImage, MetadataDelta) {
        let (mut next, _) =
            MetadataImage::empty(self.cluster_id.clone(), self.controller_id).apply(records);
        next.offset = self.offset + records.len() as u64;
        let delta = self.diff(&next);
        (next, delta)
    }

    /// What changed from `self` to `next`, as a delta of applied records would say it.
    fn diff(&self, next: &MetadataImage) -> MetadataDelta {
        let mut delta = MetadataDelta::default();
        for id in changed_keys(&*self.brokers, &*next.brokers) {
            delta.note_broker(id);
        }
        let before: BTreeMap<Uuid, &Arc<TopicImage>> =
            self.topics.by_name.values().map(|t| (t.id, t)).collect();
        let after: BTreeMap<Uuid, &Arc<TopicImage>> =
            next.topics.by_name.values().map(|t| (t.id, t)).collect();
        for (id, topic) in &after {
            let old = before.get(id).map(|t| &t.partitions);
            if old.is_none() {
                delta.note_created_topic(*id);
            }
            let empty = BTreeMap::new();
            for index in changed_keys(old.unwrap_or(&empty), &topic.partitions) {
                if topic.partitions.contains_key(&index) {
                    delta.note_partition(*id, index);
                }
            }
        }
        for (id, topic) in before {
            if !after.contains_key(&id) {
                delta.note_deleted_topic(Arc::clone(topic));
            }
        }
        for key in changed_keys(&*self.configs, &*next.configs) {
            delta.note_config(key);
        }
        for name in changed_keys(&*self.features, &*next.features) {
            delta.note_feature(&name);
        }
        delta
    }
}

/// The keys whose values differ between two maps (present in one only, or unequal).
fn changed_keys<K: Ord + Clone, V: PartialEq>(a: &BTreeMap<K, V>, b: &BTreeMap<K, V>) -> Vec<K> {
    let keys: BTreeSet<&K> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect()
}
