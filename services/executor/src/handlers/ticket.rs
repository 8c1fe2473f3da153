//! `ticket.comment.add` against the tenant's ticket API (`base_url` of the approved settings,
//! which must pass the destination guard like `webhook.post`'s URL), with the tenant's bearer
//! token: the preview reads the ticket (`GET …/tickets/{id}`: its title and status), the run
//! posts the comment (`POST …/tickets/{id}/comments`) with the grant id as `Idempotency-Key`,
//! so a retried request adds it once.

use super::{Execution, Handler, Outcome, credential, send};
use crate::destinations::check_url;
use serde_json::{Value, json};

/// The executor's entry of `ticket.comment.add`.
pub(super) static HANDLER: Handler = Handler {
    run: |ex| Box::pin(comment(ex)),
    preview: Some(|ex| Box::pin(preview(ex))),
    read_back: None,
};

/// The ticket's URL under the approved `base_url`, after the destination guard, and the
/// bearer token; or why not (nothing was sent).
fn ticket_url(ex: &Execution<'_>, tail: &str) -> Result<(url::Url, String), String> {
    let base = ex
        .settings
        .get("base_url")
        .and_then(Value::as_str)
        .ok_or("base_url missing from the approved settings")?;
    // `ticket_id` matches ^[A-Za-z0-9_-]{1,64}$ (checked at submission): one path segment.
    let id = ex
        .params
        .get("ticket_id")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let url = url::Url::parse(&format!(
        "{}/tickets/{id}{tail}",
        base.trim_end_matches('/')
    ))
    .map_err(|e| format!("bad base_url: {e}"))?;
    check_url(
        &url,
        &ex.destinations.webhook_hosts,
        ex.destinations.allow_private,
    )
    .map_err(|reason| format!("destination refused: {reason}"))?;
    let token = credential(ex)
        .map_err(|o| o.detail().to_owned())?
        .ok_or("ticket.comment.add needs a credential")?;
    Ok((url, token))
}

async fn comment(ex: &Execution<'_>) -> Outcome {
    let (url, token) = match ticket_url(ex, "/comments") {
        Ok(x) => x,
        Err(why) => return Outcome::Failed(why),
    };
    let body = json!({"body": ex.params.get("body").cloned().unwrap_or(Value::Null)});
    let req = ex
        .http
        .post(url)
        .bearer_auth(token)
        .header("idempotency-key", ex.grant_id.to_string())
        .header("x-actiond-proposal-id", ex.proposal_id.to_string())
        .json(&body);
    send(req).await
}

/// `Ticket T-7: "Printer on fire" (open)`: what the comment is going to. Binds nothing (a
/// comment is fine on a ticket whose title or status changed).
async fn preview(ex: &Execution<'_>) -> Result<super::Read, String> {
    let (url, token) = ticket_url(ex, "")?;
    let resp = ex
        .http
        .get(url)
        .bearer_auth(token)
        .send()
        .await
        .map_err(|e| format!("could not reach the ticket API: {e}"))?;
    let status = resp.status().as_u16();
    let v: Value = resp.json().await.unwrap_or(Value::Null);
    let (Some(title), Some(state)) = (
        v.get("title").and_then(Value::as_str),
        v.get("status").and_then(Value::as_str),
    ) else {
        return Err(format!(
            "the ticket API answered HTTP {status} without the ticket's title and status"
        ));
    };
    let id = ex
        .params
        .get("ticket_id")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Ok(super::Read {
        text: format!("Ticket {id}: {title:?} ({state})"),
        binding: serde_json::json!({}),
        warnings: Vec::new(),
    })
}
