//! Previews of escalated proposals (table `proposal_previews`, migrations V9 and V42): written
//! once by the executor, read by the approval page and the operator CLI. A person's decision
//! binds the stored preview: its grant signs the preview's hash ([`sha256_for_decision`]), and
//! before running, the executor compares the provider's state with the preview's binding fields
//! ([`for_run`]); when they differ the proposal ends `stale` ([`mark_stale`]).

use crate::proposals::ProposalRow;
use crate::{Db, Result, audit, set_tenants};
use actiond_core::audit::AuditKind;
use actiond_core::preview::PreviewDoc;
use actiond_core::state::ProposalState;
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

/// An escalated proposal that has no preview yet.
#[derive(Debug, Clone)]
pub struct PreviewTask {
    /// Proposal id.
    pub id: Uuid,
    /// Tenant.
    pub tenant_id: String,
    /// Action name.
    pub action: String,
    /// Canonical params.
    pub params_json: String,
    /// The tenant document version that escalated it (its handler settings are used).
    pub doc_version: i32,
    /// The facts its handler computed at submission (`proposal_facts`), whose warnings join
    /// the preview's.
    pub facts: Option<Value>,
}

/// A stored preview.
#[derive(Debug, Clone)]
pub struct Preview {
    /// False when the provider could not be read ("preview unavailable").
    pub ok: bool,
    /// The lines for the approver, or why the preview is unavailable.
    pub text: String,
    /// When the provider was read (database clock).
    pub read_at: DateTime<Utc>,
    /// The handler's warnings ("this refund is larger than what is left to refund"), for the
    /// card and the queue.
    pub warnings: Vec<String>,
    /// SHA-256 of the canonical preview document (what a person's grant signs); `None` for an
    /// unavailable preview or one stored before V42.
    pub sha256: Option<String>,
}

/// What the handler's preview read: the lines, its binding fields and its warnings.
#[derive(Debug, Clone, Default)]
pub struct Read {
    /// The lines for the approver.
    pub text: String,
    /// The binding fields (an object), compared before the run.
    pub binding: Value,
    /// Warnings in plain words.
    pub warnings: Vec<String>,
}

/// Up to `limit` escalated proposals of `actions` without a preview, oldest first
/// (executor role).
pub async fn pending(db: &Db, actions: &[&str], limit: i64) -> Result<Vec<PreviewTask>> {
    let c = db.client().await?;
    let rows = c
        .query(
            "SELECT p.id, p.tenant_id, p.action, p.params_json, p.doc_version,
                    (SELECT f.facts FROM proposal_facts f WHERE f.proposal_id = p.id)
             FROM proposals p
             WHERE p.state = 'escalated' AND p.doc_version IS NOT NULL AND p.action = ANY($1)
               AND NOT EXISTS (SELECT 1 FROM proposal_previews v WHERE v.proposal_id = p.id)
             ORDER BY p.created_at LIMIT $2",
            &[&actions, &limit],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| PreviewTask {
            id: r.get(0),
            tenant_id: r.get(1),
            action: r.get(2),
            params_json: r.get(3),
            doc_version: r.get(4),
            facts: r.get(5),
        })
        .collect())
}

