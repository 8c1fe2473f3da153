//! Tenant-admin pages: `GET /admin/shadow`, the report of a tenant's shadow (candidate)
//! document — how many live decisions it would have flipped, which way, by rule, with examples;
//! `GET /admin/approvers`; and `GET /admin/agents` with `POST /admin/agents/{id}/revoke`, which
//! revokes an agent exactly as `actiond agent revoke` does (one store function: its open
//! proposals are denied and audited, its approved unspent grants never run).
//!
//! Tenant admins are the people the tenant's current document lists under `admins:` (identified
//! like approvers: `approvers.issuer` and `approvers.claim`). Anyone else gets 403; the report
//! is read with row-level security scoped to the one tenant shown.

use crate::AppState;
use crate::error::{WebError, WebResult};
use crate::pages::chrome::{Chrome, parse_form, path_and_query, render};
use crate::session::{Viewer, require_post, require_viewer};
use actiond_core::text::reveal_invisible;
use askama::Template;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use uuid::Uuid;

/// One example proposal of a shadow flip.
#[derive(Debug, Clone)]
pub(crate) struct ShadowExample {
    pub(crate) proposal_id: String,
    pub(crate) action: String,
    pub(crate) live_rule: String,
}

/// One group of flipped decisions.
#[derive(Debug, Clone)]
pub(crate) struct ShadowFlipRow {
    pub(crate) direction: &'static str,
    pub(crate) from: &'static str,
    pub(crate) to: &'static str,
    pub(crate) rule: String,
    pub(crate) count: i64,
    pub(crate) examples: Vec<ShadowExample>,
}

/// The report of one shadow document.
#[derive(Debug, Clone)]
pub(crate) struct ShadowSummary {
    pub(crate) seq: i32,
    pub(crate) status: String,
    pub(crate) stored_by: String,
    pub(crate) stored_at: String,
    pub(crate) live_version: String,
    pub(crate) evaluated: i64,
    pub(crate) agreed: i64,
    pub(crate) flipped: i64,
    pub(crate) flips: Vec<ShadowFlipRow>,
}

/// `/admin/shadow`.
#[derive(Template)]
#[template(path = "shadow.html")]
pub(crate) struct ShadowPage {
    pub(crate) chrome: Chrome,
    pub(crate) admin_tenants: Vec<String>,
    pub(crate) tenant: String,
    pub(crate) report: Option<ShadowSummary>,
}

/// One person on the Approvers page.
#[derive(Debug, Clone)]
pub(crate) struct ApproverRow {
    pub(crate) who: String,
    pub(crate) subject: String,
    pub(crate) issuer: String,
    pub(crate) decisions: i64,
    pub(crate) approve_pct: String,
    pub(crate) median: String,
    pub(crate) fast_approvals: i64,
    /// Looks like rubber-stamping: ≥ 20 decisions, > 95% approved, median under 5 s.
    pub(crate) flag: bool,
}

/// One agent on `/admin/agents`.
pub(crate) struct AgentAdminRow {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) owner: String,
    pub(crate) created: String,
    pub(crate) frozen: bool,
    /// When it was revoked (empty: live).
    pub(crate) revoked: String,
}

/// `/admin/agents`.
#[derive(Template)]
#[template(path = "agents.html")]
pub(crate) struct AgentsPage {
    pub(crate) chrome: Chrome,
    pub(crate) admin_tenants: Vec<String>,
    pub(crate) tenant: String,
    pub(crate) rows: Vec<AgentAdminRow>,
    /// What the last revocation did (empty: nothing to say).
    pub(crate) notice: String,
}

/// `/admin/approvers`.
#[derive(Template)]
#[template(path = "approvers.html")]
pub(crate) struct ApproversPage {
    pub(crate) chrome: Chrome,
    pub(crate) admin_tenants: Vec<String>,
    pub(crate) tenant: String,
    pub(crate) rows: Vec<ApproverRow>,
}

/// `?tenant=` of the report page (and `?result=` of the agents page after a revocation).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct TenantQuery {
    tenant: Option<String>,
    result: Option<String>,
}

