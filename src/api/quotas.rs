//! Client quota APIs: DescribeClientQuotas (48), answered from this broker's metadata image
//! (Kafka's `ClientQuotasImage.describe`), and AlterClientQuotas (49), decided by the controller
//! (`controller::quotas`; a non-leading node forwards it, `api::forward`).
//!
//! Enforcement is elsewhere: Produce and Fetch ask `client_quota` (`Broker::quotas`), which reads
//! the quotas these APIs write from the metadata image.

use std::collections::BTreeSet;
use std::sync::Arc;

use kafka_protocol::messages::alter_client_quotas_response as alter_response;
use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, ApiKey, DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::error;
use crate::broker::Broker;
use crate::controller::{QuotaAlteration, QuotaAnswers};
use crate::metadata::quotas::{entity_parts, ClientQuotas, QuotaEntity, CLIENT_ID, IP, USER};

/// API keys this module handles.
pub const HANDLED: &[ApiKey] = &[ApiKey::DescribeClientQuotas, ApiKey::AlterClientQuotas];

/// DescribeClientQuotas `match_type` values.
const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_ANY: i8 = 2;

/// How long resolving an IP entity's host name may take.
const RESOLVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// A filter, checked: exact names (None: the default) and types that must only be present.
#[derive(Debug, Default, PartialEq, Eq)]
struct Filter {
    exact: Vec<(String, Option<String>)>,
    any: Vec<String>,
    strict: bool,
}

impl Filter {
    fn matches(&self, entity: &QuotaEntity) -> bool {
        if self.strict && entity.len() != self.exact.len() + self.any.len() {
            return false;
        }
        self.exact
            .iter()
            .all(|(t, name)| entity.get(t).is_some_and(|n| n == name))
            && self.any.iter().all(|t| entity.contains_key(t))
    }
}

/// The request's filter, or Kafka's error code and message for it.
fn filter(request: &DescribeClientQuotasRequest) -> Result<Filter, (i16, String)> {
    let invalid = |m: String| Err((error::INVALID_REQUEST, m));
    let mut f = Filter {
        strict: request.strict,
        ..Filter::default()
    };
    for c in &request.components {
        let t = c.entity_type.as_str();
        if t.is_empty() {
            return invalid("Invalid empty entity type.".into());
        }
        if f.exact.iter().any(|(e, _)| e == t) || f.any.iter().any(|e| e == t) {
            return invalid(format!(
                "Entity type {t} cannot appear more than once in the filter."
            ));
        }
        if ![IP, USER, CLIENT_ID].contains(&t) {
            return Err((
                error::UNSUPPORTED_VERSION,
                format!("Unsupported entity type {t}"),
            ));
        }
        let name = c._match.as_ref().map(|m| m.as_str().to_string());
        match c.match_type {
            MATCH_EXACT => match name {
                Some(n) => f.exact.push((t.to_string(), Some(n))),
                None => {
                    return invalid(
                        "Request specified MATCH_TYPE_EXACT, but set match string to null.".into(),
                    )
                }
            },
            MATCH_DEFAULT if name.is_some() => {
                return invalid(
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                        .into(),
                )
            }
            MATCH_DEFAULT => f.exact.push((t.to_string(), None)),
            MATCH_ANY if name.is_some() => {
                return invalid(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                        .into(),
                )
            }
            MATCH_ANY => f.any.push(t.to_string()),
            other => return invalid(format!("Unknown match type {other}")),
        }
    }
    let named = |t: &str| f.exact.iter().any(|(e, _)| e == t) || f.any.iter().any(|e| e == t);
    if named(IP) && (named(USER) || named(CLIENT_ID)) {
        return invalid(
            "Invalid entity filter component combination. IP filter component should not be \
             used with user or clientId filter component."
                .into(),
        );
    }
    Ok(f)
}

/// The entries of `quotas` a request asks for, or its error (then `entries` is null, as Kafka).
pub fn describe_from(
    quotas: &ClientQuotas,
    request: &DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    let f = match filter(request) {
        Ok(f) => f,
        Err((code, message)) => {
            return DescribeClientQuotasResponse::default()
                .with_error_code(code)
                .with_error_message(Some(StrBytes::from_string(message)))
                .with_entries(None)
        }
    };
    let entries = quotas
        .iter()
        .filter(|(entity, _)| f.matches(entity))
        .map(|(entity, values)| {
            EntryData::default()
                .with_entity(
                    entity_parts(entity)
                        .into_iter()
                        .map(|(t, n)| {
                            EntityData::default()
                                .with_entity_type(StrBytes::from_string(t))
                                .with_entity_name(n.map(StrBytes::from_string))
                        })
                        .collect(),
                )
                .with_values(
                    values
                        .iter()
                        .map(|(k, v)| {
                            ValueData::default()
                                .with_key(StrBytes::from_string(k.clone()))
                                .with_value(v.0)
                        })
                        .collect(),
                )
        })
        .collect();
    DescribeClientQuotasResponse::default()
        .with_error_code(error::NONE)
        .with_entries(Some(entries))
}

