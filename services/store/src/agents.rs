//! Agents and their bearer tokens. A token is shown once and stored only as its SHA-256.
//! Shape: `actiond_<43 characters of base64url randomness>` (256 bits).

use crate::{Db, Result, StoreError, audit};
use serde_json::json;
use uuid::Uuid;

/// An agent as the API sees it after authentication.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Agent {
    /// Agent id.
    pub id: Uuid,
    /// Tenant id.
    pub tenant_id: String,
    /// Name, unique in the tenant.
    pub name: String,
    /// Owner subject (who may never approve this agent's proposals).
    pub owner_subject: Option<String>,
    /// Expiry of the token, if any.
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Revocation time, if revoked.
    pub revoked_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Creation time.
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// When an approver froze it (its new proposals are refused until unfrozen).
    pub frozen_at: Option<chrono::DateTime<chrono::Utc>>,
    /// The user this request acts for, when the agent authenticated with a delegated workload
    /// JWT (RFC 8693 `act`): set per request by the api, never stored on the agent.
    pub on_behalf_of: Option<String>,
}

const COLS: &str =
    "id, tenant_id, name, owner_subject, expires_at, revoked_at, created_at, frozen_at";

fn row(r: &tokio_postgres::Row) -> Agent {
    Agent {
        id: r.get(0),
        tenant_id: r.get(1),
        name: r.get(2),
        owner_subject: r.get(3),
        expires_at: r.get(4),
        revoked_at: r.get(5),
        created_at: r.get(6),
        frozen_at: r.get(7),
        on_behalf_of: None,
    }
}

/// Creates an agent in an existing tenant. `token_sha256` is the hex SHA-256 of the token;
/// `expires_in_secs` sets an expiry relative to the database clock.
pub async fn create(
    db: &Db,
    tenant: &str,
    name: &str,
    owner_subject: Option<&str>,
    token_sha256: &str,
    expires_in_secs: Option<i64>,
) -> Result<Agent> {
    let credential = Credential::Token {
        sha256: token_sha256,
        expires_in_secs,
    };
    insert(db, tenant, name, owner_subject, credential).await
}

/// Creates an agent that authenticates with a workload JWT only: `(issuer, subject)` are the
/// token's `iss` and `sub` (RFC 7519 §4.1.1, §4.1.2). The agent has no token; one
/// `(issuer, subject)` pair names one agent across all tenants.
///
/// Errors: [`StoreError::Conflict`] when the tenant does not exist, the name is taken or
/// invalid, or the pair is bound to another agent already.
pub async fn create_workload(
    db: &Db,
    tenant: &str,
    name: &str,
    owner_subject: Option<&str>,
    issuer: &str,
    subject: &str,
) -> Result<Agent> {
    let credential = Credential::Workload { issuer, subject };
    insert(db, tenant, name, owner_subject, credential).await
}

/// How a new agent authenticates.
enum Credential<'a> {
    /// A bearer token, stored as its SHA-256, with an optional lifetime in seconds.
    Token {
        sha256: &'a str,
        expires_in_secs: Option<i64>,
    },
    /// A workload JWT's `(iss, sub)`.
    Workload { issuer: &'a str, subject: &'a str },
}

fn conflict(e: tokio_postgres::Error, what: impl FnOnce() -> String) -> StoreError {
    match e.code() {
        Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) => StoreError::Conflict(what()),
        Some(&tokio_postgres::error::SqlState::CHECK_VIOLATION) => StoreError::Conflict(
            "agent name must match ^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$; a JWT issuer and subject 1 to 512 characters".into(),
        ),
        _ => e.into(),
    }
}

