//! The tenant document: a versioned, immutable YAML document applied with
//! `actiond tenant apply -f tenant.yaml` (DESIGN.md, "Multi-tenancy").
//!
//! ```yaml
//! tenant: acme
//! policy:
//!   default: escalate            # required: allow | escalate | block
//!   escalation_ttl: 24h          # pending/escalated older than this expire (default 24h)
//!   history_window: 24h          # window of `history.count` / `history.sum` (default 24h)
//!   max_open_escalations_per_agent: 20
//!   rules:                       # ordered; the most severe matching rule wins
//!     - name: shell-never
//!       when: 'action.startsWith("shell.")'
//!       effect: block
//!       reason: Agents never get a shell.
//! handlers:
//!   billing.refund.issue:        # an action of the compiled registry
//!     credential: payments       # the executor reads <tenant>.payments
//!     max_amount: 100000         # handler-specific settings…
//!     grant_lifetime: 5m         # common settings: grant_lifetime (≤15m), approvals_required,
//!     min_effect: allow          # min_effect, timeout, summary, risky
//! approvers:
//!   claim: groups                # ID-token claim holding group names
//!   values: [acme-approvers]
//!   subjects: [ops-oncall]       # subjects allowed to approve (also for `--as` on the CLI)
//! notify:
//!   webhook: approvals-chat      # credential name holding a chat webhook URL
//! ```
//! Every validation error names the field path and the rule. CEL rules are compiled at apply.

use crate::handlers::HandlerKind;
use crate::ids::{TenantId, format_duration, is_credential_part, parse_duration};
use crate::policy::{Effect, compile_rule};
use crate::{FieldError, FieldErrors};
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::time::Duration;

/// Maximum length of one rule's `when` expression (characters). CEL has no evaluation budget,
/// so size is capped at apply time (notes/crate-probes.md, CEL).
pub const MAX_RULE_LEN: usize = 2048;
/// Maximum number of rules in one document.
pub const MAX_RULES: usize = 200;
/// Default and maximum grant lifetime (DESIGN.md: minutes, default 5, capped at 15).
pub const DEFAULT_GRANT_LIFETIME: Duration = Duration::from_secs(300);
/// Maximum grant lifetime.
pub const MAX_GRANT_LIFETIME: Duration = Duration::from_secs(900);
/// Maximum size of a tenant document source (bytes).
pub const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// A validated tenant document.
#[derive(Debug, Clone, Serialize)]
pub struct TenantDocument {
    /// The tenant it configures.
    pub tenant: TenantId,
    /// Rules and timeouts.
    pub policy: PolicySection,
    /// Enabled actions of the registry, by action name.
    pub handlers: BTreeMap<String, HandlerEntry>,
    /// Who may approve.
    pub approvers: Approvers,
    /// Where escalations are announced.
    pub notify: Notify,
}

/// `policy:` of a tenant document.
#[derive(Debug, Clone, Serialize)]
pub struct PolicySection {
    /// Effect when no rule matches.
    pub default: Effect,
    /// `pending`/`escalated` rows older than this become `expired`.
    #[serde(serialize_with = "ser_duration")]
    pub escalation_ttl: Duration,
    /// Window of the `history` variable.
    #[serde(serialize_with = "ser_duration")]
    pub history_window: Duration,
    /// Past this many open escalations, an agent's new proposals get 429.
    pub max_open_escalations_per_agent: u32,
    /// Ordered rules.
    pub rules: Vec<RuleDef>,
}

/// One policy rule as written.
#[derive(Debug, Clone, Serialize)]
pub struct RuleDef {
    /// Unique name, `^[a-z0-9][a-z0-9_.-]*$`.
    pub name: String,
    /// CEL boolean expression over `action`, `target`, `params`, `agent`, `session`, `history`.
    pub when: String,
    /// Effect when it matches.
    pub effect: Effect,
    /// Tenant-written reason shown to the agent and approvers.
    pub reason: String,
}

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
    /// Distinct people needed to approve (1–5).
    pub approvals_required: u32,
    /// The least severe effect this action may get (`escalate` makes `allow` impossible).
    pub min_effect: Effect,
    /// Handler execution timeout.
    #[serde(serialize_with = "ser_duration")]
    pub timeout: Duration,
    /// Handler-specific settings (validated by the handler).
    pub settings: Value,
}

/// `approvers:` of a tenant document.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Approvers {
    /// Expected ID-token issuer; any configured issuer when absent.
    pub issuer: Option<String>,
    /// Claim holding group names (default `groups`).
    pub claim: String,
    /// Claim values that make someone an approver.
    pub values: Vec<String>,
    /// Subjects that are approvers regardless of claims.
    pub subjects: Vec<String>,
}