/// The tenants `v` administers and the one asked for (the first by default): another
/// tenant's page is a 404, no tenant at all a 403.
async fn admin_tenant(
    state: &AppState,
    v: &Viewer,
    client: &actiond_store::Client,
    q: &TenantQuery,
) -> WebResult<(Vec<String>, String)> {
    let docs = state.docs.latest_of_every_tenant(client).await?;
    let admin_tenants = crate::authz::admin_tenants(
        &docs,
        state.person_issuer(),
        &v.issuer,
        &v.subject,
        &v.claims,
    );
    let tenant = match q.tenant.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
        Some(t) if admin_tenants.iter().any(|a| a == t) => t.to_owned(),
        // Another tenant's report is as invisible as another tenant's proposal.
        Some(_) => return Err(WebError::NotFound),
        None => match admin_tenants.first() {
            Some(t) => t.clone(),
            None => {
                return Err(WebError::Forbidden(
                    "No tenant lists you (or your groups) as an admin. Ask the tenant's operator to add you to its admins.".into(),
                ));
            }
        },
    };
    Ok((admin_tenants, tenant))
}

/// `GET /admin/approvers[?tenant=T]`: decisions, approve ratio and median time on page per
/// person over the last 30 days (approval fatigue shows here, by name; never in metrics).
pub(crate) async fn approvers(
    State(state): State<AppState>,
    headers: HeaderMap,
    uri: Uri,
    Query(q): Query<TenantQuery>,
) -> WebResult<Response> {
    let v = require_viewer(&state, &headers, &path_and_query(&uri)).await?;
    let client = state.db.client().await?;
    let (admin_tenants, tenant) = admin_tenant(&state, &v, &client, &q).await?;
    drop(client);
    let stats = actiond_store::queue_views::approver_stats(&state.db, &tenant, 30).await?;
    let rows = stats
        .into_iter()
        .map(|s| {
            let ratio = if s.decisions > 0 {
                s.approvals as f64 / s.decisions as f64
            } else {
                0.0
            };
            ApproverRow {
                who: reveal_invisible(s.email.as_deref().unwrap_or(&s.subject), false),
                subject: reveal_invisible(&s.subject, false),
                issuer: reveal_invisible(&s.issuer, false),
                decisions: s.decisions,
                approve_pct: format!("{:.0}%", ratio * 100.0),
                median: s
                    .median_seconds
                    .map(|m| format!("{m:.1} s"))
                    .unwrap_or_else(|| "not measured".into()),
                fast_approvals: s.fast_approvals,
                flag: s.decisions >= 20
                    && ratio > 0.95
                    && s.median_seconds.is_some_and(|m| m < 5.0),
            }
        })
        .collect();
    Ok(render(&ApproversPage {
        chrome: v.chrome(),
        admin_tenants,
        tenant,
        rows,
    }))
}

/// `GET /admin/shadow[?tenant=T]`.
pub(crate) async fn shadow(
    State(state): State<AppState>,
    headers: HeaderMap,
    uri: Uri,
    Query(q): Query<TenantQuery>,
) -> WebResult<Response> {
    let v = require_viewer(&state, &headers, &path_and_query(&uri)).await?;
    let mut client = state.db.client().await?;
    let (admin_tenants, tenant) = admin_tenant(&state, &v, &client, &q).await?;
    let tx = client
        .transaction()
        .await
        .map_err(actiond_store::StoreError::from)?;
    actiond_store::set_tenant(&tx, &tenant).await?;
    let report = actiond_store::shadow::report(&tx, &tenant, None).await?;
    tx.commit().await.map_err(actiond_store::StoreError::from)?;
    let report = report.map(|r| {
        let s = &r.shadow;
        ShadowSummary {
            seq: s.seq,
            status: match (s.closed_at, s.promoted_version) {
                (None, _) => "being evaluated".to_owned(),
                (Some(_), Some(ver)) => format!("promoted to version {ver}"),
                (Some(_), None) => "replaced".to_owned(),
            },
            stored_by: reveal_invisible(&s.stored_by, false),
            stored_at: s.stored_at.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
            live_version: s
                .live_version
                .map_or_else(|| "-".to_owned(), |x| x.to_string()),
            evaluated: r.evaluated,
            agreed: r.agreed,
            flipped: r.evaluated - r.agreed,
            flips: r
                .flips
                .iter()
                .map(|f| ShadowFlipRow {
                    direction: f.direction,
                    from: f.from.as_str(),
                    to: f.to.as_str(),
                    rule: f.rule.clone(),
                    count: f.count,
                    examples: f
                        .examples
                        .iter()
                        .map(|e| ShadowExample {
                            proposal_id: e.proposal_id.to_string(),
                            action: reveal_invisible(&e.action, false),
                            live_rule: e.live_rule.clone(),
                        })
                        .collect(),
                })
                .collect(),
        }
    });
    Ok(render(&ShadowPage {
        chrome: v.chrome(),
        admin_tenants,
        tenant,
        report,
    }))
}

