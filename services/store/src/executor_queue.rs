//! The executor's queue: claim `approved` rows with `FOR UPDATE SKIP LOCKED` in a transaction
//! that stays open only while the executor verifies them (no network call), spend their grants
//! and start them in that transaction, record outcomes, and sweep expired leases and grants.
//!
//! Spend rule (the guide's "grant already spent or expired"): one UPDATE
//! `… WHERE used_at IS NULL AND <signed expiry> > now()`, where the signed expiry is the
//! `expires_at` of the grant the executor verified (microseconds since the epoch, passed to the
//! statement), never a column it did not verify; on zero rows read the row afterwards:
//! `used_at` set = replay (investigate), null = expired.

use crate::grants::{GRANT_COLUMNS, NOW_US_SQL, StoredGrant};
use crate::proposals::{PROPOSAL_COLUMNS, ProposalRow};
use crate::{Db, Result, Tx, audit};
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

/// The executor's claim: up to `$1` `approved` proposals that no lease holds (a run lease, or
/// the back-off lease of [`back_off`]), oldest first, locked for the claiming transaction
/// (`FOR UPDATE SKIP LOCKED`: other executors skip them), with their agents, grants and each
/// tenant's latest document version (once per tenant of the batch,
/// [`crate::tenants::LATEST_PER_CLAIMED_TENANT_SQL`]). The row selection reads the partial
/// index `proposals_approved` (`tests/e2e/queue_plans.rs`); the rows come from that locking
/// read itself (their newest versions), with no second probe of `proposals`. A tenant that
/// moved to another cell (V44 `tenant_moves`) is skipped: its grants are spent only there.
/// Each row's agent and live grant are one key probe each, whatever the statistics
/// ([`crate::proposals::AGENT_OF_P`]; the grant by `grants_live_proposal`).
pub static CLAIM_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "WITH p AS (
            SELECT * FROM proposals
            WHERE state = 'approved' AND (lease_until IS NULL OR lease_until < now())
              AND NOT EXISTS (SELECT 1 FROM tenant_moves m WHERE m.tenant_id = proposals.tenant_id)
            ORDER BY updated_at LIMIT $1 FOR UPDATE SKIP LOCKED
         ), {latest}
         SELECT {PROPOSAL_COLUMNS}, {GRANT_COLUMNS}, l.version AS latest_doc_version
         FROM p {agent}
                LEFT JOIN LATERAL (SELECT * FROM grants g WHERE g.proposal_id = p.id AND g.voided_at IS NULL OFFSET 0) g ON true
                LEFT JOIN latest l ON l.tenant_id = p.tenant_id
         ORDER BY p.updated_at",
        latest = crate::tenants::LATEST_PER_CLAIMED_TENANT_SQL,
        agent = crate::proposals::AGENT_OF_P,
    )
});