/// `notify:` of a tenant document.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Notify {
    /// Credential name (`<tenant>.<name>` in web's credentials) holding a Slack-compatible
    /// webhook URL.
    pub webhook: Option<String>,
    /// Email recipients of escalation notices.
    pub email: Vec<String>,
}

fn ser_duration<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_duration(*d))
}

impl TenantDocument {
    /// Parses and validates a YAML (or JSON) document. All errors are reported together.
    pub fn parse(source: &str) -> Result<Self, FieldErrors> {
        if source.len() > MAX_DOCUMENT_BYTES {
            return Err(FieldErrors::one(
                "document",
                format!("is larger than {MAX_DOCUMENT_BYTES} bytes"),
            ));
        }
        // serde_yaml_ng keeps the last of duplicate keys when building a Value; the strict
        // reader refuses them (`tenant: a` then `tenant: b` must not silently pick one).
        let value =
            crate::canonical::deserialize_strict(serde_yaml_ng::Deserializer::from_str(source))
                .map_err(|e| {
                    let at = if e.path.is_empty() {
                        "document".to_owned()
                    } else {
                        e.path.clone()
                    };
                    FieldErrors::one(at, format!("is not a valid document: {}", e.rule))
                })?;
        Self::from_value(&value)
    }

    /// Validates a document already parsed into JSON.
    pub fn from_value(v: &Value) -> Result<Self, FieldErrors> {
        let mut errs = Vec::new();
        let Some(root) = v.as_object() else {
            return Err(FieldErrors::one("document", "must be a mapping"));
        };
        unknown_keys(
            &mut errs,
            "",
            root,
            &["tenant", "policy", "handlers", "approvers", "notify"],
        );
        let tenant = match root.get("tenant") {
            Some(Value::String(s)) => match TenantId::parse(s) {
                Ok(t) => Some(t),
                Err(rule) => {
                    errs.push(FieldError::new("tenant", rule));
                    None
                }
            },
            None | Some(Value::Null) => {
                errs.push(FieldError::new("tenant", "is required: the tenant id"));
                None
            }
            Some(v) => {
                errs.push(FieldError::new(
                    "tenant",
                    format!("must be a string: the tenant id (got {})", got(v)),
                ));
                None
            }
        };
        let policy = parse_policy(&mut errs, root.get("policy"));
        let handlers = parse_handlers(&mut errs, root.get("handlers"));
        let approvers = parse_approvers(&mut errs, root.get("approvers"));
        let notify = parse_notify(&mut errs, root.get("notify"));
        match (tenant, policy) {
            (Some(tenant), Some(policy)) if errs.is_empty() => Ok(Self {
                tenant,
                policy,
                handlers,
                approvers,
                notify,
            }),
            _ => Err(FieldErrors(errs)),
        }
    }

    /// The handler entry for an action, if this tenant enables it and the registry has it.
    pub fn handler(&self, action: &str) -> Option<&HandlerEntry> {
        HandlerKind::lookup(action)?;
        self.handlers.get(action)
    }
}

