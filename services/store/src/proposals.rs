//! Submission, the proposing agent's read, and [`ProposalRow`]: the one shape every other
//! reader (policy, executor, approvers) gets a proposal in.

use crate::{Db, Result, SET_TENANTS_SQL, audit, set_tenant};
use actiond_core::audit::AuditKind;
use actiond_core::policy::{AgentFacts, Effect, EvalInput, History};
use actiond_core::state::ProposalState;
use serde_json::json;
use tokio_postgres::error::SqlState;
use uuid::Uuid;

/// The columns [`ProposalRow::from_row`] reads, for a query over `proposals p JOIN agents a
/// ON a.id = p.agent_id`.
pub const PROPOSAL_COLUMNS: &str = "p.id, p.tenant_id, p.agent_id, a.name AS agent_name, a.owner_subject AS agent_owner,
    p.action, p.target, p.params_json, p.params_sha256, p.intent_hash, p.state, p.effect, p.rule_name, p.decision_reason,
    p.doc_version, p.doc_sha256, p.agent_reason, p.source_text, p.session_id, p.created_at, p.updated_at,
    (SELECT d.on_behalf_of FROM proposal_delegations d WHERE d.proposal_id = p.id) AS on_behalf_of,
    a.frozen_at IS NOT NULL AS agent_frozen";

/// A proposal with its agent's name and owner, read by column name (see [`PROPOSAL_COLUMNS`]).
/// Every agent-written field (`agent_reason`, `source_text`, `session_id`, `target`,
/// `params_json`) is untrusted text.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ProposalRow {
    /// Id.
    pub id: Uuid,
    /// Tenant.
    pub tenant_id: String,
    /// Agent id.
    pub agent_id: Uuid,
    /// Agent name.
    pub agent_name: String,
    /// Agent owner subject, when recorded.
    pub agent_owner: Option<String>,
    /// Action name.
    pub action: String,
    /// Target derived by the handler.
    pub target: String,
    /// RFC 8785 canonical params.
    pub params_json: String,
    /// SHA-256 of `params_json` (lowercase hex).
    pub params_sha256: String,
    /// Intent hash (lowercase hex).
    pub intent_hash: String,
    /// Current state.
    pub state: ProposalState,
    /// Policy's effect, once decided.
    pub effect: Option<Effect>,
    /// The deciding rule.
    pub rule_name: Option<String>,
    /// Decision reason (the rule's text, or the approver's comment).
    pub decision_reason: Option<String>,
    /// Tenant document version policy decided under.
    pub doc_version: Option<i32>,
    /// Its SHA-256.
    pub doc_sha256: Option<String>,
    /// Agent's reason (untrusted).
    pub agent_reason: Option<String>,
    /// Source text that led to the proposal (untrusted).
    pub source_text: Option<String>,
    /// Agent session id (untrusted).
    pub session_id: Option<String>,
    /// Submission time (database clock).
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// Last state change.
    pub updated_at: chrono::DateTime<chrono::Utc>,
    /// The user the agent acted for (RFC 8693 `act` delegation), when it said so.
    pub on_behalf_of: Option<String>,
    /// Whether the agent was frozen when this row was read (`agents.frozen_at`). Policy and the
    /// executor block a frozen agent's proposal instead of deciding or running it; the
    /// database refuses to move it forward either way (V20).
    pub agent_frozen: bool,
}

/// A stored name the core enums do not know: the database and this build disagree.
fn unknown(e: actiond_core::UnknownName) -> crate::StoreError {
    crate::StoreError::Config(format!("the database holds an {e}"))
}

