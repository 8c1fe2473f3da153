//! `GET /history`: decided proposals that went to people, most recently decided first.

use crate::AppState;
use crate::describe::describe;
use crate::error::WebResult;
use crate::pages::chrome::{human_age, path_and_query, render, short};
use crate::pages::list::{
    Filters, QueuePage, QueueRow, list_href, nonempty, parse_cursor, risky_values, selected_tenants,
};
use crate::session::require_viewer;
use actiond_core::text::reveal_invisible;
use actiond_store::queue_views::{self, Filter};
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use serde_json::Value;

/// Rows per history page.
const HISTORY_PAGE: i64 = 100;

/// The history's total as shown: the count stops past `HISTORY_COUNT_CAP` (reading a long
/// history whole on every page would cost as much as the history).
fn history_total(total: i64) -> String {
    if total > queue_views::HISTORY_COUNT_CAP {
        format!("more than {}", queue_views::HISTORY_COUNT_CAP)
    } else {
        total.to_string()
    }
}

/// `GET /history`: proposals that went to people and are decided, newest first by
/// `(updated_at, id)` in pages of [`HISTORY_PAGE`], `?after=` the last row of the previous
/// page (keyset paging, like the queue).
pub(crate) async fn history(
    State(state): State<AppState>,
    headers: HeaderMap,
    uri: Uri,
) -> WebResult<Response> {
    let v = require_viewer(&state, &headers, &path_and_query(&uri)).await?;
    let f = Filters::parse(&uri)?;
    let after = nonempty(&f.after)
        .map(|a| parse_cursor(&a, "history"))
        .transpose()?
        .map(|(updated_at, id)| queue_views::HistoryAfter { updated_at, id });
    let tenants = selected_tenants(&v, &f);
    let agent = nonempty(&f.agent);
    let action = nonempty(&f.action);
    let filter = Filter {
        agent: agent.as_deref(),
        action: action.as_deref(),
    };
    let page = queue_views::decided_page(&state.db, &tenants, filter, after, HISTORY_PAGE).await?;
    let next_href = match page.rows.last() {
        Some(r) if page.more => list_href("/history", &f, Some((r.updated_at, r.id))),
        _ => String::new(),
    };
    let c = state.db.client().await?;
    let now = actiond_runtime::clock::now_utc();
    let mut out = Vec::new();
    for r in page.rows {
        let doc = match r.doc_version {
            Some(ver) => state.docs.version_of(&c, &r.tenant_id, ver).await?,
            None => None,
        };
        let params: Value = serde_json::from_str(&r.params_json).unwrap_or(Value::Null);
        let d = describe(doc.as_deref(), &r.action, &params, &r.target);
        let by = r.decided_by.unwrap_or_else(|| "no person (expired)".into());
        out.push(QueueRow {
            id: r.id.to_string(),
            age: format!("{} ago", human_age((now - r.updated_at).num_seconds())),
            tenant: r.tenant_id,
            sentence: d.sentence,
            action: reveal_invisible(&r.action, false),
            agent: reveal_invisible(&r.agent_name, false),
            risky: risky_values(&params, &d.risky, d.kind, &r.target),
            state: r.state,
            decided: reveal_invisible(&by, false),
            flags: Vec::new(),
            left: String::new(),
            ttl_left: None,
            risk: 0,
            stage: String::new(),
        });
    }
    let paged = after.is_some() || !next_href.is_empty();
    Ok(render(&QueuePage {
        chrome: v.chrome(),
        history: true,
        total: page.total,
        page_range: if paged {
            format!(
                "Showing {} of {}: pages of {HISTORY_PAGE}, most recently decided first.",
                out.len(),
                history_total(page.total)
            )
        } else {
            String::new()
        },
        next_href,
        first_href: if after.is_some() {
            list_href("/history", &f, None)
        } else {
            String::new()
        },
        rows: out,
        my_tenants: v.tenants.clone(),
        f_tenant: nonempty(&f.tenant)
            .map(|t| short(reveal_invisible(&t, false), 64))
            .unwrap_or_default(),
        f_tenant_not_mine: nonempty(&f.tenant).is_some_and(|t| !v.tenants.contains(&t)),
        f_agent: agent.unwrap_or_default(),
        f_action: action.unwrap_or_default(),
    }))
}
