//! Retention: clears the customer data of decided proposals (params, agent reason, source text,
//! decision reason, outcome detail, approver comments) once they are older than their tenant's
//! `retention.decided_after` (else the operator's default), in small batches.
//!
//! Each batch is its own short transaction with `statement_timeout` under one second; the batch
//! size adapts to stay well below it. Live proposals are out of the role's reach (row-level
//! security in V6), audit events and seals are never touched, so `actiond audit verify` passes
//! after a purge. Events hold hashes of the params, not the params, but what they carry
//! themselves stays as long as they do: a decision's reason (which may quote the action name an
//! agent chose), an approver's comment, an edit's old and new values (docs/audit.md). Each
//! batch writes one `retention.purged` event.

use crate::{Db, Result, audit};
use actiond_core::audit::AuditKind;
use std::time::{Duration, Instant};

/// Per-transaction ceiling the purge keeps to.
pub const MAX_TRANSACTION: Duration = Duration::from_secs(1);

/// What a purge did.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct PurgeReport {
    /// Proposals purged, all tenants.
    pub purged: u64,
    /// Transactions (batches) run.
    pub batches: u64,
    /// Longest batch transaction, milliseconds.
    pub max_batch_ms: u64,
    /// Per tenant: (tenant, decided_after in seconds, purged).
    pub tenants: Vec<(String, u64, u64)>,
}

/// Each tenant's `decided_after` (from its latest document), or `default`.
pub async fn tenant_ages(db: &Db, default: Duration) -> Result<Vec<(String, Duration)>> {
    let c = db.client().await?;
    let rows = c
        .query(
            "SELECT DISTINCT ON (tenant_id) tenant_id, document->'retention'->>'decided_after'
             FROM tenant_documents ORDER BY tenant_id, version DESC",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| {
            let age = r
                .get::<_, Option<String>>(1)
                .and_then(|s| actiond_core::ids::parse_duration(&s).ok())
                .unwrap_or(default);
            (r.get(0), age)
        })
        .collect())
}

/// Purges every tenant once through. `batch` is the starting batch size (it adapts); it is
/// held to 1..=10000, since a batch of 0 rows would never end a tenant's loop.
pub async fn purge(db: &Db, default: Duration, batch: i64) -> Result<PurgeReport> {
    let batch = batch.clamp(1, 10_000);
    let mut report = PurgeReport::default();
    for (tenant, age) in tenant_ages(db, default).await? {
        let n = purge_tenant(db, &tenant, age, batch, &mut report).await?;
        report.purged += n;
        report.tenants.push((tenant, age.as_secs(), n));
    }
    Ok(report)
}

async fn purge_tenant(
    db: &Db,
    tenant: &str,
    age: Duration,
    mut batch: i64,
    report: &mut PurgeReport,
) -> Result<u64> {
    let mut total = 0u64;
    let secs = age.as_secs_f64();
    loop {
        let started = Instant::now();
        let n = match purge_batch(db, tenant, secs, batch).await {
            Ok(n) => n,
            // statement_timeout: the batch was too big for one second; halve it and retry.
            Err(e) if e.sqlstate() == Some("57014") && batch > 1 => {
                batch = (batch / 2).max(1);
                continue;
            }
            Err(e) => return Err(e),
        };
        let took = started.elapsed();
        report.batches += 1;
        report.max_batch_ms = report.max_batch_ms.max(took.as_millis() as u64);
        total += n;
        if n < batch as u64 {
            return Ok(total);
        }
        if took > MAX_TRANSACTION / 4 {
            batch = (batch / 2).max(1);
        } else if took < MAX_TRANSACTION / 20 {
            batch = (batch * 2).min(10_000);
        }
    }
}

async fn purge_batch(db: &Db, tenant: &str, age_secs: f64, batch: i64) -> Result<u64> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    tx.batch_execute("SET LOCAL statement_timeout = '800ms'; SET LOCAL lock_timeout = '200ms'")
        .await?;
    let row = tx
        .query_one(
            "WITH b AS (
                 SELECT id FROM proposals
                 WHERE tenant_id = $1 AND purged_at IS NULL
                   AND state IN ('blocked','denied','expired','succeeded','failed','outcome_unknown','withdrawn','amended','stale','effect_mismatch')
                   AND updated_at < now() - $2::float8 * interval '1 second'
                 ORDER BY updated_at LIMIT $3 FOR UPDATE SKIP LOCKED),
             u AS (
                 UPDATE proposals p SET params_json = '{}', agent_reason = NULL, source_text = NULL,
                        decision_reason = NULL, outcome_detail = NULL, purged_at = now()
                 FROM b WHERE p.id = b.id RETURNING p.id),
             a AS (
                 UPDATE approvals ap SET comment = NULL FROM u
                 WHERE ap.proposal_id = u.id AND ap.comment IS NOT NULL RETURNING 1),
             d AS (
                 DELETE FROM proposal_delegations pd USING u WHERE pd.proposal_id = u.id RETURNING 1),
             v AS (
                 DELETE FROM proposal_previews pv USING u WHERE pv.proposal_id = u.id RETURNING 1),
             f AS (
                 DELETE FROM proposal_facts pf USING u WHERE pf.proposal_id = u.id RETURNING 1),
             t AS (
                 DELETE FROM effect_settle_tries st USING u WHERE st.proposal_id = u.id RETURNING 1)
             SELECT (SELECT count(*) FROM u), (SELECT count(*) FROM a), (SELECT count(*) FROM d),
                    (SELECT count(*) FROM v)",
            &[&tenant, &age_secs, &batch],
        )
        .await?;
    let purged: i64 = row.get(0);
    if purged > 0 {
        let detail = serde_json::json!({"proposals": purged, "decided_after_s": age_secs});
        audit::write(
            &tx,
            &audit::Event::new(
                tenant,
                None,
                AuditKind::RetentionPurged,
                "retention",
                detail,
            ),
        )
        .await?;
    }
    tx.commit().await?;
    Ok(purged as u64)
}
