//! `webhook.post`: POST a JSON body to the tenant's one configured URL (,
//! "Handlers": the URL comes from the tenant document, never from the agent's params).

use super::card::{Card, CardInput, Fact, body_summary, destination};
use super::spec::{Spec, check_http_url};
use crate::FieldError;
use crate::text::reveal_invisible;
use serde_json::{Map, Value, json};

/// The registry entry of `webhook.post`.
pub(super) static SPEC: Spec = Spec {
    action: "webhook.post",
    description: "POST a JSON body to the tenant's configured webhook URL.",
    honours_idempotency_key: false,
    history_sum_param: None,
    default_risky: &["body"],
    editable: &[],
    default_summary: "Send a webhook with {body_keys} to {target}",
    settings: &["url", "headers", "credential", "read_back_url"],
    credential_required: false,
    params_schema,
    check_params,
    check_settings,
    derive_target,
    placeholder: super::spec::no_placeholder,
    card,
    card_covers: &["body"],
    queue_value,
    ..Spec::BASE
};

fn params_schema() -> Value {
    json!({
        "type": "object", "additionalProperties": false, "required": ["body"],
        "properties": {"body": {"type": "object", "description": "JSON object sent as the request body"}}
    })
}

fn check_params(obj: &Map<String, Value>, _settings: &Value, errs: &mut Vec<FieldError>) {
    if let Some(b) = obj.get("body")
        && !b.is_object()
    {
        errs.push(FieldError::new("params.body", "must be a JSON object"));
    }
}

fn check_settings(path: &str, settings: &Map<String, Value>, errs: &mut Vec<FieldError>) {
    check_http_url(path, "url", settings, errs);
    // Optional: where the receiver lets the executor read back what it received under an
    // idempotency key (`GET read_back_url` with `Idempotency-Key`).
    if settings.get("read_back_url").is_some() {
        check_http_url(path, "read_back_url", settings, errs);
    }
}

/// The target is the tenant's configured URL.
fn derive_target(_params: &Value, settings: &Value) -> String {
    settings
        .get("url")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}
/// The card: where it goes (host, external or internal, and the whole address) and the
/// body in plain words with its values.
fn card(c: &CardInput<'_>) -> Card {
    let (params, target) = (c.params, c.target);
    let (host, to) = destination(target);
    let raw = params.get("body").unwrap_or(&Value::Null);
    let (summary, found) = body_summary(raw);
    // The values themselves, not only their names: what is sent is what is approved.
    let mut body = Fact::new("Body", summary, c.is_hot("body")).values(raw);
    if found.len() > 3 {
        body.more = found;
    }
    Card {
        // The whole address too: its path and query may say as much as the body.
        facts: vec![Fact::new("To", to, false).note(target.to_owned()), body],
        approve_label: format!("Approve sending to {host}"),
    }
}

/// A body in the queue: "30 email addresses, 3 shown: … — to hooks.partner.example — external".
fn queue_value(name: &str, value: &Value, target: &str) -> Option<String> {
    if name != "body" {
        return None;
    }
    let (summary, _) = body_summary(value);
    let (_, to) = destination(&reveal_invisible(target, false));
    Some(format!("{summary} — to {to}"))
}
