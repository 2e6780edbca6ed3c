//! Which quota applies to a request, and whose rate it is measured on: Kafka's
//! `DefaultQuotaCallback` (in `ClientQuotaManager`), KIP-55's precedence over the user and
//! client-id entities of one quota key.
//!
//! The most specific quota wins, `<default>` being Kafka's per-type default:
//!
//! 1. user + client-id, 2. user + `<default>` client-id, 3. user,
//! 4. `<default>` user + client-id, 5. `<default>` user + `<default>` client-id,
//! 6. `<default>` user, 7. client-id, 8. `<default>` client-id.
//!
//! The rate a request is recorded on is a *sensor* named by metric tags (user tag, client-id
//! tag): every connection with the same tags shares one rate. Which tags depends on the entity
//! levels the quota key has ever had on this broker (Kafka's `quotaTypesEnabled`, a bit set that
//! only grows): a user-level quota puts every client of that user on one rate, a client-id
//! quota (or the `<default>` client-id) gives each client id its own. With more than one level
//! the tags follow the precedence above. The limit is then looked up from the tags again, so a
//! `<default>` client-id quota applies to each client id separately, and a null client id (a
//! request header without one) finds no client-level quota at all, as in Kafka.
//!
//! Pure: no I/O, no clock.

use std::collections::HashMap;

use crate::metadata::quotas::{ClientQuotas, CLIENT_ID, USER};

/// A quota entity's name of one type: a name, or that type's `<default>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Name {
    Default,
    Named(String),
}

impl Name {
    fn from_entity(name: &Option<String>) -> Name {
        match name {
            None => Name::Default,
            Some(n) => Name::Named(n.clone()),
        }
    }

    fn named(name: &str) -> Name {
        Name::Named(name.to_string())
    }
}

/// Entity levels of a quota key (Kafka's `QuotaTypes`), as bits of [`Levels`].
pub const CLIENT_ID_LEVEL: u8 = 1;
pub const USER_LEVEL: u8 = 2;
pub const USER_CLIENT_ID_LEVEL: u8 = 4;

/// A set of entity levels (bits above).
pub type Levels = u8;

/// The sensor a request records on: Kafka's metric tags (`user`, `client-id`). An empty tag is
/// Kafka's "" (the level is not part of the sensor); a `None` client-id tag is a request without
/// a client id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SensorTags {
    pub user: String,
    pub client_id: Option<String>,
}

/// The values of one quota key (e.g. `producer_byte_rate`) by entity, from the metadata image.
/// Entities with an `ip` part, or any other part, are not client quotas and are left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QuotaTable {
    user_client_id: HashMap<(Name, Name), f64>,
    user: HashMap<Name, f64>,
    client_id: HashMap<Name, f64>,
}

impl QuotaTable {
    /// The entities of `quotas` that have `key`, with its value.
    pub fn from_quotas(quotas: &ClientQuotas, key: &str) -> QuotaTable {
        let mut table = QuotaTable::default();
        for (entity, values) in quotas.iter() {
            let Some(value) = values.get(key) else {
                continue;
            };
            let value = value.0;
            let (user, client) = (entity.get(USER), entity.get(CLIENT_ID));
            match (user, client, entity.len()) {
                (Some(u), Some(c), 2) => {
                    let k = (Name::from_entity(u), Name::from_entity(c));
                    table.user_client_id.insert(k, value);
                }
                (Some(u), None, 1) => {
                    table.user.insert(Name::from_entity(u), value);
                }
                (None, Some(c), 1) => {
                    table.client_id.insert(Name::from_entity(c), value);
                }
                _ => {}
            }
        }
        table
    }

    /// The entity levels present.
    pub fn levels(&self) -> Levels {
        let mut levels = 0;
        if !self.client_id.is_empty() {
            levels |= CLIENT_ID_LEVEL;
        }
        if !self.user.is_empty() {
            levels |= USER_LEVEL;
        }
        if !self.user_client_id.is_empty() {
            levels |= USER_CLIENT_ID_LEVEL;
        }
        levels
    }

    pub fn is_empty(&self) -> bool {
        self.levels() == 0
    }

