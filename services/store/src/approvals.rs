//! Decisions by people: the approval app and the break-glass CLI share this one path, so both
//! issue grants the same way (design, "web" and "break-glass CLI").
//!
//! The rules themselves are pure functions in [`actiond_core::approval`]; this module applies
//! them in the decision's transaction with the proposal row locked, measuring every age with
//! the database clock in the locking statement itself:
//! - only `escalated` proposals can be decided; a second decision learns who decided and when;
//! - the person is an approver of the tenant under its current document, read after the
//!   proposal row is locked (a web session's issuer, subject and claims; break-glass by
//!   subject), so a document that removed them while the page was open or the command ran
//!   refuses the decision ([`ApprovalRefusal::NotAnApprover`]);
//! - a decision after the tenant's `escalation_ttl` decides nothing: the proposal becomes
//!   `expired` right there (the policy sweep only tidies up; it is never the guard);
//! - the decision names the intent hash (prefix, ≥ 8 hex characters) and, from the web, the
//!   document version that were displayed; anything else is refused as stale;
//! - the agent's recorded owner can never approve its proposals;
//! - an Approve from the web needs claims younger than `approvers.max_claims_age` and, when the
//!   handler sets `reauth_within`, an `auth_time` that recent and not in the future beyond the
//!   clock skew ([`actiond_core::external_time`]); the handler's `confirm` values
//!   must be typed again and match the stored params;
//! - an Approve the handler (`require_passkey`, `passkey_over`) or the tenant
//!   (`approvers.require_passkey`) signs with a passkey needs a WebAuthn assertion over the
//!   challenge derived from this proposal's intent ([`crate::passkeys`]); break-glass never
//!   has one; the assertion is stored beside the approvals row and hashed into its event;
//! - `approvals_required: N` means N distinct persons (subjects of the tenant's pinned issuer,
//!   whatever the channel), at most one of them by break-glass; one deny is final;
//! - staged proposals (a handler's `approvals: {stages}`, see [`crate::stages`]): an Approve
//!   counts in the open stage only, from a person in that stage's group (web claims; break-glass
//!   cannot approve them), before its due time; an open stage found overdue is moved on by the
//!   decision itself, which then decides nothing; a completed stage opens the next one, and the
//!   last one issues the grant;
//! - an approval that completes the count issues the grant with the caller's key;
//! - every refusal is an `approval.refused` audit event, committed with nothing else changed
//!   (except the expiry above).

pub mod amend;

use crate::proposals::{PROPOSAL_COLUMNS, ProposalRow};
use crate::{Db, Result, StoreError, audit, grants, set_tenant, stages, tenants};
use actiond_core::approval::{self as rules, ApprovalRefusal, Freshness, Retyped, Tally};
use actiond_core::audit::AuditKind;
use actiond_core::grant::GrantSigner;
use actiond_core::state::ProposalState;
use actiond_core::tenant::{HandlerEntry, TenantDocument};
use chrono::{DateTime, Utc};
use serde_json::json;
use uuid::Uuid;

/// A person deciding.
#[derive(Debug, Clone)]
pub struct Approver {
    /// OIDC issuer: the web login's; for break-glass the tenant's pinned issuer, or
    /// `breakglass` when the document pins none (persons are told apart by subject).
    pub issuer: String,
    /// Subject (`sub` claim or the CLI's `--as`).
    pub subject: String,
    /// Email, for the audit log only (never used for identity).
    pub email: Option<String>,
    /// `web` or `breakglass`.
    pub channel: &'static str,
    /// What the web session vouches for and since when; `None` for break-glass.
    pub session: Option<SessionTimes>,
    /// The session's ID-token claims (stage groups are read from the tenant's
    /// `approvers.claim`); `None` for break-glass.
    pub claims: Option<serde_json::Value>,
    /// The issuer whose subjects are persons for a tenant whose document pins none
    /// (`approvers.issuer`): the web app's configured issuer
    /// ([`actiond_core::approval::may_decide`]). `None` for break-glass, which is an approver
    /// by `approvers.subjects` alone.
    pub deployment_issuer: Option<String>,
}

/// When a web session's claims were read (its login) and when the identity provider last
/// authenticated the person (ID-token `auth_time`, if the token had one).
#[derive(Debug, Clone, Copy)]
pub struct SessionTimes {
    /// The login that read the claims.
    pub claims_at: DateTime<Utc>,
    /// ID-token `auth_time`.
    pub auth_time: Option<DateTime<Utc>>,
}