impl ProposalRow {
    /// Reads the columns of [`PROPOSAL_COLUMNS`] by name.
    ///
    /// Errors: a column missing from the query, or a state or effect this build does not know.
    pub fn from_row(r: &tokio_postgres::Row) -> Result<Self> {
        let state: String = r.try_get("state")?;
        let effect: Option<String> = r.try_get("effect")?;
        Ok(Self {
            id: r.try_get("id")?,
            tenant_id: r.try_get("tenant_id")?,
            agent_id: r.try_get("agent_id")?,
            agent_name: r.try_get("agent_name")?,
            agent_owner: r.try_get("agent_owner")?,
            action: r.try_get("action")?,
            target: r.try_get("target")?,
            params_json: r.try_get("params_json")?,
            params_sha256: r.try_get("params_sha256")?,
            intent_hash: r.try_get("intent_hash")?,
            state: state.parse().map_err(unknown)?,
            effect: effect.map(|e| e.parse()).transpose().map_err(unknown)?,
            rule_name: r.try_get("rule_name")?,
            decision_reason: r.try_get("decision_reason")?,
            doc_version: r.try_get("doc_version")?,
            doc_sha256: r.try_get("doc_sha256")?,
            agent_reason: r.try_get("agent_reason")?,
            source_text: r.try_get("source_text")?,
            session_id: r.try_get("session_id")?,
            created_at: r.try_get("created_at")?,
            updated_at: r.try_get("updated_at")?,
            on_behalf_of: r.try_get("on_behalf_of")?,
            agent_frozen: r.try_get("agent_frozen")?,
        })
    }

    /// Reads every row of a query (see [`ProposalRow::from_row`]).
    pub fn from_rows(rows: &[tokio_postgres::Row]) -> Result<Vec<Self>> {
        rows.iter().map(Self::from_row).collect()
    }

    /// What the tenant's rules see for this proposal, given its agent's `history`.
    pub fn eval_input(&self, history: History) -> EvalInput {
        EvalInput {
            action: self.action.clone(),
            target: self.target.clone(),
            params: serde_json::from_str(&self.params_json).unwrap_or(serde_json::Value::Null),
            agent: AgentFacts {
                id: self.agent_id.to_string(),
                name: self.agent_name.clone(),
                owner: self.agent_owner.clone().unwrap_or_default(),
            },
            session: self.session_id.clone().unwrap_or_default(),
            on_behalf_of: self.on_behalf_of.clone().unwrap_or_default(),
            history,
        }
    }

    /// An audit event about this proposal, with its intent and params hashes.
    pub fn event<'a>(
        &'a self,
        kind: AuditKind,
        actor: &'a str,
        detail: serde_json::Value,
    ) -> audit::Event<'a> {
        audit::Event::new(&self.tenant_id, Some(self.id), kind, actor, detail)
            .hashes(&self.intent_hash, &self.params_sha256)
    }
}

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
    /// The user the agent acts for (the `sub` of a delegated workload JWT), stored beside the
    /// proposal in `proposal_delegations`.
    pub on_behalf_of: Option<String>,
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
    /// The agent is revoked or expired (read in the submission's own transaction, so an
    /// agent remembered by a cache cannot outlive its revocation here).
    AgentNotLive,
    /// The agent is frozen (read in the submission's own transaction).
    AgentFrozen,
    /// Nothing was stored: the params were validated against a document version that is no
    /// longer the tenant's latest. Validate against `latest` and submit again (`None`: the
    /// tenant has no document now).
    StaleDocument {
        /// The tenant's latest document version, read in the submission's statement.
        latest: Option<i32>,
    },
}

/// Why a submission inserted nothing, when it is not the escalation cap: the agent may not
/// submit ([`agent_refusal`]), or an earlier proposal answers it (the same idempotency key, or
/// the same intent still open).
async fn answer_without_insert<C: deadpool_postgres::GenericClient>(
    tx: &C,
    p: &NewProposal,
) -> Result<Option<Submitted>> {
    if let Some(refused) = agent_refusal(tx, p).await? {
        return Ok(Some(refused));
    }
    if let Some(answer) = key_answer(tx, p).await? {
        return Ok(Some(answer));
    }
    let open = tx
        .query_opt(
            "SELECT id, state FROM proposals WHERE tenant_id = $1 AND agent_id = $2 AND intent_hash = $3
               AND state IN ('pending','escalated','approved','executing')",
            &[&p.tenant_id, &p.agent_id, &p.intent_hash],
        )
        .await?;
    Ok(open.map(|r| Submitted::Existing {
        id: r.get(0),
        state: r.get(1),
    }))
}

/// What the proposal already filed under `p`'s `Idempotency-Key` answers: the same request
/// body gets that proposal ([`Submitted::Existing`]), another body [`Submitted::KeyReused`];
/// `None` when `p` has no key or no proposal holds it.
async fn key_answer<C: deadpool_postgres::GenericClient>(
    tx: &C,
    p: &NewProposal,
) -> Result<Option<Submitted>> {
    let Some(key) = &p.idempotency_key else {
        return Ok(None);
    };
    let r = tx
        .query_opt(
            "SELECT id, state, request_sha256 FROM proposals WHERE tenant_id = $1 AND agent_id = $2 AND idempotency_key = $3",
            &[&p.tenant_id, &p.agent_id, key],
        )
        .await?;
    Ok(r.map(|r| {
        if r.get::<_, String>(2) == p.request_sha256 {
            Submitted::Existing {
                id: r.get(0),
                state: r.get(1),
            }
        } else {
            Submitted::KeyReused
        }
    }))
}

