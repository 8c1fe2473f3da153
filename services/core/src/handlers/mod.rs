//! The fixed handler registry: what each action's params look like, how its target derives from
//! them, how it reads as one sentence, which params carry the risk, and which per-tenant settings
//! it takes. Execution lives in the executor; this is the part every service needs.
//!
//! Each handler's facts and rules live in its own module (`webhook`, `refund`, `dns`, `email`,
//! `db_statement`) as one `Spec`: params schema, checks, target, summary, money params,
//! limits, card facts. This module is the registry ([`HandlerKind::ALL`] and the match from a
//! kind to its spec) and the rules every handler shares (unknown and required params, the
//! setting keys, the credential name, headers, summary templates); `spec` holds the `Spec`
//! type and shared checks, `card` the decision card's words. The executor's half of a handler
//! (run, preview) is in `actiond-executor`'s `handlers` module. Adding a handler:
//! `docs/ARCHITECTURE.md`, "Adding a handler".
//!
//! Lookup is an exact comparison with the registry's names: `constructor`, `__proto__`,
//! `toString`, `shell.exec` and every other unknown name simply miss (design, "Handlers").

pub mod card;
pub mod db_statement;
pub mod dns;
pub mod email;
pub(crate) mod refund;
pub(crate) mod spec;
pub mod ticket;
mod webhook;

pub use crate::vocab::{HandlerKind, MoneyFields, format_minor_units, minor_unit_exponent};
pub use dns::{is_canonical_dns_name, is_dns_name};

use crate::{FieldError, FieldErrors, ids::is_credential_part};
use card::{Card, CardInput};
use serde_json::{Map, Value};
use spec::{Spec, check_headers, field};

impl HandlerKind {
    /// Every handler in the registry.
    pub const ALL: [HandlerKind; 6] = [
        Self::WebhookPost,
        Self::BillingRefundIssue,
        Self::DnsRecordUpdate,
        Self::EmailSend,
        Self::DbStatementExecute,
        Self::TicketCommentAdd,
    ];

