//! `POST /p/{id}/decide`: Approve, Deny, or "Edit and approve".
//!
//! The decision goes through `actiond_store::approvals::decide`, which refuses a decision on
//! anything but the intent hash and policy version the page displayed, refuses the agent's
//! owner, counts distinct approvers and issues the grant with this service's `web-…` key. An
//! id the person may not see is a 404, as on the page.

use crate::AppState;
use crate::error::{WebError, WebResult};
use crate::pages::chrome::parse_form;
use crate::pages::decision::{DENY_REASONS, parse_id};
use crate::session::{Viewer, require_post};
use actiond_core::approval::Retyped;
use actiond_core::handlers::HandlerKind;
use actiond_core::text::reveal_invisible;
use actiond_store::approvals::{self, Approver, Decided, Shown, Verdict};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use std::collections::HashMap;
use uuid::Uuid;

/// The longest note a Deny takes, in characters (the decision page's `maxlength`).
pub const MAX_NOTE_CHARS: usize = 200;

/// The comment stored with a Deny: the quick pick and the note, "looks injected: ticket
/// #4411 asks to ignore instructions"; `None` for an Approve or when both are empty.
/// Errors: a `reason` that is neither empty nor one of [`DENY_REASONS`] (a forged form) is a
/// 400 naming `reason` and the allowed values, so nothing is decided on a reason nobody chose;
/// a `note` over [`MAX_NOTE_CHARS`] is a 400 naming `note`.
fn deny_comment(form: &HashMap<String, String>, verdict: Verdict) -> WebResult<Option<String>> {
    if verdict != Verdict::Deny {
        return Ok(None);
    }
    let pick = form
        .get("reason")
        .map(|s| s.trim())
        .filter(|s| !s.is_empty());
    if let Some(p) = pick
        && !DENY_REASONS.contains(&p)
    {
        let shown: String = reveal_invisible(p, false).chars().take(64).collect();
        return Err(WebError::BadRequest(format!(
            "reason: \"{shown}\" is not one of the reasons offered ({}); leave it empty or pick one",
            DENY_REASONS.join(", ")
        )));
    }
    // A control character (a pasted tab or line break) becomes a space; a note longer than
    // the page's 200 characters is refused, never cut: what is stored is what was written.
    let note: String = form
        .get("note")
        .map(|s| s.trim())
        .unwrap_or_default()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let written = note.chars().count();
    if written > MAX_NOTE_CHARS {
        return Err(WebError::BadRequest(format!(
            "note: at most {MAX_NOTE_CHARS} characters, this one has {written}; shorten it and deny again"
        )));
    }
    Ok(match (pick, note.is_empty()) {
        (Some(p), true) => Some(p.to_owned()),
        (Some(p), false) => Some(format!("{p}: {note}")),
        (None, false) => Some(note),
        (None, true) => None,
    })
}

/// The edits of an "Edit and approve" form: every non-empty `edit.<param>` field, read as the
/// page wrote it ([`editable_fields`]): a refund's amount in major units, else JSON when it
/// parses strictly, else text. Which params may be edited, and the limits, are checked by
/// the store with the submission's rules. Errors: 400 naming the field.
fn amend_edits(form: &HashMap<String, String>, p: &approvals::ProposalDetail) -> WebResult<Value> {
    let params: Value = serde_json::from_str(&p.params_json).unwrap_or(Value::Null);
    let currency = params.get("currency").and_then(Value::as_str).unwrap_or("");
    let mut edits = serde_json::Map::new();
    for (k, raw) in form {
        let Some(name) = k.strip_prefix("edit.") else {
            continue;
        };
        let raw = raw.trim();
        if raw.is_empty() {
            continue;
        }
        let v = if p.action == HandlerKind::BillingRefundIssue.action() && name == "amount" {
            let n = actiond_core::approval::parse_major_units(raw, currency).ok_or_else(|| {
                WebError::BadRequest(format!(
                    "params.amount: \"{}\" is not an amount in {currency} like 80.00",
                    reveal_invisible(raw, false)
                        .chars()
                        .take(32)
                        .collect::<String>()
                ))
            })?;
            Value::from(n)
        } else {
            actiond_core::canonical::parse_strict(raw.as_bytes())
                .unwrap_or_else(|_| Value::String(raw.to_owned()))
        };
        edits.insert(name.to_owned(), v);
    }
    if edits.is_empty() {
        return Err(WebError::BadRequest(
            "edits: change at least one value to approve with an edit".into(),
        ));
    }
    Ok(Value::Object(edits))
}

