//! What the approval web app lists: the queue of escalated proposals, the history of
//! proposals people decided (or let expire), and the approvals recorded on one proposal.
//!
//! Every read runs in a transaction that sets the tenants it may see for row-level security,
//! and also filters by those tenants, so a person never sees another tenant's rows.

use crate::{Db, Result, set_tenant, set_tenants};
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// Optional filters of the queue and history (exact matches).
#[derive(Debug, Clone, Copy, Default)]
pub struct Filter<'a> {
    /// Agent name.
    pub agent: Option<&'a str>,
    /// Action name.
    pub action: Option<&'a str>,
}

/// One proposal row of the queue or the history.
#[derive(Debug, Clone)]
pub struct ListedProposal {
    /// Proposal id.
    pub id: Uuid,
    /// Its tenant.
    pub tenant_id: String,
    /// Name of the agent that proposed it.
    pub agent_name: String,
    /// Action name.
    pub action: String,
    /// Target.
    pub target: String,
    /// Canonical JSON of the params.
    pub params_json: String,
    /// Lifecycle state (`escalated` in the queue).
    pub state: String,
    /// Version of the tenant document that escalated it.
    pub doc_version: Option<i32>,
    /// When it was submitted.
    pub created_at: DateTime<Utc>,
    /// When it last changed state.
    pub updated_at: DateTime<Utc>,
    /// History only: "approve by alice, deny by bob" in decision order; `None` when no person
    /// decided (it expired).
    pub decided_by: Option<String>,
    /// Id of the agent that proposed it.
    pub agent_id: Uuid,
    /// The agent's own reason (agent-written).
    pub agent_reason: Option<String>,
    /// The untrusted text the agent worked from.
    pub source_text: Option<String>,
    /// The rule that escalated it (none: the tenant's default).
    pub rule_name: Option<String>,
    /// The rule's reason, or after a decision the approver's reason.
    pub decision_reason: Option<String>,
    /// Queue only: the warnings of its stored preview (V42), empty when none.
    pub preview_warnings: Vec<String>,
}

/// The queue's extra column: the warnings of the proposal's stored preview.
const PREVIEW_WARNINGS: &str =
    "(SELECT v.warnings FROM proposal_previews v WHERE v.proposal_id = p.id) AS preview_warnings";

const LIST_COLS: &str =
    "p.id, p.tenant_id, a.name AS agent_name, p.action, p.target, p.params_json,
    p.state, p.doc_version, p.created_at, p.updated_at, p.agent_id, p.agent_reason,
    p.source_text, p.rule_name, p.decision_reason";

fn listed(r: &tokio_postgres::Row, decided_by: bool) -> ListedProposal {
    ListedProposal {
        id: r.get("id"),
        tenant_id: r.get("tenant_id"),
        agent_name: r.get("agent_name"),
        action: r.get("action"),
        target: r.get("target"),
        params_json: r.get("params_json"),
        state: r.get("state"),
        doc_version: r.get("doc_version"),
        created_at: r.get("created_at"),
        updated_at: r.get("updated_at"),
        decided_by: if decided_by {
            r.get("decided_by")
        } else {
            None
        },
        agent_id: r.get("agent_id"),
        agent_reason: r.get("agent_reason"),
        source_text: r.get("source_text"),
        rule_name: r.get("rule_name"),
        decision_reason: r.get("decision_reason"),
        preview_warnings: r
            .try_get::<_, Option<serde_json::Value>>("preview_warnings")
            .ok()
            .flatten()
            .and_then(|w| serde_json::from_value(w).ok())
            .unwrap_or_default(),
    }
}

/// Where a queue page starts: after the row with this `(created_at, id)` (keyset paging; the
/// queue's order is `created_at, id`, so a page never repeats or skips a row that stays).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct After {
    /// `created_at` of the last row of the previous page.
    pub created_at: DateTime<Utc>,
    /// Its id (breaks ties between rows submitted in the same microsecond).
    pub id: Uuid,
}

/// One page of the queue (or of the history, [`decided_page`]): its rows and how many rows
/// match in all (same filters, same snapshot).
#[derive(Debug, Clone)]
pub struct QueuePage {
    /// At most `limit` rows, in the list's order (the queue oldest first, the history newest).
    pub rows: Vec<ListedProposal>,
    /// Every row the filters match, on every page; for the history at most
    /// [`HISTORY_COUNT_CAP`] + 1 (more than the cap).
    pub total: i64,
    /// More rows follow this page.
    pub more: bool,
}

/// The condition every queue row meets: escalated, in `$1`'s tenants, matching the filters
/// `$2`/`$3`.
const ESCALATED_WHERE: &str = "p.state = 'escalated' AND p.tenant_id = ANY($1)
    AND ($2::text IS NULL OR a.name = $2) AND ($3::text IS NULL OR p.action = $3)";