/// What the person was shown and typed: the intent hash (or a prefix of at least 8 hex
/// characters), the document version when the channel shows one, and the values typed again
/// for the handler's `confirm`.
#[derive(Debug, Clone, Copy)]
pub struct Shown<'a> {
    /// Intent hash shown.
    pub intent: &'a str,
    /// Document version shown.
    pub doc_version: Option<i32>,
    /// Values typed again.
    pub retyped: &'a Retyped,
    /// Seconds the decision page was shown before this decision (web, signed stamp verified).
    pub seconds_on_page: Option<f64>,
    /// The passkey assertion submitted with an Approve (web only), checked when the handler
    /// or the tenant requires one ([`crate::passkeys`]).
    pub passkey: Option<&'a crate::passkeys::SubmittedAssertion>,
    /// The SHA-256 of the provider preview the page showed, `""` when it showed none (web);
    /// `None` for a channel that does not show one. When given, it must be the stored one
    /// ([`ApprovalRefusal::StalePreview`]); the grant signs the stored one either way.
    pub preview: Option<&'a str>,
}

pub use actiond_core::approval::Verdict;

/// Result of [`decide`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decided {
    /// Approved; a grant was issued.
    Approved {
        /// The grant id.
        grant_id: Uuid,
    },
    /// Denied; final.
    Denied,
    /// Approval recorded and it completed its stage; the next stage is open now.
    StageComplete {
        /// The stage just completed.
        stage: i32,
        /// How many stages there are.
        of: i32,
        /// The group of the stage that opened.
        next: String,
    },
    /// Approval recorded; more distinct approvers are needed.
    NeedsMore {
        /// Approvals so far.
        have: i64,
        /// Approvals required.
        need: i64,
    },
    /// Already decided: the current state, and the last person who decided, if any.
    AlreadyDecided {
        /// Current state.
        state: ProposalState,
        /// Subject of the last decision.
        by: Option<String>,
        /// When.
        at: Option<chrono::DateTime<chrono::Utc>>,
    },
    /// Refused by a rule (audited; nothing decided). After the escalation TTL
    /// ([`ApprovalRefusal::Expired`]) the proposal is now `expired`.
    Refused(ApprovalRefusal),
}

/// A proposal as an approver sees it (all agent-written fields are untrusted text).
pub type ProposalDetail = ProposalRow;

/// Escalated proposals of the given tenants (all tenants when `None`), oldest first.
pub async fn list_escalated(
    db: &Db,
    tenants: Option<&[String]>,
    limit: i64,
) -> Result<Vec<ProposalDetail>> {
    let c = db.client().await?;
    let q = format!(
        "SELECT {PROPOSAL_COLUMNS} FROM proposals p JOIN agents a ON a.id = p.agent_id
         WHERE p.state = 'escalated' AND ($1::text[] IS NULL OR p.tenant_id = ANY($1)) ORDER BY p.created_at LIMIT $2"
    );
    let t: Option<Vec<String>> = tenants.map(<[String]>::to_vec);
    ProposalRow::from_rows(&c.query(&q, &[&t, &limit]).await?)
}

/// Ids of proposals (any tenant) whose id, as 32 hex digits, starts with `prefix` (lowercase
/// hex, 1 to 32 digits), in id order, at most `limit`: how the CLI resolves an abbreviated id.
/// The search is a range over the primary key, so it costs an index lookup whatever the table's
/// size. A `prefix` that is not lowercase hex finds nothing.
pub async fn ids_with_prefix(db: &Db, prefix: &str, limit: i64) -> Result<Vec<Uuid>> {
    if prefix.is_empty()
        || prefix.len() > 32
        || !prefix
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
    {
        return Ok(Vec::new());
    }
    let pad = |c: char| {
        let mut s = prefix.to_owned();
        s.extend(std::iter::repeat_n(c, 32 - prefix.len()));
        Uuid::parse_str(&s)
    };
    let (Ok(low), Ok(high)) = (pad('0'), pad('f')) else {
        return Ok(Vec::new());
    };
    let c = db.client().await?;
    let rows = c
        .query(
            "SELECT id FROM proposals WHERE id BETWEEN $1 AND $2 ORDER BY id LIMIT $3",
            &[&low, &high, &limit],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// What `actiond approvals list` selects: proposals in `state` (any state when `None`), of the
/// given tenants (all when `None`), of agents named `agent` (in any of those tenants), created
/// at or after `since`, oldest first, at most `limit`.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// Tenants, all when `None`.
    pub tenants: Option<Vec<String>>,
    /// One state, any when `None`.
    pub state: Option<ProposalState>,
    /// An agent name.
    pub agent: Option<String>,
    /// Created at or after.
    pub since: Option<DateTime<Utc>>,
    /// At most this many rows.
    pub limit: i64,
}

/// The proposals `f` selects (see [`ListFilter`]), oldest first.
pub async fn list(db: &Db, f: &ListFilter) -> Result<Vec<ProposalDetail>> {
    let c = db.client().await?;
    let q = format!(
        "SELECT {PROPOSAL_COLUMNS} FROM proposals p JOIN agents a ON a.id = p.agent_id
         WHERE ($1::text IS NULL OR p.state = $1)
           AND ($2::text[] IS NULL OR p.tenant_id = ANY($2))
           AND ($3::text IS NULL OR a.name = $3)
           AND ($4::timestamptz IS NULL OR p.created_at >= $4)
         ORDER BY p.created_at, p.id LIMIT $5"
    );
    let state = f.state.map(|s| s.as_str().to_owned());
    ProposalRow::from_rows(
        &c.query(&q, &[&state, &f.tenants, &f.agent, &f.since, &f.limit])
            .await?,
    )
}

/// One proposal, restricted to the given tenants (all when `None`): another tenant's id is
/// simply not found.
pub async fn get(db: &Db, tenants: Option<&[String]>, id: Uuid) -> Result<Option<ProposalDetail>> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    if let Some(t) = tenants {
        crate::set_tenants(&tx, t).await?;
    }
    let q = format!(
        "SELECT {PROPOSAL_COLUMNS} FROM proposals p JOIN agents a ON a.id = p.agent_id
         WHERE p.id = $2 AND ($1::text[] IS NULL OR p.tenant_id = ANY($1))"
    );
    let t: Option<Vec<String>> = tenants.map(<[String]>::to_vec);
    let row = match tx.query_opt(&q, &[&t, &id]).await? {
        Some(r) => Some(ProposalRow::from_row(&r)?),
        None => None,
    };
    tx.commit().await?;
    Ok(row)
}

