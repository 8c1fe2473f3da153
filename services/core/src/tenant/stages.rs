//! `approvals:` of a handler entry: staged approvals that re-route, the general form of
//! `approvals_required: N` (which stays as the one-stage shorthand: N distinct people of any
//! approver group, within the tenant's `escalation_ttl`).
//!
//! ```yaml
//! approvals:
//!   stages:
//!     - {approvers: team-leads, required: 1, within: 30m, over: 50000}
//!     - {approvers: finance, required: 1, within: 4h, over: 50000}
//!   on_timeout: next            # next (default) | expire
//! ```
//! A stage's `approvers` is a value of the tenant's `approvers.claim` that `approvers.values`
//! lists (checked when the document is applied). Stage N+1 opens only when stage N completes
//! (`required` distinct people of its group approved) or, with `on_timeout: next`, when stage N
//! timed out; `within` runs from the moment its stage opened, by the database clock. A person
//! approves in one stage only. `over` (minor units of `params.amount`) makes a stage apply only
//! to amounts above it; a proposal no stage applies to is decided as without stages
//! (`approvals_required`, 1 person of any approver group). The last stage timing out expires
//! the proposal, as does any stage with `on_timeout: expire`.

use super::read::{get_duration, got, ser_duration, unknown_keys};
use crate::FieldError;
use serde::Serialize;
use serde_json::{Map, Value};
use std::time::Duration;

/// Most stages one handler may declare.
pub const MAX_STAGES: usize = 5;
/// Shortest `within` of a stage.
pub const MIN_STAGE_WITHIN: Duration = Duration::from_secs(1);
/// Longest `within` of a stage (7 days).
pub const MAX_STAGE_WITHIN: Duration = Duration::from_secs(7 * 86_400);

/// What happens when a stage's `within` passes before it completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnTimeout {
    /// The next stage opens (its group is notified); the last stage timing out expires.
    Next,
    /// The proposal expires.
    Expire,
}

impl OnTimeout {
    /// The name in tenant documents and in `approval_stages.on_timeout`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Next => "next",
            Self::Expire => "expire",
        }
    }
}

/// One stage of a handler's `approvals.stages`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StageDef {
    /// The approver group: a value of `approvers.claim` listed in `approvers.values`.
    pub approvers: String,
    /// Distinct people of that group needed (1–5).
    pub required: u32,
    /// How long the stage stays open once it opened (1s–7d).
    #[serde(serialize_with = "ser_duration")]
    pub within: Duration,
    /// The stage applies only when `params.amount` is above this (minor units).
    pub over: Option<i64>,
}

/// A handler's `approvals:`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StagedApprovals {
    /// The stages, in order.
    pub stages: Vec<StageDef>,
    /// What a timed-out stage does.
    pub on_timeout: OnTimeout,
}

impl StagedApprovals {
    /// The stages that apply to a proposal with these params, in order: one without `over`
    /// always, one with `over` only when `params.amount` is an integer above it. Empty: the
    /// proposal is decided as without stages.
    pub fn applicable(&self, params: &Value) -> Vec<&StageDef> {
        let amount = params.get("amount").and_then(Value::as_i64);
        self.stages
            .iter()
            .filter(|s| match s.over {
                None => true,
                Some(over) => amount.is_some_and(|a| a > over),
            })
            .collect()
    }

    /// The longest time the stages may take together (each at its full `within`).
    pub fn total_within(&self) -> Duration {
        self.stages.iter().map(|s| s.within).sum()
    }
}

