//! The pre-run check of a grant bound to a preview (issue 34, point 2).
//!
//! A person's grant signs the hash of the preview stored beside the proposal when they
//! decided (`GrantClaims::preview_sha256`). After the spend and before the handler runs, the
//! executor:
//! 1. loads the stored preview document and checks that its SHA-256 is the grant's (the grant's
//!    own signature was verified at the claim, so the hash is the one the person approved);
//! 2. reads the provider again with the handler's own preview function, the one that built the
//!    approver's preview;
//! 3. compares the handler's binding fields ([`actiond_core::preview::changed`]).
//!
//! When any step fails or a binding field changed, the handler does **not** run: the proposal
//! ends `stale` with a `proposal.stale` event naming what changed (values included) and a
//! reason for its agent naming only the fields — or, when a binding field changed and the
//! handler's entry says `on_stale: reapprove`, goes back to `escalated` with the fresh read as
//! its preview and its approvals void (`proposal.reescalated`, [`previews::reescalate`]). The grant was spent by this run and is never
//! spent again. A grant without a preview hash (policy's allow, an action without a preview, a
//! decision made before the preview was read) runs as before.

use crate::Worker;
use crate::handlers::{self, Execution};
use actiond_core::preview::{self, Change, UNCHECKED_REASON};
use actiond_core::tenant::{HandlerEntry, OnStale};
use actiond_store::executor_queue::ClaimedRow;
use actiond_store::grants::StoredGrant;
use actiond_store::previews;
use serde_json::{Value, json};
use std::time::Duration;

/// Longest time the provider read before a run may take.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a bound grant's handler does not run.
#[derive(Debug, Clone)]
pub struct Stale {
    /// What the agent is told (kept in `outcome_detail`; the approver's `decision_reason` stays).
    pub reason: String,
    /// The `proposal.stale` event's detail.
    pub detail: Value,
    /// What the provider holds now, when it was read and a binding field changed (the fresh
    /// preview of `on_stale: reapprove`); `None` when the check itself failed.
    pub fresh: Option<handlers::Read>,
    /// The changed binding fields (empty when the check itself failed).
    pub changes: Vec<Change>,
}

impl Stale {
    fn unchecked(check: &str, bound: &str, why: String) -> Self {
        Self {
            reason: UNCHECKED_REASON.to_owned(),
            detail: json!({"check": check, "preview_sha256": bound, "why": why}),
            fresh: None,
            changes: Vec::new(),
        }
    }
}

/// `Ok` when the handler may run: the grant binds no preview, or every binding field reads
/// as in the preview the person approved. `Err` when it must not (see the module docs).
pub async fn check(
    w: &Worker,
    row: &ClaimedRow,
    grant: &StoredGrant,
    entry: &HandlerEntry,
) -> Result<(), Stale> {
    let Some(bound) = grant.claims.preview_sha256.as_deref() else {
        return Ok(());
    };
    let stored = previews::for_run(&w.db, row.id)
        .await
        .map_err(|e| Stale::unchecked("preview_unreadable", bound, format!("database: {e}")))?;
    let Some((canonical, approved)) = stored.filter(|(c, _)| preview::hash(c) == bound) else {
        tracing::error!(proposal = %row.id, "ALERT: the stored preview is missing or is not the one the grant names; not run");
        return Err(Stale::unchecked(
            "preview_mismatch",
            bound,
            "the stored preview is missing or its SHA-256 is not the grant's".into(),
        ));
    };
    drop(canonical);
    let Some(read) = handlers::handler(entry.kind).preview else {
        return Err(Stale::unchecked(
            "no_preview",
            bound,
            format!("{} has no preview to read again", entry.kind.action()),
        ));
    };
    let params: Value = serde_json::from_str(&row.params_json).unwrap_or(Value::Null);
    let ex = Execution {
        tenant: &row.tenant_id,
        proposal_id: row.id,
        grant_id: grant.claims.id,
        params: &params,
        settings: &entry.settings,
        credentials: &w.credentials,
        http: &w.http,
        destinations: &w.destinations,
        timeout: READ_TIMEOUT,
        reported: None,
    };
    let now = match tokio::time::timeout(READ_TIMEOUT, read(&ex)).await {
        Ok(Ok(now)) => now,
        Ok(Err(why)) => return Err(Stale::unchecked("provider_unreadable", bound, why)),
        Err(_) => {
            return Err(Stale::unchecked(
                "provider_unreadable",
                bound,
                format!("the provider did not answer within {READ_TIMEOUT:?}"),
            ));
        }
    };
    let changes = preview::changed(&approved.binding, &now.binding);
    if changes.is_empty() {
        return Ok(());
    }
    Err(changed(bound, approved.read_at_us, changes, now))
}

/// The stale answer for binding fields that changed.
fn changed(bound: &str, read_at_us: i64, changes: Vec<Change>, now: handlers::Read) -> Stale {
    Stale {
        reason: preview::stale_reason(&changes),
        detail: json!({
            "check": "changed",
            "preview_sha256": bound,
            "preview_read_at_us": read_at_us,
            "changes": changes,
        }),
        fresh: Some(now),
        changes,
    }
}

/// Records `stale` on `row` (`executing → stale`, its `proposal.stale` event) — or, with
/// `on_stale: reapprove` and a fresh read, sends it back to the approvers
/// ([`previews::reescalate`]) — retrying a failed write until `lease_end`; past it the
/// sweeper marks the row `outcome_unknown` (though nothing ran: the event log says so).
pub async fn record(
    w: &Worker,
    row: &ClaimedRow,
    stale: &Stale,
    on_stale: OnStale,
    lease_end: tokio::time::Instant,
) {
    let mut wait = Duration::from_millis(100);
    loop {
        match write(w, row, stale, on_stale).await {
            Ok(true) => {
                tracing::warn!(proposal = %row.id, detail = %stale.detail, ?on_stale, "not run: the provider changed since the approver's preview");
                return;
            }
            Ok(false) => {
                tracing::error!(proposal = %row.id, "lease ran out before stale was recorded; the sweeper marks it outcome_unknown (nothing ran)");
                return;
            }
            Err(e) if tokio::time::Instant::now() + wait < lease_end => {
                tracing::warn!(proposal = %row.id, error = %e, "recording stale failed; retrying");
                actiond_runtime::clock::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(1));
            }
            Err(e) => {
                tracing::error!(proposal = %row.id, error = %e, "ALERT: stale could not be recorded; the sweeper will mark it outcome_unknown (nothing ran)");
                return;
            }
        }
    }
}

/// One attempt of [`record`]. A send-back the database refuses (its rules are stricter than
/// the executor's view, e.g. the document version that escalated the proposal says `end`)
/// ends the proposal `stale` instead; an unavailable database is retried by the caller.
async fn write(
    w: &Worker,
    row: &ClaimedRow,
    stale: &Stale,
    on_stale: OnStale,
) -> actiond_store::Result<bool> {
    if let (Some(fresh), OnStale::Reapprove) = (&stale.fresh, on_stale) {
        let reason = preview::reescalated_reason(&stale.changes);
        match previews::reescalate(
            &w.db,
            row,
            &w.id,
            &reason,
            stale.detail.clone(),
            fresh.clone(),
        )
        .await
        {
            Err(e) if !e.is_unavailable() => {
                tracing::error!(proposal = %row.id, error = %e, "ALERT: the database refused sending it back to the approvers; it ends stale");
            }
            other => return other,
        }
    }
    previews::mark_stale(&w.db, row, &w.id, &stale.reason, stale.detail.clone()).await
}
