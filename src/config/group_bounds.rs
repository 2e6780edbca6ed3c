//! Kafka's cross-key checks of the group coordinator's bounds, run once every key is applied
//! (Kafka's `GroupCoordinatorConfig` and `ShareGroupConfig` constructors refuse to start with
//! them). For each of the consumer (KIP-848), share (KIP-932) and streams (KIP-1071) group
//! protocols, `group.<p>.{heartbeat.interval,session.timeout}.ms` must lie within their
//! `min.`/`max.` keys and the heartbeat interval must be below the session timeout; share groups'
//! `group.share.record.lock.duration.ms` must lie within its own `min.`/`max.` keys. The messages
//! are Kafka's.

use std::collections::BTreeMap;

use super::{key_err, known_keys, ConfigError};

/// The effective integer value of a Kafka key: as given, else Kafka's default.
fn value(explicit: &BTreeMap<String, String>, key: &str) -> Option<i64> {
    explicit
        .get(key)
        .map(String::as_str)
        .or_else(|| known_keys::lookup(key).map(|k| k.default))
        .and_then(|v| v.trim().parse().ok())
}

/// One of Kafka's rules: the first key's value against the second's.
enum Rule {
    /// First >= second.
    AtLeast(String, String),
    /// First <= second.
    AtMost(String, String),
    /// First < second.
    Below(String, String),
}

impl Rule {
    /// The two keys, whether their values satisfy the rule, and Kafka's word for it.
    fn judge(&self, x: i64, y: i64) -> (&str, &str, bool, &'static str) {
        match self {
            Rule::AtLeast(a, b) => (a, b, x >= y, "greater than or equal to"),
            Rule::AtMost(a, b) => (a, b, x <= y, "less than or equal to"),
            Rule::Below(a, b) => (a, b, x < y, "less than"),
        }
    }

    fn keys(&self) -> (&str, &str) {
        match self {
            Rule::AtLeast(a, b) | Rule::AtMost(a, b) | Rule::Below(a, b) => (a, b),
        }
    }
}

fn rules() -> Vec<Rule> {
    let mut rules = Vec::new();
    for p in ["consumer", "share", "streams"] {
        let key = |name: &str| format!("group.{p}.{name}");
        for what in ["heartbeat.interval.ms", "session.timeout.ms"] {
            let (min, max, this) = (
                key(&format!("min.{what}")),
                key(&format!("max.{what}")),
                key(what),
            );
            rules.push(Rule::AtLeast(max.clone(), min.clone()));
            rules.push(Rule::AtLeast(this.clone(), min));
            rules.push(Rule::AtMost(this, max));
        }
        rules.push(Rule::Below(
            key("heartbeat.interval.ms"),
            key("session.timeout.ms"),
        ));
    }
    let lock = |name: &str| format!("group.share.{name}record.lock.duration.ms");
    rules.push(Rule::AtLeast(lock(""), lock("min.")));
    rules.push(Rule::AtLeast(lock("max."), lock("")));
    rules
}

/// The first violated rule per key, as startup errors naming the key.
pub(super) fn check(explicit: &BTreeMap<String, String>) -> Vec<ConfigError> {
    let mut errors = Vec::new();
    let mut reported: Vec<String> = Vec::new();
    for rule in rules() {
        let (first, second) = rule.keys();
        let (Some(x), Some(y)) = (value(explicit, first), value(explicit, second)) else {
            continue;
        };
        let (key, other, ok, relation) = rule.judge(x, y);
        if !ok && !reported.iter().any(|r| r == key) {
            reported.push(key.to_string());
            errors.push(key_err(key, format!("{key} must be {relation} {other}")));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn messages(pairs: &[(&str, &str)]) -> Vec<String> {
        check(&given(pairs))
            .into_iter()
            .map(|e| e.to_string())
            .collect()
    }

    #[test]
    fn kafka_defaults_pass() {
        assert!(check(&BTreeMap::new()).is_empty());
    }

    #[test]
    fn each_bound_is_kafkas_message_on_the_key() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (
                &[("group.share.record.lock.duration.ms", "2000")],
                "group.share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms",
            ),
            (
                &[
                    ("group.share.max.record.lock.duration.ms", "50000"),
                    ("group.share.record.lock.duration.ms", "60000"),
                ],
                "group.share.max.record.lock.duration.ms must be greater than or equal to group.share.record.lock.duration.ms",
            ),
            (
                &[("group.consumer.heartbeat.interval.ms", "1000")],
                "group.consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms",
            ),
            (
                &[("group.consumer.session.timeout.ms", "70000")],
                "group.consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms",
            ),
            (
                &[
                    ("group.share.min.heartbeat.interval.ms", "45000"),
                    ("group.share.max.heartbeat.interval.ms", "60000"),
                    ("group.share.heartbeat.interval.ms", "50000"),
                    ("group.share.session.timeout.ms", "50000"),
                ],
                "group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms",
            ),
            (
                &[("group.streams.max.session.timeout.ms", "10000")],
                "group.streams.max.session.timeout.ms must be greater than or equal to group.streams.min.session.timeout.ms",
            ),
        ];
        for (pairs, want) in cases {
            let got = messages(pairs);
            assert!(
                got.iter().any(|m| m.contains(want)),
                "{pairs:?}: {got:?} lacks {want}"
            );
        }
    }

    #[test]
    fn a_lowered_minimum_allows_a_lower_value() {
        assert!(check(&given(&[
            ("group.share.min.record.lock.duration.ms", "1000"),
            ("group.share.record.lock.duration.ms", "2000"),
            ("group.consumer.min.session.timeout.ms", "6000"),
            ("group.consumer.session.timeout.ms", "6000"),
        ]))
        .is_empty());
    }
}
