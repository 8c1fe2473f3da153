//! The tenant document: a versioned, immutable YAML document applied with
//! `actiond tenant apply -f tenant.yaml` (design, "Multi-tenancy").
//!
//! ```yaml
//! tenant: acme
//! policy:
//!   default: escalate            # required: allow | escalate | block
//!   escalation_ttl: 24h          # pending/escalated older than this expire (default 24h)
//!   history_window: 24h          # window of `history.count` / `history.sum` (default 24h)
//!   max_open_escalations_per_agent: 20
//!   classifier: {endpoint: injection-guard, timeout: 300ms}   # optional; can only raise
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
//!     reauth_within: 10m         # Approve needs an IdP sign-in this recent (auth_time)
//!     confirm: [amount]          # the approver types the amount again…
//!     confirm_over: 50000        # …when it is above this (minor units)
//!     approvals:                 # staged approvals (instead of approvals_required)
//!       stages: [{approvers: team-leads, required: 1, within: 30m}]
//!       on_timeout: next         # next | expire (see `stages`)
//!     require_passkey: true      # Approve is signed with the approver's passkey…
//!     passkey_over: 50000        # …when the amount is above this (minor units)
//! approvers:
//!   claim: groups                # ID-token claim holding group names
//!   values: [acme-approvers]
//!   subjects: [ops-oncall]       # subjects allowed to approve (also for `--as` on the CLI)
//!   issuer: https://sso.example  # whose subjects these are (default: the web's issuer)
//!   max_claims_age: 1h           # older login claims → sign in again before an Approve
//!   require_passkey: false       # true: every Approve in the tenant needs a passkey
//! notify:
//!   webhook: approvals-chat      # credential name holding a chat webhook URL
//! retention:
//!   decided_after: 30d           # purge params/source text/reasons of decided proposals
//! budgets:                       # sums that escalate once exceeded (see `budgets`)
//!   - {action: billing.refund.issue, sum_of: amount, max: 50000, per: 24h, scope: agent}
//! admins:                        # who reads the tenant's admin pages (shadow report)
//!   values: [acme-admins]
//! ```
//! Every validation error names the field path and the rule. CEL rules are compiled at apply.
//!
//! Each top-level section is parsed by its own module (`policy`, `handlers` with `stages`, `approvers`,
//! `notify`, `retention`, `budgets`, `admins`); this one holds the document, its entry points and the field
//! readers they share, and `nesting` the pre-scan that refuses deeply nested flow collections
//! before the YAML reader sees them.

mod admins;
mod approvers;
mod budgets;
#[cfg(test)]
mod doc_tests;
mod handlers;
mod nesting;
mod notify;
mod policy;
mod read;
mod retention;
mod stages;

pub use admins::Admins;
pub(crate) use approvers::claim_matches;
pub use approvers::{
    Approvers, DEFAULT_MAX_CLAIMS_AGE, PasskeyAttestation, may_decide, may_decide_by_subject,
    pinned_issuer,
};
pub use budgets::{
    Budget, BudgetScope, MAX_BUDGET_LIMIT, MAX_BUDGET_WINDOW, MAX_BUDGETS, MIN_BUDGET_WINDOW,
};
pub use handlers::{DEFAULT_GRANT_LIFETIME, HandlerEntry, MAX_GRANT_LIFETIME, OnStale};
pub use notify::Notify;
pub use policy::{MAX_RULE_LEN, MAX_RULES, PolicySection, RuleDef};
use read::{got, unknown_keys};
pub use retention::{MAX_DECIDED_AFTER, MIN_DECIDED_AFTER, Retention};
pub use stages::{
    MAX_STAGE_WITHIN, MAX_STAGES, MIN_STAGE_WITHIN, OnTimeout, StageDef, StagedApprovals,
};

use crate::ids::{TenantId, format_duration};
use crate::vocab::HandlerKind;
use crate::{FieldError, FieldErrors};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

/// Maximum size of a tenant document source (bytes).
pub const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// How deep a tenant document's collections may nest: the YAML reader's own limit. Flow
/// collections (`[…]`, `{…}`) nested deeper are refused before the document is read: the reader
/// takes time in the square of their depth before its own limit applies.
pub const MAX_DOCUMENT_DEPTH: usize = 128;

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
    /// How long decided proposals keep their customer data.
    pub retention: Retention,
    /// Declared budgets; a proposal past one escalates.
    pub budgets: Vec<Budget>,
    /// Who may read the tenant's admin pages.
    pub admins: Admins,
}