impl Approver {
    fn is_breakglass(&self) -> bool {
        self.channel == "breakglass"
    }

    /// `approver:<sub>` from the web, `operator:<sub>` from break-glass.
    fn actor(&self) -> String {
        let role = if self.channel == "web" {
            "approver"
        } else {
            "operator"
        };
        format!("{role}:{}", self.subject)
    }

    fn audit_json(&self) -> serde_json::Value {
        json!({"issuer": self.issuer, "subject": self.subject, "email": self.email, "channel": self.channel})
    }

    fn person(&self) -> crate::passkeys::Person<'_> {
        crate::passkeys::Person {
            issuer: &self.issuer,
            subject: &self.subject,
        }
    }

    /// Whether this person is an approver under `doc`, by the rule the web app and the CLI
    /// apply before they decide: a web login by the pinned issuer, `approvers.subjects` and
    /// `approvers.claim`/`values` ([`actiond_core::approval::may_decide`]); break-glass by
    /// `approvers.subjects` ([`actiond_core::approval::may_decide_by_subject`]). A web
    /// approver without claims or the deployment's issuer is none (fail closed).
    fn is_approver(&self, doc: &TenantDocument) -> bool {
        if self.is_breakglass() {
            return actiond_core::approval::may_decide_by_subject(&doc.approvers, &self.subject);
        }
        match (&self.claims, &self.deployment_issuer) {
            (Some(claims), Some(deployment)) => actiond_core::approval::may_decide(
                &doc.approvers,
                deployment,
                &self.issuer,
                &self.subject,
                claims,
            ),
            _ => false,
        }
    }
}

/// What one call of [`decide`] is deciding, once the proposal is locked and checked.
struct Deciding<'a> {
    tenant: &'a str,
    id: Uuid,
    approver: &'a Approver,
    verdict: Verdict,
    comment: Option<&'a str>,
    proposal: ProposalRow,
    doc_version: i32,
    seconds_on_page: Option<f64>,
    /// The open stage this decision is given in (staged proposals).
    stage: Option<stages::Stage>,
    /// The verified passkey assertion of this Approve, when one was required.
    passkey: Option<crate::passkeys::VerifiedPasskey>,
}

/// The locked proposal with what the database clock says about it in the same statement.
struct Locked {
    proposal: ProposalRow,
    /// `created_at + escalation_ttl`.
    ttl_at: DateTime<Utc>,
    /// `now() > created_at + escalation_ttl`.
    ttl_passed: bool,
    /// Ages of the session's claims and `auth_time` (web only).
    fresh: Option<Freshness>,
}