/// Stores a preview (once: a second writer's row is ignored). Executor role. A preview that
/// was read (`Ok`) is stored with its canonical document ([`PreviewDoc`]: the time it was read
/// is the database clock of this statement's transaction) and that document's SHA-256; an
/// unavailable one (`Err(reason)`) has neither, and binds nothing.
pub async fn insert(
    db: &Db,
    task: &PreviewTask,
    read: std::result::Result<Read, String>,
) -> Result<()> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    let now_us: i64 = tx
        .query_one(&format!("SELECT {}", crate::grants::NOW_US_SQL), &[])
        .await?
        .get(0);
    let read_at = DateTime::<Utc>::from_timestamp_micros(now_us)
        .ok_or_else(|| crate::StoreError::Config(format!("database clock {now_us} µs")))?;
    let (ok, text, canonical, sha, binding, warnings) = match read {
        Ok(r) => {
            let (doc, canonical, sha) = document(&task.action, task.id, now_us, r)?;
            (
                true,
                doc.text,
                Some(canonical),
                Some(sha),
                Some(doc.binding),
                doc.warnings,
            )
        }
        Err(reason) => (false, cut(&reason), None, None, None, Vec::new()),
    };
    let warnings = Value::from(warnings);
    tx.execute(
        "INSERT INTO proposal_previews (proposal_id, tenant_id, ok, text, read_at, canonical, sha256, binding, warnings)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
         ON CONFLICT (proposal_id) DO NOTHING",
        &[&task.id, &task.tenant_id, &ok, &text, &read_at, &canonical, &sha, &binding, &warnings],
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// A stored preview's text is cut to this many characters.
fn cut(t: &str) -> String {
    t.chars().take(20_000).collect()
}

/// The canonical preview document of what the handler read for proposal `id` of `action` at
/// `now_us` (database clock), with its canonical text and SHA-256.
fn document(action: &str, id: Uuid, now_us: i64, r: Read) -> Result<(PreviewDoc, String, String)> {
    let doc = PreviewDoc {
        action: action.to_owned(),
        proposal_id: id,
        read_at_us: now_us,
        text: cut(&r.text),
        binding: r.binding,
        warnings: r.warnings,
    };
    let canonical = doc
        .canonical()
        .map_err(|e| crate::StoreError::Config(format!("preview binding: {e}")))?;
    let sha = actiond_core::preview::hash(&canonical);
    Ok((doc, canonical, sha))
}

/// The SHA-256 of proposal `id`'s stored preview, when one was read (a person's decision
/// signs it into the grant). Inside the decision's transaction (tenant already set).
pub async fn sha256_for_decision(tx: &crate::Tx<'_>, id: Uuid) -> Result<Option<String>> {
    let stmt = tx
        .prepare_cached("SELECT sha256 FROM proposal_previews WHERE proposal_id = $1 AND ok")
        .await?;
    Ok(tx
        .query_opt(&stmt, &[&id])
        .await?
        .and_then(|r| r.get::<_, Option<String>>(0)))
}

/// The stored preview document of proposal `id` as the executor checks it before a run: the
/// canonical text (whose hash must be the grant's) parsed back. `None` when there is none.
/// Executor role.
pub async fn for_run(db: &Db, id: Uuid) -> Result<Option<(String, PreviewDoc)>> {
    let c = db.client().await?;
    let stmt = c
        .prepare_cached("SELECT canonical FROM proposal_previews WHERE proposal_id = $1")
        .await?;
    let Some(canonical) = c
        .query_opt(&stmt, &[&id])
        .await?
        .and_then(|r| r.get::<_, Option<String>>(0))
    else {
        return Ok(None);
    };
    let doc: PreviewDoc = serde_json::from_str(&canonical)
        .map_err(|e| crate::StoreError::Config(format!("stored preview of {id}: {e}")))?;
    Ok(Some((canonical, doc)))
}

/// Ends a proposal `stale` (`executing → stale`) instead of running it: `detail` is the
/// `proposal.stale` event's detail (the changed fields with their values, the approved
/// preview's hash); `reason`, what its agent is told, goes with it where outcomes go
/// (`outcome_detail`, as the detail's `reason` member: [`STALE_REASON_KEY`]). The approver's
/// `decision_reason` is kept. Only while `owner` still holds its run lease; `false` when it
/// does not (the sweeper decides).
pub async fn mark_stale(
    db: &Db,
    row: &ProposalRow,
    owner: &str,
    reason: &str,
    detail: Value,
) -> Result<bool> {
    let mut outcome = detail.clone();
    if let Some(o) = outcome.as_object_mut() {
        o.insert(STALE_REASON_KEY.to_owned(), Value::from(reason));
    }
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    let n = tx
        .execute(
            "UPDATE proposals SET state = 'stale', outcome_detail = $2,
                    finished_at = greatest(now(), updated_at), lease_owner = NULL, lease_until = NULL
             WHERE id = $1 AND state = 'executing' AND lease_owner = $3",
            &[&row.id, &outcome.to_string(), &owner],
        )
        .await?;
    if n == 0 {
        return Ok(false);
    }
    let actor = format!("executor:{owner}");
    audit::write(
        &tx,
        &row.event(AuditKind::ProposalStale, &actor, detail)
            .transition(Some(ProposalState::Executing), ProposalState::Stale),
    )
    .await?;
    tx.commit().await?;
    Ok(true)
}

/// Sends a proposal whose run found the provider changed back to the approvers instead of
/// ending it `stale` (its handler's `on_stale: reapprove`, V45), in one transaction by the
/// database clock: the grant this run spent is void (never spendable again), `fresh` (what
/// the provider holds now) replaces the stored preview, and the proposal moves `executing →
/// escalated` with its approvals void (`approval_round` + 1) and `reason` as its
/// `decision_reason` (what its agent and the approvers read), with a `proposal.reescalated`
/// event (`detail`, the fresh preview's hash and the void grant). The database refuses the
/// move unless all of that holds (sql/functions/proposals_check_update.sql). Only while
/// `owner` still holds its run lease; `false` (nothing written) when it does not.
pub async fn reescalate(
    db: &Db,
    row: &ProposalRow,
    owner: &str,
    reason: &str,
    detail: Value,
    fresh: Read,
) -> Result<bool> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    let held = tx
        .query_opt(
            "SELECT approval_round FROM proposals WHERE id = $1 AND state = 'executing' AND lease_owner = $2 FOR UPDATE",
            &[&row.id, &owner],
        )
        .await?;
    let Some(held) = held else {
        return Ok(false);
    };
    let round: i32 = held.get(0);
    let voided: Vec<Uuid> = tx
        .query(
            "UPDATE grants SET voided_at = now()
             WHERE proposal_id = $1 AND voided_at IS NULL AND used_at IS NOT NULL RETURNING id",
            &[&row.id],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let now_us: i64 = tx
        .query_one(&format!("SELECT {}", crate::grants::NOW_US_SQL), &[])
        .await?
        .get(0);
    let (doc, canonical, sha) = document(&row.action, row.id, now_us, fresh)?;
    let warnings = Value::from(doc.warnings);
    tx.execute(
        "UPDATE proposal_previews SET ok = true, text = $2, read_at = now(), canonical = $3, sha256 = $4,
                binding = $5, warnings = $6
         WHERE proposal_id = $1",
        &[&row.id, &doc.text, &canonical, &sha, &doc.binding, &warnings],
    )
    .await?;
    tx.execute(
        "UPDATE proposals SET state = 'escalated', approval_round = approval_round + 1, decision_reason = $2,
                lease_owner = NULL, lease_until = NULL
         WHERE id = $1",
        &[&row.id, &reason],
    )
    .await?;
    let mut detail = detail;
    if let Some(o) = detail.as_object_mut() {
        o.insert("fresh_preview_sha256".into(), Value::from(sha));
        o.insert("voided_grants".into(), serde_json::json!(voided));
        o.insert("approval_round".into(), Value::from(round + 1));
    }
    let actor = format!("executor:{owner}");
    audit::write(
        &tx,
        &row.event(AuditKind::ProposalReescalated, &actor, detail)
            .transition(Some(ProposalState::Executing), ProposalState::Escalated),
    )
    .await?;
    tx.commit().await?;
    Ok(true)
}

/// The member of a `stale` proposal's `outcome_detail` (a JSON object: the `proposal.stale`
/// event's detail) that holds what its agent is told ([`stale_reason_of`]).
pub const STALE_REASON_KEY: &str = "agent_reason";

/// What the agent of a `stale` proposal is told, read from its `outcome_detail`; `None` when
/// it holds none (a row ended `stale` before the reason moved out of `decision_reason`).
pub fn stale_reason_of(outcome_detail: Option<&str>) -> Option<String> {
    let v: Value = serde_json::from_str(outcome_detail?).ok()?;
    v.get(STALE_REASON_KEY)?.as_str().map(str::to_owned)
}

/// The preview of proposal `id`, seen with `tenants` (row-level security scopes the web role).
pub async fn get(db: &Db, tenants: &[String], id: Uuid) -> Result<Option<Preview>> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    set_tenants(&tx, tenants).await?;
    let row = tx
        .query_opt(
            "SELECT ok, text, read_at, warnings, sha256 FROM proposal_previews WHERE proposal_id = $1",
            &[&id],
        )
        .await?;
    tx.commit().await?;
    Ok(row.map(|r| Preview {
        ok: r.get(0),
        text: r.get(1),
        read_at: r.get(2),
        warnings: serde_json::from_value(r.get::<_, Value>(3)).unwrap_or_default(),
        sha256: r.get(4),
    }))
}

/// The warnings of the stored previews of proposals `ids` (those that have some), seen with
/// `tenants`, in one statement: what the queue flags as `⚠ preview: …`.
pub async fn warnings_of(
    db: &Db,
    tenants: &[String],
    ids: &[Uuid],
) -> Result<std::collections::HashMap<Uuid, Vec<String>>> {
    if ids.is_empty() {
        return Ok(std::collections::HashMap::new());
    }
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    set_tenants(&tx, tenants).await?;
    let rows = tx
        .query(
            "SELECT proposal_id, warnings FROM proposal_previews
             WHERE proposal_id = ANY($1) AND jsonb_array_length(warnings) > 0",
            &[&ids],
        )
        .await?;
    tx.commit().await?;
    Ok(rows
        .iter()
        .map(|r| {
            let w: Vec<String> = serde_json::from_value(r.get::<_, Value>(1)).unwrap_or_default();
            (r.get(0), w)
        })
        .filter(|(_, w): &(Uuid, Vec<String>)| !w.is_empty())
        .collect())
}
