//! The policy worker's queue: claim `pending` rows with `FOR UPDATE SKIP LOCKED`, record the
//! decision, issue the grant on `allow` — all in one transaction with the audit events.

use crate::proposals::{PROPOSAL_COLUMNS, ProposalRow};
use crate::{Result, audit, grants};
use actiond_core::audit::AuditKind;
use actiond_core::grant::GrantSigner;
use actiond_core::policy::{CompiledPolicy, Decision, Effect, EvalInput, History};
use actiond_core::state::ProposalState;
use deadpool_postgres::Transaction;
use serde_json::json;
use std::time::Duration;
use uuid::Uuid;

/// Records a batch of decisions in one statement: the grants of the `allow`ed rows, the
/// decisions and one `proposal.decided` event per decided row. `$1` ids, `$2` new states, `$3`
/// effects, `$4` rule names, `$5` reasons, `$6` document versions, `$7` document SHA-256s, `$8`
/// the state each row must still be in (`pending`; the rows are locked by this transaction's
/// claim), `$9` the events' details (jsonb), `$10` the events' actor; `$11`–`$21` the grants
/// ([`grants::insert_sql`]: eight arrays, `issued_by`, the preview hashes, all null: policy's
/// allow has no preview, then the signed document hashes; empty arrays for none). Returns
/// the number of rows it moved; each moved row's event is written from the row itself, and an
/// event that is not written fails the whole statement ([`audit::events_match`]).
///
/// Each row is found by primary key. The expected state is a column of the batch rather than a
/// constant so that no plan can read the `pending` queue through its partial index
/// (`proposals_pending`) and filter it by id: statistics of a queue are always stale, and such a
/// plan reads the whole backlog for every batch (measured: all 49 pending rows for a batch of
/// 12; the whole backlog at 10,000). `tests/e2e/queue_plans.rs` checks the plan.
///
/// `decided_at` is never before `created_at`: `now()` is the start of this transaction, which
/// may begin before the submission it decides commits (`greatest(now(), created_at)`; V27
/// stamps `updated_at` the same way).
pub static DECIDE_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "WITH g AS (
            {grants}
         ), d AS (
            UPDATE proposals p SET state = u.state, effect = u.effect, rule_name = u.rule, decision_reason = u.reason,
                   doc_version = u.version, doc_sha256 = u.sha, decided_at = greatest(now(), p.created_at)
            FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int4[], $7::text[], $8::text[], $9::jsonb[])
                 AS u(id, state, effect, rule, reason, version, sha, from_state, detail)
            WHERE p.id = u.id AND p.state = u.from_state
            RETURNING p.id, p.tenant_id, p.intent_hash, p.params_sha256, u.from_state, u.state, u.detail
         ), ev AS (
            INSERT INTO audit_events ({cols})
            SELECT tenant_id, id, '{kind}', $10::text, from_state, state, intent_hash, params_sha256, detail FROM d
            RETURNING proposal_id
         )
         SELECT (SELECT count(*) FROM d), {check}",
        grants = grants::insert_sql(11),
        cols = audit::EVENT_COLUMNS,
        kind = AuditKind::ProposalDecided.as_str(),
        check = audit::events_match(AuditKind::ProposalDecided, "ev", "d"),
    )
});

/// The policy worker's claim ([`claim`]): `$1` the batch size. Returns [`PROPOSAL_COLUMNS`],
/// `latest_doc_version` and `now_us`, oldest first. Each claimed row's agent is one
/// primary-key probe ([`crate::proposals::AGENT_OF_P`]).
pub static CLAIM_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "WITH p AS (
            SELECT * FROM proposals WHERE state = 'pending'
               AND NOT EXISTS (SELECT 1 FROM tenant_moves m WHERE m.tenant_id = proposals.tenant_id)
             ORDER BY created_at LIMIT $1 FOR UPDATE SKIP LOCKED
         ), {latest}
         SELECT {PROPOSAL_COLUMNS}, l.version AS latest_doc_version, {now_us} AS now_us
         FROM p {agent} LEFT JOIN latest l ON l.tenant_id = p.tenant_id
         ORDER BY p.created_at",
        latest = crate::tenants::LATEST_PER_CLAIMED_TENANT_SQL,
        now_us = grants::NOW_US_SQL,
        agent = crate::proposals::AGENT_OF_P,
    )
});

