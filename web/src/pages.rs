//! The queue, history and decision pages, and the decision POST.
//!
//! A person sees only proposals of tenants whose current document makes them an approver;
//! any other id is a plain 404, on GET and POST alike. The decision goes through
//! `actiond_store::approvals::decide`, which refuses a decision on anything but the intent hash
//! and policy version the page displayed, refuses the agent's owner, counts distinct approvers
//! and issues the grant with this service's `web-…` key.

use crate::AppState;
use crate::card;
use crate::error::{WebError, WebResult};
use crate::session::{Viewer, require_post, require_viewer};
use crate::views::{ApprovalRow, Chrome, DecisionPage, QueuePage, QueueRow, RiskyValue, render};
use actiond_core::approval::{ConfirmField, Retyped};
use actiond_core::handlers::HandlerKind;
use actiond_core::state::ProposalState;
use actiond_core::tenant::TenantDocument;
use actiond_core::text::reveal_invisible;
use actiond_store::approvals::{self, Approver, Decided, Shown, Verdict};
use actiond_store::previews;
use actiond_store::queue_views::{self, Filter};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::collections::HashMap;
use uuid::Uuid;

/// Parses an `application/x-www-form-urlencoded` body whatever its declared content type (the
/// CSRF check must run before any content-type rejection).
///
/// Errors: a field given more than once is a 400 naming it. Our forms send each field once,
/// and reading only the first (or last) of `verdict=deny&verdict=approve` would let what a
/// proxy, a log and the app each think was decided differ.
pub(crate) fn parse_form(body: &[u8]) -> WebResult<HashMap<String, String>> {
    let mut m = HashMap::new();
    for (k, v) in url::form_urlencoded::parse(body) {
        if m.insert(k.to_string(), v.into_owned()).is_some() {
            return Err(WebError::BadRequest(format!(
                "{}: given more than once; each form field is sent once",
                reveal_invisible(&k.chars().take(64).collect::<String>(), false)
            )));
        }
    }
    Ok(m)
}

/// The signed-in header of `v`'s pages.
pub(crate) fn chrome(v: &Viewer) -> Chrome {
    let who = v
        .name
        .clone()
        .or_else(|| v.email.clone())
        .unwrap_or_else(|| v.subject.clone());
    Chrome {
        who: reveal_invisible(&who, false),
        subject: reveal_invisible(&v.subject, false),
        tenants: v.tenants.join(", "),
        csrf: v.csrf.clone(),
        dev: v.dev,
        admin: !v.admin_tenants.is_empty(),
    }
}

/// "3 min", "2 h 05 min", "4 d 3 h".
pub(crate) fn human_age(secs: i64) -> String {
    let s = secs.max(0);
    if s < 60 {
        "<1 min".into()
    } else if s < 3600 {
        format!("{} min", s / 60)
    } else if s < 86_400 {
        format!("{} h {:02} min", s / 3600, (s % 3600) / 60)
    } else {
        format!("{} d {} h", s / 86_400, (s % 86_400) / 3600)
    }
}