/// Escalated proposals of `tenants`, oldest first (`created_at`, then `id`): the `limit` rows
/// after `after` (from the start when `None`), with the total the filters match.
pub async fn escalated_page(
    db: &Db,
    tenants: &[String],
    f: Filter<'_>,
    after: Option<After>,
    limit: i64,
) -> Result<QueuePage> {
    let cursor = (after.map(|a| a.created_at), after.map(|a| a.id));
    let page = format!(
        "SELECT {LIST_COLS}, {PREVIEW_WARNINGS}
         FROM proposals p JOIN agents a ON a.id = p.agent_id
         WHERE {ESCALATED_WHERE}
           AND ($4::timestamptz IS NULL OR (p.created_at, p.id) > ($4, $5::uuid))
         ORDER BY p.created_at, p.id LIMIT $6"
    );
    let count = format!(
        "SELECT count(*) FROM proposals p JOIN agents a ON a.id = p.agent_id WHERE {ESCALATED_WHERE}"
    );
    keyset_page(db, tenants, f, (&page, &count), cursor, limit, false).await
}

/// The oldest escalated proposals of `tenants` (at most `limit`), without a total.
pub async fn escalated(
    db: &Db,
    tenants: &[String],
    f: Filter<'_>,
    limit: i64,
) -> Result<Vec<ListedProposal>> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    set_tenants(&tx, tenants).await?;
    let rows = tx
        .query(
            &format!(
                "SELECT {LIST_COLS}, {PREVIEW_WARNINGS}
                 FROM proposals p JOIN agents a ON a.id = p.agent_id
                 WHERE p.state = 'escalated' AND p.tenant_id = ANY($1)
                   AND ($2::text IS NULL OR a.name = $2) AND ($3::text IS NULL OR p.action = $3)
                 ORDER BY p.created_at, p.id LIMIT $4"
            ),
            &[&tenants, &f.agent, &f.action, &limit],
        )
        .await?;
    tx.commit().await?;
    Ok(rows.iter().map(|r| listed(r, false)).collect())
}

/// Where a history page starts: the last row of the previous page (the history runs newest
/// first by `(updated_at, id)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryAfter {
    /// `updated_at` of the last row of the previous page.
    pub updated_at: DateTime<Utc>,
    /// Its id (breaks ties between rows changed in the same microsecond or statement).
    pub id: Uuid,
}

/// The filters every history row meets besides its state: policy escalated it and it matches
/// the filters `$2`/`$3`.
const DECIDED_MATCH: &str = "p.effect = 'escalate'
    AND ($2::text IS NULL OR a.name = $2) AND ($3::text IS NULL OR p.action = $3)";

/// A history page's rows come after the cursor `$4`/`$5` (newest first; the first page's
/// cursor is `history_start()`). Never NULL and no `COALESCE`: under the web role's row-level
/// security only a leakproof condition bounds an index scan, and an `$4 IS NULL OR …` or a
/// `COALESCE` would make every page read all the rows before it.
const DECIDED_CURSOR: &str = "AND (p.updated_at, p.id) < ($4::timestamptz, $5::uuid)";

/// The cursor of the history's first page: after every row (9999-12-31, the largest id).
fn history_start() -> (DateTime<Utc>, Uuid) {
    (
        DateTime::from_timestamp(253_402_300_799, 0).unwrap_or(DateTime::<Utc>::MAX_UTC),
        Uuid::max(),
    )
}

/// The decided states `proposals_purge` indexes (with `purged_at IS NULL`).
const DECIDED_STATES: &str = "('blocked', 'denied', 'expired', 'succeeded', 'failed', 'outcome_unknown', 'withdrawn', 'amended', 'stale', 'effect_mismatch')";

/// Each history read's order and bound (`$6` rows).
const NEWEST_FIRST: &str = "ORDER BY p.updated_at DESC, p.id DESC LIMIT $6";

/// At most this many rows are counted for the history's total; past it the page says "more
/// than" (counting a long history exactly would read all of it on every page).
pub const HISTORY_COUNT_CAP: i64 = 1000;

