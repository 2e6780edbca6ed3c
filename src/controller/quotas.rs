//! AlterClientQuotas as Kafka's `ClientQuotaControlManager` decides it: per entity, the entity
//! types (user, client-id, ip) and their combinations (user, client-id, user + client-id, ip
//! alone), the keys each allows, the values (greater than 0; integral for the integer keys),
//! then one ClientQuotaRecord per key that changes. Every record of the request goes in one
//! entry; with `validate_only` the answers are the same and nothing is written.
//!
//! Kafka's quirks kept: a repeated key in one entry, or an entity named again later in the same
//! request, answers "Ignoring duplicate entity" for that entity (an earlier, accepted alteration
//! of it is still written); removing a key the entity does not have writes nothing and succeeds.
//! Whether a non-literal IP entity name resolves is an input (`resolvable`): the controller does
//! no I/O.

use kafka_protocol::error::ResponseError;

use super::error::{err, ControllerError};
use super::{Controller, Outcome, MAX_RECORDS_PER_USER_OP};
use crate::metadata::quotas::{
    entity_parts, ClientQuotaRecord, QuotaEntity, QuotaValue, CLIENT_ID, IP, USER,
};
use crate::metadata::records::MetadataRecord;

/// One entity's alteration: (key, value) pairs, a `None` value removing the key.
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaAlteration {
    pub entity: QuotaEntity,
    pub ops: Vec<(String, Option<f64>)>,
}

/// How a key's value must look (Kafka's `ConfigDef` type of the quota key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyType {
    Double,
    Int,
    Long,
}

/// The quota keys of users and client ids (Kafka's `QuotaConfig.userAndClientQuotaConfigs`).
const USER_AND_CLIENT_KEYS: &[(&str, KeyType)] = &[
    ("producer_byte_rate", KeyType::Long),
    ("consumer_byte_rate", KeyType::Long),
    ("request_percentage", KeyType::Double),
    ("controller_mutation_rate", KeyType::Double),
];

/// The quota keys of IPs (`QuotaConfig.ipConfigs`).
const IP_KEYS: &[(&str, KeyType)] = &[("connection_creation_rate", KeyType::Int)];

/// Kafka's rendering of an entity in messages (`ClientQuotaEntity.toString`).
pub fn entity_string(entity: &QuotaEntity) -> String {
    let parts: Vec<String> = entity_parts(entity)
        .into_iter()
        .map(|(t, n)| format!("{t}={}", n.as_deref().unwrap_or("null")))
        .collect();
    format!("ClientQuotaEntity(entries={{{}}})", parts.join(", "))
}

/// The answers of one AlterClientQuotas: one per distinct entity, in the order first named.
pub type QuotaAnswers = Vec<(QuotaEntity, Result<(), ControllerError>)>;

impl Controller {
    /// AlterClientQuotas (see the module docs). `resolvable(name)`: whether a non-literal IP
    /// entity name resolves to an address (Kafka's `InetAddress.getByName` succeeds).
    pub fn alter_client_quotas(
        &self,
        alterations: &[QuotaAlteration],
        validate_only: bool,
        resolvable: &dyn Fn(&str) -> bool,
    ) -> Outcome<QuotaAnswers> {
        let mut records = Vec::new();
        let mut answers: QuotaAnswers = Vec::new();
        let set = |answers: &mut QuotaAnswers, entity: &QuotaEntity, r| match answers
            .iter_mut()
            .find(|(e, _)| e == entity)
        {
            Some(slot) => slot.1 = r,
            None => answers.push((entity.clone(), r)),
        };
        for a in alterations {
            let mut seen = std::collections::BTreeSet::new();
            let duplicate_key = a.ops.iter().any(|(k, _)| !seen.insert(k.as_str()));
            if duplicate_key || answers.iter().any(|(e, _)| *e == a.entity) {
                let message = format!("Ignoring duplicate entity {}", entity_string(&a.entity));
                set(
                    &mut answers,
                    &a.entity,
                    Err(err(ResponseError::InvalidRequest, message)),
                );
                continue;
            }
            let result = self
                .quota_records(a, resolvable)
                .map(|rs| records.extend(rs.into_iter().map(MetadataRecord::ClientQuota)));
            set(&mut answers, &a.entity, result);
        }
        if records.len() > MAX_RECORDS_PER_USER_OP {
            let refusal = err(
                ResponseError::PolicyViolation,
                format!("Too many records: more than {MAX_RECORDS_PER_USER_OP} in one request"),
            );
            records.clear();
            for (_, r) in &mut answers {
                *r = Err(refusal.clone());
            }
        }
        if validate_only {
            records.clear();
        }
        Outcome {
            records,
            answer: answers,
        }
    }

