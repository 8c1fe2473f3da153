//! Staged approvals (`approval_stages`, V16): the stages of an escalated proposal whose
//! handler declares `approvals: {stages, on_timeout}`.
//!
//! Policy writes them when it escalates ([`open`]); decisions complete them
//! ([`crate::approvals::decide`]); a stage whose `within` passed is moved on by whoever finds it
//! first — the policy sweep ([`sweep`]) or a decision — with [`time_out`], whose conditional
//! updates make a second finder a no-op. Every time is the database clock's, and every rule is
//! also enforced by the V16 triggers, so a caller that skipped this module is refused there.
//! Each transition writes its audit event in the caller's transaction.

use crate::proposals::{PROPOSAL_COLUMNS, ProposalRow};
use crate::{Db, Result, audit};
use actiond_core::audit::AuditKind;
use actiond_core::state::ProposalState;
use actiond_core::tenant::StagedApprovals;
use chrono::{DateTime, Utc};
use deadpool_postgres::GenericClient;
use serde_json::json;
use uuid::Uuid;

/// One stage of a proposal as stored, with what the database clock says about it now.
#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    /// 1-based.
    pub stage: i32,
    /// How many stages the proposal has.
    pub of: i32,
    /// The approver group.
    pub approvers: String,
    /// Distinct people of the group needed.
    pub required: i32,
    /// `within` in seconds.
    pub within_secs: f64,
    /// `next` or `expire`.
    pub on_timeout: String,
    /// When it opened (None: not yet).
    pub opened_at: Option<DateTime<Utc>>,
    /// `opened_at + within`.
    pub due_at: Option<DateTime<Utc>>,
    /// When it got its approvals.
    pub completed_at: Option<DateTime<Utc>>,
    /// When its `within` passed unfinished.
    pub timed_out_at: Option<DateTime<Utc>>,
    /// Seconds left until `due_at` (negative: overdue), by the database clock.
    pub left_secs: Option<f64>,
    /// Subjects who approved in this stage, in order.
    pub approved_by: Vec<String>,
}

impl Stage {
    /// Open: opened, neither completed nor timed out.
    pub fn is_open(&self) -> bool {
        self.opened_at.is_some() && self.completed_at.is_none() && self.timed_out_at.is_none()
    }

    /// Open and past its due time (database clock).
    pub fn is_overdue(&self) -> bool {
        self.is_open() && self.left_secs.is_some_and(|l| l < 0.0)
    }
}

/// The stage that is open now, if any.
pub fn open_stage(stages: &[Stage]) -> Option<&Stage> {
    stages.iter().find(|s| s.is_open())
}

/// The stages of a proposal, in order (empty when it has none), with who approved in each.
/// RLS applies: the caller's transaction must see the tenant.
pub async fn of_proposal<C: GenericClient>(c: &C, id: Uuid) -> Result<Vec<Stage>> {
    read(c, id, true).await
}

/// Like [`of_proposal`] without reading `approvals` (the policy role may not).
async fn read<C: GenericClient>(c: &C, id: Uuid, approvers: bool) -> Result<Vec<Stage>> {
    Ok(read_many(c, &[id], approvers)
        .await?
        .remove(&id)
        .unwrap_or_default())
}

/// The stages of every proposal in `ids` that has any, in order, in **one** statement (a
/// queue page reads all its proposals' stages at once). With `approvers`, who approved in each
/// stage (reads `approvals`, which the policy role may not).
async fn read_many<C: GenericClient>(
    c: &C,
    ids: &[Uuid],
    approvers: bool,
) -> Result<std::collections::HashMap<Uuid, Vec<Stage>>> {
    // Privileges are checked for every table a statement names, run or not: the policy
    // role's statement does not name `approvals`.
    let approved_by = if approvers {
        "COALESCE((SELECT array_agg(a.subject ORDER BY a.decided_at) FROM approvals a
                   WHERE a.proposal_id = s.proposal_id AND a.stage = s.stage AND a.decision = 'approve'), '{}')"
    } else {
        "'{}'::text[]"
    };
    let rows = c
        .query(
            &format!(
                "SELECT s.proposal_id, s.stage, s.of_stages, s.approvers, s.required, s.within_secs, s.on_timeout,
                        s.opened_at, s.due_at, s.completed_at, s.timed_out_at,
                        extract(epoch FROM s.due_at - now())::float8 AS left_secs,
                        {approved_by} AS approved_by
                 FROM approval_stages s WHERE s.proposal_id = ANY($1) ORDER BY s.proposal_id, s.stage"
            ),
            &[&ids],
        )
        .await?;
    let mut out: std::collections::HashMap<Uuid, Vec<Stage>> = std::collections::HashMap::new();
    for r in &rows {
        let stage = Stage {
            stage: r.try_get("stage")?,
            of: r.try_get("of_stages")?,
            approvers: r.try_get("approvers")?,
            required: r.try_get("required")?,
            within_secs: r.try_get("within_secs")?,
            on_timeout: r.try_get("on_timeout")?,
            opened_at: r.try_get("opened_at")?,
            due_at: r.try_get("due_at")?,
            completed_at: r.try_get("completed_at")?,
            timed_out_at: r.try_get("timed_out_at")?,
            left_secs: r.try_get("left_secs")?,
            approved_by: r.try_get("approved_by")?,
        };
        out.entry(r.try_get("proposal_id")?)
            .or_default()
            .push(stage);
    }
    Ok(out)
}

