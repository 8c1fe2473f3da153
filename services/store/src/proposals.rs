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
    (SELECT f.facts FROM proposal_facts f WHERE f.proposal_id = p.id) AS facts,
    a.frozen_at IS NOT NULL AS agent_frozen, a.revoked_at IS NOT NULL AS agent_revoked";

/// The agent columns [`PROPOSAL_COLUMNS`] reads (`a.…`), for a batch of proposals `p` that a
/// claim has just locked: one primary-key probe of `agents` per proposal, whatever the
/// statistics say. A plain `JOIN agents a ON a.id = p.agent_id` lets the planner hash the whole
/// agents table instead, and a worker's prepared claim is planned generically (`LIMIT $1`
/// estimated as a tenth of the queue): a backlog of 5,000 rows at the moment autovacuum
/// analysed `proposals` made every later claim read all 2,000 agents of a bench database (3.1
/// million agent rows in one 20,000-proposal run). `OFFSET 0` keeps the subquery from being
/// folded back into such a join (`queue_plans::claims_probe_agents_and_grants_by_key`).
pub const AGENT_OF_P: &str =
    "JOIN LATERAL (SELECT a.name, a.owner_subject, a.frozen_at, a.revoked_at FROM agents a
         WHERE a.id = p.agent_id OFFSET 0) a ON true";

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
    /// Whether the agent was revoked when this row was read (`agents.revoked_at`): policy and
    /// the executor stop its proposal as they stop a frozen agent's, with a reason of its own;
    /// the database refuses to move it forward either way (V34).
    pub agent_revoked: bool,
    /// The facts its handler computed at submission (`proposal_facts`, V46;
    /// [`actiond_core::facts`]), `None` when none were stored.
    pub facts: Option<serde_json::Value>,
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
            agent_revoked: r.try_get("agent_revoked")?,
            facts: r.try_get("facts")?,
        })
    }

    /// True when the agent was frozen or revoked when this row was read: nothing of this
    /// proposal may move forward (V20, V34).
    pub fn agent_stopped(&self) -> bool {
        self.agent_frozen || self.agent_revoked
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
            now: None,
            facts: self.facts.clone(),
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
    /// The facts its handler computed at submission ([`actiond_core::facts`]), stored beside
    /// the proposal in `proposal_facts`; `None` for a handler that computes none.
    pub facts: Option<serde_json::Value>,
}

