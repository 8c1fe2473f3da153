//! The executor's queue: claim `approved` rows with `SKIP LOCKED` and a lease (a short
//! transaction), spend the grant and start execution in one transaction, record outcomes, and
//! sweep expired leases and grants.
//!
//! Spend rule (the guide's "grant already spent or expired"): one UPDATE
//! `… WHERE used_at IS NULL AND expires_at > now()`; on zero rows read the row afterwards:
//! `used_at` set = replay (investigate), null = expired.

use crate::grants::{GRANT_COLUMNS, StoredGrant};
use crate::proposals::{PROPOSAL_COLUMNS, ProposalRow};
use crate::{Db, Result, audit};
use actiond_core::audit::AuditKind;
use actiond_core::state::ProposalState;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::time::Duration;
use uuid::Uuid;

/// A claimed approved proposal, with its grant and the tenant's latest document version.
/// Derefs to its [`ProposalRow`].
#[derive(Debug, Clone)]
pub struct ClaimedRow {
    /// The proposal as stored.
    pub proposal: ProposalRow,
    /// The proposal's grant as stored (read with the claim), if any.
    pub grant: Option<StoredGrant>,
    /// The tenant's latest document version at claim time.
    pub latest_doc_version: Option<i32>,
}

impl std::ops::Deref for ClaimedRow {
    type Target = ProposalRow;
    fn deref(&self) -> &ProposalRow {
        &self.proposal
    }
}

/// Claims up to `limit` approved proposals whose lease is free, setting `lease_owner = owner`
/// and `lease_until = now() + lease`. One short statement; no transaction stays open.
pub async fn claim(db: &Db, owner: &str, lease: Duration, limit: i64) -> Result<Vec<ClaimedRow>> {
    let c = db.client().await?;
    let stmt = c
        .prepare_cached(&format!(
            "WITH c AS (
                SELECT id FROM proposals
                WHERE state = 'approved' AND (lease_until IS NULL OR lease_until < now())
                ORDER BY updated_at LIMIT $3 FOR UPDATE SKIP LOCKED
             )
             UPDATE proposals p SET lease_owner = $1, lease_until = now() + make_interval(secs => $2)
             FROM c JOIN agents a ON true LEFT JOIN grants g ON g.proposal_id = c.id
             WHERE p.id = c.id AND a.id = p.agent_id
             RETURNING {PROPOSAL_COLUMNS}, {GRANT_COLUMNS},
                       (SELECT max(d.version) FROM tenant_documents d WHERE d.tenant_id = p.tenant_id) AS latest_doc_version"
        ))
        .await?;
    let rows = c
        .query(&stmt, &[&owner, &lease.as_secs_f64(), &limit])
        .await?;
    rows.iter()
        .map(|r| {
            Ok(ClaimedRow {
                proposal: ProposalRow::from_row(r)?,
                grant: StoredGrant::from_row(r)?,
                latest_doc_version: r.try_get("latest_doc_version")?,
            })
        })
        .collect()
}

