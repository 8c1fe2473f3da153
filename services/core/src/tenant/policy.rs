//! `policy:` of a tenant document: the default effect, the timeouts, the cap on open
//! escalations and the ordered rules. Every rule's CEL is compiled here, at apply time, so a
//! rule that does not compile never reaches the policy worker.

use super::read::{get_duration, get_effect, got, ser_duration, unknown_keys};
use crate::FieldError;
use crate::classifier::{self, ClassifierRef};
use crate::rule_check::{MAX_RULE_DEPTH, compile_rule, depth, non_boolean};
use crate::vocab::Effect;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::time::Duration;

/// Longest `policy.escalation_ttl` and `policy.history_window` (366 days, like a budget's
/// `per`). Both are subtracted from the database clock (`now() - ttl`): an unbounded value
/// (`99999999999d` was accepted) ran past the timestamp range, and the policy worker's expiry
/// sweep, which goes tenant by tenant and stops at the first error, failed every round
/// ("timestamp out of range") for that tenant and every tenant listed after it.
pub const MAX_POLICY_WINDOW: Duration = Duration::from_secs(366 * 86_400);

/// Maximum length of one rule's `when` expression, in bytes of UTF-8. CEL has no evaluation
/// budget of its own, so size is capped when a document is applied (and evaluation is bounded
/// as it runs: `crate::policy::with_deadline_checks`).
pub const MAX_RULE_LEN: usize = 2048;
/// Maximum number of rules in one document.
pub const MAX_RULES: usize = 200;

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
    /// The classifier asked after the rules, when the tenant names one (it can only raise).
    pub classifier: Option<ClassifierRef>,
    /// The IANA time zone in which rules read `now` (`policy.time_zone`, default `UTC`).
    #[serde(serialize_with = "ser_time_zone")]
    pub time_zone: chrono_tz::Tz,
}

fn ser_time_zone<S: serde::Serializer>(tz: &chrono_tz::Tz, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(tz.name())
}

/// `policy.time_zone`: an IANA time zone name (`Europe/Paris`, `America/New_York`, `UTC`).
fn parse_time_zone(errs: &mut Vec<FieldError>, v: Option<&Value>) -> chrono_tz::Tz {
    match v {
        None | Some(Value::Null) => chrono_tz::Tz::UTC,
        Some(Value::String(s)) => s.parse().unwrap_or_else(|_| {
            errs.push(FieldError::new(
                "policy.time_zone",
                format!("must be an IANA time zone name such as Europe/Paris or UTC (got {s:?})"),
            ));
            chrono_tz::Tz::UTC
        }),
        Some(v) => {
            errs.push(FieldError::new(
                "policy.time_zone",
                format!(
                    "must be an IANA time zone name such as Europe/Paris or UTC (got {})",
                    got(v)
                ),
            ));
            chrono_tz::Tz::UTC
        }
    }
}

/// One policy rule as written.
#[derive(Debug, Clone, Serialize)]
pub struct RuleDef {
    /// Unique name, `^[a-z0-9][a-z0-9_.-]*$`.
    pub name: String,
    /// CEL boolean expression over `action`, `target`, `params`, `agent`, `session`, `on_behalf_of`, `history`, `now`.
    pub when: String,
    /// Effect when it matches.
    pub effect: Effect,
    /// Tenant-written reason shown to the agent and approvers.
    pub reason: String,
}

