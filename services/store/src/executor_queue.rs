//! The executor's queue: claim `approved` rows with `SKIP LOCKED` and a lease (a short
//! transaction), spend the grant and start execution in one transaction, record outcomes, and
//! sweep expired leases and grants.
//!
//! Spend rule (the guide's "grant already spent or expired"): one UPDATE
//! `… WHERE used_at IS NULL AND expires_at > now()`; on zero rows read the row afterwards:
//! `used_at` set = replay (investigate), null = expired.

use crate::{Db, Result, audit};
use serde_json::{Value, json};
use std::time::Duration;
use uuid::Uuid;

/// A claimed approved proposal.
#[derive(Debug, Clone)]
pub struct ClaimedRow {
    /// Proposal id.
    pub id: Uuid,
    /// Tenant.
    pub tenant_id: String,
    /// Agent id.
    pub agent_id: Uuid,
    /// Agent name.
    pub agent_name: String,
    /// Agent owner subject.
    pub agent_owner: Option<String>,
    /// Action.
    pub action: String,
    /// Target.
    pub target: String,
    /// Canonical params as stored.
    pub params_json: String,
    /// SHA-256 of params.
    pub params_sha256: String,
    /// Intent hash as stored on the proposal.
    pub intent_hash: String,
    /// Session id.
    pub session_id: Option<String>,
    /// The proposal's grant as stored (read with the claim), if any.
    pub grant: Option<crate::grants::StoredGrant>,
    /// The tenant's latest document version at claim time.
    pub latest_doc_version: Option<i32>,
}