/// For a request the tenant's latest document refuses (its params or target) that carries an
/// `Idempotency-Key`: what the proposal already filed under that key answers instead
/// ([`Submitted::Existing`] for the same body, [`Submitted::KeyReused`] for another), so a
/// client retrying a request whose first answer it lost learns that it was stored even when a
/// stricter document was applied in between. A revoked, expired or frozen agent gets its
/// refusal first, as in [`submit`]. `None`: no key, or nothing filed under it (the refusal
/// stands). Only `p`'s tenant, agent, key and request hash are read.
pub async fn answer_by_key(db: &Db, p: &NewProposal) -> Result<Option<Submitted>> {
    if p.idempotency_key.is_none() {
        return Ok(None);
    }
    let mut client = db.client().await?;
    let tx = client.transaction().await?;
    set_tenant(&tx, &p.tenant_id).await?;
    let answer = match agent_refusal(&tx, p).await? {
        Some(refused) => Some(refused),
        None => key_answer(&tx, p).await?,
    };
    tx.commit().await?;
    Ok(answer)
}

/// Why the agent of `p` may not submit now, read in the submission's transaction: revoked or
/// expired ([`Submitted::AgentNotLive`]), or frozen ([`Submitted::AgentFrozen`]).
async fn agent_refusal<C: deadpool_postgres::GenericClient>(
    tx: &C,
    p: &NewProposal,
) -> Result<Option<Submitted>> {
    let r = tx
        .query_opt(
            "SELECT revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now()), frozen_at IS NOT NULL
             FROM agents WHERE tenant_id = $1 AND id = $2",
            &[&p.tenant_id, &p.agent_id],
        )
        .await?;
    Ok(
        match r.map(|r| (r.get::<_, bool>(0), r.get::<_, bool>(1))) {
            None | Some((false, _)) => Some(Submitted::AgentNotLive),
            Some((true, true)) => Some(Submitted::AgentFrozen),
            Some((true, false)) => None,
        },
    )
}

/// The submission: inserts the proposal as `pending`, its `proposal.submitted` event and, when
/// the agent acts for a user, its `proposal_delegations` row, in one statement (the event and
/// the delegation are written from the inserted row, so they exist exactly when the proposal
/// does). `$1`–`$13` the proposal's columns (id, tenant, agent, action, target, canonical
/// params, params SHA-256, intent hash, agent reason, source text, session, Idempotency-Key,
/// request SHA-256), `$14` the tenant's per-agent cap on open escalations, `$15` the actor
/// (`agent:<id>`), `$16` the event's detail, `$17` the version of the tenant document the
/// params were validated against, `$18` the user the agent acts for (or null).
///
/// A `proposal.submitted` event that is not written (a trigger dropping it) fails the whole
/// statement ([`audit::events_match`]): no proposal without its event.
///
/// Inserts nothing when `$17` is not the tenant's latest document version (read in this
/// statement, so a document applied a moment ago is never bypassed by a cached copy), when the
/// agent is revoked, expired or frozen, when the cap is reached, or on a conflict
/// (Idempotency-Key, open intent). Always returns one row: the inserted id (or null), the
/// events written, and the tenant's latest document version (null when it has none).
pub static SUBMIT_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "WITH latest AS (
            SELECT max(version) AS version FROM tenant_documents WHERE tenant_id = $2
         ), ins AS (
            INSERT INTO proposals (id, tenant_id, agent_id, action, target, params_json, params_sha256, intent_hash,
                agent_reason, source_text, session_id, idempotency_key, request_sha256)
            SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13 FROM latest
            WHERE latest.version = $17::int4
              AND (SELECT count(*) FROM proposals WHERE tenant_id = $2 AND agent_id = $3 AND state = 'escalated') < $14
              AND EXISTS (SELECT 1 FROM agents a WHERE a.tenant_id = $2 AND a.id = $3 AND a.revoked_at IS NULL
                          AND a.frozen_at IS NULL AND (a.expires_at IS NULL OR a.expires_at > now()))
            ON CONFLICT DO NOTHING
            RETURNING id, tenant_id, state, intent_hash, params_sha256
         ), ev AS (
            INSERT INTO audit_events ({cols})
            SELECT tenant_id, id, '{kind}', $15::text, NULL, state, intent_hash, params_sha256, $16::jsonb FROM ins
            RETURNING proposal_id
         ), del AS (
            INSERT INTO proposal_delegations (proposal_id, tenant_id, on_behalf_of)
            SELECT id, tenant_id, $18::text FROM ins WHERE $18::text IS NOT NULL
         )
         SELECT (SELECT id FROM ins), (SELECT count(*) FROM ev), (SELECT version FROM latest), {check}",
        cols = audit::EVENT_COLUMNS,
        kind = AuditKind::ProposalSubmitted.as_str(),
        check = audit::events_match(AuditKind::ProposalSubmitted, "ev", "ins"),
    )
});