async fn insert(
    db: &Db,
    tenant: &str,
    name: &str,
    owner_subject: Option<&str>,
    credential: Credential<'_>,
) -> Result<Agent> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    if tx
        .query_opt("SELECT 1 FROM tenants WHERE id = $1", &[&tenant])
        .await?
        .is_none()
    {
        return Err(StoreError::Conflict(format!(
            "tenant {tenant:?} does not exist; apply its document first"
        )));
    }
    let id = Uuid::new_v4();
    let (token_sha256, expires_in_secs) = match &credential {
        Credential::Token {
            sha256,
            expires_in_secs,
        } => (Some(*sha256), *expires_in_secs),
        Credential::Workload { .. } => (None, None),
    };
    let q = format!(
        "INSERT INTO agents (id, tenant_id, name, owner_subject, token_sha256, expires_at)
         VALUES ($1, $2, $3, $4, $5, CASE WHEN $6::bigint IS NULL THEN NULL ELSE now() + make_interval(secs => $6::bigint) END)
         RETURNING {COLS}"
    );
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 6] = [
        &id,
        &tenant,
        &name,
        &owner_subject,
        &token_sha256,
        &expires_in_secs,
    ];
    let r = tx.query_one(&q, &params).await.map_err(|e| {
        conflict(e, || {
            format!("agent {name:?} already exists in tenant {tenant:?}")
        })
    })?;
    let agent = row(&r);
    let mut detail = json!({"agent_id": agent.id, "name": name, "owner": owner_subject});
    if let Credential::Workload { issuer, subject } = credential {
        tx.execute(
            "INSERT INTO agent_workload_identities (agent_id, tenant_id, issuer, subject) VALUES ($1, $2, $3, $4)",
            &[&id, &tenant, &issuer, &subject],
        )
        .await
        .map_err(|e| {
            conflict(e, || {
                format!("JWT issuer {issuer:?} and subject {subject:?} already belong to another agent")
            })
        })?;
        detail["jwt_issuer"] = json!(issuer);
        detail["jwt_subject"] = json!(subject);
    }
    audit::write(
        &tx,
        &audit::Event {
            tenant_id: tenant,
            proposal_id: None,
            kind: actiond_core::audit::AuditKind::AgentCreated,
            actor: "operator",
            from_state: None,
            to_state: None,
            intent_hash: None,
            params_sha256: None,
            detail,
        },
    )
    .await?;
    tx.commit().await?;
    Ok(agent)
}

/// Finds the live agent (not revoked, not expired) bound to a verified workload JWT's
/// `(iss, sub)`. Read on every request, so a revocation takes effect at once.
pub async fn authenticate_workload(db: &Db, issuer: &str, subject: &str) -> Result<Option<Agent>> {
    let c = db.client().await?;
    let q = format!(
        "SELECT {COLS} FROM agents WHERE id = (SELECT agent_id FROM agent_workload_identities WHERE issuer = $1 AND subject = $2)
           AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())"
    );
    let stmt = c.prepare_cached(&q).await?;
    Ok(c.query_opt(&stmt, &[&issuer, &subject])
        .await?
        .as_ref()
        .map(row))
}

/// Finds the live agent holding a token (by its SHA-256): not revoked, not expired.
pub async fn authenticate(db: &Db, token_sha256: &str) -> Result<Option<Agent>> {
    let c = db.client().await?;
    let q = format!(
        "SELECT {COLS} FROM agents WHERE token_sha256 = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())"
    );
    let stmt = c.prepare_cached(&q).await?;
    Ok(c.query_opt(&stmt, &[&token_sha256])
        .await?
        .as_ref()
        .map(row))
}

/// Agents of a tenant.
pub async fn list(db: &Db, tenant: &str) -> Result<Vec<Agent>> {
    let c = db.client().await?;
    let q = format!("SELECT {COLS} FROM agents WHERE tenant_id = $1 ORDER BY name");
    Ok(c.query(&q, &[&tenant]).await?.iter().map(row).collect())
}

/// One agent by id within a tenant.
pub async fn get(db: &Db, tenant: &str, id: Uuid) -> Result<Option<Agent>> {
    let c = db.client().await?;
    let q = format!("SELECT {COLS} FROM agents WHERE tenant_id = $1 AND id = $2");
    Ok(c.query_opt(&q, &[&tenant, &id]).await?.as_ref().map(row))
}