impl TenantDocument {
    /// Parses and validates a YAML (or JSON) document, as `tenant apply` and the shadow apply
    /// take it. All errors are reported together (the rules' boolean check after the rest).
    pub fn parse(source: &str) -> Result<Self, FieldErrors> {
        let doc = Self::parse_stored(source)?;
        let mut errs = policy::rules_refused_on_apply(&doc.policy.rules);
        errs.extend(policy::reserved_rule_names(&doc.policy.rules));
        errs.extend(policy::rule_type_errors(
            &doc.policy.rules,
            doc.handlers.values().map(|h| h.kind),
        ));
        errs.extend(approvers::non_https_issuer(&doc.approvers));
        for (name, h) in &doc.handlers {
            if let Some(settings) = h.settings.as_object() {
                errs.extend(
                    h.kind
                        .validate_applied_settings(&format!("handlers[{name:?}]"), settings),
                );
            }
        }
        if errs.is_empty() {
            Ok(doc)
        } else {
            Err(FieldErrors(errs))
        }
    }

    /// Parses a document that was stored by an earlier version: every check of [`Self::parse`]
    /// but the ones added since documents were first stored, so an upgrade never turns a
    /// stored document into one that no longer loads. Today those are the boolean check of
    /// rules (a stored `when: '1 + 1'` keeps failing closed at evaluation, escalating, as
    /// before), the refund handler's `currencies` list (a stored non-list enables no
    /// currency), the reserved rule names and the `https://` rule of `approvers.issuer` (a
    /// stored `http://` issuer still matches only its own sign-ins, as before).
    pub fn parse_stored(source: &str) -> Result<Self, FieldErrors> {
        if source.len() > MAX_DOCUMENT_BYTES {
            return Err(FieldErrors::one(
                "document",
                format!("is larger than {MAX_DOCUMENT_BYTES} bytes"),
            ));
        }
        // YAML allows a byte order mark at the start of the stream; the reader counts it as a
        // column of the first line, which then no longer lines up with the next ones ("more
        // than one document").
        let source = source.strip_prefix('\u{feff}').unwrap_or(source);
        let scan = nesting::scan(source, MAX_DOCUMENT_DEPTH);
        if let Some(at) = scan.too_deep {
            return Err(FieldErrors::one(
                "document",
                format!(
                    "nests deeper than {MAX_DOCUMENT_DEPTH} levels ([ or {{ at line {} column {})",
                    at.line, at.column
                ),
            ));
        }
        // serde_yaml_ng keeps the last of duplicate keys when building a Value; the strict
        // reader refuses them (`tenant: a` then `tenant: b` must not silently pick one).
        let value = match crate::canonical::deserialize_strict(
            serde_yaml_ng::Deserializer::from_str(source),
        ) {
            // Nothing but comments and blanks: the reader's own word for it is "invalid type:
            // Option value" (a null for a lone `---`).
            Err(_) | Ok(Value::Null) if !scan.content => {
                return Err(FieldErrors::one(
                    "document",
                    "is empty: expected a mapping with at least `tenant` and `policy`",
                ));
            }
            Ok(value) => value,
            Err(e) => {
                let at = if e.path.is_empty() {
                    "document".to_owned()
                } else {
                    e.path
                };
                return Err(FieldErrors::one(
                    at,
                    format!("is not a valid document: {}", e.rule),
                ));
            }
        };
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
            &[
                "tenant",
                "policy",
                "handlers",
                "approvers",
                "notify",
                "retention",
                "budgets",
                "admins",
            ],
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
        let policy = policy::parse_policy(&mut errs, root.get("policy"));
        let handlers = handlers::parse_handlers(&mut errs, root.get("handlers"));
        let approvers = approvers::parse_approvers(&mut errs, root.get("approvers"));
        let notify = notify::parse_notify(&mut errs, root.get("notify"));
        let retention = retention::parse_retention(&mut errs, root.get("retention"));
        let budgets = budgets::parse_budgets(&mut errs, root.get("budgets"), &handlers);
        let admins = admins::parse_admins(&mut errs, root.get("admins"));
        if let Some(p) = &policy {
            check_stage_groups(&mut errs, &handlers, &approvers, p.escalation_ttl);
        }
        match (tenant, policy) {
            (Some(tenant), Some(policy)) if errs.is_empty() => Ok(Self {
                tenant,
                policy,
                handlers,
                approvers,
                notify,
                retention,
                budgets,
                admins,
            }),
            _ => Err(FieldErrors(errs)),
        }
    }

