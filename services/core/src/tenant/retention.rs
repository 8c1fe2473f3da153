//! `retention:` of a tenant document: how long decided proposals keep their customer data.
//!
//! ```yaml
//! retention:
//!   decided_after: 30d   # params, source text and reasons of decided proposals are purged
//!                        # this long after their last state change
//! ```
//! Absent, the operator's global default applies (`actiond audit purge --decided-after`).

use super::read::{get_duration, ser_duration_opt, unknown_keys};
use crate::FieldError;
use serde::Serialize;
use serde_json::Value;
use std::time::Duration;

/// Shortest accepted `decided_after`: one hour (a shorter one is almost surely a typo for days).
pub const MIN_DECIDED_AFTER: Duration = Duration::from_secs(3600);
/// Longest `retention.decided_after` (about 100 years): it is subtracted from the database
/// clock, and an unbounded value runs past the timestamp range.
pub const MAX_DECIDED_AFTER: Duration = Duration::from_secs(36_500 * 86_400);

/// `retention:` of a tenant document.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Retention {
    /// Age (since the last state change) after which a decided proposal's params, source text
    /// and reasons are purged; `None` = the global default.
    #[serde(serialize_with = "ser_duration_opt")]
    pub decided_after: Option<Duration>,
}

/// `retention:` (optional).
pub(super) fn parse_retention(errs: &mut Vec<FieldError>, v: Option<&Value>) -> Retention {
    let Some(v) = v else {
        return Retention::default();
    };
    let Some(m) = v.as_object() else {
        errs.push(FieldError::new(
            "retention",
            "must be a mapping like {decided_after: 30d}",
        ));
        return Retention::default();
    };
    unknown_keys(errs, "retention", m, &["decided_after"]);
    let decided_after = m.get("decided_after").map(|d| {
        let d = get_duration(errs, "retention.decided_after", Some(d), MIN_DECIDED_AFTER);
        if !(MIN_DECIDED_AFTER..=MAX_DECIDED_AFTER).contains(&d) {
            errs.push(FieldError::new(
                "retention.decided_after",
                "must be from 1h to 36500d",
            ));
        }
        d
    });
    Retention { decided_after }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        let mut errs = Vec::new();
        let r = parse_retention(
            &mut errs,
            Some(&serde_json::json!({"decided_after": "30d"})),
        );
        assert!(errs.is_empty());
        assert_eq!(r.decided_after, Some(Duration::from_secs(30 * 86_400)));
        for bad in [
            serde_json::json!({"decided_after": "10m"}),
            serde_json::json!({"decided_after": "36501d"}),
            serde_json::json!({"decided_after": 30}),
            serde_json::json!({"after": "30d"}),
            serde_json::json!("30d"),
        ] {
            let mut errs = Vec::new();
            parse_retention(&mut errs, Some(&bad));
            assert!(!errs.is_empty(), "{bad}");
        }
    }
}
