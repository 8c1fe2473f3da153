//! The executor's queue: claim `approved` rows with `SKIP LOCKED` and a lease (a short
//! transaction), spend the grant and start execution in one transaction, record outcomes, and
//! sweep expired leases and grants.
//!
//! Spend rule (the guide's "grant already spent or expired"): one UPDATE
//! `… WHERE used_at IS NULL AND expires_at > now()`; on zero rows read the row afterwards:
//! `used_at` set = replay (investigate), null = expired.

use crate::grants::{GRANT_COLUMNS, StoredGrant};
use crate::proposals::{PROPOSAL_COLUMNS, ProposalRow};
use crate::{Db, Result, audit};
use actiond_core::audit::AuditKind;
use actiond_core::state::ProposalState;
use serde_json::{Value, json};
use std::time::Duration;
use uuid::Uuid;

/// A claimed approved proposal, with its grant and the tenant's latest document version.
/// Derefs to its [`ProposalRow`].
#[derive(Debug, Clone)]
pub struct ClaimedRow {
    /// The proposal as stored.
    pub proposal: ProposalRow,
    /// The proposal's grant as stored (read with the claim), if any.
    pub grant: Option<StoredGrant>,
    /// The tenant's latest document version at claim time.
    pub latest_doc_version: Option<i32>,
}

impl std::ops::Deref for ClaimedRow {
    type Target = ProposalRow;
    fn deref(&self) -> &ProposalRow {
        &self.proposal
    }
}

/// Claims up to `limit` approved proposals whose lease is free, setting `lease_owner = owner`
/// and `lease_until = now() + lease`. One short statement; no transaction stays open.
pub async fn claim(db: &Db, owner: &str, lease: Duration, limit: i64) -> Result<Vec<ClaimedRow>> {
    let c = db.client().await?;
    let stmt = c
        .prepare_cached(&format!(
            "WITH c AS (
                SELECT id FROM proposals
                WHERE state = 'approved' AND (lease_until IS NULL OR lease_until < now())
                ORDER BY updated_at LIMIT $3 FOR UPDATE SKIP LOCKED
             )
             UPDATE proposals p SET lease_owner = $1, lease_until = now() + make_interval(secs => $2)
             FROM c JOIN agents a ON true LEFT JOIN grants g ON g.proposal_id = c.id
             WHERE p.id = c.id AND a.id = p.agent_id
             RETURNING {PROPOSAL_COLUMNS}, {GRANT_COLUMNS},
                       (SELECT max(d.version) FROM tenant_documents d WHERE d.tenant_id = p.tenant_id) AS latest_doc_version"
        ))
        .await?;
    let rows = c
        .query(&stmt, &[&owner, &lease.as_secs_f64(), &limit])
        .await?;
    rows.iter()
        .map(|r| {
            Ok(ClaimedRow {
                proposal: ProposalRow::from_row(r)?,
                grant: StoredGrant::from_row(r)?,
                latest_doc_version: r.try_get("latest_doc_version")?,
            })
        })
        .collect()
}

/// What [`spend_and_start`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spend {
    /// Grant spent, proposal `executing`, audit written: run the handler now.
    Started,
    /// The grant was already spent (replay): nothing ran. Carries who spent it.
    Replayed {
        /// Executor that spent it.
        used_by: Option<String>,
    },
    /// The grant expired unspent: nothing ran.
    Expired,
    /// This executor no longer holds the lease (or the proposal left `approved`): nothing ran.
    LostLease,
}

