//! Kafka's ACL operations and what each resource type supports (`AclOperation` codes and
//! `AclEntry.supportedOperations` of Kafka 4.1), as the `*_authorized_operations` bit fields of
//! Metadata, DescribeCluster, DescribeTopicPartitions, DescribeGroups and ConsumerGroupDescribe.
//!
//! Sluice has no authorizer, so, as in Kafka without one, every supported operation is allowed.
//! Pure constants; no I/O.

/// `AclOperation` codes (Kafka's `AclOperation.code()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum AclOperation {
    Read = 3,
    Write = 4,
    Create = 5,
    Delete = 6,
    Alter = 7,
    Describe = 8,
    ClusterAction = 9,
    DescribeConfigs = 10,
    AlterConfigs = 11,
    IdempotentWrite = 12,
}

use AclOperation as Op;

/// Kafka's `Utils.to32BitField`: bit `code` set for every operation.
pub const fn to_32bit_field(ops: &[AclOperation]) -> i32 {
    let mut field = 0i32;
    let mut i = 0;
    while i < ops.len() {
        field |= 1 << (ops[i] as u8);
        i += 1;
    }
    field
}

/// Operations of a TOPIC resource.
pub const TOPIC_OPERATIONS: i32 = to_32bit_field(&[
    Op::Read,
    Op::Write,
    Op::Create,
    Op::Describe,
    Op::Delete,
    Op::Alter,
    Op::DescribeConfigs,
    Op::AlterConfigs,
]);

/// Operations of a GROUP resource (Kafka 4.x added the config operations for group configs).
pub const GROUP_OPERATIONS: i32 = to_32bit_field(&[
    Op::Read,
    Op::Describe,
    Op::Delete,
    Op::DescribeConfigs,
    Op::AlterConfigs,
]);

/// Operations of the CLUSTER resource.
pub const CLUSTER_OPERATIONS: i32 = to_32bit_field(&[
    Op::Create,
    Op::ClusterAction,
    Op::DescribeConfigs,
    Op::AlterConfigs,
    Op::IdempotentWrite,
    Op::Alter,
    Op::Describe,
]);

/// What a response carries when the client did not ask for authorized operations.
pub const OPERATIONS_OMITTED: i32 = i32::MIN;

/// The field for a request that asked (`include`) or not.
pub const fn authorized(include: bool, supported: i32) -> i32 {
    if include {
        supported
    } else {
        OPERATIONS_OMITTED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_fields_match_kafka_4_1_answers() {
        // Values read from Apache Kafka 4.1.2 without an authorizer.
        assert_eq!(TOPIC_OPERATIONS, 3576);
        assert_eq!(GROUP_OPERATIONS, 3400);
        assert_eq!(CLUSTER_OPERATIONS, 8096);
        assert_eq!(TOPIC_OPERATIONS.count_ones(), 8);
        assert_eq!(CLUSTER_OPERATIONS.count_ones(), 7);
        assert_eq!(authorized(false, TOPIC_OPERATIONS), -2147483648);
    }
}