/// Of `domains`, those an earlier `succeeded` proposal of `tenant` for `action` (an email
/// handler's) sent email to (one of its `recipients` at that domain): what an email's
/// `facts.new_recipient_domains` leaves out ([`actiond_core::facts`]). Read on `c` with the
/// tenant already set (api and web roles). A purged proposal (retention) no longer names its
/// recipients, so a domain written to only before the retention window counts as new again.
pub async fn domains_written_to<C: deadpool_postgres::GenericClient>(
    c: &C,
    tenant: &str,
    action: &str,
    domains: &[String],
) -> Result<Vec<String>> {
    if domains.is_empty() {
        return Ok(Vec::new());
    }
    let rows = c
        .query(
            "SELECT DISTINCT d FROM proposals p
               CROSS JOIN LATERAL jsonb_array_elements_text(
                   CASE WHEN jsonb_typeof(p.params_json::jsonb -> 'recipients') = 'array'
                        THEN p.params_json::jsonb -> 'recipients' ELSE '[]'::jsonb END) AS r(addr)
               CROSS JOIN LATERAL (SELECT lower(substring(r.addr FROM '@([^@]*)$'))) AS x(d)
             WHERE p.tenant_id = $1 AND p.action = $2 AND p.state = 'succeeded' AND x.d = ANY($3)",
            &[&tenant, &action, &domains],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// The facts of a proposal of `kind` with `params`, computed from the database at submission
/// ([`actiond_core::facts`]): for an email, its recipient domains no earlier succeeded email
/// of the tenant went to. `None` for a handler that computes none. Read on `c` with the tenant
/// already set.
pub async fn submission_facts<C: deadpool_postgres::GenericClient>(
    c: &C,
    tenant: &str,
    kind: actiond_core::handlers::HandlerKind,
    params: &serde_json::Value,
) -> Result<Option<serde_json::Value>> {
    if !actiond_core::facts::computed_for(kind) {
        return Ok(None);
    }
    let domains = actiond_core::facts::recipient_domains(params);
    let known = domains_written_to(c, tenant, kind.action(), &domains).await?;
    let new_recipient_domains = domains.into_iter().filter(|d| !known.contains(d)).collect();
    Ok(Some(
        actiond_core::facts::Facts {
            new_recipient_domains,
        }
        .to_json(),
    ))
}

/// Computes [`submission_facts`] in a read transaction of its own, for `tenant`.
pub async fn facts_at_submission(
    db: &Db,
    tenant: &str,
    kind: actiond_core::handlers::HandlerKind,
    params: &serde_json::Value,
) -> Result<Option<serde_json::Value>> {
    if !actiond_core::facts::computed_for(kind) {
        return Ok(None);
    }
    let mut client = db.client().await?;
    let tx = client.transaction().await?;
    set_tenant(&tx, tenant).await?;
    let facts = submission_facts(&tx, tenant, kind, params).await?;
    tx.commit().await?;
    Ok(facts)
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
    /// The tenant moved to another cell (V44 `tenant_moves`, read in the submission's own
    /// transaction): nothing of it is stored here any more.
    TenantMoved(crate::tenant_move::Moved),
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
/// expired ([`Submitted::AgentNotLive`]), or frozen ([`Submitted::AgentFrozen`]), or its tenant
/// moved to another cell ([`Submitted::TenantMoved`]).
async fn agent_refusal<C: deadpool_postgres::GenericClient>(
    tx: &C,
    p: &NewProposal,
) -> Result<Option<Submitted>> {
    if let Some(m) = crate::tenant_move::moved(tx, &p.tenant_id).await? {
        return Ok(Some(Submitted::TenantMoved(m)));
    }
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
/// params were validated against, `$18` the user the agent acts for (or null), `$19` the
/// facts its handler computed (or null), stored in `proposal_facts`.
///
/// A `proposal.submitted` event that is not written (a trigger dropping it) fails the whole
/// statement ([`audit::events_match`]): no proposal without its event.
///
/// Inserts nothing when `$17` is not the tenant's latest document version (read in this
/// statement, so a document applied a moment ago is never bypassed by a cached copy), when the
/// agent is revoked, expired or frozen, when the tenant moved to another cell (V44), when the cap is reached, or on a conflict
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
              AND NOT EXISTS (SELECT 1 FROM tenant_moves m WHERE m.tenant_id = $2)
            ON CONFLICT DO NOTHING
            RETURNING id, tenant_id, state, intent_hash, params_sha256
         ), ev AS (
            INSERT INTO audit_events ({cols})
            SELECT tenant_id, id, '{kind}', $15::text, NULL, state, intent_hash, params_sha256, $16::jsonb FROM ins
            RETURNING proposal_id
         ), del AS (
            INSERT INTO proposal_delegations (proposal_id, tenant_id, on_behalf_of)
            SELECT id, tenant_id, $18::text FROM ins WHERE $18::text IS NOT NULL
         ), fct AS (
            INSERT INTO proposal_facts (proposal_id, tenant_id, facts)
            SELECT id, tenant_id, $19::jsonb FROM ins WHERE $19::jsonb IS NOT NULL
         )
         SELECT (SELECT id FROM ins), (SELECT count(*) FROM ev), (SELECT version FROM latest), {check}",
        cols = audit::EVENT_COLUMNS,
        kind = AuditKind::ProposalSubmitted.as_str(),
        check = audit::events_match(AuditKind::ProposalSubmitted, "ev", "ins"),
    )
});

