//! The fixed handler registry: what each action's params look like, how its target derives from
//! them, how it reads as one sentence, which params carry the risk, and which per-tenant settings
//! it takes. Execution lives in the executor; this is the part every service needs.
//!
//! Lookup is an exact `match` on the name: `constructor`, `__proto__`, `toString`, `shell.exec`
//! and every other unknown name simply miss (DESIGN.md, "Handlers").

use crate::{FieldError, FieldErrors, ids::is_credential_part};
use serde_json::{Map, Value, json};

/// A handler of the compiled registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HandlerKind {
    /// `webhook.post`: POST a JSON body to the tenant's one configured URL.
    WebhookPost,
    /// `billing.refund.issue`: a Stripe-style refund (`POST /v1/refunds`, `Idempotency-Key`).
    BillingRefundIssue,
    /// `dns.record.update`: replace one RRset through the PowerDNS HTTP API.
    DnsRecordUpdate,
}

impl HandlerKind {
    /// Every handler in the registry.
    pub const ALL: [HandlerKind; 3] = [
        Self::WebhookPost,
        Self::BillingRefundIssue,
        Self::DnsRecordUpdate,
    ];

    /// Exact-match lookup. Unknown names, including prototype names, return `None`.
    pub fn lookup(action: &str) -> Option<Self> {
        match action {
            "webhook.post" => Some(Self::WebhookPost),
            "billing.refund.issue" => Some(Self::BillingRefundIssue),
            "dns.record.update" => Some(Self::DnsRecordUpdate),
            _ => None,
        }
    }

