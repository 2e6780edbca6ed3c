//! DescribeCluster (60), DescribeTopicPartitions (75, what `kafka-topics.sh --describe` uses in
//! 4.x) and DescribeLogDirs (35): read-only views of the cluster (DescribeCluster and
//! DescribeTopicPartitions from the metadata image; DescribeLogDirs from the hosted logs).

use std::sync::Arc;

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeClusterRequest, DescribeClusterResponse, DescribeLogDirsRequest,
    DescribeLogDirsResponse, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::{error, RequestContext};
use crate::broker::Broker;
use crate::cluster::acl::{authorized, CLUSTER_OPERATIONS, TOPIC_OPERATIONS};
use crate::metadata::{MetadataImage, TopicImage};
use crate::replica::manager::Topic;

/// Kafka's `max.request.partition.size.limit` default.
const MAX_PARTITIONS_PER_RESPONSE: i32 = 2000;

const ENDPOINT_BROKER: i8 = 1;
const ENDPOINT_CONTROLLER: i8 = 2;

pub fn describe_cluster(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    request: DescribeClusterRequest,
) -> DescribeClusterResponse {
    let v = ctx.api_version;
    let mut r = DescribeClusterResponse::default();
    if v >= 1 {
        r.endpoint_type = ENDPOINT_BROKER;
    }
    let endpoint = if v >= 1 {
        request.endpoint_type
    } else {
        ENDPOINT_BROKER
    };
    if endpoint != ENDPOINT_BROKER {
        let (code, message) = if endpoint == ENDPOINT_CONTROLLER {
            (
                error::MISMATCHED_ENDPOINT_TYPE,
                "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER".to_string(),
            )
        } else {
            (
                error::UNSUPPORTED_ENDPOINT_TYPE,
                format!("Unsupported endpoint type {endpoint}"),
            )
        };
        return r
            .with_error_code(code)
            .with_error_message(Some(StrBytes::from_string(message)));
    }
    let image = broker.image();
    let listener = super::image_view::listener_name(broker, ctx, &image);
    r.cluster_id = StrBytes::from_string(image.cluster_id.clone());
    r.controller_id = BrokerId(image.controller_id);
    r.brokers = image
        .live_brokers()
        .filter_map(|b| {
            let (host, port) = super::image_view::endpoint(b, &listener)?;
            Some(
                DescribeClusterBroker::default()
                    .with_broker_id(BrokerId(b.id))
                    .with_host(StrBytes::from_string(host))
                    .with_port(port)
                    .with_rack(b.rack.clone().map(StrBytes::from_string)),
            )
        })
        .collect();
    r.cluster_authorized_operations = authorized(
        request.include_cluster_authorized_operations,
        CLUSTER_OPERATIONS,
    );
    r
}

fn describe_partitions(
    image: &MetadataImage,
    topic: &TopicImage,
    from: usize,
    limit: usize,
) -> Vec<DescribeTopicPartitionsResponsePartition> {
    let ids = |v: &[i32]| v.iter().map(|&b| BrokerId(b)).collect::<Vec<_>>();
    topic
        .partitions
        .iter()
        .skip(from)
        .take(limit)
        .map(|(&index, p)| {
            DescribeTopicPartitionsResponsePartition::default()
                .with_error_code(error::NONE)
                .with_partition_index(index)
                .with_leader_id(BrokerId(p.leader))
                .with_leader_epoch(p.leader_epoch)
                .with_replica_nodes(ids(&p.replicas))
                .with_isr_nodes(ids(&p.isr))
                .with_eligible_leader_replicas(Some(ids(&p.elr)))
                .with_last_known_elr(Some(ids(&p.last_known_elr)))
                .with_offline_replicas(ids(&super::image_view::offline_replicas(image, p)))
        })
        .collect()
}