    fn has_user_client(&self, user: Name, client: Name) -> bool {
        self.user_client_id.contains_key(&(user, client))
    }

    /// The sensor tags of a request from `user` with `client_id`, given the levels enabled
    /// (Kafka's `DefaultQuotaCallback.quotaMetricTags`).
    pub fn sensor_tags(&self, levels: Levels, user: &str, client_id: Option<&str>) -> SensorTags {
        let tags = |u: &str, c: Option<&str>| SensorTags {
            user: u.to_string(),
            client_id: c.map(str::to_string),
        };
        match levels {
            0 | CLIENT_ID_LEVEL => tags("", client_id),
            USER_LEVEL => tags(user, Some("")),
            USER_CLIENT_ID_LEVEL => tags(user, client_id),
            _ => {
                let u = || Name::named(user);
                // A request without a client id matches no named client-id entity.
                let c = || Name::named(client_id.unwrap_or_default());
                let named_c = client_id.is_some();
                // Levels 1-2 (this user with this or the default client id), 3 (this user),
                // 4-5 (the default user with this or the default client id), 6 (the default user);
                // else the client-id levels.
                if (named_c && self.has_user_client(u(), c()))
                    || self.has_user_client(u(), Name::Default)
                {
                    tags(user, client_id)
                } else if self.user.contains_key(&u()) {
                    tags(user, Some(""))
                } else if (named_c && self.has_user_client(Name::Default, c()))
                    || self.has_user_client(Name::Default, Name::Default)
                {
                    tags(user, client_id)
                } else if self.user.contains_key(&Name::Default) {
                    tags(user, Some(""))
                } else {
                    tags("", client_id)
                }
            }
        }
    }

