//! What the queue and the history share: their template ([`QueuePage`]), their filters
//! ([`Filters`]) and keyset cursors, and the risky values of a row in plain words.

use crate::card;
use crate::error::{WebError, WebResult};
use crate::pages::chrome::{Chrome, short};
use crate::session::Viewer;
use actiond_core::handlers::HandlerKind;
use actiond_core::text::reveal_invisible;
use askama::Template;
use axum::http::Uri;
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

/// One risky value shown in the queue.
#[derive(Debug, Clone)]
pub(crate) struct RiskyValue {
    pub(crate) name: String,
    pub(crate) value: String,
}

/// One row of the queue or the history.
#[derive(Debug, Clone)]
pub(crate) struct QueueRow {
    pub(crate) id: String,
    pub(crate) tenant: String,
    pub(crate) age: String,
    pub(crate) sentence: String,
    pub(crate) action: String,
    pub(crate) agent: String,
    pub(crate) risky: Vec<RiskyValue>,
    pub(crate) state: String,
    pub(crate) decided: String,
    /// Triage flags: (css class, text), e.g. ("inj", "injection: gives orders").
    pub(crate) flags: Vec<(&'static str, String)>,
    /// The one clock of the row (queue only): "expires in 3 h 10 min", or the open stage's
    /// "stage 1 ends in 12 min" when that comes first.
    pub(crate) left: String,
    /// Seconds until the escalation TTL runs out (queue only; `None` without the document).
    pub(crate) ttl_left: Option<i64>,
    /// Sort key: more flags first.
    pub(crate) risk: usize,
    /// The open approval stage and who is next ("stage 1 of 2: team-leads, 0 of 1 needed,
    /// 12 min left · next: finance"); empty without stages.
    pub(crate) stage: String,
}

/// `/queue` and `/history`.
#[derive(Template)]
#[template(path = "queue.html")]
pub(crate) struct QueuePage {
    pub(crate) chrome: Chrome,
    pub(crate) history: bool,
    pub(crate) rows: Vec<QueueRow>,
    pub(crate) my_tenants: Vec<String>,
    pub(crate) f_tenant: String,
    /// The tenant filter names a tenant this person does not approve for.
    pub(crate) f_tenant_not_mine: bool,
    pub(crate) f_agent: String,
    pub(crate) f_action: String,
    /// Rows the filters match on every page (the queue; the history shows `rows.len()`).
    pub(crate) total: i64,
    /// "41–60 of 75" when the queue has more than one page, else empty.
    pub(crate) page_range: String,
    /// Link to the next page (`/queue?…&after=…`), empty on the last page.
    pub(crate) next_href: String,
    /// Link to the first page with the same filters, empty on the first page.
    pub(crate) first_href: String,
}

/// Filters of the queue and history ([`Filters::parse`]).
#[derive(Debug, Default)]
pub(crate) struct Filters {
    pub(crate) tenant: Option<String>,
    pub(crate) agent: Option<String>,
    pub(crate) action: Option<String>,
    /// The keyset cursor of the queue (`parse_after`) or the history (`parse_cursor`).
    pub(crate) after: Option<String>,
}

/// The query parameters `/queue` and `/history` take.
const LIST_PARAMS: [&str; 4] = ["tenant", "agent", "action", "after"];

impl Filters {
    /// The filters of a `/queue` or `/history` query. A parameter the pages do not take, or
    /// one given twice, is a 400 naming it (at most 64 characters of it, invisible characters
    /// shown): a misspelt `?stat=denied` must not pass as "no filter" and list everything.
    pub(crate) fn parse(uri: &Uri) -> WebResult<Self> {
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

/// The trimmed value of a filter, `None` when it is missing or blank.
pub(crate) fn nonempty(s: &Option<String>) -> Option<String> {
    s.as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// The tenants the queue or history lists: the one the filter names, or all of the person's
/// when it names none — or names one they do not approve for (or that does not exist): then
/// the page says so above the full list, instead of claiming that nothing waits.
pub(crate) fn selected_tenants(v: &Viewer, f: &Filters) -> Vec<String> {
    match nonempty(&f.tenant) {
        Some(t) if v.tenants.contains(&t) => vec![t],
        _ => v.tenants.clone(),
    }
}

/// Parses an `after` cursor, `<microseconds since the epoch>.<id>` as a Next link writes it
/// (`list`: "queue" or "history", for the message). Errors: 400 naming the field.
pub(crate) fn parse_cursor(s: &str, list: &str) -> WebResult<(DateTime<Utc>, Uuid)> {
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

/// `path?…` with the filters of `f` (those that are set) and, when given, the `after` cursor.
pub(crate) fn list_href(path: &str, f: &Filters, after: Option<(DateTime<Utc>, Uuid)>) -> String {
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

/// The risky values of a queue row in plain words: money as "120.00 USD", a webhook body as
/// "30 email addresses, 3 shown: … — to hooks.partner.example — external", anything else
/// shortened to one line.
pub(crate) fn risky_values(
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