/// The decision form's required fields: the verdict (`approve` | `deny`, or `amend` for
/// "Edit and approve", answered as `None`), the intent hash and the policy version the page
/// showed. Errors: 400 naming the field.
fn decision_fields(form: &HashMap<String, String>) -> WebResult<(Option<Verdict>, &String, i32)> {
    let verdict = match form.get("verdict").map(String::as_str) {
        Some("approve") => Some(Verdict::Approve),
        Some("deny") => Some(Verdict::Deny),
        Some("amend") => None,
        _ => {
            return Err(WebError::BadRequest(
                "verdict: must be approve, deny or amend".into(),
            ));
        }
    };
    let intent = form
        .get("intent_hash")
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            WebError::BadRequest("intent_hash: the intent hash shown is required".into())
        })?;
    // Missing and malformed are different mistakes: say which (a form with `doc_version=x`
    // was told the field was required).
    let doc_version: i32 = match form.get("doc_version").filter(|s| !s.is_empty()) {
        None => {
            return Err(WebError::BadRequest(
                "doc_version: is required: the policy version shown on the page".into(),
            ));
        }
        Some(s) => s.parse().map_err(|_| {
            WebError::BadRequest(
                "doc_version: must be an integer: the policy version shown on the page".into(),
            )
        })?,
    };
    Ok((verdict, intent, doc_version))
}

/// The answer to a decision a rule refused: the passkey page, a new sign-in when that lifts
/// the refusal, else 409 with the rule's message.
async fn refused(
    state: &AppState,
    v: &Viewer,
    tenant: &str,
    id: Uuid,
    r: actiond_core::approval::ApprovalRefusal,
) -> WebResult<Response> {
    if r == actiond_core::approval::ApprovalRefusal::PasskeyRequired {
        return crate::passkey::needed_page(state, v, tenant, id).await;
    }
    if let Some(max_age) = r.sign_in_max_age() {
        let to = crate::session::sign_in_again(state, v, &format!("/p/{id}"), max_age);
        return Ok((StatusCode::SEE_OTHER, [(header::LOCATION, to)]).into_response());
    }
    Err(WebError::Conflict(format!("{r}. Nothing was decided.")))
}

/// What a decision form asks for, read and checked before anything is decided.
struct Submission<'f> {
    /// The verdict; "Edit and approve" is an Approve with `edits`.
    verdict: Verdict,
    /// The edits of "Edit and approve", `None` for a plain Approve or Deny.
    edits: Option<Value>,
    /// The Deny reason stored with a Deny ([`deny_comment`]).
    comment: Option<String>,
    intent: &'f String,
    doc_version: i32,
    retyped: Retyped,
    /// The passkey assertion of an Approve, if the form carried one.
    passkey: Option<actiond_store::passkeys::SubmittedAssertion>,
    /// Seconds the page was open before the click (`None` without a valid `shown` stamp).
    seconds: Option<f64>,
    /// The SHA-256 of the preview the page showed (`preview_sha256`), when it showed one: an
    /// Approve is refused when the stored preview differs.
    preview: Option<&'f str>,
}

impl Submission<'_> {
    /// `"approve"` or `"deny"`, the verdict label of the decision metrics.
    fn label(&self) -> &'static str {
        match self.verdict {
            Verdict::Approve => "approve",
            Verdict::Deny => "deny",
        }
    }

    /// What the page showed, as `approvals::decide` checks it.
    fn shown(&self) -> Shown<'_> {
        Shown {
            intent: self.intent,
            doc_version: Some(self.doc_version),
            retyped: &self.retyped,
            seconds_on_page: self.seconds,
            passkey: self.passkey.as_ref(),
            preview: self.preview,
        }
    }
}

