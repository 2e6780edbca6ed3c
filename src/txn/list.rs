//! DescribeTransactions and ListTransactions over the coordinator's state (Kafka's
//! handleDescribeTransactions and listTransactionStates). Pure; part of the state machine.

use std::collections::BTreeSet;

use kafka_protocol::messages::describe_transactions_response::{
    TopicData, TransactionState as DescribedTxn,
};
use kafka_protocol::messages::list_transactions_response::TransactionState as ListedTxn;
use kafka_protocol::messages::{ListTransactionsResponse, ProducerId, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;

use super::codes;
use super::coordinator::Coordinator;
use super::metadata::TxnState;

/// ListTransactions filters (empty = no filter; `min_duration_ms` < 0 = no filter).
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub states: Vec<String>,
    pub producer_ids: Vec<i64>,
    /// v1+: only transactions running longer than this.
    pub min_duration_ms: i64,
    /// v2+: a regular expression the whole transactional id must match.
    pub transactional_id_pattern: Option<String>,
}

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

impl Coordinator {
    /// One transactional id's DescribeTransactions entry.
    pub fn describe(&self, transactional_id: &str) -> DescribedTxn {
        // Errors carry the schema defaults (0), as Kafka's answers do.
        let out = DescribedTxn::default()
            .with_transactional_id(TransactionalId(sb(transactional_id)))
            .with_transaction_state(sb(""));
        if transactional_id.is_empty() {
            return out.with_error_code(codes::INVALID_REQUEST);
        }
        let Some(m) = self.get(transactional_id) else {
            return out.with_error_code(codes::TRANSACTIONAL_ID_NOT_FOUND);
        };
        let mut topics: Vec<TopicData> = Vec::new();
        for (topic, p) in &m.partitions {
            match topics.last_mut() {
                Some(t) if t.topic.as_str() == topic => t.partitions.push(*p),
                _ => topics.push(
                    TopicData::default()
                        .with_topic(TopicName(sb(topic)))
                        .with_partitions(vec![*p]),
                ),
            }
        }
        out.with_error_code(codes::NONE)
            .with_transaction_state(sb(m.state.name()))
            .with_producer_id(ProducerId(m.producer_id))
            .with_producer_epoch(m.producer_epoch)
            .with_transaction_timeout_ms(m.timeout_ms)
            .with_transaction_start_time_ms(m.start_timestamp_ms)
            .with_topics(topics)
    }

    /// ListTransactions: every transactional id passing all filters. Unknown state names are
    /// echoed in `unknown_state_filters`; an invalid pattern answers INVALID_REGULAR_EXPRESSION.
    pub fn list(&self, now: i64, filter: &ListFilter) -> ListTransactionsResponse {
        let mut response = ListTransactionsResponse::default();
        let mut states = BTreeSet::new();
        for name in &filter.states {
            match TxnState::from_name(name) {
                Some(s) => {
                    states.insert(s);
                }
                None => response.unknown_state_filters.push(sb(name)),
            }
        }
        let pattern = match filter.transactional_id_pattern.as_deref() {
            None | Some("") => None,
            Some(p) => match crate::cluster::java_regex::full_match(p) {
                Ok(r) => Some(r),
                Err(_) => {
                    response.error_code = codes::INVALID_REGULAR_EXPRESSION;
                    response.unknown_state_filters.clear();
                    return response;
                }
            },
        };
        for m in self.txns.values() {
            let included = m.state != TxnState::Dead
                && (filter.producer_ids.is_empty() || filter.producer_ids.contains(&m.producer_id))
                && (filter.states.is_empty() || states.contains(&m.state))
                && (filter.min_duration_ms < 0
                    || now - m.start_timestamp_ms > filter.min_duration_ms)
                && pattern
                    .as_ref()
                    .is_none_or(|r| r.is_match(&m.transactional_id));
            if included {
                response.transaction_states.push(
                    ListedTxn::default()
                        .with_transactional_id(TransactionalId(sb(&m.transactional_id)))
                        .with_producer_id(ProducerId(m.producer_id))
                        .with_transaction_state(sb(m.state.name())),
                );
            }
        }
        response
    }
}