/// Claims up to `limit` approved proposals whose lease is free, locking them for `tx`
/// ([`CLAIM_SQL`]). The executor verifies them, then spends and starts them
/// ([`spend_and_start_many`]), refuses them ([`refuse`]) or backs off from them
/// ([`back_off`]) in the same transaction, and commits: a claim writes nothing of its own
/// (before, each claim set a lease with an UPDATE and the spend locked the rows again). Keep
/// the transaction to that work: no handler and no other network call runs inside it. If the
/// executor dies meanwhile, Postgres ends the transaction and the rows are free at once.
pub async fn claim(tx: &Tx<'_>, limit: i64) -> Result<Vec<ClaimedRow>> {
    let stmt = tx.prepare_cached(&CLAIM_SQL).await?;
    let rows = tx.query(&stmt, &[&limit]).await?;
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

/// Leases claimed `approved` proposals to `owner` for `lease` without running them, so that no
/// claim takes them again before it runs out: what the executor does with a row whose checks
/// failed for a passing reason (a database or pool error), instead of retrying it at once.
/// In the claiming transaction `tx`, or on its own after that transaction failed. Returns how
/// many rows it leased (rows no longer `approved` are left alone).
pub async fn back_off<C: deadpool_postgres::GenericClient>(
    c: &C,
    ids: &[Uuid],
    owner: &str,
    lease: Duration,
) -> Result<u64> {
    if ids.is_empty() {
        return Ok(0);
    }
    Ok(c.execute(
        "UPDATE proposals SET lease_owner = $2, lease_until = now() + make_interval(secs => $3)
             WHERE id = ANY($1) AND state = 'approved'",
        &[&ids, &owner, &lease.as_secs_f64()],
    )
    .await?)
}

/// How far ahead of the database clock a grant's signed expiry may lie, in microseconds: the
/// longest `grant_lifetime` a handler may have ([`actiond_core::tenant::MAX_GRANT_LIFETIME`],
/// 15 minutes) plus the clock skew allowed for values from outside
/// ([`actiond_core::external_time::CLOCK_SKEW`], 60 s). Every issuer computes the expiry from the
/// database clock plus that lifetime, so only a signer that ignored it gets past this bound:
/// [`SPEND_AND_START_SQL`] does not spend such a grant ([`Spend::ExpiresTooFar`]).
pub const MAX_GRANT_AHEAD_US: u64 = (actiond_core::tenant::MAX_GRANT_LIFETIME.as_secs()
    + actiond_core::external_time::CLOCK_SKEW.as_secs())
    * 1_000_000;

/// Spends grants, starts their proposals and writes their `grant_spent` events, in one
/// statement (see [`spend_and_start_many`]): `$1` proposal ids, `$2` their grant ids, `$3` run
/// leases in seconds, `$4` this executor's id (the run lease's owner and the grant's
/// `used_by`), `$5` the state each proposal must still be in (`approved`), `$6` the grants'
/// key ids (recorded in the events), `$7` the actor (`executor:<id>`), `$8` the expiries of
/// the verified grants (their signed `expires_at`, microseconds since the epoch: the spend
/// compares these with the database clock, not the table's copy, on both sides: not passed, and
/// no further ahead than [`MAX_GRANT_AHEAD_US`]). Returns per request
/// `(proposal_id, held, started, stopped, events_ok, too_far)`, `stopped` being `'revoked'` or
/// `'frozen'` when the proposal did not start and its agent is (revoked first), else null (a
/// started proposal's agent is neither: `held` read it in the same snapshot, so its probe is
/// skipped, two index probes fewer per started proposal). The proposals are locked by the claim of the same
/// transaction ([`claim`]); `held` locks them again, which costs nothing then, and makes a
/// caller that did not claim them wait for whoever did.
///
/// Proposals are found by primary key, one probe per request: the expected state is a column
/// of the batch, not a constant, so no plan reads the `approved` queue through its partial
/// index and filters it by id (a plan that reads the whole backlog for every batch), and the
/// stopped-agent test is one probe per request (`OFFSET 0` keeps it from becoming a hashed
/// subplan that joins every proposal with every agent). `tests/e2e/queue_plans.rs`
/// checks the plan. Each started row's event is written from the row the statement moved, so
/// a proposal is `executing` exactly when its grant is spent and its event exists; an event
/// that is not written fails the whole statement ([`audit::events_match`]): nothing is spent
/// or started, and no handler runs without its event.
pub static SPEND_AND_START_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "WITH req AS (
            SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::float8[], $5::text[], $6::text[], $8::int8[])
                AS r(proposal_id, grant_id, lease_secs, from_state, key_id, expires_at_us)
         ), held AS (
            SELECT p.id FROM req JOIN proposals p ON p.id = req.proposal_id
            WHERE p.state = req.from_state
              AND NOT EXISTS (SELECT 1 FROM agents a WHERE a.id = p.agent_id
                              AND (a.frozen_at IS NOT NULL OR a.revoked_at IS NOT NULL))
              AND NOT EXISTS (SELECT 1 FROM tenant_moves m WHERE m.tenant_id = p.tenant_id)
            FOR UPDATE OF p
         ), spent AS (
            UPDATE grants g SET used_at = now(), used_by = $4
            FROM req JOIN held ON held.id = req.proposal_id
            WHERE g.id = req.grant_id AND g.proposal_id = req.proposal_id
              AND g.used_at IS NULL AND req.expires_at_us > {now_us}
              AND req.expires_at_us <= {now_us} + {max_ahead_us}
            RETURNING g.proposal_id, g.id AS grant_id, req.lease_secs, req.from_state, req.key_id
         ), started AS (
            UPDATE proposals p SET state = 'executing', lease_owner = $4,
                   lease_until = now() + make_interval(secs => spent.lease_secs)
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
                CASE WHEN NOT EXISTS (SELECT 1 FROM started WHERE started.id = req.proposal_id) THEN
                    (SELECT CASE WHEN a.revoked_at IS NOT NULL THEN 'revoked'
                                 WHEN a.frozen_at IS NOT NULL THEN 'frozen' END
                     FROM proposals p JOIN agents a ON a.id = p.agent_id
                     WHERE p.id = req.proposal_id OFFSET 0) END AS stopped,
                {check} AS events_ok,
                req.expires_at_us > {now_us} + {max_ahead_us} AS too_far
         FROM req",
        cols = audit::EVENT_COLUMNS,
        now_us = NOW_US_SQL,
        max_ahead_us = MAX_GRANT_AHEAD_US,
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
    /// The grant's signed expiry lies further ahead of the database clock than any grant's
    /// lifetime can reach ([`MAX_GRANT_AHEAD_US`]): not spent, nothing ran. Only a signer that
    /// ignored the handler's `grant_lifetime` (a stolen or misused signing key) makes one.
    ExpiresTooFar,
    /// The proposal is no longer `approved` (it was not claimed by this transaction, and
    /// another executor or the sweeper moved it): nothing ran.
    NoLongerApproved,
    /// The proposal's agent is frozen (read in the spend's own statement): nothing was spent
    /// and nothing ran; the caller blocks it.
    AgentFrozen,
    /// The proposal's agent is revoked (read in the spend's own statement): nothing was spent
    /// and nothing ran; the caller blocks it.
    AgentRevoked,
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
    /// The grant's signed expiry (`GrantClaims::expires_at`, microseconds since the epoch) as
    /// the executor verified it: the spend compares this value, not the table's, with the
    /// database clock.
    pub expires_at_us: i64,
    /// Lease from the spend until the outcome must be recorded.
    pub run_lease: Duration,
}