/// Reads the decision form of proposal `p` as `v` posted it. Errors: 400 naming the field
/// (verdict, intent hash, policy version, an edit, the Deny reason, the passkey fields, the
/// page's `shown` stamp).
fn read_submission<'f>(
    state: &AppState,
    v: &Viewer,
    p: &approvals::ProposalDetail,
    form: &'f HashMap<String, String>,
) -> WebResult<Submission<'f>> {
    let (verdict, intent, doc_version) = decision_fields(form)?;
    let edits = match verdict {
        None => Some(amend_edits(form, p)?),
        Some(_) => None,
    };
    let verdict = verdict.unwrap_or(Verdict::Approve);
    let comment = deny_comment(form, verdict)?;
    let passkey = match verdict {
        Verdict::Approve => crate::passkey::submitted(state, form)?,
        Verdict::Deny => None,
    };
    let retyped = Retyped {
        amount: form.get("confirm_amount").cloned(),
        target: form.get("confirm_target").cloned(),
    };
    let seconds = state
        .form_clock
        .seconds(
            form.get("shown").map(String::as_str),
            p.id,
            &v.id_sha256,
            actiond_runtime::clock::now_utc().timestamp_millis(),
        )
        .map_err(|e| WebError::BadRequest(e.to_string()))?;
    Ok(Submission {
        verdict,
        edits,
        comment,
        intent,
        doc_version,
        retyped,
        passkey,
        seconds,
        preview: form.get("preview_sha256").map(String::as_str),
    })
}

/// `v` as the approver `approvals::decide` records: issuer and subject, the web channel, the
/// session's login times and claims, and this app's issuer (the pin of a tenant that sets
/// none), with which the decision checks again that the person is an approver.
fn approver_of(state: &AppState, v: &Viewer) -> Approver {
    Approver {
        issuer: v.issuer.clone(),
        subject: v.subject.clone(),
        email: v.email.clone(),
        channel: "web",
        session: Some(v.times),
        claims: Some(v.claims.clone()),
        deployment_issuer: Some(state.person_issuer().to_owned()),
    }
}