/// Records a person's decision; see the module doc for the rules. A refusal by a rule is
/// `Ok(Decided::Refused(..))`, audited and committed; `Err` is a database failure (or a
/// proposal, tenant document or handler that does not exist).
#[expect(
    clippy::too_many_arguments,
    reason = "each argument is one fact the decision-time checks read; a struct would only rename them"
)]
pub async fn decide(
    db: &Db,
    signer: &GrantSigner,
    tenant: &str,
    id: Uuid,
    approver: &Approver,
    verdict: Verdict,
    shown: &Shown<'_>,
    comment: Option<&str>,
) -> Result<Decided> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    set_tenant(&tx, tenant).await?;
    if let Some(m) = crate::tenant_move::moved(&tx, tenant).await? {
        return Err(StoreError::Conflict(format!(
            "tenant {tenant} moved to cell {} at {}: decide its proposals there",
            m.moved_to, m.moved_at
        )));
    }
    let (version, current) = current_document(&tx, tenant, id).await?;
    let locked = lock(&tx, tenant, id, &current, approver.session).await?;
    if locked.proposal.state != ProposalState::Escalated {
        let out = already_decided(&tx, locked.proposal.state, id).await?;
        tx.commit().await?;
        return Ok(out);
    }
    let mut d = Deciding {
        tenant,
        id,
        approver,
        verdict,
        comment,
        proposal: locked.proposal,
        doc_version: 0,
        seconds_on_page: shown.seconds_on_page,
        stage: None,
        passkey: None,
    };
    let checked = if !approver.is_approver(&current) {
        Err(ApprovalRefusal::NotAnApprover {
            tenant: tenant.to_owned(),
            version,
        })
    } else if locked.ttl_passed {
        expire(&tx, &d, locked.ttl_at).await?;
        Err(ApprovalRefusal::Expired {
            at: locked.ttl_at.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
        })
    } else {
        check(&tx, &mut d, &current, locked.fresh, shown).await?
    };
    let outcome = match checked {
        Err(refusal) => {
            if let Some(s) = shown.passkey {
                crate::passkeys::discard_for_refusal(&tx, &s.nonce, approver.person(), id).await?;
            }
            write_refused(&tx, &d, &refusal).await?;
            Decided::Refused(refusal)
        }
        Ok(handler) => match record(&tx, signer, &d, &handler).await {
            Err(e) if is_stage_closed(&e) => {
                // The database clock passed the stage's `due_at` between the check above and
                // the insert (V16's trigger): the same refusal as the check's, not an error.
                tx.rollback().await?;
                return stage_closed_at_insert(&mut c, &d).await;
            }
            r => r?,
        },
    };
    tx.commit().await?;
    Ok(outcome)
}

/// Whether `e` is V16's `approvals_in_stage` refusal of an Approve whose stage closed (SQLSTATE
/// 23514, "stage N of proposal … closed at … (within); the approval is refused").
pub fn is_stage_closed(e: &StoreError) -> bool {
    let StoreError::Db(db) = e else {
        return false;
    };
    db.as_db_error().is_some_and(|d| {
        d.code() == &tokio_postgres::error::SqlState::CHECK_VIOLATION
            && d.message().starts_with("stage ")
            && d.message().ends_with("(within); the approval is refused")
    })
}

/// The refusal when the stage-closed rule fired in the database rather than in
/// [`check_stage`]: in a new transaction (the first one was rolled back), with the proposal
/// locked again, the stage is moved on as the check would have (a no-op when the sweep or
/// someone else already did) and the refusal is audited. Decides nothing.
async fn stage_closed_at_insert(c: &mut crate::Client, d: &Deciding<'_>) -> Result<Decided> {
    let Some(open) = d.stage.clone() else {
        return Err(StoreError::Conflict(
            "this staged proposal has no open stage; reload it".into(),
        ));
    };
    let tx = c.transaction().await?;
    set_tenant(&tx, d.tenant).await?;
    let still = tx
        .query_opt(
            "SELECT 1 FROM proposals WHERE id = $1 AND state = 'escalated' FOR UPDATE",
            &[&d.id],
        )
        .await?;
    let then = match still {
        Some(_) => stages::time_out(&tx, &d.proposal, &open, &d.approver.actor()).await?,
        None => stages::TimedOut::AlreadyMoved,
    };
    let refusal = ApprovalRefusal::StageTimedOut {
        stage: open.stage,
        approvers: open.approvers.clone(),
        then: then.describe(),
    };
    write_refused(&tx, d, &refusal).await?;
    tx.commit().await?;
    Ok(Decided::Refused(refusal))
}

/// Records the decision of a checked person and applies it: the approvals row, then a deny or
/// the tally (and grant) of an approve, with the audit event of any state change.
async fn record(
    tx: &crate::Tx<'_>,
    signer: &GrantSigner,
    d: &Deciding<'_>,
    handler: &HandlerEntry,
) -> Result<Decided> {
    let round = record_approval(tx, d).await?;
    let (to_state, outcome) = match d.verdict {
        Verdict::Deny => deny(tx, d).await?,
        Verdict::Approve => approve(tx, signer, d, handler, round).await?,
    };
    if let Some(to_state) = to_state {
        write_decided(tx, signer, d, round, to_state, &outcome).await?;
    }
    Ok(outcome)
}