/// A claimed batch of `pending` proposals, locked by the claiming transaction.
#[derive(Debug, Clone)]
pub struct Claimed {
    /// The proposals, oldest first.
    pub rows: Vec<ProposalRow>,
    /// Each claimed row's tenant's latest document version, read by the claim (`None`: the
    /// tenant has none).
    pub latest: std::collections::HashMap<String, Option<i32>>,
    /// The claiming transaction's `now()` in microseconds since the epoch (what grant expiries
    /// are computed from; see [`grants::NOW_US_SQL`]).
    pub now_us: i64,
}

/// Claims up to `limit` pending proposals, oldest first, locking them for this transaction.
/// Other workers skip locked rows (`SKIP LOCKED`), so replicas never decide one row twice. The
/// same statement reads each tenant's latest document version (once per tenant of the batch,
/// [`crate::tenants::LATEST_PER_CLAIMED_TENANT_SQL`]) and the transaction's clock, so a batch
/// needs no other read before its decision. The rows come from the locking read itself (their
/// newest versions), with no second probe of `proposals`. A tenant that moved to another cell
/// (V44 `tenant_moves`) is skipped: its pending proposals are decided there.
pub async fn claim(tx: &Transaction<'_>, limit: i64) -> Result<Claimed> {
    let stmt = tx.prepare_cached(&CLAIM_SQL).await?;
    let found = tx.query(&stmt, &[&limit]).await?;
    let mut latest = std::collections::HashMap::new();
    let mut now_us = 0;
    for r in &found {
        latest.insert(
            r.try_get::<_, String>("tenant_id")?,
            r.try_get::<_, Option<i32>>("latest_doc_version")?,
        );
        now_us = r.try_get("now_us")?;
    }
    Ok(Claimed {
        rows: ProposalRow::from_rows(&found)?,
        latest,
        now_us,
    })
}

/// What `policy`'s rules see for `row`: its [`EvalInput`], with the agent's history over the
/// document's `history_window` when a rule reads `history` and the action has a handler
/// (otherwise an empty history). The policy worker and the executor's re-check both build
/// their input here, so both evaluate the same thing.
pub async fn rules_input<C: deadpool_postgres::GenericClient>(
    c: &C,
    policy: &CompiledPolicy,
    row: &ProposalRow,
) -> Result<EvalInput> {
    let uses_history = policy
        .doc
        .policy
        .rules
        .iter()
        .any(|r| r.when.contains("history"));
    let history = match policy.doc.handler(&row.action) {
        Some(h) if uses_history => {
            history(
                c,
                &row.tenant_id,
                row.agent_id,
                &row.action,
                policy.doc.policy.history_window,
                h.kind.history_sum_param(),
                row.id,
            )
            .await?
        }
        _ => History::default(),
    };
    let mut input = row.eval_input(history);
    // `now` in rules is the database clock (the transaction's `now()`), read only when a rule
    // reads it.
    if actiond_core::policy::reads_now(policy) {
        let stmt = c.prepare_cached("SELECT now()").await?;
        input.now = Some(c.query_one(&stmt, &[]).await?.try_get(0)?);
    }
    Ok(input)
}

/// The agent's recent history of the same action: count, and the sum of `sum_param` when the
/// handler has one, over the proposals in the same currency as `exclude` (the proposal being
/// decided; amounts in other currencies are not added). Every state counts (pending,
/// escalated, approved, executing, succeeded, failed, outcome_unknown) except blocked, denied,
/// expired and withdrawn ones; `exclude` itself does not count.
pub async fn history<C: deadpool_postgres::GenericClient>(
    c: &C,
    tenant: &str,
    agent: Uuid,
    action: &str,
    window: Duration,
    sum_param: Option<&str>,
    exclude: Uuid,
) -> Result<History> {
    history_as_of(c, tenant, agent, action, window, sum_param, exclude, None).await
}

