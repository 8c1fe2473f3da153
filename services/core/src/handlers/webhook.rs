//! `webhook.post`: POST a JSON body to the tenant's one configured URL (,
//! "Handlers": the URL comes from the tenant document, never from the agent's params).

use super::Spec;
use crate::FieldError;
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
    settings: &["url", "headers", "credential"],
    credential_required: false,
    params_schema,
    check_params,
    check_settings,
    derive_target,
    placeholder: super::no_placeholder,
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
    match settings.get("url") {
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
