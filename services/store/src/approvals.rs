//! Decisions by people: the approval app and the break-glass CLI share this one path, so both
//! issue grants the same way (design, "web" and "break-glass CLI").
//!
//! The rules themselves are pure functions in [`actiond_core::approval`]; this module applies
//! them in the decision's transaction with the proposal row locked:
//! - only `escalated` proposals can be decided; a second decision learns who decided and when;
//! - the decision names the intent hash (prefix, ≥ 8 hex characters) and, from the web, the
//!   document version that were displayed; anything else is refused as stale;
//! - the agent's recorded owner can never approve its proposals;
//! - `approvals_required: N` means N distinct (issuer, subject), at most one of them by
//!   break-glass; one deny is final;
//! - an approval that completes the count issues the grant with the caller's key.

use crate::proposals::{PROPOSAL_COLUMNS, ProposalRow};
use crate::{Db, Result, StoreError, audit, grants, set_tenant, tenants};
use actiond_core::approval::{self as rules, ApprovalRefusal, Tally};
use actiond_core::audit::AuditKind;
use actiond_core::grant::GrantSigner;
use actiond_core::state::ProposalState;
use actiond_core::tenant::HandlerEntry;
use serde_json::json;
use uuid::Uuid;

/// A person deciding.
#[derive(Debug, Clone)]
pub struct Approver {
    /// OIDC issuer (`breakglass` for the CLI).
    pub issuer: String,
    /// Subject (`sub` claim or the CLI's `--as`).
    pub subject: String,
    /// Email, for the audit log only (never used for identity).
    pub email: Option<String>,
    /// `web` or `breakglass`.
    pub channel: &'static str,
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

/// A refused decision as the store's error (the text is safe to show to the person).
fn refused(r: ApprovalRefusal) -> StoreError {
    StoreError::Conflict(r.to_string())
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
}

/// Records a person's decision; see the module doc for the rules. `shown_intent` is the intent
/// hash (or a prefix of at least 8 hex characters) that was displayed; `shown_doc_version` the
/// document version displayed, when the channel shows one.
#[allow(clippy::too_many_arguments)]
pub async fn decide(
    db: &Db,
    signer: &GrantSigner,
    tenant: &str,
    id: Uuid,
    approver: &Approver,
    verdict: Verdict,
    shown_intent: &str,
    shown_doc_version: Option<i32>,
    comment: Option<&str>,
) -> Result<Decided> {
    let shown_intent = rules::shown_intent(shown_intent).map_err(refused)?;
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    set_tenant(&tx, tenant).await?;
    let proposal = lock(&tx, tenant, id).await?;
    if proposal.state != ProposalState::Escalated {
        let out = already_decided(&tx, proposal.state, id).await?;
        tx.commit().await?;
        return Ok(out);
    }
    rules::check_shown(
        &proposal.intent_hash,
        proposal.doc_version,
        &shown_intent,
        shown_doc_version,
    )
    .map_err(refused)?;
    rules::check_not_owner(proposal.agent_owner.as_deref(), &approver.subject, verdict)
        .map_err(refused)?;
    let doc_version = proposal
        .doc_version
        .ok_or_else(|| refused(ApprovalRefusal::NoDocVersion))?;
    let d = Deciding {
        tenant,
        id,
        approver,
        verdict,
        comment,
        proposal,
        doc_version,
    };
    let handler = handler_of(&tx, &d).await?;
    record_approval(&tx, &d).await?;
    let (to_state, outcome) = match verdict {
        Verdict::Deny => deny(&tx, &d).await?,
        Verdict::Approve => approve(&tx, signer, &d, &handler).await?,
    };
    if let Some(to_state) = to_state {
        write_decided(&tx, signer, &d, to_state, &outcome).await?;
    }
    tx.commit().await?;
    Ok(outcome)
}

/// Locks the proposal row for this decision.
async fn lock(tx: &crate::Tx<'_>, tenant: &str, id: Uuid) -> Result<ProposalRow> {
    let row = tx
        .query_opt(
            &format!(
                "SELECT {PROPOSAL_COLUMNS} FROM proposals p JOIN agents a ON a.id = p.agent_id
                 WHERE p.tenant_id = $1 AND p.id = $2 FOR UPDATE OF p"
            ),
            &[&tenant, &id],
        )
        .await?
        .ok_or(StoreError::NotFound("proposal"))?;
    ProposalRow::from_row(&row)
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

/// Stores this person's approval or denial (one per issuer and subject), after the
/// break-glass limit: `--as` on the CLI is self-asserted, so one operator could claim several
/// subjects; break-glass supplies at most one of the N approvals.
async fn record_approval(tx: &crate::Tx<'_>, d: &Deciding<'_>) -> Result<()> {
    let a = d.approver;
    if a.is_breakglass() && d.verdict == Verdict::Approve {
        let prior: i64 = tx
            .query_one(
                "SELECT count(*) FROM approvals WHERE proposal_id = $1 AND channel = 'breakglass' AND decision = 'approve'",
                &[&d.id],
            )
            .await?
            .get(0);
        rules::check_breakglass(true, d.verdict, prior).map_err(refused)?;
    }
    let inserted = tx
        .execute(
            "INSERT INTO approvals (proposal_id, tenant_id, issuer, subject, email, decision, comment, intent_hash, doc_version, channel)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING",
            &[&d.id, &d.tenant, &a.issuer, &a.subject, &a.email, &d.verdict.as_str(), &d.comment, &d.proposal.intent_hash, &d.doc_version, &a.channel],
        )
        .await?;
    if inserted == 0 {
        return Err(StoreError::Conflict(
            "you already decided on this proposal".into(),
        ));
    }
    Ok(())
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

/// Counts the distinct approvals; when they complete the tally, issues the grant and moves the
/// proposal to `approved`. When more people must approve, writes an `approval.recorded` event
/// and returns no new state.
async fn approve(
    tx: &crate::Tx<'_>,
    signer: &GrantSigner,
    d: &Deciding<'_>,
    handler: &HandlerEntry,
) -> Result<(Option<ProposalState>, Decided)> {
    let have: i64 = tx
        .query_one(
            "SELECT count(*) FROM approvals WHERE proposal_id = $1 AND decision = 'approve'",
            &[&d.id],
        )
        .await?
        .get(0);
    if let Tally::NeedsMore { have, need } = rules::tally(have, handler.approvals_required) {
        let actor = d.approver.actor();
        audit::write(
            tx,
            &d.proposal.event(
                AuditKind::ApprovalRecorded,
                &actor,
                json!({"approver": d.approver.audit_json(), "have": have, "need": need}),
            ),
        )
        .await?;
        return Ok((None, Decided::NeedsMore { have, need }));
    }
    let subjects: Vec<String> = tx
        .query(
            "SELECT subject FROM approvals WHERE proposal_id = $1 AND decision = 'approve' ORDER BY decided_at",
            &[&d.id],
        )
        .await?
        .iter()
        .map(|r| r.get("subject"))
        .collect();
    let claims = grants::issue(
        tx,
        signer,
        &grants::GrantRequest {
            proposal_id: d.id,
            tenant_id: d.tenant,
            intent_hash: &d.proposal.intent_hash,
            doc_version: d.doc_version,
            lifetime: handler.grant_lifetime,
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

/// The audit event of a final decision (`escalated → approved | denied`).
async fn write_decided(
    tx: &crate::Tx<'_>,
    signer: &GrantSigner,
    d: &Deciding<'_>,
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
