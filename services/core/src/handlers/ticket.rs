//! `ticket.comment.add`: post a text comment to one ticket of the tenant's ticket system, whose
//! HTTP API base URL is in the tenant document (`base_url`, reached through the executor's
//! destination guard like `webhook.post`'s URL) with a bearer token from the credentials
//! directory. The agent chooses only the ticket and the text.
//!
//! The API it speaks: `GET {base_url}/tickets/{ticket_id}` answers `{"title", "status"}` (the
//! preview), `POST {base_url}/tickets/{ticket_id}/comments` with `{"body"}` and an
//! `Idempotency-Key` adds the comment.

use super::card::{Card, CardInput, Fact, str_of};
use super::spec::{Spec, check_http_url, check_token, param_str};
use crate::FieldError;
use crate::text::reveal_invisible;
use serde_json::{Map, Value, json};

/// Longest comment, in characters.
pub const MAX_BODY_CHARS: usize = 4000;

/// The registry entry of `ticket.comment.add`.
pub(super) static SPEC: Spec = Spec {
    action: "ticket.comment.add",
    description: "Post a text comment to one ticket in the tenant's ticket system.",
    honours_idempotency_key: true,
    default_risky: &["body"],
    default_summary: "Comment on ticket {ticket_id} ({body_chars} characters)",
    settings: &["credential", "base_url"],
    credential_required: true,
    params_schema,
    check_params,
    check_settings,
    derive_target,
    placeholder,
    card,
    card_covers: &["ticket_id", "body"],
    ..Spec::BASE
};

fn params_schema() -> Value {
    json!({
        "type": "object", "additionalProperties": false,
        "required": ["ticket_id", "body"],
        "properties": {
            "ticket_id": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$", "description": "the ticket's id in the ticket system"},
            "body": {"type": "string", "minLength": 1, "maxLength": MAX_BODY_CHARS, "description": "the comment, plain text"}
        }
    })
}

fn check_params(obj: &Map<String, Value>, _settings: &Value, errs: &mut Vec<FieldError>) {
    if let Some(v) = obj.get("ticket_id") {
        check_token(errs, "ticket_id", v, 64);
    }
    if let Some(v) = obj.get("body") {
        let ok = v
            .as_str()
            .is_some_and(|s| !s.trim().is_empty() && s.chars().count() <= MAX_BODY_CHARS);
        if !ok {
            errs.push(FieldError::new(
                "params.body",
                format!("must be text of 1 to {MAX_BODY_CHARS} characters"),
            ));
        }
    }
}

fn check_settings(path: &str, settings: &Map<String, Value>, errs: &mut Vec<FieldError>) {
    check_http_url(path, "base_url", settings, errs);
}

/// The target is the ticket.
fn derive_target(params: &Value, _settings: &Value) -> String {
    param_str(params, "ticket_id")
}

/// `{body_chars}`: the comment's length in characters.
fn placeholder(key: &str, params: &Value) -> Option<String> {
    (key == "body_chars").then(|| str_of(params, "body").chars().count().to_string())
}

/// The card: the ticket (with its title and status from the preview, when the executor has
/// read them) and the comment itself.
fn card(c: &CardInput<'_>) -> Card {
    let id = reveal_invisible(str_of(c.params, "ticket_id"), false);
    let ticket = match c.preview.lines().next() {
        Some(line) if !line.is_empty() && line != "preview unavailable" => line.to_owned(),
        _ => format!("{id} (title not read yet)"),
    };
    let body = str_of(c.params, "body");
    let lines = body.lines().count();
    Card {
        facts: vec![
            Fact::new("Ticket", ticket, c.is_hot("ticket_id")),
            Fact::new(
                "Comment",
                format!(
                    "{} characters, {lines} line{}",
                    body.chars().count(),
                    if lines == 1 { "" } else { "s" }
                ),
                c.is_hot("body"),
            )
            .values(c.params.get("body").unwrap_or(&Value::Null)),
        ],
        approve_label: format!("Approve comment on ticket {id}"),
    }
}

#[cfg(test)]
mod tests {
    use super::super::HandlerKind;
    use serde_json::json;

    #[test]
    fn params_and_settings_name_the_field_and_the_rule() {
        let k = HandlerKind::lookup("ticket.comment.add").unwrap();
        assert!(
            k.validate_params(&json!({"ticket_id": "T-1", "body": "Fixed."}), &json!({}))
                .is_ok()
        );
        let e = k
            .validate_params(
                &json!({"ticket_id": "../admin", "body": "x".repeat(4001), "url": "http://evil"}),
                &json!({}),
            )
            .unwrap_err()
            .to_string();
        assert!(e.contains("params.ticket_id: must match"), "{e}");
        assert!(e.contains("params.body: must be text of 1 to 4000"), "{e}");
        assert!(e.contains("params.url: unknown parameter"), "{e}");
        let s = json!({"credential": "tickets", "base_url": "https://u:p@tickets.example/api"});
        let e = k.validate_settings("handlers.t", s.as_object().unwrap());
        assert_eq!(
            e[0].to_string(),
            "handlers.t.base_url: must be an absolute http(s) URL without credentials"
        );
        let e = k.validate_settings("handlers.t", json!({}).as_object().unwrap());
        assert_eq!(e.len(), 2, "{e:?}");
    }

    #[test]
    fn the_card_shows_the_previewed_title_and_the_comment() {
        let k = HandlerKind::lookup("ticket.comment.add").unwrap();
        let params = json!({"ticket_id": "T-7", "body": "Restarted.\nAll good."});
        let p = &params;
        let hot = |n: &str| n == "body";
        let input = |preview| super::CardInput {
            params: p,
            settings: &serde_json::Value::Null,
            target: "T-7",
            preview,
            hot: &hot,
        };
        let c = k.card(&input("Ticket T-7: \"Printer on fire\" (open)"));
        assert_eq!(c.facts[0].value, "Ticket T-7: \"Printer on fire\" (open)");
        assert_eq!(c.facts[1].value, "22 characters, 2 lines");
        assert!(c.facts[1].hot && !c.facts[0].hot);
        assert_eq!(c.approve_label, "Approve comment on ticket T-7");
        assert_eq!(
            k.card(&input("")).facts[0].value,
            "T-7 (title not read yet)"
        );
        assert_eq!(
            k.summary(None, p, "T-7"),
            "Comment on ticket T-7 (22 characters)"
        );
    }
}
