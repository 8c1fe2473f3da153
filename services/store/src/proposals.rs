//! Submission and the proposing agent's read.

use crate::{Db, Result, set_tenant};
use serde_json::json;
use tokio_postgres::error::SqlState;
use uuid::Uuid;

/// A validated proposal ready to store. All hashes are lowercase hex SHA-256.
#[derive(Debug, Clone)]
pub struct NewProposal {
    /// Fresh id.
    pub id: Uuid,
    /// Tenant (from the token).
    pub tenant_id: String,
    /// Agent (from the token).
    pub agent_id: Uuid,
    /// Action name as submitted.
    pub action: String,
    /// Target derived by the handler.
    pub target: String,
    /// RFC 8785 canonical params.
    pub params_json: String,
    /// SHA-256 of `params_json`.
    pub params_sha256: String,
    /// Intent hash.
    pub intent_hash: String,
    /// The agent's stated reason (untrusted).
    pub agent_reason: Option<String>,
    /// The source text that led to the proposal (untrusted).
    pub source_text: Option<String>,
    /// Agent session id.
    pub session_id: Option<String>,
    /// `Idempotency-Key` header.
    pub idempotency_key: Option<String>,
    /// SHA-256 of the canonical request body (what "the same request" means).
    pub request_sha256: String,
}

/// What [`submit`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Submitted {
    /// Stored as a new pending proposal.
    Created(Uuid),
    /// An earlier proposal answers this request: the same idempotency key and body, or the same
    /// intent still open.
    Existing {
        /// Its id.
        id: Uuid,
        /// Its current state.
        state: String,
    },
    /// The idempotency key was used before with a different body.
    KeyReused,
    /// The agent has `cap` open escalations already.
    TooManyEscalations {
        /// The tenant's cap.
        cap: i64,
    },
}

