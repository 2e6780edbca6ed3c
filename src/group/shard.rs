//! Which coordinator shard a key belongs to, and whether this broker coordinates it.
//!
//! The group and transaction coordinators are sharded by the partitions of their internal topic
//! (`__consumer_offsets`, `__transaction_state`): a group id or transactional id hashes to one
//! partition ([`super::records::partition_for`]) and the leader of that partition in the metadata
//! image is its coordinator (Kafka's `GroupCoordinatorService.topicPartitionFor` and
//! `TransactionStateManager.partitionFor`). Handlers ask [`coordinator_shard`] before routing a
//! request to the local coordinator task; the loaders replay only [`led_shards`].
//!
//! Invariants: pure (no I/O, no clock); the answer depends only on the image and this broker's
//! id, so every handler of one request sees the same answer for one image.

use std::collections::{BTreeMap, BTreeSet};

use super::codes;
use crate::metadata::{MetadataImage, PartitionLeader};

/// Why a key is not coordinated here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotHere {
    /// The internal topic does not exist yet (Kafka creates it on FindCoordinator).
    NoTopic,
    /// The shard's partition has no leader (offline): COORDINATOR_NOT_AVAILABLE.
    NoLeader,
    /// Another broker leads the shard's partition: NOT_COORDINATOR.
    Remote { leader: i32 },
}

impl NotHere {
    /// The Kafka error code a coordinator API answers with.
    pub fn code(self) -> i16 {
        match self {
            NotHere::NoTopic | NotHere::NoLeader => codes::COORDINATOR_NOT_AVAILABLE,
            NotHere::Remote { .. } => codes::NOT_COORDINATOR,
        }
    }
}

/// The shard (partition of `topic`) that `key` belongs to, if this broker (`me`) leads it in
/// `image`; else why not.
pub fn coordinator_shard(
    image: &MetadataImage,
    me: i32,
    topic: &str,
    key: &str,
) -> Result<i32, NotHere> {
    let count = image
        .topic(topic)
        .map(|t| t.partition_count())
        .filter(|&n| n > 0)
        .ok_or(NotHere::NoTopic)?;
    let shard = super::records::partition_for(key, count);
    match image.leader_for(me, topic, shard) {
        PartitionLeader::Local { .. } => Ok(shard),
        PartitionLeader::Remote { leader, .. } => Err(NotHere::Remote { leader }),
        // A missing partition index of an existing topic is as good as offline.
        PartitionLeader::None | PartitionLeader::Unknown => Err(NotHere::NoLeader),
    }
}

/// The partitions of `topic` this broker leads in `image` (the shards it loads and lists).
pub fn led_shards(image: &MetadataImage, me: i32, topic: &str) -> BTreeSet<i32> {
    image.topic(topic).map_or_else(BTreeSet::new, |t| {
        t.partitions
            .iter()
            .filter(|(_, p)| p.leader == me)
            .map(|(&i, _)| i)
            .collect()
    })
}

/// [`led_shards`] with each one's leader epoch (Kafka's coordinator epoch of the shard).
pub fn led_shard_epochs(image: &MetadataImage, me: i32, topic: &str) -> BTreeMap<i32, i32> {
    image.topic(topic).map_or_else(BTreeMap::new, |t| {
        t.partitions
            .iter()
            .filter(|(_, p)| p.leader == me)
            .map(|(&i, p)| (i, p.leader_epoch))
            .collect()
    })
}

/// Between two [`led_shard_epochs`] of one broker: the shards `now` leads that `before` did not
/// lead at the same leader epoch (gained, with their epochs), and the shards `before` led that
/// `now` does not lead at the same epoch (lost). A shard led at both but at other epochs is in
/// both: another leader may have written it in between.
pub fn shard_changes(
    before: &BTreeMap<i32, i32>,
    now: &BTreeMap<i32, i32>,
) -> (BTreeMap<i32, i32>, BTreeSet<i32>) {
    let gained = now
        .iter()
        .filter(|(p, e)| before.get(p) != Some(e))
        .map(|(&p, &e)| (p, e))
        .collect();
    let lost = before
        .iter()
        .filter(|(p, e)| now.get(p) != Some(e))
        .map(|(&p, _)| p)
        .collect();
    (gained, lost)
}

