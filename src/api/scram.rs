//! DescribeUserScramCredentials (50), as Kafka 4.1's `ScramImage::describe` answers it for a
//! cluster that holds no SCRAM credentials: Sluice has no SASL listener and no
//! AlterUserScramCredentials, so no user ever has one. All users (no names, or an empty list):
//! no results. Named users: one result each, in request order, RESOURCE_NOT_FOUND ("Attempt to
//! describe a user credential that does not exist: <user>"), or DUPLICATE_RESOURCE for a name
//! given more than once ("Cannot describe SCRAM credentials for the same user twice in a single
//! request: <user>", one result for the name). `kafka-configs.sh --describe --entity-type users`
//! asks this after the quotas. Pure: no broker state is read.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_user_scram_credentials_response::DescribeUserScramCredentialsResult;
use kafka_protocol::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::error;

const DOES_NOT_EXIST: &str = "Attempt to describe a user credential that does not exist: ";
const DUPLICATE: &str =
    "Cannot describe SCRAM credentials for the same user twice in a single request: ";

/// The answer to a DescribeUserScramCredentials request.
pub fn describe(
    request: &DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let names = request.users.as_deref().unwrap_or_default();
    // Name -> seen more than once, in first-appearance order.
    let mut order = Vec::new();
    let mut repeated: BTreeMap<&str, bool> = BTreeMap::new();
    for u in names {
        let name = u.name.as_str();
        match repeated.get_mut(name) {
            Some(r) => *r = true,
            None => {
                repeated.insert(name, false);
                order.push(name);
            }
        }
    }
    let results = order
        .into_iter()
        .map(|name| {
            let (code, prefix) = if repeated[name] {
                (error::DUPLICATE_RESOURCE, DUPLICATE)
            } else {
                (error::RESOURCE_NOT_FOUND, DOES_NOT_EXIST)
            };
            DescribeUserScramCredentialsResult::default()
                .with_user(StrBytes::from_string(name.to_string()))
                .with_error_code(code)
                .with_error_message(Some(StrBytes::from_string(format!("{prefix}{name}"))))
        })
        .collect();
    DescribeUserScramCredentialsResponse::default()
        .with_error_code(error::NONE)
        .with_results(results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;

    fn request(users: Option<&[&str]>) -> DescribeUserScramCredentialsRequest {
        DescribeUserScramCredentialsRequest::default().with_users(users.map(|u| {
            u.iter()
                .map(|n| UserName::default().with_name(StrBytes::from_string(n.to_string())))
                .collect()
        }))
    }

    #[test]
    fn all_users_is_an_empty_answer() {
        for r in [request(None), request(Some(&[]))] {
            let a = describe(&r);
            assert_eq!(a.error_code, 0);
            assert!(a.results.is_empty(), "{a:?}");
        }
    }

    #[test]
    fn named_users_have_no_credential_and_repeats_are_duplicates() {
        let a = describe(&request(Some(&["alice", "bob", "alice", "alice"])));
        let got: Vec<(String, i16, String)> = a
            .results
            .iter()
            .map(|r| {
                (
                    r.user.to_string(),
                    r.error_code,
                    r.error_message.as_deref().unwrap_or_default().to_string(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "alice".into(),
                    92,
                    "Cannot describe SCRAM credentials for the same user twice in a single request: alice".into()
                ),
                (
                    "bob".into(),
                    91,
                    "Attempt to describe a user credential that does not exist: bob".into()
                ),
            ]
        );
        assert!(a.results.iter().all(|r| r.credential_infos.is_empty()));
    }
}
