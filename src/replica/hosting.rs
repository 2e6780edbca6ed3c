//! The hosting side's reaction to a metadata delta (Kafka's `ReplicaManager.applyDelta`): open
//! (creating) the local log of every partition this broker became a replica of and give it the
//! image's leader epoch (become leader / become follower), stop and delete the partitions it no
//! longer holds, push changed topic configs to the hosted logs, and apply changed dynamic broker
//! configs (this broker's layer, the cluster default).
//!
//! Runs inside `MetadataLog::commit`, before the new image is published: an error (a directory
//! that cannot be made) keeps the image as it was and is answered to the admin request. A leader
//! takes the registration into its replication state (`Partition::make_leader`); a follower joins
//! the fetcher of its leader (`replica::fetcher`), except, once a controlled shutdown began,
//! when the partition has no leader or its ISR no longer names this broker (Kafka's rule).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::manager::{
    log_config, now_ms, read_partition_metadata, write_partition_metadata, ReplicaManager, Topic,
    TopicError,
};
use super::partition::{Checkpointed, Partition};
use crate::cluster::TopicConfig;
use crate::metadata::{ConfigResourceType, LocalPartition, MetadataDelta, MetadataImage};
use crate::replica::replication::leader::{LeaderAndIsr, LeaderConfig};

/// Fenced or shutting-down brokers: they may not join an ISR.
fn ineligible_brokers(image: &MetadataImage) -> std::collections::BTreeSet<i32> {
    image
        .brokers()
        .filter(|b| b.fenced || b.in_controlled_shutdown)
        .map(|b| b.id)
        .collect()
}

impl ReplicaManager {
    /// Applies `delta` (which produced `image`) to the hosted partitions.
    pub(super) fn apply_delta(
        &self,
        image: &MetadataImage,
        delta: &MetadataDelta,
    ) -> Result<(), TopicError> {
        let changes = delta.local_changes(self.node_id, image);
        if !delta.changed_brokers.is_empty() {
            self.refresh_ineligible(image);
        }
        self.apply_broker_configs(image, delta);
        let mut persist = !delta.created_topics.is_empty();
        if !changes.deletes.is_empty() {
            persist |= self.stop_and_delete(&changes.deletes);
        }
        let mut by_topic: BTreeMap<&str, Vec<&LocalPartition>> = BTreeMap::new();
        for local in changes.leaders.iter().chain(&changes.followers) {
            by_topic.entry(&local.topic).or_default().push(local);
        }
        for (name, locals) in by_topic {
            self.host(image, name, &locals)?;
        }
        // A topic entering the image (a replayed log, an adoption) takes the image's overrides
        // too: a topic loaded from disk got its config from `topic-configs.json`, which the log
        // overrules (the file is only read for the adoption of a pre-quorum data directory).
        let entered = delta
            .created_topics
            .iter()
            .filter_map(|id| image.topic_by_id(*id).map(|t| t.name.as_str()));
        let reconfigured: std::collections::BTreeSet<&str> =
            delta.changed_topic_configs().chain(entered).collect();
        for name in reconfigured {
            if let Some(t) = self.topic(name) {
                let config = Arc::new(self.config_from_image(image, name));
                self.replace_topic(&t, config, t.partitions.clone());
                persist = true;
            }
        }
        if persist {
            self.persist_configs()?;
        }
        Ok(())
    }

    /// The dynamic broker config layers the delta changed (this broker's, the cluster default)
    /// become the image's; the other layer stays (it may still be `broker-configs.json`'s from
    /// before broker configs were records). A layer that does not build is logged and skipped:
    /// the receiving broker validated it, so only another version's keys can get here.
    fn apply_broker_configs(&self, image: &MetadataImage, delta: &MetadataDelta) {
        let (own, default) = delta.changed_broker_configs(self.node_id);
        if !own && !default {
            return;
        }
        let mut dynamic = self.dynamic_broker_configs();
        if own {
            dynamic.per_broker =
                image.configs(ConfigResourceType::Broker, &self.node_id.to_string());
        }
        if default {
            dynamic.cluster_default = image.configs(ConfigResourceType::Broker, "");
        }
        if let Err(e) = self.set_dynamic_broker_configs(dynamic, false) {
            tracing::warn!("dynamic broker configs from the metadata log not applied: {e}");
        }
    }

    /// Topic `name`'s config: the broker's effective config under the image's overrides.
    fn config_from_image(&self, image: &MetadataImage, name: &str) -> TopicConfig {
        let effective = self.effective_config();
        TopicConfig::build(&effective, image.configs(ConfigResourceType::Topic, name))
            .unwrap_or_else(|e| {
                tracing::warn!("topic {name}: config overrides rejected ({e}); using defaults");
                TopicConfig::defaults(&effective)
            })
    }

