//! Gauges computed from the database at scrape time. Exported by one place (the policy worker's
//! admin listener), not by every replica.

use crate::{Db, Result};

/// How many rows of one queue a scrape reads at most: per state for `pending` and `approved`
/// (the oldest, in the order their workers claim them), per tenant for `escalated`. A scrape
/// then costs the same with 10,000 live rows as with 1,000,000 (the e2e test `queue_plans`
/// asserts it from the plan), and `queue_depth` stops counting at this number.
pub const QUEUE_GAUGE_ROWS: i64 = 1000;

/// The scrape's one statement, its bound ([`QUEUE_GAUGE_ROWS`]) written in as a constant so
/// every plan of it, generic or not, knows how few rows it reads: for each tenant and each of
/// `pending`, `escalated`, `approved`, the age in seconds of its oldest row (`approved` rows
/// from `updated_at`, the others from `created_at`) and how many of its rows were read.
/// `pending` and `approved` are read through their claim indexes (`proposals_pending`,
/// `proposals_approved`), at most 1,000 entries each in claim order; `escalated` through
/// `proposals_escalated`, at most 1,000 per tenant. Public so the plan test reads the same text.
pub const QUEUE_GAUGES_SQL: &str = "WITH q AS (
        (SELECT tenant_id, 'pending'::text AS state, created_at AS since
         FROM proposals WHERE state = 'pending' ORDER BY created_at LIMIT 1000)
        UNION ALL
        (SELECT tenant_id, 'approved'::text, updated_at
         FROM proposals WHERE state = 'approved' ORDER BY updated_at LIMIT 1000)
        UNION ALL
        (SELECT e.tenant_id, 'escalated'::text, e.created_at
         FROM tenants t CROSS JOIN LATERAL (
             SELECT tenant_id, created_at FROM proposals
             WHERE tenant_id = t.id AND state = 'escalated' ORDER BY created_at LIMIT 1000) e)
     )
     SELECT t.id, s.state,
            COALESCE(extract(epoch FROM now() - min(q.since))::float8, 0),
            count(q.since)
     FROM tenants t
     CROSS JOIN unnest(ARRAY['pending','escalated','approved']) AS s(state)
     LEFT JOIN q ON q.tenant_id = t.id AND q.state = s.state
     GROUP BY t.id, s.state";

/// Age in seconds of the oldest row per (tenant, state) for `pending`, `escalated` and
/// `approved`, with the row count, as `(tenant, state, age_seconds, count)`. The age is the key
/// signal: a stable count can hide a row that ages unnoticed (the guide's "proposals pile up in
/// pending"). Every tenant gets all three states, an empty one as age 0 and count 0, so the
/// series exist from the first scrape.
///
/// Bounded by [`QUEUE_GAUGE_ROWS`] (see [`QUEUE_GAUGES_SQL`]), so it never counts a whole
/// backlog: a count of [`QUEUE_GAUGE_ROWS`] means "at least that many" (per tenant for
/// `escalated`; for `pending` and `approved`, among the state's oldest rows of all tenants).
/// The oldest rows of every state are always read, so the largest age is always exact; when a
/// `pending` or `approved` backlog exceeds the bound, a tenant none of whose rows is among
/// those oldest shows age 0 and count 0 (its rows are all younger than the ones shown).
pub async fn queue_ages(db: &Db) -> Result<Vec<(String, String, f64, i64)>> {
    let c = db.client().await?;
    let stmt = c.prepare_cached(QUEUE_GAUGES_SQL).await?;
    let rows = c.query(&stmt, &[]).await?;
    Ok(rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect())
}
