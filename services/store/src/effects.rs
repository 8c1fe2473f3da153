//! The effect, read back (V43): the `proposal.effect` audit events the executor writes after a
//! run and when it settles an `outcome_unknown` proposal, and their reading for the card, the
//! history and `actiond approvals show`. The events are sealed like every other one; there is
//! no table of their own.

use crate::executor_queue::FINISH_SQL;
use crate::grants::{GRANT_COLUMNS, StoredGrant};
use crate::proposals::{PROPOSAL_COLUMNS, ProposalRow};
use crate::{Db, Result, audit, set_tenants};
use actiond_core::audit::AuditKind;
use actiond_core::effect::EffectRecord;
use actiond_core::state::ProposalState;
use std::time::Duration;
use uuid::Uuid;

/// Records a run's outcome and what was read back, in **one transaction**: the outcome and
/// its `proposal.executed` event exactly as the group commit writes them ([`FINISH_SQL`], for
/// this one row), then the `proposal.effect` event (no transition). Returns false, writing
/// nothing, when the row is no longer `executing` under `owner`'s lease (the sweeper marked it
/// `outcome_unknown`; its own read-back settles it).
pub async fn finish_with_effect(
    db: &Db,
    owner: &str,
    row: &ProposalRow,
    outcome: ProposalState,
    detail: &str,
    effect: &EffectRecord,
) -> Result<bool> {
    let actor = format!("executor:{owner}");
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    let stmt = tx.prepare_cached(&FINISH_SQL).await?;
    let moved = tx
        .query(
            &stmt,
            &[
                &vec![row.id],
                &vec![outcome.as_str()],
                &vec![detail],
                &owner,
                &vec![ProposalState::Executing.as_str()],
                &actor,
            ],
        )
        .await?;
    if moved.is_empty() {
        tx.rollback().await?;
        return Ok(false);
    }
    audit::write(
        &tx,
        &row.event(
            AuditKind::ProposalEffect,
            &actor,
            serde_json::to_value(effect).unwrap_or_default(),
        ),
    )
    .await?;
    tx.commit().await?;
    Ok(true)
}

/// An `outcome_unknown` proposal the sweep may settle: the proposal and its spent grant (whose
/// id was the provider's idempotency key, and whose document version names the settings).
#[derive(Debug, Clone)]
pub struct Unsettled {
    /// The proposal as stored.
    pub proposal: ProposalRow,
    /// Its grant, spent.
    pub grant: StoredGrant,
}

/// Claims up to `limit` `outcome_unknown` proposals of `actions` (those whose handler can read
/// its effect back), not purged, that became `outcome_unknown` more than `older_than` ago (a
/// request cut off by a timeout may still land at the provider meanwhile), oldest first, whose
/// next try (`effect_settle_tries`, V47) is due: the claim sets it `retry` ahead, in one
/// statement, before the provider is asked. `INSERT … ON CONFLICT DO UPDATE … WHERE
/// next_try_at <= now()` serializes on the row: of two executors claiming together, the second
/// waits for the first's commit and then gets nothing, so replicas never ask the same provider
/// together, and a restarted executor waits as the one before it would have.
pub async fn claim_unsettled(
    db: &Db,
    actions: &[&str],
    older_than: Duration,
    retry: Duration,
    limit: i64,
) -> Result<Vec<Unsettled>> {
    let c = db.client().await?;
    let rows = c
        .query(
            &format!(
                "WITH due AS (
                     SELECT p.id, p.tenant_id FROM proposals p
                     JOIN grants g ON g.proposal_id = p.id AND g.voided_at IS NULL
                     LEFT JOIN effect_settle_tries t ON t.proposal_id = p.id
                     WHERE p.state = 'outcome_unknown' AND p.purged_at IS NULL AND g.used_at IS NOT NULL
                       AND p.action = ANY($1) AND p.finished_at < now() - make_interval(secs => $2)
                       AND (t.next_try_at IS NULL OR t.next_try_at <= now())
                     ORDER BY p.finished_at LIMIT $4),
                 claimed AS (
                     INSERT INTO effect_settle_tries (proposal_id, tenant_id, next_try_at)
                     SELECT id, tenant_id, now() + make_interval(secs => $3) FROM due
                     ON CONFLICT (proposal_id) DO UPDATE
                       SET next_try_at = EXCLUDED.next_try_at, tries = effect_settle_tries.tries + 1
                       WHERE effect_settle_tries.next_try_at <= now()
                     RETURNING proposal_id)
                 SELECT {PROPOSAL_COLUMNS}, {GRANT_COLUMNS}
                 FROM claimed c JOIN proposals p ON p.id = c.proposal_id
                 JOIN agents a ON a.id = p.agent_id JOIN grants g ON g.proposal_id = p.id AND g.voided_at IS NULL
                 ORDER BY p.finished_at"
            ),
            &[&actions, &older_than.as_secs_f64(), &retry.as_secs_f64(), &limit],
        )
        .await?;
    let mut out = Vec::with_capacity(rows.len());
    for r in &rows {
        if let Some(grant) = StoredGrant::from_row(r)? {
            out.push(Unsettled {
                proposal: ProposalRow::from_row(r)?,
                grant,
            });
        }
    }
    Ok(out)
}