    /// The records of one entity's alteration, or its refusal.
    fn quota_records(
        &self,
        a: &QuotaAlteration,
        resolvable: &dyn Fn(&str) -> bool,
    ) -> Result<Vec<ClientQuotaRecord>, ControllerError> {
        let keys = allowed_keys(&a.entity, resolvable)?;
        let current = self.state.quotas.get(&a.entity);
        let mut out = Vec::new();
        for (key, value) in &a.ops {
            let now = current.and_then(|c| c.get(key));
            match value {
                None => {
                    if now.is_some() {
                        out.push(ClientQuotaRecord {
                            entity: entity_parts(&a.entity),
                            key: key.clone(),
                            value: QuotaValue(0.0),
                            remove: true,
                        });
                    }
                }
                Some(v) => {
                    check_value(keys, key, *v)?;
                    if now != Some(&QuotaValue(*v)) {
                        out.push(ClientQuotaRecord {
                            entity: entity_parts(&a.entity),
                            key: key.clone(),
                            value: QuotaValue(*v),
                            remove: false,
                        });
                    }
                }
            }
        }
        Ok(out)
    }
}

/// The entity's types, names and combination; the keys it may set.
fn allowed_keys(
    entity: &QuotaEntity,
    resolvable: &dyn Fn(&str) -> bool,
) -> Result<&'static [(&'static str, KeyType)], ControllerError> {
    let invalid = |m: String| Err(err(ResponseError::InvalidRequest, m));
    if entity.is_empty() {
        return invalid("Invalid empty client quota entity".into());
    }
    for (t, name) in entity_parts(entity) {
        if ![USER, CLIENT_ID, IP].contains(&t.as_str()) {
            return invalid(format!("Unhandled client quota entity type: {t}"));
        }
        if name.as_deref() == Some("") {
            return invalid(format!("Empty {t} not supported"));
        }
    }
    let has = |t: &str| entity.contains_key(t);
    if has(IP) {
        if has(USER) || has(CLIENT_ID) {
            return invalid(
                "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"
                    .into(),
            );
        }
        if let Some(Some(ip)) = entity.get(IP) {
            if ip.parse::<std::net::IpAddr>().is_err() && !resolvable(ip) {
                return invalid(format!("{ip} is not a valid IP or resolvable host."));
            }
        }
        return Ok(IP_KEYS);
    }
    Ok(USER_AND_CLIENT_KEYS)
}

/// Kafka's `validateQuotaKeyValue`.
fn check_value(keys: &[(&str, KeyType)], key: &str, value: f64) -> Result<(), ControllerError> {
    let invalid = |m: String| Err(err(ResponseError::InvalidRequest, m));
    let Some((_, kind)) = keys.iter().find(|(k, _)| *k == key) else {
        return invalid(format!("Invalid configuration key {key}"));
    };
    // `value <= 0.0` is false for NaN in Kafka too; a NaN is refused as not a number below.
    if value <= 0.0 {
        return invalid(format!("Quota {key} must be greater than 0"));
    }
    let (limit, name) = match kind {
        KeyType::Double => {
            if value.is_nan() {
                return invalid(format!("Quota {key} must be greater than 0"));
            }
            return Ok(());
        }
        KeyType::Int => (f64::from(i32::MAX), "an INT"),
        KeyType::Long => (i64::MAX as f64, "a LONG"),
    };
    if value > limit {
        return invalid(format!("Proposed value for {key} is too large for {name}."));
    }
    if (value % 1.0).abs() > 1e-6 || value.is_nan() {
        return invalid(format!("{key} cannot be a fractional value."));
    }
    Ok(())
}

#[cfg(test)]
#[path = "quotas_tests.rs"]
mod tests;
