//! Topics and partitions (Kafka's ReplicationControlManager): CreateTopics, DeleteTopics,
//! CreatePartitions and ElectLeaders (AlterPartition: `alter_partition.rs`), with Kafka's checks, order of checks and
//! messages. New partitions: replicas from the striped placer (or the request's assignment), ISR
//! = the active replicas, leader = the first of them, epochs 0.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use super::error::{err, ControllerError};
use super::partition_change::{ChangeBuilder, Election};
use super::placement::{place, Rng};
use super::{Controller, Outcome, MAX_RECORDS_PER_USER_OP};
use crate::cluster::assignment::{self, AssignmentError};
use crate::cluster::{collision_message, topic_config, unify_collision_chars, validate_topic_name};
use crate::metadata::records::{ConfigResourceType, MetadataRecord, PartitionRecord};

/// One CreateTopics topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatableTopic {
    pub name: String,
    /// -1: `num.partitions` (must be -1 with `assignments`).
    pub num_partitions: i32,
    /// -1: `default.replication.factor` (must be -1 with `assignments`).
    pub replication_factor: i16,
    /// Manual assignment: (partition index, replicas).
    pub assignments: Vec<(i32, Vec<i32>)>,
    /// Topic config overrides (a null value is refused, as Kafka does).
    pub configs: Vec<(String, Option<String>)>,
}

/// A topic CreateTopics made: what the response reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedTopic {
    pub topic_id: Uuid,
    pub num_partitions: i32,
    pub replication_factor: i16,
}

/// One CreatePartitions topic: grow to `count` partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatePartitionsTopic {
    pub name: String,
    pub count: i32,
    /// One replica list per new partition, or None for placement.
    pub assignments: Option<Vec<Vec<i32>>>,
}

/// A partition named by topic name and index.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

fn duplicate_names<'a>(names: impl Iterator<Item = &'a str>) -> BTreeSet<&'a str> {
    let mut seen = BTreeSet::new();
    let mut dup = BTreeSet::new();
    for n in names {
        if !seen.insert(n) {
            dup.insert(n);
        }
    }
    dup
}

fn assignment_error(e: AssignmentError) -> ControllerError {
    match e {
        AssignmentError::InvalidRequest(m) => err(ResponseError::InvalidRequest, m),
        AssignmentError::InvalidReplicaAssignment(m) => {
            err(ResponseError::InvalidReplicaAssignment, m)
        }
    }
}

fn too_many(n: usize) -> Result<(), ControllerError> {
    if n > MAX_RECORDS_PER_USER_OP {
        return Err(err(
            ResponseError::PolicyViolation,
            format!(
                "Unable to perform excessively large batch operation: {n} partitions exceed {MAX_RECORDS_PER_USER_OP}."
            ),
        ));
    }
    Ok(())
}

impl Controller {
    fn registered_ids(&self) -> Vec<i32> {
        self.state.brokers.keys().copied().collect()
    }

    /// Partition records for `replicas`, numbered from `first`; ISR = active replicas.
    fn new_partitions(
        &self,
        topic_id: Uuid,
        first: i32,
        lists: Vec<Vec<i32>>,
        placed: bool,
        replication_factor: usize,
    ) -> Result<Vec<MetadataRecord>, ControllerError> {
        let mut out = Vec::with_capacity(lists.len());
        for (i, replicas) in lists.into_iter().enumerate() {
            let partition_id = first + i as i32;
            let isr: Vec<i32> = replicas
                .iter()
                .copied()
                .filter(|r| self.state.is_active(*r))
                .collect();
            let Some(&leader) = isr.first() else {
                return Err(err(
                    ResponseError::InvalidReplicationFactor,
                    if placed {
                        format!("Unable to replicate the partition {replication_factor} time(s): All brokers are currently fenced or in controlled shutdown.")
                    } else {
                        format!("All brokers specified in the partition assignment for partition {partition_id} are fenced or in controlled shutdown.")
                    },
                ));
            };
            out.push(MetadataRecord::Partition(PartitionRecord {
                partition_id,
                topic_id,
                replicas,
                isr,
                removing_replicas: vec![],
                adding_replicas: vec![],
                leader,
                leader_epoch: 0,
                partition_epoch: 0,
                elr: vec![],
                last_known_elr: vec![],
            }));
        }
        Ok(out)
    }