    /// The quota of a sensor (Kafka's `DefaultQuotaCallback.quotaLimit`): by the tags present,
    /// the most specific entity of that level, else its defaults. `None`: no quota (Kafka's
    /// unbounded `Long.MAX_VALUE`).
    pub fn limit(&self, tags: &SensorTags) -> Option<f64> {
        let client = tags.client_id.as_deref()?;
        let user = tags.user.as_str();
        let find = |map: &HashMap<Name, f64>, name: &str| {
            map.get(&Name::named(name))
                .or_else(|| map.get(&Name::Default))
                .copied()
        };
        match (user.is_empty(), client.is_empty()) {
            (false, false) => [
                (Name::named(user), Name::named(client)),
                (Name::named(user), Name::Default),
                (Name::Default, Name::named(client)),
                (Name::Default, Name::Default),
            ]
            .into_iter()
            .find_map(|k| self.user_client_id.get(&k).copied()),
            (false, true) => find(&self.user, user),
            (true, false) => find(&self.client_id, client),
            (true, true) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::quotas::{ClientQuotaRecord, QuotaValue};

    const KEY: &str = "producer_byte_rate";
    const ANON: &str = "ANONYMOUS";

    /// (user part, client-id part, value): `None` no such part, `Some(None)` its `<default>`.
    type Entry = (
        Option<Option<&'static str>>,
        Option<Option<&'static str>>,
        f64,
    );

    fn table(entries: &[Entry]) -> QuotaTable {
        let mut quotas = ClientQuotas::default();
        for (user, client, value) in entries {
            let mut entity = Vec::new();
            if let Some(u) = user {
                entity.push((USER.to_string(), u.map(str::to_string)));
            }
            if let Some(c) = client {
                entity.push((CLIENT_ID.to_string(), c.map(str::to_string)));
            }
            quotas.apply(&ClientQuotaRecord {
                entity,
                key: KEY.into(),
                value: QuotaValue(*value),
                remove: false,
            });
        }
        QuotaTable::from_quotas(&quotas, KEY)
    }

    /// The quota a request from (ANONYMOUS, client) gets with the table's own levels.
    fn applies(t: &QuotaTable, client: Option<&str>) -> Option<f64> {
        t.limit(&t.sensor_tags(t.levels(), ANON, client))
    }

    #[test]
    fn client_id_quota_and_its_default() {
        let t = table(&[(None, Some(Some("x")), 100.0), (None, Some(None), 50.0)]);
        assert_eq!(t.levels(), CLIENT_ID_LEVEL);
        assert_eq!(applies(&t, Some("x")), Some(100.0));
        assert_eq!(applies(&t, Some("y")), Some(50.0), "<default> client-id");
        assert_eq!(
            t.sensor_tags(t.levels(), ANON, Some("y")),
            SensorTags {
                user: String::new(),
                client_id: Some("y".into())
            },
            "each client id its own rate"
        );
        assert_eq!(applies(&t, None), None, "no client id: no client quota");
        assert_eq!(applies(&t, Some("")), None, "an empty client id neither");
    }

    #[test]
    fn a_user_quota_puts_every_client_of_the_user_on_one_rate() {
        let t = table(&[(Some(Some(ANON)), None, 1_000.0)]);
        let a = t.sensor_tags(t.levels(), ANON, Some("a"));
        let b = t.sensor_tags(t.levels(), ANON, Some("b"));
        assert_eq!(a, b);
        assert_eq!(t.limit(&a), Some(1_000.0));
        let other = table(&[(Some(Some("alice")), None, 1_000.0)]);
        assert_eq!(applies(&other, Some("a")), None, "alice is not ANONYMOUS");
        let default_user = table(&[(Some(None), None, 7.0)]);
        assert_eq!(
            applies(&default_user, Some("a")),
            Some(7.0),
            "<default> user covers ANONYMOUS"
        );
    }

    #[test]
    fn precedence_with_every_level() {
        // All eight entities, each removed in precedence order: the next one applies.
        let all: Vec<Entry> = vec![
            (Some(Some(ANON)), Some(Some("x")), 1.0),
            (Some(Some(ANON)), Some(None), 2.0),
            (Some(Some(ANON)), None, 3.0),
            (Some(None), Some(Some("x")), 4.0),
            (Some(None), Some(None), 5.0),
            (Some(None), None, 6.0),
            (None, Some(Some("x")), 7.0),
            (None, Some(None), 8.0),
        ];
        for skip in 0..all.len() {
            let t = table(&all[skip..]);
            // Sticky levels: all three were enabled by the full set.
            let levels = CLIENT_ID_LEVEL | USER_LEVEL | USER_CLIENT_ID_LEVEL;
            let tags = t.sensor_tags(levels, ANON, Some("x"));
            assert_eq!(t.limit(&tags), Some(all[skip].2), "first {skip} removed");
        }
        // Another client id skips the entities naming "x".
        let t = table(&all);
        assert_eq!(applies(&t, Some("y")), Some(2.0));
    }

    #[test]
    fn tags_follow_the_winning_level() {
        let levels = CLIENT_ID_LEVEL | USER_LEVEL;
        let t = table(&[(Some(Some(ANON)), None, 3.0), (None, Some(Some("x")), 7.0)]);
        assert_eq!(
            t.sensor_tags(levels, ANON, Some("x")),
            SensorTags {
                user: ANON.into(),
                client_id: Some(String::new())
            },
            "user beats client-id: one rate for the user"
        );
        let t = table(&[(None, Some(Some("x")), 7.0)]);
        assert_eq!(
            t.sensor_tags(levels, ANON, Some("x")),
            SensorTags {
                user: String::new(),
                client_id: Some("x".into())
            }
        );
        assert_eq!(t.limit(&t.sensor_tags(levels, ANON, Some("x"))), Some(7.0));
    }

    #[test]
    fn entities_that_are_not_client_quotas_are_left_out() {
        let mut quotas = ClientQuotas::default();
        quotas.apply(&ClientQuotaRecord {
            entity: vec![("ip".into(), None)],
            key: KEY.into(),
            value: QuotaValue(1.0),
            remove: false,
        });
        quotas.apply(&ClientQuotaRecord {
            entity: vec![(CLIENT_ID.into(), Some("x".into()))],
            key: "consumer_byte_rate".into(),
            value: QuotaValue(1.0),
            remove: false,
        });
        let t = QuotaTable::from_quotas(&quotas, KEY);
        assert!(t.is_empty());
        assert_eq!(
            QuotaTable::from_quotas(&quotas, "consumer_byte_rate").levels(),
            CLIENT_ID_LEVEL
        );
    }
}
