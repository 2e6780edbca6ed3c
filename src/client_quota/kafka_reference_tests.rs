//! The client quota manager against Apache Kafka's own: `scripts/quota-reference` runs seeded
//! scenarios on Kafka 4.1.2's `kafka.server.ClientQuotaManager` (quota changes at every entity
//! level, records of a `User:ANONYMOUS` client at chosen times, Fetch-style records taken back when
//! throttled, max values in the quota window) and writes each with Kafka's answer to
//! `.tools/quota-reference/kafka-4.1.2-client-quota-manager.txt` (format in
//! `scripts/QuotaReference.java`); this test replays that file and every answer must be the same,
//! to the millisecond. The file is generated, not committed: the test is ignored in a plain
//! `cargo test` and `scripts/test` runs it after generating the file (the path in
//! `SLUICE_QUOTA_REFERENCE`).

use super::manager::ClientQuotaManager;
use super::precedence::QuotaTable;
use super::rate::QuotaWindow;
use super::ANONYMOUS;
use crate::metadata::quotas::{ClientQuotaRecord, ClientQuotas, QuotaValue, CLIENT_ID, USER};

const KEY: &str = "producer_byte_rate";

fn entity_part(kind: &str, name: &str) -> Option<(String, Option<String>)> {
    match name {
        "-" => None,
        "*" => Some((kind.to_string(), None)),
        n => Some((kind.to_string(), Some(n.to_string()))),
    }
}

fn client(name: &str) -> Option<&str> {
    (name != "~").then_some(name)
}

struct Replay {
    manager: ClientQuotaManager,
    quotas: ClientQuotas,
    scenario: String,
    answers: usize,
    throttled: usize,
}

impl Replay {
    fn line(&mut self, line: &str) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let at = || format!("{} | {line}", self.scenario);
        match f.as_slice() {
            ["scenario", seed, samples, seconds] => {
                let window = QuotaWindow::new(samples.parse().unwrap(), seconds.parse().unwrap());
                self.manager = ClientQuotaManager::new(window);
                self.quotas = ClientQuotas::default();
                self.scenario = format!("scenario {seed}");
            }
            ["quota", user, client_id, value] => {
                let entity = [entity_part(USER, user), entity_part(CLIENT_ID, client_id)]
                    .into_iter()
                    .flatten()
                    .collect();
                let remove = *value == "remove";
                self.quotas.apply(&ClientQuotaRecord {
                    entity,
                    key: KEY.into(),
                    value: QuotaValue(if remove { 0.0 } else { value.parse().unwrap() }),
                    remove,
                });
                self.manager
                    .update_quotas(QuotaTable::from_quotas(&self.quotas, KEY));
            }
            [kind @ ("record" | "fetch"), c, bytes, time, expected] => {
                let (c, time) = (client(c), time.parse::<i64>().unwrap());
                let bytes: f64 = bytes.parse().unwrap();
                let got = self.manager.record(ANONYMOUS, c, bytes, time);
                if *kind == "fetch" && got > 0 {
                    self.manager.unrecord(ANONYMOUS, c, bytes, time);
                }
                assert_eq!(got, expected.parse::<i32>().unwrap(), "{}", at());
                self.answers += 1;
                self.throttled += usize::from(got > 0);
            }
            ["max", c, expected] => {
                let got = self.manager.max_value_in_window(ANONYMOUS, client(c));
                let expected = (*expected != "none").then(|| expected.parse::<f64>().unwrap());
                assert_eq!(got, expected, "{}", at());
            }
            _ => panic!("unknown fixture line: {line}"),
        }
    }
}

#[test]
#[ignore = "needs Kafka's answers from scripts/quota-reference (Java and the Kafka 4.1.2 jars); scripts/test generates them and runs this test"]
fn every_answer_is_kafkas() {
    let path = std::env::var("SLUICE_QUOTA_REFERENCE")
        .expect("SLUICE_QUOTA_REFERENCE names the file scripts/quota-reference wrote");
    let fixture =
        std::fs::read_to_string(&path).expect("Kafka's answers from scripts/quota-reference");
    let mut replay = Replay {
        manager: ClientQuotaManager::new(QuotaWindow::DEFAULT),
        quotas: ClientQuotas::default(),
        scenario: String::new(),
        answers: 0,
        throttled: 0,
    };
    for line in fixture.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        replay.line(line);
    }
    // The file exercises both outcomes plenty (not a replay of nothing).
    assert!(replay.answers > 5_000, "{} answers", replay.answers);
    assert!(replay.throttled > 1_000, "{} throttled", replay.throttled);
}