/// Every rule a person's decision must pass, in order; the handler entry of the escalating
/// document version when all pass. Sets `d.doc_version`.
async fn check(
    tx: &crate::Tx<'_>,
    d: &mut Deciding<'_>,
    current: &TenantDocument,
    fresh: Option<Freshness>,
    shown: &Shown<'_>,
) -> Result<std::result::Result<HandlerEntry, ApprovalRefusal>> {
    let p = &d.proposal;
    let pure = rules::shown_intent(shown.intent)
        .and_then(|s| rules::check_shown(&p.intent_hash, p.doc_version, &s, shown.doc_version))
        .and_then(|()| {
            rules::check_not_owner(p.agent_owner.as_deref(), &d.approver.subject, d.verdict)
        })
        .and_then(|()| p.doc_version.ok_or(ApprovalRefusal::NoDocVersion));
    d.doc_version = match pure {
        Ok(v) => v,
        Err(r) => return Ok(Err(r)),
    };
    let handler = handler_of(tx, d).await?;
    let params: serde_json::Value = serde_json::from_str(&d.proposal.params_json)
        .map_err(|e| StoreError::Config(format!("stored params_json: {e}")))?;
    let staged = handler
        .approvals
        .as_ref()
        .is_some_and(|s| !s.applicable(&params).is_empty());
    // Break-glass can never approve a staged proposal (no claims, no group): say so before
    // asking it to type a value again, which would not help ([`check_stage`] refuses the same).
    if staged && d.verdict == Verdict::Approve && d.approver.claims.is_none() {
        return Ok(Err(ApprovalRefusal::BreakGlassStaged));
    }
    let required = rules::confirm_required(&handler.confirm, handler.confirm_over, &params);
    let pure = rules::check_fresh(
        d.verdict,
        fresh,
        current.approvers.max_claims_age,
        handler.reauth_within,
    )
    .and_then(|()| {
        rules::check_confirm(
            d.verdict,
            &required,
            &params,
            &d.proposal.target,
            shown.retyped,
        )
    });
    if let Err(r) = pure {
        return Ok(Err(r));
    }
    if let Some(seen) = shown.preview
        && d.verdict == Verdict::Approve
        && crate::previews::sha256_for_decision(tx, d.id)
            .await?
            .unwrap_or_default()
            != seen.trim()
    {
        return Ok(Err(ApprovalRefusal::StalePreview));
    }
    if let Err(r) = check_person(tx, d).await? {
        return Ok(Err(r));
    }
    if staged {
        match check_stage(tx, d, &current.approvers.claim).await? {
            Ok(stage) => d.stage = Some(stage),
            Err(r) => return Ok(Err(r)),
        }
    }
    if d.verdict == Verdict::Approve
        && rules::passkey_required(current.approvers.require_passkey, &handler, &params)
    {
        match check_passkey(tx, d, shown.passkey).await? {
            Ok(v) => d.passkey = Some(v),
            Err(r) => return Ok(Err(r)),
        }
    }
    Ok(Ok(handler))
}

/// The stage rules of a staged proposal: its open stage (moved on first when overdue, which
/// refuses this decision), break-glass never approves, and an Approve needs the stage's group
/// in the person's `claim`. The open stage when all pass. A proposal whose stages apply but
/// were never written is refused (fail closed).
async fn check_stage(
    tx: &crate::Tx<'_>,
    d: &Deciding<'_>,
    claim: &str,
) -> Result<std::result::Result<stages::Stage, ApprovalRefusal>> {
    let all = stages::of_proposal(tx, d.id).await?;
    let open = stages::open_stage(&all).cloned().ok_or_else(|| {
        StoreError::Conflict("this staged proposal has no open stage; reload it".into())
    })?;
    if open.is_overdue() {
        let then = stages::time_out(tx, &d.proposal, &open, &d.approver.actor()).await?;
        return Ok(Err(ApprovalRefusal::StageTimedOut {
            stage: open.stage,
            approvers: open.approvers.clone(),
            then: then.describe(),
        }));
    }
    if d.verdict == Verdict::Deny {
        return Ok(Ok(open));
    }
    let Some(claims) = &d.approver.claims else {
        return Ok(Err(ApprovalRefusal::BreakGlassStaged));
    };
    if !rules::in_group(claims, claim, &open.approvers) {
        return Ok(Err(ApprovalRefusal::NotInStage {
            stage: open.stage,
            of: open.of,
            approvers: open.approvers.clone(),
        }));
    }
    Ok(Ok(open))
}

/// The passkey rule of an Approve that needs one: an assertion was given (never by
/// break-glass) and [`crate::passkeys::check_for_approval`] accepts it.
async fn check_passkey(
    tx: &crate::Tx<'_>,
    d: &Deciding<'_>,
    submitted: Option<&crate::passkeys::SubmittedAssertion>,
) -> Result<std::result::Result<crate::passkeys::VerifiedPasskey, ApprovalRefusal>> {
    let Some(s) = submitted.filter(|_| !d.approver.is_breakglass()) else {
        return Ok(Err(ApprovalRefusal::PasskeyRequired));
    };
    let binding = crate::passkeys::ApprovalBinding {
        tenant: d.tenant,
        proposal_id: d.id,
        intent_hash: &d.proposal.intent_hash,
        doc_version: d.doc_version,
    };
    Ok(
        crate::passkeys::check_for_approval(tx, binding, d.approver.person(), s)
            .await?
            .map_err(|e| ApprovalRefusal::PasskeyRefused { why: e.0 }),
    )
}

