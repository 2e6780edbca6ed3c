//! Client quotas as metadata (Kafka's ClientQuotaRecord, `ClientQuotasImage`): who a quota is
//! for (an entity: a set of entity types, each with a name or the default), its key and value.
//!
//! Both the controller state and the broker's metadata image keep a [`ClientQuotas`], built by
//! applying [`ClientQuotaRecord`]s in log order. Quotas are stored and described here;
//! `client_quota` enforces the byte rates from the image's copy. Pure data: no I/O, no clock.

use std::collections::BTreeMap;

/// Kafka's entity types (`ClientQuotaEntity.USER / CLIENT_ID / IP`).
pub const USER: &str = "user";
pub const CLIENT_ID: &str = "client-id";
pub const IP: &str = "ip";

/// A quota value (a float64 on the wire). Equality is bitwise, so records and states that carry
/// one compare as `Eq` (a NaN is never accepted by the controller).
#[derive(Debug, Clone, Copy)]
pub struct QuotaValue(pub f64);

impl PartialEq for QuotaValue {
    fn eq(&self, other: &QuotaValue) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for QuotaValue {}

/// Who a quota applies to: entity type -> name, `None` being that type's default (Kafka's
/// `<default>`). Ordered, so one entity has one key however its parts were listed.
pub type QuotaEntity = BTreeMap<String, Option<String>>;

/// ClientQuotaRecord: set (or, with `remove`, delete) one key of one entity's quotas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientQuotaRecord {
    /// (entity type, name or None for the default), in the order written.
    pub entity: Vec<(String, Option<String>)>,
    pub key: String,
    /// Ignored when `remove`.
    pub value: QuotaValue,
    pub remove: bool,
}

impl ClientQuotaRecord {
    /// The entity the record names, as a map (a repeated type keeps its last name, as Kafka's
    /// replay builds a map).
    pub fn entity_map(&self) -> QuotaEntity {
        self.entity.iter().cloned().collect()
    }
}

/// The entity's parts in the order Kafka lists them (its `HashMap` iteration order of these
/// type names: client-id, user, ip), any other type after them by name.
pub fn entity_parts(entity: &QuotaEntity) -> Vec<(String, Option<String>)> {
    let rank = |t: &str| match t {
        CLIENT_ID => 0,
        USER => 1,
        IP => 2,
        _ => 3,
    };
    let mut parts: Vec<(String, Option<String>)> =
        entity.iter().map(|(t, n)| (t.clone(), n.clone())).collect();
    parts.sort_by(|a, b| (rank(&a.0), &a.0).cmp(&(rank(&b.0), &b.0)));
    parts
}

/// Every entity's quotas (keys with their values); an entity without keys is not kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientQuotas {
    entities: BTreeMap<QuotaEntity, BTreeMap<String, QuotaValue>>,
}

impl ClientQuotas {
    /// Applies one record (Kafka's `ClientQuotaControlManager.replay`).
    pub fn apply(&mut self, record: &ClientQuotaRecord) {
        let entity = record.entity_map();
        if record.remove {
            if let Some(values) = self.entities.get_mut(&entity) {
                values.remove(&record.key);
                if values.is_empty() {
                    self.entities.remove(&entity);
                }
            }
        } else {
            self.entities
                .entry(entity)
                .or_default()
                .insert(record.key.clone(), record.value);
        }
    }

    /// The quotas of `entity` (None when it has none).
    pub fn get(&self, entity: &QuotaEntity) -> Option<&BTreeMap<String, QuotaValue>> {
        self.entities.get(entity)
    }

    /// Every entity with its quotas, ordered by entity.
    pub fn iter(&self) -> impl Iterator<Item = (&QuotaEntity, &BTreeMap<String, QuotaValue>)> {
        self.entities.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }

    /// Records whose replay builds these quotas from none (one per entity and key).
    pub fn records(&self) -> Vec<ClientQuotaRecord> {
        let mut out = Vec::new();
        for (entity, values) in &self.entities {
            for (key, value) in values {
                out.push(ClientQuotaRecord {
                    entity: entity_parts(entity),
                    key: key.clone(),
                    value: *value,
                    remove: false,
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(entity: &[(&str, Option<&str>)], key: &str, value: f64) -> ClientQuotaRecord {
        ClientQuotaRecord {
            entity: entity
                .iter()
                .map(|(t, n)| (t.to_string(), n.map(str::to_string)))
                .collect(),
            key: key.into(),
            value: QuotaValue(value),
            remove: false,
        }
    }

    #[test]
    fn records_set_replace_and_remove_keys_and_empty_entities_go() {
        let mut q = ClientQuotas::default();
        let alice = [(USER, Some("alice"))];
        q.apply(&set(&alice, "producer_byte_rate", 1024.0));
        q.apply(&set(&alice, "consumer_byte_rate", 2048.0));
        q.apply(&set(&alice, "producer_byte_rate", 4096.0));
        let entity: QuotaEntity = [(USER.to_string(), Some("alice".to_string()))].into();
        let values = q.get(&entity).unwrap();
        assert_eq!(values.get("producer_byte_rate"), Some(&QuotaValue(4096.0)));
        assert_eq!(values.get("consumer_byte_rate"), Some(&QuotaValue(2048.0)));
        let mut remove = set(&alice, "producer_byte_rate", 0.0);
        remove.remove = true;
        q.apply(&remove);
        remove.key = "consumer_byte_rate".into();
        q.apply(&remove);
        assert!(
            q.get(&entity).is_none(),
            "an entity without keys is dropped"
        );
        assert!(q.is_empty());
    }

    #[test]
    fn the_order_of_an_entitys_parts_does_not_make_another_entity() {
        let mut q = ClientQuotas::default();
        q.apply(&set(
            &[(USER, Some("u")), (CLIENT_ID, None)],
            "request_percentage",
            50.0,
        ));
        q.apply(&set(
            &[(CLIENT_ID, None), (USER, Some("u"))],
            "request_percentage",
            75.0,
        ));
        assert_eq!(q.iter().count(), 1);
        let records = q.records();
        assert_eq!(records.len(), 1);
        assert_eq!(
            records[0].entity,
            vec![
                (CLIENT_ID.to_string(), None),
                (USER.to_string(), Some("u".to_string()))
            ],
            "listed client-id first, as Kafka's map lists them"
        );
        assert_eq!(records[0].value, QuotaValue(75.0));
        let mut rebuilt = ClientQuotas::default();
        for r in &records {
            rebuilt.apply(r);
        }
        assert_eq!(rebuilt, q);
    }
}
