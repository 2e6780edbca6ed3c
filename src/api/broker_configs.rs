//! Dynamic broker configs (BROKER resources of AlterConfigs / IncrementalAlterConfigs) as
//! metadata records, as in KRaft: the receiving broker checks the resource (the cluster default
//! `""` or its own id; another id is INVALID_REQUEST there, Kafka's `ConfigAdminManager` rule)
//! and the keys (`check_dynamic`, and that its whole config still builds), then the controller
//! writes ConfigRecords (resource type 4, name `""` or the broker id); every broker applies the
//! layers naming it or the default when its image holds them (`ReplicaManager::apply_delta`), so
//! `kafka-configs --entity-type brokers --entity-default` reaches the whole cluster. A request
//! forwarded by another broker (`api::forward`) had the resource checked there and may name any
//! broker id. A layer set before broker configs were records (`broker-configs.json`, no record in
//! the image yet) is the base of its first change, which records it whole.

use super::configs::{broker_resource, changes_between, decide, ApiError, Configs};
use super::error;
use crate::broker::Broker;
use crate::cluster::broker_config::check_dynamic;
use crate::metadata::ConfigResourceType;
use crate::replica::manager::TopicError;

/// Sets broker resource `name`'s dynamic configs to `change(current)`; see the module doc.
/// Called on the blocking pool.
pub(super) fn set(
    broker: &Broker,
    name: &str,
    validate_only: bool,
    forwarded: bool,
    change: &dyn Fn(&Configs) -> Result<Configs, ApiError>,
) -> Result<(), ApiError> {
    let per_broker = if forwarded {
        any_broker(name)?
    } else {
        broker_resource(broker, name)?
    };
    let mine = !per_broker || name.parse::<i32>() == Ok(broker.identity.node_id);
    let recorded = broker.image().configs(ConfigResourceType::Broker, name);
    let local = broker.replicas.dynamic_broker_configs();
    let local_layer = if per_broker {
        &local.per_broker
    } else {
        &local.cluster_default
    };
    let base = if recorded.is_empty() && mine {
        local_layer.clone()
    } else {
        recorded.clone()
    };
    let new = change(&base)?;
    for (k, v) in &new {
        if base.get(k) != Some(v) {
            // Kafka answers INVALID_REQUEST for a refused broker config.
            check_dynamic(k, v, per_broker).map_err(|m| (error::INVALID_REQUEST, Some(m)))?;
        }
    }
    if mine {
        let mut dynamic = local.clone();
        if per_broker {
            dynamic.per_broker = new.clone();
        } else {
            dynamic.cluster_default = new.clone();
        }
        broker
            .replicas
            .set_dynamic_broker_configs(dynamic, true)
            .map_err(|e| match e {
                TopicError::InvalidConfig(m) => (error::INVALID_CONFIG, Some(m)),
                other => (error::KAFKA_STORAGE_ERROR, Some(other.to_string())),
            })?;
    }
    if validate_only {
        return Ok(());
    }
    let changes = changes_between(&recorded, &new);
    if changes.is_empty() {
        return Ok(());
    }
    decide(broker, ConfigResourceType::Broker, name, changes)?;
    let which = if per_broker { name } else { "<default>" };
    tracing::info!("dynamic configs of broker {which} now {new:?}");
    Ok(())
}

/// A forwarded broker resource: `""` (false) or any broker id (true).
fn any_broker(name: &str) -> Result<bool, ApiError> {
    if name.is_empty() {
        return Ok(false);
    }
    name.parse::<i32>().map(|_| true).map_err(|_| {
        (
            error::INVALID_REQUEST,
            Some(format!("Broker id must be an integer, but it is: {name}")),
        )
    })
}