/// `policy:` (required); `None` when it is missing or not a mapping.
pub(super) fn parse_policy(errs: &mut Vec<FieldError>, v: Option<&Value>) -> Option<PolicySection> {
    let m = match v {
        Some(Value::Object(m)) => m,
        None | Some(Value::Null) => {
            errs.push(FieldError::new(
                "policy",
                "is required: a mapping with at least default (allow, escalate or block; rules are optional), e.g. policy: {default: escalate}",
            ));
            return None;
        }
        Some(_) => {
            errs.push(FieldError::new(
                "policy",
                "must be a mapping with at least default (allow, escalate or block; rules are optional), e.g. policy: {default: escalate}",
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
            "classifier",
            "time_zone",
        ],
    );
    let default = get_effect(errs, "policy.default", m.get("default"));
    let escalation_ttl = get_duration(
        errs,
        "policy.escalation_ttl",
        m.get("escalation_ttl"),
        Duration::from_secs(86_400),
    );
    if !(Duration::from_secs(1)..=MAX_POLICY_WINDOW).contains(&escalation_ttl) {
        errs.push(FieldError::new(
            "policy.escalation_ttl",
            "must be from 1s to 366d",
        ));
    }
    let history_window = get_duration(
        errs,
        "policy.history_window",
        m.get("history_window"),
        Duration::from_secs(86_400),
    );
    if history_window > MAX_POLICY_WINDOW {
        errs.push(FieldError::new(
            "policy.history_window",
            "must be at most 366d",
        ));
    }
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
    let rules = parse_rules(errs, m.get("rules"));
    let classifier = parse_classifier(errs, m.get("classifier"));
    let time_zone = parse_time_zone(errs, m.get("time_zone"));
    Some(PolicySection {
        default: default.unwrap_or(Effect::Block),
        escalation_ttl,
        history_window,
        max_open_escalations_per_agent: cap,
        rules,
        classifier,
        time_zone,
    })
}

/// `policy.classifier`: `{endpoint: NAME, timeout: 300ms}` (timeout optional, 10ms to 5s).
fn parse_classifier(errs: &mut Vec<FieldError>, v: Option<&Value>) -> Option<ClassifierRef> {
    let m = match v {
        None | Some(Value::Null) => return None,
        Some(Value::Object(m)) => m,
        Some(_) => {
            errs.push(FieldError::new(
                "policy.classifier",
                "must be a mapping {endpoint: NAME, timeout: 300ms}",
            ));
            return None;
        }
    };
    unknown_keys(errs, "policy.classifier", m, &["endpoint", "timeout"]);
    let endpoint = match m.get("endpoint") {
        Some(Value::String(s)) if classifier::valid_endpoint_name(s) => s.clone(),
        None | Some(Value::Null) => {
            errs.push(FieldError::new(
                "policy.classifier.endpoint",
                "is required: the name of a classifier configured on the policy service",
            ));
            return None;
        }
        Some(v) => {
            errs.push(FieldError::new(
                "policy.classifier.endpoint",
                format!(
                    "must match ^[a-z0-9][a-z0-9_.-]{{0,63}}$, a name the operator configured, not a URL (got {})",
                    got(v)
                ),
            ));
            return None;
        }
    };
    let timeout = get_duration(
        errs,
        "policy.classifier.timeout",
        m.get("timeout"),
        classifier::DEFAULT_TIMEOUT,
    );
    if !(classifier::MIN_TIMEOUT..=classifier::MAX_TIMEOUT).contains(&timeout) {
        errs.push(FieldError::new(
            "policy.classifier.timeout",
            "must be from 10ms to 5s (the call runs while policy holds the proposal)",
        ));
    }
    Some(ClassifierRef { endpoint, timeout })
}

/// `policy.rules`: a list of at most [`MAX_RULES`] rules with unique names.
fn parse_rules(errs: &mut Vec<FieldError>, v: Option<&Value>) -> Vec<RuleDef> {
    let mut rules = Vec::new();
    match v {
        None => {}
        Some(Value::Array(a)) => {
            if a.len() > MAX_RULES {
                errs.push(FieldError::new(
                    "policy.rules",
                    format!("has more than {MAX_RULES} rules"),
                ));
            }
            let mut names = HashSet::new();
            for (i, r) in a.iter().enumerate() {
                let p = format!("policy.rules[{i}]");
                if let Some(rule) = parse_rule(errs, &p, r, &mut names) {
                    rules.push(rule);
                }
            }
        }
        Some(_) => errs.push(FieldError::new("policy.rules", "must be a list")),
    }
    rules
}

/// One rule at path `p`; `names` holds the names seen so far. Every field is checked (all
/// errors are reported); the rule is returned when its effect is valid.
fn parse_rule(
    errs: &mut Vec<FieldError>,
    p: &str,
    r: &Value,
    names: &mut HashSet<String>,
) -> Option<RuleDef> {
    let Some(rm) = r.as_object() else {
        errs.push(FieldError::new(
            p,
            "must be a mapping with name, when, effect, reason",
        ));
        return None;
    };
    unknown_keys(errs, p, rm, &["name", "when", "effect", "reason"]);
    let name = rule_name(errs, p, rm, names);
    let when = rule_when(errs, p, rm);
    let effect = get_effect(errs, &format!("{p}.effect"), rm.get("effect"));
    let reason = rule_reason(errs, p, rm);
    effect.map(|effect| RuleDef {
        name,
        when,
        effect,
        reason,
    })
}

/// `name`: `^[a-z0-9][a-z0-9_.-]{0,63}$`, unique in the document.
fn rule_name(
    errs: &mut Vec<FieldError>,
    p: &str,
    rm: &Map<String, Value>,
    names: &mut HashSet<String>,
) -> String {
    let name = rm
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let name_ok = !name.is_empty()
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-' | '.'));
    if !name_ok {
        let rule = match rm.get("name") {
            None | Some(Value::Null) => "is required: ^[a-z0-9][a-z0-9_.-]{0,63}$".to_owned(),
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
    name
}

/// `when`: a non-empty CEL expression of at most [`MAX_RULE_LEN`] bytes that compiles
/// (that it gives a boolean is checked by [`rules_refused_on_apply`] when a document is applied).
fn rule_when(errs: &mut Vec<FieldError>, p: &str, rm: &Map<String, Value>) -> String {
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
            format!("is longer than {MAX_RULE_LEN} bytes (UTF-8)"),
        ));
    } else if let Err(e) = compile_rule(&when) {
        errs.push(FieldError::new(
            format!("{p}.when"),
            format!("does not compile as CEL: {e}"),
        ));
    }
    when
}

/// What is refused of rules in a document being applied, not in a stored one being loaded
/// (see [`super::TenantDocument::parse_stored`]), as field errors (`policy.rules[i].when`):
/// a `when` that certainly gives something other than a boolean ([`non_boolean`]), and one
/// that nests deeper than [`MAX_RULE_DEPTH`].
pub(super) fn rules_refused_on_apply(rules: &[RuleDef]) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, r) in rules.iter().enumerate() {
        let Ok(program) = compile_rule(&r.when) else {
            continue;
        };
        let field = || format!("policy.rules[{i}].when");
        if let Some(gives) = non_boolean(&program) {
            errs.push(FieldError::new(
                field(),
                format!("must be a boolean expression (this one gives {gives})"),
            ));
        }
        let levels = depth(program.expression());
        if levels > MAX_RULE_DEPTH {
            errs.push(FieldError::new(
                field(),
                format!(
                    "nests {levels} levels deep, more than {MAX_RULE_DEPTH} (each operator such as `+` is a level): split it into several rules or shorter expressions"
                ),
            ));
        }
    }
    errs
}