    /// The budgets declared for `action`, in document order.
    pub fn budgets_of<'a, 's>(
        &'a self,
        action: &'s str,
    ) -> impl Iterator<Item = &'a Budget> + use<'a, 's> {
        self.budgets.iter().filter(move |b| b.action == action)
    }

    /// The handler entry for an action, if this tenant enables it and the registry has it.
    pub fn handler(&self, action: &str) -> Option<&HandlerEntry> {
        HandlerKind::lookup(action)?;
        self.handlers.get(action)
    }
}

/// Every stage's group must be one of `approvers.values` (a claim value that makes someone an
/// approver of this tenant), and the stages together must fit in `policy.escalation_ttl`, which
/// still bounds every escalation: a last stage that could never finish is refused at apply.
fn check_stage_groups(
    errs: &mut Vec<FieldError>,
    handlers: &BTreeMap<String, HandlerEntry>,
    approvers: &Approvers,
    escalation_ttl: Duration,
) {
    for (action, h) in handlers {
        let Some(st) = &h.approvals else { continue };
        let p = format!("handlers[{}].approvals", Value::String(action.clone()));
        for (i, s) in st.stages.iter().enumerate() {
            if !approvers.values.contains(&s.approvers) {
                errs.push(FieldError::new(
                    format!("{p}.stages[{i}].approvers"),
                    format!(
                        "{:?} is not one of approvers.values ({}): a stage's group is a value of approvers.claim ({}) that makes someone an approver",
                        s.approvers,
                        approvers.values.join(", "),
                        approvers.claim
                    ),
                ));
            }
        }
        if st.total_within() > escalation_ttl {
            errs.push(FieldError::new(
                format!("{p}.stages"),
                format!(
                    "the stages' within add up to {}, more than policy.escalation_ttl ({}), which expires every escalation",
                    format_duration(st.total_within()),
                    format_duration(escalation_ttl)
                ),
            ));
        }
    }
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

    /// OIDC Discovery needs `https://`: an `http://` (or any other) issuer is refused when a
    /// document is applied, naming `approvers.issuer`, except on a loopback host; a stored
    /// document with one still loads.
    #[test]
    fn an_approvers_issuer_must_be_https_outside_loopback() {
        let with = |issuer: &str| {
            format!("{DOC}approvers:\n  issuer: {issuer}\n  values: [acme-approvers]\n")
        };
        for bad in [
            "http://sso.example",
            "http://10.0.0.5:8080",
            "ftp://sso.example",
            "http://127.0.0.1.sso.example",
        ] {
            let e = TenantDocument::parse(&with(bad)).unwrap_err().to_string();
            assert!(
                e.starts_with("approvers.issuer: must be an https:// URL"),
                "{bad}: {e}"
            );
            assert!(TenantDocument::parse_stored(&with(bad)).is_ok(), "{bad}");
        }
        for good in [
            "https://sso.example",
            "http://127.0.0.1:5556/dex",
            "http://127.8.9.1",
            "http://localhost:8080",
            "http://[::1]:9000",
        ] {
            assert!(TenantDocument::parse(&with(good)).is_ok(), "{good}");
        }
    }

    #[test]
    fn rules_may_not_take_the_names_policy_records_for_its_own_decisions() {
        for name in policy::RESERVED_RULE_NAMES {
            let doc = DOC.replace("- name: shell\n", &format!("- name: {name}\n"));
            let e = TenantDocument::parse(&doc).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("policy.rules[0].name: {name:?} is reserved")),
                "{e}"
            );
            // A document stored before the check still loads.
            assert!(TenantDocument::parse_stored(&doc).is_ok());
        }
        let doc = DOC.replace("- name: shell\n", "- name: no-handler-attempts\n");
        assert!(TenantDocument::parse(&doc).is_ok());
    }

    #[test]
    fn the_classifier_is_a_configured_name_with_a_bounded_timeout() {
        let with = |c: &str| {
            DOC.replace(
                "  default: escalate\n",
                &format!("  default: escalate\n  classifier: {c}\n"),
            )
        };
        let d = TenantDocument::parse(&with("{endpoint: guard}")).unwrap();
        let c = d.policy.classifier.unwrap();
        assert_eq!(
            (c.endpoint.as_str(), c.timeout),
            ("guard", crate::classifier::DEFAULT_TIMEOUT)
        );
        let d = TenantDocument::parse(&with("{endpoint: guard, timeout: 2s}")).unwrap();
        assert_eq!(d.policy.classifier.unwrap().timeout, Duration::from_secs(2));
        assert!(
            TenantDocument::parse(DOC)
                .unwrap()
                .policy
                .classifier
                .is_none()
        );
        for (bad, field) in [
            (
                "{endpoint: 'http://evil.example/'}",
                "policy.classifier.endpoint",
            ),
            ("{timeout: 300ms}", "policy.classifier.endpoint"),
            (
                "{endpoint: guard, timeout: 1ms}",
                "policy.classifier.timeout",
            ),
            (
                "{endpoint: guard, timeout: 1m}",
                "policy.classifier.timeout",
            ),
            ("{endpoint: guard, url: x}", "policy.classifier"),
            ("guard", "policy.classifier"),
        ] {
            let e = TenantDocument::parse(&with(bad)).unwrap_err().to_string();
            assert!(e.contains(field), "{bad}: {e}");
        }
    }

    #[test]
    fn rules_must_be_boolean_expressions() {
        let with = |when: &str| DOC.replace(r#"'action.startsWith("shell.")'"#, when);
        for (when, gives) in [
            ("'1 + 1'", "the result of +"),
            ("'42'", "an int"),
            (r#"'"yes"'"#, "a string"),
            ("'[true]'", "a list"),
            ("'{\"a\": true}'", "a map"),
            ("'size(params)'", "an int"),
            ("'params.amount * 2'", "the result of *"),
            ("'true ? 1 : 2'", "an int"),
            ("'[1, 2].map(x, x > 1)'", "a list"),
            ("'string(params.amount)'", "a string"),
            ("'null'", "null"),
        ] {
            let e = TenantDocument::parse(&with(when)).unwrap_err().to_string();
            let want = format!(
                "policy.rules[0].when: must be a boolean expression (this one gives {gives})"
            );
            assert!(e.contains(&want), "{when}: {e}");
            // A document stored before this check still loads (and fails closed when run).
            TenantDocument::parse_stored(&with(when)).unwrap_or_else(|e| panic!("{when}: {e}"));
        }
        // What may be a boolean passes: a field read, a comparison, a macro that ends in one, a
        // conditional with one boolean branch; a missing field is the policy worker's to handle.
        for when in [
            "'true'",
            "'has(params.amount)'",
            "'[1, 2].exists(x, x > 1)'",
            "'[1, 2].exists_one(x, x > 1)'",
            "'[1, 2].all(x, x > 1)'",
            "'params.amount > 5 ? true : 1'",
            "'!(action in [\"billing.refund.issue\", \"webhook.post\"])'",
        ] {
            TenantDocument::parse(&with(when)).unwrap_or_else(|e| panic!("{when}: {e}"));
        }
        // A field no enabled handler has is the type check's to refuse on apply
        // (`crate::rule_types`); stored, it still loads and fails closed when run.
        for when in ["'params.urgent'", "'params.nope > 1'", "'params.tags[0]'"] {
            let e = TenantDocument::parse(&with(when)).unwrap_err().to_string();
            assert!(e.contains("has no param"), "{when}: {e}");
            TenantDocument::parse_stored(&with(when)).unwrap_or_else(|e| panic!("{when}: {e}"));
        }
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

    /// Flow collections nested past the reader's limit are refused before the reader scans
    /// them (it takes time in the square of their depth: `a: [` repeated to the size cap took
    /// 20 s), naming the document and where; brackets in scalars and comments are text.
    #[test]
    fn deep_flow_nesting_is_refused_before_the_reader_runs() {
        for (unit, column) in [("[", 129), ("{a: ", 513), ("a: [", 516), ("- [\n", 3)] {
            let src = unit.repeat((MAX_DOCUMENT_BYTES - 16) / unit.len());
            // The pre-scan's own error: the reader never saw the document.
            let e = TenantDocument::parse(&src).unwrap_err().to_string();
            let line = if unit.ends_with('\n') { 129 } else { 1 };
            assert_eq!(
                e,
                format!(
                    "document: nests deeper than 128 levels ([ or {{ at line {line} column {column})"
                ),
                "{unit:?}"
            );
        }
        // What the reader accepts is never refused: 128 levels in all (the document's mapping
        // and 127 sequences) load; 129 are the reader's error; 129 sequences are refused first.
        let nested = |n: usize| format!("{DOC}x: {}{}\n", "[".repeat(n), "]".repeat(n));
        assert_eq!(
            errors_of(&nested(127)),
            [
                "x: unknown field; expected one of: tenant, policy, handlers, approvers, notify, retention, budgets, admins"
            ]
        );
        let e = TenantDocument::parse(&nested(128)).unwrap_err().to_string();
        assert!(e.contains("recursion limit exceeded"), "{e}");
        let e = TenantDocument::parse(&nested(129)).unwrap_err().to_string();
        assert!(
            e.starts_with("document: nests deeper than 128 levels"),
            "{e}"
        );
        // Brackets in quoted and plain scalars, block scalars and comments open nothing.
        let open = "[{".repeat(65);
        let doc = format!(
            r#"tenant: acme # {open}
policy:
  default: escalate
  rules:
    - name: shell
      when: 'params.payment_id == "{open}" || action.startsWith("shell.")'
      effect: block
      reason: No shell [{open}] {{c}} # {open}
    - name: items
      when: "params.payment_id == '{open}'"
      effect: escalate
      reason: |
        {open}
         {open}
      # {open}
handlers:
  billing.refund.issue:
    credential: payments
    max_amount: 100000
"#
        );
        let d = TenantDocument::parse(&doc).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(d.policy.rules[0].reason, format!("No shell [{open}] {{c}}"));
        assert_eq!(d.policy.rules[1].reason, format!("{open}\n {open}\n"));
    }

    /// YAML allows a byte order mark at the start of the stream. The reader alone counts it as
    /// a column of the first line, so the first key and the next ones were no longer one mapping
    /// ("more than one document").
    #[test]
    fn a_leading_byte_order_mark_is_skipped() {
        let with_bom = format!("\u{feff}{}", DOC.trim_start());
        let d = TenantDocument::parse(&with_bom).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(d.tenant.as_str(), "acme");
        let d = TenantDocument::parse_stored(&with_bom).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(d.policy.rules.len(), 1);
        // Only one: a second is the reader's to refuse.
        assert!(TenantDocument::parse(&format!("\u{feff}{with_bom}")).is_err());
    }

    /// A document with nothing in it says so (the reader's own word is "invalid type: Option
    /// value"); an explicit null is no mapping.
    #[test]
    fn an_empty_document_says_it_is_empty() {
        for empty in [
            "",
            "\n  \n",
            "# tenant: acme\n\n# policy:\n",
            "---\n",
            "\u{feff}",
            "--- # x\n...\n",
        ] {
            assert_eq!(
                errors_of(empty),
                ["document: is empty: expected a mapping with at least `tenant` and `policy`"],
                "{empty:?}"
            );
        }
        for null in ["~", "null\n", "--- null"] {
            assert_eq!(errors_of(null), ["document: must be a mapping"], "{null:?}");
        }
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
    fn a_document_of_only_its_tenant_says_what_policy_needs() {
        // What is missing is `policy.default`; rules are optional (before: "a mapping with
        // default and rules", which sent newcomers writing rules they did not need).
        let e = errors_of("tenant: acme\n");
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].starts_with("policy: is required"), "{e:?}");
        assert!(e[0].contains("rules are optional"), "{e:?}");
        assert!(e[0].contains("policy: {default: escalate}"), "{e:?}");
        assert!(TenantDocument::parse("tenant: acme\npolicy: {default: escalate}\n").is_ok());
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

    #[test]
    fn passkey_settings_name_the_field_and_rule() {
        let with = |extra: &str| {
            DOC.replace(
                "max_amount: 100000",
                &format!("max_amount: 100000\n    {extra}"),
            )
        };
        let d =
            TenantDocument::parse(&with("require_passkey: true\n    passkey_over: 50000")).unwrap();
        let h = d.handler("billing.refund.issue").unwrap();
        assert_eq!((h.require_passkey, h.passkey_over), (true, Some(50000)));
        let small = serde_json::json!({"amount": 50000});
        let big = serde_json::json!({"amount": 50001});
        assert!(!crate::approval::passkey_required(false, h, &small));
        assert!(crate::approval::passkey_required(false, h, &big));
        assert!(
            crate::approval::passkey_required(true, h, &small),
            "tenant-wide wins"
        );
        let p = "handlers[\"billing.refund.issue\"]";
        assert_eq!(
            errors_of(&with("require_passkey: \"yes\"")),
            [format!(
                "{p}.require_passkey: must be true or false (got \"yes\")"
            )]
        );
        assert_eq!(
            errors_of(&with("passkey_over: 50000")),
            [format!("{p}.passkey_over: needs require_passkey: true")]
        );
        assert_eq!(
            errors_of(&with("require_passkey: true\n    passkey_over: -1")),
            [format!(
                "{p}.passkey_over: must be a non-negative integer in minor units (got -1)"
            )]
        );
        let e = errors_of(&format!("{DOC}approvers:\n  require_passkey: 1\n"));
        assert_eq!(e, ["approvers.require_passkey: must be true or false"]);
        let d =
            TenantDocument::parse(&format!("{DOC}approvers:\n  require_passkey: true\n")).unwrap();
        assert!(d.approvers.require_passkey);
    }
}