/// Parses `approvals:` at path `p` (`handlers["x"].approvals`); `has_amount` says whether the
/// handler has an integer `amount` parameter (needed by `over`).
pub(super) fn parse_staged(
    errs: &mut Vec<FieldError>,
    p: &str,
    v: &Value,
    has_amount: bool,
) -> Option<StagedApprovals> {
    let Some(m) = v.as_object() else {
        errs.push(FieldError::new(
            p,
            format!(
                "must be a mapping with stages and on_timeout (got {})",
                got(v)
            ),
        ));
        return None;
    };
    unknown_keys(errs, p, m, &["stages", "on_timeout"]);
    let on_timeout = match m.get("on_timeout") {
        None => OnTimeout::Next,
        Some(Value::String(s)) if s == "next" => OnTimeout::Next,
        Some(Value::String(s)) if s == "expire" => OnTimeout::Expire,
        Some(v) => {
            errs.push(FieldError::new(
                format!("{p}.on_timeout"),
                format!("must be next or expire (got {})", got(v)),
            ));
            OnTimeout::Expire
        }
    };
    let list = match m.get("stages") {
        Some(Value::Array(a)) if !a.is_empty() && a.len() <= MAX_STAGES => a,
        _ => {
            errs.push(FieldError::new(
                format!("{p}.stages"),
                format!("must be a list of 1 to {MAX_STAGES} stages"),
            ));
            return None;
        }
    };
    let before = errs.len();
    let stages: Vec<StageDef> = list
        .iter()
        .enumerate()
        .filter_map(|(i, s)| parse_stage(errs, &format!("{p}.stages[{i}]"), s, has_amount))
        .collect();
    (errs.len() == before).then_some(StagedApprovals { stages, on_timeout })
}