/// Runs `settings` then `statement` (both on `client`, both already prepared) in a
/// transaction of their own, in one round trip: BEGIN, `settings`, `statement` and COMMIT are
/// pipelined. tokio-postgres sends a request when its future is first polled, no prepare
/// round trip can reorder them, and `join4` polls its futures in argument order, so the server
/// receives them in that order. A failed statement aborts the transaction and the COMMIT then
/// rolls it back: nothing is half-written. Once polled, all four run even if this future is
/// dropped, so no transaction is left open. Returns `statement`'s result once committed, else
/// the first error, BEGIN's, then `statement`'s, then `settings`', then COMMIT's.
async fn in_one_round_trip<T>(
    client: &deadpool_postgres::Client,
    settings: impl std::future::Future<Output = std::result::Result<u64, tokio_postgres::Error>>,
    statement: impl std::future::Future<Output = std::result::Result<T, tokio_postgres::Error>>,
) -> std::result::Result<T, tokio_postgres::Error> {
    let (r_begin, r_settings, r_statement, r_commit) = futures_util::future::join4(
        client.batch_execute("BEGIN"),
        settings,
        statement,
        client.batch_execute("COMMIT"),
    )
    .await;
    r_begin?;
    let out = r_statement?;
    r_settings?;
    r_commit?;
    Ok(out)
}

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
        let ins_params: [&(dyn tokio_postgres::types::ToSql + Sync); 19] = [
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
            &p.facts,
        ];
        let inserted = match in_one_round_trip(
            &client,
            client.execute(&set, &set_params),
            client.query_one(&ins, &ins_params),
        )
        .await
        {
            Ok(r) => r,
            Err(e) if e.code() == Some(&SqlState::T_R_SERIALIZATION_FAILURE) => continue,
            Err(e) => return Err(e.into()),
        };
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

/// Most submissions one [`SUBMIT_BATCH_SQL`] statement stores.
pub const MAX_SUBMIT_BATCH: usize = 64;

/// The settings of a batch's transaction: its tenant for row-level security (`$1`; a batch
/// holds one tenant's submissions) and a 5 s `statement_timeout`, so a batch stuck on a lock
/// fails and its submissions are stored one by one instead of holding up the others.
const BATCH_SETTINGS_SQL: &str = "SELECT set_config('actiond.tenant_ids', $1, true), set_config('statement_timeout', '5s', true)";

/// [`SUBMIT_SQL`] for several submissions at once: `$1`–`$19` are arrays, one element per
/// submission, of `SUBMIT_SQL`'s parameters in the same order (`$14` the cap and `$17` the
/// document version per submission). Each submission is checked on its own, exactly as
/// `SUBMIT_SQL` checks it: its tenant's latest document version, its agent live and not
/// frozen, its agent's cap, and conflicts (`ON CONFLICT DO NOTHING`, also between two
/// submissions of the same batch: rows are inserted in the order of tenant, agent, intent hash
/// and arrival, so of two with the same intent the first to arrive is stored, and two batches
/// holding the same intents lock them in the same order). Returns one row per
/// submission in input order: its id, whether it was stored, its tenant's latest document
/// version (null when the tenant has none) and the events check ([`audit::events_match`]:
/// every stored proposal has its `proposal.submitted` event, or the statement fails).
pub static SUBMIT_BATCH_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "WITH req AS (
            SELECT * FROM unnest($1::uuid[], $2::text[], $3::uuid[], $4::text[], $5::text[], $6::text[],
                                 $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[],
                                 $13::text[], $14::int8[], $15::text[], $16::jsonb[], $17::int4[], $18::text[],
                                 $19::jsonb[])
                WITH ORDINALITY AS r(id, tenant_id, agent_id, action, target, params_json, params_sha256,
                                     intent_hash, agent_reason, source_text, session_id, idempotency_key,
                                     request_sha256, cap, actor, detail, doc_version, on_behalf_of, facts, ord)
         ), latest AS (
            SELECT t.tenant_id,
                   (SELECT max(d.version) FROM tenant_documents d WHERE d.tenant_id = t.tenant_id) AS version
            FROM (SELECT DISTINCT tenant_id FROM req) AS t
         ), ins AS (
            INSERT INTO proposals (id, tenant_id, agent_id, action, target, params_json, params_sha256, intent_hash,
                agent_reason, source_text, session_id, idempotency_key, request_sha256)
            SELECT r.id, r.tenant_id, r.agent_id, r.action, r.target, r.params_json, r.params_sha256, r.intent_hash,
                   r.agent_reason, r.source_text, r.session_id, r.idempotency_key, r.request_sha256
            FROM req r JOIN latest l ON l.tenant_id = r.tenant_id
            WHERE l.version = r.doc_version
              AND (SELECT count(*) FROM proposals e
                   WHERE e.tenant_id = r.tenant_id AND e.agent_id = r.agent_id AND e.state = 'escalated') < r.cap
              AND EXISTS (SELECT 1 FROM agents a WHERE a.tenant_id = r.tenant_id AND a.id = r.agent_id
                          AND a.revoked_at IS NULL AND a.frozen_at IS NULL
                          AND (a.expires_at IS NULL OR a.expires_at > now()))
              AND NOT EXISTS (SELECT 1 FROM tenant_moves m WHERE m.tenant_id = r.tenant_id)
            ORDER BY r.tenant_id, r.agent_id, r.intent_hash, r.ord
            ON CONFLICT DO NOTHING
            RETURNING id, tenant_id, state, intent_hash, params_sha256
         ), ev AS (
            INSERT INTO audit_events ({cols})
            SELECT i.tenant_id, i.id, '{kind}', r.actor, NULL, i.state, i.intent_hash, i.params_sha256, r.detail
            FROM ins i JOIN req r ON r.id = i.id
            RETURNING proposal_id
         ), del AS (
            INSERT INTO proposal_delegations (proposal_id, tenant_id, on_behalf_of)
            SELECT i.id, i.tenant_id, r.on_behalf_of FROM ins i JOIN req r ON r.id = i.id
            WHERE r.on_behalf_of IS NOT NULL
         ), fct AS (
            INSERT INTO proposal_facts (proposal_id, tenant_id, facts)
            SELECT i.id, i.tenant_id, r.facts FROM ins i JOIN req r ON r.id = i.id
            WHERE r.facts IS NOT NULL
         )
         SELECT r.id, i.id IS NOT NULL, l.version, {check}
         FROM req r LEFT JOIN ins i ON i.id = r.id LEFT JOIN latest l ON l.tenant_id = r.tenant_id
         ORDER BY r.ord",
        cols = audit::EVENT_COLUMNS,
        kind = AuditKind::ProposalSubmitted.as_str(),
        check = audit::events_match(AuditKind::ProposalSubmitted, "ev", "ins"),
    )
});