    /// The action name.
    pub fn action(self) -> &'static str {
        match self {
            Self::WebhookPost => "webhook.post",
            Self::BillingRefundIssue => "billing.refund.issue",
            Self::DnsRecordUpdate => "dns.record.update",
        }
    }

    /// One line for tool descriptions and docs.
    pub fn description(self) -> &'static str {
        match self {
            Self::WebhookPost => "POST a JSON body to the tenant's configured webhook URL.",
            Self::BillingRefundIssue => {
                "Refund part or all of a card payment, in integer minor units."
            }
            Self::DnsRecordUpdate => {
                "Replace the records of one DNS name and type in an allowed zone."
            }
        }
    }

    /// Whether the provider honours an idempotency key (the grant id is sent as one).
    pub fn honours_idempotency_key(self) -> bool {
        matches!(self, Self::BillingRefundIssue)
    }

    /// Param whose sum over the agent's recent history policy rules can read as `history.sum`.
    pub fn history_sum_param(self) -> Option<&'static str> {
        match self {
            Self::BillingRefundIssue => Some("amount"),
            _ => None,
        }
    }

    /// Params that carry the risk, highlighted to approvers by default.
    pub fn default_risky(self) -> &'static [&'static str] {
        match self {
            Self::WebhookPost => &["body"],
            Self::BillingRefundIssue => &["amount", "currency", "payment_id"],
            Self::DnsRecordUpdate => &["zone", "name", "type", "records"],
        }
    }

    /// Default one-sentence summary template; `{param}` is replaced by the param's value and
    /// `{amount}` by the amount in major units for refunds.
    pub fn default_summary(self) -> &'static str {
        match self {
            Self::WebhookPost => "Send a webhook with {body_keys} to {target}",
            Self::BillingRefundIssue => "Refund {amount} {currency} on payment {payment_id}",
            Self::DnsRecordUpdate => {
                "Set {type} records of {name} in zone {zone} to {records} (TTL {ttl}s)"
            }
        }
    }

    /// JSON Schema (2020-12) of the params, for the OpenAPI document and MCP tool descriptions.
    pub fn params_schema(self) -> Value {
        match self {
            Self::WebhookPost => json!({
                "type": "object", "additionalProperties": false, "required": ["body"],
                "properties": {"body": {"type": "object", "description": "JSON object sent as the request body"}}
            }),
            Self::BillingRefundIssue => json!({
                "type": "object", "additionalProperties": false,
                "required": ["payment_id", "amount", "currency"],
                "properties": {
                    "payment_id": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
                    "amount": {"type": "integer", "minimum": 1, "description": "integer minor units: 50.00 USD is 5000"},
                    "currency": {"type": "string", "pattern": "^[A-Z]{3}$", "description": "ISO 4217 code"},
                    "reason": {"type": "string", "enum": ["duplicate", "fraudulent", "requested_by_customer"]},
                    "order_id": {"type": "string", "maxLength": 64}
                }
            }),
            Self::DnsRecordUpdate => json!({
                "type": "object", "additionalProperties": false,
                "required": ["zone", "name", "type", "records"],
                "properties": {
                    "zone": {"type": "string", "description": "zone name, lowercase without a trailing dot, e.g. example.com"},
                    "name": {"type": "string", "description": "record name inside the zone, lowercase without a trailing dot, e.g. www.example.com"},
                    "type": {"type": "string", "enum": ["A", "AAAA", "CNAME", "TXT", "MX", "NS"]},
                    "ttl": {"type": "integer", "minimum": 60, "maximum": 86400, "default": 3600},
                    "records": {"type": "array", "minItems": 1, "maxItems": 20, "items": {"type": "string", "minLength": 1, "maxLength": 255},
                        "description": "record contents by type: A 192.0.2.1; AAAA 2001:db8::1 (RFC 5952 form); CNAME/NS target.example.com. (lowercase, trailing dot); MX \"10 mail.example.com.\"; TXT text without control characters"}
                }
            }),
        }
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
        match self {
            Self::WebhookPost => {
                if let Some(b) = obj.get("body")
                    && !b.is_object()
                {
                    errs.push(FieldError::new("params.body", "must be a JSON object"));
                }
            }
            Self::BillingRefundIssue => {
                if let Some(v) = obj.get("payment_id") {
                    check_token(&mut errs, "payment_id", v, 64);
                }
                if let Some(v) = obj.get("amount") {
                    let max = settings
                        .get("max_amount")
                        .and_then(Value::as_i64)
                        .unwrap_or(i64::MAX);
                    match v.as_i64() {
                        Some(n) if n >= 1 && n <= max => {}
                        Some(n) if n > max => errs.push(FieldError::new(
                            "params.amount",
                            format!("{n} exceeds this tenant's max_amount of {max} (integer minor units)"),
                        )),
                        _ => errs.push(FieldError::new(
                            "params.amount",
                            "must be a positive integer in minor units (50.00 USD is 5000)",
                        )),
                    }
                }
                if let Some(v) = obj.get("currency") {
                    let ok = v
                        .as_str()
                        .is_some_and(|s| s.len() == 3 && s.chars().all(|c| c.is_ascii_uppercase()));
                    if !ok {
                        errs.push(FieldError::new(
                            "params.currency",
                            "must be an ISO 4217 code like USD",
                        ));
                    } else if let Some(allowed) =
                        settings.get("currencies").and_then(Value::as_array)
                        && !allowed.contains(v)
                    {
                        errs.push(FieldError::new(
                            "params.currency",
                            "is not enabled for this tenant",
                        ));
                    }
                }
                if let Some(v) = obj.get("reason")
                    && !matches!(
                        v.as_str(),
                        Some("duplicate" | "fraudulent" | "requested_by_customer")
                    )
                {
                    errs.push(FieldError::new(
                        "params.reason",
                        "must be one of duplicate, fraudulent, requested_by_customer",
                    ));
                }
                if let Some(v) = obj.get("order_id") {
                    check_token(&mut errs, "order_id", v, 64);
                }
            }
            Self::DnsRecordUpdate => {
                // Tenant CEL rules compare `params.zone` / `params.name` as sent, so only one
                // spelling of a name is accepted: `PROD.example.com` or `prod.example.com.`
                // would otherwise slip past `params.zone == "prod.example.com"`.
                let zone = obj.get("zone").and_then(Value::as_str);
                if let Some(v) = obj.get("zone") {
                    match v.as_str() {
                        Some(z) if is_canonical_dns_name(z) => {
                            let allowed = settings.get("zones").and_then(Value::as_array);
                            if !allowed.is_some_and(|a| a.iter().any(|x| x.as_str() == Some(z))) {
                                errs.push(FieldError::new(
                                    "params.zone",
                                    "is not one of this tenant's allowed zones",
                                ));
                            }
                        }
                        Some(z) if is_dns_name(z) => {
                            errs.push(FieldError::new("params.zone", NON_CANONICAL_NAME));
                        }
                        _ => errs.push(FieldError::new(
                            "params.zone",
                            "must be a DNS name like example.com",
                        )),
                    }
                }
                if let Some(v) = obj.get("name") {
                    match v.as_str() {
                        Some(n) if is_canonical_dns_name(n) => {
                            if let Some(z) = zone.filter(|z| is_canonical_dns_name(z))
                                && n != z
                                && !n.ends_with(&format!(".{z}"))
                            {
                                errs.push(FieldError::new(
                                    "params.name",
                                    "must be inside params.zone",
                                ));
                            }
                        }
                        Some(n) if is_dns_name(n) => {
                            errs.push(FieldError::new("params.name", NON_CANONICAL_NAME));
                        }
                        _ => errs.push(FieldError::new(
                            "params.name",
                            "must be a DNS name like www.example.com",
                        )),
                    }
                }
                let rtype = obj
                    .get("type")
                    .and_then(Value::as_str)
                    .filter(|t| matches!(*t, "A" | "AAAA" | "CNAME" | "TXT" | "MX" | "NS"));
                if obj.contains_key("type") && rtype.is_none() {
                    errs.push(FieldError::new(
                        "params.type",
                        "must be one of A, AAAA, CNAME, TXT, MX, NS",
                    ));
                }
                if let Some(v) = obj.get("ttl")
                    && !v.as_i64().is_some_and(|t| (60..=86_400).contains(&t))
                {
                    errs.push(FieldError::new(
                        "params.ttl",
                        "must be an integer between 60 and 86400 (seconds)",
                    ));
                }
                if let Some(v) = obj.get("records") {
                    match v.as_array() {
                        Some(a) if !a.is_empty() && a.len() <= 20 => {
                            for (i, r) in a.iter().enumerate() {
                                if let Some(rule) = check_record(rtype, r) {
                                    errs.push(FieldError::new(
                                        format!("params.records[{i}]"),
                                        rule,
                                    ));
                                }
                            }
                        }
                        _ => errs.push(FieldError::new(
                            "params.records",
                            "must be 1 to 20 non-empty strings of at most 255 characters",
                        )),
                    }
                }
            }
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(FieldErrors(errs))
        }
    }

    /// The target as derived from (validated) params and settings: the webhook URL, the payment
    /// id, or `zone/name` for DNS.
    pub fn derive_target(self, params: &Value, settings: &Value) -> String {
        let s = |k: &str| {
            params
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        match self {
            Self::WebhookPost => settings
                .get("url")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            Self::BillingRefundIssue => s("payment_id"),
            // Validation admits only canonical names (lowercase, no trailing dot), so the target
            // is built from exactly the strings policy rules see as `params.zone`/`params.name`.
            Self::DnsRecordUpdate => format!("{}/{}", s("zone"), s("name")),
        }
    }

    /// Validates the handler-specific part of a tenant's handler entry (the common keys have
    /// been removed). `path` is the entry's path for error messages.
    pub fn validate_settings(self, path: &str, settings: &Map<String, Value>) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let allowed: &[&str] = match self {
            Self::WebhookPost => &["url", "headers", "credential"],
            Self::BillingRefundIssue => &["credential", "max_amount", "currencies"],
            Self::DnsRecordUpdate => &["credential", "zones", "server_id"],
        };
        for k in settings.keys() {
            if !allowed.contains(&k.as_str()) {
                errs.push(FieldError::new(
                    format!("{path}.{k}"),
                    format!("unknown setting; expected one of: {}", allowed.join(", ")),
                ));
            }
        }
        let credential_required = !matches!(self, Self::WebhookPost);
        match settings.get("credential") {
            Some(Value::String(c)) if is_credential_part(c) => {}
            None if !credential_required => {}
            None => errs.push(FieldError::new(format!("{path}.credential"), "is required")),
            Some(_) => errs.push(FieldError::new(
                format!("{path}.credential"),
                "must match ^[a-z0-9_-]+$ (a name, not a path)",
            )),
        }
        match self {
            Self::WebhookPost => match settings.get("url") {
                None | Some(Value::Null) => errs.push(FieldError::new(
                    format!("{path}.url"),
                    "is required: an absolute http(s) URL without credentials",
                )),
                Some(v) => match v.as_str().map(url::Url::parse) {
                    Some(Ok(u))
                        if matches!(u.scheme(), "http" | "https")
                            && u.host_str().is_some()
                            && u.username().is_empty()
                            && u.password().is_none() => {}
                    _ => errs.push(FieldError::new(
                        format!("{path}.url"),
                        "must be an absolute http(s) URL without credentials",
                    )),
                },
            },
            Self::BillingRefundIssue => match settings.get("max_amount") {
                None | Some(Value::Null) => errs.push(FieldError::new(
                    format!("{path}.max_amount"),
                    "is required: a positive integer in minor units",
                )),
                Some(v) if v.as_i64().is_some_and(|n| n > 0) => {}
                Some(v) => errs.push(FieldError::new(
                    format!("{path}.max_amount"),
                    format!(
                        "must be a positive integer in minor units (got {})",
                        crate::tenant::got(v)
                    ),
                )),
            },
            Self::DnsRecordUpdate => match settings.get("zones") {
                None | Some(Value::Null) => errs.push(FieldError::new(
                    format!("{path}.zones"),
                    "is required: a list of lowercase zone names without a trailing dot",
                )),
                Some(v) => {
                    let ok = v.as_array().is_some_and(|a| {
                        !a.is_empty()
                            && a.iter()
                                .all(|z| z.as_str().is_some_and(is_canonical_dns_name))
                    });
                    if !ok {
                        errs.push(FieldError::new(
                            format!("{path}.zones"),
                            "must be a non-empty list of lowercase zone names without a trailing dot",
                        ));
                    }
                }
            },
        }
        if let Some(h) = settings.get("headers") {
            let ok = h.as_object().is_some_and(|m| {
                m.iter().all(|(k, v)| {
                    !k.is_empty()
                        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                        && !k.eq_ignore_ascii_case("authorization")
                        && !k.eq_ignore_ascii_case("host")
                        && v.as_str()
                            .is_some_and(|s| s.chars().all(|c| (' '..='~').contains(&c)))
                })
            });
            if !ok {
                errs.push(FieldError::new(format!("{path}.headers"), "must map header names to printable ASCII values (not Authorization or Host; use credential)"));
            }
        }
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
            let keys: Vec<String> = params
                .get("body")
                .and_then(Value::as_object)
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default();
            return if keys.is_empty() {
                "an empty body".into()
            } else {
                format!("fields {}", keys.join(", "))
            };
        }
        if key == "amount" && self == Self::BillingRefundIssue {
            let cur = params.get("currency").and_then(Value::as_str).unwrap_or("");
            if let Some(n) = params.get("amount").and_then(Value::as_i64) {
                return format_minor_units(n, cur);
            }
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
            None => format!("{{{key}}}"),
        }
    }
}