/// `POST /p/{id}/decide`: one click, approve or deny (or "Edit and approve", see [`amend`]).
pub(crate) async fn decide(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> WebResult<Response> {
    let form = parse_form(&body)?;
    let v = require_post(&state, &headers, form.get("csrf").map(String::as_str)).await?;
    let id = parse_id(&id)?;
    let p = approvals::get(&state.db, Some(&v.tenants), id)
        .await?
        .ok_or(WebError::NotFound)?;
    let sub = read_submission(&state, &v, &p, &form)?;
    let approver = approver_of(&state, &v);
    if let Some(edits) = &sub.edits {
        return amend(&state, &v, &p, &approver, &sub.shown(), edits).await;
    }
    let outcome = approvals::decide(
        &state.db,
        &state.signer,
        &p.tenant_id,
        id,
        &approver,
        sub.verdict,
        &sub.shown(),
        sub.comment.as_deref(),
    )
    .await;
    answer(&state, &v, &p, &sub, outcome).await
}

/// The answer to a decision: a redirect to the page with `?result=` (`approved`, `denied`,
/// `recorded`, `stage-complete`, `already`), counted in the decision metrics with the time the
/// page was open; an approval wakes the executors. A refusal is counted as `refused` and
/// answered with [`refused`] (a rule's refusal) or 409 (a conflict).
async fn answer(
    state: &AppState,
    v: &Viewer,
    p: &approvals::ProposalDetail,
    sub: &Submission<'_>,
    outcome: Result<Decided, actiond_store::StoreError>,
) -> WebResult<Response> {
    let count = |result: &str| {
        state
            .metrics
            .decisions
            .with_label_values(&[sub.label(), result])
            .inc();
    };
    let result = match outcome {
        Ok(Decided::Approved { grant_id }) => {
            tracing::info!(proposal = %p.id, tenant = %p.tenant_id, %grant_id, subject = %v.subject, "approved");
            wake_executors(state).await;
            "approved"
        }
        Ok(Decided::Denied) => {
            tracing::info!(proposal = %p.id, tenant = %p.tenant_id, subject = %v.subject, "denied");
            "denied"
        }
        Ok(Decided::NeedsMore { .. }) => "recorded",
        Ok(Decided::StageComplete { .. }) => "stage-complete",
        Ok(Decided::AlreadyDecided { .. }) => "already",
        Ok(Decided::Refused(r)) => {
            count("refused");
            return refused(state, v, &p.tenant_id, p.id, r).await;
        }
        Err(actiond_store::StoreError::Conflict(m)) => {
            count("refused");
            return Err(WebError::Conflict(format!("{m}. Nothing was decided.")));
        }
        Err(e) => return Err(e.into()),
    };
    count(result);
    if result != "already"
        && let Some(secs) = sub.seconds
    {
        state
            .metrics
            .decision_seconds
            .with_label_values(&[&p.tenant_id, sub.label()])
            .observe(secs);
    }
    Ok((
        StatusCode::SEE_OTHER,
        [(header::LOCATION, format!("/p/{}?result={result}", p.id))],
    )
        .into_response())
}

/// Wakes the executors after an approval (a hint; they also poll, so a failed NOTIFY only
/// delays the run).
async fn wake_executors(state: &AppState) {
    if let Err(e) =
        actiond_store::listen::notify(&state.db, actiond_store::listen::CHANNEL_APPROVED).await
    {
        tracing::debug!(error = %e.detail(), "NOTIFY failed; executors will poll");
    }
}

/// "Edit and approve" (`verdict=amend` on `POST /p/{id}/decide`, after every check of that
/// POST): [`approvals::amend::amend`], then the new proposal's page. A refused edit is a 400
/// naming the field; an original no longer escalated a 409; a refusal by a decision rule is
/// answered as an Approve's.
async fn amend(
    state: &AppState,
    v: &Viewer,
    p: &approvals::ProposalDetail,
    approver: &Approver,
    shown: &Shown<'_>,
    edits: &Value,
) -> WebResult<Response> {
    use actiond_store::approvals::amend::{self as am, Amended};
    let out = am::amend(
        &state.db,
        &state.signer,
        &p.tenant_id,
        p.id,
        approver,
        shown,
        edits,
        None,
    )
    .await?;
    let label = "amend";
    match out {
        Amended::Filed(f) => {
            tracing::info!(proposal = %p.id, amended_to = %f.id, tenant = %p.tenant_id, subject = %v.subject, state = %f.state, "amended");
            if matches!(f.approval, Some(Decided::Approved { .. })) {
                wake_executors(state).await;
            }
            state
                .metrics
                .decisions
                .with_label_values(&[label, "amended"])
                .inc();
            Ok((
                StatusCode::SEE_OTHER,
                [(header::LOCATION, format!("/p/{}?result=amended", f.id))],
            )
                .into_response())
        }
        Amended::AlreadyDecided { state: st, .. } => Err(WebError::Conflict(format!(
            "This proposal is already {st}: it can no longer be amended. Nothing was amended."
        ))),
        Amended::Invalid(e) => Err(WebError::BadRequest(format!("{e}. Nothing was amended."))),
        Amended::Refused(r) => {
            state
                .metrics
                .decisions
                .with_label_values(&[label, "refused"])
                .inc();
            refused(state, v, &p.tenant_id, p.id, r).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_deny_note_is_stored_as_written_or_refused() {
        let deny = |f: &[(&str, &str)]| deny_comment(&form(f), Verdict::Deny);
        let pick = DENY_REASONS[0];
        assert_eq!(
            deny(&[("reason", pick), ("note", " ticket\t#4411 ")]).unwrap(),
            Some(format!("{pick}: ticket #4411"))
        );
        let full = "x".repeat(MAX_NOTE_CHARS);
        assert_eq!(deny(&[("note", &full)]).unwrap(), Some(full.clone()));
        let long = "x".repeat(5000);
        match deny(&[("note", &long)]) {
            Err(WebError::BadRequest(m)) => assert_eq!(
                m,
                "note: at most 200 characters, this one has 5000; shorten it and deny again"
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(deny(&[]).unwrap(), None);
        assert_eq!(
            deny_comment(&form(&[("note", &long)]), Verdict::Approve).unwrap(),
            None
        );
    }
}