/// Claims up to `limit` approved proposals whose lease is free, setting `lease_owner = owner`
/// and `lease_until = now() + lease`. One short statement; no transaction stays open.
pub async fn claim(db: &Db, owner: &str, lease: Duration, limit: i64) -> Result<Vec<ClaimedRow>> {
    use actiond_core::grant::{GRANT_VERSION, GrantClaims};
    let c = db.client().await?;
    let stmt = c
        .prepare_cached(
            "WITH c AS (
                SELECT id FROM proposals
                WHERE state = 'approved' AND (lease_until IS NULL OR lease_until < now())
                ORDER BY updated_at LIMIT $3 FOR UPDATE SKIP LOCKED
             )
             UPDATE proposals p SET lease_owner = $1, lease_until = now() + make_interval(secs => $2)
             FROM c JOIN agents a ON true LEFT JOIN grants g ON g.proposal_id = c.id
             WHERE p.id = c.id AND a.id = p.agent_id
             RETURNING p.id, p.tenant_id, p.agent_id, a.name, a.owner_subject, p.action, p.target, p.params_json,
                       p.params_sha256, p.intent_hash, p.session_id,
                       g.id, g.proposal_id, g.tenant_id, g.intent_hash, g.doc_version, g.expires_at_us, g.key_id, g.sig,
                       g.used_at, g.used_by,
                       (SELECT max(d.version) FROM tenant_documents d WHERE d.tenant_id = p.tenant_id)",
        )
        .await?;
    let rows = c
        .query(&stmt, &[&owner, &lease.as_secs_f64(), &limit])
        .await?;
    Ok(rows
        .iter()
        .map(|r| {
            let gid: Option<uuid::Uuid> = r.get(11);
            let grant = gid.map(|id| crate::grants::StoredGrant {
                claims: GrantClaims {
                    version: GRANT_VERSION,
                    id,
                    proposal_id: r.get(12),
                    tenant_id: r.get(13),
                    intent_hash: r.get(14),
                    doc_version: r.get(15),
                    expires_at: r.get(16),
                    key_id: r.get(17),
                },
                sig: r.get(18),
                used_at: r.get(19),
                used_by: r.get(20),
            });
            ClaimedRow {
                id: r.get(0),
                tenant_id: r.get(1),
                agent_id: r.get(2),
                agent_name: r.get(3),
                agent_owner: r.get(4),
                action: r.get(5),
                target: r.get(6),
                params_json: r.get(7),
                params_sha256: r.get(8),
                intent_hash: r.get(9),
                session_id: r.get(10),
                grant,
                latest_doc_version: r.get(21),
            }
        })
        .collect())
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
    let aud = tx
        .prepare_cached(
            "INSERT INTO audit_events (tenant_id, proposal_id, kind, actor, from_state, to_state, intent_hash, params_sha256, detail)
             SELECT $1, $2, 'grant.spent', $3, 'approved', 'executing', $4, $5, $6
             WHERE EXISTS (SELECT 1 FROM grants WHERE id = $7 AND used_by = $8 AND used_at = now())
               AND EXISTS (SELECT 1 FROM proposals WHERE id = $2 AND state = 'executing' AND lease_owner = $8)",
        )
        .await?;
    let actor = format!("executor:{owner}");
    let detail = json!({"grant_id": grant_id, "key_id": key_id});
    let lease = run_lease.as_secs_f64();
    let p_spend: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&grant_id, &owner];
    let p_start: [&(dyn tokio_postgres::types::ToSql + Sync); 3] = [&row.id, &owner, &lease];
    let p_aud: [&(dyn tokio_postgres::types::ToSql + Sync); 8] = [
        &row.tenant_id,
        &row.id,
        &actor,
        &row.intent_hash,
        &row.params_sha256,
        &detail,
        &grant_id,
        &owner,
    ];
    // Pipelined: the spend, the state change and the audit event in one round trip, one
    // transaction. If either update touched nothing, the whole transaction is rolled back.
    let (spent, started, audited) = tokio::join!(
        tx.execute(&spend, &p_spend),
        tx.execute(&start, &p_start),
        tx.execute(&aud, &p_aud)
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
    row: &ClaimedRow,
    owner: &str,
    to_state: &str,
    reason: &str,
    kind: &str,
    detail: Value,
) -> Result<bool> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    let n = tx
        .execute(
            "UPDATE proposals SET state = $3, decision_reason = $4, lease_owner = NULL, lease_until = NULL
             WHERE id = $1 AND state = 'approved' AND lease_owner = $2",
            &[&row.id, &owner, &to_state, &reason],
        )
        .await?;
    if n == 0 {
        tx.rollback().await?;
        return Ok(false);
    }
    let actor = format!("executor:{owner}");
    audit::write(
        &tx,
        &audit::Event {
            tenant_id: &row.tenant_id,
            proposal_id: Some(row.id),
            kind,
            actor: &actor,
            from_state: Some("approved"),
            to_state: Some(to_state),
            intent_hash: Some(&row.intent_hash),
            params_sha256: Some(&row.params_sha256),
            detail,
        },
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
    row: &ClaimedRow,
    owner: &str,
    outcome: &str,
    detail: &str,
) -> Result<bool> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    let stmt = tx
        .prepare_cached(
            "UPDATE proposals SET state = $3, outcome = $3, outcome_detail = $4, finished_at = now(),
                    lease_owner = NULL, lease_until = NULL
             WHERE id = $1 AND state = 'executing' AND lease_owner = $2",
        )
        .await?;
    let aud = tx
        .prepare_cached(
            "INSERT INTO audit_events (tenant_id, proposal_id, kind, actor, from_state, to_state, intent_hash, params_sha256, detail)
             VALUES ($1, $2, 'proposal.executed', $3, 'executing', $4, $5, $6, $7)",
        )
        .await?;
    let actor = format!("executor:{owner}");
    let ev = json!({"outcome": outcome, "detail": detail});
    let p_upd: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
        [&row.id, &owner, &outcome, &detail];
    let p_aud: [&(dyn tokio_postgres::types::ToSql + Sync); 7] = [
        &row.tenant_id,
        &row.id,
        &actor,
        &outcome,
        &row.intent_hash,
        &row.params_sha256,
        &ev,
    ];
    // Pipelined; rolled back (audit event included) when the lease was lost.
    let (n, a) = tokio::join!(tx.execute(&stmt, &p_upd), tx.execute(&aud, &p_aud));
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
    let c = db.client().await?;
    let unknown = c
        .execute(
            "WITH lost AS (
                SELECT id FROM proposals WHERE state = 'executing' AND lease_until < now() FOR UPDATE SKIP LOCKED
             ), moved AS (
                UPDATE proposals p SET state = 'outcome_unknown', outcome = 'outcome_unknown',
                       outcome_detail = 'executor lease ran out after the grant was spent', finished_at = now()
                FROM lost WHERE p.id = lost.id
                RETURNING p.id, p.tenant_id, p.intent_hash, p.params_sha256, p.lease_owner
             )
             INSERT INTO audit_events (tenant_id, proposal_id, kind, actor, from_state, to_state, intent_hash, params_sha256, detail)
             SELECT tenant_id, id, 'proposal.outcome_unknown', 'executor-sweeper', 'executing', 'outcome_unknown',
                    intent_hash, params_sha256, jsonb_build_object('lease_owner', lease_owner)
             FROM moved",
            &[],
        )
        .await?;
    let expired = c
        .execute(
            "WITH dead AS (
                SELECT p.id FROM proposals p JOIN grants g ON g.proposal_id = p.id
                WHERE p.state = 'approved' AND g.used_at IS NULL AND g.expires_at <= now()
                  AND (p.lease_until IS NULL OR p.lease_until < now())
                FOR UPDATE OF p SKIP LOCKED
             ), moved AS (
                UPDATE proposals p SET state = 'expired', decision_reason = 'the approval expired before an executor ran it; propose again',
                       lease_owner = NULL, lease_until = NULL
                FROM dead WHERE p.id = dead.id
                RETURNING p.id, p.tenant_id, p.intent_hash, p.params_sha256
             )
             INSERT INTO audit_events (tenant_id, proposal_id, kind, actor, from_state, to_state, intent_hash, params_sha256, detail)
             SELECT tenant_id, id, 'grant.expired', 'executor-sweeper', 'approved', 'expired', intent_hash, params_sha256, '{}'::jsonb
             FROM moved",
            &[],
        )
        .await?;
    Ok(Swept {
        outcome_unknown: unknown,
        expired,
    })
}
