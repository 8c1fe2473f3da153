//! The policy worker's queue: claim `pending` rows with `FOR UPDATE SKIP LOCKED`, record the
//! decision, issue the grant on `allow` — all in one transaction with the audit events.

use crate::{Result, grants};
use actiond_core::grant::GrantSigner;
use actiond_core::policy::{Decision, Effect, History};
use deadpool_postgres::Transaction;
use serde_json::json;
use std::time::Duration;
use uuid::Uuid;

/// A claimed pending proposal with what rules need about its agent.
#[derive(Debug, Clone)]
pub struct PendingRow {
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
    /// Canonical params.
    pub params_json: String,
    /// SHA-256 of params.
    pub params_sha256: String,
    /// Intent hash.
    pub intent_hash: String,
    /// Session id.
    pub session_id: Option<String>,
}

impl PendingRow {
    /// Reads columns 0–10 in the order `p.id, p.tenant_id, p.agent_id, a.name,
    /// a.owner_subject, p.action, p.target, p.params_json, p.params_sha256, p.intent_hash,
    /// p.session_id` (the queries here select them first).
    fn from_row(r: &tokio_postgres::Row) -> Self {
        Self {
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
        }
    }

    /// What the tenant's rules see for this proposal, given its agent's `history`.
    pub fn eval_input(&self, history: History) -> actiond_core::policy::EvalInput {
        actiond_core::policy::EvalInput {
            action: self.action.clone(),
            target: self.target.clone(),
            params: serde_json::from_str(&self.params_json).unwrap_or(serde_json::Value::Null),
            agent: actiond_core::policy::AgentFacts {
                id: self.agent_id.to_string(),
                name: self.agent_name.clone(),
                owner: self.agent_owner.clone().unwrap_or_default(),
            },
            session: self.session_id.clone().unwrap_or_default(),
            history,
        }
    }
}

/// Claims up to `limit` pending proposals, oldest first, locking them for this transaction.
/// Other workers skip locked rows (`SKIP LOCKED`), so replicas never decide one row twice.
pub async fn claim(tx: &Transaction<'_>, limit: i64) -> Result<Vec<PendingRow>> {
    let stmt = tx
        .prepare_cached(
            "SELECT p.id, p.tenant_id, p.agent_id, a.name, a.owner_subject, p.action, p.target, p.params_json,
                    p.params_sha256, p.intent_hash, p.session_id
             FROM proposals p JOIN agents a ON a.id = p.agent_id
             WHERE p.id IN (SELECT id FROM proposals WHERE state = 'pending' ORDER BY created_at LIMIT $1 FOR UPDATE SKIP LOCKED)",
        )
        .await?;
    Ok(tx
        .query(&stmt, &[&limit])
        .await?
        .iter()
        .map(PendingRow::from_row)
        .collect())
}

/// The agent's recent history of the same action: count, and the sum of `sum_param` when the
/// handler has one. Blocked, denied and expired proposals and `exclude` itself do not count.
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
/// their audit events, in one statement. Returns how many expired.
pub async fn expire_stale<C: deadpool_postgres::GenericClient>(
    c: &C,
    tenant: &str,
    ttl: Duration,
) -> Result<u64> {
    let secs = ttl.as_secs_f64();
    let stmt = c
        .prepare_cached(
            "WITH old AS (
                SELECT id, state FROM proposals
                WHERE tenant_id = $1 AND state IN ('pending','escalated') AND created_at < now() - make_interval(secs => $2)
                FOR UPDATE SKIP LOCKED
             ), moved AS (
                UPDATE proposals p SET state = 'expired', decision_reason = 'nobody decided before the escalation_ttl'
                FROM old WHERE p.id = old.id
                RETURNING p.id, old.state AS from_state, p.intent_hash, p.params_sha256
             )
             INSERT INTO audit_events (tenant_id, proposal_id, kind, actor, from_state, to_state, intent_hash, params_sha256, detail)
             SELECT $1, id, 'proposal.expired', 'policy', from_state, 'expired', intent_hash, params_sha256,
                    jsonb_build_object('ttl_seconds', $2)
             FROM moved",
        )
        .await?;
    Ok(c.execute(&stmt, &[&tenant, &secs]).await?)
}

/// A decided proposal as recorded, for `actiond policy test` (what-if replay).
#[derive(Debug, Clone)]
pub struct RecordedDecision {
    /// The proposal as the policy worker saw it.
    pub row: PendingRow,
    /// The effect recorded at the time.
    pub effect: String,
    /// The rule recorded at the time.
    pub rule: Option<String>,
    /// Submission time.
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// Proposals of `tenant` created within `since` that policy decided, oldest first.
pub async fn decided_since<C: deadpool_postgres::GenericClient>(
    c: &C,
    tenant: &str,
    since: Duration,
) -> Result<Vec<RecordedDecision>> {
    let rows = c
        .query(
            "SELECT p.id, p.tenant_id, p.agent_id, a.name, a.owner_subject, p.action, p.target, p.params_json,
                    p.params_sha256, p.intent_hash, p.session_id, p.effect, p.rule_name, p.created_at
             FROM proposals p JOIN agents a ON a.id = p.agent_id
             WHERE p.tenant_id = $1 AND p.effect IS NOT NULL AND p.created_at > now() - make_interval(secs => $2)
             ORDER BY p.created_at",
            &[&tenant, &since.as_secs_f64()],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| RecordedDecision {
            row: PendingRow::from_row(r),
            effect: r.get(11),
            rule: r.get(12),
            created_at: r.get(13),
        })
        .collect())
}