/// Moves `pending` and `escalated` proposals of `tenant` older than `ttl` to `expired`, with
/// their audit events, in the caller's transaction. Returns how many expired.
pub async fn expire_stale(tx: &Transaction<'_>, tenant: &str, ttl: Duration) -> Result<u64> {
    let secs = ttl.as_secs_f64();
    let stmt = tx
        .prepare_cached(
            "WITH old AS (
                SELECT id, state FROM proposals
                WHERE tenant_id = $1 AND state IN ('pending','escalated') AND created_at < now() - make_interval(secs => $2)
                  AND NOT EXISTS (SELECT 1 FROM tenant_moves m WHERE m.tenant_id = $1)
                FOR UPDATE SKIP LOCKED
             )
             UPDATE proposals p SET state = 'expired', decision_reason = 'nobody decided before the escalation_ttl'
             FROM old WHERE p.id = old.id
             RETURNING p.id, old.state AS from_state, p.intent_hash, p.params_sha256",
        )
        .await?;
    let moved = tx.query(&stmt, &[&tenant, &secs]).await?;
    let mut events = Vec::with_capacity(moved.len());
    for r in &moved {
        let from: &str = r.try_get("from_state")?;
        let from = from
            .parse::<ProposalState>()
            .map_err(|e| crate::StoreError::Config(e.to_string()))?;
        events.push(
            audit::Event::new(
                tenant,
                Some(r.try_get("id")?),
                AuditKind::ProposalExpired,
                "policy",
                json!({"ttl_seconds": secs}),
            )
            .transition(Some(from), ProposalState::Expired)
            .hashes(r.try_get("intent_hash")?, r.try_get("params_sha256")?),
        );
    }
    audit::write_batch(tx, &events).await?;
    Ok(moved.len() as u64)
}

/// Proposals of `tenant` created within `since` that policy decided (`effect` set), oldest
/// first, for `actiond policy test` (what-if replay).
pub async fn decided_since<C: deadpool_postgres::GenericClient>(
    c: &C,
    tenant: &str,
    since: Duration,
) -> Result<Vec<ProposalRow>> {
    let rows = c
        .query(
            &format!(
                "SELECT {PROPOSAL_COLUMNS}
                 FROM proposals p JOIN agents a ON a.id = p.agent_id
                 WHERE p.tenant_id = $1 AND p.effect IS NOT NULL AND p.created_at > now() - make_interval(secs => $2)
                 ORDER BY p.created_at"
            ),
            &[&tenant, &since.as_secs_f64()],
        )
        .await?;
    ProposalRow::from_rows(&rows)
}

/// The agent's history as it was when `at` was submitted (same rules as [`history`]).
#[expect(
    clippy::too_many_arguments,
    reason = "the history query's parameters, one argument each"
)]
pub async fn history_at<C: deadpool_postgres::GenericClient>(
    c: &C,
    tenant: &str,
    agent: Uuid,
    action: &str,
    window: Duration,
    sum_param: Option<&str>,
    exclude: Uuid,
    at: chrono::DateTime<chrono::Utc>,
) -> Result<History> {
    history_as_of(
        c,
        tenant,
        agent,
        action,
        window,
        sum_param,
        exclude,
        Some(at),
    )
    .await
}

/// One query for both: `at = None` means the database's `now()`. A proposal counts unless it
/// had already reached a final refusal (blocked, denied, expired) by then.
#[expect(
    clippy::too_many_arguments,
    reason = "the history query's parameters, one argument each"
)]
async fn history_as_of<C: deadpool_postgres::GenericClient>(
    c: &C,
    tenant: &str,
    agent: Uuid,
    action: &str,
    window: Duration,
    sum_param: Option<&str>,
    exclude: Uuid,
    at: Option<chrono::DateTime<chrono::Utc>>,
) -> Result<History> {
    let secs = window.as_secs_f64();
    let stmt = c
        .prepare_cached(
            "SELECT count(*), COALESCE(sum(CASE WHEN $5::text IS NOT NULL AND jsonb_typeof(params_json::jsonb -> $5::text) = 'number'
                        AND (params_json::jsonb -> 'currency') IS NOT DISTINCT FROM
                            (SELECT params_json::jsonb -> 'currency' FROM proposals WHERE id = $6)
                        THEN (params_json::jsonb ->> $5::text)::numeric ELSE 0 END), 0)::bigint
             FROM proposals
             WHERE tenant_id = $1 AND agent_id = $2 AND action = $3 AND id <> $6
               AND created_at > COALESCE($7::timestamptz, now()) - make_interval(secs => $4)
               AND ($7::timestamptz IS NULL OR created_at <= $7::timestamptz)
               AND NOT (state IN ('blocked','denied','expired','withdrawn','amended','stale') AND updated_at <= COALESCE($7::timestamptz, now()))",
        )
        .await?;
    let r = c
        .query_one(
            &stmt,
            &[&tenant, &agent, &action, &secs, &sum_param, &exclude, &at],
        )
        .await?;
    Ok(History {
        count: r.get(0),
        sum: r.get(1),
    })
}