/// DescribeClientQuotas from this broker's image.
pub fn describe(
    broker: &Broker,
    request: DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    describe_from(broker.image().client_quotas(), &request)
}

/// The request's alterations: each entry's entity as a map (a repeated entity type keeps its
/// last name, as Kafka's request parsing does), removals as `None`.
pub fn alterations(request: &AlterClientQuotasRequest) -> Vec<QuotaAlteration> {
    request
        .entries
        .iter()
        .map(|e| QuotaAlteration {
            entity: e
                .entity
                .iter()
                .map(|d| {
                    (
                        d.entity_type.as_str().to_string(),
                        d.entity_name.as_ref().map(|n| n.as_str().to_string()),
                    )
                })
                .collect(),
            ops: e
                .ops
                .iter()
                .map(|o| (o.key.as_str().to_string(), (!o.remove).then_some(o.value)))
                .collect(),
        })
        .collect()
}

/// The IP entity names that are not address literals but resolve (Kafka accepts any name
/// `InetAddress.getByName` resolves).
async fn resolvable_names(alterations: &[QuotaAlteration]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for a in alterations {
        let Some(Some(name)) = a.entity.get(IP) else {
            continue;
        };
        if name.is_empty() || name.parse::<std::net::IpAddr>().is_ok() || out.contains(name) {
            continue;
        }
        let lookup = tokio::net::lookup_host((name.as_str(), 0));
        if let Ok(Ok(mut addrs)) = tokio::time::timeout(RESOLVE_TIMEOUT, lookup).await {
            if addrs.next().is_some() {
                out.insert(name.clone());
            }
        }
    }
    out
}

/// The response of the controller's answers (or of one failure for every entity).
pub fn alter_response(answers: QuotaAnswers) -> AlterClientQuotasResponse {
    let entries = answers
        .into_iter()
        .map(|(entity, result)| {
            let (code, message) = match result {
                Ok(()) => (error::NONE, None),
                Err(e) => (e.code(), Some(StrBytes::from_string(e.message))),
            };
            alter_response::EntryData::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_entity(
                    entity_parts(&entity)
                        .into_iter()
                        .map(|(t, n)| {
                            alter_response::EntityData::default()
                                .with_entity_type(StrBytes::from_string(t))
                                .with_entity_name(n.map(StrBytes::from_string))
                        })
                        .collect(),
                )
        })
        .collect();
    AlterClientQuotasResponse::default().with_entries(entries)
}

/// AlterClientQuotas: decided by the controller, answered once its records are in this
/// broker's image.
pub async fn alter(
    broker: Arc<Broker>,
    request: AlterClientQuotasRequest,
) -> AlterClientQuotasResponse {
    let alterations = alterations(&request);
    let resolvable = resolvable_names(&alterations).await;
    let validate_only = request.validate_only;
    let asked = alterations.clone();
    let decided = broker
        .controller_run(move |c, _| {
            c.alter_client_quotas(&alterations, validate_only, &|n| resolvable.contains(n))
        })
        .await;
    match decided {
        Ok(answers) => {
            let changed = answers.iter().filter(|(_, r)| r.is_ok()).count();
            if changed > 0 && !validate_only {
                tracing::info!("client quotas altered for {changed} entities");
            }
            alter_response(answers)
        }
        Err(e) => {
            // No decision: every entity named carries the driver's error.
            let mut answers: QuotaAnswers = Vec::new();
            for a in asked {
                if !answers.iter().any(|(en, _)| *en == a.entity) {
                    let refusal = crate::controller::ControllerError::new(
                        kafka_protocol::error::ResponseError::UnknownServerError,
                        e.to_string(),
                    );
                    answers.push((a.entity, Err(refusal)));
                }
            }
            let code = e.code();
            let mut response = alter_response(answers);
            for entry in &mut response.entries {
                entry.error_code = code;
            }
            response
        }
    }
}

#[cfg(test)]
#[path = "quotas_tests.rs"]
mod tests;
