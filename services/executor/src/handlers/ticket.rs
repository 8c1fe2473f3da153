//! `ticket.comment.add` against the tenant's ticket API (`base_url` of the approved settings,
//! which must pass the destination guard like `webhook.post`'s URL), with the tenant's bearer
//! token: the preview reads the ticket (`GET …/tickets/{id}`: its title and status), the run
//! posts the comment (`POST …/tickets/{id}/comments`) with the grant id as `Idempotency-Key`,
//! so a retried request adds it once. The read-back lists the ticket's comments (`GET
//! …/tickets/{id}/comments`) and finds the one created under the grant's idempotency key.

use super::{Execution, Handler, Outcome, credential, send};
use crate::destinations::check_url;
use actiond_core::effect::{EffectRecord, Verdict};
use serde_json::{Value, json};

/// The executor's entry of `ticket.comment.add`.
pub(super) static HANDLER: Handler = Handler {
    run: |ex| Box::pin(comment(ex)),
    preview: Some(|ex| Box::pin(preview(ex))),
    read_back: Some(|ex| Box::pin(read_back(ex))),
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
    let (status, v) = ticket_get(ex, "").await?;
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

/// The comment this grant made, as the ticket API lists it now: `GET …/tickets/{id}/comments`
/// (a JSON list, or an object whose `comments` or `data` is one), the comment whose
/// `idempotency_key` is the grant id (the run's `Idempotency-Key`). It matches when its body is
/// the approved text; none under the key is [`Verdict::Absent`]; an API whose comments carry
/// no `idempotency_key` at all cannot say, and is [`Verdict::Unread`].
async fn read_back(ex: &Execution<'_>) -> EffectRecord {
    match list_comments(ex).await {
        Ok(list) => compare(ex.params, &ex.grant_id.to_string(), &list),
        Err(reason) => EffectRecord {
            verdict: Verdict::Unread,
            after: String::new(),
            reason,
            evidence: Value::Null,
            settled: false,
        },
    }
}

/// A read-only `GET` of the ticket (`suffix` `""`) or one of its collections (`"/comments"`) as
/// the executor's ticket credential: the HTTP status and the JSON body (`null` when the body is
/// not JSON). Errors: no ticket API or credential configured, the API unreachable.
async fn ticket_get(ex: &Execution<'_>, suffix: &str) -> Result<(u16, Value), String> {
    let (url, token) = ticket_url(ex, suffix)?;
    let resp = ex
        .http
        .get(url)
        .bearer_auth(token)
        .send()
        .await
        .map_err(|e| format!("could not reach the ticket API: {e}"))?;
    let status = resp.status().as_u16();
    Ok((status, resp.json().await.unwrap_or(Value::Null)))
}

/// The ticket's comments as the API lists them.
async fn list_comments(ex: &Execution<'_>) -> Result<Vec<Value>, String> {
    let (status, v) = ticket_get(ex, "/comments").await?;
    let list = v
        .as_array()
        .or_else(|| v.get("comments").and_then(Value::as_array))
        .or_else(|| v.get("data").and_then(Value::as_array));
    match list {
        Some(l) if (200..300).contains(&status) => Ok(l.clone()),
        _ => Err(format!(
            "the ticket API answered HTTP {status} without a list of comments"
        )),
    }
}

/// Compares the comment of grant `grant` in `list` (if any) with the approved `params`.
fn compare(params: &Value, grant: &str, list: &[Value]) -> EffectRecord {
    let ticket = params
        .get("ticket_id")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let body = params
        .get("body")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let keyed = list.iter().any(|c| c.get("idempotency_key").is_some());
    let found = list
        .iter()
        .find(|c| c.get("idempotency_key").and_then(Value::as_str) == Some(grant));
    let Some(c) = found else {
        let (verdict, reason) = if keyed || list.is_empty() {
            (
                Verdict::Absent,
                format!(
                    "the ticket API lists no comment on {ticket} under idempotency key {grant}"
                ),
            )
        } else {
            (
                Verdict::Unread,
                "the ticket API lists comments without their idempotency keys: this grant's comment cannot be told apart".to_owned(),
            )
        };
        return EffectRecord {
            verdict,
            after: format!("no comment on ticket {ticket} under this grant"),
            reason,
            evidence: json!({"ticket_id": ticket, "grant_id": grant, "comments": list.len(), "comment": null}),
            settled: false,
        };
    };
    let id = c
        .get("id")
        .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
        .unwrap_or_else(|| "(no id)".into());
    // Its length, not its text: the event is sealed for good, the comment is customer text.
    let got = c.get("body").and_then(Value::as_str);
    let shown = got.map_or_else(
        || "no text".to_owned(),
        |b| format!("{} characters", b.chars().count()),
    );
    let matches = got == Some(body);
    EffectRecord {
        verdict: if matches {
            Verdict::Matches
        } else {
            Verdict::Differs
        },
        after: format!("Comment {id} on ticket {ticket}, {shown}"),
        reason: if matches {
            String::new()
        } else {
            "the comment's text is not the approved text".into()
        },
        evidence: json!({"ticket_id": ticket, "comment_id": id, "grant_id": grant,
                         "body_matches": matches, "body_chars": got.map(|b| b.chars().count())}),
        settled: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grant_s_comment_is_found_by_its_idempotency_key() {
        let p = json!({"ticket_id": "T-1", "body": "Restarted."});
        let ok = compare(
            &p,
            "g",
            &[
                json!({"id": "c-0", "body": "x", "idempotency_key": "other"}),
                json!({"id": "c-1", "body": "Restarted.", "idempotency_key": "g"}),
            ],
        );
        assert_eq!(ok.verdict, Verdict::Matches, "{ok:?}");
        assert_eq!(ok.after, "Comment c-1 on ticket T-1, 10 characters");
        let other = compare(
            &p,
            "g",
            &[json!({"id": 5, "body": "no", "idempotency_key": "g"})],
        );
        assert_eq!(other.verdict, Verdict::Differs);
        assert_eq!(compare(&p, "g", &[]).verdict, Verdict::Absent);
        assert_eq!(
            compare(&p, "g", &[json!({"id": "c-1", "body": "Restarted."})]).verdict,
            Verdict::Unread
        );
    }
}