fn when(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// How a proposal reads: the one-sentence summary (escaped later, invisible characters shown),
/// the risky param names and the handler settings that apply.
pub(crate) struct Described {
    pub(crate) sentence: String,
    pub(crate) risky: Vec<String>,
    pub(crate) kind: Option<HandlerKind>,
    pub(crate) approvals_required: u32,
}

/// Describes a proposal with the tenant document version that escalated it.
pub(crate) fn describe(
    doc: Option<&TenantDocument>,
    action: &str,
    params: &Value,
    target: &str,
) -> Described {
    let entry = doc.and_then(|d| d.handler(action));
    match HandlerKind::lookup(action) {
        Some(kind) => Described {
            sentence: reveal_invisible(
                &kind.summary(entry.and_then(|e| e.summary.as_deref()), params, target),
                false,
            ),
            risky: entry.map(|e| e.risky.clone()).unwrap_or_else(|| {
                kind.default_risky()
                    .iter()
                    .map(|s| (*s).to_owned())
                    .collect()
            }),
            kind: Some(kind),
            approvals_required: entry.map_or(1, |e| e.approvals_required),
        },
        None => Described {
            sentence: reveal_invisible(&format!("Unknown action {action} on {target}"), false),
            risky: params
                .as_object()
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default(),
            kind: None,
            approvals_required: 1,
        },
    }
}

/// A param value as shown: strings as they are (invisible characters revealed, newlines
/// included), everything else as pretty JSON.
pub(crate) fn show_value(v: &Value) -> String {
    match v {
        Value::String(s) => reveal_invisible(s, false),
        other => reveal_invisible(
            &serde_json::to_string_pretty(other).unwrap_or_default(),
            true,
        ),
    }
}

fn short(s: String, max: usize) -> String {
    if s.chars().count() <= max {
        s
    } else {
        let mut t: String = s.chars().take(max).collect();
        t.push('…');
        t
    }
}

/// `GET /`.
pub(crate) async fn root() -> Redirect {
    Redirect::to("/queue")
}

/// Any other path.
pub(crate) async fn not_found() -> WebError {
    WebError::NotFound
}

/// Filters of the queue and history ([`Filters::parse`]).
#[derive(Debug, Default)]
pub(crate) struct Filters {
    tenant: Option<String>,
    agent: Option<String>,
    action: Option<String>,
    /// The keyset cursor of the queue (`parse_after`) or the history (`parse_cursor`).
    after: Option<String>,
}

/// The query parameters `/queue` and `/history` take.
const LIST_PARAMS: [&str; 4] = ["tenant", "agent", "action", "after"];

impl Filters {
    /// The filters of a `/queue` or `/history` query. A parameter the pages do not take, or
    /// one given twice, is a 400 naming it (at most 64 characters of it, invisible characters
    /// shown): a misspelt `?stat=denied` must not pass as "no filter" and list everything.
    fn parse(uri: &Uri) -> WebResult<Self> {
        let mut f = Filters::default();
        let raw = uri.query().unwrap_or("");
        for (name, value) in url::form_urlencoded::parse(raw.as_bytes()) {
            let shown: String = reveal_invisible(&name, false).chars().take(64).collect();
            let slot = match name.as_ref() {
                "tenant" => &mut f.tenant,
                "agent" => &mut f.agent,
                "action" => &mut f.action,
                "after" => &mut f.after,
                _ => {
                    return Err(WebError::BadRequest(format!(
                        "{shown}: is not a parameter of this page (it takes {})",
                        LIST_PARAMS.join(", ")
                    )));
                }
            };
            if slot.replace(value.into_owned()).is_some() {
                return Err(WebError::BadRequest(format!(
                    "{shown}: must be given at most once"
                )));
            }
        }
        Ok(f)
    }
}

fn nonempty(s: &Option<String>) -> Option<String> {
    s.as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// The tenants the queue or history lists: the one the filter names, or all of the person's
/// when it names none — or names one they do not approve for (or that does not exist): then
/// the page says so above the full list, instead of claiming that nothing waits.
fn selected_tenants(v: &Viewer, f: &Filters) -> Vec<String> {
    match nonempty(&f.tenant) {
        Some(t) if v.tenants.contains(&t) => vec![t],
        _ => v.tenants.clone(),
    }
}

/// The request's path and query, to come back to after a login.
pub(crate) fn path_and_query(uri: &Uri) -> String {
    uri.path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "/queue".into())
}

/// The risky values of a queue row in plain words: money as "120.00 USD", a webhook body as
/// "30 email addresses, 3 shown: … — to hooks.partner.example — external", anything else
/// shortened to one line.
fn risky_values(
    params: &Value,
    risky: &[String],
    kind: Option<HandlerKind>,
    target: &str,
) -> Vec<RiskyValue> {
    risky
        .iter()
        .filter_map(|name| {
            params.get(name).map(|v| {
                let cur = params.get("currency").and_then(Value::as_str);
                let value = match (
                    kind.and_then(|k| k.queue_value(name, params, target)),
                    name.as_str(),
                    v.as_i64(),
                    cur,
                ) {
                    (Some(said), ..) => said,
                    (None, "amount", Some(n), Some(cur)) => card::money(n, cur),
                    _ => short(card::plain_value(v).replace('\n', " "), 80),
                };
                RiskyValue {
                    name: name.clone(),
                    value,
                }
            })
        })
        .collect()
}

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

/// Rows per queue page.
const QUEUE_PAGE: i64 = 100;

/// Rows per history page.
const HISTORY_PAGE: i64 = 100;

/// Parses an `after` cursor, `<microseconds since the epoch>.<id>` as a Next link writes it
/// (`list`: "queue" or "history", for the message). Errors: 400 naming the field.
fn parse_cursor(s: &str, list: &str) -> WebResult<(DateTime<Utc>, Uuid)> {
    let bad = || {
        WebError::BadRequest(format!(
            "after: must be the cursor of the {list}'s Next link (MICROSECONDS.PROPOSAL_ID)"
        ))
    };
    let (micros, id) = s.split_once('.').ok_or_else(bad)?;
    let at = micros
        .parse::<i64>()
        .ok()
        .and_then(DateTime::<Utc>::from_timestamp_micros)
        .ok_or_else(bad)?;
    let id = Uuid::parse_str(id).map_err(|_| bad())?;
    Ok((at, id))
}

/// Parses the queue's `after` cursor (`created_at` and id of the previous page's last row).
fn parse_after(s: &str) -> WebResult<queue_views::After> {
    let (created_at, id) = parse_cursor(s, "queue")?;
    Ok(queue_views::After { created_at, id })
}

/// `path?…` with the filters of `f` (those that are set) and, when given, the `after` cursor.
fn list_href(path: &str, f: &Filters, after: Option<(DateTime<Utc>, Uuid)>) -> String {
    let mut q = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in [
        ("tenant", &f.tenant),
        ("agent", &f.agent),
        ("action", &f.action),
    ] {
        if let Some(v) = nonempty(v) {
            q.append_pair(k, &v);
        }
    }
    if let Some((at, id)) = after {
        q.append_pair("after", &format!("{}.{id}", at.timestamp_micros()));
    }
    let q = q.finish();
    if q.is_empty() {
        path.into()
    } else {
        format!("{path}?{q}")
    }
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
        chrome: chrome(&v),
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
        chrome: chrome(&v),
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

/// Query of the decision page: the outcome of the POST that redirected here.
#[derive(Debug, Default)]
pub(crate) struct DecisionQuery {
    result: Option<String>,
}

impl DecisionQuery {
    /// The query of a `/p/{id}` request. It takes only `result`, at most once; any other
    /// parameter is a 400 naming it (at most 64 characters of it, invisible characters shown),
    /// as on `/queue` and `/history`.
    fn parse(uri: &Uri) -> WebResult<Self> {
        let mut q = DecisionQuery::default();
        let raw = uri.query().unwrap_or("");
        for (name, value) in url::form_urlencoded::parse(raw.as_bytes()) {
            let shown: String = reveal_invisible(&name, false).chars().take(64).collect();
            if name != "result" {
                return Err(WebError::BadRequest(format!(
                    "{shown}: is not a parameter of this page (it takes result)"
                )));
            }
            if q.result.replace(value.into_owned()).is_some() {
                return Err(WebError::BadRequest(format!(
                    "{shown}: must be given at most once"
                )));
            }
        }
        Ok(q)
    }
}

/// The proposal id of a `/p/{id}` path: a malformed one is a 400 naming the field and the rule
/// (a missing or invisible proposal stays a 404).
fn parse_id(id: &str) -> WebResult<Uuid> {
    Uuid::parse_str(id).map_err(|_| WebError::BadRequest("proposal id: must be a UUID".into()))
}

/// The recorded decisions as the decision page lists them.
fn approval_rows(approvals_rows: &[queue_views::ApprovalEntry]) -> Vec<ApprovalRow> {
    approvals_rows
        .iter()
        .map(|r| ApprovalRow {
            subject: reveal_invisible(&r.subject, false),
            email: reveal_invisible(r.email.as_deref().unwrap_or_default(), false),
            decision: match r.decision.as_str() {
                "approve" => "Approved".into(),
                _ => "Denied".into(),
            },
            at: when(r.decided_at),
            channel: r.channel.clone(),
            comment: reveal_invisible(r.comment.as_deref().unwrap_or_default(), false),
            young_passkey: young_passkey(r.passkey_age_secs),
        })
        .collect()
}

/// A passkey registered less than this before it signed an approval is pointed out on the
/// decision page: a passkey registered with a stolen session would be that young.
pub(crate) const YOUNG_PASSKEY_SECS: f64 = 86_400.0;

/// "signed with a passkey registered 2 h 05 min before (less than a day)", or empty for an
/// older key or an approval without a passkey.
fn young_passkey(age_secs: Option<f64>) -> String {
    match age_secs {
        Some(a) if a < YOUNG_PASSKEY_SECS => format!(
            "signed with a passkey registered {} before (less than a day)",
            human_age(a as i64)
        ),
        _ => String::new(),
    }
}

/// Who decided a proposal that is no longer escalated, for the top of its page (reloaded, or
/// reached again by Back after the decision): "Approved by bob (bob@acme.test) at … UTC", the
/// people of the deciding verdict joined with "and"; empty while it is pending or escalated.
fn decided_line(state: ProposalState, rows: &[ApprovalRow]) -> String {
    if matches!(state, ProposalState::Escalated | ProposalState::Pending) {
        return String::new();
    }
    if state == ProposalState::Withdrawn {
        return "Withdrawn by its agent before anyone approved it; nothing ran.".to_owned();
    }
    let after = if state == ProposalState::Stale {
        format!(" {}", actiond_core::preview::STALE_CARD)
    } else {
        String::new()
    };
    let verdict = if state == ProposalState::Denied {
        "Denied"
    } else {
        "Approved"
    };
    let people: Vec<String> = rows
        .iter()
        .filter(|r| r.decision == verdict)
        .map(|r| {
            let email = if r.email.is_empty() {
                String::new()
            } else {
                format!(" ({})", r.email)
            };
            let young = if r.young_passkey.is_empty() {
                String::new()
            } else {
                format!(", {}", r.young_passkey)
            };
            format!("{}{email} at {} via {}{young}", r.subject, r.at, r.channel)
        })
        .collect();
    if people.is_empty() {
        return format!("No person decided this here; it is {state}.{after}");
    }
    format!("{verdict} by {}.{after}", people.join(" and "))
}

/// Quick picks of the Deny reason.
pub(crate) const DENY_REASONS: &[&str] = &[
    "looks injected",
    "wrong amount",
    "not our customer",
    "wrong target",
    "not needed",
    "agent misbehaving",
];

/// What the decision page knows about the agent: frozen, its open escalations, and whether
/// the viewer may freeze it.
#[derive(Debug, Default)]
pub(crate) struct AgentFacts {
    pub(crate) frozen: bool,
    pub(crate) open: i64,
    pub(crate) can_freeze: bool,
    pub(crate) can_unfreeze: bool,
}

/// `GET /p/{id}`: the decision page.
pub(crate) async fn decision(
    State(state): State<AppState>,
    headers: HeaderMap,
    uri: Uri,
    Path(id): Path<String>,
) -> WebResult<Response> {
    let v = require_viewer(&state, &headers, uri.path()).await?;
    let id = parse_id(&id)?;
    let q = DecisionQuery::parse(&uri)?;
    let p = approvals::get(&state.db, Some(&v.tenants), id)
        .await?
        .ok_or(WebError::NotFound)?;
    let approvals_rows = queue_views::approvals_of(&state.db, &p.tenant_id, id).await?;
    let preview = PreviewView::of(previews::get(&state.db, &v.tenants, id).await?);
    let doc = match p.doc_version {
        Some(ver) => {
            let c = state.db.client().await?;
            state.docs.version_of(&c, &p.tenant_id, ver).await?
        }
        None => None,
    };
    let agent = crate::freeze::agent_facts(&state, &v, &p).await?;
    let tenant_wide_passkey = {
        let c = state.db.client().await?;
        state
            .docs
            .latest_of(&c, &p.tenant_id)
            .await?
            .is_some_and(|d| d.approvers.require_passkey)
    };
    let next = if q.result.is_some() {
        next_waiting(&state, &v, id).await?
    } else {
        None
    };
    let mut page = decision_page(
        &state,
        &v,
        &p,
        doc.as_deref(),
        &approvals_rows,
        preview,
        agent,
    );
    {
        let l = actiond_store::approvals::amend::links(&state.db, &p.tenant_id, id).await?;
        if let (Some(from), Some(diff)) = (l.amended_from, &l.diff) {
            page.amended_from = from.to_string();
            page.amended_by = reveal_invisible(l.amended_by.as_deref().unwrap_or_default(), false);
            page.amended_diff = actiond_store::approvals::amend::describe_diff(diff);
        }
        if let Some((to, st)) = l.amended_to {
            page.amended_to = to.to_string();
            page.amended_to_state = st.to_string();
            page.amended_by =
                reveal_invisible(l.amended_to_by.as_deref().unwrap_or_default(), false);
            page.amended_diff = l
                .amended_to_diff
                .as_ref()
                .map(actiond_store::approvals::amend::describe_diff)
                .unwrap_or_default();
        }
    }
    crate::effect_view::fill(&state.db, &v.tenants, id, p.state.as_str(), &mut page).await?;
    page.passkey_needed = passkey_needed(
        doc.as_deref(),
        tenant_wide_passkey,
        &p.action,
        &serde_json::from_str(&p.params_json).unwrap_or(Value::Null),
    );
    page.notice = match q.result.as_deref() {
        Some("approved") => "Approved. A grant was issued; the executor will run the action.",
        Some("denied") => "Denied. Nothing will run; the agent will be told.",
        Some("recorded") => "Your approval is recorded; more approvers are needed.",
        Some("stage-complete") => {
            "Your approval completed its stage; the next stage is open and its approvers are notified."
        }
        Some("already") => "This proposal was already decided: see below who decided and when.",
        Some("amended") => {
            "Your edit is a new proposal (this page). Policy evaluated it; its state and your approval are below."
        }
        Some("frozen") => "Agent frozen: its open requests are denied and new ones are refused.",
        Some("already-frozen") => "This agent was already frozen.",
        Some("unfrozen") => "Agent unfrozen: it may propose again.",
        _ => "",
    }
    .to_owned();
    let staged = actiond_store::stages::of_proposals(&state.db, &v.tenants, &[id]).await?;
    if let Some(st) = staged.get(&id) {
        (page.stage, page.stage_next) = crate::staging::stage_status(st);
        if !page.expires.is_empty() {
            let ttl = doc
                .as_deref()
                .map(|d| ttl_left_secs(d, p.created_at, actiond_runtime::clock::now_utc()));
            page.expires = crate::staging::clock(st, ttl);
        }
    }
    if let Some((href, label)) = next {
        page.next_href = href;
        page.next_label = label;
    }
    Ok(render(&page))
}

/// The oldest other proposal waiting for this person, as a link and its sentence.
async fn next_waiting(
    state: &AppState,
    v: &Viewer,
    after: Uuid,
) -> WebResult<Option<(String, String)>> {
    let list = queue_views::escalated(&state.db, &v.tenants, Filter::default(), 2).await?;
    let Some(r) = list.into_iter().find(|r| r.id != after) else {
        return Ok(None);
    };
    let c = state.db.client().await?;
    let doc = match r.doc_version {
        Some(ver) => state.docs.version_of(&c, &r.tenant_id, ver).await?,
        None => None,
    };
    let params: Value = serde_json::from_str(&r.params_json).unwrap_or(Value::Null);
    let d = describe(doc.as_deref(), &r.action, &params, &r.target);
    Ok(Some((format!("/p/{}", r.id), d.sentence)))
}

/// Builds the decision page of `p` as `v` sees it (notice and next link left empty).
fn decision_page(
    state: &AppState,
    v: &Viewer,
    p: &approvals::ProposalDetail,
    doc: Option<&TenantDocument>,
    approvals_rows: &[queue_views::ApprovalEntry],
    preview: PreviewView,
    agent: AgentFacts,
) -> DecisionPage {
    let PreviewView {
        text: preview,
        note: preview_note,
        sha256: preview_sha256,
        warnings: preview_warnings,
    } = preview;
    let params: Value = serde_json::from_str(&p.params_json).unwrap_or(Value::Null);
    let d = describe(doc, &p.action, &params, &p.target);
    let rule = p.rule_name.clone().unwrap_or_default();
    let hot = card::hot_params(doc, &rule, &d.risky, &params);
    let plain = card::plain_words(d.kind, doc, &p.action, &params, &p.target, &hot, &preview);
    let source = p.source_text.as_deref().unwrap_or_default();
    let reason = p.agent_reason.as_deref().unwrap_or_default();
    let flags = card::Flags::of(&[source, reason, &p.params_json, &p.target]);
    let source_pieces = card::pieces(source);
    let (source_excerpt, source_cut) = card::excerpt(&source_pieces, 220);
    let (reason_pieces, reason_cut) = card::excerpt(&card::pieces(reason), 160);
    let approvals_have = approvals_rows
        .iter()
        .filter(|r| r.decision == "approve")
        .count();
    let already_mine = approvals_rows
        .iter()
        .any(|r| r.subject == v.subject && r.issuer == v.issuer);
    let escalated = p.state == ProposalState::Escalated;
    let now = actiond_runtime::clock::now_utc();
    // The stage's clock replaces this one in `decision` when the stage ends first.
    let expires = match (doc, escalated) {
        (Some(doc), true) => {
            crate::staging::clock(&[], Some(ttl_left_secs(doc, p.created_at, now)))
        }
        _ => String::new(),
    };
    let warning = if doc.is_none() {
        "The tenant document version that escalated this proposal is missing; decide with care."
    } else if d.kind.is_none() {
        "This action is not in the handler registry; it cannot run."
    } else {
        ""
    };
    let confirm = doc
        .and_then(|doc| doc.handler(&p.action))
        .map(|h| actiond_core::approval::confirm_required(&h.confirm, h.confirm_over, &params))
        .unwrap_or_default();
    let reasons = flags.reasons();
    let (params_rows, unset) = crate::params_view::param_rows(&params, &d, &hot);
    DecisionPage {
        editable: d
            .kind
            .filter(|_| escalated)
            .map(|k| editable_fields(k, &params))
            .unwrap_or_default(),
        amended_from: String::new(),
        amended_by: String::new(),
        amended_diff: String::new(),
        amended_to: String::new(),
        amended_to_state: String::new(),
        effect: Vec::new(),
        effect_words: String::new(),
        confirm_amount: confirm.contains(&ConfirmField::Amount),
        confirm_target: confirm.contains(&ConfirmField::Target),
        confirm_currency: reveal_invisible(
            params
                .get("currency")
                .and_then(Value::as_str)
                .unwrap_or_default(),
            false,
        ),
        chrome: chrome(v),
        id: p.id.to_string(),
        tenant: p.tenant_id.clone(),
        sentence: d.sentence.clone(),
        action: reveal_invisible(&p.action, false),
        params: params_rows,
        unset_optional: crate::params_view::unset_line(&unset),
        agent_name: reveal_invisible(&p.agent_name, false),
        on_behalf_of: reveal_invisible(p.on_behalf_of.as_deref().unwrap_or_default(), false),
        agent_owner: reveal_invisible(p.agent_owner.as_deref().unwrap_or_default(), false),
        session: reveal_invisible(p.session_id.as_deref().unwrap_or_default(), false),
        agent_reason: reveal_invisible(reason, true),
        rule_name: rule,
        rule_reason: reveal_invisible(p.decision_reason.as_deref().unwrap_or_default(), false),
        raw_params: reveal_invisible(&p.params_json, false),
        intent_hash: p.intent_hash.clone(),
        doc_version: p.doc_version.unwrap_or_default(),
        state: p.state.to_string(),
        created: when(p.created_at),
        age: human_age((now - p.created_at).num_seconds()),
        expires,
        can_decide: escalated && !already_mine && p.doc_version.is_some(),
        is_owner: p.agent_owner.as_deref() == Some(v.subject.as_str()),
        already_mine: escalated && already_mine,
        decided_by: decided_line(p.state, &approval_rows(approvals_rows)),
        approvals: approval_rows(approvals_rows),
        approvals_required: d.approvals_required,
        approvals_have,
        stage: String::new(),
        stage_next: String::new(),
        notice: String::new(),
        next_href: String::new(),
        next_label: String::new(),
        warning: warning.to_owned(),
        preview,
        preview_note,
        preview_sha256,
        preview_warnings,
        facts: plain.facts,
        approve_label: plain.approve_label,
        banner_reasons: reasons.join(" and "),
        banner_phrases: flags.phrases.iter().map(|(p, _)| p.clone()).collect(),
        hidden_total: flags.hidden_count(),
        hidden: flags.hidden,
        reason_pieces,
        reason_cut,
        source_excerpt,
        source_cut,
        source_pieces,
        deny_reasons: DENY_REASONS,
        shown: state
            .form_clock
            .stamp(p.id, &v.id_sha256, now.timestamp_millis()),
        agent_id: p.agent_id.to_string(),
        agent_frozen: agent.frozen,
        agent_open: agent.open,
        can_freeze: agent.can_freeze,
        can_unfreeze: agent.can_unfreeze,
        // Set by the caller, which knows the tenant's current document.
        passkey_needed: false,
    }
}

/// Whether Approve of `action` with `params` must be signed with a passkey, by the rule the
/// decision itself is checked with (`approvals::decide`): the handler's
/// `require_passkey`/`passkey_over` from `doc`, the version that escalated the proposal (like
/// every handler setting), or `tenant_wide`, the `approvers.require_passkey` of the tenant's
/// *current* document (like who is an approver), so switching it on after an escalation
/// shows the passkey prompt rather than refusing an unsigned Approve.
fn passkey_needed(
    doc: Option<&TenantDocument>,
    tenant_wide: bool,
    action: &str,
    params: &Value,
) -> bool {
    doc.and_then(|doc| {
        doc.handler(action)
            .map(|h| actiond_core::approval::passkey_required(tenant_wide, h, params))
    })
    .unwrap_or(false)
}

/// Seconds until the escalation TTL of `doc` runs out for a proposal created at `created`
/// (negative: past it).
pub(crate) fn ttl_left_secs(
    doc: &TenantDocument,
    created: DateTime<Utc>,
    now: DateTime<Utc>,
) -> i64 {
    let ttl = chrono::Duration::from_std(doc.policy.escalation_ttl).unwrap_or_default();
    (created + ttl - now).num_seconds()
}

/// The preview as the decision page shows it.
#[derive(Debug, Default)]
pub(crate) struct PreviewView {
    /// What the provider held when the executor read it; "preview unavailable"; empty for
    /// actions without previews. Invisible characters made visible.
    text: String,
    /// When it was read and what an approval binds, or why it is unavailable.
    note: String,
    /// The stored preview's SHA-256, sent back with the decision (the form's `preview_sha256`),
    /// empty when none was read: an Approve is refused when the stored one differs.
    sha256: String,
    /// The handler's warnings, shown as a banner.
    warnings: Vec<String>,
}

impl PreviewView {
    /// The view of a stored preview.
    fn of(p: Option<previews::Preview>) -> Self {
        match p {
            Some(p) if p.ok => Self {
                text: reveal_invisible(&p.text, true),
                note: format!(
                    "read {} from the provider; an approval is bound to it: if what it binds changes before the run, nothing runs (stale)",
                    p.read_at.format("%H:%M UTC on %Y-%m-%d")
                ),
                sha256: p.sha256.unwrap_or_default(),
                warnings: p
                    .warnings
                    .iter()
                    .map(|w| reveal_invisible(w, false))
                    .collect(),
            },
            Some(p) => Self {
                text: "preview unavailable".into(),
                note: format!(
                    "{} (tried {})",
                    reveal_invisible(&p.text, false),
                    p.read_at.format("%H:%M UTC")
                ),
                ..Self::default()
            },
            None => Self::default(),
        }
    }
}

/// The comment stored with a Deny: the quick pick and the note, "looks injected: ticket
/// #4411 asks to ignore instructions"; `None` for an Approve or when both are empty.
/// Errors: a `reason` that is neither empty nor one of [`DENY_REASONS`] (a forged form) is a
/// 400 naming `reason` and the allowed values, so nothing is decided on a reason nobody chose.
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
    let note: String = form
        .get("note")
        .map(|s| s.trim())
        .unwrap_or_default()
        .chars()
        .filter(|c| !c.is_control())
        .take(200)
        .collect();
    Ok(match (pick, note.is_empty()) {
        (Some(p), true) => Some(p.to_owned()),
        (Some(p), false) => Some(format!("{p}: {note}")),
        (None, false) => Some(note),
        (None, true) => None,
    })
}

/// The editable params of handler `kind` with their current values as a person types them:
/// a refund's `amount` in major units of its currency (`120.00`), text as it is, anything
/// else as JSON.
fn editable_fields(kind: HandlerKind, params: &Value) -> Vec<(String, String, String)> {
    let currency = params.get("currency").and_then(Value::as_str).unwrap_or("");
    kind.editable()
        .iter()
        .map(|f| {
            let v = params.get(*f).cloned().unwrap_or(Value::Null);
            let (label, shown) = match (kind, *f, &v) {
                (HandlerKind::BillingRefundIssue, "amount", Value::Number(n)) => (
                    format!("amount in {currency}"),
                    actiond_core::handlers::format_minor_units(n.as_i64().unwrap_or(0), currency),
                ),
                (_, _, Value::Null) => ((*f).to_owned(), String::new()),
                (_, _, Value::String(t)) => ((*f).to_owned(), t.clone()),
                (_, _, other) => ((*f).to_owned(), other.to_string()),
            };
            ((*f).to_owned(), label, reveal_invisible(&shown, false))
        })
        .collect()
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

/// `POST /p/{id}/decide`: one click, approve or deny.
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
    let (verdict, intent, doc_version) = decision_fields(&form)?;
    let amending = verdict.is_none();
    let verdict = verdict.unwrap_or(Verdict::Approve);
    let edits = if amending {
        Some(amend_edits(&form, &p)?)
    } else {
        None
    };
    let comment = deny_comment(&form, verdict)?;
    let submitted = match verdict {
        Verdict::Approve => crate::passkey::submitted(&state, &form)?,
        Verdict::Deny => None,
    };
    let approver = Approver {
        issuer: v.issuer.clone(),
        subject: v.subject.clone(),
        email: v.email.clone(),
        channel: "web",
        session: Some(v.times),
        claims: Some(v.claims.clone()),
    };
    let verdict_label = if verdict == Verdict::Approve {
        "approve"
    } else {
        "deny"
    };
    let retyped = Retyped {
        amount: form.get("confirm_amount").cloned(),
        target: form.get("confirm_target").cloned(),
    };
    let seconds = state
        .form_clock
        .seconds(
            form.get("shown").map(String::as_str),
            id,
            &v.id_sha256,
            actiond_runtime::clock::now_utc().timestamp_millis(),
        )
        .map_err(|e| WebError::BadRequest(e.to_string()))?;
    let shown = Shown {
        intent,
        doc_version: Some(doc_version),
        retyped: &retyped,
        seconds_on_page: seconds,
        passkey: submitted.as_ref(),
        preview: form.get("preview_sha256").map(String::as_str),
    };
    if let Some(edits) = edits {
        return amend(&state, &v, &p, &approver, &shown, &edits).await;
    }
    let outcome = approvals::decide(
        &state.db,
        &state.signer,
        &p.tenant_id,
        id,
        &approver,
        verdict,
        &shown,
        comment.as_deref(),
    )
    .await;
    let result = match outcome {
        Ok(Decided::Approved { grant_id }) => {
            tracing::info!(proposal = %id, tenant = %p.tenant_id, %grant_id, subject = %v.subject, "approved");
            // Wake the executors (a hint; they also poll).
            if let Err(e) =
                actiond_store::listen::notify(&state.db, actiond_store::listen::CHANNEL_APPROVED)
                    .await
            {
                tracing::debug!(error = %e.detail(), "NOTIFY failed; executors will poll");
            }
            "approved"
        }
        Ok(Decided::Denied) => {
            tracing::info!(proposal = %id, tenant = %p.tenant_id, subject = %v.subject, "denied");
            "denied"
        }
        Ok(Decided::NeedsMore { .. }) => "recorded",
        Ok(Decided::StageComplete { .. }) => "stage-complete",
        Ok(Decided::AlreadyDecided { .. }) => "already",
        Ok(Decided::Refused(r)) => {
            state
                .metrics
                .decisions
                .with_label_values(&[verdict_label, "refused"])
                .inc();
            return refused(&state, &v, &p.tenant_id, id, r).await;
        }
        Err(actiond_store::StoreError::Conflict(m)) => {
            state
                .metrics
                .decisions
                .with_label_values(&[verdict_label, "refused"])
                .inc();
            return Err(WebError::Conflict(format!("{m}. Nothing was decided.")));
        }
        Err(e) => return Err(e.into()),
    };
    state
        .metrics
        .decisions
        .with_label_values(&[verdict_label, result])
        .inc();
    if result != "already"
        && let Some(secs) = seconds
    {
        state
            .metrics
            .decision_seconds
            .with_label_values(&[&p.tenant_id, verdict_label])
            .observe(secs);
    }
    Ok((
        StatusCode::SEE_OTHER,
        [(header::LOCATION, format!("/p/{id}?result={result}"))],
    )
        .into_response())
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
                let _ = actiond_store::listen::notify(
                    &state.db,
                    actiond_store::listen::CHANNEL_APPROVED,
                )
                .await;
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