/// The history's rows as three index-driven reads, each newest first and at most `$6` rows:
/// the decided, unpurged rows of each tenant of `$1` through `proposals_purge (tenant_id,
/// updated_at)`, the `approved` ones through `proposals_approved` and the `executing` ones
/// through `proposals_executing` (both live queues, small). `select` is the select list,
/// `cursor` the page's cursor condition (or nothing) and `tail` each read's order and bound
/// (or nothing).
fn decided_sources(select: &str, cursor: &str, tail: &str) -> String {
    format!(
        "SELECT d.* FROM unnest($1::text[]) t(tenant) CROSS JOIN LATERAL (
             SELECT {select} FROM proposals p JOIN agents a ON a.id = p.agent_id
             WHERE p.tenant_id = t.tenant AND p.purged_at IS NULL AND p.state IN {DECIDED_STATES}
               AND {DECIDED_MATCH} {cursor}
             {tail}) d
         UNION ALL
         (SELECT {select} FROM proposals p JOIN agents a ON a.id = p.agent_id
          WHERE p.state = 'approved' AND p.tenant_id = ANY($1) AND {DECIDED_MATCH} {cursor}
          {tail})
         UNION ALL
         (SELECT {select} FROM proposals p JOIN agents a ON a.id = p.agent_id
          WHERE p.state = 'executing' AND p.tenant_id = ANY($1) AND {DECIDED_MATCH} {cursor}
          {tail})"
    )
}

/// The statements of [`decided_page`]: the page (`$1` tenants, `$2` agent name, `$3` action,
/// `$4`/`$5` the cursor, never NULL, `$6` the row limit) and the capped total (`$1`–`$3`).
/// Public for the plan tests.
pub fn decided_sql() -> (String, String) {
    let page = format!(
        "SELECT h.*,
            (SELECT string_agg(ap.decision || ' by ' || ap.subject
                 || coalesce(' (' || nullif(ap.comment, '') || ')', ''), ', ' ORDER BY ap.decided_at)
               FROM approvals ap WHERE ap.proposal_id = h.id) AS decided_by
         FROM ({sources}) h
         ORDER BY h.updated_at DESC, h.id DESC LIMIT $6",
        sources = decided_sources(LIST_COLS, DECIDED_CURSOR, NEWEST_FIRST)
    );
    // Each read newest first through its index, stopped at the cap. The cap is a subquery so
    // the generic plan does not weigh a known row count against a sequential scan and a sort
    // of the tenant's whole history (it did, for a one-tenant table).
    let cap = HISTORY_COUNT_CAP + 1;
    let counted = format!("ORDER BY p.updated_at DESC LIMIT (SELECT {cap})");
    let count = format!(
        "SELECT count(*) FROM ({sources} LIMIT {cap}) c",
        sources = decided_sources("1 AS one", "", &counted),
    );
    (page, count)
}

/// One page of the history: proposals of `tenants` that policy escalated and that are no
/// longer waiting (decided by people, or expired), most recently changed first by
/// `(updated_at, id)`: the `limit` rows after `after` (from the newest when `None`), with the
/// total the filters match (same snapshot), counted up to [`HISTORY_COUNT_CAP`] + 1.
/// A row that changes again (`approved → executing → succeeded`) moves to the top, so a
/// person walking the pages forward does not see it twice. Rows the retention purge cleared
/// (`purged_at`) are no longer listed: their params and reasons are gone, and no index orders
/// them (the audit trail keeps their record).
///
/// Each page reads about `limit` rows per tenant through indexes, however long the history
/// (`tests/e2e/read_plans.rs`); a filter that matches few rows reads further.
pub async fn decided_page(
    db: &Db,
    tenants: &[String],
    f: Filter<'_>,
    after: Option<HistoryAfter>,
    limit: i64,
) -> Result<QueuePage> {
    let (at, id) = after.map_or_else(history_start, |a| (a.updated_at, a.id));
    let cursor = (Some(at), Some(id));
    let (page, count) = decided_sql();
    keyset_page(db, tenants, f, (&page, &count), cursor, limit, true).await
}

/// Reads one keyset page and the filters' total in one read-only repeatable-read snapshot.
/// `sql.0` (the page) takes `$1` the tenants, `$2` the agent name, `$3` the action, `$4`/`$5`
/// the cursor (NULLs for the first page) and `$6` the row limit; it is asked for one row more
/// than `limit` to learn whether more follow. `sql.1` (the total) takes `$1`–`$3`. `decided`:
/// the page's rows carry `decided_by`.
async fn keyset_page(
    db: &Db,
    tenants: &[String],
    f: Filter<'_>,
    sql: (&str, &str),
    cursor: (Option<DateTime<Utc>>, Option<Uuid>),
    limit: i64,
    decided: bool,
) -> Result<QueuePage> {
    let mut c = db.client().await?;
    let tx = c
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    set_tenants(&tx, tenants).await?;
    let rows = tx
        .query(
            sql.0,
            &[
                &tenants,
                &f.agent,
                &f.action,
                &cursor.0,
                &cursor.1,
                &(limit + 1),
            ],
        )
        .await?;
    let total: i64 = tx
        .query_one(sql.1, &[&tenants, &f.agent, &f.action])
        .await?
        .get(0);
    tx.commit().await?;
    let more = rows.len() as i64 > limit;
    Ok(QueuePage {
        rows: rows
            .iter()
            .take(usize::try_from(limit).unwrap_or(0))
            .map(|r| listed(r, decided))
            .collect(),
        total,
        more,
    })
}