/// In one transaction: spend the grant (`used_at IS NULL AND expires_at > now()`), move the
/// proposal `approved → executing WHERE lease_owner = owner` with a lease covering the
/// handler's run, and write the audit event. If either update touches zero rows, nothing
/// changes and the grant row is read to tell replay from expiry.
pub async fn spend_and_start(
    db: &Db,
    row: &ClaimedRow,
    grant_id: Uuid,
    key_id: &str,
    owner: &str,
    run_lease: Duration,
) -> Result<Spend> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    let spend = tx
        .prepare_cached("UPDATE grants SET used_at = now(), used_by = $2 WHERE id = $1 AND used_at IS NULL AND expires_at > now()")
        .await?;
    let start = tx
        .prepare_cached(
            "UPDATE proposals SET state = 'executing', lease_until = now() + make_interval(secs => $3)
             WHERE id = $1 AND state = 'approved' AND lease_owner = $2",
        )
        .await?;
    let actor = format!("executor:{owner}");
    let detail = json!({"grant_id": grant_id, "key_id": key_id});
    let lease = run_lease.as_secs_f64();
    let p_spend: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&grant_id, &owner];
    let p_start: [&(dyn tokio_postgres::types::ToSql + Sync); 3] = [&row.id, &owner, &lease];
    let event = row
        .event(AuditKind::GrantSpent, &actor, detail)
        .transition(Some(ProposalState::Approved), ProposalState::Executing);
    // Pipelined: the spend, the state change and the audit event in one round trip, one
    // transaction. If either update touched nothing, the whole transaction (event included)
    // is rolled back.
    let (spent, started, audited) = tokio::join!(
        tx.execute(&spend, &p_spend),
        tx.execute(&start, &p_start),
        audit::write(&tx, &event)
    );
    let (spent, started, audited) = (spent?, started?, audited?);
    if spent == 0 {
        tx.rollback().await?;
        let r = c
            .query_one(
                "SELECT used_at IS NOT NULL, used_by FROM grants WHERE id = $1",
                &[&grant_id],
            )
            .await?;
        let used: bool = r.get(0);
        return Ok(if used {
            Spend::Replayed { used_by: r.get(1) }
        } else {
            Spend::Expired
        });
    }
    if started == 0 || audited != 1 {
        tx.rollback().await?;
        return Ok(Spend::LostLease);
    }
    tx.commit().await?;
    Ok(Spend::Started)
}

/// Refuses a claimed `approved` proposal without running it: moves it to `to_state`
/// (`blocked` or `expired`) with `reason` (shown to the agent) and an audit event of `kind`
/// whose `detail` holds the internal cause. Returns false when the lease was lost.
pub async fn refuse(
    db: &Db,
    row: &ProposalRow,
    owner: &str,
    to_state: ProposalState,
    reason: &str,
    kind: AuditKind,
    detail: Value,
) -> Result<bool> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    let n = tx
        .execute(
            "UPDATE proposals SET state = $3, decision_reason = $4, lease_owner = NULL, lease_until = NULL
             WHERE id = $1 AND state = 'approved' AND lease_owner = $2",
            &[&row.id, &owner, &to_state.as_str(), &reason],
        )
        .await?;
    if n == 0 {
        tx.rollback().await?;
        return Ok(false);
    }
    let actor = format!("executor:{owner}");
    audit::write(
        &tx,
        &row.event(kind, &actor, detail)
            .transition(Some(ProposalState::Approved), to_state),
    )
    .await?;
    tx.commit().await?;
    Ok(true)
}

/// Records a handler's outcome (`succeeded`, `failed` or `outcome_unknown`) on an `executing`
/// proposal this executor holds. `detail` is internal (provider status, error text) and goes
/// to `outcome_detail` and the audit event, never to the agent. Returns false when the lease
/// was lost (the sweeper already marked it `outcome_unknown`).
pub async fn finish(
    db: &Db,
    row: &ProposalRow,
    owner: &str,
    outcome: ProposalState,
    detail: &str,
) -> Result<bool> {
    let outcome_name = outcome.as_str();
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    let stmt = tx
        .prepare_cached(
            "UPDATE proposals SET state = $3, outcome = $3, outcome_detail = $4, finished_at = now(),
                    lease_owner = NULL, lease_until = NULL
             WHERE id = $1 AND state = 'executing' AND lease_owner = $2",
        )
        .await?;
    let actor = format!("executor:{owner}");
    let event = row
        .event(
            AuditKind::ProposalExecuted,
            &actor,
            json!({"outcome": outcome_name, "detail": detail}),
        )
        .transition(Some(ProposalState::Executing), outcome);
    let p_upd: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
        [&row.id, &owner, &outcome_name, &detail];
    // Pipelined; rolled back (audit event included) when the lease was lost.
    let (n, a) = tokio::join!(tx.execute(&stmt, &p_upd), audit::write(&tx, &event));
    let (n, _) = (n?, a?);
    if n == 0 {
        tx.rollback().await?;
        return Ok(false);
    }
    tx.commit().await?;
    Ok(true)
}