    /// CreateTopics. `seed` is the randomness of placement and topic ids. Answers per topic, in
    /// request order.
    pub fn create_topics(
        &self,
        topics: &[CreatableTopic],
        seed: u64,
    ) -> Outcome<Vec<(String, Result<CreatedTopic, ControllerError>)>> {
        let mut rng = Rng::new(seed);
        let dup = duplicate_names(topics.iter().map(|t| t.name.as_str()));
        let mut records = Vec::new();
        let mut answers = Vec::with_capacity(topics.len());
        // Unified names of topics created earlier in this request.
        let mut created: BTreeMap<String, String> = BTreeMap::new();
        for t in topics {
            let result = if dup.contains(t.name.as_str()) {
                Err(err(ResponseError::InvalidRequest, "Duplicate topic name."))
            } else {
                self.create_topic(t, &mut rng, &created)
            };
            if let Ok((_, topic_records)) = &result {
                records.extend(topic_records.iter().cloned());
                created.insert(unify_collision_chars(&t.name), t.name.clone());
            }
            answers.push((t.name.clone(), result.map(|(c, _)| c)));
        }
        Outcome {
            records,
            answer: answers,
        }
    }

    fn create_topic(
        &self,
        t: &CreatableTopic,
        rng: &mut Rng,
        created: &BTreeMap<String, String>,
    ) -> Result<(CreatedTopic, Vec<MetadataRecord>), ControllerError> {
        validate_topic_name(&t.name).map_err(|m| err(ResponseError::InvalidTopicException, m))?;
        if self.state.topic_ids.contains_key(&t.name) {
            return Err(err(
                ResponseError::TopicAlreadyExists,
                format!("Topic '{}' already exists.", t.name),
            ));
        }
        let unified = unify_collision_chars(&t.name);
        let existing = self
            .state
            .topic_ids
            .keys()
            .find(|n| unify_collision_chars(n) == unified)
            .or_else(|| created.get(&unified));
        if let Some(other) = existing {
            return Err(err(
                ResponseError::InvalidTopicException,
                collision_message(&t.name, other),
            ));
        }
        let mut config_records = Vec::new();
        for (key, value) in &t.configs {
            let Some(value) = value else {
                return Err(err(
                    ResponseError::InvalidRequest,
                    format!("Null value not supported for topic configs: {key}"),
                ));
            };
            topic_config::check(key, value)
                .map_err(|e| err(ResponseError::InvalidConfig, e.to_string()))?;
            config_records.push(MetadataRecord::Config {
                resource_type: ConfigResourceType::Topic,
                resource_name: t.name.clone(),
                name: key.clone(),
                value: Some(value.clone()),
            });
        }
        let (lists, placed) = if !t.assignments.is_empty() {
            too_many(t.assignments.len())?;
            let lists = assignment::create_topic_assignment(
                t.num_partitions,
                t.replication_factor,
                &t.assignments,
                &self.registered_ids(),
            )
            .map_err(assignment_error)?;
            (lists, false)
        } else {
            let num_partitions = match t.num_partitions {
                -1 => self.settings.default_num_partitions,
                n => n,
            };
            let rf = match t.replication_factor {
                -1 => self.settings.default_replication_factor,
                n => n,
            };
            if num_partitions <= 0 {
                return Err(err(
                    ResponseError::InvalidPartitions,
                    "Number of partitions was set to an invalid non-positive value.",
                ));
            }
            if rf <= 0 {
                return Err(err(
                    ResponseError::InvalidReplicationFactor,
                    "Replication factor must be larger than 0, or -1 to use the default value.",
                ));
            }
            too_many(num_partitions as usize)?;
            let lists = place(
                &self.usable_brokers(),
                &[],
                num_partitions as usize,
                rf,
                rng,
            )?;
            (lists, true)
        };
        let replication_factor = lists.first().map_or(0, Vec::len);
        let topic_id = self.new_topic_id(rng);
        let num_partitions = lists.len() as i32;
        let mut records = vec![MetadataRecord::Topic {
            name: t.name.clone(),
            topic_id,
        }];
        records.extend(config_records);
        records.extend(self.new_partitions(topic_id, 0, lists, placed, replication_factor)?);
        Ok((
            CreatedTopic {
                topic_id,
                num_partitions,
                replication_factor: replication_factor as i16,
            },
            records,
        ))
    }