/// One submission waiting for a [`Submitter`] worker.
struct SubmitJob {
    p: NewProposal,
    cap: i64,
    doc_version: i32,
    answer: tokio::sync::oneshot::Sender<Result<Submitted>>,
}

/// Stores concurrent submissions together: what [`submit`] does for one, for up to
/// [`MAX_SUBMIT_BATCH`] at a time in one transaction ([`SUBMIT_BATCH_SQL`]), so a burst of
/// submissions costs Postgres one statement, one commit and one round trip instead of one
/// each (issue #10: the submission was half of Postgres' statement time on the allow path,
/// the only write not batched).
///
/// `workers` tasks each take every submission waiting when they become free, so nothing
/// waits for a batch to fill: a lone submission is stored at once by [`submit`]'s own
/// statement, and batches form only while every worker is busy. A submission the batch did
/// not store (a conflict, the cap, an agent no longer live) goes through [`submit`], which
/// stores it or says why not, exactly as without the batch; so does every submission of a
/// batch whose statement failed, each on its own, so one bad submission fails only itself
/// (first looking for its id: a batch whose COMMIT's answer was lost may have stored it). A
/// submission whose caller gave up before its batch was taken is not stored. Answers are the
/// same as [`submit`]'s.
///
/// A batch holds the submissions of **one tenant**: what a worker takes is split by tenant,
/// and the tenants' batches run two at a time, each on its own connection. So row-level security
/// still separates tenants inside a batch, as it does for a single submission: its
/// transaction names one tenant in `actiond.tenant_ids`, and a row of another tenant is
/// neither read nor written by it, whatever the statement says.
#[derive(Clone)]
pub struct Submitter {
    jobs: tokio::sync::mpsc::Sender<SubmitJob>,
}

impl Submitter {
    /// Spawns `workers` (at least 1) batch workers on `db`. Must be called inside a Tokio
    /// runtime; the workers end when the last clone of the submitter is dropped.
    pub fn spawn(db: Db, workers: usize) -> Self {
        let (tx, rx) = tokio::sync::mpsc::channel(MAX_SUBMIT_BATCH * 16);
        let rx = std::sync::Arc::new(tokio::sync::Mutex::new(rx));
        for _ in 0..workers.max(1) {
            tokio::spawn(run_submit_worker(db.clone(), rx.clone()));
        }
        Self { jobs: tx }
    }