/// The agent's history as it was when `at` was submitted (same rules as [`history`]).
#[allow(clippy::too_many_arguments)]
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
#[allow(clippy::too_many_arguments)]
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
                        THEN (params_json::jsonb ->> $5::text)::numeric ELSE 0 END), 0)::bigint
             FROM proposals
             WHERE tenant_id = $1 AND agent_id = $2 AND action = $3 AND id <> $6
               AND created_at > COALESCE($7::timestamptz, now()) - make_interval(secs => $4)
               AND ($7::timestamptz IS NULL OR created_at <= $7::timestamptz)
               AND NOT (state IN ('blocked','denied','expired') AND updated_at <= COALESCE($7::timestamptz, now()))",
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
    pub row: &'a PendingRow,
    /// The decision.
    pub decision: Decision,
    /// Document version used (None when the tenant has no document).
    pub doc_version: Option<i32>,
    /// Its sha256.
    pub doc_sha256: Option<String>,
    /// Grant lifetime for `allow`.
    pub grant_lifetime: Duration,
}

/// The state a policy effect moves a `pending` proposal to.
fn state_of(effect: Effect) -> &'static str {
    match effect {
        Effect::Allow => "approved",
        Effect::Escalate => "escalated",
        Effect::Block => "blocked",
    }
}

/// Records a whole batch of decisions in three statements (proposals, grants, audit events)
/// using `unnest`, instead of several round trips per row: state/effect/rule/reason/version,
/// a grant on `allow` (issued by [`grants::issue_many`]), one audit event per row. CEL errors
/// go to the audit event only. Returns the number of grants issued.
pub async fn record_batch(
    tx: &Transaction<'_>,
    rows: &[DecidedRow<'_>],
    signer: &GrantSigner,
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
            })
        })
        .collect();
    let issued = grants::issue_many(tx, signer, &requests, "policy").await?;
    let grant_of: std::collections::HashMap<Uuid, Uuid> =
        issued.iter().map(|c| (c.proposal_id, c.id)).collect();
    let (mut ids, mut states, mut effects, mut rules, mut reasons, mut versions, mut shas) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    let (mut a_tenants, mut a_props, mut a_to, mut a_intents, mut a_params, mut a_detail) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    for d in rows {
        let state = state_of(d.decision.effect);
        let grant_id = grant_of.get(&d.row.id).copied();
        ids.push(d.row.id);
        states.push(state);
        effects.push(d.decision.effect.as_str());
        rules.push(d.decision.rule.clone());
        reasons.push(d.decision.reason.clone());
        versions.push(d.doc_version);
        shas.push(d.doc_sha256.clone());
        a_tenants.push(d.row.tenant_id.clone());
        a_props.push(d.row.id);
        a_to.push(state);
        a_intents.push(d.row.intent_hash.clone());
        a_params.push(d.row.params_sha256.clone());
        a_detail.push(json!({
            "effect": d.decision.effect.as_str(),
            "rule": d.decision.rule,
            "reason": d.decision.reason,
            "errors": d.decision.errors,
            "doc_version": d.doc_version,
            "doc_sha256": d.doc_sha256,
            "grant_id": grant_id,
            "key_id": grant_id.map(|_| signer.key_id()),
        }));
    }
    let upd = tx
        .prepare_cached(
            "UPDATE proposals p SET state = u.state, effect = u.effect, rule_name = u.rule, decision_reason = u.reason,
                    doc_version = u.version, doc_sha256 = u.sha, decided_at = now()
             FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int4[], $7::text[])
                  AS u(id, state, effect, rule, reason, version, sha)
             WHERE p.id = u.id AND p.state = 'pending'",
        )
        .await?;
    tx.execute(
        &upd,
        &[&ids, &states, &effects, &rules, &reasons, &versions, &shas],
    )
    .await?;
    let aud = tx
        .prepare_cached(
            "INSERT INTO audit_events (tenant_id, proposal_id, kind, actor, from_state, to_state, intent_hash, params_sha256, detail)
             SELECT a.tenant_id, a.proposal_id, 'proposal.decided', 'policy', 'pending', a.to_state, a.intent_hash, a.params_sha256, a.detail
             FROM unnest($1::text[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::jsonb[])
                  AS a(tenant_id, proposal_id, to_state, intent_hash, params_sha256, detail)",
        )
        .await?;
    tx.execute(
        &aud,
        &[
            &a_tenants, &a_props, &a_to, &a_intents, &a_params, &a_detail,
        ],
    )
    .await?;
    Ok(issued.len())
}