/// How long a coordinator that gained shards waits for their high watermark (see
/// [`committed_to_log_end`]).
pub const GAINED_SHARD_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Waits until the high watermark of every partition of `topic` in `gained` reaches the log end
/// it has now, at most `limit`. A new leader's high watermark trails its log until its followers
/// fetch at the new epoch (a controlled shutdown moves leadership within ms of the last write).
/// The group and transaction coordinators load their led shards to the log end, as Kafka's
/// loaders do (`internal_topic::replay_led`), so for them the wait only lets what they load be
/// committed first; the share coordinator's replay reads committed records only. A leader never
/// truncates its own log, so that end becomes committed once the ISR followers fetch it (or leave
/// the ISR after `replica.lag.time.max.ms`; the wait is shorter).
pub async fn committed_to_log_end(
    replicas: &crate::replica::ReplicaManager,
    topic: &str,
    gained: &BTreeSet<i32>,
    limit: std::time::Duration,
) {
    let deadline = tokio::time::Instant::now() + limit;
    for &index in gained {
        let Some(p) = replicas.partition(topic, index) else {
            continue;
        };
        let end = p.offsets().log_end_offset;
        let mut hw = p.subscribe();
        let reached = tokio::time::timeout_at(deadline, hw.wait_for(|h| *h >= end)).await;
        if reached.is_err() {
            tracing::warn!(
                "{topic}-{index}: the high watermark did not reach the log end {end} within \
                 {limit:?} of gaining leadership; loading the committed records only"
            );
        }
    }
}

/// Follows which shards of `topic` this broker leads, at which leader epoch, as the published
/// image moves (Kafka's coordinator `onElection` / `onResignation`, called for every leader
/// epoch): [`LeadershipWatch::changed`] resolves when a shard was gained or lost (a failover of an
/// internal-topic partition). A shard led here again at another epoch is both lost and gained:
/// another coordinator may have written it in between, even when the images this watch saw never
/// showed it elsewhere (the watch sees only the latest image).
pub struct LeadershipWatch {
    images: tokio::sync::watch::Receiver<std::sync::Arc<MetadataImage>>,
    me: i32,
    topic: &'static str,
    /// Led shard -> its leader epoch, in the last image seen.
    led: BTreeMap<i32, i32>,
    /// The topic's partitions in the last image seen.
    existed: BTreeSet<i32>,
}

impl LeadershipWatch {
    /// Starts from the shards led in the image `images` holds now.
    pub fn new(
        images: tokio::sync::watch::Receiver<std::sync::Arc<MetadataImage>>,
        me: i32,
        topic: &'static str,
    ) -> LeadershipWatch {
        let (led, existed) = {
            let image = images.borrow();
            (
                led_shard_epochs(&image, me, topic),
                partitions_of(&image, topic),
            )
        };
        LeadershipWatch {
            images,
            me,
            topic,
            led,
            existed,
        }
    }

    /// Waits until leadership of an existing shard moves to or from this broker, or comes back
    /// to it at another leader epoch; returns (gained with their leader epochs, lost). Shards
    /// gained because the topic or partition was just created hold nothing to load, so they only
    /// update the set (the coordinator writes them from now on). Pending forever once the image's
    /// publisher is gone.
    pub async fn changed(&mut self) -> (BTreeMap<i32, i32>, BTreeSet<i32>) {
        loop {
            if self.images.changed().await.is_err() {
                return std::future::pending().await;
            }
            let (now, existed) = {
                let image = self.images.borrow_and_update();
                (
                    led_shard_epochs(&image, self.me, self.topic),
                    partitions_of(&image, self.topic),
                )
            };
            let (mut gained, lost) = shard_changes(&self.led, &now);
            gained.retain(|p, _| self.existed.contains(p));
            self.led = now;
            self.existed = existed;
            if !gained.is_empty() || !lost.is_empty() {
                return (gained, lost);
            }
        }
    }
}

fn partitions_of(image: &MetadataImage, topic: &str) -> BTreeSet<i32> {
    image
        .topic(topic)
        .map_or_else(BTreeSet::new, |t| t.partitions.keys().copied().collect())
}

/// Whether `key`'s shard is one of `led` (of a `count`-partition topic): the ListGroups /
/// ListTransactions filter.
pub fn is_led(led: &BTreeSet<i32>, count: i32, key: &str) -> bool {
    led.contains(&super::records::partition_for(key, count))
}

