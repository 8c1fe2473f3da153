//! `budgets:` of a tenant document: declared spending limits that escalate, never deny.
//!
//! ```yaml
//! budgets:
//!   - action: billing.refund.issue   # an action this document enables
//!     sum_of: amount                 # an integer param of that action (minor units for money)
//!     max: 50000                     # inclusive limit of the sum over the window
//!     per: 24h                       # sliding window (1m … 366d)
//!     scope: agent                   # agent: each agent has its own; tenant: one for all
//!     reason: over the daily refund budget   # optional; shown to the agent and approvers
//! ```
//!
//! Under budget the rules decide; a proposal that would take a budget past `max` escalates with
//! the budget's reason whatever the rules said (severity only rises: a block stays a block).
//! The policy worker applies budgets after the rules, with the reservation made atomically in
//! Postgres (see `actiond_store::budgets`).

use super::read::{get_duration, got, ser_duration, unknown_keys};
use crate::FieldError;
use crate::ids::format_duration;
use crate::vocab::HandlerKind;
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

/// Maximum number of budgets in one document.
pub const MAX_BUDGETS: usize = 50;
/// Shortest budget window.
pub const MIN_BUDGET_WINDOW: Duration = Duration::from_secs(60);
/// Longest budget window.
pub const MAX_BUDGET_WINDOW: Duration = Duration::from_secs(366 * 86_400);
/// Largest `max` (2^53 − 1, the largest integer JSON carries exactly).
pub const MAX_BUDGET_LIMIT: i64 = (1 << 53) - 1;

/// Whose proposals share one budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetScope {
    /// Each agent has its own budget.
    Agent,
    /// All agents of the tenant share one.
    Tenant,
}

impl BudgetScope {
    /// The written name (`agent`, `tenant`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Agent => "agent",
            Self::Tenant => "tenant",
        }
    }
}

/// One declared budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Budget {
    /// The budgeted action (enabled in `handlers:`).
    pub action: String,
    /// The integer param summed (`amount`, in minor units for money).
    pub sum_of: String,
    /// Inclusive limit of the sum over the window.
    pub max: i64,
    /// Sliding window the sum is taken over.
    #[serde(serialize_with = "ser_duration")]
    pub per: Duration,
    /// Per agent or for the whole tenant.
    pub scope: BudgetScope,
    /// Reason given when the budget escalates a proposal.
    pub reason: String,
}

impl Budget {
    /// The reason used when the document gives none: `over the daily billing.refund.issue
    /// budget` (hourly, daily, weekly for 1h, 24h, 7d; otherwise `over the 12h … budget`).
    pub fn default_reason(action: &str, per: Duration) -> String {
        let period = match per.as_secs() {
            3600 => "hourly".to_owned(),
            86_400 => "daily".to_owned(),
            604_800 => "weekly".to_owned(),
            _ => format_duration(per),
        };
        format!("over the {period} {action} budget")
    }

    /// Whether a proposal adding `amount` to `used` (the window's sum so far) stays within
    /// `max`.
    pub fn fits(&self, used: i64, amount: i64) -> bool {
        used.saturating_add(amount) <= self.max
    }
}

/// `budgets:` (optional; none when absent). `handlers` are the document's enabled actions: a
/// budget on an action the tenant does not enable is an error.
pub(super) fn parse_budgets<H>(
    errs: &mut Vec<FieldError>,
    v: Option<&Value>,
    handlers: &BTreeMap<String, H>,
) -> Vec<Budget> {
    let list = match v {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::Array(a)) => a,
        Some(_) => {
            errs.push(FieldError::new(
                "budgets",
                "must be a list of {action, sum_of, max, per, scope}",
            ));
            return Vec::new();
        }
    };
    if list.len() > MAX_BUDGETS {
        errs.push(FieldError::new(
            "budgets",
            format!("has more than {MAX_BUDGETS} budgets"),
        ));
    }
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (i, b) in list.iter().enumerate() {
        let p = format!("budgets[{i}]");
        if let Some(b) = parse_budget(errs, &p, b, handlers) {
            if !seen.insert((b.action.clone(), b.sum_of.clone(), b.scope, b.per)) {
                errs.push(FieldError::new(
                    p,
                    "duplicates an earlier budget with the same action, sum_of, scope and per",
                ));
            } else {
                out.push(b);
            }
        }
    }
    out
}