/// Stores a proposal as `pending`, honouring `Idempotency-Key` (unique per tenant, agent, key)
/// and returning the open proposal when the same agent proposes the same intent again.
/// `max_open_escalations` is the tenant's per-agent cap; `doc_version` the version of the
/// tenant document `p` was validated against: when it is no longer the latest, nothing is
/// stored and [`Submitted::StaleDocument`] names the latest, to validate against and submit
/// again.
///
/// A new proposal costs one round trip: `BEGIN`, the tenant setting, [`SUBMIT_SQL`] and
/// `COMMIT` are pipelined. Only when nothing was inserted does a second transaction read why.
pub async fn submit(
    db: &Db,
    p: &NewProposal,
    max_open_escalations: i64,
    doc_version: i32,
) -> Result<Submitted> {
    let mut client = db.client().await?;
    let set = client.prepare_cached(SET_TENANTS_SQL).await?;
    let ins = client.prepare_cached(&SUBMIT_SQL).await?;
    let actor = format!("agent:{}", p.agent_id);
    let detail =
        json!({"action_len": p.action.len(), "idempotency_key": p.idempotency_key.is_some()});
    for _attempt in 0..3 {
        let set_params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&p.tenant_id];
        let ins_params: [&(dyn tokio_postgres::types::ToSql + Sync); 18] = [
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
            &actor,
            &detail,
            &doc_version,
            &p.on_behalf_of,
        ];
        // Pipelined, in this order: tokio-postgres sends a request when its future is first
        // polled, both statements are prepared above (no prepare round trip can reorder them),
        // and `join4` polls its futures in argument order, so the server receives BEGIN, the
        // tenant, the insert and COMMIT in that order. A failed statement aborts the
        // transaction and the COMMIT then rolls it back: nothing is half-written. Once polled,
        // all four run even if this future is dropped, so no transaction is left open.
        let (r_begin, r_set, inserted, r_commit) = futures_util::future::join4(
            client.batch_execute("BEGIN"),
            client.execute(&set, &set_params),
            client.query_one(&ins, &ins_params),
            client.batch_execute("COMMIT"),
        )
        .await;
        r_begin?;
        let inserted = match inserted {
            Ok(r) => r,
            Err(e) if e.code() == Some(&SqlState::T_R_SERIALIZATION_FAILURE) => continue,
            Err(e) => return Err(e.into()),
        };
        r_set?;
        match r_commit {
            Err(e) if e.code() == Some(&SqlState::T_R_SERIALIZATION_FAILURE) => continue,
            r => r?,
        }
        let id: Option<Uuid> = inserted.try_get(0)?;
        let latest: Option<i32> = inserted.try_get(2)?;
        if latest != Some(doc_version) {
            return Ok(Submitted::StaleDocument { latest });
        }
        if let Some(id) = id {
            // The event is written from the inserted row in the same statement, which fails
            // when it was not ([`audit::events_match`]).
            return Ok(Submitted::Created(id));
        }
        // Nothing inserted: the agent is no longer live or is frozen, an idempotency key or
        // open intent conflicts, or the cap is reached.
        let tx = client.transaction().await?;
        set_tenant(&tx, &p.tenant_id).await?;
        if let Some(answer) = answer_without_insert(&tx, p).await? {
            tx.commit().await?;
            return Ok(answer);
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
