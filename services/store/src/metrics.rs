//! Gauges computed from the database at scrape time. Exported by one place (the policy worker's
//! admin listener), not by every replica.

use crate::{Db, Result};

/// Age in seconds of the oldest row per (tenant, state) for `pending`, `escalated` and
/// `approved`, with the row count. The age is the key signal: a stable count can hide a row
/// that ages unnoticed (the guide's "proposals pile up in pending").
pub async fn queue_ages(db: &Db) -> Result<Vec<(String, String, f64, i64)>> {
    let c = db.client().await?;
    let rows = c
        .query(
            "SELECT tenant_id, state, extract(epoch FROM now() - min(CASE WHEN state = 'approved' THEN updated_at ELSE created_at END))::float8,
                    count(*)
             FROM proposals WHERE state IN ('pending','escalated','approved') GROUP BY tenant_id, state",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect())
}
