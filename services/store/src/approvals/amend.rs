//! Approve with an edit ([`amend`]): the person's edit becomes a new proposal in the agent's
//! name, linked to the original, that policy evaluates like any submission; the original ends
//! `amended`. The person's edit counts as their approval of the new intent through
//! [`super::decide`] itself, once policy escalated it — never when policy blocks it, and with
//! every rule a decision has (N-of-M, stages, passkey, re-typed values, the agent's owner).

use super::{
    Approver, Decided, Deciding, Shown, already_decided, check, current_document, expire, lock,
    write_refused,
};
use crate::proposals::{PROPOSAL_COLUMNS, ProposalRow};
use crate::{Db, Result, StoreError, audit, set_tenant};
use actiond_core::FieldErrors;
use actiond_core::amend::Amendment;
use actiond_core::approval::{ApprovalRefusal, Verdict};
use actiond_core::audit::AuditKind;
use actiond_core::canonical::{canonicalize, sha256_hex};
use actiond_core::grant::GrantSigner;
use actiond_core::intent::Intent;
use actiond_core::state::ProposalState;
use serde_json::{Value, json};
use std::time::Duration;
use uuid::Uuid;

/// How long [`amend`] waits for the policy worker to evaluate the new proposal before it
/// answers without the person's approval (they approve it on its page then).
pub const POLICY_WAIT: Duration = Duration::from_secs(10);

/// What [`amend`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Amended {
    /// The original is `amended`; the new proposal was filed and evaluated (or not yet).
    Filed(Filed),
    /// The original is no longer `escalated` (409): its state and who decided it last.
    AlreadyDecided {
        /// Current state.
        state: ProposalState,
        /// Subject of the last decision.
        by: Option<String>,
    },
    /// A decision rule refused the person (audited; nothing changed, except an expiry).
    Refused(ApprovalRefusal),
    /// The edit broke a rule: each error names `params.<field>` (or `edits`) and the rule.
    Invalid(FieldErrors),
}

/// The new proposal of an amendment.
#[derive(Debug, Clone, PartialEq)]
pub struct Filed {
    /// Its id.
    pub id: Uuid,
    /// Its intent hash.
    pub intent_hash: String,
    /// The field-by-field change, `[{"field", "from", "to"}, …]`.
    pub diff: Value,
    /// Its state when [`amend`] answered: `pending` when policy did not evaluate it within
    /// [`POLICY_WAIT`], else what policy (and the person's approval) made of it.
    pub state: ProposalState,
    /// The person's approval of the new intent, when policy escalated it: what
    /// [`super::decide`] answered (`None`: policy allowed or blocked it, or has not decided).
    pub approval: Option<Decided>,
}

/// The amendment links of a proposal: the one it amends and the one that amended it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Links {
    /// The proposal this one amends (`amended_from`).
    pub amended_from: Option<Uuid>,
    /// Who amended (`approver:<sub>` or `operator:<sub>`), on the new proposal.
    pub amended_by: Option<String>,
    /// The diff, on the new proposal.
    pub diff: Option<Value>,
    /// The proposal that amends this one, with its current state.
    pub amended_to: Option<(Uuid, ProposalState)>,
    /// On an amended original: who amended it and the diff (read from the new proposal).
    pub amended_to_by: Option<String>,
    /// On an amended original: the diff (read from the new proposal).
    pub amended_to_diff: Option<Value>,
}

/// The amendment links of proposal `id` in `tenant` (empty when it has none), read with the
/// tenant set (row-level security).
pub async fn links(db: &Db, tenant: &str, id: Uuid) -> Result<Links> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    set_tenant(&tx, tenant).await?;
    let l = links_on(&tx, id).await?;
    tx.commit().await?;
    Ok(l)
}