    fn spec(self) -> &'static Spec {
        match self {
            Self::WebhookPost => &webhook::SPEC,
            Self::BillingRefundIssue => &refund::SPEC,
            Self::DnsRecordUpdate => &dns::SPEC,
            Self::EmailSend => &email::SPEC,
            Self::DbStatementExecute => &db_statement::SPEC,
            Self::TicketCommentAdd => &ticket::SPEC,
        }
    }

    /// The params that carry money (an integer amount in minor units and its currency), if
    /// this handler has them.
    pub fn money(self) -> Option<MoneyFields> {
        self.spec().money
    }

    /// The params schema with the tenant's own limits from its `settings` written in (a
    /// refund's `max_amount` and `currencies`), for the per-tenant API document.
    pub fn params_schema_for(self, settings: &Value) -> Value {
        let mut schema = self.params_schema();
        (self.spec().tenant_schema)(&mut schema, settings);
        schema
    }

    /// Setting rules a document must pass when it is applied, beyond those of
    /// [`Self::validate_settings`]: rules added after documents were first stored, which a
    /// stored document is not held to when it is loaded again.
    pub fn validate_applied_settings(
        self,
        path: &str,
        settings: &Map<String, Value>,
    ) -> Vec<FieldError> {
        let mut errs = Vec::new();
        (self.spec().check_applied)(path, settings, &mut errs);
        errs
    }

    /// The limits the tenant's `settings` put on this handler's params, in words for agents
    /// (tool descriptions): "currency one of USD, EUR", "zone one of example.com".
    pub fn limits(self, settings: &Value) -> Vec<String> {
        (self.spec().limits)(settings)
    }

    /// The decision card's facts and Approve label for a proposal of this handler.
    pub fn card(self, input: &CardInput<'_>) -> Card {
        (self.spec().card)(input)
    }

    /// The params the card's facts show; any other param gets a fact of its own.
    pub fn card_covers(self) -> &'static [&'static str] {
        self.spec().card_covers
    }

    /// A risky param's value on one line of the queue, when the handler says it in plain
    /// words (a refund's amount in major units, a webhook body's addresses and destination);
    /// `None`: show the plain value.
    pub fn queue_value(self, name: &str, params: &Value, target: &str) -> Option<String> {
        let value = params.get(name)?;
        if let Some(m) = self.money()
            && name == m.amount
            && let (Some(n), Some(cur)) = (
                value.as_i64(),
                params.get(m.currency).and_then(Value::as_str),
            )
        {
            return Some(card::money(n, cur));
        }
        (self.spec().queue_value)(name, value, target)
    }

    /// Exact-match lookup. Unknown names, including prototype names, return `None`.
    pub fn lookup(action: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|h| h.action() == action)
    }

    /// The action name.
    pub fn action(self) -> &'static str {
        self.spec().action
    }

    /// One line for tool descriptions and docs.
    pub fn description(self) -> &'static str {
        self.spec().description
    }

    /// Whether the provider honours an idempotency key (the grant id is sent as one).
    pub fn honours_idempotency_key(self) -> bool {
        self.spec().honours_idempotency_key
    }

    /// Param whose sum over the agent's recent history policy rules can read as `history.sum`.
    pub fn history_sum_param(self) -> Option<&'static str> {
        self.spec().history_sum_param
    }

    /// Params that carry the risk, highlighted to approvers by default.
    pub fn default_risky(self) -> &'static [&'static str] {
        self.spec().default_risky
    }

    /// Params a person may change when approving with an edit; the edited params are
    /// validated again with [`HandlerKind::validate_params`] (see [`crate::amend`]).
    pub fn editable(self) -> &'static [&'static str] {
        self.spec().editable
    }

    /// Default one-sentence summary template; `{param}` is replaced by the param's value and
    /// `{amount}` by the amount in major units for refunds.
    pub fn default_summary(self) -> &'static str {
        self.spec().default_summary
    }

    /// JSON Schema (2020-12) of the params, for the OpenAPI document and MCP tool descriptions.
    pub fn params_schema(self) -> Value {
        (self.spec().params_schema)()
    }

    /// Validates params against the schema and the tenant's settings for this handler. Every
    /// error names `params.<field>` and the rule.
    pub fn validate_params(self, params: &Value, settings: &Value) -> Result<(), FieldErrors> {
        let Some(obj) = params.as_object() else {
            return Err(FieldErrors::one("params", "must be a JSON object"));
        };
        let mut errs = Vec::new();
        let schema = self.params_schema();
        let props = schema
            .get("properties")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        for k in obj.keys() {
            if !props.contains_key(k) {
                let known: Vec<&str> = props.keys().map(String::as_str).collect();
                errs.push(FieldError::new(
                    field(k),
                    format!(
                        "unknown parameter for {}; expected one of: {}",
                        self.action(),
                        known.join(", ")
                    ),
                ));
            }
        }
        if let Some(req) = schema.get("required").and_then(Value::as_array) {
            for r in req.iter().filter_map(Value::as_str) {
                if !obj.contains_key(r) {
                    errs.push(FieldError::new(field(r), "is required"));
                }
            }
        }
        (self.spec().check_params)(obj, settings, &mut errs);
        if errs.is_empty() {
            Ok(())
        } else {
            Err(FieldErrors(errs))
        }
    }

    /// The target as derived from (validated) params and settings: the webhook URL, the payment
    /// id, or `zone/name` for DNS.
    pub fn derive_target(self, params: &Value, settings: &Value) -> String {
        (self.spec().derive_target)(params, settings)
    }

    /// Validates the handler-specific part of a tenant's handler entry (the common keys have
    /// been removed). `path` is the entry's path for error messages.
    pub fn validate_settings(self, path: &str, settings: &Map<String, Value>) -> Vec<FieldError> {
        let spec = self.spec();
        let mut errs = Vec::new();
        let allowed = spec.settings;
        for k in settings.keys() {
            if !allowed.contains(&k.as_str()) {
                errs.push(FieldError::new(
                    format!("{path}.{k}"),
                    format!("unknown setting; expected one of: {}", allowed.join(", ")),
                ));
            }
        }
        match settings.get("credential") {
            Some(Value::String(c)) if is_credential_part(c) => {}
            None if !spec.credential_required => {}
            None => errs.push(FieldError::new(format!("{path}.credential"), "is required")),
            Some(_) => errs.push(FieldError::new(
                format!("{path}.credential"),
                "must match ^[a-z0-9_-]+$ (a name, not a path)",
            )),
        }
        (spec.check_settings)(path, settings, &mut errs);
        check_headers(path, settings, &mut errs);
        errs
    }

    /// Renders the one-sentence summary from `template` ([`Self::default_summary`] when
    /// `None`). Values are inserted as plain text; escaping is the page's job.
    pub fn summary(self, template: Option<&str>, params: &Value, target: &str) -> String {
        let tpl = template.unwrap_or(self.default_summary());
        let mut out = String::new();
        let mut rest = tpl;
        while let Some(start) = rest.find('{') {
            out.push_str(&rest[..start]);
            let after = &rest[start + 1..];
            let Some(end) = after.find('}') else {
                out.push_str(&rest[start..]);
                rest = "";
                break;
            };
            let key = &after[..end];
            out.push_str(&self.placeholder(key, params, target));
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        out
    }

    fn placeholder(self, key: &str, params: &Value, target: &str) -> String {
        if key == "target" {
            return target.to_owned();
        }
        if key == "body_keys" {
            let keys: Vec<&String> = params
                .get("body")
                .and_then(Value::as_object)
                .map(|m| m.keys().collect())
                .unwrap_or_default();
            return body_fields(&keys);
        }
        if let Some(s) = (self.spec().placeholder)(key, params) {
            return s;
        }
        match params.get(key) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_owned)
                        .unwrap_or_else(|| v.to_string())
                })
                .collect::<Vec<_>>()
                .join(", "),
            Some(v) => v.to_string(),
            // An unset param reads as the schema's default (what the executor uses), not as
            // the raw placeholder: "(TTL 3600s)", never "(TTL {ttl}s)".
            None => self
                .params_schema()
                .pointer(&format!("/properties/{key}/default"))
                .map(|d| match d {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .unwrap_or_else(|| format!("{{{key}}}")),
        }
    }
}