/// Notes why a claimed proposal's read-back concluded nothing; its next try stays as the claim
/// set it.
pub async fn note_unread(db: &Db, id: Uuid, reason: &str) -> Result<()> {
    let reason: String = reason.chars().take(1000).collect();
    db.client()
        .await?
        .execute(
            "UPDATE effect_settle_tries SET last_reason = $2 WHERE proposal_id = $1",
            &[&id, &reason],
        )
        .await?;
    Ok(())
}

/// When the settler may next ask about proposal `id`, how often it was claimed and why the
/// last read-back concluded nothing; `None` when it holds no try (never claimed, or settled).
pub async fn next_try(
    db: &Db,
    id: Uuid,
) -> Result<Option<(chrono::DateTime<chrono::Utc>, i32, String)>> {
    let row = db
        .client()
        .await?
        .query_opt(
            "SELECT next_try_at, tries, last_reason FROM effect_settle_tries WHERE proposal_id = $1",
            &[&id],
        )
        .await?;
    Ok(row.map(|r| (r.get(0), r.get(1), r.get(2))))
}

/// Settles an `outcome_unknown` proposal from its read-back, in one transaction: `→ to`
/// (`succeeded`, `failed` or `effect_mismatch`) with `detail` as its outcome detail, and the
/// `proposal.effect` event carrying the transition and the evidence. Returns false when the
/// proposal was no longer `outcome_unknown` (another executor settled it first).
pub async fn settle(
    db: &Db,
    owner: &str,
    row: &ProposalRow,
    to: ProposalState,
    detail: &str,
    effect: &EffectRecord,
) -> Result<bool> {
    let actor = format!("executor:{owner}");
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    let n = tx
        .execute(
            "UPDATE proposals SET state = $2, outcome = $2, outcome_detail = $3
             WHERE id = $1 AND state = 'outcome_unknown'",
            &[&row.id, &to.as_str(), &detail],
        )
        .await?;
    if n == 0 {
        tx.rollback().await?;
        return Ok(false);
    }
    tx.execute(
        "DELETE FROM effect_settle_tries WHERE proposal_id = $1",
        &[&row.id],
    )
    .await?;
    audit::write(
        &tx,
        &row.event(
            AuditKind::ProposalEffect,
            &actor,
            serde_json::to_value(effect).unwrap_or_default(),
        )
        .transition(Some(ProposalState::OutcomeUnknown), to),
    )
    .await?;
    tx.commit().await?;
    Ok(true)
}

/// The newest read-back of proposal `id` and when it was recorded, seen with `tenants`
/// (row-level security scopes the web role; the admin role reads every tenant). `None` when
/// nothing was read back (yet).
pub async fn latest(
    db: &Db,
    tenants: &[String],
    id: Uuid,
) -> Result<Option<(EffectRecord, chrono::DateTime<chrono::Utc>)>> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    set_tenants(&tx, tenants).await?;
    let row = tx
        .query_opt(
            "SELECT detail, at FROM audit_events WHERE proposal_id = $1 AND kind = $2
             ORDER BY id DESC LIMIT 1",
            &[&id, &AuditKind::ProposalEffect.as_str()],
        )
        .await?;
    tx.commit().await?;
    Ok(row.and_then(|r| {
        let detail: serde_json::Value = r.get(0);
        serde_json::from_value(detail).ok().map(|e| (e, r.get(1)))
    }))
}