/// Spends grants, starts their proposals and writes their `grant_spent` events, in one
/// statement (see [`spend_and_start_many`]): `$1` proposal ids, `$2` their grant ids, `$3` run
/// leases in seconds, `$4` this executor's id, `$5` the state each proposal must still be in
/// (`approved`), `$6` the grants' key ids (recorded in the events), `$7` the actor
/// (`executor:<id>`). Returns per request `(proposal_id, held, started, frozen)`.
///
/// Proposals are found by primary key, one probe per request: the expected state is a column
/// of the batch, not a constant, so no plan reads the `approved` queue through its partial
/// index and filters it by id (a plan that reads the whole backlog for every batch), and the
/// frozen-agent test is one probe per request (`OFFSET 0` keeps it from becoming a hashed
/// subplan that joins every proposal with every frozen agent). `tests/e2e/queue_plans.rs`
/// checks the plan. Each started row's event is written from the row the statement moved, so
/// a proposal is `executing` exactly when its grant is spent and its event exists; an event
/// that is not written fails the whole statement ([`audit::events_match`]): nothing is spent
/// or started, and no handler runs without its event.
pub static SPEND_AND_START_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "WITH req AS (
            SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::float8[], $5::text[], $6::text[])
                AS r(proposal_id, grant_id, lease_secs, from_state, key_id)
         ), held AS (
            SELECT p.id FROM req JOIN proposals p ON p.id = req.proposal_id
            WHERE p.state = req.from_state AND p.lease_owner = $4
              AND NOT EXISTS (SELECT 1 FROM agents a WHERE a.id = p.agent_id AND a.frozen_at IS NOT NULL)
            FOR UPDATE OF p
         ), spent AS (
            UPDATE grants g SET used_at = now(), used_by = $4
            FROM req JOIN held ON held.id = req.proposal_id
            WHERE g.id = req.grant_id AND g.proposal_id = req.proposal_id
              AND g.used_at IS NULL AND g.expires_at > now()
            RETURNING g.proposal_id, g.id AS grant_id, req.lease_secs, req.from_state, req.key_id
         ), started AS (
            UPDATE proposals p SET state = 'executing', lease_until = now() + make_interval(secs => spent.lease_secs)
            FROM spent WHERE p.id = spent.proposal_id
            RETURNING p.id, p.tenant_id, p.intent_hash, p.params_sha256, spent.grant_id, spent.from_state, spent.key_id
         ), ev AS (
            INSERT INTO audit_events ({cols})
            SELECT tenant_id, id, '{kind}', $7::text, from_state, 'executing', intent_hash, params_sha256,
                   jsonb_build_object('grant_id', grant_id, 'key_id', key_id)
            FROM started
            RETURNING proposal_id
         )
         SELECT req.proposal_id,
                EXISTS (SELECT 1 FROM held WHERE held.id = req.proposal_id) AS held,
                EXISTS (SELECT 1 FROM started WHERE started.id = req.proposal_id) AS started,
                EXISTS (SELECT 1 FROM proposals p JOIN agents a ON a.id = p.agent_id
                        WHERE p.id = req.proposal_id AND a.frozen_at IS NOT NULL OFFSET 0) AS frozen,
                {check} AS events_ok
         FROM req",
        cols = audit::EVENT_COLUMNS,
        kind = AuditKind::GrantSpent.as_str(),
        check = audit::events_match(AuditKind::GrantSpent, "ev", "started"),
    )
});

/// Records outcomes (see [`finish_many`]) and their `proposal.executed` events in one
/// statement: `$1` proposal ids, `$2` outcome states, `$3` internal details, `$4` this
/// executor's id, `$5` the state each proposal must still be in (`executing`), `$6` the actor
/// (`executor:<id>`). Returns the ids it moved; each moved row has its event, written from the
/// row itself, and an event that is not written fails the whole statement
/// ([`audit::events_match`]): no outcome without its event. Found by primary key, like [`SPEND_AND_START_SQL`] and for the same reason.
/// `finished_at` is never before the move to `executing` (`greatest(now(), updated_at)`:
/// `now()` is this transaction's start, which may precede that move's commit; V27 stamps
/// `updated_at` the same way).
pub static FINISH_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "WITH moved AS (
            UPDATE proposals p SET state = f.outcome, outcome = f.outcome, outcome_detail = f.detail,
                   finished_at = greatest(now(), p.updated_at), lease_owner = NULL, lease_until = NULL
            FROM unnest($1::uuid[], $2::text[], $3::text[], $5::text[]) AS f(id, outcome, detail, from_state)
            WHERE p.id = f.id AND p.state = f.from_state AND p.lease_owner = $4
            RETURNING p.id, p.tenant_id, p.intent_hash, p.params_sha256, f.outcome, f.detail, f.from_state
         ), ev AS (
            INSERT INTO audit_events ({cols})
            SELECT tenant_id, id, '{kind}', $6::text, from_state, outcome, intent_hash, params_sha256,
                   jsonb_build_object('outcome', outcome, 'detail', detail)
            FROM moved
            RETURNING proposal_id
         )
         SELECT id, {check} AS events_ok FROM moved",
        cols = audit::EVENT_COLUMNS,
        kind = AuditKind::ProposalExecuted.as_str(),
        check = audit::events_match(AuditKind::ProposalExecuted, "ev", "moved"),
    )
});