/// Spends grants and starts their proposals, all in **one statement** ([`SPEND_AND_START_SQL`])
/// in the claiming transaction `tx` ([`claim`]), which the caller commits: a claim batch shares
/// one commit, and nothing runs before that commit. For each request it is all or nothing: the
/// proposal is held (`FOR UPDATE`) only if it is still `approved`; its grant is spent by the
/// single-spend update (`used_at IS NULL` and the request's signed expiry after the database's
/// `now()`); only a proposal whose grant this statement spent moves `approved →
/// executing`, and exactly those get a `grant_spent` event, written by the same statement. A
/// proposal whose agent is frozen or revoked is not held: its grant stays unspent
/// ([`Spend::AgentFrozen`], [`Spend::AgentRevoked`]; V20 and V34 refuse the move anyway). Returns one [`Spend`] per request, in order. For a held
/// proposal whose grant was not spent, the grant is read afterwards: `used_at` set = replay,
/// null = expired.
pub async fn spend_and_start_many(
    tx: &Tx<'_>,
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
    let expiries: Vec<i64> = reqs.iter().map(|r| r.expires_at_us).collect();
    let actor = format!("executor:{owner}");
    let stmt = tx.prepare_cached(&SPEND_AND_START_SQL).await?;
    let from = vec![ProposalState::Approved.as_str(); ids.len()];
    let rows = tx
        .query(
            &stmt,
            &[
                &ids, &grants, &leases, &owner, &from, &key_ids, &actor, &expiries,
            ],
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
                r.try_get::<_, Option<String>>(3)?,
                r.try_get::<_, bool>(5)?,
            ),
        );
    }
    let unspent: Vec<Uuid> = reqs
        .iter()
        .filter(|r| status.get(&r.row.id).is_some_and(|s| s.0 && !s.1))
        .map(|r| r.grant_id)
        .collect();
    let used = spent_by(tx, &unspent).await?;
    Ok(reqs
        .iter()
        .map(|r| match status.get(&r.row.id) {
            Some((_, true, _, _)) => Spend::Started,
            Some((_, false, Some(stopped), _)) if stopped == "revoked" => Spend::AgentRevoked,
            Some((_, false, Some(_), _)) => Spend::AgentFrozen,
            Some((true, false, None, true)) => Spend::ExpiresTooFar,
            Some((true, false, None, false)) => match used.get(&r.grant_id) {
                Some(Some(by)) => Spend::Replayed {
                    used_by: by.clone(),
                },
                _ => Spend::Expired,
            },
            _ => Spend::NoLongerApproved,
        })
        .collect())
}

