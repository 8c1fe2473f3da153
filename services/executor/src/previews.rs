//! Previews for approvers. The executor is the only credential holder, so it reads the
//! provider for each escalated proposal, read-only, and stores what it saw beside the proposal
//! (`proposal_previews`): the DNS record set as it is now, the payment's amount and what was
//! already refunded, the rows a named statement would touch (counted in a transaction that is
//! rolled back), the rendered email. A preview never changes a decision or a grant; one that
//! fails is stored as unavailable, with the reason.

use crate::Worker;
use crate::handlers::{Execution, db, dns};
use actiond_core::handlers::{HandlerKind, email, format_minor_units};
use actiond_store::previews::{self, PreviewTask};
use serde_json::Value;
use std::time::Duration;

/// Actions that have a preview (`webhook.post` has nothing to read).
pub const PREVIEWED: [&str; 4] = [
    "dns.record.update",
    "billing.refund.issue",
    "db.statement.execute",
    "email.send",
];

/// Longest time one preview may take.
const PREVIEW_TIMEOUT: Duration = Duration::from_secs(5);

/// Builds and stores previews until `stop` turns true, checking every `every`.
pub async fn run(
    worker: std::sync::Arc<Worker>,
    every: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        if *stop.borrow() {
            return;
        }
        if let Err(e) = round(&worker).await {
            tracing::warn!(error = %e, "preview round failed");
        }
        tokio::select! {
            () = actiond_runtime::clock::sleep(every) => {},
            _ = stop.changed() => {},
        }
    }
}

/// One round: previews for up to 8 escalated proposals that have none.
pub async fn round(w: &Worker) -> anyhow::Result<usize> {
    let tasks = previews::pending(&w.db, &PREVIEWED, 8).await?;
    for t in &tasks {
        let (ok, text) = match tokio::time::timeout(PREVIEW_TIMEOUT, build(w, t)).await {
            Ok(Ok(text)) => (true, text),
            Ok(Err(reason)) => (false, reason),
            Err(_) => (
                false,
                format!("the provider did not answer within {PREVIEW_TIMEOUT:?}"),
            ),
        };
        if !ok {
            tracing::info!(proposal = %t.id, reason = %text, "preview unavailable");
        }
        previews::insert(&w.db, t, ok, &text).await?;
    }
    Ok(tasks.len())
}

/// The preview text of one proposal, or why there is none.
async fn build(w: &Worker, t: &PreviewTask) -> Result<String, String> {
    let client = w.db.client().await.map_err(|e| e.to_string())?;
    let doc = w
        .cache
        .version(&client, &t.tenant_id, t.doc_version)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("the tenant document version that escalated it is missing")?;
    drop(client);
    let entry = doc
        .doc
        .handler(&t.action)
        .cloned()
        .ok_or("the action is not enabled in that document version")?;
    let params: Value = serde_json::from_str(&t.params_json).map_err(|e| e.to_string())?;
    let ex = Execution {
        tenant: &t.tenant_id,
        proposal_id: t.id,
        grant_id: uuid::Uuid::nil(),
        params: &params,
        settings: &entry.settings,
        credentials: &w.credentials,
        http: &w.http,
        destinations: &w.destinations,
        timeout: PREVIEW_TIMEOUT,
    };
    match entry.kind {
        HandlerKind::DnsRecordUpdate => dns_preview(&ex).await,
        HandlerKind::BillingRefundIssue => refund_preview(&ex).await,
        HandlerKind::DbStatementExecute => db_preview(&ex).await,
        HandlerKind::EmailSend => email_preview(&ex),
        HandlerKind::WebhookPost => Err("webhook.post has no preview".into()),
    }
}