/// `GET /admin/agents[?tenant=T]`: the tenant's agents, each live one with a Revoke button.
pub(crate) async fn agents(
    State(state): State<AppState>,
    headers: HeaderMap,
    uri: Uri,
    Query(q): Query<TenantQuery>,
) -> WebResult<Response> {
    let v = require_viewer(&state, &headers, &path_and_query(&uri)).await?;
    let client = state.db.client().await?;
    let (admin_tenants, tenant) = admin_tenant(&state, &v, &client, &q).await?;
    drop(client);
    let when = |t: chrono::DateTime<chrono::Utc>| t.format("%Y-%m-%d %H:%M UTC").to_string();
    let rows = actiond_store::agents::list(&state.db, &tenant)
        .await?
        .into_iter()
        .map(|a| AgentAdminRow {
            id: a.id.to_string(),
            name: reveal_invisible(&a.name, false),
            owner: reveal_invisible(a.owner_subject.as_deref().unwrap_or(""), false),
            created: when(a.created_at),
            frozen: a.frozen_at.is_some(),
            revoked: a.revoked_at.map(when).unwrap_or_default(),
        })
        .collect();
    let notice = match q.result.as_deref() {
        Some("revoked") => {
            "The agent was revoked: its open requests were denied, an approved one will not run, and its credentials no longer work."
        }
        Some("already-revoked") => "That agent was already revoked; nothing changed.",
        _ => "",
    };
    Ok(render(&AgentsPage {
        chrome: v.chrome(),
        admin_tenants,
        tenant,
        rows,
        notice: notice.to_owned(),
    }))
}

/// `POST /admin/agents/{id}/revoke` (form: `csrf`, `tenant`): an admin of that tenant only
/// (anyone else: 403; an agent of another tenant: 404). Same store function as the CLI
/// ([`actiond_store::agents::revoke`]), audited as `approver:SUBJECT`.
pub(crate) async fn revoke(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(agent): Path<String>,
    body: Bytes,
) -> WebResult<Response> {
    let form = parse_form(&body)?;
    let v = require_post(&state, &headers, form.get("csrf").map(String::as_str)).await?;
    let agent = Uuid::parse_str(&agent)
        .map_err(|_| WebError::BadRequest("agent id: must be a UUID".into()))?;
    let Some(asked) = form.get("tenant").filter(|t| !t.trim().is_empty()) else {
        return Err(WebError::BadRequest(
            "tenant: required, the agent's tenant".into(),
        ));
    };
    let client = state.db.client().await?;
    let docs = state.docs.latest_of_every_tenant(&client).await?;
    drop(client);
    let admin_of = crate::authz::admin_tenants(
        &docs,
        state.person_issuer(),
        &v.issuer,
        &v.subject,
        &v.claims,
    );
    let tenant = asked.trim().to_owned();
    if !admin_of.contains(&tenant) {
        // An approver of the tenant learns why; anyone else sees no such tenant.
        return Err(if v.tenants.contains(&tenant) {
            WebError::Forbidden(
                "agent: only a tenant admin (the tenant document's admins) may revoke an agent; nothing was done.".into(),
            )
        } else {
            WebError::NotFound
        });
    }
    let result = match actiond_store::agents::get(&state.db, &tenant, agent).await? {
        None => return Err(WebError::NotFound),
        Some(a) if a.revoked_at.is_some() => "already-revoked",
        Some(_) => {
            let by = format!("approver:{}", v.subject);
            match actiond_store::agents::revoke(
                &state.db,
                &tenant,
                actiond_store::agents::AgentRef::Id(agent),
                &by,
            )
            .await?
            {
                Some((name, denied)) => {
                    tracing::info!(%agent, %tenant, name = %name, subject = %v.subject, denied, "agent revoked from the web");
                    "revoked"
                }
                None => "already-revoked",
            }
        }
    };
    let to = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("tenant", &tenant)
        .append_pair("result", result)
        .finish();
    Ok((
        StatusCode::SEE_OTHER,
        [(header::LOCATION, format!("/admin/agents?{to}"))],
    )
        .into_response())
}