/// Formats integer minor units as a decimal amount with the ISO 4217 exponent of `currency`
/// (2 unless listed: 0 for JPY, KRW, …; 3 for BHD, KWD, …): `12000, "USD"` → `"120.00"`.
pub fn format_minor_units(amount: i64, currency: &str) -> String {
    let exp = match currency {
        "BIF" | "CLP" | "DJF" | "GNF" | "ISK" | "JPY" | "KMF" | "KRW" | "PYG" | "RWF" | "UGX"
        | "UYI" | "VND" | "VUV" | "XAF" | "XOF" | "XPF" => 0,
        "BHD" | "IQD" | "JOD" | "KWD" | "LYD" | "OMR" | "TND" => 3,
        _ => 2,
    };
    if exp == 0 {
        return amount.to_string();
    }
    let sign = if amount < 0 { "-" } else { "" };
    let a = amount.unsigned_abs();
    let div = 10u64.pow(exp);
    format!(
        "{sign}{}.{:0width$}",
        a / div,
        a % div,
        width = exp as usize
    )
}

fn field(k: &str) -> String {
    if k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !k.is_empty() {
        format!("params.{k}")
    } else {
        format!("params[{}]", Value::String(k.to_owned()))
    }
}

fn check_token(errs: &mut Vec<FieldError>, name: &str, v: &Value, max: usize) {
    let ok = v.as_str().is_some_and(|s| {
        !s.is_empty()
            && s.len() <= max
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    });
    if !ok {
        errs.push(FieldError::new(
            format!("params.{name}"),
            format!("must match ^[A-Za-z0-9_-]{{1,{max}}}$"),
        ));
    }
}

