//! `webhook.post`: POST the JSON body to the tenant's one configured URL, which must pass the
//! destination guard (the operator's allowed hosts, no private addresses unless allowed).

use super::{Execution, Handler, Outcome, credential, send};
use crate::destinations::check_url;
use serde_json::Value;

/// The executor's entry of `webhook.post`: no preview (there is nothing to read).
pub(super) static HANDLER: Handler = Handler {
    run: |ex| Box::pin(post(ex)),
    preview: None,
    read_back: None,
};

async fn post(ex: &Execution<'_>) -> Outcome {
    let Some(url) = ex
        .settings
        .get("url")
        .and_then(Value::as_str)
        .and_then(|u| url::Url::parse(u).ok())
    else {
        return Outcome::Failed("webhook url missing from the approved settings".into());
    };
    if let Err(reason) = check_url(
        &url,
        &ex.destinations.webhook_hosts,
        ex.destinations.allow_private,
    ) {
        return Outcome::Failed(format!("destination refused: {reason}"));
    }
    let cred = match credential(ex) {
        Ok(c) => c,
        Err(o) => return o,
    };
    let body = ex
        .params
        .get("body")
        .cloned()
        .unwrap_or(Value::Object(Default::default()));
    let mut req = ex
        .http
        .post(url)
        .header("content-type", "application/json")
        .header("idempotency-key", ex.grant_id.to_string())
        .header("x-actiond-proposal-id", ex.proposal_id.to_string())
        .body(serde_json::to_vec(&body).unwrap_or_default());
    if let Some(h) = ex.settings.get("headers").and_then(Value::as_object) {
        for (k, v) in h {
            if let Some(v) = v.as_str() {
                req = req.header(k.as_str(), v);
            }
        }
    }
    if let Some(c) = cred {
        req = req.bearer_auth(c);
    }
    send(req).await
}
