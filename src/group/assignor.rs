//! Server-side assignors of KIP-848 consumer groups: `uniform` (Kafka's default: balanced and
//! sticky) and `range` (per topic, contiguous ranges over members sorted by id).
//!
//! Pure functions of the members' subscriptions, their previous target assignment and the topic
//! metadata; no I/O.

use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Partitions by topic name.
pub type Assignment = BTreeMap<String, BTreeSet<i32>>;

/// What an assignor knows about one member.
pub struct MemberSpec<'a> {
    pub member_id: &'a str,
    pub subscribed: &'a BTreeSet<String>,
    /// The member's previous target assignment (stickiness).
    pub previous: &'a Assignment,
}

/// Assignor names clients may ask for (`server_assignor`); the first is the default.
pub const ASSIGNORS: &[&str] = &["uniform", "range"];

/// Runs the assignor `name` (`uniform` unless it is `range`). `partitions` maps every existing
/// topic to its partition count. Every member gets an entry, possibly empty.
pub fn assign(
    name: &str,
    members: &[MemberSpec<'_>],
    partitions: &BTreeMap<String, i32>,
) -> BTreeMap<String, Assignment> {
    if name == "range" {
        range(members, partitions)
    } else {
        uniform(members, partitions)
    }
}

/// Balanced (member counts differ by at most one among members that could take a partition) and
/// sticky: previous owners keep their partitions unless balance needs them to move.
fn uniform(
    members: &[MemberSpec<'_>],
    partitions: &BTreeMap<String, i32>,
) -> BTreeMap<String, Assignment> {
    let mut owner: BTreeMap<(&str, i32), usize> = BTreeMap::new();
    let mut count = vec![0usize; members.len()];
    let subscribed = |m: usize, topic: &str| members[m].subscribed.contains(topic);
    let all: Vec<(&str, i32)> = partitions
        .iter()
        .filter(|(t, _)| members.iter().any(|m| m.subscribed.contains(t.as_str())))
        .flat_map(|(t, n)| (0..*n).map(move |p| (t.as_str(), p)))
        .collect();
    // Sticky pass: keep previous targets that are still valid.
    for (i, m) in members.iter().enumerate() {
        for (topic, ps) in m.previous {
            let Some(n) = partitions.get(topic) else {
                continue;
            };
            if !subscribed(i, topic) {
                continue;
            }
            for &p in ps {
                if p < *n && !owner.contains_key(&(topic.as_str(), p)) {
                    owner.insert((topic.as_str(), p), i);
                    count[i] += 1;
                }
            }
        }
    }
    // Unowned partitions go to the least loaded eligible member.
    for &tp in &all {
        if owner.contains_key(&tp) {
            continue;
        }
        let best = (0..members.len())
            .filter(|&m| subscribed(m, tp.0))
            .min_by_key(|&m| (count[m], m));
        if let Some(m) = best {
            owner.insert(tp, m);
            count[m] += 1;
        }
    }
    // Balance: move a partition from a member holding 2+ more than an eligible member. Each
    // move lowers the sum of squared counts, so this ends.
    loop {
        let mut moved = false;
        for &tp in &all {
            let Some(&from) = owner.get(&tp) else {
                continue;
            };
            let to = (0..members.len())
                .filter(|&m| subscribed(m, tp.0))
                .min_by_key(|&m| (count[m], m));
            if let Some(to) = to {
                if count[from] > count[to] + 1 {
                    owner.insert(tp, to);
                    count[from] -= 1;
                    count[to] += 1;
                    moved = true;
                }
            }
        }
        if !moved {
            break;
        }
    }
    let mut out: BTreeMap<String, Assignment> = members
        .iter()
        .map(|m| (m.member_id.to_string(), Assignment::new()))
        .collect();
    for ((topic, p), m) in owner {
        if let Some(a) = out.get_mut(members[m].member_id) {
            a.entry(topic.to_string()).or_default().insert(p);
        }
    }
    out
}

/// Kafka's range: per topic, the subscribed members sorted by id get contiguous ranges, the
/// first `partitions % members` one partition more.
fn range(
    members: &[MemberSpec<'_>],
    partitions: &BTreeMap<String, i32>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members
        .iter()
        .map(|m| (m.member_id.to_string(), Assignment::new()))
        .collect();
    let mut by_topic: HashMap<&str, Vec<&str>> = HashMap::new();
    for m in members {
        for t in m.subscribed {
            by_topic.entry(t.as_str()).or_default().push(m.member_id);
        }
    }
    for (topic, mut ids) in by_topic {
        let Some(&n) = partitions.get(topic) else {
            continue;
        };
        ids.sort_unstable();
        let per = n as usize / ids.len();
        let extra = n as usize % ids.len();
        let mut next = 0i32;
        for (i, id) in ids.iter().enumerate() {
            let take = per + usize::from(i < extra);
            let ps: BTreeSet<i32> = (next..next + take as i32).collect();
            next += take as i32;
            if !ps.is_empty() {
                if let Some(a) = out.get_mut(*id) {
                    a.insert(topic.to_string(), ps);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subs(t: &[&str]) -> BTreeSet<String> {
        t.iter().map(|s| s.to_string()).collect()
    }

    fn counts(a: &BTreeMap<String, Assignment>) -> Vec<usize> {
        a.values()
            .map(|x| x.values().map(BTreeSet::len).sum())
            .collect()
    }

    #[test]
    fn uniform_balances_and_sticks() {
        let s = subs(&["t"]);
        let empty = Assignment::new();
        let topics = BTreeMap::from([("t".to_string(), 7)]);
        let prev_a: Assignment = BTreeMap::from([("t".to_string(), (0..7).collect())]);
        let members = [
            MemberSpec {
                member_id: "a",
                subscribed: &s,
                previous: &prev_a,
            },
            MemberSpec {
                member_id: "b",
                subscribed: &s,
                previous: &empty,
            },
        ];
        let out = assign("uniform", &members, &topics);
        let mut c = counts(&out);
        c.sort();
        assert_eq!(c, vec![3, 4]);
        // "a" keeps a subset of what it had; the union covers every partition once.
        let all: BTreeSet<i32> = out.values().flat_map(|a| a["t"].iter().copied()).collect();
        assert_eq!(all.len(), 7);
        assert_eq!(out["a"]["t"].len() + out["b"]["t"].len(), 7);
    }

    #[test]
    fn uniform_respects_heterogeneous_subscriptions() {
        let (s1, s2) = (subs(&["x"]), subs(&["x", "y"]));
        let empty = Assignment::new();
        let topics = BTreeMap::from([("x".to_string(), 2), ("y".to_string(), 2)]);
        let members = [
            MemberSpec {
                member_id: "a",
                subscribed: &s1,
                previous: &empty,
            },
            MemberSpec {
                member_id: "b",
                subscribed: &s2,
                previous: &empty,
            },
        ];
        let out = assign("uniform", &members, &topics);
        assert!(!out["a"].contains_key("y"));
        assert_eq!(out["b"]["y"].len(), 2);
        assert_eq!(counts(&out), vec![2, 2]);
    }

    #[test]
    fn range_gives_contiguous_ranges_by_member_id() {
        let s = subs(&["t"]);
        let empty = Assignment::new();
        let topics = BTreeMap::from([("t".to_string(), 5)]);
        let members = [
            MemberSpec {
                member_id: "b",
                subscribed: &s,
                previous: &empty,
            },
            MemberSpec {
                member_id: "a",
                subscribed: &s,
                previous: &empty,
            },
        ];
        let out = assign("range", &members, &topics);
        assert_eq!(out["a"]["t"], (0..3).collect());
        assert_eq!(out["b"]["t"], (3..5).collect());
    }
}