    /// Hosts `locals` (partitions of topic `name`): opens the missing logs, then sets every
    /// partition's leader epoch. Partitions already hosted only take the new epoch.
    fn host(
        &self,
        image: &MetadataImage,
        name: &str,
        locals: &[&LocalPartition],
    ) -> Result<(), TopicError> {
        let Some(first) = locals.first() else {
            return Ok(());
        };
        if let Some(stray) = self.topic(name).filter(|t| t.id != first.topic_id) {
            // Loaded from disk under another id than the metadata log's: never served again.
            self.set_aside_strays(&[(name.to_string(), stray.id, first.topic_id)]);
        }
        let existing = self.topic(name).filter(|t| t.id == first.topic_id);
        let config = match &existing {
            Some(t) => t.config.clone(),
            None => Arc::new(self.config_from_image(image, name)),
        };
        let mut partitions = existing
            .as_ref()
            .map(|t| t.partitions.clone())
            .unwrap_or_default();
        let now = now_ms();
        let mut opened = false;
        for local in locals {
            if let Some(p) = partitions.get(&local.partition) {
                p.set_leader_epoch(local.leader_epoch);
                self.apply_role(image, &config, local, p);
                continue;
            }
            let dir = self.data_dir.join(format!("{name}-{}", local.partition));
            if let Some(other) = read_partition_metadata(&dir).filter(|id| *id != local.topic_id) {
                super::metadata_host::rename_stray_dir(&dir, other)?;
            }
            let partition = Partition::open(
                name,
                local.partition,
                &dir,
                log_config(&config, &self.files, &self.flusher),
                // Not hosted yet, so not loaded at startup: a new directory with nothing
                // checkpointed (Kafka's rule then gives its log start, 0).
                Checkpointed::default(),
                now,
            )?;
            if read_partition_metadata(&dir) != Some(local.topic_id) {
                write_partition_metadata(&dir, local.topic_id)?;
            }
            partition.set_leader_epoch(local.leader_epoch);
            let partition = Arc::new(partition);
            self.apply_role(image, &config, local, &partition);
            partitions.insert(local.partition, partition);
            opened = true;
        }
        if opened {
            let topic = Arc::new(Topic {
                name: name.to_string(),
                id: first.topic_id,
                config,
                partitions,
            });
            let mut t = self.topics.write();
            t.by_id.insert(first.topic_id, name.to_string());
            t.by_name.insert(name.to_string(), topic);
        }
        Ok(())
    }

    /// Makes `partition` the image's leader or follower (Kafka's makeLeader / makeFollower): a
    /// leader takes the registration (replicas, ISR, epochs) into its replication state and sends
    /// what it proposes; a follower joins the fetcher of its leader (none while leaderless).
    fn apply_role(
        &self,
        image: &MetadataImage,
        config: &TopicConfig,
        local: &LocalPartition,
        partition: &Arc<Partition>,
    ) {
        let Some(reg) = image
            .topic_by_id(local.topic_id)
            .and_then(|t| t.partitions.get(&local.partition))
        else {
            return;
        };
        if reg.leader == self.node_id {
            self.fetchers.remove(local.topic_id, local.partition);
            let leader_config = LeaderConfig {
                replica_lag_time_max_ms: self.config.replica_lag_time_max_ms,
                min_insync_replicas: config.min_insync_replicas,
            };
            let registration = LeaderAndIsr {
                leader_epoch: reg.leader_epoch,
                partition_epoch: reg.partition_epoch,
                replicas: reg.replicas.clone(),
                isr: reg.isr.clone(),
            };
            let proposals = partition.make_leader(
                self.node_id,
                leader_config,
                &registration,
                ineligible_brokers(image),
                now_ms(),
            );
            self.isr.submit(local.topic_id, partition, proposals);
        } else {
            partition.make_follower(reg.leader, reg.leader_epoch);
            let shutting_down = self
                .in_controlled_shutdown
                .load(std::sync::atomic::Ordering::Acquire);
            // Kafka: "During controlled shutdown, replica with no leaders and replica where this
            // broker is not in the ISR are stopped."
            let fetch = reg.leader >= 0 && (!shutting_down || reg.isr.contains(&self.node_id));
            if fetch {
                self.fetchers.add(
                    reg.leader,
                    reg.leader_epoch,
                    local.topic_id,
                    &local.topic,
                    partition.clone(),
                );
            } else {
                self.fetchers.remove(local.topic_id, local.partition);
            }
        }
    }

    /// A broker registration changed (fenced, unfenced, shutting down): every partition led here
    /// learns which followers may not join its ISR.
    pub(super) fn refresh_ineligible(&self, image: &MetadataImage) {
        let ineligible = ineligible_brokers(image);
        for topic in self.topics() {
            for p in topic.partitions.values() {
                p.set_ineligible_replicas(ineligible.clone());
            }
        }
    }

    /// Takes `deletes` out of service and renames their directories `*-delete` (removed by a
    /// background thread, or at the next startup). A topic left without hosted partitions leaves
    /// the table. Returns whether anything was hosted.
    fn stop_and_delete(&self, deletes: &[(String, uuid::Uuid, i32)]) -> bool {
        let mut removed = Vec::new();
        {
            let mut t = self.topics.write();
            for (name, id, index) in deletes {
                let Some(topic) = t.by_name.get(name).filter(|t| t.id == *id).cloned() else {
                    continue;
                };
                let mut partitions = topic.partitions.clone();
                let Some(p) = partitions.remove(index) else {
                    continue;
                };
                self.fetchers.remove(*id, *index);
                removed.push(p);
                if partitions.is_empty() {
                    t.by_name.remove(name);
                    t.by_id.remove(id);
                } else {
                    t.by_name.insert(
                        name.clone(),
                        Arc::new(Topic {
                            name: name.clone(),
                            id: *id,
                            config: topic.config.clone(),
                            partitions,
                        }),
                    );
                }
            }
        }
        if removed.is_empty() {
            return false;
        }
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        let mut doomed = Vec::new();
        for p in &removed {
            let target = self
                .data_dir
                .join(format!("{}-{}.{suffix}-delete", p.topic, p.index));
            match std::fs::rename(&p.dir, &target) {
                Ok(()) => doomed.push(target),
                Err(e) => tracing::warn!(
                    "deleting {}-{}: renaming {} failed: {e}",
                    p.topic,
                    p.index,
                    p.dir.display()
                ),
            }
        }
        std::thread::spawn(move || {
            for d in doomed {
                let _ = std::fs::remove_dir_all(d);
            }
        });
        true
    }
}