/// Rule for a DNS name in another spelling than the one accepted (see [`is_canonical_dns_name`]).
const NON_CANONICAL_NAME: &str = "must be lowercase without a trailing dot, e.g. prod.example.com";

/// True for a DNS name in its one accepted spelling: [`is_dns_name`], lowercase, and without a
/// trailing dot. Policy rules compare names as strings, so `PROD.example.com` and
/// `prod.example.com.` are refused rather than normalized behind the rules' back.
pub fn is_canonical_dns_name(s: &str) -> bool {
    is_dns_name(s) && !s.ends_with('.') && !s.bytes().any(|b| b.is_ascii_uppercase())
}

/// True for a lowercase, fully qualified host name with its trailing dot (`mail.example.com.`),
/// the form PowerDNS expects for CNAME, NS and MX targets.
fn is_fqdn_target(s: &str) -> bool {
    s.strip_suffix('.').is_some_and(is_canonical_dns_name)
}

/// Checks one `records` entry against the record `type` (`None` when the type is missing or
/// invalid: only the generic string rule applies). Returns the broken rule.
///
/// Every type has a single accepted spelling, so policy rules on `params.records` cannot be
/// sidestepped by writing the same record differently:
/// - A: dotted-quad IPv4 (`192.0.2.1`, no leading zeros);
/// - AAAA: IPv6 in RFC 5952 form (`2001:db8::1`: lowercase, zeros compressed);
/// - CNAME, NS: a lowercase host name with its trailing dot (`target.example.com.`);
/// - MX: `<preference 0-65535> <host>`, host as for CNAME (`10 mail.example.com.`);
/// - TXT: text without control characters (no `\n`, `\r`, `\0`, …).
fn check_record(rtype: Option<&str>, r: &Value) -> Option<&'static str> {
    let Some(s) = r.as_str().filter(|s| !s.is_empty() && s.len() <= 255) else {
        return Some("must be a non-empty string of at most 255 characters");
    };
    let ok = match rtype? {
        "A" => s
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|a| a.to_string() == s),
        "AAAA" => s
            .parse::<std::net::Ipv6Addr>()
            .is_ok_and(|a| a.to_string() == s),
        "CNAME" | "NS" => is_fqdn_target(s),
        "MX" => s.split_once(' ').is_some_and(|(pref, host)| {
            !pref.is_empty()
                && pref.bytes().all(|b| b.is_ascii_digit())
                && (pref == "0" || !pref.starts_with('0'))
                && pref.parse::<u16>().is_ok()
                && is_fqdn_target(host)
        }),
        "TXT" => !s.chars().any(char::is_control),
        _ => true,
    };
    if ok {
        return None;
    }
    Some(match rtype? {
        "A" => "must be an IPv4 address like 192.0.2.1 for type A",
        "AAAA" => "must be an IPv6 address in RFC 5952 form like 2001:db8::1 for type AAAA",
        "CNAME" | "NS" => {
            "must be a lowercase host name with a trailing dot, like target.example.com., for type CNAME or NS"
        }
        "MX" => {
            "must be \"<preference 0-65535> <host>\" with a lowercase host and trailing dot, like \"10 mail.example.com.\", for type MX"
        }
        _ => "must be printable text without control characters (no \\n, \\r or NUL) for type TXT",
    })
}

