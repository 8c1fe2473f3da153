//! `handlers:` of a tenant document: which actions of the compiled registry the tenant enables,
//! each with the settings every handler takes (summary, risky, grant lifetime, approvals,
//! minimum effect, timeout) and the handler-specific ones its registry entry validates.

use super::read::{get_duration, get_effect, get_strings, ser_duration};
use crate::FieldError;
use crate::vocab::ConfirmField;
use crate::vocab::Effect;
use crate::vocab::HandlerKind;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::time::Duration;

/// Default and maximum grant lifetime (design rule: minutes, default 5, capped at 15).
pub const DEFAULT_GRANT_LIFETIME: Duration = Duration::from_secs(300);
/// Maximum grant lifetime.
pub const MAX_GRANT_LIFETIME: Duration = Duration::from_secs(900);

/// One enabled handler with its settings.
#[derive(Debug, Clone, Serialize)]
pub struct HandlerEntry {
    /// Which registry handler.
    #[serde(skip)]
    pub kind: HandlerKind,
    /// Summary template override (`{param}` placeholders).
    pub summary: Option<String>,
    /// Risky params highlighted to approvers.
    pub risky: Vec<String>,
    /// Grant lifetime (≤ 15 minutes).
    #[serde(serialize_with = "ser_duration")]
    pub grant_lifetime: Duration,
    /// Distinct people needed to approve (1–5); 1 when `approvals` is set (the stages count).
    pub approvals_required: u32,
    /// Staged approvals (`approvals: {stages, on_timeout}`), the general form of
    /// `approvals_required`; `None` means the one-stage shorthand.
    pub approvals: Option<super::stages::StagedApprovals>,
    /// The least severe effect this action may get (`escalate` makes `allow` impossible).
    pub min_effect: Effect,
    /// Handler execution timeout.
    #[serde(serialize_with = "ser_duration")]
    pub timeout: Duration,
    /// An Approve needs an identity-provider sign-in at most this old (ID-token `auth_time`;
    /// OIDC `max_age`), 10s–24h.
    #[serde(serialize_with = "super::read::ser_duration_opt")]
    pub reauth_within: Option<Duration>,
    /// Values the approver types again before an Approve counts (`amount`, `target`).
    #[serde(serialize_with = "ser_confirm")]
    pub confirm: Vec<ConfirmField>,
    /// With `confirm: [amount]`: only amounts above this (minor units) must be typed again.
    pub confirm_over: Option<i64>,
    /// An Approve must be signed with the approver's registered passkey (WebAuthn assertion
    /// over the intent; see `actiond_core::passkey`).
    pub require_passkey: bool,
    /// With `require_passkey`: only amounts above this (minor units) need the passkey.
    pub passkey_over: Option<i64>,
    /// What happens when the provider changed after the approver's preview (issue 34): the
    /// proposal ends `stale` (`end`, the default) or goes back to the approvers with a fresh
    /// preview (`reapprove`).
    pub on_stale: OnStale,
    /// Handler-specific settings (validated by the handler).
    pub settings: Value,
}

/// `on_stale` of a handler entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnStale {
    /// The proposal ends `stale` (final); the agent may propose again.
    #[default]
    End,
    /// The proposal goes back to `escalated` with a fresh preview: its grant is void (it was
    /// spent by the run that did not happen), its approvals void, and people decide again.
    Reapprove,
}

/// `on_stale` at `path`: `end` (the default) or `reapprove`; `reapprove` is refused with staged
/// `approvals` (their stages are not reopened).
fn parse_on_stale(errs: &mut Vec<FieldError>, p: &str, v: Option<&Value>, staged: bool) -> OnStale {
    let path = format!("{p}.on_stale");
    match v.map(|v| (v, v.as_str())) {
        None | Some((_, Some("end"))) => OnStale::End,
        Some((_, Some("reapprove"))) if staged => {
            errs.push(FieldError::new(
                path,
                "reapprove cannot be combined with staged approvals (their stages are not reopened); use end or approvals_required",
            ));
            OnStale::End
        }
        Some((_, Some("reapprove"))) => OnStale::Reapprove,
        Some(_) => {
            errs.push(FieldError::new(path, "must be end or reapprove"));
            OnStale::End
        }
    }
}

