//! Configuration values and Kafka's parsing of them: the type conversions of Kafka's
//! `ConfigDef.parseType` and the range/string validators, with Kafka's messages
//! ("Invalid value x for configuration k: Not a number of type INT"). Pure functions, no I/O.

use super::known_keys::{Check, Kind, KnownKey};
use super::ConfigError;

/// A configuration value as a source gave it: properties files and the environment give strings,
/// TOML gives typed values.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
    Bool(bool),
}

/// Kafka's `ConfigException(name, value, message)` text.
pub(super) fn invalid(key: &str, value: &Value, reason: impl std::fmt::Display) -> ConfigError {
    ConfigError::Key {
        key: key.to_string(),
        origin: String::new(),
        reason: format!(
            "Invalid value {} for configuration {key}: {reason}",
            value.to_raw()
        ),
    }
}

impl Value {
    /// The value as text, as Kafka would have read it from `server.properties`.
    pub fn to_raw(&self) -> String {
        match self {
            Value::Str(s) => s.clone(),
            Value::Int(i) => i.to_string(),
            Value::Bool(b) => b.to_string(),
        }
    }

    pub(super) fn as_str(&self, key: &str) -> Result<&str, ConfigError> {
        match self {
            Value::Str(s) => Ok(s),
            _ => Err(invalid(key, self, "Expected value to be a string")),
        }
    }

    /// Kafka's BOOLEAN: `true`/`false`, case-insensitive, surrounding blanks trimmed.
    pub(super) fn as_bool(&self, key: &str) -> Result<bool, ConfigError> {
        match self {
            Value::Bool(b) => Ok(*b),
            Value::Str(s) if s.trim().eq_ignore_ascii_case("true") => Ok(true),
            Value::Str(s) if s.trim().eq_ignore_ascii_case("false") => Ok(false),
            _ => Err(invalid(
                key,
                self,
                "Expected value to be either true or false",
            )),
        }
    }

    /// Kafka's DOUBLE.
    pub(super) fn as_f64(&self, key: &str) -> Result<f64, ConfigError> {
        match self {
            Value::Int(i) => Ok(*i as f64),
            Value::Str(s) => s
                .trim()
                .parse()
                .map_err(|_| invalid(key, self, "Not a number of type DOUBLE")),
            Value::Bool(_) => Err(invalid(key, self, "Not a number of type DOUBLE")),
        }
    }

    /// An integer in `min..=max`, with Kafka's range messages. The type name in the "not a
    /// number" message follows the width asked for (INT for an i32 range, else LONG).
    pub(super) fn as_int(&self, key: &str, min: i64, max: i64) -> Result<i64, ConfigError> {
        let kind = if max <= i32::MAX as i64 && min >= i32::MIN as i64 {
            Kind::Int
        } else {
            Kind::Long
        };
        let v = self.as_integer(key, kind)?;
        if v < min {
            return Err(invalid(key, self, format!("Value must be at least {min}")));
        }
        if v > max {
            return Err(invalid(
                key,
                self,
                format!("Value must be no more than {max}"),
            ));
        }
        Ok(v)
    }

    /// A whole number of Kafka type `kind` (SHORT, INT or LONG: the width is checked).
    fn as_integer(&self, key: &str, kind: Kind) -> Result<i64, ConfigError> {
        let not_a_number = || invalid(key, self, format!("Not a number of type {}", kind.name()));
        let v = match self {
            Value::Int(i) => *i,
            Value::Str(s) => s.trim().parse::<i64>().map_err(|_| not_a_number())?,
            Value::Bool(_) => return Err(not_a_number()),
        };
        let fits = match kind {
            Kind::Short => i16::try_from(v).is_ok(),
            Kind::Int => i32::try_from(v).is_ok(),
            _ => true,
        };
        if fits {
            Ok(v)
        } else {
            Err(not_a_number())
        }
    }
}

/// Checks `value` against Kafka's definition of the key: its type, then its validator. Used for
/// every key in Kafka's table, implemented or not, so a value Kafka refuses is refused here.
pub fn check_known(key: &KnownKey, value: &Value) -> Result<(), ConfigError> {
    let name = key.name;
    match key.kind {
        Kind::Boolean => {
            value.as_bool(name)?;
        }
        Kind::Short | Kind::Int | Kind::Long => {
            let v = value.as_integer(name, key.kind)?;
            check_integer(name, value, v, key.check)?;
        }
        Kind::Double => {
            let v = value.as_f64(name)?;
            let (lo, hi) = match key.check {
                Check::AtLeastF(lo) => (lo, f64::INFINITY),
                Check::BetweenF(lo, hi) => (lo, hi),
                Check::AtLeast(lo) => (lo as f64, f64::INFINITY),
                Check::Between(lo, hi) => (lo as f64, hi as f64),
                _ => (f64::NEG_INFINITY, f64::INFINITY),
            };
            if v < lo {
                return Err(invalid(name, value, format!("Value must be at least {lo}")));
            }
            if v > hi {
                return Err(invalid(
                    name,
                    value,
                    format!("Value must be no more than {hi}"),
                ));
            }
        }
        Kind::String | Kind::Class | Kind::Password => {
            let s = value.to_raw();
            let s = s.trim();
            match key.check {
                Check::OneOf(options, case_insensitive) => {
                    let ok = options.iter().any(|o| {
                        if case_insensitive {
                            o.eq_ignore_ascii_case(s)
                        } else {
                            *o == s
                        }
                    });
                    if !ok {
                        return Err(invalid(
                            name,
                            value,
                            format!("String must be one of: {}", options.join(", ")),
                        ));
                    }
                }
                Check::NonEmptyString if s.is_empty() => {
                    return Err(invalid(name, value, "String must be non-empty"));
                }
                _ => {}
            }
        }
        Kind::List => {
            let raw = value.to_raw();
            let items = split_list(&raw);
            match key.check {
                Check::ListOf(options) => {
                    if let Some(bad) = items.iter().find(|i| !options.contains(i)) {
                        return Err(invalid(
                            name,
                            value,
                            format!(
                                "Invalid value {bad}: String must be one of: {}",
                                options.join(", ")
                            ),
                        ));
                    }
                }
                Check::NonEmptyList if items.is_empty() => {
                    return Err(invalid(name, value, "Empty list is not allowed"));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

fn check_integer(name: &str, value: &Value, v: i64, check: Check) -> Result<(), ConfigError> {
    let (lo, hi) = match check {
        Check::AtLeast(lo) => (lo, i64::MAX),
        Check::Between(lo, hi) => (lo, hi),
        Check::BetweenOrMinusOne(_, _) if v == -1 => return Ok(()),
        Check::BetweenOrMinusOne(lo, hi) => (lo, hi),
        _ => return Ok(()),
    };
    if v < lo {
        return Err(invalid(name, value, format!("Value must be at least {lo}")));
    }
    if v > hi {
        return Err(invalid(
            name,
            value,
            format!("Value must be no more than {hi}"),
        ));
    }
    Ok(())
}

/// Kafka's LIST parsing: comma-separated, each element trimmed, an empty string is an empty list.
pub fn split_list(raw: &str) -> Vec<&str> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Vec::new();
    }
    raw.split(',').map(str::trim).collect()
}

/// Renders a double like Java's `Double.toString` for the values configs use (0.5, 1.0).
pub fn format_double(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e7 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}
