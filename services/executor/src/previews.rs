//! Previews for approvers. The executor is the only credential holder, so it reads the
//! provider for each escalated proposal, read-only, and stores what it saw beside the proposal
//! (`proposal_previews`): the DNS record set as it is now, the payment's amount and what was
//! already refunded, the rows a named statement would touch (counted in a transaction that is
//! rolled back), the rendered email. A person's grant signs the stored preview's hash, and the
//! executor reads the provider again before running it (`crate::prerun`); one that fails is
//! stored as unavailable, with the reason, and binds nothing.

use crate::Worker;
use crate::handlers::{self, Execution};
use actiond_core::handlers::HandlerKind;
use actiond_store::previews::{self, PreviewTask};
use serde_json::Value;
use std::time::Duration;

/// Actions that have a preview (those whose executor entry has one; `webhook.post` has
/// nothing to read).
pub fn previewed() -> Vec<&'static str> {
    HandlerKind::ALL
        .into_iter()
        .filter(|k| handlers::handler(*k).preview.is_some())
        .map(HandlerKind::action)
        .collect()
}

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
    let tasks = previews::pending(&w.db, &previewed(), 8).await?;
    for t in &tasks {
        let read = match tokio::time::timeout(PREVIEW_TIMEOUT, build(w, t)).await {
            Ok(read) => read,
            Err(_) => Err(format!(
                "the provider did not answer within {PREVIEW_TIMEOUT:?}"
            )),
        };
        if let Err(reason) = &read {
            tracing::info!(proposal = %t.id, reason = %reason, "preview unavailable");
        }
        previews::insert(&w.db, t, read).await?;
    }
    Ok(tasks.len())
}

/// The preview of one proposal, or why there is none.
async fn build(w: &Worker, t: &PreviewTask) -> Result<handlers::Read, String> {
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
        reported: None,
    };
    let mut read = match handlers::handler(entry.kind).preview {
        Some(preview) => preview(&ex).await?,
        None => return Err(format!("{} has no preview", entry.kind.action())),
    };
    // What the handler computed at submission (an email to a domain never written to before)
    // is warned as the preview's own findings are.
    read.warnings
        .extend(actiond_core::facts::warnings(t.facts.as_ref()));
    Ok(read)
}