/// The partition count of `topic` in `image` (0 when it does not exist).
pub fn partition_count(image: &MetadataImage, topic: &str) -> i32 {
    image.topic(topic).map_or(0, |t| t.partition_count())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{MetadataRecord, PartitionRecord, NO_LEADER};
    use uuid::Uuid;

    /// `__consumer_offsets` with 3 partitions led by 1, 2 and nobody.
    fn image() -> MetadataImage {
        let t = Uuid::from_u128(7);
        let part = |p: i32, leader: i32| {
            MetadataRecord::Partition(PartitionRecord {
                partition_id: p,
                topic_id: t,
                replicas: vec![leader.max(1)],
                isr: vec![leader.max(1)],
                removing_replicas: vec![],
                adding_replicas: vec![],
                leader,
                leader_epoch: 0,
                partition_epoch: 0,
                elr: vec![],
                last_known_elr: vec![],
            })
        };
        MetadataImage::empty("c", 1)
            .apply(&[
                MetadataRecord::Topic {
                    name: "__consumer_offsets".into(),
                    topic_id: t,
                },
                part(0, 1),
                part(1, 2),
                part(2, NO_LEADER),
            ])
            .0
    }

    /// A key hashing to partition `p` of 3.
    fn key_for(p: i32) -> String {
        (0..)
            .map(|i| format!("g{i}"))
            .find(|k| crate::group::records::partition_for(k, 3) == p)
            .unwrap_or_default()
    }

    #[test]
    fn leadership_decides_the_coordinator() {
        let image = image();
        let topic = "__consumer_offsets";
        assert_eq!(coordinator_shard(&image, 1, topic, &key_for(0)), Ok(0));
        assert_eq!(
            coordinator_shard(&image, 1, topic, &key_for(1)),
            Err(NotHere::Remote { leader: 2 })
        );
        assert_eq!(coordinator_shard(&image, 2, topic, &key_for(1)), Ok(1));
        assert_eq!(
            coordinator_shard(&image, 1, topic, &key_for(2)),
            Err(NotHere::NoLeader)
        );
        assert_eq!(
            coordinator_shard(&image, 1, "__transaction_state", "t"),
            Err(NotHere::NoTopic)
        );
        assert_eq!(NotHere::Remote { leader: 2 }.code(), codes::NOT_COORDINATOR);
        assert_eq!(NotHere::NoLeader.code(), codes::COORDINATOR_NOT_AVAILABLE);
        assert_eq!(NotHere::NoTopic.code(), codes::COORDINATOR_NOT_AVAILABLE);
    }

    #[test]
    fn led_shards_are_the_partitions_led_here() {
        let image = image();
        let topic = "__consumer_offsets";
        assert_eq!(led_shards(&image, 1, topic), BTreeSet::from([0]));
        assert_eq!(led_shards(&image, 2, topic), BTreeSet::from([1]));
        assert_eq!(led_shards(&image, 3, topic), BTreeSet::new());
        assert_eq!(led_shards(&image, 1, "none"), BTreeSet::new());
        let led = led_shards(&image, 1, topic);
        assert!(is_led(&led, 3, &key_for(0)));
        assert!(!is_led(&led, 3, &key_for(1)));
        assert!(!is_led(&led, 3, &key_for(2)));
    }

    #[tokio::test]
    async fn the_leadership_watch_wakes_only_when_the_led_shards_change() {
        // Created while watched: its shards are new, nothing to load, no wake-up.
        let (tx, rx) =
            tokio::sync::watch::channel(std::sync::Arc::new(MetadataImage::empty("c", 1)));
        let mut watch = LeadershipWatch::new(rx, 1, "__consumer_offsets");
        tx.send_replace(std::sync::Arc::new(image()));
        let quiet = tokio::time::timeout(std::time::Duration::from_millis(50), watch.changed());
        assert!(
            quiet.await.is_err(),
            "a new topic's shards are not a failover"
        );
        let t = Uuid::from_u128(7);
        let moved = |p: i32, leader: i32, epoch: i32| {
            MetadataRecord::Partition(PartitionRecord {
                partition_id: p,
                topic_id: t,
                replicas: vec![1, 2],
                isr: vec![1, 2],
                removing_replicas: vec![],
                adding_replicas: vec![],
                leader,
                leader_epoch: epoch,
                partition_epoch: epoch,
                elr: vec![],
                last_known_elr: vec![],
            })
        };
        // Partition 1 changes epoch but stays with broker 2: no wake-up for broker 1 ...
        let same = image().apply(&[moved(1, 2, 1)]).0;
        tx.send_replace(std::sync::Arc::new(same.clone()));
        let quiet = tokio::time::timeout(std::time::Duration::from_millis(50), watch.changed());
        assert!(quiet.await.is_err(), "the led set did not change");
        // ... then broker 1 takes partition 1 over and gives partition 0 away.
        let failover = same.apply(&[moved(1, 1, 2), moved(0, 2, 1)]).0;
        tx.send_replace(std::sync::Arc::new(failover.clone()));
        let (gained, lost) = watch.changed().await;
        assert_eq!(
            (gained, lost),
            (BTreeMap::from([(1, 2)]), BTreeSet::from([0]))
        );
        // Partition 1 went elsewhere and came back between two images the watch saw: led at a
        // new epoch, it is lost and gained (another coordinator may have written it).
        let back = failover.apply(&[moved(1, 1, 4)]).0;
        tx.send_replace(std::sync::Arc::new(back));
        let (gained, lost) = watch.changed().await;
        assert_eq!(
            (gained, lost),
            (BTreeMap::from([(1, 4)]), BTreeSet::from([1]))
        );
    }
}