/// The reason a revocation gives the agent's proposals it denies.
pub const REVOKED_REASON: &str = "agent revoked: its open requests were denied.";

/// Which agent of a tenant a revocation names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentRef<'a> {
    /// By name (the CLI: `actiond agent revoke --tenant T NAME`).
    Name(&'a str),
    /// By id (the web admin page).
    Id(Uuid),
}

/// Revokes an agent, as `by` (the audit actor: `operator` for the CLI, `approver:SUBJECT` for
/// a tenant admin on the web; the caller checked it may): sets `revoked_at` (its token and
/// workload identity stop authenticating at once), denies its pending and escalated proposals
/// with [`REVOKED_REASON`] (`pending → denied` is legal for a revoked agent, V34), and writes
/// the audit events (`agent.revoked` with the count, one `proposal.decided` with
/// `"agent_revoked": true` per denial), in one transaction. An approved proposal is left to the
/// executor, which refuses it without spending its grant; the database refuses to start it
/// (V34). Returns the agent's name and how many proposals were denied, or `None` when no live
/// agent of the tenant matched.
pub async fn revoke(
    db: &Db,
    tenant: &str,
    agent: AgentRef<'_>,
    by: &str,
) -> Result<Option<(String, u64)>> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    crate::set_tenant(&tx, tenant).await?;
    let r = match agent {
        AgentRef::Name(name) => {
            tx.query_opt(
                "UPDATE agents SET revoked_at = now() WHERE tenant_id = $1 AND name = $2 AND revoked_at IS NULL RETURNING id, name",
                &[&tenant, &name],
            )
            .await?
        }
        AgentRef::Id(id) => {
            tx.query_opt(
                "UPDATE agents SET revoked_at = now() WHERE tenant_id = $1 AND id = $2 AND revoked_at IS NULL RETURNING id, name",
                &[&tenant, &id],
            )
            .await?
        }
    };
    let Some(r) = r else { return Ok(None) };
    let (id, name): (Uuid, String) = (r.get(0), r.get(1));
    let denied = deny_open(&tx, tenant, id, REVOKED_REASON).await?;
    let mut events = vec![audit::Event::new(
        tenant,
        None,
        actiond_core::audit::AuditKind::AgentRevoked,
        by,
        json!({"agent_id": id, "name": name, "denied": denied.len()}),
    )];
    events.extend(denial_events(
        tenant,
        by,
        &denied,
        json!({"reason": REVOKED_REASON, "agent_revoked": true}),
    ));
    audit::write_batch(&tx, &events).await?;
    tx.commit().await?;
    Ok(Some((name, denied.len() as u64)))
}

/// One proposal a freeze or a revocation denied: id, intent hash, params hash, former state.
type Denied = (Uuid, String, String, String);

/// Denies the open (`pending`, `escalated`) proposals of `agent` in `tx` with `reason`; the
/// caller has frozen or revoked the agent in the same transaction (V18, V34: `pending →
/// denied` is legal only then).
async fn deny_open(
    tx: &deadpool_postgres::Transaction<'_>,
    tenant: &str,
    agent: Uuid,
    reason: &str,
) -> Result<Vec<Denied>> {
    let denied = tx
        .query(
            "WITH open AS (
                 SELECT id, state FROM proposals
                 WHERE tenant_id = $1 AND agent_id = $2 AND state IN ('pending', 'escalated')
                 FOR UPDATE)
             UPDATE proposals p SET state = 'denied', decision_reason = $3
             FROM open WHERE p.id = open.id AND p.state = open.state
             RETURNING p.id, p.intent_hash, p.params_sha256, open.state",
            &[&tenant, &agent, &reason],
        )
        .await?;
    Ok(denied
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect())
}