fn unknown_keys(errs: &mut Vec<FieldError>, path: &str, m: &Map<String, Value>, allowed: &[&str]) {
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

fn get_duration(
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
fn get_effect(errs: &mut Vec<FieldError>, path: &str, v: Option<&Value>) -> Option<Effect> {
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

/// The given value for an error message, as JSON (`"Allow"`, `1`, `[…]`), cut to 40
/// characters.
pub(crate) fn got(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() <= 40 {
        s
    } else {
        let mut t: String = s.chars().take(39).collect();
        t.push('…');
        t
    }
}

fn get_strings(errs: &mut Vec<FieldError>, path: &str, v: Option<&Value>) -> Vec<String> {
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

fn parse_policy(errs: &mut Vec<FieldError>, v: Option<&Value>) -> Option<PolicySection> {
    let m = match v {
        Some(Value::Object(m)) => m,
        None | Some(Value::Null) => {
            errs.push(FieldError::new(
                "policy",
                "is required: a mapping with default and rules",
            ));
            return None;
        }
        Some(_) => {
            errs.push(FieldError::new(
                "policy",
                "must be a mapping with default and rules",
            ));
            return None;
        }
    };
    unknown_keys(
        errs,
        "policy",
        m,
        &[
            "default",
            "escalation_ttl",
            "history_window",
            "max_open_escalations_per_agent",
            "rules",
        ],
    );
    let default = get_effect(errs, "policy.default", m.get("default"));
    let escalation_ttl = get_duration(
        errs,
        "policy.escalation_ttl",
        m.get("escalation_ttl"),
        Duration::from_secs(86_400),
    );
    if escalation_ttl < Duration::from_secs(1) {
        errs.push(FieldError::new(
            "policy.escalation_ttl",
            "must be at least 1s",
        ));
    }
    let history_window = get_duration(
        errs,
        "policy.history_window",
        m.get("history_window"),
        Duration::from_secs(86_400),
    );
    let cap = match m.get("max_open_escalations_per_agent") {
        None => 20,
        Some(v) => match v.as_u64() {
            Some(n) if (1..=10_000).contains(&n) => n as u32,
            _ => {
                errs.push(FieldError::new(
                    "policy.max_open_escalations_per_agent",
                    "must be an integer from 1 to 10000",
                ));
                20
            }
        },
    };
    let mut rules = Vec::new();
    match m.get("rules") {
        None => {}
        Some(Value::Array(a)) => {
            if a.len() > MAX_RULES {
                errs.push(FieldError::new(
                    "policy.rules",
                    format!("has more than {MAX_RULES} rules"),
                ));
            }
            let mut names = std::collections::HashSet::new();
            for (i, r) in a.iter().enumerate() {
                let p = format!("policy.rules[{i}]");
                let Some(rm) = r.as_object() else {
                    errs.push(FieldError::new(
                        p,
                        "must be a mapping with name, when, effect, reason",
                    ));
                    continue;
                };
                unknown_keys(errs, &p, rm, &["name", "when", "effect", "reason"]);
                let name = rm
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let name_ok = !name.is_empty()
                    && name.len() <= 64
                    && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && name.chars().all(|c| {
                        c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-' | '.')
                    });
                if !name_ok {
                    let rule = match rm.get("name") {
                        None | Some(Value::Null) => {
                            "is required: ^[a-z0-9][a-z0-9_.-]{0,63}$".to_owned()
                        }
                        Some(v) => {
                            format!("must match ^[a-z0-9][a-z0-9_.-]{{0,63}}$ (got {})", got(v))
                        }
                    };
                    errs.push(FieldError::new(format!("{p}.name"), rule));
                } else if !names.insert(name.clone()) {
                    errs.push(FieldError::new(
                        format!("{p}.name"),
                        format!("duplicates rule name {name:?}"),
                    ));
                }
                let when = rm
                    .get("when")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                if when.trim().is_empty() {
                    let rule = match rm.get("when") {
                        None | Some(Value::Null) => "is required: a CEL boolean expression",
                        Some(Value::String(_)) => "must not be empty: a CEL boolean expression",
                        Some(_) => "must be a string: a CEL boolean expression",
                    };
                    errs.push(FieldError::new(format!("{p}.when"), rule));
                } else if when.len() > MAX_RULE_LEN {
                    errs.push(FieldError::new(
                        format!("{p}.when"),
                        format!("is longer than {MAX_RULE_LEN} characters"),
                    ));
                } else if let Err(e) = compile_rule(&when) {
                    errs.push(FieldError::new(
                        format!("{p}.when"),
                        format!("does not compile as CEL: {e}"),
                    ));
                }
                let effect = get_effect(errs, &format!("{p}.effect"), rm.get("effect"));
                let reason = rm
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                if reason.trim().is_empty() || reason.len() > 500 {
                    let rule = match rm.get("reason") {
                        None | Some(Value::Null) => {
                            "is required: at most 500 characters, shown to agents and approvers"
                        }
                        Some(_) => {
                            "must be non-empty text of at most 500 characters, shown to agents and approvers"
                        }
                    };
                    errs.push(FieldError::new(format!("{p}.reason"), rule));
                }
                if let Some(effect) = effect {
                    rules.push(RuleDef {
                        name,
                        when,
                        effect,
                        reason,
                    });
                }
            }
        }
        Some(_) => errs.push(FieldError::new("policy.rules", "must be a list")),
    }
    Some(PolicySection {
        default: default.unwrap_or(Effect::Block),
        escalation_ttl,
        history_window,
        max_open_escalations_per_agent: cap,
        rules,
    })
}

const COMMON_HANDLER_KEYS: [&str; 6] = [
    "summary",
    "risky",
    "grant_lifetime",
    "approvals_required",
    "min_effect",
    "timeout",
];

fn parse_handlers(errs: &mut Vec<FieldError>, v: Option<&Value>) -> BTreeMap<String, HandlerEntry> {
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
        let Some(kind) = HandlerKind::lookup(action) else {
            let known: Vec<&str> = HandlerKind::ALL.iter().map(|h| h.action()).collect();
            errs.push(FieldError::new(
                p,
                format!(
                    "is not in the handler registry; known: {}",
                    known.join(", ")
                ),
            ));
            continue;
        };
        let empty = Map::new();
        let em = match entry {
            Value::Object(em) => em,
            Value::Null => &empty,
            _ => {
                errs.push(FieldError::new(p, "must be a mapping of settings"));
                continue;
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
        let schema = kind.params_schema();
        let props = schema
            .get("properties")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let risky = match em.get("risky") {
            None => kind
                .default_risky()
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            Some(_) => {
                let r = get_strings(errs, &format!("{p}.risky"), em.get("risky"));
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
        };
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
        let specific: Map<String, Value> = em
            .iter()
            .filter(|(k, _)| !COMMON_HANDLER_KEYS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        errs.extend(kind.validate_settings(&p, &specific));
        out.insert(
            action.clone(),
            HandlerEntry {
                kind,
                summary,
                risky,
                grant_lifetime,
                approvals_required,
                min_effect,
                timeout,
                settings: Value::Object(specific),
            },
        );
    }
    out
}

fn parse_approvers(errs: &mut Vec<FieldError>, v: Option<&Value>) -> Approvers {
    let Some(v) = v else {
        return Approvers {
            claim: "groups".into(),
            ..Approvers::default()
        };
    };
    let Some(m) = v.as_object() else {
        errs.push(FieldError::new(
            "approvers",
            "must be a mapping with claim, values, subjects",
        ));
        return Approvers::default();
    };
    unknown_keys(
        errs,
        "approvers",
        m,
        &["issuer", "claim", "values", "subjects"],
    );
    let claim = match m.get("claim") {
        None => "groups".to_owned(),
        Some(Value::String(s)) if !s.is_empty() && s.len() <= 64 => s.clone(),
        Some(_) => {
            errs.push(FieldError::new("approvers.claim", "must be a claim name"));
            "groups".into()
        }
    };
    let issuer = match m.get("issuer") {
        None => None,
        Some(Value::String(s)) if url::Url::parse(s).is_ok() => Some(s.clone()),
        Some(_) => {
            errs.push(FieldError::new("approvers.issuer", "must be an issuer URL"));
            None
        }
    };
    Approvers {
        issuer,
        claim,
        values: get_strings(errs, "approvers.values", m.get("values")),
        subjects: get_strings(errs, "approvers.subjects", m.get("subjects")),
    }
}

fn parse_notify(errs: &mut Vec<FieldError>, v: Option<&Value>) -> Notify {
    let Some(v) = v else { return Notify::default() };
    let Some(m) = v.as_object() else {
        errs.push(FieldError::new(
            "notify",
            "must be a mapping with webhook and/or email",
        ));
        return Notify::default();
    };
    unknown_keys(errs, "notify", m, &["webhook", "email"]);
    let webhook = match m.get("webhook") {
        None => None,
        Some(Value::String(s)) if is_credential_part(s) => Some(s.clone()),
        Some(_) => {
            errs.push(FieldError::new(
                "notify.webhook",
                "must be a credential name matching ^[a-z0-9_-]+$",
            ));
            None
        }
    };
    let email = get_strings(errs, "notify.email", m.get("email"));
    for (i, e) in email.iter().enumerate() {
        if e.split('@').count() != 2 || e.contains(char::is_whitespace) {
            errs.push(FieldError::new(
                format!("notify.email[{i}]"),
                "must be an email address",
            ));
        }
    }
    Notify { webhook, email }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = r#"
tenant: acme
policy:
  default: escalate
  rules:
    - name: shell
      when: 'action.startsWith("shell.")'
      effect: block
      reason: No shell.
handlers:
  billing.refund.issue:
    credential: payments
    max_amount: 100000
"#;

    #[test]
    fn parses_a_valid_document() {
        let d = TenantDocument::parse(DOC).unwrap();
        assert_eq!(d.tenant.as_str(), "acme");
        assert_eq!(d.policy.rules.len(), 1);
        let h = d.handler("billing.refund.issue").unwrap();
        assert_eq!(h.grant_lifetime, DEFAULT_GRANT_LIFETIME);
        assert!(d.handler("constructor").is_none());
    }

    #[test]
    fn errors_name_the_field() {
        let bad = DOC
            .replace("effect: block", "effect: maybe")
            .replace("max_amount: 100000", "max_amount: -1\n    url: x");
        let e = TenantDocument::parse(&bad).unwrap_err().to_string();
        assert!(e.contains("policy.rules[0].effect"), "{e}");
        assert!(
            e.contains("handlers[\"billing.refund.issue\"].max_amount"),
            "{e}"
        );
        assert!(
            e.contains("handlers[\"billing.refund.issue\"].url: unknown setting"),
            "{e}"
        );
        let bad = DOC.replace(r#"'action.startsWith("shell.")'"#, r#"'action == "x" &&'"#);
        let e = TenantDocument::parse(&bad).unwrap_err().to_string();
        assert!(
            e.contains("policy.rules[0].when: does not compile as CEL"),
            "{e}"
        );
        let bad = DOC.replace("billing.refund.issue:", "shell.exec:");
        let e = TenantDocument::parse(&bad).unwrap_err().to_string();
        assert!(e.contains("is not in the handler registry"), "{e}");
        let bad = DOC.replace("credential: payments", "credential: ../../etc/shadow");
        assert!(TenantDocument::parse(&bad).is_err());
        let e = TenantDocument::parse("tenant: acme\ntenant: other\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("tenant: is not a valid document: duplicate key"),
            "{e}"
        );
        let e = TenantDocument::parse("tenant: [").unwrap_err().to_string();
        assert!(e.contains("is not a valid document"), "{e}");
    }

    fn errors_of(doc: &str) -> Vec<String> {
        TenantDocument::parse(doc)
            .unwrap_err()
            .0
            .into_iter()
            .map(|f| f.to_string())
            .collect()
    }

    #[test]
    fn present_but_wrong_values_say_what_they_must_be() {
        let e = errors_of(&DOC.replace("effect: block", "effect: Allow"));
        assert_eq!(
            e,
            ["policy.rules[0].effect: must be one of allow, escalate, block (got \"Allow\")"]
        );
        let e = errors_of(&DOC.replace("      effect: block\n", ""));
        assert_eq!(
            e,
            ["policy.rules[0].effect: is required: allow, escalate or block"]
        );
        let e = errors_of(&DOC.replace("default: escalate", "default: 1"));
        assert_eq!(
            e,
            ["policy.default: must be one of allow, escalate, block (got 1)"]
        );
        let e = errors_of(&DOC.replace(
            "max_amount: 100000",
            "max_amount: 100000\n    min_effect: ESCALATE",
        ));
        assert_eq!(
            e,
            [
                "handlers[\"billing.refund.issue\"].min_effect: must be one of allow, escalate, block (got \"ESCALATE\")"
            ]
        );
        let e = errors_of(&DOC.replace("max_amount: 100000", "max_amount: -1"));
        assert_eq!(
            e,
            [
                "handlers[\"billing.refund.issue\"].max_amount: must be a positive integer in minor units (got -1)"
            ]
        );
        let e = errors_of(&DOC.replace("max_amount: 100000", "max_amount: 1.5e3"));
        assert_eq!(
            e,
            [
                "handlers[\"billing.refund.issue\"].max_amount: must be a positive integer in minor units (got 1500.0)"
            ]
        );
        let e = errors_of(&DOC.replace("    max_amount: 100000\n", ""));
        assert_eq!(
            e,
            [
                "handlers[\"billing.refund.issue\"].max_amount: is required: a positive integer in minor units"
            ]
        );
        let e = errors_of(&DOC.replace("name: shell", "name: Shell"));
        assert_eq!(
            e,
            ["policy.rules[0].name: must match ^[a-z0-9][a-z0-9_.-]{0,63}$ (got \"Shell\")"]
        );
        let e = errors_of(&DOC.replace("reason: No shell.", "reason: [x]"));
        assert_eq!(
            e,
            [
                "policy.rules[0].reason: must be non-empty text of at most 500 characters, shown to agents and approvers"
            ]
        );
        let e = errors_of(&DOC.replace("tenant: acme", "tenant: [acme]"));
        assert_eq!(
            e,
            ["tenant: must be a string: the tenant id (got [\"acme\"])"]
        );
        let e = errors_of(&DOC.replace("tenant: acme", ""));
        assert_eq!(e, ["tenant: is required: the tenant id"]);
        // The valid document still parses.
        assert!(TenantDocument::parse(DOC).is_ok());
    }

    #[test]
    fn huge_max_amount_is_refused_with_the_field() {
        let e = errors_of(&DOC.replace("max_amount: 100000", "max_amount: 1e400"));
        // YAML reads `1e400` as the string "1e400" (it is not a finite float).
        assert_eq!(
            e,
            [
                "handlers[\"billing.refund.issue\"].max_amount: must be a positive integer in minor units (got \"1e400\")"
            ]
        );
    }
}