/// Type errors of the rules of a document being applied ([`crate::rule_types`]): undeclared
/// names, fields the value does not have, operators on types they do not take, comparisons
/// that can never be true. Each is a field error on `policy.rules[i].when` that starts with
/// the rule's name. `handlers` are the document's enabled handlers (they type `params`).
pub(super) fn rule_type_errors(
    rules: &[RuleDef],
    handlers: impl IntoIterator<Item = crate::handlers::HandlerKind>,
) -> Vec<FieldError> {
    let env = crate::rule_types::RuleEnv::new(handlers);
    let mut errs = Vec::new();
    for (i, r) in rules.iter().enumerate() {
        let Ok(program) = compile_rule(&r.when) else {
            continue;
        };
        // A rule already refused for its shape is not checked again.
        if non_boolean(&program).is_some() || depth(program.expression()) > MAX_RULE_DEPTH {
            continue;
        }
        for problem in env.check(program.expression()) {
            errs.push(FieldError::new(
                format!("policy.rules[{i}].when"),
                format!("rule {:?}: {problem}", r.name),
            ));
        }
    }
    errs
}

/// Rule names that policy itself records as the deciding rule: a budget's escalation, a frozen
/// or revoked agent's block, an unknown action, a handler's `min_effect`, a tenant without a
/// document.
pub(super) const RESERVED_RULE_NAMES: [&str; 6] = [
    "budget",
    "agent-frozen",
    "agent-revoked",
    "no-handler",
    "min-effect",
    "no-document",
];

/// Rules named like one of policy's own decisions ([`RESERVED_RULE_NAMES`]), as field errors
/// (`policy.rules[i].name`). A rule named `no-handler` counted every proposal it decided in
/// `actiond_policy_no_handler_total` and fired the injection alert `ActiondNoHandlerAttempts`;
/// one named `budget` read as a budget's escalation in every record. Checked on documents being
/// applied, not on stored ones being loaded (see [`super::TenantDocument::parse_stored`]).
pub(super) fn reserved_rule_names(rules: &[RuleDef]) -> Vec<FieldError> {
    rules
        .iter()
        .enumerate()
        .filter(|(_, r)| RESERVED_RULE_NAMES.contains(&r.name.as_str()))
        .map(|(i, r)| {
            FieldError::new(
                format!("policy.rules[{i}].name"),
                format!(
                    "{:?} is reserved: policy records it as the deciding rule of its own decisions ({}); choose another name",
                    r.name,
                    RESERVED_RULE_NAMES.join(", ")
                ),
            )
        })
        .collect()
}

/// `reason`: non-empty text of at most 500 characters, shown to agents and approvers.
fn rule_reason(errs: &mut Vec<FieldError>, p: &str, rm: &Map<String, Value>) -> String {
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
    reason
}