/// For each of `grant_ids` that has been spent, who spent it (`Some(used_by)`); `None` for
/// one that has not been spent.
async fn spent_by<C: deadpool_postgres::GenericClient>(
    c: &C,
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

/// Refuses a claimed `approved` proposal without running it, in the claiming transaction `tx`
/// ([`claim`]): moves it to `to_state` (`blocked` or `expired`) with `reason` (shown to the
/// agent) and an audit event of `kind` whose `detail` holds the internal cause, by `owner`.
/// Returns false when the proposal was no longer `approved`.
pub async fn refuse(
    tx: &Tx<'_>,
    row: &ProposalRow,
    owner: &str,
    to_state: ProposalState,
    reason: &str,
    kind: AuditKind,
    detail: Value,
) -> Result<bool> {
    let n = tx
        .execute(
            "UPDATE proposals SET state = $2, decision_reason = $3, lease_owner = NULL, lease_until = NULL
             WHERE id = $1 AND state = 'approved'",
            &[&row.id, &to_state.as_str(), &reason],
        )
        .await?;
    if n == 0 {
        return Ok(false);
    }
    let actor = format!("executor:{owner}");
    audit::write(
        tx,
        &row.event(kind, &actor, detail)
            .transition(Some(ProposalState::Approved), to_state),
    )
    .await?;
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
/// - `approved` whose grant expired unspent and that no live lease holds → `expired`, by the
///   stored signed expiry (`expires_at_us`; V34 generates `expires_at` from it): a writer who
///   changes that value breaks the grant's signature, so it can only end a grant early.
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
            &format!("WITH dead AS (
                SELECT p.id FROM proposals p JOIN grants g ON g.proposal_id = p.id AND g.voided_at IS NULL
                WHERE p.state = 'approved' AND g.used_at IS NULL AND g.expires_at_us <= {NOW_US_SQL}
                  AND (p.lease_until IS NULL OR p.lease_until < now())
                  AND NOT EXISTS (SELECT 1 FROM tenant_moves m WHERE m.tenant_id = p.tenant_id)
                FOR UPDATE OF p SKIP LOCKED
             )
             UPDATE proposals p SET state = 'expired', decision_reason = 'the approval expired before an executor ran it; propose again',
                    lease_owner = NULL, lease_until = NULL
             FROM dead WHERE p.id = dead.id
             RETURNING p.id, p.tenant_id, p.intent_hash, p.params_sha256"),
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
