//! Decisions by people: the approval app and the break-glass CLI share this one path, so both
//! issue grants the same way (DESIGN.md, "web" and "break-glass CLI").
//!
//! Rules enforced here, in the decision's transaction with the proposal row locked:
//! - only `escalated` proposals can be decided; a second decision learns who decided and when;
//! - the decision names the intent hash (prefix, ≥ 8 hex characters) and, from the web, the
//!   document version that were displayed; anything else is refused as stale;
//! - the agent's recorded owner can never approve its proposals;
//! - `approvals_required: N` means N distinct (issuer, subject); one deny is final;
//! - an approval that completes the count issues the grant with the caller's key.

use crate::proposals::{PROPOSAL_COLUMNS, ProposalRow};
use crate::{Db, Result, StoreError, audit, grants, set_tenant, tenants};
use actiond_core::audit::AuditKind;
use actiond_core::grant::GrantSigner;
use actiond_core::handlers::HandlerKind;
use actiond_core::state::ProposalState;
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

/// Approve or deny.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Approve.
    Approve,
    /// Deny.
    Deny,
}

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
    let shown_intent = shown_intent.trim().to_ascii_lowercase();
    if shown_intent.len() < 8 || !shown_intent.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(StoreError::Conflict(
            "the intent hash shown must be given (at least 8 hex characters)".into(),
        ));
    }
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    set_tenant(&tx, tenant).await?;
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
    let ProposalRow {
        state,
        intent_hash,
        doc_version,
        agent_owner: owner,
        action,
        params_sha256,
        ..
    } = ProposalRow::from_row(&row)?;
    if state != ProposalState::Escalated {
        let last = tx
            .query_opt(
                "SELECT subject, decided_at FROM approvals WHERE proposal_id = $1 ORDER BY decided_at DESC LIMIT 1",
                &[&id],
            )
            .await?;
        tx.commit().await?;
        return Ok(Decided::AlreadyDecided {
            state,
            by: last.as_ref().map(|r| r.get(0)),
            at: last.as_ref().map(|r| r.get(1)),
        });
    }
    if !intent_hash.starts_with(&shown_intent) {
        return Err(StoreError::Conflict(
            "the proposal shown is not this proposal's current intent; reload it and decide again"
                .into(),
        ));
    }
    if let Some(v) = shown_doc_version
        && Some(v) != doc_version
    {
        return Err(StoreError::Conflict(
            "the policy version shown is not the one that escalated it; reload".into(),
        ));
    }
    if owner.as_deref() == Some(approver.subject.as_str()) && verdict == Verdict::Approve {
        return Err(StoreError::Conflict(
            "you own the agent that proposed this; someone else must approve it".into(),
        ));
    }
    let doc_version =
        doc_version.ok_or_else(|| StoreError::Conflict("proposal has no policy version".into()))?;
    let doc = tenants::version(&tx, tenant, doc_version)
        .await?
        .ok_or(StoreError::NotFound("tenant document"))?
        .parse()?;
    let handler = doc
        .handler(&action)
        .ok_or_else(|| StoreError::Conflict(format!("no handler for {action}")))?;
    let decision = match verdict {
        Verdict::Approve => "approve",
        Verdict::Deny => "deny",
    };
    // `--as` on the break-glass CLI is self-asserted: one operator could claim several
    // subjects. So break-glass supplies at most one of the N approvals; the others must come
    // through SSO.
    if approver.channel == "breakglass" && verdict == Verdict::Approve {
        let prior: i64 = tx
            .query_one(
                "SELECT count(*) FROM approvals WHERE proposal_id = $1 AND channel = 'breakglass' AND decision = 'approve'",
                &[&id],
            )
            .await?
            .get(0);
        if prior > 0 {
            return Err(StoreError::Conflict(
                "break-glass can supply only one approval per proposal; the others must come from the approval web app".into(),
            ));
        }
    }
    let inserted = tx
        .execute(
            "INSERT INTO approvals (proposal_id, tenant_id, issuer, subject, email, decision, comment, intent_hash, doc_version, channel)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING",
            &[&id, &tenant, &approver.issuer, &approver.subject, &approver.email, &decision, &comment, &intent_hash, &doc_version, &approver.channel],
        )
        .await?;
    if inserted == 0 {
        return Err(StoreError::Conflict(
            "you already decided on this proposal".into(),
        ));
    }
    let actor = format!(
        "{}:{}",
        if approver.channel == "web" {
            "approver"
        } else {
            "operator"
        },
        approver.subject
    );
    let who = json!({"issuer": approver.issuer, "subject": approver.subject, "email": approver.email, "channel": approver.channel});
    let (to_state, outcome, grant_id) = match verdict {
        Verdict::Deny => {
            let reason = comment
                .filter(|c| !c.trim().is_empty())
                .unwrap_or("denied by an approver");
            tx.execute(
                "UPDATE proposals SET state = 'denied', decision_reason = $2 WHERE id = $1",
                &[&id, &reason],
            )
            .await?;
            (ProposalState::Denied, Decided::Denied, None)
        }
        Verdict::Approve => {
            let have: i64 = tx
                .query_one("SELECT count(*) FROM approvals WHERE proposal_id = $1 AND decision = 'approve'", &[&id])
                .await?
                .get(0);
            let need = i64::from(handler.approvals_required);
            if have < need {
                audit::write(
                    &tx,
                    &audit::Event::new(
                        tenant,
                        Some(id),
                        AuditKind::ApprovalRecorded,
                        &actor,
                        json!({"approver": who, "have": have, "need": need}),
                    )
                    .hashes(&intent_hash, &params_sha256),
                )
                .await?;
                tx.commit().await?;
                return Ok(Decided::NeedsMore { have, need });
            }
            let subjects: Vec<String> = tx
                .query("SELECT subject FROM approvals WHERE proposal_id = $1 AND decision = 'approve' ORDER BY decided_at", &[&id])
                .await?
                .iter()
                .map(|r| r.get(0))
                .collect();
            let claims = grants::issue(
                &tx,
                signer,
                &grants::GrantRequest {
                    proposal_id: id,
                    tenant_id: tenant,
                    intent_hash: &intent_hash,
                    doc_version,
                    lifetime: handler.grant_lifetime,
                },
                &subjects.join(","),
            )
            .await?;
            let reason = comment
                .filter(|c| !c.trim().is_empty())
                .unwrap_or("approved by an approver");
            tx.execute(
                "UPDATE proposals SET state = 'approved', decision_reason = $2 WHERE id = $1",
                &[&id, &reason],
            )
            .await?;
            (
                ProposalState::Approved,
                Decided::Approved {
                    grant_id: claims.id,
                },
                Some(claims.id),
            )
        }
    };
    let kind = if approver.channel == "breakglass" {
        AuditKind::ApprovalBreakglass
    } else {
        AuditKind::ApprovalDecided
    };
    audit::write(
        &tx,
        &audit::Event::new(
            tenant,
            Some(id),
            kind,
            &actor,
            json!({"approver": who, "decision": decision, "comment": comment, "grant_id": grant_id, "key_id": grant_id.map(|_| signer.key_id())}),
        )
        .transition(Some(ProposalState::Escalated), to_state)
        .hashes(&intent_hash, &params_sha256),
    )
    .await?;
    tx.commit().await?;
    let _ = HandlerKind::lookup(&action);
    Ok(outcome)
}