/// One person's recorded decision on a proposal.
#[derive(Debug, Clone)]
pub struct ApprovalEntry {
    /// OIDC issuer of the person (`breakglass` for the CLI).
    pub issuer: String,
    /// Subject at that issuer.
    pub subject: String,
    /// Email at the time, for display only.
    pub email: Option<String>,
    /// `approve` or `deny`.
    pub decision: String,
    /// When.
    pub decided_at: DateTime<Utc>,
    /// `web` or `breakglass`.
    pub channel: String,
    /// The reason the person gave (deny quick pick and note), if any.
    pub comment: Option<String>,
    /// For an Approve signed with a passkey: how long before signing the key was registered,
    /// in seconds (database clock), so the page can say when it was less than a day.
    pub passkey_age_secs: Option<f64>,
}

/// The decisions recorded on proposal `id` of `tenant` in its current approval round (those of
/// a round made void when a run went back to the approvers are in the audit log), in order.
pub async fn approvals_of(db: &Db, tenant: &str, id: Uuid) -> Result<Vec<ApprovalEntry>> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    set_tenant(&tx, tenant).await?;
    let rows = tx
        .query(
            "SELECT a.subject, a.email, a.decision, a.decided_at, a.channel, a.issuer, a.comment,
                    extract(epoch FROM ap.created_at - k.created_at)::float8 AS passkey_age_secs
             FROM approvals a
             LEFT JOIN approval_passkeys ap ON ap.proposal_id = a.proposal_id AND ap.round = a.round AND ap.issuer = a.issuer AND ap.subject = a.subject
             LEFT JOIN passkeys k ON k.tenant_id = ap.tenant_id AND k.credential_id = ap.credential_id
             WHERE a.tenant_id = $1 AND a.proposal_id = $2
               AND a.round = (SELECT approval_round FROM proposals WHERE id = $2)
             ORDER BY a.decided_at",
            &[&tenant, &id],
        )
        .await?;
    tx.commit().await?;
    Ok(rows
        .iter()
        .map(|r| ApprovalEntry {
            issuer: r.get("issuer"),
            subject: r.get("subject"),
            email: r.get("email"),
            decision: r.get("decision"),
            decided_at: r.get("decided_at"),
            channel: r.get("channel"),
            comment: r.get("comment"),
            passkey_age_secs: r.get("passkey_age_secs"),
        })
        .collect())
}

/// One person's decisions on a tenant over a window (the tenant admins' Approvers page).
#[derive(Debug, Clone)]
pub struct ApproverStat {
    /// OIDC issuer of the person.
    pub issuer: String,
    /// Subject at that issuer.
    pub subject: String,
    /// Latest email seen, for display.
    pub email: Option<String>,
    /// Decisions in the window.
    pub decisions: i64,
    /// Of which approvals.
    pub approvals: i64,
    /// Median seconds on the page before deciding, over decisions with a measured time.
    pub median_seconds: Option<f64>,
    /// Approvals made in under five seconds on the page.
    pub fast_approvals: i64,
}

/// Decisions per person on `tenant` in the last `days` days, most decisions first.
pub async fn approver_stats(db: &Db, tenant: &str, days: i32) -> Result<Vec<ApproverStat>> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    set_tenant(&tx, tenant).await?;
    let rows = tx
        .query(
            "SELECT issuer, subject, (array_agg(email ORDER BY decided_at DESC))[1] AS email,
                    count(*) AS decisions,
                    count(*) FILTER (WHERE decision = 'approve') AS approvals,
                    percentile_cont(0.5) WITHIN GROUP (ORDER BY seconds_on_page) AS median_seconds,
                    count(*) FILTER (WHERE decision = 'approve' AND seconds_on_page < 5) AS fast_approvals
             FROM approvals
             WHERE tenant_id = $1 AND decided_at > now() - make_interval(days => $2)
             GROUP BY issuer, subject
             ORDER BY decisions DESC, subject",
            &[&tenant, &days],
        )
        .await?;
    tx.commit().await?;
    Ok(rows
        .iter()
        .map(|r| ApproverStat {
            issuer: r.get("issuer"),
            subject: r.get("subject"),
            email: r.get("email"),
            decisions: r.get("decisions"),
            approvals: r.get("approvals"),
            median_seconds: r.get("median_seconds"),
            fast_approvals: r.get("fast_approvals"),
        })
        .collect())
}
