//! Freezing an agent from any of its proposals: the way out of an approval flood that is not
//! "approve to make it stop".
//!
//! Any approver who can see one of the agent's proposals may freeze it: its pending and escalated
//! proposals are denied with one reason, and the api refuses its new ones (403, "this agent is
//! frozen") until its owner or a tenant admin unfreezes it. Both are audit events.

use crate::AppState;
use crate::error::{WebError, WebResult};
use crate::pages::chrome::parse_form;
use crate::session::{Viewer, require_post};
use actiond_store::approvals::{self, ProposalDetail};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use uuid::Uuid;

/// What the decision page knows about the agent: frozen, its open escalations, and whether
/// the viewer may freeze it.
#[derive(Debug, Default)]
pub(crate) struct AgentFacts {
    pub(crate) frozen: bool,
    pub(crate) open: i64,
    pub(crate) can_freeze: bool,
    pub(crate) can_unfreeze: bool,
}

/// True when `v` is a tenant admin of `tenant` by its current document.
async fn is_admin(state: &AppState, v: &Viewer, tenant: &str) -> WebResult<bool> {
    let c = state.db.client().await?;
    Ok(state.docs.latest_of(&c, tenant).await?.is_some_and(|d| {
        d.admins.includes(
            &d.approvers,
            state.person_issuer(),
            &v.issuer,
            &v.subject,
            &v.claims,
        )
    }))
}

/// What the decision page shows about `p`'s agent.
pub(crate) async fn agent_facts(
    state: &AppState,
    v: &Viewer,
    p: &ProposalDetail,
) -> WebResult<AgentFacts> {
    let (frozen, open) =
        actiond_store::agents::freeze_state(&state.db, &p.tenant_id, p.agent_id).await?;
    let can_unfreeze = frozen
        && (p.agent_owner.as_deref() == Some(v.subject.as_str())
            || is_admin(state, v, &p.tenant_id).await?);
    Ok(AgentFacts {
        frozen,
        open,
        can_freeze: !frozen,
        can_unfreeze,
    })
}

/// The proposal named by the form's `from`, which must belong to agent `agent` and be visible
/// to `v`; a `from` or agent id that is not a UUID is a 400 naming it, anything else a 404.
async fn from_proposal(
    state: &AppState,
    v: &Viewer,
    form: &std::collections::HashMap<String, String>,
    agent: &str,
) -> WebResult<ProposalDetail> {
    let from = form
        .get("from")
        .and_then(|s| Uuid::parse_str(s).ok())
        .ok_or_else(|| WebError::BadRequest("from: must be the proposal's id (a UUID)".into()))?;
    let agent = Uuid::parse_str(agent)
        .map_err(|_| WebError::BadRequest("agent id: must be a UUID".into()))?;
    let p = approvals::get(&state.db, Some(&v.tenants), from)
        .await?
        .ok_or(WebError::NotFound)?;
    if p.agent_id != agent {
        return Err(WebError::NotFound);
    }
    Ok(p)
}

fn back(id: Uuid, result: &str) -> Response {
    (
        StatusCode::SEE_OTHER,
        [(header::LOCATION, format!("/p/{id}?result={result}"))],
    )
        .into_response()
}

/// `POST /agents/{id}/freeze` (form: `csrf`, `from` = one of its proposals).
pub(crate) async fn freeze(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(agent): Path<String>,
    body: Bytes,
) -> WebResult<Response> {
    let form = parse_form(&body)?;
    let v = require_post(&state, &headers, form.get("csrf").map(String::as_str)).await?;
    let p = from_proposal(&state, &v, &form, &agent).await?;
    let by = format!("approver:{}", v.subject);
    let reason = format!(
        "agent frozen by {}: its open requests were denied.",
        v.email.as_deref().unwrap_or(&v.subject)
    );
    let denied =
        actiond_store::agents::freeze(&state.db, &p.tenant_id, p.agent_id, &by, &reason).await?;
    tracing::info!(agent = %p.agent_id, tenant = %p.tenant_id, subject = %v.subject, denied = ?denied, "agent frozen");
    Ok(back(
        p.id,
        if denied.is_some() {
            "frozen"
        } else {
            "already-frozen"
        },
    ))
}

/// `POST /agents/{id}/unfreeze` (form: `csrf`, `from`): its owner or a tenant admin only.
pub(crate) async fn unfreeze(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(agent): Path<String>,
    body: Bytes,
) -> WebResult<Response> {
    let form = parse_form(&body)?;
    let v = require_post(&state, &headers, form.get("csrf").map(String::as_str)).await?;
    let p = from_proposal(&state, &v, &form, &agent).await?;
    let owner = p.agent_owner.as_deref() == Some(v.subject.as_str());
    if !owner && !is_admin(&state, &v, &p.tenant_id).await? {
        return Err(WebError::Forbidden(
            "agent: only its owner or a tenant admin may unfreeze it".into(),
        ));
    }
    let by = format!("approver:{}", v.subject);
    actiond_store::agents::unfreeze(&state.db, &p.tenant_id, p.agent_id, &by).await?;
    Ok(back(p.id, "unfrozen"))
}