/// What [`spend_and_start_many`] found for one proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spend {
    /// Grant spent, proposal `executing`, audit written: run the handler now.
    Started,
    /// The grant was already spent (replay): nothing ran. Carries who spent it.
    Replayed {
        /// Executor that spent it.
        used_by: Option<String>,
    },
    /// The grant expired unspent: nothing ran.
    Expired,
    /// This executor no longer holds the lease (or the proposal left `approved`): nothing ran.
    LostLease,
    /// The proposal's agent is frozen (read in the spend's own statement): nothing was spent
    /// and nothing ran; the caller blocks it.
    AgentFrozen,
}

/// One proposal to start: its claimed row, the grant to spend and the lease covering the
/// handler's run (its timeout plus a margin).
#[derive(Debug, Clone, Copy)]
pub struct StartRequest<'a> {
    /// The claimed proposal.
    pub row: &'a ClaimedRow,
    /// The grant to spend (it must be the row's grant: the statement checks `proposal_id`).
    pub grant_id: Uuid,
    /// The grant's key id (recorded in the audit event).
    pub key_id: &'a str,
    /// Lease from the spend until the outcome must be recorded.
    pub run_lease: Duration,
}

/// Spends grants and starts their proposals, all in **one statement** ([`SPEND_AND_START_SQL`],
/// its own transaction: a claim batch shares one commit and one round trip). For each request
/// it is all or nothing: the proposal is locked (`FOR UPDATE`) only if it is still `approved`
/// and leased to `owner`; its grant is spent by the single-spend update (`used_at IS NULL AND
/// expires_at > now()`); only a proposal whose grant this statement spent moves `approved →
/// executing`, and exactly those get a `grant_spent` event, written by the same statement. A
/// proposal whose agent is frozen is not held: its grant stays unspent ([`Spend::AgentFrozen`];
/// V20 refuses the move anyway). Returns one [`Spend`] per request, in order. For a held
/// proposal whose grant was not spent, the grant is read after the commit: `used_at` set =
/// replay, null = expired.
pub async fn spend_and_start_many(
    db: &Db,
    owner: &str,
    reqs: &[StartRequest<'_>],
) -> Result<Vec<Spend>> {
    if reqs.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<Uuid> = reqs.iter().map(|r| r.row.id).collect();
    let grants: Vec<Uuid> = reqs.iter().map(|r| r.grant_id).collect();
    let leases: Vec<f64> = reqs.iter().map(|r| r.run_lease.as_secs_f64()).collect();
    let key_ids: Vec<&str> = reqs.iter().map(|r| r.key_id).collect();
    let actor = format!("executor:{owner}");
    let c = db.client().await?;
    let stmt = c.prepare_cached(&SPEND_AND_START_SQL).await?;
    let from = vec![ProposalState::Approved.as_str(); ids.len()];
    let rows = c
        .query(
            &stmt,
            &[&ids, &grants, &leases, &owner, &from, &key_ids, &actor],
        )
        .await?;
    let mut status = HashMap::with_capacity(rows.len());
    for r in &rows {
        let id: Uuid = r.try_get(0)?;
        status.insert(
            id,
            (
                r.try_get::<_, bool>(1)?,
                r.try_get::<_, bool>(2)?,
                r.try_get::<_, bool>(3)?,
            ),
        );
    }
    let unspent: Vec<Uuid> = reqs
        .iter()
        .filter(|r| status.get(&r.row.id).is_some_and(|s| s.0 && !s.1))
        .map(|r| r.grant_id)
        .collect();
    let used = spent_by(&c, &unspent).await?;
    Ok(reqs
        .iter()
        .map(|r| match status.get(&r.row.id) {
            Some((_, true, _)) => Spend::Started,
            Some((_, false, true)) => Spend::AgentFrozen,
            Some((true, false, false)) => match used.get(&r.grant_id) {
                Some(Some(by)) => Spend::Replayed {
                    used_by: by.clone(),
                },
                _ => Spend::Expired,
            },
            _ => Spend::LostLease,
        })
        .collect())
}

/// For each of `grant_ids` that has been spent, who spent it (`Some(used_by)`); `None` for
/// one that has not been spent.
async fn spent_by(
    c: &crate::Client,
    grant_ids: &[Uuid],
) -> Result<HashMap<Uuid, Option<Option<String>>>> {
    if grant_ids.is_empty() {
        return Ok(HashMap::new());
    }
    let rows = c
        .query(
            "SELECT id, used_at IS NOT NULL, used_by FROM grants WHERE id = ANY($1)",
            &[&grant_ids],
        )
        .await?;
    rows.iter()
        .map(|r| {
            let used: bool = r.try_get(1)?;
            let by: Option<String> = r.try_get(2)?;
            Ok((r.try_get(0)?, used.then_some(by)))
        })
        .collect()
}

/// Refuses a claimed `approved` proposal without running it: moves it to `to_state`
/// (`blocked` or `expired`) with `reason` (shown to the agent) and an audit event of `kind`
/// whose `detail` holds the internal cause. Returns false when the lease was lost.
pub async fn refuse(
    db: &Db,
    row: &ProposalRow,
    owner: &str,
    to_state: ProposalState,
    reason: &str,
    kind: AuditKind,
    detail: Value,
) -> Result<bool> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    let n = tx
        .execute(
            "UPDATE proposals SET state = $3, decision_reason = $4, lease_owner = NULL, lease_until = NULL
             WHERE id = $1 AND state = 'approved' AND lease_owner = $2",
            &[&row.id, &owner, &to_state.as_str(), &reason],
        )
        .await?;
    if n == 0 {
        tx.rollback().await?;
        return Ok(false);
    }
    let actor = format!("executor:{owner}");
    audit::write(
        &tx,
        &row.event(kind, &actor, detail)
            .transition(Some(ProposalState::Approved), to_state),
    )
    .await?;
    tx.commit().await?;
    Ok(true)
}

