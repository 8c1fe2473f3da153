//! Escalation notices of the approval web app (`web_notifications`): one row per escalated
//! proposal and, for staged approvals, one per later stage that opens (a re-route is announced
//! like an escalation), claimed by one replica (`INSERT … ON CONFLICT DO NOTHING`), so each is
//! announced once across replicas; failed sends are retried with exponential backoff.

use crate::{Db, Result, set_all_tenants, set_tenant};
use uuid::Uuid;

/// How many new escalations one [`claim`] takes.
const NEW_BATCH: i64 = 50;
/// How many retries one [`claim`] takes.
const RETRY_BATCH: i64 = 20;

/// Claims notices to send: escalated proposals never announced (oldest first), open stages
/// after the first never announced, then failed notices whose backoff is over and sends stuck
/// for five minutes (at most five attempts). Returns (proposal id, tenant id, stage) triples
/// (stage 1 for the escalation itself). This is the one web read across every tenant.
pub async fn claim(db: &Db) -> Result<Vec<(Uuid, String, i32)>> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    set_all_tenants(&tx).await?;
    let mut rows = tx
        .query(
            "INSERT INTO web_notifications (proposal_id, tenant_id)
             SELECT p.id, p.tenant_id FROM proposals p
             WHERE p.state = 'escalated'
               AND NOT EXISTS (SELECT 1 FROM web_notifications n WHERE n.proposal_id = p.id)
             ORDER BY p.created_at LIMIT $1
             ON CONFLICT DO NOTHING RETURNING proposal_id, tenant_id, stage",
            &[&NEW_BATCH],
        )
        .await?;
    rows.extend(
        tx.query(
            "INSERT INTO web_notifications (proposal_id, tenant_id, stage)
             SELECT s.proposal_id, s.tenant_id, s.stage FROM approval_stages s JOIN proposals p ON p.id = s.proposal_id
             WHERE p.state = 'escalated' AND s.stage > 1 AND s.opened_at IS NOT NULL
               AND s.completed_at IS NULL AND s.timed_out_at IS NULL
               AND NOT EXISTS (SELECT 1 FROM web_notifications n WHERE n.proposal_id = s.proposal_id AND n.stage = s.stage)
             ORDER BY s.opened_at LIMIT $1
             ON CONFLICT DO NOTHING RETURNING proposal_id, tenant_id, stage",
            &[&NEW_BATCH],
        )
        .await?,
    );
    rows.extend(
        tx.query(
            "UPDATE web_notifications SET status = 'sending', attempts = attempts + 1, updated_at = now()
             WHERE (proposal_id, stage) IN (
               SELECT proposal_id, stage FROM web_notifications
               WHERE attempts < 5 AND ((status = 'failed' AND next_attempt_at <= now())
                  OR (status = 'sending' AND updated_at < now() - interval '5 minutes'))
               ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED)
             RETURNING proposal_id, tenant_id, stage",
            &[&RETRY_BATCH],
        )
        .await?,
    );
    tx.commit().await?;
    Ok(rows
        .iter()
        .map(|r| (r.get("proposal_id"), r.get("tenant_id"), r.get("stage")))
        .collect())
}

/// Records a handled notice: `sent` on the channels named, or `skipped` when there were none.
pub async fn mark_sent(
    db: &Db,
    tenant: &str,
    (id, stage): (Uuid, i32),
    channels: &[String],
) -> Result<()> {
    let status = if channels.is_empty() {
        "skipped"
    } else {
        "sent"
    };
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    set_tenant(&tx, tenant).await?;
    tx.execute(
        "UPDATE web_notifications SET status = $2, channels = $3, last_error = NULL, updated_at = now()
         WHERE proposal_id = $1 AND stage = $4",
        &[&id, &status, &channels, &stage],
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Records a failed send (the first 500 characters of `error`); the next attempt is due
/// 30 s × 2^attempts from now.
pub async fn mark_failed(
    db: &Db,
    tenant: &str,
    (id, stage): (Uuid, i32),
    error: &str,
) -> Result<()> {
    let error: String = error.chars().take(500).collect();
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    set_tenant(&tx, tenant).await?;
    tx.execute(
        "UPDATE web_notifications SET status = 'failed', last_error = $2, updated_at = now(),
            next_attempt_at = now() + make_interval(secs => 30 * power(2, attempts))
         WHERE proposal_id = $1 AND stage = $3",
        &[&id, &error, &stage],
    )
    .await?;
    tx.commit().await?;
    Ok(())
}
