//! Kafka's `simple` share-group assignor (KIP-932), as a pure function.
//!
//! Rules, per subscribed topic with `n` partitions and the `m` members subscribed to it (members
//! sorted by member id, so the result is deterministic):
//! - `m <= n`: every partition goes to exactly one member, round robin; members get `n / m` or
//!   `n / m + 1` partitions of the topic. The round robin continues across topics, so the
//!   remainders of several topics land on different members.
//! - `m > n`: every member gets exactly one partition and a partition is shared by
//!   `m / n` or `m / n + 1` members (share groups let several members fetch one partition).
//!
//! Kafka's implementation also keeps members on partitions they already have where the balance
//! allows; this one recomputes from scratch (a moved partition only costs a share-partition
//! hand-over, records stay acquired by their holder until acknowledged or timed out).

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

/// A member's assignment: partitions by topic id.
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// What the assignor knows of a subscribed topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicPartitions {
    pub topic_id: Uuid,
    pub partitions: i32,
}

/// Assigns `topics` (by name; topics missing from the map are skipped) to the members, given
/// each member's subscribed topic names. Every member gets an entry, possibly empty.
pub fn assign(
    subscriptions: &BTreeMap<String, BTreeSet<String>>,
    topics: &BTreeMap<String, TopicPartitions>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = subscriptions
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect();
    let mut cursor = 0usize;
    for (name, topic) in topics {
        let members: Vec<&String> = subscriptions
            .iter()
            .filter(|(_, subs)| subs.contains(name))
            .map(|(m, _)| m)
            .collect();
        let n = topic.partitions.max(0) as usize;
        if members.is_empty() || n == 0 {
            continue;
        }
        let m = members.len();
        let mut give = |member: &String, partition: usize| {
            if let Some(a) = out.get_mut(member) {
                a.entry(topic.topic_id)
                    .or_default()
                    .insert(partition as i32);
            }
        };
        if m <= n {
            for p in 0..n {
                give(members[(cursor + p) % m], p);
            }
            cursor = (cursor + n) % m.max(1);
        } else {
            for (i, member) in members.iter().enumerate() {
                give(member, i % n);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn topic(i: u8, partitions: i32) -> TopicPartitions {
        TopicPartitions {
            topic_id: Uuid::from_bytes([i; 16]),
            partitions,
        }
    }

    #[test]
    fn more_members_than_partitions_share_partitions() {
        let subs: BTreeMap<String, BTreeSet<String>> = (0..5)
            .map(|i| (format!("m{i}"), BTreeSet::from(["t".to_string()])))
            .collect();
        let topics = BTreeMap::from([("t".to_string(), topic(1, 2))]);
        let a = assign(&subs, &topics);
        let id = topic(1, 2).topic_id;
        let owners = |p: i32| {
            a.values()
                .filter(|x| x.get(&id).is_some_and(|s| s.contains(&p)))
                .count()
        };
        assert_eq!((owners(0), owners(1)), (3, 2));
        assert!(a.values().all(|x| x[&id].len() == 1));
    }

    #[test]
    fn unsubscribed_and_unknown_topics_are_not_assigned() {
        let subs = BTreeMap::from([
            (
                "a".to_string(),
                BTreeSet::from(["t".to_string(), "missing".to_string()]),
            ),
            ("b".to_string(), BTreeSet::from(["u".to_string()])),
        ]);
        let topics = BTreeMap::from([
            ("t".to_string(), topic(1, 3)),
            ("u".to_string(), topic(2, 1)),
        ]);
        let a = assign(&subs, &topics);
        assert_eq!(
            a["a"],
            BTreeMap::from([(topic(1, 0).topic_id, BTreeSet::from([0, 1, 2]))])
        );
        assert_eq!(
            a["b"],
            BTreeMap::from([(topic(2, 0).topic_id, BTreeSet::from([0]))])
        );
    }

    proptest! {
        #[test]
        fn every_partition_assigned_and_spread_evenly(
            members in 1usize..12,
            partitions in proptest::collection::vec(0i32..10, 1..4),
            mask in proptest::collection::vec(any::<u8>(), 12),
        ) {
            let names: Vec<String> = (0..partitions.len()).map(|i| format!("t{i}")).collect();
            let subs: BTreeMap<String, BTreeSet<String>> = (0..members)
                .map(|m| {
                    let s = names.iter().enumerate().filter(|(i, _)| mask[m] & (1 << i) != 0).map(|(_, n)| n.clone()).collect();
                    (format!("member-{m}"), s)
                })
                .collect();
            let topics: BTreeMap<String, TopicPartitions> = names.iter().enumerate()
                .map(|(i, n)| (n.clone(), topic(i as u8, partitions[i]))).collect();
            let a = assign(&subs, &topics);
            prop_assert_eq!(a.len(), members);
            for (name, t) in &topics {
                let subscribed: Vec<&String> = subs.iter().filter(|(_, s)| s.contains(name)).map(|(m, _)| m).collect();
                for (member, asg) in &a {
                    if !subscribed.contains(&member) {
                        prop_assert!(!asg.contains_key(&t.topic_id));
                    }
                }
                if subscribed.is_empty() || t.partitions == 0 { continue; }
                let counts: Vec<usize> = subscribed.iter().map(|m| a[*m].get(&t.topic_id).map_or(0, |s| s.len())).collect();
                let owners: Vec<usize> = (0..t.partitions)
                    .map(|p| subscribed.iter().filter(|m| a[**m].get(&t.topic_id).is_some_and(|s| s.contains(&p))).count())
                    .collect();
                prop_assert!(owners.iter().all(|o| *o >= 1), "partition without member: {:?}", owners);
                let (n, m) = (t.partitions as usize, subscribed.len());
                if m <= n {
                    prop_assert!(owners.iter().all(|o| *o == 1));
                    prop_assert!(counts.iter().all(|c| *c == n / m || *c == n / m + 1), "{:?}", counts);
                } else {
                    prop_assert!(counts.iter().all(|c| *c == 1));
                    prop_assert!(owners.iter().all(|o| *o == m / n || *o == m / n + 1), "{:?}", owners);
                }
            }
        }
    }
}
