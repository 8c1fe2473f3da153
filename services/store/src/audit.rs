//! The append-only audit log. Every state change writes its event in the same transaction
//! ("no event, no change"); events store hashes of params, never params.

use crate::Result;
use deadpool_postgres::GenericClient;
use serde_json::Value;
use uuid::Uuid;

/// One audit event to write.
#[derive(Debug, Clone)]
pub struct Event<'a> {
    /// Tenant the event belongs to.
    pub tenant_id: &'a str,
    /// Proposal, when the event is about one.
    pub proposal_id: Option<Uuid>,
    /// What happened (`proposal.submitted`, `proposal.decided`, `grant.spent`, …).
    pub kind: &'a str,
    /// Who did it (`agent:<id>`, `policy`, `executor:<id>`, `approver:<sub>`, `operator:<sub>`).
    pub actor: &'a str,
    /// State before, for transitions.
    pub from_state: Option<&'a str>,
    /// State after, for transitions.
    pub to_state: Option<&'a str>,
    /// Intent hash of the proposal.
    pub intent_hash: Option<&'a str>,
    /// SHA-256 of the canonical params.
    pub params_sha256: Option<&'a str>,
    /// Anything else (rule, reason, errors, key id…). Never params.
    pub detail: Value,
}

/// Writes one event with the given client (normally a transaction).
pub async fn write<C: GenericClient>(c: &C, e: &Event<'_>) -> Result<()> {
    c.execute(
        "INSERT INTO audit_events (tenant_id, proposal_id, kind, actor, from_state, to_state, intent_hash, params_sha256, detail)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        &[&e.tenant_id, &e.proposal_id, &e.kind, &e.actor, &e.from_state, &e.to_state, &e.intent_hash, &e.params_sha256, &e.detail],
    )
    .await?;
    Ok(())
}

/// An event as read back.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StoredEvent {
    /// Sequence number.
    pub id: i64,
    /// When (database clock).
    pub at: chrono::DateTime<chrono::Utc>,
    /// Kind.
    pub kind: String,
    /// Actor.
    pub actor: String,
    /// From state.
    pub from_state: Option<String>,
    /// To state.
    pub to_state: Option<String>,
    /// Detail.
    pub detail: Value,
}

/// Events of one proposal, oldest first.
pub async fn for_proposal<C: GenericClient>(
    c: &C,
    tenant_id: &str,
    proposal_id: Uuid,
) -> Result<Vec<StoredEvent>> {
    let rows = c
        .query(
            "SELECT id, at, kind, actor, from_state, to_state, detail FROM audit_events
             WHERE tenant_id = $1 AND proposal_id = $2 ORDER BY id",
            &[&tenant_id, &proposal_id],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| StoredEvent {
            id: r.get(0),
            at: r.get(1),
            kind: r.get(2),
            actor: r.get(3),
            from_state: r.get(4),
            to_state: r.get(5),
            detail: r.get(6),
        })
        .collect())
}
