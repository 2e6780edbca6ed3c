//! The administrative entries of the differential corpus: topic and partition creation with
//! manual assignments, authorized operations, configs of GROUP and BROKER resources, group
//! listing and deletion, log dirs, reassignments, producer ids and record deletion. Each builds
//! one request and renders the decoded answer; [`crate::corpus::CORPUS`] orders them.

use anyhow::Result;
use kafka_protocol::messages::alter_replica_log_dirs_request::{
    AlterReplicaLogDir, AlterReplicaLogDirTopic,
};
use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_topics_request::{CreatableReplicaAssignment, CreatableTopic};
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, BrokerId, CreatePartitionsRequest, CreateTopicsRequest,
    DeleteGroupsRequest, DeleteRecordsRequest, DescribeClusterRequest, DescribeConfigsRequest,
    DescribeGroupsRequest, GroupId, IncrementalAlterConfigsRequest, InitProducerIdRequest,
    ListConfigResourcesRequest, ListGroupsRequest, ListPartitionReassignmentsRequest,
};
use kafka_protocol::protocol::StrBytes;
use protocol_tests::{metadata_request, topic_name, Client};

use crate::corpus::{GROUP, TOPIC};

/// A topic created with an explicit replica assignment.
const MANUAL_TOPIC: &str = "diff-manual";
/// A broker id neither broker has (both are node 1).
const UNKNOWN_BROKER: i32 = 7;
/// A GROUP config Kafka 4.1 has (KIP-848), and a dynamic broker config Sluice stores unused.
const GROUP_KEY: &str = "consumer.session.timeout.ms";
const BROKER_KEY: &str = "sasl.kerberos.min.time.before.relogin";
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;

#[derive(Clone, Copy)]
pub enum AdminCase {
    DescribeConfigsTopic,
    CreateTopicManual,
    CreateTopicUnknownBroker,
    CreatePartitionsManual,
    CreatePartitionsUnknownBroker,
    CreatePartitionsPlain,
    MetadataManual,
    MetadataAuthorizedOps,
    DescribeClusterAuthorizedOps,
    DescribeGroupsAuthorizedOps,
    DescribeGroupsUnknown,
    ListGroups,
    DescribeConfigsGroup,
    AlterConfigsGroup,
    DescribeConfigsGroupKey,
    AlterConfigsBrokerUnused,
    DescribeConfigsBrokerUnused,
    ListConfigResources,
    AlterReplicaLogDirs,
    ListPartitionReassignments,
    InitProducerId,
    DeleteGroupsUnknown,
    DeleteRecords,
    DeleteGroups,
}

fn render<T: std::fmt::Debug>(r: T) -> String {
    format!("{r:#?}")
}

fn s(v: &'static str) -> StrBytes {
    StrBytes::from_static_str(v)
}

fn describe_configs(
    resource_type: i8,
    name: &'static str,
    keys: &[&'static str],
) -> DescribeConfigsRequest {
    let keys = (!keys.is_empty()).then(|| keys.iter().map(|k| s(k)).collect());
    DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
        .with_resource_type(resource_type)
        .with_resource_name(s(name))
        .with_configuration_keys(keys)])
}

fn alter_config(
    resource_type: i8,
    name: &'static str,
    key: &'static str,
    value: &'static str,
) -> IncrementalAlterConfigsRequest {
    IncrementalAlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
        .with_resource_type(resource_type)
        .with_resource_name(s(name))
        .with_configs(vec![AlterableConfig::default()
            .with_name(s(key))
            .with_config_operation(0)
            .with_value(Some(s(value)))])])
}

/// CreateTopics with `partitions` partitions, each assigned to `broker`.
fn create_manual(name: &str, partitions: i32, broker: i32) -> CreateTopicsRequest {
    let assignments = (0..partitions)
        .map(|p| {
            CreatableReplicaAssignment::default()
                .with_partition_index(p)
                .with_broker_ids(vec![BrokerId(broker)])
        })
        .collect();
    CreateTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(topic_name(name))
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_assignments(assignments)])
}

/// CreatePartitions of [`MANUAL_TOPIC`] to `count`, the new partitions on `brokers` (or unassigned).
fn create_partitions(count: i32, brokers: Option<&[i32]>) -> CreatePartitionsRequest {
    let assignments = brokers.map(|b| {
        b.iter()
            .map(|&id| CreatePartitionsAssignment::default().with_broker_ids(vec![BrokerId(id)]))
            .collect()
    });
    CreatePartitionsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(topic_name(MANUAL_TOPIC))
            .with_count(count)
            .with_assignments(assignments)])
}