/// One handler outcome to record: `succeeded`, `failed` or `outcome_unknown`, and the
/// internal detail (provider status, error text) that goes to `outcome_detail` and the audit
/// event, never to the agent.
#[derive(Debug, Clone, Copy)]
pub struct Finish<'a> {
    /// The proposal that ran.
    pub row: &'a ProposalRow,
    /// Its outcome state.
    pub outcome: ProposalState,
    /// Internal detail.
    pub detail: &'a str,
}

/// Records outcomes on `executing` proposals this executor holds, in **one statement**
/// ([`FINISH_SQL`]): every row still `executing` and leased to `owner` moves to its outcome
/// with its `proposal.executed` event. Returns, per item in order, whether it was recorded;
/// false means the lease was lost (the sweeper already marked it `outcome_unknown`).
pub async fn finish_many(db: &Db, owner: &str, items: &[Finish<'_>]) -> Result<Vec<bool>> {
    if items.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<Uuid> = items.iter().map(|f| f.row.id).collect();
    let outcomes: Vec<&str> = items.iter().map(|f| f.outcome.as_str()).collect();
    let details: Vec<&str> = items.iter().map(|f| f.detail).collect();
    let actor = format!("executor:{owner}");
    let c = db.client().await?;
    let stmt = c.prepare_cached(&FINISH_SQL).await?;
    let from = vec![ProposalState::Executing.as_str(); ids.len()];
    let mut moved = HashSet::new();
    for r in c
        .query(&stmt, &[&ids, &outcomes, &details, &owner, &from, &actor])
        .await?
    {
        moved.insert(r.try_get::<_, Uuid>(0)?);
    }
    Ok(items.iter().map(|f| moved.contains(&f.row.id)).collect())
}

/// Counts of one sweep.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// `executing` rows whose lease ran out after the spend → `outcome_unknown`.
    pub outcome_unknown: u64,
    /// `approved` rows whose grant expired unspent → `expired`.
    pub expired: u64,
}

