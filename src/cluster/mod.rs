//! The cluster's metadata as this single node knows it: identity (cluster id, node id, advertised
//! endpoint), topic naming rules, per-topic configuration, and producer-id allocation.
//!
//! Topics and partitions themselves live in `replica::ReplicaManager`, which owns their logs.

pub mod acl;
pub mod alter;
pub mod assignment;
pub mod broker_config;
pub mod clean_shutdown;
pub mod group_config;
pub mod identity;
pub mod java_regex;
pub mod producer_ids;
pub mod topic_config;

pub use identity::ClusterIdentity;
pub use producer_ids::ProducerIdAllocator;
pub use topic_config::{TopicConfig, TopicConfigError};

/// Kafka's internal topics, written only by their coordinators (`__consumer_offsets`,
/// `__transaction_state`); Metadata reports them as internal.
pub fn is_internal_topic(name: &str) -> bool {
    name == "__consumer_offsets" || name == "__transaction_state" || name == "__share_group_state"
}

/// Kafka's rule for topic names: 1..=249 of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("Topic name is illegal, it can't be empty".into());
    }
    if name == "." || name == ".." {
        return Err("Topic name cannot be \".\" or \"..\"".into());
    }
    if name.len() > 249 {
        return Err(format!(
            "Topic name is illegal, it can't be longer than 249 characters, topic name: {name}"
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return Err(format!(
            "Topic name is invalid: '{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
        ));
    }
    Ok(())
}

/// Kafka's collision rule: `.` and `_` are the same character in metric names, so two topics whose
/// names differ only there may not both exist. The name both would have (`Topic.unifyCollisionChars`).
pub fn unify_collision_chars(name: &str) -> String {
    name.replace('.', "_")
}

/// The message Kafka answers (INVALID_TOPIC_EXCEPTION) for a topic colliding with `existing`.
pub fn collision_message(name: &str, existing: &str) -> String {
    format!("Topic '{name}' collides with existing topic: {existing}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dots_and_underscores_collide() {
        assert_eq!(unify_collision_chars("a.b_c"), "a_b_c");
        assert_eq!(unify_collision_chars("a-b"), "a-b");
        assert_eq!(
            collision_message("x_y", "x.y"),
            "Topic 'x_y' collides with existing topic: x.y"
        );
    }

    #[test]
    fn topic_names_follow_kafka_rules() {
        assert!(validate_topic_name("orders.v1_x-2").is_ok());
        assert!(validate_topic_name("").is_err());
        assert!(validate_topic_name(".").is_err());
        assert!(validate_topic_name("..").is_err());
        assert!(validate_topic_name("a/b").is_err());
        assert!(validate_topic_name("ünïcode").is_err());
        assert!(validate_topic_name(&"a".repeat(249)).is_ok());
        assert!(validate_topic_name(&"a".repeat(250)).is_err());
    }
}