/// The stages of several proposals (queue pages), in one statement whatever their number, in
/// the tenants `tenants`; proposals without stages are absent from the map.
pub async fn of_proposals(
    db: &Db,
    tenants: &[String],
    ids: &[Uuid],
) -> Result<std::collections::HashMap<Uuid, Vec<Stage>>> {
    if ids.is_empty() {
        return Ok(std::collections::HashMap::new());
    }
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    crate::set_tenants(&tx, tenants).await?;
    let out = of_proposals_in(&tx, ids).await?;
    tx.commit().await?;
    Ok(out)
}

/// [`of_proposals`] in the caller's transaction (RLS applies: it must see the tenants): one
/// statement for all of `ids`, with who approved in each stage.
pub async fn of_proposals_in<C: GenericClient>(
    c: &C,
    ids: &[Uuid],
) -> Result<std::collections::HashMap<Uuid, Vec<Stage>>> {
    read_many(c, ids, true).await
}

/// Writes the stages of a proposal policy just escalated (those of `staged` that apply to its
/// params; none when none applies), in the caller's transaction; stage 1 opens now (the
/// trigger sets its times). The `approval.stage_opened` event is written with it.
pub async fn open<C: GenericClient>(
    c: &C,
    p: &ProposalRow,
    staged: &StagedApprovals,
) -> Result<()> {
    let params: serde_json::Value =
        serde_json::from_str(&p.params_json).unwrap_or(serde_json::Value::Null);
    let stages = staged.applicable(&params);
    if stages.is_empty() {
        return Ok(());
    }
    let of = stages.len() as i32;
    let (mut nums, mut groups, mut required, mut within) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (i, s) in stages.iter().enumerate() {
        nums.push(i as i32 + 1);
        groups.push(s.approvers.as_str());
        required.push(s.required as i32);
        within.push(s.within.as_secs_f64());
    }
    c.execute(
        "INSERT INTO approval_stages (proposal_id, tenant_id, stage, of_stages, approvers, required, within_secs, on_timeout)
         SELECT $1, $2, u.stage, $3, u.approvers, u.required, u.within, $4
         FROM unnest($5::int4[], $6::text[], $7::int4[], $8::float8[]) AS u(stage, approvers, required, within)",
        &[&p.id, &p.tenant_id, &of, &staged.on_timeout.as_str(), &nums, &groups, &required, &within],
    )
    .await?;
    let first = read(c, p.id, false).await?;
    if let Some(s) = first.first() {
        write_opened(c, p, s, "policy", None).await?;
    }
    Ok(())
}

/// The `approval.stage_opened` event of `s` (`after`: why, when it is not the escalation).
async fn write_opened<C: GenericClient>(
    c: &C,
    p: &ProposalRow,
    s: &Stage,
    actor: &str,
    after: Option<&str>,
) -> Result<()> {
    audit::write(
        c,
        &p.event(
            AuditKind::ApprovalStageOpened,
            actor,
            json!({"stage": s.stage, "of": s.of, "approvers": s.approvers, "required": s.required,
                   "within_secs": s.within_secs, "due_at": s.due_at, "after": after}),
        ),
    )
    .await?;
    Ok(())
}

/// Opens stage `next` (the one after a completed or timed-out stage) now, with its event;
/// returns it as stored.
pub async fn open_next<C: GenericClient>(
    c: &C,
    p: &ProposalRow,
    next: i32,
    actor: &str,
    after: &str,
) -> Result<Stage> {
    c.execute(
        "UPDATE approval_stages SET opened_at = now() WHERE proposal_id = $1 AND stage = $2 AND opened_at IS NULL",
        &[&p.id, &next],
    )
    .await?;
    let s = read(c, p.id, false)
        .await?
        .into_iter()
        .find(|s| s.stage == next)
        .ok_or(crate::StoreError::NotFound("approval stage"))?;
    write_opened(c, p, &s, actor, Some(after)).await?;
    Ok(s)
}

/// Marks open stage `s` complete (the trigger checks its approvals), with its event.
pub async fn complete<C: GenericClient>(
    c: &C,
    p: &ProposalRow,
    s: &Stage,
    subjects: &[String],
    actor: &str,
) -> Result<()> {
    c.execute(
        "UPDATE approval_stages SET completed_at = now() WHERE proposal_id = $1 AND stage = $2",
        &[&p.id, &s.stage],
    )
    .await?;
    audit::write(
        c,
        &p.event(
            AuditKind::ApprovalStageCompleted,
            actor,
            json!({"stage": s.stage, "of": s.of, "approvers": s.approvers, "subjects": subjects}),
        ),
    )
    .await?;
    Ok(())
}