/// Counts of one sweep.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// `executing` rows whose lease ran out after the spend → `outcome_unknown`.
    pub outcome_unknown: u64,
    /// `approved` rows whose grant expired unspent → `expired`.
    pub expired: u64,
}

/// The executor owns the timeouts of `approved` and of leases:
/// - `executing` with an expired lease (the grant is spent) → `outcome_unknown`, never re-run;
/// - `approved` whose grant expired unspent and that no live lease holds → `expired`.
///
/// (`approved` with an expired lease and a live grant needs nothing: the claim takes it again.)
pub async fn sweep(db: &Db) -> Result<Swept> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    let lost = tx
        .query(
            "WITH lost AS (
                SELECT id FROM proposals WHERE state = 'executing' AND lease_until < now() FOR UPDATE SKIP LOCKED
             )
             UPDATE proposals p SET state = 'outcome_unknown', outcome = 'outcome_unknown',
                    outcome_detail = 'executor lease ran out after the grant was spent', finished_at = now()
             FROM lost WHERE p.id = lost.id
             RETURNING p.id, p.tenant_id, p.intent_hash, p.params_sha256, p.lease_owner",
            &[],
        )
        .await?;
    let unknown = sweep_events(
        &tx,
        &lost,
        AuditKind::ProposalOutcomeUnknown,
        (ProposalState::Executing, ProposalState::OutcomeUnknown),
        |r| Ok(json!({"lease_owner": r.try_get::<_, Option<String>>("lease_owner")?})),
    )
    .await?;
    tx.commit().await?;
    let tx = c.transaction().await?;
    let dead = tx
        .query(
            "WITH dead AS (
                SELECT p.id FROM proposals p JOIN grants g ON g.proposal_id = p.id
                WHERE p.state = 'approved' AND g.used_at IS NULL AND g.expires_at <= now()
                  AND (p.lease_until IS NULL OR p.lease_until < now())
                FOR UPDATE OF p SKIP LOCKED
             )
             UPDATE proposals p SET state = 'expired', decision_reason = 'the approval expired before an executor ran it; propose again',
                    lease_owner = NULL, lease_until = NULL
             FROM dead WHERE p.id = dead.id
             RETURNING p.id, p.tenant_id, p.intent_hash, p.params_sha256",
            &[],
        )
        .await?;
    let expired = sweep_events(
        &tx,
        &dead,
        AuditKind::GrantExpired,
        (ProposalState::Approved, ProposalState::Expired),
        |_| Ok(json!({})),
    )
    .await?;
    tx.commit().await?;
    Ok(Swept {
        outcome_unknown: unknown,
        expired,
    })
}

/// Writes the sweeper's audit events for the rows a sweep moved (`id`, `tenant_id`,
/// `intent_hash`, `params_sha256` columns). Returns how many rows moved.
async fn sweep_events(
    tx: &crate::Tx<'_>,
    moved: &[tokio_postgres::Row],
    kind: AuditKind,
    (from, to): (ProposalState, ProposalState),
    detail: impl Fn(&tokio_postgres::Row) -> Result<Value>,
) -> Result<u64> {
    let mut events = Vec::with_capacity(moved.len());
    for r in moved {
        events.push(
            audit::Event::new(
                r.try_get("tenant_id")?,
                Some(r.try_get("id")?),
                kind,
                "executor-sweeper",
                detail(r)?,
            )
            .transition(Some(from), to)
            .hashes(r.try_get("intent_hash")?, r.try_get("params_sha256")?),
        );
    }
    audit::write_batch(tx, &events).await?;
    Ok(moved.len() as u64)
}