/// The one-sentence summary of a proposal of `action` ([`HandlerKind::summary`]), or `None`
/// when no handler of the registry has that name.
pub fn summary_of(
    action: &str,
    template: Option<&str>,
    params: &Value,
    target: &str,
) -> Option<String> {
    HandlerKind::lookup(action).map(|k| k.summary(template, params, target))
}

/// Field names a headline lists before it says how many more there are.
const HEADLINE_FIELDS: usize = 8;
/// Characters of one field name in a headline before it is cut with `…`.
const HEADLINE_FIELD_CHARS: usize = 40;

/// `{body_keys}` of a headline: "an empty body", or "fields a, b, c" with at most
/// [`HEADLINE_FIELDS`] names of at most [`HEADLINE_FIELD_CHARS`] characters each and "and N
/// more" after them, so a body of forty fields (or one field named with a paragraph) still
/// makes a one-line headline. The decision card lists every field with its value.
fn body_fields(keys: &[&String]) -> String {
    if keys.is_empty() {
        return "an empty body".into();
    }
    let shown: Vec<String> = keys
        .iter()
        .take(HEADLINE_FIELDS)
        .map(|k| {
            if k.chars().count() > HEADLINE_FIELD_CHARS {
                format!(
                    "{}…",
                    k.chars().take(HEADLINE_FIELD_CHARS).collect::<String>()
                )
            } else {
                (*k).clone()
            }
        })
        .collect();
    match keys.len().saturating_sub(HEADLINE_FIELDS) {
        0 => format!("fields {}", shown.join(", ")),
        more => format!("fields {} and {more} more", shown.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lookup_is_exact() {
        for name in [
            "constructor",
            "__proto__",
            "toString",
            "shell.exec",
            "",
            "Webhook.post",
            "webhook.post ",
            "hasOwnProperty",
        ] {
            assert_eq!(HandlerKind::lookup(name), None, "{name:?}");
        }
        for h in HandlerKind::ALL {
            assert_eq!(HandlerKind::lookup(h.action()), Some(h));
        }
    }

    #[test]
    fn a_webhook_headline_lists_at_most_eight_fields_each_cut_at_forty_characters() {
        let hook = HandlerKind::lookup("webhook.post").unwrap();
        let few = json!({"body": {"note": 1, "customer_emails": 2}});
        assert_eq!(
            hook.summary(None, &few, "https://h.example/x"),
            "Send a webhook with fields customer_emails, note to https://h.example/x"
        );
        let body: serde_json::Map<String, Value> =
            (0..40).map(|i| (format!("f{i:02}"), json!(i))).collect();
        let many = json!({ "body": body });
        assert_eq!(
            hook.summary(None, &many, "t"),
            "Send a webhook with fields f00, f01, f02, f03, f04, f05, f06, f07 and 32 more to t"
        );
        let long = json!({"body": {"x".repeat(500): 1}});
        assert_eq!(
            hook.summary(None, &long, "t"),
            format!("Send a webhook with fields {}… to t", "x".repeat(40))
        );
        assert_eq!(
            hook.summary(None, &json!({"body": {}}), "t"),
            "Send a webhook with an empty body to t"
        );
    }

    #[test]
    fn an_unset_param_reads_as_its_default_in_the_summary() {
        let dns = HandlerKind::lookup("dns.record.update").unwrap();
        let p = json!({"zone": "example.com", "name": "www.example.com", "type": "A", "records": ["192.0.2.1"]});
        assert_eq!(
            dns.summary(None, &p, "example.com/www.example.com"),
            "Set A records of www.example.com in zone example.com to 192.0.2.1 (TTL 3600s)"
        );
        // A placeholder with no param and no default stays visible as written.
        assert_eq!(dns.summary(Some("{nope}"), &p, ""), "{nope}");
    }

    #[test]
    fn settings_distinguish_missing_from_malformed() {
        let p = "handlers[\"x\"]";
        let errs = |kind: HandlerKind, v: Value| {
            kind.validate_settings(p, v.as_object().unwrap())
                .into_iter()
                .map(|f| f.to_string())
                .collect::<Vec<_>>()
        };
        let b = HandlerKind::BillingRefundIssue;
        assert!(errs(b, json!({"credential": "pay", "max_amount": 100})).is_empty());
        assert_eq!(
            errs(b, json!({"credential": "pay"})),
            ["handlers[\"x\"].max_amount: is required: a positive integer in minor units"]
        );
        assert_eq!(
            errs(b, json!({"credential": "pay", "max_amount": -1})),
            ["handlers[\"x\"].max_amount: must be a positive integer in minor units (got -1)"]
        );
        assert_eq!(
            errs(b, json!({"credential": "pay", "max_amount": 1.5})),
            ["handlers[\"x\"].max_amount: must be a positive integer in minor units (got 1.5)"]
        );
        let d = HandlerKind::DnsRecordUpdate;
        assert!(errs(d, json!({"credential": "dns", "zones": ["example.com"]})).is_empty());
        assert_eq!(
            errs(d, json!({"credential": "dns", "zones": ["Example.com."]})),
            [
                "handlers[\"x\"].zones: must be a non-empty list of lowercase zone names without a trailing dot"
            ]
        );
        assert_eq!(
            errs(d, json!({"credential": "dns"})),
            [
                "handlers[\"x\"].zones: is required: a list of lowercase zone names without a trailing dot"
            ]
        );
        let w = HandlerKind::WebhookPost;
        assert!(errs(w, json!({"url": "https://hooks.example.com/x"})).is_empty());
        assert_eq!(
            errs(w, json!({"url": "https://u:p@hooks.example.com/x"})),
            ["handlers[\"x\"].url: must be an absolute http(s) URL without credentials"]
        );
        assert_eq!(
            errs(w, json!({})),
            ["handlers[\"x\"].url: is required: an absolute http(s) URL without credentials"]
        );
    }
}