fn groups(names: &[&'static str]) -> Vec<GroupId> {
    names.iter().map(|g| GroupId(s(g))).collect()
}

/// Sends `case`'s request and renders the decoded answer.
pub async fn exchange(c: &mut Client, case: AdminCase) -> Result<String> {
    use AdminCase as A;
    Ok(match case {
        A::DescribeConfigsTopic => {
            let r = describe_configs(2, TOPIC, &["retention.ms", "cleanup.policy"]);
            render(c.call(4, &r).await?)
        }
        A::CreateTopicManual => render(c.call(7, &create_manual(MANUAL_TOPIC, 2, 1)).await?),
        A::CreateTopicUnknownBroker => render(
            c.call(7, &create_manual("diff-manual-bad", 1, UNKNOWN_BROKER))
                .await?,
        ),
        A::CreatePartitionsManual => render(c.call(3, &create_partitions(3, Some(&[1]))).await?),
        A::CreatePartitionsUnknownBroker => render(
            c.call(3, &create_partitions(4, Some(&[UNKNOWN_BROKER])))
                .await?,
        ),
        A::CreatePartitionsPlain => render(c.call(3, &create_partitions(4, None)).await?),
        A::MetadataManual => {
            // After CreatePartitions Kafka's broker applies the new partitions to its metadata
            // cache a moment after answering: ask until two answers 200 ms apart agree (3 s)
            let mut last = String::new();
            for _ in 0..15 {
                let mut r = c
                    .call(12, &metadata_request(&[MANUAL_TOPIC], false))
                    .await?;
                // Kafka lists a topic's partitions in its metadata image's hash order
                for t in &mut r.topics {
                    t.partitions.sort_by_key(|p| p.partition_index);
                }
                let now = render(r);
                if now == last {
                    break;
                }
                last = now;
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            last
        }
        A::MetadataAuthorizedOps => {
            let r =
                metadata_request(&[TOPIC], false).with_include_topic_authorized_operations(true);
            render(c.call(12, &r).await?)
        }
        A::DescribeClusterAuthorizedOps => {
            let r =
                DescribeClusterRequest::default().with_include_cluster_authorized_operations(true);
            render(c.call(1, &r).await?)
        }
        A::DescribeGroupsAuthorizedOps => {
            let r = DescribeGroupsRequest::default()
                .with_groups(groups(&[GROUP]))
                .with_include_authorized_operations(true);
            render(c.call(5, &r).await?)
        }
        A::DescribeGroupsUnknown => {
            let r = DescribeGroupsRequest::default().with_groups(groups(&["diff-nope-g"]));
            render(c.call(5, &r).await?)
        }
        A::ListGroups => render(c.call(5, &ListGroupsRequest::default()).await?),
        A::DescribeConfigsGroup => {
            let mut r = c.call(4, &describe_configs(32, GROUP, &[])).await?;
            // Kafka lists a group's configs in its config map's hash order
            for res in &mut r.results {
                res.configs.sort_by(|a, b| a.name.cmp(&b.name));
            }
            render(r)
        }
        A::AlterConfigsGroup => render(
            c.call(1, &alter_config(32, GROUP, GROUP_KEY, "50000"))
                .await?,
        ),
        A::DescribeConfigsGroupKey => render(
            c.call(4, &describe_configs(32, GROUP, &[GROUP_KEY]))
                .await?,
        ),
        A::AlterConfigsBrokerUnused => render(
            c.call(1, &alter_config(4, "1", BROKER_KEY, "120000"))
                .await?,
        ),
        A::DescribeConfigsBrokerUnused => {
            // Kafka applies a dynamic broker config when its metadata log reaches the broker (it
            // describes the source first, the value a moment later): ask again until it
            // describes the altered value as DYNAMIC_BROKER_CONFIG (2), for up to 5 s
            let r = describe_configs(4, "1", &[BROKER_KEY]);
            let mut answer = c.call(4, &r).await?;
            for _ in 0..50 {
                let source = answer
                    .results
                    .first()
                    .and_then(|r| r.configs.first())
                    .map(|c| c.config_source);
                let value = answer
                    .results
                    .first()
                    .and_then(|r| r.configs.first())
                    .and_then(|c| c.value.as_ref())
                    .map(|v| v.to_string());
                if source == Some(2) && value.as_deref() == Some("120000") {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                answer = c.call(4, &r).await?;
            }
            render(answer)
        }
        A::ListConfigResources => {
            let r = ListConfigResourcesRequest::default().with_resource_types(vec![32, 16]);
            render(c.call(1, &r).await?)
        }
        A::AlterReplicaLogDirs => {
            let r =
                AlterReplicaLogDirsRequest::default().with_dirs(vec![AlterReplicaLogDir::default(
                )
                .with_path(s("/nonexistent-differential-dir"))
                .with_topics(vec![AlterReplicaLogDirTopic::default()
                    .with_name(topic_name(TOPIC))
                    .with_partitions(vec![0])])]);
            render(c.call(2, &r).await?)
        }
        A::ListPartitionReassignments => {
            let r = ListPartitionReassignmentsRequest::default()
                .with_timeout_ms(5000)
                .with_topics(None);
            render(c.call(0, &r).await?)
        }
        A::InitProducerId => {
            let r = InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000);
            // Kafka answers COORDINATOR_LOAD_IN_PROGRESS until its first block of producer ids
            // arrives from the controller; clients retry, so does the corpus
            for _ in 0..100 {
                let answer = c.call(4, &r).await?;
                if answer.error_code != COORDINATOR_LOAD_IN_PROGRESS {
                    return Ok(render(answer));
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            anyhow::bail!("InitProducerId: COORDINATOR_LOAD_IN_PROGRESS for 10 s")
        }
        A::DeleteGroupsUnknown => {
            let r = DeleteGroupsRequest::default().with_groups_names(groups(&["diff-nope-g"]));
            render(c.call(2, &r).await?)
        }
        A::DeleteRecords => {
            let r = DeleteRecordsRequest::default()
                .with_timeout_ms(5000)
                .with_topics(vec![DeleteRecordsTopic::default()
                    .with_name(topic_name(TOPIC))
                    .with_partitions(vec![DeleteRecordsPartition::default()
                        .with_partition_index(0)
                        .with_offset(1)])]);
            render(c.call(2, &r).await?)
        }
        A::DeleteGroups => {
            let r = DeleteGroupsRequest::default().with_groups_names(groups(&[GROUP]));
            render(c.call(2, &r).await?)
        }
    })
}
