//! DescribeUserScramCredentials entries of the differential corpus: all users, one unknown user,
//! a name given twice. Kafka builds the results from a hash map, so they are rendered sorted by
//! user.

use anyhow::Result;
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;
use protocol_tests::Client;

#[derive(Clone, Copy)]
pub enum ScramCase {
    /// No names: every user with a credential.
    All,
    /// An empty list: also every user.
    EmptyList,
    /// Two users that have no credential, one named twice.
    NamedAndDuplicate,
}

fn request(users: Option<&[&str]>) -> DescribeUserScramCredentialsRequest {
    DescribeUserScramCredentialsRequest::default().with_users(users.map(|u| {
        u.iter()
            .map(|n| UserName::default().with_name(StrBytes::from_string(n.to_string())))
            .collect()
    }))
}

/// Sends `case`'s request (v0) and renders the decoded answer.
pub async fn exchange(c: &mut Client, case: ScramCase) -> Result<String> {
    let r = match case {
        ScramCase::All => request(None),
        ScramCase::EmptyList => request(Some(&[])),
        ScramCase::NamedAndDuplicate => {
            request(Some(&["diff-scram-a", "diff-scram-b", "diff-scram-a"]))
        }
    };
    let mut answer: DescribeUserScramCredentialsResponse = c.call(0, &r).await?;
    answer.results.sort_by(|a, b| a.user.cmp(&b.user));
    Ok(format!("{answer:#?}"))
}
