//! The arithmetic of config changes, as Kafka's controller does it: IncrementalAlterConfigs
//! operations (SET / DELETE / APPEND / SUBTRACT) and legacy AlterConfigs (replace everything).
//! Pure functions over `key -> value` maps; validation of the result is the caller's.

use std::collections::BTreeMap;

/// IncrementalAlterConfigs `config_operation` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlterOp {
    Set,
    Delete,
    Append,
    Subtract,
}

impl AlterOp {
    pub fn from_id(id: i8) -> Option<AlterOp> {
        match id {
            0 => Some(AlterOp::Set),
            1 => Some(AlterOp::Delete),
            2 => Some(AlterOp::Append),
            3 => Some(AlterOp::Subtract),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            AlterOp::Set => "SET",
            AlterOp::Delete => "DELETE",
            AlterOp::Append => "APPEND",
            AlterOp::Subtract => "SUBTRACT",
        }
    }
}

/// One requested change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterRequest {
    pub name: String,
    pub op: AlterOp,
    pub value: Option<String>,
}

/// What the caller knows about a key: whether it is a LIST, and its default (for APPEND/SUBTRACT
/// on a key that is not set yet).
pub struct KeyInfo {
    pub is_list: bool,
    pub default: Option<String>,
}

/// Applies `ops` in order to `current`, returning the new map or Kafka's INVALID_CONFIG message.
pub fn apply_incremental(
    current: &BTreeMap<String, String>,
    ops: &[AlterRequest],
    info: &dyn Fn(&str) -> KeyInfo,
) -> Result<BTreeMap<String, String>, String> {
    let mut out = current.clone();
    for op in ops {
        match op.op {
            AlterOp::Set => {
                let v = op
                    .value
                    .clone()
                    .ok_or_else(|| format!("Null value not supported for : {}", op.name))?;
                out.insert(op.name.clone(), v);
            }
            AlterOp::Delete => {
                out.remove(&op.name);
            }
            AlterOp::Append | AlterOp::Subtract => {
                let key = info(&op.name);
                if !key.is_list {
                    return Err(format!(
                        "Can't {} to key {} because its type is not LIST.",
                        op.op.name(),
                        op.name
                    ));
                }
                let old = out.get(&op.name).cloned().or(key.default);
                let mut parts: Vec<String> = old
                    .as_deref()
                    .unwrap_or("")
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect();
                let given = op.value.as_deref().unwrap_or("");
                for v in given.split(',') {
                    if op.op == AlterOp::Append {
                        if !parts.iter().any(|p| p == v) {
                            parts.push(v.to_string());
                        }
                    } else {
                        parts.retain(|p| p != v);
                    }
                }
                out.insert(op.name.clone(), parts.join(","));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(key: &str) -> KeyInfo {
        KeyInfo {
            is_list: key == "cleanup.policy",
            default: (key == "cleanup.policy").then(|| "delete".to_string()),
        }
    }

    fn op(name: &str, op: AlterOp, value: Option<&str>) -> AlterRequest {
        AlterRequest {
            name: name.into(),
            op,
            value: value.map(str::to_string),
        }
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn set_and_delete_replace_and_remove_keys() {
        let cur = map(&[("retention.ms", "1"), ("segment.ms", "5")]);
        let out = apply_incremental(
            &cur,
            &[
                op("retention.ms", AlterOp::Set, Some("2")),
                op("segment.ms", AlterOp::Delete, None),
                op("not.there", AlterOp::Delete, None),
            ],
            &info,
        )
        .unwrap();
        assert_eq!(out, map(&[("retention.ms", "2")]));
    }

    #[test]
    fn append_starts_from_the_default_and_skips_duplicates() {
        let out = apply_incremental(
            &BTreeMap::new(),
            &[op("cleanup.policy", AlterOp::Append, Some("compact"))],
            &info,
        )
        .unwrap();
        assert_eq!(out, map(&[("cleanup.policy", "delete,compact")]));
        let again = apply_incremental(
            &out,
            &[op(
                "cleanup.policy",
                AlterOp::Append,
                Some("delete,compact"),
            )],
            &info,
        )
        .unwrap();
        assert_eq!(again, out);
    }

    #[test]
    fn subtract_removes_items_and_can_leave_an_empty_list() {
        let cur = map(&[("cleanup.policy", "compact,delete")]);
        let out = apply_incremental(
            &cur,
            &[op("cleanup.policy", AlterOp::Subtract, Some("delete"))],
            &info,
        )
        .unwrap();
        assert_eq!(out, map(&[("cleanup.policy", "compact")]));
        let out = apply_incremental(
            &out,
            &[op("cleanup.policy", AlterOp::Subtract, Some("compact"))],
            &info,
        )
        .unwrap();
        assert_eq!(out, map(&[("cleanup.policy", "")]));
    }

    #[test]
    fn list_ops_on_scalar_keys_fail_with_kafkas_message() {
        let e = apply_incremental(
            &BTreeMap::new(),
            &[op("retention.ms", AlterOp::Append, Some("1"))],
            &info,
        )
        .unwrap_err();
        assert_eq!(
            e,
            "Can't APPEND to key retention.ms because its type is not LIST."
        );
        let e = apply_incremental(
            &BTreeMap::new(),
            &[op("segment.ms", AlterOp::Subtract, Some("1"))],
            &info,
        )
        .unwrap_err();
        assert_eq!(
            e,
            "Can't SUBTRACT to key segment.ms because its type is not LIST."
        );
    }

    #[test]
    fn ops_apply_in_order() {
        let out = apply_incremental(
            &BTreeMap::new(),
            &[
                op("retention.ms", AlterOp::Set, Some("1")),
                op("retention.ms", AlterOp::Delete, None),
                op("retention.ms", AlterOp::Set, Some("3")),
            ],
            &info,
        )
        .unwrap();
        assert_eq!(out, map(&[("retention.ms", "3")]));
    }
}