/// Locks proposal `id` of `tenant` (`FOR UPDATE`), then reads the tenant's current document:
/// its version and the parsed document. In this order, a document applied while this decision
/// waited for the row (behind another decision, a policy sweep or an operator) is the one the
/// decision is checked against, not the one before it. `NotFound` when either is missing.
async fn current_document(
    tx: &crate::Tx<'_>,
    tenant: &str,
    id: Uuid,
) -> Result<(i32, TenantDocument)> {
    tx.query_opt(
        "SELECT 1 FROM proposals WHERE tenant_id = $1 AND id = $2 FOR UPDATE",
        &[&tenant, &id],
    )
    .await?
    .ok_or(StoreError::NotFound("proposal"))?;
    let stored = tenants::latest(tx, tenant)
        .await?
        .ok_or(StoreError::NotFound("tenant document"))?;
    Ok((stored.version, stored.parse()?))
}

/// Locks the proposal row for this decision and, in the same statement, judges the tenant's
/// current `escalation_ttl` and the session's ages by the database clock.
async fn lock(
    tx: &crate::Tx<'_>,
    tenant: &str,
    id: Uuid,
    current: &TenantDocument,
    session: Option<SessionTimes>,
) -> Result<Locked> {
    let ttl = current.policy.escalation_ttl.as_secs_f64();
    let claims_at = session.map(|s| s.claims_at);
    let auth_time = session.and_then(|s| s.auth_time);
    let row = tx
        .query_opt(
            &format!(
                "SELECT {PROPOSAL_COLUMNS},
                        p.created_at + make_interval(secs => $3) AS ttl_at,
                        now() > p.created_at + make_interval(secs => $3) AS ttl_passed,
                        extract(epoch FROM now() - $4::timestamptz)::float8 AS claims_age,
                        extract(epoch FROM now() - $5::timestamptz)::float8 AS auth_age
                 FROM proposals p JOIN agents a ON a.id = p.agent_id
                 WHERE p.tenant_id = $1 AND p.id = $2 FOR UPDATE OF p"
            ),
            &[&tenant, &id, &ttl, &claims_at, &auth_time],
        )
        .await?
        .ok_or(StoreError::NotFound("proposal"))?;
    let claims_age: Option<f64> = row.try_get("claims_age")?;
    Ok(Locked {
        proposal: ProposalRow::from_row(&row)?,
        ttl_at: row.try_get("ttl_at")?,
        ttl_passed: row.try_get("ttl_passed")?,
        fresh: claims_age.map(|claims_age| Freshness {
            claims_age,
            auth_age: row.get("auth_age"),
        }),
    })
}

/// The escalation TTL passed before this decision: the proposal expires now, with the
/// `proposal.expired` event (the refusal's own event follows).
async fn expire(tx: &crate::Tx<'_>, d: &Deciding<'_>, ttl_at: DateTime<Utc>) -> Result<()> {
    tx.execute(
        "UPDATE proposals SET state = 'expired', decision_reason = 'nobody decided before the escalation_ttl'
         WHERE id = $1 AND state = 'escalated'",
        &[&d.id],
    )
    .await?;
    let actor = d.approver.actor();
    audit::write(
        tx,
        &d.proposal
            .event(
                AuditKind::ProposalExpired,
                &actor,
                json!({"expired_at": ttl_at, "found_by": "decision", "approver": d.approver.audit_json()}),
            )
            .transition(Some(ProposalState::Escalated), ProposalState::Expired),
    )
    .await?;
    Ok(())
}

/// The `approval.refused` event of a refusal: who, what they tried, and the rule.
async fn write_refused(tx: &crate::Tx<'_>, d: &Deciding<'_>, r: &ApprovalRefusal) -> Result<()> {
    let actor = d.approver.actor();
    audit::write(
        tx,
        &d.proposal.event(
            AuditKind::ApprovalRefused,
            &actor,
            json!({
                "approver": d.approver.audit_json(),
                "decision": d.verdict.as_str(),
                "rule": r.rule(),
                "message": r.to_string(),
            }),
        ),
    )
    .await?;
    Ok(())
}

