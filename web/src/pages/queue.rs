//! `GET /queue`: escalated proposals of the person's tenants, riskiest first within a page.

use crate::AppState;
use crate::card;
use crate::describe::{Described, describe, ttl_left_secs};
use crate::error::WebResult;
use crate::pages::chrome::{human_age, path_and_query, render, short};
use crate::pages::list::{
    Filters, QueuePage, QueueRow, list_href, nonempty, parse_cursor, risky_values, selected_tenants,
};
use crate::session::require_viewer;
use actiond_core::handlers::HandlerKind;
use actiond_core::tenant::TenantDocument;
use actiond_core::text::reveal_invisible;
use actiond_store::queue_views::{self, Filter};
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::{Redirect, Response};
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

/// `GET /`.
pub(crate) async fn root() -> Redirect {
    Redirect::to("/queue")
}

/// Rows per queue page.
const QUEUE_PAGE: i64 = 100;

/// The triage flags of a queue row: injection phrases, the preview's warnings, hidden
/// characters, an amount over the handler's confirm threshold (or its maximum).
fn queue_flags(
    r: &queue_views::ListedProposal,
    params: &Value,
    doc: Option<&TenantDocument>,
    d: &Described,
) -> Vec<(&'static str, String)> {
    let source = r.source_text.as_deref().unwrap_or_default();
    let reason = r.agent_reason.as_deref().unwrap_or_default();
    let f = card::Flags::of(&[source, reason, &r.params_json, &r.target]);
    let mut out = Vec::new();
    let why = f.reasons();
    if !why.is_empty() {
        out.push(("inj", format!("⚠ injection: {}", why.join(", "))));
    }
    if !r.preview_warnings.is_empty() {
        out.push((
            "warn",
            format!("⚠ preview: {}", r.preview_warnings.join("; ")),
        ));
    }
    if f.hidden_count() > 0 {
        let names: Vec<&str> = f.hidden.iter().map(|h| h.1.as_str()).collect();
        out.push((
            "hid",
            format!("⚠ {} hidden: {}", f.hidden_count(), names.join(", ")),
        ));
    }
    if let Some(money) = d.kind.and_then(HandlerKind::money)
        && let Some(amount) = params.get(money.amount).and_then(Value::as_i64)
        && let Some(over) = doc
            .and_then(|doc| doc.handler(&r.action))
            .and_then(|h| h.confirm_over)
        && amount > over
    {
        let cur = params
            .get(money.currency)
            .and_then(Value::as_str)
            .unwrap_or("");
        out.push(("over", format!("▲ over {}", card::money(over, cur))));
    }
    out
}

/// Parses the queue's `after` cursor (`created_at` and id of the previous page's last row).
fn parse_after(s: &str) -> WebResult<queue_views::After> {
    let (created_at, id) = parse_cursor(s, "queue")?;
    Ok(queue_views::After { created_at, id })
}

/// `/queue?…` with the filters of `f` and, when given, `after` (by `created_at`).
fn queue_href(f: &Filters, after: Option<&queue_views::ListedProposal>) -> String {
    list_href("/queue", f, after.map(|r| (r.created_at, r.id)))
}

/// A queue row as the page shows it (its clock without stages; see `queue`).
fn queue_row(
    r: queue_views::ListedProposal,
    doc: Option<&TenantDocument>,
    now: DateTime<Utc>,
) -> QueueRow {
    let params: Value = serde_json::from_str(&r.params_json).unwrap_or(Value::Null);
    let d = describe(doc, &r.action, &params, &r.target);
    let flags = queue_flags(&r, &params, doc, &d);
    let ttl_left = doc.map(|doc| ttl_left_secs(doc, r.created_at, now));
    QueueRow {
        risk: flags.len(),
        flags,
        left: crate::staging::clock(&[], ttl_left).replace(" if nobody decides", ""),
        ttl_left,
        id: r.id.to_string(),
        age: human_age((now - r.created_at).num_seconds()),
        tenant: r.tenant_id,
        sentence: d.sentence,
        action: reveal_invisible(&r.action, false),
        agent: reveal_invisible(&r.agent_name, false),
        risky: risky_values(&params, &d.risky, d.kind, &r.target),
        state: "escalated".into(),
        decided: String::new(),
        stage: String::new(),
    }
}

/// `GET /queue`: escalated proposals of my tenants in pages of [`QUEUE_PAGE`], oldest first
/// by `(created_at, id)` with `?after=` the last row of the previous page (keyset paging:
/// stable while rows come and go); riskiest first within a page.
pub(crate) async fn queue(
    State(state): State<AppState>,
    headers: HeaderMap,
    uri: Uri,
) -> WebResult<Response> {
    let v = require_viewer(&state, &headers, &path_and_query(&uri)).await?;
    let f = Filters::parse(&uri)?;
    let after = nonempty(&f.after).map(|a| parse_after(&a)).transpose()?;
    let tenants = selected_tenants(&v, &f);
    let agent = nonempty(&f.agent);
    let action = nonempty(&f.action);
    let filter = Filter {
        agent: agent.as_deref(),
        action: action.as_deref(),
    };
    let page = queue_views::escalated_page(&state.db, &tenants, filter, after, QUEUE_PAGE).await?;
    let next_href = if page.more {
        queue_href(&f, page.rows.last())
    } else {
        String::new()
    };
    let c = state.db.client().await?;
    let now = actiond_runtime::clock::now_utc();
    let mut rows = Vec::new();
    for r in page.rows {
        let doc = match r.doc_version {
            Some(ver) => state.docs.version_of(&c, &r.tenant_id, ver).await?,
            None => None,
        };
        rows.push(queue_row(r, doc.as_deref(), now));
    }
    let ids: Vec<Uuid> = rows.iter().filter_map(|r| r.id.parse().ok()).collect();
    let staged = actiond_store::stages::of_proposals(&state.db, &tenants, &ids).await?;
    for r in &mut rows {
        if let Some(st) = r.id.parse().ok().and_then(|id: Uuid| staged.get(&id)) {
            let (line, next) = crate::staging::stage_status(st);
            r.stage = format!("{line} · {next}");
            r.left = crate::staging::clock(st, r.ttl_left).replace(" if nobody decides", "");
        }
    }
    // Riskiest first, then oldest (the page comes oldest first; the sort is stable).
    rows.sort_by_key(|r| std::cmp::Reverse(r.risk));
    let paged = after.is_some() || !next_href.is_empty();
    Ok(render(&QueuePage {
        chrome: v.chrome(),
        history: false,
        page_range: if paged {
            format!(
                "Showing {} of {}: pages of {QUEUE_PAGE}, oldest first; riskiest first within a page.",
                rows.len(),
                page.total
            )
        } else {
            String::new()
        },
        rows,
        total: page.total,
        next_href,
        first_href: if after.is_some() {
            queue_href(&f, None)
        } else {
            String::new()
        },
        my_tenants: v.tenants.clone(),
        f_tenant: nonempty(&f.tenant)
            .map(|t| short(reveal_invisible(&t, false), 64))
            .unwrap_or_default(),
        f_tenant_not_mine: nonempty(&f.tenant).is_some_and(|t| !v.tenants.contains(&t)),
        f_agent: agent.unwrap_or_default(),
        f_action: action.unwrap_or_default(),
    }))
}