async fn links_on(c: &crate::Tx<'_>, id: Uuid) -> Result<Links> {
    let own = c
        .query_opt(
            "SELECT amended_from, amended_by, amendment_diff FROM proposals WHERE id = $1",
            &[&id],
        )
        .await?;
    let to = c
        .query_opt(
            "SELECT id, state, amended_by, amendment_diff FROM proposals WHERE amended_from = $1",
            &[&id],
        )
        .await?;
    let amended_to = match &to {
        Some(r) => {
            let s: String = r.try_get("state")?;
            Some((
                r.try_get("id")?,
                s.parse()
                    .map_err(|e| StoreError::Config(format!("the database holds an {e}")))?,
            ))
        }
        None => None,
    };
    Ok(Links {
        amended_from: own.as_ref().and_then(|r| r.get("amended_from")),
        amended_by: own.as_ref().and_then(|r| r.get("amended_by")),
        diff: own.as_ref().and_then(|r| r.get("amendment_diff")),
        amended_to,
        amended_to_by: to.as_ref().map(|r| r.get("amended_by")),
        amended_to_diff: to.as_ref().map(|r| r.get("amendment_diff")),
    })
}

/// One line for people and agents: `amount 12000 → 8000; reason (none) → duplicate`.
pub fn describe_diff(diff: &Value) -> String {
    let show = |v: &Value| match v {
        Value::Null => "(none)".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    diff.as_array()
        .map(|a| {
            a.iter()
                .map(|c| {
                    format!(
                        "{} {} → {}",
                        show(&c["field"]),
                        show(&c["from"]),
                        show(&c["to"])
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        })
        .unwrap_or_default()
}

/// Approves escalated proposal `id` of `tenant` with an edit: `edits` maps editable params to
/// their new values (`null` removes an optional one).
///
/// In one transaction, with the original locked: it must be `escalated` (else
/// [`Amended::AlreadyDecided`]) and within the escalation TTL; the person must be an approver
/// under the tenant's current document (read after the lock) and pass every rule
/// an Approve of the original passes ([`super::check`]: shown intent and document version,
/// not the agent's owner, not decided before, fresh claims and `reauth_within`, the stage's
/// group, a passkey when approving it needs one), except that the values typed again are
/// compared with the edited params; the edit must pass [`actiond_core::amend::apply`] against
/// the tenant's latest document (as a submission). Then the new proposal is inserted
/// (`pending`, `amended_from`, `amended_by`, `amendment_diff`, canonical params and intent
/// hash computed as at submission) with its `proposal.submitted` event, and the original
/// moves `escalated → amended` with its `proposal.amended` event.
///
/// After the commit the policy worker is woken and, for up to [`POLICY_WAIT`], awaited: when
/// it escalates the new proposal, the person's approval of it is [`super::decide`] with the
/// same person, channel, session and typed values (its refusal — a passkey it needs, say — is
/// reported in [`Filed::approval`], and the person may approve on its page). When policy
/// blocks or allows it, no approval is recorded.
#[expect(
    clippy::too_many_arguments,
    reason = "the decision POST's checks, each a separate input"
)]
pub async fn amend(
    db: &Db,
    signer: &GrantSigner,
    tenant: &str,
    id: Uuid,
    approver: &Approver,
    shown: &Shown<'_>,
    edits: &Value,
    comment: Option<&str>,
) -> Result<Amended> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    set_tenant(&tx, tenant).await?;
    let (version, current) = current_document(&tx, tenant, id).await?;
    let locked = lock(&tx, tenant, id, &current, approver.session).await?;
    if locked.proposal.state != ProposalState::Escalated {
        let out = already_decided(&tx, locked.proposal.state, id).await?;
        tx.commit().await?;
        return Ok(match out {
            Decided::AlreadyDecided { state, by, .. } => Amended::AlreadyDecided { state, by },
            _ => Amended::AlreadyDecided {
                state: locked.proposal.state,
                by: None,
            },
        });
    }
    let original = locked.proposal.clone();
    // The edit, validated as a submission is, against the tenant's latest document.
    let amendment = match prepare(&current, &original, edits) {
        Ok(a) => a,
        Err(e) => {
            tx.commit().await?;
            return Ok(Amended::Invalid(e));
        }
    };
    // The rules of an Approve of the original, with the typed values compared with the edit.
    let mut as_edited = original.clone();
    as_edited.params_json = amendment.params_json.clone();
    let mut d = Deciding {
        tenant,
        id,
        approver,
        verdict: Verdict::Approve,
        comment,
        proposal: as_edited,
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
        d.proposal = original.clone();
        expire(&tx, &d, locked.ttl_at).await?;
        Err(ApprovalRefusal::Expired {
            at: locked.ttl_at.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
        })
    } else {
        check(&tx, &mut d, &current, locked.fresh, shown)
            .await?
            .map(|_| ())
    };
    d.proposal = original.clone();
    if let Err(refusal) = checked {
        if let Some(s) = shown.passkey {
            crate::passkeys::discard_for_refusal(&tx, &s.nonce, approver.person(), id).await?;
        }
        write_refused(&tx, &d, &refusal).await?;
        tx.commit().await?;
        return Ok(Amended::Refused(refusal));
    }
    let (new_id, intent_hash, diff) = file_amendment(
        &tx,
        tenant,
        &original,
        &amendment,
        approver,
        comment,
        d.passkey.as_ref(),
    )
    .await?;
    tx.commit().await?;
    drop(c);
    let _ = crate::listen::notify(db, crate::listen::CHANNEL_PENDING).await;
    let (state, approval) =
        approve_after_policy(db, signer, tenant, new_id, approver, shown, comment).await?;
    Ok(Amended::Filed(Filed {
        id: new_id,
        intent_hash,
        diff,
        state,
        approval,
    }))
}

/// Inserts the amended proposal (`pending`, its own canonical params and intent hash, linked by
/// `amended_from`) with its `proposal.submitted` event, and moves the original `escalated →
/// amended` with its `proposal.amended` event, in the caller's transaction. Returns the new
/// proposal's id, its intent hash and the field-by-field diff.
async fn file_amendment(
    tx: &crate::Tx<'_>,
    tenant: &str,
    original: &ProposalRow,
    amendment: &Amendment,
    approver: &Approver,
    comment: Option<&str>,
    passkey: Option<&crate::passkeys::VerifiedPasskey>,
) -> Result<(Uuid, String, Value)> {
    let id = original.id;
    let new_id = Uuid::now_v7();
    let actor = approver.actor();
    let intent_hash = Intent {
        tenant_id: tenant,
        agent_id: &original.agent_id.to_string(),
        action: &original.action,
        target: &amendment.target,
        params_json: &amendment.params_json,
    }
    .hash();
    let diff = amendment.diff_json();
    let request = canonicalize(&json!({"amended_from": id, "params": amendment.params}))
        .map_err(|e| StoreError::Config(format!("amendment request: {}", e.rule)))?;
    tx.execute(
        "INSERT INTO proposals (id, tenant_id, agent_id, action, target, params_json, params_sha256, intent_hash,
            agent_reason, source_text, session_id, request_sha256, amended_from, amended_by, amendment_diff)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
        &[&new_id, &tenant, &original.agent_id, &original.action, &amendment.target, &amendment.params_json,
          &amendment.params_sha256, &intent_hash, &original.agent_reason, &original.source_text,
          &original.session_id, &sha256_hex(&request), &id, &actor, &diff],
    )
    .await?;
    if let Some(obo) = &original.on_behalf_of {
        tx.execute(
            "INSERT INTO proposal_delegations (proposal_id, tenant_id, on_behalf_of) VALUES ($1, $2, $3)",
            &[&new_id, &tenant, obo],
        )
        .await?;
    }
    // The new params' own facts (an amended email's recipients are new ones to check), read
    // as the api reads them at submission.
    if let Some(kind) = actiond_core::handlers::HandlerKind::lookup(&original.action)
        && let Some(facts) =
            crate::proposals::submission_facts(tx, tenant, kind, &amendment.params).await?
    {
        tx.execute(
            "INSERT INTO proposal_facts (proposal_id, tenant_id, facts) VALUES ($1, $2, $3)",
            &[&new_id, &tenant, &facts],
        )
        .await?;
    }
    let who = approver.audit_json();
    audit::write(
        tx,
        &audit::Event::new(
            tenant,
            Some(new_id),
            AuditKind::ProposalSubmitted,
            &actor,
            json!({"amended_from": id, "diff": diff, "approver": who}),
        )
        .hashes(&intent_hash, &amendment.params_sha256)
        .transition(None, ProposalState::Pending),
    )
    .await?;
    let reason = format!("amended by {}: {}", approver.subject, describe_diff(&diff));
    tx.execute(
        "UPDATE proposals SET state = 'amended', decision_reason = $2 WHERE id = $1",
        &[&id, &reason],
    )
    .await?;
    audit::write(
        tx,
        &original
            .event(
                AuditKind::ProposalAmended,
                &actor,
                json!({"amended_to": new_id, "new_intent_hash": intent_hash, "diff": diff,
                       "approver": who, "comment": comment,
                       "passkey": passkey.map(crate::passkeys::VerifiedPasskey::audit_json)}),
            )
            .transition(Some(ProposalState::Escalated), ProposalState::Amended),
    )
    .await?;
    Ok((new_id, intent_hash, diff))
}