/// True for a DNS name made of LDH labels (RFC 1123), at most 253 characters; a trailing dot
/// is allowed.
pub fn is_dns_name(s: &str) -> bool {
    let s = s.strip_suffix('.').unwrap_or(s);
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn refund_params_are_validated_against_settings() {
        let h = HandlerKind::BillingRefundIssue;
        let settings = json!({"max_amount": 100000, "currencies": ["USD"]});
        assert!(
            h.validate_params(
                &json!({"payment_id":"pi_1","amount":12000,"currency":"USD"}),
                &settings
            )
            .is_ok()
        );
        let e = h
            .validate_params(
                &json!({"payment_id":"pi_1","amount":"120.00","currency":"usd","url":"x"}),
                &settings,
            )
            .unwrap_err();
        let fields: Vec<_> = e.0.iter().map(|f| f.field.as_str()).collect();
        assert!(fields.contains(&"params.amount"));
        assert!(fields.contains(&"params.currency"));
        assert!(fields.contains(&"params.url"));
        let e = h
            .validate_params(
                &json!({"payment_id":"pi_1","amount":100001,"currency":"USD"}),
                &settings,
            )
            .unwrap_err();
        assert!(e.to_string().contains("max_amount"));
    }

    #[test]
    fn dns_zone_must_be_allowed_and_name_inside_it() {
        let h = HandlerKind::DnsRecordUpdate;
        let s = json!({"zones": ["example.com"]});
        let ok = json!({"zone":"example.com","name":"www.example.com","type":"A","records":["192.0.2.1"],"ttl":300});
        assert!(h.validate_params(&ok, &s).is_ok());
        assert_eq!(h.derive_target(&ok, &s), "example.com/www.example.com");
        let bad =
            json!({"zone":"evil.com","name":"www.example.com","type":"A","records":["192.0.2.1"]});
        assert!(h.validate_params(&bad, &s).is_err());
    }

    #[test]
    fn summaries_read_as_a_sentence() {
        let p = json!({"payment_id":"pi_1234","amount":12000,"currency":"USD"});
        assert_eq!(
            HandlerKind::BillingRefundIssue.summary(None, &p, "pi_1234"),
            "Refund 120.00 USD on payment pi_1234"
        );
        assert_eq!(format_minor_units(500, "JPY"), "500");
        assert_eq!(format_minor_units(1234, "KWD"), "1.234");
    }

    fn dns(zone: &str, name: &str, rtype: &str, records: Value) -> Value {
        json!({"zone": zone, "name": name, "type": rtype, "records": records})
    }

    fn rules_at(e: &FieldErrors, field: &str) -> Vec<String> {
        e.0.iter()
            .filter(|f| f.field == field)
            .map(|f| f.rule.clone())
            .collect()
    }

    #[test]
    fn dns_names_must_be_canonical_so_rules_cannot_be_bypassed() {
        let h = HandlerKind::DnsRecordUpdate;
        let s = json!({"zones": ["prod.example.com"]});
        let ok = dns(
            "prod.example.com",
            "www.prod.example.com",
            "A",
            json!(["192.0.2.1"]),
        );
        assert!(h.validate_params(&ok, &s).is_ok());
        assert_eq!(
            h.derive_target(&ok, &s),
            "prod.example.com/www.prod.example.com"
        );
        // The apex itself is inside the zone.
        let apex = dns(
            "prod.example.com",
            "prod.example.com",
            "A",
            json!(["192.0.2.1"]),
        );
        assert!(h.validate_params(&apex, &s).is_ok());

        for (zone, name, bad_field) in [
            ("PROD.example.com", "www.prod.example.com", "params.zone"),
            ("prod.example.com.", "www.prod.example.com", "params.zone"),
            ("Prod.Example.Com.", "www.prod.example.com", "params.zone"),
            ("prod.example.com", "WWW.prod.example.com", "params.name"),
            ("prod.example.com", "www.prod.example.com.", "params.name"),
        ] {
            let e = h
                .validate_params(&dns(zone, name, "A", json!(["192.0.2.1"])), &s)
                .unwrap_err();
            assert_eq!(
                rules_at(&e, bad_field),
                vec!["must be lowercase without a trailing dot, e.g. prod.example.com"],
                "{zone} {name}: {e}"
            );
            assert_eq!(e.0.len(), 1, "{zone} {name}: {e}");
        }
        let e = h
            .validate_params(&dns("prod example", "x", "A", json!(["192.0.2.1"])), &s)
            .unwrap_err();
        assert_eq!(
            rules_at(&e, "params.zone"),
            vec!["must be a DNS name like example.com"]
        );
        // A name outside the zone is still refused.
        let e = h
            .validate_params(
                &dns(
                    "prod.example.com",
                    "www.evilprod.example.com",
                    "A",
                    json!(["192.0.2.1"]),
                ),
                &s,
            )
            .unwrap_err();
        assert_eq!(
            rules_at(&e, "params.name"),
            vec!["must be inside params.zone"]
        );
    }

    #[test]
    fn dns_records_must_match_the_type() {
        let h = HandlerKind::DnsRecordUpdate;
        let s = json!({"zones": ["example.com"]});
        let check = |rtype: &str, records: Value| {
            h.validate_params(&dns("example.com", "www.example.com", rtype, records), &s)
        };
        // Valid input of every type passes.
        for (rtype, records) in [
            ("A", json!(["192.0.2.1", "198.51.100.7"])),
            ("AAAA", json!(["2001:db8::1", "::1", "::ffff:192.0.2.1"])),
            ("CNAME", json!(["target.example.net."])),
            ("NS", json!(["ns1.example.net.", "ns2.example.net."])),
            (
                "MX",
                json!([
                    "10 mail.example.com.",
                    "0 mx.example.net.",
                    "65535 b.example."
                ]),
            ),
            (
                "TXT",
                json!(["v=spf1 -all", "\"quoted\" text with spaces", "é ✓"]),
            ),
        ] {
            assert!(check(rtype, records.clone()).is_ok(), "{rtype} {records}");
        }
        let cases: [(&str, &str, &str); 20] = [
            (
                "A",
                "192.0.2.256",
                "must be an IPv4 address like 192.0.2.1 for type A",
            ),
            (
                "A",
                "192.0.2.01",
                "must be an IPv4 address like 192.0.2.1 for type A",
            ),
            (
                "A",
                "2001:db8::1",
                "must be an IPv4 address like 192.0.2.1 for type A",
            ),
            (
                "A",
                "www.example.com",
                "must be an IPv4 address like 192.0.2.1 for type A",
            ),
            (
                "AAAA",
                "192.0.2.1",
                "must be an IPv6 address in RFC 5952 form like 2001:db8::1 for type AAAA",
            ),
            (
                "AAAA",
                "2001:DB8::1",
                "must be an IPv6 address in RFC 5952 form like 2001:db8::1 for type AAAA",
            ),
            (
                "AAAA",
                "2001:db8:0:0:0:0:0:1",
                "must be an IPv6 address in RFC 5952 form like 2001:db8::1 for type AAAA",
            ),
            (
                "CNAME",
                "target.example.net",
                "must be a lowercase host name with a trailing dot, like target.example.com., for type CNAME or NS",
            ),
            (
                "CNAME",
                "Target.example.net.",
                "must be a lowercase host name with a trailing dot, like target.example.com., for type CNAME or NS",
            ),
            (
                "CNAME",
                "192.0.2.1 x",
                "must be a lowercase host name with a trailing dot, like target.example.com., for type CNAME or NS",
            ),
            (
                "NS",
                ".",
                "must be a lowercase host name with a trailing dot, like target.example.com., for type CNAME or NS",
            ),
            (
                "MX",
                "mail.example.com.",
                "must be \"<preference 0-65535> <host>\" with a lowercase host and trailing dot, like \"10 mail.example.com.\", for type MX",
            ),
            (
                "MX",
                "65536 mail.example.com.",
                "must be \"<preference 0-65535> <host>\" with a lowercase host and trailing dot, like \"10 mail.example.com.\", for type MX",
            ),
            (
                "MX",
                "-1 mail.example.com.",
                "must be \"<preference 0-65535> <host>\" with a lowercase host and trailing dot, like \"10 mail.example.com.\", for type MX",
            ),
            (
                "MX",
                "010 mail.example.com.",
                "must be \"<preference 0-65535> <host>\" with a lowercase host and trailing dot, like \"10 mail.example.com.\", for type MX",
            ),
            (
                "MX",
                "10  mail.example.com.",
                "must be \"<preference 0-65535> <host>\" with a lowercase host and trailing dot, like \"10 mail.example.com.\", for type MX",
            ),
            (
                "MX",
                "10 mail.example.com",
                "must be \"<preference 0-65535> <host>\" with a lowercase host and trailing dot, like \"10 mail.example.com.\", for type MX",
            ),
            (
                "TXT",
                "line\nbreak",
                "must be printable text without control characters (no \\n, \\r or NUL) for type TXT",
            ),
            (
                "TXT",
                "cr\rhere",
                "must be printable text without control characters (no \\n, \\r or NUL) for type TXT",
            ),
            (
                "TXT",
                "nul\0here",
                "must be printable text without control characters (no \\n, \\r or NUL) for type TXT",
            ),
        ];
        for (rtype, bad, rule) in cases {
            let e = check(rtype, json!(["192.0.2.1", bad])).unwrap_err();
            let e = if rtype == "A" {
                e
            } else {
                // The first entry is valid only for A; check the second entry's error alone.
                let e2 = check(rtype, json!([bad])).unwrap_err();
                assert_eq!(
                    rules_at(&e2, "params.records[0]"),
                    vec![rule],
                    "{rtype} {bad:?}"
                );
                assert_eq!(e2.0.len(), 1, "{e2}");
                e
            };
            assert_eq!(
                rules_at(&e, "params.records[1]"),
                vec![rule],
                "{rtype} {bad:?}: {e}"
            );
        }
        // Generic string rules name the entry too; array-level rules name params.records.
        let e = check("TXT", json!(["ok", "", 5, "x".repeat(256)])).unwrap_err();
        let fields: Vec<_> = e.0.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "params.records[1]",
                "params.records[2]",
                "params.records[3]"
            ]
        );
        assert_eq!(
            e.0[0].rule,
            "must be a non-empty string of at most 255 characters"
        );
        assert!(check("TXT", json!(["x".repeat(255)])).is_ok());
        let e = check("A", json!([])).unwrap_err();
        assert_eq!(
            rules_at(&e, "params.records"),
            vec!["must be 1 to 20 non-empty strings of at most 255 characters"]
        );
        // An invalid type reports the type, not every record.
        let e = check("SRV", json!(["0 5 5060 sip.example.com."])).unwrap_err();
        let fields: Vec<_> = e.0.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["params.type"]);
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