    /// Stores `p` like [`submit`] (same arguments, same answers), batched with whatever other
    /// submissions are waiting.
    ///
    /// # Errors
    /// As [`submit`]; [`crate::StoreError::Conflict`] when the workers have stopped.
    pub async fn submit(
        &self,
        p: &NewProposal,
        max_open_escalations: i64,
        doc_version: i32,
    ) -> Result<Submitted> {
        let (answer, answered) = tokio::sync::oneshot::channel();
        let job = SubmitJob {
            p: p.clone(),
            cap: max_open_escalations,
            doc_version,
            answer,
        };
        let stopped = || crate::StoreError::Conflict("the submission workers stopped".into());
        self.jobs.send(job).await.map_err(|_| stopped())?;
        answered.await.map_err(|_| stopped())?
    }
}

/// One worker of [`Submitter`]: takes the next submission and every one waiting behind it (up
/// to [`MAX_SUBMIT_BATCH`]), stores them, answers each, and starts over.
async fn run_submit_worker(
    db: Db,
    jobs: std::sync::Arc<tokio::sync::Mutex<tokio::sync::mpsc::Receiver<SubmitJob>>>,
) {
    loop {
        let batch = {
            let mut rx = jobs.lock().await;
            let Some(first) = rx.recv().await else {
                return;
            };
            let mut batch = vec![first];
            while batch.len() < MAX_SUBMIT_BATCH {
                match rx.try_recv() {
                    Ok(job) => batch.push(job),
                    Err(_) => break,
                }
            }
            batch
        };
        store_batch(&db, batch).await;
    }
}

/// Stores the submissions a worker took, one batch per tenant, the tenants' batches at once,
/// and answers each submission (see [`Submitter`]).
async fn store_batch(db: &Db, mut taken: Vec<SubmitJob>) {
    // A caller that gave up (its HTTP client went away) while its submission waited stores
    // nothing, as when a request is dropped before its statement is sent.
    taken.retain(|job| !job.answer.is_closed());
    let mut by_tenant: Vec<Vec<SubmitJob>> = Vec::new();
    for job in taken {
        match by_tenant
            .iter_mut()
            .find(|b| b[0].p.tenant_id == job.p.tenant_id)
        {
            Some(b) => b.push(job),
            None => by_tenant.push(vec![job]),
        }
    }
    // Two tenants' batches at a time: a worker holds at most two pooled connections (and
    // `ACTIOND_API_SUBMIT_WORKERS` workers twice that), so a take of many tenants does not
    // empty the pool the api's other requests share.
    use futures_util::StreamExt as _;
    futures_util::stream::iter(by_tenant)
        .for_each_concurrent(2, |b| store_tenant_batch(db, b))
        .await;
}

/// Stores one tenant's batch and answers each of its submissions.
async fn store_tenant_batch(db: &Db, mut batch: Vec<SubmitJob>) {
    if batch.len() <= 1 {
        if let Some(job) = batch.pop() {
            let answer = submit(db, &job.p, job.cap, job.doc_version).await;
            let _ = job.answer.send(answer);
        }
        return;
    }
    let (rows, failed) = match insert_batch(db, &batch).await {
        Ok(rows)
            if rows.len() == batch.len()
                && rows.iter().zip(&batch).all(|(r, j)| r.id == j.p.id) =>
        {
            (rows.into_iter().map(Some).collect(), false)
        }
        Ok(rows) => {
            tracing::error!(
                sent = batch.len(),
                got = rows.len(),
                "submission batch answered other rows than it was sent; storing one by one"
            );
            (vec![None; batch.len()], true)
        }
        Err(e) => {
            tracing::warn!(error = %e, size = batch.len(), "submission batch failed; storing one by one");
            (vec![None; batch.len()], true)
        }
    };
    for (job, row) in batch.into_iter().zip(rows) {
        match row {
            Some(BatchRow { latest, .. }) if latest != Some(job.doc_version) => {
                let _ = job.answer.send(Ok(Submitted::StaleDocument { latest }));
            }
            Some(BatchRow { stored: true, .. }) => {
                let _ = job.answer.send(Ok(Submitted::Created(job.p.id)));
            }
            // Not stored by the batch, or the batch failed: on its own, as without a batch.
            _ => {
                let db = db.clone();
                tokio::spawn(async move {
                    // A batch whose COMMIT's answer was lost may have stored it.
                    let stored = if failed {
                        stored_by_id(&db, &job.p).await
                    } else {
                        Ok(false)
                    };
                    let answer = match stored {
                        Ok(true) => Ok(Submitted::Created(job.p.id)),
                        Ok(false) => submit(&db, &job.p, job.cap, job.doc_version).await,
                        Err(e) => Err(e),
                    };
                    let _ = job.answer.send(answer);
                });
            }
        }
    }
}