/// Topics sorted by name (all when none are named), from the cursor on, at most
/// `response_partition_limit` partitions in all; `next_cursor` says where to continue.
pub fn describe_topic_partitions(
    broker: &Arc<Broker>,
    request: DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let image = broker.image();
    let mut names: Vec<String> = if request.topics.is_empty() {
        image.topics().map(|t| t.name.clone()).collect()
    } else {
        request
            .topics
            .iter()
            .map(|t| t.name.as_str().to_string())
            .collect()
    };
    names.sort();
    names.dedup();
    let (cursor_topic, cursor_partition) = request
        .cursor
        .as_ref()
        .map(|c| (c.topic_name.as_str().to_string(), c.partition_index.max(0)))
        .unwrap_or_default();
    if !cursor_topic.is_empty() {
        names.retain(|n| *n >= cursor_topic);
    }
    let limit = if request.response_partition_limit <= 0 {
        MAX_PARTITIONS_PER_RESPONSE
    } else {
        request
            .response_partition_limit
            .min(MAX_PARTITIONS_PER_RESPONSE)
    };
    let mut budget = limit as usize;
    let mut topics = Vec::new();
    let mut next_cursor = None;
    for name in names {
        let topic_name = TopicName(StrBytes::from_string(name.clone()));
        let Some(topic) = image.topic(&name) else {
            topics.push(
                DescribeTopicPartitionsResponseTopic::default()
                    .with_error_code(error::UNKNOWN_TOPIC_OR_PARTITION)
                    .with_name(Some(topic_name))
                    // Kafka reports the operations for unknown topics too (no include flag here).
                    .with_topic_authorized_operations(TOPIC_OPERATIONS),
            );
            continue;
        };
        let from = if name == cursor_topic {
            cursor_partition as usize
        } else {
            0
        };
        let total = topic.partitions.len();
        if budget == 0 {
            next_cursor = Some(
                Cursor::default()
                    .with_topic_name(topic_name)
                    .with_partition_index(from as i32),
            );
            break;
        }
        let partitions = describe_partitions(&image, topic, from, budget);
        budget -= partitions.len();
        let end = from + partitions.len();
        topics.push(
            DescribeTopicPartitionsResponseTopic::default()
                .with_error_code(error::NONE)
                .with_name(Some(topic_name.clone()))
                .with_topic_id(topic.id)
                .with_is_internal(crate::cluster::is_internal_topic(&topic.name))
                .with_partitions(partitions)
                .with_topic_authorized_operations(TOPIC_OPERATIONS),
        );
        if end < total {
            next_cursor = Some(
                Cursor::default()
                    .with_topic_name(topic_name)
                    .with_partition_index(end as i32),
            );
            break;
        }
    }
    DescribeTopicPartitionsResponse::default()
        .with_topics(topics)
        .with_next_cursor(next_cursor)
}

/// (total, usable) bytes of the filesystem holding `path`, or (-1, -1) if unknown.
fn disk_space(path: &std::path::Path) -> (i64, i64) {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return (-1, -1);
    };
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `st` a writable statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return (-1, -1);
    }
    let frag = st.f_frsize as i64;
    (st.f_blocks as i64 * frag, st.f_bavail as i64 * frag)
}

/// One log directory: every hosted partition (or the named ones) with its size in bytes.
pub fn describe_log_dirs(
    broker: &Arc<Broker>,
    ctx: &RequestContext,
    request: DescribeLogDirsRequest,
) -> DescribeLogDirsResponse {
    let v = ctx.api_version;
    let wanted: Vec<(Arc<Topic>, Option<Vec<i32>>)> = match request.topics {
        None => broker
            .replicas
            .topics()
            .into_iter()
            .map(|t| (t, None))
            .collect(),
        Some(list) => list
            .into_iter()
            .filter_map(|t| {
                broker
                    .replicas
                    .topic(t.topic.as_str())
                    .map(|topic| (topic, Some(t.partitions)))
            })
            .collect(),
    };
    let topics = wanted
        .into_iter()
        .filter_map(|(topic, parts)| {
            let partitions: Vec<_> = topic
                .partitions
                .values()
                .filter(|p| parts.as_ref().is_none_or(|w| w.contains(&p.index)))
                .map(|p| {
                    DescribeLogDirsPartition::default()
                        .with_partition_index(p.index)
                        .with_partition_size(p.size_bytes() as i64)
                        .with_offset_lag(0)
                        .with_is_future_key(false)
                })
                .collect();
            (!partitions.is_empty()).then(|| {
                DescribeLogDirsTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.name.clone())))
                    .with_partitions(partitions)
            })
        })
        .collect();
    let dir = std::fs::canonicalize(&broker.config.data_dir)
        .unwrap_or_else(|_| broker.config.data_dir.clone());
    let mut result = DescribeLogDirsResult::default()
        .with_error_code(error::NONE)
        .with_log_dir(StrBytes::from_string(dir.display().to_string()))
        .with_topics(topics);
    if v >= 4 {
        let (total, usable) = disk_space(&dir);
        result.total_bytes = total;
        result.usable_bytes = usable;
    }
    let mut response = DescribeLogDirsResponse::default().with_results(vec![result]);
    if v >= 3 {
        response.error_code = error::NONE;
    }
    response
}