/// One budget at path `p`; every field is checked and all errors reported.
fn parse_budget<H>(
    errs: &mut Vec<FieldError>,
    p: &str,
    v: &Value,
    handlers: &BTreeMap<String, H>,
) -> Option<Budget> {
    let Some(m) = v.as_object() else {
        errs.push(FieldError::new(
            p,
            "must be a mapping with action, sum_of, max, per, scope",
        ));
        return None;
    };
    let before = errs.len();
    unknown_keys(
        errs,
        p,
        m,
        &["action", "sum_of", "max", "per", "scope", "reason"],
    );
    let kind = budget_action(errs, p, m.get("action"), handlers);
    let sum_of = budget_sum_of(errs, p, m.get("sum_of"), kind);
    let max = match m.get("max") {
        Some(v) => match v.as_i64() {
            Some(n) if (1..=MAX_BUDGET_LIMIT).contains(&n) => n,
            _ => {
                errs.push(FieldError::new(
                    format!("{p}.max"),
                    format!(
                        "must be a positive integer of at most {MAX_BUDGET_LIMIT}, in the param's units (got {})",
                        got(v)
                    ),
                ));
                0
            }
        },
        None => {
            errs.push(FieldError::new(
                format!("{p}.max"),
                "is required: the inclusive limit of the sum, in the param's units (minor units for money)",
            ));
            0
        }
    };
    let per = budget_per(errs, p, m.get("per"));
    let scope = match m.get("scope").and_then(Value::as_str) {
        Some("agent") => Some(BudgetScope::Agent),
        Some("tenant") => Some(BudgetScope::Tenant),
        _ => {
            let rule = match m.get("scope") {
                None | Some(Value::Null) => "is required: agent or tenant".to_owned(),
                Some(v) => format!("must be agent or tenant (got {})", got(v)),
            };
            errs.push(FieldError::new(format!("{p}.scope"), rule));
            None
        }
    };
    let reason = match m.get("reason") {
        None => None,
        Some(Value::String(s)) if !s.trim().is_empty() && s.len() <= 500 => Some(s.clone()),
        Some(_) => {
            errs.push(FieldError::new(
                format!("{p}.reason"),
                "must be non-empty text of at most 500 characters, shown to agents and approvers",
            ));
            None
        }
    };
    let (kind, scope) = (kind?, scope?);
    if errs.len() > before {
        return None;
    }
    Some(Budget {
        action: kind.action().to_owned(),
        sum_of,
        max,
        per,
        scope,
        reason: reason.unwrap_or_else(|| Budget::default_reason(kind.action(), per)),
    })
}

/// `action`: a registry action the document enables.
fn budget_action<H>(
    errs: &mut Vec<FieldError>,
    p: &str,
    v: Option<&Value>,
    handlers: &BTreeMap<String, H>,
) -> Option<HandlerKind> {
    let path = format!("{p}.action");
    let Some(name) = v.and_then(Value::as_str) else {
        errs.push(FieldError::new(
            path,
            "is required: an action enabled in handlers",
        ));
        return None;
    };
    let Some(kind) = HandlerKind::lookup(name) else {
        errs.push(FieldError::new(
            path,
            format!("{name:?} is not in the handler registry"),
        ));
        return None;
    };
    if !handlers.contains_key(name) {
        errs.push(FieldError::new(
            path,
            format!("{name:?} is not enabled in this document's handlers"),
        ));
        return None;
    }
    Some(kind)
}

/// `sum_of`: an integer param of the action's params schema.
fn budget_sum_of(
    errs: &mut Vec<FieldError>,
    p: &str,
    v: Option<&Value>,
    kind: Option<HandlerKind>,
) -> String {
    let path = format!("{p}.sum_of");
    let Some(name) = v.and_then(Value::as_str) else {
        errs.push(FieldError::new(
            path,
            "is required: an integer param of the action (amount)",
        ));
        return String::new();
    };
    if let Some(kind) = kind {
        let schema = kind.params_schema();
        let is_integer = schema
            .pointer(&format!(
                "/properties/{}/type",
                name.replace('~', "~0").replace('/', "~1")
            ))
            .and_then(Value::as_str)
            == Some("integer");
        if !is_integer {
            let integers: Vec<String> = schema
                .get("properties")
                .and_then(Value::as_object)
                .map(|props| {
                    props
                        .iter()
                        .filter(|(_, s)| s.get("type").and_then(Value::as_str) == Some("integer"))
                        .map(|(k, _)| k.clone())
                        .collect()
                })
                .unwrap_or_default();
            let rule = if integers.is_empty() {
                format!("{} has no integer param to sum", kind.action())
            } else {
                format!(
                    "must be an integer param of {} ({}), got {name:?}",
                    kind.action(),
                    integers.join(", ")
                )
            };
            errs.push(FieldError::new(path, rule));
        }
    }
    name.to_owned()
}

