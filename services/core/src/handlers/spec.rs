//! What a handler declares about itself ([`Spec`]) and the checks handlers share: every
//! handler module (`webhook`, `refund`, …) imports from here, and only the registry
//! (`handlers/mod.rs`) imports the handler modules, so no import runs back.

use super::card::{Card, CardInput};
use crate::FieldError;
use crate::vocab::MoneyFields;
use serde_json::{Map, Value};

/// What one handler declares about itself; each handler module defines one `SPEC`.
pub(crate) struct Spec {
    /// The action name agents send.
    pub(crate) action: &'static str,
    /// One line for tool descriptions and docs.
    pub(crate) description: &'static str,
    /// Whether the provider honours an idempotency key (the grant id is sent as one).
    pub(crate) honours_idempotency_key: bool,
    /// Param summed over the agent's recent history for `history.sum`.
    pub(crate) history_sum_param: Option<&'static str>,
    /// Params highlighted to approvers unless the tenant says otherwise.
    pub(crate) default_risky: &'static [&'static str],
    /// Params a person may change when approving with an edit (`actiond approvals amend`, the
    /// decision page's "Edit and approve"); every other param, and the target, stay as the
    /// agent proposed them.
    pub(crate) editable: &'static [&'static str],
    /// Summary template unless the tenant gives one.
    pub(crate) default_summary: &'static str,
    /// Handler-specific setting keys a tenant may write (besides the common ones).
    pub(crate) settings: &'static [&'static str],
    /// Whether the `credential` setting must be present.
    pub(crate) credential_required: bool,
    /// JSON Schema (2020-12) of the params.
    pub(crate) params_schema: fn() -> Value,
    /// Handler-specific param rules, after the shared unknown/required checks: (params object,
    /// tenant settings, errors to append to).
    pub(crate) check_params: fn(&Map<String, Value>, &Value, &mut Vec<FieldError>),
    /// Handler-specific setting rules: (entry path, settings, errors to append to).
    pub(crate) check_settings: fn(&str, &Map<String, Value>, &mut Vec<FieldError>),
    /// The target from (validated) params and settings.
    pub(crate) derive_target: fn(&Value, &Value) -> String,
    /// A handler's own summary placeholder (`None` falls through to the plain param value).
    pub(crate) placeholder: fn(&str, &Value) -> Option<String>,
    /// The params that carry money, if any (see [`MoneyFields`]).
    pub(crate) money: Option<MoneyFields>,
    /// Setting rules checked when a document is applied but not when a stored one is loaded
    /// (rules added after documents were first stored): (entry path, settings, errors).
    pub(crate) check_applied: fn(&str, &Map<String, Value>, &mut Vec<FieldError>),
    /// Writes the tenant's own limits (from its settings) into the params schema, for the
    /// per-tenant API document.
    pub(crate) tenant_schema: fn(&mut Value, &Value),
    /// The plain-words facts of the decision card and its Approve label.
    pub(crate) card: fn(&CardInput<'_>) -> Card,
    /// The params the card's facts show (any other param gets a fact of its own).
    pub(crate) card_covers: &'static [&'static str],
    /// The limits the tenant's settings put on the params, in words for agents ("currency one
    /// of USD, EUR"); never URLs, headers, credentials, template text or SQL.
    pub(crate) limits: fn(&Value) -> Vec<String>,
    /// A risky param's value on one line of the queue, when the handler says it better than
    /// the plain value: (param name, its value, the proposal's target).
    pub(crate) queue_value: fn(&str, &Value, &str) -> Option<String>,
}

impl Spec {
    /// What a handler declares when it says nothing else: no money, no checks beyond the
    /// shared ones, the tenant's settings not written into the schema, an empty card (every
    /// param then gets a fact of its own). Handlers write `..Spec::BASE` after their own fields.
    pub(crate) const BASE: Spec = Spec {
        action: "",
        description: "",
        honours_idempotency_key: false,
        history_sum_param: None,
        default_risky: &[],
        editable: &[],
        default_summary: "",
        settings: &[],
        credential_required: false,
        params_schema: || Value::Null,
        check_params: |_, _, _| {},
        check_settings: |_, _, _| {},
        derive_target: |_, _| String::new(),
        placeholder: no_placeholder,
        money: None,
        check_applied: |_, _, _| {},
        tenant_schema: |_, _| {},
        card: |_| Card::default(),
        card_covers: &[],
        limits: |_| Vec::new(),
        queue_value: |_, _, _| None,
    };
}

/// For handlers without placeholders of their own.
/// A setting that is a list of strings, joined with ", " (for [`Spec::limits`]).
pub(crate) fn listed(settings: &Value, key: &str) -> Option<String> {
    settings.get(key).and_then(Value::as_array).map(|a| {
        a.iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    })
}

pub(crate) fn no_placeholder(_key: &str, _params: &Value) -> Option<String> {
    None
}

/// `headers` (a webhook setting) maps header names to printable ASCII values; `Authorization`
/// and `Host` are refused (the credential carries the secret).
pub(crate) fn check_headers(path: &str, settings: &Map<String, Value>, errs: &mut Vec<FieldError>) {
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
}

/// The setting `key` must be an absolute http(s) URL without credentials (`user:pass@`): the
/// secret is the `credential`, kept by the executor.
pub(crate) fn check_http_url(
    path: &str,
    key: &str,
    settings: &Map<String, Value>,
    errs: &mut Vec<FieldError>,
) {
    match settings.get(key) {
        None | Some(Value::Null) => errs.push(FieldError::new(
            format!("{path}.{key}"),
            "is required: an absolute http(s) URL without credentials",
        )),
        Some(v) => match v.as_str().map(url::Url::parse) {
            Some(Ok(u))
                if matches!(u.scheme(), "http" | "https")
                    && u.host_str().is_some()
                    && u.username().is_empty()
                    && u.password().is_none() => {}
            _ => errs.push(FieldError::new(
                format!("{path}.{key}"),
                "must be an absolute http(s) URL without credentials",
            )),
        },
    }
}

/// A string param's value, or `""` when it is missing or not a string.
pub(crate) fn param_str(params: &Value, k: &str) -> String {
    params
        .get(k)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The error path of param `k`: `params.amount`, or `params["odd key"]` for keys that are not
/// plain identifiers.
pub(crate) fn field(k: &str) -> String {
    if k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !k.is_empty() {
        format!("params.{k}")
    } else {
        format!("params[{}]", Value::String(k.to_owned()))
    }
}

/// Appends an error unless `v` is a string of 1 to `max` characters from `[A-Za-z0-9_-]`.
pub(crate) fn check_token(errs: &mut Vec<FieldError>, name: &str, v: &Value, max: usize) {
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