/// Whether the proposal `p` (its fresh id, its tenant) is stored.
async fn stored_by_id(db: &Db, p: &NewProposal) -> Result<bool> {
    let mut client = db.client().await?;
    let tx = client.transaction().await?;
    set_tenant(&tx, &p.tenant_id).await?;
    let found = tx
        .query_opt(
            "SELECT 1 FROM proposals WHERE tenant_id = $1 AND id = $2",
            &[&p.tenant_id, &p.id],
        )
        .await?
        .is_some();
    tx.commit().await?;
    Ok(found)
}

/// What [`SUBMIT_BATCH_SQL`] said of one submission.
#[derive(Debug, Clone, Copy)]
struct BatchRow {
    /// The submission's id.
    id: Uuid,
    /// Stored as a new pending proposal.
    stored: bool,
    /// The tenant's latest document version.
    latest: Option<i32>,
}

/// Runs [`SUBMIT_BATCH_SQL`] for `batch` in one pipelined transaction (as [`submit`] does for
/// one), retried on a serialization failure or a deadlock (two batches inserting the same
/// keys in another order). One row per submission, in order.
async fn insert_batch(db: &Db, batch: &[SubmitJob]) -> Result<Vec<BatchRow>> {
    // One tenant per batch, so row-level security separates tenants within it; a mixed batch
    // fails here and its submissions are stored one by one.
    let tenants = batch
        .first()
        .map(|j| j.p.tenant_id.clone())
        .unwrap_or_default();
    if batch.iter().any(|j| j.p.tenant_id != tenants) {
        return Err(crate::StoreError::Conflict(
            "a submission batch must hold one tenant's submissions".into(),
        ));
    }
    let ids: Vec<Uuid> = batch.iter().map(|j| j.p.id).collect();
    let tenant_ids: Vec<&str> = batch.iter().map(|j| j.p.tenant_id.as_str()).collect();
    let agents: Vec<Uuid> = batch.iter().map(|j| j.p.agent_id).collect();
    let actions: Vec<&str> = batch.iter().map(|j| j.p.action.as_str()).collect();
    let targets: Vec<&str> = batch.iter().map(|j| j.p.target.as_str()).collect();
    let params: Vec<&str> = batch.iter().map(|j| j.p.params_json.as_str()).collect();
    let params_sha: Vec<&str> = batch.iter().map(|j| j.p.params_sha256.as_str()).collect();
    let intents: Vec<&str> = batch.iter().map(|j| j.p.intent_hash.as_str()).collect();
    let reasons: Vec<Option<&str>> = batch.iter().map(|j| j.p.agent_reason.as_deref()).collect();
    let sources: Vec<Option<&str>> = batch.iter().map(|j| j.p.source_text.as_deref()).collect();
    let sessions: Vec<Option<&str>> = batch.iter().map(|j| j.p.session_id.as_deref()).collect();
    let keys: Vec<Option<&str>> = batch
        .iter()
        .map(|j| j.p.idempotency_key.as_deref())
        .collect();
    let requests: Vec<&str> = batch.iter().map(|j| j.p.request_sha256.as_str()).collect();
    let caps: Vec<i64> = batch.iter().map(|j| j.cap).collect();
    let actors: Vec<String> = batch
        .iter()
        .map(|j| format!("agent:{}", j.p.agent_id))
        .collect();
    let details: Vec<serde_json::Value> = batch
        .iter()
        .map(|j| {
            json!({"action_len": j.p.action.len(), "idempotency_key": j.p.idempotency_key.is_some()})
        })
        .collect();
    let versions: Vec<i32> = batch.iter().map(|j| j.doc_version).collect();
    let behalf: Vec<Option<&str>> = batch.iter().map(|j| j.p.on_behalf_of.as_deref()).collect();
    let facts: Vec<Option<&serde_json::Value>> = batch.iter().map(|j| j.p.facts.as_ref()).collect();
    let client = db.client().await?;
    let set = client.prepare_cached(BATCH_SETTINGS_SQL).await?;
    let ins = client.prepare_cached(&SUBMIT_BATCH_SQL).await?;
    let mut last = None;
    for _attempt in 0..3 {
        let set_params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&tenants];
        let ins_params: [&(dyn tokio_postgres::types::ToSql + Sync); 19] = [
            &ids,
            &tenant_ids,
            &agents,
            &actions,
            &targets,
            &params,
            &params_sha,
            &intents,
            &reasons,
            &sources,
            &sessions,
            &keys,
            &requests,
            &caps,
            &actors,
            &details,
            &versions,
            &behalf,
            &facts,
        ];
        let rows = match in_one_round_trip(
            &client,
            client.execute(&set, &set_params),
            client.query(&ins, &ins_params),
        )
        .await
        {
            Ok(rows) => rows,
            Err(e)
                if e.code() == Some(&SqlState::T_R_SERIALIZATION_FAILURE)
                    || e.code() == Some(&SqlState::T_R_DEADLOCK_DETECTED) =>
            {
                last = Some(e);
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        return rows
            .iter()
            .map(|r| {
                Ok(BatchRow {
                    id: r.try_get(0)?,
                    stored: r.try_get(1)?,
                    latest: r.try_get(2)?,
                })
            })
            .collect();
    }
    Err(last.map_or_else(
        || crate::StoreError::Conflict("submission batch not stored after retries".into()),
        Into::into,
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
    /// The proposal this one amends: a person approved that one with an edit, and this is
    /// the edited intent (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amended_from: Option<Uuid>,
    /// When this proposal is `amended`: the new proposal that carries the person's edit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amended_to: Option<AmendedTo>,
}

/// What an agent is told about the proposal that replaced its amended one.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AmendedTo {
    /// The new proposal's id (the agent may follow it as its own).
    pub proposal_id: Uuid,
    /// Its current state.
    pub state: String,
    /// What the person changed: `[{"field", "from", "to"}, …]` of the params.
    pub changes: serde_json::Value,
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
            "SELECT p.id, p.action, p.target, p.state, p.decision_reason, p.outcome, p.intent_hash, p.created_at,
                    p.updated_at, p.amended_from, n.id, n.state, n.amendment_diff, p.outcome_detail
             FROM proposals p
             LEFT JOIN proposals n ON p.state = 'amended' AND n.amended_from = p.id AND n.tenant_id = p.tenant_id
             WHERE p.tenant_id = $1 AND p.agent_id = $2 AND p.id = $3",
        )
        .await?;
    let r = tx.query_opt(&stmt, &[&tenant, &agent, &id]).await?;
    tx.commit().await?;
    Ok(r.map(|r| ProposalStatus {
        proposal_id: r.get(0),
        action: r.get(1),
        target: r.get(2),
        state: r.get(3),
        reason: agent_reason_of(r.get(3), r.get(5), r.get(4), r.get(13)),
        outcome: r.get(5),
        intent_hash: r.get(6),
        created_at: r.get(7),
        updated_at: r.get(8),
        amended_from: r.get(9),
        amended_to: r.get::<_, Option<Uuid>>(10).map(|id| AmendedTo {
            proposal_id: id,
            state: r.get(11),
            changes: r.get(12),
        }),
    }))
}

/// What an agent is told when its approved proposal failed: the outcome, without the
/// provider's error text (which stays in `outcome_detail` and the audit log).
pub const FAILED_REASON: &str = "The action ran and failed: the provider refused it or nothing was sent. \
     The provider's answer is in the operator's audit log.";

/// What an agent is told when its approved proposal ran with no answer from the provider.
pub const OUTCOME_UNKNOWN_REASON: &str = "The action may have reached the provider, but no answer came; \
     it is not run again automatically. Ask the operator before proposing it again.";

/// The `reason` an agent reads for a proposal in `state` with `outcome`: for a `failed` or
/// `outcome_unknown` run, what happened when it ran ([`FAILED_REASON`],
/// [`OUTCOME_UNKNOWN_REASON`]); before, the approver's comment or "approved by an approver",
/// which told the agent its failed action was approved. For a `stale` one, why it did not run
/// (kept with its outcome, [`crate::previews::stale_reason_of`]; the approver's reason stays in
/// `decision_reason` for the card). Otherwise the decision's reason.
fn agent_reason_of(
    state: &str,
    outcome: Option<&str>,
    decided: Option<String>,
    outcome_detail: Option<&str>,
) -> Option<String> {
    if state == "stale"
        && let Some(why) = crate::previews::stale_reason_of(outcome_detail)
    {
        return Some(why);
    }
    match (state, outcome) {
        ("failed", _) | (_, Some("failed")) => Some(FAILED_REASON.to_owned()),
        ("outcome_unknown", _) | (_, Some("outcome_unknown")) => {
            Some(OUTCOME_UNKNOWN_REASON.to_owned())
        }
        _ => decided,
    }
}

/// What [`withdraw`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Withdrawal {
    /// The proposal was `pending` or `escalated` (the state given) and is now `withdrawn`, with
    /// its `proposal.withdrawn` event.
    Withdrawn(ProposalState),
    /// Not withdrawn: it is already in this state (approved, executing, final), and nobody can
    /// withdraw it any more. Nothing was written.
    Refused(ProposalState),
    /// No proposal with this id was filed by this agent in this tenant. Nothing was written.
    NotFound,
}