/// The executor owns the timeouts of `approved` and of leases:
/// - `executing` with an expired lease (the grant is spent) → `outcome_unknown`, never re-run;
/// - `approved` whose grant expired unspent and that no live lease holds → `expired`.
///
/// (`approved` with an expired lease and a live grant needs nothing: the claim takes it again.)
pub async fn sweep(db: &Db) -> Result<Swept> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    let lost = tx
        .query(
            "WITH lost AS (
                SELECT id FROM proposals WHERE state = 'executing' AND lease_until < now() FOR UPDATE SKIP LOCKED
             )
             UPDATE proposals p SET state = 'outcome_unknown', outcome = 'outcome_unknown',
                    outcome_detail = 'executor lease ran out after the grant was spent', finished_at = greatest(now(), p.updated_at)
             FROM lost WHERE p.id = lost.id
             RETURNING p.id, p.tenant_id, p.intent_hash, p.params_sha256, p.lease_owner",
            &[],
        )
        .await?;
    let unknown = sweep_events(
        &tx,
        &lost,
        AuditKind::ProposalOutcomeUnknown,
        (ProposalState::Executing, ProposalState::OutcomeUnknown),
        |r| Ok(json!({"lease_owner": r.try_get::<_, Option<String>>("lease_owner")?})),
    )
    .await?;
    tx.commit().await?;
    let tx = c.transaction().await?;
    let dead = tx
        .query(
            "WITH dead AS (
                SELECT p.id FROM proposals p JOIN grants g ON g.proposal_id = p.id
                WHERE p.state = 'approved' AND g.used_at IS NULL AND g.expires_at <= now()
                  AND (p.lease_until IS NULL OR p.lease_until < now())
                FOR UPDATE OF p SKIP LOCKED
             )
             UPDATE proposals p SET state = 'expired', decision_reason = 'the approval expired before an executor ran it; propose again',
                    lease_owner = NULL, lease_until = NULL
             FROM dead WHERE p.id = dead.id
             RETURNING p.id, p.tenant_id, p.intent_hash, p.params_sha256",
            &[],
        )
        .await?;
    let expired = sweep_events(
        &tx,
        &dead,
        AuditKind::GrantExpired,
        (ProposalState::Approved, ProposalState::Expired),
        |_| Ok(json!({})),
    )
    .await?;
    tx.commit().await?;
    Ok(Swept {
        outcome_unknown: unknown,
        expired,
    })
}

/// Writes the sweeper's audit events for the rows a sweep moved (`id`, `tenant_id`,
/// `intent_hash`, `params_sha256` columns). Returns how many rows moved.
async fn sweep_events(
    tx: &crate::Tx<'_>,
    moved: &[tokio_postgres::Row],
    kind: AuditKind,
    (from, to): (ProposalState, ProposalState),
    detail: impl Fn(&tokio_postgres::Row) -> Result<Value>,
) -> Result<u64> {
    let mut events = Vec::with_capacity(moved.len());
    for r in moved {
        events.push(
            audit::Event::new(
                r.try_get("tenant_id")?,
                Some(r.try_get("id")?),
                kind,
                "executor-sweeper",
                detail(r)?,
            )
            .transition(Some(from), to)
            .hashes(r.try_get("intent_hash")?, r.try_get("params_sha256")?),
        );
    }
    audit::write_batch(tx, &events).await?;
    Ok(moved.len() as u64)
}