/// The `proposal.decided` events of [`deny_open`]'s denials, by `by`, each with `detail`.
fn denial_events<'a>(
    tenant: &'a str,
    by: &'a str,
    denied: &'a [Denied],
    detail: serde_json::Value,
) -> impl Iterator<Item = audit::Event<'a>> {
    denied.iter().map(move |(id, intent, params, from)| {
        let from = actiond_core::state::ProposalState::parse(from)
            .unwrap_or(actiond_core::state::ProposalState::Escalated);
        audit::Event::new(
            tenant,
            Some(*id),
            actiond_core::audit::AuditKind::ProposalDecided,
            by,
            detail.clone(),
        )
        .transition(Some(from), actiond_core::state::ProposalState::Denied)
        .hashes(intent, params)
    })
}

/// Freezes `agent` of `tenant` for `by` (`approver:<subject>`, or `operator:cli`): sets
/// `frozen_at`, denies its pending and escalated proposals with `reason` (`pending → denied` is
/// legal only for a frozen or revoked agent, V18, V34), and writes the audit events, in one
/// transaction. Returns how many proposals were denied, or `None` when there is no such agent
/// or it is frozen.
pub async fn freeze(
    db: &Db,
    tenant: &str,
    agent: uuid::Uuid,
    by: &str,
    reason: &str,
) -> Result<Option<u64>> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    crate::set_tenant(&tx, tenant).await?;
    let hit = tx
        .execute(
            "UPDATE agents SET frozen_at = now(), frozen_by = $3
             WHERE tenant_id = $1 AND id = $2 AND frozen_at IS NULL",
            &[&tenant, &agent, &by],
        )
        .await?;
    if hit == 0 {
        return Ok(None);
    }
    let denied = deny_open(&tx, tenant, agent, reason).await?;
    let mut events = vec![audit::Event::new(
        tenant,
        None,
        actiond_core::audit::AuditKind::AgentFrozen,
        by,
        json!({"agent_id": agent, "denied": denied.len(), "reason": reason}),
    )];
    events.extend(denial_events(
        tenant,
        by,
        &denied,
        json!({"reason": reason, "agent_frozen": true}),
    ));
    audit::write_batch(&tx, &events).await?;
    tx.commit().await?;
    Ok(Some(denied.len() as u64))
}

/// Unfreezes `agent` of `tenant` (the caller checked that `by` is its owner or a tenant admin);
/// false when it was not frozen.
pub async fn unfreeze(db: &Db, tenant: &str, agent: uuid::Uuid, by: &str) -> Result<bool> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    crate::set_tenant(&tx, tenant).await?;
    let hit = tx
        .execute(
            "UPDATE agents SET frozen_at = NULL, frozen_by = NULL
             WHERE tenant_id = $1 AND id = $2 AND frozen_at IS NOT NULL",
            &[&tenant, &agent],
        )
        .await?;
    if hit > 0 {
        crate::audit::write(
            &tx,
            &crate::audit::Event::new(
                tenant,
                None,
                actiond_core::audit::AuditKind::AgentUnfrozen,
                by,
                serde_json::json!({"agent_id": agent}),
            ),
        )
        .await?;
    }
    tx.commit().await?;
    Ok(hit > 0)
}

/// Whether `agent` of `tenant` is frozen, and how many of its proposals are open (pending or
/// escalated: what a freeze would deny).
pub async fn freeze_state(db: &Db, tenant: &str, agent: uuid::Uuid) -> Result<(bool, i64)> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    crate::set_tenant(&tx, tenant).await?;
    let r = tx
        .query_one(
            "SELECT (SELECT frozen_at IS NOT NULL FROM agents WHERE tenant_id = $1 AND id = $2),
                    (SELECT count(*) FROM proposals WHERE tenant_id = $1 AND agent_id = $2 AND state IN ('pending', 'escalated'))",
            &[&tenant, &agent],
        )
        .await?;
    tx.commit().await?;
    Ok((r.get::<_, Option<bool>>(0).unwrap_or(false), r.get(1)))
}
