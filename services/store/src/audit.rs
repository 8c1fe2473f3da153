//! The append-only audit log. Every state change writes its event in the same transaction
//! ("no event, no change"); events store hashes of params, never params.

use crate::Result;
use actiond_core::audit::AuditKind;
use actiond_core::state::ProposalState;
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
    /// What happened.
    pub kind: AuditKind,
    /// Who did it (`agent:<id>`, `policy`, `executor:<id>`, `approver:<sub>`, `operator:<sub>`).
    pub actor: &'a str,
    /// State before, for transitions.
    pub from_state: Option<ProposalState>,
    /// State after, for transitions.
    pub to_state: Option<ProposalState>,
    /// Intent hash of the proposal.
    pub intent_hash: Option<&'a str>,
    /// SHA-256 of the canonical params.
    pub params_sha256: Option<&'a str>,
    /// Anything else (rule, reason, errors, key id…). Never params.
    pub detail: Value,
}

impl<'a> Event<'a> {
    /// An event of `kind` by `actor` in `tenant`, about `proposal` when given, with no state
    /// change and no hashes (add them with [`Event::transition`] and [`Event::hashes`]).
    pub fn new(
        tenant: &'a str,
        proposal: Option<Uuid>,
        kind: AuditKind,
        actor: &'a str,
        detail: Value,
    ) -> Self {
        Self {
            tenant_id: tenant,
            proposal_id: proposal,
            kind,
            actor,
            from_state: None,
            to_state: None,
            intent_hash: None,
            params_sha256: None,
            detail,
        }
    }

    /// The state change this event records (`from` is `None` for a new proposal).
    pub fn transition(mut self, from: Option<ProposalState>, to: ProposalState) -> Self {
        self.from_state = from;
        self.to_state = Some(to);
        self
    }

    /// The proposal's intent hash and params hash (lowercase hex SHA-256).
    pub fn hashes(mut self, intent_hash: &'a str, params_sha256: &'a str) -> Self {
        self.intent_hash = Some(intent_hash);
        self.params_sha256 = Some(params_sha256);
        self
    }
}

/// Writes one event with the given client (normally a transaction); see [`write_batch`].
pub async fn write<C: GenericClient>(c: &C, e: &Event<'_>) -> Result<u64> {
    write_batch(c, std::slice::from_ref(e)).await
}

/// The columns every event insert names, in this order: [`write_batch`] and the statements
/// that write a change and its event together (the submission, `proposals::SUBMIT_SQL`; the
/// executor's outcomes, `executor_queue::FINISH_SQL`) select them from their own rows. `id` and `at` are the database's
/// (V22: no service role may write them).
pub const EVENT_COLUMNS: &str =
    "tenant_id, proposal_id, kind, actor, from_state, to_state, intent_hash, params_sha256, detail";

/// A column for the final `SELECT` of a statement that writes changes (the rows of its CTE
/// `rows`) and their events (the rows its CTE `events` returns) together: 0 when there are as
/// many events as changes, otherwise a run-time error that aborts the whole statement (a text
/// that is not an integer, cast to one: SQLSTATE 22P02, naming `kind` and both counts), so
/// nothing of it is written. No event, no change, even when something in the database (a
/// trigger, a rule) keeps an event from being inserted; and when the statement's transaction
/// is committed by a pipelined COMMIT, the failed statement makes that COMMIT a rollback.
pub fn events_match(kind: AuditKind, events: &str, rows: &str) -> String {
    format!(
        "CASE WHEN (SELECT count(*) FROM {events}) = (SELECT count(*) FROM {rows}) THEN 0
              ELSE ('{kind} events not written: ' || (SELECT count(*) FROM {events}) || ' for '
                    || (SELECT count(*) FROM {rows}) || ' changes; nothing is stored')::int END",
        kind = kind.as_str()
    )
}

/// Writes events in one statement. With `proposals::SUBMIT_SQL` and
/// `executor_queue::FINISH_SQL` (which write their events in the same statement as the change)
/// it is the only `INSERT INTO audit_events` of the services.
///
/// An event about a proposal is written only when that proposal is visible to this
/// transaction, so a caller may pipeline it behind the statement that creates or moves the
/// proposal and learn from the returned count whether it was written.
///
/// The visibility test is one primary-key probe per event: `OFFSET 0` keeps Postgres from
/// turning the `EXISTS` into a hashed subplan, which reads every proposal visible to the role
/// (all of a tenant's, for the api) to build a hash table for a one-row insert. It chose that
/// plan while the table was small and kept it for the connection (measured: 0.37 ms per
/// submission's event after 2,000 proposals, growing with the table).
pub async fn write_batch<C: GenericClient>(c: &C, events: &[Event<'_>]) -> Result<u64> {
    if events.is_empty() {
        return Ok(0);
    }
    let tenants: Vec<&str> = events.iter().map(|e| e.tenant_id).collect();
    let props: Vec<Option<Uuid>> = events.iter().map(|e| e.proposal_id).collect();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    let actors: Vec<&str> = events.iter().map(|e| e.actor).collect();
    let from: Vec<Option<&str>> = events
        .iter()
        .map(|e| e.from_state.map(|s| s.as_str()))
        .collect();
    let to: Vec<Option<&str>> = events
        .iter()
        .map(|e| e.to_state.map(|s| s.as_str()))
        .collect();
    let intents: Vec<Option<&str>> = events.iter().map(|e| e.intent_hash).collect();
    let params: Vec<Option<&str>> = events.iter().map(|e| e.params_sha256).collect();
    let details: Vec<&Value> = events.iter().map(|e| &e.detail).collect();
    let stmt = c
        .prepare_cached(&format!(
            "INSERT INTO audit_events ({EVENT_COLUMNS})
             SELECT e.tenant_id, e.proposal_id, e.kind, e.actor, e.from_state, e.to_state, e.intent_hash, e.params_sha256, e.detail
             FROM unnest($1::text[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::jsonb[])
                  AS e(tenant_id, proposal_id, kind, actor, from_state, to_state, intent_hash, params_sha256, detail)
             WHERE e.proposal_id IS NULL OR EXISTS (SELECT 1 FROM proposals p WHERE p.id = e.proposal_id OFFSET 0)"
        ))
        .await?;
    Ok(c.execute(
        &stmt,
        &[
            &tenants, &props, &kinds, &actors, &from, &to, &intents, &params, &details,
        ],
    )
    .await?)
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