/// `www.prod.example.com A: 192.0.2.7 → 203.0.113.9` (TTL too when it changes).
async fn dns_preview(ex: &Execution<'_>) -> Result<String, String> {
    let p = ex.params;
    let name = p.get("name").and_then(Value::as_str).unwrap_or_default();
    let rtype = p.get("type").and_then(Value::as_str).unwrap_or_default();
    let ttl = p.get("ttl").and_then(Value::as_i64).unwrap_or(3600);
    let mut new: Vec<String> = p
        .get("records")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(|r| dns::content(rtype, r))
                .collect()
        })
        .unwrap_or_default();
    new.sort();
    let (old_ttl, old) = match dns::current(ex).await? {
        Some((t, recs)) => (Some(t), recs.join(", ")),
        None => (None, "(no records)".to_owned()),
    };
    let mut line = format!("{name} {rtype}: {old} → {}", new.join(", "));
    if old_ttl.is_some_and(|t| t != ttl) {
        line.push_str(&format!(" (TTL {}s → {ttl}s)", old_ttl.unwrap_or_default()));
    }
    if old_ttl.is_some() && old == new.join(", ") {
        line.push_str(" (records unchanged)");
    }
    Ok(line)
}

/// The payment's amount and what was already refunded (`GET /v1/payment_intents/{id}` with
/// its latest charge expanded), beside this refund.
async fn refund_preview(ex: &Execution<'_>) -> Result<String, String> {
    let base = ex
        .destinations
        .billing_base_url
        .as_ref()
        .ok_or("no billing provider is configured on this executor")?;
    let p = ex.params;
    let payment = p
        .get("payment_id")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut url = base
        .join(&format!("v1/payment_intents/{payment}"))
        .map_err(|_| "bad billing base URL")?;
    url.query_pairs_mut()
        .append_pair("expand[]", "latest_charge");
    let key = crate::handlers::credential(ex)
        .map_err(|o| o.detail().to_owned())?
        .ok_or("billing.refund.issue needs a credential")?;
    let resp = ex
        .http
        .get(url)
        .bearer_auth(key)
        .send()
        .await
        .map_err(|e| format!("could not reach the billing API: {e}"))?;
    let status = resp.status().as_u16();
    let v: Value = resp.json().await.unwrap_or(Value::Null);
    let (Some(amount), Some(currency)) = (
        v.get("amount").and_then(Value::as_i64),
        v.get("currency").and_then(Value::as_str),
    ) else {
        return Err(format!(
            "the billing API answered HTTP {status} without the payment's amount and currency"
        ));
    };
    let cur = currency.to_ascii_uppercase();
    let refunded = v
        .pointer("/latest_charge/amount_refunded")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let this = p.get("amount").and_then(Value::as_i64).unwrap_or_default();
    let money = |n: i64| format!("{} {cur}", format_minor_units(n, &cur));
    Ok(format!(
        "Payment {payment}: {} paid, {} already refunded; this refund of {} would leave {}",
        money(amount),
        money(refunded),
        money(this),
        money(amount - refunded - this)
    ))
}

/// The rows the statement would touch now, counted in a transaction that is rolled back.
async fn db_preview(ex: &Execution<'_>) -> Result<String, String> {
    let name = ex
        .params
        .get("statement")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match db::run(ex, false).await {
        Ok(db::Run::Rows(n)) => Ok(format!(
            "Statement {name} would touch {n} row(s) now (counted in a transaction that was rolled back)"
        )),
        Ok(db::Run::OverCap { rows, cap }) => Ok(format!(
            "Statement {name} would touch {rows} rows now, over its cap of {cap}: it would fail and be rolled back"
        )),
        Err(o) => Err(o.detail().to_owned()),
    }
}

/// The email as it would be sent.
fn email_preview(ex: &Execution<'_>) -> Result<String, String> {
    let m = email::render(ex.params, ex.settings).ok_or("the template is missing")?;
    Ok(format!(
        "From: {}\nTo: {}\nSubject: {}\n\n{}",
        m.from,
        m.to.join(", "),
        m.subject,
        m.body
    ))
}