/// The reason a withdrawn proposal carries (`decision_reason`), shown to approvers and the agent.
pub const WITHDRAWN_REASON: &str =
    "withdrawn by the agent that proposed it, before it was approved";

/// Withdraws proposal `id` for the agent that filed it: `pending | escalated → withdrawn`
/// (V40), with a `proposal.withdrawn` event by `agent:<agent>` whose `detail.via` is `via`, in
/// one transaction. The row is locked first, so a concurrent decision either lands before (the
/// withdrawal is then [`Withdrawal::Refused`] with the new state) or waits for it (and finds the
/// proposal `withdrawn`). Another agent's or tenant's proposal is [`Withdrawal::NotFound`].
pub async fn withdraw(
    db: &Db,
    tenant: &str,
    agent: Uuid,
    id: Uuid,
    via: &str,
) -> Result<Withdrawal> {
    let mut client = db.client().await?;
    let tx = client.transaction().await?;
    set_tenant(&tx, tenant).await?;
    let row = tx
        .query_opt(
            "SELECT state, intent_hash, params_sha256 FROM proposals
             WHERE tenant_id = $1 AND agent_id = $2 AND id = $3 FOR UPDATE",
            &[&tenant, &agent, &id],
        )
        .await?;
    let Some(row) = row else {
        return Ok(Withdrawal::NotFound);
    };
    let state: String = row.get(0);
    let from = ProposalState::parse(&state).ok_or_else(|| {
        crate::StoreError::Config(format!("proposal {id} has an unknown state {state:?}"))
    })?;
    if !from.can_become(ProposalState::Withdrawn) {
        return Ok(Withdrawal::Refused(from));
    }
    let (intent, params): (String, String) = (row.get(1), row.get(2));
    tx.execute(
        "UPDATE proposals SET state = 'withdrawn', decision_reason = $2 WHERE id = $1",
        &[&id, &WITHDRAWN_REASON],
    )
    .await?;
    let actor = format!("agent:{agent}");
    let event = audit::Event::new(
        tenant,
        Some(id),
        AuditKind::ProposalWithdrawn,
        &actor,
        json!({"via": via, "reason": WITHDRAWN_REASON}),
    )
    .transition(Some(from), ProposalState::Withdrawn)
    .hashes(&intent, &params);
    if audit::write(&tx, &event).await? != 1 {
        return Err(crate::StoreError::Conflict(format!(
            "proposal {id}: the proposal.withdrawn event was not written; nothing changed"
        )));
    }
    tx.commit().await?;
    Ok(Withdrawal::Withdrawn(from))
}