/// One stage at path `p`.
fn parse_stage(
    errs: &mut Vec<FieldError>,
    p: &str,
    v: &Value,
    has_amount: bool,
) -> Option<StageDef> {
    let empty = Map::new();
    let m = v.as_object().unwrap_or_else(|| {
        errs.push(FieldError::new(
            p,
            "must be a mapping {approvers, required, within}",
        ));
        &empty
    });
    unknown_keys(errs, p, m, &["approvers", "required", "within", "over"]);
    let approvers = match m.get("approvers") {
        Some(Value::String(s)) if !s.is_empty() && s.len() <= 128 => s.clone(),
        other => {
            errs.push(FieldError::new(
                format!("{p}.approvers"),
                format!(
                    "is required: an approver group, a value of approvers.claim (got {})",
                    other.map_or("nothing".into(), got)
                ),
            ));
            String::new()
        }
    };
    let required = match m.get("required") {
        None => 1,
        Some(v) => match v.as_u64() {
            Some(n) if (1..=5).contains(&n) => n as u32,
            _ => {
                errs.push(FieldError::new(
                    format!("{p}.required"),
                    format!("must be an integer from 1 to 5 (got {})", got(v)),
                ));
                1
            }
        },
    };
    let within = if m.contains_key("within") {
        let path = format!("{p}.within");
        let d = get_duration(errs, &path, m.get("within"), MIN_STAGE_WITHIN);
        if !(MIN_STAGE_WITHIN..=MAX_STAGE_WITHIN).contains(&d) {
            errs.push(FieldError::new(path, "must be between 1s and 7d"));
        }
        d
    } else {
        errs.push(FieldError::new(
            format!("{p}.within"),
            "is required: how long the stage stays open (e.g. 30m)",
        ));
        MIN_STAGE_WITHIN
    };
    let over = m.get("over").and_then(|v| {
        let path = format!("{p}.over");
        if !has_amount {
            errs.push(FieldError::new(path, "this action has no amount parameter"));
            return None;
        }
        super::read::minor_units(errs, path, v)
    });
    Some(StageDef {
        approvers,
        required,
        within,
        over,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<StagedApprovals, Vec<FieldError>> {
        let mut errs = Vec::new();
        let s = parse_staged(&mut errs, "a", &v, true);
        match s {
            Some(s) if errs.is_empty() => Ok(s),
            _ => Err(errs),
        }
    }

    fn paths(v: Value) -> Vec<String> {
        parse(v).unwrap_err().into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn two_stages_parse_with_their_defaults() {
        let s = parse(json!({"stages": [
            {"approvers": "team-leads", "within": "30m"},
            {"approvers": "finance", "required": 2, "within": "4h", "over": 50000}
        ]}))
        .unwrap();
        assert_eq!(s.on_timeout, OnTimeout::Next);
        assert_eq!(s.stages[0].required, 1);
        assert_eq!(s.stages[1].within, Duration::from_secs(4 * 3600));
        assert_eq!(s.total_within(), Duration::from_secs(30 * 60 + 4 * 3600));
        let small = json!({"amount": 50000});
        let large = json!({"amount": 50001});
        assert_eq!(s.applicable(&small).len(), 1);
        assert_eq!(s.applicable(&large).len(), 2);
        assert_eq!(s.applicable(&json!({})).len(), 1);
    }

    #[test]
    fn bad_stages_name_the_field() {
        assert_eq!(paths(json!({"stages": []})), ["a.stages"]);
        assert_eq!(
            paths(json!({"stages": [{"approvers": "x", "within": "1m"}], "on_timeout": "later"})),
            ["a.on_timeout"]
        );
        assert_eq!(
            paths(json!({"stages": [{"within": "1m", "required": 0}]})),
            ["a.stages[0].approvers", "a.stages[0].required"]
        );
        assert_eq!(
            paths(json!({"stages": [{"approvers": "x"}]})),
            ["a.stages[0].within"]
        );
        assert_eq!(
            paths(json!({"stages": [{"approvers": "x", "within": "8d"}]})),
            ["a.stages[0].within"]
        );
        let over_all = parse(json!({"stages": [{"approvers": "x", "within": "1m", "over": 5}]}));
        assert_eq!(over_all.unwrap().applicable(&json!({"amount": 5})).len(), 0);
        assert_eq!(
            paths(json!({"stages": [{"approvers": "x", "within": "1m"},
                                    {"approvers": "y", "within": "1m", "over": -1, "who": 1}]})),
            ["a.stages[1].who", "a.stages[1].over"]
        );
        let mut errs = Vec::new();
        let v = json!({"stages": [{"approvers": "x", "within": "1m"},
                                  {"approvers": "y", "within": "1m", "over": 5}]});
        assert!(parse_staged(&mut errs, "a", &v, false).is_none());
        assert_eq!(errs[0].field, "a.stages[1].over");
    }

    fn doc(handler: &str) -> Result<crate::tenant::TenantDocument, Vec<String>> {
        let src = format!(
            "tenant: acme\npolicy:\n  default: escalate\n  escalation_ttl: 1h\nhandlers:\n  billing.refund.issue:\n    credential: payments\n    max_amount: 100000\n{handler}approvers:\n  values: [team-leads, finance]\n"
        );
        crate::tenant::TenantDocument::parse(&src).map_err(|e| {
            e.0.into_iter()
                .map(|e| format!("{}: {}", e.field, e.rule))
                .collect()
        })
    }

    #[test]
    fn a_document_checks_groups_shorthand_and_ttl() {
        let ok = doc("    approvals:\n      stages:\n        - {approvers: team-leads, within: 30m}\n        - {approvers: finance, within: 30m, over: 50000}\n      on_timeout: expire\n").unwrap();
        let h = ok.handler("billing.refund.issue").unwrap();
        assert_eq!(h.approvals.as_ref().unwrap().on_timeout, OnTimeout::Expire);
        assert_eq!(h.approvals_required, 1);
        let both = doc("    approvals_required: 2\n    approvals: {stages: [{approvers: finance, within: 1m}]}\n").unwrap_err();
        assert_eq!(both.len(), 1);
        assert!(both[0].starts_with("handlers[\"billing.refund.issue\"].approvals: set approvals or approvals_required, not both"), "{both:?}");
        let stranger =
            doc("    approvals: {stages: [{approvers: interns, within: 1m}]}\n").unwrap_err();
        assert!(stranger[0].starts_with("handlers[\"billing.refund.issue\"].approvals.stages[0].approvers: \"interns\" is not one of approvers.values (team-leads, finance)"), "{stranger:?}");
        let long = doc("    approvals: {stages: [{approvers: finance, within: 50m}, {approvers: team-leads, within: 20m}]}\n").unwrap_err();
        assert!(
            long[0].contains("add up to 70m, more than policy.escalation_ttl (1h)"),
            "{long:?}"
        );
        let shorthand = doc("    approvals_required: 2\n").unwrap();
        let h = shorthand.handler("billing.refund.issue").unwrap();
        assert!(h.approvals.is_none());
        assert_eq!(h.approvals_required, 2);
    }
}