/// One decided row of a batch.
pub struct DecidedRow<'a> {
    /// The claimed row.
    pub row: &'a ProposalRow,
    /// The decision.
    pub decision: Decision,
    /// Document version used (None when the tenant has no document).
    pub doc_version: Option<i32>,
    /// Its sha256.
    pub doc_sha256: Option<String>,
    /// Grant lifetime for `allow`.
    pub grant_lifetime: Duration,
    /// What the tenant's classifier answered, when one was asked (recorded in the
    /// `proposal.decided` audit event as `classifier`).
    pub classifier: Option<serde_json::Value>,
}

/// The state a policy effect moves a `pending` proposal to.
fn state_of(effect: Effect) -> ProposalState {
    match effect {
        Effect::Allow => ProposalState::Approved,
        Effect::Escalate => ProposalState::Escalated,
        Effect::Block => ProposalState::Blocked,
    }
}

/// Records a whole batch of decisions in one statement ([`DECIDE_SQL`]) using `unnest`,
/// instead of several round trips per row: state/effect/rule/reason/version, a grant on
/// `allow` (signed by [`grants::sign_many`], expiring from `now_us`, the claiming
/// transaction's clock), one audit event per row. CEL errors go to the audit event only.
/// Returns the number of grants issued.
///
/// Errors: [`crate::StoreError::Conflict`] when a row was not moved (each is locked by this
/// transaction's claim, so this means a bug; the caller's transaction must then be dropped).
pub async fn record_batch(
    tx: &Transaction<'_>,
    rows: &[DecidedRow<'_>],
    signer: &GrantSigner,
    now_us: i64,
) -> Result<usize> {
    if rows.is_empty() {
        return Ok(0);
    }
    let requests: Vec<grants::GrantRequest<'_>> = rows
        .iter()
        .filter(|d| d.decision.effect == Effect::Allow)
        .filter_map(|d| {
            d.doc_version.map(|v| grants::GrantRequest {
                proposal_id: d.row.id,
                tenant_id: &d.row.tenant_id,
                intent_hash: &d.row.intent_hash,
                doc_version: v,
                lifetime: d.grant_lifetime,
                preview_sha256: None,
                doc_sha256: d.doc_sha256.as_deref(),
            })
        })
        .collect();
    let signed = grants::sign_many(signer, &requests, now_us)?;
    let grant_of: std::collections::HashMap<Uuid, Uuid> = signed
        .iter()
        .map(|g| (g.claims.proposal_id, g.claims.id))
        .collect();
    let (mut ids, mut states, mut effects, mut rules, mut reasons, mut versions, mut shas) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    let mut details = Vec::with_capacity(rows.len());
    for d in rows {
        let state = state_of(d.decision.effect);
        let grant_id = grant_of.get(&d.row.id).copied();
        ids.push(d.row.id);
        states.push(state.as_str());
        effects.push(d.decision.effect.as_str());
        rules.push(d.decision.rule.clone());
        reasons.push(d.decision.reason.clone());
        versions.push(d.doc_version);
        shas.push(d.doc_sha256.clone());
        details.push(json!({
            "effect": d.decision.effect.as_str(),
            "rule": d.decision.rule,
            "reason": d.decision.reason,
            "errors": d.decision.errors,
            "doc_version": d.doc_version,
            "doc_sha256": d.doc_sha256,
            "grant_id": grant_id,
            "key_id": grant_id.map(|_| signer.key_id()),
            "classifier": d.classifier,
            // True (else null) like the freeze's denials and the executor's refusal,
            // so `detail->>'agent_frozen' = 'true'` finds all a freeze stopped.
            "agent_frozen": d.row.agent_frozen.then_some(true),
            "agent_revoked": d.row.agent_revoked.then_some(true),
        }));
    }
    let stmt = tx.prepare_cached(&DECIDE_SQL).await?;
    let from = vec![ProposalState::Pending.as_str(); ids.len()];
    let cols = grants::GrantColumns::of(&signed);
    let actor = "policy";
    let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![
        &ids, &states, &effects, &rules, &reasons, &versions, &shas, &from, &details, &actor,
    ];
    params.extend(cols.params());
    params.push(&actor);
    params.push(cols.previews());
    params.push(cols.docs());
    let moved: i64 = tx.query_one(&stmt, &params).await?.try_get(0)?;
    if moved != ids.len() as i64 {
        return Err(crate::StoreError::Conflict(format!(
            "{moved} of {} claimed proposals were decided; the batch is not recorded",
            ids.len()
        )));
    }
    Ok(signed.len())
}