/// `confirm` as its names.
fn ser_confirm<S: serde::Serializer>(c: &[ConfirmField], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(c.iter().map(|f| f.as_str()))
}

/// Settings every handler takes; the rest of an entry goes to the handler's own validation.
pub(super) const COMMON_HANDLER_KEYS: [&str; 13] = [
    "summary",
    "risky",
    "grant_lifetime",
    "approvals_required",
    "approvals",
    "min_effect",
    "timeout",
    "reauth_within",
    "confirm",
    "confirm_over",
    "require_passkey",
    "passkey_over",
    "on_stale",
];

/// `handlers:` (optional): action name → entry; unknown actions and bad entries are left out
/// (with errors).
pub(super) fn parse_handlers(
    errs: &mut Vec<FieldError>,
    v: Option<&Value>,
) -> BTreeMap<String, HandlerEntry> {
    let mut out = BTreeMap::new();
    let m = match v {
        None => return out,
        Some(Value::Object(m)) => m,
        Some(_) => {
            errs.push(FieldError::new(
                "handlers",
                "must be a mapping of action name to settings",
            ));
            return out;
        }
    };
    for (action, entry) in m {
        let p = format!("handlers[{}]", Value::String(action.clone()));
        if let Some(e) = parse_entry(errs, &p, action, entry) {
            out.insert(action.clone(), e);
        }
    }
    out
}