/// The person-level rules that need the recorded approvals: this subject has not decided
/// before on any channel (a person is a subject of the pinned issuer), and break-glass
/// supplies at most one approval (its `--as` is self-asserted).
async fn check_person(
    tx: &crate::Tx<'_>,
    d: &Deciding<'_>,
) -> Result<std::result::Result<(), ApprovalRefusal>> {
    let row = tx
        .query_one(
            "SELECT count(*) FILTER (WHERE subject = $2) AS mine,
                    count(*) FILTER (WHERE channel = 'breakglass' AND decision = 'approve') AS breakglass
             FROM approvals WHERE proposal_id = $1 AND round = (SELECT approval_round FROM proposals WHERE id = $1)",
            &[&d.id, &d.approver.subject],
        )
        .await?;
    let mine: i64 = row.try_get("mine")?;
    if mine > 0 {
        return Ok(Err(ApprovalRefusal::SamePerson {
            subject: d.approver.subject.clone(),
        }));
    }
    Ok(rules::check_breakglass(
        d.approver.is_breakglass(),
        d.verdict,
        row.try_get("breakglass")?,
    ))
}

/// The answer for a proposal that is no longer `escalated`: its state and the last person who
/// decided it.
async fn already_decided(tx: &crate::Tx<'_>, state: ProposalState, id: Uuid) -> Result<Decided> {
    let last = tx
        .query_opt(
            "SELECT subject, decided_at FROM approvals WHERE proposal_id = $1 ORDER BY decided_at DESC LIMIT 1",
            &[&id],
        )
        .await?;
    Ok(Decided::AlreadyDecided {
        state,
        by: last.as_ref().map(|r| r.get("subject")),
        at: last.as_ref().map(|r| r.get("decided_at")),
    })
}

/// The handler entry of the document version that escalated the proposal.
async fn handler_of(tx: &crate::Tx<'_>, d: &Deciding<'_>) -> Result<HandlerEntry> {
    let doc = tenants::version(tx, d.tenant, d.doc_version)
        .await?
        .ok_or(StoreError::NotFound("tenant document"))?
        .parse()?;
    let action = &d.proposal.action;
    doc.handler(action)
        .cloned()
        .ok_or_else(|| StoreError::Conflict(format!("no handler for {action}")))
}

/// Stores this person's approval or denial (the rules in [`check_person`] already passed with
/// the proposal row locked). Returns the approval round the database stored it in (V45's
/// trigger sets it from the proposal; the passkey evidence gets the same), which the decision's
/// audit event records.
async fn record_approval(tx: &crate::Tx<'_>, d: &Deciding<'_>) -> Result<i32> {
    let a = d.approver;
    let round: i32 = tx
        .query_one(
            "INSERT INTO approvals (proposal_id, tenant_id, issuer, subject, email, decision, comment, intent_hash, doc_version, channel, seconds_on_page, stage)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING round",
            &[&d.id, &d.tenant, &a.issuer, &a.subject, &a.email, &d.verdict.as_str(), &d.comment, &d.proposal.intent_hash, &d.doc_version, &a.channel, &d.seconds_on_page, &d.stage.as_ref().map(|s| s.stage)],
        )
        .await?
        .try_get(0)?;
    if let Some(v) = &d.passkey {
        crate::passkeys::store_for_approval(tx, d.tenant, d.id, a.person(), v).await?;
    }
    Ok(round)
}

/// A deny is final: the proposal becomes `denied` with the comment (or a default) as reason.
async fn deny(tx: &crate::Tx<'_>, d: &Deciding<'_>) -> Result<(Option<ProposalState>, Decided)> {
    let reason = d
        .comment
        .filter(|c| !c.trim().is_empty())
        .unwrap_or("denied by an approver");
    tx.execute(
        "UPDATE proposals SET state = 'denied', decision_reason = $2 WHERE id = $1",
        &[&d.id, &reason],
    )
    .await?;
    Ok((Some(ProposalState::Denied), Decided::Denied))
}

