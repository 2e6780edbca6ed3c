//! `sluice.toml`: TOML whose keys are Kafka's dotted names. In TOML an unquoted dotted key
//! (`log.segment.bytes = 1048576`) *is* a nest of tables, so tables are flattened back to dotted
//! names; `"log.segment.bytes" = 1048576` (quoted) means the same key.
//!
//! Two things tables can hide are refused rather than guessed at:
//! - the same Kafka key spelled twice (`"log.segment.bytes"` and `[log] segment.bytes`): TOML sees
//!   two keys, the broker would silently keep one;
//! - a key written after a `[table]` header belongs to that table (`[log]` then `num.partitions`
//!   is `log.num.partitions`): that key is unknown, and the unknown-key error says which known key
//!   it ends with and that it sits under a table (see `Config::from_entries`).
//!
//! Pure: parses text, performs no I/O.

use std::collections::BTreeMap;

use super::Value;

/// Parses TOML text into flattened dotted keys.
pub fn parse(text: &str) -> Result<BTreeMap<String, Value>, String> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| e.to_string())?;
    let mut out = BTreeMap::new();
    flatten("", &table, &mut out)?;
    Ok(out)
}

fn flatten(
    prefix: &str,
    table: &toml::Table,
    out: &mut BTreeMap<String, Value>,
) -> Result<(), String> {
    for (k, v) in table {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        let value = match v {
            toml::Value::Table(t) => {
                flatten(&key, t, out)?;
                continue;
            }
            toml::Value::String(s) => Value::Str(s.clone()),
            toml::Value::Integer(i) => Value::Int(*i),
            toml::Value::Boolean(b) => Value::Bool(*b),
            toml::Value::Array(items) => {
                // Kafka's LIST type: the elements as a comma-separated string.
                let mut parts = Vec::with_capacity(items.len());
                for item in items {
                    match item {
                        toml::Value::String(s) => parts.push(s.clone()),
                        toml::Value::Integer(i) => parts.push(i.to_string()),
                        _ => return Err(format!("key `{key}`: list elements must be strings")),
                    }
                }
                Value::Str(parts.join(","))
            }
            toml::Value::Float(f) => Value::Str(f.to_string()),
            toml::Value::Datetime(_) => {
                return Err(format!("key `{key}`: dates are not configuration values"))
            }
        };
        if out.insert(key.clone(), value).is_some() {
            return Err(format!(
                "key `{key}` is given twice (once quoted, once through a table or dotted key); \
                 keep one"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotted_quoted_and_table_spellings_are_one_key() {
        for text in [
            "log.segment.bytes = 2048\n",
            "\"log.segment.bytes\" = 2048\n",
            "[log]\nsegment.bytes = 2048\n",
            "[log.segment]\nbytes = 2048\n",
        ] {
            let m = parse(text).unwrap();
            assert_eq!(
                m.get("log.segment.bytes"),
                Some(&Value::Int(2048)),
                "{text}"
            );
            assert_eq!(m.len(), 1, "{text}");
        }
    }

    #[test]
    fn the_same_key_twice_is_refused() {
        let e = parse("\"log.segment.bytes\" = 1\n[log]\nsegment.bytes = 2\n").unwrap_err();
        assert!(
            e.contains("log.segment.bytes") && e.contains("twice"),
            "{e}"
        );
    }

    #[test]
    fn arrays_become_kafka_lists() {
        let m = parse("process.roles = [\"broker\", \"controller\"]\n").unwrap();
        assert_eq!(
            m["process.roles"],
            Value::Str("broker,controller".to_string())
        );
    }
}