/// What a timed-out stage led to.
#[derive(Debug, Clone, PartialEq)]
pub enum TimedOut {
    /// The next stage opened (its group will be notified).
    Rerouted(Stage),
    /// The proposal expired (`on_timeout: expire`, or the last stage).
    Expired,
    /// Someone else already moved it on (nothing done).
    AlreadyMoved,
}

impl TimedOut {
    /// In words, for a person: "it went to stage 2 (finance)", "the request expired".
    pub fn describe(&self) -> String {
        match self {
            Self::Rerouted(s) => format!("it went to stage {} ({})", s.stage, s.approvers),
            Self::Expired => "the request expired; nothing will run".into(),
            Self::AlreadyMoved => "it was already moved on".into(),
        }
    }
}

/// Times out overdue open stage `s` of escalated proposal `p` (locked by the caller): re-routes
/// to the next stage (`on_timeout: next` and a stage follows) or expires the proposal, each
/// with its events. A stage that is not overdue by the database clock, or was moved on already,
/// changes nothing ([`TimedOut::AlreadyMoved`]).
pub async fn time_out<C: GenericClient>(
    c: &C,
    p: &ProposalRow,
    s: &Stage,
    actor: &str,
) -> Result<TimedOut> {
    let n = c
        .execute(
            "UPDATE approval_stages SET timed_out_at = now()
             WHERE proposal_id = $1 AND stage = $2 AND opened_at IS NOT NULL AND completed_at IS NULL
               AND timed_out_at IS NULL AND now() > due_at",
            &[&p.id, &s.stage],
        )
        .await?;
    if n == 0 {
        return Ok(TimedOut::AlreadyMoved);
    }
    let reroute = s.on_timeout == "next" && s.stage < s.of;
    audit::write(
        c,
        &p.event(
            AuditKind::ApprovalStageTimedOut,
            actor,
            json!({"stage": s.stage, "of": s.of, "approvers": s.approvers, "due_at": s.due_at,
                   "required": s.required,
                   "then": if reroute { "rerouted" } else { "expired" }}),
        ),
    )
    .await?;
    if reroute {
        let after = format!("stage {} ({}) timed out", s.stage, s.approvers);
        let next = open_next(c, p, s.stage + 1, actor, &after).await?;
        return Ok(TimedOut::Rerouted(next));
    }
    let reason = format!(
        "stage {} of {} ({}) did not decide within its time",
        s.stage, s.of, s.approvers
    );
    c.execute(
        "UPDATE proposals SET state = 'expired', decision_reason = $2 WHERE id = $1 AND state = 'escalated'",
        &[&p.id, &reason],
    )
    .await?;
    audit::write(
        c,
        &p.event(
            AuditKind::ProposalExpired,
            actor,
            json!({"found_by": "stage", "stage": s.stage, "approvers": s.approvers}),
        )
        .transition(Some(ProposalState::Escalated), ProposalState::Expired),
    )
    .await?;
    Ok(TimedOut::Expired)
}

/// The policy sweep: moves on up to `limit` overdue stages of escalated proposals, each in its
/// own short transaction with the proposal row locked `FOR UPDATE SKIP LOCKED` (a decision or
/// another replica holding it is skipped; [`time_out`]'s conditional update makes a repeat a
/// no-op). Returns what happened to each.
pub async fn sweep(db: &Db, limit: i64) -> Result<Vec<(Uuid, String, TimedOut)>> {
    let mut out = Vec::new();
    let c = db.client().await?;
    let due: Vec<Uuid> = c
        .query(
            "SELECT s.proposal_id FROM proposals p JOIN approval_stages s ON s.proposal_id = p.id
             WHERE p.state = 'escalated' AND s.opened_at IS NOT NULL AND s.completed_at IS NULL
               AND s.timed_out_at IS NULL AND s.due_at < now()
               AND NOT EXISTS (SELECT 1 FROM tenant_moves m WHERE m.tenant_id = p.tenant_id)
             ORDER BY s.due_at LIMIT $1",
            &[&limit],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    drop(c);
    for id in due {
        let mut c = db.client().await?;
        let tx = c.transaction().await?;
        let row = tx
            .query_opt(
                &format!(
                    "SELECT {PROPOSAL_COLUMNS} FROM proposals p JOIN agents a ON a.id = p.agent_id
                     WHERE p.id = $1 AND p.state = 'escalated' FOR UPDATE OF p SKIP LOCKED"
                ),
                &[&id],
            )
            .await?;
        let Some(row) = row else {
            tx.commit().await?;
            continue;
        };
        let p = ProposalRow::from_row(&row)?;
        let stages = read(&tx, id, false).await?;
        if let Some(s) = open_stage(&stages).filter(|s| s.is_overdue()) {
            let what = time_out(&tx, &p, s, "policy").await?;
            out.push((id, p.tenant_id.clone(), what));
        }
        tx.commit().await?;
    }
    Ok(out)
}