    /// DeleteTopics by name: a RemoveTopic per existing topic. Answers the topic id.
    pub fn delete_topics(
        &self,
        names: &[String],
    ) -> Outcome<Vec<(String, Result<Uuid, ControllerError>)>> {
        let dup = duplicate_names(names.iter().map(String::as_str));
        let mut records = Vec::new();
        let answer = names
            .iter()
            .map(|name| {
                let result = if dup.contains(name.as_str()) {
                    Err(err(ResponseError::InvalidRequest, "Duplicate topic name."))
                } else {
                    match self.state.topic_ids.get(name) {
                        Some(id) => {
                            records.push(MetadataRecord::RemoveTopic { topic_id: *id });
                            Ok(*id)
                        }
                        None => Err(err(
                            ResponseError::UnknownTopicOrPartition,
                            "This server does not host this topic-partition.",
                        )),
                    }
                };
                (name.clone(), result)
            })
            .collect();
        Outcome { records, answer }
    }

    /// DeleteTopics by topic id.
    pub fn delete_topic_ids(
        &self,
        ids: &[Uuid],
    ) -> Outcome<Vec<(Uuid, Result<String, ControllerError>)>> {
        let mut seen = BTreeSet::new();
        let dup: BTreeSet<Uuid> = ids
            .iter()
            .filter(|id| !seen.insert(**id))
            .copied()
            .collect();
        let mut records = Vec::new();
        let answer = ids
            .iter()
            .map(|id| {
                let result = if dup.contains(id) {
                    Err(err(ResponseError::InvalidRequest, "Duplicate topic id."))
                } else {
                    match self.state.topics.get(id) {
                        Some(t) => {
                            records.push(MetadataRecord::RemoveTopic { topic_id: *id });
                            Ok(t.name.clone())
                        }
                        None => Err(err(
                            ResponseError::UnknownTopicId,
                            "This server does not host this topic ID.",
                        )),
                    }
                };
                (*id, result)
            })
            .collect();
        Outcome { records, answer }
    }

    /// CreatePartitions. `seed` is the placement randomness.
    pub fn create_partitions(
        &self,
        topics: &[CreatePartitionsTopic],
        seed: u64,
    ) -> Outcome<Vec<(String, Result<(), ControllerError>)>> {
        let mut rng = Rng::new(seed);
        let dup = duplicate_names(topics.iter().map(|t| t.name.as_str()));
        let mut records = Vec::new();
        let mut answer = Vec::with_capacity(topics.len());
        for t in topics {
            let result = if dup.contains(t.name.as_str()) {
                Err(err(ResponseError::InvalidRequest, "Duplicate topic name."))
            } else {
                self.create_partitions_one(t, &mut rng)
            };
            if let Ok(r) = &result {
                records.extend(r.iter().cloned());
            }
            answer.push((t.name.clone(), result.map(|_| ())));
        }
        Outcome { records, answer }
    }