/// Stores a proposal as `pending`, honouring `Idempotency-Key` (unique per tenant, agent, key)
/// and returning the open proposal when the same agent proposes the same intent again.
/// `max_open_escalations` is the tenant's per-agent cap.
pub async fn submit(db: &Db, p: &NewProposal, max_open_escalations: i64) -> Result<Submitted> {
    let mut client = db.client().await?;
    for _attempt in 0..3 {
        let tx = client.transaction().await?;
        let set = tx
            .prepare_cached("SELECT set_config('actiond.tenant_ids', $1, true)")
            .await?;
        let ins = tx
            .prepare_cached(
                "INSERT INTO proposals (id, tenant_id, agent_id, action, target, params_json, params_sha256, intent_hash,
                    agent_reason, source_text, session_id, idempotency_key, request_sha256)
                 SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13
                 WHERE (SELECT count(*) FROM proposals WHERE tenant_id = $2 AND agent_id = $3 AND state = 'escalated') < $14
                 ON CONFLICT DO NOTHING RETURNING id",
            )
            .await?;
        // Written only if the proposal above was inserted (same transaction, runs after it).
        let aud = tx
            .prepare_cached(
                "INSERT INTO audit_events (tenant_id, proposal_id, kind, actor, to_state, intent_hash, params_sha256, detail)
                 SELECT $2, $1, 'proposal.submitted', $3, 'pending', $4, $5, $6
                 WHERE EXISTS (SELECT 1 FROM proposals WHERE id = $1)",
            )
            .await?;
        let actor = format!("agent:{}", p.agent_id);
        let detail =
            json!({"action_len": p.action.len(), "idempotency_key": p.idempotency_key.is_some()});
        // The three statements are pipelined: one round trip instead of three.
        let set_params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&p.tenant_id];
        let ins_params: [&(dyn tokio_postgres::types::ToSql + Sync); 14] = [
            &p.id,
            &p.tenant_id,
            &p.agent_id,
            &p.action,
            &p.target,
            &p.params_json,
            &p.params_sha256,
            &p.intent_hash,
            &p.agent_reason,
            &p.source_text,
            &p.session_id,
            &p.idempotency_key,
            &p.request_sha256,
            &max_open_escalations,
        ];
        let aud_params: [&(dyn tokio_postgres::types::ToSql + Sync); 6] = [
            &p.id,
            &p.tenant_id,
            &actor,
            &p.intent_hash,
            &p.params_sha256,
            &detail,
        ];
        let (r_set, inserted, r_aud) = tokio::join!(
            tx.execute(&set, &set_params),
            tx.query_opt(&ins, &ins_params),
            tx.execute(&aud, &aud_params),
        );
        let inserted = match inserted {
            Ok(r) => r,
            Err(e) if e.code() == Some(&SqlState::T_R_SERIALIZATION_FAILURE) => continue,
            Err(e) => return Err(e.into()),
        };
        r_set?;
        let audited = r_aud?;
        if inserted.is_some() {
            if audited != 1 {
                return Err(crate::StoreError::Conflict(
                    "submission audit event was not written".into(),
                ));
            }
            tx.commit().await?;
            return Ok(Submitted::Created(p.id));
        }
        // Nothing inserted: an idempotency key or open intent conflicts, or the cap is reached.
        if let Some(key) = &p.idempotency_key
            && let Some(r) = tx
                .query_opt(
                    "SELECT id, state, request_sha256 FROM proposals WHERE tenant_id = $1 AND agent_id = $2 AND idempotency_key = $3",
                    &[&p.tenant_id, &p.agent_id, key],
                )
                .await?
            {
                let sha: String = r.get(2);
                tx.commit().await?;
                return Ok(if sha == p.request_sha256 {
                    Submitted::Existing { id: r.get(0), state: r.get(1) }
                } else {
                    Submitted::KeyReused
                });
            }
        if let Some(r) = tx
            .query_opt(
                "SELECT id, state FROM proposals WHERE tenant_id = $1 AND agent_id = $2 AND intent_hash = $3
                   AND state IN ('pending','escalated','approved','executing')",
                &[&p.tenant_id, &p.agent_id, &p.intent_hash],
            )
            .await?
        {
            tx.commit().await?;
            return Ok(Submitted::Existing { id: r.get(0), state: r.get(1) });
        }
        let open: i64 = tx
            .query_one(
                "SELECT count(*) FROM proposals WHERE tenant_id = $1 AND agent_id = $2 AND state = 'escalated'",
                &[&p.tenant_id, &p.agent_id],
            )
            .await?
            .get(0);
        tx.commit().await?;
        if open >= max_open_escalations {
            return Ok(Submitted::TooManyEscalations {
                cap: max_open_escalations,
            });
        }
        // The conflicting row left the open states between our statements: try again.
    }
    Err(crate::StoreError::Conflict(
        "proposal could not be stored after retries; try again".into(),
    ))
}

/// A proposal as its agent may see it: no CEL errors, no provider error text.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ProposalStatus {
    /// Id.
    pub proposal_id: Uuid,
    /// Action.
    pub action: String,
    /// Target.
    pub target: String,
    /// Current state.
    pub state: String,
    /// Tenant-written reason of the deciding rule, or the approver's comment.
    pub reason: Option<String>,
    /// `succeeded`, `failed` or `outcome_unknown` once executed.
    pub outcome: Option<String>,
    /// Intent hash.
    pub intent_hash: String,
    /// Submission time.
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// Last state change.
    pub updated_at: chrono::DateTime<chrono::Utc>,
}

/// Reads a proposal for the agent that proposed it; any other agent (or tenant) gets `None`.
pub async fn get_for_agent(
    db: &Db,
    tenant: &str,
    agent: Uuid,
    id: Uuid,
) -> Result<Option<ProposalStatus>> {
    let mut client = db.client().await?;
    let tx = client.transaction().await?;
    set_tenant(&tx, tenant).await?;
    let stmt = tx
        .prepare_cached(
            "SELECT id, action, target, state, decision_reason, outcome, intent_hash, created_at, updated_at
             FROM proposals WHERE tenant_id = $1 AND agent_id = $2 AND id = $3",
        )
        .await?;
    let r = tx.query_opt(&stmt, &[&tenant, &agent, &id]).await?;
    tx.commit().await?;
    Ok(r.map(|r| ProposalStatus {
        proposal_id: r.get(0),
        action: r.get(1),
        target: r.get(2),
        state: r.get(3),
        reason: r.get(4),
        outcome: r.get(5),
        intent_hash: r.get(6),
        created_at: r.get(7),
        updated_at: r.get(8),
    }))
}