/// One entry at path `p`: `None` when the action is not in the registry or the entry is not a
/// mapping; otherwise the entry, with any errors in its settings appended to `errs`.
fn parse_entry(
    errs: &mut Vec<FieldError>,
    p: &str,
    action: &str,
    entry: &Value,
) -> Option<HandlerEntry> {
    let Some(kind) = HandlerKind::lookup(action) else {
        let known: Vec<&str> = HandlerKind::ALL.iter().map(|h| h.action()).collect();
        errs.push(FieldError::new(
            p,
            format!(
                "is not in the handler registry; known: {}",
                known.join(", ")
            ),
        ));
        return None;
    };
    let empty = Map::new();
    let em = match entry {
        Value::Object(em) => em,
        Value::Null => &empty,
        _ => {
            errs.push(FieldError::new(p, "must be a mapping of settings"));
            return None;
        }
    };
    let summary = match em.get("summary") {
        None => None,
        Some(Value::String(s)) if !s.is_empty() && s.len() <= 300 => Some(s.clone()),
        Some(_) => {
            errs.push(FieldError::new(
                format!("{p}.summary"),
                "must be a template of at most 300 characters",
            ));
            None
        }
    };
    let risky = parse_risky(errs, p, action, kind, em.get("risky"));
    let grant_lifetime = get_duration(
        errs,
        &format!("{p}.grant_lifetime"),
        em.get("grant_lifetime"),
        DEFAULT_GRANT_LIFETIME,
    );
    if grant_lifetime > MAX_GRANT_LIFETIME || grant_lifetime < Duration::from_secs(1) {
        errs.push(FieldError::new(
            format!("{p}.grant_lifetime"),
            "must be between 1s and 15m",
        ));
    }
    let approvals_required = match em.get("approvals_required") {
        None => 1,
        Some(v) => match v.as_u64() {
            Some(n) if (1..=5).contains(&n) => n as u32,
            _ => {
                errs.push(FieldError::new(
                    format!("{p}.approvals_required"),
                    "must be an integer from 1 to 5",
                ));
                1
            }
        },
    };
    let approvals = em.get("approvals").and_then(|v| {
        let path = format!("{p}.approvals");
        if em.contains_key("approvals_required") {
            errs.push(FieldError::new(
                path,
                "set approvals or approvals_required, not both (approvals_required: N is one stage of N people of any approver group)",
            ));
            return None;
        }
        super::stages::parse_staged(errs, &path, v, has_integer_param(kind, "amount"))
    });
    let min_effect = match em.get("min_effect") {
        None => Effect::Allow,
        some => get_effect(errs, &format!("{p}.min_effect"), some).unwrap_or(Effect::Escalate),
    };
    let timeout = get_duration(
        errs,
        &format!("{p}.timeout"),
        em.get("timeout"),
        Duration::from_secs(10),
    );
    if timeout > Duration::from_secs(120) || timeout < Duration::from_millis(100) {
        errs.push(FieldError::new(
            format!("{p}.timeout"),
            "must be between 100ms and 120s",
        ));
    }
    let care = parse_care(errs, p, kind, em);
    let on_stale = parse_on_stale(errs, p, em.get("on_stale"), em.contains_key("approvals"));
    let specific: Map<String, Value> = em
        .iter()
        .filter(|(k, _)| !COMMON_HANDLER_KEYS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    errs.extend(kind.validate_settings(p, &specific));
    Some(HandlerEntry {
        kind,
        summary,
        risky,
        grant_lifetime,
        approvals_required,
        approvals,
        min_effect,
        timeout,
        reauth_within: care.reauth_within,
        confirm: care.confirm,
        confirm_over: care.confirm_over,
        require_passkey: care.require_passkey,
        passkey_over: care.passkey_over,
        on_stale,
        settings: Value::Object(specific),
    })
}

/// The approval-care settings of one entry: `reauth_within`, `confirm`, `confirm_over`.
struct Care {
    reauth_within: Option<Duration>,
    confirm: Vec<ConfirmField>,
    confirm_over: Option<i64>,
    require_passkey: bool,
    passkey_over: Option<i64>,
}

/// `require_passkey` (a boolean) and `passkey_over` (needs `require_passkey: true` and an
/// integer `amount` parameter).
fn parse_passkey(
    errs: &mut Vec<FieldError>,
    p: &str,
    kind: HandlerKind,
    em: &Map<String, Value>,
) -> (bool, Option<i64>) {
    let required = match em.get("require_passkey") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => {
            errs.push(FieldError::new(
                format!("{p}.require_passkey"),
                format!("must be true or false (got {})", super::read::got(v)),
            ));
            false
        }
    };
    let over = em.get("passkey_over").and_then(|v| {
        let path = format!("{p}.passkey_over");
        match v.as_i64() {
            Some(_) if !required => {
                errs.push(FieldError::new(path, "needs require_passkey: true"));
                None
            }
            Some(_) if !has_integer_param(kind, "amount") => {
                errs.push(FieldError::new(
                    path,
                    format!("{} has no amount parameter", kind.action()),
                ));
                None
            }
            _ => super::read::minor_units(errs, path, v),
        }
    });
    (required, over)
}