/// Counts the distinct approvals (of the open stage, for a staged proposal); when they
/// complete the tally, issues the grant and moves the proposal to `approved` (a stage that is
/// not the last opens the next one instead). When more people must approve, or a stage that is
/// not the last completes, writes an `approval.recorded` event and returns no new state.
async fn approve(
    tx: &crate::Tx<'_>,
    signer: &GrantSigner,
    d: &Deciding<'_>,
    handler: &HandlerEntry,
    round: i32,
) -> Result<(Option<ProposalState>, Decided)> {
    let (have, required): (i64, u32) = match &d.stage {
        Some(s) => (
            tx.query_one(
                "SELECT count(DISTINCT subject) FROM approvals WHERE proposal_id = $1 AND decision = 'approve' AND stage = $2 AND round = (SELECT approval_round FROM proposals WHERE id = $1)",
                &[&d.id, &s.stage],
            )
            .await?
            .get(0),
            s.required.max(1) as u32,
        ),
        None => (
            tx.query_one(
                "SELECT count(DISTINCT subject) FROM approvals WHERE proposal_id = $1 AND decision = 'approve' AND round = (SELECT approval_round FROM proposals WHERE id = $1)",
                &[&d.id],
            )
            .await?
            .get(0),
            handler.approvals_required,
        ),
    };
    if let Tally::NeedsMore { have, need } = rules::tally(have, required) {
        write_recorded(tx, d, round, have, need).await?;
        return Ok((None, Decided::NeedsMore { have, need }));
    }
    if let Some(s) = &d.stage {
        let actor = d.approver.actor();
        if s.stage < s.of {
            // This approval changes no state, so no `approval.decided` event will name it and
            // its passkey evidence: record it as any approval that does not decide.
            write_recorded(tx, d, round, i64::from(required), i64::from(required)).await?;
        }
        let by = stages::of_proposal(tx, d.id)
            .await?
            .into_iter()
            .find(|x| x.stage == s.stage)
            .map(|x| x.approved_by)
            .unwrap_or_default();
        stages::complete(tx, &d.proposal, s, &by, &actor).await?;
        if s.stage < s.of {
            let after = format!("stage {} ({}) completed", s.stage, s.approvers);
            let next = stages::open_next(tx, &d.proposal, s.stage + 1, &actor, &after).await?;
            return Ok((
                None,
                Decided::StageComplete {
                    stage: s.stage,
                    of: s.of,
                    next: next.approvers,
                },
            ));
        }
    }
    let subjects: Vec<String> = tx
        .query(
            "SELECT subject FROM approvals WHERE proposal_id = $1 AND decision = 'approve' AND round = (SELECT approval_round FROM proposals WHERE id = $1)
             ORDER BY decided_at",
            &[&d.id],
        )
        .await?
        .iter()
        .map(|r| r.get("subject"))
        .collect();
    // The preview is written once, so this is the one the checks above compared.
    let preview = crate::previews::sha256_for_decision(tx, d.id).await?;
    let claims = grants::issue(
        tx,
        signer,
        &grants::GrantRequest {
            proposal_id: d.id,
            tenant_id: d.tenant,
            intent_hash: &d.proposal.intent_hash,
            doc_version: d.doc_version,
            lifetime: handler.grant_lifetime,
            preview_sha256: preview.as_deref(),
            // The document policy escalated it under, as policy recorded it: a rewrite of that
            // version after the escalation stops the executor (`document_changed`).
            doc_sha256: d.proposal.doc_sha256.as_deref(),
        },
        &subjects.join(","),
    )
    .await?;
    let reason = d
        .comment
        .filter(|c| !c.trim().is_empty())
        .unwrap_or("approved by an approver");
    tx.execute(
        "UPDATE proposals SET state = 'approved', decision_reason = $2 WHERE id = $1",
        &[&d.id, &reason],
    )
    .await?;
    Ok((
        Some(ProposalState::Approved),
        Decided::Approved {
            grant_id: claims.id,
        },
    ))
}

/// The `approval.recorded` event of an approval that leaves the state as it is (more are
/// needed, or it completed a stage that is not the last): who, the tally of its stage, the
/// approval round it counts in, and the passkey evidence that `actiond audit verify-passkeys`
/// compares with the stored assertion of that round
/// ([`crate::passkeys::verify_all`]).
async fn write_recorded(
    tx: &crate::Tx<'_>,
    d: &Deciding<'_>,
    round: i32,
    have: i64,
    need: i64,
) -> Result<()> {
    let stage = d.stage.as_ref().map(|s| s.stage);
    audit::write(
        tx,
        &d.proposal.event(
            AuditKind::ApprovalRecorded,
            &d.approver.actor(),
            json!({"approver": d.approver.audit_json(), "have": have, "need": need, "stage": stage,
                   "approval_round": round,
                   "passkey": d.passkey.as_ref().map(crate::passkeys::VerifiedPasskey::audit_json)}),
        ),
    )
    .await?;
    Ok(())
}

/// The audit event of a final decision (`escalated → approved | denied`), with the approval
/// round it was made in (the round of its passkey evidence, if any).
async fn write_decided(
    tx: &crate::Tx<'_>,
    signer: &GrantSigner,
    d: &Deciding<'_>,
    round: i32,
    to_state: ProposalState,
    outcome: &Decided,
) -> Result<()> {
    let kind = if d.approver.is_breakglass() {
        AuditKind::ApprovalBreakglass
    } else {
        AuditKind::ApprovalDecided
    };
    let grant_id = match outcome {
        Decided::Approved { grant_id } => Some(*grant_id),
        _ => None,
    };
    let actor = d.approver.actor();
    let detail = json!({
        "approver": d.approver.audit_json(),
        "decision": d.verdict.as_str(),
        "comment": d.comment,
        "grant_id": grant_id,
        "key_id": grant_id.map(|_| signer.key_id()),
        "approval_round": round,
        "passkey": d.passkey.as_ref().map(crate::passkeys::VerifiedPasskey::audit_json),
    });
    audit::write(
        tx,
        &d.proposal
            .event(kind, &actor, detail)
            .transition(Some(ProposalState::Escalated), to_state),
    )
    .await?;
    Ok(())
}
