//! The readers every section of a tenant document uses: durations, effects, lists of strings,
//! amounts in minor units, unknown keys. Each section's module imports them from here, so no
//! section imports the document module (`tenant/mod.rs`) back.

use crate::FieldError;
use crate::ids::{format_duration, parse_duration};
use crate::vocab::Effect;
pub(crate) use crate::vocab::got;
use serde_json::{Map, Value};
use std::time::Duration;

/// Serializes a duration in the document's own form (`5m`, `24h`).
pub(super) fn ser_duration<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_duration(*d))
}

/// Like `ser_duration` for an optional duration (`null` when absent).
pub(super) fn ser_duration_opt<S: serde::Serializer>(
    d: &Option<Duration>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_str(&format_duration(*d)),
        None => s.serialize_none(),
    }
}

/// Appends an "unknown field" error for every key of `m` (at `path`) not in `allowed`.
pub(super) fn unknown_keys(
    errs: &mut Vec<FieldError>,
    path: &str,
    m: &Map<String, Value>,
    allowed: &[&str],
) {
    for k in m.keys() {
        if !allowed.contains(&k.as_str()) {
            let p = if path.is_empty() {
                k.clone()
            } else {
                format!("{path}.{k}")
            };
            errs.push(FieldError::new(
                p,
                format!("unknown field; expected one of: {}", allowed.join(", ")),
            ));
        }
    }
}

/// A duration like `90s`, `5m`, `24h` or `7d`; `default` when absent or wrong (with an error).
pub(super) fn get_duration(
    errs: &mut Vec<FieldError>,
    path: &str,
    v: Option<&Value>,
    default: Duration,
) -> Duration {
    match v {
        None => default,
        Some(Value::String(s)) => match parse_duration(s) {
            Ok(d) => d,
            Err(e) => {
                errs.push(FieldError::new(path, e));
                default
            }
        },
        Some(_) => {
            errs.push(FieldError::new(
                path,
                "must be a duration like 90s, 5m, 24h or 7d",
            ));
            default
        }
    }
}

/// An effect: "is required" when missing (or YAML null), "must be one of" when present and
/// wrong, quoting what was given.
pub(super) fn get_effect(
    errs: &mut Vec<FieldError>,
    path: &str,
    v: Option<&Value>,
) -> Option<Effect> {
    match v {
        None | Some(Value::Null) => {
            errs.push(FieldError::new(
                path,
                "is required: allow, escalate or block",
            ));
            None
        }
        Some(v) => match v.as_str().and_then(Effect::parse) {
            Some(e) => Some(e),
            None => {
                errs.push(FieldError::new(
                    path,
                    format!("must be one of allow, escalate, block (got {})", got(v)),
                ));
                None
            }
        },
    }
}

/// An amount setting (`confirm_over`, `passkey_over`, a stage's `over`): a non-negative
/// integer in minor units, or `None` with an error at `path` naming the value given.
pub(super) fn minor_units(errs: &mut Vec<FieldError>, path: String, v: &Value) -> Option<i64> {
    match v.as_i64() {
        Some(n) if n >= 0 => Some(n),
        _ => {
            errs.push(FieldError::new(
                path,
                format!(
                    "must be a non-negative integer in minor units (got {})",
                    got(v)
                ),
            ));
            None
        }
    }
}

/// A list of strings; empty when absent or wrong (with an error).
pub(super) fn get_strings(
    errs: &mut Vec<FieldError>,
    path: &str,
    v: Option<&Value>,
) -> Vec<String> {
    match v {
        None => Vec::new(),
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        Some(_) => {
            errs.push(FieldError::new(path, "must be a list of strings"));
            Vec::new()
        }
    }
}