    fn create_partitions_one(
        &self,
        t: &CreatePartitionsTopic,
        rng: &mut Rng,
    ) -> Result<Vec<MetadataRecord>, ControllerError> {
        let Some(topic) = self.state.topic_by_name(&t.name) else {
            return Err(err(
                ResponseError::UnknownTopicOrPartition,
                "This server does not host this topic-partition.",
            ));
        };
        let current = topic.partitions.len() as i32;
        if t.count < current {
            return Err(err(
                ResponseError::InvalidPartitions,
                format!(
                    "The topic {} currently has {current} partition(s); {} would not be an increase.",
                    t.name, t.count
                ),
            ));
        }
        if t.count == current {
            return Err(err(
                ResponseError::InvalidPartitions,
                format!("Topic already has {current} partition(s)."),
            ));
        }
        let adding = t.count - current;
        too_many(adding as usize)?;
        let existing: Vec<Vec<i32>> = topic
            .partitions
            .values()
            .map(|p| p.replicas.clone())
            .collect();
        let rf = existing.first().map_or(0, Vec::len);
        let (lists, placed) = match &t.assignments {
            Some(lists) => {
                assignment::create_partitions_assignment(adding, lists, &self.registered_ids(), rf)
                    .map_err(assignment_error)?;
                (lists.clone(), false)
            }
            None => {
                let rf16 = i16::try_from(rf).unwrap_or(i16::MAX);
                (
                    place(
                        &self.usable_brokers(),
                        &existing,
                        adding as usize,
                        rf16,
                        rng,
                    )?,
                    true,
                )
            }
        };
        self.new_partitions(topic.topic_id, current, lists, placed, rf)
    }

    /// ElectLeaders (PREFERRED or UNCLEAN; `Online` is treated as PREFERRED). `partitions` None
    /// means every partition, and then only elections that were needed are reported.
    pub fn elect_leaders(
        &self,
        election: Election,
        partitions: Option<&[TopicPartition]>,
    ) -> Outcome<Vec<(TopicPartition, Result<(), ControllerError>)>> {
        let election = match election {
            Election::Online => Election::Preferred,
            e => e,
        };
        let all: Vec<TopicPartition>;
        let wanted = match partitions {
            Some(p) => p,
            None => {
                all = self
                    .state
                    .topics
                    .values()
                    .flat_map(|t| {
                        t.partitions.keys().map(|p| TopicPartition {
                            topic: t.name.clone(),
                            partition: *p,
                        })
                    })
                    .collect();
                &all
            }
        };
        let mut records = Vec::new();
        let mut answer = Vec::new();
        for tp in wanted {
            let result = self.elect_one(election, tp);
            match result {
                Ok(Some(record)) => {
                    records.push(record);
                    answer.push((tp.clone(), Ok(())));
                }
                Ok(None) => {}
                Err(e) => {
                    let not_needed = e.error == ResponseError::ElectionNotNeeded;
                    if partitions.is_some() || !not_needed {
                        answer.push((tp.clone(), Err(e)));
                    }
                }
            }
        }
        Outcome { records, answer }
    }

    fn elect_one(
        &self,
        election: Election,
        tp: &TopicPartition,
    ) -> Result<Option<MetadataRecord>, ControllerError> {
        let topic = self.state.topic_by_name(&tp.topic).ok_or_else(|| {
            err(
                ResponseError::UnknownTopicOrPartition,
                format!("No such topic as {}", tp.topic),
            )
        })?;
        let p = topic.partitions.get(&tp.partition).ok_or_else(|| {
            err(
                ResponseError::UnknownTopicOrPartition,
                format!("No such partition as {}-{}", tp.topic, tp.partition),
            )
        })?;
        let preferred = p.replicas.first().copied();
        if election == Election::Preferred && Some(p.leader) == preferred {
            return Err(err(
                ResponseError::ElectionNotNeeded,
                "Leader election not needed for topic partition.",
            ));
        }
        if election == Election::Unclean && p.leader >= 0 {
            return Err(err(
                ResponseError::ElectionNotNeeded,
                "Leader election not needed for topic partition.",
            ));
        }
        let builder = ChangeBuilder {
            topic_id: topic.topic_id,
            partition_id: tp.partition,
            partition: p,
            target_isr: p.isr.clone(),
            election,
            assignment: None,
            elr: self.elr_rules(&topic.name, p, None),
        };
        let change = builder.build(&|r| self.state.is_active(r));
        match change {
            Some(c) if election != Election::Preferred || Some(c.leader) == preferred => {
                Ok(Some(MetadataRecord::PartitionChange(c)))
            }
            _ if election == Election::Preferred => Err(err(
                ResponseError::PreferredLeaderNotAvailable,
                "The preferred leader was not available.",
            )),
            _ => Err(err(
                ResponseError::EligibleLeadersNotAvailable,
                "Eligible topic partition leaders are not available.",
            )),
        }
    }
}
