//! `notify:` of a tenant document: where escalations are announced (a chat webhook named by
//! credential, email recipients).

use super::read::{get_strings, unknown_keys};
use crate::FieldError;
use crate::ids::is_credential_part;
use serde::Serialize;
use serde_json::Value;

/// `notify:` of a tenant document.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Notify {
    /// Credential name (`<tenant>.<name>` in web's credentials) holding a Slack-compatible
    /// webhook URL.
    pub webhook: Option<String>,
    /// Email recipients of escalation notices.
    pub email: Vec<String>,
}

/// `notify:` (optional; nobody is notified when absent).
pub(super) fn parse_notify(errs: &mut Vec<FieldError>, v: Option<&Value>) -> Notify {
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