/// `per`: a window from [`MIN_BUDGET_WINDOW`] to [`MAX_BUDGET_WINDOW`].
fn budget_per(errs: &mut Vec<FieldError>, p: &str, v: Option<&Value>) -> Duration {
    let path = format!("{p}.per");
    if v.is_none() {
        errs.push(FieldError::new(
            path,
            "is required: the window, a duration like 1h, 24h or 7d",
        ));
        return MIN_BUDGET_WINDOW;
    }
    let before = errs.len();
    let per = get_duration(errs, &path, v, MIN_BUDGET_WINDOW);
    if errs.len() == before && !(MIN_BUDGET_WINDOW..=MAX_BUDGET_WINDOW).contains(&per) {
        errs.push(FieldError::new(path, "must be from 1m to 366d"));
    }
    per
}

#[cfg(test)]
mod tests {
    use crate::tenant::TenantDocument;

    const DOC: &str = r#"
tenant: acme
policy:
  default: allow
handlers:
  billing.refund.issue:
    credential: payments
    max_amount: 100000
  webhook.post:
    url: https://hooks.example/x
    credential: hooks
budgets:
  - action: billing.refund.issue
    sum_of: amount
    max: 50000
    per: 24h
    scope: agent
"#;

    fn errors_of(doc: &str) -> Vec<String> {
        TenantDocument::parse(doc)
            .unwrap_err()
            .0
            .into_iter()
            .map(|f| f.to_string())
            .collect()
    }

    #[test]
    fn a_valid_budget_parses_with_a_default_reason() {
        let d = TenantDocument::parse(DOC).unwrap();
        assert_eq!(d.budgets.len(), 1);
        let b = &d.budgets[0];
        assert_eq!((b.max, b.per.as_secs()), (50000, 86_400));
        assert_eq!(b.reason, "over the daily billing.refund.issue budget");
        assert!(b.fits(49_000, 1_000));
        assert!(!b.fits(49_000, 1_001));
        let d = TenantDocument::parse(&format!("{DOC}    reason: over the daily refund budget\n"))
            .unwrap();
        assert_eq!(d.budgets[0].reason, "over the daily refund budget");
    }

    #[test]
    fn every_wrong_field_is_named() {
        let e = errors_of(&DOC.replace("max: 50000", "max: -5"));
        assert_eq!(
            e,
            [
                "budgets[0].max: must be a positive integer of at most 9007199254740991, in the param's units (got -5)"
            ]
        );
        let e = errors_of(&DOC.replace("sum_of: amount", "sum_of: currency"));
        assert_eq!(
            e,
            [
                "budgets[0].sum_of: must be an integer param of billing.refund.issue (amount), got \"currency\""
            ]
        );
        let e = errors_of(&DOC.replace("scope: agent", "scope: team"));
        assert_eq!(
            e,
            ["budgets[0].scope: must be agent or tenant (got \"team\")"]
        );
        let e = errors_of(&DOC.replace("per: 24h", "per: 10s"));
        assert_eq!(e, ["budgets[0].per: must be from 1m to 366d"]);
        let e = errors_of(&DOC.replace("per: 24h", "per: daily"));
        assert_eq!(
            e,
            ["budgets[0].per: \"daily\" is not a duration like 90s, 5m, 24h or 7d"]
        );
        let e =
            errors_of(&DOC.replace("action: billing.refund.issue", "action: dns.record.update"));
        assert_eq!(
            e,
            ["budgets[0].action: \"dns.record.update\" is not enabled in this document's handlers"]
        );
        let e = errors_of(&DOC.replace("action: billing.refund.issue", "action: shell.exec"));
        assert_eq!(
            e,
            ["budgets[0].action: \"shell.exec\" is not in the handler registry"]
        );
        let e = errors_of(&DOC.replace("    scope: agent\n", "    scope: agent\n    cap: 1\n"));
        assert_eq!(
            e,
            [
                "budgets[0].cap: unknown field; expected one of: action, sum_of, max, per, scope, reason"
            ]
        );
        let e = errors_of(&DOC.replace("    per: 24h\n", ""));
        assert_eq!(
            e,
            ["budgets[0].per: is required: the window, a duration like 1h, 24h or 7d"]
        );
        let twice = DOC.to_owned() + &DOC[DOC.find("  - action").unwrap()..];
        let e = errors_of(&twice);
        assert_eq!(
            e,
            [
                "budgets[1]: duplicates an earlier budget with the same action, sum_of, scope and per"
            ]
        );
        let e = errors_of(&DOC.replace("budgets:\n  - action", "budgets: 3\nx:\n  - action"));
        assert!(
            e.contains(&"budgets: must be a list of {action, sum_of, max, per, scope}".to_owned()),
            "{e:?}"
        );
    }
}
