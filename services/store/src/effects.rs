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

/// Up to `limit` `outcome_unknown` proposals of `actions` (those whose handler can read its
/// effect back), not purged, that became `outcome_unknown` more than `older_than` ago (a
/// request cut off by a timeout may still land at the provider meanwhile), oldest first, not
/// in `skip` (asked recently without an answer).
pub async fn unsettled(
    db: &Db,
    actions: &[&str],
    older_than: Duration,
    skip: &[Uuid],
    limit: i64,
) -> Result<Vec<Unsettled>> {
    let c = db.client().await?;
    let rows = c
        .query(
            &format!(
                "SELECT {PROPOSAL_COLUMNS}, {GRANT_COLUMNS}
                 FROM proposals p JOIN agents a ON a.id = p.agent_id JOIN grants g ON g.proposal_id = p.id AND g.voided_at IS NULL
                 WHERE p.state = 'outcome_unknown' AND p.purged_at IS NULL AND g.used_at IS NOT NULL
                   AND p.action = ANY($1) AND p.finished_at < now() - make_interval(secs => $2)
                   AND NOT (p.id = ANY($3))
                 ORDER BY p.finished_at LIMIT $4"
            ),
            &[&actions, &older_than.as_secs_f64(), &skip, &limit],
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
