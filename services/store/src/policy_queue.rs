//! The policy worker's queue: claim `pending` rows with `FOR UPDATE SKIP LOCKED`, record the
//! decision, issue the grant on `allow` — all in one transaction with the audit events.

use crate::{Result, audit, grants};
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

/// How a decided row is recorded.
pub struct Recorded {
    /// The state the proposal moved to.
    pub state: &'static str,
    /// The grant id when one was issued.
    pub grant_id: Option<Uuid>,
}

/// Records a decision on a claimed row: state, effect, rule, reason, document version and
/// sha256; on `allow` issues the grant with `signer`; writes the audit event. CEL errors go to
/// the audit event only.
#[allow(clippy::too_many_arguments)]
pub async fn record(
    tx: &Transaction<'_>,
    row: &PendingRow,
    decision: &Decision,
    doc_version: Option<i32>,
    doc_sha256: Option<&str>,
    signer: &GrantSigner,
    grant_lifetime: Duration,
) -> Result<Recorded> {
    let state = match decision.effect {
        Effect::Allow => "approved",
        Effect::Escalate => "escalated",
        Effect::Block => "blocked",
    };
    let stmt = tx
        .prepare_cached(
            "UPDATE proposals SET state = $2, effect = $3, rule_name = $4, decision_reason = $5, doc_version = $6,
                    doc_sha256 = $7, decided_at = now()
             WHERE id = $1 AND state = 'pending'",
        )
        .await?;
    tx.execute(
        &stmt,
        &[
            &row.id,
            &state,
            &decision.effect.as_str(),
            &decision.rule,
            &decision.reason,
            &doc_version,
            &doc_sha256,
        ],
    )
    .await?;
    let mut grant_id = None;
    if decision.effect == Effect::Allow
        && let Some(v) = doc_version
    {
        let claims = grants::issue(
            tx,
            signer,
            row.id,
            &row.tenant_id,
            &row.intent_hash,
            v,
            grant_lifetime,
            "policy",
        )
        .await?;
        grant_id = Some(claims.id);
    }
    audit::write(
        tx,
        &audit::Event {
            tenant_id: &row.tenant_id,
            proposal_id: Some(row.id),
            kind: "proposal.decided",
            actor: "policy",
            from_state: Some("pending"),
            to_state: Some(state),
            intent_hash: Some(&row.intent_hash),
            params_sha256: Some(&row.params_sha256),
            detail: json!({
                "effect": decision.effect.as_str(),
                "rule": decision.rule,
                "reason": decision.reason,
                "errors": decision.errors,
                "doc_version": doc_version,
                "doc_sha256": doc_sha256,
                "grant_id": grant_id,
                "key_id": grant_id.map(|_| signer.key_id()),
            }),
        },
    )
    .await?;
    Ok(Recorded { state, grant_id })
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

/// Records a whole batch of decisions in three statements (proposals, grants, audit events)
/// using `unnest`, instead of several round trips per row. Same effects as [`record`]:
/// state/effect/rule/reason/version, a grant on `allow` (expiry from the transaction's
/// database clock), one audit event per row. Returns the number of grants issued.
pub async fn record_batch(
    tx: &Transaction<'_>,
    rows: &[DecidedRow<'_>],
    signer: &GrantSigner,
) -> Result<usize> {
    use actiond_core::grant::{GRANT_VERSION, GrantClaims};
    if rows.is_empty() {
        return Ok(0);
    }
    // now() is the transaction's start time: one read serves every grant of the batch.
    let now_us: i64 = tx
        .query_one("SELECT (extract(epoch FROM now()) * 1000000)::bigint", &[])
        .await?
        .get(0);
    let (mut ids, mut states, mut effects, mut rules, mut reasons, mut versions, mut shas) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
    );
    let (
        mut g_ids,
        mut g_props,
        mut g_tenants,
        mut g_intents,
        mut g_versions,
        mut g_exp,
        mut g_sigs,
    ) = (
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::<Vec<u8>>::new(),
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
        let state = match d.decision.effect {
            Effect::Allow => "approved",
            Effect::Escalate => "escalated",
            Effect::Block => "blocked",
        };
        let mut grant_id = None;
        if let (Effect::Allow, Some(v)) = (d.decision.effect, d.doc_version) {
            let claims = GrantClaims {
                version: GRANT_VERSION,
                id: Uuid::new_v4(),
                proposal_id: d.row.id,
                tenant_id: d.row.tenant_id.clone(),
                intent_hash: d.row.intent_hash.clone(),
                doc_version: v,
                expires_at: now_us.saturating_add(
                    i64::try_from(d.grant_lifetime.as_micros()).unwrap_or(i64::MAX),
                ),
                key_id: signer.key_id().to_owned(),
            };
            let sig = signer
                .sign(&claims)
                .map_err(|e| crate::StoreError::Config(e.to_string()))?;
            grant_id = Some(claims.id);
            g_ids.push(claims.id);
            g_props.push(d.row.id);
            g_tenants.push(d.row.tenant_id.clone());
            g_intents.push(d.row.intent_hash.clone());
            g_versions.push(v);
            g_exp.push(claims.expires_at);
            g_sigs.push(sig);
        }
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
    if !g_ids.is_empty() {
        let ins = tx
            .prepare_cached(
                "INSERT INTO grants (id, proposal_id, tenant_id, intent_hash, doc_version, expires_at_us, expires_at, key_id, sig, issued_by)
                 SELECT g.id, g.proposal_id, g.tenant_id, g.intent_hash, g.version, g.exp,
                        'epoch'::timestamptz + (g.exp::text || ' microseconds')::interval, $8, g.sig, 'policy'
                 FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::int4[], $6::int8[], $7::bytea[])
                      AS g(id, proposal_id, tenant_id, intent_hash, version, exp, sig)",
            )
            .await?;
        tx.execute(
            &ins,
            &[
                &g_ids,
                &g_props,
                &g_tenants,
                &g_intents,
                &g_versions,
                &g_exp,
                &g_sigs,
                &signer.key_id(),
            ],
        )
        .await?;
    }
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
    Ok(g_ids.len())
}
