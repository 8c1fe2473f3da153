//! Gauges computed from the database at scrape time. Exported by one place (the policy worker's
//! admin listener), not by every replica.

use crate::{Db, Result};

/// Age in seconds of the oldest row per (tenant, state) for `pending`, `escalated` and
/// `approved`, with the row count. The age is the key signal: a stable count can hide a row
/// that ages unnoticed (the guide's "proposals pile up in pending"). Every tenant gets all three
/// states, an empty one as age 0 and count 0, so the series exist from the first scrape.
pub async fn queue_ages(db: &Db) -> Result<Vec<(String, String, f64, i64)>> {
    let c = db.client().await?;
    let rows = c
        .query(
            "SELECT t.id, s.state,
                    COALESCE(extract(epoch FROM now() - min(CASE WHEN p.state = 'approved' THEN p.updated_at ELSE p.created_at END))::float8, 0),
                    count(p.id)
             FROM tenants t
             CROSS JOIN unnest(ARRAY['pending','escalated','approved']) AS s(state)
             LEFT JOIN proposals p ON p.tenant_id = t.id AND p.state = s.state
             GROUP BY t.id, s.state",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect())
}