/// The edit applied to `original` under the tenant document `doc` (its handler entry for the
/// action: a proposal whose action the tenant no longer has cannot be amended).
fn prepare(
    doc: &actiond_core::tenant::TenantDocument,
    original: &ProposalRow,
    edits: &Value,
) -> std::result::Result<Amendment, FieldErrors> {
    let Some(entry) = doc.handler(&original.action) else {
        return Err(FieldErrors::one(
            "action",
            format!(
                "no handler for {} in the tenant's document",
                original.action
            ),
        ));
    };
    let params: Value = serde_json::from_str(&original.params_json).unwrap_or(Value::Null);
    actiond_core::amend::apply(
        entry.kind,
        &entry.settings,
        &params,
        &original.target,
        edits,
    )
}

/// Waits (up to [`POLICY_WAIT`]) for policy to move the new proposal out of `pending`; when it
/// escalated it, records the person's approval through [`super::decide`]. Returns the state
/// after that and the decision.
async fn approve_after_policy(
    db: &Db,
    signer: &GrantSigner,
    tenant: &str,
    id: Uuid,
    approver: &Approver,
    shown: &Shown<'_>,
    comment: Option<&str>,
) -> Result<(ProposalState, Option<Decided>)> {
    let deadline = tokio::time::Instant::now() + POLICY_WAIT;
    let mut pause = Duration::from_millis(20);
    let row = loop {
        let row = read(db, tenant, id).await?;
        if row.state != ProposalState::Pending || tokio::time::Instant::now() >= deadline {
            break row;
        }
        actiond_runtime::clock::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(250));
    };
    if row.state != ProposalState::Escalated {
        return Ok((row.state, None));
    }
    let again = Shown {
        intent: &row.intent_hash,
        doc_version: row.doc_version,
        retyped: shown.retyped,
        seconds_on_page: shown.seconds_on_page,
        // A passkey assertion names one proposal's intent: the one given with the edit was
        // for the original, so an approval of the new intent that needs a passkey is refused
        // here and given on the new proposal's page.
        passkey: None,
        preview: None,
    };
    let decided = super::decide(
        db,
        signer,
        tenant,
        id,
        approver,
        Verdict::Approve,
        &again,
        comment,
    )
    .await?;
    let state = read(db, tenant, id).await?.state;
    Ok((state, Some(decided)))
}

async fn read(db: &Db, tenant: &str, id: Uuid) -> Result<ProposalRow> {
    let mut c = db.client().await?;
    let tx = c.transaction().await?;
    set_tenant(&tx, tenant).await?;
    let q = format!(
        "SELECT {PROPOSAL_COLUMNS} FROM proposals p JOIN agents a ON a.id = p.agent_id WHERE p.id = $1"
    );
    let row = tx
        .query_opt(&q, &[&id])
        .await?
        .ok_or(StoreError::NotFound("proposal"))?;
    let row = ProposalRow::from_row(&row)?;
    tx.commit().await?;
    Ok(row)
}
