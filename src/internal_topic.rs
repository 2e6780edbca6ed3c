//! The coordinators' internal topics (`__consumer_offsets`, `__transaction_state`): created on first
//! use with fixed overrides, and written with batches the broker builds itself (coordinator origin,
//! so no client sequence checks). Shared by the group and transaction coordinator drivers.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;

use crate::broker::Broker;
use crate::cluster::TopicConfig;
use crate::record::KeyValue;
use crate::replica::manager::{Topic, TopicError};
use crate::replica::partition::{AppendError, AppendOrigin, AppendSettings};
use crate::replica::Partition;

/// Returns the internal topic `name`, creating it with `partitions` partitions and `overrides`
/// (on top of the broker's defaults) if it does not exist yet. None (with one log line) when it
/// cannot be created.
pub fn ensure(
    broker: &Broker,
    name: &str,
    partitions: i32,
    overrides: &[(&str, String)],
) -> Option<Arc<Topic>> {
    if let Some(t) = broker.replicas.topic(name) {
        return Some(t);
    }
    let overrides: BTreeMap<String, String> = overrides
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let config = match TopicConfig::build(&broker.config, overrides) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("{name} config: {e}");
            return None;
        }
    };
    match broker.replicas.create_topic(name, partitions, config) {
        Ok(t) => Some(t),
        Err(TopicError::AlreadyExists(_)) => broker.replicas.topic(name),
        Err(e) => {
            tracing::error!("creating {name}: {e}");
            None
        }
    }
}

/// Why a coordinator batch was not appended.
#[derive(Debug, thiserror::Error)]
pub enum AppendFailure {
    #[error("built an invalid batch: {0}")]
    Invalid(String),
    #[error(transparent)]
    Append(#[from] AppendError),
}

/// Builds one uncompressed batch of `records` (transactional when `producer` is given: its id and
/// epoch, base sequence -1) and appends it with coordinator origin.
pub fn append(
    broker: &Broker,
    partition: &Partition,
    records: &[KeyValue<'_>],
    producer: Option<(i64, i16)>,
    now: i64,
) -> Result<(), AppendFailure> {
    let batch = Bytes::from(match producer {
        None => crate::record::build_batch(0, now, (-1, -1, -1), records),
        Some((id, epoch)) => {
            crate::record::build_transactional_batch(now, (id, epoch, -1), records)
        }
    });
    let header =
        crate::record::validate_batch(&batch).map_err(|e| AppendFailure::Invalid(e.to_string()))?;
    let settings = AppendSettings {
        timestamp_type: crate::config::TimestampType::CreateTime,
        flush: broker.config.flush_every_message,
        origin: AppendOrigin::Coordinator,
    };
    partition.append(&batch, &header, settings, now)?;
    Ok(())
}