/// Parses [`Care`] at path `p`: `confirm: [amount]` needs a handler with an integer `amount`
/// parameter, and `confirm_over` needs `amount` in `confirm`.
fn parse_care(
    errs: &mut Vec<FieldError>,
    p: &str,
    kind: HandlerKind,
    em: &Map<String, Value>,
) -> Care {
    let reauth_within = em.get("reauth_within").map(|v| {
        let path = format!("{p}.reauth_within");
        let d = get_duration(errs, &path, Some(v), Duration::from_secs(600));
        if !(Duration::from_secs(10)..=Duration::from_secs(86_400)).contains(&d) {
            errs.push(FieldError::new(path, "must be between 10s and 24h"));
        }
        d
    });
    let mut confirm = Vec::new();
    for name in get_strings(errs, &format!("{p}.confirm"), em.get("confirm")) {
        match ConfirmField::parse(&name) {
            Some(ConfirmField::Amount) if !has_integer_param(kind, "amount") => {
                errs.push(FieldError::new(
                    format!("{p}.confirm"),
                    format!("{} has no amount parameter", kind.action()),
                ))
            }
            Some(f) if !confirm.contains(&f) => confirm.push(f),
            Some(_) => {}
            None => errs.push(FieldError::new(
                format!("{p}.confirm"),
                format!("{name:?} is not one of amount, target"),
            )),
        }
    }
    let confirm_over = match em.get("confirm_over") {
        None => None,
        Some(v) => {
            let path = format!("{p}.confirm_over");
            match v.as_i64() {
                Some(n) if n >= 0 && !confirm.contains(&ConfirmField::Amount) => {
                    errs.push(FieldError::new(path, "needs amount in confirm"));
                    None
                }
                _ => super::read::minor_units(errs, path, v),
            }
        }
    };
    let (require_passkey, passkey_over) = parse_passkey(errs, p, kind, em);
    Care {
        reauth_within,
        confirm,
        confirm_over,
        require_passkey,
        passkey_over,
    }
}

/// Whether the handler's parameter schema has an integer parameter `name`.
fn has_integer_param(kind: HandlerKind, name: &str) -> bool {
    kind.params_schema()
        .pointer(&format!("/properties/{name}/type"))
        .and_then(Value::as_str)
        == Some("integer")
}

/// `risky`: names of the handler's params (the registry's defaults when absent).
fn parse_risky(
    errs: &mut Vec<FieldError>,
    p: &str,
    action: &str,
    kind: HandlerKind,
    v: Option<&Value>,
) -> Vec<String> {
    let schema = kind.params_schema();
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    match v {
        None => kind
            .default_risky()
            .iter()
            .map(|s| (*s).to_owned())
            .collect(),
        Some(_) => {
            let r = get_strings(errs, &format!("{p}.risky"), v);
            for name in &r {
                if !props.contains_key(name) {
                    errs.push(FieldError::new(
                        format!("{p}.risky"),
                        format!("{name:?} is not a parameter of {action}"),
                    ));
                }
            }
            r
        }
    }
}

#[cfg(test)]
mod on_stale_tests {
    use super::OnStale;
    use crate::tenant::TenantDocument;

    fn doc(entry: &str) -> String {
        format!(
            "tenant: acme\npolicy:\n  default: escalate\nhandlers:\n  billing.refund.issue:\n    credential: payments\n    max_amount: 100000\n{entry}"
        )
    }

    fn errors_of(entry: &str) -> Vec<String> {
        TenantDocument::parse(&doc(entry))
            .unwrap_err()
            .0
            .into_iter()
            .map(|f| f.to_string())
            .collect()
    }

    #[test]
    fn on_stale_is_end_by_default_or_reapprove_and_anything_else_is_refused_by_name() {
        let on_stale = |entry: &str| {
            TenantDocument::parse(&doc(entry)).unwrap().handlers["billing.refund.issue"].on_stale
        };
        assert_eq!(on_stale(""), OnStale::End);
        assert_eq!(on_stale("    on_stale: end\n"), OnStale::End);
        assert_eq!(on_stale("    on_stale: reapprove\n"), OnStale::Reapprove);
        assert_eq!(
            errors_of("    on_stale: again\n"),
            [r#"handlers["billing.refund.issue"].on_stale: must be end or reapprove"#]
        );
        assert_eq!(
            errors_of("    on_stale: true\n"),
            [r#"handlers["billing.refund.issue"].on_stale: must be end or reapprove"#]
        );
        let staged = "    on_stale: reapprove\n    approvals:\n      stages:\n        - {approvers: leads, required: 1, within: 30m}\n";
        let errs = errors_of(staged);
        assert!(
            errs.iter().any(|e| e.starts_with(
                r#"handlers["billing.refund.issue"].on_stale: reapprove cannot be combined with staged approvals"#
            )),
            "{errs:?}"
        );
    }
}
